//! NCCL's debug logs as users have them, read once for every reader: the
//! doctor (`doctor`), replay (`workload::replay::line`) and the transport
//! observation (`topology::observe::nccl_log`). This module owns how a log
//! reaches the program (a job's stdout, per-rank `NCCL_DEBUG_FILE` files,
//! a folder of them, gzip: `read_paths`, `decode`) and how one line of it
//! splits (`Line`); what NCCL's messages say is `message`'s, and what they
//! mean is each reader's.
//!
//! NCCL writes (src/debug.cc, every release):
//! - `host:pid:tid [cudaDev] NCCL INFO <message>`;
//! - `host:pid:tid [cudaDev] file.cc:123 NCCL WARN <message>`, from 2.26.2
//!   after a timestamp (`[2026-04-22 21:34:20] `), and after an empty line;
//! - `host:pid:tid [cudaDev] 12.345 file.cc:123 NCCL TRACE <message>`;
//! - `host:pid:tid NCCL CALL ncclAllReduce(...)` (the CALL trace);
//! - `NCCL version 2.x.y+cudaA.B`, without any prefix up to 2.21.5.
//!
//! Before NCCL's prefix a launcher or a terminal may add its own
//! (`[rank0]:` torchrun, `[1,0]<stdout>:` Open MPI, ` 0: ` srun,
//! `10.10.23.10: ` pdsh, `[trainer3]:` torchx, `(RayTrainWorker pid=..)`,
//! a timestamp), and a paste Markdown's (`> `, `**bold**`, backticks,
//! indentation). Output of several processes can interleave mid-line, so a
//! line's own NCCL text is what follows its last mark, its prefix what
//! stands just before that mark, and an earlier mark in the same line is
//! another process's line that this one was printed into (`Interrupted`).
//! Lines NCCL wrote without its prefix (an exception's `Last error:`, a
//! quoted excerpt) are kept with their text (`Line::content`), so that a
//! reader that knows the message can still find it.
//!
//! A line may end at any character: a job killed while NCCL wrote it (a
//! log's last line), a terminal's width, the end of a paste. A value that
//! runs to the end of its line may be the start of a longer one (`(size
//! 9637` of `(size 9637888)`), so readers take a value from a line only
//! where something follows it (`whole`, `whole_number`).
//!
//! Pure but for `read_paths`; total: any text splits, nothing panics.

mod decode;
mod files;
pub mod message;

pub use decode::decode;
pub use files::{LogFile, read_file, read_paths};

/// NCCL's level word, which follows its prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Level {
    Info,
    Warn,
    Trace,
    /// `NCCL CALL`: a traced API call (NCCL_DEBUG=TRACE, subsystem CALL).
    Call,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Info => "INFO",
            Level::Warn => "WARN",
            Level::Trace => "TRACE",
            Level::Call => "CALL",
        }
    }
}

/// Every mark NCCL writes between its prefix and its message.
const MARKS: [(&str, Level); 4] = [
    ("NCCL INFO ", Level::Info),
    ("NCCL WARN ", Level::Warn),
    ("NCCL TRACE ", Level::Trace),
    ("NCCL CALL ", Level::Call),
];

/// Where an NCCL line came from: NCCL's own `host:pid:tid [cudaDev]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    /// Empty when the line has no `host:pid:tid` part.
    pub host: String,
    pub pid: u64,
    pub tid: u64,
    /// The CUDA device in brackets (the calling thread's, not the rank).
    pub dev: Option<u32>,
    /// A torchrun `[rankN]:` label glued before the host.
    pub rank_label: Option<usize>,
}

impl Origin {
    /// `node1 pid 4101 device 0`; `a line without host` when NCCL's prefix
    /// was lost.
    pub fn describe(&self) -> String {
        let dev = self.dev.map_or(String::new(), |d| format!(" device {d}"));
        if self.host.is_empty() {
            format!("a line without host{dev}")
        } else {
            format!("{} pid {}{dev}", self.host, self.pid)
        }
    }
}

/// Another process's line that a line was printed into: its origin and
/// the text of it that came before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interrupted<'a> {
    pub origin: Origin,
    pub level: Level,
    pub text: &'a str,
}

