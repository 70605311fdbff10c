//! `collbench compare`: joins the rows of two runs on the measured case and
//! gives each case a verdict from the samples of both sides; `--by`
//! compares the modes inside one run instead (`by_mode`). The noise model
//! is `noise` (statistics in `stats`), the method check `method`; formats
//! live one per file (`text`, `markdown`, `json`).
//!
//! The join key is `record::CaseKey` (collective, hierarchy, transport,
//! dtype, op, root, placement, size_bytes, nranks). Every row of a case is
//! a sample of it: the cycles of one launch, and the launches of a folder.
//! Cases on one side only are listed, never dropped: cases only in the
//! base fail the comparison (exit 4) unless `--allow-missing`; cases only
//! in the new run are listed.
//!
//! Before judging, the sides must have been measured the same way
//! (`method`): a difference in a method column refuses (exit 2) unless
//! `--allow-method-change`; identity columns only warn. Warnings go to
//! stderr, one line each, and into the markdown and JSON reports.

pub mod by_mode;
pub mod json;
pub mod markdown;
pub mod method;
pub mod noise;
pub mod text;
pub mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;

use crate::collective::Collective;
use crate::error::{Error, exit, say};
use crate::record::read::{Loaded, Row, load};
use crate::record::{CaseKey, human_size};
use crate::types::{Dimension, Format, Metric};
use noise::{Fallback, Judgement, Test};

/// Default regression threshold in percent: below the launch-to-launch
/// variation of busbw on a quiet machine is noise nobody acts on; above
/// it, a real loss of bandwidth that is worth a look (NVLink or NIC
/// degradations are far larger).
pub const DEFAULT_THRESHOLD_PCT: f64 = 5.0;

/// Default significance level of the tests (Google Benchmark's compare.py
/// and criterion use 0.05 as well).
pub const DEFAULT_ALPHA: f64 = 0.05;

impl Format {
    fn render(self, c: &Comparison) -> String {
        match self {
            Format::Table => text::comparison(c),
            Format::Markdown => markdown::comparison(c),
            Format::Json => json::comparison(c),
        }
    }
}

#[derive(Clone, Debug)]
pub struct CompareOptions {
    pub metric: Metric,
    pub threshold_pct: f64,
    /// Significance level of the tests (and 1 - the intervals' level).
    pub alpha: f64,
    pub allow_different_ranks: bool,
    /// Compare sides whose method columns differ (warn instead of refusing).
    pub allow_method_change: bool,
    /// Cases only in the base do not fail the comparison.
    pub allow_missing: bool,
}

impl Default for CompareOptions {
    fn default() -> CompareOptions {
        CompareOptions {
            metric: Metric::Busbw,
            threshold_pct: DEFAULT_THRESHOLD_PCT,
            alpha: DEFAULT_ALPHA,
            allow_different_ranks: false,
            allow_method_change: false,
            allow_missing: false,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Improved,
    Regressed,
    WithinNoise,
    TooNoisy,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::WithinNoise => "within noise",
            Verdict::TooNoisy => "too noisy",
        }
    }
}

/// One joined case.
#[derive(Clone, Debug, Serialize)]
pub struct Compared {
    #[serde(flatten)]
    pub case: CaseKey,
    pub base_nranks: u64,
    pub new_nranks: u64,
    /// The median of each side's samples.
    pub base: f64,
    pub new: f64,
    #[serde(flatten)]
    pub judgement: Judgement,
}

impl Compared {
    pub fn verdict(&self) -> Verdict {
        self.judgement.verdict
    }

    pub fn change_pct(&self) -> Option<f64> {
        self.judgement.change_pct
    }
}

