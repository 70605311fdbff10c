//! Rank 0's reports of a workload or a replay: each configuration's block
//! and CSV rows, then the side-by-side table, completed once, from the
//! steps timed so far (`engine::steps::Timed`, which grows a step at a
//! time): when the steps end, or at once when a stop signal arrives, the
//! `--timeout` watchdog fires or rank 0 fails, while a step may still be
//! running on a stopped or dead peer (a watcher thread, as the sweep's
//! `report::Reporter`; the reports are held open against a later signal
//! meanwhile, `StopRequest::hold_reports`). docs/exit-codes.md.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::engine::steps::{Timed, lock};
use crate::engine::stop::{ReportsHold, StopRequest, is_signal, signal_name};
use crate::error::{Error, say, stopped_by};
use crate::report::StopWatcher;
use crate::report::print_out;
use crate::report::workload::{self as report, Outcome, WorkloadCsv};
use crate::types::DType;
use crate::workload::plan::Config;

/// What the reports are made of (rank 0's).
pub(super) struct Parts {
    pub configs: Vec<Config>,
    /// Each configuration's operations as they ran: type and count.
    pub ran: Vec<Vec<(DType, u64)>>,
    pub csv: Option<WorkloadCsv>,
    pub backend_version: String,
    pub top: Option<usize>,
    pub rescaled: bool,
}

struct Shared {
    parts: Parts,
    timed: Timed,
    /// The outcomes once the reports are complete.
    done: Option<Vec<Outcome>>,
    hold: Option<ReportsHold>,
}

/// Rank 0's reports, open until `finish` (or a stop) completes them.
pub(super) struct StepReports {
    shared: Arc<Mutex<Shared>>,
    watcher: Option<StopWatcher>,
}

impl StepReports {
    /// Opens the reports of `parts` over `timed`, completed at once when
    /// `stop` fires.
    pub fn open(parts: Parts, timed: Timed, stop: &StopRequest) -> StepReports {
        let shared = Arc::new(Mutex::new(Shared {
            parts,
            timed,
            done: None,
            hold: Some(stop.hold_reports()),
        }));
        let watcher = watch(Arc::clone(&shared), stop.clone());
        StepReports { shared, watcher }
    }

    /// The steps ended (`stopped_by`: a stop the ranks agreed on): the
    /// reports, unless a stop completed them already; the outcomes they
    /// hold. A failure to write is the caller's to report.
    pub fn finish(&mut self, stopped_by: Option<u64>) -> Result<Vec<Outcome>, Error> {
        self.quit_watching();
        let mut shared = lock_shared(&self.shared);
        if let Some(done) = &shared.done {
            return Ok(done.clone());
        }
        let completed = shared.complete(stopped_by);
        shared.hold = None;
        completed
    }

    /// Rank 0 failed (its line is said by the caller, which then takes the
    /// job down): completes what it can, for the steps timed before.
    pub fn abandon(&mut self) {
        self.quit_watching();
        let mut shared = lock_shared(&self.shared);
        if shared.done.is_none() {
            let _ = shared.complete(None);
        }
        shared.hold = None;
    }

    fn quit_watching(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.end();
        }
    }
}

fn lock_shared(shared: &Mutex<Shared>) -> MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    /// Each configuration's whole rounds of timed steps: its block and CSV
    /// rows (none where no round was whole); the
    /// side-by-side table of several; the line naming a signal that
    /// stopped them (`cause`; the watchdog and a failing rank say their
    /// own). Marks the reports done, even where a write failed.
    fn complete(&mut self, cause: Option<u64>) -> Result<Vec<Outcome>, Error> {
        let mut timed = lock(&self.timed).clone();
        // whole rounds only: a stop may come between two configurations'
        // steps of a round, and the configurations compare step for step
        let rounds = timed.iter().map(|s| s.step_us.len()).min().unwrap_or(0);
        for steps in &mut timed {
            steps.step_us.truncate(rounds);
            steps.op_us.truncate(rounds);
        }
        let p = &mut self.parts;
        let mut outcomes = Vec::new();
        let mut failed = None;
        for ((config, ran), steps) in p.configs.iter().zip(&p.ran).zip(timed) {
            if steps.step_us.is_empty() {
                continue;
            }
            let outcome = match Outcome::of(config, ran, steps) {
                Ok(o) => o,
                Err(e) => {
                    failed.get_or_insert(e);
                    continue;
                }
            };
            print_out(&report::one(&outcome, p.top));
            if let Some(w) = p.csv.as_mut()
                && let Err(e) = w.write(&outcome, &p.backend_version, p.rescaled)
            {
                failed.get_or_insert(e);
            }
            outcomes.push(outcome);
        }
        if outcomes.len() > 1 {
            print_out(&report::side_by_side(&outcomes));
        }
        if let Some(signal) = cause.filter(|&c| is_signal(c) && !crate::world::job_ending()) {
            say(&stop_line(signal, &outcomes));
        }
        self.done = Some(outcomes.clone());
        match failed {
            Some(e) => Err(e),
            None => Ok(outcomes),
        }
    }
}

/// `collbench: stopped by SIGINT after 3 timed step(s) of every
/// configuration; those are reported`, or that none was timed.
pub(super) fn stop_line(signal: u64, outcomes: &[Outcome]) -> String {
    let stopped = stopped_by(&signal_name(signal));
    match outcomes.iter().map(|o| o.step_us.len()).min() {
        Some(steps) => {
            format!("collbench: {stopped} after {steps} timed step(s) of every configuration; those are reported")
        }
        None => format!("collbench: {stopped} before any step was timed; there is nothing to report"),
    }
}

/// The watcher: completes the reports as soon as a stop fires, until
/// `finish` ends it.
fn watch(shared: Arc<Mutex<Shared>>, stop: StopRequest) -> Option<StopWatcher> {
    StopWatcher::spawn(stop, move |cause| {
        let mut shared = lock_shared(&shared);
        if shared.done.is_none()
            && let Err(e) = shared.complete(Some(cause))
        {
            say(&format!("collbench: {e}"));
        }
        shared.hold = None;
    })
}
