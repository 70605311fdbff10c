//! The JSON format of `compare`: every joined row with both medians, the
//! change, its interval, the p-value, the test, each side's statistics
//! (n, launches, median, quartiles, MAD, samples) and the verdict; the
//! one-sided cases; the summary by collective and overall; warnings,
//! notes and the exit code. Versioned by `schema_version`.

use serde::Serialize;

use super::by_mode::ModeReport;
use super::{CaseKey, Compared, Comparison, Summary, Verdict};
use crate::record::SCHEMA_VERSION;

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    kind: &'static str,
    metric: &'static str,
    unit: &'static str,
    threshold_pct: f64,
    alpha: f64,
    base: &'a str,
    new: &'a str,
    base_launches: usize,
    new_launches: usize,
    headline: String,
    exit_code: u8,
    improved: usize,
    regressed: usize,
    within_noise: usize,
    too_noisy: usize,
    unproven: usize,
    within_launch: bool,
    missing_fails: bool,
    rows: &'a [Compared],
    only_in_base: &'a [CaseKey],
    only_in_new: &'a [CaseKey],
    summary: &'a [Summary],
    overall: &'a Summary,
    warnings: &'a [String],
    notes: &'a [String],
}

pub fn comparison(c: &Comparison) -> String {
    let doc = Document {
        schema_version: SCHEMA_VERSION,
        kind: "compare",
        metric: c.metric.name(),
        unit: c.metric.unit(),
        threshold_pct: c.threshold_pct,
        alpha: c.alpha,
        base: &c.base_label,
        new: &c.new_label,
        base_launches: c.base_launches,
        new_launches: c.new_launches,
        headline: c.headline(),
        exit_code: c.exit_code(),
        improved: c.count(Verdict::Improved),
        regressed: c.count(Verdict::Regressed),
        within_noise: c.count(Verdict::WithinNoise),
        too_noisy: c.count(Verdict::TooNoisy),
        unproven: c.count(Verdict::Unproven),
        within_launch: c.within_launch,
        missing_fails: c.missing_fails(),
        rows: &c.rows,
        only_in_base: &c.only_in_base,
        only_in_new: &c.only_in_new,
        summary: &c.summary,
        overall: &c.overall,
        warnings: &c.warnings,
        notes: &c.notes,
    };
    to_string(&doc)
}

#[derive(Serialize)]
struct ModesDocument<'a> {
    schema_version: u32,
    kind: &'static str,
    unit: &'static str,
    #[serde(flatten)]
    report: &'a ModeReport,
}

pub fn modes(r: &ModeReport) -> String {
    to_string(&ModesDocument {
        schema_version: SCHEMA_VERSION,
        kind: "modes",
        unit: r.metric.unit(),
        report: r,
    })
}

fn to_string(doc: &impl Serialize) -> String {
    // Serialising plain structs of strings and numbers cannot fail; NaN
    // and infinities become null.
    let mut s = serde_json::to_string_pretty(doc).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
