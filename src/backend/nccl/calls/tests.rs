use super::*;
use crate::collective::Layout;

const N: usize = 3;

fn call(c: Collective, dtype: DType, rank: usize, root: usize) -> Call {
    Call {
        collective: c,
        hierarchy: crate::topology::Hierarchy::Flat,
        dtype,
        op: c.spec().is_reduction().then_some(ReduceOp::Max),
        // 12 requested elements at 3 ranks: count 4 per rank, or 12
        shape: c.spec().shape(12, N),
        at: Layout::new(N, rank, root),
        group: None,
    }
}

fn s(offset: usize) -> At {
    At { buf: Buf::Send, offset }
}

fn r(offset: usize) -> At {
    At { buf: Buf::Recv, offset }
}

fn all_reduce(send: At, recv: At, count: usize, op: RedOp) -> Op {
    Op::AllReduce { send, recv, count, op }
}

fn all_gather(send: At, recv: At, count: usize) -> Op {
    Op::AllGather { send, recv, count }
}

fn reduce_scatter(send: At, recv: At, count: usize, op: RedOp) -> Op {
    Op::ReduceScatter { send, recv, count, op }
}

fn broadcast(send: At, recv: At, count: usize, root: usize) -> Op {
    Op::Broadcast {
        send,
        recv,
        count,
        root,
    }
}

fn reduce(send: At, recv: At, count: usize, op: RedOp, root: usize) -> Op {
    Op::Reduce {
        send,
        recv,
        count,
        op,
        root,
    }
}

fn alltoall(send: At, recv: At, count: usize) -> Op {
    Op::AlltoAll { send, recv, count }
}

fn gather(send: At, recv: At, count: usize, root: usize) -> Op {
    Op::Gather {
        send,
        recv,
        count,
        root,
    }
}

fn scatter(send: At, recv: At, count: usize, root: usize) -> Op {
    Op::Scatter {
        send,
        recv,
        count,
        root,
    }
}

fn send(send: At, count: usize, peer: usize) -> Op {
    Op::Send { send, count, peer }
}

fn recv(recv: At, count: usize, peer: usize) -> Op {
    Op::Recv { recv, count, peer }
}

const ALL_NATIVE: Native = Native {
    alltoall: true,
    gather: true,
    scatter: true,
};

#[test]
fn every_type_maps_to_its_nccl_data_type_with_the_same_size() {
    for t in DType::ALL {
        assert_eq!(data_type(t).size_bytes(), t.size_bytes(), "{t}");
    }
    assert_eq!(data_type(DType::Int8) as i32, 0);
    assert_eq!(data_type(DType::Uint8) as i32, 1);
    assert_eq!(data_type(DType::Int32) as i32, 2);
    assert_eq!(data_type(DType::Uint32) as i32, 3);
    assert_eq!(data_type(DType::Int64) as i32, 4);
    assert_eq!(data_type(DType::Uint64) as i32, 5);
    assert_eq!(data_type(DType::Half) as i32, 6);
    assert_eq!(data_type(DType::Float) as i32, 7);
    assert_eq!(data_type(DType::Double) as i32, 8);
    assert_eq!(data_type(DType::Bfloat16) as i32, 9);
}

#[test]
fn every_operation_maps_to_its_nccl_red_op() {
    assert_eq!(red_op(ReduceOp::Sum) as i32, 0);
    assert_eq!(red_op(ReduceOp::Prod) as i32, 1);
    assert_eq!(red_op(ReduceOp::Max) as i32, 2);
    assert_eq!(red_op(ReduceOp::Min) as i32, 3);
    assert_eq!(red_op(ReduceOp::Avg) as i32, 4);
}

#[test]
fn bfloat16_and_avg_need_nccl_2_10() {
    let old = NcclVersion::new(2, 9, 9);
    let new = NcclVersion::new(2, 10, 3);
    assert!(check_dtype(old, DType::Bfloat16).unwrap_err().contains("2.10"));
    assert!(check_dtype(new, DType::Bfloat16).is_ok());
    assert!(check_op(old, ReduceOp::Avg).unwrap_err().contains("2.10"));
    assert!(check_op(new, ReduceOp::Avg).is_ok());
    for t in DType::ALL.into_iter().filter(|&t| t != DType::Bfloat16) {
        assert!(check_dtype(old, t).is_ok());
    }
}

