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
//! - here: finding the library (`NcclLibrary::find`), the unique id, and the
//!   `Backend` implementation.
//!
//! Search order for libnccl (docs/gpu.md, "NCCL library search"): `--nccl-lib`,
//! then `COLLBENCH_NCCL_LIB` (either one, when set, is the only place
//! tried: an explicit choice never silently falls back to another
//! library), then `$NCCL_HOME/lib`, the dynamic loader's own search for
//! `libnccl.so.2` and `libnccl.so`, and the `nvidia/nccl/lib` folder of
//! every Python site-packages folder.

mod calls;
pub mod device;
mod hierarchy;
mod p2p;
pub mod start;
pub mod sys;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

pub use device::{CudaInfo, Device, DeviceError, GpuInfo};
pub use hierarchy::{SubSource, id_count};
pub use sys::{LoadError, NcclError, NcclVersion, Route, UNIQUE_ID_BYTES};

use super::{
    Backend, Call, Gpu, Graphs, Identity, IterationMarks, LaunchExtras, PhaseTimes, ProfilerRanges, SubGroup,
    SubGroups, TransportObserver, TransportQuery, refusals,
};
use crate::buffer::HostBuffer;
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::observe::Observed;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{BackendKind, DType, Placement, ReduceOp};
use calls::Native;
use device::DeviceMemory;
use hierarchy::{Membership, Phases, Step, SubComms};
use sys::{Api, Buf, Buffers, Candidate, Comm, Launch, Nvtx};

/// Environment variable naming the library (file or folder).
pub const ENV_LIB: &str = "COLLBENCH_NCCL_LIB";

/// The library file names tried in a folder and by the loader, in order.
/// PyPI's wheels ship only `libnccl.so.2`.
const NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// What the search looks at, captured from the process environment (kept
/// apart so that tests can give their own).
#[derive(Clone, Debug, Default)]
pub struct SearchEnv {
    pub option: Option<PathBuf>,
    pub env_lib: Option<PathBuf>,
    pub nccl_home: Option<PathBuf>,
}

impl SearchEnv {
    pub fn from_process(option: Option<&Path>) -> SearchEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        SearchEnv {
            option: option.map(Path::to_path_buf),
            env_lib: var(ENV_LIB),
            nccl_home: var("NCCL_HOME"),
        }
    }

    /// `--nccl-lib`, else `COLLBENCH_NCCL_LIB`: when set, the only place
    /// tried.
    fn explicit(&self) -> Option<(Route, &Path)> {
        match (&self.option, &self.env_lib) {
            (Some(p), _) => Some((Route::Option, p)),
            (None, Some(p)) => Some((Route::Env, p)),
            (None, None) => None,
        }
    }

    /// NCCL_HOME, then the loader (before the slower site-packages search).
    fn standard_candidates(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        if let Some(home) = &self.nccl_home {
            out.extend(in_folder(Route::NcclHome, &home.join("lib")));
        }
        out.extend(NAMES.iter().map(|n| Candidate {
            route: Route::Loader,
            target: PathBuf::from(n),
        }));
        out
    }
}

/// `dir/libnccl.so.2`, `dir/libnccl.so`.
fn in_folder(route: Route, dir: &Path) -> Vec<Candidate> {
    NAMES
        .iter()
        .map(|n| Candidate {
            route,
            target: dir.join(n),
        })
        .collect()
}

/// An explicit path: a file, or a folder holding the library.
fn explicit_candidates(route: Route, path: &Path) -> Vec<Candidate> {
    if path.is_dir() {
        in_folder(route, path)
    } else {
        vec![Candidate {
            route,
            target: path.to_path_buf(),
        }]
    }
}

/// Every Python site-packages folder: what python3 reports (its
/// site-packages, the user's, and sys.path entries, so virtual environments
/// and PYTHONPATH count), then the usual places, without repeats.
pub fn site_packages_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let script = "import site, sys\n\
        d = []\n\
        try: d += site.getsitepackages()\n\
        except Exception: pass\n\
        try: d.append(site.getusersitepackages())\n\
        except Exception: pass\n\
        d += [p for p in sys.path if p]\n\
        print('\\n'.join(d))\n";
    if let Ok(out) = Command::new("python3").args(["-c", script]).output()
        && out.status.success()
    {
        dirs.extend(String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(|p| PathBuf::from(p).join("lib")))
        .collect();
    prefixes.extend(home.map(|h| h.join(".local/lib")));
    prefixes.extend(["/usr/local/lib", "/usr/lib", "/usr/lib64", "/opt/conda/lib"].map(PathBuf::from));
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(&prefix) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for p in pythons {
            dirs.push(p.join("site-packages"));
            dirs.push(p.join("dist-packages"));
        }
    }
    dirs.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let new = !seen.contains(d);
        seen.push(d.clone());
        new
    });
    dirs
}

