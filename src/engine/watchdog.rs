//! The watchdog: a thread that ends this rank when one step of the run (a
//! measured point, or the set-up) takes longer than `--timeout`.
//!
//! A hung collective never returns, so the thread cannot ask the main
//! thread to stop; it prints which step was running and exits the process
//! with code 5, after rank 0's reports are completed (through the run's
//! `StopRequest`, `with_stop`: the table's footer and the JSON say the run
//! stopped by the timeout, and the CSV keeps every row). It makes no MPI call: MPI was initialised
//! for one thread, and the launcher already ends the whole job when one rank
//! exits with a non-zero code (mpirun does; under Slurm every other rank's
//! own watchdog fires as well, since its peers are gone). With the TCP
//! store, the rank tells rank 0 first (`world::announce_exit`), which ends
//! every other rank.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::stop::StopRequest;
use crate::error::exit;

/// How long a firing watchdog waits for rank 0's reports to be completed.
const REPORTS_GRACE: Duration = Duration::from_secs(5);

/// A watchdog of this process has fired (the process is ending).
static FIRED: AtomicBool = AtomicBool::new(false);

struct Shared {
    /// Milliseconds since `epoch` when the current step started, plus one;
    /// 0 when idle.
    started_ms: AtomicU64,
    what: Mutex<String>,
    epoch: Instant,
    /// The run's stop request: its reports are completed before the exit.
    stop: Mutex<Option<StopRequest>>,
}

/// Watches the steps of one rank; dropping it stops nothing (the thread
/// ends with the process).
pub struct Watchdog {
    shared: Arc<Shared>,
}

impl Watchdog {
    /// Starts the thread; `who` prefixes the message ("rank 3 on node-b").
    pub fn start(timeout: Duration, who: String) -> Watchdog {
        let shared = Arc::new(Shared {
            started_ms: AtomicU64::new(0),
            what: Mutex::new(String::new()),
            epoch: Instant::now(),
            stop: Mutex::new(None),
        });
        let watched = Arc::clone(&shared);
        let name = who.clone();
        // Check often enough that the overrun is a small part of the timeout.
        let tick = (timeout / 20).clamp(Duration::from_millis(10), Duration::from_millis(500));
        let spawned = thread::Builder::new().name("collbench-watchdog".into()).spawn(move || {
            loop {
                thread::sleep(tick);
                let started = watched.started_ms.load(Ordering::SeqCst);
                if started == 0 {
                    continue;
                }
                let now_ms = watched.epoch.elapsed().as_millis() as u64 + 1;
                if Duration::from_millis(now_ms.saturating_sub(started)) > timeout {
                    // With -g every rank's watchdog is in this process: the
                    // first to fire ends it, and the others say nothing.
                    if FIRED.swap(true, Ordering::SeqCst) {
                        return;
                    }
                    let what = watched.what.lock().map(|w| w.clone()).unwrap_or_default();
                    crate::error::say(&format!(
                        "collbench: {name}: timeout: {what} ran longer than --timeout {} s; ending the job",
                        timeout.as_secs_f64()
                    ));
                    let stop = watched.stop.lock().ok().and_then(|s| s.clone());
                    if let Some(stop) = stop {
                        stop.timed_out(REPORTS_GRACE);
                    }
                    // The store's ranks hear of it at once (MPI's launcher
                    // ends the job by itself).
                    crate::world::announce_exit(exit::TIMEOUT);
                    std::process::exit(i32::from(exit::TIMEOUT));
                }
            }
        });
        if let Err(e) = spawned {
            crate::error::say(&format!(
                "collbench: {who}: warning: no watchdog thread ({e}); --timeout is not enforced"
            ));
        }
        Watchdog { shared }
    }

    /// Completes the reports of `stop` (rank 0's) before the process ends.
    pub fn with_stop(self, stop: StopRequest) -> Watchdog {
        if let Ok(mut s) = self.shared.stop.lock() {
            *s = Some(stop);
        }
        self
    }

    /// A step starts: `what` names it in the timeout message.
    pub fn watch(&self, what: impl Into<String>) {
        if let Ok(mut w) = self.shared.what.lock() {
            *w = what.into();
        }
        let now_ms = self.shared.epoch.elapsed().as_millis() as u64 + 1;
        self.shared.started_ms.store(now_ms, Ordering::SeqCst);
    }

    /// The step being watched, `None` when idle.
    pub fn watching(&self) -> Option<String> {
        if self.shared.started_ms.load(Ordering::SeqCst) == 0 {
            return None;
        }
        self.shared.what.lock().ok().map(|w| w.clone())
    }

    /// No step is running (waiting for the user, writing the last report).
    pub fn idle(&self) {
        self.shared.started_ms.store(0, Ordering::SeqCst);
    }
}
