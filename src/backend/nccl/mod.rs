//! The NCCL data plane: GPU buffers, one communicator per rank, libnccl
//! found and loaded at run time.
//!
//! - `sys`: the run-time binding of libnccl and the CUDA driver check, in
//!   three layers (`raw`, `result`, `safe`): the only `unsafe` of this
//!   backend;
//! - `calls`: how each collective becomes NCCL calls (pure, tested);
//! - `device`: the GPU through cudarc (context, stream, buffers, copies);
//! - `hierarchy`: the hierarchical all-reduce's sub-communicators and phases;
//! - `p2p`: grouped sends and receives between chosen ranks (`PointToPoint`);
//! - `start`: the bootstrap every rank takes together (library, unique ids,
//!   GPU, communicator);
//! - `library`: finding the library (`NcclLibrary::find`, in the search
//!   order of docs/gpu.md, "NCCL library search") and the unique id;
//! - `setup`: buffers and communicators made as the points need them;
//! - `registration`: `-R` on every communicator, what each holds, and the
//!   `register` value of a call;
//! - `connections`: the device memory NCCL's connections take, for the
//!   memory fit and the header;
//! - `work`: a call's NCCL work, prepared and enqueued;
//! - `extensions`: the backend's extension traits;
//! - `algo`: which algorithm NCCL ran, from rank 0's TUNING lines
//!   (`--algo-record log`, docs/algorithms.md);
//! - `pins`: pinned sweeps' NCCL_ALGO/NCCL_PROTO and communicators
//!   (`--algo`, `--proto`);
//! - here: the `Backend` implementation.

mod algo;
mod calls;
mod connections;
pub mod device;
mod extensions;
mod hierarchy;
mod library;
mod p2p;
mod pins;
pub mod profiler;
mod registration;
mod setup;
pub mod start;
pub mod sys;
mod work;

use std::ops::Range;

pub use device::{CudaInfo, Device, DeviceError, GpuInfo};
pub use hierarchy::{SubSource, id_count};
pub use library::{ENV_LIB, NcclLibrary, SearchEnv, UniqueId, site_packages_dirs};
pub use sys::{LoadError, NcclError, NcclVersion, Route, UNIQUE_ID_BYTES};

use super::{
    Backend, Call, Gpu, Graphs, Identity, IterationMarks, LaunchExtras, PhaseTimes, ProfilerRanges, Registrations,
    SubGroups, TransportObserver, refusals,
};
use crate::buffer::HostBuffer;
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::{Hierarchy, Nodes};
use crate::types::{BackendKind, DType, Placement, ReduceOp};
use calls::Native;
use device::DeviceMemory;
use hierarchy::{Membership, SubComms};
use library::load_nvtx;
use sys::{Comm, Nvtx};
use work::Work;

/// Where this rank runs among the ranks of its host.
#[derive(Clone, Debug)]
pub struct Placing {
    pub nranks: usize,
    pub rank: usize,
    pub local_rank: usize,
    pub local_ranks: usize,
    pub host: String,
    /// Ranks of this process (`-g N`: N; under a launcher: 1).
    pub process_ranks: usize,
    /// This rank's index among them.
    pub process_index: usize,
}

/// `-R`, as every rank settled it at start-up: registration needs every
/// rank of a communicator to pass registered buffers, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    Off,
    /// Every rank's library has ncclCommRegister.
    On,
    /// Asked for, but some rank's library lacks ncclCommRegister.
    Unavailable,
    /// `-R 2`: symmetric windows (ncclCommWindowRegister, NCCL 2.27 and
    /// later, on ncclMemAlloc memory); every rank's library has them (the
    /// start refuses the run otherwise).
    Symmetric,
}

/// What a run asks of the backend beyond the flat communicator, settled by
/// every rank together at start-up.
#[derive(Clone, Debug)]
pub struct Options {
    /// Which ranks form a node (hosts, or `--ranks-per-node` groups).
    pub nodes: Nodes,
    /// How the hierarchical modes' sub-communicators are made; `None` when
    /// the run has no hierarchical mode.
    pub sub_source: Option<SubSource>,
    /// `--phase-times`.
    pub time_phases: bool,
    pub registration: Registration,
    /// `--algo-record` (`StartOptions::algo_log`).
    pub algo_log: Option<crate::types::AlgoSetup>,
}

