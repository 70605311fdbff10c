//! The terminal table, in nccl-tests' layout: a header describing the run
//! (with the command line and the size range, as nccl-tests' options line),
//! then per collective one line per size with the out-of-place and in-place
//! time, algbw, busbw and #wrong side by side, a per-collective average bus
//! bandwidth, and a footer with the validation verdict (before it, with
//! several samples per point, each point's median and spread:
//! `report::samples`).
//!
//! Scripts written for nccl-tests read its footer with
//! `grep 'Avg bus bandwidth' | awk '{print $NF}'`, so that line is exactly
//! nccl-tests' (`# Avg bus bandwidth    : 1.23456`, the value as C's `%g`)
//! and everything else goes on lines of its own. Every cell keeps its
//! column's width whatever the value: a value too wide for its column
//! loses decimals, then switches to an exponent (the CSV keeps every digit).

use std::io::{self, Write};

use indicatif::ProgressBar;

use super::printer::Printer;
use super::samples::{SampleTally, samples_table};
use super::{RunInfo, Sink, SweepInfo};
use crate::engine::Summary;
use crate::record::Record;
use crate::record::{op_column, root_column};
use crate::types::{Placement, human_bytes};

/// How long a stopped run waits for its last lines to be written.
const STOPPED_PRINT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Ranks listed one per line in the header; larger jobs are summarised.
const MAX_LISTED_RANKS: usize = 64;

pub struct TableSink {
    printer: Printer,
    /// Each placement's columns (set from the run at `begin`).
    cols: Vec<Col>,
    /// `-S`: every row ends with its timestamp, as nccl-tests'.
    timestamps: bool,
    /// Out-of-place record waiting for its in-place twin.
    pending: Option<Record>,
    section: Option<String>,
    /// Which sweep the last record belonged to (`--cycles`).
    cycle: Option<u64>,
    section_busbw: Mean,
    all_busbw: Mean,
    /// With several samples per point (`--repeat`), each point's times
    /// for the table at the end (`report::samples`).
    samples: Option<SampleTally>,
}

impl TableSink {
    /// Prints to `out`, suspending `progress` (the bar) around each write.
    pub fn new(out: Box<dyn Write + Send>, progress: Option<ProgressBar>) -> TableSink {
        TableSink {
            printer: Printer::start(out, progress),
            cols: placement_columns(false),
            timestamps: false,
            pending: None,
            section: None,
            cycle: None,
            section_busbw: Mean::default(),
            all_busbw: Mean::default(),
            samples: None,
        }
    }

    /// A data line, with `-S` the row's time at its end (nccl-tests'
    /// `%Y-%m-%d %H:%M:%S`; the in-place record's, the later of the two).
    fn line(&self, oop: Option<&Record>, ip: Option<&Record>) -> String {
        let text = group_line(line(&self.cols, oop, ip), oop.or(ip));
        match ip.or(oop).filter(|_| self.timestamps && !text.is_empty()) {
            Some(r) => format!("{}  {:>19}\n", text.trim_end_matches('\n'), row_time(&r.timestamp)),
            None => text,
        }
    }

    /// A section's header, with `-S` a `timestamp` column at its end.
    fn section_header(&self, r: &Record) -> String {
        let text = section_header(&self.cols, r);
        if !self.timestamps {
            return text;
        }
        let mut out = String::new();
        for l in text.lines() {
            let extra = if l.contains("#wrong") {
                "timestamp"
            } else if l.contains("(elements)") {
                "(UTC)"
            } else {
                ""
            };
            if extra.is_empty() {
                out += &format!("{l}\n");
            } else {
                out += &format!("{l}  {extra:>19}\n");
            }
        }
        out
    }

    /// Queues `text` for the printer thread (see `printer`).
    fn emit(&mut self, text: String) -> io::Result<()> {
        self.printer.print(text);
        Ok(())
    }

