//! Which launcher started this process, read from the environment before
//! any control plane starts (docs/launch.md): an MPI launcher (mpirun,
//! `srun --mpi=pmix`), whose ranks meet over MPI; or Slurm without MPI
//! (`srun --mpi=none`), torchrun (and PyTorch elastic) or a Kubernetes
//! Indexed Job, whose ranks meet at a TCP store on rank 0 (`world::store`);
//! or none (one process).
//!
//! Pure: every function reads the environment through a closure, so the
//! tests give it any environment. Must not start anything.

use crate::error::Error;

crate::types::vocabulary! {
    /// `run --launcher`: how the ranks of this job find each other.
    #[derive(Default)]
    pub enum LauncherChoice: "launcher", AnyCase {
        /// Read from the environment (`detect`).
        #[default]
        Auto = "auto",
        Mpi = "mpi", Slurm = "slurm", Torchrun = "torchrun", K8s = "k8s",
    }
}

crate::types::vocabulary! {
    /// The launchers whose ranks meet at the TCP store.
    pub enum StoreLauncher: "store launcher", Exact { Slurm = "slurm", Torchrun = "torchrun", K8s = "k8s" }
}

/// How this process was started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    /// No launcher: one process (an MPI singleton, or `-g` threads).
    Alone,
    /// An MPI launcher; `how` names it for the header ("mpirun",
    /// "srun --mpi=pmix").
    Mpi { how: String },
    /// Ranks that meet at the TCP store on rank 0.
    Store(StoreLaunch),
}

impl Launch {
    /// (rank, size) as the launcher announced them; `None` alone, and for
    /// an MPI launcher that does not say.
    pub fn rank_and_size(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<(usize, usize)> {
        match self {
            Launch::Alone => None,
            Launch::Store(s) => Some((s.rank, s.size)),
            Launch::Mpi { .. } => {
                let first = |names: &[&str]| names.iter().find_map(|v| number(env, v));
                let rank = first(&[
                    "OMPI_COMM_WORLD_RANK",
                    "PMIX_RANK",
                    "PMI_RANK",
                    "SLURM_PROCID",
                    "MV2_COMM_WORLD_RANK",
                ])?;
                let size = first(&[
                    "OMPI_COMM_WORLD_SIZE",
                    "PMI_SIZE",
                    "SLURM_STEP_NUM_TASKS",
                    "SLURM_NTASKS",
                    "MV2_COMM_WORLD_SIZE",
                ]);
                Some((rank, size.unwrap_or(rank + 1)))
            }
        }
    }
}

/// A launch whose ranks meet at the store: who this rank is, and where
/// rank 0 listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreLaunch {
    pub launcher: StoreLauncher,
    pub rank: usize,
    pub size: usize,
    /// The launcher's local rank (SLURM_LOCALID, LOCAL_RANK), checked
    /// against the ranks' hosts.
    pub local_rank: Option<usize>,
    /// Rank 0's host, as the other ranks reach it, and its port.
    pub host: String,
    pub port: u16,
    /// Shared by every rank of this job and by no other job: a store on
    /// the same port that was started by another job refuses this rank.
    pub token: String,
    /// Where the address came from, for messages.
    pub origin: String,
}