/// Counts per collective (or over every row: `collective` None).
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub collective: Option<Collective>,
    pub compared: usize,
    pub improved: usize,
    pub regressed: usize,
    pub within_noise: usize,
    pub too_noisy: usize,
    pub only_in_base: usize,
    pub only_in_new: usize,
    /// Geometric mean of new / base medians over rows with both above 0,
    /// as a change in percent.
    pub geomean_change_pct: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct Comparison {
    pub metric: Metric,
    pub threshold_pct: f64,
    pub alpha: f64,
    pub allow_missing: bool,
    pub base_label: String,
    pub new_label: String,
    /// Distinct launches (`run_id`) and rows on each side.
    pub base_launches: usize,
    pub new_launches: usize,
    pub rows: Vec<Compared>,
    pub only_in_base: Vec<CaseKey>,
    pub only_in_new: Vec<CaseKey>,
    pub summary: Vec<Summary>,
    pub overall: Summary,
    /// How the rows were judged (tests used, fallbacks, joins).
    pub notes: Vec<String>,
    /// What the reader must know before trusting the verdicts (method or
    /// version differences, unknown methods): also printed on stderr.
    pub warnings: Vec<String>,
}

impl Comparison {
    pub fn regressions(&self) -> impl Iterator<Item = &Compared> {
        self.rows.iter().filter(|r| r.verdict() == Verdict::Regressed)
    }

    pub fn count(&self, verdict: Verdict) -> usize {
        self.rows.iter().filter(|r| r.verdict() == verdict).count()
    }

    /// Cases of the base missing from the new run fail the comparison.
    pub fn missing_fails(&self) -> bool {
        !self.only_in_base.is_empty() && !self.allow_missing
    }