    /// Prints what is still held back: an out-of-place row waiting for
    /// its in-place twin, and the last section's average.
    fn finish_text(&mut self) {
        let mut text = String::new();
        if let Some(oop) = self.pending.take() {
            text += &self.line(Some(&oop), None);
        }
        text += &self.end_section();
        let _ = self.emit(text);
    }

    fn end_section(&mut self) -> String {
        if self.section.is_none() || self.section_busbw.count == 0 {
            return String::new();
        }
        let text = format!(
            "# {:<20} : {:.3} GB/s average bus bandwidth over {} points\n",
            self.section.as_deref().unwrap_or(""),
            self.section_busbw.value(),
            self.section_busbw.count
        );
        self.section_busbw = Mean::default();
        text
    }
}

/// A running mean: constant memory however long the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct Mean {
    sum: f64,
    count: u64,
}

impl Mean {
    pub fn add(&mut self, x: f64) {
        self.sum += x;
        self.count += 1;
    }

    pub fn value(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }
}

fn same_case(a: &Record, b: &Record) -> bool {
    (&a.collective, &a.hierarchy, &a.dtype, &a.op, a.root, a.size_bytes)
        == (&b.collective, &b.hierarchy, &b.dtype, &b.op, b.root, b.size_bytes)
}

fn wrong_text(wrong: Option<u64>) -> String {
    wrong.map_or_else(|| "N/A".to_string(), |w| w.to_string())
}

/// One column of a placement's block: header, unit, width, value.
struct Col {
    name: &'static str,
    unit: &'static str,
    width: usize,
    value: fn(&Record) -> String,
}

impl Col {
    const fn new(name: &'static str, unit: &'static str, width: usize, value: fn(&Record) -> String) -> Col {
        Col {
            name,
            unit,
            width,
            value,
        }
    }
}

fn fixed2(v: f64) -> String {
    format!("{v:.2}")
}

fn fixed2_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), fixed2)
}

/// `text` (a number formatted with 2 decimals, an integer, or a word) in at
/// most `width` characters: fewer decimals first (as nccl-tests prints a
/// large time), then an exponent. Words (`N/A`, `-`) are kept as they are.
fn fit(text: String, width: usize) -> String {
    if text.chars().count() <= width {
        return text;
    }
    let Ok(v) = text.parse::<f64>() else {
        return text;
    };
    for decimals in [1, 0] {
        let t = format!("{v:.decimals$}");
        if t.len() <= width {
            return t;
        }
    }
    // 1.38e6: as many mantissa digits as the width leaves
    for digits in (0..=3).rev() {
        let t = format!("{v:.digits$e}");
        if t.len() <= width {
            return t;
        }
    }
    format!("{v:.0e}")
}

