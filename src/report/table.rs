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
use super::{RunInfo, Sink};
use crate::engine::Summary;
use crate::record::Record;
use crate::record::{op_column, root_column};
use crate::types::{Algo, Chosen, Placement};

mod frame;

pub use frame::{run_footer, run_header, shell_quote};

/// How long a stopped run waits for its last lines to be written.
const STOPPED_PRINT_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

pub struct TableSink {
    printer: Printer,
    /// Each placement's columns (set from the run at `begin`).
    cols: Vec<Col>,
    /// `-S`: every row ends with its timestamp, as nccl-tests'.
    timestamps: bool,
    /// `--algo-record`: an `algo` column after both placements' blocks
    /// (nccl-tests' columns keep their positions), before the timestamp.
    algo: bool,
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
    /// With `--algo-record`: the section's last out-of-place choice, and
    /// where the choice changed (`algo_changes`).
    last_choice: Option<String>,
    changes: Vec<String>,
    /// The section's out-of-place rows where NCCL ran another algorithm
    /// than Ring: their sizes, algorithms and node count (`off_ring_note`).
    off_ring: Vec<(u64, Algo, u64)>,
    /// The section's rows where what NCCL ran is not what the sweep
    /// pinned: size and what ran (`unhonoured_note`).
    unhonoured: Vec<(u64, String)>,
}

impl TableSink {
    /// Prints to `out`, suspending `progress` (the bar) around each write.
    pub fn new(out: Box<dyn Write + Send>, progress: Option<ProgressBar>) -> TableSink {
        TableSink {
            printer: Printer::start(out, progress),
            cols: placement_columns(false),
            algo: false,
            timestamps: false,
            pending: None,
            section: None,
            cycle: None,
            section_busbw: Mean::default(),
            all_busbw: Mean::default(),
            samples: None,
            last_choice: None,
            changes: Vec::new(),
            off_ring: Vec::new(),
            unhonoured: Vec::new(),
        }
    }

    /// A data line, with `-S` the row's time at its end (nccl-tests'
    /// `%Y-%m-%d %H:%M:%S`; the in-place record's, the later of the two).
    fn line(&self, oop: Option<&Record>, ip: Option<&Record>) -> String {
        let mut text = group_line(line(&self.cols, oop, ip), oop.or(ip));
        if self.algo && !text.is_empty() {
            let cells: Vec<String> = [oop, ip].into_iter().flatten().map(algo_cell).collect();
            let cell = match cells.as_slice() {
                [a, b] if a != b => format!("{a}|{b}"),
                [a, ..] => a.clone(),
                [] => String::new(),
            };
            text = format!("{}  {cell:>12}\n", text.trim_end_matches('\n'));
        }
        match ip.or(oop).filter(|_| self.timestamps && !text.is_empty()) {
            Some(r) => format!("{}  {:>19}\n", text.trim_end_matches('\n'), row_time(&r.timestamp)),
            None => text,
        }
    }

