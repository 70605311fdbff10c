//! Rank 0's outputs during a run: every sink and the progress, behind one
//! lock, so that a stop completes them at once rather than at the end of
//! the point being measured.
//!
//! Under `mpirun`, Ctrl-C reaches mpirun, which sends each rank SIGTERM
//! and, a second later (`odls_base_sigkill_timeout`), SIGKILL; a point
//! can take longer than that second, so a rank that waited for its point
//! boundary would be killed with its table cut off and its JSON never
//! written. So a watcher thread completes the reports as soon as the
//! signal arrives (or the `--timeout` watchdog fires, `engine::stop`):
//! the table prints the row it was holding back, its section's average
//! and its footer (which says the run is incomplete and why); the CSV is
//! flushed; the JSON is written; and one line on stderr names the signal
//! (the watchdog says its own, and when the control plane ends the job for
//! a failed rank, that rank's line says why: `world::job_ending`). From then on records are dropped (the
//! sweep stops at its next point boundary anyway), so the CSV, the JSON
//! and the table hold exactly the same points. While the reports are open
//! the reporter holds them (`StopRequest::hold_reports`), so that a second
//! signal cannot end the process before they are whole. Nothing here
//! decides when the sweep stops (the engine does).

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::progress::Progress;
use super::{RunInfo, Sink};
use crate::engine::Summary;
use crate::engine::stop::{FAILED, ReportsHold, StopRequest, is_signal, signal_name};
use crate::error::{Error, say, stopped_by};
use crate::record::Record;

/// How often the watcher looks for a stop signal.
const WATCH_EVERY: Duration = Duration::from_millis(20);

/// Rank 0's outputs: every sink plus the progress.
pub struct Reporter {
    shared: Arc<Mutex<Outputs>>,
    stop: Option<StopRequest>,
    watcher: Option<StopWatcher>,
}

struct Outputs {
    sinks: Vec<Box<dyn Sink>>,
    progress: Progress,
    /// Points the run plans (`None`: until stopped).
    planned: Option<u64>,
    /// Set at `begin`.
    run: Option<RunInfo>,
    /// What the sinks were given so far.
    tally: Summary,
    state: State,
    /// Held while the reports are open (see the module doc).
    hold: Option<ReportsHold>,
}

#[derive(Clone, Debug, PartialEq)]
enum State {
    Open,
    /// Completed by a stop signal: this is what the reports say.
    Stopped(Summary),
    Closed,
}

impl Reporter {
    /// `planned`: the points the run will measure, `None` when endless.
    pub fn new(sinks: Vec<Box<dyn Sink>>, progress: Progress, planned: Option<u64>) -> Reporter {
        Reporter {
            shared: Arc::new(Mutex::new(Outputs {
                sinks,
                progress,
                planned,
                run: None,
                tally: Summary::default(),
                state: State::Open,
                hold: None,
            })),
            stop: None,
            watcher: None,
        }
    }

    /// Completes the reports as soon as `stop` fires (see the module doc).
    pub fn stop_on(mut self, stop: StopRequest) -> Reporter {
        self.stop = Some(stop);
        self
    }

    fn outputs(&self) -> MutexGuard<'_, Outputs> {
        // A sink that panicked has ended the process in the panic hook; the
        // data behind a poisoned lock is still whole.
        self.shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn begin(&mut self, run: &RunInfo) -> Result<(), Error> {
        {
            let mut out = self.outputs();
            out.run = Some(run.clone());
            out.hold = self.stop.as_ref().map(StopRequest::hold_reports);
            out.each(|s| s.begin(run))?;
        }
        if let Some(stop) = self.stop.clone() {
            self.watcher = watch(Arc::clone(&self.shared), stop);
        }
        Ok(())
    }

    /// Hands `record` to every sink, unless a stop signal completed the
    /// reports already: then it is dropped, from every one of them.
    pub fn record(&mut self, record: &Record) -> Result<(), Error> {
        let mut out = self.outputs();
        if out.state != State::Open {
            return Ok(());
        }
        out.each(|s| s.record(record))?;
        out.tally.points += 1;
        if let Some(w) = record.wrong {
            out.tally.checked_points += 1;
            out.tally.wrong += w;
            out.tally.failed_points += usize::from(w > 0);
        }
        out.progress.advance(record);
        Ok(())
    }

    /// Completes every report with `summary`, unless a stop signal did
    /// already; returns what the reports say (the points they hold).
    pub fn finish(&mut self, run: &RunInfo, summary: &Summary) -> Result<Summary, Error> {
        if let Some(watcher) = self.watcher.take() {
            watcher.end();
        }
        let mut out = self.outputs();
        let reported = match std::mem::replace(&mut out.state, State::Closed) {
            // the watcher said why when it completed them
            State::Stopped(reported) => Ok(reported),
            State::Closed => Ok(summary.clone()),
            State::Open => {
                out.progress.finish();
                let finished = out.finish_all(run, summary);
                if let Some(signal) = summary.stopped_by.filter(|_| !crate::world::job_ending()) {
                    say(&stop_line(signal, summary.points, out.planned));
                }
                finished.map(|_| summary.clone())
            }
        };
        out.hold = None;
        reported
    }

