//! Progress on stderr, drawn so that it can never destroy the table.
//!
//! A bar (indicatif) redraws itself by moving the cursor up and clearing
//! lines. That is safe only when the bar and the table reach the terminal
//! from this one process, which suspends the bar around each table write:
//! so the bar is drawn only when stderr is a terminal whose width is known
//! and no launcher started this process. Under `mpirun` or `srun` the
//! table (stdout) and the bar (stderr) are separate streams that the
//! launcher forwards each at its own pace, so a redraw lands after table
//! rows that it then erases; and a stderr that is not a terminal has no
//! width (indicatif assumes 80 columns). There, and whenever stderr is not
//! a terminal, `--progress` prints plain lines instead, which only ever
//! append: one each time another tenth of the points is done, and at least
//! every 30 s, with the points done, the time elapsed and the time left
//! (`Always`). Without `--progress` (`Auto`) nothing is printed there.
//! `--no-progress` (`Never`) prints nothing anywhere.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::record::Record;
use crate::types::ProgressMode;

/// Longest silence between two progress lines.
const LINE_EVERY: Duration = Duration::from_secs(30);

pub struct Progress {
    kind: Kind,
}

/// The bar's template for `unit`s (`points`, `steps`).
fn bar_template(unit: &str) -> String {
    format!("{{spinner}} [{{elapsed_precise}}] {{bar:30}} {{pos}}/{{len}} {unit}  {{msg}}")
}

enum Kind {
    Hidden,
    Bar(ProgressBar),
    Lines(Lines),
}

/// How progress is shown, from the mode and what stderr is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drawn {
    Hidden,
    Bar,
    Lines,
}

/// The bar only on a terminal of known width in a process no launcher
/// started; else lines when asked for (see the module doc).
pub fn choose(mode: ProgressMode, terminal_width: Option<u16>, launched: bool) -> Drawn {
    let bar_is_safe = terminal_width.is_some_and(|w| w > 0) && !launched;
    match mode {
        ProgressMode::Never => Drawn::Hidden,
        _ if bar_is_safe => Drawn::Bar,
        ProgressMode::Always => Drawn::Lines,
        ProgressMode::Auto => Drawn::Hidden,
    }
}

/// stderr's width when it is a terminal that reports one.
fn stderr_width() -> Option<u16> {
    let term = console::Term::stderr();
    if !term.is_term() {
        return None;
    }
    term.size_checked().map(|(_rows, cols)| cols)
}

impl Progress {
    /// `total`: the points to come, `None` when endless; `launched`: a
    /// launcher (mpirun, srun) started this process; `who` starts each
    /// plain line (`collbench`, `collbench suite`).
    pub fn new(mode: ProgressMode, total: Option<u64>, launched: bool, who: &'static str) -> Progress {
        let kind = match choose(mode, stderr_width(), launched) {
            Drawn::Hidden => Kind::Hidden,
            Drawn::Lines => Kind::Lines(Lines::new(total, who)),
            Drawn::Bar => {
                let bar = ProgressBar::with_draw_target(total, ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(&bar_template("points")) {
                    bar.set_style(style);
                }
                bar.enable_steady_tick(Duration::from_millis(200));
                Kind::Bar(bar)
            }
        };
        Progress { kind }
    }

    /// Counts `unit`s (`steps`) instead of points.
    pub fn counting(mut self, unit: &'static str) -> Progress {
        match &mut self.kind {
            Kind::Hidden => {}
            Kind::Bar(bar) => {
                if let Ok(style) = ProgressStyle::with_template(&bar_template(unit)) {
                    bar.set_style(style);
                }
            }
            Kind::Lines(lines) => lines.unit = unit,
        }
        self
    }

    /// How progress is shown.
    pub fn drawn(&self) -> Drawn {
        match self.kind {
            Kind::Hidden => Drawn::Hidden,
            Kind::Bar(_) => Drawn::Bar,
            Kind::Lines(_) => Drawn::Lines,
        }
    }

    /// The bar, for sinks that print to the terminal and must suspend it
    /// around each write; `None` when no bar is drawn.
    pub fn handle(&self) -> Option<ProgressBar> {
        match &self.kind {
            Kind::Bar(bar) => Some(bar.clone()),
            _ => None,
        }
    }

    /// One more point measured.
    pub fn advance(&mut self, record: &Record) {
        let what = format!("{} {} {} B", record.collective, record.dtype, record.size_bytes);
        match &mut self.kind {
            Kind::Hidden => {}
            Kind::Bar(bar) => {
                bar.set_message(what);
                bar.inc(1);
            }
            Kind::Lines(lines) => {
                let done = lines.done + 1;
                lines.update(done, Some(&what));
            }
        }
    }

    /// `done` of `total` points so far; `what` is running.
    pub fn set(&mut self, done: u64, total: Option<u64>, what: &str) {
        match &mut self.kind {
            Kind::Hidden => {}
            Kind::Bar(bar) => {
                bar.set_length(total.unwrap_or(0));
                bar.set_position(done);
                bar.set_message(what.to_string());
            }
            Kind::Lines(lines) => {
                lines.total = total;
                lines.update(done, Some(what));
            }
        }
    }

    /// Runs `f` (which prints to the terminal) with the bar out of the way.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.kind {
            Kind::Bar(bar) => bar.suspend(f),
            _ => f(),
        }
    }

    pub fn finish(&mut self) {
        if let Kind::Bar(bar) = &self.kind {
            bar.finish_and_clear();
        }
        self.kind = Kind::Hidden;
    }
}

