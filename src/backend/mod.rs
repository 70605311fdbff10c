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
use crate::types::{DType, Placement, ReduceOp};

/// One collective call, as every rank issues it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Call {
    pub collective: Collective,
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

    /// Largest element count of one buffer this backend can pass in a call.
    fn max_elements(&self) -> usize;

    /// Allocates, once, buffers large enough for every case of `plan` (a
    /// device backend must not allocate per point). Host backends need not.
    fn reserve(&mut self, _plan: &Plan) -> Result<(), Error> {
        Ok(())
    }

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
    fn launch(&mut self, call: &Call, placement: Placement) -> Result<(), Error>;

    /// Returns when every launched operation has completed on this rank.
    fn wait(&mut self) -> Result<(), Error>;

    /// This rank's output region in host memory (after `wait`).
    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error>;

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
