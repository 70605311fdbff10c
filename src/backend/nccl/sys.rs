//! The project's own run-time binding of libnccl (no `nccl-sys` crate exists),
//! and the only home of `unsafe` code for the NCCL backend.
//!
//! Three parts, in cudarc's layering:
//! - raw: the C types and function-pointer types of nccl.h, resolved from a
//!   library found at run time (`Api`); every required symbol is resolved at
//!   load time, so a missing one is a typed error and never a later panic;
//!   optional symbols (newer API) are `Option`s;
//! - thin wrappers: methods that turn an `ncclResult_t` into `NcclError`;
//! - safe handles: `Comm` (a communicator that is destroyed, never leaked,
//!   and whose `Drop` cannot panic; split with ncclCommSplit; its buffer
//!   registrations released before it is destroyed), `Comm::launch` and
//!   `Comm::launch_group`, which check every pointer range against the
//!   device allocation it comes from before handing it to NCCL (and always
//!   close a group they opened), and `Buffers::copy`, the checked
//!   device-to-device copy of the hierarchical all-reduce's padding.
//!
//! Also here, because they too need `unsafe`: device memory (`DeviceMemory`,
//! plain cuMemAlloc as nccl-tests' cudaMalloc, rather than cudarc's
//! stream-ordered pool, whose memory other GPUs of the same process cannot
//! reach without extra pool access rights, and without cudarc's per-use event
//! records in the timed loop), the check that the CUDA driver library loads
//! and has every symbol cudarc will call (cudarc panics on a missing library
//! or symbol), and the driver version query.
//!
//! Facts used, from nccl.h: `NCCL_UNIQUE_ID_BYTES` is 128; enums are C
//! `int`s; `NCCL_VERSION_CODE` is `major*10000 + minor*100 + patch` from 2.9
//! on and `major*1000 + minor*100 + patch` before.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;

use cudarc::driver::{CudaStream, DriverError};

// ---------------------------------------------------------------------------
// Raw C types

/// `ncclResult_t`.
type NcclResult = c_int;
/// `ncclComm_t`: an opaque pointer.
type RawComm = *mut c_void;
/// `cudaStream_t` (the same object as the driver's `CUstream`).
type RawStream = *mut c_void;
/// `ncclDataType_t` and `ncclRedOp_t`: C enums, passed as `int`s. Named
/// apart so that the ABI check (tests/it/gpu_sim.rs) maps each parameter to
/// its nccl.h type.
type RawDataType = c_int;
type RawRedOp = c_int;

const NCCL_SUCCESS: NcclResult = 0;
/// `ncclInProgress`: a non-blocking communicator is still working.
const NCCL_IN_PROGRESS: NcclResult = 7;

pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclConfig_t` up to `nvlinkCentricSched`, the fields nccl-tests sets
/// (nccl.h: "a versioned, append-only struct", so this prefix of 2.32's
/// layout is 2.28's). `size` and `version` tell NCCL which fields exist;
/// every field is NCCL_CONFIG_INITIALIZER's "undefined" but those set in
/// `RawConfig::for_version`. The ABI check compares every offset with nccl.h.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawConfig {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
    traffic_class: c_int,
    comm_name: *const c_char,
    collnet_enable: c_int,
    cta_policy: c_int,
    shrink_share: c_int,
    nvls_ctas: c_int,
    n_channels_per_net_peer: c_int,
    nvlink_centric_sched: c_int,
}

/// `NCCL_API_MAGIC` and `NCCL_CONFIG_UNDEF_INT` (nccl.h).
const NCCL_API_MAGIC: u32 = 0xcafe_beef;
const CONFIG_UNDEF_INT: c_int = c_int::MIN;

impl RawConfig {
    /// What nccl-tests' initComms passes: NCCL_CONFIG_INITIALIZER, and from
    /// NCCL 2.28 on `nvlinkCentricSched = 1`. For a library older than 2.28
    /// the struct is cut to the fields 2.14 had (size, magic, version,
    /// blocking), which every NCCL since accepts.
    pub fn for_version(version: NcclVersion) -> RawConfig {
        let undef = CONFIG_UNDEF_INT;
        let full = version >= NcclVersion::new(2, 28, 0);
        RawConfig {
            size: if full {
                size_of::<RawConfig>()
            } else {
                std::mem::offset_of!(RawConfig, cga_cluster_size)
            },
            magic: NCCL_API_MAGIC,
            version: if full { 22800 } else { 21400 },
            blocking: undef,
            cga_cluster_size: undef,
            min_ctas: undef,
            max_ctas: undef,
            net_name: std::ptr::null(),
            split_share: undef,
            traffic_class: undef,
            comm_name: std::ptr::null(),
            collnet_enable: undef,
            cta_policy: undef,
            shrink_share: undef,
            nvls_ctas: undef,
            n_channels_per_net_peer: undef,
            nvlink_centric_sched: if full { 1 } else { undef },
        }
    }
}

/// Field offsets of `RawConfig`, for the ABI check against nccl.h.
pub fn config_offsets() -> Vec<(&'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("size", offset_of!(RawConfig, size)),
        ("magic", offset_of!(RawConfig, magic)),
        ("version", offset_of!(RawConfig, version)),
        ("blocking", offset_of!(RawConfig, blocking)),
        ("cgaClusterSize", offset_of!(RawConfig, cga_cluster_size)),
        ("minCTAs", offset_of!(RawConfig, min_ctas)),
        ("maxCTAs", offset_of!(RawConfig, max_ctas)),
        ("netName", offset_of!(RawConfig, net_name)),
        ("splitShare", offset_of!(RawConfig, split_share)),
        ("trafficClass", offset_of!(RawConfig, traffic_class)),
        ("commName", offset_of!(RawConfig, comm_name)),
        ("collnetEnable", offset_of!(RawConfig, collnet_enable)),
        ("CTAPolicy", offset_of!(RawConfig, cta_policy)),
        ("shrinkShare", offset_of!(RawConfig, shrink_share)),
        ("nvlsCTAs", offset_of!(RawConfig, nvls_ctas)),
        ("nChannelsPerNetPeer", offset_of!(RawConfig, n_channels_per_net_peer)),
        ("nvlinkCentricSched", offset_of!(RawConfig, nvlink_centric_sched)),
    ]
}

/// `ncclUniqueId`: passed by value to ncclCommInitRank.
#[repr(C)]
#[derive(Clone, Copy)]
struct RawUniqueId {
    internal: [c_char; UNIQUE_ID_BYTES],
}

type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> NcclResult;
type GetUniqueIdFn = unsafe extern "C" fn(*mut RawUniqueId) -> NcclResult;
type CommInitRankFn = unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int) -> NcclResult;
type CommInitRankConfigFn = unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int, *mut RawConfig) -> NcclResult;
type CommFn = unsafe extern "C" fn(RawComm) -> NcclResult;
type CommIntFn = unsafe extern "C" fn(RawComm, *mut c_int) -> NcclResult;
type CommAsyncErrorFn = unsafe extern "C" fn(RawComm, *mut NcclResult) -> NcclResult;
type GetErrorStringFn = unsafe extern "C" fn(NcclResult) -> *const c_char;
type GetLastErrorFn = unsafe extern "C" fn(RawComm) -> *const c_char;
type GroupFn = unsafe extern "C" fn() -> NcclResult;
/// ncclAllReduce(send, recv, count, datatype, op, comm, stream)
type AllReduceFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, RawDataType, RawRedOp, RawComm, RawStream) -> NcclResult;
/// ncclReduce(send, recv, count, datatype, op, root, comm, stream)
type ReduceFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    RawDataType,
    RawRedOp,
    c_int,
    RawComm,
    RawStream,
) -> NcclResult;
/// ncclBroadcast, ncclGather, ncclScatter(send, recv, count, datatype, root, comm, stream)
type RootedFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, RawDataType, c_int, RawComm, RawStream) -> NcclResult;
/// ncclAllGather, ncclAlltoAll(send, recv, count, datatype, comm, stream)
type MoveFn = unsafe extern "C" fn(*const c_void, *mut c_void, usize, RawDataType, RawComm, RawStream) -> NcclResult;
/// ncclReduceScatter(send, recv, recvcount, datatype, op, comm, stream)
type ReduceScatterFn = AllReduceFn;
/// ncclSend(send, count, datatype, peer, comm, stream)
type SendFn = unsafe extern "C" fn(*const c_void, usize, RawDataType, c_int, RawComm, RawStream) -> NcclResult;
/// ncclRecv(recv, count, datatype, peer, comm, stream)
type RecvFn = unsafe extern "C" fn(*mut c_void, usize, RawDataType, c_int, RawComm, RawStream) -> NcclResult;
/// ncclCommSplit(comm, color, key, newcomm, config)
type CommSplitFn = unsafe extern "C" fn(RawComm, c_int, c_int, *mut RawComm, *mut RawConfig) -> NcclResult;
/// ncclCommRegister(comm, buff, size, handle)
type CommRegisterFn = unsafe extern "C" fn(RawComm, *mut c_void, usize, *mut *mut c_void) -> NcclResult;
/// ncclCommDeregister(comm, handle)
type CommDeregisterFn = unsafe extern "C" fn(RawComm, *mut c_void) -> NcclResult;
/// ncclMemAlloc(ptr, size)
type MemAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> NcclResult;
/// ncclMemFree(ptr)
type MemFreeFn = unsafe extern "C" fn(*mut c_void) -> NcclResult;
/// gpusimNcclSimulation(): the simulation's marker (tests/gpu-sim).
type SimulationFn = unsafe extern "C" fn() -> *const c_char;

/// Whether `library` has `name` at a non-NULL address (dlsym can find a
/// symbol whose address is NULL; calling it would crash).
fn has_symbol(library: &libloading::Library, name: &str) -> bool {
    // SAFETY: only reads the symbol's address; nothing is called through it.
    unsafe { library.get::<*const c_void>(name.as_bytes()) }.is_ok_and(|symbol| !symbol.is_null())
}

/// nccl-tests uses ncclCommInitRankConfig from NCCL 2.14 on.
const CONFIG_SINCE: NcclVersion = NcclVersion::new(2, 14, 0);
/// nccl-tests allocates its buffers with ncclMemAlloc from NCCL 2.19 on.
pub const MEM_ALLOC_SINCE: NcclVersion = NcclVersion::new(2, 19, 0);

/// The symbols a library must have to be used at all (NCCL 2.7 and later
/// have them all; ncclCommGetAsyncError came in 2.4, send/recv in 2.7).
pub const REQUIRED_SYMBOLS: [&str; 19] = [
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommCount",
    "ncclCommCuDevice",
    "ncclCommUserRank",
    "ncclCommGetAsyncError",
    "ncclGetErrorString",
    "ncclGroupStart",
    "ncclGroupEnd",
    "ncclAllReduce",
    "ncclBroadcast",
    "ncclReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclSend",
    "ncclRecv",
];

/// Newer API that is used, or reported, where the library has it.
pub const OPTIONAL_SYMBOLS: [&str; 10] = [
    "ncclAlltoAll",
    "ncclGather",
    "ncclScatter",
    "ncclCommSplit",
    "ncclCommRegister",
    "ncclCommDeregister",
    "ncclMemAlloc",
    "ncclMemFree",
    "ncclCommInitRankConfig",
    "ncclGetLastError",
];

/// Every resolved entry point of one loaded libnccl. The function pointers
/// stay valid for as long as `_library` is loaded, which is until the
/// process ends: the library is never unloaded (see `_library`).
pub struct Api {
    get_version: GetVersionFn,
    get_unique_id: GetUniqueIdFn,
    comm_init_rank: CommInitRankFn,
    comm_destroy: CommFn,
    comm_abort: CommFn,
    comm_count: CommIntFn,
    comm_cu_device: CommIntFn,
    comm_user_rank: CommIntFn,
    comm_get_async_error: CommAsyncErrorFn,
    get_error_string: GetErrorStringFn,
    group_start: GroupFn,
    group_end: GroupFn,
    all_reduce: AllReduceFn,
    broadcast: RootedFn,
    reduce: ReduceFn,
    all_gather: MoveFn,
    reduce_scatter: ReduceScatterFn,
    send: SendFn,
    recv: RecvFn,
    alltoall: Option<MoveFn>,
    gather: Option<RootedFn>,
    scatter: Option<RootedFn>,
    comm_split: Option<CommSplitFn>,
    comm_register: Option<CommRegisterFn>,
    comm_deregister: Option<CommDeregisterFn>,
    mem_alloc: Option<MemAllocFn>,
    mem_free: Option<MemFreeFn>,
    comm_init_rank_config: Option<CommInitRankConfigFn>,
    get_last_error: Option<GetLastErrorFn>,
    /// Only the host GPU simulation (tests/gpu-sim) exports it: every run
    /// on that library is labelled simulated.
    simulation: Option<SimulationFn>,
    path: PathBuf,
    /// Never dropped, so libnccl is never unloaded: ncclGetUniqueId starts
    /// NCCL's bootstrap thread, which keeps polling its socket until every
    /// rank has connected. A start that fails before ncclCommInitRank (no
    /// GPU) leaves it running; unloading the library under it crashed the
    /// process as it exited (SIGSEGV, or stray output, under load).
    _library: std::mem::ManuallyDrop<libloading::Library>,
}

impl fmt::Debug for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Api").field("path", &self.path).finish_non_exhaustive()
    }
}

/// Which optional entry points the loaded library has.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OptionalApi {
    pub alltoall: bool,
    pub gather: bool,
    pub scatter: bool,
    pub comm_split: bool,
    pub comm_register: bool,
    pub mem_alloc: bool,
    pub comm_init_rank_config: bool,
}

// ---------------------------------------------------------------------------
// Loading

/// How a candidate library was found (the search order of the README).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `--nccl-lib PATH`
    Option,
    /// `COLLBENCH_NCCL_LIB`
    Env,
    /// `$NCCL_HOME/lib`
    NcclHome,
    /// The dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, ...).
    Loader,
    /// `nvidia/nccl/lib` of a Python site-packages folder (PyPI's
    /// nvidia-nccl-cuXX wheels ship `libnccl.so.2` there, without a
    /// `libnccl.so` link).
    SitePackages,
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Route::Option => "--nccl-lib",
            Route::Env => "COLLBENCH_NCCL_LIB",
            Route::NcclHome => "NCCL_HOME",
            Route::Loader => "dynamic loader",
            Route::SitePackages => "Python site-packages",
        })
    }
}

/// One place to try: a file path, or a bare name for the dynamic loader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub route: Route,
    pub target: PathBuf,
}

/// A candidate that did not work, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub route: Route,
    pub target: PathBuf,
    pub why: String,
}

impl fmt::Display for Attempt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({}): {}", self.target.display(), self.route, self.why)
    }
}

/// Why no NCCL library could be used. Every message is one line.
#[derive(Debug, Error)]
pub enum LoadError {
    #[error(
        "NCCL library not found (tried {}); install NCCL (e.g. `pip install nvidia-nccl-cu12`) \
         or point --nccl-lib or COLLBENCH_NCCL_LIB at libnccl.so.2",
        list(.tried)
    )]
    NotFound { tried: Vec<Attempt> },
    #[error(
        "{} is not a usable NCCL library ({why}); point --nccl-lib or COLLBENCH_NCCL_LIB at libnccl.so.2",
        .path.display()
    )]
    Unusable { path: PathBuf, why: String },
    #[error("NCCL library {}: {source}", .path.display())]
    Call { path: PathBuf, source: NcclError },
}

fn list(tried: &[Attempt]) -> String {
    if tried.is_empty() {
        return "nothing".into();
    }
    tried.iter().map(Attempt::to_string).collect::<Vec<_>>().join("; ")
}

/// The message of a failed dlopen (libloading keeps the loader's own text
/// as the error's source) without the path it repeats.
fn short_dl_error(e: &libloading::Error, target: &Path) -> String {
    let text = match std::error::Error::source(e) {
        Some(source) => source.to_string(),
        None => e.to_string(),
    };
    let prefix = format!("{}: ", target.display());
    let text = text
        .split_once(&prefix)
        .map_or(text.as_str(), |(_, rest)| rest)
        .to_string();
    text.trim().to_string()
}

impl Api {
    /// Tries the candidates in order and returns the first library that
    /// loads and has every required symbol, or every attempt with its reason.
    pub fn load_first(candidates: &[Candidate]) -> Result<Arc<Api>, LoadError> {
        let mut tried = Vec::new();
        for c in candidates {
            match Api::load(c) {
                Ok(api) => return Ok(Arc::new(api)),
                Err(why) => tried.push(Attempt {
                    route: c.route,
                    target: c.target.clone(),
                    why,
                }),
            }
        }
        Err(LoadError::NotFound { tried })
    }

    /// Loads one candidate; the error is the reason, for the attempt list.
    fn load(c: &Candidate) -> Result<Api, String> {
        let is_path = c.target.components().count() > 1;
        if is_path && !c.target.exists() {
            return Err("no such file".into());
        }
        // SAFETY: loading a shared library runs its initialisers. The path
        // was chosen by the user or by the documented search for libnccl, and
        // libnccl's initialisers only set up its own state. A file that is
        // not a shared library is refused by the loader with an error.
        let library = unsafe { libloading::Library::new(&c.target) }.map_err(|e| {
            let why = short_dl_error(&e, &c.target);
            if !is_path && why.contains("No such file") {
                "not in the loader's search path".into()
            } else {
                why
            }
        })?;
        let path = if is_path {
            c.target.clone()
        } else {
            loaded_path_of(&c.target).unwrap_or_else(|| c.target.clone())
        };
        Api::resolve(library, path)
    }

    /// Resolves every symbol; lists every missing required one at once.
    fn resolve(library: libloading::Library, path: PathBuf) -> Result<Api, String> {
        let missing: Vec<&str> = REQUIRED_SYMBOLS
            .iter()
            .copied()
            .filter(|name| !has_symbol(&library, name))
            .collect();
        if !missing.is_empty() {
            return Err(format!("it lacks {}", missing.join(", ")));
        }
        // Each symbol is looked up with the function type its nccl.h
        // declaration has (the type aliases above, written from nccl.h), and
        // the pointer is kept only inside the `Api` that also owns `library`,
        // so it never outlives the mapping.
        // Each is looked up as an `Option` of its function type: dlsym may
        // return NULL for a symbol that exists (an unresolved weak symbol, or
        // an indirect function that resolves to nothing), and a NULL
        // function pointer must never be made.
        macro_rules! required {
            ($name:literal) => {{
                // SAFETY: see the comment above the macro; `Option<fn>` has
                // the size of a pointer and NULL is `None`.
                let symbol = unsafe { library.get::<Option<_>>($name.as_bytes()) };
                match symbol.map(|symbol| *symbol) {
                    Ok(Some(f)) => f,
                    Ok(None) => return Err(format!("it lacks {} (NULL address)", $name)),
                    Err(e) => return Err(format!("it lacks {}: {e}", $name)),
                }
            }};
        }
        macro_rules! optional {
            ($name:literal) => {{
                // SAFETY: see the comment above `required!`.
                let symbol = unsafe { library.get::<Option<_>>($name.as_bytes()) };
                symbol.ok().and_then(|symbol| *symbol)
            }};
        }
        Ok(Api {
            get_version: required!("ncclGetVersion"),
            get_unique_id: required!("ncclGetUniqueId"),
            comm_init_rank: required!("ncclCommInitRank"),
            comm_destroy: required!("ncclCommDestroy"),
            comm_abort: required!("ncclCommAbort"),
            comm_count: required!("ncclCommCount"),
            comm_cu_device: required!("ncclCommCuDevice"),
            comm_user_rank: required!("ncclCommUserRank"),
            comm_get_async_error: required!("ncclCommGetAsyncError"),
            get_error_string: required!("ncclGetErrorString"),
            group_start: required!("ncclGroupStart"),
            group_end: required!("ncclGroupEnd"),
            all_reduce: required!("ncclAllReduce"),
            broadcast: required!("ncclBroadcast"),
            reduce: required!("ncclReduce"),
            all_gather: required!("ncclAllGather"),
            reduce_scatter: required!("ncclReduceScatter"),
            send: required!("ncclSend"),
            recv: required!("ncclRecv"),
            alltoall: optional!("ncclAlltoAll"),
            gather: optional!("ncclGather"),
            scatter: optional!("ncclScatter"),
            comm_split: optional!("ncclCommSplit"),
            comm_register: optional!("ncclCommRegister"),
            comm_deregister: optional!("ncclCommDeregister"),
            mem_alloc: optional!("ncclMemAlloc"),
            mem_free: optional!("ncclMemFree"),
            comm_init_rank_config: optional!("ncclCommInitRankConfig"),
            get_last_error: optional!("ncclGetLastError"),
            simulation: optional!("gpusimNcclSimulation"),
            path,
            _library: std::mem::ManuallyDrop::new(library),
        })
    }

    /// The file the library was loaded from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether this library is the host GPU simulation (tests/gpu-sim).
    pub fn is_simulation(&self) -> bool {
        self.simulation.is_some()
    }

    pub fn optional(&self) -> OptionalApi {
        OptionalApi {
            alltoall: self.alltoall.is_some(),
            gather: self.gather.is_some(),
            scatter: self.scatter.is_some(),
            comm_split: self.comm_split.is_some(),
            comm_register: self.comm_register.is_some() && self.comm_deregister.is_some(),
            mem_alloc: self.mem_alloc.is_some() && self.mem_free.is_some(),
            comm_init_rank_config: self.comm_init_rank_config.is_some(),
        }
    }

    /// `ncclGetErrorString`, as an owned string.
    fn error_text(&self, code: NcclResult) -> String {
        // SAFETY: ncclGetErrorString takes any integer and returns a pointer
        // to a static NUL-terminated string (or NULL, checked).
        let ptr = unsafe { (self.get_error_string)(code) };
        if ptr.is_null() {
            return format!("NCCL error {code}");
        }
        // SAFETY: non-null, NUL-terminated, static in the library.
        unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
    }

    fn check(&self, call: &'static str, code: NcclResult, comm: Option<RawComm>) -> Result<(), NcclError> {
        if code == NCCL_SUCCESS {
            return Ok(());
        }
        // NCCL keeps one last-error text per process (ncclLastError in its
        // debug.cc), whatever communicator is asked: with several ranks in
        // this process (`-g`) it may be another rank's, so it is not shown.
        let shared = RANKS_IN_PROCESS.load(std::sync::atomic::Ordering::SeqCst) > 1;
        let detail = match self.get_last_error {
            Some(_) if shared => String::new(),
            Some(last) => {
                // SAFETY: ncclGetLastError(comm) accepts a live communicator
                // or NULL (then it reports the thread's last error, as after
                // a failed initialisation) and returns a pointer to a
                // NUL-terminated string owned by NCCL, valid until the next
                // NCCL call on this thread; it is copied at once.
                let ptr = unsafe { last(comm.unwrap_or(std::ptr::null_mut())) };
                if ptr.is_null() {
                    String::new()
                } else {
                    // SAFETY: non-null and NUL-terminated, see above.
                    unsafe { CStr::from_ptr(ptr) }.to_string_lossy().trim().to_string()
                }
            }
            None => String::new(),
        };
        Err(NcclError {
            call,
            code,
            text: self.error_text(code),
            detail,
        })
    }

    /// `ncclGetVersion`.
    pub fn version(&self) -> Result<NcclVersion, NcclError> {
        let mut code: c_int = 0;
        // SAFETY: ncclGetVersion writes one int through a valid pointer.
        let rc = unsafe { (self.get_version)(&mut code) };
        self.check("ncclGetVersion", rc, None)?;
        Ok(NcclVersion::from_code(code))
    }

    /// `ncclGetUniqueId`: the bootstrap handle rank 0 shares with all ranks.
    pub fn unique_id(&self) -> Result<[u8; UNIQUE_ID_BYTES], NcclError> {
        let mut raw = RawUniqueId {
            internal: [0; UNIQUE_ID_BYTES],
        };
        // SAFETY: ncclGetUniqueId fills the 128-byte struct it is given.
        let rc = unsafe { (self.get_unique_id)(&mut raw) };
        self.check("ncclGetUniqueId", rc, None)?;
        Ok(raw.internal.map(|c| c as u8))
    }

    /// `ncclCommInitRank` on the calling thread's current CUDA device (the
    /// caller binds its context first). Collective: every rank must call it.
    pub fn init_rank(
        self: &Arc<Self>,
        nranks: usize,
        id: &[u8; UNIQUE_ID_BYTES],
        rank: usize,
    ) -> Result<Comm, NcclError> {
        let nranks_c = c_int::try_from(nranks).map_err(|_| NcclError::usage("ncclCommInitRank", "too many ranks"))?;
        let rank_c = c_int::try_from(rank).map_err(|_| NcclError::usage("ncclCommInitRank", "rank out of range"))?;
        let raw_id = RawUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: RawComm = std::ptr::null_mut();
        // As nccl-tests' initComms: ncclCommInitRankConfig from NCCL 2.14 on
        // (where the library has it), plain ncclCommInitRank before.
        let version = self.version()?;
        let (name, rc) = match self.comm_init_rank_config {
            Some(init_config) if version >= CONFIG_SINCE => {
                let mut config = RawConfig::for_version(version);
                // SAFETY: as below; `config` is a live NCCL_CONFIG_INITIALIZER
                // equivalent whose `size` and `version` describe its fields,
                // and NCCL copies what it keeps before returning.
                let rc = unsafe { init_config(&mut comm, nranks_c, raw_id, rank_c, &mut config) };
                ("ncclCommInitRankConfig", rc)
            }
            // SAFETY: `comm` is a valid out-pointer; the id is passed by value
            // as nccl.h declares; NCCL validates nranks and rank itself and
            // returns an error (not a crash) when no CUDA device is usable.
            _ => ("ncclCommInitRank", unsafe {
                (self.comm_init_rank)(&mut comm, nranks_c, raw_id, rank_c)
            }),
        };
        self.check(name, rc, None)?;
        if comm.is_null() {
            return Err(NcclError::usage("ncclCommInitRank", "returned no communicator"));
        }
        Ok(Comm::wrap(comm, self, nranks))
    }
}

/// Where a loaded library came from, when it was opened by bare name: the
/// first mapped file of /proc/self/maps whose name is the library's.
fn loaded_path_of(name: &Path) -> Option<PathBuf> {
    let stem = name.file_name()?.to_str()?.split(".so").next()?.to_string();
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .and_then(|f| f.to_str())
                .is_some_and(|f| f.starts_with(&format!("{stem}.so")))
        })
        .map(PathBuf::from)
}

/// Ranks of this process that hold a communicator (`RankInProcess`).
static RANKS_IN_PROCESS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One rank of this process, counted while it lives: with more than one,
/// NCCL's process-wide last-error text cannot be told apart by rank.
#[derive(Debug)]
pub struct RankInProcess(());

impl RankInProcess {
    pub fn enter() -> RankInProcess {
        RANKS_IN_PROCESS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RankInProcess(())
    }
}

impl Drop for RankInProcess {
    fn drop(&mut self) {
        RANKS_IN_PROCESS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// Versions and errors

/// An NCCL version, decoded from `ncclGetVersion`'s integer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct NcclVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl NcclVersion {
    /// `NCCL_VERSION_CODE`: `X*10000 + Y*100 + Z` since 2.9, `X*1000 + Y*100
    /// + Z` before (nccl.h's NCCL_VERSION macro).
    pub fn from_code(code: c_int) -> NcclVersion {
        let code = code.max(0) as u32;
        if code >= 10000 {
            NcclVersion {
                major: code / 10000,
                minor: code % 10000 / 100,
                patch: code % 100,
            }
        } else {
            NcclVersion {
                major: code / 1000,
                minor: code % 1000 / 100,
                patch: code % 100,
            }
        }
    }

    pub const fn new(major: u32, minor: u32, patch: u32) -> NcclVersion {
        NcclVersion { major, minor, patch }
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// A failed NCCL call: which call, NCCL's code and text, and NCCL's last
/// error message where the library keeps one.
#[derive(Clone, Debug, Error)]
#[error("{call} failed: {text} (ncclResult_t {code}){}", if .detail.is_empty() { String::new() } else { format!(": {}", .detail) })]
pub struct NcclError {
    pub call: &'static str,
    pub code: c_int,
    pub text: String,
    pub detail: String,
}

impl NcclError {
    /// A refusal found before calling NCCL (counts, ranges).
    fn usage(call: &'static str, what: &str) -> NcclError {
        NcclError {
            call,
            code: 4, // ncclInvalidArgument
            text: what.into(),
            detail: String::new(),
        }
    }
}

// ---------------------------------------------------------------------------
// Communicators and calls

/// `ncclDataType_t` values (nccl.h).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum DataType {
    Int8 = 0,
    Uint8 = 1,
    Int32 = 2,
    Uint32 = 3,
    Int64 = 4,
    Uint64 = 5,
    Float16 = 6,
    Float32 = 7,
    Float64 = 8,
    /// Since NCCL 2.10.
    Bfloat16 = 9,
}

