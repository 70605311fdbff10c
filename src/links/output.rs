//! What the finder's results look like outside: the pairs CSV (one typed
//! row per measured pair, method columns as in run CSVs), the JSON
//! document, the matrix as text for small launches, the per-rail summary
//! and the report as text. Formats only: nothing here measures, judges
//! or opens a file (writers are handed in).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;

use serde::{Deserialize, Serialize};

use super::finder::Report;
use super::layout::{Layout, PairClass};
use super::measure::{Estimate, Matrix, PairResult, Phase};
use super::metric::PerMetric;
use super::rule::{Analysis, Metric};
use super::schedule::{Level, Pair};
use crate::types::TimingMethod;

mod report;

pub(super) use report::short;
pub use report::{evidence_line, headline, noisy_line, report_text};

/// Version of the pairs CSV and the links JSON.
pub const SCHEMA_VERSION: u32 = 1;

/// Who measured and how: what every row repeats (as a run CSV's method
/// columns do), given by the caller.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunMeta {
    pub run_id: String,
    /// When the matrix started (RFC 3339, UTC); rows stamped as measured
    /// by the caller override it.
    pub timestamp: String,
    pub collbench_version: String,
    /// `nccl`, `mpi`, or `simulation`.
    pub backend: String,
    pub backend_version: String,
    pub timing: Option<TimingMethod>,
    pub label: Option<String>,
}

/// One row of the pairs CSV (docs/links.md, "Pairs CSV"): the pair's
/// columns, each metric's four (`Metric::columns`, in `Metric::ALL`'s
/// order), then the run's. `record` is its CSV record, `json` its JSON
/// object (every column by name).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairRow {
    pub pair: PairColumns,
    pub metrics: PerMetric<MetricColumns>,
    pub run: RunColumns,
}

/// The columns before the metrics': who, where, when, with what probe.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PairColumns {
    pub run_id: String,
    pub timestamp: String,
    pub level: Level,
    pub phase: Phase,
    /// From 1, over the matrix and the re-tests.
    pub round: u64,
    /// Pairs measured at once in that round.
    pub concurrent: u64,
    pub rank_a: u64,
    pub rank_b: u64,
    pub host_a: String,
    pub host_b: String,
    pub local_a: u64,
    pub local_b: u64,
    pub gpu_a: Option<String>,
    pub gpu_b: Option<String>,
    pub nic_a: Option<String>,
    pub nic_b: Option<String>,
    /// At `--level rail`: the rail (the local index both share).
    pub rail: Option<u64>,
    pub class: PairClass,
    pub size_bytes: u64,
    pub latency_bytes: u64,
    pub samples: u64,
}

/// One metric's columns: its estimate's median, 95% interval and MAD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MetricColumns {
    pub median: Option<f64>,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    pub mad: Option<f64>,
}

impl MetricColumns {
    fn of(e: Option<&Estimate>) -> MetricColumns {
        match e {
            Some(e) => MetricColumns {
                median: Some(e.median),
                lo: e.lo,
                hi: e.hi,
                mad: Some(e.mad),
            },
            None => MetricColumns::default(),
        }
    }

    /// In the order of `Metric::columns`.
    fn values(&self) -> [Option<f64>; 4] {
        [self.median, self.lo, self.hi, self.mad]
    }
}

/// The columns after the metrics': the check, and how the run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunColumns {
    /// Mismatching received elements; empty when not checked.
    pub wrong: Option<u64>,
    pub collbench_version: String,
    pub backend: String,
    pub backend_version: String,
    pub timing: Option<TimingMethod>,
    pub iters: u64,
    pub warmup: u64,
    pub isolated: bool,
    pub label: Option<String>,
}

/// The pair's columns, in order (`PairColumns`' field names).
const PAIR_COLUMNS: [&str; 21] = [
    "run_id",
    "timestamp",
    "level",
    "phase",
    "round",
    "concurrent",
    "rank_a",
    "rank_b",
    "host_a",
    "host_b",
    "local_a",
    "local_b",
    "gpu_a",
    "gpu_b",
    "nic_a",
    "nic_b",
    "rail",
    "class",
    "size_bytes",
    "latency_bytes",
    "samples",
];

/// The run's columns, in order (`RunColumns`' field names).
const RUN_COLUMNS: [&str; 9] = [
    "wrong",
    "collbench_version",
    "backend",
    "backend_version",
    "timing",
    "iters",
    "warmup",
    "isolated",
    "label",
];

/// The columns, in order.
pub fn columns() -> Vec<String> {
    let metrics = Metric::ALL.into_iter().flat_map(Metric::columns);
    let pair = PAIR_COLUMNS.into_iter().map(String::from);
    pair.chain(metrics)
        .chain(RUN_COLUMNS.into_iter().map(String::from))
        .collect()
}

