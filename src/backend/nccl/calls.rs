//! How every collective, type, operation and placement becomes NCCL calls:
//! pure functions, unit-tested (`calls/tests.rs`), executed by `sys::Comm::launch`.
//!
//! Buffers: `send` holds `shape.send` elements, `recv` holds
//! `max(shape.send, shape.recv)` so that an in-place input fits in it.
//! In-place positions are NCCL's and nccl-tests' (`sendInplaceOffset` /
//! `recvInplaceOffset` of each test):
//! - all_reduce, broadcast, reduce, alltoall, sendrecv: one buffer, start;
//! - all_gather: a rank's input at `recv + rank*count` (NCCL's in-place
//!   condition `sendbuff == recvbuff + rank*sendcount`);
//! - reduce_scatter: a rank's output at `recv + rank*count`;
//! - gather: every rank's input at `recv + rank*count` (the root's is NCCL's
//!   in-place condition `sendbuff == recvbuff + root*count`);
//! - scatter: the root's input is the buffer, each rank's output at
//!   `recv + rank*count`.
//!
//! alltoall, gather and scatter use the native calls where the library has
//! them (NCCL 2.28 and later) and grouped send/recv otherwise, as nccl-tests
//! does, in both placements, so that the two columns time the same code.
//! alltoallv is always grouped send/recv (NCCL has no alltoallv), a pair
//! per peer in peer order with each block where `collective::alltoallv`
//! puts it, as nccl-tests' alltoallv.cu issues it.
//! As in nccl-tests, in-place alltoall and sendrecv pass the same buffer as
//! input and output (ncclAlltoAll with sendbuff == recvbuff; ncclSend and
//! ncclRecv of one group on one buffer; alltoallv likewise). NCCL orders no send before a
//! receive of the same group, so data can be overwritten before it is sent:
//! nccl-tests does not check these two in place ("We don't support in-place
//! alltoall/sendrecv", its alltoall.cu and sendrecv.cu), and neither do we
//! (`UNCHECKED`).

use super::sys::{At, Buf, DataType, Launch, NcclVersion, Op, RedOp};
use crate::backend::Call;
use crate::collective::{Collective, Convention, Peers, Regions};
use crate::types::{DType, Placement, ReduceOp};

/// NCCL 2.10 added bfloat16 and ncclAvg.
const BF16_AND_AVG_SINCE: NcclVersion = NcclVersion::new(2, 10, 0);

pub fn data_type(dtype: DType) -> DataType {
    match dtype {
        DType::Int8 => DataType::Int8,
        DType::Uint8 => DataType::Uint8,
        DType::Int32 => DataType::Int32,
        DType::Uint32 => DataType::Uint32,
        DType::Int64 => DataType::Int64,
        DType::Uint64 => DataType::Uint64,
        DType::Half => DataType::Float16,
        DType::Float => DataType::Float32,
        DType::Double => DataType::Float64,
        DType::Bfloat16 => DataType::Bfloat16,
    }
}

pub fn red_op(op: ReduceOp) -> RedOp {
    match op {
        ReduceOp::Sum => RedOp::Sum,
        ReduceOp::Prod => RedOp::Prod,
        ReduceOp::Min => RedOp::Min,
        ReduceOp::Max => RedOp::Max,
        ReduceOp::Avg => RedOp::Avg,
    }
}

pub fn check_dtype(version: NcclVersion, dtype: DType) -> Result<(), String> {
    if dtype == DType::Bfloat16 && version < BF16_AND_AVG_SINCE {
        return Err(format!(
            "NCCL {version} has no bfloat16 (it came in 2.10); use a newer NCCL or another --dtype"
        ));
    }
    Ok(())
}

pub fn check_op(version: NcclVersion, op: ReduceOp) -> Result<(), String> {
    if op == ReduceOp::Avg && version < BF16_AND_AVG_SINCE {
        return Err(format!(
            "NCCL {version} has no avg operation (it came in 2.10); use a newer NCCL or another --op"
        ));
    }
    Ok(())
}