/// libnvToolsExt, only when a profiler asks for ranges: Nsight Systems
/// (`nsys profile --trace=cuda,nvtx,nccl`) sets NVTX_INJECTION64_PATH for
/// the process it profiles. Otherwise, or where the library is absent, no
/// range is ever made.
fn load_nvtx() -> Option<Nvtx> {
    std::env::var_os("NVTX_INJECTION64_PATH")?;
    let name = "libnvToolsExt.so.1";
    let mut candidates = vec![PathBuf::from(name), PathBuf::from("libnvToolsExt.so")];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            candidates.push(PathBuf::from(home).join("lib64").join(name));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/lib64").join(name));
    candidates.extend(
        site_packages_dirs()
            .iter()
            .map(|d| d.join("nvidia/nvtx/lib").join(name)),
    );
    Nvtx::load_first(&candidates)
}

/// A loaded libnccl: its entry points, version and where it came from.
#[derive(Clone, Debug)]
pub struct NcclLibrary {
    api: Arc<Api>,
    version: NcclVersion,
    route: Route,
}

impl NcclLibrary {
    /// Finds and loads libnccl from the process environment.
    pub fn find(option: Option<&Path>) -> Result<NcclLibrary, LoadError> {
        NcclLibrary::find_in(&SearchEnv::from_process(option), site_packages_dirs)
    }

    /// The search of the module comment; `site_dirs` is asked only when
    /// everything before it failed.
    pub fn find_in(env: &SearchEnv, site_dirs: impl FnOnce() -> Vec<PathBuf>) -> Result<NcclLibrary, LoadError> {
        if let Some((route, path)) = env.explicit() {
            return match Api::load_first(&explicit_candidates(route, path)) {
                Ok(api) => NcclLibrary::ready(api, route),
                Err(LoadError::NotFound { tried }) if tried.len() == 1 => Err(LoadError::Unusable {
                    path: tried[0].target.clone(),
                    why: format!("{}, from {route}", tried[0].why),
                }),
                Err(e) => Err(e),
            };
        }
        let standard = env.standard_candidates();
        let mut tried = match Api::load_first(&standard) {
            Ok(api) => {
                let route = route_of(&api, &standard);
                return NcclLibrary::ready(api, route);
            }
            Err(LoadError::NotFound { tried }) => tried,
            Err(e) => return Err(e),
        };
        // Only folders that exist: sys.path also holds zip files and
        // lib-dynload, which are no place for a wheel.
        let site: Vec<Candidate> = site_dirs()
            .iter()
            .filter(|d| d.is_dir())
            .map(|d| Candidate {
                route: Route::SitePackages,
                target: d.join("nvidia/nccl/lib").join(NAMES[0]),
            })
            .collect();
        match Api::load_first(&site) {
            Ok(api) => NcclLibrary::ready(api, Route::SitePackages),
            Err(LoadError::NotFound { tried: more }) => {
                tried.extend(more);
                Err(LoadError::NotFound { tried })
            }
            Err(e) => Err(e),
        }
    }

    fn ready(api: Arc<Api>, route: Route) -> Result<NcclLibrary, LoadError> {
        let version = api.version().map_err(|source| LoadError::Call {
            path: api.path().to_path_buf(),
            source,
        })?;
        Ok(NcclLibrary { api, version, route })
    }

    pub fn version(&self) -> NcclVersion {
        self.version
    }

    pub fn path(&self) -> &Path {
        self.api.path()
    }

    pub fn route(&self) -> Route {
        self.route
    }

    pub fn optional(&self) -> sys::OptionalApi {
        self.api.optional()
    }

    /// A fresh `ncclUniqueId` (rank 0 makes it; every rank needs it).
    pub fn unique_id(&self) -> Result<UniqueId, NcclError> {
        self.api.unique_id().map(UniqueId)
    }

    /// "NCCL 2.21.5"; "NCCL 2.32.3-sim" on the host GPU simulation
    /// (tests/gpu-sim), so that no simulated figure passes for a measurement.
    pub fn describe(&self) -> String {
        format!("NCCL {}{}", self.version, self.sim_suffix())
    }

