//! Transport profiles: named sets of environment variables that steer NCCL
//! or the MPI library onto one kind of link, and the plan of what a run adds
//! to its environment before either library starts.
//!
//! Owns the profile table (`collbench run --transport help` prints it), the
//! rule that a profile must match the backend, and `EnvPlan`: the profile's
//! variables the user has not set, plus the variables that send NCCL's INFO
//! log to a private file. Both libraries read their environment once, when
//! they initialise (Open MPI its `OMPI_MCA_*` variables in MPI_Init, NCCL
//! its `NCCL_*` variables at the first communicator), and Rust 2024 makes
//! changing the environment in-process `unsafe`; so `reexec` starts the
//! same binary again, with the variables added, before MPI_Init. A marker
//! variable makes that happen once and tells the new process what was added.
//! Observing which transport was then used lives in `observe`.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::error::Error;
use crate::types::{BackendKind, ProfilerEnv};

/// Set in the re-executed process: the profile, then the names of the
/// variables collbench added (`shm:OMPI_MCA_pml,OMPI_MCA_btl`).
pub const MARKER: &str = "COLLBENCH_TRANSPORT_APPLIED";

crate::types::vocabulary! {
    /// A transport profile, read in either case (`--transport`, the
    /// `transport` column).
    #[derive(Hash, Default)]
    pub enum Profile: "transport profile", AnyCase {
        #[default]
        Auto = "auto",
        Nvlink = "nvlink", Nvls = "nvls", Pcie = "pcie", Ib = "ib", Socket = "socket",
        Shm = "shm", Tcp = "tcp", Ucx = "ucx",
    }
}

impl Profile {
    /// "auto, nvlink, ..., ucx", for messages.
    pub fn names() -> String {
        crate::types::known::<Profile>()
    }

    /// The backend whose library this profile steers; `None` for `auto`,
    /// which sets nothing and fits every backend.
    pub fn backend(self) -> Option<BackendKind> {
        match self {
            Profile::Auto => None,
            Profile::Nvlink | Profile::Nvls | Profile::Pcie | Profile::Ib | Profile::Socket => Some(BackendKind::Nccl),
            Profile::Shm | Profile::Tcp | Profile::Ucx => Some(BackendKind::Mpi),
        }
    }

