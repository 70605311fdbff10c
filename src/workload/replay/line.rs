//! One line of an NCCL (or RCCL) debug log, parsed: a collective call
//! (NCCL_DEBUG_SUBSYS COLL, or the CALL trace of NCCL_DEBUG=TRACE), a
//! communicator's INIT line, the version banner, a call line cut short, or
//! nothing of interest.
//!
//! Formats, from NCCL's sources (src/enqueue.cc, src/init.cc at each tag)
//! and RCCL's:
//! - COLL, NCCL 2.3.7 to 2.30: `AllReduce: opCount 139d sendbuff 0x7fd..
//!   recvbuff 0x7fd.. count 7382228 datatype 7 op 0 root 0 comm
//!   0x78cfda045840 [nranks=128] stream 0x78d0..`; `opCount` is hex;
//!   `root` is the peer for Send and Recv; NCCL 2.12 put a Send's buffer in
//!   `recvbuff` (NVIDIA/nccl#783); 2.28 adds `AlltoAll`, `Gather` and
//!   `Scatter`. RCCL appends `task N globalrank R` (R: the rank in that
//!   communicator, `localRankToRank[localRank]`); rccl-tests pastes can
//!   lack `stream`. Some logs print the device after the mark (`NCCL INFO
//!   [2] AllReduce: ...`).
//! - COLL, NCCL 2.3.5 and older: `opCount %lx sendbuff %p recvbuff %p count
//!   %zi size %zi datatype %d op %d [root %d] comm %p ...`, without the
//!   operation's name (`Line::Unnamed`).
//! - CALL trace (`NCCL_DEBUG=TRACE NCCL_DEBUG_SUBSYS=CALL`): `host:pid:tid
//!   NCCL CALL ncclAllReduce(send,recv,count,datatype,op,root,comm,stream)`
//!   for every collective and Send/Recv (root is the peer), the buffers
//!   printed without `0x`, no `[dev]`; `ncclCommInitRank(comm, nranks,
//!   commIdHash, rank, cudaDev)` and `ncclCommSplit(parent, color, key,
//!   comm, rank, nranks)` (the same in 2.18 and 2.30). NCCL's documentation
//!   elides every pointer as `0x...`.
//! - INIT, `... - Init COMPLETE` or `- Init START`: `comm 0x.. rank 36 nranks
//!   64 cudaDev 4 busId 9b000` then `commId 0x..` (by 2.15, cupy/cupy#9090;
//!   none before, NVIDIA/nccl#629), `nvmlDev` by 2.18, the init function's
//!   name first (`ncclCommInitRank comm ...`); an `ncclCommSplit` line adds
//!   `parent %p color %d key %d` and a commId until 2.22, then no commId:
//!   `parent %p color %d key %d` (2.23), `parent %p splitCount %d color %d
//!   key %d` (2.24 to 2.28), `parent %p childCount %d ...` (2.29 on); the
//!   START line of 2.24+ glues `key %d- Init START`.
//! - `NCCL version 2.21.5+cuda12.4`, with or without the line prefix.
//!
//! Lines come split by the one NCCL log reader (`nccl_log::line`): NCCL's
//! prefix `host:pid:tid [cudaDev]` (after a launcher's label, a
//! timestamp, Markdown; old RCCL's microseconds after `[dev]`; the device
//! after the mark) is its `Origin`, and this module reads the message. A
//! line that holds two marks is another process's line printed into this
//! one: its own text before the second prefix is lost, and when that text
//! was a call it is reported as cut (`interrupted`).
//!
//! A call is one type from here to the kept sequence: `CallLine`, parsed
//! with its line number, then attributed to its rank and communicator by
//! the scan (`CallLine<scan::At>`, the same fields); `convert` makes the
//! replayed `workload::Op` of it.

use crate::nccl_log::{self, Level, Nccl, Origin, whole};
use crate::types::NcclVersion;
use trace::parse_trace;

/// Which kind of line a call came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// `NCCL INFO Name: opCount ...` (COLL).
    Coll,
    /// `NCCL CALL ncclName(...)` (the CALL trace).
    Trace,
}