/// Plain progress lines: they only ever append.
struct Lines {
    who: &'static str,
    /// What is counted: `points`, `steps`.
    unit: &'static str,
    started: Instant,
    total: Option<u64>,
    done: u64,
    /// Tenths of the total done at the last line.
    tenths: u64,
    last_line: Instant,
}

impl Lines {
    fn new(total: Option<u64>, who: &'static str) -> Lines {
        let now = Instant::now();
        Lines {
            who,
            unit: "points",
            started: now,
            total,
            done: 0,
            tenths: 0,
            last_line: now,
        }
    }

    fn update(&mut self, done: u64, what: Option<&str>) {
        self.done = done;
        let tenths = match self.total {
            Some(total) if total > 0 => done.min(total) * 10 / total,
            _ => 0,
        };
        let now = Instant::now();
        if tenths > self.tenths || now.duration_since(self.last_line) >= LINE_EVERY {
            self.tenths = tenths.max(self.tenths);
            self.last_line = now;
            let line = line_text(self.who, done, self.total, now.duration_since(self.started), what);
            crate::error::say(&line.replacen(" points", &format!(" {}", self.unit), 1));
        }
    }
}

/// `collbench: progress 34/68 points (50%), 00:00:12 elapsed, about
/// 00:00:12 left; last all_gather float 65536 B`.
pub fn line_text(who: &str, done: u64, total: Option<u64>, elapsed: Duration, what: Option<&str>) -> String {
    let mut s = match total {
        Some(total) if total > 0 => {
            let left = if done == 0 {
                "time left unknown".to_string()
            } else {
                let per_point = elapsed.as_secs_f64() / done as f64;
                let left = Duration::from_secs_f64(per_point * total.saturating_sub(done) as f64);
                format!("about {} left", clock(left))
            };
            format!(
                "{who}: progress {done}/{total} points ({}%), {} elapsed, {left}",
                done.min(total) * 100 / total,
                clock(elapsed)
            )
        }
        _ => format!("{who}: progress {done} points, {} elapsed", clock(elapsed)),
    };
    if let Some(what) = what.filter(|w| !w.is_empty()) {
        s += &format!("; last {what}");
    }
    s
}

/// `01:02:03`, as the bar shows elapsed time.
fn clock(d: Duration) -> String {
    let s = d.as_secs();
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_is_drawn_only_on_a_terminal_of_known_width_outside_a_launcher() {
        use ProgressMode::*;
        assert_eq!(choose(Auto, Some(160), false), Drawn::Bar);
        assert_eq!(choose(Always, Some(160), false), Drawn::Bar);
        // under mpirun stderr may even be a terminal: still never the bar
        assert_eq!(choose(Always, Some(160), true), Drawn::Lines);
        assert_eq!(choose(Always, None, false), Drawn::Lines);
        assert_eq!(choose(Always, Some(0), false), Drawn::Lines);
        assert_eq!(choose(Auto, None, true), Drawn::Hidden);
        assert_eq!(choose(Auto, Some(160), true), Drawn::Hidden);
        assert_eq!(choose(Never, Some(160), false), Drawn::Hidden);
    }

    #[test]
    fn a_progress_line_says_points_done_elapsed_and_left() {
        let line = line_text(
            "collbench",
            34,
            Some(68),
            Duration::from_secs(12),
            Some("all_gather float 65536 B"),
        );
        assert_eq!(
            line,
            "collbench: progress 34/68 points (50%), 00:00:12 elapsed, about 00:00:12 left; last all_gather float 65536 B"
        );
        assert_eq!(
            line_text("collbench", 7, None, Duration::from_secs(3725), None),
            "collbench: progress 7 points, 01:02:05 elapsed"
        );
        assert!(line_text("x", 0, Some(10), Duration::ZERO, None).ends_with("time left unknown"));
    }
}
