//! The set-up every task shares, agreed step by step by every rank before
//! the task's own: the digest of the job's options (every rank must run
//! the same job), the NCCL environment warning, the nodes, what a check's
//! profile demands of the launch, the backend, the transport each rank
//! observes (refused where it contradicts the one asked for), each rank's
//! GPU, and the run's identity (`report::RunIdentity`: rank 0's run id
//! and start, the same on every rank). A sweep, a workload or replay, the
//! links matrix and a check each start from the `Prepared` it returns.
//!
//! Must not: print except through `error::say`, or know a task's plan.

use super::backend_choice::HostBackend;
use super::{Session, Task};
use crate::backend::{Backend, TransportQuery};
use crate::error::Error;
use crate::report::RunIdentity;
use crate::topology::Nodes;
use crate::topology::observe::{self, Observed};
use crate::topology::profile::NcclLogging;
use crate::types::{BackendChoice, BackendKind};
use crate::world::World;

/// Longest per-rank text exchanged for the transport observed.
const OBSERVED_BYTES: usize = 512;
/// Longest GPU model name exchanged.
const GPU_MODEL_BYTES: usize = 128;

/// What every task has once the ranks agree on the job.
pub(super) struct Prepared {
    /// Real hosts, or `--ranks-per-node` groups.
    pub nodes: Nodes,
    pub backend: Box<dyn Backend>,
    /// This rank's view of the transport.
    pub observed: Observed,
    /// Every rank's view, merged ("P2P/IPC+NET/IB", ...).
    pub transport_observed: String,
    /// Each rank's view, in rank order.
    pub observed_all: Vec<String>,
    /// Each rank's GPU model ("" where it has none), in rank order.
    pub gpus: Vec<String>,
    pub identity: RunIdentity,
    /// Why `--backend auto` chose the backend: the sweep's header takes
    /// the backend's notes again once its buffers are reserved.
    pub auto_note: Option<String>,
    /// On rank 0, on the NCCL backend with collbench's private logs: every
    /// rank's NCCL set-up lines, in rank order (`doctor::kept`).
    pub nccl_logs: Option<Vec<String>>,
}

