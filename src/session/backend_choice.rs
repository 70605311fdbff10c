//! Which data plane a run gets: `--backend mpi`, `nccl`, `memory` (the
//! ranks of `-g N` as threads on host memory), or `auto` (nccl only when
//! every rank has a GPU and libnccl, so that all ranks pick the same).
//! Every failure is agreed on and printed once, but one inside NCCL's
//! collective initialisation, which ends the whole job. The NCCL bootstrap
//! itself is the backend's (`backend::nccl::start`); the host data plane of
//! the control plane (MPI's collectives under MPI, host memory shared by
//! the threads of `-g N`) is made by its starter (`session::launch`).

use super::Session;
use crate::backend::Backend;
use crate::config::RunConfig;
use crate::error::Error;
use crate::topology::Nodes;
use crate::types::{AlgoRecording, AlgoSetup, BackendChoice, BackendKind};
use crate::world::World;

/// The host data plane the control plane offers, and how to make this
/// rank's: the mpi backend over these nodes where the control plane is
/// MPI, the memory backend where the ranks are threads of one process.
#[derive(Clone, Copy)]
pub struct HostBackend<'a> {
    pub kind: BackendKind,
    pub make: MakeBackend<'a>,
}

/// Makes this rank's backend over these nodes.
pub type MakeBackend<'a> = &'a dyn Fn(&Nodes) -> Result<Box<dyn Backend>, Error>;

/// The backend every rank agreed on, and what the header says about it.
pub struct Chosen {
    pub backend: Box<dyn Backend>,
    pub note: Option<String>,
}

impl<W: World> Session<'_, W> {
    /// Picks the data plane over `nodes`; `host` is the control plane's
    /// host data plane, where it has one.
    pub(super) fn choose_backend(&self, nodes: &Nodes, host: Option<HostBackend<'_>>) -> Result<Chosen, Error> {
        let (world, cfg) = (self.world, self.cfg);
        let agreed_host = |note: Option<String>, host: HostBackend<'_>| -> Result<Chosen, Error> {
            let backend = self.agreed((host.make)(nodes))?;
            Ok(Chosen { backend, note })
        };
        let of = |kind: BackendKind| host.filter(|h| h.kind == kind);
        let mpi_backend = of(BackendKind::Mpi);
        let algo_log = (cfg.timing.algo_record.on(BackendKind::Nccl) != AlgoRecording::Off).then(|| AlgoSetup {
            recording: cfg.timing.algo_record,
            log: self.env_plan.tuning_log(),
            plugin: self.env_plan.profiler.clone(),
        });
        let start = |found| match nccl::start(world, cfg, nodes, found, algo_log.clone()) {
            Ok(backend) => Ok(Chosen {
                backend,
                note: (cfg.start.backend == BackendChoice::Auto)
                    .then(|| "auto: every rank has a GPU and NCCL, using nccl".to_string()),
            }),
            Err(e @ Error::Reported(_)) => Err(e),
            // A failure inside the collective initialisation: peers may be
            // waiting inside NCCL, so the whole job ends.
            Err(e) => self.fail(&e),
        };
        match (cfg.start.backend, mpi_backend) {
            (BackendChoice::Only(BackendKind::Mpi), Some(make)) => agreed_host(None, make),
            (BackendChoice::Only(BackendKind::Mpi), None) => self.agreed(Err(Error::usage(
                "the mpi backend needs MPI for its collectives: launch with mpirun or srun --mpi=pmix, without -g (this \
                 launch has no MPI), or use --backend nccl",
            ))),
            (BackendChoice::Only(BackendKind::Nccl), _) => start(None),
            (BackendChoice::Only(BackendKind::Memory), _) => match of(BackendKind::Memory) {
                Some(memory) => agreed_host(
                    Some("ranks are threads of this process, collectives are copies in host memory".into()),
                    memory,
                ),
                None => self.agreed(Err(Error::usage(
                    "--backend memory runs the ranks as threads of one process: use -g N without a launcher \
                     (mpirun, srun), or --backend mpi",
                ))),
            },
            // Without MPI, auto can only be nccl: its own errors say best
            // what is missing.
            (BackendChoice::Auto, None) => start(None),
            // An MPI transport profile asks for the mpi backend.
            (BackendChoice::Auto, Some(make)) if cfg.start.transport.backend() == Some(BackendKind::Mpi) => {
                let why = format!(
                    "auto: --transport {} is an MPI profile, using mpi",
                    cfg.start.transport.name()
                );
                agreed_host(Some(why), make)
            }
            (BackendChoice::Auto, Some(make)) => match nccl::probe(world, cfg) {
                Ok(library) => start(Some(library)),
                Err(why) => agreed_host(Some(format!("auto: {why}, using mpi")), make),
            },
        }
    }
}

