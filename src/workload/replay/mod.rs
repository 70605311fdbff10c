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
pub mod line;

use std::collections::HashMap;

use crate::collective::Collective;
use crate::error::Error;
use crate::types::{DType, ReduceOp};

use super::groups::{Group, Partition};
use super::op::{Op, Phase, Schedule};
use crate::types::NcclVersion;
use codes::LogType;
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

/// What a call line is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Coll(Collective),
    Send,
    Recv,
}

fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        "AllReduce" => Kind::Coll(Collective::AllReduce),
        "AllGather" => Kind::Coll(Collective::AllGather),
        "ReduceScatter" => Kind::Coll(Collective::ReduceScatter),
        "Broadcast" => Kind::Coll(Collective::Broadcast),
        "Reduce" => Kind::Coll(Collective::Reduce),
        "Send" => Kind::Send,
        "Recv" => Kind::Recv,
        _ => return None,
    })
}

/// Counters for the notes.
#[derive(Default)]
struct Tallies {
    empty: usize,
    premul: usize,
    fp8: usize,
    paired: usize,
}

/// An exchange emitted for a Send or a Recv, waiting for its other half.
struct Half {
    send: bool,
    comm: String,
    shift: usize,
    count: u64,
    dtype: DType,
}

/// What converting the kept process's calls needs.
struct Ctx<'a> {
    s: &'a Scan,
    ranks: &'a HashMap<Agent, usize>,
    /// The kept process's rank in the job.
    rank: Option<usize>,
}

fn convert(
    s: &Scan,
    agent: &Agent,
    rank: Option<usize>,
    ranks: &HashMap<Agent, usize>,
    notes: &mut Vec<String>,
) -> Result<Vec<LogCall>, Error> {
    let ctx = Ctx { s, ranks, rank };
    let mut out = Vec::new();
    let mut tallies = Tallies::default();
    let mut pending: Vec<Half> = Vec::new();
    for (n, call, inst) in &s.calls {
        if s.call_agent(call, *inst) != *agent {
            continue;
        }
        let Some(k) = kind(&call.name) else {
            return Err(at_line(
                *n,
                format!(
                    "`{}` calls are not replayed (collbench replays AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Send and Recv)",
                    call.name
                ),
            ));
        };
        let Some(c) = one_call(&ctx, *n, call, *inst, k, &mut tallies)? else {
            continue;
        };
        if matches!(k, Kind::Coll(_)) {
            pending.clear();
            out.push(c);
        } else if let Some(c) = pair(&mut pending, c, k == Kind::Send, &mut tallies) {
            out.push(c);
        }
    }
    add_notes(&tallies, notes);
    Ok(out)
}

fn add_notes(t: &Tallies, notes: &mut Vec<String>) {
    if t.empty > 0 {
        notes.push(format!("{} calls of 0 elements were skipped", t.empty));
    }
    if t.premul > 0 {
        notes.push(format!(
            "{} reductions use a user-defined operation (ncclRedOpCreatePreMulSum) and are replayed as sums",
            t.premul
        ));
    }
    if t.fp8 > 0 {
        notes.push(format!(
            "{} calls on 8-bit floats are replayed as uint8 (the same bytes)",
            t.fp8
        ));
    }
    if t.paired > 0 {
        notes.push(format!(
            "{} Recv lines complete an exchange already replayed for its Send (or the reverse)",
            t.paired
        ));
    }
}

/// How many point-to-point calls back a Send and its Recv may be apart:
/// the halves of one exchange are issued in one NCCL group, and PyTorch's
/// `batch_isend_irecv` of an all-to-all puts one Send and one Recv per peer
/// in it. The window also keeps pairing linear in the log's length.
const PAIR_WINDOW: usize = 256;

