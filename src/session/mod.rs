//! A run, from its options to its exit code: `collbench run`.
//!
//! Owns the order of a run: configuration, transport profile, signals and
//! the control plane (this file); then, on every rank, the set-up steps the
//! ranks take together, the sweep and the verdict (`Session`). One error
//! type runs through it: `Error`, whose `Reported` variant is a failure the
//! ranks agreed on and one of them already printed.
//!
//! Error policy: a problem found before the sweep is agreed on by every
//! rank and printed once, and every rank exits with its code; a failure
//! during the sweep is printed by the failing rank, which then aborts the
//! whole job so that no peer is left waiting in a collective. Lines reach
//! stderr only through `error::say` and stdout through the sinks and
//! `report::print_out`; this module measures nothing and formats no report.

mod backend_choice;
pub mod check;
#[cfg(test)]
mod golden;
mod job;
mod launch;
pub mod links;
mod outputs;
mod preflight;
mod workload;

use std::ffi::OsString;

use crate::backend::Backend;
use crate::cli::{RunArgs, TransportArg};
use crate::config::RunConfig;
use crate::engine::groups::Groups;
use crate::engine::stop::StopRequest;
use crate::engine::watchdog::Watchdog;
use crate::engine::{Engine, RunContext, Summary};
use crate::error::{Error, exit, say};
use crate::plan::Plan;
use crate::report::{Reporter, RunInfo, print_out};
use crate::topology::Nodes;
use crate::topology::profile::{self, EnvPlan, Prepared};
use crate::types::{BackendChoice, BackendKind};
use crate::world::{World, launcher_rank};
use backend_choice::MakeMpi;
pub use job::Job;
pub use links::LinksJob;

