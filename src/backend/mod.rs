//! Data planes. A backend owns its buffers and communicator and executes one
//! collective call at a time; it measures nothing and prints nothing.
//!
//! The engine drives a backend through `prepare` (buffers for a point),
//! `load_input` (this rank's pattern in, output poisoned), `launch` (enqueue
//! one operation), `wait` (all enqueued operations complete) and `output`
//! (the output region, as host memory, for checking).

#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;

use std::ops::Range;

use crate::buffer::HostBuffer;
use crate::collective::{Collective, Layout, Shape};
use crate::engine::Plan;
use crate::error::Error;
use crate::topology::observe::Observed;
use crate::topology::profile::{NcclLogging, Profile};
use crate::topology::{Hierarchy, Nodes};
use crate::types::{DType, Placement, ReduceOp};

/// How many positions a point whose buffers span `span` elements can take
/// inside buffers of `capacity` elements (at least 1).
pub fn rotation_steps(span: usize, capacity: usize) -> usize {
    capacity.checked_div(span).unwrap_or(1).max(1)
}

/// Where operation `iter` of a point works inside its buffers, for a point
/// spanning `span` elements with `steps` positions (`rotation_steps`):
/// successive operations walk through the whole allocation, one span
/// further each time (as nccl-tests shifts its buffers), so that a small
/// point's repeated operations do not all hit the same cached bytes. The
/// steps are computed once per point: nothing but a multiply and, when
/// rotating, one remainder happens per launch.
pub fn rotation_offset(span: usize, steps: usize, iter: u64) -> usize {
    if steps <= 1 {
        0
    } else {
        span * (iter % steps as u64) as usize
    }
}

/// What a backend needs to observe its transport once it is set up.
pub struct TransportQuery<'a> {
    /// The requested profile (`--transport`).
    pub profile: Profile,
    /// Where NCCL's INFO log of this rank went (`EnvPlan::nccl_log`).
    pub nccl_log: &'a NcclLogging,
    /// The real hosts (not `--ranks-per-node` groups): which ranks share
    /// memory.
    pub hosts: &'a Nodes,
}

/// One collective call, as every rank issues it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Call {
    pub collective: Collective,
    /// How an all_reduce is organised over the nodes (flat elsewhere).
    pub hierarchy: Hierarchy,
    pub dtype: DType,
    /// `None` for collectives that do not reduce.
    pub op: Option<ReduceOp>,
    pub shape: Shape,
    /// Rank count, this rank, root (0 where unused).
    pub at: Layout,
}

pub trait Backend {
    /// `mpi`, `nccl`: the CSV's `backend` column.
    fn name(&self) -> &'static str;

    /// Library and version, for the header and `backend_version`.
    fn version(&self) -> String;

    /// Why `dtype` cannot run here, if it cannot.
    fn check_dtype(&self, dtype: DType) -> Result<(), String>;

    /// Why `op` cannot run here, if it cannot.
    fn check_op(&self, op: ReduceOp) -> Result<(), String>;

    /// Why this backend cannot organise an all-reduce as `mode`, if it
    /// cannot.
    fn check_hierarchy(&self, _mode: Hierarchy) -> Result<(), String> {
        Ok(())
    }

    /// Largest element count of one buffer this backend can pass in a call.
    fn max_elements(&self) -> usize;

    /// Called once before the sweep with the whole plan: a device backend
    /// allocates buffers large enough for every case (it must not allocate
    /// per point). With `rotate`, both buffers span the plan's largest case
    /// and operations rotate through them (see `rotation_offset`);
    /// otherwise every operation works at the start of its buffers.
    fn reserve(&mut self, plan: &Plan, rotate: bool) -> Result<(), Error>;

    /// Device memory free for buffers, where the backend has a device: the
    /// plan is fitted to it before `reserve`.
    fn device_free_bytes(&self) -> Option<u64> {
        None
    }

    /// Makes buffers ready for `call` (both placements).
    fn prepare(&mut self, call: &Call) -> Result<(), Error>;