impl DataType {
    pub fn size_bytes(self) -> usize {
        match self {
            DataType::Int8 | DataType::Uint8 => 1,
            DataType::Float16 | DataType::Bfloat16 => 2,
            DataType::Int32 | DataType::Uint32 | DataType::Float32 => 4,
            DataType::Int64 | DataType::Uint64 | DataType::Float64 => 8,
        }
    }
}

/// `ncclRedOp_t` values (nccl.h): note max before min.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum RedOp {
    Sum = 0,
    Prod = 1,
    Max = 2,
    Min = 3,
    /// Since NCCL 2.10.
    Avg = 4,
}

/// Which device buffer a pointer points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
    /// The hierarchical all-reduce's padded buffer (never rotated).
    Scratch,
}

/// A position in a device buffer, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub buf: Buf,
    pub offset: usize,
}

/// One NCCL call, with pointers as positions in the two buffers. Counts are
/// NCCL's `count` argument of that call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    AllReduce {
        send: At,
        recv: At,
        count: usize,
        op: RedOp,
    },
    Broadcast {
        send: At,
        recv: At,
        count: usize,
        root: usize,
    },
    Reduce {
        send: At,
        recv: At,
        count: usize,
        op: RedOp,
        root: usize,
    },
    /// `count` is per rank (sendcount).
    AllGather {
        send: At,
        recv: At,
        count: usize,
    },
    /// `count` is per rank (recvcount).
    ReduceScatter {
        send: At,
        recv: At,
        count: usize,
        op: RedOp,
    },
    /// Native ncclAlltoAll; `count` per peer.
    AlltoAll {
        send: At,
        recv: At,
        count: usize,
    },
    /// Native ncclGather; `count` per rank.
    Gather {
        send: At,
        recv: At,
        count: usize,
        root: usize,
    },
    /// Native ncclScatter; `count` per rank.
    Scatter {
        send: At,
        recv: At,
        count: usize,
        root: usize,
    },
    Send {
        send: At,
        count: usize,
        peer: usize,
    },
    Recv {
        recv: At,
        count: usize,
        peer: usize,
    },
}

