//! A real job's collective sequence, read from its NCCL (or RCCL) debug
//! log (`NCCL_DEBUG=INFO`, `NCCL_DEBUG_SUBSYS=INIT,COLL`; the CALL trace of
//! `NCCL_DEBUG=TRACE` too), checked across its ranks, and kept for replay
//! on this launch.
//!
//! The log may hold one rank's output (NCCL_DEBUG_FILE) or several ranks
//! interleaved (a launcher's stdout). `scan` tells the job's ranks and
//! communicators apart (INIT lines, commIds, splits, the process and
//! device of each line); `check` matches every communicator's calls across
//! its ranks before anything runs (a divergence or a one-sided Send is an
//! error of its own exit code); `convert` turns the kept rank's calls into
//! `LogCall`s.
//!
//! One rank's sequence is kept (`LogOptions::rank`, default the lowest
//! rank) and replayed the way SPMD training runs it: every rank of the
//! launch issues the same calls, each on its own group of the same shape.
//! A communicator's shape is a `Partition` (consecutive blocks, or every
//! s-th rank), found from its members; one over all ranks or a single rank
//! needs no membership. Send and Recv become shifted exchanges (send to r+d,
//! receive from r-d; d = 0 is a local copy), a Send and the matching Recv
//! of the same exchange (within `PAIR_WINDOW` point-to-point calls) counted
//! once.
//!
//! Lines that cannot be read whole (cut at a terminal's width, cut by
//! other output, the end of a paste) are skipped and listed; a cut line is
//! joined with its rest when the next line holds it; the log is refused
//! only when the kept rank's own sequence has a gap.
//!
//! Pure: text in, a `Log` or one error line (naming the log line) out;
//! `Log::schedule` maps it onto a launch, rescaling when asked.

pub mod check;
pub mod codes;
mod convert;
pub mod flight;
pub mod line;
pub mod scan;

use crate::collective::Collective;
use crate::error::Error;
use crate::types::{DType, ReduceOp};

use super::groups::{Group, Partition};
use super::op::{Op, Phase, Schedule};
use crate::types::NcclVersion;
pub use check::Check;
use codes::LogType;
use convert::convert;
use scan::{Scan, at_line};

/// What to take from the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// The rank whose sequence to replay; the lowest when `None`.
    pub rank: Option<usize>,
}

/// One call of the kept sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogCall {
    /// 1-based line of the log.
    pub line: usize,
    pub collective: Collective,
    /// The call's count, which is the `count` column's meaning.
    pub count: u64,
    /// The type replayed (an 8-bit float moves as uint8).
    pub dtype: DType,
    pub log_type: LogType,
    pub op: Option<ReduceOp>,
    /// The root's rank in its communicator (broadcast, reduce, gather, scatter).
    pub root: Option<usize>,
    /// Send to r+shift, receive from r-shift (sendrecv); 0: the rank itself.
    pub shift: Option<usize>,
    /// The communicator's shape in the logged job.
    pub partition: Partition,
    /// `comm 0x55e290bd32d0`.
    pub comm: String,
}

/// The sequence of one rank of a logged job.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Log {
    pub version: Option<NcclVersion>,
    /// Ranks of the logged job: the largest communicator in the log, or
    /// as many ranks as it shows.
    pub world: usize,
    /// The first line showing a communicator that large.
    pub world_line: usize,
    /// The kept rank, when the log tells ranks.
    pub rank: Option<usize>,
    /// Which rank was kept, in words.
    pub source: String,
    pub calls: Vec<LogCall>,
    /// Things the replay header should say (skipped lines, substitutions,
    /// the check's notes).
    pub notes: Vec<String>,
}

const NO_CALLS: &str = "the log has no collective calls: NCCL prints one line per call (`AllReduce: opCount ...`) only with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS including COLL (e.g. NCCL_DEBUG_SUBSYS=INIT,COLL)";