/// A collective or point-to-point call as its line prints it; `at` is
/// `()` until the scan attributes it (`scan::At`: its rank and
/// communicator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallLine<A = ()> {
    /// 1-based line of the log.
    pub line: usize,
    pub prefix: Origin,
    /// `AllReduce`, `Send`, ...
    pub name: String,
    /// `None` on a CALL trace line.
    pub op_count: Option<u64>,
    pub count: u64,
    pub datatype: i64,
    pub op: i64,
    /// The root (broadcast, reduce, gather, scatter) or the peer (send, recv).
    pub root: i64,
    /// `None` when the log elides it (`0x...`).
    pub comm: Option<u64>,
    /// `[nranks=K]`; `None` on a CALL trace line (its INIT call says).
    pub nranks: Option<usize>,
    /// RCCL's `globalrank R`: the rank in this communicator.
    pub global_rank: Option<usize>,
    pub source: Source,
    pub at: A,
}

impl CallLine {
    /// The same call, attributed.
    pub fn attributed<A>(self, at: A) -> CallLine<A> {
        CallLine {
            line: self.line,
            prefix: self.prefix,
            name: self.name,
            op_count: self.op_count,
            count: self.count,
            datatype: self.datatype,
            op: self.op,
            root: self.root,
            comm: self.comm,
            nranks: self.nranks,
            global_rank: self.global_rank,
            source: self.source,
            at,
        }
    }
}

/// How a split communicator was made (`ncclCommSplit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitOf {
    pub parent: u64,
    /// `splitCount` (2.24-2.28) or `childCount` (2.29+): the parent's
    /// how-many-th split this is; absent before 2.24 and in CALL traces.
    pub count: Option<u64>,
    pub color: i64,
    pub key: i64,
}

/// A communicator's INIT START or COMPLETE line (or its CALL trace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitLine {
    pub prefix: Origin,
    pub comm: u64,
    pub rank: usize,
    pub nranks: usize,
    pub cuda_dev: Option<u32>,
    pub comm_id: Option<u64>,
    pub split: Option<SplitOf>,
    /// The line ends before `- Init COMPLETE`, after every field read here.
    pub cut: bool,
}

/// A call (or INIT) line that ends before a field it needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CutLine {
    pub prefix: Origin,
    /// `AllReduce`, ..., or `INIT`.
    pub name: String,
    /// The communicator, when its value was printed whole.
    pub comm: Option<u64>,
    /// The first field the line lacks, or (`malformed`) the field whose
    /// value cannot be read, with the value.
    pub missing: String,
    /// Whole, but a value of it is not what NCCL prints (a count with a
    /// letter in it): the line is damaged, not cut.
    pub malformed: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Call(CallLine),
    Init(InitLine),
    Version(NcclVersion),
    Cut(CutLine),
    /// A call's text without any `NCCL INFO` prefix (another process's
    /// output took it), with its communicator when readable.
    Orphan {
        comm: Option<u64>,
    },
    /// An NCCL 2.3.5 COLL line: no operation name.
    Unnamed,
    Other,
}

/// A parsed line, and the cut call of another process printed into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub line: Line,
    pub interrupted: Option<CutLine>,
}

/// The fields of a COLL line, in the order NCCL prints them.
const FIELDS: [&str; 13] = [
    "opCount",
    "sendbuff",
    "recvbuff",
    "count",
    "size",
    "datatype",
    "op",
    "root",
    "comm",
    "[nranks=",
    "stream",
    "task",
    "globalrank",
];

/// Parses one line of the reader.
pub fn parse_line(l: &nccl_log::Line) -> Parsed {
    let Some(n) = &l.nccl else {
        let line = match NcclVersion::find(l.text) {
            Some(v) => Line::Version(v),
            None => orphan(l.content),
        };
        return Parsed {
            line,
            interrupted: None,
        };
    };
    let line = match n.level {
        Level::Call => parse_trace(n.origin.clone(), l.number, n.message),
        Level::Info => parse_body(n.origin.clone(), l.number, n.message),
        Level::Warn | Level::Trace => NcclVersion::find(l.text).map_or(Line::Other, Line::Version),
    };
    Parsed {
        interrupted: if n.level == Level::Info {
            interrupted_call(n)
        } else {
            None
        },
        line,
    }
}

fn parse_body(prefix: Origin, number: usize, body: &str) -> Line {
    if body.starts_with("opCount ") {
        return Line::Unnamed;
    }
    if let Some(name) = call_name(body) {
        return parse_call(prefix, number, name, &body[name.len() + 1..]);
    }
    if let Some(line) = parse_init(&prefix, body) {
        return line;
    }
    NcclVersion::find(body).map_or(Line::Other, Line::Version)
}