impl StoreLaunch {
    /// `host:port`, bracketed where the host is an IPv6 address.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// torchrun's and Kubernetes' default store port (PyTorch's MASTER_PORT).
pub const DEFAULT_PORT: u16 = 29500;

/// Slurm without reserved ports: `SLURM_PORT_BASE + (16 * job + step) %
/// SLURM_PORT_SPAN`, below Linux's ephemeral range, so that two steps
/// sharing a node rarely meet on one port (and the token tells them apart
/// when they do).
pub const SLURM_PORT_BASE: u16 = 20000;
pub const SLURM_PORT_SPAN: u64 = 9000;

/// How this process was started, given `--launcher`; `mpi_built` says
/// whether this build has the MPI control plane. A launcher whose
/// environment is missing or inconsistent is a usage error naming the
/// variable.
pub fn detect(choice: LauncherChoice, env: &dyn Fn(&str) -> Option<String>, mpi_built: bool) -> Result<Launch, Error> {
    let has = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let slurm_step = has("SLURM_STEP_ID") && has("SLURM_PROCID");
    let torchrun = has("RANK") && has("WORLD_SIZE") && has("MASTER_ADDR");
    let pmi = has("PMIX_RANK") || has("PMI_RANK") || has("MV2_COMM_WORLD_RANK");
    match choice {
        LauncherChoice::Auto if has("OMPI_COMM_WORLD_SIZE") => mpi(env, mpi_built, "mpirun"),
        LauncherChoice::Auto if torchrun => torchrun_launch(env).map(Launch::Store),
        // An MPI launcher under Slurm is srun --mpi=pmix (or pmi2): with
        // MPI built in it is MPI's; without, the step's ranks meet at the
        // store.
        LauncherChoice::Auto if pmi && (mpi_built || !slurm_step) => mpi(env, mpi_built, "an MPI launcher"),
        LauncherChoice::Auto if slurm_step => slurm(env).map(Launch::Store),
        LauncherChoice::Auto if has("JOB_COMPLETION_INDEX") => k8s(env).map(Launch::Store),
        LauncherChoice::Auto => Ok(Launch::Alone),
        LauncherChoice::Mpi => mpi(env, mpi_built, "an MPI launcher"),
        LauncherChoice::Slurm => slurm(env).map(Launch::Store),
        LauncherChoice::Torchrun => torchrun_launch(env).map(Launch::Store),
        LauncherChoice::K8s => k8s(env).map(Launch::Store),
    }
}

/// The MPI control plane, named for the header.
fn mpi(env: &dyn Fn(&str) -> Option<String>, mpi_built: bool, fallback: &str) -> Result<Launch, Error> {
    if !mpi_built {
        return Err(Error::usage(
            "this build has no MPI, so it cannot join an MPI launch (mpirun, srun --mpi=pmix); use the default build, \
             or launch with srun --mpi=none, torchrun or a Kubernetes Indexed Job (docs/launch.md)",
        ));
    }
    let has = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
    let how = if has("OMPI_COMM_WORLD_SIZE") && !has("SLURM_STEP_ID") {
        "mpirun".to_string()
    } else if has("SLURM_STEP_ID") && has("PMIX_RANK") {
        "srun --mpi=pmix".to_string()
    } else if has("SLURM_STEP_ID") && has("PMI_RANK") {
        "srun --mpi=pmi2".to_string()
    } else if has("PMIX_RANK") || has("PMI_RANK") || has("OMPI_COMM_WORLD_SIZE") || has("MV2_COMM_WORLD_RANK") {
        fallback.to_string()
    } else {
        // a process alone: an MPI singleton
        String::new()
    };
    Ok(Launch::Mpi { how })
}

/// `srun --mpi=none`: the step's tasks; the store on the first host of
/// the step, at a port Slurm reserved for the step or one derived from the
/// job and step ids.
fn slurm(env: &dyn Fn(&str) -> Option<String>) -> Result<StoreLaunch, Error> {
    let rank = required(env, "SLURM_PROCID", "run it under srun")?;
    let size = match number(env, "SLURM_STEP_NUM_TASKS") {
        Some(n) => n,
        None => required(env, "SLURM_NTASKS", "run it under srun")?,
    };
    let job = env("SLURM_JOB_ID").unwrap_or_default().trim().to_string();
    let step = env("SLURM_STEP_ID").unwrap_or_default().trim().to_string();
    let (host, origin) = match ["SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"]
        .iter()
        .find_map(|v| Some((first_host(&env(v)?)?, *v)))
    {
        Some((host, var)) => (host, format!("the first host of {var}")),
        None => {
            return Err(Error::usage(
                "--launcher slurm: no SLURM_STEP_NODELIST to find rank 0's host in; run it under srun, or set \
                 COLLBENCH_STORE=HOST:PORT",
            ));
        }
    };
    let reserved = env("SLURM_STEP_RESV_PORTS").and_then(|p| first_port(&p));
    let port = match reserved {
        Some(p) => p,
        None => {
            let job_n: u64 = job.parse().unwrap_or(0);
            let step_n: u64 = step.parse().unwrap_or(0);
            SLURM_PORT_BASE + ((16 * job_n + step_n) % SLURM_PORT_SPAN) as u16
        }
    };
    let origin = match reserved {
        Some(_) => format!("{origin}, the port from SLURM_STEP_RESV_PORTS"),
        None => format!("{origin}, the port from the job and step ids"),
    };
    store(
        env,
        StoreLaunch {
            launcher: StoreLauncher::Slurm,
            rank,
            size,
            local_rank: number(env, "SLURM_LOCALID"),
            host,
            port,
            token: format!("slurm:{job}.{step}"),
            origin,
        },
    )
}

/// torchrun, PyTorch elastic, and launchers that set PyTorch's variables
/// (Kubeflow's PyTorchJob). torchrun's agent serves its own store on
/// MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE=True): ours then takes the
/// next port.
fn torchrun_launch(env: &dyn Fn(&str) -> Option<String>) -> Result<StoreLaunch, Error> {
    let hint = "set by torchrun";
    let rank = required(env, "RANK", hint)?;
    let size = required(env, "WORLD_SIZE", hint)?;
    let host = env("MASTER_ADDR")
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .ok_or_else(|| Error::usage("--launcher torchrun: MASTER_ADDR is not set (set by torchrun)"))?;
    let master_port = match env("MASTER_PORT") {
        None => DEFAULT_PORT,
        Some(p) => parse_port(&p).ok_or_else(|| Error::usage(format!("MASTER_PORT is '{}', not a port", p.trim())))?,
    };
    let agent_store = env("TORCHELASTIC_USE_AGENT_STORE").is_some_and(|v| v.trim() == "True");
    let (port, origin) = if agent_store {
        let port = master_port
            .checked_add(1)
            .ok_or_else(|| Error::usage("MASTER_PORT is 65535: the store needs the port after it"))?;
        (
            port,
            "MASTER_ADDR and MASTER_PORT + 1 (torchrun's agent holds MASTER_PORT)".to_string(),
        )
    } else {
        (master_port, "MASTER_ADDR and MASTER_PORT".to_string())
    };
    let token = match env("TORCHELASTIC_RUN_ID") {
        Some(id) => format!(
            "torchrun:{}:{}",
            id.trim(),
            env("TORCHELASTIC_RESTART_COUNT").unwrap_or_default().trim()
        ),
        None => format!("torchrun:{host}:{master_port}"),
    };
    store(
        env,
        StoreLaunch {
            launcher: StoreLauncher::Torchrun,
            rank,
            size,
            local_rank: number(env, "LOCAL_RANK"),
            host,
            port,
            token,
            origin,
        },
    )
}

/// A Kubernetes Indexed Job: the rank is the completion index, the size
/// WORLD_SIZE (the Job's completions), the store on the pod of index 0,
/// named through the Job's headless service (COLLBENCH_SERVICE, the pods'
/// subdomain): pod hostnames are `<job>-<index>`, so rank 0 is
/// `<job>-0.<service>`.
fn k8s(env: &dyn Fn(&str) -> Option<String>) -> Result<StoreLaunch, Error> {
    let rank = required(env, "JOB_COMPLETION_INDEX", "set by an Indexed Job")?;
    let size = required(env, "WORLD_SIZE", "set it to the Job's completions in the pod template")?;
    let port = match env("MASTER_PORT") {
        None => DEFAULT_PORT,
        Some(p) => parse_port(&p).ok_or_else(|| Error::usage(format!("MASTER_PORT is '{}', not a port", p.trim())))?,
    };
    let service = env("COLLBENCH_SERVICE")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let (host, origin) = match (env("MASTER_ADDR").filter(|a| !a.trim().is_empty()), &service) {
        (Some(addr), _) => (addr.trim().to_string(), "MASTER_ADDR".to_string()),
        (None, Some(service)) => {
            let hostname = env("HOSTNAME").unwrap_or_else(crate::topology::hostname);
            let job = hostname.trim().strip_suffix(&format!("-{rank}")).ok_or_else(|| {
                Error::usage(format!(
                    "--launcher k8s: the pod's hostname '{}' does not end in -{rank} (its completion index); set \
                     `subdomain: {service}` in the pod template, or COLLBENCH_STORE=HOST:PORT",
                    hostname.trim()
                ))
            })?;
            (
                format!("{job}-0.{service}"),
                "the pod of index 0 through COLLBENCH_SERVICE".to_string(),
            )
        }
        (None, None) if env("COLLBENCH_STORE").is_some() => (String::new(), String::new()),
        (None, None) => {
            return Err(Error::usage(
                "--launcher k8s: rank 0's address is unknown; set COLLBENCH_SERVICE to the Job's headless service \
                 (the pods' subdomain), or COLLBENCH_STORE=HOST:PORT",
            ));
        }
    };
    let token = format!("k8s:{}:{host}", service.unwrap_or_default());
    store(
        env,
        StoreLaunch {
            launcher: StoreLauncher::K8s,
            rank,
            size,
            local_rank: None,
            host,
            port,
            token,
            origin,
        },
    )
}

/// The checks every store launch shares, and COLLBENCH_STORE=HOST[:PORT]
/// in place of the launcher's address.
fn store(env: &dyn Fn(&str) -> Option<String>, mut launch: StoreLaunch) -> Result<StoreLaunch, Error> {
    let name = launch.launcher.name();
    if launch.size == 0 {
        return Err(Error::usage(format!("--launcher {name}: the job has 0 ranks")));
    }
    // A rank beyond the size is refused by rank 0, which ends the whole
    // job with one line (a rank that stopped here alone would leave the
    // others waiting).
    if let Some(text) = env("COLLBENCH_STORE").filter(|s| !s.trim().is_empty()) {
        let (host, port) = split_address(text.trim())
            .ok_or_else(|| Error::usage(format!("COLLBENCH_STORE is '{}', not HOST:PORT", text.trim())))?;
        launch.host = host;
        launch.port = port.unwrap_or(launch.port);
        launch.origin = "COLLBENCH_STORE".into();
    }
    if launch.port == 0 {
        return Err(Error::usage(format!("--launcher {name}: the store's port is 0")));
    }
    Ok(launch)
}

/// `HOST`, `HOST:PORT`, `[V6]:PORT`.
fn split_address(text: &str) -> Option<(String, Option<u16>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after.strip_prefix(':') {
            Some(p) => Some(parse_port(p)?),
            None if after.is_empty() => None,
            None => return None,
        };
        return Some((host.to_string(), port));
    }
    match text.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && !host.is_empty() => {
            Some((host.to_string(), Some(parse_port(port)?)))
        }
        Some(_) => None,
        None => Some((text.to_string(), None)),
    }
}

