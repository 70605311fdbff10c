//! Sends and receives between chosen ranks on the backend's communicator
//! (`PointToPoint`, for `collbench links`): the call's input region of
//! `send` goes to each peer sent to, each peer received from writes the
//! output region of `recv`, as raw bytes (no type conversion: what is sent
//! is what arrives). A group's operations are nonblocking (MPI_Isend,
//! MPI_Irecv) and waited for together, so a send and a receive with one
//! peer never deadlock; MPI being synchronous from the caller's view, the
//! group has completed when `launch_p2p` returns.

use mpi::request::{Request, scope};
use mpi::traits::*;

use super::{MpiBackend, regions};
use crate::backend::{Call, PeerOp, PointToPoint};
use crate::error::Error;
use crate::types::Placement;

/// Which byte ranges of the two buffers a call's sends and receives use.
fn byte_ranges(call: &Call) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let r = regions(call, Placement::OutOfPlace);
    let e = call.dtype.size_bytes();
    (
        r.input.1.start * e..r.input.1.end * e,
        r.output.1.start * e..r.output.1.end * e,
    )
}

impl PointToPoint for MpiBackend {
    fn launch_p2p(&mut self, call: &Call, ops: &[PeerOp]) -> Result<(), Error> {
        let size = self.comm.size() as usize;
        if let Some(bad) = ops.iter().find(|op| match op {
            PeerOp::Send(p) | PeerOp::Recv(p) => *p >= size,
        }) {
            return Err(Error::runtime(format!(
                "internal error: {bad:?} names a rank beyond the {size} of the communicator"
            )));
        }
        let receives = ops.iter().filter(|op| matches!(op, PeerOp::Recv(_))).count();
        if receives > 1 {
            return Err(Error::runtime(
                "internal error: a point-to-point group of the mpi backend receives into one buffer at most once",
            ));
        }
        let (input, output) = byte_ranges(call);
        let comm = &self.comm;
        let send = &self.send.bytes()[input];
        let mut recv = Some(&mut self.recv.bytes_mut()[output]);
        scope(|sc| {
            let mut pending: Vec<Request<'_, [u8], _>> = Vec::with_capacity(ops.len());
            let mut received = None;
            for op in ops {
                match *op {
                    PeerOp::Send(p) => pending.push(comm.process_at_rank(p as i32).immediate_send(sc, send)),
                    PeerOp::Recv(p) => {
                        if let Some(buf) = recv.take() {
                            received = Some(comm.process_at_rank(p as i32).immediate_receive_into(sc, buf));
                        }
                    }
                }
            }
            for r in pending {
                r.wait();
            }
            if let Some(r) = received {
                r.wait();
            }
        });
        Ok(())
    }
}