impl Op {
    /// The element ranges this call reads and writes, as (position, length):
    /// what `launch` checks against the buffers before calling NCCL.
    pub fn extents(&self, nranks: usize) -> [Option<(At, usize)>; 2] {
        let n = nranks;
        let two = |a: At, x: usize, b: At, y: usize| [Some((a, x)), Some((b, y))];
        match *self {
            Op::AllReduce { send, recv, count, .. } => two(send, count, recv, count),
            Op::Broadcast { send, recv, count, .. } => two(send, count, recv, count),
            Op::Reduce { send, recv, count, .. } => two(send, count, recv, count),
            Op::AllGather { send, recv, count } => two(send, count, recv, count * n),
            Op::ReduceScatter { send, recv, count, .. } => two(send, count * n, recv, count),
            Op::AlltoAll { send, recv, count } => two(send, count * n, recv, count * n),
            Op::Gather { send, recv, count, .. } => two(send, count, recv, count * n),
            Op::Scatter { send, recv, count, .. } => two(send, count * n, recv, count),
            Op::Send { send, count, .. } => [Some((send, count)), None],
            Op::Recv { recv, count, .. } => [Some((recv, count)), None],
        }
    }
}

/// What one `launch` enqueues: NCCL calls, inside one group when `grouped`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grouped: bool,
    pub ops: Vec<Op>,
}

/// The device buffers one launch may point into, and how far the
/// operation rotates through them: `Send` and `Recv` positions move `shift`
/// elements further (buffer rotation), `Scratch` positions never do.
///
/// The GPU writes `recv` and `scratch` through these shared references:
/// what Rust holds of a `DeviceMemory` (an address and a length) never
/// changes, and Rust code never reads the device bytes behind it directly.
#[derive(Clone, Copy)]
pub struct Buffers<'a> {
    pub send: &'a DeviceMemory,
    pub recv: &'a DeviceMemory,
    pub scratch: &'a DeviceMemory,
    pub shift: usize,
}

/// Each buffer's device address and size in bytes.
type Spans = [(Buf, u64, usize); 3];

impl Buffers<'_> {
    fn spans(&self) -> Spans {
        [
            (Buf::Send, self.send.raw_ptr(), self.send.len_bytes()),
            (Buf::Recv, self.recv.raw_ptr(), self.recv.len_bytes()),
            (Buf::Scratch, self.scratch.raw_ptr(), self.scratch.len_bytes()),
        ]
    }

    /// Every buffer is ordered on one stream, so the calls and copies of
    /// one launch run in the order they are enqueued.
    fn one_stream(&self) -> bool {
        self.send.same_stream(self.recv) && self.send.same_stream(self.scratch)
    }

    /// Enqueues a device-to-device copy of `count` elements of `dtype` from
    /// `from` to `to` on the buffers' stream (the hierarchical all-reduce's
    /// padding); both ranges are checked against their buffers first.
    pub fn copy(&self, from: At, to: At, count: usize, dtype: DataType) -> Result<(), CopyError> {
        if !self.one_stream() {
            return Err(CopyError::Range(NcclError::usage(
                "copy",
                "the buffers are on different streams",
            )));
        }
        let elem = dtype.size_bytes();
        let spans = self.spans();
        let src = locate(&spans, from, count, elem, self.shift).map_err(CopyError::Range)?;
        let dst = locate(&spans, to, count, elem, self.shift).map_err(CopyError::Range)?;
        if count == 0 {
            return Ok(());
        }
        let stream = &self.recv.stream;
        stream.context().bind_to_thread().map_err(CopyError::Cuda)?;
        // SAFETY: `src..src+count*elem` and `dst..dst+count*elem` lie inside
        // live allocations (checked by `locate`) that are freed only after
        // their stream has finished its work (`DeviceMemory::drop`), and the
        // copy is ordered on that stream.
        unsafe { cudarc::driver::result::memcpy_dtod_async(dst, src, count * elem, stream.cu_stream()) }
            .map_err(CopyError::Cuda)
    }
}