/// Reads the log and checks its ranks against each other: the scan and
/// the check, or one line naming a format that cannot be read.
pub fn read_log(text: &str) -> Result<(Scan, Check), Error> {
    if let Some(why) = flight::refusal(text) {
        return Err(Error::usage(why));
    }
    let s = scan::scan(text)?;
    if s.calls.is_empty() {
        return Err(no_calls(&s));
    }
    let c = check::check(&s);
    Ok((s, c))
}

/// Why a log without readable calls has none, in one line.
fn no_calls(s: &Scan) -> Error {
    if let Some(&n) = s.unnamed.first() {
        return at_line(
            n,
            format!(
                "an NCCL 2.3 COLL line (`opCount ... size ... datatype ...`, {} such lines): NCCL 2.3.5 and older do not print the operation's name, so which collective each line is cannot be told and the log cannot be replayed (NCCL 2.3.7 and later name it)",
                s.unnamed.len()
            ),
        );
    }
    if let Some(&n) = s.elided.first() {
        return at_line(
            n,
            "an NCCL CALL trace line whose communicator is elided (`0x...`, as NCCL's documentation prints it): which communicator, and so how many ranks, each call ran on is not in the log",
        );
    }
    if !s.orphans.is_empty() {
        let shown: Vec<String> = s.orphans.iter().take(6).map(|(n, _)| n.to_string()).collect();
        return Error::usage(format!(
            "the log's call lines (line {}{}) carry no `host:pid:tid [dev] NCCL INFO` prefix, so which process and rank issued each cannot be told: replay a log as NCCL writes it (NCCL_DEBUG_FILE, or the job's own output)",
            shown.join(", "),
            if s.orphans.len() > 6 { ", ..." } else { "" }
        ));
    }
    if !s.cuts.is_empty() {
        let shown: Vec<String> = s.cuts.iter().take(6).map(|c| c.line.to_string()).collect();
        return Error::usage(format!(
            "every call line of the log is cut short (line {}{}): nothing can be replayed",
            shown.join(", "),
            if s.cuts.len() > 6 { ", ..." } else { "" }
        ));
    }
    Error::usage(NO_CALLS)
}

/// The check's first disagreement as an error of its own exit code.
pub fn disagreement(c: &Check) -> Option<Error> {
    let f = c.first()?;
    let more = c.divergences.len() + c.one_sided.len() - 1;
    Some(Error::Divergence(format!(
        "line {}: {}{}; nothing was run (collbench replay --check-only LOG prints the whole analysis)",
        f.line,
        f.text,
        if more > 0 {
            format!(" ({more} more)")
        } else {
            String::new()
        }
    )))
}

/// Parses a log, checks its ranks, and keeps one rank's sequence.
pub fn parse_log(text: &str, opts: &LogOptions) -> Result<Log, Error> {
    let (s, c) = read_log(text)?;
    if let Some(e) = disagreement(&c) {
        return Err(e);
    }
    keep(&s, &c, opts)
}

/// The kept rank's sequence of a checked log.
pub fn keep(s: &Scan, c: &Check, opts: &LogOptions) -> Result<Log, Error> {
    let (slot, source) = select(s, opts)?;
    let mut notes = s.notes.clone();
    gaps(s, slot, &mut notes)?;
    if s.slots[slot].rank.is_none() {
        notes.push(format!(
            "the log has no INIT lines that tell ranks (NCCL_DEBUG_SUBSYS=INIT,COLL prints them): replaying {source}"
        ));
    }
    let calls = convert(s, slot, &mut notes)?;
    for n in &c.notes {
        if !notes.contains(n) {
            notes.push(n.clone());
        }
    }
    Ok(Log {
        version: s.version,
        world: s.world,
        world_line: s.world_line,
        rank: s.slots[slot].rank,
        source,
        calls,
        notes,
    })
}

fn numbers(lines: &[usize]) -> String {
    let shown: Vec<String> = lines.iter().take(8).map(|n| n.to_string()).collect();
    format!("{}{}", shown.join(", "), if lines.len() > 8 { ", ..." } else { "" })
}