    /// What the profile measures, in one line.
    pub fn purpose(self) -> &'static str {
        match self {
            Profile::Auto => "touch nothing: the library picks its transports",
            Profile::Nvlink => {
                "GPU peer-to-peer over NVLink only: no host-memory (SHM) path, no network inside a node, \
                 no NVLink SHARP; GPUs without NVLink between them fail the run instead of falling back"
            }
            Profile::Nvls => "NVLink SHARP (NVSwitch multicast) switched on; the run fails if the system has none",
            Profile::Pcie => {
                "no GPU peer-to-peer: traffic inside a node crosses PCIe through host memory (SHM), \
                 never the network"
            }
            Profile::Ib => {
                "every connection through the InfiniBand/RoCE network (P2P and SHM off): on one node \
                 this is the NIC's loopback, not a cable"
            }
            Profile::Socket => {
                "every connection through NCCL's TCP sockets (P2P, SHM and IB off): on one node this \
                 is the kernel's loopback"
            }
            Profile::Shm => "Open MPI's ob1 with the shared-memory BTL only (one node)",
            Profile::Tcp => "Open MPI's ob1 with the TCP BTL only, also between ranks on one node",
            Profile::Ucx => {
                "Open MPI's UCX PML, UCX choosing any transport but TCP (shared memory in a node, \
                 RDMA verbs between nodes)"
            }
        }
    }

    /// The variables the profile sets, in order.
    pub fn vars(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Profile::Auto => &[],
            Profile::Nvlink => &[
                ("NCCL_P2P_LEVEL", "NVL"),
                ("NCCL_SHM_DISABLE", "1"),
                ("NCCL_NET_DISABLE_INTRA", "1"),
                ("NCCL_NVLS_ENABLE", "0"),
            ],
            Profile::Nvls => &[("NCCL_NVLS_ENABLE", "1")],
            Profile::Pcie => &[
                ("NCCL_P2P_DISABLE", "1"),
                ("NCCL_NVLS_ENABLE", "0"),
                ("NCCL_NET_DISABLE_INTRA", "1"),
            ],
            // NCCL_NET_DISABLE_INTRA defaults to 1 in some NCCL builds; the
            // network profiles must allow it inside a node.
            Profile::Ib => &[
                ("NCCL_P2P_DISABLE", "1"),
                ("NCCL_SHM_DISABLE", "1"),
                ("NCCL_NVLS_ENABLE", "0"),
                ("NCCL_NET_DISABLE_INTRA", "0"),
                ("NCCL_IB_DISABLE", "0"),
                ("NCCL_NET", "IB"),
            ],
            Profile::Socket => &[
                ("NCCL_P2P_DISABLE", "1"),
                ("NCCL_SHM_DISABLE", "1"),
                ("NCCL_NVLS_ENABLE", "0"),
                ("NCCL_NET_DISABLE_INTRA", "0"),
                ("NCCL_IB_DISABLE", "1"),
                ("NCCL_NET", "Socket"),
            ],
            // `vader` is the shared-memory BTL of Open MPI 1.8 to 4.1; 5.0
            // renamed it `sm` and keeps `vader` as an alias.
            Profile::Shm => &[("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "self,vader")],
            Profile::Tcp => &[("OMPI_MCA_pml", "ob1"), ("OMPI_MCA_btl", "self,tcp")],
            // Open MPI 4.1 only takes UCX by itself when it sees an
            // InfiniBand device (pml_ucx_tls/pml_ucx_devices); `any` makes
            // the profile mean UCX on every machine.
            Profile::Ucx => &[
                ("OMPI_MCA_pml", "ucx"),
                ("OMPI_MCA_pml_ucx_tls", "any"),
                ("OMPI_MCA_pml_ucx_devices", "any"),
                ("UCX_TLS", "^tcp"),
            ],
        }
    }

    /// The profile fits the backend that runs. One line naming both when
    /// it does not.
    pub fn check_backend(self, backend: BackendKind, why: &str) -> Result<(), Error> {
        let Some(steers) = self.backend().filter(|&b| b != backend) else {
            return Ok(());
        };
        let instead = match backend {
            BackendKind::Mpi => "an MPI profile (shm, tcp, ucx) or auto",
            BackendKind::Nccl => "an NCCL profile (nvlink, nvls, pcie, ib, socket) or auto",
            BackendKind::Memory => "auto (the memory backend has no transport)",
        };
        Err(Error::usage(format!(
            "--transport {} is {} profile, but the backend is {backend}{why}; use {instead}",
            self.name(),
            match steers {
                BackendKind::Nccl => "an NCCL",
                BackendKind::Mpi => "an MPI",
                BackendKind::Memory => "a memory",
            },
        )))
    }
}

/// `collbench run --transport help`: every profile with the exact
/// variables it sets.
pub fn help_text() -> String {
    let mut s = String::from(
        "Transport profiles: collbench run --transport NAME (or `transport = \"NAME\"` in a config file).\n\
         A profile sets these variables before MPI and NCCL start. A variable already set in the\n\
         environment (or by mpirun -x / --mca) wins over the profile; the run header lists it.\n\
         The CSV records the profile in `transport` and what was used in `transport_observed`.\n",
    );
    for p in Profile::ALL {
        s += &format!(
            "\n{:<7} [{}] {}\n",
            p.name(),
            p.backend().map_or("any backend", BackendKind::name),
            p.purpose()
        );
        if p.vars().is_empty() {
            s += "          (sets nothing)\n";
        }
        for (name, value) in p.vars() {
            s += &format!("          {name}={value}\n");
        }
    }
    s += "\nWith the nccl backend collbench also sends NCCL's INFO log to a private file per rank\n\
          (NCCL_DEBUG=INFO, NCCL_DEBUG_FILE, NCCL_DEBUG_SUBSYS=INIT,ENV,GRAPH, NCCL_RUNTIME_CONNECT=0)\n\
          to read the transports back, unless NCCL_DEBUG or NCCL_DEBUG_FILE is already set.\n\
          MPICH has no btl/pml: MPIR_CVAR_CH4_NETMOD=ofi|ucx picks its network, FI_PROVIDER=tcp\n\
          (or =shm) the libfabric provider, MPIR_CVAR_NOLOCAL=1 sends node-local traffic through\n\
          the network; set them yourself and run with --transport auto.\n";
    s
}

