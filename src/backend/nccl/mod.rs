//! The NCCL data plane: GPU buffers, one communicator per rank, libnccl
//! found and loaded at run time.
//!
//! - `sys`: the run-time binding of libnccl (the only `unsafe` of this
//!   backend) and the CUDA driver check;
//! - `calls`: how each collective becomes NCCL calls (pure, tested);
//! - `device`: the GPU through cudarc (context, stream, buffers, copies);
//! - here: finding the library (`NcclLibrary::find`), the unique id, and the
//!   `Backend` implementation.
//!
//! Search order for libnccl (README "NCCL library search"): `--nccl-lib`,
//! then `COLLBENCH_NCCL_LIB` (either one, when set, is the only place
//! tried: an explicit choice never silently falls back to another
//! library), then `$NCCL_HOME/lib`, the dynamic loader's own search for
//! `libnccl.so.2` and `libnccl.so`, and the `nvidia/nccl/lib` folder of
//! every Python site-packages folder.

mod calls;
pub mod device;
pub mod sys;

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

pub use device::{CudaInfo, Device, DeviceError, GpuInfo};
pub use sys::{LoadError, NcclError, NcclVersion, Route, UNIQUE_ID_BYTES};

use super::{Backend, Call, TransportQuery};
use crate::buffer::HostBuffer;
use crate::engine::Plan;
use crate::error::Error;
use crate::topology::Hierarchy;
use crate::topology::observe::Observed;
use crate::types::{DType, Placement, ReduceOp};
use calls::Native;
use device::DeviceMemory;
use sys::{Api, Buf, Candidate, Comm, Launch, Nvtx};

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
fn load_nvtx() -> Option<Nvtx> {
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
    api: Arc<Api>,
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

    /// "NCCL 2.21.5".
    pub fn describe(&self) -> String {
        format!("NCCL {}", self.version)
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

    pub fn hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// Where this rank runs among the ranks of its host.
#[derive(Clone, Debug)]
pub struct Placing {
    pub nranks: usize,
    pub rank: usize,
    pub local_rank: usize,
    pub local_ranks: usize,
    pub host: String,
}

/// The NCCL backend of one rank. Field order is drop order: the
/// communicator goes first, then the buffers, then the device.
pub struct NcclBackend {
    comm: Option<Comm>,
    send: DeviceMemory,
    recv: DeviceMemory,
    device: Device,
    host_send: HostBuffer,
    host_recv: HostBuffer,
    library: NcclLibrary,
    native: Native,
    /// The last launch's calls, reused while the call stays the same.
    cached: Option<(Call, Placement, Launch)>,
    /// Set after any failure: the communicator is then aborted, not
    /// destroyed (destroy waits for peers that may be gone).
    failed: bool,
    /// Threads for filling and checking host buffers: this host's cores
    /// shared among its ranks.
    host_threads: usize,
    /// Ranges around each measured point, under a profiler.
    nvtx: Option<Nvtx>,
    /// Operations rotate through the buffers (`reserve`).
    rotate: bool,
    /// Iterations the last `start_marks` times.
    marked: usize,
}

impl NcclBackend {
    /// Opens this rank's GPU. Every rank calls it after the id exchange;
    /// its failure (no driver, no GPU, too many ranks on a host) is agreed
    /// on before anyone enters the collective `init`.
    pub fn open_device(at: &Placing) -> Result<Device, DeviceError> {
        Device::open(at.local_rank, at.local_ranks, &at.host)
    }

    /// `ncclCommInitRank` on `device`: collective over all ranks.
    pub fn init(library: NcclLibrary, device: Device, id: &UniqueId, at: &Placing) -> Result<NcclBackend, Error> {
        let nccl = |e: NcclError| Error::runtime(format!("NCCL {}: {e}", library.version()));
        let dev = |e: DeviceError| Error::runtime(e.to_string());
        device.bind().map_err(dev)?;
        let comm = library.api.init_rank(at.nranks, &id.0, at.rank).map_err(nccl)?;
        // A communicator that disagrees with the control plane about who is
        // who would measure something else than asked.
        let (count, me) = (comm.count().map_err(nccl)?, comm.user_rank().map_err(nccl)?);
        if usize::try_from(count).ok() != Some(at.nranks) || usize::try_from(me).ok() != Some(at.rank) {
            comm.abort();
            return Err(Error::runtime(format!(
                "NCCL made rank {me} of {count} where the control plane has rank {} of {}",
                at.rank, at.nranks
            )));
        }
        let opt = library.optional();
        let send = device.alloc(0).map_err(dev)?;
        let recv = device.alloc(0).map_err(dev)?;
        Ok(NcclBackend {
            comm: Some(comm),
            send,
            recv,
            device,
            host_send: HostBuffer::new(DType::Float, 0)?,
            host_recv: HostBuffer::new(DType::Float, 0)?,
            rotate: false,
            marked: 0,
            native: Native {
                alltoall: opt.alltoall,
                gather: opt.gather,
                scatter: opt.scatter,
            },
            library,
            cached: None,
            failed: false,
            host_threads: std::thread::available_parallelism().map_or(1, |n| n.get()) / at.local_ranks.max(1),
            nvtx: load_nvtx(),
        })
    }

    fn comm(&mut self) -> Result<&mut Comm, Error> {
        self.comm
            .as_mut()
            .ok_or_else(|| Error::runtime("the NCCL communicator was aborted after an earlier error"))
    }

    /// Records a failure so that the communicator is aborted on drop.
    fn fail<T>(&mut self, e: impl std::fmt::Display) -> Result<T, Error> {
        self.failed = true;
        Err(Error::runtime(format!(
            "{} on GPU {}: {e}",
            self.library.describe(),
            self.device.ordinal()
        )))
    }

    /// Device buffers of at least these sizes (grown, never shrunk; the old
    /// one is freed before the new one is allocated).
    fn ensure_device(&mut self, send_bytes: usize, recv_bytes: usize) -> Result<(), Error> {
        if self.send.len_bytes() < send_bytes {
            self.send = self.device.alloc(0).map_err(|e| Error::runtime(e.to_string()))?;
            self.send = match self.device.alloc(send_bytes) {
                Ok(m) => m,
                Err(e) => return self.fail(e),
            };
        }
        if self.recv.len_bytes() < recv_bytes {
            self.recv = self.device.alloc(0).map_err(|e| Error::runtime(e.to_string()))?;
            self.recv = match self.device.alloc(recv_bytes) {
                Ok(m) => m,
                Err(e) => return self.fail(e),
            };
        }
        Ok(())
    }

    /// Free device memory, for fitting the plan.
    pub fn free_bytes(&self) -> Option<u64> {
        self.device.memory().ok().map(|(free, _)| free as u64)
    }

    pub fn gpu_name(&self) -> &str {
        self.device.name()
    }
}

impl Drop for NcclBackend {
    fn drop(&mut self) {
        if let Some(comm) = self.comm.take()
            && self.failed
        {
            comm.abort();
        }
        // Otherwise `comm` is dropped here, which destroys it.
    }
}

/// Device bytes one case needs: (send, recv).
pub fn case_bytes(case: &crate::engine::Case) -> (u64, u64) {
    let e = case.dtype.size_bytes() as u64;
    let send = case.shape.send as u64;
    (send * e, send.max(case.shape.recv as u64) * e)
}

impl Backend for NcclBackend {
    fn name(&self) -> &'static str {
        "nccl"
    }

    fn version(&self) -> String {
        self.library.describe()
    }

    fn check_dtype(&self, dtype: DType) -> Result<(), String> {
        calls::check_dtype(self.library.version(), dtype)
    }

    fn check_op(&self, op: ReduceOp) -> Result<(), String> {
        calls::check_op(self.library.version(), op)
    }

    fn observe_transport(&self, q: &TransportQuery) -> Observed {
        // NCCL wrote its INFO log (connections made at init) to the private
        // file the transport profile set up before the library loaded.
        Observed::from_nccl_log(q.profile, q.nccl_log, &|a, b| {
            q.hosts.node_of_rank.get(a) == q.hosts.node_of_rank.get(b)
        })
    }

    fn gpu_model(&self) -> Option<String> {
        Some(self.device.name().to_string())
    }

    fn check_hierarchy(&self, mode: Hierarchy) -> Result<(), String> {
        if mode.is_flat() {
            Ok(())
        } else {
            Err(format!(
                "--hierarchy {mode}: the nccl backend runs all_reduce flat only for now; \
                 hierarchical modes run on the mpi backend"
            ))
        }
    }

    fn max_elements(&self) -> usize {
        // NCCL counts are size_t; keep byte offsets far from overflow.
        usize::MAX >> 8
    }

    fn reserve(&mut self, plan: &Plan, rotate: bool) -> Result<(), Error> {
        self.rotate = rotate;
        let (send, recv) = plan
            .cases
            .iter()
            .map(case_bytes)
            .fold((0, 0), |(s, r), (cs, cr)| (s.max(cs), r.max(cr)));
        // Rotation walks both buffers by the larger span, so each holds it.
        let (send, recv) = if rotate {
            (send.max(recv), send.max(recv))
        } else {
            (send, recv)
        };
        self.ensure_device(send as usize, recv as usize)
    }

    fn device_free_bytes(&self) -> Option<u64> {
        self.free_bytes()
    }

    fn prepare(&mut self, call: &Call) -> Result<(), Error> {
        let (send_len, recv_len) = calls::buffer_lens(call);
        let e = call.dtype.size_bytes();
        self.ensure_device(send_len * e, recv_len * e)?;
        // The host side of a GPU rank is idle while it checks: the host's
        // cores are shared among the ranks on it.
        let threads = self.host_threads;
        if self.host_send.dtype() != call.dtype || self.host_send.len() != send_len {
            self.host_send = HostBuffer::new(call.dtype, 0)?;
            self.host_send = HostBuffer::new(call.dtype, send_len)?.with_threads(threads);
        }
        if self.host_recv.dtype() != call.dtype || self.host_recv.len() != recv_len {
            self.host_recv = HostBuffer::new(call.dtype, 0)?;
            self.host_recv = HostBuffer::new(call.dtype, recv_len)?.with_threads(threads);
        }
        self.cached = None;
        Ok(())
    }

    fn point_begin(&mut self, label: &str) {
        if let (Some(nvtx), Ok(label)) = (&self.nvtx, std::ffi::CString::new(label)) {
            nvtx.push(&label);
        }
    }

    fn point_end(&mut self) {
        if let Some(nvtx) = &self.nvtx {
            nvtx.pop();
        }
    }

    fn load_input(
        &mut self,
        call: &Call,
        placement: Placement,
        value: &(dyn Fn(usize) -> u64 + Sync),
    ) -> Result<(), Error> {
        let r = calls::regions(call, placement);
        // The whole receive buffer is poisoned so that anything NCCL fails
        // to write is caught; the input then goes where NCCL reads it.
        self.host_recv.poison();
        let result = match r.input.0 {
            Buf::Send => {
                self.host_send.fill(r.input.1, value);
                Device::upload(&mut self.send, 0, self.host_send.bytes())
                    .and_then(|()| Device::upload(&mut self.recv, 0, self.host_recv.bytes()))
            }
            Buf::Recv => {
                self.host_recv.fill(r.input.1, value);
                Device::upload(&mut self.recv, 0, self.host_recv.bytes())
            }
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn launch(&mut self, call: &Call, placement: Placement, iter: u64) -> Result<(), Error> {
        let e = call.dtype.size_bytes();
        let shift = if self.rotate {
            let (send_len, recv_len) = calls::buffer_lens(call);
            let (span, capacity) = (
                send_len.max(recv_len),
                (self.send.len_bytes() / e).min(self.recv.len_bytes() / e),
            );
            super::rotation_offset(span, super::rotation_steps(span, capacity), iter)
        } else {
            0
        };
        let fresh = !matches!(&self.cached, Some((c, p, _)) if c == call && *p == placement);
        if fresh {
            self.cached = Some((*call, placement, calls::launch(call, placement, self.native)));
        }
        let dtype = calls::data_type(call.dtype);
        let Some((_, _, launch)) = self.cached.as_ref() else {
            return Err(Error::runtime("internal: no NCCL launch prepared"));
        };
        let Some(comm) = self.comm.as_mut() else {
            return Err(Error::runtime(
                "the NCCL communicator was aborted after an earlier error",
            ));
        };
        match comm.launch(launch, dtype, &self.send, &mut self.recv, shift) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn marks_iterations(&self) -> bool {
        // Launches return before the GPU is done: only events on the
        // stream time each iteration.
        true
    }

    fn start_marks(&mut self, iters: u32) -> Result<(), Error> {
        self.marked = iters as usize;
        match self.device.start_marks(iters as usize) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn mark_iteration(&mut self, i: u32) -> Result<(), Error> {
        match self.device.mark_iteration(i as usize) {
            Ok(()) => Ok(()),
            Err(e) => self.fail(e),
        }
    }

    fn marked_times(&mut self) -> Result<Vec<f64>, Error> {
        match self.device.marked_times(self.marked) {
            Ok(times) => Ok(times),
            Err(e) => self.fail(e),
        }
    }

    fn wait(&mut self) -> Result<(), Error> {
        if let Err(e) = self.device.mark() {
            return self.fail(e);
        }
        // As nccl-tests does: poll the stream and NCCL's asynchronous error
        // state, so that a failed peer or network ends the wait with an
        // error instead of a hang.
        loop {
            match self.device.is_done() {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(e) => return self.fail(e),
            }
            if let Err(e) = self.comm()?.async_error() {
                return self.fail(e);
            }
            std::thread::yield_now();
        }
    }

    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error> {
        let (buf, range) = calls::regions(call, placement).output;
        debug_assert_eq!(buf, Buf::Recv, "NCCL writes every output to recv");
        let e = call.dtype.size_bytes();
        let bytes = &mut self.host_recv.bytes_mut()[range.start * e..range.end * e];
        if let Err(err) = Device::download(&self.recv, range.start * e, bytes) {
            return self.fail(err);
        }
        Ok((&mut self.host_recv, range))
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
    fn unique_ids_travel_as_exactly_128_bytes() {
        let id = UniqueId::from_bytes(&[7u8; 128]).unwrap();
        assert_eq!(id.0[127], 7);
        assert_eq!(id.hex().len(), 256);
        assert!(UniqueId::from_bytes(&[0u8; 127]).is_err());
        assert!(UniqueId::from_bytes(&[]).is_err());
    }
}
