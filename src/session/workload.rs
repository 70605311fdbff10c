//! `collbench workload` and `collbench replay` on every rank: after the
//! shared set-up (`prepare`), the steps the ranks take together (the plan
//! of every configuration's calls (`workload::plan`), the groups'
//! sub-communicators, buffers, the CSV), then each configuration's steps
//! (`engine::steps`), then rank 0's report and the verdict.
//!
//! The session sets up and hands over: it makes the splits the plan lists,
//! once, before the first step, in the plan's order on every rank, and
//! gives each configuration's calls the groups they name.
//! Must not: print except through `report::print_out` and `error::say`;
//! turn schedules into calls or figures (`workload::plan`,
//! `report::workload::Outcome::of`).

use super::Session;
use super::prepare::Prepared;
use super::step_reports::{Parts, StepReports};
use crate::backend::{Backend, Call, SubGroup};
use crate::config::Job;
use crate::engine::steps::{StepRunner, Timed};
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, exit, say};
use crate::plan::Reservation;
use crate::report::print_out;
use crate::report::progress::Progress;
use crate::report::workload::{self as report, Outcome, WorkloadCsv};
use crate::topology::Nodes;
use crate::workload::plan::{Config, Split, WorkloadPlan};
use crate::world::World;

impl<W: World> Session<'_, W> {
    /// The steps' own set-up, every configuration's steps, the report; this
    /// rank's exit code.
    pub(super) fn job_steps(
        &self,
        job: &Job,
        mut prepared: Prepared,
        watchdog: Option<&Watchdog>,
    ) -> Result<u8, Error> {
        let world = self.world;
        let nodes = &prepared.nodes;
        let backend = prepared.backend.as_mut();
        let caps = backend.capabilities(&self.cfg.timing.extras());
        let configs = self.agreed(configs(job, nodes))?;
        let plan = self.agreed(WorkloadPlan::new(&configs, &caps, world.rank()))?;
        let groups = self.agreed(split(backend, &plan.splits))?;
        // A device backend allocates its buffers once, for the largest call.
        self.agreed(reserve(
            backend,
            &plan.reservation,
            world.nodes().local_size(world.rank()),
        ))?;
        let first = world.rank() == 0;
        let csv = self.agreed(match (first, &self.cfg.outputs.csv) {
            (true, Some(path)) => WorkloadCsv::create(path, self.cfg.outputs.overwrite).map(Some),
            _ => Ok(None),
        })?;
        let version = prepared.identity.backend_version.clone();
        let mut header = header_lines(job, world, &version, nodes.ranks_per_node(), &plan.notes);
        // what each step moves, before it is measured
        header.extend(configs.iter().filter_map(|c| report::volume_line(c).ok()));
        if first {
            print_out(&report::header(job.top().is_some(), &header));
        }
        let calls: Vec<Vec<Call>> = (0..configs.len()).map(|i| plan.calls(i, &groups)).collect();
        let ran = calls
            .iter()
            .map(|calls| calls.iter().map(|c| (c.dtype, c.shape.count as u64)).collect())
            .collect();
        let timed = Timed::default();
        let mut reports = first.then(|| {
            let parts = Parts {
                configs,
                ran,
                csv,
                backend_version: version,
                top: job.top(),
                rescaled: job.rescaled(),
            };
            StepReports::open(parts, timed.clone(), self.stop)
        });
        let stopped_by = self.run_configs(backend, &calls, job, &timed, reports.as_mut(), watchdog);
        let outcomes = match reports.as_mut().map(|r| r.finish(stopped_by)) {
            Some(Err(e)) => self.fail(&e),
            Some(Ok(outcomes)) => outcomes,
            None => Vec::new(),
        };
        let code = self.job_verdict(&outcomes);
        Ok(stopped_by.map_or(code, |signal| code.max(128 + signal as u8)))
    }

    /// Every configuration's steps, interleaved (`StepRunner::run_all`),
    /// their figures growing in `timed` on rank 0; the signal that stopped
    /// them. A failure ends the job (peers would wait for this rank), rank
    /// 0's reports completed first.
    fn run_configs(
        &self,
        backend: &mut dyn Backend,
        calls: &[Vec<Call>],
        job: &Job,
        timed: &Timed,
        reports: Option<&mut StepReports>,
        watchdog: Option<&Watchdog>,
    ) -> Option<u64> {
        // rank 0's progress: configurations checked, warm-up and timed steps
        let mode = match self.world.rank() {
            0 => self.cfg.outputs.progress,
            _ => crate::types::ProgressMode::Never,
        };
        let launched = crate::world::launcher_rank().is_some();
        let mut progress = Progress::new(mode, None, launched, "collbench workload").counting("steps");
        let mut tell = |done: u64, total: u64, what: &str| progress.set(done, Some(total), what);
        let mut runner = StepRunner {
            cx: self.context(&mut *backend, watchdog),
            timed: timed.clone(),
            progress: Some(&mut tell),
        };
        let ran = runner.run_all(calls, &job.timing);
        drop(runner);
        progress.finish();
        match ran {
            Ok((_, stopped_by)) => stopped_by,
            Err(e) => {
                if let Some(r) = reports {
                    r.abandon();
                }
                self.fail(&e)
            }
        }
    }

    /// 3 when any collective was wrong (rank 0 says so), else 0.
    fn job_verdict(&self, outcomes: &[Outcome]) -> u8 {
        let wrong = self.world.max_u64(outcomes.iter().filter_map(|o| o.wrong).sum());
        if wrong == 0 {
            return exit::OK;
        }
        let failed = outcomes.iter().map(|o| o.failed_ops).sum();
        let checked = outcomes.iter().map(|o| o.ops.len()).sum();
        let e = Error::Validation {
            wrong,
            points: failed,
            checked,
        };
        if self.world.rank() == 0 {
            say(&self.world.error_line(&e));
        }
        e.exit_code()
    }
}

