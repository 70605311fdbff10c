//! The C side of the NCCL binding: the types and entry points of nccl.h
//! (and of nvToolsExt.h, and the CUDA driver symbols cudarc calls), resolved
//! from a library found at run time. Every required symbol is resolved at
//! load time, so a missing one is a reason in the attempt list and never a
//! later panic; optional symbols (newer API) are `Option`s. Nothing here
//! calls an entry point: `result` does.
//!
//! Facts used, from nccl.h: `NCCL_UNIQUE_ID_BYTES` is 128; enums are C
//! `int`s; `NCCL_VERSION_CODE` is `major*10000 + minor*100 + patch` from 2.9
//! on and `major*1000 + minor*100 + patch` before. The ABI check
//! (tests/it/gpu_sim.rs) reads this file's declarations and compiles them
//! against the real nccl.h.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_void};
use std::fmt;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// nccl.h

/// `ncclResult_t`.
pub(super) type NcclResult = c_int;
/// `ncclComm_t`: an opaque pointer.
pub(super) type RawComm = *mut c_void;
/// `ncclWindow_t`: an opaque pointer (NCCL 2.27 and later).
pub(super) type RawWindow = *mut c_void;
/// `cudaStream_t` (the same object as the driver's `CUstream`).
pub(super) type RawStream = *mut c_void;
/// `ncclDataType_t` and `ncclRedOp_t`: C enums, passed as `int`s. Named
/// apart so that the ABI check (tests/it/gpu_sim.rs) maps each parameter to
/// its nccl.h type.
pub(super) type RawDataType = c_int;
pub(super) type RawRedOp = c_int;

pub(super) const NCCL_SUCCESS: NcclResult = 0;
/// `ncclInProgress`: a non-blocking communicator is still working.
pub(super) const NCCL_IN_PROGRESS: NcclResult = 7;

pub const UNIQUE_ID_BYTES: usize = 128;

/// `ncclConfig_t` up to `graphStreamOrdering` (2.30.7's layout; nccl.h:
/// "a versioned, append-only struct", so every release's struct is a
/// prefix of this one, and 2.31's fields follow it). `size` and `version`
/// tell NCCL which fields the caller knows of; NCCL reads that many bytes
/// and keeps its own defaults for the rest. `RawConfig::for_version` fills
/// it as a program compiled against the loaded release's nccl.h would.
/// The ABI check compares every offset with nccl.h.
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
    graph_usage_mode: c_int,
    num_rma_ctx: c_int,
    max_p2p_peers: c_int,
    graph_stream_ordering: c_int,
}

/// `NCCL_API_MAGIC` and `NCCL_CONFIG_UNDEF_INT` (nccl.h).
const NCCL_API_MAGIC: u32 = 0xcafe_beef;
const CONFIG_UNDEF_INT: c_int = c_int::MIN;

/// `nvlinkCentricSched`, which nccl-tests sets from NCCL 2.28 on.
const NVLINK_CENTRIC_SINCE: NcclVersion = NcclVersion::new(2, 28, 0);
/// `maxP2pPeers`, which nccl-tests' sendrecv sets from NCCL 2.30 on.
pub const MAX_P2P_PEERS_SINCE: NcclVersion = NcclVersion::new(2, 30, 0);
/// The "undefined" blocking value is accepted from NCCL 2.17 on; 2.14 to
/// 2.16 accept 0 and 1 only ("Invalid config blocking attribute value",
/// their init.cc), and their NCCL_CONFIG_INITIALIZER gives 1.
const UNDEF_BLOCKING_SINCE: NcclVersion = NcclVersion::new(2, 17, 0);