/// The part of a line NCCL wrote, split.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nccl<'a> {
    pub level: Level,
    pub origin: Origin,
    /// `misc/shmutils.cc:88`: where a WARN or TRACE line was printed.
    pub source: Option<&'a str>,
    /// The text after the mark (a device printed after it, `NCCL INFO [2]
    /// ...`, goes to `origin.dev`; Markdown bold around it is dropped).
    pub message: &'a str,
    /// What stands before NCCL's prefix: a launcher's label, a timestamp,
    /// or (with `interrupted`) another line's start.
    pub lead: &'a str,
    pub interrupted: Option<Interrupted<'a>>,
}

impl<'a> Nccl<'a> {
    /// The subsystem a message names itself by, where it prints one:
    /// `NET/IB` in `NET/IB : Using ...`, `NET/Plugin`, `Bootstrap`, `RAS`.
    pub fn subsystem(&self) -> Option<&'a str> {
        message::subsystem(self.message)
    }
}

/// One line of a log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line<'a> {
    /// 1-based, in its file.
    pub number: usize,
    /// As in the file, without its line end.
    pub text: &'a str,
    /// NCCL's part, when the line holds one of NCCL's marks.
    pub nccl: Option<Nccl<'a>>,
    /// The line without what launchers, terminals and pastes put before
    /// it: an NCCL line's message, else the text after a launcher's label,
    /// Markdown quoting and indentation.
    pub content: &'a str,
}

impl<'a> Line<'a> {
    /// The line's level, when NCCL's mark is on it.
    pub fn level(&self) -> Option<Level> {
        self.nccl.as_ref().map(|n| n.level)
    }

    /// The origin NCCL printed, when it did.
    pub fn origin(&self) -> Option<&Origin> {
        self.nccl.as_ref().map(|n| &n.origin).filter(|o| !o.host.is_empty())
    }
}

/// The word after `key` in `words` (a message split at whitespace), only
/// where another word follows it: a line's last word may be cut.
pub fn whole<'a>(words: &[&'a str], key: &str) -> Option<&'a str> {
    words.windows(3).find(|w| w[0] == key).map(|w| w[1])
}

/// The number `text` starts with, only where a character other than a
/// digit follows it (`9637888)`, `12,`): digits that run to the end of the
/// line may be cut.
pub fn whole_number(text: &str) -> Option<u64> {
    let end = text.find(|c: char| !c.is_ascii_digit())?;
    text[..end].parse().ok()
}

/// Every line of `text`, split.
pub fn lines(text: &str) -> impl Iterator<Item = Line<'_>> {
    text.lines().enumerate().map(|(i, raw)| line(i + 1, raw))
}

/// One line, split.
pub fn line(number: usize, raw: &str) -> Line<'_> {
    let text = raw.trim_end_matches(['\r', '\n']);
    match split(text) {
        Some(nccl) => Line {
            number,
            text,
            content: nccl.message,
            nccl: Some(nccl),
        },
        None => Line {
            number,
            text,
            nccl: None,
            content: strip_display(text),
        },
    }
}

/// The last of NCCL's marks in `text`: where it starts, its length, its level.
fn last_mark(text: &str) -> Option<(usize, usize, Level)> {
    MARKS
        .iter()
        .filter_map(|(mark, level)| text.rfind(mark).map(|at| (at, mark.len(), *level)))
        .max_by_key(|(at, _, _)| *at)
}

fn split(text: &str) -> Option<Nccl<'_>> {
    let (at, len, level) = last_mark(text)?;
    let mut message = text[at + len..].trim_end();
    let before = text[..at].trim_end();
    // Markdown bold around NCCL's text (`**NCCL WARN ...**`)
    let bold = before.ends_with("**");
    let before = before.trim_end_matches('*');
    if bold {
        message = message.trim_end_matches('*').trim_end();
    }
    let (mut origin, source, start) = origin_of(before, level);
    // `NCCL INFO [2] AllReduce: ...`: the device after the mark
    if let Some(rest) = message.strip_prefix('[')
        && let Some((dev, after)) = rest.split_once("] ")
        && let Ok(d) = dev.trim().parse()
    {
        origin.dev = Some(d);
        message = after;
    }
    let lead = &before[..start];
    let interrupted = last_mark(lead).map(|(at2, len2, level2)| {
        let (outer, _, _) = origin_of(lead[..at2].trim_end(), level2);
        Interrupted {
            origin: outer,
            level: level2,
            text: lead[at2 + len2..].trim(),
        }
    });
    Some(Nccl {
        level,
        origin,
        source,
        message,
        lead,
        interrupted,
    })
}

