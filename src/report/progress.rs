//! The progress bar on rank 0's stderr (indicatif). Hidden unless stderr is
//! a terminal, so logs and pipes stay clean; `--progress` draws it anyway
//! (under mpirun, stderr is a pipe even when the launcher's is a terminal),
//! `--no-progress` never draws it.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{ProgressMode, Record};

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// `points`: how many the run will measure, `None` when endless.
    pub fn new(mode: ProgressMode, points: Option<u64>) -> Progress {
        let target = match mode {
            ProgressMode::Auto => ProgressDrawTarget::stderr(),
            ProgressMode::Always => ProgressDrawTarget::term_like(Box::new(console::Term::stderr())),
            ProgressMode::Never => ProgressDrawTarget::hidden(),
        };
        let bar = ProgressBar::with_draw_target(points, target);
        if let Ok(style) =
            ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} points  {msg}")
        {
            bar.set_style(style);
        }
        if !bar.is_hidden() {
            bar.enable_steady_tick(Duration::from_millis(200));
        }
        Progress { bar }
    }

    /// A handle that sinks printing to the terminal use to suspend the bar.
    pub fn handle(&self) -> ProgressBar {
        self.bar.clone()
    }

    pub fn advance(&self, record: &Record) {
        self.bar.set_message(format!(
            "{} {} {} B",
            record.collective, record.dtype, record.size_bytes
        ));
        self.bar.inc(1);
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