    /// 4 when a row regressed or a base case is missing, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.failure().is_some() {
            exit::REGRESSION
        } else {
            exit::OK
        }
    }

    /// The one stderr line of a failed comparison (after `collbench: `).
    pub fn failure(&self) -> Option<String> {
        let regressed = self.count(Verdict::Regressed);
        let mut parts = Vec::new();
        if regressed > 0 {
            parts.push(format!(
                "{regressed} of {} rows lost more than {}% {}",
                self.rows.len(),
                trim_float(self.threshold_pct),
                self.metric
            ));
        }
        if self.missing_fails() {
            parts.push(format!(
                "{} of the base missing from the new run (--allow-missing accepts that)",
                rows_of(self.only_in_base.len())
            ));
        }
        (!parts.is_empty()).then(|| format!("regression: {}", parts.join("; ")))
    }

    /// One line: what happened, for the end of every format.
    pub fn headline(&self) -> String {
        let regressed = self.count(Verdict::Regressed);
        let noisy = self.count(Verdict::TooNoisy);
        let threshold = trim_float(self.threshold_pct);
        let mut line = if regressed > 0 {
            format!(
                "REGRESSION: {regressed} of {} rows lost more than {threshold}% {}",
                self.rows.len(),
                self.metric
            )
        } else if self.missing_fails() {
            format!(
                "MISSING: {} of the base not in the new run",
                rows_of(self.only_in_base.len())
            )
        } else {
            format!("OK: no row lost more than {threshold}% {}", self.metric)
        };
        if regressed > 0 && self.missing_fails() {
            line.push_str(&format!(
                ", and {} of the base not in the new run",
                rows_of(self.only_in_base.len())
            ));
        }
        if noisy > 0 {
            line.push_str(&format!("; {noisy} of {} rows too noisy to judge", self.rows.len()));
        }
        line.push_str(&format!(
            " ({} improved, {regressed} regressed, {} within noise, {noisy} too noisy",
            self.count(Verdict::Improved),
            self.count(Verdict::WithinNoise),
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
    pub files: Vec<PathBuf>,
    pub options: CompareOptions,
    pub format: Format,
    pub by: Option<Dimension>,
    pub reference: Option<String>,
    /// Also write the markdown (JSON) report to this file.
    pub export_markdown: Option<PathBuf>,
    pub export_json: Option<PathBuf>,
}

/// Runs `collbench compare`: the report on stdout in the chosen format
/// (and in the export files); warnings and a failure's one line go to
/// stderr, where a CI log shows them whatever the format.
pub fn command(c: &CompareCommand) -> Result<u8, Error> {
    let o = &c.options;
    if !o.threshold_pct.is_finite() || o.threshold_pct < 0.0 {
        return Err(Error::usage(format!(
            "--threshold {}: give a percentage of 0 or more",
            o.threshold_pct
        )));
    }
    if !(o.alpha > 0.0 && o.alpha < 1.0) {
        return Err(Error::usage(format!(
            "--alpha {}: give a significance level between 0 and 1, e.g. 0.05",
            o.alpha
        )));
    }
    if let Some(dimension) = c.by {
        let [file] = c.files.as_slice() else {
            return Err(Error::usage(format!(
                "--by {} compares the modes inside one CSV: give exactly one file",
                dimension.name()
            )));
        };
        if crate::record::workload::is_workload_csv(file) {
            return Err(Error::usage(format!(
                "{} is a workload CSV: its side-by-side view is in the workload's own output; --by compares the modes of a run CSV",
                file.display()
            )));
        }
        let loaded = load(file)?;
        let report = by_mode::compare_modes(&loaded.label, &loaded.rows, dimension, o.metric, c.reference.as_deref())?;
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
    if workload::applies(base, new)? {
        if c.format != Format::Table || c.export_markdown.is_some() || c.export_json.is_some() {
            return Err(Error::usage(
                "workload CSVs compare as a table only: drop --format, --export-markdown and --export-json",
            ));
        }
        let (text, code) = workload::compare(base, new, o)?;
        crate::report::print_out(&text);
        if code != exit::OK {
            say("collbench: a workload configuration regressed or is missing from NEW");
        }
        return Ok(code);
    }
    let comparison = compare(&load(base)?, &load(new)?, o)?;
    for warning in &comparison.warnings {
        say(&format!("collbench: warning: {warning}"));
    }
    for (path, format) in [(&c.export_markdown, Format::Markdown), (&c.export_json, Format::Json)] {
        if let Some(path) = path {
            std::fs::write(path, format.render(&comparison))
                .map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))?;
        }
    }
    crate::report::print_out(&c.format.render(&comparison));
    match comparison.failure() {
        None => Ok(exit::OK),
        Some(line) => {
            say(&format!("collbench: {line}"));
            Ok(exit::REGRESSION)
        }
    }
}

/// Joins `base` and `new`, checks how they were measured and judges every
/// case (see the module doc).
pub fn compare(base: &Loaded, new: &Loaded, opts: &CompareOptions) -> Result<Comparison, Error> {
    let mut notes = Vec::new();
    let with_ranks = rank_join(base, new, opts, &mut notes)?;
    let base_rows = index(base, with_ranks);
    let new_rows = index(new, with_ranks);
    let joined: Vec<(&[&Row], &[&Row])> = base_rows
        .iter()
        .filter_map(|(case, b)| new_rows.get(case).map(|n| (b.as_slice(), n.as_slice())))
        .collect();
    let warnings = method_warnings(base, new, &joined, opts)?;

    let params = noise::Params {
        metric: opts.metric,
        threshold_pct: opts.threshold_pct,
        alpha: opts.alpha,
    };
    let mut rows = Vec::new();
    let mut only_in_base = Vec::new();
    for (case, b) in &base_rows {
        match new_rows.get(case) {
            Some(n) => rows.push(judge(case.clone(), b, n, &params)),
            None => only_in_base.push(case.clone()),
        }
    }
    let only_in_new: Vec<CaseKey> = new_rows
        .keys()
        .filter(|case| !base_rows.contains_key(*case))
        .cloned()
        .collect();
    notes.extend(test_notes(&rows));
    let summary = summarise(&rows, &only_in_base, &only_in_new);
    let overall = total(&summary, &rows);
    Ok(Comparison {
        metric: opts.metric,
        threshold_pct: opts.threshold_pct,
        alpha: opts.alpha,
        allow_missing: opts.allow_missing,
        base_label: base.label.clone(),
        new_label: new.label.clone(),
        base_launches: launches(&base.rows),
        new_launches: launches(&new.rows),
        rows,
        only_in_base,
        only_in_new,
        summary,
        overall,
        notes,
        warnings,
    })
}

/// Whether rows join with their rank count: refuses different rank counts
/// unless allowed; with one count on each side, joins across them.
fn rank_join(base: &Loaded, new: &Loaded, opts: &CompareOptions, notes: &mut Vec<String>) -> Result<bool, Error> {
    let ranks = |l: &Loaded| -> BTreeSet<u64> { l.rows.iter().map(|r| r.record.nranks).collect() };
    let (base_ranks, new_ranks) = (ranks(base), ranks(new));
    let both = !base_ranks.is_empty() && !new_ranks.is_empty();
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
    Ok(with_ranks)
}

/// The method check (`method`): a refusal as a usage error, or the
/// warnings to print.
fn method_warnings(
    base: &Loaded,
    new: &Loaded,
    joined: &[(&[&Row], &[&Row])],
    opts: &CompareOptions,
) -> Result<Vec<String>, Error> {
    let differences = method::differences(joined.iter().copied());
    let refused: Vec<&method::Difference> = differences
        .iter()
        .filter(|d| d.weight == method::Weight::Refuse)
        .collect();
    if !refused.is_empty() && !opts.allow_method_change {
        let list: Vec<String> = refused.iter().map(|d| d.describe()).collect();
        return Err(Error::usage(format!(
            "{} and {} were measured differently: {}; such rows do not compare \
             (pass --allow-method-change to compare them anyway)",
            base.label,
            new.label,
            list.join(", ")
        )));
    }
    let mut warnings = Vec::new();
    for d in &differences {
        warnings.push(match d.weight {
            method::Weight::Refuse => format!(
                "measured differently: {}; compared anyway (--allow-method-change)",
                d.describe()
            ),
            method::Weight::Warn => format!("{} differs", d.describe()),
        });
    }
    warnings.extend(tool_warning(joined));
    for (side, loaded) in [("base", base), ("new", new)] {
        warnings.extend(side_warnings(side, loaded));
    }
    Ok(warnings)
}

/// Rows imported from another tool joined with rows of collbench (or of
/// another tool), as `collbench_version` names them.
fn tool_warning(joined: &[(&[&Row], &[&Row])]) -> Option<String> {
    let tools = |side: usize| -> BTreeSet<String> {
        let rows: Vec<&Row> = joined
            .iter()
            .flat_map(|j| if side == 0 { j.0 } else { j.1 })
            .copied()
            .collect();
        method::tools(&rows)
    };
    let (base_tools, new_tools) = (tools(0), tools(1));
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
    (!base_tools.is_empty() && !new_tools.is_empty() && base_tools != new_tools).then(|| {
        format!(
            "base rows come from {} and new rows from {}: the tools time differently, \
             so a change may be the tool's, not the machine's",
            join(&base_tools),
            join(&new_tools)
        )
    })
}

/// One side's own warnings: files without method columns (one line for
/// the side), measurements read twice.
fn side_warnings(side: &str, loaded: &Loaded) -> Vec<String> {
    let mut warnings = Vec::new();
    let unknown = method::unknown_method(&loaded.rows);
    if !unknown.is_empty() {
        let what = if loaded.files.len() == 1 {
            format!("{side} {} has", loaded.label)
        } else {
            let names: Vec<String> = unknown.iter().take(3).map(|f| f.display().to_string()).collect();
            let more = if unknown.len() > 3 { ", ..." } else { "" };
            format!(
                "{side}: {} of {} files ({}{more}) have",
                unknown.len(),
                loaded.files.len(),
                names.join(", ")
            )
        };
        warnings.push(format!(
            "{what} no method columns (an older collbench, or an import): \
             its method is unknown, compared as if measured the same way"
        ));
    }
    let repeated = repeated_measurements(&loaded.rows);
    if repeated > 0 {
        warnings.push(format!(
            "{side} {}: {repeated} row{} repeat a measurement already read (same run_id, cycle and case: \
             a file given twice?); each counts as a sample",
            loaded.label,
            if repeated == 1 { "" } else { "s" }
        ));
    }
    warnings
}

/// Rows whose run_id, cycle and case were already seen (the same
/// measurement read twice, e.g. a CSV copied into the baseline folder).
fn repeated_measurements(rows: &[Row]) -> usize {
    let mut seen = BTreeSet::new();
    rows.iter()
        .filter(|r| !r.record.run_id.is_empty())
        .filter(|r| !seen.insert((r.record.run_id.as_str(), r.record.cycle, CaseKey::of(&r.record, true))))
        .count()
}

fn launches(rows: &[Row]) -> usize {
    rows.iter()
        .map(|r| r.record.run_id.as_str())
        .collect::<BTreeSet<_>>()
        .len()
}

/// Rows by case, for the join, in report order; each case's rows in the
/// order they were read.
fn index(l: &Loaded, with_ranks: bool) -> BTreeMap<CaseKey, Vec<&Row>> {
    let mut cases: BTreeMap<CaseKey, Vec<&Row>> = BTreeMap::new();
    for r in &l.rows {
        cases.entry(CaseKey::of(&r.record, with_ranks)).or_default().push(r);
    }
    cases
}

fn samples<'a>(rows: &[&'a Row], metric: Metric) -> Vec<noise::Sample<'a>> {
    rows.iter()
        .map(|r| noise::Sample {
            value: metric.value(&r.record),
            launch: r.record.run_id.as_str(),
        })
        .collect()
}