/// The device address of `len` elements of `elem` bytes at `at`, checked to
/// lie inside its buffer; `Send` and `Recv` positions move `shift` elements
/// further, `Scratch` positions stay.
fn locate(spans: &Spans, at: At, len: usize, elem: usize, shift: usize) -> Result<u64, NcclError> {
    let (_, base, bytes) = spans
        .iter()
        .copied()
        .find(|b| b.0 == at.buf)
        .ok_or_else(|| NcclError::usage("launch", "no such buffer"))?;
    let shift = if at.buf == Buf::Scratch { 0 } else { shift };
    let offset = at
        .offset
        .checked_add(shift)
        .ok_or_else(|| NcclError::usage("launch", "element range overflows"))?;
    let end = offset
        .checked_add(len)
        .and_then(|e| e.checked_mul(elem))
        .ok_or_else(|| NcclError::usage("launch", "element range overflows"))?;
    if end > bytes {
        return Err(NcclError::usage("launch", "element range beyond its device buffer"));
    }
    Ok(base + (offset * elem) as u64)
}

/// A failed device-to-device copy.
#[derive(Debug, Error)]
pub enum CopyError {
    #[error("{0}")]
    Range(NcclError),
    #[error("cuMemcpyDtoDAsync failed: {}", super::device::driver_text(.0))]
    Cuda(DriverError),
}

/// A communicator. Destroyed when dropped (after releasing its buffer
/// registrations); `Drop` never panics and reports nothing (an error while
/// tearing down is of no use to anyone).
pub struct Comm {
    raw: RawComm,
    api: Arc<Api>,
    nranks: usize,
    scratch: Vec<(Op, [u64; 2], c_int)>,
    /// Buffers registered with this communicator (`-R`): device address
    /// and NCCL's handle.
    registered: Vec<(u64, *mut c_void)>,
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("nranks", &self.nranks)
            .finish_non_exhaustive()
    }
}

impl Comm {
    fn wrap(raw: RawComm, api: &Arc<Api>, nranks: usize) -> Comm {
        Comm {
            raw,
            api: Arc::clone(api),
            nranks,
            scratch: Vec::new(),
            registered: Vec::new(),
        }
    }

    pub fn nranks(&self) -> usize {
        self.nranks
    }

    /// `ncclCommSplit`: the ranks that pass the same `color` get one new
    /// communicator, their ranks ordered by `key`. Collective over this
    /// communicator: every rank calls it, in the same order. The new
    /// communicator inherits this one's configuration.
    pub fn split(&self, color: usize, key: usize) -> Result<Comm, NcclError> {
        let Some(split) = self.api.comm_split else {
            return Err(NcclError::usage("ncclCommSplit", "not in this NCCL library"));
        };
        let color = c_int::try_from(color).map_err(|_| NcclError::usage("ncclCommSplit", "color out of range"))?;
        let key = c_int::try_from(key).map_err(|_| NcclError::usage("ncclCommSplit", "key out of range"))?;
        let mut new: RawComm = std::ptr::null_mut();
        // SAFETY: `self.raw` is a live communicator and `new` a valid
        // out-pointer; a NULL config asks NCCL to inherit the parent's
        // (nccl.h). The color is never NCCL_SPLIT_NOCOLOR (-1: colors here
        // are indices), so NCCL returns a communicator or an error.
        let rc = unsafe { split(self.raw, color, key, &mut new, std::ptr::null_mut()) };
        self.api.check("ncclCommSplit", rc, Some(self.raw))?;
        if new.is_null() {
            return Err(NcclError::usage("ncclCommSplit", "returned no communicator"));
        }
        let mut comm = Comm::wrap(new, &self.api, 0);
        comm.nranks = usize::try_from(comm.count()?).unwrap_or(0);
        Ok(comm)
    }

    /// `ncclCommRegister` of the whole of `memory` (`-R`); registering the
    /// same buffer again does nothing. The owner of `memory` calls
    /// `deregister` before freeing it; whatever is still registered is
    /// released before the communicator is destroyed.
    pub fn register(&mut self, memory: &DeviceMemory) -> Result<(), NcclError> {
        let Some(register) = self.api.comm_register else {
            return Err(NcclError::usage("ncclCommRegister", "not in this NCCL library"));
        };
        if self.api.comm_deregister.is_none() {
            return Err(NcclError::usage("ncclCommDeregister", "not in this NCCL library"));
        }
        let address = memory.raw_ptr();
        if self.registered.iter().any(|r| r.0 == address) {
            return Ok(());
        }
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: `self.raw` is live; `address..address+len_bytes` is a live
        // device allocation that stays allocated until `deregister` (the
        // owner's duty, above) or until this communicator is destroyed,
        // which releases the handle first; `handle` is a valid out-pointer.
        let rc = unsafe { register(self.raw, address as *mut c_void, memory.len_bytes(), &mut handle) };
        self.api.check("ncclCommRegister", rc, Some(self.raw))?;
        self.registered.push((address, handle));
        Ok(())
    }

    /// Releases the registration of `memory`, if it has one.
    pub fn deregister(&mut self, memory: &DeviceMemory) {
        if let Some(i) = self.registered.iter().position(|r| r.0 == memory.raw_ptr()) {
            let (_, handle) = self.registered.swap_remove(i);
            self.release(handle);
        }
    }

    /// `ncclCommDeregister`; errors are ignored (the buffer is about to be
    /// freed, or the communicator destroyed).
    fn release(&self, handle: *mut c_void) {
        if let Some(deregister) = self.api.comm_deregister {
            // SAFETY: `self.raw` is live and `handle` came from
            // ncclCommRegister on it and is released exactly once.
            let _ = unsafe { deregister(self.raw, handle) };
        }
    }

    fn query_int(&self, call: &'static str, f: CommIntFn) -> Result<i32, NcclError> {
        let mut v: c_int = 0;
        // SAFETY: `self.raw` is a live communicator (owned, not yet
        // destroyed) and `v` a valid out-pointer.
        let rc = unsafe { f(self.raw, &mut v) };
        self.api.check(call, rc, Some(self.raw))?;
        Ok(v)
    }

    /// `ncclCommUserRank`.
    pub fn user_rank(&self) -> Result<i32, NcclError> {
        self.query_int("ncclCommUserRank", self.api.comm_user_rank)
    }

    /// `ncclCommCount`.
    pub fn count(&self) -> Result<i32, NcclError> {
        self.query_int("ncclCommCount", self.api.comm_count)
    }

    /// `ncclCommCuDevice`.
    pub fn cu_device(&self) -> Result<i32, NcclError> {
        self.query_int("ncclCommCuDevice", self.api.comm_cu_device)
    }

    /// `ncclCommGetAsyncError`: `Ok` while the communicator is healthy (or
    /// still working), the error once NCCL has seen one (a peer died, a
    /// network failure, a CUDA error in its kernels).
    pub fn async_error(&self) -> Result<(), NcclError> {
        let mut state: NcclResult = NCCL_SUCCESS;
        // SAFETY: live communicator, valid out-pointer.
        let rc = unsafe { (self.api.comm_get_async_error)(self.raw, &mut state) };
        self.api.check("ncclCommGetAsyncError", rc, Some(self.raw))?;
        if state == NCCL_IN_PROGRESS {
            return Ok(());
        }
        self.api.check("a pending NCCL operation", state, Some(self.raw))
    }

    /// `ncclCommAbort`: frees the communicator without waiting for peers,
    /// for use after an error.
    pub fn abort(mut self) {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: `raw` is live; `self.raw` is now null, so Drop does not
        // release it a second time.
        let _ = unsafe { (self.api.comm_abort)(raw) };
    }

