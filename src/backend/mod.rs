//! Data planes. A backend owns its buffers and communicator and executes one
//! collective call at a time; it measures nothing and prints nothing.
//!
//! The engine drives a backend through `prepare` (buffers for a point),
//! `load_input` (this rank's pattern in, output poisoned), `launch` (enqueue
//! operations), `wait` (all enqueued operations complete) and `output`
//! (the output region, as host memory, for checking). What only some
//! backends have (a GPU, CUDA graphs, device timing marks, phase times,
//! profiler ranges, transport observation, sub-communicators, sends and
//! receives between chosen ranks) is an extension trait that the backend
//! hands out, or not (`Backend::graphs` and the others).
//!
//! Backends: `mpi` (host buffers, MPI's collectives), `nccl` (GPU buffers,
//! libnccl loaded at run time), and `memory` (host buffers, collectives
//! computed across the threads of one process, with injectable delays and
//! faults: the engine's tests run on it without mpirun).

pub mod memory;
#[cfg(feature = "mpi")]
pub mod mpi;
#[cfg(feature = "nccl")]
pub mod nccl;

use std::ops::Range;
use std::path::PathBuf;

use crate::buffer::HostBuffer;
use crate::collective::{Collective, Layout, Shape};
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::observe::Observed;
use crate::topology::profile::{NcclLogging, Profile};
use crate::topology::{Hierarchy, Nodes};
use crate::types::{AlgoPin, AlgoRecord, BackendChoice, BackendKind, DType, Placement, ReduceOp, Register};
use crate::world::launch::LauncherChoice;

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
    /// `--launcher`: how the ranks find each other (the control plane).
    pub launcher: LauncherChoice,
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
    pub register: Register,
}

