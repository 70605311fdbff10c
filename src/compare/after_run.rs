//! After a run or a suite, the modes of the CSV just written side by side
//! (`compare --by`'s view, behind '#').

use std::path::Path;

use super::{by_mode, text};
use crate::error::say;
use crate::record::Record;
use crate::record::read::{Row, read_file};
use crate::report::print_out;
use crate::types::{Dimension, Metric};

/// After a run or a suite: the modes of the CSV just written side by
/// side, busbw, as `collbench compare --by DIMENSION FILE` shows them
/// (speedups and crossovers only where the samples show them, at
/// compare's default threshold and alpha)
/// (`keep` picks the rows; `label` names the file, `who` the warning's
/// speaker). Every line starts with '#', so that the run's table keeps its
/// rule: lines without it are data rows. A CSV that gives no comparison is
/// one warning, never an error: the run itself succeeded.
pub fn print_after_run(
    csv: &Path,
    (label, who): (&str, &str),
    keep: impl Fn(&Record) -> bool,
    dimension: Dimension,
    reference: Option<&str>,
) {
    let report = read_file(csv).and_then(|rows| {
        let rows: Vec<Row> = rows.into_iter().filter(|r| keep(&r.record)).collect();
        let judged = by_mode::ModeOptions {
            metric: Metric::Busbw,
            threshold_pct: super::DEFAULT_THRESHOLD_PCT,
            alpha: super::DEFAULT_ALPHA,
        };
        by_mode::compare_modes(label, &rows, dimension, &judged, reference)
    });
    match report {
        Ok(report) => {
            let lines: String = text::modes(&report).lines().map(|l| format!("# {l}\n")).collect();
            print_out(&lines);
        }
        Err(e) => say(&format!("{who}: warning: no {} comparison: {e}", dimension.name())),
    }
}