/// What a launch does on every rank: `collbench run`'s sweep, a workload's
/// or replay's steps, or `collbench links`' matrix.
#[derive(Clone, Copy)]
pub enum Task<'a> {
    Sweep,
    Steps(&'a Job),
    Links(&'a LinksJob),
}

/// `collbench run`: `args` as parsed, `argv` the arguments after `run`
/// (the `--config` file's keys go before them).
pub fn run(args: &RunArgs, argv: &[OsString]) -> u8 {
    if args.transport == TransportArg::Help {
        if is_first_rank() {
            print_out(&profile::help_text());
        }
        return exit::OK;
    }
    let made = RunConfig::from_command_line(argv).map(|(_, cfg)| ((), cfg));
    run_made(made, |_| Task::Sweep)
}

/// `collbench links`: `made` is the job and the run's configuration from
/// its options (an error is printed once).
pub fn run_links(made: Result<(LinksJob, RunConfig), Error>) -> u8 {
    run_made(made, |job| Task::Links(job))
}

/// `collbench workload` and `collbench replay`: `made` is the job and the
/// run's configuration from their options (an error is printed once).
pub fn run_job(made: Result<(Job, RunConfig), Error>) -> u8 {
    run_made(made, |job| Task::Steps(job))
}

/// A job made from its command's options, run as `task` of it under the
/// control plane. First what the process needs before any rank starts: the
/// transport profile applied (which may re-execute this process), and one
/// stop request (with `-g`, every rank thread checks it); an error is
/// printed once. The NCCL log is removed after a success.
fn run_made<J>(made: Result<(J, RunConfig), Error>, task: impl FnOnce(&J) -> Task<'_>) -> u8 {
    let started = made.and_then(|(job, cfg)| {
        let env_plan = apply_transport(&cfg)?;
        let stop = StopRequest::install()?;
        Ok((job, cfg, env_plan, stop))
    });
    let (job, cfg, env_plan, stop) = match started {
        Ok(started) => started,
        Err(e) => return report_early_error(&e),
    };
    let code = launch::run_with_control_plane(&cfg, &env_plan, &stop, task(&job));
    if code == exit::OK {
        env_plan.remove_nccl_log();
    }
    code
}

/// `collbench replay --check-only`: the log's check and the kept
/// sequence, printed by the first rank; no control plane, nothing run.
pub fn check_replay(a: &crate::cli::ReplayArgs) -> u8 {
    match Job::check(a) {
        Ok((lines, code)) => {
            if is_first_rank() {
                let mut text = lines.join("\n");
                text.push('\n');
                crate::report::print_out(&text);
            }
            code
        }
        Err(e) => {
            if is_first_rank() {
                say(&format!("collbench: {e}"));
            }
            e.exit_code()
        }
    }
}
/// True unless a launcher says this process is not rank 0.
pub fn is_first_rank() -> bool {
    launcher_rank().is_none_or(|r| r == 0)
}

/// An error found before the control plane starts, on every rank alike.
/// Alone, the process prints it and exits. Under a launcher, the ranks
/// first agree over MPI, so that rank 0 prints it once and every rank
/// exits in order: a rank that simply exited could make the launcher kill
/// rank 0 before it had printed anything. Without MPI, rank 0 alone prints.
pub fn report_early_error(e: &Error) -> u8 {
    #[cfg(feature = "mpi")]
    if launch::mpi_launch()
        && let Ok(world) = crate::world::mpi::MpiWorld::init()
    {
        let failed: Result<(), Error> = Err(Error::from_code(e.exit_code(), e.to_string()));
        return match world.agree(failed) {
            Err(agreed) => agreed.code,
            Ok(()) => e.exit_code(),
        };
    }
    if is_first_rank() {
        say(&format!("collbench: {e}"));
    }
    e.exit_code()
}

/// Under a launcher, waits until every rank has reached this point with
/// the same exit code (a usage error rank 0 has printed) before any exits.
pub fn wait_for_every_rank(code: u8) {
    #[cfg(feature = "mpi")]
    if launch::mpi_launch()
        && let Ok(world) = crate::world::mpi::MpiWorld::init()
    {
        world.max_u64(u64::from(code));
    }
    #[cfg(not(feature = "mpi"))]
    let _ = code;
}

/// Applies `--transport` before MPI starts: when the profile (or NCCL's
/// private log) needs variables the environment lacks, this process is
/// replaced by the same binary with them added, and does not return.
fn apply_transport(cfg: &RunConfig) -> Result<EnvPlan, Error> {
    let may_use_nccl = cfg!(feature = "nccl") && cfg.start.backend != BackendChoice::Only(BackendKind::Mpi);
    let nccl_log = may_use_nccl
        .then(|| profile::private_nccl_log(&std::env::temp_dir(), &crate::topology::hostname(), std::process::id()));
    match profile::prepare(cfg.start.transport, nccl_log, &profile::process_env) {
        Prepared::Ready(plan) => Ok(plan),
        Prepared::Reexec(plan) => Err(profile::reexec(&plan)),
    }
}

/// `how` names the launcher for the header and the pre-flight's message
/// (empty for a process alone).
#[cfg(feature = "mpi")]
fn run_mpi(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>, how: &str) -> u8 {
    use crate::backend::mpi::MpiBackend;

    let preflight = preflight::Preflight::arm(cfg.timing.timeout, how);
    let world = match crate::world::mpi::MpiWorld::init().map(|w| if how.is_empty() { w } else { w.launched_by(how) }) {
        Ok(w) => w,
        Err(e) => {
            say(&format!("collbench: cannot start MPI: {e}"));
            return exit::RUNTIME;
        }
    };
    world.barrier();
    preflight.passed();
    let mpi_backend = |nodes: &Nodes| {
        MpiBackend::new(&world, nodes.clone(), cfg.timing.phase_times).map(|b| Box::new(b) as Box<dyn Backend>)
    };
    Session::new(&world, cfg, env_plan, stop)
        .with_task(task)
        .run(Some(&mpi_backend))
}

/// Without MPI, a run is the single-process world of one rank.
#[cfg(not(feature = "mpi"))]
fn run_mpi(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>, _how: &str) -> u8 {
    run_threads(1, cfg, env_plan, stop, task)
}

/// `-g N`: N ranks, one thread each; the job's code is the worst rank's.
fn run_threads(n: usize, cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest, task: Task<'_>) -> u8 {
    use crate::world::threads::ThreadWorld;

    let worlds = ThreadWorld::create(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = worlds
            .iter()
            .map(|world| scope.spawn(move || Session::new(world, cfg, env_plan, stop).with_task(task).run(None)))
            .collect();
        // A rank that panicked has ended the process in the panic hook.
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(exit::RUNTIME))
            .max()
            .unwrap_or(exit::OK)
    })
}

