//! Stopping on SIGINT, SIGTERM and SIGHUP, and the watchdog's stop: the
//! first signal asks the sweep to stop at the next point boundary, where
//! the ranks agree to stop together, the reports are completed and the
//! process exits with 128 + the signal.
//!
//! Any number of signals may follow the first (a terminal sends SIGINT to
//! every process of its foreground group and the launcher adds SIGTERM;
//! mpirun closes each rank's pseudo-terminal, a SIGHUP; a user presses
//! Ctrl-C twice): a later one ends the process at once, for a run stuck
//! where it cannot reach a boundary, but never while rank 0's reports are
//! open (`hold_reports`): they are completed first, within milliseconds
//! (`report::Reporter`), and the process ends right after. The reports
//! name the first signal, and the process ends with 128 + it.
//!
//! A SIGCONT while the process runs is the launcher's first step in ending
//! the job: Open MPI's mpirun and Slurm send SIGCONT (for a stopped rank),
//! then SIGTERM, then SIGKILL; and Open MPI's ranks may end on their own
//! (they lose mpirun) in the second between the SIGCONT and the SIGTERM,
//! before any SIGTERM could complete a report. So such a SIGCONT is a stop
//! signal too, named last among signals that come with it (Slurm's SIGTERM
//! follows at once and is the one named). A SIGCONT that resumes a stopped
//! process (Ctrl-Z then `fg`, a suspended job) is not: a clock thread
//! notes every `TICK` that the process runs, and a gap in its notes says
//! the process was stopped (`launcher_warning`). docs/exit-codes.md.
//!
//! The watchdog (`engine::watchdog`) ends its process with exit 5 when a
//! step overruns `--timeout`; `timed_out` first asks the reports to be
//! completed, so that rank 0, alive, leaves them whole (docs/exit-codes.md).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGCONT, SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::Error;

/// The stop cause of a run ended by the `--timeout` watchdog: not a signal
/// (signals are below 65), so that 128 + it is never taken for an exit code.
pub const TIMEOUT: u64 = 1 << 16;

/// The stop cause of a run whose rank 0 failed (its error line says why):
/// its reports are completed before the job is taken down.
pub const FAILED: u64 = 1 << 17;

/// How often the clock thread notes that the process runs.
const TICK: Duration = Duration::from_millis(50);

/// A gap this long between two of the clock thread's notes means the
/// process was stopped, not merely slow to be scheduled.
const STOPPED_GAP: Duration = Duration::from_millis(400);

/// A SIGCONT this soon after a stop is its resume.
const RESUMED_WITHIN: Duration = Duration::from_secs(2);

/// How long after a launcher's SIGCONT its other signals are waited for
/// (Slurm sends SIGTERM right after it): those are then the ones named.
const FOLLOW_UP: Duration = Duration::from_millis(100);

/// The order in which signals read together count: a user's Ctrl-C is the
/// cause a launcher's SIGTERM and a closed terminal's SIGHUP follow from;
/// a launcher's SIGCONT comes before its SIGTERM but names the stop only
/// alone.
const ORDER: [i32; 4] = [SIGINT, SIGTERM, SIGHUP, SIGCONT];

/// Whether `code` is an exit code a stop signal gives a measuring command
/// (128 + SIGINT, SIGTERM, SIGHUP or SIGCONT: docs/exit-codes.md).
pub fn is_stop_code(code: i32) -> bool {
    ORDER.iter().any(|&signal| code == 128 + signal)
}

/// Whether `cause` is a signal (not `TIMEOUT` or `FAILED`).
pub fn is_signal(cause: u64) -> bool {
    cause > 0 && cause < TIMEOUT
}

#[derive(Clone)]
pub struct StopRequest {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    /// The first signal received, 0 if none.
    first: AtomicUsize,
    /// Signals received.
    count: AtomicUsize,
    /// The watchdog fired.
    timed_out: AtomicBool,
    /// Installed for this process's signals: a later one may end it (a
    /// request made by `never`, for tests, never ends the process).
    installed: bool,
    /// The clock thread's notes: when it last ran, and when it last found
    /// a gap (the process had been stopped).
    clock: Mutex<Clock>,
    /// Reports a stop must complete before the process may end; signalled
    /// when that count falls to 0.
    open: Mutex<usize>,
    closed: Condvar,
}

#[derive(Default)]
struct Clock {
    last: Option<Instant>,
    stopped: Option<Instant>,
}

/// Keeps a later signal from ending the process while rank 0's reports
/// are open; dropping it closes them (see the module doc).
pub struct ReportsHold {
    inner: Arc<Inner>,
}

