//! Where a candidate libnccl comes from and why one did not load.

use std::fmt;
use std::path::{Path, PathBuf};

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
pub(in crate::backend::nccl::sys) fn short_dl_error(e: &libloading::Error, target: &Path) -> String {
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
/// Where a loaded library came from, when it was opened by bare name: the
/// first mapped file of /proc/self/maps whose name is the library's.
pub(in crate::backend::nccl::sys) fn loaded_path_of(name: &Path) -> Option<PathBuf> {
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