fn judge(case: CaseKey, base: &[&Row], new: &[&Row], params: &noise::Params) -> Compared {
    let judgement = noise::judge(&samples(base, params.metric), &samples(new, params.metric), params);
    let nranks = |rows: &[&Row]| rows.first().map_or(0, |r| r.record.nranks);
    Compared {
        case,
        base_nranks: nranks(base),
        new_nranks: nranks(new),
        base: judgement.base_stats.median,
        new: judgement.new_stats.median,
        judgement,
    }
}

/// Notes on how the rows were judged: one line per test used (with how
/// many rows), and why rows fell back to the threshold.
fn test_notes(rows: &[Compared]) -> Vec<String> {
    let count = |f: &dyn Fn(&Judgement) -> bool| rows.iter().filter(|r| f(&r.judgement)).count();
    let mut notes = Vec::new();
    let launch_t = count(&|j| j.test == Test::LaunchT);
    if launch_t > 0 {
        notes.push(format!(
            "{} judged against the launch-to-launch spread (t-test on the launches' medians)",
            rows_of(launch_t)
        ));
    }
    let rank = count(&|j| j.test == Test::MannWhitney);
    if rank > 0 {
        notes.push(format!(
            "{} judged by the Mann-Whitney U test on one launch per side: it sees the noise inside a \
             launch, not from launch to launch; a baseline of several launches (a folder of CSVs) shows that",
            rows_of(rank)
        ));
    }
    for why in [Fallback::OneSample, Fallback::TooFewSamples, Fallback::NotPositive] {
        let n = count(&|j| j.fallback == Some(why));
        if n > 0 {
            notes.push(format!(
                "{} judged by the threshold alone: {}",
                rows_of(n),
                why.describe()
            ));
        }
    }
    notes
}