/// C's `%g` (6 significant digits, trailing zeros dropped), as nccl-tests
/// prints its average bus bandwidth.
pub fn g6(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let exp = v.abs().log10().floor() as i32;
    let trim = |t: String| {
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        }
    };
    if (-4..6).contains(&exp) {
        let decimals = (5 - exp).max(0) as usize;
        let t = trim(format!("{v:.decimals$}"));
        // rounding may carry into a seventh digit (999999.5): C switches then
        if t.trim_start_matches('-')
            .split('.')
            .next()
            .is_some_and(|i| i.len() <= 6)
        {
            return t;
        }
    }
    let t = format!("{v:.5e}");
    let (mantissa, e) = t.split_once('e').unwrap_or((&t, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    format!(
        "{}e{}{:02}",
        trim(mantissa.to_string()),
        if e < 0 { '-' } else { '+' },
        e.abs()
    )
}

/// The columns of each placement: nccl-tests' four, and with `-I` its
/// per-iteration minimum, maximum, 99th percentile and coefficient of
/// variation after them, under its names (`i_min i_max i_p99 i_cv%`), so
/// that scripts reading nccl-tests' `-I` columns by position read ours.
fn placement_columns(per_iter: bool) -> Vec<Col> {
    let mut cols = vec![
        Col::new("time", "(us)", 9, |r| fixed2(r.time_us)),
        Col::new("algbw", "(GB/s)", 8, |r| fixed2(r.algbw_gbps)),
        Col::new("busbw", "(GB/s)", 8, |r| fixed2(r.busbw_gbps)),
        Col::new("#wrong", "", 7, |r| wrong_text(r.wrong)),
    ];
    if per_iter {
        cols.extend([
            Col::new("i_min", "(us)", 9, |r| fixed2_opt(r.time_iter_min_us)),
            Col::new("i_max", "(us)", 9, |r| fixed2_opt(r.time_iter_max_us)),
            Col::new("i_p99", "(us)", 9, |r| fixed2_opt(r.time_p99_us)),
            Col::new("i_cv%", "(%)", 6, |r| {
                r.time_cv.map_or("-".into(), |c| format!("{:.1}", c * 100.0))
            }),
        ]);
    }
    cols
}

fn block_width(cols: &[Col]) -> usize {
    cols.iter().map(|c| c.width + 1).sum::<usize>() - 1
}

/// One placement's block of a data line.
fn block(cols: &[Col], r: Option<&Record>) -> String {
    let cells: Vec<String> = cols
        .iter()
        .map(|c| {
            let v = r.map_or_else(|| "-".to_string(), |r| fit((c.value)(r), c.width));
            format!("{v:>w$}", w = c.width)
        })
        .collect();
    format!("  {}", cells.join(" "))
}

fn line(cols: &[Col], oop: Option<&Record>, ip: Option<&Record>) -> String {
    let Some(key) = oop.or(ip) else {
        return String::new();
    };
    format!(
        "{:>13} {:>13} {:>9} {:>7} {:>7}{}{}\n",
        fit(key.size_bytes.to_string(), 13),
        fit(key.count.to_string(), 13),
        // Display of a vocabulary type ignores width: pad its text
        key.dtype.to_string(),
        op_column::text(key.op),
        root_column::value(key.root),
        block(cols, oop),
        block(cols, ip)
    )
}

/// A `--split` group's row (not the aggregate, `all`).
pub fn is_group_row(r: &Record) -> bool {
    r.group.as_deref().is_some_and(|g| g != crate::engine::groups::ALL)
}

/// A `--split` group's data line as a comment, `# g1` over the
/// blanks before its size (so that nccl-tests' parsers, which skip `#`
/// lines, read the aggregate only, as nccl-tests prints it); other lines
/// as they are.
fn group_line(text: String, r: Option<&Record>) -> String {
    let Some(group) = r.filter(|r| is_group_row(r)).and_then(|r| r.group.as_deref()) else {
        return text;
    };
    let tag = format!("# g{group}");
    let blanks = text.len() - text.trim_start().len();
    if blanks > tag.len() {
        format!("{tag}{}", &text[tag.len()..])
    } else {
        format!("{tag} {text}")
    }
}

/// `2026-12-02T13:10:45Z` as nccl-tests prints a row's time.
fn row_time(rfc3339: &str) -> String {
    rfc3339.trim_end_matches('Z').replacen('T', " ", 1)
}

fn section_header(cols: &[Col], r: &Record) -> String {
    let w = block_width(cols);
    let names: Vec<String> = cols.iter().map(|c| format!("{:>w$}", c.name, w = c.width)).collect();
    let units: Vec<String> = cols.iter().map(|c| format!("{:>w$}", c.unit, w = c.width)).collect();
    let (names, units) = (names.join(" "), units.join(" "));
    format!(
        "#\n# {} (hierarchy {})\n\
         # {:>11} {:>13} {:>9} {:>7} {:>7}  {:^w$}  {:^w$}\n\
         # {:>11} {:>13} {:>9} {:>7} {:>7}  {names}  {names}\n\
         # {:>11} {:>13} {:>9} {:>7} {:>7}  {units}  {units}\n",
        r.collective,
        r.hierarchy,
        "",
        "",
        "",
        "",
        "",
        "out-of-place",
        "in-place",
        "size",
        "count",
        "type",
        "redop",
        "root",
        "(B)",
        "(elements)",
        "",
        "",
        "",
    )
}

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
    s += &format!("# csv       : {}\n", run.csv.display());
    if let Some(json) = &run.json {
        s += &format!("# json      : {}\n", json.display());
    }
    s += "#\n";
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

/// nccl-tests' options line for sizes (`minBytes 8 maxBytes 1048576 step:
/// 2(factor)`), then the range in binary units and the number of sizes.
fn sizes_text(sweep: &SweepInfo) -> String {
    format!(
        "minBytes {} maxBytes {} step: {} ({} to {}, {} size{})",
        sweep.min_bytes,
        sweep.max_bytes,
        super::step_name(sweep.step),
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
fn launch_extras(agg_iters: u32, cuda_graph: u32) -> Option<String> {
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
fn slow_rank_text(
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
                1.0 + s.excess
            )
        }
    }
}

/// nccl-tests' exact line (`awk '{print $NF}'` reads the value), then what
/// it averages over, on a line of its own.
fn footer_average(all_busbw: &Mean) -> String {
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
fn out_of_bounds(summary: &Summary) -> String {
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

impl Sink for TableSink {
    fn begin(&mut self, run: &RunInfo) -> io::Result<()> {
        self.cols = placement_columns(run.timing.per_iter);
        self.timestamps = run.timestamps;
        self.samples = (run.timing.cycles != 1).then(SampleTally::default);
        self.emit(run_header(run))
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        let mut text = String::new();
        let section = format!("{} {}", record.collective, record.hierarchy);
        // One sweep needs no cycle heading; several get one each.
        let cycle = record.cycle.filter(|_| record.samples != Some(1));
        if cycle != self.cycle {
            if let Some(oop) = self.pending.take() {
                text += &self.line(Some(&oop), None);
            }
            text += &self.end_section();
            self.section = None;
            self.cycle = cycle;
            if let Some(c) = cycle {
                text += &format!("#\n# cycle {c}\n");
            }
        }
        if self.section.as_deref() != Some(section.as_str()) {
            if let Some(oop) = self.pending.take() {
                text += &self.line(Some(&oop), None);
            }
            text += &self.end_section();
            text += &self.section_header(record);
            self.section = Some(section);
        }
        // a --split group's row is a comment: the averages, the samples
        // and nccl-tests' parsers take the aggregate's
        if !is_group_row(record) {
            self.section_busbw.add(record.busbw_gbps);
            self.all_busbw.add(record.busbw_gbps);
            if let Some(tally) = self.samples.as_mut() {
                tally.add(record);
            }
        }
        match (record.placement, self.pending.take()) {
            (Placement::InPlace, Some(oop)) if same_case(&oop, record) => text += &self.line(Some(&oop), Some(record)),
            (Placement::InPlace, other) => {
                if let Some(oop) = other {
                    text += &self.line(Some(&oop), None);
                }
                text += &self.line(None, Some(record));
            }
            (_, other) => {
                if let Some(oop) = other {
                    text += &self.line(Some(&oop), None);
                }
                self.pending = Some(record.clone());
            }
        }
        if text.is_empty() { Ok(()) } else { self.emit(text) }
    }

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()> {
        self.finish_text();
        let mut text = self.samples.as_ref().map(samples_table).unwrap_or_default();
        text += &run_footer(&self.all_busbw, run, summary);
        self.emit(text)?;
        // A stopped run is being ended by its launcher, which may no longer
        // read: wait a little for the footer, never for ever.
        self.printer.close(summary.stopped_by.map(|_| STOPPED_PRINT_WAIT));
        Ok(())
    }

    fn target(&self) -> String {
        "standard output".into()
    }
}

#[cfg(test)]
mod tests;