/// `file.cc:123` (a WARN's or TRACE's source location).
fn is_source(token: &str) -> bool {
    token.rsplit_once(':').is_some_and(|(file, line)| {
        !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) && file.contains('.') && !file.contains(':')
    })
}

fn is_number(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit() || b == b'.')
}

/// The origin in the text before a mark, the source location, and where
/// the prefix starts (what comes before it is the line's lead).
fn origin_of(before: &str, level: Level) -> (Origin, Option<&str>, usize) {
    let mut o = Origin::default();
    let mut rest = before.trim_end();
    let mut source = None;
    if matches!(level, Level::Warn | Level::Trace)
        && let Some((head, last)) = rest.rsplit_once(char::is_whitespace).or(Some(("", rest)))
        && is_source(last)
    {
        source = Some(last);
        rest = head.trim_end();
    }
    // a timestamp after `[dev]`: TRACE's seconds, old RCCL's microseconds
    if let Some((head, last)) = rest.rsplit_once(char::is_whitespace)
        && is_number(last)
        && head.trim_end().ends_with(']')
    {
        rest = head.trim_end();
    }
    if rest.ends_with(']')
        && let Some(open) = rest.rfind('[')
        && let Ok(d) = rest[open + 1..rest.len() - 1].trim().parse()
    {
        o.dev = Some(d);
        rest = rest[..open].trim_end();
    }
    let token_at = rest.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let token = &rest[token_at..];
    let parts: Vec<&str> = token.rsplitn(4, ':').collect();
    let mut start = rest.len();
    if parts.len() >= 3
        && let (Ok(tid), Ok(pid)) = (parts[0].parse(), parts[1].parse())
    {
        o.tid = tid;
        o.pid = pid;
        o.host = parts[2].to_string();
        start = token_at;
        if let Some(label) = parts.get(3) {
            // glued to the host: `[rank0]:host:1:2`, `[1,0]<stdout>:host:1:2`
            start = token_at + label.len() + 1;
            o.rank_label = label
                .strip_prefix("[rank")
                .and_then(|l| l.strip_suffix(']'))
                .and_then(|n| n.parse().ok());
        }
    } else if o.dev.is_some() {
        // `[0] misc/ibvwrap.cc:63 NCCL WARN ...` as some pastes keep it
        start = rest.len();
    }
    (o, source, start.min(before.len()))
}

/// A line without NCCL's mark, without what a paste or a launcher put
/// before it: indentation, Markdown quoting, bold and code marks, and a
/// launcher's label (`[1,0]<stdout>:`, `[rank0]:`, `[trainer0|0]:`, srun's
/// `12: `).
fn strip_display(text: &str) -> &str {
    let mut t = text.trim();
    loop {
        let before = t;
        t = t.trim_start_matches(['>', '`', '*']).trim_start();
        if let Some(end) = t.find("]<stdout>:").or_else(|| t.find("]<stderr>:"))
            && t.starts_with('[')
        {
            t = &t[end + "]<stdout>:".len()..];
        } else if let Some(rest) = t.strip_prefix('[')
            && let Some((label, after)) = rest.split_once("]:")
            && !label.is_empty()
            && !label.contains(' ')
        {
            t = after;
        } else if let Some((label, after)) = t.split_once(": ")
            && !label.is_empty()
            && label.bytes().all(|b| b.is_ascii_digit())
        {
            t = after;
        }
        t = t.trim();
        if t == before {
            return t.trim_end_matches(['`', '*']);
        }
    }
}

#[cfg(test)]
mod tests;