    /// Enqueues `launch` on the stream of the buffers (positions rotated by
    /// `bufs.shift`). Every pointer range is checked against its buffer
    /// first, so NCCL never gets a pointer outside a live allocation.
    pub fn launch(&mut self, launch: &Launch, dtype: DataType, bufs: &Buffers) -> Result<(), NcclError> {
        if !bufs.one_stream() {
            return Err(NcclError::usage("launch", "the buffers are on different streams"));
        }
        let elem = dtype.size_bytes();
        let dt = dtype as c_int;
        let stream = bufs.recv.raw_stream();
        let spans = bufs.spans();
        let ptr = |at: At, len: usize| locate(&spans, at, len, elem, bufs.shift);
        let int = |v: usize, what: &str| c_int::try_from(v).map_err(|_| NcclError::usage("launch", what));
        // Check and convert everything before enqueuing anything, so that a
        // refusal never leaves a group open or half a launch enqueued.
        // `scratch` keeps its capacity between launches: nothing allocates
        // in the timed loop.
        let mut resolved = std::mem::take(&mut self.scratch);
        resolved.clear();
        for op in &launch.ops {
            let mut ptrs = [0u64; 2];
            for (i, extent) in op.extents(self.nranks).into_iter().enumerate() {
                if let Some((at, len)) = extent {
                    ptrs[i] = ptr(at, len)?;
                }
            }
            let param = match *op {
                Op::Broadcast { root, .. }
                | Op::Reduce { root, .. }
                | Op::Gather { root, .. }
                | Op::Scatter { root, .. } => int(root, "root out of range")?,
                Op::Send { peer, .. } | Op::Recv { peer, .. } => int(peer, "peer out of range")?,
                _ => 0,
            };
            let missing = match op {
                Op::AlltoAll { .. } if self.api.alltoall.is_none() => Some("ncclAlltoAll"),
                Op::Gather { .. } if self.api.gather.is_none() => Some("ncclGather"),
                Op::Scatter { .. } if self.api.scatter.is_none() => Some("ncclScatter"),
                _ => None,
            };
            if let Some(name) = missing {
                return Err(NcclError::usage(name, "not in this NCCL library"));
            }
            resolved.push((*op, ptrs, param));
        }

        if launch.grouped {
            // SAFETY: ncclGroupStart takes no arguments.
            let rc = unsafe { (self.api.group_start)() };
            self.api.check("ncclGroupStart", rc, Some(self.raw))?;
        }
        let mut first_error = Ok(());
        for &(op, [p0, p1], param) in &resolved {
            let c = self.raw;
            let (name, rc) = self.enqueue(op, p0, p1, param, dt, stream);
            if let Err(e) = self.api.check(name, rc, Some(c)) {
                first_error = Err(e);
                break;
            }
        }
        if launch.grouped {
            // A group that was opened is always closed, even after an error.
            // SAFETY: ncclGroupEnd takes no arguments.
            let rc = unsafe { (self.api.group_end)() };
            self.scratch = resolved;
            first_error?;
            return self.api.check("ncclGroupEnd", rc, Some(self.raw));
        }
        self.scratch = resolved;
        first_error
    }

    /// Enqueues `launch` once per shift in `shifts`, all inside one NCCL
    /// group (`-m`, as nccl-tests aggregates): NCCL starts them together.
    /// Groups nest, so a launch that is itself grouped stays correct. The
    /// group that was opened is always closed, even after an error.
    pub fn launch_group(
        &mut self,
        launch: &Launch,
        dtype: DataType,
        bufs: &Buffers,
        shifts: impl Iterator<Item = usize>,
    ) -> Result<(), NcclError> {
        // SAFETY: ncclGroupStart takes no arguments.
        let rc = unsafe { (self.api.group_start)() };
        self.api.check("ncclGroupStart", rc, Some(self.raw))?;
        let mut first_error = Ok(());
        for shift in shifts {
            if let Err(e) = self.launch(launch, dtype, &Buffers { shift, ..*bufs }) {
                first_error = Err(e);
                break;
            }
        }
        // SAFETY: ncclGroupEnd takes no arguments.
        let rc = unsafe { (self.api.group_end)() };
        first_error?;
        self.api.check("ncclGroupEnd", rc, Some(self.raw))
    }

    /// Enqueues one NCCL call. `p0` and `p1` are the op's two device
    /// pointers in `Op::extents` order, already checked to lie inside live
    /// allocations with room for every element NCCL touches; `stream` is the
    /// stream those allocations are freed on, so they outlive the enqueued
    /// work; `param` is the root or peer, which NCCL checks against the
    /// communicator's size; optional entry points were checked to exist.
    fn enqueue(
        &self,
        op: Op,
        p0: u64,
        p1: u64,
        param: c_int,
        dt: c_int,
        stream: RawStream,
    ) -> (&'static str, NcclResult) {
        let (a, b) = (p0 as *const c_void, p1 as *mut c_void);
        let c = self.raw;
        let api = &self.api;
        // ncclInvalidArgument, for an entry point that is absent after all.
        let absent = 4;
        match op {
            Op::AllReduce { count, op, .. } => {
                // SAFETY: see the method comment; `a` holds `count` elements, `b` too.
                ("ncclAllReduce", unsafe {
                    (api.all_reduce)(a, b, count, dt, op as c_int, c, stream)
                })
            }
            Op::Broadcast { count, .. } => {
                // SAFETY: see the method comment; `a` and `b` hold `count` elements.
                ("ncclBroadcast", unsafe {
                    (api.broadcast)(a, b, count, dt, param, c, stream)
                })
            }
            Op::Reduce { count, op, .. } => {
                // SAFETY: see the method comment; `a` and `b` hold `count` elements.
                ("ncclReduce", unsafe {
                    (api.reduce)(a, b, count, dt, op as c_int, param, c, stream)
                })
            }
            Op::AllGather { count, .. } => {
                // SAFETY: see the method comment; `a` holds `count`, `b` nranks*count.
                ("ncclAllGather", unsafe { (api.all_gather)(a, b, count, dt, c, stream) })
            }
            Op::ReduceScatter { count, op, .. } => {
                // SAFETY: see the method comment; `a` holds nranks*count, `b` count.
                ("ncclReduceScatter", unsafe {
                    (api.reduce_scatter)(a, b, count, dt, op as c_int, c, stream)
                })
            }
            Op::AlltoAll { count, .. } => match api.alltoall {
                // SAFETY: see the method comment; `a` and `b` hold nranks*count.
                Some(f) => ("ncclAlltoAll", unsafe { f(a, b, count, dt, c, stream) }),
                None => ("ncclAlltoAll", absent),
            },
            Op::Gather { count, .. } => match api.gather {
                // SAFETY: see the method comment; `a` holds count, `b` nranks*count.
                Some(f) => ("ncclGather", unsafe { f(a, b, count, dt, param, c, stream) }),
                None => ("ncclGather", absent),
            },
            Op::Scatter { count, .. } => match api.scatter {
                // SAFETY: see the method comment; `a` holds nranks*count, `b` count.
                Some(f) => ("ncclScatter", unsafe { f(a, b, count, dt, param, c, stream) }),
                None => ("ncclScatter", absent),
            },
            Op::Send { count, .. } => {
                // SAFETY: see the method comment; `a` holds `count` elements.
                ("ncclSend", unsafe { (api.send)(a, count, dt, param, c, stream) })
            }
            Op::Recv { count, .. } => {
                // A receive has one pointer, its output: the first extent.
                // SAFETY: see the method comment; it holds `count` elements.
                ("ncclRecv", unsafe {
                    (api.recv)(p0 as *mut c_void, count, dt, param, c, stream)
                })
            }
        }
    }
}

impl Drop for Comm {
    fn drop(&mut self) {
        // ncclCommDestroy waits for outstanding work on this communicator;
        // after a failure the owner calls `abort` instead. Errors are
        // ignored: there is nobody to tell, and Drop must not panic.
        if self.raw.is_null() {
            return; // aborted (which releases the registrations too)
        }
        for (_, handle) in std::mem::take(&mut self.registered) {
            self.release(handle);
        }
        // SAFETY: `self.raw` is live and released exactly once, here.
        let _ = unsafe { (self.api.comm_destroy)(self.raw) };
    }
}

// ---------------------------------------------------------------------------
// Device memory

/// One device allocation, ordered on one stream: every copy into or out of
/// it, and every NCCL call that uses it, goes on that stream.
pub struct DeviceMemory {
    ptr: cudarc::driver::sys::CUdeviceptr,
    len: usize,
    stream: Arc<CudaStream>,
    /// The library whose ncclMemAlloc made it (freed with ncclMemFree);
    /// `None`: cuMemAlloc.
    nccl: Option<Arc<Api>>,
}

/// A failed device allocation.
#[derive(Debug, Error)]
pub enum AllocError {
    #[error("{}", super::device::driver_text(.0))]
    Cuda(DriverError),
    #[error("{0}")]
    Nccl(NcclError),
}

impl From<DriverError> for AllocError {
    fn from(e: DriverError) -> AllocError {
        AllocError::Cuda(e)
    }
}

