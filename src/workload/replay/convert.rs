//! The kept rank's calls, converted: each logged call to the `Op` it
//! replays as (the collective, the replayed type and reduction, the
//! communicator's shape in the job as its group, the line and communicator
//! it was logged on), Sends and Recvs paired into shifted exchanges (a rank's
//! Send to itself and its Recv from itself, as PyTorch's all-to-all on
//! NCCL before 2.28 issues them, is a local copy: shift 0, no traffic),
//! and the notes on what was skipped or changed.

use super::codes::{self, LogType};
use super::scan::{Call, CommKey, Scan, at_line};
use crate::collective::Collective;
use crate::error::Error;
use crate::types::{DType, ReduceOp};
use crate::workload::groups::{Group, Partition};
use crate::workload::op::{Logged, Op, Phase};

/// What a call line is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Coll(Collective),
    Send,
    Recv,
}

pub(super) fn kind(name: &str) -> Option<Kind> {
    Some(match name {
        "AllReduce" => Kind::Coll(Collective::AllReduce),
        "AllGather" => Kind::Coll(Collective::AllGather),
        "ReduceScatter" => Kind::Coll(Collective::ReduceScatter),
        "Broadcast" => Kind::Coll(Collective::Broadcast),
        "Reduce" => Kind::Coll(Collective::Reduce),
        "AlltoAll" => Kind::Coll(Collective::AllToAll),
        "Gather" => Kind::Coll(Collective::Gather),
        "Scatter" => Kind::Coll(Collective::Scatter),
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
    local: usize,
}

/// An exchange emitted for a Send or a Recv, waiting for its other half.
struct Half {
    send: bool,
    comm: u64,
    shift: usize,
    count: u64,
    dtype: DType,
}

/// The kept rank's calls as operations.
pub(super) fn convert(s: &Scan, slot: usize, notes: &mut Vec<String>) -> Result<Vec<Op>, Error> {
    let mut out = Vec::new();
    let mut tallies = Tallies::default();
    let mut pending: Vec<Half> = Vec::new();
    let mut guessed = false;
    let mut one_peer = false;
    for call in s.calls.iter().filter(|c| c.at.slot == slot) {
        let Some(k) = kind(&call.name) else {
            return Err(at_line(
                call.line,
                format!(
                    "`{}` calls are not replayed (collbench replays AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter, Send and Recv)",
                    call.name
                ),
            ));
        };
        let Some(c) = one_call(s, call, k, &mut tallies, &mut guessed, &mut one_peer)? else {
            continue;
        };
        if matches!(k, Kind::Coll(_)) {
            pending.clear();
            out.push(c);
        } else if let Some(c) = pair(&mut pending, c, k == Kind::Send, &mut tallies) {
            out.push(c);
        }
    }
    if guessed {
        notes.push(device_ranks_note(s));
    }
    if one_peer {
        notes.push(
            "point-to-point calls on a 2-rank communicator without an INIT line name one peer only: it is taken to be the other rank"
                .into(),
        );
    }
    add_notes(&tallies, notes);
    Ok(out)
}

/// One note per tally that is not 0: its count, then what it counts.
fn add_notes(t: &Tallies, notes: &mut Vec<String>) {
    for (n, what) in [
        (t.empty, "calls of 0 elements were skipped"),
        (
            t.local,
            "Send/Recv pairs with the rank itself (an all-to-all's own block) replay as local copies: no network traffic",
        ),
        (
            t.premul,
            "reductions use a user-defined operation (ncclRedOpCreatePreMulSum) and are replayed as sums",
        ),
        (t.fp8, "calls on 8-bit floats are replayed as uint8 (the same bytes)"),
        (
            t.paired,
            "Recv lines complete an exchange already replayed for its Send (or the reverse)",
        ),
    ] {
        if n > 0 {
            notes.push(format!("{n} {what}"));
        }
    }
}

/// How many point-to-point calls back a Send and its Recv may be apart:
/// the halves of one exchange are issued in one NCCL group, and PyTorch's
/// `batch_isend_irecv` of an all-to-all puts one Send and one Recv per peer
/// in it. The window also keeps pairing linear in the log's length.
pub(super) const PAIR_WINDOW: usize = 256;

/// Counts a Send or Recv once with the other half of its exchange.
fn pair(pending: &mut Vec<Half>, c: Op, send: bool, tallies: &mut Tallies) -> Option<Op> {
    let shift = c.shift.unwrap_or(0);
    let comm = c.logged.map_or(0, |l| l.comm);
    let other = pending
        .iter()
        .position(|h| h.send != send && h.comm == comm && h.shift == shift && h.count == c.count && h.dtype == c.dtype);
    if let Some(i) = other {
        pending.remove(i);
        tallies.paired += 1;
        if shift == 0 {
            tallies.local += 1;
        }
        return None;
    }
    if pending.len() == PAIR_WINDOW {
        pending.remove(0);
    }
    pending.push(Half {
        send,
        comm,
        shift,
        count: c.count,
        dtype: c.dtype,
    });
    Some(c)
}

/// One call of the kept rank, or `None` when it is skipped.
fn one_call(
    s: &Scan,
    call: &Call,
    k: Kind,
    tallies: &mut Tallies,
    guessed: &mut bool,
    one_peer: &mut bool,
) -> Result<Option<Op>, Error> {
    let n = call.line;
    let member = &s.members[call.at.member];
    let size = member.nranks;
    if call.count == 0 {
        tallies.empty += 1;
        return Ok(None);
    }
    let partition = comm_partition(s, call)?;
    let (dtype, op) = types(s, n, &call.datatype, &call.op, k, tallies)?;
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
            let me = comm_rank(s, call, guessed, one_peer)?;
            let d = if k == Kind::Send {
                (peer + size - me) % size
            } else {
                (me + size - peer) % size
            };
            (Collective::SendRecv, None, Some(d))
        }
    };
    Ok(Some(Op {
        collective,
        count: call.count,
        dtype,
        op,
        root,
        shift,
        group: Group::Partition(partition),
        phase: Phase::Log,
        label: format!("line {n} comm {:#x}", member.ptr),
        logged: Some(Logged {
            line: n,
            comm: member.ptr,
        }),
    }))
}