fn summarise(rows: &[Compared], only_base: &[CaseKey], only_new: &[CaseKey]) -> Vec<Summary> {
    let mut table: BTreeMap<Collective, Summary> = BTreeMap::new();
    fn get(table: &mut BTreeMap<Collective, Summary>, c: Collective) -> &mut Summary {
        table.entry(c).or_insert_with(|| Summary {
            collective: Some(c),
            ..Default::default()
        })
    }
    for r in rows {
        count_into(get(&mut table, r.case.collective), r);
    }
    for c in only_base {
        get(&mut table, c.collective).only_in_base += 1;
    }
    for c in only_new {
        get(&mut table, c.collective).only_in_new += 1;
    }
    table
        .into_values()
        .map(|mut s| {
            let collective = s.collective;
            s.geomean_change_pct = geomean(rows.iter().filter(|r| Some(r.case.collective) == collective));
            s
        })
        .collect()
}

fn count_into(s: &mut Summary, r: &Compared) {
    s.compared += 1;
    match r.verdict() {
        Verdict::Improved => s.improved += 1,
        Verdict::Regressed => s.regressed += 1,
        Verdict::WithinNoise => s.within_noise += 1,
        Verdict::TooNoisy => s.too_noisy += 1,
    }
}

/// Every row's counts, and the geometric mean over every row.
fn total(summary: &[Summary], rows: &[Compared]) -> Summary {
    let mut all = Summary::default();
    for s in summary {
        all.compared += s.compared;
        all.improved += s.improved;
        all.regressed += s.regressed;
        all.within_noise += s.within_noise;
        all.too_noisy += s.too_noisy;
        all.only_in_base += s.only_in_base;
        all.only_in_new += s.only_in_new;
    }
    all.geomean_change_pct = geomean(rows.iter());
    all
}