/// The NCCL backend of one rank. `Drop` releases, in order: the CUDA graph,
/// the sub-communicators, the communicator (each after its buffer
/// registrations), then the fields: buffers, then the device.
pub struct NcclBackend {
    comm: Option<Comm>,
    /// sendrecv's communicator from NCCL 2.30 on: `comm` split with
    /// `maxP2pPeers = 2`, as nccl-tests configures its sendrecv test's;
    /// made at the first sendrecv point.
    p2p: Option<Comm>,
    /// The hierarchical modes' communicators, made at the first
    /// hierarchical point.
    sub: Option<SubComms>,
    send: DeviceMemory,
    recv: DeviceMemory,
    /// rs-ar-ag's padded buffer, for counts the node size does not divide.
    scratch: DeviceMemory,
    device: Device,
    host_send: HostBuffer,
    host_recv: HostBuffer,
    library: NcclLibrary,
    native: Native,
    /// The last launch's work, reused while the call stays the same.
    cached: Option<(Call, Placement, Work)>,
    /// (span, rotation steps) of the cached call: computed once per point,
    /// not per launch (the timed loop does no division it can avoid).
    rotation: (usize, usize),
    /// Set after any failure: the communicators are then aborted, not
    /// destroyed (destroy waits for peers that may be gone).
    failed: bool,
    /// Threads for filling and checking host buffers: this host's cores
    /// shared among its ranks.
    host_threads: usize,
    /// Ranges around each measured point, under a profiler.
    nvtx: Option<Nvtx>,
    /// Operations rotate through the buffers (`reserve`).
    rotate: bool,
    /// Iterations the last `start_marks` times.
    marked: usize,
    /// This rank's place in the sub-communicators.
    member: Membership,
    sub_source: Option<SubSource>,
    time_phases: bool,
    registration: Registration,
    /// Buffers come from ncclMemAlloc (NCCL 2.19 and later, as nccl-tests).
    mem_alloc: bool,
    /// The sub-communicators `SubGroups::split` made (ncclCommSplit of
    /// `comm`), which flat calls name (`Call::group`); `None` once freed.
    groups: Vec<Option<Comm>>,
    /// Device memory the world communicator took when it was made
    /// (NCCL's connections, where it connects eagerly): what the memory
    /// fit keeps for each communicator made later.
    comm_bytes: u64,
    /// How many communicators the reserved plan makes after the fit.
    later_comms: usize,
    /// `--algo-record`: which algorithm NCCL ran (`algo`).
    recorder: Option<algo::Recorder>,
    /// Counts this rank among the process's (NCCL's last-error text is
    /// process-wide).
    _rank: sys::RankInProcess,
}

impl NcclBackend {
    /// Opens this rank's GPU (`device::choose_ordinal`; `device`:
    /// NCCL_TESTS_DEVICE). Every rank calls it after the id exchange; its
    /// failure (no driver, no GPU, too many ranks on a host) is agreed on
    /// before anyone enters the collective `init`.
    pub fn open_device(at: &Placing, device: Option<&str>) -> Result<Device, DeviceError> {
        let seat = device::Seat {
            host: &at.host,
            local_rank: at.local_rank,
            local_ranks: at.local_ranks,
            process_index: at.process_index,
            process_ranks: at.process_ranks,
        };
        Device::open(&seat, device)
    }

