//! `--timings`: where a launch's time went, phase by phase, as rank 0 saw
//! it (docs/overhead.md, "Start-up"): the transport profile, MPI's start
//! and first meeting, each step of the shared set-up (digest, the NCCL_*
//! check, nodes, the backend, the transport observed, the gathers, the
//! run's identity), the task's own set-up (plan, buffers, outputs), the
//! task, its reports, and MPI's finalisation. Printed once, on stderr,
//! when the launch ends; what came before the session (the launcher, the
//! process's start, parsing the options) is the wall time less the total.
//!
//! Each phase ends at a mark; a step every rank takes together ends at the
//! same moment on every rank, so rank 0's marks are the job's. Marking is
//! a clock reading and a push, only when asked for; nothing here runs
//! inside a timed loop.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The phases of one launch, in order; off unless `--timings` was given.
pub struct Timings {
    on: bool,
    start: Instant,
    marks: Mutex<Vec<(&'static str, Instant)>>,
}

impl Timings {
    /// Starts the launch's clock (`on`: `--timings`).
    pub fn new(on: bool) -> Timings {
        Timings {
            on,
            start: Instant::now(),
            marks: Mutex::new(Vec::new()),
        }
    }

    /// Off: marks are ignored (a session without a launch, the tests).
    pub fn off() -> Timings {
        Timings::new(false)
    }

    /// `phase` ended now: it took the time since the previous mark.
    pub fn mark(&self, phase: &'static str) {
        if !self.on {
            return;
        }
        let now = Instant::now();
        if let Ok(mut marks) = self.marks.lock() {
            marks.push((phase, now));
        }
    }

    /// Each phase and its length, in order (nothing when off).
    pub fn phases(&self) -> Vec<(&'static str, Duration)> {
        let Ok(marks) = self.marks.lock() else {
            return Vec::new();
        };
        let mut last = self.start;
        marks
            .iter()
            .map(|&(phase, at)| {
                let took = at.saturating_duration_since(last);
                last = at;
                (phase, took)
            })
            .collect()
    }

    /// The report's lines: a heading with the total, then one line per
    /// phase in milliseconds; `None` when off.
    pub fn report(&self) -> Option<Vec<String>> {
        if !self.on {
            return None;
        }
        Some(report_lines(&self.phases()))
    }
}

/// "collbench: timings (rank 0): 412.3 ms from the session's start to
/// its end", then "  MPI init  120.3 ms" per phase.
fn report_lines(phases: &[(&'static str, Duration)]) -> Vec<String> {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let total: Duration = phases.iter().map(|&(_, d)| d).sum();
    let width = phases.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
    let mut lines = vec![format!(
        "collbench: timings (rank 0): {:.1} ms from the session's start to its end",
        ms(total)
    )];
    lines.extend(
        phases
            .iter()
            .map(|&(phase, d)| format!("collbench:   {phase:<width$}  {:>8.1} ms", ms(d))),
    );
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_phase_is_the_time_since_the_previous_mark_and_they_add_up() {
        let t = Timings::new(true);
        t.mark("one");
        std::thread::sleep(Duration::from_millis(2));
        t.mark("two");
        let phases = t.phases();
        assert_eq!(phases.iter().map(|p| p.0).collect::<Vec<_>>(), ["one", "two"]);
        assert!(phases[1].1 >= Duration::from_millis(2));
        let marks = t.marks.lock().unwrap();
        let sum: Duration = phases.iter().map(|p| p.1).sum();
        assert_eq!(sum, marks[1].1 - t.start);
    }

    #[test]
    fn off_it_records_and_reports_nothing() {
        let t = Timings::off();
        t.mark("one");
        assert!(t.phases().is_empty());
        assert_eq!(t.report(), None);
    }

    #[test]
    fn the_report_gives_the_total_and_each_phase_in_milliseconds() {
        let lines = report_lines(&[
            ("MPI init", Duration::from_micros(120_300)),
            ("digest", Duration::from_micros(100)),
        ]);
        assert_eq!(
            lines,
            [
                "collbench: timings (rank 0): 120.4 ms from the session's start to its end",
                "collbench:   MPI init     120.3 ms",
                "collbench:   digest         0.1 ms",
            ]
        );
    }
}
