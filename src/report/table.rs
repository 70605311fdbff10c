//! The terminal table, in nccl-tests' layout: a header describing the run,
//! then per collective one line per size with the out-of-place and in-place
//! time, algbw, busbw and #wrong side by side, a per-collective average bus
//! bandwidth, and a footer with the validation verdict.

use std::io::{self, Write};

use indicatif::ProgressBar;

use super::{Record, RunInfo, Sink};
use crate::engine::Summary;

/// Ranks listed one per line in the header; larger jobs are summarised.
const MAX_LISTED_RANKS: usize = 64;

pub struct TableSink {
    out: Box<dyn Write + Send>,
    /// Suspended while printing, so the bar never tears a line.
    progress: Option<ProgressBar>,
    /// Out-of-place record waiting for its in-place twin.
    pending: Option<Record>,
    section: Option<String>,
    section_busbw: Vec<f64>,
    all_busbw: Vec<f64>,
}

impl TableSink {
    pub fn new(out: Box<dyn Write + Send>, progress: Option<ProgressBar>) -> TableSink {
        TableSink {
            out,
            progress,
            pending: None,
            section: None,
            section_busbw: Vec::new(),
            all_busbw: Vec::new(),
        }
    }

    fn emit(&mut self, text: String) -> io::Result<()> {
        let out = &mut self.out;
        let mut write = || {
            out.write_all(text.as_bytes())?;
            out.flush()
        };
        match &self.progress {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    fn end_section(&mut self) -> String {
        if self.section.is_none() || self.section_busbw.is_empty() {
            return String::new();
        }
        let text = format!(
            "# {:<20} : {:.3} GB/s average bus bandwidth over {} points\n",
            self.section.as_deref().unwrap_or(""),
            mean(&self.section_busbw),
            self.section_busbw.len()
        );
        self.section_busbw.clear();
        text
    }
}

fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

fn same_case(a: &Record, b: &Record) -> bool {
    (&a.collective, &a.hierarchy, &a.dtype, &a.op, a.root, a.size_bytes)
        == (&b.collective, &b.hierarchy, &b.dtype, &b.op, b.root, b.size_bytes)
}

fn wrong_text(wrong: Option<u64>) -> String {
    wrong.map_or_else(|| "N/A".to_string(), |w| w.to_string())
}

/// time, algbw, busbw, #wrong of one placement.
fn measures(r: Option<&Record>) -> String {
    match r {
        Some(r) => format!(
            "  {:>9.2} {:>8.2} {:>8.2} {:>7}",
            r.time_us,
            r.algbw_gbps,
            r.busbw_gbps,
            wrong_text(r.wrong)
        ),
        None => format!("  {:>9} {:>8} {:>8} {:>7}", "-", "-", "-", "-"),
    }
}

fn line(oop: Option<&Record>, ip: Option<&Record>) -> String {
    let key = oop.or(ip).expect("a line has at least one record");
    format!(
        "{:>13} {:>13} {:>9} {:>7} {:>7}{}{}\n",
        key.size_bytes,
        key.count,
        key.dtype,
        key.op,
        key.root,
        measures(oop),
        measures(ip)
    )
}

fn section_header(r: &Record) -> String {
    format!(
        "#\n# {} (hierarchy {})\n\
         # {:>11} {:>13} {:>9} {:>7} {:>7}  {:^36}  {:^36}\n\
         # {:>11} {:>13} {:>9} {:>7} {:>7}  {:>9} {:>8} {:>8} {:>7}  {:>9} {:>8} {:>8} {:>7}\n\
         # {:>11} {:>13} {:>9} {:>7} {:>7}  {:>9} {:>8} {:>8} {:>7}  {:>9} {:>8} {:>8} {:>7}\n",
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
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "time",
        "algbw",
        "busbw",
        "#wrong",
        "(B)",
        "(elements)",
        "",
        "",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        ""
    )
}

/// The run header: what ran where, and how it was measured.
pub fn run_header(run: &RunInfo) -> String {
    let mut s = format!("# collbench {}  run {}\n", run.collbench_version, run.run_id);
    s += &format!("# backend   : {} ({})", run.backend, run.backend_version);
    if let Some(note) = &run.backend_note {
        s += &format!("  [{note}]");
    }
    s += "\n";
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
    if run.hierarchy != "flat" {
        s += &format!("# hierarchy : all_reduce as {}\n", run.hierarchy);
    }
    s += &format!(
        "# measure   : iters {}, warmup {}, check {}, time reduction {}, timing {}\n",
        run.iters,
        run.warmup,
        run.check,
        run.average,
        if run.blocking {
            "blocking (barrier before each op)"
        } else {
            "back-to-back (nccl-tests)"
        }
    );
    s += &format!(
        "# transport : {}   control plane: {}\n",
        run.transport, run.control_plane
    );
    s += &format!("# csv       : {}\n", run.csv.display());
    if let Some(json) = &run.json {
        s += &format!("# json      : {}\n", json.display());
    }
    s += "#\n";
    for r in run.ranks.iter().take(MAX_LISTED_RANKS) {
        s += &format!("#  Rank {:>4} on {} pid {}\n", r.rank, r.host, r.pid);
    }
    if run.ranks.len() > MAX_LISTED_RANKS {
        s += &format!("#  ... and {} more ranks\n", run.ranks.len() - MAX_LISTED_RANKS);
    }
    s
}

/// The footer: overall average bus bandwidth and the validation verdict.
pub fn run_footer(all_busbw: &[f64], run: &RunInfo, summary: &Summary) -> String {
    let verdict = if run.check == 0 {
        "off (--check 0)".to_string()
    } else if summary.wrong == 0 {
        format!("OK, 0 wrong elements in {} checked points", summary.checked_points)
    } else {
        format!(
            "FAILED, {} wrong elements in {} of {} checked points",
            summary.wrong, summary.failed_points, summary.checked_points
        )
    };
    let mut s = format!(
        "#\n# {:<20} : {:.3} GB/s over {} points\n",
        "Avg bus bandwidth",
        mean(all_busbw),
        all_busbw.len()
    );
    s += &format!("# {:<20} : {verdict}\n", "Validation");
    if summary.points < run.points {
        s += &format!(
            "# {:<20} : incomplete, {} of {} points\n",
            "Run", summary.points, run.points
        );
    }
    s += "#\n";
    s
}

impl Sink for TableSink {
    fn begin(&mut self, run: &RunInfo) -> io::Result<()> {
        self.emit(run_header(run))
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        let mut text = String::new();
        let section = format!("{} {}", record.collective, record.hierarchy);
        if self.section.as_deref() != Some(section.as_str()) {
            if let Some(oop) = self.pending.take() {
                text += &line(Some(&oop), None);
            }
            text += &self.end_section();
            text += &section_header(record);
            self.section = Some(section);
        }
        self.section_busbw.push(record.busbw_gbps);
        self.all_busbw.push(record.busbw_gbps);
        match (record.placement.as_str(), self.pending.take()) {
            ("in_place", Some(oop)) if same_case(&oop, record) => text += &line(Some(&oop), Some(record)),
            ("in_place", other) => {
                if let Some(oop) = other {
                    text += &line(Some(&oop), None);
                }
                text += &line(None, Some(record));
            }
            (_, other) => {
                if let Some(oop) = other {
                    text += &line(Some(&oop), None);
                }
                self.pending = Some(record.clone());
            }
        }
        if text.is_empty() { Ok(()) } else { self.emit(text) }
    }

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()> {
        let mut text = String::new();
        if let Some(oop) = self.pending.take() {
            text += &line(Some(&oop), None);
        }
        text += &self.end_section();
        text += &run_footer(&self.all_busbw, run, summary);
        self.emit(text)
    }

    fn target(&self) -> String {
        "standard output".into()
    }
}
