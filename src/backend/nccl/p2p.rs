//! Sends and receives between chosen ranks on the backend's own
//! communicator (`PointToPoint`, for `collbench links`): one NCCL group
//! (ncclGroupStart, ncclSend/ncclRecv, ncclGroupEnd) per call, on the
//! stream every launch uses, so groups run in the order enqueued and a
//! ping-pong's send waits for the receive before it. Sends read the call's
//! input region of `send`, receives write its output region of `recv`
//! (NCCL's out-of-place layout: `calls::regions`). No communicator is made
//! per pair: NCCL connects each peer at its first operation.

use super::calls;
use super::sys::{At, Buf, Buffers, Launch, Op};
use super::{ABORTED, NcclBackend};
use crate::backend::{Call, PeerOp, PointToPoint};
use crate::error::Error;
use crate::types::Placement;

/// The NCCL calls of one point-to-point group of `call`.
pub(super) fn launch(call: &Call, ops: &[PeerOp]) -> Launch {
    let r = calls::regions(call, Placement::OutOfPlace);
    let count = call.shape.count;
    let ops = ops
        .iter()
        .map(|op| match *op {
            PeerOp::Send(peer) => Op::Send {
                send: At::new(Buf::Send, r.input.1.start),
                count,
                peer,
            },
            PeerOp::Recv(peer) => Op::Recv {
                recv: At::new(Buf::Recv, r.output.1.start),
                count,
                peer,
            },
        })
        .collect();
    Launch { grouped: true, ops }
}

impl PointToPoint for NcclBackend {
    fn launch_p2p(&mut self, call: &Call, ops: &[PeerOp]) -> Result<(), Error> {
        let launch = launch(call, ops);
        let bufs = Buffers {
            send: &self.send,
            recv: &self.recv,
            scratch: &self.scratch,
            shift: 0,
        };
        let done = match self.comm.as_mut() {
            Some(comm) => comm
                .launch(&launch, calls::data_type(call.dtype), &bufs)
                .map_err(|e| e.to_string()),
            None => Err(ABORTED.to_string()),
        };
        done.or_else(|e| self.fail(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Collective, Layout};
    use crate::topology::Hierarchy;
    use crate::types::DType;

    #[test]
    fn a_pair_group_sends_from_the_send_buffer_and_receives_into_the_receive_buffer() {
        let call = Call {
            collective: Collective::SendRecv,
            hierarchy: Hierarchy::Flat,
            dtype: DType::Float,
            op: None,
            shape: Collective::SendRecv.spec().shape(1024, 4),
            at: Layout::new(4, 1, 0),
            group: None,
        };
        let l = launch(&call, &[PeerOp::Send(3), PeerOp::Recv(3)]);
        assert!(l.grouped);
        assert_eq!(
            l.ops,
            vec![
                Op::Send {
                    send: At {
                        buf: Buf::Send,
                        offset: 0
                    },
                    count: 1024,
                    peer: 3
                },
                Op::Recv {
                    recv: At {
                        buf: Buf::Recv,
                        offset: 0
                    },
                    count: 1024,
                    peer: 3
                },
            ]
        );
        assert_eq!(launch(&call, &[PeerOp::Recv(0)]).ops.len(), 1);
    }
}