impl StopRequest {
    /// Installs the handlers: a thread of its own receives the signals in
    /// order (`signal_hook`'s self-pipe), so that the first one is known;
    /// signals that arrive together (read in one batch) count in `ORDER`.
    /// A second thread keeps the clock that tells a launcher's SIGCONT
    /// from a resume (see the module doc).
    pub fn install() -> Result<StopRequest, Error> {
        let failed = |e: std::io::Error| Error::runtime(format!("cannot install the signal handlers: {e}"));
        let mut signals = Signals::new(ORDER).map_err(failed)?;
        let stop = StopRequest {
            inner: Arc::new(Inner {
                installed: true,
                ..Inner::default()
            }),
        };
        let inner = Arc::clone(&stop.inner);
        std::thread::Builder::new()
            .name("collbench-clock".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(TICK);
                    inner.tick(Instant::now());
                }
            })
            .map_err(failed)?;
        let inner = Arc::clone(&stop.inner);
        std::thread::Builder::new()
            .name("collbench-signals".into())
            .spawn(move || {
                while !signals.is_closed() {
                    let mut batch: Vec<i32> = signals.wait().collect();
                    if batch.contains(&SIGCONT) {
                        if inner.launcher_warning(Instant::now()) {
                            std::thread::sleep(FOLLOW_UP);
                            batch.extend(signals.pending());
                        } else {
                            batch.retain(|s| *s != SIGCONT);
                        }
                    }
                    batch.sort_by_key(|s| ORDER.iter().position(|p| p == s));
                    for signal in batch {
                        inner.received(signal as usize);
                    }
                }
            })
            .map_err(failed)?;
        Ok(stop)
    }

    /// A request that never fires (tests, embedding).
    pub fn never() -> StopRequest {
        StopRequest {
            inner: Arc::new(Inner::default()),
        }
    }

    /// Asks for a stop as `signal` would (tests; a program embedding the
    /// engine).
    pub fn raise(&self, signal: u64) {
        self.inner.received(signal as usize);
    }

    /// The first signal received on this rank, 0 if none.
    pub fn signal(&self) -> u64 {
        self.inner.first.load(Ordering::SeqCst) as u64
    }

    /// Why the reports must be completed now: `TIMEOUT` when this rank's
    /// watchdog fired (a launcher's SIGTERM may follow it: the timeout is
    /// the cause), else the first signal; `None` while the run goes on.
    pub fn cause(&self) -> Option<u64> {
        match self.signal() {
            _ if self.inner.timed_out.load(Ordering::SeqCst) => Some(TIMEOUT),
            0 => None,
            signal => Some(signal),
        }
    }

    /// Rank 0's reports are open until the hold is dropped.
    pub fn hold_reports(&self) -> ReportsHold {
        *self.inner.open() += 1;
        ReportsHold {
            inner: Arc::clone(&self.inner),
        }
    }

    /// The watchdog fired: asks the open reports to be completed and waits
    /// for them, at most `limit` (the process then ends with exit 5).
    pub fn timed_out(&self, limit: Duration) {
        self.inner.timed_out.store(true, Ordering::SeqCst);
        let open = self.inner.open();
        let _ = self.inner.closed.wait_timeout_while(open, limit, |open| *open > 0);
    }
}

impl Inner {
    fn open(&self) -> std::sync::MutexGuard<'_, usize> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A signal: the first names the stop; a later one ends the process
    /// at once once no report is open. A launcher's SIGCONT names a stop
    /// but is not counted: its SIGTERM must not end a rank at once.
    fn received(&self, signal: usize) {
        let _ = self
            .first
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
        if signal == SIGCONT as usize {
            return;
        }
        let count = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if count > 1 && *self.open() == 0 {
            self.end_now();
        }
    }

    /// The clock thread ran at `now`.
    fn tick(&self, now: Instant) {
        let mut clock = self.clock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if clock.last.is_some_and(|last| now.duration_since(last) > STOPPED_GAP) {
            clock.stopped = Some(now);
        }
        clock.last = Some(now);
    }

    /// Whether a SIGCONT read at `now` is the launcher's warning (the
    /// process was running) rather than a resume.
    fn launcher_warning(&self, now: Instant) -> bool {
        let clock = self.clock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        launcher_warning(
            clock.last.map(|t| now.saturating_duration_since(t)),
            clock.stopped.map(|t| now.saturating_duration_since(t)),
        )
    }

    /// A later signal with no report open: the process ends at once.
    fn end_now(&self) {
        if !self.installed {
            return;
        }
        let first = self.first.load(Ordering::SeqCst);
        crate::world::announce_exit(128 + first as u8);
        signal_hook::low_level::exit(128 + first as i32)
    }
}

