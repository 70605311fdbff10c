//! The doctor's report: a short text (each finding, the hosts and
//! processes it concerns, its evidence lines with file and line number,
//! the fix and where it is stated; what was not judged; the verdict) and
//! the JSON of the whole `Diagnosis` for scripts.

use serde::Serialize;

use super::{Diagnosis, Finding};
use crate::error::exit;

/// Evidence lines the text shows per finding (the JSON has them all).
const SHOWN: usize = 6;

/// The exit code a diagnosis gives: `exit::FINDING` for a finding above
/// info, else 0.
pub fn exit_code(d: &Diagnosis) -> u8 {
    if d.problem_found() { exit::FINDING } else { exit::OK }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `a, b, c and 3 more`.
fn some(items: &[String], shown: usize) -> String {
    if items.len() <= shown {
        return items.join(", ");
    }
    format!("{} and {} more", items[..shown].join(", "), items.len() - shown)
}

fn finding(f: &Finding) -> String {
    let mut out = format!("{:<6} {}: {}\n", f.severity.name(), f.rule, f.title);
    out += &format!("       {}\n", f.detail);
    if !f.hosts.is_empty() {
        out += &format!("       hosts: {}\n", some(&f.hosts, 6));
    }
    out += &format!("       where: {}\n", some(&f.processes, 4));
    out += "       evidence:\n";
    for e in f.evidence.iter().take(SHOWN) {
        out += &format!("         {}:{}: {}\n", e.file, e.line, e.text.trim());
    }
    if f.evidence.len() > SHOWN {
        out += &format!(
            "         ... {} more (--json lists every line)\n",
            f.evidence.len() - SHOWN
        );
    }
    out += &format!("       fix: {} ({})\n", f.fix, f.cited);
    out
}

/// The report as text.
pub fn text(d: &Diagnosis) -> String {
    let versions = match d.versions.as_slice() {
        [] => "NCCL version not printed".to_string(),
        v => format!("NCCL {}", v.join(", ")),
    };
    let mut out = format!(
        "collbench doctor: {}, {} ({} of them NCCL's), {}, {}; {versions}\n",
        plural(d.files.len(), "file", "files"),
        plural(d.lines, "line", "lines"),
        d.nccl_lines,
        plural(d.hosts.len(), "host", "hosts"),
        plural(d.processes, "process", "processes"),
    );
    for f in &d.findings {
        out += &finding(f);
    }
    if !d.not_judged.is_empty() {
        out += "not judged:\n";
        for u in &d.not_judged {
            out += &format!("  {}: {}; to judge it: {}\n", u.check, u.why, u.enable);
        }
    }
    let count = |s: super::Severity| d.findings.iter().filter(|f| f.severity == s).count();
    let (errors, warns, infos) = (
        count(super::Severity::Error),
        count(super::Severity::Warn),
        count(super::Severity::Info),
    );
    out += &if d.problem_found() {
        format!(
            "verdict: a problem was found ({}, {}{}); exit {}\n",
            plural(errors, "error", "errors"),
            plural(warns, "warning", "warnings"),
            if infos > 0 {
                format!(", {}", plural(infos, "note", "notes"))
            } else {
                String::new()
            },
            exit::FINDING
        )
    } else {
        format!(
            "verdict: no problem found{}{}\n",
            if infos > 0 {
                format!(" ({})", plural(infos, "note", "notes"))
            } else {
                String::new()
            },
            if d.not_judged.is_empty() {
                ""
            } else {
                " in what the logs show"
            }
        )
    };
    out
}

#[derive(Serialize)]
struct Json<'a> {
    collbench_doctor: u32,
    #[serde(flatten)]
    diagnosis: &'a Diagnosis,
    problem_found: bool,
    exit_code: u8,
}

/// The report as JSON (`collbench_doctor`: the schema's version).
pub fn json(d: &Diagnosis) -> String {
    let j = Json {
        collbench_doctor: 1,
        diagnosis: d,
        problem_found: d.problem_found(),
        exit_code: exit_code(d),
    };
    serde_json::to_string_pretty(&j).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}