impl RawConfig {
    /// What nccl-tests' initComms passes when compiled against `version`'s
    /// nccl.h and run on it: NCCL_CONFIG_INITIALIZER of that release (its
    /// struct size, its version code, `blocking = 1` before 2.17 and every
    /// attribute undefined from 2.17 on), with `nvlinkCentricSched = 1`
    /// from 2.28 on; and, for a communicator of sendrecv (nccl-tests'
    /// SendRecvInitCommConfig), `maxP2pPeers = p2p_peers` from 2.30 on.
    pub fn for_version(version: NcclVersion, p2p_peers: Option<c_int>) -> RawConfig {
        let undef = CONFIG_UNDEF_INT;
        let since = |v: NcclVersion| version >= v;
        RawConfig {
            size: config_bytes(version),
            magic: NCCL_API_MAGIC,
            version: version_code(version),
            blocking: if since(UNDEF_BLOCKING_SINCE) { undef } else { 1 },
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
            nvlink_centric_sched: if since(NVLINK_CENTRIC_SINCE) { 1 } else { undef },
            graph_usage_mode: undef,
            num_rma_ctx: undef,
            max_p2p_peers: match p2p_peers {
                Some(peers) if since(MAX_P2P_PEERS_SINCE) => peers,
                _ => undef,
            },
            graph_stream_ordering: undef,
        }
    }

    /// (`size`, `version`, `blocking`, `nvlinkCentricSched`, `maxP2pPeers`).
    #[cfg(test)]
    fn key_fields(&self) -> KeyFields {
        (
            self.size,
            self.version,
            self.blocking,
            self.nvlink_centric_sched,
            self.max_p2p_peers,
        )
    }
}

#[cfg(test)]
type KeyFields = (usize, u32, c_int, c_int, c_int);

/// `NCCL_VERSION(X, Y, Z)` of nccl.h (2.9 and later).
fn version_code(v: NcclVersion) -> u32 {
    v.major * 10000 + v.minor * 100 + v.patch
}

/// `sizeof(ncclConfig_t)` in `version`'s nccl.h (NCCL's git history), or
/// this struct's size for the releases whose struct is longer: each is the
/// end of its last field, rounded up to the struct's 8-byte alignment.
fn config_bytes(version: NcclVersion) -> usize {
    use std::mem::offset_of;
    let end = |offset: usize| (offset + size_of::<c_int>()).next_multiple_of(align_of::<RawConfig>());
    let v = |minor| NcclVersion::new(2, minor, 0);
    if version < v(17) {
        end(offset_of!(RawConfig, blocking)) // ncclConfig_v21400
    } else if version < v(18) {
        offset_of!(RawConfig, split_share) // ncclConfig_v21700, up to netName
    } else if version < v(27) {
        end(offset_of!(RawConfig, traffic_class)) // + splitShare (2.18), trafficClass (2.26)
    } else if version < v(28) {
        end(offset_of!(RawConfig, nvls_ctas)) // ncclConfig_v22700
    } else if version < v(29) {
        end(offset_of!(RawConfig, nvlink_centric_sched)) // ncclConfig_v22800
    } else if version < v(30) {
        end(offset_of!(RawConfig, num_rma_ctx)) // + graphUsageMode, numRmaCtx
    } else {
        size_of::<RawConfig>() // + maxP2pPeers (2.30), graphStreamOrdering (2.30.5)
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
        ("graphUsageMode", offset_of!(RawConfig, graph_usage_mode)),
        ("numRmaCtx", offset_of!(RawConfig, num_rma_ctx)),
        ("maxP2pPeers", offset_of!(RawConfig, max_p2p_peers)),
        ("graphStreamOrdering", offset_of!(RawConfig, graph_stream_ordering)),
    ]
}

/// `ncclUniqueId`: passed by value to ncclCommInitRank.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct RawUniqueId {
    pub(super) internal: [c_char; UNIQUE_ID_BYTES],
}

type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> NcclResult;
type GetUniqueIdFn = unsafe extern "C" fn(*mut RawUniqueId) -> NcclResult;
type CommInitRankFn = unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int) -> NcclResult;
type CommInitRankConfigFn = unsafe extern "C" fn(*mut RawComm, c_int, RawUniqueId, c_int, *mut RawConfig) -> NcclResult;
type CommFn = unsafe extern "C" fn(RawComm) -> NcclResult;
pub(super) type CommIntFn = unsafe extern "C" fn(RawComm, *mut c_int) -> NcclResult;
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
/// ncclCommWindowRegister(comm, buff, size, win, winFlags) (NCCL 2.27)
type CommWindowRegisterFn = unsafe extern "C" fn(RawComm, *mut c_void, usize, *mut RawWindow, c_int) -> NcclResult;
/// ncclCommWindowDeregister(comm, win) (NCCL 2.27)
type CommWindowDeregisterFn = unsafe extern "C" fn(RawComm, RawWindow) -> NcclResult;
/// ncclMemAlloc(ptr, size)
type MemAllocFn = unsafe extern "C" fn(*mut *mut c_void, usize) -> NcclResult;
/// ncclMemFree(ptr)
type MemFreeFn = unsafe extern "C" fn(*mut c_void) -> NcclResult;
/// gpusimNcclSimulation(): the simulation's marker (tests/gpu-sim).
type SimulationFn = unsafe extern "C" fn() -> *const c_char;

