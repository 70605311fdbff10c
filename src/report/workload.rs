//! Reports of `collbench workload` and `collbench replay`: the header that
//! states what the schedules simplify, each configuration's figures (step
//! time, the first-principles volume beside it, effective bus bandwidth,
//! breakdowns by collective and message size, the top operations), the
//! side-by-side view with ratios to the best, and the workload CSV's typed
//! rows (`record::workload`): `step` rows, one per timed step (the samples
//! `compare` judges), and `op` rows, one per operation of the step.
//!
//! Formats only: every figure comes measured or from `workload::volume`;
//! the ratios are display aggregates. The figures of a step all come from
//! the same samples (each timed step's slowest rank: its step time and its
//! operations' times, `engine::steps`), and the breakdowns are means over
//! the steps, which add up: the collectives' times and the step's own
//! overhead make the mean step. `x best` carries the interval of the ratio
//! of the median step times (the Mann-Whitney U test's, inverted,
//! `stats::shift_interval`, as `compare` uses it), the steps of the
//! configurations being interleaved samples of one launch; where that
//! interval holds 1 the difference is not significant, and with too few
//! steps no interval exists and nothing is claimed. The intervals of a
//! table are at the Bonferroni level over its pairs of configurations, so
//! that all its verdicts together are wrong at most 5% of the time
//! (`interval_alpha`).

use std::path::Path;

use super::csv::CsvFile;
use crate::engine::steps::Steps;
use crate::error::Error;
use crate::record::workload::{RowKind, WorkloadRow};
use crate::types::DType;
use crate::workload::plan::Config;
use crate::workload::{GroupLayout, Op, StepVolume, Summary, effective_busbw_gbps};

/// One operation's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct OpResult {
    pub op: Op,
    /// What ran (a 16-bit float may run as float with half the count).
    pub run_dtype: DType,
    pub run_count: u64,
    /// Ranks of its group.
    pub ranks: usize,
    pub size_bytes: u64,
    /// Bytes each rank sends, from first principles.
    pub bus_bytes: f64,
    /// Median, p99 and mean over the timed steps of its time on each
    /// step's slowest rank.
    pub median_us: f64,
    pub p99_us: f64,
    pub mean_us: f64,
}

/// One configuration's figures.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub name: String,
    pub strategy: Option<String>,
    pub bucket_bytes: Option<u64>,
    pub layout: GroupLayout,
    pub ops: Vec<OpResult>,
    /// Each timed step's time (the slowest rank's).
    pub step_us: Vec<f64>,
    pub step_median_us: f64,
    pub step_p99_us: f64,
    /// The mean step, and its part outside the operations (the mean step
    /// less the operations' mean times).
    pub step_mean_us: f64,
    pub overhead_mean_us: f64,
    /// Volumes, with each operation's mean time over the steps.
    pub summary: Summary,
    pub wrong: Option<u64>,
    pub failed_ops: usize,
    /// Validation passes over the step's operations (`-c`; 0: none).
    pub check_passes: u32,
}

impl Outcome {
    /// Rank 0's figures of configuration `c`: each operation as it ran
    /// (`ran`: type and count), its volume from first principles and its
    /// times over the steps.
    pub fn of(c: &Config, ran: &[(DType, u64)], steps: Steps) -> Result<Outcome, Error> {
        let volume = StepVolume::new(&c.schedule, &c.layout)?;
        let per_op = steps.per_op(ran.len());
        // means add up where medians do not: the breakdown's basis
        let means = steps.mean_op_us(ran.len());
        let summary = volume.summary(Some(&means))?;
        let step_mean_us = steps.mean_step_us();
        let ops = c
            .schedule
            .ops
            .iter()
            .zip(ran)
            .zip(&volume.per_op)
            .zip(&per_op)
            .zip(&means)
            .map(|((((op, &(run_dtype, run_count)), v), t), &mean_us)| OpResult {
                op: op.clone(),
                run_dtype,
                run_count,
                ranks: v.ranks,
                size_bytes: v.size_bytes,
                bus_bytes: v.bus_bytes,
                median_us: t.map_or(0.0, |t| t.p50),
                p99_us: t.map_or(0.0, |t| t.p99),
                mean_us,
            })
            .collect();
        let step = steps.per_step();
        Ok(Outcome {
            name: c.name.clone(),
            strategy: c.strategy.map(|s| s.name().to_string()),
            bucket_bytes: c.bucket_bytes,
            layout: c.layout,
            ops,
            step_us: steps.step_us,
            step_median_us: step.map_or(0.0, |s| s.p50),
            step_p99_us: step.map_or(0.0, |s| s.p99),
            step_mean_us,
            overhead_mean_us: (step_mean_us - summary.total.time_us).max(0.0),
            summary,
            wrong: steps.wrong,
            failed_ops: steps.failed_ops,
            check_passes: steps.check_passes,
        })
    }

