//! What the finder's results look like outside: the pairs CSV (one typed
//! row per measured pair, method columns as in run CSVs), the JSON
//! document, the matrix as text for small launches, the per-rail summary
//! and the report as text. Formats only: nothing here measures, judges
//! or opens a file (writers are handed in).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;

use serde::{Deserialize, Serialize};

use super::finder::{Finding, FindingKind, Report, Retest, Rounds};
use super::layout::{Layout, PairClass};
use super::measure::{Estimate, Matrix, PairResult, Phase};
use super::rule::{Analysis, Metric};
use super::schedule::{Level, Pair};
use crate::record::human_size;
use crate::types::TimingMethod;

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

/// One row of the pairs CSV (docs/links.md, "Pairs CSV").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PairRow {
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
    pub uni_gbps: Option<f64>,
    pub uni_lo_gbps: Option<f64>,
    pub uni_hi_gbps: Option<f64>,
    pub uni_mad_gbps: Option<f64>,
    pub bidi_gbps: Option<f64>,
    pub bidi_lo_gbps: Option<f64>,
    pub bidi_hi_gbps: Option<f64>,
    pub bidi_mad_gbps: Option<f64>,
    pub latency_us: Option<f64>,
    pub latency_lo_us: Option<f64>,
    pub latency_hi_us: Option<f64>,
    pub latency_mad_us: Option<f64>,
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