/// A line without any mark: a call's text is an orphan.
fn orphan(text: &str) -> Line {
    match call_name(text) {
        Some(name) => {
            let tokens: Vec<&str> = text[name.len() + 1..].split_whitespace().collect();
            Line::Orphan {
                comm: whole(&tokens, "comm").and_then(hex),
            }
        }
        None => Line::Other,
    }
}

/// `AllReduce` in `AllReduce: opCount ...` (or a line cut after the colon).
fn call_name(body: &str) -> Option<&str> {
    let (name, rest) = body.split_once(':')?;
    let is_name = !name.is_empty() && name.len() <= 32 && name.chars().all(|c| c.is_ascii_alphabetic());
    let rest = rest.trim_start();
    let follows = rest.is_empty() || rest.starts_with("opCount") || "opCount".starts_with(rest);
    (is_name && name.starts_with(|c: char| c.is_ascii_uppercase()) && follows).then_some(name)
}

/// The call whose text an interleaved line cut off: the reader's
/// `interrupted` line, when it was a call.
fn interrupted_call(n: &Nccl) -> Option<CutLine> {
    let i = n.interrupted.as_ref()?;
    let name = call_name(i.text)?;
    Some(CutLine {
        prefix: i.origin.clone(),
        name: name.to_string(),
        comm: None,
        missing: "its end (another process's line was printed into it)".into(),
        malformed: false,
    })
}

fn hex(text: &str) -> Option<u64> {
    if text == "(nil)" {
        return Some(0);
    }
    let digits = text.strip_prefix("0x").unwrap_or(text);
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, 16).ok()
}

/// The value after `key` in a whitespace-separated list.
fn field<'a>(tokens: &[&'a str], key: &str) -> Option<&'a str> {
    tokens.windows(2).find(|w| w[0] == key).map(|w| w[1])
}

fn nranks_of(tokens: &[&str]) -> Option<usize> {
    tokens
        .iter()
        .find_map(|t| t.strip_prefix("[nranks=")?.strip_suffix(']')?.parse().ok())
}

fn parse_call(prefix: Origin, number: usize, name: &str, rest: &str) -> Line {
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    let cut = |missing: &str| {
        Line::Cut(CutLine {
            prefix: prefix.clone(),
            name: name.to_string(),
            comm: whole(&tokens, "comm").and_then(hex),
            missing: missing.to_string(),
            malformed: false,
        })
    };
    // `[nranks=K]` is printed after every field read here, so a line that
    // has it whole has them whole
    let Some(nranks) = nranks_of(&tokens) else {
        let missing = FIELDS
            .iter()
            .filter(|k| **k != "size")
            .find(|k| {
                !tokens
                    .iter()
                    .any(|t| t.starts_with(**k) && (t.len() > k.len() || **k != "[nranks="))
            })
            .map_or("[nranks=N]", |k| if *k == "[nranks=" { "[nranks=N]" } else { k });
        return cut(missing);
    };
    let unreadable = |key: &str| {
        Line::Cut(CutLine {
            prefix: prefix.clone(),
            name: name.to_string(),
            comm: whole(&tokens, "comm").and_then(hex),
            missing: format!("a readable {key} (`{}`)", field(&tokens, key).unwrap_or("")),
            malformed: true,
        })
    };
    let num = |key: &str| field(&tokens, key).and_then(|v| v.parse::<i64>().ok());
    let Some(op_count) = field(&tokens, "opCount").and_then(hex) else {
        return unreadable("opCount");
    };
    let Some(count) = field(&tokens, "count").and_then(|v| v.parse::<u64>().ok()) else {
        return unreadable("count");
    };
    let (Some(datatype), Some(op), Some(root)) = (num("datatype"), num("op"), num("root")) else {
        let key = ["datatype", "op", "root"]
            .into_iter()
            .find(|k| num(k).is_none())
            .unwrap_or("root");
        return unreadable(key);
    };
    let Some(comm) = field(&tokens, "comm").and_then(hex) else {
        return unreadable("comm");
    };
    Line::Call(CallLine {
        line: number,
        global_rank: field(&tokens, "globalrank").and_then(|v| v.parse().ok()),
        prefix,
        name: name.to_string(),
        op_count: Some(op_count),
        count,
        datatype,
        op,
        root,
        comm: Some(comm),
        nranks: Some(nranks),
        source: Source::Coll,
        at: (),
    })
}

