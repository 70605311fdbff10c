//! The text around a run's table: the header (what ran where, and how it
//! was measured) and the footer (nccl-tests' average bus bandwidth line,
//! then the verdict, stragglers and out-of-bounds counts).

use super::{Mean, g6};
use crate::engine::Summary;
use crate::report::{RunInfo, SweepInfo};
use crate::types::human_bytes;

/// Ranks listed one per line in the header; larger jobs are summarised.
const MAX_LISTED_RANKS: usize = 64;

/// What the bandwidths of a one-rank run are (header and footer).
const ONE_RANK: &str = "no data crosses a link: each collective copies (or leaves) this rank's own buffer, so \
algbw is the speed of that local copy and busbw is not a link's bandwidth: 0 where the bus factor is (n-1)/n \
(all_reduce, all_gather, reduce_scatter, alltoall, gather, scatter), the local copy's speed where it is 1 \
(broadcast, reduce, sendrecv)";

/// The run header: what ran where, and how it was measured.
pub fn run_header(run: &RunInfo) -> String {
    let mut s = format!("# collbench {}  run {}\n", run.collbench_version, run.run_id);
    let command: Vec<String> = run.command_line.iter().map(|a| shell_quote(a)).collect();
    s += &format!("# command   : {}\n", command.join(" "));
    s += &format!("# backend   : {} ({})", run.backend, run.backend_version);
    if let Some(note) = &run.backend_note {
        s += &format!("  [{note}]");
    }
    s += "\n";
    if run.backend_version.ends_with("-sim") {
        // tests/gpu-sim: the GPUs and NCCL are simulated on the host.
        s += "# SIMULATED : host GPU simulation (tests/gpu-sim); no figure below is a measurement\n";
    }
    s += &format!(
        "# ranks     : {} on {} {}node{} ({} per node), host{}: {}\n",
        run.nranks,
        run.nnodes,
        if run.virtual_nodes { "virtual " } else { "" },
        if run.nnodes == 1 { "" } else { "s" },
        run.ranks_per_node,
        if run.hosts.len() == 1 { "" } else { "s" },
        run.hosts.join(", ")
    );
    if run.nranks == 1 {
        s += &format!("# one rank  : {}\n", ONE_RANK);
    }
    if let Some(label) = &run.label {
        s += &format!("# label     : {label}\n");
    }
    if run.hierarchy != "flat" {
        s += &format!("# hierarchy : all_reduce as {}\n", run.hierarchy);
    }
    s += &measure_lines(run);
    s += &format!("# sizes     : {}\n", sizes_text(&run.sweep));
    if let Some(traffic) = &run.traffic {
        s += &format!("# alltoallv : {traffic}\n");
    }
    s += &format!("# plan      : {} points per sweep\n", run.points);
    s += &format!(
        "# transport : {}, observed {}   control plane: {}\n",
        run.transport, run.transport_observed, run.control_plane
    );
    for note in &run.transport_notes {
        s += &format!("#             {note}\n");
    }
    for note in &run.notes {
        s += &format!("# note      : {note}\n");
    }
    s += &format!("# csv       : {}\n", run.csv.display());
    if let Some(json) = &run.json {
        s += &format!("# json      : {}\n", json.display());
    }
    s += "#\n";
    s += &rank_lines(run);
    s
}

/// The header's `# measure` line, and its launch extras' line where there
/// are any.
fn measure_lines(run: &RunInfo) -> String {
    let mut s = String::new();
    let iters = run.timing.iterations.describe();
    s += &format!(
        "# measure   : {iters}, warmup {}, check {}, time reduction {}, timing {}{}{}\n",
        run.timing.warmup,
        run.timing.check,
        run.timing.average,
        if run.timing.blocking {
            "blocking (barrier before each op)"
        } else {
            "back-to-back (nccl-tests)"
        },
        if run.timing.rotate { ", buffers rotate" } else { "" },
        if run.timing.per_iter {
            ", per-iteration statistics"
        } else {
            ""
        },
    );
    if let Some(extras) = launch_extras(run.timing.agg_iters, run.timing.cuda_graph) {
        s += &format!("#             {extras}\n");
    }
    s
}

/// The header's ranks, one per line, up to `MAX_LISTED_RANKS`.
fn rank_lines(run: &RunInfo) -> String {
    let mut s = String::new();
    for r in run.ranks.iter().take(MAX_LISTED_RANKS) {
        s += &format!("#  Rank {:>4} on {} pid {}", r.rank, r.host, r.pid);
        if let Some(gpu) = &r.gpu {
            s += &format!(" gpu {gpu}");
        }
        s += "\n";
    }
    if run.ranks.len() > MAX_LISTED_RANKS {
        s += &format!("#  ... and {} more ranks\n", run.ranks.len() - MAX_LISTED_RANKS);
    }
    s
}

/// nccl-tests' options line for sizes, the sizes asked for as it prints
/// them, then the range measured in binary units and the number of sizes:
/// `minBytes 8 maxBytes 65536 step: 4(factor) (8 B to 32.0 KiB, 7 sizes)`.
fn sizes_text(sweep: &SweepInfo) -> String {
    format!(
        "minBytes {} maxBytes {} step: {} ({} to {}, {} size{})",
        sweep.requested_min_bytes,
        sweep.requested_max_bytes,
        crate::report::step_name(sweep.step),
        human_bytes(sweep.min_bytes),
        human_bytes(sweep.max_bytes),
        sweep.sizes,
        if sweep.sizes == 1 { "" } else { "s" }
    )
}

