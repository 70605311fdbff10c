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
