//! Every line of the logs, split once, with what the rules ask of them:
//! who printed a line (host, process, device, the rank its INIT line
//! gives), the evidence a finding quotes, the NCCL version, the lines a
//! rule's symptoms match.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::rules::Rule;
use crate::nccl_log::{Level, Line, LogFile, whole};
use crate::types::NcclVersion;

/// A line a finding rests on: its file, its 1-based number, its text.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Evidence {
    pub file: String,
    pub line: usize,
    pub text: String,
}

/// One line of one file.
#[derive(Clone, Debug)]
pub struct Seen<'a> {
    pub file: usize,
    pub line: Line<'a>,
}

impl<'a> Seen<'a> {
    /// NCCL's message, or the line's text without a paste's prefixes.
    pub fn msg(&self) -> &'a str {
        self.line.content
    }

    pub fn is_warn(&self) -> bool {
        self.line.level() == Some(Level::Warn)
    }

    /// `host`, when NCCL printed it.
    pub fn host(&self) -> Option<&str> {
        self.line.origin().map(|o| o.host.as_str())
    }

    /// The process that printed it: host and pid, or the file for a line
    /// without NCCL's prefix.
    pub fn process(&self) -> Process {
        match self.line.origin() {
            Some(o) => Process::Pid(o.host.clone(), o.pid),
            None => Process::File(self.file),
        }
    }
}

/// Who printed a line, as far as the log tells.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Process {
    Pid(String, u64),
    /// A line without NCCL's prefix: only its file is known.
    File(usize),
}

/// The logs, read.
pub struct Facts<'a> {
    pub names: Vec<&'a str>,
    pub lines: Vec<Seen<'a>>,
    /// (host, pid, device) -> rank, from INIT lines (the largest
    /// communicator's rank wins).
    ranks: BTreeMap<(String, u64, Option<u32>), (usize, usize)>,
}

/// Evidence lines are quoted up to this many characters.
const QUOTE_CHARS: usize = 240;

impl<'a> Facts<'a> {
    pub fn new(files: &'a [LogFile]) -> Facts<'a> {
        let mut lines = Vec::new();
        for (i, f) in files.iter().enumerate() {
            lines.extend(f.lines().map(|line| Seen { file: i, line }));
        }
        let mut ranks = BTreeMap::new();
        for s in &lines {
            if let (Some(o), Some((rank, nranks))) = (s.line.origin(), init_rank(s.msg())) {
                let key = (o.host.clone(), o.pid, o.dev);
                let known = ranks.entry(key).or_insert((rank, nranks));
                if nranks > known.1 {
                    *known = (rank, nranks);
                }
            }
        }
        Facts {
            names: files.iter().map(|f| f.name.as_str()).collect(),
            lines,
            ranks,
        }
    }

    pub fn evidence(&self, s: &Seen) -> Evidence {
        let text = s.line.text.trim_end();
        let text = match text.char_indices().nth(QUOTE_CHARS) {
            Some((at, _)) => format!("{}...", &text[..at]),
            None => text.to_string(),
        };
        Evidence {
            file: self.names[s.file].to_string(),
            line: s.line.number,
            text,
        }
    }

    /// Lines whose message holds any of the rule's symptoms' `find` text.
    pub fn symptoms(&self, rule: &Rule) -> Vec<&Seen<'a>> {
        self.lines
            .iter()
            .filter(|s| {
                rule.symptoms
                    .iter()
                    .any(|y| !y.find.is_empty() && s.msg().contains(y.find))
            })
            .collect()
    }

    /// Lines whose message satisfies `f`.
    pub fn matching(&self, f: impl Fn(&str) -> bool) -> Vec<&Seen<'a>> {
        self.lines.iter().filter(|s| f(s.msg())).collect()
    }

    /// Lines NCCL printed (with any of its marks).
    pub fn nccl_lines(&self) -> usize {
        self.lines.iter().filter(|s| s.line.nccl.is_some()).count()
    }

    /// The hosts NCCL's prefixes name, in order.
    pub fn hosts(&self) -> BTreeSet<&str> {
        self.lines.iter().filter_map(|s| s.host()).collect()
    }

    /// The processes NCCL's prefixes name.
    pub fn processes(&self) -> BTreeSet<Process> {
        self.lines
            .iter()
            .filter(|s| s.line.origin().is_some())
            .map(|s| s.process())
            .collect()
    }

    /// The NCCL versions the log prints (`NCCL version 2.x.y`), each with
    /// its first line.
    pub fn versions(&self) -> Vec<(NcclVersion, &Seen<'a>)> {
        let mut out: Vec<(NcclVersion, &Seen)> = Vec::new();
        for s in &self.lines {
            if let Some(v) = NcclVersion::find(s.line.text)
                && !out.iter().any(|(w, _)| *w == v)
            {
                out.push((v, s));
            }
        }
        out
    }

    /// `node1 pid 4101 device 3 (rank 11)`, or where a line without prefix is.
    pub fn describe(&self, s: &Seen) -> String {
        match s.line.origin() {
            Some(o) => {
                let rank = self
                    .ranks
                    .get(&(o.host.clone(), o.pid, o.dev))
                    .map_or(String::new(), |(r, n)| format!(" (rank {r} of {n})"));
                format!("{}{rank}", o.describe())
            }
            None => {
                let dev = s.line.nccl.as_ref().and_then(|n| n.origin.dev);
                let dev = dev.map_or(String::new(), |d| format!("device {d} in "));
                format!("{dev}{} (no host printed)", self.names[s.file])
            }
        }
    }
}

/// `comm 0x.. rank 3 nranks 16 cudaDev 3 ...`: the rank and size (not
/// from a line cut after `nranks 1`, which may have been `nranks 16`).
fn init_rank(msg: &str) -> Option<(usize, usize)> {
    let words: Vec<&str> = msg.split_whitespace().collect();
    let at = words
        .windows(5)
        .position(|w| w[0] == "comm" && w[2] == "rank" && w[4] == "nranks")?;
    let rank = words[at + 3].parse().ok()?;
    let nranks = whole(&words[at..], "nranks")?.parse().ok()?;
    Some((rank, nranks))
}