fn parse_port(text: &str) -> Option<u16> {
    text.trim().parse::<u16>().ok().filter(|&p| p > 0)
}

fn number(env: &dyn Fn(&str) -> Option<String>, name: &str) -> Option<usize> {
    env(name)?.trim().parse().ok()
}

/// A variable the launcher must set, as a number.
fn required(env: &dyn Fn(&str) -> Option<String>, name: &str, hint: &str) -> Result<usize, Error> {
    match env(name) {
        None => Err(Error::usage(format!("{name} is not set ({hint})"))),
        Some(v) => v
            .trim()
            .parse()
            .map_err(|_| Error::usage(format!("{name} is '{}', not a number", v.trim()))),
    }
}

/// The first host of a Slurm host list: `node[01-04,07],gpu-a` gives
/// `node01`; every bracket of the first name gives its first value.
pub fn first_host(list: &str) -> Option<String> {
    let mut depth = 0;
    let end = list
        .char_indices()
        .find(|&(_, c)| {
            match c {
                '[' => depth += 1,
                ']' => depth -= 1,
                _ => {}
            }
            c == ',' && depth == 0
        })
        .map_or(list.len(), |(i, _)| i);
    let name = list[..end].trim();
    let mut host = String::new();
    let mut rest = name;
    while let Some(open) = rest.find('[') {
        host.push_str(&rest[..open]);
        let close = rest[open..].find(']')? + open;
        let first = rest[open + 1..close].split([',', '-']).next()?.trim();
        host.push_str(first);
        rest = &rest[close + 1..];
    }
    host.push_str(rest);
    (!host.is_empty()).then_some(host)
}

/// The first port of SLURM_STEP_RESV_PORTS (`12000-12003`, `12000,12005`).
fn first_port(text: &str) -> Option<u16> {
    parse_port(text.split([',', '-']).next()?)
}

#[cfg(test)]
mod tests;
