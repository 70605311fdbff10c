//! Hierarchical all-reduce on NCCL (docs/hierarchy.md), built the
//! way `backend::mpi::hierarchical` builds it on MPI:
//!
//! - who is in which sub-communicator (`Membership`): `intra`, the ranks of
//!   a node ordered by rank; `inter`, the ranks with the same local rank,
//!   one per node, ordered by node. The node leaders (local rank 0) are the
//!   inter communicator of local rank 0, so they need none of their own;
//! - how rs-ar-ag lays a buffer over a node (`Slicing`): ncclReduceScatter
//!   and ncclAllGather move equal blocks, so a count that the node size
//!   does not divide is padded to `L * ceil(count / L)` in a scratch buffer;
//!   padding only ever reduces into padding positions, which are dropped;
//! - which NCCL calls and copies make each of the three phases (`phases`);
//! - `SubComms`: a rank's two communicators, made once per run with
//!   ncclCommSplit where every rank's library has it, else with
//!   ncclCommInitRank from unique ids that rank 0 made and the control
//!   plane broadcast at start-up (`SubSource`).
//!
//! Everything but `SubComms` is pure and tested (`hierarchy/tests.rs`), with a host
//! model of NCCL's collectives that runs the phases of every rank of a
//! layout and checks the result against a flat all-reduce.

use std::sync::Arc;

use super::UniqueId;
use super::sys::{Api, At, Buf, Comm, Launch, NcclError, Op, RedOp};
use crate::topology::{Hierarchy, Nodes};
use crate::types::Placement;

crate::types::vocabulary! {
    /// One of a rank's two sub-communicators.
    #[derive(PartialOrd, Ord)]
    pub enum Sub: "sub-communicator", Exact {
        /// The ranks of this rank's node, by rank.
        Intra = "intra-node",
        /// The ranks with this rank's local rank, one per node, by node.
        Inter = "inter-node",
    }
}

/// The header's names of the two sub-communicators.
const NAMES: [&str; 2] = ["the intra-node communicator", "the inter-node communicator"];

/// A rank's place in one sub-communicator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    /// ncclCommSplit's color: the node (intra) or the local rank (inter).
    pub color: usize,
    /// ncclCommSplit's key, which orders the group: the rank (intra) or
    /// the node (inter).
    pub key: usize,
    /// This rank's rank in the group.
    pub rank: usize,
    /// Ranks in the group.
    pub size: usize,
    /// The group's unique id in the bundle rank 0 broadcasts when the
    /// library has no ncclCommSplit: nodes first, then local ranks.
    pub id_index: usize,
}

/// Where one rank sits in both sub-communicators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    pub intra: Group,
    pub inter: Group,
}

impl Membership {
    pub fn of(nodes: &Nodes, rank: usize) -> Membership {
        let node = nodes.node_of_rank[rank];
        let local_rank = nodes.local_rank(rank);
        // Nodes with a rank of this local rank, in node order (nodes may
        // differ in size; reduce-bcast allows it).
        let peers: Vec<usize> = (0..nodes.nnodes())
            .filter(|&n| nodes.ranks_on(n).len() > local_rank)
            .collect();
        Membership {
            intra: Group {
                color: node,
                key: rank,
                rank: local_rank,
                size: nodes.local_size(rank),
                id_index: node,
            },
            inter: Group {
                color: local_rank,
                key: node,
                rank: peers.iter().position(|&n| n == node).unwrap_or(0),
                size: peers.len(),
                id_index: nodes.nnodes() + local_rank,
            },
        }
    }

    pub fn group(&self, sub: Sub) -> &Group {
        match sub {
            Sub::Intra => &self.intra,
            Sub::Inter => &self.inter,
        }
    }

    pub fn local_rank(&self) -> usize {
        self.intra.rank
    }

    pub fn local_size(&self) -> usize {
        self.intra.size
    }

    /// Local rank 0: its inter communicator is the leaders'.
    pub fn is_leader(&self) -> bool {
        self.intra.rank == 0
    }
}

/// Unique ids a run without ncclCommSplit needs: one per node (intra), one
/// per local rank (inter).
pub fn id_count(nodes: &Nodes) -> usize {
    nodes.nnodes() + nodes.ranks_per_node()
}

/// rs-ar-ag's layout of `count` elements over the `local_size` ranks of a
/// node: local rank `r` reduces the block `r * slice .. (r + 1) * slice` of
/// the buffer padded to `padded = local_size * slice` elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slicing {
    pub count: usize,
    pub slice: usize,
    pub padded: usize,
}

impl Slicing {
    pub fn new(count: usize, local_size: usize) -> Slicing {
        let local_size = local_size.max(1);
        let slice = count.div_ceil(local_size);
        Slicing {
            count,
            slice,
            padded: slice * local_size,
        }
    }

    /// The count does not divide by the node size: the phases run in a
    /// padded scratch buffer, with a copy in and a copy out.
    pub fn is_padded(&self) -> bool {
        self.padded != self.count
    }