impl Drop for ReportsHold {
    fn drop(&mut self) {
        let mut open = self.inner.open();
        *open = open.saturating_sub(1);
        let last = *open == 0;
        drop(open);
        self.inner.closed.notify_all();
        if last && self.inner.count.load(Ordering::SeqCst) > 1 {
            self.inner.end_now();
        }
    }
}

/// Whether a SIGCONT is the launcher's warning: the clock thread ran
/// `since_tick` ago, within a tick's gap (the process was running: a
/// resumed one's clock is stale until it runs again), and found no stop
/// `since_stop` ago (it ran first after a resume). Without a clock (no
/// note yet), a SIGCONT is no warning.
fn launcher_warning(since_tick: Option<Duration>, since_stop: Option<Duration>) -> bool {
    since_tick.is_some_and(|t| t <= STOPPED_GAP) && since_stop.is_none_or(|s| s > RESUMED_WITHIN)
}

/// `SIGINT`, `SIGTERM`, `SIGCONT`, `timeout`, `error`, or the number.
pub fn signal_name(signal: u64) -> String {
    match signal {
        TIMEOUT => return "timeout".into(),
        FAILED => return "error".into(),
        _ => {}
    }
    match signal as i32 {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        SIGCONT => "SIGCONT".into(),
        other => format!("signal {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_signal_is_the_one_kept_and_a_timeout_is_a_cause_but_no_signal() {
        let stop = StopRequest::never();
        assert_eq!((stop.signal(), stop.cause()), (0, None));
        let hold = stop.hold_reports();
        stop.raise(2);
        stop.raise(15);
        assert_eq!((stop.signal(), stop.cause()), (2, Some(2)));
        // not installed: a later signal never ends the test process
        drop(hold);
        stop.raise(1);
        assert_eq!(stop.signal(), 2);
        let timeout = StopRequest::never();
        timeout.timed_out(Duration::ZERO);
        assert_eq!((timeout.signal(), timeout.cause()), (0, Some(TIMEOUT)));
        assert_eq!(signal_name(TIMEOUT), "timeout");
    }

    #[test]
    fn a_sigcont_warns_only_where_the_process_was_running() {
        let ms = Duration::from_millis;
        // running: the clock ran a tick ago, no stop seen
        assert!(launcher_warning(Some(ms(30)), None));
        assert!(launcher_warning(Some(ms(30)), Some(Duration::from_secs(60))));
        // resumed: the clock has not run since the stop (its note is
        // stale), or ran first and found the gap
        assert!(!launcher_warning(Some(ms(1500)), None));
        assert!(!launcher_warning(Some(ms(5)), Some(ms(5))));
        // no clock yet
        assert!(!launcher_warning(None, None));
        let inner = Inner::default();
        let t0 = Instant::now();
        inner.tick(t0);
        inner.tick(t0 + ms(50));
        assert!(inner.launcher_warning(t0 + ms(80)));
        // a second without a note: the process was stopped
        inner.tick(t0 + ms(1050));
        assert!(!inner.launcher_warning(t0 + ms(1060)));
        // running again for longer than a resume takes
        let resumed = t0 + ms(1050);
        let mut at = resumed;
        while at < resumed + RESUMED_WITHIN {
            at += TICK;
            inner.tick(at);
        }
        assert!(inner.launcher_warning(at + ms(10)));
    }

    #[test]
    fn a_launchers_sigcont_names_the_stop_but_is_not_counted() {
        let stop = StopRequest::never();
        stop.inner.received(SIGCONT as usize);
        assert_eq!((stop.signal(), stop.inner.count.load(Ordering::SeqCst)), (18, 0));
        stop.inner.received(SIGTERM as usize);
        assert_eq!((stop.signal(), stop.inner.count.load(Ordering::SeqCst)), (18, 1));
        assert_eq!(signal_name(18), "SIGCONT");
    }

    #[test]
    fn the_watchdog_waits_for_the_reports_to_close_and_no_longer() {
        let stop = StopRequest::never();
        let hold = stop.hold_reports();
        let waiter = stop.clone();
        let started = std::time::Instant::now();
        let t = std::thread::spawn(move || waiter.timed_out(Duration::from_secs(30)));
        while stop.cause().is_none() {
            std::thread::yield_now();
        }
        drop(hold);
        t.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(30));
        let never_closed = StopRequest::never();
        let _open = never_closed.hold_reports();
        never_closed.timed_out(Duration::from_millis(10));
    }
}