#[test]
fn cuda_graph_capture_needs_nccl_2_9() {
    let m = check_graph(NcclVersion::new(2, 8, 4)).unwrap_err();
    assert!(
        m.contains("2.9") && m.contains("2.8.4") && m.starts_with("-G/--cuda-graph"),
        "{m}"
    );
    assert!(check_graph(NcclVersion::new(2, 9, 0)).is_ok());
    assert!(check_graph(NcclVersion::new(2, 21, 5)).is_ok());
}

#[test]
fn out_of_place_single_calls_read_send_and_write_recv_with_nccl_counts() {
    for dtype in DType::ALL {
        let l = |c| launch(&call(c, dtype, 1, 2), Placement::OutOfPlace, Native::default());
        let op = RedOp::Max;
        assert_eq!(l(Collective::AllReduce).ops, vec![all_reduce(s(0), r(0), 12, op)]);
        // all_gather and reduce_scatter take the per-rank count
        assert_eq!(l(Collective::AllGather).ops, vec![all_gather(s(0), r(0), 4)]);
        assert_eq!(
            l(Collective::ReduceScatter).ops,
            vec![reduce_scatter(s(0), r(0), 4, op)]
        );
        assert_eq!(l(Collective::Broadcast).ops, vec![broadcast(s(0), r(0), 12, 2)]);
        assert_eq!(l(Collective::Reduce).ops, vec![reduce(s(0), r(0), 12, op, 2)]);
        for c in [
            Collective::AllReduce,
            Collective::AllGather,
            Collective::ReduceScatter,
            Collective::Broadcast,
            Collective::Reduce,
        ] {
            assert!(!l(c).grouped, "{c}");
        }
    }
}

#[test]
fn native_alltoall_gather_and_scatter_are_used_where_present() {
    let l = |c, rank| launch(&call(c, DType::Float, rank, 2), Placement::OutOfPlace, ALL_NATIVE);
    assert_eq!(
        l(Collective::AllToAll, 0),
        Launch {
            grouped: false,
            ops: vec![alltoall(s(0), r(0), 4)]
        }
    );
    assert_eq!(l(Collective::Gather, 0).ops, vec![gather(s(0), r(0), 4, 2)]);
    assert_eq!(l(Collective::Scatter, 1).ops, vec![scatter(s(0), r(0), 4, 2)]);
}

#[test]
fn without_native_calls_alltoall_gather_and_scatter_are_grouped_send_recv() {
    let l = |c, rank| {
        launch(
            &call(c, DType::Int32, rank, 2),
            Placement::OutOfPlace,
            Native::default(),
        )
    };
    let a2a = l(Collective::AllToAll, 1);
    assert!(a2a.grouped);
    assert_eq!(a2a.ops.len(), 2 * N);
    for p in 0..N {
        assert_eq!(a2a.ops[2 * p], send(s(p * 4), 4, p));
        assert_eq!(a2a.ops[2 * p + 1], recv(r(p * 4), 4, p));
    }
    // gather: everyone sends to the root, which receives block p from p
    assert_eq!(
        l(Collective::Gather, 0),
        Launch {
            grouped: true,
            ops: vec![send(s(0), 4, 2)]
        }
    );
    let root = l(Collective::Gather, 2);
    assert_eq!(root.ops.len(), 1 + N);
    assert_eq!(root.ops[1 + 1], recv(r(4), 4, 1));
    // scatter: the root sends block p to p; everyone receives from it
    let root = l(Collective::Scatter, 2);
    assert_eq!(root.ops.len(), N + 1);
    assert_eq!(root.ops[1], send(s(4), 4, 1));
    assert_eq!(l(Collective::Scatter, 0).ops, vec![recv(r(0), 4, 2)]);
}