impl fmt::Debug for DeviceMemory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceMemory")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl DeviceMemory {
    /// `len` zeroed bytes on the stream's device (at least one byte is
    /// allocated, so that every buffer has a real address).
    ///
    /// With `nccl` (NCCL 2.19 and later, as nccl-tests' AllocateBuffs), the
    /// memory comes from ncclMemAlloc, which NVLS buffer registration (`-R`)
    /// and CUDA graphs of registered buffers need; else from cuMemAlloc, as
    /// nccl-tests' cudaMalloc before 2.19.
    pub fn alloc(stream: &Arc<CudaStream>, len: usize, nccl: Option<&Arc<Api>>) -> Result<DeviceMemory, AllocError> {
        stream.context().bind_to_thread()?;
        let bytes = len.max(1);
        let (ptr, nccl) = match nccl.and_then(|api| api.mem_alloc.map(|f| (api, f))) {
            Some((api, mem_alloc)) => {
                let mut p: *mut c_void = std::ptr::null_mut();
                // SAFETY: ncclMemAlloc(void**, size_t) writes one pointer to
                // `bytes` bytes on the current device (the stream's context
                // is current); it is owned below and freed once, in Drop.
                let rc = unsafe { mem_alloc(&mut p, bytes) };
                api.check("ncclMemAlloc", rc, None).map_err(AllocError::Nccl)?;
                (p as u64, Some(Arc::clone(api)))
            }
            // SAFETY: cuMemAlloc with the stream's context current; the
            // pointer is owned by the value returned below and freed once,
            // in Drop.
            None => (unsafe { cudarc::driver::result::malloc_sync(bytes) }?, None),
        };
        let memory = DeviceMemory {
            ptr,
            len,
            stream: Arc::clone(stream),
            nccl,
        };
        // SAFETY: `ptr` is a live allocation of `bytes` bytes.
        unsafe { cudarc::driver::result::memset_d8_async(ptr, 0, bytes, stream.cu_stream()) }?;
        stream.synchronize()?;
        Ok(memory)
    }

    pub fn len_bytes(&self) -> usize {
        self.len
    }

    fn raw_ptr(&self) -> u64 {
        self.ptr
    }

    /// The stream this memory is ordered on, as NCCL's `cudaStream_t`.
    fn raw_stream(&self) -> RawStream {
        self.stream.cu_stream().cast()
    }

    fn same_stream(&self, other: &DeviceMemory) -> bool {
        Arc::ptr_eq(&self.stream, &other.stream)
    }

    /// Byte offset `offset` and `n` bytes from it, if inside the buffer.
    fn range(&self, offset: usize, n: usize) -> Option<u64> {
        let end = offset.checked_add(n)?;
        (end <= self.len).then_some(self.ptr + offset as u64)
    }

    /// Copies `host` to byte `offset`, after everything enqueued before;
    /// returns when the copy is done. `None` when the range is outside.
    pub fn upload(&mut self, offset: usize, host: &[u8]) -> Option<Result<(), DriverError>> {
        let dst = self.range(offset, host.len())?;
        if host.is_empty() {
            return Some(Ok(()));
        }
        Some(self.stream.context().bind_to_thread().and_then(|()| {
            // SAFETY: `dst..dst+host.len()` lies inside this live allocation
            // (checked by `range`); `host` stays borrowed until the stream
            // is synchronized below, so the asynchronous copy reads valid
            // memory.
            unsafe { cudarc::driver::result::memcpy_htod_async(dst, host, self.stream.cu_stream()) }?;
            self.stream.synchronize()
        }))
    }

    /// Copies bytes from `offset` into `host`, after everything enqueued
    /// before; returns when the copy is done. `None` when outside.
    pub fn download(&self, offset: usize, host: &mut [u8]) -> Option<Result<(), DriverError>> {
        let src = self.range(offset, host.len())?;
        if host.is_empty() {
            return Some(Ok(()));
        }
        Some(self.stream.context().bind_to_thread().and_then(|()| {
            // SAFETY: `src..src+host.len()` lies inside this live allocation;
            // `host` is exclusively borrowed until the stream is
            // synchronized below, so nothing else sees it being written.
            unsafe { cudarc::driver::result::memcpy_dtoh_async(host, src, self.stream.cu_stream()) }?;
            self.stream.synchronize()
        }))
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // Work still queued may use this memory: wait for it, then free.
        // Errors are ignored (a failed run is being torn down), and Drop
        // must not panic.
        let _ = self.stream.context().bind_to_thread();
        let _ = self.stream.synchronize();
        match self.nccl.as_ref().and_then(|api| api.mem_free) {
            Some(mem_free) => {
                // SAFETY: `self.ptr` came from this library's ncclMemAlloc
                // and is freed exactly once.
                let _ = unsafe { mem_free(self.ptr as *mut c_void) };
            }
            None => {
                // SAFETY: `self.ptr` came from cuMemAlloc and is freed exactly once.
                let _ = unsafe { cudarc::driver::result::free_sync(self.ptr) };
            }
        }
    }
}

// ---------------------------------------------------------------------------
// NVTX ranges, for Nsight Systems timelines

/// `nvtxRangePushA(const char*)` and `nvtxRangePop()` (nvToolsExt.h).
type NvtxPushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type NvtxPopFn = unsafe extern "C" fn() -> c_int;

/// libnvToolsExt, where it is installed. Under `nsys profile` it forwards
/// ranges to the profiler (which it finds through NVTX_INJECTION64_PATH);
/// otherwise each call returns at once. Where the library is absent there is
/// no `Nvtx` at all, so ranges cost nothing.
pub struct Nvtx {
    push: NvtxPushFn,
    pop: NvtxPopFn,
    path: PathBuf,
    _library: libloading::Library,
}

impl fmt::Debug for Nvtx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nvtx").field("path", &self.path).finish_non_exhaustive()
    }
}

impl Nvtx {
    /// The first candidate (a path, or a bare name for the loader) that
    /// loads and has both entry points.
    pub fn load_first(candidates: &[PathBuf]) -> Option<Nvtx> {
        candidates.iter().find_map(|c| {
            if c.components().count() > 1 && !c.exists() {
                return None;
            }
            // SAFETY: loads the NVTX library by its documented names; its
            // initialisers only set up its own dispatch table.
            let library = unsafe { libloading::Library::new(c) }.ok()?;
            // SAFETY: the symbols are looked up with nvToolsExt.h's types and
            // kept only beside the library that maps them.
            let push = unsafe { library.get::<NvtxPushFn>(b"nvtxRangePushA") }
                .ok()
                .map(|f| *f)?;
            // SAFETY: as above.
            let pop = unsafe { library.get::<NvtxPopFn>(b"nvtxRangePop") }.ok().map(|f| *f)?;
            Some(Nvtx {
                push,
                pop,
                path: c.clone(),
                _library: library,
            })
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Opens a range named `label` on the calling thread.
    pub fn push(&self, label: &CStr) {
        // SAFETY: `label` is NUL-terminated and outlives the call; NVTX
        // copies what it keeps.
        let _ = unsafe { (self.push)(label.as_ptr()) };
    }

    /// Closes the calling thread's innermost range.
    pub fn pop(&self) {
        // SAFETY: nvtxRangePop takes no arguments; an unmatched pop is
        // ignored by NVTX.
        let _ = unsafe { (self.pop)() };
    }
}

// ---------------------------------------------------------------------------
// The CUDA driver library, checked before cudarc touches it

/// Every driver entry point that cudarc calls for what this backend does
/// (context, stream, events and their timing, allocation, copies, device
/// queries). cudarc resolves them lazily and panics on a missing one.
/// Allocation is cuMemAlloc/cuMemFree only (`DeviceMemory`): the
/// stream-ordered cuMemAllocAsync/cuMemFreeAsync are never called, so a
/// driver without them is not refused.
pub const CUDA_SYMBOLS: [&str; 33] = [
    "cuInit",
    "cuDriverGetVersion",
    "cuDeviceGet",
    "cuDeviceGetCount",
    "cuDeviceGetName",
    "cuDeviceGetAttribute",
    "cuDeviceTotalMem_v2",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuCtxSetCurrent",
    "cuCtxGetCurrent",
    "cuCtxSynchronize",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
    "cuEventElapsedTime",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemGetInfo_v2",
    "cuMemsetD8Async",
    "cuMemsetD8_v2",
    "cuMemcpyHtoDAsync_v2",
    "cuMemcpyDtoHAsync_v2",
    "cuMemcpyDtoDAsync_v2",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetUuid",
];

/// The driver entry points that CUDA graph capture and replay (`-G`) use
/// through cudarc (CUDA 11.4 and later drivers have them all).
pub const GRAPH_SYMBOLS: [&str; 7] = [
    "cuStreamBeginCapture_v2",
    "cuStreamEndCapture",
    "cuGraphInstantiateWithFlags",
    "cuGraphUpload",
    "cuGraphLaunch",
    "cuGraphExecDestroy",
    "cuGraphDestroy",
];

/// The symbols of `names` that the driver library `library` (as
/// `check_cuda_driver` found it) lacks; all of them when it cannot be
/// loaded.
pub fn missing_driver_symbols(library: &str, names: &[&str]) -> Vec<String> {
    // SAFETY: loads the driver library that `check_cuda_driver` already
    // loaded under this name; the loader hands back the same mapping.
    let Ok(lib) = (unsafe { libloading::Library::new(library) }) else {
        return names.iter().map(|s| s.to_string()).collect();
    };
    names
        .iter()
        .filter(|s| !has_symbol(&lib, s))
        .map(|s| s.to_string())
        .collect()
}

/// The CUDA driver library that cudarc will load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaDriver {
    /// The name or path that loaded (cudarc tries the same names in the same
    /// order, so it loads the same file).
    pub library: String,
    /// `cuDriverGetVersion`: e.g. 12040 for CUDA 12.4.
    pub version: i32,
}

impl CudaDriver {
    /// "12.4" from 12040.
    pub fn version_text(&self) -> String {
        format!("{}.{}", self.version / 1000, self.version % 1000 / 10)
    }
}

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum DriverMissing {
    #[error("no CUDA driver: {} cannot be loaded ({why}); run on a machine with an NVIDIA GPU and its driver", .tried.join(", "))]
    NotLoadable { tried: Vec<String>, why: String },
    #[error("the CUDA driver {library} is too old: it lacks {}; update the NVIDIA driver", .missing.join(", "))]
    Symbols { library: String, missing: Vec<String> },
}

/// Loads the driver library under the names cudarc tries, checks that it
/// has every symbol cudarc will call, and reads its version. Until this has
/// succeeded, nothing may call into `cudarc::driver`.
pub fn check_cuda_driver() -> Result<CudaDriver, DriverMissing> {
    let names = cudarc::get_lib_name_candidates("cuda");
    let mut why = String::new();
    for name in &names {
        // SAFETY: loads the NVIDIA driver library by one of the names cudarc
        // itself would use; its initialisers are the driver's own.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => {
                let missing: Vec<String> = CUDA_SYMBOLS
                    .iter()
                    .filter(|s| !has_symbol(&library, s))
                    .map(|s| s.to_string())
                    .collect();
                if !missing.is_empty() {
                    return Err(DriverMissing::Symbols {
                        library: name.clone(),
                        missing,
                    });
                }
                type DriverGetVersionFn = unsafe extern "C" fn(*mut c_int) -> c_int;
                let mut version: c_int = 0;
                // SAFETY: cuDriverGetVersion(int*) is declared so in cuda.h;
                // it needs no cuInit and writes one int.
                let rc = unsafe {
                    match library.get::<DriverGetVersionFn>(b"cuDriverGetVersion") {
                        Ok(f) => f(&mut version),
                        Err(_) => 1,
                    }
                };
                if rc != 0 {
                    version = 0;
                }
                return Ok(CudaDriver {
                    library: name.clone(),
                    version,
                });
            }
            Err(e) => {
                if why.is_empty() {
                    why = short_dl_error(&e, Path::new(name));
                }
            }
        }
    }
    // cudarc's list has many Windows-style names; the user needs the first
    // Linux ones.
    let mut tried: Vec<String> = Vec::new();
    for n in names.into_iter().filter(|n| n.starts_with("libcuda.so")) {
        if !tried.contains(&n) {
            tried.push(n);
        }
    }
    Err(DriverMissing::NotLoadable { tried, why })
}

