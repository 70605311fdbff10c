//! Every NCCL result as a Rust `Result`: the errors of the binding
//! (`NcclError`, `LoadError`, `DriverMissing`, `CopyError`, `AllocError`,
//! each a one-line message that says what to do) and the thin calls, one
//! per entry point, that turn an `ncclResult_t` into `NcclError`. Calls
//! that take a communicator or a device pointer are `unsafe fn`s whose
//! callers (`safe`) keep their preconditions; the rest are safe.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cudarc::driver::DriverError;
use thiserror::Error;

use super::launch::Op;
use super::raw::{
    Api, Attempt, CONFIG_SINCE, CUDA_SYMBOLS, Candidate, NCCL_IN_PROGRESS, NCCL_SUCCESS, NcclResult, NcclVersion, Nvtx,
    RawComm, RawConfig, RawStream, RawUniqueId, RawWindow, UNIQUE_ID_BYTES, WIN_COLL_SYMMETRIC, has_symbol,
    short_dl_error,
};

// ---------------------------------------------------------------------------
// Errors

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
    pub(super) fn usage(call: &'static str, what: &str) -> NcclError {
        NcclError {
            call,
            code: 4, // ncclInvalidArgument
            text: what.into(),
            detail: String::new(),
        }
    }
}

/// A failed device-to-device copy.
#[derive(Debug, Error)]
pub enum CopyError {
    #[error("{0}")]
    Range(NcclError),
    #[error("cuMemcpyDtoDAsync failed: {}", crate::backend::nccl::device::driver_text(.0))]
    Cuda(DriverError),
}

/// A failed device allocation.
#[derive(Debug, Error)]
pub enum AllocError {
    #[error("{}", crate::backend::nccl::device::driver_text(.0))]
    Cuda(DriverError),
    #[error("{0}")]
    Nccl(NcclError),
}

impl From<DriverError> for AllocError {
    fn from(e: DriverError) -> AllocError {
        AllocError::Cuda(e)
    }
}

/// Ranks of this process that hold, or are making, a communicator
/// (`RankInProcess`).
static RANKS_IN_PROCESS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
/// The most ranks any of them said the process runs (`RankInProcess::enter`).
static PROCESS_RANKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// One rank of this process, counted while it lives: with more than one,
/// NCCL's process-wide last-error text cannot be told apart by rank.
#[derive(Debug)]
pub struct RankInProcess(());

impl RankInProcess {
    /// A rank of a process that runs `ranks` ranks in all (`-g`): entered
    /// before its communicator's initialisation, so that an error there
    /// already knows whether another rank's text may be NCCL's last one,
    /// however the ranks' threads interleave.
    pub fn enter(ranks: usize) -> RankInProcess {
        PROCESS_RANKS.fetch_max(ranks, std::sync::atomic::Ordering::SeqCst);
        RANKS_IN_PROCESS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RankInProcess(())
    }

    /// Whether NCCL's last-error text may be another rank's.
    fn shared() -> bool {
        let order = std::sync::atomic::Ordering::SeqCst;
        RANKS_IN_PROCESS.load(order).max(PROCESS_RANKS.load(order)) > 1
    }
}

impl Drop for RankInProcess {
    fn drop(&mut self) {
        RANKS_IN_PROCESS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------
// Loading libnccl

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
}

// ---------------------------------------------------------------------------
// Calls

impl Api {
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

