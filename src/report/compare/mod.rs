//! `collbench compare`: joins the rows of two runs on the measured case and
//! gives each a verdict; `--by` compares the modes inside one run instead
//! (`by_mode`). Formats live one per file (`text`, `markdown`, `json`).
//!
//! The join key is (collective, hierarchy, transport, dtype, op, root,
//! placement, size_bytes, nranks). Rows found on one side only are listed,
//! never dropped.
//!
//! Verdict rule, for the chosen metric (busbw, algbw or time):
//! - change = (new - base) / base, in percent (n/a when base is 0 and new
//!   is not);
//! - each side's *recorded spread* is the interval of the metric over the
//!   row's times from `time_min_us` to `time_max_us` (fastest and slowest
//!   rank), widened to `time_us * (1 ± k)` where the row carries
//!   per-iteration statistics, with k the larger of `time_cv` and
//!   `(time_p99_us - time_p50_us) / time_p50_us`; bandwidths scale with
//!   1/time, so the interval is the row's own value rescaled;
//! - **within noise** when |change| is at most the threshold, or when the
//!   new value lies inside the base's spread, or the base value inside the
//!   new's spread;
//! - otherwise **regressed** when the metric got worse (lower bandwidth,
//!   longer time) and **improved** when it got better.
//!
//! Any regressed row makes the exit code 4.

pub mod by_mode;
pub mod input;
pub mod json;
pub mod markdown;
pub mod text;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Serialize;

use crate::collective::Collective;
use crate::error::{Error, exit};
use crate::record::Record;
pub use crate::record::{CaseKey, human_size};
pub use input::{Loaded, Row, load};

/// Default regression threshold in percent: below the run-to-run variation
/// of busbw on a quiet machine is noise nobody acts on; above it, a real
/// loss of bandwidth that is worth a look (NVLink or NIC degradations are
/// far larger).
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// What is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Busbw,
    Algbw,
    Time,
}

impl Metric {
    pub const ALL: [Metric; 3] = [Metric::Busbw, Metric::Algbw, Metric::Time];

    /// The CSV column each metric also goes by.
    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Metric::Busbw => &["busbw_gbps"],
            Metric::Algbw => &["algbw_gbps"],
            Metric::Time => &["time_us"],
        }
    }

    pub fn parse(s: &str) -> Option<Metric> {
        match s.trim().to_ascii_lowercase().as_str() {
            "busbw" | "busbw_gbps" => Some(Metric::Busbw),
            "algbw" | "algbw_gbps" => Some(Metric::Algbw),
            "time" | "time_us" => Some(Metric::Time),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Busbw => "busbw",
            Metric::Algbw => "algbw",
            Metric::Time => "time",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Metric::Busbw | Metric::Algbw => "GB/s",
            Metric::Time => "us",
        }
    }

    pub fn higher_is_better(self) -> bool {
        self != Metric::Time
    }

    pub fn value(self, r: &Record) -> f64 {
        match self {
            Metric::Busbw => r.busbw_gbps,
            Metric::Algbw => r.algbw_gbps,
            Metric::Time => r.time_us,
        }
    }

    /// The row's metric had its time been `time_us`: bandwidths scale with
    /// 1 / time (same size, same factor).
    fn at_time(self, r: &Record, time_us: f64) -> f64 {
        match self {
            Metric::Time => time_us,
            _ if r.time_us > 0.0 && time_us > 0.0 => self.value(r) * r.time_us / time_us,
            _ => self.value(r),
        }
    }

    /// The better of two values.
    pub fn better(self, a: f64, b: f64) -> bool {
        if self.higher_is_better() { a > b } else { a < b }
    }
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Output format of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Table,
    Markdown,
    Json,
}