    /// `ncclCommInitRank` on `device`: collective over all ranks.
    pub fn init(
        library: NcclLibrary,
        device: Device,
        id: &UniqueId,
        at: &Placing,
        options: Options,
    ) -> Result<NcclBackend, Error> {
        let nccl = |e: NcclError| Error::runtime(format!("{}: {e}", library.describe()));
        let dev = |e: DeviceError| Error::runtime(e.to_string());
        if options.nodes.nranks() != at.nranks {
            return Err(Error::runtime(format!(
                "internal error: {} ranks in the node layout, {} in the job",
                options.nodes.nranks(),
                at.nranks
            )));
        }
        device.bind().map_err(dev)?;
        // Counted before the initialisation: its error text is NCCL's
        // process-wide last one, which another rank of `-g` may have set.
        let in_process = sys::RankInProcess::enter(at.process_ranks);
        // before NCCL's log can lose its name (the module's doc)
        let mut recorder = algo::Recorder::before_init(options.algo_log.as_ref(), library.version(), at.rank, &device);
        let free = || device.memory().map_or(0, |(free, _)| free as u64);
        let free_before = free();
        let comm = library.api.init_rank(at.nranks, &id.0, at.rank).map_err(nccl)?;
        recorder.iter_mut().for_each(algo::Recorder::after_init);
        let comm_bytes = free_before.saturating_sub(free());
        // A communicator that disagrees with the control plane about who is
        // who would measure something else than asked.
        let (count, me) = (comm.count().map_err(nccl)?, comm.user_rank().map_err(nccl)?);
        if usize::try_from(count).ok() != Some(at.nranks) || usize::try_from(me).ok() != Some(at.rank) {
            comm.abort();
            return Err(Error::runtime(format!(
                "NCCL made rank {me} of {count} where the control plane has rank {} of {}",
                at.rank, at.nranks
            )));
        }
        let opt = library.optional();
        let mem_alloc = opt.mem_alloc && library.version() >= sys::MEM_ALLOC_SINCE;
        let send = device.alloc(0, None).map_err(dev)?;
        let recv = device.alloc(0, None).map_err(dev)?;
        let scratch = device.alloc(0, None).map_err(dev)?;
        Ok(NcclBackend {
            comm: Some(comm),
            p2p: None,
            sub: None,
            send,
            recv,
            scratch,
            device,
            host_send: HostBuffer::new(DType::Float, 0)?,
            host_recv: HostBuffer::new(DType::Float, 0)?,
            rotate: false,
            marked: 0,
            native: Native {
                alltoall: opt.alltoall,
                gather: opt.gather,
                scatter: opt.scatter,
            },
            library,
            cached: None,
            rotation: (0, 1),
            failed: false,
            host_threads: std::thread::available_parallelism().map_or(1, |n| n.get()) / at.local_ranks.max(1),
            nvtx: load_nvtx(),
            member: Membership::of(&options.nodes, at.rank),
            sub_source: options.sub_source,
            time_phases: options.time_phases,
            registration: options.registration,
            mem_alloc,
            groups: Vec::new(),
            comm_bytes,
            later_comms: 0,
            recorder,
            _rank: in_process,
        })
    }

    fn comm(&mut self) -> Result<&mut Comm, Error> {
        self.comm.as_mut().ok_or_else(|| Error::runtime(ABORTED))
    }

    /// Records a failure so that the communicators are aborted on drop.
    fn fail<T>(&mut self, e: impl std::fmt::Display) -> Result<T, Error> {
        self.failed = true;
        Err(Error::runtime(format!(
            "{} on GPU {}: {e}",
            self.library.describe(),
            self.device.ordinal()
        )))
    }
}

impl Drop for NcclBackend {
    fn drop(&mut self) {
        // What NCCL keeps for calls captured in a graph goes with the
        // graph, while the communicators still exist.
        self.device.release_graph();
        let sub = self.sub.take();
        let p2p = self.p2p.take();
        let comm = self.comm.take();
        let groups = std::mem::take(&mut self.groups);
        if self.failed {
            groups.into_iter().flatten().chain(p2p).for_each(Comm::abort);
            if let Some(sub) = sub {
                sub.abort();
            }
            if let Some(comm) = comm {
                comm.abort();
            }
        } else {
            // Sub-communicators before their parent; each releases its
            // registrations, then is destroyed.
            drop(groups);
            drop(p2p);
            drop(sub);
            drop(comm);
        }
    }
}

impl NcclBackend {
    fn check_hierarchy(&self, mode: Hierarchy) -> Result<(), String> {
        if mode.is_flat() || self.sub_source.is_some() {
            Ok(())
        } else {
            Err(format!(
                "--hierarchy {mode}: internal error: the nccl backend was set up without sub-communicators"
            ))
        }
    }

