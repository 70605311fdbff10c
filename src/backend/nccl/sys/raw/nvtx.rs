//! NVTX ranges, for Nsight Systems timelines: libnvToolsExt's entry points.
#![allow(unsafe_code)]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::{c_char, c_int};
use std::fmt;
use std::path::{Path, PathBuf};

/// `nvtxRangePushA(const char*)` and `nvtxRangePop()` (nvToolsExt.h).
type NvtxPushFn = unsafe extern "C" fn(*const c_char) -> c_int;
type NvtxPopFn = unsafe extern "C" fn() -> c_int;

/// libnvToolsExt, where it is installed. Under `nsys profile` it forwards
/// ranges to the profiler (which it finds through NVTX_INJECTION64_PATH);
/// otherwise each call returns at once. Where the library is absent there is
/// no `Nvtx` at all, so ranges cost nothing.
pub struct Nvtx {
    pub(in crate::backend::nccl::sys) push: NvtxPushFn,
    pub(in crate::backend::nccl::sys) pop: NvtxPopFn,
    pub(in crate::backend::nccl::sys) path: PathBuf,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvtx_is_absent_rather_than_broken_when_no_library_has_it() {
        assert!(Nvtx::load_first(&[PathBuf::from("/nonexistent/libnvToolsExt.so.1")]).is_none());
        assert!(Nvtx::load_first(&[PathBuf::from("libc.so.6")]).is_none());
        assert!(Nvtx::load_first(&[]).is_none());
    }
}