#[test]
fn sendrecv_is_a_ring() {
    for rank in 0..N {
        let l = launch(
            &call(Collective::SendRecv, DType::Double, rank, 0),
            Placement::OutOfPlace,
            ALL_NATIVE,
        );
        assert!(l.grouped);
        assert_eq!(
            l.ops,
            vec![send(s(0), 12, (rank + 1) % N), recv(r(0), 12, (rank + N - 1) % N)]
        );
    }
    // one rank sends to itself
    let mut c = call(Collective::SendRecv, DType::Float, 0, 0);
    c.at.nranks = 1;
    let l = launch(&c, Placement::OutOfPlace, ALL_NATIVE);
    assert_eq!(l.ops, vec![send(s(0), 12, 0), recv(r(0), 12, 0)]);
}

#[test]
fn in_place_uses_nccl_tests_offsets_in_the_one_buffer() {
    let rank = 1;
    let l = |c, native| launch(&call(c, DType::Half, rank, 1), Placement::InPlace, native);
    assert_eq!(
        l(Collective::AllReduce, ALL_NATIVE).ops,
        vec![all_reduce(r(0), r(0), 12, RedOp::Max)]
    );
    // all_gather: input at recv + rank*count
    assert_eq!(
        l(Collective::AllGather, ALL_NATIVE).ops,
        vec![all_gather(r(4), r(0), 4)]
    );
    // reduce_scatter: output at recv + rank*count
    assert_eq!(
        l(Collective::ReduceScatter, ALL_NATIVE).ops,
        vec![reduce_scatter(r(0), r(4), 4, RedOp::Max)]
    );
    // gather at the root: sendbuff == recvbuff + root*count
    assert_eq!(l(Collective::Gather, ALL_NATIVE).ops, vec![gather(r(4), r(0), 4, 1)]);
    // scatter at the root: recvbuff == sendbuff + root*count
    assert_eq!(l(Collective::Scatter, ALL_NATIVE).ops, vec![scatter(r(0), r(4), 4, 1)]);
    // in-place alltoall uses the native call too, on one buffer
    assert_eq!(l(Collective::AllToAll, ALL_NATIVE).ops, vec![alltoall(r(0), r(0), 4)]);
    let a2a = l(Collective::AllToAll, Native::default());
    assert!(a2a.grouped);
    assert!(a2a.ops.contains(&send(r(8), 4, 2)));
    assert!(a2a.ops.contains(&recv(r(8), 4, 2)));
    // fallback gather and scatter keep the same positions
    let g = l(Collective::Gather, Native::default());
    assert_eq!(g.ops[0], send(r(4), 4, 1));
    let sc = l(Collective::Scatter, Native::default());
    assert_eq!(sc.ops.last(), Some(&recv(r(4), 4, 1)));
}

/// Every launch of every collective, type, rank and placement stays
/// inside the buffers `buffer_lens` sizes, and the regions the engine
/// fills and checks are inside them too.
#[test]
fn every_call_fits_its_buffers() {
    for c in Collective::ALL {
        for dtype in DType::ALL {
            for root in 0..N {
                for rank in 0..N {
                    let call = call(c, dtype, rank, root);
                    let (send_len, recv_len) = buffer_lens(&call);
                    for placement in Placement::BOTH {
                        for native in [ALL_NATIVE, Native::default()] {
                            let l = launch(&call, placement, native);
                            for op in &l.ops {
                                for (at, len) in op.extents(N).into_iter().flatten() {
                                    let cap = if at.buf == Buf::Send { send_len } else { recv_len };
                                    assert!(at.offset + len <= cap, "{c} {dtype} {placement} {op:?}");
                                    if placement == Placement::InPlace {
                                        assert_eq!(at.buf, Buf::Recv, "{c} {op:?}");
                                    }
                                }
                            }
                        }
                        let reg = regions(&call, placement);
                        for (buf, range) in [reg.input, reg.output] {
                            let cap = match buf {
                                crate::collective::Buf::Send => send_len,
                                crate::collective::Buf::Recv => recv_len,
                            };
                            assert!(range.end <= cap, "{c} {placement} {range:?}");
                        }
                    }
                }
            }
        }
    }
}
