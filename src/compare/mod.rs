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

mod after_run;
pub mod by_mode;
pub mod json;
pub mod markdown;
pub mod method;
pub mod noise;
pub mod summary;
pub mod text;
mod warnings;
pub mod workload;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::collective::Collective;
use crate::error::{Error, exit, say};
use crate::record::read::{Loaded, Row, load};
use crate::record::{CaseKey, human_size};
use crate::types::{Dimension, Format, Metric};
pub use after_run::print_after_run;
use noise::{Fallback, Judgement, Test};
use summary::{summarise, test_notes, total};
use text::trim_float;
use warnings::method_warnings;

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
    /// Compare cases where NCCL ran another algorithm or protocol on one
    /// side (warn instead of refusing).
    pub allow_algo_change: bool,
    /// Cases only in the base do not fail the comparison.
    pub allow_missing: bool,
    /// Judge rows with one launch per side by the samples inside the
    /// launches (`--within-launch`): such rows may then regress.
    pub within_launch: bool,
}

impl Default for CompareOptions {
    fn default() -> CompareOptions {
        CompareOptions {
            metric: Metric::Busbw,
            threshold_pct: DEFAULT_THRESHOLD_PCT,
            alpha: DEFAULT_ALPHA,
            allow_different_ranks: false,
            allow_method_change: false,
            allow_algo_change: false,
            allow_missing: false,
            within_launch: false,
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
    /// A change beyond the threshold on one launch per side: the samples
    /// cannot tell it from launch-to-launch noise (`noise`'s module doc).
    Unproven,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::WithinNoise => "within noise",
            Verdict::TooNoisy => "too noisy",
            Verdict::Unproven => "unproven",
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
    pub unproven: usize,
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
    pub within_launch: bool,
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
                "{regressed} of {} rows {}{}",
                self.rows.len(),
                self.worse_by(),
                self.regression_evidence()
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

    /// `lost more than 5% busbw`; for time, `took more than 5% longer`.
    pub fn worse_by(&self) -> String {
        let threshold = trim_float(self.threshold_pct);
        if self.metric.higher_is_better() {
            format!("lost more than {threshold}% {}", self.metric)
        } else {
            format!("took more than {threshold}% longer")
        }
    }

    /// How the regressed rows were judged, when not all by the launch
    /// t-test: ` (2 judged from one launch per side, beyond the
    /// launch-to-launch bound)`, ` (2 judged within one launch per side
    /// (--within-launch), 1 of them by the threshold alone)`, else empty.
    /// A failure never rests on weaker evidence without saying so.
    fn regression_evidence(&self) -> String {
        let weak: Vec<&Compared> = self
            .regressions()
            .filter(|r| r.judgement.test != Test::LaunchT)
            .collect();
        let bound = weak.iter().filter(|r| r.judgement.test == Test::LaunchBound).count();
        let within = weak.len() - bound;
        let mut parts = Vec::new();
        if bound > 0 {
            parts.push(format!(
                "{bound} judged from one launch per side, beyond the launch-to-launch bound"
            ));
        }
        if within > 0 {
            let alone = weak.iter().filter(|r| r.judgement.test == Test::ThresholdOnly).count();
            let mut s = format!("{within} judged within one launch per side (--within-launch)");
            if alone > 0 {
                s.push_str(&format!(", {alone} of them by the threshold alone"));
            }
            parts.push(s);
        }
        if parts.is_empty() {
            String::new()
        } else {
            format!(" ({})", parts.join("; "))
        }
    }

    /// One line: what happened, for the end of every format.
    pub fn headline(&self) -> String {
        let regressed = self.count(Verdict::Regressed);
        let noisy = self.count(Verdict::TooNoisy);
        let unproven = self.count(Verdict::Unproven);
        let threshold = trim_float(self.threshold_pct);
        let mut line = if regressed > 0 {
            format!(
                "REGRESSION: {regressed} of {} rows {}{}",
                self.rows.len(),
                self.worse_by(),
                self.regression_evidence()
            )
        } else if self.missing_fails() {
            format!(
                "MISSING: {} of the base not in the new run",
                rows_of(self.only_in_base.len())
            )
        } else if unproven > 0 {
            format!(
                "NO VERDICT: {unproven} of {} rows changed {} by more than {threshold}%, but one launch per side \
                 cannot tell a change from launch-to-launch noise",
                self.rows.len(),
                self.metric
            )
        } else {
            format!("OK: no row {}", self.worse_by())
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
        if unproven > 0 {
            line.push_str(&format!(", {unproven} unproven"));
        }
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
    check_exports(c)?;
    if let Some(dimension) = c.by {
        return by_mode(c, dimension);
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
    let (base, new) = (load(base)?, load(new)?);
    refuse_empty(&base, &new)?;
    let comparison = compare(&base, &new, o)?;
    if comparison.rows.is_empty() && comparison.allow_missing {
        // nothing judged is never a pass (without the option: missing, 4)
        return Err(Error::usage(format!(
            "no case of {} is in {}: nothing to compare (--allow-missing accepts some cases missing, not all)",
            base.label, new.label
        )));
    }
    for warning in &comparison.warnings {
        say(&format!("collbench: warning: {warning}"));
    }
    write_exports(c, &comparison)?;
    crate::report::print_out(&c.format.render(&comparison));
    match comparison.failure() {
        None => Ok(exit::OK),
        Some(line) => {
            say(&format!("collbench: {line}"));
            Ok(exit::REGRESSION)
        }
    }
}

/// Nothing measured is never a pass: a side without rows is refused.
fn refuse_empty(base: &Loaded, new: &Loaded) -> Result<(), Error> {
    match [base, new].into_iter().find(|side| side.rows.is_empty()) {
        Some(empty) => Err(Error::usage(format!(
            "{} holds no measured row: nothing to compare",
            empty.label
        ))),
        None => Ok(()),
    }
}

/// `compare --by DIMENSION FILE`: the modes inside one CSV side by side.
fn by_mode(c: &CompareCommand, dimension: Dimension) -> Result<u8, Error> {
    let o = &c.options;
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
    let judged = by_mode::ModeOptions {
        metric: o.metric,
        threshold_pct: o.threshold_pct,
        alpha: o.alpha,
    };
    let report = by_mode::compare_modes(&loaded.label, &loaded.rows, dimension, &judged, c.reference.as_deref())?;
    crate::report::print_out(&match c.format {
        Format::Table => text::modes(&report),
        Format::Markdown => markdown::modes(&report),
        Format::Json => json::modes(&report),
    });
    Ok(exit::OK)
}

/// `--export-markdown` and `--export-json`, each whole or absent (a write
/// cut short, by a full disk, is removed).
fn write_exports(c: &CompareCommand, comparison: &Comparison) -> Result<(), Error> {
    for (path, format) in [(&c.export_markdown, Format::Markdown), (&c.export_json, Format::Json)] {
        if let Some(path) = path {
            std::fs::write(path, format.render(comparison)).map_err(|e| {
                let _ = std::fs::remove_file(path);
                Error::runtime(format!("cannot write {}: {e}", path.display()))
            })?;
        }
    }
    Ok(())
}

/// The export files, before any file is read: none may be an input or
/// the other export, and each must be creatable (a missing folder is a
/// usage error, exit 2, not a failure after the comparison).
fn check_exports(c: &CompareCommand) -> Result<(), Error> {
    let exports: Vec<(&str, &Path)> = [
        ("--export-markdown", &c.export_markdown),
        ("--export-json", &c.export_json),
    ]
    .into_iter()
    .filter_map(|(what, path)| path.as_deref().map(|p| (what, p)))
    .collect();
    let names = if c.files.len() == 2 { ["BASE", "NEW"] } else { [""; 2] };
    let inputs: Vec<(&str, &Path)> = c.files.iter().zip(names).map(|(p, n)| (n, p.as_path())).collect();
    crate::report::paths::check_distinct(&exports, &inputs)?;
    for (what, path) in &exports {
        if let Some((name, folder)) = inputs.iter().find(|(_, input)| read_from(input, path)) {
            let which = if name.is_empty() {
                String::new()
            } else {
                format!(" {name}")
            };
            return Err(Error::usage(format!(
                "{what} {}: a .csv file in the{which} folder {} is read as one of its launches (this export would \
                 replace or join them); choose a path outside it",
                path.display(),
                folder.display()
            )));
        }
    }
    for (what, path) in exports {
        crate::report::paths::check_writable(what, path)?;
    }
    Ok(())
}

/// Whether a folder `input`'s launches would include the file `path`: a
/// `.csv` file directly in it (as `record::read` lists a folder).
fn read_from(input: &Path, path: &Path) -> bool {
    let parent = match path.parent() {
        Some(p) if p.as_os_str().is_empty() => Path::new("."),
        Some(p) => p,
        None => return false,
    };
    input.is_dir() && path.extension().is_some_and(|x| x == "csv") && crate::report::paths::same_file(parent, input)
}

/// Joins `base` and `new`, checks how they were measured and judges every
/// case (see the module doc).
pub fn compare(base: &Loaded, new: &Loaded, opts: &CompareOptions) -> Result<Comparison, Error> {
    let mut notes = Vec::new();
    let with_ranks = rank_join(base, new, opts, &mut notes)?;
    let base_rows = index(base, with_ranks);
    let mut new_rows = index(new, with_ranks);
    if !with_ranks {
        notes.extend(join_rounded(&base_rows, &mut new_rows, base, new));
    }
    let joined: Vec<(&[&Row], &[&Row])> = base_rows
        .iter()
        .filter_map(|(case, b)| new_rows.get(case).map(|n| (b.as_slice(), n.as_slice())))
        .collect();
    let warnings = method_warnings(base, new, &joined, opts)?;

    let params = noise::Params {
        metric: opts.metric,
        threshold_pct: opts.threshold_pct,
        alpha: opts.alpha,
        within_launch: opts.within_launch,
        launch_bound: Some(noise::LAUNCH_BOUND),
    };
    let mut joined_cases = Vec::new();
    let mut only_in_base = Vec::new();
    for (case, b) in &base_rows {
        match new_rows.get(case) {
            Some(n) => joined_cases.push((case, b.as_slice(), n.as_slice())),
            None => only_in_base.push(case.clone()),
        }
    }
    let rows = judge_all(&joined_cases, &params);
    let only_in_new: Vec<CaseKey> = new_rows
        .keys()
        .filter(|case| !base_rows.contains_key(*case))
        .cloned()
        .collect();
    notes.extend(test_notes(&rows, opts.within_launch));
    let summary = summarise(&rows, &only_in_base, &only_in_new);
    let overall = total(&summary, &rows);
    Ok(Comparison {
        metric: opts.metric,
        threshold_pct: opts.threshold_pct,
        alpha: opts.alpha,
        allow_missing: opts.allow_missing,
        within_launch: opts.within_launch,
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

/// Across rank counts, a per-rank collective's rows of one request have
/// sizes a few bytes apart (each rank's share is cut to 16 bytes: 1024 B
/// of all_gather is 1024 B at 2 ranks, 1008 B at 3): a new row whose
/// requested sizes (`Collective::requested_window`) meet exactly one
/// unjoined base case's, and that case's no other new row's, joins it
/// under the base's key. The note says how many and what it means.
fn join_rounded<'a>(
    base_rows: &BTreeMap<CaseKey, Vec<&'a Row>>,
    new_rows: &mut BTreeMap<CaseKey, Vec<&'a Row>>,
    base: &Loaded,
    new: &Loaded,
) -> Option<String> {
    let only = |l: &Loaded| l.rows.first().map(|r| r.record.nranks);
    let (nb, nn) = (only(base)?, only(new)?);
    let window = |k: &CaseKey, n: u64| k.collective.requested_window(k.size_bytes, n);
    let meet = |b: &CaseKey, n: &CaseKey| {
        let (wb, wn) = (window(b, nb), window(n, nn));
        b.clone().any_size() == n.clone().any_size() && wb.start < wn.end && wn.start < wb.end
    };
    let lone_base: Vec<&CaseKey> = base_rows.keys().filter(|k| !new_rows.contains_key(*k)).collect();
    let lone_new: Vec<CaseKey> = new_rows
        .keys()
        .filter(|k| !base_rows.contains_key(*k))
        .cloned()
        .collect();
    let mut moved = Vec::new();
    for n in &lone_new {
        let mut partners = lone_base.iter().filter(|b| meet(b, n));
        if let (Some(b), None) = (partners.next(), partners.next())
            && lone_new.iter().filter(|other| meet(b, other)).count() == 1
        {
            moved.push(((*b).clone(), n.clone()));
        }
    }
    for (b, n) in &moved {
        if let Some(rows) = new_rows.remove(n) {
            new_rows.insert(b.clone(), rows);
        }
    }
    let (b, n) = moved.first()?;
    Some(format!(
        "{} rows joined across rank counts at sizes cut differently (each rank's share is a multiple of 16 bytes): \
         {} B at {nb} ranks is {} B at {nn}, as in {}; bandwidths compare, times differ by those bytes too",
        moved.len(),
        b.size_bytes,
        n.size_bytes,
        b.collective
    ))
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

/// Every joined case, judged together (`noise::judge_together`).
fn judge_all(cases: &[(&CaseKey, &[&Row], &[&Row])], params: &noise::Params) -> Vec<Compared> {
    let samples: Vec<_> = cases
        .iter()
        .map(|(_, b, n)| (samples(b, params.metric), samples(n, params.metric)))
        .collect();
    let pairs: Vec<(&[noise::Sample], &[noise::Sample])> =
        samples.iter().map(|(b, n)| (b.as_slice(), n.as_slice())).collect();
    let nranks = |rows: &[&Row]| rows.first().map_or(0, |r| r.record.nranks);
    cases
        .iter()
        .zip(noise::judge_together(&pairs, params))
        .map(|((case, base, new), judgement)| Compared {
            case: (*case).clone(),
            base_nranks: nranks(base),
            new_nranks: nranks(new),
            base: judgement.base_stats.median,
            new: judgement.new_stats.median,
            judgement,
        })
        .collect()
}

/// `1 row`, `2 rows`
pub(crate) fn rows_of(n: usize) -> String {
    format!("{n} row{}", if n == 1 { "" } else { "s" })
}

fn list(set: &BTreeSet<u64>) -> String {
    set.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
pub(crate) mod tests;
