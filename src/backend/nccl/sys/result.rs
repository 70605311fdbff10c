//! Every NCCL result as a Rust `Result`: the errors of the binding
//! (`NcclError`, `LoadError`, `DriverMissing`, `CopyError`, `AllocError`,
//! each a one-line message that says what to do) and the thin calls, one
//! per entry point, that turn an `ncclResult_t` into `NcclError`. Calls
//! that take a communicator or a device pointer are `unsafe fn`s whose
//! callers (`safe`) keep their preconditions; the rest are safe. The
//! errors are in `errors`, the CUDA driver check in `driver`.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{CStr, c_char, c_int, c_void};
use std::sync::Arc;

mod driver;
mod errors;

pub use driver::{CudaDriver, DriverMissing, check_cuda_driver, device_total_mem};
pub use errors::{AllocError, CopyError, LoadError, NcclError, RankInProcess};

use super::launch::Op;
use super::raw::{
    Api, Attempt, CONFIG_SINCE, Candidate, NCCL_IN_PROGRESS, NCCL_SUCCESS, NcclResult, NcclVersion, Nvtx, RawComm,
    RawConfig, RawStream, RawUniqueId, RawWindow, UNIQUE_ID_BYTES, WIN_COLL_SYMMETRIC,
};

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
    /// `-R 2`): NCCL's window for `comm_window_deregister`, or `None` where
    /// NCCL returned success and no window (symmetric memory unavailable
    /// on this communicator: docs/gpu.md, "Symmetric windows NCCL
    /// declines"). Collective: every rank of `comm` registers a buffer of
    /// the same size, in the same order.
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
    ) -> Result<Option<RawWindow>, NcclError> {
        let (Some(register), Some(_)) = (self.comm_window_register, self.comm_window_deregister) else {
            return Err(NcclError::usage("ncclCommWindowRegister", "not in this NCCL library"));
        };
        let mut window: RawWindow = std::ptr::null_mut();
        // SAFETY: the caller's promise above; `window` is a valid out-pointer.
        let rc = unsafe { register(comm, address as *mut c_void, len, &mut window, WIN_COLL_SYMMETRIC) };
        self.check("ncclCommWindowRegister", rc, Some(comm))?;
        // NCCL 2.27 to 2.30 return success and leave `*win` NULL where
        // they make no window (v2.27.7-1 src/register/register.cc:207-209,
        // v2.28.9-1 src/dev_runtime.cc:903, v2.29.7-1
        // src/dev_runtime.cc:1070-1078): nccl-tests carries on unregistered.
        Ok((!window.is_null()).then_some(window))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::nccl::sys::raw::Route;
    use std::path::PathBuf;

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
