//! Finding libnccl (`NcclLibrary::find`) and the unique id.
//!
//! Search order (docs/gpu.md, "NCCL library search"): `--nccl-lib`,
//! then `COLLBENCH_NCCL_LIB` (either one, when set, is the only place
//! tried: an explicit choice never silently falls back to another
//! library), then `$NCCL_HOME/lib`, the dynamic loader's own search for
//! `libnccl.so.2` and `libnccl.so`, and the `nvidia/nccl/lib` folder of
//! every Python site-packages folder.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use super::sys::{self, Api, Candidate, LoadError, NcclError, NcclVersion, Nvtx, Route, UNIQUE_ID_BYTES};
use crate::error::Error;

/// Environment variable naming the library (file or folder).
pub const ENV_LIB: &str = "COLLBENCH_NCCL_LIB";

/// The library file names tried in a folder and by the loader, in order.
/// PyPI's wheels ship only `libnccl.so.2`.
const NAMES: [&str; 2] = ["libnccl.so.2", "libnccl.so"];

/// What the search looks at, captured from the process environment (kept
/// apart so that tests can give their own).
#[derive(Clone, Debug, Default)]
pub struct SearchEnv {
    pub option: Option<PathBuf>,
    pub env_lib: Option<PathBuf>,
    pub nccl_home: Option<PathBuf>,
}

impl SearchEnv {
    pub fn from_process(option: Option<&Path>) -> SearchEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        SearchEnv {
            option: option.map(Path::to_path_buf),
            env_lib: var(ENV_LIB),
            nccl_home: var("NCCL_HOME"),
        }
    }

    /// `--nccl-lib`, else `COLLBENCH_NCCL_LIB`: when set, the only place
    /// tried.
    fn explicit(&self) -> Option<(Route, &Path)> {
        match (&self.option, &self.env_lib) {
            (Some(p), _) => Some((Route::Option, p)),
            (None, Some(p)) => Some((Route::Env, p)),
            (None, None) => None,
        }
    }

    /// NCCL_HOME, then the loader (before the slower site-packages search).
    fn standard_candidates(&self) -> Vec<Candidate> {
        let mut out = Vec::new();
        if let Some(home) = &self.nccl_home {
            out.extend(in_folder(Route::NcclHome, &home.join("lib")));
        }
        out.extend(NAMES.iter().map(|n| Candidate {
            route: Route::Loader,
            target: PathBuf::from(n),
        }));
        out
    }
}

/// `dir/libnccl.so.2`, `dir/libnccl.so`.
fn in_folder(route: Route, dir: &Path) -> Vec<Candidate> {
    NAMES
        .iter()
        .map(|n| Candidate {
            route,
            target: dir.join(n),
        })
        .collect()
}

/// An explicit path: a file, or a folder holding the library.
fn explicit_candidates(route: Route, path: &Path) -> Vec<Candidate> {
    if path.is_dir() {
        in_folder(route, path)
    } else {
        vec![Candidate {
            route,
            target: path.to_path_buf(),
        }]
    }
}

/// Every Python site-packages folder: what python3 reports (its
/// site-packages, the user's, and sys.path entries, so virtual environments
/// and PYTHONPATH count), then the usual places, without repeats.
pub fn site_packages_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    let script = "import site, sys\n\
        d = []\n\
        try: d += site.getsitepackages()\n\
        except Exception: pass\n\
        try: d.append(site.getusersitepackages())\n\
        except Exception: pass\n\
        d += [p for p in sys.path if p]\n\
        print('\\n'.join(d))\n";
    if let Ok(out) = Command::new("python3").args(["-c", script]).output()
        && out.status.success()
    {
        dirs.extend(String::from_utf8_lossy(&out.stdout).lines().map(PathBuf::from));
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let mut prefixes: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| std::env::var_os(v).map(|p| PathBuf::from(p).join("lib")))
        .collect();
    prefixes.extend(home.map(|h| h.join(".local/lib")));
    prefixes.extend(["/usr/local/lib", "/usr/lib", "/usr/lib64", "/opt/conda/lib"].map(PathBuf::from));
    for prefix in prefixes {
        let Ok(entries) = std::fs::read_dir(&prefix) else {
            continue;
        };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for p in pythons {
            dirs.push(p.join("site-packages"));
            dirs.push(p.join("dist-packages"));
        }
    }
    dirs.push(PathBuf::from("/usr/lib/python3/dist-packages"));
    let mut seen = Vec::new();
    dirs.retain(|d| {
        let new = !seen.contains(d);
        seen.push(d.clone());
        new
    });
    dirs
}

