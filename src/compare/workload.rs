//! `collbench compare` on two workload CSVs (`collbench workload` or
//! `replay --csv`): each configuration (the `workload` column at one rank
//! count) is judged on its step time, the `step` rows being its samples,
//! with the same noise model as run CSVs (`noise::judge`, metric time).
//! BASE or NEW may be a folder of workload CSVs, each file one launch, so
//! that the launch t-test sees launch-to-launch noise; with one launch a
//! side a change is unproven unless `--within-launch` (as for run CSVs).
//! The p-values of all configurations are adjusted together (Holm), as
//! a run CSV's rows are; the launch bound of one launch per side is not
//! applied (no launch-to-launch spread of step times is documented).
//! A configuration only in BASE fails unless `--allow-missing`; one only
//! in NEW is listed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::noise::{self, Judgement, Params, Sample};
use super::text::{fmt_change, fmt_interval, fmt_p};
use super::{CompareOptions, Verdict};
use crate::error::{Error, exit};
use crate::record::workload::{self, RowKind, is_workload_csv};
use crate::report::workload::time;
use crate::types::Metric;

/// (workload, nranks) -> each step's time in microseconds and the launch
/// (file) it was measured in.
type Steps = BTreeMap<(String, u64), Vec<(f64, usize)>>;

/// The CSV files of `path`: itself, or the `.csv` files of a folder in
/// name order.
fn files(path: &Path) -> Vec<PathBuf> {
    if !path.is_dir() {
        return vec![path.to_path_buf()];
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(path)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|f| f.extension().is_some_and(|x| x == "csv"));
    files.sort();
    files
}

/// A workload CSV, or a folder whose CSVs are.
fn is_workload(path: &Path) -> bool {
    let f = files(path);
    !f.is_empty() && f.iter().all(|f| is_workload_csv(f))
}

/// Whether either side is a workload CSV (or a folder of them); both must
/// be, or neither.
pub fn applies(base: &Path, new: &Path) -> Result<bool, Error> {
    match (is_workload(base), is_workload(new)) {
        (true, true) => Ok(true),
        (false, false) => Ok(false),
        (b, _) => {
            let (w, r) = if b { (base, new) } else { (new, base) };
            Err(Error::usage(format!(
                "{} is a workload CSV and {} is not: compare workload CSVs with each other",
                w.display(),
                r.display()
            )))
        }
    }
}

/// The step times of a workload CSV or a folder of them (their `step`
/// rows, read by serde), each file a launch; and how many launches.
fn read(path: &Path) -> Result<(Steps, usize), Error> {
    let mut steps = Steps::new();
    let files = files(path);
    for (launch, file) in files.iter().enumerate() {
        let shown = file.display();
        let before = steps.values().map(Vec::len).sum::<usize>();
        for row in workload::read(file)? {
            if row.kind != RowKind::Step {
                continue;
            }
            steps
                .entry((row.workload, row.nranks))
                .or_default()
                .push((row.time_us, launch));
        }
        if steps.values().map(Vec::len).sum::<usize>() == before {
            return Err(Error::usage(format!("{shown}: a workload CSV without step rows")));
        }
    }
    if files.is_empty() {
        return Err(Error::usage(format!("{}: no CSV files", path.display())));
    }
    Ok((steps, files.len()))
}

/// Each configuration of `b`, in order, judged against `n` (all together:
/// `noise::judge_together`), or None where `n` lacks it.
fn judge_steps(
    b: &Steps,
    n: &Steps,
    (base_launches, new_launches): (usize, usize),
    params: &Params,
) -> Vec<Option<Judgement>> {
    // launches as names: base files 0.., new files after them
    let names: Vec<String> = (0..base_launches + new_launches).map(|i| i.to_string()).collect();
    let samples = |v: &[(f64, usize)], offset: usize| -> Vec<Sample<'_>> {
        v.iter()
            .map(|&(value, launch)| Sample {
                value,
                launch: &names[offset + launch],
            })
            .collect()
    };
    let joined: Vec<_> = b
        .iter()
        .filter_map(|(key, bv)| n.get(key).map(|nv| (samples(bv, 0), samples(nv, base_launches))))
        .collect();
    let pairs: Vec<(&[Sample], &[Sample])> = joined.iter().map(|(b, n)| (b.as_slice(), n.as_slice())).collect();
    let mut judged = noise::judge_together(&pairs, params).into_iter();
    b.keys()
        .map(|key| if n.contains_key(key) { judged.next() } else { None })
        .collect()
}

/// Judges every configuration; the report's text and the exit code.
pub fn compare(base: &Path, new: &Path, o: &CompareOptions) -> Result<(String, u8), Error> {
    let ((b, base_launches), (n, new_launches)) = (read(base)?, read(new)?);
    let params = Params {
        metric: Metric::Time,
        threshold_pct: o.threshold_pct,
        alpha: o.alpha,
        within_launch: o.within_launch,
        // no launch-to-launch spread of step times is documented
        launch_bound: None,
    };
    let launches = |l: usize| format!("{l} launch{}", if l == 1 { "" } else { "es" });
    let mut out = format!(
        "workload step time: {} (base, {}) against {} (new, {}), threshold {}%\n",
        base.display(),
        launches(base_launches),
        new.display(),
        launches(new_launches),
        o.threshold_pct
    );
    out += &format!(
        "  {:<28} {:>6} {:>12} {:>12} {:>9} {:>19} {:>8}  verdict\n",
        "configuration", "ranks", "base", "new", "change", "interval", "p"
    );
    let (mut regressed, mut missing, mut unproven) = (0, 0, 0);
    let judgements = judge_steps(&b, &n, (base_launches, new_launches), &params);
    let tested = judgements.iter().flatten().filter(|j| j.p_value.is_some()).count();
    for ((name, ranks), j) in b.keys().zip(judgements) {
        let Some(j) = j else {
            missing += 1;
            out += &format!("  {name:<28} {ranks:>6}  only in base\n");
            continue;
        };
        regressed += usize::from(j.verdict == Verdict::Regressed);
        unproven += usize::from(j.verdict == Verdict::Unproven);
        out += &format!(
            "  {:<28} {:>6} {:>12} {:>12} {:>9} {:>19} {:>8}  {}\n",
            name,
            ranks,
            time(j.base_stats.median),
            time(j.new_stats.median),
            fmt_change(j.change_pct),
            fmt_interval(j.interval_pct),
            fmt_p(j.p_adjusted),
            j.verdict.name()
        );
    }
    for (name, ranks) in n.keys().filter(|k| !b.contains_key(*k)) {
        out += &format!("  {name:<28} {ranks:>6}  only in new\n");
    }
    if tested > 1 {
        out += &format!(
            "note: p-values adjusted for the {tested} configurations tested together (Holm's method); the p \
             column shows the adjusted value\n"
        );
    }
    if unproven > 0 {
        out += &format!(
            "note: {unproven} configuration{} unproven: changed by more than the threshold, but one launch \
             per side cannot tell a change from launch-to-launch noise; compare folders of several \
             launches' CSVs, or pass --within-launch to judge the steps of one launch\n",
            if unproven == 1 { "" } else { "s" }
        );
    }
    let fails = regressed > 0 || (missing > 0 && !o.allow_missing);
    out += &format!(
        "{} of {} configurations regressed{}\n",
        regressed,
        b.len(),
        if missing > 0 {
            format!(", {missing} missing from new")
        } else {
            String::new()
        }
    );
    Ok((out, if fails { exit::REGRESSION } else { exit::OK }))
}