    /// "-sim" on the host GPU simulation, else nothing.
    pub fn sim_suffix(&self) -> &'static str {
        if self.api.is_simulation() { "-sim" } else { "" }
    }

    pub fn is_simulation(&self) -> bool {
        self.api.is_simulation()
    }
}

/// Which standard candidate loaded: the first whose target is the loaded
/// path, or whose name the loader resolved.
fn route_of(api: &Api, candidates: &[Candidate]) -> Route {
    candidates
        .iter()
        .find(|c| c.target == api.path())
        .map_or(Route::Loader, |c| c.route)
}

/// The 128 bytes of an `ncclUniqueId`, as they travel over the control plane.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({})", self.hex())
    }
}

impl UniqueId {
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId, Error> {
        let id: [u8; UNIQUE_ID_BYTES] = bytes.try_into().map_err(|_| {
            Error::runtime(format!(
                "the NCCL unique id from rank 0 has {} bytes, not {UNIQUE_ID_BYTES}",
                bytes.len()
            ))
        })?;
        Ok(UniqueId(id))
    }

    /// `count` ids sent as one byte string (rank 0's bundle: the flat
    /// communicator's, then one per sub-communicator group).
    pub fn split_bundle(bytes: &[u8], count: usize) -> Result<Vec<UniqueId>, Error> {
        if bytes.len() != count * UNIQUE_ID_BYTES {
            return Err(Error::runtime(format!(
                "the NCCL unique ids from rank 0 have {} bytes, not {count} x {UNIQUE_ID_BYTES}",
                bytes.len()
            )));
        }
        bytes.chunks(UNIQUE_ID_BYTES).map(UniqueId::from_bytes).collect()
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

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
}

/// The prepared NCCL work of the current call and placement.
enum Work {
    Flat(Launch),
    Phases(Phases),
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
    /// A workload's communicators (`SubGroups`: ncclCommSplit of `comm`),
    /// which flat calls name (`Call::group`).
    groups: Vec<Comm>,
    /// Counts this rank among the process's (NCCL's last-error text is
    /// process-wide).
    _rank: sys::RankInProcess,
}

impl NcclBackend {
    /// Opens this rank's GPU. Every rank calls it after the id exchange;
    /// its failure (no driver, no GPU, too many ranks on a host) is agreed
    /// on before anyone enters the collective `init`.
    pub fn open_device(at: &Placing) -> Result<Device, DeviceError> {
        Device::open(at.local_rank, at.local_ranks, &at.host)
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
        let comm = library.api.init_rank(at.nranks, &id.0, at.rank).map_err(nccl)?;
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

    /// With `-R`: registers the send and receive buffers with every
    /// communicator (registering one twice does nothing); with `-R 2` as
    /// symmetric windows, which is collective: every rank registers the
    /// same buffers (sized by the plan, the same on every rank) with the
    /// same communicators in the same order.
    fn register_buffers(&mut self) -> Result<(), Error> {
        let windows = match self.registration {
            Registration::On => false,
            Registration::Symmetric => true,
            Registration::Off | Registration::Unavailable => return Ok(()),
        };
        let (send, recv) = (&self.send, &self.recv);
        let mut result = Ok(());
        for comm in self
            .comm
            .iter_mut()
            .chain(self.p2p.iter_mut())
            .chain(self.sub.iter_mut().flat_map(|s| s.comms_mut()))
        {
            for memory in [send, recv] {
                let registered = if windows {
                    comm.register_window(memory)
                } else {
                    comm.register(memory)
                };
                if let Err(e) = registered {
                    result = Err(e);
                }
            }
        }
        result.or_else(|e| self.fail(e))
    }

    /// A buffer of at least `bytes` (grown, never shrunk): the old one is
    /// deregistered and freed before the new one is allocated.
    fn ensure_buffer(&mut self, which: Buf, bytes: usize) -> Result<(), Error> {
        let current = match which {
            Buf::Send => &self.send,
            Buf::Recv => &self.recv,
            Buf::Scratch => &self.scratch,
        };
        if current.len_bytes() >= bytes {
            return Ok(());
        }
        // Every communicator forgets the old buffer before it is freed.
        let mut released = Ok(());
        for comm in self
            .comm
            .iter_mut()
            .chain(self.p2p.iter_mut())
            .chain(self.sub.iter_mut().flat_map(|s| s.comms_mut()))
        {
            if let Err(e) = comm.deregister(current) {
                released = Err(e);
            }
        }
        released.or_else(|e| self.fail(e))?;
        let placeholder = self.device.alloc(0, None).map_err(|e| Error::runtime(e.to_string()))?;
        let slot = match which {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
            Buf::Scratch => &mut self.scratch,
        };
        // The old buffer is freed here, before the new allocation.
        *slot = placeholder;
        let nccl = self.mem_alloc.then_some(&self.library.api);
        let memory = self.device.alloc(bytes, nccl);
        let memory = memory.or_else(|e| self.fail(e))?;
        match which {
            Buf::Send => self.send = memory,
            Buf::Recv => self.recv = memory,
            Buf::Scratch => self.scratch = memory,
        }
        Ok(())
    }

    /// Device buffers of at least these sizes; with `-R`, the send and
    /// receive buffers registered once they have their final size.
    fn ensure_device(&mut self, send_bytes: usize, recv_bytes: usize, scratch_bytes: usize) -> Result<(), Error> {
        // A graph of an earlier point may refer to the buffers (and NCCL may
        // have registered them for it): it goes before any of them does.
        self.device.release_graph();
        self.ensure_buffer(Buf::Send, send_bytes)?;
        self.ensure_buffer(Buf::Recv, recv_bytes)?;
        self.ensure_buffer(Buf::Scratch, scratch_bytes)?;
        self.register_buffers()
    }

    /// The sub-communicators, made once: every rank reaches its first
    /// hierarchical point at the same point of the plan.
    fn connect_hierarchy(&mut self) -> Result<(), Error> {
        let Some(source) = self.sub_source.clone() else {
            return Err(Error::runtime(
                "internal error: a hierarchical point in a run set up without sub-communicators",
            ));
        };
        let bound = self.device.bind();
        bound.or_else(|e| self.fail(e))?;
        let made = match self.comm.as_ref() {
            Some(parent) => SubComms::new(parent, &self.library.api, &source, self.member),
            None => return Err(Error::runtime(ABORTED)),
        };
        self.sub = Some(made.or_else(|e| self.fail(e))?);
        self.register_buffers()
    }

    /// sendrecv's communicator (`p2p`), made once where NCCL has
    /// `maxP2pPeers` (2.30 and later) and ncclCommSplit: every rank reaches
    /// its first sendrecv point on the whole world at the same point of the
    /// plan. A call on a workload's group keeps that group's communicator.
    fn connect_p2p(&mut self) -> Result<(), Error> {
        let version = self.library.version();
        if self.p2p.is_some() || version < sys::MAX_P2P_PEERS_SINCE || !self.library.optional().comm_split {
            return Ok(());
        }
        let bound = self.device.bind();
        bound.or_else(|e| self.fail(e))?;
        // nccl-tests' SendRecvInitCommConfig: a ring has two peers.
        let config = sys::RawConfig::for_version(version, Some(2));
        // one color, keyed by the rank (the intra group's key): the same ranks
        let rank = self.member.intra.key;
        let made = self.comm()?.split_with(0, rank, Some(config));
        let comm = made.or_else(|e| self.fail(format!("ncclCommSplit of sendrecv's communicator: {e}")))?;
        self.p2p = Some(comm);
        self.register_buffers()
    }

    /// How `call`'s operations rotate through the buffers: (span, steps)
    /// for `rotation_offset`; one step, at the start, without rotation.
    fn rotation_of(&self, call: &Call) -> (usize, usize) {
        if !self.rotate {
            return (0, 1);
        }
        let e = call.dtype.size_bytes();
        let (send_len, recv_len) = calls::buffer_lens(call);
        let span = send_len.max(recv_len);
        let capacity = (self.send.len_bytes() / e).min(self.recv.len_bytes() / e);
        (span, super::rotation_steps(span, capacity))
    }

    /// The work of `call` in `placement`: the cached one while the call
    /// stays the same, else prepared now (with the point's rotation).
    fn take_work(&mut self, call: &Call, placement: Placement) -> Result<Work, Error> {
        if let Some((c, p, work)) = self.cached.take()
            && c == *call
            && p == placement
        {
            return Ok(work);
        }
        let work = if call.collective == crate::collective::Collective::AllReduce && !call.hierarchy.is_flat() {
            let op = calls::red_op(call.op.unwrap_or(ReduceOp::Sum));
            let phases = hierarchy::phases(call.hierarchy, placement, call.shape.count, op, &self.member)
                .map_err(Error::runtime)?;
            Work::Phases(phases)
        } else {
            Work::Flat(calls::launch_shifted(call, placement, self.native, call.at.shift))
        };
        self.rotation = self.rotation_of(call);
        Ok(work)
    }
}

/// Enqueues the three phases of one hierarchical all-reduce; with `marks`,
/// a CUDA event before the first phase and after each (`--phase-times`).
fn enqueue_phases(
    phases: &Phases,
    sub: &mut SubComms,
    bufs: &Buffers,
    dtype: sys::DataType,
    mut marks: Option<&mut Device>,
) -> Result<(), String> {
    if let Some(device) = marks.as_deref_mut() {
        device.mark_phase(0).map_err(|e| e.to_string())?;
    }
    for (k, steps) in phases.0.iter().enumerate() {
        for step in steps {
            match step {
                Step::Copy { from, to, count } => bufs.copy(*from, *to, *count, dtype).map_err(|e| e.to_string())?,
                Step::Call { on, launch } => sub
                    .comm(*on)
                    .launch(launch, dtype, bufs)
                    .map_err(|e| format!("{} communicator: {e}", on.name()))?,
            }
        }
        if let Some(device) = marks.as_deref_mut() {
            device.mark_phase(k + 1).map_err(|e| e.to_string())?;
        }
    }
    Ok(())
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
            groups.into_iter().chain(p2p).for_each(Comm::abort);
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
        match self.registration {
            Registration::Off => Vec::new(),
            Registration::On => vec!["buffers registered with ncclCommRegister (-R)".into()],
            Registration::Symmetric => {
                vec!["buffers registered as symmetric windows with ncclCommWindowRegister (-R 2)".into()]
            }
            Registration::Unavailable => vec![format!(
                "-R: ncclCommRegister is missing from the NCCL library of at least one rank ({} here); \
                 buffers are not registered",
                self.library.describe()
            )],
        }
    }