    /// Marks the start of one measured point (warm-up, check and timing of
    /// one case in one placement) for profilers, as `label`.
    fn point_begin(&mut self, _label: &str) {}

    /// Marks the end of the point `point_begin` started.
    fn point_end(&mut self) {}

    /// Poisons the output region, then writes element `i` of this rank's
    /// input as `value(i)` where `placement` puts the input.
    fn load_input(
        &mut self,
        call: &Call,
        placement: Placement,
        value: &(dyn Fn(usize) -> u64 + Sync),
    ) -> Result<(), Error>;

    /// Enqueues (or, for a synchronous library, runs) one operation.
    /// `iter` numbers the operations of a point; with buffer rotation, it
    /// picks the offset the operation works at (see `rotation_offset`).
    /// Checks run at `iter` 0, where the loaded input is.
    fn launch(&mut self, call: &Call, placement: Placement, iter: u64) -> Result<(), Error>;

    /// Returns when every launched operation has completed on this rank.
    fn wait(&mut self) -> Result<(), Error>;

    /// This rank's output region in host memory (after `wait`).
    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error>;

    /// Seconds spent in each phase (intra, inter, intra) of the
    /// hierarchical operations launched since the last call, summed; `None`
    /// when phases are not timed. Resets the sums.
    fn take_phase_times(&mut self) -> Option<[f64; 3]> {
        None
    }

    /// Whether the backend times each iteration itself (`-I`), as an
    /// asynchronous library must (CUDA events). Otherwise the engine reads
    /// the host clock after each launch, which is right for a library whose
    /// launch returns when the operation is done.
    fn marks_iterations(&self) -> bool {
        false
    }

    /// Before the first of `iters` timed launches (when `marks_iterations`).
    fn start_marks(&mut self, _iters: u32) -> Result<(), Error> {
        Ok(())
    }

    /// After the launch of timed iteration `i` (when `marks_iterations`).
    fn mark_iteration(&mut self, _i: u32) -> Result<(), Error> {
        Ok(())
    }

    /// Each marked iteration's time in seconds (after `wait`).
    fn marked_times(&mut self) -> Result<Vec<f64>, Error> {
        Ok(Vec::new())
    }

    /// The transport this rank's communicator uses, and whether it
    /// contradicts the requested profile (the caller fails the run then).
    /// Called on every rank once the backend is set up, before the sweep.
    fn observe_transport(&self, _query: &TransportQuery) -> Observed {
        Observed::unknown(format!("the {} backend does not report its transport", self.name()))
    }

    /// The model of the GPU this rank runs on, when it runs on one.
    fn gpu_model(&self) -> Option<String> {
        None
    }

    /// Every type this backend runs, for `--dtype all`.
    fn dtypes(&self) -> Vec<DType> {
        DType::ALL
            .into_iter()
            .filter(|&t| self.check_dtype(t).is_ok())
            .collect()
    }

    /// Every operation this backend runs, for `--op all`.
    fn ops(&self) -> Vec<ReduceOp> {
        ReduceOp::ALL
            .into_iter()
            .filter(|&o| self.check_op(o).is_ok())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::{rotation_offset, rotation_steps};

    #[test]
    fn rotation_walks_through_the_allocation_one_span_at_a_time() {
        let at = |span, capacity, iter| rotation_offset(span, rotation_steps(span, capacity), iter);
        let offsets: Vec<usize> = (0..7).map(|i| at(3, 10, i)).collect();
        assert_eq!(offsets, vec![0, 3, 6, 0, 3, 6, 0]);
        assert_eq!(at(10, 10, 5), 0);
        assert_eq!(at(12, 10, 5), 0);
        assert_eq!(at(0, 10, 5), 0);
        // the span always fits after the offset
        for span in 1..20 {
            for iter in 0..50 {
                assert!(at(span, 64, iter) + span <= 64.max(span));
            }
        }
    }
}