/// The columns, in order (the field names).
pub const COLUMNS: [&str; 42] = [
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
    "uni_gbps",
    "uni_lo_gbps",
    "uni_hi_gbps",
    "uni_mad_gbps",
    "bidi_gbps",
    "bidi_lo_gbps",
    "bidi_hi_gbps",
    "bidi_mad_gbps",
    "latency_us",
    "latency_lo_us",
    "latency_hi_us",
    "latency_mad_us",
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

type Quad = (Option<f64>, Option<f64>, Option<f64>, Option<f64>);

fn quad(e: Option<&Estimate>) -> Quad {
    match e {
        Some(e) => (Some(e.median), e.lo, e.hi, Some(e.mad)),
        None => (None, None, None, None),
    }
}

impl PairRow {
    /// The row of one measured pair.
    pub fn of(r: &PairResult, matrix: &Matrix, layout: &Layout, concurrent: usize, meta: &RunMeta) -> PairRow {
        let (a, b) = (&matrix.endpoints[r.pair.a], &matrix.endpoints[r.pair.b]);
        let (uni_gbps, uni_lo_gbps, uni_hi_gbps, uni_mad_gbps) = quad(r.uni.as_ref());
        let (bidi_gbps, bidi_lo_gbps, bidi_hi_gbps, bidi_mad_gbps) = quad(r.bidi.as_ref());
        let (latency_us, latency_lo_us, latency_hi_us, latency_mad_us) = quad(r.latency.as_ref());
        let probe = &matrix.probe;
        PairRow {
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
            samples: r.uni.map_or(0, |e| e.n) as u64,
            uni_gbps,
            uni_lo_gbps,
            uni_hi_gbps,
            uni_mad_gbps,
            bidi_gbps,
            bidi_lo_gbps,
            bidi_hi_gbps,
            bidi_mad_gbps,
            latency_us,
            latency_lo_us,
            latency_hi_us,
            latency_mad_us,
            wrong: r.wrong,
            collbench_version: meta.collbench_version.clone(),
            backend: meta.backend.clone(),
            backend_version: meta.backend_version.clone(),
            timing: meta.timing,
            iters: probe.iters as u64,
            warmup: probe.warmup as u64,
            isolated: matrix.isolated,
            label: meta.label.clone(),
        }
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
    w.write_record(COLUMNS)?;
    for r in rows {
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(())
}

/// Reads a pairs CSV back; an error names the line.
pub fn read_csv<R: io::Read>(input: R) -> Result<Vec<PairRow>, String> {
    let mut reader = csv::Reader::from_reader(input);
    let header = reader.headers().map_err(|e| e.to_string())?.clone();
    if header.iter().collect::<Vec<_>>() != COLUMNS {
        return Err("not a links pairs CSV: its header differs from docs/links.md".into());
    }
    reader
        .deserialize()
        .enumerate()
        .map(|(i, row)| row.map_err(|e| format!("line {}: {e}", i + 2)))
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
        "pairs": rows(matrix, layout, meta),
        "references": analysis.references,
        "suspect_units": analysis.unit_suspects().collect::<Vec<_>>(),
        "suspect_pairs": analysis.pair_suspects().collect::<Vec<_>>(),
        "report": report,
    })
}

/// Largest launch whose matrix is printed as text.
pub const MATRIX_TEXT_MAX: usize = 16;

fn fmt_value(metric: Metric, v: f64) -> String {
    match metric {
        Metric::Latency if v < 10.0 => format!("{v:.2}"),
        _ if v < 100.0 => format!("{v:.1}"),
        _ => format!("{v:.0}"),
    }
}

/// The matrix of one metric as text, in display order, `!` after a pair
/// the rule flags; None above `MATRIX_TEXT_MAX` measured ranks.
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
    let mut s = format!(
        "{} ({}), median of {} samples; ! = flagged by the rule\n",
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
                        let flag = analysis.check(p, metric).is_some_and(|c| c.low);
                        format!("{}{}", fmt_value(metric, *v), if flag { "!" } else { " " })
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
        if let Some(e) = p.uni {
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

fn interval(lo: Option<f64>, hi: Option<f64>, metric: Metric) -> String {
    match (lo, hi) {
        (Some(l), Some(h)) => format!(" (95% interval {}-{})", fmt_value(metric, l), fmt_value(metric, h)),
        _ => " (too few samples for an interval)".into(),
    }
}

fn worse_word(metric: Metric) -> &'static str {
    match metric {
        Metric::Latency => "worse than",
        _ => "below",
    }
}

/// A rank in one line: its host at `--level node`, else host and rank.
pub(super) fn short(matrix: &Matrix, rank: usize) -> String {
    let e = &matrix.endpoints[rank];
    if matrix.level == Level::Node {
        e.host.clone()
    } else {
        format!("{} rank {}", e.host, e.rank)
    }
}

fn retest_line(r: &Retest, matrix: &Matrix) -> String {
    format!(
        "round {}: {} - {}: {} {} {}{}, {:.0}% {} the {} {} expected: {}",
        r.round,
        short(matrix, r.pair.a),
        short(matrix, r.pair.b),
        r.metric,
        fmt_value(r.metric, r.value),
        r.metric.unit(),
        interval(r.lo, r.hi, r.metric),
        r.deficit_pct.abs(),
        if r.deficit_pct >= 0.0 {
            worse_word(r.metric)
        } else {
            "better than"
        },
        fmt_value(r.metric, r.reference),
        r.metric.unit(),
        if r.low { "slow again" } else { "not slow" }
    )
}

fn headline(f: &Finding) -> String {
    let who: Vec<String> = f.endpoints.iter().map(|e| e.name()).collect();
    match f.kind {
        FindingKind::Node if f.endpoints.len() > 1 => format!(
            "SUSPECT node {}: {} of its ranks slow with most partners ({})",
            f.hosts[0],
            f.endpoints.len(),
            f.endpoints
                .iter()
                .map(|e| e.rank.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        FindingKind::Node => format!("SUSPECT node {}: slow with most partners", who.join(", ")),
        FindingKind::Gpu => format!(
            "SUSPECT GPU or NIC of {}: slow with most partners, its host's other ranks fine",
            who.join(", ")
        ),
        FindingKind::Link => format!("SUSPECT link {}: slow together, each fine with others", who.join(" - ")),
        FindingKind::Collective => format!(
            "SUSPECT collective: host {} slows all-reduces on every subset it is in, while its pairs look fine",
            f.hosts[0]
        ),
    }
}

/// The report as text: what ran, the references, each finding with its
/// evidence and re-tests, the dismissed suspects, the bisection, notes.
pub fn report_text(report: &Report, matrix: &Matrix, analysis: &Analysis) -> String {
    let mut s = String::new();
    let schedule = format!(
        "{} round{} of up to {} pair{}",
        report.rounds.matrix,
        if report.rounds.matrix == 1 { "" } else { "s" },
        matrix
            .pairs
            .iter()
            .filter(|p| p.phase == Phase::Matrix)
            .fold(BTreeMap::<usize, usize>::new(), |mut m, p| {
                *m.entry(p.round).or_default() += 1;
                m
            })
            .values()
            .max()
            .copied()
            .unwrap_or(0),
        if report.isolated { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "links: {} rank{} on {} host{}, level {}{}, {} ({}, ping-pong of {}, {} samples per pair)",
        report.units,
        if report.units == 1 { "" } else { "s" },
        report.hosts,
        if report.hosts == 1 { "" } else { "s" },
        report.level,
        if report.isolated { ", isolated" } else { "" },
        schedule,
        human_size(matrix.probe.size_bytes),
        human_size(matrix.probe.latency_bytes),
        matrix.probe.samples
    );
    let _ = writeln!(s, "measured by: {}", report.measurer);
    let mut classes: Vec<PairClass> = Vec::new();
    for r in &report.references {
        if !classes.contains(&r.class) {
            classes.push(r.class);
        }
    }
    for class in classes {
        let parts: Vec<String> = report
            .references
            .iter()
            .filter(|r| r.class == class)
            .map(|r| format!("{} {} {}", r.metric, fmt_value(r.metric, r.median), r.metric.unit()))
            .collect();
        let pairs = report
            .references
            .iter()
            .find(|r| r.class == class)
            .map_or(0, |r| r.pairs);
        let _ = writeln!(
            s,
            "reference, {} pairs (median of {pairs}): {}",
            class.name(),
            parts.join(", ")
        );
    }
    let _ = writeln!(
        s,
        "rounds beyond the matrix: {} re-test, {} bisection ({} in all; target at most ceil(log2 {}) + 2 = {}); {:.1} s on the measurer's clock",
        report.rounds.confirm,
        report.rounds.bisect,
        report.rounds.beyond_matrix(),
        report.units,
        Rounds::bound(report.units),
        report.elapsed_s
    );
    s.push('\n');
    if report.findings.is_empty() {
        let _ = writeln!(
            s,
            "no suspect: no pair or rank was more than {}% and {} robust spreads worse than comparable pairs{}",
            report.rule.min_deficit_pct,
            report.rule.spreads,
            if report.dismissed.is_empty() {
                String::new()
            } else {
                format!(" after re-tests ({} dismissed)", report.dismissed.len())
            }
        );
    }
    for f in &report.findings {
        let _ = writeln!(s, "{}", headline(f));
        for e in &f.evidence {
            let worst: Vec<String> = e
                .worst
                .iter()
                .map(|(p, v)| format!("{p} {}", fmt_value(e.metric, *v)))
                .collect();
            let _ = writeln!(
                s,
                "  {} {} {}{}, {:.0}% {} the {} {} median of {} pairs{}{}",
                e.metric,
                fmt_value(e.metric, e.value),
                e.metric.unit(),
                interval(e.lo, e.hi, e.metric),
                e.deficit_pct,
                worse_word(e.metric),
                fmt_value(e.metric, e.reference),
                e.metric.unit(),
                e.class.name(),
                if e.pairs > 1 {
                    format!("; low with {} of {} partners", e.low_pairs, e.pairs)
                } else {
                    String::new()
                },
                if e.pairs > 1 {
                    format!("; worst {}", worst.join(", "))
                } else {
                    String::new()
                }
            );
        }
        for r in &f.retests {
            let _ = writeln!(s, "  re-test {}", retest_line(r, matrix));
        }
        for step in &f.steps {
            let _ = writeln!(s, "  bisection {}", step_line(step));
        }
    }
    if !report.dismissed.is_empty() {
        let _ = writeln!(s, "\ndismissed after re-tests: {}", report.dismissed.len());
        for d in report.dismissed.iter().take(10) {
            let _ = writeln!(s, "  {}: {}", d.what, d.why);
        }
        if report.dismissed.len() > 10 {
            let _ = writeln!(s, "  ... and {} more (in the JSON report)", report.dismissed.len() - 10);
        }
    }
    if !report.bisection.is_empty() && !report.findings.iter().any(|f| f.kind == FindingKind::Collective) {
        let _ = writeln!(s, "\nbisection:");
        for step in &report.bisection {
            let _ = writeln!(s, "  {}", step_line(step));
        }
    }
    if report.level == Level::Rail {
        let _ = writeln!(s, "\nper rail (unidirectional):");
        for r in rail_rows(matrix, analysis) {
            let worst = r
                .worst
                .map_or(String::new(), |(p, v)| format!(", slowest {p} {v:.1} GB/s"));
            let _ = writeln!(
                s,
                "  rail {}: {} pairs, median {:.1} GB/s{worst}, {} flagged",
                r.rail, r.pairs, r.median_gbps, r.flagged
            );
        }
    }
    for n in &report.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

fn step_line(step: &super::finder::BisectStep) -> String {
    let parts: Vec<String> = step
        .subsets
        .iter()
        .zip(&step.busbw)
        .map(|((what, hosts), e)| {
            let v = e.map_or("-".into(), |e| format!("{:.1}", e.median));
            format!(
                "{what} of {} host{} {v} GB/s",
                hosts.len(),
                if hosts.len() == 1 { "" } else { "s" }
            )
        })
        .collect();
    format!(
        "round {}: all-reduce busbw {}: {}",
        step.round,
        parts.join(", "),
        step.outcome
    )
}

#[cfg(test)]
mod tests {
    use super::super::finder::{FinderConfig, find};
    use super::super::sim::{Fault, SimCluster, SimConfig};
    use super::super::{Measurer, schedule};
    use super::*;

    fn outcome(nodes: usize, per: usize, level: Level, faults: Vec<Fault>) -> (super::super::finder::Outcome, Layout) {
        let mut sim = SimCluster::new(SimConfig::nodes(nodes, per), faults);
        let s = schedule::build(sim.endpoints(), level, false).unwrap();
        let layout = Layout::new(sim.endpoints(), &s.units(), sim.topology().as_ref());
        let o = find(&mut sim, &s, &layout, &FinderConfig::DEFAULT, &mut |_| {}).unwrap();
        (o, layout)
    }

    fn meta() -> RunMeta {
        RunMeta {
            run_id: "r1".into(),
            timestamp: "2025-01-01T00:00:00Z".into(),
            collbench_version: "0.1.0".into(),
            backend: "simulation".into(),
            backend_version: "links::sim".into(),
            timing: Some(TimingMethod::Batched),
            label: None,
        }
    }

    #[test]
    fn the_pairs_csv_has_its_header_and_reads_back_the_same_rows() {
        let (o, layout) = outcome(6, 1, Level::Node, vec![Fault::slow_node(2, 1.5)]);
        let rows = rows(&o.matrix, &layout, &meta());
        // 15 pairs of the matrix, then the re-tests
        assert!(rows.len() > 15);
        assert_eq!(rows.iter().filter(|r| r.phase == Phase::Matrix).count(), 15);
        assert!(
            rows.iter()
                .filter(|r| r.phase == Phase::Matrix)
                .all(|r| r.concurrent == 3)
        );
        let mut buf = Vec::new();
        write_csv(&mut buf, &rows).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
        assert!(
            text.lines()
                .nth(1)
                .unwrap()
                .starts_with("r1,2025-01-01T00:00:00Z,node,matrix,1,3,"),
            "{text}"
        );
        let back = read_csv(&buf[..]).unwrap();
        assert_eq!(back, rows);
        // the bandwidth columns hold the estimate's figures
        let first = &o.matrix.pairs[0];
        assert_eq!(rows[0].uni_gbps, first.uni.map(|e| e.median));
        assert_eq!(rows[0].bidi_lo_gbps, first.bidi.and_then(|e| e.lo));
        let bad = read_csv(&b"run_id,timestamp\nx,y\n"[..]).unwrap_err();
        assert!(bad.contains("not a links pairs CSV"), "{bad}");
        let mut cut = text.lines().take(2).collect::<Vec<_>>().join("\n");
        cut = cut.replace(",node,matrix,", ",nodes,matrix,");
        assert!(read_csv(cut.as_bytes()).unwrap_err().starts_with("line 2:"));
    }

    #[test]
    fn the_json_holds_the_rows_and_the_report() {
        let (o, layout) = outcome(6, 1, Level::Node, vec![]);
        let v = json(&meta(), &o.matrix, &layout, &o.analysis, Some(&o.report));
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["kind"], "links");
        assert_eq!(v["pairs"].as_array().unwrap().len(), o.matrix.pairs.len());
        assert_eq!(v["report"]["rounds"]["matrix"], 5);
        assert!(v["report"]["findings"].as_array().unwrap().is_empty());
    }

    #[test]
    fn the_matrix_prints_for_small_launches_and_flags_the_slow_pairs() {
        let (o, layout) = outcome(4, 1, Level::Node, vec![Fault::slow_link(1, 3, 2.0)]);
        let text = matrix_text(&o.matrix, &layout, &o.analysis, Metric::Uni).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2 + 4, "{text}");
        assert!(lines[3].contains('!') && lines[5].contains('!'), "{text}");
        assert_eq!(text.matches('!').count(), 2 + 1, "{text}");
        let (big, layout) = outcome(17, 1, Level::Node, vec![]);
        assert!(matrix_text(&big.matrix, &layout, &big.analysis, Metric::Uni).is_none());
    }

    #[test]
    fn the_report_names_the_node_with_evidence_or_says_no_suspect() {
        let (o, _) = outcome(8, 1, Level::Node, vec![Fault::slow_node(6, 1.5)]);
        let text = report_text(&o.report, &o.matrix, &o.analysis);
        assert!(
            text.contains("SUSPECT node l00-n006 (rank 6, local 0, GPU 0000:18:00.0, NIC mlx5_0)"),
            "{text}"
        );
        assert!(text.contains("low with 7 of 7 partners"), "{text}");
        assert!(text.contains("re-test round 8:"), "{text}");
        assert!(text.contains("simulation"), "{text}");
        let (o, _) = outcome(8, 1, Level::Node, vec![]);
        let text = report_text(&o.report, &o.matrix, &o.analysis);
        assert!(text.contains("\nno suspect: "), "{text}");
        assert!(text.contains("bisection:"), "{text}");
    }

    #[test]
    fn rails_get_one_summary_row_each() {
        let (o, _) = outcome(4, 2, Level::Rail, vec![Fault::slow_rank(3, 1.5)]);
        let rails = rail_rows(&o.matrix, &o.analysis);
        assert_eq!(rails.len(), 2);
        assert_eq!((rails[0].pairs, rails[1].pairs), (6, 6));
        // rank 3 is on rail 1
        assert!(rails[1].worst.unwrap().0.has(3));
        let text = report_text(&o.report, &o.matrix, &o.analysis);
        assert!(text.contains("per rail (unidirectional):\n  rail 0: 6 pairs"), "{text}");
    }
}