impl Format {
    pub const ALL: [Format; 3] = [Format::Table, Format::Markdown, Format::Json];

    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Markdown => "markdown",
            Format::Json => "json",
        }
    }

    pub fn aliases(self) -> &'static [&'static str] {
        match self {
            Format::Table => &["text"],
            Format::Markdown => &["md"],
            Format::Json => &[],
        }
    }

    pub fn parse(s: &str) -> Option<Format> {
        match s.trim().to_ascii_lowercase().as_str() {
            "table" | "text" => Some(Format::Table),
            "markdown" | "md" => Some(Format::Markdown),
            "json" => Some(Format::Json),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct CompareOptions {
    pub metric: Metric,
    pub threshold_pct: f64,
    pub allow_different_ranks: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    WithinNoise,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// One joined row.
#[derive(Clone, Debug, Serialize)]
pub struct Compared {
    #[serde(flatten)]
    pub case: CaseKey,
    pub base_nranks: u64,
    pub new_nranks: u64,
    pub base: f64,
    pub new: f64,
    /// (new - base) / base in percent; None when base is 0 and new is not.
    pub change_pct: Option<f64>,
    /// The metric's range over each side's recorded spread.
    pub base_spread: [f64; 2],
    pub new_spread: [f64; 2],
    pub verdict: Verdict,
}

/// Per-collective counts.
#[derive(Clone, Debug, Default, Serialize)]
pub struct CollectiveSummary {
    pub collective: Collective,
    pub compared: usize,
    pub improved: usize,
    pub regressed: usize,
    pub within_noise: usize,
    pub only_in_base: usize,
    pub only_in_new: usize,
    /// Geometric mean of new / base over rows with both values above 0,
    /// as a change in percent.
    pub geomean_change_pct: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Comparison {
    pub metric: Metric,
    pub threshold_pct: f64,
    pub base_label: String,
    pub new_label: String,
    pub rows: Vec<Compared>,
    pub only_in_base: Vec<CaseKey>,
    pub only_in_new: Vec<CaseKey>,
    pub summary: Vec<CollectiveSummary>,
    /// Things the reader should know (duplicates resolved, ranks ignored).
    pub notes: Vec<String>,
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &Compared> {
        self.rows.iter().filter(|r| r.verdict == Verdict::Regressed)
    }

    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict == verdict).count()
    }

    /// 4 when anything regressed beyond the threshold, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.count(Verdict::Regressed) > 0 {
            exit::REGRESSION
        } else {
            exit::OK
        }
    }

    /// One line: what happened, for the end of every format.
    pub fn headline(&self) -> String {
        let regressed = self.count(Verdict::Regressed);
        let improved = self.count(Verdict::Improved);
        let noise = self.count(Verdict::WithinNoise);
        let mut line = if regressed > 0 {
            format!(
                "REGRESSION: {regressed} of {} rows lost more than {}% {}",
                self.rows.len(),
                trim_float(self.threshold_pct),
                self.metric
            )
        } else {
            format!(
                "OK: no row lost more than {}% {} outside the recorded spread",
                trim_float(self.threshold_pct),
                self.metric
            )
        };
        line.push_str(&format!(
            " ({improved} improved, {regressed} regressed, {noise} within noise"
        ));
        if !self.only_in_base.is_empty() || !self.only_in_new.is_empty() {
            line.push_str(&format!(
                "; {} only in base, {} only in new",
                self.only_in_base.len(),
                self.only_in_new.len()
            ));
        }
        line.push(')');
        line
    }
}

/// `collbench compare` as typed on the command line.
#[derive(Clone, Debug)]
pub struct CompareCommand {
    /// BASE and NEW, or with `by` the one CSV.
    pub files: Vec<std::path::PathBuf>,
    pub metric: Metric,
    pub threshold_pct: f64,
    pub format: Format,
    pub allow_different_ranks: bool,
    pub by: Option<by_mode::Dimension>,
    pub reference: Option<String>,
}