/// A profile variable the environment already had with another value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kept {
    pub name: String,
    pub user_value: String,
    pub profile_value: String,
}

/// Where NCCL's INFO log goes during a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NcclLogging {
    /// The run cannot use NCCL; nothing was set.
    NotUsed,
    /// collbench's private per-rank file.
    Private(PathBuf),
    /// The user's own NCCL_DEBUG or NCCL_DEBUG_FILE is set: left alone, and
    /// the transport is not observed from the log.
    UserOwned(String),
}

/// What a run adds to its environment, and what it found already there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvPlan {
    pub profile: Profile,
    /// Variables collbench adds, in order.
    pub added: Vec<(String, String)>,
    /// Profile variables set to another value before the run (they win).
    pub kept: Vec<Kept>,
    pub nccl_log: NcclLogging,
    /// NCCL_PROFILER_PLUGIN: collbench's plugin, the user's, or unset.
    pub profiler: ProfilerEnv,
}

/// The name of NCCL's variable for a profiler plugin's library.
pub const PROFILER_VAR: &str = "NCCL_PROFILER_PLUGIN";

/// The variables that send NCCL's INFO log to `path`, leaving the ones the
/// user set (their NCCL_DEBUG_SUBSYS, NCCL_RUNTIME_CONNECT) alone.
/// NCCL_RUNTIME_CONNECT=0 makes NCCL connect every channel when the
/// communicator is created (NCCL 2.22 and later connect lazily, at the
/// first collective that needs a channel), so the channel lines are all in
/// the log once initialisation returns.
/// TUNING, with `--algo-record log`, adds rank 0's line per collective
/// (`nccl_log::message::tuning`).
/// The profile's variables split by who set them: added by collbench
/// (`ours`), or the user's where the user's value differs from the
/// profile's (a user's equal value is neither).
fn profile_vars(
    profile: Profile,
    env: &dyn Fn(&str) -> Option<String>,
    ours: &dyn Fn(&str) -> bool,
) -> (Vec<(String, String)>, Vec<Kept>) {
    let mut added = Vec::new();
    let mut kept = Vec::new();
    for (name, value) in profile.vars() {
        if ours(name) {
            added.push((name.to_string(), value.to_string()));
        } else if let Some(user) = env(name).filter(|u| u != value) {
            kept.push(Kept {
                name: name.to_string(),
                user_value: user,
                profile_value: value.to_string(),
            });
        }
    }
    (added, kept)
}

/// The user's own NCCL log setting, `NAME=value`, which a run leaves in
/// place of its private log.
fn user_nccl_log(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    ["NCCL_DEBUG", "NCCL_DEBUG_FILE"]
        .into_iter()
        .find_map(|v| Some(format!("{v}={}", env(v)?)))
}

/// The variables of a run's private NCCL log (`nccl_log_vars`).
const NCCL_LOG_VARS: [&str; 4] = [
    "NCCL_DEBUG",
    "NCCL_DEBUG_FILE",
    "NCCL_DEBUG_SUBSYS",
    "NCCL_RUNTIME_CONNECT",
];

