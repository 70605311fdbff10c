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
//! the `Op`s a workload's steps run.
//!
//! A call is one type from the line to the kept sequence: the line's
//! `line::CallLine` (what NCCL printed: its codes, its communicator's
//! pointer), attributed in place by the scan (`CallLine<scan::At>`: its
//! rank and communicator), then the `workload::Op` it replays as (types
//! and reductions decoded for the log's NCCL version, the communicator's
//! shape as its group, `Op::logged` naming the line), which
//! `workload::plan` makes each rank's `backend::Call` of. The log forces
//! the first two apart: a line's codes mean a type and a reduction only
//! once the version is known, and its communicator a group only once
//! every rank's INIT line is read.
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
//! Lines come from the one NCCL log reader (`nccl_log`: prefixes,
//! interleaving, gzip). Lines that cannot be read whole (cut at a
//! terminal's width, cut by other output, the end of a paste) or hold a
//! value that cannot be read are skipped and listed with their line
//! numbers; a cut line is joined with its rest when the next line holds
//! it; the log is refused only when the kept rank's own sequence has a gap
//! (`gaps`: its last call line cut short is no gap).
//!
//! Pure: text in, a `Log` or one error line (naming the log line) out;
//! `Log::schedule` maps it onto a launch, rescaling when asked.

pub mod check;
pub mod codes;
mod convert;
pub mod flight;
mod gaps;
pub mod line;
pub mod scan;

use crate::error::Error;

use super::groups::{Group, Partition};
use super::op::{Op, Schedule};
use crate::types::{NcclVersion, count_of};
pub use check::Check;
use convert::convert;
use scan::{Scan, at_line};

/// What to take from the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogOptions {
    /// The rank whose sequence to replay; the lowest when `None`.
    pub rank: Option<usize>,
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
    /// The kept calls as operations, each on its communicator's shape in
    /// the logged job (`Group::Partition`), with the line that printed it
    /// (`Op::logged`).
    pub calls: Vec<Op>,
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
    gaps::gaps(s, slot, &mut notes)?;
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

/// The kept rank and a description.
fn select(s: &Scan, opts: &LogOptions) -> Result<(usize, String), Error> {
    let callers: Vec<usize> = {
        let mut v: Vec<usize> = Vec::new();
        for c in &s.calls {
            if !v.contains(&c.at.slot) {
                v.push(c.at.slot);
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
        let sized = self.calls.iter().any(|c| self.partition(c).size() > 1);
        if self.world != launch && !rescale && sized {
            return Err(at_line(
                self.world_line,
                format!(
                    "the logged job has {} and this launch {launch}: launch {}, or replay the per-call counts on {} with --rescale",
                    count_of(self.world, "rank"),
                    count_of(self.world, "rank"),
                    count_of(launch, "rank")
                ),
            ));
        }
        let mut ops = Vec::with_capacity(self.calls.len());
        for c in &self.calls {
            let logged = self.partition(c);
            let (line, comm) = c.logged.map_or((0, 0), |l| (l.line, l.comm));
            let p = if rescale && logged.block == self.world {
                Partition {
                    block: launch,
                    stride: logged.stride,
                }
            } else {
                logged
            };
            p.check(launch)
                .map_err(|why| at_line(line, format!("comm {comm:#x} ({p}) does not fit {launch} ranks: {why}")))?;
            // at least 1: `check` passed
            let size = p.size();
            let outside = |v: Option<usize>| v.is_some_and(|v| v >= size);
            if outside(c.root) || outside(c.shift) {
                return Err(at_line(
                    line,
                    format!(
                        "comm {comm:#x}'s {} does not exist in its group of {size} ranks at this launch",
                        if c.root.is_some() { "root" } else { "peer" }
                    ),
                ));
            }
            let whole = Partition {
                block: launch,
                stride: 1,
            };
            let group = if p == whole { Group::World } else { Group::Partition(p) };
            ops.push(Op { group, ..c.clone() });
        }
        Ok(Schedule {
            name: "replay".into(),
            ops,
        })
    }

    /// A kept call's communicator, as the logged job had it.
    pub fn partition(&self, c: &Op) -> Partition {
        match c.group {
            Group::Partition(p) => p,
            _ => Partition {
                block: self.world,
                stride: 1,
            },
        }
    }

    /// The kept sequence, one line per call: `line 15    all_reduce
    /// 2097152 bfloat16 sum  (all 4 ranks, comm 0x55e290bd32d0)`.
    pub fn describe_calls(&self) -> Vec<String> {
        self.calls.iter().map(|c| self.describe(c)).collect()
    }

    fn describe(&self, c: &Op) -> String {
        let (line, comm) = c.logged.map_or((0, 0), |l| (l.line, l.comm));
        let mut out = format!("line {line:<5} {} {} {}", c.collective, c.count, c.dtype);
        if let Some(op) = c.op {
            out += &format!(" {}", op.name());
        }
        if let Some(r) = c.root {
            out += &format!(" root {r}");
        }
        match c.shift {
            Some(0) => out += " with itself (a local copy)",
            Some(d) => out += &format!(" to rank +{d}"),
            None => {}
        }
        let p = self.partition(c);
        let group = match p.size() {
            1 => "1 rank".to_string(),
            n if n == self.world => format!("all {n} ranks"),
            _ => p.to_string(),
        };
        format!("{out}  ({group}, comm {comm:#x})")
    }
}

#[cfg(test)]
mod tests;
