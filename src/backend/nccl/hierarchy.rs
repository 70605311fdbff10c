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
//! Everything but `SubComms` is pure and tested here, including a host
//! model of NCCL's collectives that runs the phases of every rank of a
//! layout and checks the result against a flat all-reduce.

use std::sync::Arc;

use super::UniqueId;
use super::sys::{Api, At, Buf, Comm, Launch, NcclError, Op, RedOp};
use crate::topology::{Hierarchy, Nodes};
use crate::types::Placement;

/// One of a rank's two sub-communicators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Sub {
    /// The ranks of this rank's node, by rank.
    Intra,
    /// The ranks with this rank's local rank, one per node, by node.
    Inter,
}

impl Sub {
    pub fn name(self) -> &'static str {
        match self {
            Sub::Intra => "intra-node",
            Sub::Inter => "inter-node",
        }
    }
}

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
    let own = at(Buf::Recv, mine);
    Phases([
        vec![call(
            Sub::Intra,
            Op::ReduceScatter {
                send: at(input, 0),
                recv: own,
                count: slice,
                op,
            },
        )],
        vec![call(
            Sub::Inter,
            Op::AllReduce {
                send: own,
                recv: own,
                count: slice,
                op,
            },
        )],
        vec![call(
            Sub::Intra,
            Op::AllGather {
                send: own,
                recv: at(Buf::Recv, 0),
                count: slice,
            },
        )],
    ])
}