/// An INIT line (`comm 0x.. rank R nranks K cudaDev D ...`), whole or cut
/// after its fields; `None` for any other line.
fn parse_init(prefix: &Origin, body: &str) -> Option<Line> {
    let tokens: Vec<&str> = body.split_whitespace().collect();
    let at = tokens
        .windows(6)
        .position(|w| w[0] == "comm" && w[1].starts_with("0x") && w[2] == "rank" && w[4] == "nranks")?;
    let t = &tokens[at..];
    // `cudaDev` follows nranks in every INIT format (other lines print
    // `nRanks`, and no cudaDev)
    if t.get(6).is_some_and(|k| *k != "cudaDev") {
        return None;
    }
    let ending = body.trim_end();
    let whole_line = ["Init COMPLETE", "Init START"].iter().any(|e| {
        ending
            .strip_suffix(e)
            .is_some_and(|head| head.trim_end().ends_with('-'))
    });
    let get = |key: &str| {
        if whole_line { field(t, key) } else { whole(t, key) }
    };
    let (Some(comm), Some(rank), Some(nranks)) = (
        get("comm").and_then(hex),
        get("rank").and_then(|v| v.parse().ok()),
        get("nranks").and_then(|v| v.parse().ok()),
    ) else {
        return Some(Line::Cut(CutLine {
            prefix: prefix.clone(),
            name: "INIT".into(),
            comm: whole(t, "comm").and_then(hex),
            missing: "rank and nranks".into(),
            malformed: false,
        }));
    };
    let int = |key: &str| get(key).and_then(|v| v.trim_end_matches('-').parse::<i64>().ok());
    let split = match (get("parent").and_then(hex), int("color"), int("key")) {
        (Some(parent), Some(color), Some(key)) => Some(SplitOf {
            parent,
            count: int("splitCount").or(int("childCount")).map(|c| c as u64),
            color,
            key,
        }),
        _ if get("parent").is_some() && !whole_line => {
            // a split line cut before its color and key: its members are unknown
            return Some(Line::Cut(CutLine {
                prefix: prefix.clone(),
                name: "INIT".into(),
                comm: Some(comm),
                missing: "color and key".into(),
                malformed: false,
            }));
        }
        _ => None,
    };
    Some(Line::Init(InitLine {
        prefix: prefix.clone(),
        comm,
        rank,
        nranks,
        cuda_dev: get("cudaDev").and_then(|d| d.parse().ok()),
        comm_id: get("commId").and_then(hex),
        split,
        cut: !whole_line,
    }))
}

/// A call line cut short, joined with its rest on the next line: the rest
/// of a wrapped line, or what follows other output printed into it
/// (`Epoch 1 | ... datatype 9 op 0 ...`). `None` unless the join reads as
/// one whole call whose parts meet at a field boundary.
pub fn join(number: usize, cut: &str, next: &str) -> Option<CallLine> {
    let next = next.trim();
    if next.is_empty() || nccl_log::line(number + 1, next).nccl.is_some() {
        return None;
    }
    let head = cut.trim_end();
    let first = nccl_log::line(number, head);
    let body = first.nccl.as_ref().filter(|n| n.level == Level::Info)?.message;
    let name = call_name(body)?;
    let tokens: Vec<&str> = body[name.len() + 1..].split_whitespace().collect();
    let last = tokens.last().copied().unwrap_or("");
    let rest = if FIELDS.contains(&last) {
        // cut after a key: the next line starts with its value
        next.to_string()
    } else {
        // cut after a value: the rest starts at the next key
        let present = FIELDS.iter().rposition(|k| tokens.contains(k))?;
        let key = FIELDS[present + 1..].iter().find(|k| **k != "size")?;
        let words: Vec<&str> = next.split_whitespace().collect();
        let at = words.iter().position(|w| w.starts_with(*key))?;
        // a number just before the key could be the rest of the cut value
        if at > 0 && words[at - 1].chars().all(|c| c.is_ascii_hexdigit() || c == 'x') {
            return None;
        }
        words[at..].join(" ")
    };
    match parse_line(&nccl_log::line(number, &format!("{head} {rest}"))).line {
        Line::Call(c) => Some(c),
        _ => None,
    }
}

mod trace;

#[cfg(test)]
mod tests;