/// Whether `library` has `name` at a non-NULL address (dlsym can find a
/// symbol whose address is NULL; calling it would crash).
pub(super) fn has_symbol(library: &libloading::Library, name: &str) -> bool {
    // SAFETY: only reads the symbol's address; nothing is called through it.
    unsafe { library.get::<*const c_void>(name.as_bytes()) }.is_ok_and(|symbol| !symbol.is_null())
}

/// nccl-tests uses ncclCommInitRankConfig from NCCL 2.14 on.
pub(super) const CONFIG_SINCE: NcclVersion = NcclVersion::new(2, 14, 0);
/// nccl-tests allocates its buffers with ncclMemAlloc from NCCL 2.19 on.
pub const MEM_ALLOC_SINCE: NcclVersion = NcclVersion::new(2, 19, 0);
/// ncclCommWindowRegister (symmetric registration, `-R 2`) came in 2.27.
pub const WINDOW_SINCE: NcclVersion = NcclVersion::new(2, 27, 0);
/// nccl.h's `NCCL_WIN_COLL_SYMMETRIC`: the window is registered for
/// collectives' symmetric kernels (what nccl-tests' `-R 2` passes).
pub(super) const WIN_COLL_SYMMETRIC: c_int = 0x01;

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
pub const OPTIONAL_SYMBOLS: [&str; 12] = [
    "ncclAlltoAll",
    "ncclGather",
    "ncclScatter",
    "ncclCommSplit",
    "ncclCommRegister",
    "ncclCommDeregister",
    "ncclCommWindowRegister",
    "ncclCommWindowDeregister",
    "ncclMemAlloc",
    "ncclMemFree",
    "ncclCommInitRankConfig",
    "ncclGetLastError",
];

/// Every resolved entry point of one loaded libnccl. The function pointers
/// stay valid for as long as `_library` is loaded, which is until the
/// process ends: the library is never unloaded (see `_library`).
pub struct Api {
    pub(super) get_version: GetVersionFn,
    pub(super) get_unique_id: GetUniqueIdFn,
    pub(super) comm_init_rank: CommInitRankFn,
    pub(super) comm_destroy: CommFn,
    pub(super) comm_abort: CommFn,
    pub(super) comm_count: CommIntFn,
    pub(super) comm_cu_device: CommIntFn,
    pub(super) comm_user_rank: CommIntFn,
    pub(super) comm_get_async_error: CommAsyncErrorFn,
    pub(super) get_error_string: GetErrorStringFn,
    pub(super) group_start: GroupFn,
    pub(super) group_end: GroupFn,
    pub(super) all_reduce: AllReduceFn,
    pub(super) broadcast: RootedFn,
    pub(super) reduce: ReduceFn,
    pub(super) all_gather: MoveFn,
    pub(super) reduce_scatter: ReduceScatterFn,
    pub(super) send: SendFn,
    pub(super) recv: RecvFn,
    pub(super) alltoall: Option<MoveFn>,
    pub(super) gather: Option<RootedFn>,
    pub(super) scatter: Option<RootedFn>,
    pub(super) comm_split: Option<CommSplitFn>,
    pub(super) comm_register: Option<CommRegisterFn>,
    pub(super) comm_deregister: Option<CommDeregisterFn>,
    pub(super) comm_window_register: Option<CommWindowRegisterFn>,
    pub(super) comm_window_deregister: Option<CommWindowDeregisterFn>,
    pub(super) mem_alloc: Option<MemAllocFn>,
    pub(super) mem_free: Option<MemFreeFn>,
    pub(super) comm_init_rank_config: Option<CommInitRankConfigFn>,
    pub(super) get_last_error: Option<GetLastErrorFn>,
    /// Only the host GPU simulation (tests/gpu-sim) exports it: every run
    /// on that library is labelled simulated.
    pub(super) simulation: Option<SimulationFn>,
    pub(super) path: PathBuf,
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
    /// ncclCommWindowRegister and ncclCommWindowDeregister (`-R 2`).
    pub comm_window_register: bool,
    pub mem_alloc: bool,
    pub comm_init_rank_config: bool,
}