    /// Bytes each rank sends per step.
    pub fn volume_bytes(&self) -> f64 {
        self.summary.total.bus_bytes
    }

    /// Effective bus bandwidth of the median step.
    pub fn busbw_gbps(&self) -> f64 {
        effective_busbw_gbps(self.volume_bytes(), self.step_median_us)
    }

    /// Each operation's mean time over the steps (the breakdown's basis),
    /// as `workload::volume` holds them.
    fn summary_times(&self) -> Vec<f64> {
        self.ops.iter().map(|r| r.mean_us).collect()
    }
}

/// `812.3 us`, `12.41 ms`, `1.204 s`.
pub fn time(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.3} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{us:.1} us")
    }
}

/// A volume in decimal units, scaled (`types::human_volume`).
fn volume(bytes: f64) -> String {
    crate::types::human_volume(bytes)
}

fn share(part: f64, whole: f64) -> String {
    if whole > 0.0 {
        format!("{:.0}%", part / whole * 100.0)
    } else {
        "-".into()
    }
}

/// `ddp: 5 operations per step, 40.00 MB sent by each rank per step (first
/// principles)`: a configuration's step, said before it is measured.
pub fn volume_line(c: &Config) -> Result<String, Error> {
    let v = StepVolume::new(&c.schedule, &c.layout)?;
    Ok(format!(
        "{}: {} per step, {} sent by each rank per step (first principles)",
        c.name,
        crate::types::count_of(c.schedule.ops.len(), "operation"),
        volume(v.bus_bytes())
    ))
}

/// The header: what ran (`replay`: a log's sequence) and every
/// simplification, one `# ` line each.
pub fn header(replay: bool, lines: &[String]) -> String {
    let mut s = String::from(if replay {
        "# collbench replay: the collective sequence of a logged job, measured\n"
    } else {
        "# collbench workload: communication of a training step, measured\n"
    });
    for l in lines {
        s += &format!("# {l}\n");
    }
    s
}

/// The parallel degrees above 1: `, tp 2`, `, ep 4`, `, 2 pipeline stages`.
fn degrees(l: &crate::workload::GroupLayout) -> String {
    let mut s = String::new();
    for (d, what) in [(l.tp, "tp"), (l.ep, "ep")] {
        if d > 1 {
            s += &format!(", {what} {d}");
        }
    }
    if l.pp > 1 {
        s += &format!(", {} pipeline stages", l.pp);
    }
    s
}