/// One rank's run: what every step needs, in one place.
pub struct Session<'a, W: World> {
    world: &'a W,
    cfg: &'a RunConfig,
    env_plan: &'a EnvPlan,
    stop: &'a StopRequest,
    /// A sweep, a workload or replay, or the links matrix.
    task: Task<'a>,
}

/// Everything set up on every rank; the sweep can start.
struct Ready {
    backend: Box<dyn Backend>,
    plan: Plan,
    /// `--split`: this rank's group and its sub-communicator.
    groups: Option<Groups>,
    ctx: RunContext,
    /// Rank 0 only.
    outputs: Option<(Reporter, RunInfo)>,
}

impl<'a, W: World> Session<'a, W> {
    pub fn new(world: &'a W, cfg: &'a RunConfig, env_plan: &'a EnvPlan, stop: &'a StopRequest) -> Self {
        Session {
            world,
            cfg,
            env_plan,
            stop,
            task: Task::Sweep,
        }
    }

    /// Runs `task` (a workload or replay, the links matrix) instead of the
    /// sweep.
    pub fn with_task(mut self, task: Task<'a>) -> Self {
        self.task = task;
        self
    }

    /// Sets up, sweeps and judges; the exit code of this rank.
    pub fn run(&self, mpi_backend: Option<MakeMpi<'_>>) -> u8 {
        match self.task {
            Task::Sweep => {}
            Task::Steps(job) => {
                if let job::Source::Check(check) = &job.source {
                    return self.run_check(mpi_backend, check);
                }
                return self.run_job(mpi_backend, job);
            }
            Task::Links(job) => return self.run_links(mpi_backend, job),
        }
        self.exit_code("the set-up (plan check, communicators, output files)", |watchdog| {
            self.set_up(mpi_backend).map(|ready| self.sweep(ready, watchdog))
        })
    }

    /// This rank's exit code of `steps`, run under the `--timeout` watchdog
    /// watching `setup` first: theirs, or their error's (said here unless
    /// already reported).
    fn exit_code(&self, setup: &str, steps: impl FnOnce(Option<&Watchdog>) -> Result<u8, Error>) -> u8 {
        let watchdog = self.watchdog(setup);
        match steps(watchdog.as_ref()) {
            Ok(code) => code,
            Err(Error::Reported(code)) => code,
            Err(e) => {
                say(&self.world.error_line(&e));
                e.exit_code()
            }
        }
    }

    /// The `--timeout` watchdog of this rank, watching `setup` first.
    fn watchdog(&self, setup: &str) -> Option<Watchdog> {
        let rank = format!("rank {} on {}", self.world.rank(), self.world.host());
        let watchdog = self.cfg.timing.timeout.map(|t| Watchdog::start(t, rank));
        if let Some(w) = &watchdog {
            w.watch(setup);
        }
        watchdog
    }

    /// A step every rank takes: `Ok` everywhere only if it succeeded
    /// everywhere; otherwise the failure is printed once (`World::agree`).
    fn agreed<T>(&self, local: Result<T, Error>) -> Result<T, Error> {
        self.world.agree(local).map_err(|d| Error::Reported(d.code))
    }

    /// Every step before the first measured point, agreed step by step.
    fn set_up(&self, mpi_backend: Option<MakeMpi<'_>>) -> Result<Ready, Error> {
        let world = self.world;
        self.agreed(crate::engine::digest::check_same_plan(world, &self.cfg.digest))?;
        self.warn_on_nccl_environment();
        let nodes = self.agreed(self.nodes())?;
        let mut chosen = self.choose_backend(&nodes, mpi_backend)?;
        // --split: every rank makes its group's sub-communicator together
        // (every rank gets here: a failed choice ended every rank above).
        let groups = match self.cfg.plan.split {
            Some(rule) => {
                let groups = Groups::of(rule, &Groups::process_indices(world.ranks()), world.rank());
                Some(self.agreed(groups.split(chosen.backend.as_mut(), world.rank()))?)
            }
            None => None,
        };
        // Every rank gets here (a failed choice ended every rank above), so
        // this collective cannot hang.
        let free = chosen.backend.gpu().and_then(|g| g.free_bytes());
        let device_free = world.min_u64(free.unwrap_or(u64::MAX));
        let setup = match world.agree(self.prepare(chosen, device_free, nodes, groups)) {
            Ok(setup) => setup,
            Err(failed) => {
                // Another rank failed: remove the files this one created.
                if let Some(outputs::Setup {
                    outputs: Some((mut reporter, _)),
                    ..
                }) = failed.local
                {
                    reporter.discard();
                }
                return Err(Error::Reported(failed.code));
            }
        };
        Ok(self.exchange_views(setup))
    }

