//! Which control plane a run gets (docs/launch.md), from `--launcher` and
//! the environment (`world::launch`): threads with `-g`; MPI under an MPI
//! launcher, and for a process alone (an MPI singleton); the TCP store
//! for Slurm without MPI, torchrun and Kubernetes. Each starts with its
//! pre-flight, a meeting of every rank with a deadline (`--timeout`)
//! before anything of NCCL starts, so that a broken launcher or control
//! plane is told apart from a failing NCCL.

use super::{Session, Task, is_first_rank};
use crate::config::RunConfig;
use crate::engine::stop::StopRequest;
use crate::error::{exit, say};
use crate::topology::profile::EnvPlan;
use crate::world::launch::{self, Launch, StoreLaunch};
use crate::world::store::StoreWorld;

/// The control plane for this run, then the run on every rank; the exit
/// code of this process.
pub(super) fn run_with_control_plane(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>) -> u8 {
    let env = |name: &str| std::env::var(name).ok();
    let launch = match launch::detect(cfg.start.launcher, &env, cfg!(feature = "mpi")) {
        Ok(launch) => launch,
        Err(e) => {
            if is_first_rank() {
                say(&format!("collbench: {e}"));
            }
            return e.exit_code();
        }
    };
    let multi = launch.rank_and_size(&env).is_some_and(|(_, n)| n > 1);
    if multi && cfg.start.threads.is_some() {
        if is_first_rank() {
            say(
                "collbench: -g starts every rank as a thread of one process; do not combine it with a multi-process launch",
            );
        }
        return exit::USAGE;
    }
    match (cfg.start.threads, launch) {
        (Some(n), _) => super::run_threads(n, cfg, env_plan, stop, task),
        (None, Launch::Store(store)) => run_store(&store, cfg, env_plan, stop, task),
        (None, Launch::Mpi { how }) => super::run_mpi(cfg, env_plan, stop, task, &how),
        (None, Launch::Alone) => super::run_mpi(cfg, env_plan, stop, task, ""),
    }
}

/// An MPI launcher started this process (not Slurm without MPI, torchrun
/// or Kubernetes, whose ranks cannot meet over MPI): early errors are
/// agreed on over MPI only then.
#[cfg(feature = "mpi")]
pub(super) fn mpi_launch() -> bool {
    let env = |name: &str| std::env::var(name).ok();
    matches!(
        launch::detect(launch::LauncherChoice::Auto, &env, true),
        Ok(Launch::Mpi { .. })
    )
}

/// The ranks meet at the store (rank 0 opens it); the start's failures
/// were printed by the rank that saw them.
fn run_store(launch: &StoreLaunch, cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>) -> u8 {
    let world = match StoreWorld::start(launch, cfg.timing.timeout) {
        Ok(world) => world,
        Err(e) => return e.exit_code(),
    };
    Session::new(&world, cfg, env_plan, stop).with_task(task).run(None)
}