/// libnvToolsExt, only when a profiler asks for ranges: Nsight Systems
/// (`nsys profile --trace=cuda,nvtx,nccl`) sets NVTX_INJECTION64_PATH for
/// the process it profiles. Otherwise, or where the library is absent, no
/// range is ever made.
pub(super) fn load_nvtx() -> Option<Nvtx> {
    std::env::var_os("NVTX_INJECTION64_PATH")?;
    let name = "libnvToolsExt.so.1";
    let mut candidates = vec![PathBuf::from(name), PathBuf::from("libnvToolsExt.so")];
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        if let Some(home) = std::env::var_os(var) {
            candidates.push(PathBuf::from(home).join("lib64").join(name));
        }
    }
    candidates.push(PathBuf::from("/usr/local/cuda/lib64").join(name));
    candidates.extend(
        site_packages_dirs()
            .iter()
            .map(|d| d.join("nvidia/nvtx/lib").join(name)),
    );
    Nvtx::load_first(&candidates)
}

/// A loaded libnccl: its entry points, version and where it came from.
#[derive(Clone, Debug)]
pub struct NcclLibrary {
    pub(super) api: Arc<Api>,
    version: NcclVersion,
    route: Route,
}

impl NcclLibrary {
    /// Finds and loads libnccl from the process environment.
    pub fn find(option: Option<&Path>) -> Result<NcclLibrary, LoadError> {
        NcclLibrary::find_in(&SearchEnv::from_process(option), site_packages_dirs)
    }

    /// The search of the module comment; `site_dirs` is asked only when
    /// everything before it failed.
    pub fn find_in(env: &SearchEnv, site_dirs: impl FnOnce() -> Vec<PathBuf>) -> Result<NcclLibrary, LoadError> {
        if let Some((route, path)) = env.explicit() {
            return match Api::load_first(&explicit_candidates(route, path)) {
                Ok(api) => NcclLibrary::ready(api, route),
                Err(LoadError::NotFound { tried }) if tried.len() == 1 => Err(LoadError::Unusable {
                    path: tried[0].target.clone(),
                    why: format!("{}, from {route}", tried[0].why),
                }),
                Err(e) => Err(e),
            };
        }
        let standard = env.standard_candidates();
        let mut tried = match Api::load_first(&standard) {
            Ok(api) => {
                let route = route_of(&api, &standard);
                return NcclLibrary::ready(api, route);
            }
            Err(LoadError::NotFound { tried }) => tried,
            Err(e) => return Err(e),
        };
        // Only folders that exist: sys.path also holds zip files and
        // lib-dynload, which are no place for a wheel.
        let site: Vec<Candidate> = site_dirs()
            .iter()
            .filter(|d| d.is_dir())
            .map(|d| Candidate {
                route: Route::SitePackages,
                target: d.join("nvidia/nccl/lib").join(NAMES[0]),
            })
            .collect();
        match Api::load_first(&site) {
            Ok(api) => NcclLibrary::ready(api, Route::SitePackages),
            Err(LoadError::NotFound { tried: more }) => {
                tried.extend(more);
                Err(LoadError::NotFound { tried })
            }
            Err(e) => Err(e),
        }
    }

    fn ready(api: Arc<Api>, route: Route) -> Result<NcclLibrary, LoadError> {
        let version = api.version().map_err(|source| LoadError::Call {
            path: api.path().to_path_buf(),
            source,
        })?;
        Ok(NcclLibrary { api, version, route })
    }

    pub fn version(&self) -> NcclVersion {
        self.version
    }

    pub fn path(&self) -> &Path {
        self.api.path()
    }

    pub fn route(&self) -> Route {
        self.route
    }

    pub fn optional(&self) -> sys::OptionalApi {
        self.api.optional()
    }

    /// A fresh `ncclUniqueId` (rank 0 makes it; every rank needs it).
    pub fn unique_id(&self) -> Result<UniqueId, NcclError> {
        self.api.unique_id().map(UniqueId)
    }

    /// "NCCL 2.21.5"; "NCCL 2.32.3-sim" on the host GPU simulation
    /// (tests/gpu-sim), so that no simulated figure passes for a measurement.
    pub fn describe(&self) -> String {
        format!("NCCL {}{}", self.version, self.sim_suffix())
    }

    /// "-sim" on the host GPU simulation, else nothing.
    pub fn sim_suffix(&self) -> &'static str {
        if self.api.is_simulation() { "-sim" } else { "" }
    }

    pub fn is_simulation(&self) -> bool {
        self.api.is_simulation()
    }
}

