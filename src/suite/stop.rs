//! Ctrl-C and SIGTERM during a suite: the running launch is stopped, no
//! further launch starts, the launches that finished are still merged into
//! the suite's CSV, one line says what finished and what did not, and the
//! suite exits with 128 + the signal (130, 143).
//!
//! Each launch runs in a process group of its own, so that a Ctrl-C in the
//! terminal reaches the suite alone and the launch gets exactly one signal
//! from it: SIGTERM, which mpirun and srun both turn into an orderly end
//! of the job (mpirun sends SIGCONT, then SIGTERM, to its ranks, whose reports are then
//! completed; srun needs a second SIGINT within a second, but one SIGTERM).
//! A launch still running `GRACE` later, or at a second signal, is killed.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use super::{Outcome, Planned, merge};
use crate::engine::stop::signal_name;
use crate::error::{Error, say};

/// How long a launch may take to end after it was told to.
const GRACE: Duration = Duration::from_secs(15);

pub struct Stop {
    signals: Signals,
    /// The first signal the suite received.
    pub signal: Option<i32>,
    /// When the running launch was told to stop.
    told: Option<Instant>,
}

impl Stop {
    pub fn install() -> Result<Stop, Error> {
        let signals = Signals::new([SIGINT, SIGTERM])
            .map_err(|e| Error::runtime(format!("cannot install the signal handlers: {e}")))?;
        Ok(Stop {
            signals,
            signal: None,
            told: None,
        })
    }

    /// True once a signal arrived (between launches: start no other).
    pub fn requested(&mut self) -> bool {
        if let Some(first) = self.signals.pending().next() {
            self.signal.get_or_insert(first);
        }
        self.signal.is_some()
    }

    /// While `child` runs: at the first signal it is told to stop, at a
    /// second one or after `GRACE` it is killed.
    pub fn watch(&mut self, child: &mut Child) {
        for signal in self.signals.pending() {
            if self.signal.is_none() {
                self.signal = Some(signal);
            } else {
                let _ = child.kill();
            }
        }
        if self.signal.is_some() && self.told.is_none() {
            self.told = Some(Instant::now());
            let pid = rustix::process::Pid::from_child(child);
            if rustix::process::kill_process(pid, rustix::process::Signal::TERM).is_err() {
                let _ = child.kill();
            }
        }
        if self.told.is_some_and(|t| t.elapsed() > GRACE) {
            let _ = child.kill();
        }
    }
}

/// `[2/3] tcp flat`.
fn name(i: usize, n: usize, p: &Planned) -> String {
    format!("[{}/{n}] {} {}", i + 1, p.launch.transport, p.launch.hierarchy)
}

/// After a stop signal: the finished launches merged, one line, 128 + the
/// signal. `finished` are the launches that ended before the signal;
/// `interrupted`, the one it stopped (its partial CSV stays in its folder).
pub fn finish(
    signal: i32,
    planned: &[Planned],
    finished: &[Outcome],
    interrupted: Option<&Outcome>,
    output: &Path,
    overwrite: bool,
) -> Result<u8, Error> {
    let n = planned.len();
    let inputs = super::written_csvs(finished);
    let merged = if inputs.is_empty() {
        "no rows to merge".to_string()
    } else {
        let rows: usize = merge::merge(&inputs, output, overwrite)?.iter().sum();
        format!("their {rows} rows are in {}", output.display())
    };
    let done: Vec<String> = finished
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let result = if o.code == 0 {
                "ok".into()
            } else {
                format!("exit {}", o.code)
            };
            format!("{} {result}", name(i, n, &planned[i]))
        })
        .collect();
    let mut not_done = Vec::new();
    if let Some(o) = interrupted {
        let i = finished.len();
        not_done.push(format!(
            "{} stopped after {} rows (partial CSV: {})",
            name(i, n, &planned[i]),
            o.rows,
            o.csv.display()
        ));
    }
    let first_unstarted = finished.len() + usize::from(interrupted.is_some());
    for (i, p) in planned.iter().enumerate().skip(first_unstarted) {
        not_done.push(format!("{} not started", name(i, n, p)));
    }
    let finished_text = if done.is_empty() {
        "no launch finished".to_string()
    } else {
        format!("{} of {n} finished ({}), {merged}", done.len(), done.join(", "))
    };
    say(&format!(
        "collbench suite: stopped by {}: {finished_text}; not finished: {}",
        signal_name(signal as u64),
        not_done.join(", ")
    ));
    Ok(128 + signal as u8)
}