/// Runs `collbench compare`: the report on stdout in the chosen format;
/// a regression is an `Error::Regression` (its one line goes to stderr,
/// where a CI log shows it, the report itself may be in a file).
pub fn command(c: &CompareCommand) -> Result<u8, Error> {
    if !c.threshold_pct.is_finite() || c.threshold_pct < 0.0 {
        return Err(Error::usage(format!(
            "--threshold {}: give a percentage of 0 or more",
            c.threshold_pct
        )));
    }
    if let Some(dimension) = c.by {
        let [file] = c.files.as_slice() else {
            return Err(Error::usage(format!(
                "--by {} compares the modes inside one CSV: give exactly one file",
                dimension.name()
            )));
        };
        let loaded = load(file)?;
        let report = by_mode::compare_modes(&loaded.label, &loaded.rows, dimension, c.metric, c.reference.as_deref())?;
        crate::report::print_out(&match c.format {
            Format::Table => text::modes(&report),
            Format::Markdown => markdown::modes(&report),
            Format::Json => json::modes(&report),
        });
        return Ok(exit::OK);
    }
    let [base, new] = c.files.as_slice() else {
        return Err(Error::usage(
            "compare needs BASE and NEW (or --by hierarchy|transport with one CSV)",
        ));
    };
    let options = CompareOptions {
        metric: c.metric,
        threshold_pct: c.threshold_pct,
        allow_different_ranks: c.allow_different_ranks,
    };
    let comparison = compare(&load(base)?, &load(new)?, &options)?;
    crate::report::print_out(&match c.format {
        Format::Table => text::comparison(&comparison),
        Format::Markdown => markdown::comparison(&comparison),
        Format::Json => json::comparison(&comparison),
    });
    match comparison.count(Verdict::Regressed) {
        0 => Ok(exit::OK),
        rows => Err(Error::Regression {
            rows,
            compared: comparison.rows.len(),
            threshold_pct: c.threshold_pct,
            metric: c.metric.name(),
        }),
    }
}

/// Joins `base` and `new` and judges every row (see the module doc).
pub fn compare(base: &Loaded, new: &Loaded, opts: &CompareOptions) -> Result<Comparison, Error> {
    let ranks = |l: &Loaded| -> BTreeSet<u64> { l.rows.iter().map(|r| r.record.nranks).collect() };
    let (base_ranks, new_ranks) = (ranks(base), ranks(new));
    let both = !base_ranks.is_empty() && !new_ranks.is_empty();
    let mut notes = Vec::new();
    if both && base_ranks != new_ranks && !opts.allow_different_ranks {
        return Err(Error::usage(format!(
            "{} has {} ranks but {} has {} ranks: rows compare only at equal rank counts; \
             pass --allow-different-ranks to compare them anyway",
            base.label,
            list(&base_ranks),
            new.label,
            list(&new_ranks)
        )));
    }
    // One rank count on each side: compare across them. Otherwise rows
    // still join on nranks and unmatched counts are listed as one-sided.
    let with_ranks = !(both && base_ranks.len() == 1 && new_ranks.len() == 1 && base_ranks != new_ranks);
    if !with_ranks {
        notes.push(format!(
            "rank counts differ ({} in base, {} in new): rows joined without nranks",
            list(&base_ranks),
            list(&new_ranks)
        ));
    }
    for side in [base, new] {
        if side.duplicates > 0 {
            notes.push(format!(
                "{}: {} duplicate row{} replaced by the later measurement",
                side.label,
                side.duplicates,
                if side.duplicates == 1 { "" } else { "s" }
            ));
        }
    }

    let base_rows = index(base, with_ranks);
    let new_rows = index(new, with_ranks);

    let mut rows = Vec::new();
    let mut only_in_base = Vec::new();
    for (case, b) in &base_rows {
        match new_rows.get(case) {
            Some(n) => rows.push(judge(case.clone(), b, n, opts)),
            None => only_in_base.push(case.clone()),
        }
    }
    let only_in_new: Vec<CaseKey> = new_rows
        .keys()
        .filter(|case| !base_rows.contains_key(*case))
        .cloned()
        .collect();
    let summary = summarise(&rows, &only_in_base, &only_in_new);
    Ok(Comparison {
        metric: opts.metric,
        threshold_pct: opts.threshold_pct,
        base_label: base.label.clone(),
        new_label: new.label.clone(),
        rows,
        only_in_base,
        only_in_new,
        summary,
        notes,
    })
}