/// Counts a Send or Recv once with the other half of its exchange.
fn pair(pending: &mut Vec<Half>, c: LogCall, send: bool, tallies: &mut Tallies) -> Option<LogCall> {
    let shift = c.shift.unwrap_or(0);
    let other = pending.iter().position(|h| {
        h.send != send && h.comm == c.comm && h.shift == shift && h.count == c.count && h.dtype == c.dtype
    });
    if let Some(i) = other {
        pending.remove(i);
        tallies.paired += 1;
        return None;
    }
    if pending.len() == PAIR_WINDOW {
        pending.remove(0);
    }
    pending.push(Half {
        send,
        comm: c.comm.clone(),
        shift,
        count: c.count,
        dtype: c.dtype,
    });
    Some(c)
}

/// One call of the kept process, or `None` when it is skipped.
fn one_call(
    ctx: &Ctx,
    n: usize,
    call: &CallLine,
    inst: Option<usize>,
    k: Kind,
    tallies: &mut Tallies,
) -> Result<Option<LogCall>, Error> {
    let s = ctx.s;
    let size = inst.map_or(call.nranks, |i| s.instances[i].nranks);
    if size != call.nranks {
        return Err(at_line(
            n,
            format!(
                "comm {:#x} has {size} ranks in its INIT line (line {}) but [nranks={}] here",
                call.comm,
                inst.map_or(0, |i| s.instances[i].line),
                call.nranks
            ),
        ));
    }
    if call.count == 0 {
        tallies.empty += 1;
        return Ok(None);
    }
    let partition = comm_partition(s, n, call, inst, ctx.ranks)?;
    let (log_type, dtype, op) = types(s, n, call, k, tallies)?;
    let peer = usize::try_from(call.root).ok().filter(|&p| p < size).ok_or_else(|| {
        at_line(
            n,
            format!(
                "root or peer {} is outside the {size} ranks of its communicator",
                call.root
            ),
        )
    })?;
    let (collective, root, shift) = match k {
        Kind::Coll(c) => (c, c.spec().has_root().then_some(peer), None),
        Kind::Send | Kind::Recv => {
            let d = match comm_rank(s, n, inst, size, ctx.rank)? {
                Some(me) if k == Kind::Send => (peer + size - me) % size,
                Some(me) => (me + size - peer) % size,
                // of two ranks, the peer is the other one
                None => 1,
            };
            (Collective::SendRecv, None, Some(d))
        }
    };
    Ok(Some(LogCall {
        line: n,
        collective,
        count: call.count,
        dtype,
        log_type,
        op,
        root,
        shift,
        partition,
        comm: format!("comm {:#x}", call.comm),
    }))
}

/// The logged type, the type replayed and the reduction of a call.
fn types(
    s: &Scan,
    n: usize,
    call: &CallLine,
    k: Kind,
    tallies: &mut Tallies,
) -> Result<(LogType, DType, Option<ReduceOp>), Error> {
    let log_type = codes::datatype(call.datatype, s.version).map_err(|why| at_line(n, why))?;
    let reduction = matches!(k, Kind::Coll(c) if c.spec().is_reduction());
    let dtype = match log_type {
        LogType::Known(t) => t,
        _ if reduction => {
            return Err(at_line(
                n,
                format!(
                    "{} in a reduction: collbench has no 8-bit float arithmetic to replay it",
                    log_type.nccl_name()
                ),
            ));
        }
        _ => {
            tallies.fp8 += 1;
            DType::Uint8
        }
    };
    let op = if reduction {
        let (op, premul) = codes::reduce_op(call.op, s.version).map_err(|why| at_line(n, why))?;
        tallies.premul += usize::from(premul);
        Some(op)
    } else {
        None
    };
    Ok((log_type, dtype, op))
}

/// The kept process's rank in a point-to-point call's communicator;
/// `None` for an unknown rank in a communicator of two.
fn comm_rank(
    s: &Scan,
    n: usize,
    inst: Option<usize>,
    size: usize,
    rank: Option<usize>,
) -> Result<Option<usize>, Error> {
    if let Some(i) = inst {
        return Ok(Some(s.instances[i].rank));
    }
    match rank {
        Some(r) if size == s.world => Ok(Some(r)),
        _ if size == 2 => Ok(None),
        _ => Err(at_line(
            n,
            "a point-to-point call whose communicator has no INIT line: the sender's rank in it, and so its peer's offset, is unknown",
        )),
    }
}