fn nccl_log_vars(log: &LogRequest) -> [(&'static str, String); 4] {
    let subsys = if log.tuning {
        "INIT,ENV,GRAPH,TUNING"
    } else {
        "INIT,ENV,GRAPH"
    };
    let [debug, file, subsys_var, connect] = NCCL_LOG_VARS;
    [
        (debug, "INFO".into()),
        (file, log.path.display().to_string()),
        (subsys_var, subsys.into()),
        (connect, "0".into()),
    ]
}

/// NCCL's private log a run asks for when it may use NCCL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRequest {
    /// `private_nccl_log`.
    pub path: PathBuf,
    /// TUNING among the subsystems (`--algo-record log`, and `auto`
    /// where the plugin cannot record).
    pub tuning: bool,
    /// collbench's profiler plugin to set NCCL_PROFILER_PLUGIN to, unless
    /// the user set it (`--algo-record plugin` or `auto`).
    pub profiler: Option<PathBuf>,
}

/// The private log file of the process `pid` on `host`, in `dir`. The pid
/// survives the re-exec, so the path is known before NCCL starts; the host
/// keeps ranks apart where the folder is shared between nodes.
pub fn private_nccl_log(dir: &std::path::Path, host: &str, pid: u32) -> PathBuf {
    let host: String = host
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' })
        .take(64)
        .collect();
    dir.join(format!("collbench-nccl-{host}-{pid}.log"))
}

impl EnvPlan {
    /// The plan before anything was applied. `nccl_log` is the private log
    /// when the run may use NCCL; `env` reads the environment.
    pub fn new(profile: Profile, nccl_log: Option<LogRequest>, env: &dyn Fn(&str) -> Option<String>) -> EnvPlan {
        let (mut added, kept) = profile_vars(profile, env, &|name| env(name).is_none());
        let profiler = match (env(PROFILER_VAR), nccl_log.as_ref().and_then(|l| l.profiler.clone())) {
            (Some(user), _) => ProfilerEnv::User(user),
            (None, Some(path)) => {
                added.push((PROFILER_VAR.to_string(), path.display().to_string()));
                ProfilerEnv::Ours(path)
            }
            (None, None) => ProfilerEnv::Unset,
        };
        let nccl_log = match (nccl_log, user_nccl_log(env)) {
            (None, _) => NcclLogging::NotUsed,
            (Some(_), Some(user)) => NcclLogging::UserOwned(user),
            (Some(log), None) => {
                for (name, value) in nccl_log_vars(&log) {
                    if env(name).is_none() {
                        added.push((name.to_string(), value));
                    }
                }
                NcclLogging::Private(log.path)
            }
        };
        EnvPlan {
            profile,
            added,
            kept,
            nccl_log,
            profiler,
        }
    }

    /// The plan as the re-executed process sees it: `marker` (the value of
    /// `MARKER`) names what was added; everything else of the profile that
    /// is set came from the user.
    pub fn after_reexec(profile: Profile, marker: &str, env: &dyn Fn(&str) -> Option<String>) -> EnvPlan {
        let added_names: Vec<&str> = marker
            .split_once(':')
            .map(|(_, names)| names.split(',').filter(|n| !n.is_empty()).collect())
            .unwrap_or_default();
        let was_added = |name: &str| added_names.contains(&name);
        let (mut added, kept) = profile_vars(profile, env, &was_added);
        let profiler = match env(PROFILER_VAR) {
            Some(path) if was_added(PROFILER_VAR) => {
                added.push((PROFILER_VAR.to_string(), path.clone()));
                ProfilerEnv::Ours(PathBuf::from(path))
            }
            Some(user) => ProfilerEnv::User(user),
            None => ProfilerEnv::Unset,
        };
        let nccl_log = if was_added("NCCL_DEBUG_FILE") {
            for name in NCCL_LOG_VARS.into_iter().filter(|n| was_added(n)) {
                if let Some(value) = env(name) {
                    added.push((name.to_string(), value));
                }
            }
            env("NCCL_DEBUG_FILE").map_or(NcclLogging::NotUsed, |p| NcclLogging::Private(PathBuf::from(p)))
        } else {
            user_nccl_log(env).map_or(NcclLogging::NotUsed, NcclLogging::UserOwned)
        };
        EnvPlan {
            profile,
            added,
            kept,
            nccl_log,
            profiler,
        }
    }