/// The NCCL backend's start (`backend::nccl::start`), given what it reads
/// of the configuration.
#[cfg(feature = "nccl")]
pub(super) mod nccl {
    use super::*;
    use crate::backend::nccl::NcclLibrary;
    use crate::backend::nccl::start::{self, StartOptions};

    fn options(cfg: &RunConfig, algo_log: Option<AlgoSetup>) -> StartOptions {
        StartOptions {
            nccl_lib: cfg.start.nccl_lib.clone(),
            hierarchical: cfg.plan.hierarchies_asked().iter().any(|h| !h.is_flat()),
            no_comm_split: cfg.hooks.no_comm_split,
            register: cfg.timing.register,
            phase_times: cfg.timing.phase_times,
            trace_bootstrap: cfg.hooks.trace_bootstrap.clone(),
            algo_log,
        }
    }

    pub fn probe<W: World>(world: &W, cfg: &RunConfig) -> Result<NcclLibrary, Error> {
        start::probe(world, &options(cfg, None))
    }

    /// What NCCL's environment needs for `--algo-record` (TUNING lines,
    /// the plugin to set NCCL_PROFILER_PLUGIN to), before NCCL starts.
    pub fn algo_env(cfg: &RunConfig, env: &dyn Fn(&str) -> Option<String>) -> (bool, Option<std::path::PathBuf>) {
        use crate::backend::nccl::profiler;
        let recording = cfg.timing.algo_record;
        // Without a CUDA driver no NCCL runs here (`auto` takes mpi): the
        // library is not loaded for its version (tens of ms a process).
        if recording == AlgoRecording::Auto && crate::backend::nccl::sys::check_cuda_driver().is_err() {
            return (false, None);
        }
        let version = match recording {
            AlgoRecording::Auto => NcclLibrary::find(cfg.start.nccl_lib.as_deref())
                .ok()
                .map(|l| l.version()),
            _ => None,
        };
        let user = env(crate::topology::profile::PROFILER_VAR).is_some();
        profiler::env_request(recording, version, user, profiler::locate(env))
    }

    /// `algo_log`: `StartOptions::algo_log`.
    pub fn start<W: World>(
        world: &W,
        cfg: &RunConfig,
        nodes: &Nodes,
        found: Option<NcclLibrary>,
        algo_log: Option<AlgoSetup>,
    ) -> Result<Box<dyn Backend>, Error> {
        start::start(world, &options(cfg, algo_log), nodes, found).map(|b| Box::new(b) as Box<dyn Backend>)
    }
}

/// Without the nccl feature: `--backend nccl` is refused, `auto` is mpi.
#[cfg(not(feature = "nccl"))]
pub(super) mod nccl {
    use super::*;

    pub fn probe<W: World>(_world: &W, _cfg: &RunConfig) -> Result<std::convert::Infallible, Error> {
        Err(Error::runtime("this build has no nccl backend"))
    }

    /// No NCCL: nothing to ask of its environment.
    pub fn algo_env(_cfg: &RunConfig, _env: &dyn Fn(&str) -> Option<String>) -> (bool, Option<std::path::PathBuf>) {
        (false, None)
    }

    pub fn start<W: World>(
        world: &W,
        _cfg: &RunConfig,
        _nodes: &Nodes,
        _found: Option<std::convert::Infallible>,
        _algo_log: Option<AlgoSetup>,
    ) -> Result<Box<dyn Backend>, Error> {
        let refused = Err(Error::usage(
            "--backend nccl: this build has no nccl backend; rebuild with the `nccl` feature (on by default)",
        ));
        world.agree(refused).map_err(|d| Error::Reported(d.code))
    }
}