/// Which standard candidate loaded: the first whose target is the loaded
/// path, or whose name the loader resolved.
fn route_of(api: &Api, candidates: &[Candidate]) -> Route {
    candidates
        .iter()
        .find(|c| c.target == api.path())
        .map_or(Route::Loader, |c| c.route)
}

/// The 128 bytes of an `ncclUniqueId`, as they travel over the control plane.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId(pub [u8; UNIQUE_ID_BYTES]);

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({})", self.hex())
    }
}

impl UniqueId {
    pub fn from_bytes(bytes: &[u8]) -> Result<UniqueId, Error> {
        let id: [u8; UNIQUE_ID_BYTES] = bytes.try_into().map_err(|_| {
            Error::runtime(format!(
                "the NCCL unique id from rank 0 has {} bytes, not {UNIQUE_ID_BYTES}",
                bytes.len()
            ))
        })?;
        Ok(UniqueId(id))
    }

    /// `count` ids sent as one byte string (rank 0's bundle: the flat
    /// communicator's, then one per sub-communicator group).
    pub fn split_bundle(bytes: &[u8], count: usize) -> Result<Vec<UniqueId>, Error> {
        if bytes.len() != count * UNIQUE_ID_BYTES {
            return Err(Error::runtime(format!(
                "the NCCL unique ids from rank 0 have {} bytes, not {count} x {UNIQUE_ID_BYTES}",
                bytes.len()
            )));
        }
        bytes.chunks(UNIQUE_ID_BYTES).map(UniqueId::from_bytes).collect()
    }

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_path_is_the_only_place_tried() {
        let env = SearchEnv {
            option: Some(PathBuf::from("/nonexistent/libnccl.so.2")),
            env_lib: Some(PathBuf::from("/also/not/here.so")),
            nccl_home: None,
        };
        let asked = std::cell::Cell::new(false);
        let e = NcclLibrary::find_in(&env, || {
            asked.set(true);
            vec![]
        })
        .unwrap_err();
        assert!(!asked.get(), "site-packages must not be searched");
        let m = e.to_string();
        assert!(
            m.contains("/nonexistent/libnccl.so.2") && m.contains("--nccl-lib"),
            "{m}"
        );
        assert!(!m.contains("/also/not/here.so"), "{m}");
    }

    #[test]
    fn a_failed_search_lists_every_place_tried_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let env = SearchEnv {
            option: None,
            env_lib: None,
            nccl_home: Some(dir.path().join("home")),
        };
        std::fs::create_dir(dir.path().join("site")).unwrap();
        // Only meaningful where no libnccl is installed system-wide.
        let Err(LoadError::NotFound { tried }) =
            NcclLibrary::find_in(&env, || vec![dir.path().join("site"), dir.path().join("absent")])
        else {
            eprintln!("note: a system libnccl is installed; search-order test skipped");
            return;
        };
        let routes: Vec<Route> = tried.iter().map(|a| a.route).collect();
        assert_eq!(
            routes,
            vec![
                Route::NcclHome,
                Route::NcclHome,
                Route::Loader,
                Route::Loader,
                Route::SitePackages
            ]
        );
        assert_eq!(tried[0].target, dir.path().join("home/lib/libnccl.so.2"));
        assert_eq!(tried[2].target, PathBuf::from("libnccl.so.2"));
        assert_eq!(tried[4].target, dir.path().join("site/nvidia/nccl/lib/libnccl.so.2"));
        let m = LoadError::NotFound { tried }.to_string();
        assert!(!m.contains('\n'), "{m}");
    }

    #[test]
    fn a_bundle_of_ids_splits_into_128_byte_ids_in_order() {
        let bytes: Vec<u8> = (0..3u8).flat_map(|i| [i; 128]).collect();
        let ids = UniqueId::split_bundle(&bytes, 3).unwrap();
        assert_eq!(ids.len(), 3);
        assert!(ids.iter().enumerate().all(|(i, id)| id.0 == [i as u8; 128]));
        assert_eq!(UniqueId::split_bundle(&bytes[..128], 1).unwrap()[0].0, [0; 128]);
        let e = UniqueId::split_bundle(&bytes[..200], 2).unwrap_err().to_string();
        assert!(e.contains("200 bytes") && e.contains("2 x 128"), "{e}");
        assert!(UniqueId::split_bundle(&bytes, 2).is_err());
    }

    #[test]
    fn unique_ids_travel_as_exactly_128_bytes() {
        let id = UniqueId::from_bytes(&[7u8; 128]).unwrap();
        assert_eq!(id.0[127], 7);
        assert_eq!(id.hex().len(), 256);
        assert!(UniqueId::from_bytes(&[0u8; 127]).is_err());
        assert!(UniqueId::from_bytes(&[]).is_err());
    }
}