/// Rows by case, for the join, in report order.
fn index(l: &Loaded, with_ranks: bool) -> BTreeMap<CaseKey, &Row> {
    l.rows.iter().map(|r| (CaseKey::of(&r.record, with_ranks), r)).collect()
}

fn judge(case: CaseKey, base: &Row, new: &Row, opts: &CompareOptions) -> Compared {
    let metric = opts.metric;
    let (b, n) = (metric.value(&base.record), metric.value(&new.record));
    let change_pct = if b != 0.0 {
        Some((n - b) / b * 100.0)
    } else if n == 0.0 {
        Some(0.0)
    } else {
        None
    };
    let base_spread = spread(metric, base);
    let new_spread = spread(metric, new);
    let inside = |v: f64, s: [f64; 2]| s[0] <= v && v <= s[1];
    let beyond = change_pct.is_some_and(|c| c.abs() > opts.threshold_pct);
    let verdict = if !beyond || inside(n, base_spread) || inside(b, new_spread) {
        Verdict::WithinNoise
    } else if metric.better(n, b) {
        Verdict::Improved
    } else {
        Verdict::Regressed
    };
    Compared {
        case,
        base_nranks: base.record.nranks,
        new_nranks: new.record.nranks,
        base: b,
        new: n,
        change_pct,
        base_spread,
        new_spread,
        verdict,
    }
}

/// The metric over the row's recorded time spread (see the module doc).
fn spread(metric: Metric, row: &Row) -> [f64; 2] {
    let r = &row.record;
    let t = r.time_us;
    let usable = |v: f64| v.is_finite() && v > 0.0;
    let mut lo = if usable(r.time_min_us) { r.time_min_us.min(t) } else { t };
    let mut hi = if usable(r.time_max_us) { r.time_max_us.max(t) } else { t };
    let from_percentiles = match (row.stats.p50_us, row.stats.p99_us) {
        (Some(p50), Some(p99)) if usable(p50) && p99.is_finite() => Some((p99 - p50).abs() / p50),
        _ => None,
    };
    let k = [row.stats.cv.filter(|c| c.is_finite()).map(f64::abs), from_percentiles]
        .into_iter()
        .flatten()
        .fold(None, |acc: Option<f64>, v| Some(acc.map_or(v, |a| a.max(v))));
    if let Some(k) = k {
        if usable(t * (1.0 - k)) {
            lo = lo.min(t * (1.0 - k));
        }
        hi = hi.max(t * (1.0 + k));
    }
    let (a, b) = (metric.at_time(r, lo), metric.at_time(r, hi));
    [a.min(b), a.max(b)]
}

fn summarise(rows: &[Compared], only_base: &[CaseKey], only_new: &[CaseKey]) -> Vec<CollectiveSummary> {
    let mut table: BTreeMap<Collective, (CollectiveSummary, Vec<f64>)> = BTreeMap::new();
    fn get(
        table: &mut BTreeMap<Collective, (CollectiveSummary, Vec<f64>)>,
        collective: Collective,
    ) -> &mut (CollectiveSummary, Vec<f64>) {
        table.entry(collective).or_insert_with(|| {
            (
                CollectiveSummary {
                    collective,
                    ..Default::default()
                },
                Vec::new(),
            )
        })
    }
    for r in rows {
        let (s, logs) = get(&mut table, r.case.collective);
        s.compared += 1;
        match r.verdict {
            Verdict::Improved => s.improved += 1,
            Verdict::Regressed => s.regressed += 1,
            Verdict::WithinNoise => s.within_noise += 1,
        }
        if r.base > 0.0 && r.new > 0.0 {
            logs.push((r.new / r.base).ln());
        }
    }
    for c in only_base {
        get(&mut table, c.collective).0.only_in_base += 1;
    }
    for c in only_new {
        get(&mut table, c.collective).0.only_in_new += 1;
    }
    table
        .into_values()
        .map(|(mut s, logs)| {
            if !logs.is_empty() {
                let mean = logs.iter().sum::<f64>() / logs.len() as f64;
                s.geomean_change_pct = Some((mean.exp() - 1.0) * 100.0);
            }
            s
        })
        .collect()
}

