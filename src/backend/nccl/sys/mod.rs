//! The project's own run-time binding of libnccl (no `nccl-sys` crate
//! exists), and the only home of `unsafe` code for the NCCL backend, in
//! cudarc's three layers, one file each:
//!
//! - `raw`: the C types and function-pointer types of nccl.h (and the NVTX
//!   and CUDA driver symbols), resolved from a library found at run time
//!   (`Api`); nothing there calls an entry point;
//! - `result`: one thin call per entry point, turning an `ncclResult_t`
//!   into `NcclError`, and every error of the binding;
//! - `safe`: the RAII handles (`Comm`, `DeviceMemory`) and the checked
//!   launches (`Buffers`) the rest of the backend uses;
//!
//! and `launch`, the calls as data (`Op`, `Launch`) that `result` enqueues
//! and `safe` checks, below both (no `unsafe` there); `env`, NCCL's
//! variables set while a communicator is made (`--algo`, `--proto`).
//!
//! Every `unsafe` block has a `// SAFETY:` line; `unsafe fn`s say what
//! their callers keep under `# Safety`.

mod env;
mod launch;
mod raw;
mod result;
mod safe;

pub use env::with_nccl_variables;
pub use launch::{At, Buf, Launch, Op};
pub use raw::{
    Api, Attempt, CUDA_SYMBOLS, Candidate, DataType, GRAPH_SYMBOLS, MAX_P2P_PEERS_SINCE, MEM_ALLOC_SINCE, NcclVersion,
    Nvtx, OPTIONAL_SYMBOLS, OptionalApi, REQUIRED_SYMBOLS, RawConfig, RedOp, Route, UNIQUE_ID_BYTES, WINDOW_SINCE,
    config_offsets, missing_driver_symbols,
};
pub use result::{
    AllocError, CopyError, CudaDriver, DriverMissing, LoadError, NcclError, RankInProcess, check_cuda_driver,
    device_total_mem,
};
pub use safe::{Buffers, Comm, DeviceMemory, Held};
