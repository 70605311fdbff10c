//! The finder's report as text: the headline of each finding, the retests
//! and bisection steps behind it, in the words docs/links.md uses.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{fmt_value, rail_rows};
use crate::links::finder::{BisectStep, Evidence, Finding, FindingKind, Measured, Report, Retest, Rounds};
use crate::links::layout::PairClass;
use crate::links::measure::{Matrix, Phase};
use crate::links::rule::{Analysis, Metric, Rule};
use crate::links::schedule::Level;
use crate::record::human_size;

fn interval(lo: Option<f64>, hi: Option<f64>, metric: Metric) -> String {
    match (lo, hi) {
        (Some(l), Some(h)) => format!(" (95% interval {}-{})", fmt_value(metric, l), fmt_value(metric, h)),
        _ => " (too few samples for an interval)".into(),
    }
}

fn worse_word(metric: Metric) -> &'static str {
    if metric.spec().lower_is_better {
        "worse than"
    } else {
        "below"
    }
}

/// `38% below` (`worse than` for a latency), or `38% better than` where
/// the value is better than the reference (a negative deficit).
fn gap(metric: Metric, deficit_pct: f64) -> String {
    let word = if deficit_pct >= 0.0 {
        worse_word(metric)
    } else {
        "better than"
    };
    format!("{:.0}% {word}", deficit_pct.abs())
}

/// A rank in one line: its host at `--level node`, else host and rank.
pub(in crate::links) fn short(matrix: &Matrix, rank: usize) -> String {
    let e = &matrix.endpoints[rank];
    if matrix.level == Level::Node {
        e.host.clone()
    } else {
        format!("{} rank {}", e.host, e.rank)
    }
}

/// A median against its reference, the start of an evidence and a
/// re-test line: `uni 31.4 GB/s (95% interval 31.1-32.5), 34% below the
/// 47.3 GB/s`.
fn against(m: &Measured) -> String {
    let (metric, unit) = (m.metric, m.metric.unit());
    format!(
        "{metric} {} {unit}{}, {} the {} {unit}",
        fmt_value(metric, m.value),
        interval(m.lo, m.hi, metric),
        gap(metric, m.deficit_pct),
        fmt_value(metric, m.reference),
    )
}

fn retest_line(r: &Retest, matrix: &Matrix) -> String {
    format!(
        "round {}: {} - {}: {} expected: {}",
        r.round,
        short(matrix, r.pair.a),
        short(matrix, r.pair.b),
        against(&r.measured),
        if r.low { "slow again" } else { "not slow" }
    )
}

/// How `host`'s own pairs looked in the matrix, for a finding that says
/// they looked fine: `None` when none of them was flagged or too noisy
/// to judge, else how many of each.
fn own_pairs(host: &str, matrix: &Matrix, analysis: &Analysis) -> Option<String> {
    let mine = |c: &&crate::links::rule::PairCheck| {
        [c.pair.a, c.pair.b]
            .iter()
            .any(|&r| matrix.endpoints.get(r).is_some_and(|e| e.host == host))
    };
    let mut low: Vec<_> = analysis.pair_suspects().filter(mine).map(|c| c.pair).collect();
    let mut noisy: Vec<_> = analysis.noisy_pairs().filter(mine).map(|c| c.pair).collect();
    low.dedup();
    noisy.retain(|p| !low.contains(p));
    noisy.dedup();
    if low.is_empty() && noisy.is_empty() {
        return None;
    }
    Some(format!(
        "in the matrix, {} of its pairs were low and {} too noisy to judge",
        low.len(),
        noisy.len()
    ))
}

/// A finding's first line, in the words docs/links.md uses ("SUSPECT node
/// H: slow with most partners"); a host that slows collectives is said
/// to have fine pairs only where none of them was low or too noisy; a
/// node or GPU named from its pairs' re-tests says so.
pub fn headline(f: &Finding, matrix: &Matrix, analysis: &Analysis) -> String {
    let who: Vec<String> = f.endpoints.iter().map(|e| e.name()).collect();
    let line = match f.kind {
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
        FindingKind::Collective => match own_pairs(&f.hosts[0], matrix, analysis) {
            None => format!(
                "SUSPECT collective: host {} slows all-reduces on every subset it is in, while its pairs look fine",
                f.hosts[0]
            ),
            Some(pairs) => format!(
                "SUSPECT collective: host {} slows all-reduces on every subset it is in; {pairs}",
                f.hosts[0]
            ),
        },
    };
    if f.links.is_empty() {
        return line;
    }
    let links: Vec<String> = f
        .links
        .iter()
        .map(|p| format!("{} - {}", short(matrix, p.a), short(matrix, p.b)))
        .collect();
    format!(
        "{line}: its pairs {} slow when re-tested, and none of its re-tests fine",
        links.join(", ")
    )
}

/// One metric's evidence of a finding, one line: its value and interval,
/// how far below comparable pairs, low partners and worst pairs.
pub fn evidence_line(e: &Evidence) -> String {
    let worst: Vec<String> = e
        .worst
        .iter()
        .map(|(p, v)| format!("{p} {}", fmt_value(e.measured.metric, *v)))
        .collect();
    format!(
        "{} median of {} pairs{}{}",
        against(&e.measured),
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
    )
}

