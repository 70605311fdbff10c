//! A real job's collective sequence, read from its NCCL debug log
//! (`NCCL_DEBUG=INFO`, `NCCL_DEBUG_SUBSYS=INIT,COLL`), for replay on this
//! launch.
//!
//! The log may hold one rank's output (NCCL_DEBUG_FILE) or several ranks
//! interleaved (a launcher's stdout). Lines are attributed to a process by
//! their `host:pid:tid [dev]` prefix and to a communicator by the process
//! and the communicator's address; INIT lines give each communicator's
//! rank, size and commId (the hash of its unique id, the same in every
//! member), so the members of a communicator are the processes whose INIT
//! lines share its commId, and a process's rank in the job is its rank in a
//! communicator over all the job's ranks (the largest in the log).
//!
//! One process's sequence is kept (`LogOptions::rank`, default the lowest
//! rank) and replayed the way SPMD training runs it: every rank of the
//! launch issues the same calls, each on its own group of the same shape.
//! A communicator's shape is a `Partition` (consecutive blocks, or every
//! s-th rank), found from its members; one over all ranks or a single rank
//! needs no membership. Send and Recv become shifted exchanges (send to r+d,
//! receive from r-d), a Send and the matching Recv of the same exchange
//! (within `PAIR_WINDOW` point-to-point calls) counted once.
//!
//! Pure: text in, a `Log` or one error line (naming the log line) out;
//! `Log::schedule` maps it onto a launch, rescaling when asked.

pub mod codes;
mod convert;
pub mod line;

use std::collections::HashMap;

use crate::collective::Collective;
use crate::error::Error;
use crate::types::{DType, ReduceOp};

use super::groups::{Group, Partition};
use super::op::{Op, Phase, Schedule};
use crate::types::NcclVersion;
use codes::LogType;
use convert::convert;
use line::{CallLine, Line};

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
    /// The root's rank in its communicator (broadcast, reduce).
    pub root: Option<usize>,
    /// Send to r+shift, receive from r-shift (sendrecv).
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
    /// Ranks of the logged job: the largest communicator in the log.
    pub world: usize,
    /// The first line showing a communicator that large.
    pub world_line: usize,
    /// The kept rank, when the log tells ranks.
    pub rank: Option<usize>,
    /// Which process was kept, in words.
    pub source: String,
    pub calls: Vec<LogCall>,
    /// Things the replay header should say (skipped lines, substitutions).
    pub notes: Vec<String>,
}

/// A process: host, pid, CUDA device.
type Agent = (String, u64, Option<u32>);

/// A communicator as one process's INIT line shows it.
struct Instance {
    agent: Agent,
    rank: usize,
    nranks: usize,
    comm_id: Option<u64>,
    line: usize,
}

/// Everything the log's lines say, in order.
struct Scan {
    version: Option<NcclVersion>,
    instances: Vec<Instance>,
    /// Line, call, its communicator's instance.
    calls: Vec<(usize, CallLine, Option<usize>)>,
    orphans: Vec<usize>,
    rank_labels: HashMap<Agent, usize>,
    world: usize,
    world_line: usize,
    notes: Vec<String>,
}

const NO_CALLS: &str = "the log has no collective calls: NCCL prints one line per call (`AllReduce: opCount ...`) only with NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS including COLL (e.g. NCCL_DEBUG_SUBSYS=INIT,COLL)";

fn at_line(line: usize, why: impl std::fmt::Display) -> Error {
    Error::usage(format!("line {line}: {why}"))
}

fn agent_of(prefix: &line::Prefix, dev: Option<u32>) -> Agent {
    (prefix.host.clone(), prefix.pid, dev.or(prefix.dev))
}

fn scan(text: &str) -> Result<Scan, Error> {
    let mut s = Scan {
        version: None,
        instances: Vec::new(),
        calls: Vec::new(),
        orphans: Vec::new(),
        rank_labels: HashMap::new(),
        world: 0,
        world_line: 0,
        notes: Vec::new(),
    };
    let mut current: HashMap<(String, u64, u64), usize> = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let parsed = line::parse_line(raw).map_err(|why| at_line(n, why))?;
        let (nranks, prefix) = match parsed {
            Line::Version(v) => {
                match s.version {
                    None => s.version = Some(v),
                    Some(first) if first != v => s.notes.push(format!(
                        "line {n} shows NCCL {v} after {first}; codes are read as {first}'s"
                    )),
                    Some(_) => {}
                }
                continue;
            }
            Line::Init(init) => {
                let agent = agent_of(&init.prefix, init.cuda_dev);
                current.insert(
                    (init.prefix.host.clone(), init.prefix.pid, init.comm),
                    s.instances.len(),
                );
                s.instances.push(Instance {
                    agent,
                    rank: init.rank,
                    nranks: init.nranks,
                    comm_id: init.comm_id,
                    line: n,
                });
                (init.nranks, init.prefix)
            }
            Line::Call(call) => {
                let inst = current
                    .get(&(call.prefix.host.clone(), call.prefix.pid, call.comm))
                    .copied();
                let out = (call.nranks, call.prefix.clone());
                s.calls.push((n, call, inst));
                out
            }
            Line::Orphan => {
                s.orphans.push(n);
                continue;
            }
            Line::Other => continue,
        };
        if nranks > s.world {
            s.world = nranks;
            s.world_line = n;
        }
        if let Some(label) = prefix.rank_label {
            s.rank_labels.entry(agent_of(&prefix, None)).or_insert(label);
        }
    }
    Ok(s)
}