/// Refuses a kept rank whose sequence has a gap; notes the lines skipped.
fn gaps(s: &Scan, slot: usize, notes: &mut Vec<String>) -> Result<(), Error> {
    let who = s.slots[slot].name();
    refuse_gaps(s, slot, &who)?;
    note_skipped(s, &who, notes);
    Ok(())
}

/// Refuses the kept rank (`who`, in `slot`) when one of its call lines is
/// cut short, or may be missing.
fn refuse_gaps(s: &Scan, slot: usize, who: &str) -> Result<(), Error> {
    let own: Vec<usize> = s
        .cuts
        .iter()
        .filter(|c| c.slot == Some(slot) && c.name != "INIT")
        .map(|c| c.line)
        .collect();
    if !own.is_empty() {
        return Err(Error::usage(format!(
            "{who}'s sequence has a gap: its call line{} {} {} cut short (at a terminal's width, by other output, or at the end of the file) and no later line holds the rest; replay another rank (--rank) or a complete log",
            if own.len() > 1 { "s" } else { "" },
            numbers(&own),
            if own.len() > 1 { "are" } else { "is" }
        )));
    }
    let ptrs: Vec<u64> = s.members.iter().filter(|m| m.slot == slot).map(|m| m.ptr).collect();
    let stray: Vec<usize> = s
        .orphans
        .iter()
        .filter(|(_, comm)| comm.is_some_and(|c| ptrs.contains(&c)))
        .map(|(n, _)| *n)
        .collect();
    if !stray.is_empty() {
        return Err(Error::usage(format!(
            "{who}'s sequence may have a gap: line {} {} a call on its communicator without its `host:pid:tid [dev] NCCL INFO` prefix (other output took it)",
            numbers(&stray),
            if stray.len() > 1 { "are" } else { "is" }
        )));
    }
    let unknown: Vec<usize> = s
        .cuts
        .iter()
        .filter(|c| c.slot.is_none() && c.name != "INIT")
        .map(|c| c.line)
        .collect();
    if !unknown.is_empty() && s.slots.len() == 1 {
        return Err(Error::usage(format!(
            "{who}'s sequence may have a gap: call line{} {} {} cut short before its prefix or communicator could be read",
            if unknown.len() > 1 { "s" } else { "" },
            numbers(&unknown),
            if unknown.len() > 1 { "are" } else { "is" }
        )));
    }
    Ok(())
}

/// Notes the lines skipped: cut short, without their prefix, without the
/// operation's name, or with an elided communicator.
fn note_skipped(s: &Scan, who: &str, notes: &mut Vec<String>) {
    let mut cut: Vec<usize> = s
        .cuts
        .iter()
        .map(|c| c.line)
        .chain(s.cut_inits.iter().copied())
        .collect();
    cut.sort();
    if !cut.is_empty() {
        notes.push(format!(
            "{} lines cut short (line {}) were skipped: none is {who}'s{}",
            cut.len(),
            numbers(&cut),
            match s.cut_inits.as_slice() {
                [] => String::new(),
                [one] => format!(" (line {one}, an INIT line cut after its fields, is read up to the cut)"),
                many => format!(
                    " (lines {}, INIT lines cut after their fields, are read up to the cut)",
                    numbers(many)
                ),
            }
        ));
    }
    if !s.orphans.is_empty() {
        let lines: Vec<usize> = s.orphans.iter().map(|(n, _)| *n).collect();
        notes.push(format!(
            "{} call lines without their `host:pid:tid [dev] NCCL INFO` prefix (output interleaved by another process) were skipped: line {}",
            lines.len(),
            numbers(&lines)
        ));
    }
    if !s.unnamed.is_empty() {
        notes.push(format!(
            "{} NCCL 2.3 COLL lines without the operation's name were skipped (line {})",
            s.unnamed.len(),
            numbers(&s.unnamed)
        ));
    }
    if !s.elided.is_empty() {
        notes.push(format!(
            "{} NCCL CALL trace lines with an elided communicator were skipped (line {})",
            s.elided.len(),
            numbers(&s.elided)
        ));
    }
}