    /// Real hosts, or `--ranks-per-node` groups of consecutive ranks.
    fn nodes(&self) -> Result<Nodes, Error> {
        match self.cfg.plan.ranks_per_node {
            Some(k) => {
                let hosts: Vec<String> = self.world.ranks().iter().map(|r| r.host.clone()).collect();
                Nodes::consecutive(k, &hosts)
            }
            None => Ok(self.world.nodes().clone()),
        }
    }

    /// Measures the plan, then the verdict: the exit code.
    fn sweep(&self, ready: Ready, watchdog: Option<&Watchdog>) -> u8 {
        let Ready {
            mut backend,
            plan,
            groups,
            ctx,
            outputs,
        } = ready;
        let (mut reporter, info) = match outputs {
            Some((reporter, info)) => (Some(reporter), Some(info)),
            None => (None, None),
        };
        if let (Some(rep), Some(info)) = (reporter.as_mut(), info.as_ref())
            && let Err(e) = rep.begin(info)
        {
            self.fail(&e);
        }
        let timing = self.cfg.timing.for_backend(ctx.backend);
        let swept = Engine::new(self.world, backend.as_mut(), &timing, &ctx)
            .with_injected_errors(self.cfg.hooks.inject_error)
            .with_watchdog(watchdog)
            .with_stop(self.stop.clone())
            .with_groups(groups.as_ref())
            .run(&plan, |record| match reporter.as_mut() {
                Some(rep) => rep.record(record),
                None => Ok(()),
            });
        let summary = match swept {
            Ok(summary) => summary,
            Err(e) => self.fail(&e),
        };
        // Rank 0 judges what its reports hold: a stop signal may have
        // completed them before the point in flight (`report::reporter`).
        let (summary, finished) = match (reporter.as_mut(), info.as_ref()) {
            (Some(rep), Some(info)) => match rep.finish(info, &summary) {
                Ok(reported) => (reported, Ok(())),
                Err(e) => (summary, Err(e)),
            },
            _ => (summary, Ok(())),
        };
        self.verdict(&summary, finished, info.as_ref())
    }

    /// The exit code of a finished sweep: the reports' failure (1), wrong
    /// results (3), a stop signal (128 + the signal), whichever is highest;
    /// rank 0 says why (its reports say which signal stopped the run).
    fn verdict(&self, summary: &Summary, finished: Result<(), Error>, info: Option<&RunInfo>) -> u8 {
        let first = self.world.rank() == 0;
        let mut code = exit::OK;
        if let Err(e) = finished {
            say(&self.world.error_line(&e));
            code = e.exit_code();
        }
        if summary.wrong > 0 {
            let e = Error::Validation {
                wrong: summary.wrong,
                points: summary.failed_points,
                checked: summary.checked_points,
            };
            if first {
                say(&self.world.error_line(&e));
            }
            code = code.max(e.exit_code());
        }
        if let Some(info) = info
            && self.cfg.plan.hierarchies.len() > 1
            && summary.stopped_by.is_none()
        {
            // flat against hierarchical, per size, after the table
            crate::compare::print_after_run(
                &info.csv,
                ("this run", "collbench"),
                |r| r.collective == crate::collective::Collective::AllReduce,
                crate::types::Dimension::Hierarchy,
                None,
            );
        }
        if let Some(signal) = summary.stopped_by {
            code = 128 + signal as u8;
        }
        code
    }

    /// Prints this rank's failure and takes the whole job down.
    fn fail(&self, e: &Error) -> ! {
        say(&self.world.error_line(e));
        self.world.abort(e.exit_code())
    }
}
