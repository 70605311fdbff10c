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
//!
//! Beside it: `config` (`ncclConfig_t` and its offsets), `route` (where a
//! candidate library comes from, and why one did not load), `nvtx` (NVTX
//! ranges) and `driver` (the CUDA driver symbols cudarc calls).
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int, c_void};
use std::fmt;
use std::path::{Path, PathBuf};

mod config;
mod driver;
mod nvtx;
mod route;

pub use config::{MAX_P2P_PEERS_SINCE, RawConfig, config_offsets};
pub use driver::{CUDA_SYMBOLS, GRAPH_SYMBOLS, missing_driver_symbols};
pub use nvtx::Nvtx;
pub use route::{Attempt, Candidate, Route};
pub(super) use route::{loaded_path_of, short_dl_error};

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
}