/// The header: the job's lines, the backend and ranks, each rank's host
/// and pid, and the notes of the calls (each once).
fn header_lines(job: &Job, world: &dyn World, version: &str, per_node: usize, notes: &[String]) -> Vec<String> {
    let mut header = job.header();
    header.push(format!(
        "backend {version}, {}, {per_node} per node",
        crate::types::count_of(world.size(), "rank")
    ));
    header.extend(
        world
            .ranks()
            .iter()
            .enumerate()
            .map(|(r, info)| format!("Rank {r:4} on {} pid {}", info.host, info.pid)),
    );
    header.extend(notes.iter().cloned());
    header
}

/// The configurations at this launch's size and nodes.
pub(super) fn configs(job: &Job, nodes: &Nodes) -> Result<Vec<Config>, Error> {
    if !nodes.is_uniform() {
        return Err(Error::usage(format!(
            "a workload needs the same number of ranks on every node, but the {} nodes differ; use --ranks-per-node",
            nodes.nnodes()
        )));
    }
    job.configs(nodes.nranks(), nodes.ranks_per_node())
}

/// Makes the plan's sub-communicators, in its order on every rank.
pub(super) fn split(backend: &mut dyn Backend, splits: &[Split]) -> Result<Vec<SubGroup>, Error> {
    let kind = backend.identity().kind;
    let mut groups = Vec::with_capacity(splits.len());
    for s in splits {
        let sub = backend.sub_groups().ok_or_else(|| {
            Error::usage(format!(
                "the {} backend has no sub-communicators for group {} (NCCL before 2.18 has no ncclCommSplit); use --backend mpi",
                kind.name(),
                s.group
            ))
        })?;
        groups.push(sub.split(s.color, s.key)?);
    }
    Ok(groups)
}

/// Buffers for the largest call, refused (one line) when the host's ranks
/// would need more memory than it has.
fn reserve(backend: &mut dyn Backend, reservation: &Reservation, ranks_on_host: usize) -> Result<(), Error> {
    if backend.gpu().is_none()
        && let Some(available) = crate::topology::machine::available_memory()
    {
        reservation.check_host_memory(ranks_on_host, available, "use fewer ranks per host or a smaller model")?;
    }
    backend.reserve(reservation)
}