    /// Enqueues `work` for operations `first_iter .. first_iter + ops` on
    /// `group` (flat work; on the world, sendrecv's communicator where
    /// `p2p` and there is one): one call, `ops` calls in one NCCL group
    /// (`-m`), or the phases of a hierarchical all-reduce once per
    /// operation.
    fn enqueue(
        &mut self,
        work: &Work,
        group: Option<SubGroup>,
        p2p: bool,
        dtype: sys::DataType,
        first_iter: u64,
        ops: u32,
    ) -> Result<(), String> {
        // Operation `a` works where operation `first_iter + a` of the point
        // would (nccl-tests shifts each aggregated operation).
        let (span, steps) = self.rotation;
        let shift = move |a: u64| super::rotation_offset(span, steps, first_iter + a);
        let bufs = Buffers {
            send: &self.send,
            recv: &self.recv,
            scratch: &self.scratch,
            shift: shift(0),
        };
        match work {
            Work::Flat(launch) => {
                let comm = match (group, self.p2p.as_mut()) {
                    (Some(SubGroup(g)), _) => self.groups.get_mut(g).ok_or("no such workload group")?,
                    (None, Some(p2p_comm)) if p2p => p2p_comm,
                    (None, _) => self.comm.as_mut().ok_or(ABORTED)?,
                };
                let done = if ops <= 1 {
                    comm.launch(launch, dtype, &bufs)
                } else {
                    comm.launch_group(launch, dtype, &bufs, (0..u64::from(ops)).map(shift))
                };
                done.map_err(|e| e.to_string())
            }
            Work::Phases(phases) => {
                let sub = self
                    .sub
                    .as_mut()
                    .ok_or("no sub-communicators: a hierarchical point launched before it was prepared")?;
                let mut marks = self.time_phases.then_some(&mut self.device);
                (0..u64::from(ops)).try_for_each(|a| {
                    let bufs = Buffers {
                        shift: shift(a),
                        ..bufs
                    };
                    enqueue_phases(phases, sub, &bufs, dtype, marks.as_deref_mut())
                })
            }
        }
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
        let (send, recv) = (reservation.send_bytes, reservation.recv_bytes);
        // Rotation walks both buffers by the larger span, so each holds it.
        let (send, recv) = if self.rotate {
            (send.max(recv), send.max(recv))
        } else {
            (send, recv)
        };
        let scratch = self.scratch_bytes(reservation);
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
            let others = self.p2p.iter().chain(&self.groups).map(Comm::async_error);
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

    /// Only with ncclCommSplit (NCCL 2.18 and later).
    fn sub_groups(&mut self) -> Option<&mut dyn SubGroups> {
        if self.library.optional().comm_split {
            Some(self)
        } else {
            None
        }
    }
}

/// A workload's groups: ncclCommSplit of the backend's communicator, each
/// checked to hold the rank NCCL was asked for.
impl SubGroups for NcclBackend {
    fn split(&mut self, color: usize, key: usize) -> Result<SubGroup, Error> {
        let bound = self.device.bind();
        bound.or_else(|e| self.fail(e))?;
        let made = self.comm()?.split(color, key);
        let comm = made.or_else(|e| self.fail(format!("ncclCommSplit of a workload group: {e}")))?;
        self.groups.push(comm);
        Ok(SubGroup(self.groups.len() - 1))
    }
}

impl Gpu for NcclBackend {
    fn gpu_model(&self) -> String {
        self.device.name().to_string()
    }

