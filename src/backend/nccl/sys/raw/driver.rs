//! The CUDA driver library, checked before cudarc touches it: the symbols
//! cudarc calls.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use super::has_symbol;

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