/// The kept rank and a description.
fn select(s: &Scan, opts: &LogOptions) -> Result<(usize, String), Error> {
    let callers: Vec<usize> = {
        let mut v: Vec<usize> = Vec::new();
        for c in &s.calls {
            if !v.contains(&c.slot) {
                v.push(c.slot);
            }
        }
        v
    };
    let ranked = |r: usize| s.slots.iter().position(|x| x.rank == Some(r));
    let chosen = match opts.rank {
        Some(r) => match ranked(r) {
            Some(i) if callers.contains(&i) || s.cuts.iter().any(|c| c.slot == Some(i) && c.name != "INIT") => i,
            Some(_) => return Err(Error::usage(format!("rank {r} made no collective calls in the log"))),
            None if s.known_ranks().is_empty() => {
                return Err(Error::usage(format!(
                    "rank {r} cannot be found: the log has no INIT lines that tell ranks (log with NCCL_DEBUG_SUBSYS=INIT,COLL)"
                )));
            }
            None => {
                let known: Vec<String> = s.known_ranks().iter().map(|r| r.to_string()).collect();
                return Err(Error::usage(format!(
                    "rank {r} is not in the log (it shows ranks {})",
                    known.join(", ")
                )));
            }
        },
        None => {
            let lowest = callers.iter().filter_map(|&i| s.slots[i].rank).min();
            lowest.and_then(ranked).unwrap_or(callers[0])
        }
    };
    let slot = &s.slots[chosen];
    let source = match slot.rank {
        Some(r) => format!("rank {r} ({})", slot.describe()),
        None => format!("the first process in the log ({})", slot.describe()),
    };
    Ok((chosen, source))
}

impl Log {
    /// The sequence as operations of this launch of `launch` ranks. Without
    /// `rescale` the log's job must have as many ranks; with it, groups over
    /// the whole job span the whole launch, smaller ones keep their size,
    /// and every call keeps its count.
    pub fn schedule(&self, launch: usize, rescale: bool) -> Result<Schedule, Error> {
        // a log whose calls all run on single ranks replays at any size
        let sized = self.calls.iter().any(|c| c.partition.size() > 1);
        if self.world != launch && !rescale && sized {
            return Err(at_line(
                self.world_line,
                format!(
                    "the logged job has {} ranks and this launch {launch}: launch {} ranks, or replay the per-call counts on {launch} ranks with --rescale",
                    self.world, self.world
                ),
            ));
        }
        let mut ops = Vec::with_capacity(self.calls.len());
        for c in &self.calls {
            let p = if rescale && c.partition.block == self.world {
                Partition {
                    block: launch,
                    stride: c.partition.stride,
                }
            } else {
                c.partition
            };
            p.check(launch)
                .map_err(|why| at_line(c.line, format!("{} ({p}) does not fit {launch} ranks: {why}", c.comm)))?;
            // at least 1: `check` passed
            let size = p.size();
            let outside = |v: Option<usize>| v.is_some_and(|v| v >= size);
            if outside(c.root) || outside(c.shift) {
                return Err(at_line(
                    c.line,
                    format!(
                        "{}'s {} does not exist in its group of {size} ranks at this launch",
                        c.comm,
                        if c.root.is_some() { "root" } else { "peer" }
                    ),
                ));
            }
            let group = if p
                == (Partition {
                    block: launch,
                    stride: 1,
                }) {
                Group::World
            } else {
                Group::Partition(p)
            };
            ops.push(Op {
                collective: c.collective,
                count: c.count,
                dtype: c.dtype,
                op: c.op,
                root: c.root,
                shift: c.shift,
                group,
                phase: Phase::Log,
                label: format!("line {} {}", c.line, c.comm),
            });
        }
        Ok(Schedule {
            name: "replay".into(),
            ops,
        })
    }
}

#[cfg(test)]
mod tests;
