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
use crate::report::workload::{is_workload_csv, time};
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

/// Reads the `step` rows of a workload CSV.
fn read(path: &Path) -> Result<Steps, Error> {
    let shown = path.display();
    let mut reader = csv::Reader::from_path(path).map_err(|e| Error::usage(format!("cannot read {shown}: {e}")))?;
    let headers = reader
        .headers()
        .map_err(|e| Error::usage(format!("{shown}: {e}")))?
        .clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| Error::usage(format!("{shown}: no `{name}` column")))
    };
    let (kind, workload, nranks, time_us) = (col("kind")?, col("workload")?, col("nranks")?, col("time_us")?);
    let mut steps = Steps::new();
    for (i, row) in reader.records().enumerate() {
        let line = i + 2;
        let row = row.map_err(|e| Error::usage(format!("{shown}: line {line}: {e}")))?;
        if row.get(kind) != Some("step") {
            continue;
        }
        let field = |c: usize, what: &str| {
            row.get(c)
                .ok_or_else(|| Error::usage(format!("{shown}: line {line}: no {what}")))
        };
        let n: u64 = field(nranks, "nranks")?
            .parse()
            .map_err(|_| Error::usage(format!("{shown}: line {line}: column nranks is not a rank count")))?;
        let t: f64 = field(time_us, "time_us")?
            .parse()
            .ok()
            .filter(|t: &f64| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| Error::usage(format!("{shown}: line {line}: column time_us is not a time")))?;
        steps
            .entry((field(workload, "workload")?.to_string(), n))
            .or_default()
            .push(t);
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