impl Default for LaunchExtras {
    fn default() -> Self {
        LaunchExtras {
            agg_iters: 1,
            cuda_graph: 0,
            register: Register::Off,
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
        } else if self.register == Register::Symmetric {
            "-R/--register 2 registers buffers as symmetric windows of an NCCL communicator".to_string()
        } else if self.register.on() {
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
    /// Rank count, this rank, root (0 where unused), sendrecv's reach (1
    /// where unused), all in the communicator the call runs on.
    pub at: Layout,
    /// The communicator it runs on: `None` the backend's own, else a group
    /// `SubGroups::split` made. Every call names its own, as rsmpi hands
    /// out communicators: no call changes what a later one means.
    pub group: Option<SubGroup>,
}

/// A sub-communicator `SubGroups::split` made, named by the calls that run
/// on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SubGroup(pub usize);

/// Which backend this is, for the reports: the CSV's `backend` and
/// `backend_version`, and the header's notes.
#[derive(Clone, Debug, PartialEq)]
pub struct Identity {
    pub kind: BackendKind,
    /// Library and version ("NCCL 2.21.5", "Open MPI v4.1.6").
    pub version: String,
    /// One line each: what the backend did differently from what was
    /// asked, or on top of it.
    pub notes: Vec<String>,
}

/// A data plane: buffers and one collective call at a time. Everything
/// here every backend does; what only some do is an extension (`gpu`,
/// `transport`, `graphs`, `iteration_marks`, `phase_times`, `profiler`),
/// `None` where a backend has none, so no call can reach a backend that
/// cannot answer it. The plan never sees this trait, only the plain
/// `Capabilities` value it returns.
pub trait Backend {
    /// Which backend this is, its version and its notes for the header.
    fn identity(&self) -> Identity;

    /// What this backend can run, for the plan and the engine: every
    /// type, operation and all-reduce organisation it refuses and why, its
    /// verdict on the run's launch extras, its buffer limit, and the
    /// outputs it leaves undefined.
    fn capabilities(&self, extras: &LaunchExtras) -> Capabilities;

    /// Called once before the first call with what the plan that runs
    /// computed (`plan::Reservation`): a device backend allocates buffers
    /// large enough for every call (it must not allocate per point). With
    /// `rotate`, both buffers span the largest call and operations rotate
    /// through them (see `rotation_offset`); otherwise every operation
    /// works at the start of its buffers.
    fn reserve(&mut self, reservation: &Reservation) -> Result<(), Error>;

    /// Makes buffers ready for `call` (both placements).
    fn prepare(&mut self, call: &Call) -> Result<(), Error>;

    /// Poisons the output region, then writes element `i` of this rank's
    /// input as `value(i)` where `placement` puts the input.
    fn load_input(
        &mut self,
        call: &Call,
        placement: Placement,
        value: &(dyn Fn(usize) -> u64 + Sync),
    ) -> Result<(), Error>;

    /// Enqueues (or, for a synchronous library, runs) `ops` operations;
    /// operation `a` works where operation `first_iter + a` of the point
    /// does (with buffer rotation, `iter` picks the offset: see
    /// `rotation_offset`). `ops` is above 1 only with `-m`, which the
    /// NCCL backend issues as one group (ncclGroupStart/End); a backend
    /// without groups runs them one after another. Checks run one
    /// operation at `first_iter` 0, where the loaded input is.
    fn launch(&mut self, call: &Call, placement: Placement, first_iter: u64, ops: u32) -> Result<(), Error>;

    /// Returns when every launched operation has completed on this rank.
    fn wait(&mut self) -> Result<(), Error>;

    /// This rank's output region in host memory (after `wait`).
    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error>;

    /// The GPU this rank drives, on a device backend.
    fn gpu(&self) -> Option<&dyn Gpu> {
        None
    }

    /// How this backend reports the transport it uses, where it can.
    fn transport(&self) -> Option<&dyn TransportObserver> {
        None
    }

    /// CUDA graph capture and replay (`-G`).
    fn graphs(&mut self) -> Option<&mut dyn Graphs> {
        None
    }

    /// Per-iteration timing marks on the device (`-I` on an asynchronous
    /// library, whose launches return before the work is done). Without
    /// them the engine reads the host clock after each launch, which is
    /// right for a library whose launch returns when the operation is done.
    fn iteration_marks(&mut self) -> Option<&mut dyn IterationMarks> {
        None
    }

    /// Times of the phases of hierarchical operations (`--phase-times`),
    /// where this run asked for them.
    fn phase_times(&mut self) -> Option<&mut dyn PhaseTimes> {
        None
    }

    /// Ranges around each measured point for a profiler's timeline, where a
    /// profiler is attached.
    fn profiler(&mut self) -> Option<&mut dyn ProfilerRanges> {
        None
    }

    /// Sub-communicators of the backend's own (a workload's groups).
    fn sub_groups(&mut self) -> Option<&mut dyn SubGroups> {
        None
    }

    /// What a call's buffers are registered as, where the backend
    /// registers them (`-R`): the `register` column of its rows.
    fn registrations(&self) -> Option<&dyn Registrations> {
        None
    }

    /// Sends and receives between chosen ranks (`collbench links`' pairs).
    fn point_to_point(&mut self) -> Option<&mut dyn PointToPoint> {
        None
    }

    /// Which algorithm the library ran for each point (`--algo-record`,
    /// docs/algorithms.md); `None` where the run does not record it.
    fn algorithms(&mut self) -> Option<&mut dyn Algorithms> {
        None
    }

    /// Communicators that run a pinned algorithm or protocol (`--algo`,
    /// `--proto`, docs/algorithms.md); `None` where the library has no
    /// such choice or cannot make them.
    fn pins(&mut self) -> Option<&mut dyn Pins> {
        None
    }
}

/// Pinned sweeps: a communicator of every rank made while the library's
/// own variables pin what it runs.
pub trait Pins {
    /// The variables that pin `pin` on `collectives`, in the syntax of the
    /// library found, or why it cannot pin it (a name this release does
    /// not know and would ignore, a protocol the algorithm has not).
    fn pin_variables(&self, pin: AlgoPin, collectives: &[Collective]) -> Result<Vec<(&'static str, String)>, String>;

    /// Collective over the backend's own communicator: a group of every
    /// rank, in rank order, made with `vars` set in each process's
    /// environment and removed after. `set_here`: this rank sets them for
    /// its process (the first rank of each); `barrier` holds every rank
    /// while they change.
    fn pinned_group(
        &mut self,
        vars: &[(&'static str, String)],
        set_here: bool,
        barrier: &dyn Fn(),
    ) -> Result<SubGroup, Error>;
}

/// Which algorithm, protocol and channels the library chose.
pub trait Algorithms {
    /// What this rank's launches of `call` since the last call used (every
    /// launch of a point: warm-up, check, timing), read outside the timed
    /// loop; `unknown` where the library did not say.
    fn take_choices(&mut self, call: &Call) -> AlgoRecord;
}

/// One point-to-point operation of this rank: a send of a call's input
/// region to a peer, or a receive from a peer into its output region.
/// Peers are ranks of the backend's own communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerOp {
    Send(usize),
    Recv(usize),
}

/// Point-to-point traffic on the backend's own communicator, for
/// measurements between chosen pairs of ranks (docs/links.md): each pair
/// talks with plain sends and receives, no sub-communicator per pair, so
/// that every pair of a round runs at once and a thousand-node matrix
/// makes no communicator at all.
pub trait PointToPoint {
    /// Enqueues (or, for a synchronous library, runs) this rank's `ops` as
    /// one group: sends of `call`'s input region and receives into its
    /// output region (`call` is a flat `sendrecv` of the backend's own
    /// communicator, whose buffers `prepare` made), all started together,
    /// so that a send and a receive with the same peer cannot deadlock.
    /// `wait` returns when they have completed. Operations with one peer
    /// complete in the order given across groups, as NCCL's and MPI's do.
    fn launch_p2p(&mut self, call: &Call, ops: &[PeerOp]) -> Result<(), Error>;
}

/// Sub-communicators, built once before a workload's first step: a
/// training step's operations run on the node, tensor-parallel or
/// data-parallel group of each rank, every rank in its own group at the
/// same time. A call on one names it (`Call::group`), and its `Layout` is
/// the group's: its size, this rank's index in it, the root's index in it.
pub trait SubGroups {
    /// Collective over the backend's own communicator (every rank calls it
    /// together, as MPI_Comm_split): a communicator of the ranks that give
    /// the same `color`, ordered by `key`, for calls to name.
    fn split(&mut self, color: usize, key: usize) -> Result<SubGroup, Error>;

    /// Frees `group`'s communicator when it is no longer needed (what it
    /// holds: NCCL's connections and registrations). Collective over the
    /// group: every rank frees the group it got from the same `split`,
    /// together. Later calls naming it fail.
    fn free(&mut self, group: SubGroup) -> Result<(), Error>;
}

/// Buffer registration (`-R`) as it happened: a communicator may decline
/// what was asked (NCCL returns no symmetric window where it has no
/// symmetric memory), so each row says what its call ran with.
pub trait Registrations {
    /// The registration of `call`'s buffers on every communicator it runs
    /// on (the weakest of them), after `prepare`.
    fn registered(&self, call: &Call) -> Register;
}

/// The GPU of a device backend: what the plan is fitted to, and what the
/// header names.
pub trait Gpu {
    /// The model of the GPU this rank runs on.
    fn gpu_model(&self) -> String;

    /// Device memory free for buffers (when the driver says): the plan is
    /// fitted to it before `reserve`.
    fn free_bytes(&self) -> Option<u64>;

    /// Device memory the calls need beyond their two buffers per rank (the
    /// padded scratch buffer of NCCL's rs-ar-ag, the connections of the
    /// communicators NCCL makes after the fit), for fitting the plan.
    fn scratch_bytes(&self, reservation: &Reservation) -> u64;
}

/// A backend that can tell which transport its communicator uses.
pub trait TransportObserver {
    /// The transport this rank's communicator uses, and whether it
    /// contradicts the requested profile (the caller fails the run then).
    /// Called on every rank once the backend is set up, before the sweep.
    fn observe_transport(&self, query: &TransportQuery) -> Observed;
}

/// CUDA graphs (`-G`): the timed iterations are captured once, then
/// replayed.
pub trait Graphs {
    /// Starts capturing launches into a graph instead of running them.
    fn begin_capture(&mut self) -> Result<(), Error>;

    /// Ends the capture `begin_capture` started and makes the graph ready
    /// to replay. Called after every `begin_capture`, even when a launch
    /// in between failed.
    fn end_capture(&mut self) -> Result<(), Error>;

    /// Launches the captured graph `times` times, back to back.
    fn replay(&mut self, times: u32) -> Result<(), Error>;
}

/// Marks between timed iterations, recorded where the work runs (CUDA
/// events on the stream), for `-I`.
pub trait IterationMarks {
    /// Before the barrier that starts `iters` timed launches: makes the
    /// `iters + 1` marks, records none.
    fn start_marks(&mut self, iters: u32) -> Result<(), Error>;

    /// Records mark `i`: 0 after the barrier, before the first launch;
    /// `i` after the launch of timed iteration `i - 1`.
    fn mark_iteration(&mut self, i: u32) -> Result<(), Error>;

    /// Each marked iteration's time in seconds (after `wait`).
    fn marked_times(&mut self) -> Result<Vec<f64>, Error>;
}

/// Times of the three phases (intra, inter, intra) of hierarchical
/// operations (`--phase-times`).
pub trait PhaseTimes {
    /// Before a point's timed iterations, with the number of operations
    /// they launch: forgets what was timed so far (warm-up, check,
    /// calibration) and makes room for `ops` operations outside the timed
    /// loop.
    fn begin_phases(&mut self, ops: u64) -> Result<(), Error>;

    /// Seconds spent in each phase by the hierarchical operations launched
    /// since `begin_phases`, summed (zeros when none ran). Called after
    /// `wait`.
    fn take_phase_times(&mut self) -> Result<[f64; 3], Error>;
}

/// Named ranges on a profiler's timeline (NVTX under Nsight Systems).
pub trait ProfilerRanges {
    /// Opens a range named `label` around one measured point.
    fn range_push(&mut self, label: &str);

    /// Closes the range `range_push` opened.
    fn range_pop(&mut self);
}

/// Each value of `all` that `check` refuses, with why: a backend's
/// refusals for its `Capabilities`.
pub fn refusals<T: Copy>(all: &[T], check: impl Fn(T) -> Result<(), String>) -> Vec<(T, String)> {
    all.iter().filter_map(|&v| check(v).err().map(|why| (v, why))).collect()
}

#[cfg(test)]
mod tests {
    use super::{LaunchExtras, Register, rotation_offset, rotation_steps};

    #[test]
    fn a_backend_without_nccl_refuses_each_extra_with_one_line() {
        let none = LaunchExtras::default();
        assert_eq!(none.refuse_all("mpi"), Ok(()));
        let cases = [
            (LaunchExtras { agg_iters: 2, ..none }, "-m/--agg-iters 2"),
            (LaunchExtras { cuda_graph: 1, ..none }, "-G/--cuda-graph 1"),
            (
                LaunchExtras {
                    register: Register::Buffers,
                    ..none
                },
                "-R/--register",
            ),
            (
                LaunchExtras {
                    register: Register::Symmetric,
                    ..none
                },
                "-R/--register 2",
            ),
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