/// rs-ar-ag in the padded scratch buffer: the input copied in, the three
/// calls in place there, the first `count` elements copied out to `recv`.
fn rs_ar_ag_padded(input: Buf, count: usize, slice: usize, mine: usize, op: RedOp) -> Phases {
    let own = at(Buf::Scratch, mine);
    let scratch = at(Buf::Scratch, 0);
    Phases([
        vec![
            Step::Copy {
                from: at(input, 0),
                to: scratch,
                count,
            },
            call(
                Sub::Intra,
                Op::ReduceScatter {
                    send: scratch,
                    recv: own,
                    count: slice,
                    op,
                },
            ),
        ],
        vec![call(
            Sub::Inter,
            Op::AllReduce {
                send: own,
                recv: own,
                count: slice,
                op,
            },
        )],
        vec![
            call(
                Sub::Intra,
                Op::AllGather {
                    send: own,
                    recv: scratch,
                    count: slice,
                },
            ),
            Step::Copy {
                from: scratch,
                to: at(Buf::Recv, 0),
                count,
            },
        ],
    ])
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

    pub fn comms_mut(&mut self) -> [&mut Comm; 2] {
        [&mut self.intra, &mut self.inter]
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
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn nodes_of(keys: &[usize]) -> Nodes {
        let hosts: Vec<String> = keys.iter().map(|k| format!("h{k}")).collect();
        Nodes::from_keys(keys, &hosts)
    }

    fn virtual_nodes(nranks: usize, per_node: usize) -> Nodes {
        Nodes::consecutive(per_node, &vec!["x".to_string(); nranks]).unwrap()
    }

    /// Every layout the tests use: uniform virtual nodes, one node, one
    /// rank per node, one rank, and hosts of different sizes.
    fn layouts() -> Vec<Nodes> {
        vec![
            virtual_nodes(4, 2),
            virtual_nodes(6, 3),
            virtual_nodes(6, 2),
            virtual_nodes(4, 1),
            virtual_nodes(4, 4),
            virtual_nodes(1, 1),
            virtual_nodes(8, 4),
            nodes_of(&[0, 0, 1, 1, 0, 2]),
            nodes_of(&[0, 1, 1, 1]),
        ]
    }

    #[test]
    fn membership_of_two_nodes_of_two() {
        let n = virtual_nodes(4, 2);
        let m = Membership::of(&n, 3);
        assert_eq!(
            m.intra,
            Group {
                color: 1,
                key: 3,
                rank: 1,
                size: 2,
                id_index: 1
            }
        );
        assert_eq!(
            m.inter,
            Group {
                color: 1,
                key: 1,
                rank: 1,
                size: 2,
                id_index: 3
            }
        );
        assert!(!m.is_leader());
        assert!(Membership::of(&n, 2).is_leader());
        assert_eq!(id_count(&n), 4);
    }

    #[test]
    fn membership_of_hosts_of_different_sizes() {
        // ranks 0, 1, 4 on node 0; 2, 3 on node 1; 5 on node 2
        let n = nodes_of(&[0, 0, 1, 1, 0, 2]);
        let m = Membership::of(&n, 4);
        assert_eq!((m.intra.rank, m.intra.size, m.intra.color), (2, 3, 0));
        // local rank 2 exists on node 0 only
        assert_eq!((m.inter.rank, m.inter.size, m.inter.color), (0, 1, 2));
        let leader = Membership::of(&n, 5);
        assert!(leader.is_leader());
        // the leaders are ranks 0, 2, 5, by node
        assert_eq!((leader.inter.rank, leader.inter.size, leader.inter.color), (2, 3, 0));
        assert_eq!(id_count(&n), 3 + 3);
    }

    #[test]
    fn degenerate_layouts_have_one_rank_groups() {
        let one_node = virtual_nodes(4, 4);
        for r in 0..4 {
            let m = Membership::of(&one_node, r);
            assert_eq!((m.intra.rank, m.intra.size), (r, 4));
            assert_eq!((m.inter.rank, m.inter.size), (0, 1));
        }
        let one_per_node = virtual_nodes(4, 1);
        for r in 0..4 {
            let m = Membership::of(&one_per_node, r);
            assert_eq!((m.intra.rank, m.intra.size), (0, 1));
            assert_eq!((m.inter.rank, m.inter.size), (r, 4));
            assert!(m.is_leader());
        }
        let alone = Membership::of(&virtual_nodes(1, 1), 0);
        assert_eq!((alone.intra.size, alone.inter.size), (1, 1));
    }

    /// In every layout the ranks of each group are exactly 0..size, once
    /// each, ordered by key; the groups are what their names say; and the
    /// id indices of distinct groups differ.
    #[test]
    fn groups_partition_the_ranks_consistently() {
        for nodes in layouts() {
            let n = nodes.nranks();
            let all: Vec<Membership> = (0..n).map(|r| Membership::of(&nodes, r)).collect();
            for sub in [Sub::Intra, Sub::Inter] {
                let mut by_color: BTreeMap<usize, Vec<(usize, usize, usize)>> = BTreeMap::new();
                for (r, m) in all.iter().enumerate() {
                    let g = m.group(sub);
                    by_color.entry(g.color).or_default().push((g.key, g.rank, r));
                    assert!(g.id_index < id_count(&nodes), "{sub:?} {nodes:?}");
                }
                for (color, mut members) in by_color {
                    members.sort();
                    let size = members.len();
                    for (i, &(_, rank, r)) in members.iter().enumerate() {
                        assert_eq!(rank, i, "{sub:?} color {color} {nodes:?}");
                        let g = all[r].group(sub);
                        assert_eq!(g.size, size);
                        assert_eq!(g.id_index, all[members[0].2].group(sub).id_index);
                        match sub {
                            Sub::Intra => assert_eq!(nodes.node_of_rank[r], color),
                            Sub::Inter => assert_eq!(nodes.local_rank(r), color),
                        }
                    }
                }
            }
            let intra_ids: Vec<usize> = all.iter().map(|m| m.intra.id_index).collect();
            assert!(all.iter().all(|m| !intra_ids.contains(&m.inter.id_index)));
        }
    }

    #[test]
    fn slicing_pads_to_equal_blocks_only_when_needed() {
        assert_eq!(
            Slicing::new(10, 3),
            Slicing {
                count: 10,
                slice: 4,
                padded: 12
            }
        );
        assert!(Slicing::new(10, 3).is_padded());
        assert_eq!(Slicing::new(12, 3).scratch_elements(), 0);
        assert_eq!(Slicing::new(10, 3).scratch_elements(), 12);
        // fewer elements than ranks: whole padding slices
        assert_eq!(Slicing::new(2, 4).padded, 4);
        assert_eq!(Slicing::new(1, 1).padded, 1);
        for count in 1..60 {
            for l in 1..9 {
                let s = Slicing::new(count, l);
                assert!(s.padded >= count && s.padded - count < l, "{count} {l}");
                assert_eq!(s.padded % l, 0);
                assert_eq!(s.slice * l, s.padded);
            }
        }
        assert_eq!(scratch_elements(Hierarchy::RsArAg, 7, 2), 8);
        assert_eq!(scratch_elements(Hierarchy::ReduceBcast, 7, 2), 0);
        assert_eq!(scratch_elements(Hierarchy::Flat, 7, 2), 0);
    }

    fn member(local_rank: usize, local_size: usize) -> Membership {
        let g = |rank, size| Group {
            color: 0,
            key: 0,
            rank,
            size,
            id_index: 0,
        };
        Membership {
            intra: g(local_rank, local_size),
            inter: g(0, 2),
        }
    }

    fn ops(steps: &[Step]) -> Vec<(Option<Sub>, Option<Op>)> {
        steps
            .iter()
            .map(|s| match s {
                Step::Copy { .. } => (None, None),
                Step::Call { on, launch } => {
                    assert!(!launch.grouped);
                    assert_eq!(launch.ops.len(), 1);
                    (Some(*on), Some(launch.ops[0]))
                }
            })
            .collect()
    }

    #[test]
    fn rs_ar_ag_without_padding_works_in_recv_with_no_copy() {
        let r = |o| at(Buf::Recv, o);
        let p = phases(Hierarchy::RsArAg, Placement::OutOfPlace, 12, RedOp::Sum, &member(2, 3)).unwrap();
        assert_eq!(
            ops(&p.0[0]),
            vec![(
                Some(Sub::Intra),
                Some(Op::ReduceScatter {
                    send: at(Buf::Send, 0),
                    recv: r(8),
                    count: 4,
                    op: RedOp::Sum
                })
            )]
        );
        assert_eq!(
            ops(&p.0[1]),
            vec![(
                Some(Sub::Inter),
                Some(Op::AllReduce {
                    send: r(8),
                    recv: r(8),
                    count: 4,
                    op: RedOp::Sum
                })
            )]
        );
        assert_eq!(
            ops(&p.0[2]),
            vec![(
                Some(Sub::Intra),
                Some(Op::AllGather {
                    send: r(8),
                    recv: r(0),
                    count: 4
                })
            )]
        );
        let ip = phases(Hierarchy::RsArAg, Placement::InPlace, 12, RedOp::Max, &member(1, 3)).unwrap();
        assert_eq!(
            ops(&ip.0[0])[0].1,
            Some(Op::ReduceScatter {
                send: r(0),
                recv: r(4),
                count: 4,
                op: RedOp::Max
            })
        );
    }

    #[test]
    fn rs_ar_ag_with_padding_copies_in_works_in_scratch_and_copies_out() {
        let sc = |o| at(Buf::Scratch, o);
        let p = phases(Hierarchy::RsArAg, Placement::InPlace, 10, RedOp::Sum, &member(1, 3)).unwrap();
        assert_eq!(
            p.0[0][0],
            Step::Copy {
                from: at(Buf::Recv, 0),
                to: sc(0),
                count: 10
            }
        );
        assert_eq!(
            ops(&p.0[0])[1].1,
            Some(Op::ReduceScatter {
                send: sc(0),
                recv: sc(4),
                count: 4,
                op: RedOp::Sum
            })
        );
        assert_eq!(
            ops(&p.0[1])[0].1,
            Some(Op::AllReduce {
                send: sc(4),
                recv: sc(4),
                count: 4,
                op: RedOp::Sum
            })
        );
        assert_eq!(
            ops(&p.0[2])[0].1,
            Some(Op::AllGather {
                send: sc(4),
                recv: sc(0),
                count: 4
            })
        );
        assert_eq!(
            p.0[2][1],
            Step::Copy {
                from: sc(0),
                to: at(Buf::Recv, 0),
                count: 10
            }
        );
        let oop = phases(Hierarchy::RsArAg, Placement::OutOfPlace, 10, RedOp::Sum, &member(0, 3)).unwrap();
        assert_eq!(
            oop.0[0][0],
            Step::Copy {
                from: at(Buf::Send, 0),
                to: sc(0),
                count: 10
            }
        );
    }

    #[test]
    fn reduce_bcast_goes_through_the_leader() {
        let r0 = at(Buf::Recv, 0);
        let leader = phases(
            Hierarchy::ReduceBcast,
            Placement::OutOfPlace,
            7,
            RedOp::Min,
            &member(0, 3),
        )
        .unwrap();
        assert_eq!(
            ops(&leader.0[0])[0].1,
            Some(Op::Reduce {
                send: at(Buf::Send, 0),
                recv: r0,
                count: 7,
                op: RedOp::Min,
                root: 0
            })
        );
        assert_eq!(
            ops(&leader.0[1]),
            vec![(
                Some(Sub::Inter),
                Some(Op::AllReduce {
                    send: r0,
                    recv: r0,
                    count: 7,
                    op: RedOp::Min
                })
            )]
        );
        assert_eq!(
            ops(&leader.0[2])[0].1,
            Some(Op::Broadcast {
                send: r0,
                recv: r0,
                count: 7,
                root: 0
            })
        );
        let other = phases(Hierarchy::ReduceBcast, Placement::InPlace, 7, RedOp::Min, &member(2, 3)).unwrap();
        assert!(other.0[1].is_empty(), "only leaders take part in the inter-node step");
        assert_eq!(
            ops(&other.0[0])[0].1,
            Some(Op::Reduce {
                send: r0,
                recv: r0,
                count: 7,
                op: RedOp::Min,
                root: 0
            })
        );
        assert!(phases(Hierarchy::Flat, Placement::InPlace, 7, RedOp::Sum, &member(0, 1)).is_err());
    }

    // -----------------------------------------------------------------
    // A host model of NCCL's collectives, to run the phases of every rank.

    /// One rank's three buffers, in elements.
    #[derive(Clone)]
    struct Bufs {
        send: Vec<u64>,
        recv: Vec<u64>,
        scratch: Vec<u64>,
    }

    impl Bufs {
        fn get(&self, b: Buf) -> &Vec<u64> {
            match b {
                Buf::Send => &self.send,
                Buf::Recv => &self.recv,
                Buf::Scratch => &self.scratch,
            }
        }
        fn get_mut(&mut self, b: Buf) -> &mut Vec<u64> {
            match b {
                Buf::Send => &mut self.send,
                Buf::Recv => &mut self.recv,
                Buf::Scratch => &mut self.scratch,
            }
        }
    }

    /// Buffer rotation: send and recv positions move, scratch stays.
    fn shifted(a: At, shift: usize) -> usize {
        if a.buf == Buf::Scratch {
            a.offset
        } else {
            a.offset + shift
        }
    }

    fn reduce(op: RedOp, a: u64, b: u64) -> u64 {
        match op {
            RedOp::Sum | RedOp::Avg => a.wrapping_add(b),
            RedOp::Prod => a.wrapping_mul(b),
            RedOp::Max => a.max(b),
            RedOp::Min => a.min(b),
        }
    }

    /// NCCL's rule for one call: its input and output either do not
    /// overlap, or they meet the call's in-place condition exactly.
    fn check_in_place(op: &Op, n: usize, rank: usize, shift: usize) {
        let [Some((s, slen)), Some((r, rlen))] = op.extents(n) else {
            panic!("{op:?}")
        };
        if s.buf != r.buf {
            return;
        }
        let (s0, r0) = (shifted(s, shift), shifted(r, shift));
        let overlap = s0 < r0 + rlen && r0 < s0 + slen;
        if !overlap {
            return;
        }
        let ok = match *op {
            Op::AllReduce { .. } | Op::Broadcast { .. } | Op::Reduce { .. } => s0 == r0,
            Op::ReduceScatter { count, .. } => r0 == s0 + rank * count,
            Op::AllGather { count, .. } => s0 == r0 + rank * count,
            _ => false,
        };
        assert!(ok, "overlap outside NCCL's in-place condition: {op:?} at rank {rank}");
    }

    /// Runs one collective call over the group `members` (global ranks, in
    /// group-rank order), each with its own op (they must agree).
    fn run_call(all: &mut [Bufs], members: &[(usize, Op)], shift: usize) {
        let n = members.len();
        // Every input is read before any output is written: what NCCL
        // guarantees for its in-place layouts, the only overlaps that
        // `check_in_place` lets through.
        let inputs: Vec<Vec<u64>> = members
            .iter()
            .enumerate()
            .map(|(rank, &(r, op))| {
                check_in_place(&op, n, rank, shift);
                let [Some((s, len)), _] = op.extents(n) else { panic!() };
                let from = shifted(s, shift);
                let buf = all[r].get(s.buf);
                assert!(from + len <= buf.len(), "read beyond {:?}: {op:?}", s.buf);
                buf[from..from + len].to_vec()
            })
            .collect();
        let (_, first) = members[0];
        for (rank, &(r, op)) in members.iter().enumerate() {
            assert_eq!(
                std::mem::discriminant(&op),
                std::mem::discriminant(&first),
                "members disagree on the call"
            );
            let [_, Some((out, len))] = op.extents(n) else { panic!() };
            let result: Vec<u64> = match op {
                Op::AllReduce { op: red, .. } => (0..len)
                    .map(|i| inputs.iter().map(|x| x[i]).reduce(|a, b| reduce(red, a, b)).unwrap())
                    .collect(),
                Op::ReduceScatter { count, op: red, .. } => (0..len)
                    .map(|i| {
                        inputs
                            .iter()
                            .map(|x| x[rank * count + i])
                            .reduce(|a, b| reduce(red, a, b))
                            .unwrap()
                    })
                    .collect(),
                Op::AllGather { .. } => inputs.concat(),
                Op::Reduce { op: red, root, .. } => {
                    if rank != root {
                        continue;
                    }
                    (0..len)
                        .map(|i| inputs.iter().map(|x| x[i]).reduce(|a, b| reduce(red, a, b)).unwrap())
                        .collect()
                }
                Op::Broadcast { root, .. } => inputs[root].clone(),
                other => panic!("not a hierarchical call: {other:?}"),
            };
            let to = shifted(out, shift);
            let buf = all[r].get_mut(out.buf);
            assert!(to + len <= buf.len(), "write beyond {:?}: {op:?}", out.buf);
            buf[to..to + len].copy_from_slice(&result);
        }
    }

    /// The calls of one step, by (sub-communicator, color): each member's
    /// rank in the group, global rank and call.
    type Pending = BTreeMap<(Sub, usize), Vec<(usize, usize, Op)>>;

    /// Runs a hierarchical all-reduce on every rank of `nodes` and returns
    /// each rank's `recv[shift..shift + count]`.
    fn simulate(nodes: &Nodes, mode: Hierarchy, placement: Placement, count: usize, shift: usize) -> Vec<Vec<u64>> {
        let n = nodes.nranks();
        let members: Vec<Membership> = (0..n).map(|r| Membership::of(nodes, r)).collect();
        let input = |r: usize, i: usize| (r * 1000 + i) as u64 + 1;
        let poison = 0xdead_beef_u64;
        let mut all: Vec<Bufs> = (0..n)
            .map(|r| {
                let mut b = Bufs {
                    send: vec![poison; shift + count],
                    recv: vec![poison; shift + count],
                    // garbage in the padding must never reach the output
                    scratch: vec![poison; scratch_elements(mode, count, members[r].local_size())],
                };
                let dst = if placement == Placement::InPlace {
                    &mut b.recv
                } else {
                    &mut b.send
                };
                for i in 0..count {
                    dst[shift + i] = input(r, i);
                }
                b
            })
            .collect();
        let plans: Vec<Phases> = members
            .iter()
            .map(|m| phases(mode, placement, count, RedOp::Sum, m).unwrap())
            .collect();
        for phase in 0..3 {
            let depth = plans.iter().map(|p| p.0[phase].len()).max().unwrap();
            for slot in 0..depth {
                let mut calls = Pending::new();
                for r in 0..n {
                    match plans[r].0[phase].get(slot) {
                        None => {}
                        Some(Step::Copy { from, to, count }) => {
                            let (f, t) = (shifted(*from, shift), shifted(*to, shift));
                            let data = all[r].get(from.buf)[f..f + count].to_vec();
                            all[r].get_mut(to.buf)[t..t + count].copy_from_slice(&data);
                        }
                        Some(Step::Call { on, launch }) => {
                            let g = members[r].group(*on);
                            calls
                                .entry((*on, g.color))
                                .or_default()
                                .push((g.rank, r, launch.ops[0]));
                        }
                    }
                }
                for ((on, color), mut group) in calls {
                    group.sort_by_key(|c| c.0);
                    let size = members[group[0].1].group(on).size;
                    assert_eq!(
                        group.len(),
                        size,
                        "phase {phase}: every member of {on:?} {color} must call"
                    );
                    let members: Vec<(usize, Op)> = group.iter().map(|&(_, r, op)| (r, op)).collect();
                    run_call(&mut all, &members, shift);
                }
            }
        }
        all.iter().map(|b| b.recv[shift..shift + count].to_vec()).collect()
    }

    /// Both modes, both placements, every layout, counts around multiples
    /// of the node size, with and without rotation: every rank ends with
    /// the flat all-reduce's result, and every call stays inside its
    /// buffers and meets NCCL's in-place rules.
    #[test]
    fn every_mode_gives_the_flat_result_on_every_layout() {
        for nodes in layouts() {
            let n = nodes.nranks();
            for mode in [Hierarchy::RsArAg, Hierarchy::ReduceBcast] {
                if mode == Hierarchy::RsArAg && !nodes.is_uniform() {
                    continue; // refused by the plan
                }
                for placement in Placement::BOTH {
                    for count in [1, 2, 3, 5, 7, 8, 12, 13, 49] {
                        for shift in [0, 5] {
                            let got = simulate(&nodes, mode, placement, count, shift);
                            let want: Vec<u64> = (0..count)
                                .map(|i| (0..n).map(|r| (r * 1000 + i) as u64 + 1).sum())
                                .collect();
                            for (r, out) in got.iter().enumerate() {
                                assert_eq!(
                                    out, &want,
                                    "{mode} {placement} count {count} shift {shift} rank {r} of {nodes:?}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