/// NCCL 2.9 made its calls capturable in CUDA graphs.
const GRAPH_CAPTURE_SINCE: NcclVersion = NcclVersion::new(2, 9, 0);

/// Why `-G` cannot run with this library, if it cannot.
pub fn check_graph(version: NcclVersion) -> Result<(), String> {
    if version < GRAPH_CAPTURE_SINCE {
        return Err(format!(
            "-G/--cuda-graph needs NCCL 2.9 or later (NCCL {version} cannot be captured in a CUDA graph); \
             use a newer NCCL or drop -G"
        ));
    }
    Ok(())
}

/// The outputs that are not defined, so not checked: in-place alltoall,
/// alltoallv and sendrecv (module comment).
pub const UNCHECKED: [(Collective, Placement); 3] = [
    (Collective::AllToAll, Placement::InPlace),
    (Collective::AllToAllV, Placement::InPlace),
    (Collective::SendRecv, Placement::InPlace),
];

/// The native calls the loaded library offers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Native {
    pub alltoall: bool,
    pub gather: bool,
    pub scatter: bool,
}

/// Elements of the two device buffers a call needs.
pub fn buffer_lens(call: &Call) -> (usize, usize) {
    (call.shape.send, call.shape.send.max(call.shape.recv))
}

/// Where this rank's input goes and where its output is: NCCL's layout
/// (`collective::regions`), every output in `recv`.
pub fn regions(call: &Call, placement: Placement) -> Regions {
    Convention::Nccl.regions(call.collective, &call.shape, &call.at, placement)
}

/// The NCCL calls of one operation of `call` on this rank.
#[cfg(test)]
pub fn launch(call: &Call, placement: Placement, native: Native) -> Launch {
    launch_shifted(call, placement, native, 1)
}

/// `launch`, with a sendrecv to the rank `shift` places ahead (and from
/// the one `shift` places behind) instead of the ring's neighbours; 0 is
/// the rank itself (a replayed all-to-all's own block).
pub fn launch_shifted(call: &Call, placement: Placement, native: Native, shift: usize) -> Launch {
    let mut p = Positions::of(call, placement);
    p.shift = shift;
    let (c, op, root) = (p.count, p.op, p.root);
    let one = |op: Op| Launch {
        grouped: false,
        ops: vec![op],
    };
    let group = |ops: Vec<Op>| Launch { grouped: true, ops };
    let (s0, r0) = (p.send(0), p.recv(0));
    match call.collective {
        Collective::AllReduce => one(Op::AllReduce {
            send: s0,
            recv: r0,
            count: c,
            op,
        }),
        Collective::AllGather => one(Op::AllGather {
            send: p.send(p.mine),
            recv: r0,
            count: c,
        }),
        Collective::ReduceScatter => one(Op::ReduceScatter {
            send: s0,
            recv: p.recv(p.mine),
            count: c,
            op,
        }),
        Collective::Broadcast => one(Op::Broadcast {
            send: s0,
            recv: r0,
            count: c,
            root,
        }),
        Collective::Reduce => one(Op::Reduce {
            send: s0,
            recv: r0,
            count: c,
            op,
            root,
        }),
        Collective::AllToAll if native.alltoall => one(Op::AlltoAll {
            send: s0,
            recv: r0,
            count: c,
        }),
        Collective::AllToAll => group(p.alltoall_pairs()),
        Collective::AllToAllV => group(p.alltoallv_pairs(&Peers::of(&call.shape, call.at.nranks))),
        Collective::Gather if native.gather => one(Op::Gather {
            send: p.send(p.mine),
            recv: r0,
            count: c,
            root,
        }),
        Collective::Gather => group(p.gather_pairs()),
        Collective::Scatter if native.scatter => one(Op::Scatter {
            send: s0,
            recv: p.recv(p.mine),
            count: c,
            root,
        }),
        Collective::Scatter => group(p.scatter_pairs()),
        Collective::SendRecv => group(p.ring()),
    }
}

