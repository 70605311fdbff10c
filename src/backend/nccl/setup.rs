//! What a point needs before its launches: device buffers grown (and,
//! with `-R`, registered with every communicator: `registration`), the
//! hierarchical modes' sub-communicators and sendrecv's communicator, made
//! on first use.

use super::hierarchy::SubComms;
use super::registration::every_comm;
use super::sys::{self, Buf};
use super::{ABORTED, NcclBackend};
use crate::error::Error;

impl NcclBackend {
    /// A buffer of at least `bytes` (grown, never shrunk): the old one is
    /// deregistered and freed before the new one is allocated.
    fn ensure_buffer(&mut self, which: Buf, bytes: usize) -> Result<(), Error> {
        let current = match which {
            Buf::Send => &self.send,
            Buf::Recv => &self.recv,
            Buf::Scratch => &self.scratch,
        };
        if current.len_bytes() >= bytes {
            return Ok(());
        }
        // Every communicator forgets the old buffer before it is freed.
        let mut released = Ok(());
        for (_, comm) in every_comm(&mut self.comm, &mut self.p2p, &mut self.sub, &mut self.groups) {
            if let Err(e) = comm.deregister(current) {
                released = Err(e);
            }
        }
        released.or_else(|e| self.fail(e))?;
        let placeholder = self.device.alloc(0, None).map_err(|e| Error::runtime(e.to_string()))?;
        let slot = match which {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
            Buf::Scratch => &mut self.scratch,
        };
        // The old buffer is freed here, before the new allocation.
        *slot = placeholder;
        let nccl = self.mem_alloc.then_some(&self.library.api);
        let memory = self.device.alloc(bytes, nccl);
        let memory = memory.or_else(|e| self.fail(e))?;
        match which {
            Buf::Send => self.send = memory,
            Buf::Recv => self.recv = memory,
            Buf::Scratch => self.scratch = memory,
        }
        Ok(())
    }

    /// Device buffers of at least these sizes; with `-R`, the send and
    /// receive buffers registered once they have their final size.
    pub(super) fn ensure_device(
        &mut self,
        send_bytes: usize,
        recv_bytes: usize,
        scratch_bytes: usize,
    ) -> Result<(), Error> {
        // A graph of an earlier point may refer to the buffers (and NCCL may
        // have registered them for it): it goes before any of them does.
        self.device.release_graph();
        self.ensure_buffer(Buf::Send, send_bytes)?;
        self.ensure_buffer(Buf::Recv, recv_bytes)?;
        self.ensure_buffer(Buf::Scratch, scratch_bytes)?;
        self.register_buffers()
    }

    /// The sub-communicators, made once: every rank reaches its first
    /// hierarchical point at the same point of the plan.
    pub(super) fn connect_hierarchy(&mut self) -> Result<(), Error> {
        let Some(source) = self.sub_source.clone() else {
            return Err(Error::runtime(
                "internal error: a hierarchical point in a run set up without sub-communicators",
            ));
        };
        let bound = self.device.bind();
        bound.or_else(|e| self.fail(e))?;
        let made = match self.comm.as_ref() {
            Some(parent) => SubComms::new(parent, &self.library.api, &source, self.member),
            None => return Err(Error::runtime(ABORTED)),
        };
        self.sub = Some(made.or_else(|e| self.fail(e))?);
        self.register_buffers()
    }

    /// sendrecv's communicator (`p2p`), made once where NCCL has
    /// `maxP2pPeers` (2.30 and later) and ncclCommSplit: every rank reaches
    /// its first sendrecv point on the whole world at the same point of the
    /// plan. A call on a workload's group keeps that group's communicator.
    pub(super) fn connect_p2p(&mut self) -> Result<(), Error> {
        let version = self.library.version();
        if self.p2p.is_some() || version < sys::MAX_P2P_PEERS_SINCE || !self.library.optional().comm_split {
            return Ok(());
        }
        let bound = self.device.bind();
        bound.or_else(|e| self.fail(e))?;
        // nccl-tests' SendRecvInitCommConfig: a ring has two peers.
        let config = sys::RawConfig::for_version(version, Some(2));
        // one color, keyed by the rank (the intra group's key): the same ranks
        let rank = self.member.intra.key;
        let made = self.comm()?.split_with(0, rank, Some(config));
        let comm = made.or_else(|e| self.fail(format!("ncclCommSplit of sendrecv's communicator: {e}")))?;
        self.p2p = Some(comm);
        self.register_buffers()
    }
}
