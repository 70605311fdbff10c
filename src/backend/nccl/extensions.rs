//! The NCCL backend's extensions of `Backend`: a workload's groups, the
//! GPU, the transport observed, CUDA graphs, per-iteration and per-phase
//! times, and profiler ranges.

use super::NcclBackend;
use super::hierarchy;
use super::sys::Nvtx;
use crate::backend::{
    Gpu, Graphs, IterationMarks, PhaseTimes, ProfilerRanges, SubGroup, SubGroups, TransportObserver, TransportQuery,
};
use crate::error::Error;
use crate::plan::Reservation;
use crate::topology::Hierarchy;
use crate::topology::observe::Observed;
use crate::types::DType;

/// Sub-communicators (`--split`, `check`'s node and pair checks, a
/// workload's and a replay's groups, `links`' bisection): ncclCommSplit of
/// the backend's communicator; with `-R`, the buffers are registered on
/// each at once, as on every other communicator (every rank of the new
/// group does so right after the split, so a window's collective
/// registration cannot wait on a rank elsewhere).
impl SubGroups for NcclBackend {
    fn split(&mut self, color: usize, key: usize) -> Result<SubGroup, Error> {
        let bound = self.device.bind();
        bound.or_else(|e| self.fail(e))?;
        let made = self.comm()?.split(color, key);
        let comm = made.or_else(|e| self.fail(format!("ncclCommSplit of a sub-communicator: {e}")))?;
        self.groups.push(Some(comm));
        self.register_buffers()?;
        Ok(SubGroup(self.groups.len() - 1))
    }

    /// Destroys the group's communicator: its registrations are released
    /// first (collectively, as made), then ncclCommDestroy; after a failure
    /// ncclCommAbort.
    fn free(&mut self, SubGroup(g): SubGroup) -> Result<(), Error> {
        let Some(comm) = self.groups.get_mut(g).and_then(Option::take) else {
            return Err(Error::runtime(format!(
                "internal error: no sub-communicator {g} to free"
            )));
        };
        if self.failed {
            comm.abort();
        }
        Ok(())
    }
}

impl NcclBackend {
    /// rs-ar-ag with padding, the largest of the hierarchical all-reduces:
    /// the scratch buffer `reserve` allocates.
    pub(super) fn padding_bytes(&self, reservation: &Reservation) -> u64 {
        let local = self.member.local_size();
        let bytes = |&(mode, dtype, count): &(Hierarchy, DType, usize)| {
            hierarchy::scratch_elements(mode, count, local) as u64 * dtype.size_bytes() as u64
        };
        reservation.hierarchical.iter().map(bytes).max().unwrap_or(0)
    }
}

impl Gpu for NcclBackend {
    fn gpu_model(&self) -> String {
        self.device.name().to_string()
    }

    fn free_bytes(&self) -> Option<u64> {
        self.device.memory().ok().map(|(free, _)| free as u64)
    }

    /// The padded buffer of rs-ar-ag (`padding_bytes`), and NCCL's
    /// connections of the communicators made after the fit
    /// (`connections`).
    fn scratch_bytes(&self, reservation: &Reservation) -> u64 {
        let padding = self.padding_bytes(reservation);
        padding.saturating_add(self.later_comms_bytes(reservation))
    }
}

impl TransportObserver for NcclBackend {
    fn observe_transport(&self, q: &TransportQuery) -> Observed {
        // NCCL wrote its INFO log (connections made at init) to the private
        // file the transport profile set up before the library loaded.
        Observed::from_nccl_log(q.profile, q.nccl_log, &|a, b| {
            q.hosts.node_of_rank.get(a) == q.hosts.node_of_rank.get(b)
        })
    }
}

impl Graphs for NcclBackend {
    fn begin_capture(&mut self) -> Result<(), Error> {
        let begun = self.device.begin_capture();
        begun.or_else(|e| self.fail(e))
    }

    fn end_capture(&mut self) -> Result<(), Error> {
        let ended = self.device.end_capture();
        ended.or_else(|e| self.fail(e))
    }

    fn replay(&mut self, times: u32) -> Result<(), Error> {
        let replayed = self.device.replay(times);
        replayed.or_else(|e| self.fail(e))
    }
}

impl IterationMarks for NcclBackend {
    fn start_marks(&mut self, iters: u32) -> Result<(), Error> {
        self.marked = iters as usize;
        let made = self.device.start_marks(iters as usize);
        made.or_else(|e| self.fail(e))
    }

    fn mark_iteration(&mut self, i: u32) -> Result<(), Error> {
        let marked = self.device.mark_iteration(i as usize);
        marked.or_else(|e| self.fail(e))
    }

    fn marked_times(&mut self) -> Result<Vec<f64>, Error> {
        let times = self.device.marked_times(self.marked);
        times.or_else(|e| self.fail(e))
    }
}

impl PhaseTimes for NcclBackend {
    fn begin_phases(&mut self, ops: u64) -> Result<(), Error> {
        let dropped = self.device.take_phase_times().map(|_| ());
        dropped.or_else(|e| self.fail(e))?;
        let made = self
            .device
            .reserve_phase_marks(usize::try_from(ops).unwrap_or(usize::MAX));
        made.or_else(|e| self.fail(e))
    }

    fn take_phase_times(&mut self) -> Result<[f64; 3], Error> {
        let times = self.device.take_phase_times();
        times.or_else(|e| self.fail(e))
    }
}

impl ProfilerRanges for Nvtx {
    fn range_push(&mut self, label: &str) {
        if let Ok(label) = std::ffi::CString::new(label) {
            self.push(&label);
        }
    }

    fn range_pop(&mut self) {
        self.pop();
    }
}