/// Where one rank's operation reads and writes: out of place, input in
/// `send` and output in `recv`; in place, both in `recv`, at the positions
/// of the module comment.
struct Positions {
    nranks: usize,
    rank: usize,
    root: usize,
    count: usize,
    op: RedOp,
    /// `send` out of place, `recv` in place; the output is always `recv`.
    input: Buf,
    /// This rank's block in place (`rank * count`), else the start.
    mine: usize,
    /// Places a sendrecv sends ahead (1: the ring).
    shift: usize,
}

impl Positions {
    fn of(call: &Call, placement: Placement) -> Positions {
        let in_place = placement == Placement::InPlace;
        let count = call.shape.count;
        Positions {
            nranks: call.at.nranks,
            rank: call.at.rank,
            root: call.at.root,
            count,
            op: call.op.map(red_op).unwrap_or(RedOp::Sum),
            input: if in_place { Buf::Recv } else { Buf::Send },
            mine: if in_place { call.at.rank * count } else { 0 },
            shift: 1,
        }
    }

    /// Element `offset` of the input buffer.
    fn send(&self, offset: usize) -> At {
        At {
            buf: self.input,
            offset,
        }
    }

    /// Element `offset` of the output buffer.
    fn recv(&self, offset: usize) -> At {
        At { buf: Buf::Recv, offset }
    }

    fn send_to(&self, peer: usize, from: usize) -> Op {
        Op::Send {
            send: self.send(from),
            count: self.count,
            peer,
        }
    }

    fn recv_from(&self, peer: usize, to: usize) -> Op {
        Op::Recv {
            recv: self.recv(to),
            count: self.count,
            peer,
        }
    }

    /// alltoall without ncclAlltoAll: block `p` to and from every peer `p`.
    fn alltoall_pairs(&self) -> Vec<Op> {
        let c = self.count;
        (0..self.nranks)
            .flat_map(|p| [self.send_to(p, p * c), self.recv_from(p, p * c)])
            .collect()
    }

    /// alltoallv, as nccl-tests issues it: to and from every peer in turn,
    /// each block where `peers` puts it, no call for an empty block.
    fn alltoallv_pairs(&self, peers: &Peers) -> Vec<Op> {
        let me = self.rank;
        let mut ops = Vec::new();
        for p in 0..self.nranks {
            let (out, inc) = (peers.count(me, p), peers.count(p, me));
            if out > 0 {
                ops.push(Op::Send {
                    send: self.send(peers.send_offset(me, p)),
                    count: out,
                    peer: p,
                });
            }
            if inc > 0 {
                ops.push(Op::Recv {
                    recv: self.recv(peers.recv_offset(me, p)),
                    count: inc,
                    peer: p,
                });
            }
        }
        ops
    }

    /// gather without ncclGather: every rank sends its block to the root,
    /// which receives block `p` from every rank `p`.
    fn gather_pairs(&self) -> Vec<Op> {
        let mut ops = vec![self.send_to(self.root, self.mine)];
        if self.rank == self.root {
            ops.extend((0..self.nranks).map(|p| self.recv_from(p, p * self.count)));
        }
        ops
    }

    /// scatter without ncclScatter: the root sends block `p` to every rank
    /// `p`, and every rank receives its block.
    fn scatter_pairs(&self) -> Vec<Op> {
        let mut ops = Vec::new();
        if self.rank == self.root {
            ops.extend((0..self.nranks).map(|p| self.send_to(p, p * self.count)));
        }
        ops.push(self.recv_from(self.root, self.mine));
        ops
    }

    /// sendrecv: to the next rank of the ring, from the previous one.
    fn ring(&self) -> Vec<Op> {
        let n = self.nranks.max(1);
        let k = self.shift % n;
        vec![
            self.send_to((self.rank + k) % n, 0),
            self.recv_from((self.rank + n - k) % n, 0),
        ]
    }
}

#[cfg(test)]
mod tests;