impl Scan {
    fn call_agent(&self, call: &CallLine, inst: Option<usize>) -> Agent {
        match inst {
            Some(i) => self.instances[i].agent.clone(),
            None => agent_of(&call.prefix, None),
        }
    }

    /// Every process's rank in the job: its rank in the first communicator
    /// over all ranks, else a torchrun `[rankN]:` label.
    fn world_ranks(&self) -> Result<HashMap<Agent, usize>, Error> {
        let mut ranks: HashMap<Agent, usize> = HashMap::new();
        let mut claimed: HashMap<usize, (Agent, usize)> = HashMap::new();
        for inst in self.instances.iter().filter(|i| i.nranks == self.world) {
            if ranks.contains_key(&inst.agent) {
                continue;
            }
            if let Some((other, line)) = claimed.get(&inst.rank)
                && *other != inst.agent
            {
                return Err(at_line(
                    inst.line,
                    format!(
                        "a second process claims rank {} of {} (first at line {line}): the log mixes two jobs",
                        inst.rank, self.world
                    ),
                ));
            }
            claimed.insert(inst.rank, (inst.agent.clone(), inst.line));
            ranks.insert(inst.agent.clone(), inst.rank);
        }
        for (agent, &label) in &self.rank_labels {
            let matching: Vec<&Agent> = ranks.keys().filter(|a| a.0 == agent.0 && a.1 == agent.1).collect();
            if matching.is_empty() {
                ranks.insert(agent.clone(), label);
            }
        }
        Ok(ranks)
    }
}

/// Parses a log and keeps one rank's sequence.
pub fn parse_log(text: &str, opts: &LogOptions) -> Result<Log, Error> {
    let mut s = scan(text)?;
    if s.calls.is_empty() {
        return Err(Error::usage(NO_CALLS));
    }
    let ranks = s.world_ranks()?;
    let (agent, rank, source) = select(&s, &ranks, opts)?;
    if !s.orphans.is_empty() {
        let shown: Vec<String> = s.orphans.iter().take(5).map(|n| n.to_string()).collect();
        s.notes.push(format!(
            "{} call lines without their `host:pid:tid [dev] NCCL INFO` prefix (output interleaved by another process) were skipped: line {}{}",
            s.orphans.len(),
            shown.join(", "),
            if s.orphans.len() > 5 { ", ..." } else { "" }
        ));
    }
    if rank.is_none() {
        s.notes.push(format!(
            "the log has no INIT lines that tell ranks (NCCL_DEBUG_SUBSYS=INIT,COLL prints them): replaying {source}"
        ));
    }
    let mut notes = std::mem::take(&mut s.notes);
    let calls = convert(&s, &agent, rank, &ranks, &mut notes)?;
    Ok(Log {
        version: s.version,
        world: s.world,
        world_line: s.world_line,
        rank,
        source,
        calls,
        notes,
    })
}

fn describe(agent: &Agent) -> String {
    let dev = agent.2.map_or(String::new(), |d| format!(" device {d}"));
    if agent.0.is_empty() {
        format!("a process without host and pid,{dev}")
            .trim_end_matches(',')
            .to_string()
    } else {
        format!("{} pid {}{dev}", agent.0, agent.1)
    }
}

/// The kept process, its rank and a description.
fn select(s: &Scan, ranks: &HashMap<Agent, usize>, opts: &LogOptions) -> Result<(Agent, Option<usize>, String), Error> {
    let mut callers: Vec<Agent> = Vec::new();
    for (_, call, inst) in &s.calls {
        let a = s.call_agent(call, *inst);
        if !callers.contains(&a) {
            callers.push(a);
        }
    }
    let ranked = |r: usize| callers.iter().find(|a| ranks.get(*a) == Some(&r)).cloned();
    let chosen = match opts.rank {
        Some(r) => match ranked(r) {
            Some(a) => a,
            None if ranks.values().any(|&v| v == r) => {
                return Err(Error::usage(format!("rank {r} made no collective calls in the log")));
            }
            None if ranks.is_empty() => {
                return Err(Error::usage(format!(
                    "rank {r} cannot be found: the log has no INIT lines that tell ranks (log with NCCL_DEBUG_SUBSYS=INIT,COLL)"
                )));
            }
            None => {
                let mut known: Vec<usize> = ranks.values().copied().collect();
                known.sort();
                let known: Vec<String> = known.iter().map(|r| r.to_string()).collect();
                return Err(Error::usage(format!(
                    "rank {r} is not in the log (it shows ranks {})",
                    known.join(", ")
                )));
            }
        },
        None => {
            let lowest = callers.iter().filter_map(|a| ranks.get(a)).min().copied();
            match lowest.and_then(ranked) {
                Some(a) => a,
                None => callers[0].clone(),
            }
        }
    };
    let rank = ranks.get(&chosen).copied();
    let source = match rank {
        Some(r) => format!("rank {r} ({})", describe(&chosen)),
        None => format!("the first process in the log ({})", describe(&chosen)),
    };
    Ok((chosen, rank, source))
}

impl Log {
    /// The sequence as operations of this launch of `launch` ranks. Without
    /// `rescale` the log's job must have as many ranks; with it, groups over
    /// the whole job span the whole launch, smaller ones keep their size,
    /// and every call keeps its count.
    pub fn schedule(&self, launch: usize, rescale: bool) -> Result<Schedule, Error> {
        if self.world != launch && !rescale {
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