/// Total memory of a device, without opening a context on it (`info`).
/// Call only after `check_cuda_driver` succeeded and cuInit returned.
pub fn device_total_mem(dev: cudarc::driver::sys::CUdevice) -> Result<usize, DriverError> {
    // SAFETY: cudarc requires `dev` to come from cuDeviceGet, which is the
    // only way callers obtain one (`cudarc::driver::result::device::get`).
    unsafe { cudarc::driver::result::device::total_mem(dev) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_decode_both_encodings() {
        assert_eq!(NcclVersion::from_code(22105).to_string(), "2.21.5");
        assert_eq!(NcclVersion::from_code(23203).to_string(), "2.32.3");
        assert_eq!(NcclVersion::from_code(21003).to_string(), "2.10.3");
        // before 2.9: X*1000 + Y*100 + Z
        assert_eq!(NcclVersion::from_code(2804).to_string(), "2.8.4");
        assert_eq!(NcclVersion::from_code(2708).to_string(), "2.7.8");
        assert!(NcclVersion::from_code(21003) >= NcclVersion::new(2, 10, 0));
        assert!(NcclVersion::from_code(2804) < NcclVersion::new(2, 10, 0));
    }

    #[test]
    fn enum_values_are_nccl_h_s() {
        assert_eq!(DataType::Int8 as i32, 0);
        assert_eq!(DataType::Uint8 as i32, 1);
        assert_eq!(DataType::Int32 as i32, 2);
        assert_eq!(DataType::Uint32 as i32, 3);
        assert_eq!(DataType::Int64 as i32, 4);
        assert_eq!(DataType::Uint64 as i32, 5);
        assert_eq!(DataType::Float16 as i32, 6);
        assert_eq!(DataType::Float32 as i32, 7);
        assert_eq!(DataType::Float64 as i32, 8);
        assert_eq!(DataType::Bfloat16 as i32, 9);
        assert_eq!(RedOp::Sum as i32, 0);
        assert_eq!(RedOp::Prod as i32, 1);
        assert_eq!(RedOp::Max as i32, 2);
        assert_eq!(RedOp::Min as i32, 3);
        assert_eq!(RedOp::Avg as i32, 4);
        assert_eq!(size_of::<RawUniqueId>(), 128);
    }

    #[test]
    fn extents_cover_what_each_call_touches() {
        let s = At {
            buf: Buf::Send,
            offset: 0,
        };
        let r = At {
            buf: Buf::Recv,
            offset: 4,
        };
        assert_eq!(
            Op::AllGather {
                send: s,
                recv: r,
                count: 3
            }
            .extents(4),
            [Some((s, 3)), Some((r, 12))]
        );
        assert_eq!(
            Op::ReduceScatter {
                send: s,
                recv: r,
                count: 3,
                op: RedOp::Sum
            }
            .extents(4),
            [Some((s, 12)), Some((r, 3))]
        );
        assert_eq!(
            Op::Recv {
                recv: r,
                count: 5,
                peer: 1
            }
            .extents(4),
            [Some((r, 5)), None]
        );
    }

    #[test]
    fn positions_rotate_in_send_and_recv_but_not_in_scratch() {
        // 4-byte elements; send 64 bytes at 0x1000, recv 64 at 0x2000,
        // scratch 16 at 0x3000
        let spans: Spans = [
            (Buf::Send, 0x1000, 64),
            (Buf::Recv, 0x2000, 64),
            (Buf::Scratch, 0x3000, 16),
        ];
        let at = |buf, offset| At { buf, offset };
        assert_eq!(locate(&spans, at(Buf::Send, 2), 4, 4, 0).unwrap(), 0x1008);
        assert_eq!(locate(&spans, at(Buf::Recv, 1), 4, 4, 3).unwrap(), 0x2000 + 16);
        assert_eq!(locate(&spans, at(Buf::Scratch, 1), 3, 4, 3).unwrap(), 0x3004);
        // the last element fits; one more does not
        assert!(locate(&spans, at(Buf::Recv, 12), 4, 4, 0).is_ok());
        assert!(locate(&spans, at(Buf::Recv, 12), 5, 4, 0).is_err());
        assert!(locate(&spans, at(Buf::Recv, 0), 16, 4, 1).is_err());
        assert!(locate(&spans, at(Buf::Scratch, 0), 5, 4, 0).is_err());
        let e = locate(&spans, at(Buf::Send, usize::MAX), 1, 4, 1).unwrap_err();
        assert!(e.to_string().contains("overflows"), "{e}");
    }

    #[test]
    fn a_missing_file_is_an_attempt_not_a_panic() {
        let c = Candidate {
            route: Route::Env,
            target: PathBuf::from("/nonexistent/libnccl.so.2"),
        };
        match Api::load_first(&[c]) {
            Err(LoadError::NotFound { tried }) => {
                assert_eq!(tried.len(), 1);
                assert_eq!(tried[0].why, "no such file");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_library_without_nccl_symbols_is_refused_with_their_names() {
        // libc is on every Linux machine and has none of NCCL's symbols.
        let c = Candidate {
            route: Route::Loader,
            target: PathBuf::from("libc.so.6"),
        };
        match Api::load_first(&[c]) {
            Err(LoadError::NotFound { tried }) => {
                assert!(tried[0].why.contains("lacks ncclGetVersion"), "{}", tried[0].why);
                assert!(tried[0].why.contains("ncclRecv"), "{}", tried[0].why);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn nvtx_is_absent_rather_than_broken_when_no_library_has_it() {
        assert!(Nvtx::load_first(&[PathBuf::from("/nonexistent/libnvToolsExt.so.1")]).is_none());
        assert!(Nvtx::load_first(&[PathBuf::from("libc.so.6")]).is_none());
        assert!(Nvtx::load_first(&[]).is_none());
    }

    #[test]
    fn a_file_that_is_not_a_library_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("libnccl.so.2");
        std::fs::write(&f, "not an ELF file\n").unwrap();
        let c = Candidate {
            route: Route::Option,
            target: f,
        };
        match Api::load_first(&[c]) {
            Err(e @ LoadError::NotFound { .. }) => {
                let m = e.to_string();
                assert!(m.contains("--nccl-lib"), "{m}");
                assert!(!m.contains('\n'), "{m}");
            }
            other => panic!("{other:?}"),
        }
    }
}
