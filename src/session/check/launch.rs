//! The launch against the profile, checked on every rank before anything
//! is measured: the profile's environment, the launch's shape (nodes,
//! ranks per node), the backend and the memory every check's buffers need.
//! A mismatch is one line naming the profile's file and line (exit 2).

use super::{CheckJob, node_label, pair_rounds};
use crate::check::profile::{BackendNeed, Scope};
use crate::error::Error;
use crate::plan::Reservation;
use crate::topology::Nodes;
use crate::types::{BackendKind, human_bytes};

impl CheckJob {
    /// The profile's variables in this rank's environment.
    pub(in crate::session) fn check_env(&self) -> Result<(), Error> {
        for (name, want) in &self.profile.env {
            let have = std::env::var(name).ok();
            if have.as_deref() != Some(want.value.as_str()) {
                let now = have.map_or("unset".to_string(), |v| format!("'{v}'"));
                return Err(self.profile.error_at(
                    want.line,
                    format!(
                        "the profile's figures were measured with {name}={} and it is {now} here: set it for \
                         every rank (export {name}={}, or mpirun -x {name}={})",
                        want.value, want.value, want.value
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The launch's shape against the profile's.
    pub(in crate::session) fn check_shape(&self, nodes: &Nodes) -> Result<(), Error> {
        let p = &self.profile;
        if let Some(want) = &p.nodes
            && nodes.nnodes() != want.value
        {
            return Err(p.error_at(
                want.line,
                format!(
                    "the profile is for {} nodes; this launch has {} ({})",
                    want.value,
                    nodes.nnodes(),
                    nodes.hosts.join(", ")
                ),
            ));
        }
        for n in 0..nodes.nnodes() {
            let have = nodes.ranks_on(n).len();
            if let Some(want) = &p.ranks_per_node
                && have != want.value
            {
                return Err(p.error_at(
                    want.line,
                    format!(
                        "the profile is for {} ranks per node (one per GPU); {} has {have}",
                        want.value,
                        node_label(nodes, n)
                    ),
                ));
            }
            for c in self.checks.iter().filter(|c| c.scope == Scope::Node) {
                if let Some(want) = &c.ranks
                    && have >= 2
                    && have != want.value
                {
                    return Err(p.error_at(
                        want.line,
                        format!(
                            "check {}'s thresholds are for {} ranks on a node; {} has {have}",
                            c.name,
                            want.value,
                            node_label(nodes, n)
                        ),
                    ));
                }
            }
        }
        self.check_pair_ranks(nodes)?;
        for c in self.checks.iter().filter(|c| c.scope == Scope::Job) {
            if let Some(want) = &c.ranks
                && nodes.nranks() != want.value
            {
                return Err(p.error_at(
                    want.line,
                    format!(
                        "check {}'s thresholds are for {} ranks; this launch has {}",
                        c.name,
                        want.value,
                        nodes.nranks()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Each pair check's rank count against every pair of nodes it runs on.
    fn check_pair_ranks(&self, nodes: &Nodes) -> Result<(), Error> {
        let p = &self.profile;
        for c in self.checks.iter().filter(|c| c.scope == Scope::Pair) {
            for &(a, b) in pair_rounds(nodes.nnodes()).iter().flatten() {
                let have = nodes.ranks_on(a).len() + nodes.ranks_on(b).len();
                if let Some(want) = &c.ranks
                    && have != want.value
                {
                    return Err(p.error_at(
                        want.line,
                        format!(
                            "check {}'s thresholds are for {} ranks on a node pair; {} and {} have {have}",
                            c.name,
                            want.value,
                            node_label(nodes, a),
                            node_label(nodes, b)
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// The chosen backend against the profile's.
    pub(in crate::session) fn check_backend(&self, kind: BackendKind, note: Option<&str>) -> Result<(), Error> {
        let p = &self.profile;
        match p.backend.value {
            BackendNeed::Only(need) if need != kind => {
                let why = note.map(|n| format!(" ({n})")).unwrap_or_default();
                let msg = match need {
                    BackendKind::Nccl => format!(
                        "profile {} is for GPUs (backend = \"nccl\"), but this launch runs on host memory: the {} \
                         backend{why}; run it where every rank has a GPU and libnccl (collbench info)",
                        p.name, kind
                    ),
                    _ => format!(
                        "profile {} is for the {} backend, but this launch runs the {} backend{why}; use --backend {}",
                        p.name,
                        need.name(),
                        kind,
                        need.name()
                    ),
                };
                Err(p.error_at(p.backend.line, msg))
            }
            _ => Ok(()),
        }
    }

    /// Refuses buffers the hosts (or GPUs) cannot hold, naming the size's
    /// line of the check with the largest buffers.
    pub(super) fn check_memory(
        &self,
        reservation: &Reservation,
        ranks_on_host: usize,
        free_device: Option<u64>,
    ) -> Result<(), Error> {
        let Some(largest) = self.checks.iter().max_by_key(|c| c.max_size()) else {
            return Ok(());
        };
        let at = |msg: String| {
            self.profile
                .error_at(largest.sizes.line, format!("check {}: {msg}", largest.name))
        };
        if let Some(free) = free_device {
            if reservation.peak_bytes() > free {
                return Err(at(format!(
                    "{} needs {} of GPU memory per rank, and {} is free",
                    human_bytes(largest.max_size()),
                    human_bytes(reservation.peak_bytes()),
                    human_bytes(free)
                )));
            }
        } else if let Some(available) = crate::topology::machine::available_memory() {
            reservation
                .check_host_memory(ranks_on_host, available, "this launch cannot hold the profile's size")
                .map_err(|e| at(e.to_string()))?;
        }
        Ok(())
    }
}
