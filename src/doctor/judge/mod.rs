//! The rules' judgements, one function each (`rules::RULES` points at
//! them): the network (`net`), one node's GPUs and memory (`node`), and
//! what only the whole job shows (`job`). Each takes the facts and its
//! rule and returns its findings, or none.

pub mod job;
pub mod net;
pub mod node;

use super::Finding;
use super::facts::{Facts, Seen};
use super::rules::Rule;

/// A rule whose symptoms are plain lines: one finding over every line that
/// holds one, at the rule's severity.
pub fn by_symptoms(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let lines = facts.symptoms(rule);
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    let detail = format!("{}{}", quote(first), more(lines.len()));
    vec![rule.finding(facts, rule.severity, detail, &lines)]
}

/// A line's message as a finding quotes it: `"..."`, shortened.
pub fn quote(s: &Seen) -> String {
    let m = s.msg().trim();
    match m.char_indices().nth(160) {
        Some((at, _)) => format!("\"{}...\"", &m[..at]),
        None => format!("\"{m}\""),
    }
}

/// ` (and N more lines)`, or nothing.
pub fn more(n: usize) -> String {
    match n {
        0 | 1 => String::new(),
        2 => " (and 1 more line)".into(),
        n => format!(" (and {} more lines)", n - 1),
    }
}

/// `line 12`, or `file:12` where the logs are several files.
pub fn at(facts: &Facts, s: &Seen) -> String {
    if facts.names.len() > 1 {
        format!("{}:{}", facts.names[s.file], s.line.number)
    } else {
        format!("line {}", s.line.number)
    }
}

/// `a, b and c`.
pub fn list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [head @ .., last] => format!("{} and {last}", head.join(", ")),
    }
}