impl<W: World> Session<'_, W> {
    /// The shared set-up (module doc); a failure is agreed on and printed
    /// once, but one inside NCCL's collective initialisation, which ends
    /// the whole job (`choose_backend`).
    pub(super) fn prepare(&self, host: Option<HostBackend<'_>>) -> Result<Prepared, Error> {
        let world = self.world;
        self.agreed(crate::engine::digest::check_same_plan(world, &self.cfg.digest))?;
        self.mark("option digest agreed");
        self.warn_on_nccl_environment();
        self.mark("NCCL_* variables compared");
        let nodes = self.agreed(self.nodes())?;
        if let Task::Check(c) = self.task {
            // before any library starts: what the profile demands of the launch
            self.agreed(c.check_env())?;
            self.agreed(c.check_shape(&nodes))?;
        }
        self.mark("nodes");
        let chosen = self.choose_backend(&nodes, host)?;
        let kind = chosen.backend.identity().kind;
        if let Task::Check(c) = self.task {
            self.agreed(c.check_backend(kind, chosen.note.as_deref()))?;
        }
        self.mark("backend (NCCL/CUDA probe, communicator)");
        // before the observation, which removes a log that holds no surprise
        let nccl_logs = self.gather_nccl_logs(kind);
        let observed = self.agreed(self.observe(chosen.backend.as_ref()))?;
        self.mark("transport observed");
        let gpu = chosen
            .backend
            .gpu()
            .map(|g| g.gpu_model())
            .or_else(crate::topology::machine::host_gpu_model);
        self.mark("GPU model");
        let observed_all = world.all_gather_text(&observed.text, OBSERVED_BYTES);
        let gpus = world.all_gather_text(gpu.as_deref().unwrap_or(""), GPU_MODEL_BYTES);
        // why auto chose the backend, and what --algo-record cannot do on it
        let auto_note = backend_note(chosen.note, self.algo_note(kind).into_iter().collect());
        let identity = self.identity(chosen.backend.as_ref(), auto_note.clone());
        self.mark("views gathered, run identity");
        Ok(Prepared {
            nodes,
            backend: chosen.backend,
            observed,
            transport_observed: observe::merge(&observed_all),
            observed_all,
            gpus,
            identity,
            auto_note,
            nccl_logs,
        })
    }

    /// Every rank's NCCL log as NCCL left it after its communicators' set-up,
    /// on rank 0: on the NCCL backend, when every rank's is collbench's
    /// private one (a user's own NCCL_DEBUG_FILE is theirs to read).
    fn gather_nccl_logs(&self, kind: BackendKind) -> Option<Vec<String>> {
        if kind != BackendKind::Nccl {
            return None;
        }
        let mine = match &self.env_plan.nccl_log {
            NcclLogging::Private(path) => std::fs::read_to_string(path).ok(),
            _ => None,
        };
        // every rank takes the same way, whatever its own environment
        if self.world.min_u64(u64::from(mine.is_some())) == 0 {
            return None;
        }
        self.world
            .gather_text_to_root(mine.as_deref().unwrap_or(""), crate::doctor::kept::RANK_LOG_BYTES)
    }

    /// Real hosts, or `--ranks-per-node` groups of consecutive ranks.
    fn nodes(&self) -> Result<Nodes, Error> {
        match self.cfg.plan.ranks_per_node {
            Some(k) => {
                let hosts: Vec<String> = self.world.ranks().iter().map(|r| r.host.clone()).collect();
                Nodes::consecutive(k, &hosts)
            }
            None => Ok(self.world.nodes().clone()),
        }
    }

    /// The transport this rank's backend uses, refused where it
    /// contradicts the one asked for (or the backend `auto` chose cannot
    /// take the transport profile asked for).
    fn observe(&self, backend: &dyn Backend) -> Result<Observed, Error> {
        let identity = backend.identity();
        if self.cfg.start.backend == BackendChoice::Auto {
            self.cfg
                .start
                .transport
                .check_backend(identity.kind, " (the backend auto chose)")?;
        }
        let query = TransportQuery {
            profile: self.cfg.start.transport,
            nccl_log: &self.env_plan.nccl_log,
            hosts: self.world.nodes(),
        };
        let observed = match backend.transport() {
            Some(observer) => observer.observe_transport(&query),
            None => Observed::unknown(format!("the {} backend does not report its transport", identity.kind)),
        };
        observed.check(self.env_plan)?;
        Ok(observed)
    }

    /// The run's identity: rank 0's run id and start, sent to every rank;
    /// the rest from this rank's world and backend (the same everywhere).
    fn identity(&self, backend: &dyn Backend, auto_note: Option<String>) -> RunIdentity {
        let world = self.world;
        let mine = match world.rank() {
            0 => {
                let started = RunIdentity::now();
                let run_id = RunIdentity::run_id(&started, world.host(), std::process::id());
                format!("{run_id}\n{started}")
            }
            _ => String::new(),
        };
        let sent = String::from_utf8_lossy(&world.broadcast_bytes(mine.as_bytes())).into_owned();
        let (run_id, started) = sent.split_once('\n').unwrap_or((&sent, ""));
        let b = backend.identity();
        RunIdentity {
            run_id: run_id.to_string(),
            started: started.to_string(),
            command_line: std::env::args().collect(),
            backend: b.kind,
            backend_version: b.version,
            backend_note: backend_note(auto_note, b.notes),
            control_plane: world.library_version(),
            hosts: world.nodes().hosts.clone(),
            label: self.cfg.outputs.label.clone(),
        }
    }
}

impl<W: World> Session<'_, W> {
    /// `--algo-record` on a backend that runs no NCCL algorithm (the nccl
    /// backend says where its choices come from itself).
    fn algo_note(&self, kind: BackendKind) -> Option<String> {
        (self.cfg.timing.algo_record.explicit() && kind != BackendKind::Nccl)
            .then(|| format!("--algo-record: the {kind} backend runs no NCCL algorithm; the algo columns stay empty"))
    }
}

/// The header's backend note: why `--backend auto` chose the backend, then
/// the backend's own notes (registration, connections), joined.
pub(super) fn backend_note(auto_note: Option<String>, notes: Vec<String>) -> Option<String> {
    let all: Vec<String> = auto_note.into_iter().chain(notes).collect();
    (!all.is_empty()).then(|| all.join("; "))
}
