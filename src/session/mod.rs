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
mod check;
#[cfg(test)]
mod golden;
mod launch;
pub mod links;
mod outputs;
mod pinned;
mod preflight;
mod prepare;
mod step_reports;
mod sweep;
mod timings;
mod workload;

use std::ffi::OsString;

use crate::backend::Backend;
use crate::cli::{RunArgs, TransportArg};
use crate::config::{CheckJob, Job, LinksJob, RunConfig};
use crate::engine::Context;
use crate::engine::stop::StopRequest;
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, exit, say};
use crate::report::print_out;
use crate::topology::profile::{self, EnvPlan, Prepared};
use crate::types::{BackendChoice, BackendKind};
use crate::world::{World, launcher_rank};
use backend_choice::HostBackend;
use timings::Timings;

/// What a launch does on every rank: `collbench run`'s sweep, a workload's
/// or replay's steps, `collbench links`' matrix, or `collbench check`'s
/// verdicts.
#[derive(Clone, Copy)]
pub enum Task<'a> {
    Sweep,
    Steps(&'a Job),
    Links(&'a LinksJob),
    Check(&'a CheckJob),
}

/// `collbench run`: `args` as parsed, `argv` the arguments after `run`
/// (the `--config` file's keys go before them).
pub fn run(args: &RunArgs, argv: &[OsString]) -> u8 {
    if args.common.launch.transport == TransportArg::Help {
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

/// `collbench check`: `made` is the job and the run's configuration from
/// its options (an error is printed once).
pub fn run_check(made: Result<(CheckJob, RunConfig), Error>) -> u8 {
    run_made(made, |job| Task::Check(job))
}

/// A job made from its command's options, run as `task` of it under the
/// control plane. First what the process needs before any rank starts: the
/// transport profile applied (which may re-execute this process), and one
/// stop request (with `-g`, every rank thread checks it); an error is
/// printed once. The NCCL log is removed after a success. With
/// `--timings`, the first rank says at the end where the time went.
fn run_made<J>(made: Result<(J, RunConfig), Error>, task: impl FnOnce(&J) -> Task<'_>) -> u8 {
    let timings = Timings::new(made.as_ref().is_ok_and(|(_, cfg)| cfg.outputs.timings));
    let started = made.and_then(|(job, cfg)| {
        let env_plan = apply_transport(&cfg)?;
        let stop = StopRequest::install()?;
        Ok((job, cfg, env_plan, stop))
    });
    let (job, cfg, env_plan, stop) = match started {
        Ok(started) => started,
        Err(e) => return report_early_error(&e),
    };
    timings.mark("transport profile, signals");
    let code = launch::run_with_control_plane(launch::Started {
        cfg: &cfg,
        env_plan: &env_plan,
        stop: &stop,
        timings: &timings,
        task: task(&job),
    });
    if code == exit::OK {
        env_plan.remove_nccl_log();
    }
    if let Some(lines) = timings.report()
        && is_first_rank()
    {
        lines.iter().for_each(|l| say(l));
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

/// An error found before the control plane starts (bad options, a bad
/// `--config` file). Alone, the process prints it and exits. Under an MPI
/// launcher, the ranks first meet (`launch::first_meeting`, the first
/// collective of every rank, whether it could start or not): the lowest
/// rank that failed prints its error, and every rank exits with the
/// worst code at once, so that no rank waits for one that will never
/// come and a rank's own error is never lost. Without MPI, rank 0 alone
/// prints.
pub fn report_early_error(e: &Error) -> u8 {
    report_failed_start(e.exit_code(), |world| say(&world_line(world, &e.to_string())))
}

/// A start that failed on this rank with `code` (`say` prints why, when
/// this rank is the one to): the job's code once every rank has met.
pub fn report_failed_start(code: u8, say_why: impl FnOnce(Option<usize>)) -> u8 {
    #[cfg(feature = "mpi")]
    if launch::mpi_launch()
        && let Ok(world) = crate::world::mpi::MpiWorld::init()
    {
        use crate::world::World;
        let (worst, mine) = launch::first_meeting(&world, code);
        if mine {
            say_why(Some(world.rank()));
        }
        return worst;
    }
    if is_first_rank() {
        say_why(None);
    }
    code
}

/// `collbench: MSG`, or under a launcher on a rank other than 0,
/// `collbench: rank R: MSG`.
fn world_line(rank: Option<usize>, msg: &str) -> String {
    match rank {
        Some(r) if r != 0 => format!("collbench: rank {r}: {msg}"),
        _ => format!("collbench: {msg}"),
    }
}

/// Applies `--transport` before MPI starts: when the profile (or NCCL's
/// private log) needs variables the environment lacks, this process is
/// replaced by the same binary with them added, and does not return.
fn apply_transport(cfg: &RunConfig) -> Result<EnvPlan, Error> {
    let may_use_nccl = cfg!(feature = "nccl") && cfg.start.backend != BackendChoice::Only(BackendKind::Mpi);
    // the started-again process reads what was added from the marker
    // (`profile::prepare`): nothing to find out again
    let again = profile::process_env(profile::MARKER).is_some();
    let nccl_log = (may_use_nccl && !again).then(|| {
        let (tuning, profiler) = backend_choice::nccl::algo_env(cfg, &profile::process_env);
        profile::LogRequest {
            path: profile::private_nccl_log(&std::env::temp_dir(), &crate::topology::hostname(), std::process::id()),
            tuning,
            profiler,
        }
    });
    match profile::prepare(cfg.start.transport, nccl_log, &profile::process_env) {
        Prepared::Ready(plan) => Ok(plan),
        Prepared::Reexec(plan) => Err(profile::reexec(&plan)),
    }
}

/// One rank's run: what every step needs, in one place.
pub struct Session<'a, W: World> {
    world: &'a W,
    cfg: &'a RunConfig,
    env_plan: &'a EnvPlan,
    stop: &'a StopRequest,
    /// A sweep, a workload or replay, or the links matrix.
    task: Task<'a>,
    /// `--timings`: rank 0 marks the end of each step.
    timings: Option<&'a Timings>,
}

impl<'a, W: World> Session<'a, W> {
    pub fn new(world: &'a W, cfg: &'a RunConfig, env_plan: &'a EnvPlan, stop: &'a StopRequest) -> Self {
        Session {
            world,
            cfg,
            env_plan,
            stop,
            task: Task::Sweep,
            timings: None,
        }
    }

    /// Rank 0 marks the end of each step in `timings` (`--timings`).
    pub fn with_timings(mut self, timings: &'a Timings) -> Self {
        self.timings = Some(timings);
        self
    }

    /// `phase` ended now (rank 0, with `--timings`).
    fn mark(&self, phase: &'static str) {
        if let Some(t) = self.timings
            && self.world.rank() == 0
        {
            t.mark(phase);
        }
    }

    /// Runs `task` (a workload or replay, the links matrix) instead of the
    /// sweep.
    pub fn with_task(mut self, task: Task<'a>) -> Self {
        self.task = task;
        self
    }

    /// Sets up (`prepare`: what every task shares, then the task's own),
    /// runs the task and judges; the exit code of this rank.
    pub fn run(&self, host: Option<HostBackend<'_>>) -> u8 {
        let setup = match self.task {
            Task::Sweep => "the set-up (plan check, communicators, output files)",
            Task::Steps(_) => "the set-up (schedules, communicators, output files)",
            Task::Links(_) => "the set-up (schedule, communicator, output files)",
            Task::Check(_) => "the set-up (profile, communicators, buffers, output files)",
        };
        self.exit_code(setup, |watchdog| {
            self.mark("watchdog");
            let prepared = self.prepare(host)?;
            let code = match self.task {
                // the sweep marks its own steps
                Task::Sweep => return self.sweep_task(prepared, watchdog),
                Task::Steps(job) => self.job_steps(job, prepared, watchdog),
                Task::Links(job) => self.links_steps(job, prepared, watchdog),
                Task::Check(job) => self.check_steps(job, prepared, watchdog),
            };
            self.mark("the task, its outputs");
            code
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
        let watchdog = self
            .cfg
            .timing
            .timeout
            .map(|t| Watchdog::start(t, rank).with_stop(self.stop.clone()));
        if let Some(w) = &watchdog {
            w.watch(setup);
        }
        watchdog
    }

    /// What the engine measures with on this rank: the world, `backend`,
    /// the host clock, `watchdog`, the stop request and the test hook.
    fn context<'b>(&'b self, backend: &'b mut dyn Backend, watchdog: Option<&'b Watchdog>) -> Context<'b> {
        Context::new(self.world, backend)
            .with_watchdog(watchdog)
            .with_stop(self.stop.clone())
            .with_injected_errors(self.cfg.hooks.inject_error)
    }

    /// A step every rank takes: `Ok` everywhere only if it succeeded
    /// everywhere; otherwise the failure is printed once (`World::agree`).
    fn agreed<T>(&self, local: Result<T, Error>) -> Result<T, Error> {
        self.world.agree(local).map_err(|d| Error::Reported(d.code))
    }

    /// Prints this rank's failure and takes the whole job down.
    fn fail(&self, e: &Error) -> ! {
        say(&self.world.error_line(e));
        self.world.abort(e.exit_code())
    }
}