    /// A section's header, with `-S` a `timestamp` column at its end.
    fn section_header(&self, r: &Record) -> String {
        let text = section_header(&self.cols, r);
        if !self.timestamps && !self.algo {
            return text;
        }
        let mut out = String::new();
        for l in text.lines() {
            let (algo, time) = if l.contains("#wrong") {
                ("algo", "timestamp")
            } else if l.contains("(elements)") {
                ("", "(UTC)")
            } else {
                out += &format!("{l}\n");
                continue;
            };
            let mut l = l.to_string();
            if self.algo {
                l += &format!("  {algo:>12}");
            }
            if self.timestamps {
                l += &format!("  {time:>19}");
            }
            out += &format!("{}\n", l.trim_end());
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
        self.last_choice = None;
        let changes = std::mem::take(&mut self.changes);
        let off_ring = std::mem::take(&mut self.off_ring);
        let unhonoured = std::mem::take(&mut self.unhonoured);
        if self.section.is_none() || self.section_busbw.count == 0 {
            return String::new();
        }
        let mut text = format!(
            "# {:<20} : {:.3} GB/s average bus bandwidth over {} points\n",
            self.section.as_deref().unwrap_or(""),
            self.section_busbw.value(),
            self.section_busbw.count
        );
        if !changes.is_empty() {
            text += &format!(
                "# {:<20} : NCCL's algorithm or protocol changes at {}\n",
                self.section.as_deref().unwrap_or(""),
                changes.join(", ")
            );
        }
        if let Some(note) = unhonoured_note(&unhonoured) {
            text += &format!("# {:<20} : {note}\n", self.section.as_deref().unwrap_or(""));
        }
        if let Some(note) = off_ring_note(&off_ring) {
            text += &format!("# {:<20} : {note}\n", self.section.as_deref().unwrap_or(""));
        }
        self.section_busbw = Mean::default();
        text
    }

    /// With `--algo-record`: notes where an out-of-place row's choice
    /// differs from the previous size's of its section (both known).
    fn algo_changes(&mut self, r: &Record) {
        if r.placement != Placement::OutOfPlace || is_group_row(r) || r.algo.is_none() {
            return;
        }
        if let Some(Chosen::One(a)) = r.algo.filter(|a| *a != Chosen::One(Algo::Ring) && r.algo_pin.is_none()) {
            self.off_ring.push((r.size_bytes, a, r.nnodes));
        }
        if let Some(pin) = r.algo_pin
            && pin.honoured(r.algo, r.proto) == Some(false)
        {
            let ran = [r.algo.map(|a| a.to_string()), r.proto.map(|p| p.to_string())];
            let ran: Vec<String> = ran.into_iter().flatten().collect();
            self.unhonoured.push((r.size_bytes, ran.join("/")));
        }
        let cell = algo_cell(r);
        if let Some(last) = self.last_choice.as_ref().filter(|l| **l != cell) {
            self.changes.push(format!(
                "{} ({last} -> {cell})",
                crate::types::human_bytes(r.size_bytes)
            ));
        }
        self.last_choice = Some(cell);
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

/// Under a section where NCCL ran another algorithm than Ring (`off_ring`:
/// size, algorithm, nodes of each such out-of-place row): busbw keeps
/// nccl-tests' Ring factor there, so it is not what each GPU moved, and on
/// several nodes Tree, NVLS and CollNet keep part of the traffic inside a
/// node, so it can exceed the network's speed (docs/bandwidth.md).
fn off_ring_note(off_ring: &[(u64, Algo, u64)]) -> Option<String> {
    let (first, last) = (off_ring.first()?, off_ring.last()?);
    let mut algos: Vec<Algo> = off_ring.iter().map(|&(_, a, _)| a).collect();
    algos.sort();
    algos.dedup();
    let names: Vec<&str> = algos.iter().map(|a| a.name()).collect();
    let sizes = if first.0 == last.0 {
        crate::types::human_bytes(first.0)
    } else {
        format!(
            "{}-{}",
            crate::types::human_bytes(first.0),
            crate::types::human_bytes(last.0)
        )
    };
    let nodes = off_ring.iter().map(|&(_, _, n)| n).max().unwrap_or(1);
    let across = if nodes > 1 {
        format!(
            "; on {nodes} nodes it keeps part of the traffic inside a node, so busbw can exceed the network's speed"
        )
    } else {
        String::new()
    };
    Some(format!(
        "NCCL ran {} at {sizes} ({} size{}): busbw there is nccl-tests' Ring figure, not what each GPU moved \
         (busbw_algo_gbps has the algorithm's factor where one is established){across}; --algo ring measures the links",
        names.join(", "),
        off_ring.len(),
        if off_ring.len() == 1 { "" } else { "s" },
    ))
}

/// Under a pinned section where NCCL ran something else than the pin at
/// some sizes (a tuner plugin's choice, a release that reads the variable
/// otherwise): said, not hidden.
fn unhonoured_note(rows: &[(u64, String)]) -> Option<String> {
    let (first, last) = (rows.first()?, rows.last()?);
    let mut ran: Vec<&str> = rows.iter().map(|(_, c)| c.as_str()).collect();
    ran.sort();
    ran.dedup();
    Some(format!(
        "NCCL did not run the pin at {} size{} ({}-{}): it ran {}",
        rows.len(),
        if rows.len() == 1 { "" } else { "s" },
        crate::types::human_bytes(first.0),
        crate::types::human_bytes(last.0),
        ran.join(", ")
    ))
}

/// A row's `algo` cell (`--algo-record`): `ring/ll`, `mixed/simple`;
/// `unknown` where NCCL did not say, `-` where nothing was recorded.
fn algo_cell(r: &Record) -> String {
    match (r.algo, r.proto, r.algo_source) {
        (Some(a), Some(p), _) => format!("{a}/{p}"),
        (_, _, Some(source)) => source.to_string(),
        _ => "-".into(),
    }
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
    let pinned = r.algo_pin.map(|p| format!(" pinned {p}")).unwrap_or_default();
    format!(
        "#\n# {} (hierarchy {}){pinned}\n\
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

impl Sink for TableSink {
    fn begin(&mut self, run: &RunInfo) -> io::Result<()> {
        self.cols = placement_columns(run.timing.per_iter);
        self.algo = run.timing.algo_columns();
        self.timestamps = run.timestamps;
        self.samples = (run.timing.cycles != 1).then(SampleTally::default);
        self.emit(run_header(run))
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        let mut text = String::new();
        let section = match record.algo_pin {
            Some(pin) => format!("{} {} pinned {pin}", record.collective, record.hierarchy),
            None => format!("{} {}", record.collective, record.hierarchy),
        };
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
        self.algo_changes(record);
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