/// The shape of a call's communicator in the logged job.
fn comm_partition(
    s: &Scan,
    n: usize,
    call: &CallLine,
    inst: Option<usize>,
    ranks: &HashMap<Agent, usize>,
) -> Result<Partition, Error> {
    let k = call.nranks;
    let w = s.world;
    if k == w {
        return Ok(Partition { block: w, stride: 1 });
    }
    if k == 1 {
        return Ok(Partition { block: 1, stride: 1 });
    }
    let what = format!("comm {:#x} ({k} of {w} ranks)", call.comm);
    let Some(i) = inst else {
        return Err(at_line(
            n,
            format!(
                "{what} has no INIT line in the log, so which ranks it spans is unknown: log the job from its start with NCCL_DEBUG_SUBSYS=INIT,COLL"
            ),
        ));
    };
    let Some(id) = s.instances[i].comm_id else {
        return Err(at_line(
            n,
            format!(
                "{what} has no commId in its INIT line (line {}; older NCCL versions print none), so its members cannot be matched across processes",
                s.instances[i].line
            ),
        ));
    };
    let mut members: Vec<Option<usize>> = vec![None; k];
    for m in s.instances.iter().filter(|m| m.comm_id == Some(id) && m.rank < k) {
        members[m.rank] = ranks.get(&m.agent).copied();
    }
    let found = members.iter().filter(|m| m.is_some()).count();
    if found < k {
        return Err(at_line(
            n,
            format!(
                "{what}, commId {id:#x}: the log shows the rank in the job of {found} of its {k} members; log every rank (one NCCL_DEBUG_FILE per rank, concatenated) so its membership is known"
            ),
        ));
    }
    let mut job_ranks: Vec<usize> = members.into_iter().flatten().collect();
    job_ranks.sort();
    partition_of(&job_ranks, w).ok_or_else(|| {
        let list: Vec<String> = job_ranks.iter().map(|r| r.to_string()).collect();
        at_line(
            n,
            format!(
                "{what} spans ranks {}: neither consecutive nor evenly strided, so no sub-communicator of a launch has its shape",
                list.join(", ")
            ),
        )
    })
}