    /// Elements of scratch buffer the operation needs (0 when unpadded).
    pub fn scratch_elements(&self) -> usize {
        if self.is_padded() { self.padded } else { 0 }
    }
}

/// One step of a phase: a device copy, or one NCCL call on a
/// sub-communicator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Copy { from: At, to: At, count: usize },
    Call { on: Sub, launch: Launch },
}

/// The steps of one hierarchical all-reduce on one rank, phase by phase:
/// intra-node, inter-node, intra-node (the `--phase-times` columns).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phases(pub [Vec<Step>; 3]);

fn call(on: Sub, op: Op) -> Step {
    Step::Call {
        on,
        launch: Launch {
            grouped: false,
            ops: vec![op],
        },
    }
}

fn at(buf: Buf, offset: usize) -> At {
    At { buf, offset }
}

/// The phases of one all-reduce of `count` elements organised as `mode`.
/// Out of place the input is `send`, in place `recv`; the output is always
/// `recv[..count]`. Every call meets NCCL's in-place conditions exactly or
/// does not overlap at all:
///
/// - rs-ar-ag, `count` a multiple of the node size `L`: the reduce-scatter
///   writes this rank's slice straight to its place in `recv` (out of
///   place from `send`, or NCCL's in-place reduce-scatter on `recv`), the
///   inter-node all-reduce works on it in place, and NCCL's in-place
///   all-gather fills the rest of `recv`: no copy, no scratch;
/// - rs-ar-ag otherwise: the input is copied into the scratch buffer, whose
///   padding only reduces into padding positions; the three calls run in
///   place there; the first `count` elements are copied out to `recv`;
/// - reduce-bcast: ncclReduce to local rank 0 into `recv`, ncclAllReduce in
///   place among the leaders (the inter communicator of local rank 0; other
///   ranks have no inter-node step), in-place ncclBroadcast from local
///   rank 0.
pub fn phases(
    mode: Hierarchy,
    placement: Placement,
    count: usize,
    op: RedOp,
    member: &Membership,
) -> Result<Phases, String> {
    let input = match placement {
        Placement::OutOfPlace => Buf::Send,
        Placement::InPlace => Buf::Recv,
    };
    match mode {
        Hierarchy::Flat => Err("internal error: a flat all-reduce sent to the hierarchy".into()),
        Hierarchy::RsArAg => {
            let s = Slicing::new(count, member.local_size());
            let mine = member.local_rank() * s.slice;
            Ok(if s.is_padded() {
                rs_ar_ag_padded(input, count, s.slice, mine, op)
            } else {
                rs_ar_ag_in_recv(input, s.slice, mine, op)
            })
        }
        Hierarchy::ReduceBcast => Ok(reduce_bcast(input, count, op, member.is_leader())),
    }
}

/// rs-ar-ag when the node size divides the count: this rank's `slice` at
/// `mine` straight in `recv`, no copy, no scratch.
fn rs_ar_ag_in_recv(input: Buf, slice: usize, mine: usize, op: RedOp) -> Phases {
    let [intra, inter, gather] = rs_ar_ag_calls(at(input, 0), Buf::Recv, slice, mine, op);
    Phases([vec![intra], vec![inter], vec![gather]])
}

/// rs-ar-ag in the padded scratch buffer: the input copied in, the three
/// calls in place there, the first `count` elements copied out to `recv`.
fn rs_ar_ag_padded(input: Buf, count: usize, slice: usize, mine: usize, op: RedOp) -> Phases {
    let scratch = at(Buf::Scratch, 0);
    let [intra, inter, gather] = rs_ar_ag_calls(scratch, Buf::Scratch, slice, mine, op);
    Phases([
        vec![
            Step::Copy {
                from: at(input, 0),
                to: scratch,
                count,
            },
            intra,
        ],
        vec![inter],
        vec![
            gather,
            Step::Copy {
                from: scratch,
                to: at(Buf::Recv, 0),
                count,
            },
        ],
    ])
}

/// rs-ar-ag's three calls, working in `work`: the reduce-scatter from
/// `input` of this rank's `slice` to its place `mine`, the inter-node
/// all-reduce of that slice in place, the in-place all-gather of every
/// slice over `work`.
fn rs_ar_ag_calls(input: At, work: Buf, slice: usize, mine: usize, op: RedOp) -> [Step; 3] {
    let own = at(work, mine);
    [
        call(
            Sub::Intra,
            Op::ReduceScatter {
                send: input,
                recv: own,
                count: slice,
                op,
            },
        ),
        call(
            Sub::Inter,
            Op::AllReduce {
                send: own,
                recv: own,
                count: slice,
                op,
            },
        ),
        call(
            Sub::Intra,
            Op::AllGather {
                send: own,
                recv: at(work, 0),
                count: slice,
            },
        ),
    ]
}