/// The type replayed and the reduction of a call.
fn types(
    s: &Scan,
    n: usize,
    datatype: &i64,
    op: &i64,
    k: Kind,
    tallies: &mut Tallies,
) -> Result<(DType, Option<ReduceOp>), Error> {
    let log_type = codes::datatype(*datatype, s.version).map_err(|why| at_line(n, why))?;
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
        let (op, premul) = codes::reduce_op(*op, s.version).map_err(|why| at_line(n, why))?;
        tallies.premul += usize::from(premul);
        Some(op)
    } else {
        None
    };
    Ok((dtype, op))
}

/// Whether the devices in brackets may stand for the ranks of a log
/// without INIT lines: one host, each rank its own device, all below the
/// job's size (torchrun's local ranks on one node).
pub(super) fn devices_are_ranks(s: &Scan) -> bool {
    let mut devs: Vec<u32> = Vec::new();
    for slot in &s.slots {
        match slot.dev {
            Some(d) if slot.host == s.slots[0].host && slot.by_comm.is_none() && (d as usize) < s.world => devs.push(d),
            _ => return false,
        }
    }
    let n = devs.len();
    devs.sort();
    devs.dedup();
    devs.len() == n
}

pub(super) fn device_ranks_note(s: &Scan) -> String {
    format!(
        "the log has no INIT lines that tell ranks: for point-to-point calls each rank is taken to be the device in brackets (one host, {} processes on distinct devices, as torchrun's local ranks); log with NCCL_DEBUG_SUBSYS=INIT,COLL to be sure",
        s.slots.len()
    )
}

/// The kept rank's rank in a point-to-point call's communicator.
fn comm_rank(s: &Scan, call: &Call, guessed: &mut bool, one_peer: &mut bool) -> Result<usize, Error> {
    let member = &s.members[call.at.member];
    if let Some(r) = member.rank {
        return Ok(r);
    }
    // of two ranks, a rank that only ever names one peer names the other
    // rank (a rank exchanging with itself also names its own rank)
    if member.nranks == 2 {
        let mut peers: Vec<i64> = s
            .calls
            .iter()
            .filter(|c| c.at.member == call.at.member && matches!(kind(&c.name), Some(Kind::Send | Kind::Recv)))
            .map(|c| c.root)
            .collect();
        peers.sort();
        peers.dedup();
        if let [p] = peers[..]
            && (0..2).contains(&p)
        {
            *one_peer = true;
            return Ok(1 - p as usize);
        }
    }
    let slot = &s.slots[call.at.slot];
    if member.key == CommKey::World {
        if let Some(r) = slot.rank {
            return Ok(r);
        }
        if devices_are_ranks(s)
            && let Some(d) = slot.dev
        {
            *guessed = true;
            return Ok(d as usize);
        }
    }
    Err(at_line(
        call.line,
        format!(
            "a point-to-point call on comm {:#x}, whose INIT line is not in the log: this rank's place in it, and so its peer's offset (or whether the peer is itself), is unknown; log with NCCL_DEBUG_SUBSYS=INIT,COLL",
            member.ptr
        ),
    ))
}

/// The shape of a call's communicator in the logged job.
fn comm_partition(s: &Scan, call: &Call) -> Result<Partition, Error> {
    let m = &s.members[call.at.member];
    let (k, w, n) = (m.nranks, s.world, call.line);
    if k == w || m.key == CommKey::World {
        return Ok(Partition { block: w, stride: 1 });
    }
    if k == 1 {
        return Ok(Partition { block: 1, stride: 1 });
    }
    let what = format!("comm {:#x} ({k} of {w} ranks)", m.ptr);
    let Some(init) = m.init else {
        return Err(at_line(
            n,
            format!(
                "{what} has no INIT line in the log, so which ranks it spans is unknown: log the job from its start with NCCL_DEBUG_SUBSYS=INIT,COLL"
            ),
        ));
    };
    if let CommKey::Alone(_) = m.key {
        return Err(at_line(
            n,
            format!(
                "{what} has no commId in its INIT line (line {init}; NCCL before 2.15 prints none) and is no split of a known communicator, so its members cannot be matched across processes"
            ),
        ));
    }
    let members = s.members_of(&m.key);
    let mut in_comm: Vec<Option<usize>> = vec![None; k];
    for &i in &members {
        let mm = &s.members[i];
        if let Some(r) = mm.rank.filter(|&r| r < k) {
            in_comm[r] = s.slots[mm.slot].rank;
        }
    }
    let found = in_comm.iter().filter(|m| m.is_some()).count();
    let key = match &m.key {
        CommKey::Id(id) => format!("commId {id:#x}"),
        CommKey::Split { seq, color, .. } => format!("split {seq} of its parent, color {color}"),
        _ => "its members".into(),
    };
    if found < k {
        return Err(at_line(
            n,
            format!(
                "{what}, {key}: the log shows the rank in the job of {found} of its {k} members; log every rank (one NCCL_DEBUG_FILE per rank, concatenated) so its membership is known"
            ),
        ));
    }
    let mut job_ranks: Vec<usize> = in_comm.into_iter().flatten().collect();
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