/// One configuration's block (`top`: list that many operations by time).
pub fn one(o: &Outcome, top: Option<usize>) -> String {
    let t = &o.summary.total;
    let mut s = format!(
        "\n{}: {} per step on {}{}\n",
        o.name,
        crate::types::count_of(o.ops.len(), "operation"),
        crate::types::count_of(o.layout.world, "rank"),
        degrees(&o.layout)
    );
    s += &format!(
        "  step time        median {}  p99 {}  mean {}  over {} (each step's slowest rank, barrier to its last operation)\n",
        time(o.step_median_us),
        time(o.step_p99_us),
        time(o.step_mean_us),
        crate::types::count_of(o.step_us.len(), "step")
    );
    s += &format!(
        "  volume           {} sent by each rank per step (first principles); the calls' sizes sum to {} (nccl-tests' size column)\n",
        volume(t.bus_bytes),
        volume(t.size_bytes as f64)
    );
    s += &format!(
        "  effective busbw  {:.3} GB/s (volume / median step time)\n",
        o.busbw_gbps()
    );
    s += &validated_line(o);
    s += &format!(
        "  {:<18} {:>5} {:>12} {:>12} {:>6} {:>11}   (mean per step; share of the collectives' time)\n",
        "by collective", "ops", "volume", "time", "share", "busbw GB/s"
    );
    for (c, tally) in &o.summary.by_collective {
        s += &breakdown_line(c.name(), tally, t.time_us);
    }
    s += &format!("  {:<18}\n", "by message size");
    for (class, tally) in o.summary.by_class.iter().filter(|(_, t)| t.ops > 0) {
        s += &breakdown_line(class.name(), tally, t.time_us);
    }
    let total = |name: &str, ops: &dyn std::fmt::Display, us: f64, share: &str, note: &str| {
        format!("  {name:<18} {ops:>5} {:>12} {:>12} {share:>6}{note}\n", "", time(us))
    };
    s += &total("collectives", &t.ops, t.time_us, &share(t.time_us, o.step_mean_us), "");
    s += &total(
        "step overhead",
        &"",
        o.overhead_mean_us,
        &share(o.overhead_mean_us, o.step_mean_us),
        "   (the step's own time between its operations: buffers made ready)",
    );
    s += &total(
        "step (mean)",
        &"",
        o.step_mean_us,
        "100%",
        "   (= collectives + overhead)",
    );
    if let Some(n) = top.filter(|&n| n > 0 && !o.ops.is_empty()) {
        s += &top_ops(o, n);
    }
    s
}

/// `validated  every operation once: 0 wrong elements` (or `3 times (-c
/// 3)`), or that nothing was checked.
fn validated_line(o: &Outcome) -> String {
    match (o.wrong, o.check_passes) {
        (Some(w), 1) => format!("  validated        every operation once: {w} wrong elements\n"),
        (Some(w), n) => format!("  validated        every operation {n} times (-c {n}): {w} wrong elements\n"),
        (None, _) => "  validated        off (-c 0): no operation's result was checked\n".into(),
    }
}

fn breakdown_line(name: &str, t: &crate::workload::Tally, total_us: f64) -> String {
    format!(
        "    {:<16} {:>5} {:>12} {:>12} {:>6} {:>11.3}\n",
        name,
        t.ops,
        volume(t.bus_bytes),
        time(t.time_us),
        share(t.time_us, total_us),
        t.busbw_gbps()
    )
}

/// The `n` operations that took longest (mean over the steps, the basis
/// of the breakdown; their median beside it), each numbered by its place
/// in the list and named by its place in the step (`op 3`, the CSV's
/// `op_index`).
fn top_ops(o: &Outcome, n: usize) -> String {
    let means: Vec<f64> = o.summary_times();
    let mut order: Vec<usize> = (0..o.ops.len()).collect();
    order.sort_by(|&a, &b| means[b].total_cmp(&means[a]));
    let total = o.summary.total.time_us;
    let mut s = format!(
        "  top {} by time (mean per step, share of the collectives' {}; median beside it; op N: the step's \
         N-th operation, the CSV's op_index)\n",
        crate::types::count_of(n.min(o.ops.len()), "operation"),
        time(total)
    );
    for (place, &i) in order.iter().take(n).enumerate() {
        let r = &o.ops[i];
        let elements = if r.op.count == 1 { "element" } else { "elements" };
        s += &format!(
            "    {:>2}. op {:<5} {:<15} {:>12} {elements:<8} {:<9} on {:<8}  {:>11}  {:>5}  median {:>11}  {}\n",
            place + 1,
            i + 1,
            r.op.collective.name(),
            r.op.count,
            r.op.dtype.name(),
            crate::types::count_of(r.ranks, "rank"),
            time(means[i]),
            share(means[i], total),
            time(r.median_us),
            r.op.label
        );
    }
    s
}

/// The chance, over a whole side-by-side table, that any of its verdicts
/// (`slower`, `faster`) is false: 5%.
const TABLE_ALPHA: f64 = 0.05;