/// A CSV record as `PairRow::record` writes it and `read_csv` reads it.
type Record = (PairColumns, [MetricColumns; Metric::ALL.len()], RunColumns);

impl PairRow {
    /// The row of one measured pair.
    pub fn of(r: &PairResult, matrix: &Matrix, layout: &Layout, concurrent: usize, meta: &RunMeta) -> PairRow {
        let (a, b) = (&matrix.endpoints[r.pair.a], &matrix.endpoints[r.pair.b]);
        let probe = &matrix.probe;
        let pair = PairColumns {
            run_id: meta.run_id.clone(),
            timestamp: meta.timestamp.clone(),
            level: matrix.level,
            phase: r.phase,
            round: r.round as u64,
            concurrent: concurrent as u64,
            rank_a: a.rank as u64,
            rank_b: b.rank as u64,
            host_a: a.host.clone(),
            host_b: b.host.clone(),
            local_a: a.local as u64,
            local_b: b.local as u64,
            gpu_a: a.gpu.clone(),
            gpu_b: b.gpu.clone(),
            nic_a: a.nic.clone(),
            nic_b: b.nic.clone(),
            rail: (matrix.level == Level::Rail).then_some(a.local as u64),
            class: layout.class(a.rank, b.rank),
            size_bytes: probe.size_bytes,
            latency_bytes: probe.latency_bytes,
            samples: r.estimate(Metric::Uni).map_or(0, |e| e.n) as u64,
        };
        let run = RunColumns {
            wrong: r.wrong,
            collbench_version: meta.collbench_version.clone(),
            backend: meta.backend.clone(),
            backend_version: meta.backend_version.clone(),
            timing: meta.timing,
            iters: probe.iters as u64,
            warmup: probe.warmup as u64,
            isolated: matrix.isolated,
            label: meta.label.clone(),
        };
        PairRow {
            pair,
            metrics: PerMetric::from_fn(|m| MetricColumns::of(r.estimate(m))),
            run,
        }
    }

    /// Its CSV record: every column's value, in `columns()`' order.
    pub fn record(&self) -> impl Serialize + '_ {
        (&self.pair, self.metrics.values(), &self.run)
    }

    /// Its JSON object: every column under its name.
    pub fn json(&self) -> serde_json::Value {
        let mut object = serde_json::Map::new();
        for part in [serde_json::to_value(&self.pair), serde_json::to_value(&self.run)] {
            if let Ok(serde_json::Value::Object(fields)) = part {
                object.extend(fields);
            }
        }
        for (metric, cells) in self.metrics.iter() {
            for (name, value) in metric.columns().into_iter().zip(cells.values()) {
                object.insert(name, serde_json::json!(value));
            }
        }
        serde_json::Value::Object(object)
    }
}

/// Every measured pair of `matrix` as rows, in the order measured.
pub fn rows(matrix: &Matrix, layout: &Layout, meta: &RunMeta) -> Vec<PairRow> {
    let mut per_round: BTreeMap<usize, usize> = BTreeMap::new();
    for r in &matrix.pairs {
        *per_round.entry(r.round).or_default() += 1;
    }
    matrix
        .pairs
        .iter()
        .map(|r| PairRow::of(r, matrix, layout, per_round[&r.round], meta))
        .collect()
}

/// The pairs CSV: the header, then every row.
pub fn write_csv<W: io::Write>(out: W, rows: &[PairRow]) -> Result<(), csv::Error> {
    let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(out);
    w.write_record(columns())?;
    for r in rows {
        w.serialize(r.record())?;
    }
    w.flush()?;
    Ok(())
}

/// Reads a pairs CSV back; an error names the line.
pub fn read_csv<R: io::Read>(input: R) -> Result<Vec<PairRow>, String> {
    let mut reader = csv::Reader::from_reader(input);
    let header = reader.headers().map_err(|e| e.to_string())?.clone();
    if header.iter().ne(columns().iter().map(String::as_str)) {
        return Err("not a links pairs CSV: its header differs from docs/links.md".into());
    }
    reader
        .records()
        .enumerate()
        .map(|(i, record)| {
            let (pair, metrics, run) = record
                .and_then(|r| r.deserialize::<Record>(None))
                .map_err(|e| format!("line {}: {e}", i + 2))?;
            Ok(PairRow {
                pair,
                metrics: PerMetric::from_array(metrics),
                run,
            })
        })
        .collect()
}

/// The JSON document: the run, the schedule, the endpoints and layout,
/// every row, the rule's references and judgements, and the finder's
/// report (`null` when only the matrix was measured).
pub fn json(
    meta: &RunMeta,
    matrix: &Matrix,
    layout: &Layout,
    analysis: &Analysis,
    report: Option<&Report>,
) -> serde_json::Value {
    serde_json::json!({
        "schema_version": SCHEMA_VERSION,
        "kind": "links",
        "run": meta,
        "probe": matrix.probe,
        "level": matrix.level,
        "isolated": matrix.isolated,
        "endpoints": matrix.endpoints,
        "layout": layout,
        "pairs": rows(matrix, layout, meta).iter().map(PairRow::json).collect::<Vec<_>>(),
        "references": analysis.references,
        "suspect_units": analysis.unit_suspects().collect::<Vec<_>>(),
        "suspect_pairs": analysis.pair_suspects().collect::<Vec<_>>(),
        "report": report,
    })
}