/// reduce-bcast: reduce to local rank 0 in `recv`, all-reduce in place
/// among the leaders (the inter communicator of local rank 0; other ranks
/// have no inter-node step), broadcast from local rank 0 in place.
fn reduce_bcast(input: Buf, count: usize, op: RedOp, leader: bool) -> Phases {
    let out = at(Buf::Recv, 0);
    let inter = if leader {
        vec![call(
            Sub::Inter,
            Op::AllReduce {
                send: out,
                recv: out,
                count,
                op,
            },
        )]
    } else {
        Vec::new()
    };
    Phases([
        vec![call(
            Sub::Intra,
            Op::Reduce {
                send: at(input, 0),
                recv: out,
                count,
                op,
                root: 0,
            },
        )],
        inter,
        vec![call(
            Sub::Intra,
            Op::Broadcast {
                send: out,
                recv: out,
                count,
                root: 0,
            },
        )],
    ])
}

/// How the sub-communicators are made, decided at start-up by every rank
/// together.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SubSource {
    /// Every rank's library has ncclCommSplit.
    Split,
    /// One unique id per group (`Group::id_index`), made by rank 0 and
    /// broadcast over the control plane.
    Ids(Vec<UniqueId>),
}

/// A rank's two sub-communicators, made once per run at the first
/// hierarchical point (a step every rank reaches at the same point of the
/// plan).
pub struct SubComms {
    intra: Comm,
    inter: Comm,
}

impl SubComms {
    /// Collective over every rank: with `Split`, over `parent`; with `Ids`,
    /// over each group (every rank makes its intra communicator first, so
    /// the disjoint groups cannot wait on each other).
    pub fn new(parent: &Comm, api: &Arc<Api>, source: &SubSource, member: Membership) -> Result<SubComms, String> {
        let make = |sub: Sub| -> Result<Comm, String> {
            let g = member.group(sub);
            let comm = match source {
                SubSource::Split => parent.split(g.color, g.key),
                SubSource::Ids(ids) => {
                    let id = ids.get(g.id_index).ok_or_else(|| {
                        format!(
                            "no unique id for the {} communicator ({} of {})",
                            sub.name(),
                            g.id_index,
                            ids.len()
                        )
                    })?;
                    api.init_rank(g.size, &id.0, g.rank)
                }
            }
            .map_err(|e: NcclError| format!("{} communicator: {e}", sub.name()))?;
            let (count, me) = (comm.count(), comm.user_rank());
            match (count, me) {
                (Ok(count), Ok(me)) if usize::try_from(count) == Ok(g.size) && usize::try_from(me) == Ok(g.rank) => {
                    Ok(comm)
                }
                (Ok(count), Ok(me)) => {
                    comm.abort();
                    Err(format!(
                        "NCCL made rank {me} of {count} in the {} communicator where rank {} of {} was expected",
                        sub.name(),
                        g.rank,
                        g.size
                    ))
                }
                (Err(e), _) | (_, Err(e)) => {
                    comm.abort();
                    Err(format!("{} communicator: {e}", sub.name()))
                }
            }
        };
        let intra = make(Sub::Intra)?;
        match make(Sub::Inter) {
            Ok(inter) => Ok(SubComms { intra, inter }),
            Err(e) => {
                // Peers may be gone: do not wait for them.
                intra.abort();
                Err(e)
            }
        }
    }

    pub fn comm(&mut self, sub: Sub) -> &mut Comm {
        match sub {
            Sub::Intra => &mut self.intra,
            Sub::Inter => &mut self.inter,
        }
    }

    /// Both communicators, intra-node first, with their names for the
    /// header ("the intra-node communicator").
    pub fn named_comms_mut(&mut self) -> [(&'static str, &mut Comm); 2] {
        let [intra, inter] = NAMES;
        [(intra, &mut self.intra), (inter, &mut self.inter)]
    }

    /// Both communicators, intra-node first.
    pub fn comms(&self) -> [&Comm; 2] {
        [&self.intra, &self.inter]
    }

    /// Their names, in `comms`' order.
    pub fn names(&self) -> [&'static str; 2] {
        NAMES
    }

    /// NCCL's asynchronous error state of both communicators.
    pub fn async_error(&self) -> Result<(), NcclError> {
        self.intra.async_error()?;
        self.inter.async_error()
    }

    /// After a failure: frees both without waiting for peers.
    pub fn abort(self) {
        self.intra.abort();
        self.inter.abort();
    }
}

/// Scratch elements this rank needs for an rs-ar-ag all-reduce of `count`
/// elements over nodes of `local_size` ranks (0 when no padding is needed).
pub fn scratch_elements(mode: Hierarchy, count: usize, local_size: usize) -> usize {
    match mode {
        Hierarchy::RsArAg => Slicing::new(count, local_size).scratch_elements(),
        Hierarchy::Flat | Hierarchy::ReduceBcast => 0,
    }
}

#[cfg(test)]
mod tests;