/// The significance level of each interval of a table of `k`
/// configurations: `TABLE_ALPHA` over every pair of them (Bonferroni).
/// Every pair, not the k - 1 rows: the fastest is picked after the steps,
/// so the row of the slowest against the fastest is the most extreme of
/// all the pairs, and holding the k - 1 intervals to `TABLE_ALPHA / (k -
/// 1)` let 33 tables in 400 of 8 identical configurations (this
/// module's test) call one slower or faster; over the pairs, 8.
fn interval_alpha(k: usize) -> f64 {
    TABLE_ALPHA / (k * k.saturating_sub(1) / 2).max(1) as f64
}

/// `95%`, `99.82%`: a confidence level with the digits that tell it from
/// 100% (two of its alpha's).
fn level(alpha: f64) -> String {
    let decimals = (1.0 - (alpha * 100.0).log10().floor()).max(0.0) as usize;
    let text = format!("{:.decimals$}", (1.0 - alpha) * 100.0);
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    format!("{text}%")
}

/// The fewest steps a side for which the rank test can reach `alpha`
/// (`stats::smallest_p_value`).
fn steps_needed(alpha: f64) -> usize {
    (1..)
        .find(|&n| crate::stats::smallest_p_value(n, n) < alpha)
        .unwrap_or(usize::MAX)
}

/// `x best` of `o` against the fastest configuration `best`: the ratio of
/// the median step times, its interval at level 1 - `alpha`, and what
/// the interval says.
fn x_best(o: &Outcome, best: &Outcome, alpha: f64) -> (String, String, String) {
    if best.step_median_us <= 0.0 {
        return ("-".into(), "-".into(), "-".into());
    }
    let ratio = format!("{:.2}", o.step_median_us / best.step_median_us);
    if std::ptr::eq(o, best) {
        return (ratio, "-".into(), "fastest".into());
    }
    let logs =
        |v: &[f64]| -> Option<Vec<f64>> { v.iter().all(|&t| t > 0.0).then(|| v.iter().map(|t| t.ln()).collect()) };
    let (Some(x), Some(y)) = (logs(&best.step_us), logs(&o.step_us)) else {
        return (ratio, "-".into(), "-".into());
    };
    if crate::stats::smallest_p_value(x.len(), y.len()) >= alpha {
        return (ratio, "-".into(), "too few steps".into());
    }
    match crate::stats::shift_interval(&x, &y, alpha) {
        Some((lo, hi)) => {
            let (lo, hi) = (lo.exp(), hi.exp());
            let verdict = if lo > 1.0 {
                "slower"
            } else if hi < 1.0 {
                "faster"
            } else {
                "not significant"
            };
            (ratio, format!("[{lo:.2}, {hi:.2}]"), verdict.into())
        }
        None => (ratio, "-".into(), "too few steps".into()),
    }
}

/// Every configuration beside the others, each one's ratio to the best
/// (the shortest median step) with that ratio's interval, and its
/// volume's ratio to the best's. The intervals hold the table's verdicts
/// together (`interval_alpha`), and the heading says at what level.
pub fn side_by_side(all: &[Outcome]) -> String {
    let Some(best) = all.iter().min_by(|a, b| a.step_median_us.total_cmp(&b.step_median_us)) else {
        return String::new();
    };
    let alpha = interval_alpha(all.len());
    let mut s = format!(
        "\nside by side (x best: median step time over the fastest configuration's, with its {} interval; \
         the steps ran interleaved)\n",
        level(alpha)
    );
    s += &format!(
        "  {:<26} {:>5} {:>12} {:>12} {:>12} {:>11} {:>8} {:>14} {:<16} {:>10}\n",
        "configuration", "ops", "volume", "median", "p99", "busbw GB/s", "x best", "interval", "vs fastest", "volume x"
    );
    let mut few = false;
    for o in all {
        let ratio = |a: f64, b: f64| if b > 0.0 { format!("{:.2}", a / b) } else { "-".into() };
        let (x, interval, verdict) = x_best(o, best, alpha);
        few |= verdict == "too few steps";
        s += &format!(
            "  {:<26} {:>5} {:>12} {:>12} {:>12} {:>11.3} {:>8} {:>14} {:<16} {:>10}\n",
            o.name,
            o.ops.len(),
            volume(o.volume_bytes()),
            time(o.step_median_us),
            time(o.step_p99_us),
            o.busbw_gbps(),
            x,
            interval,
            verdict,
            ratio(o.volume_bytes(), best.volume_bytes())
        );
    }
    if all.len() > 2 {
        s += &format!(
            "  note: each interval at {}, so that all the table's verdicts hold together at {} (Bonferroni over \
             the {} pairs of its {} configurations: the fastest is picked after the steps)\n",
            level(alpha),
            level(TABLE_ALPHA),
            all.len() * (all.len() - 1) / 2,
            all.len()
        );
    }
    if few {
        let n = steps_needed(alpha);
        s += &format!(
            "  note: too few steps for the rank test to tell configurations apart at the {} level ({n} a side at \
             the least{}); --steps {} gives an interval\n",
            level(alpha),
            if all.len() > 2 {
                format!(" for {} configurations", all.len())
            } else {
                String::new()
            },
            n.max(10)
        );
    }
    s
}

