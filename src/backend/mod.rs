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
use std::path::PathBuf;

use crate::buffer::HostBuffer;
use crate::collective::{Collective, Layout, Shape};
use crate::error::Error;
use crate::plan::{Capabilities, Plan};
use crate::topology::observe::Observed;
use crate::topology::profile::{NcclLogging, Profile};
use crate::topology::{Hierarchy, Nodes};
use crate::types::{BackendChoice, BackendKind, DType, Placement, ReduceOp};

/// Which backend a run asks for and what it needs to start.
#[derive(Clone, Debug, PartialEq)]
pub struct StartConfig {
    pub backend: BackendChoice,
    /// `--transport`: the profile applied before MPI and NCCL start.
    pub transport: Profile,
    /// `--nccl-lib`: the NCCL library (file or folder) to use.
    pub nccl_lib: Option<PathBuf>,
    /// `-g N`: run N ranks as threads of this one process (no MPI).
    pub threads: Option<usize>,
}

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

/// nccl-tests' launch extras a run asks for: `-m`, `-G`, `-R`. The
/// defaults (1, 0, off) launch one operation at a time, as every backend
/// does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchExtras {
    /// `-m/--agg-iters`: operations per timed iteration, in one NCCL group.
    pub agg_iters: u32,
    /// `-G/--cuda-graph`: replays of the captured timed iterations; 0 off.
    pub cuda_graph: u32,
    /// `-R/--register`: register the buffers with the communicator.
    pub register: bool,
}

impl Default for LaunchExtras {
    fn default() -> Self {
        LaunchExtras {
            agg_iters: 1,
            cuda_graph: 0,
            register: false,
        }
    }
}

impl LaunchExtras {
    /// The refusal of a backend that has none of the extras (`backend`
    /// names it): the first extra asked for, and why it cannot run there.
    pub fn refuse_all(&self, backend: &str) -> Result<(), String> {
        let asked = if self.agg_iters > 1 {
            format!(
                "-m/--agg-iters {} issues several operations as one NCCL group",
                self.agg_iters
            )
        } else if self.cuda_graph > 0 {
            format!(
                "-G/--cuda-graph {} captures NCCL launches in a CUDA graph",
                self.cuda_graph
            )
        } else if self.register {
            "-R/--register registers buffers with an NCCL communicator".to_string()
        } else {
            return Ok(());
        };
        Err(format!(
            "{asked}: it needs the nccl backend, and this run's backend is {backend}; drop the option or use --backend nccl"
        ))
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
    /// Which backend this is: the CSV's `backend` column.
    fn kind(&self) -> BackendKind;

    /// `mpi`, `nccl`, for messages.
    fn name(&self) -> &'static str {
        self.kind().name()
    }

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

    /// Why this backend cannot run `extras`, if it cannot. By default
    /// every extra is refused (a backend without NCCL has none of them).
    fn check_extras(&self, extras: &LaunchExtras) -> Result<(), String> {
        extras.refuse_all(self.name())
    }

