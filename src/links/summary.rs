//! What `collbench links` prints around the matrix: the header (who
//! measured what, how, where the files go) and, without `--find`, what the
//! rule flags in the matrix alone. Formats only.

use std::fmt::Write as _;

use super::measure::{Matrix, Probe};
use super::output::short;
use super::rule::Analysis;
use super::schedule::{Level, Schedule};
use crate::record::human_size;

/// The facts the header states, gathered by the caller.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Header {
    pub run_id: String,
    pub command: String,
    /// `mpi (Open MPI v4.1.4)`, with the reason for `auto`'s choice.
    pub backend: String,
    pub control_plane: String,
    pub ranks: usize,
    /// The hosts (or `--ranks-per-node` nodes), in rank order.
    pub hosts: Vec<String>,
    pub virtual_nodes: bool,
    /// Validated exchanges per pair (0: none).
    pub check: u32,
    /// Where racks and leaves come from (`--topology FILE`, a pattern).
    pub topology: Option<String>,
    pub csv: Option<String>,
    pub json: Option<String>,
    pub heatmap: Option<String>,
    pub label: Option<String>,
}

/// At most `n` names, then how many more.
fn names(list: &[String], n: usize) -> String {
    let mut s = list.iter().take(n).cloned().collect::<Vec<_>>().join(", ");
    if list.len() > n {
        let _ = write!(s, " and {} more", list.len() - n);
    }
    s
}

/// The header lines (`# ` first, as a run's table header).
pub fn header_text(h: &Header, schedule: &Schedule, probe: &Probe) -> String {
    let mut s = String::new();
    let per_node = if h.hosts.is_empty() {
        0
    } else {
        h.ranks.div_ceil(h.hosts.len())
    };
    let pairs = schedule.pair_count();
    let widest = schedule.widest_round();
    let _ = writeln!(s, "# collbench {}  links {}", env!("CARGO_PKG_VERSION"), h.run_id);
    let _ = writeln!(s, "# command   : {}", h.command);
    let _ = writeln!(s, "# backend   : {}", h.backend);
    let _ = writeln!(
        s,
        "# ranks     : {} on {} {}{} ({per_node} per node), {}: {}   control plane: {}",
        h.ranks,
        h.hosts.len(),
        if h.virtual_nodes { "virtual node" } else { "node" },
        if h.hosts.len() == 1 { "" } else { "s" },
        if h.virtual_nodes { "nodes" } else { "hosts" },
        names(&h.hosts, 8),
        h.control_plane
    );
    let who = match schedule.level {
        Level::Node => "one rank per node".to_string(),
        Level::Rank => "every rank".to_string(),
        Level::Rail => format!("{} rails side by side", schedule.groups.len()),
    };
    let how = if schedule.isolated {
        "one pair at a time (isolated)".to_string()
    } else {
        format!("up to {widest} pair{} at once", if widest == 1 { "" } else { "s" })
    };
    let _ = writeln!(
        s,
        "# level     : {} ({who}): {} ranks, {pairs} pair{} in {} round{}, {how}",
        schedule.level,
        schedule.units().len(),
        if pairs == 1 { "" } else { "s" },
        schedule.rounds.len(),
        if schedule.rounds.len() == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        s,
        "# probe     : {} one way and both ways, {} ping-pong; {} sample{} of {} operations per pair and metric, warmup {}; {}",
        human_size(probe.size_bytes),
        human_size(probe.latency_bytes),
        probe.samples,
        if probe.samples == 1 { "" } else { "s" },
        probe.iters,
        probe.warmup,
        match h.check {
            0 => "received data not checked (-c 0)".to_string(),
            1 => "one validated exchange per pair".to_string(),
            n => format!("{n} validated exchanges per pair"),
        }
    );
    if let Some(t) = &h.topology {
        let _ = writeln!(s, "# topology  : {t}");
    }
    if let Some(l) = &h.label {
        let _ = writeln!(s, "# label     : {l}");
    }
    for (what, path) in [("csv", &h.csv), ("json", &h.json), ("heatmap", &h.heatmap)] {
        if let Some(p) = path {
            let _ = writeln!(s, "# {what:<10}: {p}");
        }
    }
    s.push_str("#\n");
    s
}

/// Without `--find`: the rule's verdict on the matrix alone, one line per
/// flagged rank or pair (at most 10 of each), or that nothing is flagged.
pub fn flagged_text(matrix: &Matrix, analysis: &Analysis) -> String {
    let mut s = String::new();
    let mut units: Vec<String> = Vec::new();
    for u in analysis.unit_suspects() {
        let line = format!(
            "{}: {} {:.0}% below comparable pairs, low with {} of {} partners",
            short(matrix, u.rank),
            u.metric,
            u.deficit_pct,
            u.low_partners,
            u.partners
        );
        if !units.contains(&line) {
            units.push(line);
        }
    }
    let pairs: Vec<String> = analysis
        .pair_suspects()
        .map(|p| {
            format!(
                "{} - {}: {} {:.0}% below what its ends predict",
                short(matrix, p.pair.a),
                short(matrix, p.pair.b),
                p.metric,
                p.deficit_pct
            )
        })
        .collect();
    if units.is_empty() && pairs.is_empty() {
        let rule = analysis.rule.unwrap_or(super::rule::Rule::DEFAULT);
        let _ = writeln!(
            s,
            "rule: no rank or pair is more than {}% and {} robust spreads worse than comparable pairs",
            rule.min_deficit_pct, rule.spreads
        );
    } else {
        let _ = writeln!(
            s,
            "rule: flagged in the matrix (not yet re-tested; --find re-tests each against known-good partners before naming it):"
        );
        for line in units.iter().take(10).chain(pairs.iter().take(10)) {
            let _ = writeln!(s, "  {line}");
        }
        let more = units.len().saturating_sub(10) + pairs.len().saturating_sub(10);
        if more > 0 {
            let _ = writeln!(s, "  ... and {more} more (in the JSON report)");
        }
    }
    if let Some(line) = super::output::noisy_line(matrix, analysis) {
        let _ = writeln!(s, "{line}");
    }
    for n in &analysis.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