/// The workload CSV (`record::workload`), written one configuration at a
/// time, each row flushed (`CsvFile`).
pub struct WorkloadCsv {
    file: CsvFile,
}

impl WorkloadCsv {
    /// Creates the file and writes its header; an existing file is refused
    /// unless `overwrite`.
    pub fn create(path: &Path, overwrite: bool) -> Result<WorkloadCsv, Error> {
        let mut file = CsvFile::create(path, overwrite).map_err(|e| {
            if !overwrite && path.exists() {
                Error::usage(format!("{} exists; use --overwrite to replace it", path.display()))
            } else {
                e
            }
        })?;
        file.fields(WorkloadRow::columns()).map_err(|e| write_error(&file, e))?;
        Ok(WorkloadCsv { file })
    }

    /// The step rows and op rows of one configuration.
    pub fn write(&mut self, o: &Outcome, backend_version: &str, rescaled: bool) -> Result<(), Error> {
        for row in rows(o, backend_version, rescaled) {
            self.file.row(&row).map_err(|e| write_error(&self.file, e))?;
        }
        Ok(())
    }
}

fn write_error(file: &CsvFile, e: std::io::Error) -> Error {
    Error::runtime(format!("cannot write {}: {e}", file.target()))
}

/// One `step` row per timed step, then one `op` row per operation.
fn rows(o: &Outcome, backend_version: &str, rescaled: bool) -> Vec<WorkloadRow> {
    let head = WorkloadRow {
        workload: o.name.clone(),
        strategy: o.strategy.clone().unwrap_or_else(|| "replay".into()),
        bucket_bytes: o.bucket_bytes,
        nranks: o.layout.world as u64,
        ranks_per_node: o.layout.ranks_per_node as u64,
        tp: o.layout.tp as u64,
        backend_version: backend_version.to_string(),
        rescaled,
        ..WorkloadRow::default()
    };
    let steps = o.step_us.iter().enumerate().map(|(i, &t)| WorkloadRow {
        kind: RowKind::Step,
        step: Some(i as u64 + 1),
        count: o.ops.len() as u64,
        size_bytes: o.summary.total.size_bytes,
        bus_bytes: o.volume_bytes(),
        time_us: t,
        busbw_gbps: effective_busbw_gbps(o.volume_bytes(), t),
        wrong: o.wrong,
        ..head.clone()
    });
    let ops = o.ops.iter().enumerate().map(|(i, r)| WorkloadRow {
        kind: RowKind::Op,
        op_index: Some(i as u64 + 1),
        phase: Some(r.op.phase.name().into()),
        group: Some(r.op.group.name()),
        group_ranks: Some(r.ranks as u64),
        label: Some(r.op.label.clone()),
        collective: Some(r.op.collective),
        dtype: Some(r.op.dtype),
        run_dtype: Some(r.run_dtype),
        op: Some(r.op.op),
        root: Some(r.op.root.map_or(-1, |r| r as i64)),
        count: r.op.count,
        size_bytes: r.size_bytes,
        bus_bytes: r.bus_bytes,
        time_us: r.median_us,
        time_p99_us: Some(r.p99_us),
        busbw_gbps: effective_busbw_gbps(r.bus_bytes, r.median_us),
        ..head.clone()
    });
    steps.chain(ops).collect()
}

#[cfg(test)]
mod tests;