    /// Notes for the run header (one line each): what the backend did
    /// differently from what was asked, or on top of it.
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }

    /// Largest element count of one buffer this backend can pass in a call.
    fn max_elements(&self) -> usize;

    /// Device memory the plan needs beyond its two buffers per rank (the
    /// padded scratch buffer of NCCL's rs-ar-ag), for fitting the plan.
    fn scratch_bytes(&self, _plan: &Plan) -> u64 {
        0
    }

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

    /// Enqueues `ops` operations as one group (`-m`, NCCL's
    /// ncclGroupStart/End); operation `a` works where operation
    /// `first_iter + a` would. Only where `check_extras` allowed it.
    fn launch_group(&mut self, _call: &Call, _placement: Placement, _first_iter: u64, _ops: u32) -> Result<(), Error> {
        Err(Error::runtime(format!(
            "internal error: the {} backend cannot group operations",
            self.name()
        )))
    }

    /// Starts capturing launches into a CUDA graph (`-G`) instead of
    /// running them. Only where `check_extras` allowed it.
    fn begin_capture(&mut self) -> Result<(), Error> {
        Err(Error::runtime(format!(
            "internal error: the {} backend cannot capture a CUDA graph",
            self.name()
        )))
    }

    /// Ends the capture `begin_capture` started and makes the graph ready
    /// to replay. Called after every `begin_capture`, even when a launch
    /// in between failed.
    fn end_capture(&mut self) -> Result<(), Error> {
        Err(Error::runtime(format!(
            "internal error: the {} backend cannot capture a CUDA graph",
            self.name()
        )))
    }

    /// Launches the captured graph `times` times, back to back.
    fn replay(&mut self, _times: u32) -> Result<(), Error> {
        Err(Error::runtime(format!(
            "internal error: the {} backend cannot replay a CUDA graph",
            self.name()
        )))
    }

    /// Called before a point's timed iterations with the number of
    /// operations they launch: a backend that keeps something per
    /// operation (CUDA events between phases) makes room for it here,
    /// outside the timed loop.
    fn before_timed(&mut self, _ops: u64) -> Result<(), Error> {
        Ok(())
    }

    /// Returns when every launched operation has completed on this rank.
    fn wait(&mut self) -> Result<(), Error>;

    /// This rank's output region in host memory (after `wait`).
    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error>;

    /// Seconds spent in each phase (intra, inter, intra) of the
    /// hierarchical operations launched since the last call, summed; `None`
    /// when phases are not timed. Resets the sums. Called after `wait`.
    fn take_phase_times(&mut self) -> Result<Option<[f64; 3]>, Error> {
        Ok(None)
    }

    /// Whether the output of `call` in `placement` is defined, so checked.
    /// nccl's in-place alltoall and sendrecv are not (calls.rs says why);
    /// their rows then have an empty `wrong`, as nccl-tests reports none.
    fn validates(&self, _call: &Call, _placement: Placement) -> bool {
        true
    }

    /// Whether the backend times each iteration itself (`-I`), as an
    /// asynchronous library must (CUDA events). Otherwise the engine reads
    /// the host clock after each launch, which is right for a library whose
    /// launch returns when the operation is done.
    fn marks_iterations(&self) -> bool {
        false
    }

    /// Before the barrier that starts `iters` timed launches (when
    /// `marks_iterations`): makes the `iters + 1` marks, records none.
    fn start_marks(&mut self, _iters: u32) -> Result<(), Error> {
        Ok(())
    }

    /// Records mark `i`: 0 after the barrier, before the first launch;
    /// `i` after the launch of timed iteration `i - 1`.
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
}

/// What `backend` can run, for the plan: every type, operation and
/// all-reduce organisation it refuses and why, and its verdict on the
/// run's launch extras.
pub fn capabilities(backend: &dyn Backend, extras: &LaunchExtras) -> Capabilities {
    Capabilities {
        backend: backend.name(),
        max_elements: backend.max_elements(),
        refused_dtypes: refusals(&DType::ALL, |t| backend.check_dtype(t)),
        refused_ops: refusals(&ReduceOp::ALL, |op| backend.check_op(op)),
        refused_hierarchies: refusals(&Hierarchy::ALL, |h| backend.check_hierarchy(h)),
        refused_extras: backend.check_extras(extras).err(),
    }
}

fn refusals<T: Copy>(all: &[T], check: impl Fn(T) -> Result<(), String>) -> Vec<(T, String)> {
    all.iter().filter_map(|&v| check(v).err().map(|why| (v, why))).collect()
}

#[cfg(test)]
mod tests {
    use super::{LaunchExtras, rotation_offset, rotation_steps};

    #[test]
    fn a_backend_without_nccl_refuses_each_extra_with_one_line() {
        let none = LaunchExtras::default();
        assert_eq!(none.refuse_all("mpi"), Ok(()));
        let cases = [
            (LaunchExtras { agg_iters: 2, ..none }, "-m/--agg-iters 2"),
            (LaunchExtras { cuda_graph: 1, ..none }, "-G/--cuda-graph 1"),
            (LaunchExtras { register: true, ..none }, "-R/--register"),
        ];
        for (extras, option) in cases {
            let m = extras.refuse_all("mpi").unwrap_err();
            assert!(m.starts_with(option), "{m}");
            assert!(
                m.contains("needs the nccl backend") && m.contains("backend is mpi"),
                "{m}"
            );
            assert!(!m.contains('\n'), "{m}");
        }
        // -m 1 is the default, not a request
        assert_eq!(LaunchExtras { agg_iters: 1, ..none }.refuse_all("mpi"), Ok(()));
    }

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