    /// Rank 0 failed (its error line is said, the job is about to be taken
    /// down): completes every report that still can be with what it holds,
    /// marked as stopped by an error.
    pub fn abandon(&mut self) {
        if let Some(watcher) = self.watcher.take() {
            watcher.end();
        }
        self.outputs().stop(FAILED);
    }

    /// The run will not start after all: remove every file created.
    pub fn discard(&mut self) {
        let mut out = self.outputs();
        out.progress.finish();
        out.state = State::Closed;
        for sink in &mut out.sinks {
            sink.discard();
        }
        out.hold = None;
    }
}

impl Outputs {
    fn each(&mut self, mut f: impl FnMut(&mut dyn Sink) -> std::io::Result<()>) -> Result<(), Error> {
        for sink in &mut self.sinks {
            f(sink.as_mut()).map_err(|e| Error::runtime(format!("cannot write {}: {e}", sink.target())))?;
        }
        Ok(())
    }

    /// Finishes every sink, even after one failed: the first failure.
    fn finish_all(&mut self, run: &RunInfo, summary: &Summary) -> Result<(), Error> {
        let mut first = Ok(());
        for sink in &mut self.sinks {
            if let Err(e) = sink.finish(run, summary)
                && first.is_ok()
            {
                first = Err(Error::runtime(format!("cannot write {}: {e}", sink.target())));
            }
        }
        first
    }

    /// A stop signal arrived, or the watchdog fired (`cause`): complete
    /// every report with what it holds, say why (the watchdog has said it),
    /// and let the process end (a later signal may end it at once now).
    fn stop(&mut self, cause: u64) {
        if self.state != State::Open {
            return;
        }
        let Some(run) = self.run.clone() else {
            return;
        };
        let mut summary = self.tally.clone();
        summary.stopped_by = Some(cause);
        summary.cycles = (summary.points / run.points.max(1)) as u64;
        self.progress.finish();
        // after rank 0's failure its line is the one: a report that
        // cannot be completed is then left out (a JSON is removed)
        if let Err(e) = self.finish_all(&run, &summary)
            && cause != FAILED
        {
            say(&format!("collbench: {e}"));
        }
        // a failed rank's line says why when the control plane ends the job
        if is_signal(cause) && !crate::world::job_ending() {
            say(&stop_line(cause, summary.points, self.planned));
        }
        self.state = State::Stopped(summary);
        self.hold = None;
    }
}

/// A thread that calls its `on_stop` once, with the cause, as soon as a
/// stop fires (`StopRequest::cause`), unless `end` comes first: how rank
/// 0's reports are completed while the main thread may be stuck in an
/// operation (the sweep's `Reporter`, a workload's reports).
pub(crate) struct StopWatcher {
    quit: Sender<()>,
    thread: JoinHandle<()>,
}

impl StopWatcher {
    /// Starts watching `stop`; `None`, said as a warning, where no thread
    /// starts (the reports are then completed when the work ends).
    pub fn spawn(stop: StopRequest, on_stop: impl FnOnce(u64) + Send + 'static) -> Option<StopWatcher> {
        let (quit, quitting) = mpsc::channel::<()>();
        let spawned = std::thread::Builder::new()
            .name("collbench-stop-watch".into())
            .spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = quitting.recv_timeout(WATCH_EVERY) {
                    if let Some(cause) = stop.cause() {
                        on_stop(cause);
                        return;
                    }
                }
            });
        match spawned {
            Ok(thread) => Some(StopWatcher { quit, thread }),
            Err(e) => {
                say(&format!("collbench: warning: no stop watcher ({e})"));
                None
            }
        }
    }

    /// Stops watching, after an `on_stop` under way has returned.
    pub fn end(self) {
        drop(self.quit);
        let _ = self.thread.join();
    }
}

/// The sweep's watcher: completes the reports at a stop.
fn watch(shared: Arc<Mutex<Outputs>>, stop: StopRequest) -> Option<StopWatcher> {
    StopWatcher::spawn(stop, move |cause| {
        let mut out = shared.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        out.stop(cause);
    })
}

/// `collbench: stopped by SIGINT after 12 of 68 points; ...`
pub fn stop_line(signal: u64, points: usize, planned: Option<u64>) -> String {
    let planned = planned.map(|p| format!(" of {p}")).unwrap_or_default();
    format!(
        "collbench: {} after {points}{planned} points; the run is incomplete, every finished point is in the CSV",
        stopped_by(&signal_name(signal))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stop_line_names_the_signal_and_the_points() {
        assert_eq!(
            stop_line(2, 12, Some(68)),
            "collbench: stopped by SIGINT after 12 of 68 points; the run is incomplete, every finished point is in the CSV"
        );
        assert!(stop_line(15, 3, None).contains("stopped by SIGTERM after 3 points;"));
        assert!(
            stop_line(18, 3, None)
                .starts_with("collbench: stopped by SIGCONT (the launcher is ending the job) after 3 points;")
        );
    }
}