/// The partition whose group holds exactly `ranks` (sorted), if any.
pub fn partition_of(ranks: &[usize], world: usize) -> Option<Partition> {
    let k = ranks.len();
    if k == 0 || ranks.iter().any(|&r| r >= world) {
        return None;
    }
    if k == world {
        return Some(Partition {
            block: world,
            stride: 1,
        });
    }
    if k == 1 {
        return Some(Partition { block: 1, stride: 1 });
    }
    let stride = ranks[1] - ranks[0];
    if stride == 0 || ranks.windows(2).any(|w| w[1] - w[0] != stride) {
        return None;
    }
    let block = stride * k;
    let offset = ranks[0] % block;
    (world.is_multiple_of(block) && offset < stride).then_some(Partition { block, stride })
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
mod tests {
    use super::*;
    use crate::workload::groups::GroupLayout;
    use crate::workload::model::Model;
    use crate::workload::options::Options;
    use crate::workload::schedule::{Strategy, schedule};

    macro_rules! fixture {
        ($name:literal) => {
            include_str!(concat!("../../../tests/fixtures/nccl-coll-logs/", $name))
        };
    }

    fn parse(text: &str) -> Log {
        parse_log(text, &LogOptions::default()).unwrap()
    }

    fn parse_rank(text: &str, rank: usize) -> Result<Log, Error> {
        parse_log(text, &LogOptions { rank: Some(rank) })
    }

    fn err(r: Result<Log, Error>) -> String {
        let e = r.unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let msg = e.to_string();
        assert!(!msg.contains('\n'), "{msg}");
        msg
    }

    const WORLD2: Partition = Partition { block: 2, stride: 1 };

    /// pytorch/torchtitan#1369: two TP ranks interleaved, no INIT lines.
    #[test]
    fn a_two_rank_tp_log_without_init_lines_replays_the_first_process() {
        let log = parse(fixture!("torchtitan-1369-tp2.log"));
        assert_eq!((log.world, log.world_line, log.rank), (2, 2, None));
        assert_eq!(
            log.source,
            "the first process in the log (hopper01 pid 191370 device 1)"
        );
        let got: Vec<(usize, Collective, u64)> = log.calls.iter().map(|c| (c.line, c.collective, c.count)).collect();
        use Collective::{AllGather as AG, ReduceScatter as RS};
        assert_eq!(
            got,
            vec![
                (2, RS, 2_097_152),
                (5, AG, 2_097_152),
                (8, RS, 2_097_152),
                (9, AG, 2_097_152)
            ]
        );
        for c in &log.calls {
            assert_eq!(
                (c.dtype, c.partition, c.comm.as_str()),
                (DType::Float, WORLD2, "comm 0x55fca23fc0f0")
            );
        }
        assert_eq!(log.calls[0].op, Some(ReduceOp::Sum));
        assert_eq!(log.calls[1].op, None);
        assert!(log.notes.iter().any(|n| n.contains("no INIT lines")), "{:?}", log.notes);
        let s = log.schedule(2, false).unwrap();
        assert_eq!(s.ops.len(), 4);
        assert!(s.ops.iter().all(|o| o.group == Group::World && o.phase == Phase::Log));
        assert_eq!(s.ops[0].label, "line 2 comm 0x55fca23fc0f0");
    }

    /// NVIDIA/nccl#1193: 128-rank communicators under Ray.
    #[test]
    fn a_128_rank_log_needs_rescaling_for_a_smaller_launch_and_keeps_counts() {
        let log = parse(fixture!("nccl-1193-ray-128ranks.log"));
        assert_eq!((log.world, log.world_line), (128, 1));
        assert!(log.source.contains("pid 615 device 2"), "{}", log.source);
        assert_eq!(log.calls.len(), 1);
        assert_eq!((log.calls[0].count, log.calls[0].dtype), (7_382_228, DType::Float));
        let e = log.schedule(2, false).unwrap_err().to_string();
        assert_eq!(
            e,
            "line 1: the logged job has 128 ranks and this launch 2: launch 128 ranks, or replay the per-call counts on 2 ranks with --rescale"
        );
        let s = log.schedule(2, true).unwrap();
        assert_eq!((s.ops[0].count, s.ops[0].group), (7_382_228, Group::World));
        let e = err(parse_rank(fixture!("nccl-1193-ray-128ranks.log"), 0));
        assert_eq!(
            e,
            "rank 0 cannot be found: the log has no INIT lines that tell ranks (log with NCCL_DEBUG_SUBSYS=INIT,COLL)"
        );
    }

    /// NVIDIA/nccl#783: Send lines of NCCL 2.12, prefix trimmed to `[0]`.
    #[test]
    fn sends_to_the_other_of_two_ranks_become_ring_exchanges() {
        let log = parse(fixture!("nccl-783-send-prefix-trimmed.log"));
        assert_eq!(log.calls.len(), 4);
        for c in &log.calls {
            assert_eq!(
                (c.collective, c.count, c.shift, c.root),
                (Collective::SendRecv, 1_572_864, Some(1), None)
            );
        }
        assert!(log.source.contains("device 0"), "{}", log.source);
    }

    /// NVIDIA/nccl#584: Sends on two communicators, then a Recv.
    #[test]
    fn a_recv_that_completes_an_earlier_send_is_counted_once() {
        let log = parse(fixture!("nccl-584-send-recv.log"));
        let got: Vec<(usize, Option<usize>, &str)> =
            log.calls.iter().map(|c| (c.line, c.shift, c.comm.as_str())).collect();
        assert_eq!(
            got,
            vec![
                (1, Some(1), "comm 0x7f5128002e10"),
                (2, Some(1), "comm 0x7f5128002e10"),
                (6, Some(1), "comm 0x7f516c002e10"),
                (7, Some(1), "comm 0x7f516c002e10"),
            ]
        );
        assert!(
            log.notes.iter().any(|n| n.starts_with("1 Recv lines complete")),
            "{:?}",
            log.notes
        );
    }

    /// NVIDIA/nccl#147: interleaved stdout of 8 DDP ranks.
    #[test]
    fn interleaved_output_is_attributed_by_the_last_prefix_and_orphans_are_noted() {
        let log = parse(fixture!("nccl-147-interleaved.log"));
        assert_eq!(log.world, 8);
        assert!(log.source.contains("pid 32629 device 7"), "{}", log.source);
        assert_eq!(log.calls.len(), 1);
        let c = &log.calls[0];
        assert_eq!(
            (c.collective, c.count, c.dtype, c.root),
            (Collective::Broadcast, 53, DType::Int64, Some(0))
        );
        assert!(
            log.notes
                .iter()
                .any(|n| n.starts_with("1 call lines without") && n.ends_with("line 6")),
            "{:?}",
            log.notes
        );
        let s = log.schedule(8, false).unwrap();
        assert_eq!(s.ops[0].root, Some(0));
    }

    #[test]
    fn init_only_excerpts_parse_line_by_line_and_say_how_to_get_call_lines() {
        let cases: [(&str, usize); 5] = [
            (fixture!("nccl-1814-init-64ranks.log"), 4),
            (fixture!("nccl-629-init-no-commid.log"), 3),
            (fixture!("nccl-tests-252-init-start.log"), 3),
            (fixture!("cupy-9090-init-2.15.log"), 2),
            (fixture!("nccl-1038-init-2.18.3.log"), 1),
        ];
        for (text, inits) in cases {
            let parsed: Vec<Line> = text.lines().map(|l| line::parse_line(l).unwrap()).collect();
            assert_eq!(parsed.iter().filter(|l| matches!(l, Line::Init(_))).count(), inits);
            assert_eq!(err(parse_log(text, &LogOptions::default())), NO_CALLS);
        }
        let s = scan(fixture!("nccl-1038-init-2.18.3.log")).unwrap();
        assert_eq!(s.version, Some(NcclVersion::new(2, 18, 3)));
        let s = scan(fixture!("nccl-1814-init-64ranks.log")).unwrap();
        assert_eq!((s.world, s.world_line), (64, 2));
        assert!(s.instances.iter().all(|i| i.comm_id == Some(0x5ae7_7eb5_ea4e_c1ee)));
        let s = scan(fixture!("nccl-629-init-no-commid.log")).unwrap();
        assert!(s.instances.iter().all(|i| i.comm_id.is_none()));
    }

    /// Written for this test: GPT-2 under DDP on 2 ranks.
    #[test]
    fn a_ddp_log_replays_the_workload_schedule_of_ddp() {
        let text = fixture!("own-2.21-ddp-gpt2-2ranks.log");
        let log = parse(text);
        assert_eq!(log.version, Some(NcclVersion::new(2, 21, 5)));
        assert_eq!((log.world, log.rank), (2, Some(0)));
        assert_eq!(log.source, "rank 0 (node0 pid 4101 device 0)");
        let (first, grads) = log.calls.split_first().unwrap();
        let m = Model::preset("gpt2").unwrap();
        assert_eq!(
            (first.collective, first.count, first.root),
            (Collective::Broadcast, m.params(), Some(0))
        );
        let l = GroupLayout::new(2, 2, 1).unwrap();
        let ddp = schedule(Strategy::Ddp, &m, &l, &Options::default()).unwrap();
        let logged: Vec<(Collective, u64, DType)> = grads.iter().map(|c| (c.collective, c.count, c.dtype)).collect();
        let modelled: Vec<(Collective, u64, DType)> =
            ddp.ops.iter().map(|o| (o.collective, o.count, o.dtype)).collect();
        assert_eq!(logged, modelled);
        let rank1 = parse_rank(text, 1).unwrap();
        assert_eq!(rank1.calls.len(), log.calls.len());
        assert_eq!(rank1.source, "rank 1 (node0 pid 4102 device 1)");
        assert_eq!(
            err(parse_rank(text, 5)),
            "rank 5 is not in the log (it shows ranks 0, 1)"
        );
    }

    /// Written for this test: TP 2 x DP 2 on 4 ranks, split communicators.
    #[test]
    fn split_communicators_map_to_consecutive_and_strided_groups() {
        let text = fixture!("own-2.23-tp2-dp2-4ranks.log");
        let tp = Partition { block: 2, stride: 1 };
        let dp = Partition { block: 4, stride: 2 };
        let world = Partition { block: 4, stride: 1 };
        for rank in 0..4 {
            let log = parse_rank(text, rank).unwrap();
            let parts: Vec<Partition> = log.calls.iter().map(|c| c.partition).collect();
            assert_eq!(parts, vec![tp, tp, dp, world], "rank {rank}");
            assert_eq!(log.version, Some(NcclVersion::new(2, 23, 4)));
        }
        let log = parse(text);
        assert_eq!(log.rank, Some(0));
        let s = log.schedule(4, false).unwrap();
        assert_eq!(
            s.groups(),
            vec![Group::Partition(tp), Group::Partition(dp), Group::World]
        );
        let l = GroupLayout::new(4, 4, 2).unwrap();
        assert_eq!(l.groups(Group::Partition(dp)), l.groups(Group::Dp));
        assert_eq!(l.groups(Group::Partition(tp)), l.groups(Group::Tp));
        // rescaled: TP blocks keep their size, groups over the job span the launch
        let s = log.schedule(8, true).unwrap();
        let dp8 = Partition { block: 8, stride: 2 };
        assert_eq!(
            s.groups(),
            vec![Group::Partition(tp), Group::Partition(dp8), Group::World]
        );
        let s = log.schedule(2, true).unwrap();
        assert_eq!(s.groups()[0], Group::World, "a TP pair is the whole of a 2-rank launch");
        let e = log.schedule(3, true).unwrap_err().to_string();
        assert!(
            e.ends_with("(blocks of 2) does not fit 3 ranks: blocks of 2 ranks do not divide 3 ranks"),
            "{e}"
        );
        assert!(e.starts_with("line 14: comm 0x5600aa000100"), "{e}");
    }

    /// Written for this test: one rank's own log, NCCL 2.26.
    #[test]
    fn fp8_moves_as_bytes_premultiplied_sums_as_sums_and_empty_calls_are_skipped() {
        let log = parse(fixture!("own-2.26-fp8-premul-p2p-rank0.log"));
        assert_eq!((log.world, log.rank), (2, Some(0)));
        type Row = (Collective, u64, DType, Option<ReduceOp>, Option<usize>);
        let got: Vec<Row> = log
            .calls
            .iter()
            .map(|c| (c.collective, c.count, c.dtype, c.op, c.shift))
            .collect();
        use Collective::*;
        assert_eq!(
            got,
            vec![
                (AllGather, 4_194_304, DType::Uint8, None, None),
                (ReduceScatter, 4_194_304, DType::Bfloat16, Some(ReduceOp::Sum), None),
                (SendRecv, 65_536, DType::Bfloat16, None, Some(1)),
                (AllReduce, 1, DType::Float, Some(ReduceOp::Max), None),
            ]
        );
        assert_eq!(log.calls[0].log_type, LogType::Fp8E4M3);
        let notes = log.notes.join(" | ");
        for want in [
            "1 calls of 0 elements were skipped",
            "1 reductions use a user-defined operation",
            "1 calls on 8-bit floats are replayed as uint8",
            "1 Recv lines complete an exchange",
        ] {
            assert!(notes.contains(want), "{notes}");
        }
    }

    const INIT4: &str = "h:1:1 [0] NCCL INFO comm 0xa0 rank 0 nranks 4 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\n";

    fn call_line(name: &str, datatype: i64, op: i64, root: i64, comm: &str, nranks: usize) -> String {
        format!(
            "h:1:1 [0] NCCL INFO {name}: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype {datatype} op {op} root {root} comm {comm} [nranks={nranks}] stream 0x3\n"
        )
    }

    #[test]
    fn bad_logs_get_one_line_naming_the_line() {
        let banner = "NCCL version 2.21.5+cuda12.4\n";
        let cases: Vec<(String, &str)> = vec![
            (String::new(), NO_CALLS),
            ("no nccl here\n".into(), NO_CALLS),
            (
                call_line("AllReduce", 12, 0, 0, "0xa0", 4),
                "line 1: unknown datatype 12: NCCL has 0 = ncclInt8 ... 11 = ncclFloat8e5m2",
            ),
            (
                format!("{banner}{}", call_line("AllGather", 10, 0, 0, "0xa0", 4)),
                "line 2: unknown datatype 10: NCCL 2.21.5 has 0 = ncclInt8 ... 9 = ncclBfloat16",
            ),
            (
                call_line("ReduceScatter", 10, 0, 0, "0xa0", 4),
                "line 1: ncclFloat8e4m3 in a reduction: collbench has no 8-bit float arithmetic to replay it",
            ),
            (
                call_line("AlltoAll", 7, 0, 0, "0xa0", 4),
                "line 1: `AlltoAll` calls are not replayed (collbench replays AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, Send and Recv)",
            ),
            (
                format!("{INIT4}{}", call_line("Broadcast", 7, 0, 4, "0xa0", 4)),
                "line 2: root or peer 4 is outside the 4 ranks of its communicator",
            ),
            (
                format!("{INIT4}{}", call_line("AllReduce", 7, 0, 0, "0xa0", 2)),
                "line 2: comm 0xa0 has 4 ranks in its INIT line (line 1) but [nranks=2] here",
            ),
            (
                "h:1:1 [0] NCCL INFO Send: opCount 0 sendbuff 0x1 recvbuff (nil) count 8 da\n".into(),
                "line 1: Send line without `datatype` (truncated?)",
            ),
        ];
        for (text, want) in cases {
            assert_eq!(err(parse_log(&text, &LogOptions::default())), want, "{text}");
        }
    }

    #[test]
    fn a_communicator_whose_members_are_not_in_the_log_is_refused() {
        // one rank's own log: the world and a 2-rank split, only its own INIT lines
        let split = "h:1:1 [0] NCCL INFO ncclCommSplit comm 0xb0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 parent 0xa0 color 0 key 0 commId 0x20 - Init COMPLETE\n";
        let text = format!("{INIT4}{split}{}", call_line("AllReduce", 7, 0, 0, "0xb0", 2));
        assert_eq!(
            err(parse_log(&text, &LogOptions::default())),
            "line 3: comm 0xb0 (2 of 4 ranks), commId 0x20: the log shows the rank in the job of 1 of its 2 members; log every rank (one NCCL_DEBUG_FILE per rank, concatenated) so its membership is known"
        );
        // no INIT line at all for the communicator
        let text = format!("{INIT4}{}", call_line("AllReduce", 7, 0, 0, "0xc0", 2));
        assert_eq!(
            err(parse_log(&text, &LogOptions::default())),
            "line 2: comm 0xc0 (2 of 4 ranks) has no INIT line in the log, so which ranks it spans is unknown: log the job from its start with NCCL_DEBUG_SUBSYS=INIT,COLL"
        );
        // an INIT line without commId (older NCCL, NVIDIA/nccl#629)
        let old = "h:1:1 [0] NCCL INFO comm 0xd0 rank 0 nranks 2 cudaDev 0 busId 1 - Init COMPLETE\n";
        let text = format!("{INIT4}{old}{}", call_line("AllReduce", 7, 0, 0, "0xd0", 2));
        assert_eq!(
            err(parse_log(&text, &LogOptions::default())),
            "line 3: comm 0xd0 (2 of 4 ranks) has no commId in its INIT line (line 2; older NCCL versions print none), so its members cannot be matched across processes"
        );
    }

    #[test]
    fn irregular_memberships_and_two_jobs_in_one_log_are_refused() {
        let mut text = String::new();
        for r in 0..4 {
            text += &format!(
                "h:{r}:1 [0] NCCL INFO comm 0xa{r} rank {r} nranks 4 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\n"
            );
        }
        // ranks 0, 1, 3 share a 3-rank communicator
        for (i, r) in [0, 1, 3].into_iter().enumerate() {
            text += &format!(
                "h:{r}:1 [0] NCCL INFO comm 0xb{r} rank {i} nranks 3 cudaDev 0 busId 1 commId 0x30 - Init COMPLETE\n"
            );
        }
        text += "h:0:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0xb0 [nranks=3] stream 0x3\n";
        assert_eq!(
            err(parse_log(&text, &LogOptions::default())),
            "line 8: comm 0xb0 (3 of 4 ranks) spans ranks 0, 1, 3: neither consecutive nor evenly strided, so no sub-communicator of a launch has its shape"
        );
        let twice = "h:0:1 [0] NCCL INFO comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\nh:9:1 [0] NCCL INFO comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x11 - Init COMPLETE\n";
        let text = format!(
            "{twice}{}",
            call_line("AllReduce", 7, 0, 0, "0xa0", 2).replace("h:1:1", "h:0:1")
        );
        assert_eq!(
            err(parse_log(&text, &LogOptions::default())),
            "line 2: a second process claims rank 0 of 2 (first at line 1): the log mixes two jobs"
        );
    }

    #[test]
    fn a_recv_too_far_from_its_send_is_an_exchange_of_its_own() {
        let send = call_line("Send", 7, 0, 1, "0xa0", 2);
        let recv = call_line("Recv", 7, 0, 1, "0xa0", 2);
        let near = format!("{send}{recv}");
        assert_eq!(parse(&near).calls.len(), 1);
        let far = format!("{}{recv}", send.repeat(PAIR_WINDOW + 1));
        // the first Send left the window; the Recv pairs with a later one
        assert_eq!(parse(&far).calls.len(), PAIR_WINDOW + 1);
        let apart = format!(
            "{send}{}{recv}",
            call_line("Send", 7, 0, 1, "0xa0", 2)
                .replace("count 8", "count 9")
                .repeat(PAIR_WINDOW)
        );
        assert_eq!(parse(&apart).calls.len(), PAIR_WINDOW + 2);
    }

    #[test]
    fn a_rank_that_made_no_calls_is_named() {
        let text = format!(
            "{INIT4}h:2:1 [0] NCCL INFO comm 0xa0 rank 1 nranks 4 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\n{}",
            call_line("AllReduce", 7, 0, 0, "0xa0", 4)
        );
        assert_eq!(err(parse_rank(&text, 1)), "rank 1 made no collective calls in the log");
        assert_eq!(parse_rank(&text, 0).unwrap().calls.len(), 1);
    }

    #[test]
    fn memberships_become_partitions_when_regular() {
        assert_eq!(partition_of(&[0, 1, 2, 3], 4), Some(Partition { block: 4, stride: 1 }));
        assert_eq!(partition_of(&[2, 3], 8), Some(Partition { block: 2, stride: 1 }));
        assert_eq!(partition_of(&[1, 3, 5, 7], 8), Some(Partition { block: 8, stride: 2 }));
        assert_eq!(partition_of(&[4, 6], 8), Some(Partition { block: 4, stride: 2 }));
        assert_eq!(partition_of(&[5], 8), Some(Partition { block: 1, stride: 1 }));
        assert_eq!(partition_of(&[1, 2], 8), None, "a pair across two blocks of two");
        assert_eq!(partition_of(&[0, 1, 3], 4), None);
        assert_eq!(partition_of(&[0, 3], 6), Some(Partition { block: 6, stride: 3 }));
        assert_eq!(
            partition_of(&[0, 2], 6),
            None,
            "stride 2 of two ranks would need blocks of 4"
        );
        assert_eq!(partition_of(&[0, 9], 8), None);
    }
}
