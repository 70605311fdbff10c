//! NCCL's own device memory: what a communicator takes when NCCL connects
//! its channels, which the memory fit keeps for the communicators made
//! after it (the hierarchical modes' two, sendrecv's from NCCL 2.30, a
//! pinned sweep's), and
//! the header's line on when NCCL connects (docs/gpu.md, "Ranks, GPUs and
//! memory").

use super::{NcclBackend, sys};
use crate::plan::Reservation;
use crate::types::human_bytes;

/// From this release NCCL connects a communicator's channels at their
/// first use unless NCCL_RUNTIME_CONNECT=0 (v2.30.7-1 src/init.cc:1552; the
/// variable appeared in 2.22.3).
const RUNTIME_CONNECT_SINCE: sys::NcclVersion = sys::NcclVersion::new(2, 22, 3);

impl NcclBackend {
    /// Whether NCCL connects every channel as a communicator is made:
    /// before 2.22.3, or with NCCL_RUNTIME_CONNECT=0 (collbench sets it
    /// where it reads NCCL's log for the transport).
    pub(super) fn connects_eagerly(&self) -> bool {
        let off = std::env::var("NCCL_RUNTIME_CONNECT")
            .ok()
            .is_some_and(|v| crate::types::read_c_integer(&v).is_some_and(|(n, _)| n == 0));
        self.library.version() < RUNTIME_CONNECT_SINCE || off
    }

    /// The communicators of more than one rank (one alone connects
    /// nothing) a run of `reservation` will make after the plan is fitted:
    /// the hierarchical modes' intra- and inter-node ones, sendrecv's
    /// (NCCL 2.30 and later), and a pinned sweep's (one at a time).
    pub(super) fn later_comms(&self, reservation: &Reservation) -> usize {
        let hierarchical = !reservation.hierarchical.is_empty() && self.sub.is_none();
        let subs = [&self.member.intra, &self.member.inter]
            .iter()
            .filter(|g| hierarchical && g.size > 1)
            .count();
        let several = self.comm.as_ref().is_some_and(|c| c.nranks() > 1);
        let p2p = reservation.sendrecv
            && self.p2p.is_none()
            && several
            && self.library.version() >= sys::MAX_P2P_PEERS_SINCE
            && self.library.optional().comm_split;
        subs + usize::from(p2p) + usize::from(reservation.pinned && several)
    }

    /// Device memory the fit keeps for NCCL's connections of the
    /// communicators made later: as much each as the world communicator
    /// took when it was made (measured), where NCCL connects eagerly.
    pub(super) fn later_comms_bytes(&self, reservation: &Reservation) -> u64 {
        if self.connects_eagerly() {
            self.comm_bytes.saturating_mul(self.later_comms(reservation) as u64)
        } else {
            0
        }
    }

    /// The header's line on NCCL's connections and the memory fit.
    pub(super) fn connection_notes(&self) -> Vec<String> {
        if !self.connects_eagerly() {
            return vec![
                "NCCL connects each communicator's channels at their first use (NCCL 2.22 and later without \
                 NCCL_RUNTIME_CONNECT=0): the memory they take is not known when the plan is fitted, which keeps \
                 NCCL's headroom only"
                    .into(),
            ];
        }
        if self.later_comms == 0 {
            return Vec::new();
        }
        let which = match self.later_comms {
            1 => "the communicator".to_string(),
            n => format!("each of the {n} communicators"),
        };
        vec![format!(
            "NCCL connects every channel as a communicator is made (NCCL_RUNTIME_CONNECT=0, or NCCL before 2.22.3): \
             the memory fit keeps {} for {which} made later, as much as the world communicator took",
            human_bytes(self.comm_bytes),
        )]
    }
}
