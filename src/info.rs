//! `collbench info`: what this machine offers a run, one fact per line, with
//! the reason wherever something is missing. Needs neither MPI nor a GPU.

use std::path::Path;

/// The report `collbench info` prints.
pub fn report(nccl_lib: Option<&Path>) -> String {
    let mut out = format!("collbench {}\n", env!("CARGO_PKG_VERSION"));
    for (key, value) in facts(nccl_lib) {
        out += &format!("{key:<12}{value}\n");
    }
    out
}

fn facts(nccl_lib: Option<&Path>) -> Vec<(&'static str, String)> {
    let mut facts = nccl_facts(nccl_lib);
    facts.push(("MPI", mpi_fact()));
    facts.push(("Launcher", launcher_fact(&|name| std::env::var(name).ok())));
    facts
}

/// What `run --launcher auto` reads from this environment (docs/launch.md).
fn launcher_fact(env: &dyn Fn(&str) -> Option<String>) -> String {
    use crate::world::launch::{self, Launch, LauncherChoice};
    match launch::detect(LauncherChoice::Auto, env, cfg!(feature = "mpi")) {
        Ok(Launch::Alone) => "none: one process (mpirun, srun, torchrun or a Kubernetes Indexed Job start more)".into(),
        Ok(Launch::Mpi { how }) => format!("{how}: the ranks meet over MPI"),
        Ok(Launch::Store(s)) => format!(
            "{}: rank {} of {}, the ranks meet at the TCP store at {} ({})",
            s.launcher.name(),
            s.rank,
            s.size,
            s.address(),
            s.origin
        ),
        Err(e) => format!("not usable: {e}"),
    }
}

#[cfg(feature = "nccl")]
fn nccl_facts(nccl_lib: Option<&Path>) -> Vec<(&'static str, String)> {
    use crate::backend::nccl::{DeviceError, NcclLibrary, device, sys};
    use crate::types::human_bytes;

    let nccl = match NcclLibrary::find(nccl_lib) {
        Ok(lib) => {
            let opt = lib.optional();
            let native: Vec<&str> = [
                (opt.alltoall, "ncclAlltoAll"),
                (opt.gather, "ncclGather"),
                (opt.scatter, "ncclScatter"),
            ]
            .iter()
            .filter(|(has, _)| *has)
            .map(|(_, name)| *name)
            .collect();
            let native = if native.is_empty() {
                "alltoall, gather, scatter as grouped send/recv".to_string()
            } else {
                format!("native {}", native.join(", "))
            };
            let split = if opt.comm_split {
                "ncclCommSplit"
            } else {
                "no ncclCommSplit (hierarchical sub-communicators from unique ids)"
            };
            let register = if opt.comm_register {
                "ncclCommRegister"
            } else {
                "no ncclCommRegister (-R registers nothing)"
            };
            let windows = if opt.comm_window_register && opt.mem_alloc && lib.version() >= sys::WINDOW_SINCE {
                "ncclCommWindowRegister"
            } else {
                "no ncclCommWindowRegister (-R 2 is refused)"
            };
            let sim = if lib.is_simulation() {
                "; SIMULATED: the host GPU simulation of tests/gpu-sim, no figure is a measurement"
            } else {
                ""
            };
            format!(
                "{}{} at {} (found via {}; {native}; {split}; {register}; {windows}{sim})",
                lib.version(),
                lib.sim_suffix(),
                lib.path().display(),
                lib.route()
            )
        }
        Err(e) => format!("not usable: {e}"),
    };
    let mut facts = vec![("NCCL", nccl)];
    match device::probe() {
        Ok(info) => {
            facts.push((
                "CUDA driver",
                format!("{} ({})", info.driver.version_text(), info.driver.library),
            ));
            let gpus = info
                .gpus
                .iter()
                .map(|g| format!("{}: {} ({})", g.ordinal, g.name, human_bytes(g.total_bytes as u64)))
                .collect::<Vec<_>>()
                .join("; ");
            facts.push(("GPUs", format!("{} visible{}", info.gpus.len(), visible_note(&gpus))));
        }
        Err(DeviceError::NoGpu { driver, reason }) => {
            facts.push(("CUDA driver", driver));
            facts.push(("GPUs", format!("none ({reason})")));
        }
        Err(e) => {
            facts.push(("CUDA driver", format!("absent: {e}")));
            facts.push(("GPUs", "none (no CUDA driver)".into()));
        }
    }
    facts
}

#[cfg(feature = "nccl")]
fn visible_note(gpus: &str) -> String {
    let env = std::env::var("CUDA_VISIBLE_DEVICES")
        .map(|v| format!(", CUDA_VISIBLE_DEVICES={v}"))
        .unwrap_or_default();
    format!("{env}: {gpus}")
}

#[cfg(not(feature = "nccl"))]
fn nccl_facts(_nccl_lib: Option<&Path>) -> Vec<(&'static str, String)> {
    vec![
        ("NCCL", "not in this build (rebuild with the `nccl` feature)".into()),
        ("CUDA driver", "not looked for (no nccl feature)".into()),
        ("GPUs", "not looked for (no nccl feature)".into()),
    ]
}

#[cfg(feature = "mpi")]
fn mpi_fact() -> String {
    // MPI_Get_library_version may be called before MPI_Init.
    crate::world::mpi::mpi_library_version()
}

#[cfg(not(feature = "mpi"))]
fn mpi_fact() -> String {
    "not in this build: launches without MPI only (srun --mpi=none, torchrun, Kubernetes; docs/launch.md); the \
     default build has it"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_launcher_line_says_what_run_would_detect() {
        let none = |_: &str| None;
        assert!(launcher_fact(&none).starts_with("none: one process"));
        let torchrun = |name: &str| match name {
            "RANK" => Some("1".to_string()),
            "WORLD_SIZE" => Some("4".to_string()),
            "MASTER_ADDR" => Some("trainer-0".to_string()),
            _ => None,
        };
        assert_eq!(
            launcher_fact(&torchrun),
            "torchrun: rank 1 of 4, the ranks meet at the TCP store at trainer-0:29500 (MASTER_ADDR and MASTER_PORT)"
        );
        let bad = |name: &str| (name == "JOB_COMPLETION_INDEX").then(|| "0".to_string());
        assert!(
            launcher_fact(&bad).starts_with("not usable: WORLD_SIZE is not set"),
            "{}",
            launcher_fact(&bad)
        );
    }
}