/// The report as text: what ran, the references, each finding with its
/// evidence and re-tests, the dismissed suspects, the bisection, notes.
pub fn report_text(report: &Report, matrix: &Matrix, analysis: &Analysis) -> String {
    let mut s = String::new();
    write_run(&mut s, report, matrix);
    write_references(&mut s, report);
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
    if let Some(line) = noisy_line(matrix, analysis) {
        let _ = writeln!(s, "{line}");
    }
    for f in &report.findings {
        write_finding(&mut s, f, matrix, analysis);
    }
    write_dismissed(&mut s, report);
    if !report.bisection.is_empty() && !report.findings.iter().any(|f| f.kind == FindingKind::Collective) {
        let _ = writeln!(s, "\nbisection:");
        for step in &report.bisection {
            let _ = writeln!(s, "  {}", step_line(step));
        }
    }
    if report.level == Level::Rail {
        write_rails(&mut s, matrix, analysis);
    }
    for n in &report.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// The first two lines: what ran (ranks, hosts, level, schedule, probe)
/// and which measurer measured it.
fn write_run(s: &mut String, report: &Report, matrix: &Matrix) {
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
}

/// One line per pair class: the reference medians of each metric.
fn write_references(s: &mut String, report: &Report) {
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
}

/// A finding: its headline, then its evidence, re-tests and bisection
/// steps, indented.
fn write_finding(s: &mut String, f: &Finding, matrix: &Matrix, analysis: &Analysis) {
    let _ = writeln!(s, "{}", headline(f, matrix, analysis));
    for e in &f.evidence {
        let _ = writeln!(s, "  {}", evidence_line(e));
    }
    for r in &f.retests {
        let _ = writeln!(s, "  re-test {}", retest_line(r, matrix));
    }
    for step in &f.steps {
        let _ = writeln!(s, "  bisection {}", step_line(step));
    }
}

/// What the rule could not judge, one line (`None` when nothing): the
/// ranks and pairs worse than comparable pairs by more than the rule's
/// percentage but not by its spreads (`?` in the matrix).
pub fn noisy_line(matrix: &Matrix, analysis: &Analysis) -> Option<String> {
    let mut ranks: Vec<String> = analysis.noisy_units().map(|u| short(matrix, u.rank)).collect();
    ranks.dedup();
    let mut pairs: Vec<String> = analysis
        .noisy_pairs()
        .map(|p| format!("{} - {}", short(matrix, p.pair.a), short(matrix, p.pair.b)))
        .collect();
    pairs.sort();
    pairs.dedup();
    if ranks.is_empty() && pairs.is_empty() {
        return None;
    }
    let rule = analysis.rule.unwrap_or(Rule::DEFAULT);
    let list = |v: &[String]| {
        let mut t = v.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
        if v.len() > 5 {
            let _ = write!(t, " and {} more", v.len() - 5);
        }
        t
    };
    let mut parts = Vec::new();
    if !ranks.is_empty() {
        parts.push(format!(
            "{} ({})",
            if matrix.level == Level::Node { "nodes" } else { "ranks" },
            list(&ranks)
        ));
    }
    if !pairs.is_empty() {
        parts.push(format!("pairs ({})", list(&pairs)));
    }
    Some(format!(
        "too noisy to judge: {}: more than {}% and {} robust spreads worse than comparable pairs, not the {} \
         the rule names (? in the matrix); neither named nor fine",
        parts.join(" and "),
        rule.min_deficit_pct,
        crate::links::rule::DOUBT * rule.spreads,
        rule.spreads
    ))
}

/// The suspects the re-tests dismissed: the first ten, then a count.
fn write_dismissed(s: &mut String, report: &Report) {
    if !report.dismissed.is_empty() {
        let _ = writeln!(s, "\ndismissed after re-tests: {}", report.dismissed.len());
        for d in report.dismissed.iter().take(10) {
            let _ = writeln!(s, "  {}: {}", d.what, d.why);
        }
        if report.dismissed.len() > 10 {
            let _ = writeln!(s, "  ... and {} more (in the JSON report)", report.dismissed.len() - 10);
        }
    }
}

/// The per-rail summary printed at `--level rail`.
fn write_rails(s: &mut String, matrix: &Matrix, analysis: &Analysis) {
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

fn step_line(step: &BisectStep) -> String {
    let parts: Vec<String> = step
        .subsets
        .iter()
        .zip(&step.busbw)
        .map(|((what, hosts), e)| {
            let v = e.map_or("-".into(), |e| fmt_value(Metric::Uni, e.median));
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
    use super::*;

    /// A value better than its reference (a negative deficit) reads so; it
    /// read `-38% below`.
    #[test]
    fn a_gap_says_below_or_better_by_its_sign() {
        assert_eq!(gap(Metric::Uni, 38.3), "38% below");
        assert_eq!(gap(Metric::Uni, -38.3), "38% better than");
        assert_eq!(gap(Metric::Latency, 8.2), "8% worse than");
        assert_eq!(gap(Metric::Latency, -8.2), "8% better than");
    }
}