    pub(super) fn check(&self, call: &'static str, code: NcclResult, comm: Option<RawComm>) -> Result<(), NcclError> {
        if code == NCCL_SUCCESS {
            return Ok(());
        }
        // NCCL keeps one last-error text per process (ncclLastError in its
        // debug.cc), whatever communicator is asked: with several ranks in
        // this process (`-g`) it may be another rank's, so it is not shown.
        let shared = RankInProcess::shared();
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

    /// `ncclCommInitRank` (`ncclCommInitRankConfig` from NCCL 2.14 on, as
    /// nccl-tests' initComms) on the calling thread's current CUDA device:
    /// the new communicator, which the caller owns. Collective.
    pub(super) fn comm_init(
        &self,
        nranks: usize,
        id: &[u8; UNIQUE_ID_BYTES],
        rank: usize,
    ) -> Result<RawComm, NcclError> {
        let nranks_c = c_int::try_from(nranks).map_err(|_| NcclError::usage("ncclCommInitRank", "too many ranks"))?;
        let rank_c = c_int::try_from(rank).map_err(|_| NcclError::usage("ncclCommInitRank", "rank out of range"))?;
        let raw_id = RawUniqueId {
            internal: id.map(|b| b as c_char),
        };
        let mut comm: RawComm = std::ptr::null_mut();
        let version = self.version()?;
        let (name, rc) = match self.comm_init_rank_config {
            Some(init_config) if version >= CONFIG_SINCE => {
                let mut config = RawConfig::for_version(version, None);
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
        Ok(comm)
    }

    /// `ncclCommSplit`: the new communicator of this rank's `color`, ranks
    /// ordered by `key`, with `config`, else the parent's configuration.
    ///
    /// # Safety
    /// `comm` is a live communicator (made, not yet destroyed or aborted).
    pub(super) unsafe fn comm_split(
        &self,
        comm: RawComm,
        color: usize,
        key: usize,
        config: Option<RawConfig>,
    ) -> Result<RawComm, NcclError> {
        let Some(split) = self.comm_split else {
            return Err(NcclError::usage("ncclCommSplit", "not in this NCCL library"));
        };
        let color = c_int::try_from(color).map_err(|_| NcclError::usage("ncclCommSplit", "color out of range"))?;
        let key = c_int::try_from(key).map_err(|_| NcclError::usage("ncclCommSplit", "key out of range"))?;
        let mut new: RawComm = std::ptr::null_mut();
        let mut config = config;
        let config_ptr = config.as_mut().map_or(std::ptr::null_mut(), |c| c as *mut RawConfig);
        // SAFETY: `comm` is live (the caller's promise) and `new` a valid
        // out-pointer; the config is NULL, which asks NCCL to inherit the
        // parent's (nccl.h), or a live NCCL_CONFIG_INITIALIZER equivalent
        // that NCCL copies before returning. The color is never
        // NCCL_SPLIT_NOCOLOR (-1: colors here are indices), so NCCL returns
        // a communicator or an error.
        let rc = unsafe { split(comm, color, key, &mut new, config_ptr) };
        self.check("ncclCommSplit", rc, Some(comm))?;
        if new.is_null() {
            return Err(NcclError::usage("ncclCommSplit", "returned no communicator"));
        }
        Ok(new)
    }

    /// `ncclCommRegister` of `len` bytes at device address `address`: NCCL's
    /// handle for `comm_deregister`.
    ///
    /// # Safety
    /// `comm` is live, and `address..address+len` a live device allocation
    /// that stays allocated until the handle is released.
    pub(super) unsafe fn comm_register(
        &self,
        comm: RawComm,
        address: u64,
        len: usize,
    ) -> Result<*mut c_void, NcclError> {
        let (Some(register), Some(_)) = (self.comm_register, self.comm_deregister) else {
            return Err(NcclError::usage("ncclCommRegister", "not in this NCCL library"));
        };
        let mut handle: *mut c_void = std::ptr::null_mut();
        // SAFETY: the caller's promise above; `handle` is a valid out-pointer.
        let rc = unsafe { register(comm, address as *mut c_void, len, &mut handle) };
        self.check("ncclCommRegister", rc, Some(comm))?;
        Ok(handle)
    }

    /// `ncclCommDeregister`; errors are ignored (the buffer is about to be
    /// freed, or the communicator destroyed).
    ///
    /// # Safety
    /// `comm` is live and `handle` came from `comm_register` on it, and is
    /// released once.
    pub(super) unsafe fn comm_deregister(&self, comm: RawComm, handle: *mut c_void) {
        if let Some(deregister) = self.comm_deregister {
            // SAFETY: the caller's promise above.
            let _ = unsafe { deregister(comm, handle) };
        }
    }

    /// `ncclCommWindowRegister` of `len` bytes at device address `address`
    /// as a symmetric window (`NCCL_WIN_COLL_SYMMETRIC`, as nccl-tests'
    /// `-R 2`): NCCL's window for `comm_window_deregister`. Collective:
    /// every rank of `comm` registers a buffer of the same size, in the
    /// same order.
    ///
    /// # Safety
    /// `comm` is live, and `address..address+len` a live allocation of
    /// this library's ncclMemAlloc that stays allocated until the window is
    /// released.
    pub(super) unsafe fn comm_window_register(
        &self,
        comm: RawComm,
        address: u64,
        len: usize,
    ) -> Result<RawWindow, NcclError> {
        let (Some(register), Some(_)) = (self.comm_window_register, self.comm_window_deregister) else {
            return Err(NcclError::usage("ncclCommWindowRegister", "not in this NCCL library"));
        };
        let mut window: RawWindow = std::ptr::null_mut();
        // SAFETY: the caller's promise above; `window` is a valid out-pointer.
        let rc = unsafe { register(comm, address as *mut c_void, len, &mut window, WIN_COLL_SYMMETRIC) };
        self.check("ncclCommWindowRegister", rc, Some(comm))?;
        if window.is_null() {
            return Err(NcclError::usage("ncclCommWindowRegister", "returned no window"));
        }
        Ok(window)
    }

    /// `ncclCommWindowDeregister`. Collective, as the registration.
    ///
    /// # Safety
    /// `comm` is live and `window` came from `comm_window_register` on it,
    /// and is released once.
    pub(super) unsafe fn comm_window_deregister(&self, comm: RawComm, window: RawWindow) -> Result<(), NcclError> {
        let Some(deregister) = self.comm_window_deregister else {
            return Err(NcclError::usage("ncclCommWindowDeregister", "not in this NCCL library"));
        };
        // SAFETY: the caller's promise above.
        let rc = unsafe { deregister(comm, window) };
        self.check("ncclCommWindowDeregister", rc, Some(comm))
    }

    /// `ncclCommCount`, `ncclCommUserRank` or `ncclCommCuDevice` (`which`).
    ///
    /// # Safety
    /// `comm` is live.
    pub(super) unsafe fn comm_query(&self, comm: RawComm, which: CommQuery) -> Result<i32, NcclError> {
        let (call, f) = match which {
            CommQuery::Count => ("ncclCommCount", self.comm_count),
            CommQuery::UserRank => ("ncclCommUserRank", self.comm_user_rank),
            CommQuery::CuDevice => ("ncclCommCuDevice", self.comm_cu_device),
        };
        let mut v: c_int = 0;
        // SAFETY: `comm` is live (the caller's promise) and `v` a valid
        // out-pointer.
        let rc = unsafe { f(comm, &mut v) };
        self.check(call, rc, Some(comm))?;
        Ok(v)
    }

    /// `ncclCommGetAsyncError`: `Ok` while the communicator is healthy (or
    /// still working), the error once NCCL has seen one (a peer died, a
    /// network failure, a CUDA error in its kernels).
    ///
    /// # Safety
    /// `comm` is live.
    pub(super) unsafe fn comm_async_error(&self, comm: RawComm) -> Result<(), NcclError> {
        let mut state: NcclResult = NCCL_SUCCESS;
        // SAFETY: live communicator (the caller's promise), valid out-pointer.
        let rc = unsafe { (self.comm_get_async_error)(comm, &mut state) };
        self.check("ncclCommGetAsyncError", rc, Some(comm))?;
        if state == NCCL_IN_PROGRESS {
            return Ok(());
        }
        self.check("a pending NCCL operation", state, Some(comm))
    }

    /// `ncclCommAbort` (without waiting for peers) or `ncclCommDestroy`;
    /// errors are ignored (nobody is left to tell).
    ///
    /// # Safety
    /// `comm` is live, and is released exactly once.
    pub(super) unsafe fn comm_release(&self, comm: RawComm, abort: bool) {
        let f = if abort { self.comm_abort } else { self.comm_destroy };
        // SAFETY: the caller's promise above.
        let _ = unsafe { f(comm) };
    }

    /// `ncclGroupStart`.
    pub(super) fn group_start(&self) -> Result<(), NcclError> {
        // SAFETY: ncclGroupStart takes no arguments.
        let rc = unsafe { (self.group_start)() };
        self.check("ncclGroupStart", rc, None)
    }

    /// `ncclGroupEnd`.
    pub(super) fn group_end(&self) -> Result<(), NcclError> {
        // SAFETY: ncclGroupEnd takes no arguments.
        let rc = unsafe { (self.group_end)() };
        self.check("ncclGroupEnd", rc, None)
    }

    /// Enqueues one NCCL call of `op` on `stream`.
    ///
    /// # Safety
    /// `comm` is live; `p0` and `p1` are the op's two device pointers in
    /// `Op::extents` order, inside live allocations with room for every
    /// element NCCL touches, freed only after `stream` has finished the
    /// enqueued work; `param` is the root or peer, which NCCL checks against
    /// the communicator's size.
    #[allow(clippy::too_many_arguments)] // one per argument of the C calls
    pub(super) unsafe fn enqueue(
        &self,
        comm: RawComm,
        op: Op,
        p0: u64,
        p1: u64,
        param: c_int,
        dt: c_int,
        stream: RawStream,
    ) -> Result<(), NcclError> {
        let (a, b) = (p0 as *const c_void, p1 as *mut c_void);
        let c = comm;
        let missing = |name| Err(NcclError::usage(name, "not in this NCCL library"));
        let (name, rc) = match op {
            Op::AllReduce { count, op, .. } => {
                // SAFETY: see the method comment; `a` holds `count` elements, `b` too.
                ("ncclAllReduce", unsafe {
                    (self.all_reduce)(a, b, count, dt, op as c_int, c, stream)
                })
            }
            Op::Broadcast { count, .. } => {
                // SAFETY: see the method comment; `a` and `b` hold `count` elements.
                ("ncclBroadcast", unsafe {
                    (self.broadcast)(a, b, count, dt, param, c, stream)
                })
            }
            Op::Reduce { count, op, .. } => {
                // SAFETY: see the method comment; `a` and `b` hold `count` elements.
                ("ncclReduce", unsafe {
                    (self.reduce)(a, b, count, dt, op as c_int, param, c, stream)
                })
            }
            Op::AllGather { count, .. } => {
                // SAFETY: see the method comment; `a` holds `count`, `b` nranks*count.
                ("ncclAllGather", unsafe {
                    (self.all_gather)(a, b, count, dt, c, stream)
                })
            }
            Op::ReduceScatter { count, op, .. } => {
                // SAFETY: see the method comment; `a` holds nranks*count, `b` count.
                ("ncclReduceScatter", unsafe {
                    (self.reduce_scatter)(a, b, count, dt, op as c_int, c, stream)
                })
            }
            Op::AlltoAll { count, .. } => match self.alltoall {
                // SAFETY: see the method comment; `a` and `b` hold nranks*count.
                Some(f) => ("ncclAlltoAll", unsafe { f(a, b, count, dt, c, stream) }),
                None => return missing("ncclAlltoAll"),
            },
            Op::Gather { count, .. } => match self.gather {
                // SAFETY: see the method comment; `a` holds count, `b` nranks*count.
                Some(f) => ("ncclGather", unsafe { f(a, b, count, dt, param, c, stream) }),
                None => return missing("ncclGather"),
            },
            Op::Scatter { count, .. } => match self.scatter {
                // SAFETY: see the method comment; `a` holds nranks*count, `b` count.
                Some(f) => ("ncclScatter", unsafe { f(a, b, count, dt, param, c, stream) }),
                None => return missing("ncclScatter"),
            },
            Op::Send { count, .. } => {
                // SAFETY: see the method comment; `a` holds `count` elements.
                ("ncclSend", unsafe { (self.send)(a, count, dt, param, c, stream) })
            }
            Op::Recv { count, .. } => {
                // A receive has one pointer, its output: the first extent.
                // SAFETY: see the method comment; it holds `count` elements.
                ("ncclRecv", unsafe {
                    (self.recv)(p0 as *mut c_void, count, dt, param, c, stream)
                })
            }
        };
        self.check(name, rc, Some(comm))
    }

    /// `ncclMemAlloc` of `bytes` on the current device.
    pub(super) fn mem_alloc(&self, bytes: usize) -> Result<u64, NcclError> {
        let Some(mem_alloc) = self.mem_alloc else {
            return Err(NcclError::usage("ncclMemAlloc", "not in this NCCL library"));
        };
        let mut p: *mut c_void = std::ptr::null_mut();
        // SAFETY: ncclMemAlloc(void**, size_t) writes one pointer to
        // `bytes` bytes on the current device; the caller owns it.
        let rc = unsafe { mem_alloc(&mut p, bytes) };
        self.check("ncclMemAlloc", rc, None)?;
        Ok(p as u64)
    }

    /// `ncclMemFree`; errors are ignored (the memory is being let go).
    ///
    /// # Safety
    /// `ptr` came from this library's `mem_alloc` and is freed once.
    pub(super) unsafe fn mem_free(&self, ptr: u64) {
        if let Some(mem_free) = self.mem_free {
            // SAFETY: the caller's promise above.
            let _ = unsafe { mem_free(ptr as *mut c_void) };
        }
    }
}

/// The communicator queries that return one int.
#[derive(Clone, Copy, Debug)]
pub(super) enum CommQuery {
    Count,
    UserRank,
    CuDevice,
}

impl Nvtx {
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
    use crate::backend::nccl::sys::raw::Route;

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
