//! Which control plane a run gets (docs/launch.md), from `--launcher` and
//! the environment (`world::launch`): threads with `-g`; MPI under an MPI
//! launcher, and for a process alone (an MPI singleton); the TCP store
//! for Slurm without MPI, torchrun and Kubernetes. Each starts with its
//! pre-flight, a meeting of every rank with a deadline (`--timeout`)
//! before anything of NCCL starts, so that a broken launcher or control
//! plane is told apart from a failing NCCL. Every starter is here: each
//! makes its world and runs the task's `Session` on every rank.

use std::sync::{Mutex, PoisonError};

use super::backend_choice::HostBackend;
use super::{Session, Task, is_first_rank};
use crate::backend::Backend;
use crate::config::RunConfig;
use crate::engine::stop::StopRequest;
use crate::error::Error;
use crate::error::{exit, say};
use crate::topology::Nodes;
use crate::topology::profile::EnvPlan;
use crate::types::{BackendChoice, BackendKind};
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
        (Some(n), _) => run_threads(n, cfg, env_plan, stop, task),
        (None, Launch::Store(store)) => run_store(&store, cfg, env_plan, stop, task),
        (None, Launch::Mpi { how }) => run_mpi(cfg, env_plan, stop, task, &how),
        // a process alone on host memory: one rank, a thread of its own
        (None, Launch::Alone) if cfg.start.backend == BackendChoice::Only(BackendKind::Memory) => {
            run_threads(1, cfg, env_plan, stop, task)
        }
        (None, Launch::Alone) => run_mpi(cfg, env_plan, stop, task, ""),
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

/// The first meeting of an MPI job's ranks, the first collective of every
/// rank whether its start succeeded (`code` 0) or not (its exit code: bad
/// options, a bad config file): every rank learns the job's worst code,
/// and whether it is the lowest rank that failed, the one to say why.
/// `World::agree` meets the same way, so a rank that failed before the
/// control plane and the ranks that started agree on this first step.
#[cfg(feature = "mpi")]
pub(super) fn first_meeting(world: &crate::world::mpi::MpiWorld, code: u8) -> (u8, bool) {
    use crate::world::World;
    let worst = world.max_u64(u64::from(code));
    let me = world.rank() as u64;
    let lowest = world.min_u64(if code != 0 { me } else { u64::MAX });
    (worst as u8, code != 0 && lowest == me)
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

/// `how` names the launcher for the header and the pre-flight's message
/// (empty for a process alone).
#[cfg(feature = "mpi")]
fn run_mpi(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>, how: &str) -> u8 {
    use super::preflight;
    use crate::backend::mpi::MpiBackend;

    let preflight = preflight::Preflight::arm(cfg.timing.timeout, how);
    let world = match crate::world::mpi::MpiWorld::init().map(|w| if how.is_empty() { w } else { w.launched_by(how) }) {
        Ok(w) => w,
        Err(e) => {
            say(&format!("collbench: cannot start MPI: {e}"));
            return exit::RUNTIME;
        }
    };
    // the first collective of every rank, those that could not start
    // included (`first_meeting`): it stands for the pre-flight's barrier
    let (worst, _) = first_meeting(&world, exit::OK);
    preflight.passed();
    if worst != exit::OK {
        // a rank that could not start said why
        return worst;
    }
    let make = |nodes: &Nodes| {
        MpiBackend::new(&world, nodes.clone(), cfg.timing.phase_times).map(|b| Box::new(b) as Box<dyn Backend>)
    };
    Session::new(&world, cfg, env_plan, stop)
        .with_task(task)
        .run(Some(HostBackend {
            kind: BackendKind::Mpi,
            make: &make,
        }))
}

/// Without MPI, a run is the single-process world of one rank.
#[cfg(not(feature = "mpi"))]
fn run_mpi(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>, _how: &str) -> u8 {
    run_threads(1, cfg, env_plan, stop, task)
}

/// `-g N`: N ranks, one thread each; the job's code is the worst rank's.
/// Their host data plane is one in-memory communicator over the threads
/// (`--backend memory`), made here once and handed out one rank each.
fn run_threads(n: usize, cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>) -> u8 {
    use crate::backend::memory::MemoryBackend;
    use crate::world::threads::ThreadWorld;

    let worlds = ThreadWorld::create(n);
    // only when asked for: its buffers are the threads' host memory
    let memory: Vec<Mutex<Option<MemoryBackend>>> = match cfg.start.backend {
        BackendChoice::Only(BackendKind::Memory) => match MemoryBackend::create(n) {
            Ok(ranks) => ranks.into_iter().map(|b| Mutex::new(Some(b))).collect(),
            Err(e) => {
                say(&format!("collbench: {e}"));
                return e.exit_code();
            }
        },
        _ => Vec::new(),
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = worlds
            .iter()
            .enumerate()
            .map(|(rank, world)| {
                let slot = memory.get(rank);
                scope.spawn(move || {
                    let make = |_: &Nodes| -> Result<Box<dyn Backend>, Error> {
                        let taken = slot.and_then(|s| s.lock().unwrap_or_else(PoisonError::into_inner).take());
                        taken
                            .map(|b| Box::new(b) as Box<dyn Backend>)
                            .ok_or_else(|| Error::runtime("internal error: this rank's in-memory backend is gone"))
                    };
                    let host = slot.map(|_| HostBackend {
                        kind: BackendKind::Memory,
                        make: &make,
                    });
                    Session::new(world, cfg, env_plan, stop).with_task(task).run(host)
                })
            })
            .collect();
        // A rank that panicked has ended the process in the panic hook.
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(exit::RUNTIME))
            .max()
            .unwrap_or(exit::OK)
    })
}