/// `arg` as a shell would need it, so that an echoed command line can be
/// pasted back.
pub fn shell_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./,:=+@%^".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// nccl-tests' `-m` and `-G`, when used: how many operations each timed
/// measurement divides by. (`-R` shows as a backend note.)
pub(super) fn launch_extras(agg_iters: u32, cuda_graph: u32) -> Option<String> {
    let mut parts = Vec::new();
    let mut divisor = "iters".to_string();
    if agg_iters > 1 {
        parts.push(format!("{agg_iters} operations per iteration in one NCCL group (-m)"));
        divisor += &format!(" x {agg_iters}");
    }
    if cuda_graph > 0 {
        parts.push(format!(
            "iterations captured in a CUDA graph, replayed {cuda_graph} time{} (-G)",
            if cuda_graph == 1 { "" } else { "s" }
        ));
        divisor += &format!(" x {cuda_graph}");
    }
    if parts.is_empty() {
        return None;
    }
    Some(format!("{}; time per op = elapsed / ({divisor})", parts.join(", ")))
}

/// The slow-rank verdict: "rank 1 on node-b arrived late at 23 of 24
/// checked points at sizes >= 1.0 MiB (sign test p = 1.5e-6), its own work
/// 3.1x the other ranks' median: the others waited for it (arrival skew)".
fn straggler_text(run: &RunInfo, summary: &Summary) -> String {
    slow_rank_text(summary.straggler.as_ref(), run.timing.straggler_threshold_pct, |rank| {
        run.ranks.get(rank).map_or("?", |r| r.host.as_str()).to_string()
    })
}

/// `straggler_text` of a verdict, a threshold in percent, and the host of
/// each rank. Every line names its signal (arrival skew) and says, where no
/// rank is named, whether none was late or the points cannot tell.
pub(super) fn slow_rank_text(
    verdict: Option<&crate::engine::straggler::SlowRank>,
    threshold: f64,
    host_of: impl Fn(usize) -> String,
) -> String {
    use crate::engine::straggler::SlowRank;
    match verdict {
        None => "cannot tell (arrival skew): not measured".into(),
        Some(SlowRank::NotJudged(why)) => format!("cannot tell (arrival skew): {why}"),
        Some(SlowRank::NoneFound { points }) => format!(
            "none (arrival skew): no rank arrived late (over {threshold}% behind the others' median for the \
             same work) significantly often at {points} checked points"
        ),
        Some(SlowRank::Named(s)) => {
            let host = host_of(s.rank);
            let at = if s.every_size {
                "at every size".to_string()
            } else {
                format!("at sizes >= {}", crate::types::human_bytes(s.from_size))
            };
            format!(
                "rank {} on {host} arrived late at {} of {} checked points {at} (sign test p = {:.1e}), its own \
                 work {:.1}x the other ranks' median: the others waited for it (arrival skew)",
                s.rank,
                s.late,
                s.points,
                s.p_value,
                s.work_factor()
            )
        }
    }
}

/// nccl-tests' exact line (`awk '{print $NF}'` reads the value), then what
/// it averages over, on a line of its own.
pub(super) fn footer_average(all_busbw: &Mean) -> String {
    format!(
        "# {:<20} : {}\n# {:<20} : {}\n",
        "Avg bus bandwidth",
        g6(all_busbw.value()),
        "Points averaged",
        all_busbw.count
    )
}

/// nccl-tests' line before its average (`# Out of bounds values : 0 OK`),
/// which its parsers read: the points (size and placement) whose check
/// found a wrong element, as nccl-tests counts them; 0 OK when nothing
/// was checked, as there (our `Validation` line says so).
pub(super) fn out_of_bounds(summary: &Summary) -> String {
    let n = summary.failed_points;
    format!(
        "# {:<20} : {n} {}\n",
        "Out of bounds values",
        if n == 0 { "OK" } else { "FAILED" }
    )
}

/// The footer: overall average bus bandwidth and the validation verdict.
pub fn run_footer(all_busbw: &Mean, run: &RunInfo, summary: &Summary) -> String {
    let verdict = if run.timing.check == 0 {
        "off (--check 0)".to_string()
    } else if summary.wrong == 0 {
        format!("OK, 0 wrong elements in {} checked points", summary.checked_points)
    } else {
        format!(
            "FAILED, {} wrong elements in {} of {} checked points",
            summary.wrong, summary.failed_points, summary.checked_points
        )
    };
    let mut s = format!("#\n{}{}", out_of_bounds(summary), footer_average(all_busbw));
    if run.nranks == 1 {
        s += &format!(
            "# {:<20} : no data crossed a link; the bus bandwidths above are not a link's (see the header)\n",
            "One rank"
        );
    }
    s += &format!("# {:<20} : {verdict}\n", "Validation");
    if run.timing.per_iter && summary.stopped_by.is_none() {
        s += &format!("# {:<20} : {}\n", "Stragglers", straggler_text(run, summary));
    }
    for line in &run.nccl_log_lines {
        s += line;
        s.push('\n');
    }
    if let Some(signal) = summary.stopped_by {
        s += &format!(
            "# {:<20} : incomplete, stopped by {} after {} points\n",
            "Run",
            crate::engine::stop::signal_name(signal),
            summary.points
        );
    }
    s += "#\n";
    s
}