fn list(set: &BTreeSet<u64>) -> String {
    set.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// `5` rather than `5.0`, `2.5` as is.
pub(crate) fn trim_float(v: f64) -> String {
    let s = format!("{v}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// A metric value with precision that suits its size.
pub(crate) fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    }
}

pub(crate) fn fmt_change(c: Option<f64>) -> String {
    match c {
        Some(c) => format!("{c:+.1}%"),
        None => "n/a".into(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A record with the given busbw at 2 ranks (all_reduce: factor 1).
    pub fn record(collective: &str, size: u64, time_us: f64, spread: f64) -> Record {
        let algbw = size as f64 / (time_us * 1e-6) / 1e9;
        let collective = Collective::parse(collective).unwrap();
        let all_reduce = collective == Collective::AllReduce;
        Record {
            timestamp: "2026-01-01T00:00:00Z".into(),
            collective,
            dtype: crate::types::DType::Float,
            op: all_reduce.then_some(crate::types::ReduceOp::Sum),
            root: None,
            placement: crate::types::Placement::OutOfPlace,
            size_bytes: size,
            count: size / 4,
            time_us,
            time_min_us: time_us * (1.0 - spread),
            time_max_us: time_us * (1.0 + spread),
            algbw_gbps: algbw,
            busbw_gbps: algbw * if all_reduce { 1.0 } else { 0.5 },
            wrong: Some(0),
            ..Record {
                phase_intra1_us: None,
                phase_intra2_us: None,
                cycle: None,
                ..crate::record::tests::sample()
            }
        }
    }

    pub fn loaded(label: &str, records: Vec<Record>) -> Loaded {
        Loaded {
            label: label.into(),
            rows: records
                .into_iter()
                .map(|record| Row {
                    record,
                    stats: Default::default(),
                    file: PathBuf::from(label),
                })
                .collect(),
            duplicates: 0,
        }
    }

    fn opts() -> CompareOptions {
        CompareOptions {
            metric: Metric::Busbw,
            threshold_pct: 5.0,
            allow_different_ranks: false,
        }
    }

    #[test]
    fn a_20_percent_busbw_drop_outside_the_spread_is_a_regression() {
        let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.01)]);
        let new = loaded("n", vec![record("all_reduce", 1 << 20, 125.0, 0.01)]);
        let c = compare(&base, &new, &opts()).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Regressed);
        assert!((c.rows[0].change_pct.unwrap() + 20.0).abs() < 1e-9);
        assert_eq!(c.exit_code(), 4);
        assert!(c.headline().starts_with("REGRESSION: 1 of 1 rows"));
    }

    #[test]
    fn a_change_inside_either_sides_spread_is_noise() {
        // 20% slower, but the base's slowest rank was 30% slower than its mean
        let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.3)]);
        let new = loaded("n", vec![record("all_reduce", 1 << 20, 120.0, 0.01)]);
        let c = compare(&base, &new, &opts()).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::WithinNoise);
        // and the new side's spread counts the same way
        let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.0)]);
        let new = loaded("n", vec![record("all_reduce", 1 << 20, 120.0, 0.2)]);
        assert_eq!(compare(&base, &new, &opts()).unwrap().exit_code(), 0);
    }

    #[test]
    fn per_iteration_statistics_widen_the_spread() {
        let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.0)]);
        let mut new = loaded("n", vec![record("all_reduce", 1 << 20, 120.0, 0.0)]);
        assert_eq!(
            compare(&base, &new, &opts()).unwrap().rows[0].verdict,
            Verdict::Regressed
        );
        new.rows[0].stats.cv = Some(0.25);
        assert_eq!(
            compare(&base, &new, &opts()).unwrap().rows[0].verdict,
            Verdict::WithinNoise
        );
        new.rows[0].stats = IterStatsForTest::p(118.0, 150.0);
        assert_eq!(
            compare(&base, &new, &opts()).unwrap().rows[0].verdict,
            Verdict::WithinNoise
        );
    }

    struct IterStatsForTest;
    impl IterStatsForTest {
        fn p(p50: f64, p99: f64) -> input::IterStats {
            input::IterStats {
                p50_us: Some(p50),
                p99_us: Some(p99),
                cv: None,
            }
        }
    }

    #[test]
    fn faster_beyond_the_threshold_is_an_improvement_and_time_inverts_the_sign() {
        let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.0)]);
        let new = loaded("n", vec![record("all_reduce", 1 << 20, 80.0, 0.0)]);
        let c = compare(&base, &new, &opts()).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Improved);
        let time = CompareOptions {
            metric: Metric::Time,
            ..opts()
        };
        let c = compare(&base, &new, &time).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Improved);
        assert!((c.rows[0].change_pct.unwrap() + 20.0).abs() < 1e-9);
        let c = compare(&new, &base, &time).unwrap();
        assert_eq!(c.rows[0].verdict, Verdict::Regressed);
    }

    #[test]
    fn rows_on_one_side_are_listed_and_summarised() {
        let base = loaded(
            "b",
            vec![record("all_reduce", 8, 10.0, 0.0), record("all_gather", 8, 10.0, 0.0)],
        );
        let new = loaded(
            "n",
            vec![record("all_reduce", 8, 10.0, 0.0), record("all_reduce", 16, 10.0, 0.0)],
        );
        let c = compare(&base, &new, &opts()).unwrap();
        assert_eq!(c.rows.len(), 1);
        assert_eq!(c.only_in_base[0].collective, Collective::AllGather);
        assert_eq!(c.only_in_new[0].size_bytes, 16);
        let ar = &c.summary[0];
        assert_eq!(
            (ar.collective, ar.compared, ar.only_in_new),
            (Collective::AllReduce, 1, 1)
        );
        assert_eq!(c.summary[1].only_in_base, 1);
        assert_eq!(c.exit_code(), 0);
    }

    #[test]
    fn different_rank_counts_need_the_flag_and_then_join_without_nranks() {
        let base = loaded("b", vec![record("all_reduce", 8, 10.0, 0.0)]);
        let mut four = record("all_reduce", 8, 10.0, 0.0);
        four.nranks = 4;
        let new = loaded("n", vec![four]);
        let err = compare(&base, &new, &opts()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("--allow-different-ranks"), "{err}");
        let allow = CompareOptions {
            allow_different_ranks: true,
            ..opts()
        };
        let c = compare(&base, &new, &allow).unwrap();
        assert_eq!(c.rows.len(), 1);
        assert_eq!((c.rows[0].base_nranks, c.rows[0].new_nranks), (2, 4));
        assert!(c.notes[0].contains("without nranks"));
    }

    #[test]
    fn zero_bandwidth_on_both_sides_is_no_change() {
        let mut r = record("all_gather", 8, 10.0, 0.0);
        r.busbw_gbps = 0.0;
        let c = compare(&loaded("b", vec![r.clone()]), &loaded("n", vec![r]), &opts()).unwrap();
        assert_eq!(c.rows[0].change_pct, Some(0.0));
        assert_eq!(c.rows[0].verdict, Verdict::WithinNoise);
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(8), "8 B");
        assert_eq!(human_size(1024), "1 KiB");
        assert_eq!(human_size(3 << 20), "3 MiB");
        assert_eq!(human_size(1536), "1536 B");
    }
}