/// The geometric mean of new / base over rows with both medians above 0,
/// as a change in percent.
fn geomean<'a>(rows: impl Iterator<Item = &'a Compared>) -> Option<f64> {
    let logs: Vec<f64> = rows
        .filter(|r| r.base > 0.0 && r.new > 0.0)
        .map(|r| (r.new / r.base).ln())
        .collect();
    (!logs.is_empty()).then(|| ((logs.iter().sum::<f64>() / logs.len() as f64).exp() - 1.0) * 100.0)
}

/// `1 row`, `2 rows`
fn rows_of(n: usize) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
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
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        // a collapsed bandwidth (both ranks on one core): three figures
        format!("{v:.2e}")
    }
}

pub(crate) fn fmt_change(c: Option<f64>) -> String {
    match c {
        Some(c) => format!("{c:+.1}%"),
        None => "n/a".into(),
    }
}

/// `[-8.1%, +2.0%]`, or `-` without an interval.
pub(crate) fn fmt_interval(i: Option<[f64; 2]>) -> String {
    match i {
        Some([lo, hi]) => format!("[{lo:+.1}%, {hi:+.1}%]"),
        None => "-".into(),
    }
}

/// A p-value to four decimals, `<0.0001` below that.
pub(crate) fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 1e-4 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
        None => "-".into(),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::record::Record;
    use crate::types::{Average, TimingMethod};

    /// A record with the given busbw at 2 ranks (all_reduce: factor 1),
    /// measured by this collbench's defaults.
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
            files: vec![PathBuf::from(label)],
        }
    }

    /// `times` as the cycles of one launch of an all_reduce 1 MiB point.
    fn cycles(run_id: &str, times: &[f64]) -> Vec<Record> {
        times
            .iter()
            .enumerate()
            .map(|(i, &t)| Record {
                run_id: run_id.into(),
                cycle: Some(i as u64 + 1),
                samples: Some(times.len() as u64),
                ..record("all_reduce", 1 << 20, t, 0.0)
            })
            .collect()
    }

    fn opts() -> CompareOptions {
        CompareOptions::default()
    }

    #[test]
    fn one_sample_a_side_is_judged_by_the_threshold_alone() {
        let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.01)]);
        let new = loaded("n", vec![record("all_reduce", 1 << 20, 125.0, 0.01)]);
        let c = compare(&base, &new, &opts()).unwrap();
        assert_eq!(c.rows[0].verdict(), Verdict::Regressed);
        assert_eq!(c.rows[0].judgement.fallback, Some(Fallback::OneSample));
        assert!((c.rows[0].change_pct().unwrap() + 20.0).abs() < 1e-9);
        assert_eq!(c.exit_code(), 4);
        assert!(c.headline().starts_with("REGRESSION: 1 of 1 rows"));
        assert_eq!(c.failure().unwrap(), "regression: 1 of 1 rows lost more than 5% busbw");
        assert!(
            c.notes
                .iter()
                .any(|n| n == "1 row judged by the threshold alone: one sample on a side")
        );
        // the cross-rank spread no longer excuses a change: it says
        // nothing about run-to-run noise
        let wide = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.5)]);
        assert_eq!(compare(&wide, &new, &opts()).unwrap().exit_code(), 4);
    }

    #[test]
    fn cycles_of_a_launch_are_the_samples_of_a_point() {
        let base = loaded("b", cycles("r1", &[100.0, 101.0, 99.5, 100.4, 100.9, 99.8]));
        let slower = loaded("n", cycles("r2", &[125.0, 126.0, 124.1, 125.5, 124.9, 125.2]));
        let c = compare(&base, &slower, &opts()).unwrap();
        assert_eq!(c.rows.len(), 1);
        let j = &c.rows[0].judgement;
        assert_eq!((j.test, j.base_stats.n, j.new_stats.n), (Test::MannWhitney, 6, 6));
        assert_eq!(j.verdict, Verdict::Regressed);
        assert!(j.p_value.unwrap() < 0.01);
        assert!(
            c.notes.iter().any(|n| n.contains("not from launch to launch")),
            "{:?}",
            c.notes
        );
        // the same values from another launch: within noise
        let same = loaded("n", cycles("r2", &[100.4, 99.5, 100.0, 101.0, 99.8, 100.9]));
        let c = compare(&base, &same, &opts()).unwrap();
        assert_eq!((c.rows[0].verdict(), c.exit_code()), (Verdict::WithinNoise, 0));
    }

    #[test]
    fn rows_only_in_the_base_fail_unless_allowed_and_new_rows_are_listed() {
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
            (Some(Collective::AllReduce), 1, 1)
        );
        assert_eq!(c.summary[1].only_in_base, 1);
        assert_eq!(
            (c.overall.compared, c.overall.only_in_base, c.overall.only_in_new),
            (1, 1, 1)
        );
        assert_eq!(c.exit_code(), 4);
        assert!(
            c.headline()
                .starts_with("MISSING: 1 row of the base not in the new run")
        );
        assert!(
            c.failure()
                .unwrap()
                .contains("1 row of the base missing from the new run")
        );
        let allow = CompareOptions {
            allow_missing: true,
            ..opts()
        };
        let c = compare(&base, &new, &allow).unwrap();
        assert_eq!(c.exit_code(), 0);
        assert!(c.headline().starts_with("OK"));
        // only new rows: listed, never a failure
        let c = compare(&new, &new, &opts()).unwrap();
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
    fn a_method_column_that_differs_refuses_unless_allowed() {
        let mut batched = record("all_reduce", 8, 10.0, 0.0);
        batched.timing = Some(TimingMethod::Batched);
        batched.average = Some(Average::Avg);
        let base = loaded("b.csv", vec![batched]);
        let mut blocking = record("all_reduce", 8, 10.0, 0.0);
        blocking.timing = Some(TimingMethod::Blocking);
        blocking.average = Some(Average::Max);
        let new = loaded("n.csv", vec![blocking]);
        let err = compare(&base, &new, &opts()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert_eq!(
            err.to_string(),
            "b.csv and n.csv were measured differently: timing (base batched, new blocking), \
             average (base avg, new max); such rows do not compare (pass --allow-method-change \
             to compare them anyway)"
        );
        let allow = CompareOptions {
            allow_method_change: true,
            ..opts()
        };
        let c = compare(&base, &new, &allow).unwrap();
        assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
        assert!(c.warnings[0].starts_with("measured differently: timing (base batched, new blocking)"));
        assert_eq!(c.exit_code(), 0);
    }

    #[test]
    fn version_label_and_precision_target_only_warn() {
        let base = loaded("b", vec![record("all_reduce", 8, 10.0, 0.0)]);
        let mut other = record("all_reduce", 8, 10.0, 0.0);
        other.collbench_version = Some("9.9.9".into());
        other.label = None;
        other.precision_target_pct = Some(2.0);
        let c = compare(&base, &loaded("n", vec![other]), &opts()).unwrap();
        let want = base.rows[0].record.collbench_version.clone().unwrap();
        assert_eq!(
            c.warnings[0],
            format!("collbench_version (base {want}, new 9.9.9) differs")
        );
        assert!(
            c.warnings[1].starts_with("precision_target_pct (base "),
            "{:?}",
            c.warnings
        );
        assert!(
            c.warnings
                .contains(&"label (base nightly, a \"quoted\" name, new (none)) differs".to_string()),
            "{:?}",
            c.warnings
        );
        assert_eq!(c.exit_code(), 0);
    }

    #[test]
    fn imported_rows_and_files_without_method_columns_warn() {
        let base = loaded("b", vec![record("all_reduce", 8, 10.0, 0.0)]);
        let mut imported = record("all_reduce", 8, 10.0, 0.0);
        imported.collbench_version = Some("nccl-tests 2.17.8".into());
        let c = compare(&base, &loaded("n", vec![imported]), &opts()).unwrap();
        assert!(
            c.warnings
                .iter()
                .any(|w| w.starts_with("base rows come from collbench and new rows from nccl-tests 2.17.8")),
            "{:?}",
            c.warnings
        );
        let mut old = record("all_reduce", 8, 10.0, 0.0);
        old.timing = None;
        old.average = None;
        old.iter_policy = None;
        old.collbench_version = None;
        let c = compare(&loaded("old.csv", vec![old]), &base, &opts()).unwrap();
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].starts_with("base old.csv has no method columns"),
            "{}",
            c.warnings[0]
        );
        assert_eq!(c.exit_code(), 0);
    }

    #[test]
    fn a_measurement_read_twice_is_kept_and_named() {
        let rows = cycles("r1", &[100.0, 101.0, 99.0, 100.5]);
        let twice = loaded("b", [rows.clone(), rows.clone()].concat());
        let c = compare(&twice, &loaded("n", rows), &opts()).unwrap();
        assert_eq!(c.rows[0].judgement.base_stats.n, 8);
        assert!(
            c.warnings.iter().any(|w| w.contains("4 rows repeat a measurement")),
            "{:?}",
            c.warnings
        );
    }

    #[test]
    fn zero_bandwidth_on_both_sides_is_no_change() {
        let mut r = record("all_gather", 8, 10.0, 0.0);
        r.busbw_gbps = 0.0;
        let c = compare(&loaded("b", vec![r.clone()]), &loaded("n", vec![r]), &opts()).unwrap();
        assert_eq!(c.rows[0].change_pct(), Some(0.0));
        assert_eq!(c.rows[0].verdict(), Verdict::WithinNoise);
        assert_eq!(c.overall.geomean_change_pct, None);
    }

    #[test]
    fn the_overall_geomean_is_over_every_row() {
        let base = loaded(
            "b",
            vec![record("all_reduce", 8, 10.0, 0.0), record("all_gather", 8, 10.0, 0.0)],
        );
        // busbw x 2 and x 0.5: the geometric mean is no change
        let new = loaded(
            "n",
            vec![record("all_reduce", 8, 5.0, 0.0), record("all_gather", 8, 20.0, 0.0)],
        );
        let c = compare(&base, &new, &opts()).unwrap();
        assert!(c.overall.geomean_change_pct.unwrap().abs() < 1e-9);
        assert!((c.summary[0].geomean_change_pct.unwrap() - 100.0).abs() < 1e-9);
        assert!((c.summary[1].geomean_change_pct.unwrap() + 50.0).abs() < 1e-9);
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human_size(8), "8 B");
        assert_eq!(human_size(1024), "1 KiB");
        assert_eq!(human_size(3 << 20), "3 MiB");
        assert_eq!(human_size(1536), "1536 B");
    }
}