    fn check_extras(&self, extras: &LaunchExtras) -> Result<(), String> {
        if extras.cuda_graph > 0 {
            calls::check_graph(self.library.version())?;
            device::graph_support()?;
        }
        Ok(())
    }

    fn notes(&self) -> Vec<String> {
        let mut notes = self.registration_notes();
        notes.extend(self.connection_notes());
        notes.extend(self.recorder.as_ref().map(|r| r.note().to_string()));
        notes
    }
}

/// Why a launch finds no communicator.
const ABORTED: &str = "the NCCL communicator was aborted after an earlier error";

impl Backend for NcclBackend {
    fn identity(&self) -> Identity {
        Identity {
            kind: BackendKind::Nccl,
            version: self.library.describe(),
            notes: self.notes(),
        }
    }

    fn capabilities(&self, extras: &LaunchExtras) -> Capabilities {
        let version = self.library.version();
        Capabilities {
            backend: BackendKind::Nccl.name(),
            // NCCL counts are size_t; keep byte offsets far from overflow.
            max_elements: usize::MAX >> 8,
            refused_dtypes: refusals(&DType::ALL, |t| calls::check_dtype(version, t)),
            refused_ops: refusals(&ReduceOp::ALL, |op| calls::check_op(version, op)),
            refused_hierarchies: refusals(&Hierarchy::ALL, |h| self.check_hierarchy(h)),
            refused_extras: self.check_extras(extras).err(),
            unchecked: calls::UNCHECKED.to_vec(),
        }
    }

    fn reserve(&mut self, reservation: &Reservation) -> Result<(), Error> {
        self.rotate = reservation.rotate;
        self.later_comms = self.later_comms(reservation);
        let (send, recv) = (reservation.send_bytes, reservation.recv_bytes);
        // Rotation walks both buffers by the larger span, so each holds it.
        let (send, recv) = if self.rotate {
            (send.max(recv), send.max(recv))
        } else {
            (send, recv)
        };
        let scratch = self.padding_bytes(reservation);
        self.ensure_device(send as usize, recv as usize, scratch as usize)
    }

    fn prepare(&mut self, call: &Call) -> Result<(), Error> {
        // The previous point's graph is of no further use.
        self.device.release_graph();
        if !call.hierarchy.is_flat() && self.sub.is_none() {
            self.connect_hierarchy()?;
        }
        if call.collective == crate::collective::Collective::SendRecv && call.group.is_none() {
            self.connect_p2p()?;
        }
        let (send_len, recv_len) = calls::buffer_lens(call);
        let e = call.dtype.size_bytes();
        let scratch_len = hierarchy::scratch_elements(call.hierarchy, call.shape.count, self.member.local_size());
        self.ensure_device(send_len * e, recv_len * e, scratch_len * e)?;
        // The host side of a GPU rank is idle while it checks: the host's
        // cores are shared among the ranks on it.
        let threads = self.host_threads;
        if self.host_send.dtype() != call.dtype || self.host_send.len() != send_len {
            self.host_send = HostBuffer::new(call.dtype, 0)?;
            self.host_send = HostBuffer::new(call.dtype, send_len)?.with_threads(threads);
        }
        if self.host_recv.dtype() != call.dtype || self.host_recv.len() != recv_len {
            self.host_recv = HostBuffer::new(call.dtype, 0)?;
            self.host_recv = HostBuffer::new(call.dtype, recv_len)?.with_threads(threads);
        }
        self.cached = None;
        Ok(())
    }

    fn load_input(
        &mut self,
        call: &Call,
        placement: Placement,
        value: &(dyn Fn(usize) -> u64 + Sync),
    ) -> Result<(), Error> {
        let r = calls::regions(call, placement);
        // The whole receive buffer is poisoned so that anything NCCL fails
        // to write is caught; the input then goes where NCCL reads it.
        self.host_recv.poison();
        let copied = match r.input.0 {
            crate::collective::Buf::Send => {
                self.host_send.fill(r.input.1, value);
                Device::upload(&mut self.send, 0, self.host_send.bytes())
                    .and_then(|()| Device::upload(&mut self.recv, 0, self.host_recv.bytes()))
            }
            crate::collective::Buf::Recv => {
                self.host_recv.fill(r.input.1, value);
                Device::upload(&mut self.recv, 0, self.host_recv.bytes())
            }
        };
        copied.or_else(|e| self.fail(e))
    }

