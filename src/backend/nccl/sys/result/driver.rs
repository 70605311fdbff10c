//! The CUDA driver library, checked before cudarc touches it (`DriverMissing`).
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::c_int;
use std::path::Path;

use cudarc::driver::DriverError;
use thiserror::Error;

use super::super::raw::{CUDA_SYMBOLS, has_symbol, short_dl_error};

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