// ---------------------------------------------------------------------------
// Loading

/// How a candidate library was found (the search order of docs/gpu.md).
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

/// The message of a failed dlopen (libloading keeps the loader's own text
/// as the error's source) without the path it repeats.
pub(super) fn short_dl_error(e: &libloading::Error, target: &Path) -> String {
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
    /// Loads one candidate; the error is the reason, for the attempt list.
    pub(super) fn load(c: &Candidate) -> Result<Api, String> {
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
            comm_window_register: optional!("ncclCommWindowRegister"),
            comm_window_deregister: optional!("ncclCommWindowDeregister"),
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
            comm_window_register: self.comm_window_register.is_some() && self.comm_window_deregister.is_some(),
            mem_alloc: self.mem_alloc.is_some() && self.mem_free.is_some(),
            comm_init_rank_config: self.comm_init_rank_config.is_some(),
        }
    }
}

/// Where a loaded library came from, when it was opened by bare name: the
/// first mapped file of /proc/self/maps whose name is the library's.
pub(super) fn loaded_path_of(name: &Path) -> Option<PathBuf> {
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

// ---------------------------------------------------------------------------
// Versions

pub use crate::types::NcclVersion;

// ---------------------------------------------------------------------------
// ncclDataType_t and ncclRedOp_t

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
    pub(super) push: NvtxPushFn,
    pub(super) pop: NvtxPopFn,
    pub(super) path: PathBuf,
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

    /// sizeof(ncclConfig_t) of each release's nccl.h (NCCL's git tags
    /// v2.14.3 to v2.30.7), its version code and NCCL_CONFIG_INITIALIZER's
    /// blocking, plus nccl-tests' nvlinkCentricSched and sendrecv's
    /// maxP2pPeers.
    #[test]
    fn the_config_is_the_loaded_release_s_initializer_with_nccl_tests_settings() {
        let u = CONFIG_UNDEF_INT;
        let cases: [(NcclVersion, Option<c_int>, KeyFields); 11] = [
            // 2.14-2.16 refuse the undefined blocking value
            (NcclVersion::new(2, 14, 3), Some(2), (24, 21403, 1, u, u)),
            (NcclVersion::new(2, 16, 5), None, (24, 21605, 1, u, u)),
            (NcclVersion::new(2, 17, 1), None, (40, 21701, u, u, u)),
            (NcclVersion::new(2, 19, 3), Some(2), (48, 21903, u, u, u)),
            (NcclVersion::new(2, 26, 2), None, (48, 22602, u, u, u)),
            (NcclVersion::new(2, 27, 3), None, (72, 22703, u, u, u)),
            (NcclVersion::new(2, 28, 3), Some(2), (80, 22803, u, 1, u)),
            (NcclVersion::new(2, 29, 2), Some(2), (88, 22902, u, 1, u)),
            (NcclVersion::new(2, 30, 3), Some(2), (96, 23003, u, 1, 2)),
            (NcclVersion::new(2, 30, 7), None, (96, 23007, u, 1, u)),
            // a newer release reads the fields this struct has
            (NcclVersion::new(2, 32, 3), Some(2), (96, 23203, u, 1, 2)),
        ];
        for (version, peers, want) in cases {
            assert_eq!(RawConfig::for_version(version, peers).key_fields(), want, "{version}");
        }
        assert_eq!(size_of::<RawConfig>(), 96);
    }

    #[test]
    fn nvtx_is_absent_rather_than_broken_when_no_library_has_it() {
        assert!(Nvtx::load_first(&[PathBuf::from("/nonexistent/libnvToolsExt.so.1")]).is_none());
        assert!(Nvtx::load_first(&[PathBuf::from("libc.so.6")]).is_none());
        assert!(Nvtx::load_first(&[]).is_none());
    }
}