    /// The marker value for the re-executed process.
    pub fn marker(&self) -> String {
        let names: Vec<&str> = self.added.iter().map(|(n, _)| n.as_str()).collect();
        format!("{}:{}", self.profile.name(), names.join(","))
    }

    /// The header's description: what was set, what the environment kept.
    /// Header notes; the NCCL log is mentioned only when `nccl` runs.
    pub fn describe(&self, nccl: bool) -> Vec<String> {
        let mut lines = Vec::new();
        let profile_vars: Vec<String> = self
            .added
            .iter()
            .filter(|(n, _)| self.profile.vars().iter().any(|(v, _)| v == n))
            .map(|(n, v)| format!("{n}={v}"))
            .collect();
        if !profile_vars.is_empty() {
            lines.push(format!("set {}", profile_vars.join(" ")));
        }
        for k in &self.kept {
            lines.push(format!(
                "kept from the environment: {}={} (the profile's {} was not applied)",
                k.name, k.user_value, k.profile_value
            ));
        }
        match &self.nccl_log {
            _ if !nccl => {}
            NcclLogging::NotUsed => {}
            NcclLogging::Private(path) => lines.push(format!("NCCL INFO log of each rank: {}", path.display())),
            NcclLogging::UserOwned(var) => lines.push(format!(
                "{var} was set before the run: NCCL's log is left to it, and its transport is not observed"
            )),
        }
        lines
    }
}

impl EnvPlan {
    /// Removes this process's private NCCL log (after a successful run; a
    /// failed one keeps it for diagnosis).
    pub fn remove_nccl_log(&self) {
        if let NcclLogging::Private(path) = &self.nccl_log {
            let _ = std::fs::remove_file(path);
        }
    }

    /// The log NCCL's TUNING lines go to (`--algo-record log`): the
    /// private one, or why there is none.
    pub fn tuning_log(&self) -> Result<PathBuf, String> {
        match &self.nccl_log {
            NcclLogging::Private(path) => Ok(path.clone()),
            NcclLogging::UserOwned(var) => Err(format!(
                "{var} was set before the run, so NCCL's log is not collbench's; unset it"
            )),
            NcclLogging::NotUsed => Err("NCCL's log was not requested".into()),
        }
    }
}

/// What to do before MPI starts.
#[derive(Debug, PartialEq, Eq)]
pub enum Prepared {
    /// Nothing to add, or already added: go on with this plan.
    Ready(EnvPlan),
    /// Start the binary again with these variables added.
    Reexec(EnvPlan),
}

/// Decides whether the process must be started again with `profile`'s
/// variables. `env` reads the environment (the marker included).
pub fn prepare(profile: Profile, nccl_log: Option<LogRequest>, env: &dyn Fn(&str) -> Option<String>) -> Prepared {
    if let Some(marker) = env(MARKER) {
        return Prepared::Ready(EnvPlan::after_reexec(profile, &marker, env));
    }
    let plan = EnvPlan::new(profile, nccl_log, env);
    if plan.added.is_empty() {
        Prepared::Ready(plan)
    } else {
        Prepared::Reexec(plan)
    }
}

/// The process's environment, for `prepare`; values that are not UTF-8
/// count as set (so they win) and are shown lossily.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// Replaces this process with the same binary, arguments and pid, plus
/// `plan`'s variables and the marker. Returns only when that fails.
pub fn reexec(plan: &EnvPlan) -> Error {
    use std::os::unix::process::CommandExt;
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            return Error::runtime(format!(
                "cannot find this program's own path to apply --transport {} ({e}); set the profile's \
                 variables yourself (see --transport help) and use --transport auto",
                plan.profile
            ));
        }
    };
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| OsString::from("collbench"));
    let mut cmd = std::process::Command::new(&exe);
    cmd.arg0(arg0).args(args);
    for (name, value) in &plan.added {
        cmd.env(name, value);
    }
    cmd.env(MARKER, plan.marker());
    let e = cmd.exec();
    Error::runtime(format!(
        "cannot restart {} to apply --transport {}: {e}",
        exe.display(),
        plan.profile
    ))
}

#[cfg(test)]
mod tests;
