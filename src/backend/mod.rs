//! Data planes. A backend owns its buffers and communicator and executes one
//! collective call at a time; it measures nothing and prints nothing.
//!
//! The engine drives a backend through `prepare` (buffers for a point),
//! `load_input` (this rank's pattern in, output poisoned), `launch` (enqueue
//! one operation), `wait` (all enqueued operations complete) and `output`
//! (the output region, as host memory, for checking).

#[cfg(feature = "mpi")]
pub mod mpi;

use std::ops::Range;

use crate::buffer::HostBuffer;
use crate::collective::{Collective, Layout, Shape};
use crate::error::Error;
use crate::topology::observe::Observed;
use crate::topology::profile::{NcclLogging, Profile};
use crate::topology::{Hierarchy, Nodes};
use crate::types::{DType, Placement, ReduceOp};

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

    /// Largest element count of one buffer this backend can pass in a call.
    fn max_elements(&self) -> usize;

    /// Makes buffers ready for `call` (both placements).
    fn prepare(&mut self, call: &Call) -> Result<(), Error>;

    /// Poisons the output region, then writes element `i` of this rank's
    /// input as `value(i)` where `placement` puts the input.
    fn load_input(&mut self, call: &Call, placement: Placement, value: &dyn Fn(usize) -> u64) -> Result<(), Error>;

    /// Enqueues (or, for a synchronous library, runs) one operation.
    fn launch(&mut self, call: &Call, placement: Placement) -> Result<(), Error>;

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