    fn free_bytes(&self) -> Option<u64> {
        self.device.memory().ok().map(|(free, _)| free as u64)
    }

    /// rs-ar-ag with padding, the largest of the hierarchical all-reduces.
    fn scratch_bytes(&self, reservation: &Reservation) -> u64 {
        let local = self.member.local_size();
        let bytes = |&(mode, dtype, count): &(Hierarchy, DType, usize)| {
            hierarchy::scratch_elements(mode, count, local) as u64 * dtype.size_bytes() as u64
        };
        reservation.hierarchical.iter().map(bytes).max().unwrap_or(0)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_path_is_the_only_place_tried() {
        let env = SearchEnv {
            option: Some(PathBuf::from("/nonexistent/libnccl.so.2")),
            env_lib: Some(PathBuf::from("/also/not/here.so")),
            nccl_home: None,
        };
        let asked = std::cell::Cell::new(false);
        let e = NcclLibrary::find_in(&env, || {
            asked.set(true);
            vec![]
        })
        .unwrap_err();
        assert!(!asked.get(), "site-packages must not be searched");
        let m = e.to_string();
        assert!(
            m.contains("/nonexistent/libnccl.so.2") && m.contains("--nccl-lib"),
            "{m}"
        );
        assert!(!m.contains("/also/not/here.so"), "{m}");
    }

    #[test]
    fn a_failed_search_lists_every_place_tried_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let env = SearchEnv {
            option: None,
            env_lib: None,
            nccl_home: Some(dir.path().join("home")),
        };
        std::fs::create_dir(dir.path().join("site")).unwrap();
        // Only meaningful where no libnccl is installed system-wide.
        let Err(LoadError::NotFound { tried }) =
            NcclLibrary::find_in(&env, || vec![dir.path().join("site"), dir.path().join("absent")])
        else {
            eprintln!("note: a system libnccl is installed; search-order test skipped");
            return;
        };
        let routes: Vec<Route> = tried.iter().map(|a| a.route).collect();
        assert_eq!(
            routes,
            vec![
                Route::NcclHome,
                Route::NcclHome,
                Route::Loader,
                Route::Loader,
                Route::SitePackages
            ]
        );
        assert_eq!(tried[0].target, dir.path().join("home/lib/libnccl.so.2"));
        assert_eq!(tried[2].target, PathBuf::from("libnccl.so.2"));
        assert_eq!(tried[4].target, dir.path().join("site/nvidia/nccl/lib/libnccl.so.2"));
        let m = LoadError::NotFound { tried }.to_string();
        assert!(!m.contains('\n'), "{m}");
    }

    #[test]
    fn a_bundle_of_ids_splits_into_128_byte_ids_in_order() {
        let bytes: Vec<u8> = (0..3u8).flat_map(|i| [i; 128]).collect();
        let ids = UniqueId::split_bundle(&bytes, 3).unwrap();
        assert_eq!(ids.len(), 3);
        assert!(ids.iter().enumerate().all(|(i, id)| id.0 == [i as u8; 128]));
        assert_eq!(UniqueId::split_bundle(&bytes[..128], 1).unwrap()[0].0, [0; 128]);
        let e = UniqueId::split_bundle(&bytes[..200], 2).unwrap_err().to_string();
        assert!(e.contains("200 bytes") && e.contains("2 x 128"), "{e}");
        assert!(UniqueId::split_bundle(&bytes, 2).is_err());
    }

    #[test]
    fn unique_ids_travel_as_exactly_128_bytes() {
        let id = UniqueId::from_bytes(&[7u8; 128]).unwrap();
        assert_eq!(id.0[127], 7);
        assert_eq!(id.hex().len(), 256);
        assert!(UniqueId::from_bytes(&[0u8; 127]).is_err());
        assert!(UniqueId::from_bytes(&[]).is_err());
    }
}
