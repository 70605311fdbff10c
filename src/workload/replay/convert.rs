//! The kept process's calls, converted: each logged call to a `LogCall`
//! (the collective, the replayed type and reduction, the communicator's
//! shape in the job), Sends and Recvs paired into shifted exchanges, and
//! the notes on what was skipped or changed.

use std::collections::HashMap;

use super::codes::{self, LogType};
use super::line::CallLine;
use super::{Agent, LogCall, Scan, at_line};
use crate::collective::Collective;
use crate::error::Error;
use crate::types::{DType, ReduceOp};
use crate::workload::groups::Partition;

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

pub(super) fn convert(
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
pub(super) const PAIR_WINDOW: usize = 256;

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
pub(super) fn partition_of(ranks: &[usize], world: usize) -> Option<Partition> {
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