/// Largest launch whose matrix is printed as text.
pub const MATRIX_TEXT_MAX: usize = 16;

/// Three significant figures below 1 (a slow link at 0.011 GB/s must not
/// read 0.0), one decimal up to 100, none above.
fn fmt_value(metric: Metric, v: f64) -> String {
    match metric {
        _ if v > 0.0 && v < 0.01 => format!("{v:.4}"),
        _ if v > 0.0 && v < 1.0 => format!("{v:.3}"),
        Metric::Latency if v < 10.0 => format!("{v:.2}"),
        _ if v < 100.0 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// The matrix of one metric as text, in display order, `!` after a pair
/// the rule flags, `?` after one too noisy to judge (worse than its ends
/// predict by more than the rule's percentage, but not by its spreads);
/// None above `MATRIX_TEXT_MAX` measured ranks.
pub fn matrix_text(matrix: &Matrix, layout: &Layout, analysis: &Analysis, metric: Metric) -> Option<String> {
    let n = layout.order.len();
    if n > MATRIX_TEXT_MAX {
        return None;
    }
    let values: BTreeMap<Pair, f64> = matrix
        .pairs
        .iter()
        .filter(|p| p.phase == Phase::Matrix)
        .filter_map(|p| Some((p.pair, p.estimate(metric)?.median)))
        .collect();
    let names: Vec<String> = layout
        .order
        .iter()
        .map(|&r| {
            let e = &matrix.endpoints[r];
            if matrix.level == Level::Node {
                e.host.clone()
            } else {
                format!("{}:{}", e.host, e.local)
            }
        })
        .collect();
    let width = names.iter().map(|s| s.len()).max().unwrap_or(0);
    let noisy: std::collections::BTreeSet<Pair> = analysis
        .noisy_pairs()
        .filter(|c| c.metric == metric)
        .map(|c| c.pair)
        .collect();
    let mut s = format!(
        "{} ({}), median of {} samples; ! = flagged by the rule, ? = too noisy to judge\n",
        metric.label(),
        metric.unit(),
        matrix.probe.samples
    );
    let _ = write!(s, "{:>w$}", "", w = width + 5);
    for i in 0..n {
        let _ = write!(s, "{i:>7}");
    }
    s.push('\n');
    for (i, &x) in layout.order.iter().enumerate() {
        let _ = write!(s, "{i:>3}  {:<width$}", names[i]);
        for &y in &layout.order {
            let cell = if x == y {
                ".".to_string()
            } else {
                let p = Pair::new(x, y);
                match values.get(&p) {
                    Some(v) => {
                        let mark = match analysis.check(p, metric) {
                            Some(c) if c.low => "!",
                            _ if noisy.contains(&p) => "?",
                            _ => " ",
                        };
                        format!("{}{mark}", fmt_value(metric, *v))
                    }
                    None => "-".to_string(),
                }
            };
            let _ = write!(s, "{cell:>7}");
        }
        s.push('\n');
    }
    Some(s)
}

/// One rail's summary at `--level rail`: one row per group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RailRow {
    pub rail: usize,
    pub pairs: usize,
    pub median_gbps: f64,
    pub worst: Option<(Pair, f64)>,
    pub flagged: usize,
}

pub fn rail_rows(matrix: &Matrix, analysis: &Analysis) -> Vec<RailRow> {
    let mut by_rail: BTreeMap<usize, Vec<(Pair, f64)>> = BTreeMap::new();
    for p in matrix.pairs.iter().filter(|p| p.phase == Phase::Matrix) {
        if let Some(e) = p.estimate(Metric::Uni) {
            by_rail
                .entry(matrix.endpoints[p.pair.a].local)
                .or_default()
                .push((p.pair, e.median));
        }
    }
    by_rail
        .into_iter()
        .map(|(rail, pairs)| {
            let values: Vec<f64> = pairs.iter().map(|p| p.1).collect();
            RailRow {
                rail,
                pairs: pairs.len(),
                median_gbps: Estimate::of(&values).map_or(f64::NAN, |e| e.median),
                worst: pairs.iter().copied().min_by(|a, b| a.1.total_cmp(&b.1)),
                flagged: pairs
                    .iter()
                    .filter(|p| {
                        Metric::ALL
                            .iter()
                            .any(|m| analysis.check(p.0, *m).is_some_and(|c| c.low))
                    })
                    .count(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