    fn launch(&mut self, call: &Call, placement: Placement, first_iter: u64, ops: u32) -> Result<(), Error> {
        let work = self.take_work(call, placement)?;
        let p2p = call.collective == crate::collective::Collective::SendRecv;
        let done = self.enqueue(&work, call.group, p2p, calls::data_type(call.dtype), first_iter, ops);
        // The work stays prepared for the point's next launch.
        self.cached = Some((*call, placement, work));
        done.or_else(|e| self.fail(e))
    }

    fn wait(&mut self) -> Result<(), Error> {
        let marked = self.device.mark();
        marked.or_else(|e| self.fail(e))?;
        // As nccl-tests does: poll the stream and NCCL's asynchronous error
        // state of every communicator (the flat one, sendrecv's, the
        // hierarchical modes' and a workload's groups), so that a failed
        // peer or network ends the wait with an error instead of a hang.
        loop {
            let done = self.device.is_done();
            if done.or_else(|e| self.fail(e))? {
                return Ok(());
            }
            let healthy = self.comm()?.async_error();
            healthy.or_else(|e| self.fail(e))?;
            if let Some(Err(e)) = self.sub.as_ref().map(SubComms::async_error) {
                return self.fail(e);
            }
            let others = self
                .p2p
                .iter()
                .chain(self.groups.iter().flatten())
                .map(Comm::async_error);
            if let Some(Err(e)) = others.into_iter().find(Result::is_err) {
                return self.fail(e);
            }
            std::thread::yield_now();
        }
    }

    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error> {
        let (_, range) = calls::regions(call, placement).output;
        // NCCL writes every output to `recv` (`calls::regions`).
        let e = call.dtype.size_bytes();
        let bytes = &mut self.host_recv.bytes_mut()[range.start * e..range.end * e];
        if let Err(err) = Device::download(&self.recv, range.start * e, bytes) {
            return self.fail(err);
        }
        Ok((&mut self.host_recv, range))
    }

    fn gpu(&self) -> Option<&dyn Gpu> {
        Some(self)
    }

    fn transport(&self) -> Option<&dyn TransportObserver> {
        Some(self)
    }

    fn graphs(&mut self) -> Option<&mut dyn Graphs> {
        Some(self)
    }

    fn iteration_marks(&mut self) -> Option<&mut dyn IterationMarks> {
        // Launches return before the GPU is done: only events on the
        // stream time each iteration.
        Some(self)
    }

    fn phase_times(&mut self) -> Option<&mut dyn PhaseTimes> {
        if self.time_phases { Some(self) } else { None }
    }

    fn profiler(&mut self) -> Option<&mut dyn ProfilerRanges> {
        self.nvtx.as_mut().map(|nvtx| nvtx as &mut dyn ProfilerRanges)
    }

    /// Grouped ncclSend and ncclRecv on the backend's communicator (`p2p`).
    fn point_to_point(&mut self) -> Option<&mut dyn super::PointToPoint> {
        Some(self)
    }

    /// With `--algo-record log`.
    fn algorithms(&mut self) -> Option<&mut dyn super::Algorithms> {
        self.recorder.is_some().then_some(self as &mut dyn super::Algorithms)
    }

    /// What each call's buffers are registered as (`-R`).
    fn registrations(&self) -> Option<&dyn Registrations> {
        Some(self)
    }

    /// Only with ncclCommSplit (NCCL 2.18 and later).
    fn pins(&mut self) -> Option<&mut dyn super::Pins> {
        if self.library.optional().comm_split {
            Some(self)
        } else {
            None
        }
    }

    fn sub_groups(&mut self) -> Option<&mut dyn SubGroups> {
        if self.library.optional().comm_split {
            Some(self)
        } else {
            None
        }
    }
}

impl super::Algorithms for NcclBackend {
    fn take_choices(&mut self, call: &Call) -> crate::types::AlgoRecord {
        self.recorder
            .as_mut()
            .map_or_else(crate::types::AlgoRecord::unknown, |r| r.take(call))
    }
}
