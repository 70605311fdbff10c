//! `collbench compare` on two workload CSVs (`collbench workload` or
//! `replay --csv`): each configuration (the `workload` column at one rank
//! count) is judged on its step time, the `step` rows being its samples,
//! with the same noise model as run CSVs (`noise::judge`, metric time).
//! A configuration only in BASE fails unless `--allow-missing`; one only
//! in NEW is listed.

use std::collections::BTreeMap;
use std::path::Path;

use super::noise::{self, Params, Sample};
use super::{CompareOptions, Verdict};
use crate::error::{Error, exit};
use crate::record::workload::{self, RowKind, is_workload_csv};
use crate::report::workload::time;
use crate::types::Metric;

/// (workload, nranks) -> each step's time in microseconds.
type Steps = BTreeMap<(String, u64), Vec<f64>>;

/// Whether either file is a workload CSV; both must be, or neither.
pub fn applies(base: &Path, new: &Path) -> Result<bool, Error> {
    match (is_workload_csv(base), is_workload_csv(new)) {
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

/// The step times of a workload CSV (its `step` rows, read by serde).
fn read(path: &Path) -> Result<Steps, Error> {
    let shown = path.display();
    let mut steps = Steps::new();
    for (i, row) in workload::read(path)?.into_iter().enumerate() {
        if row.kind != RowKind::Step {
            continue;
        }
        if !(row.time_us.is_finite() && row.time_us >= 0.0) {
            let line = i + 2;
            return Err(Error::usage(format!(
                "{shown}: line {line}: column time_us is not a time"
            )));
        }
        steps.entry((row.workload, row.nranks)).or_default().push(row.time_us);
    }
    if steps.is_empty() {
        return Err(Error::usage(format!("{shown}: a workload CSV without step rows")));
    }
    Ok(steps)
}

/// Judges every configuration; the report's text and the exit code.
pub fn compare(base: &Path, new: &Path, o: &CompareOptions) -> Result<(String, u8), Error> {
    let (b, n) = (read(base)?, read(new)?);
    let params = Params {
        metric: Metric::Time,
        threshold_pct: o.threshold_pct,
        alpha: o.alpha,
    };
    let mut out = format!(
        "workload step time: {} (base) against {} (new), threshold {}%\n",
        base.display(),
        new.display(),
        o.threshold_pct
    );
    out += &format!(
        "  {:<28} {:>6} {:>12} {:>12} {:>9}  verdict\n",
        "configuration", "ranks", "base", "new", "change"
    );
    let (mut regressed, mut missing) = (0, 0);
    let samples = |v: &[f64], launch: &'static str| -> Vec<Sample<'static>> {
        v.iter().map(|&value| Sample { value, launch }).collect()
    };
    for ((name, ranks), bv) in &b {
        let Some(nv) = n.get(&(name.clone(), *ranks)) else {
            missing += 1;
            out += &format!("  {name:<28} {ranks:>6}  only in base\n");
            continue;
        };
        let j = noise::judge(&samples(bv, "base"), &samples(nv, "new"), &params);
        regressed += usize::from(j.verdict == Verdict::Regressed);
        out += &format!(
            "  {:<28} {:>6} {:>12} {:>12} {:>9}  {}\n",
            name,
            ranks,
            time(j.base_stats.median),
            time(j.new_stats.median),
            j.change_pct.map_or("-".into(), |c| format!("{c:+.1}%")),
            j.verdict.name()
        );
    }
    for (name, ranks) in n.keys().filter(|k| !b.contains_key(*k)) {
        out += &format!("  {name:<28} {ranks:>6}  only in new\n");
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
