//! NCCL calls described as data: positions in the device buffers (`Buf`,
//! `At`), one call (`Op`, with the element ranges it touches) and what one
//! launch enqueues (`Launch`). Plain values: `result` enqueues an `Op`,
//! `safe` checks its ranges against the buffers first.

use super::raw::RedOp;

/// Which device buffer a pointer points into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
    /// The hierarchical all-reduce's padded buffer (never rotated).
    Scratch,
}

/// A position in a device buffer, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub buf: Buf,
    pub offset: usize,
}

impl At {
    /// Element `offset` of `buf`.
    pub fn new(buf: Buf, offset: usize) -> At {
        At { buf, offset }
    }
}

/// One NCCL call, with pointers as positions in the two buffers. Counts are
/// NCCL's `count` argument of that call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    AllReduce {
        send: At,
        recv: At,
        count: usize,
        op: RedOp,
    },
    Broadcast {
        send: At,
        recv: At,
        count: usize,
        root: usize,
    },
    Reduce {
        send: At,
        recv: At,
        count: usize,
        op: RedOp,
        root: usize,
    },
    /// `count` is per rank (sendcount).
    AllGather {
        send: At,
        recv: At,
        count: usize,
    },
    /// `count` is per rank (recvcount).
    ReduceScatter {
        send: At,
        recv: At,
        count: usize,
        op: RedOp,
    },
    /// Native ncclAlltoAll; `count` per peer.
    AlltoAll {
        send: At,
        recv: At,
        count: usize,
    },
    /// Native ncclGather; `count` per rank.
    Gather {
        send: At,
        recv: At,
        count: usize,
        root: usize,
    },
    /// Native ncclScatter; `count` per rank.
    Scatter {
        send: At,
        recv: At,
        count: usize,
        root: usize,
    },
    Send {
        send: At,
        count: usize,
        peer: usize,
    },
    Recv {
        recv: At,
        count: usize,
        peer: usize,
    },
}

impl Op {
    /// The element ranges this call reads and writes, as (position, length):
    /// what `launch` checks against the buffers before calling NCCL.
    pub fn extents(&self, nranks: usize) -> [Option<(At, usize)>; 2] {
        let n = nranks;
        let two = |a: At, x: usize, b: At, y: usize| [Some((a, x)), Some((b, y))];
        match *self {
            Op::AllReduce { send, recv, count, .. } => two(send, count, recv, count),
            Op::Broadcast { send, recv, count, .. } => two(send, count, recv, count),
            Op::Reduce { send, recv, count, .. } => two(send, count, recv, count),
            Op::AllGather { send, recv, count } => two(send, count, recv, count * n),
            Op::ReduceScatter { send, recv, count, .. } => two(send, count * n, recv, count),
            Op::AlltoAll { send, recv, count } => two(send, count * n, recv, count * n),
            Op::Gather { send, recv, count, .. } => two(send, count, recv, count * n),
            Op::Scatter { send, recv, count, .. } => two(send, count * n, recv, count),
            Op::Send { send, count, .. } => [Some((send, count)), None],
            Op::Recv { recv, count, .. } => [Some((recv, count)), None],
        }
    }
}

/// What one `launch` enqueues: NCCL calls, inside one group when `grouped`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub grouped: bool,
    pub ops: Vec<Op>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extents_cover_what_each_call_touches() {
        let s = At {
            buf: Buf::Send,
            offset: 0,
        };
        let r = At {
            buf: Buf::Recv,
            offset: 4,
        };
        assert_eq!(
            Op::AllGather {
                send: s,
                recv: r,
                count: 3
            }
            .extents(4),
            [Some((s, 3)), Some((r, 12))]
        );
        assert_eq!(
            Op::ReduceScatter {
                send: s,
                recv: r,
                count: 3,
                op: RedOp::Sum
            }
            .extents(4),
            [Some((s, 12)), Some((r, 3))]
        );
        assert_eq!(
            Op::Recv {
                recv: r,
                count: 5,
                peer: 1
            }
            .extents(4),
            [Some((r, 5)), None]
        );
    }
}
