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
//! The watchdog (`engine::watchdog`) ends its process with exit 5 when a
//! step overruns `--timeout`; `timed_out` first asks the reports to be
//! completed, so that rank 0, alive, leaves them whole (docs/exit-codes.md).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::error::Error;

/// The stop cause of a run ended by the `--timeout` watchdog: not a signal
/// (signals are below 65), so that 128 + it is never taken for an exit code.
pub const TIMEOUT: u64 = 1 << 16;

/// The stop cause of a run whose rank 0 failed (its error line says why):
/// its reports are completed before the job is taken down.
pub const FAILED: u64 = 1 << 17;

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
    /// Reports a stop must complete before the process may end; signalled
    /// when that count falls to 0.
    open: Mutex<usize>,
    closed: Condvar,
}

/// Keeps a later signal from ending the process while rank 0's reports
/// are open; dropping it closes them (see the module doc).
pub struct ReportsHold {
    inner: Arc<Inner>,
}

impl StopRequest {
    /// Installs the handlers: a thread of its own receives the signals in
    /// order (`signal_hook`'s self-pipe), so that the first one is known;
    /// of signals that arrive together (read in one batch), SIGINT counts
    /// as the first, then SIGTERM: a user's Ctrl-C is the cause a
    /// launcher's SIGTERM and a closed terminal's SIGHUP follow from.
    pub fn install() -> Result<StopRequest, Error> {
        let failed = |e: std::io::Error| Error::runtime(format!("cannot install the signal handlers: {e}"));
        let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).map_err(failed)?;
        let stop = StopRequest {
            inner: Arc::new(Inner {
                installed: true,
                ..Inner::default()
            }),
        };
        let inner = Arc::clone(&stop.inner);
        std::thread::Builder::new()
            .name("collbench-signals".into())
            .spawn(move || {
                while !signals.is_closed() {
                    let mut batch: Vec<i32> = signals.wait().collect();
                    batch.sort_by_key(|s| [SIGINT, SIGTERM, SIGHUP].iter().position(|p| p == s));
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

    fn received(&self, signal: usize) {
        let _ = self
            .first
            .compare_exchange(0, signal, Ordering::SeqCst, Ordering::SeqCst);
        let count = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        if count > 1 && *self.open() == 0 {
            self.end_now();
        }
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

/// `SIGINT`, `SIGTERM`, `timeout`, `error`, or the number.
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
