//! The MPI data plane: host buffers and MPI's own collectives (rsmpi), on a
//! communicator of its own.
//!
//! Calls: MPI_Allreduce, MPI_Allgather, MPI_Reduce_scatter_block, MPI_Bcast,
//! MPI_Reduce, MPI_Alltoall, MPI_Alltoallv, MPI_Gather, MPI_Scatter,
//! MPI_Sendrecv. MPI is
//! synchronous from the caller's view, so `launch` runs the operation and
//! `wait` has nothing to wait for.
//!
//! Buffers: `send` holds one rank's input; `recv` holds the output and is
//! large enough for either (`max(send, recv)` elements) because the
//! in-place variants use it alone. What in-place means, per collective,
//! follows MPI's MPI_IN_PLACE rules (see `regions`). Hierarchical
//! all-reduce lives in `hierarchical`; sends and receives between chosen
//! ranks (`PointToPoint`) in `p2p`; calls rsmpi lacks, in `raw`.

mod hierarchical;
mod p2p;
mod raw;

use std::ops::Range;

use mpi::collective::SystemOperation;
use mpi::datatype::Equivalence;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

use super::{
    Backend, Call, Identity, LaunchExtras, PhaseTimes, PointToPoint, SubGroup, SubGroups, TransportObserver,
    TransportQuery, refusals,
};
use crate::buffer::{Element, HostBuffer};
use crate::collective::{Buf, Collective, Convention, Peers, Regions};
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::observe::Observed;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{BackendKind, DType, Placement, ReduceOp};
use crate::world::mpi::{MpiWorld, mpi_library_version};
use hierarchical::SubComms;

pub struct MpiBackend {
    comm: SimpleCommunicator,
    send: HostBuffer,
    recv: HostBuffer,
    /// The slice of the rs-ar-ag all-reduce.
    scratch: HostBuffer,
    nodes: Nodes,
    time_phases: bool,
    /// Built at the first hierarchical point (a collective call, reached by
    /// every rank at the same point of the plan), then kept for the run.
    sub: Option<SubComms>,
    /// Bytes of each buffer when operations rotate through them (0: off).
    rotation_bytes: u64,
    /// Positions the current point rotates through (1: it stays put).
    rotation_steps: usize,
    /// A workload's sub-communicators (`SubGroups`), which calls name.
    /// A workload's groups (`SubGroups`); `None` once freed.
    groups: Vec<Option<SimpleCommunicator>>,
}

/// MPI_IN_PLACE's layout (`collective::regions`; one buffer, `recv`, in
/// place): a rank's input at its own block for all_gather and gather, the
/// reduce_scatter input the whole buffer with a rank's block at its start,
/// the scatter root's input the buffer with its block in place, the
/// received data replacing the sent for sendrecv (MPI_Sendrecv_replace).
/// Out of place, the broadcast root's one MPI_Bcast buffer is its input.
fn regions(call: &Call, placement: Placement) -> Regions {
    Convention::Mpi.regions(call.collective, &call.shape, &call.at, placement)
}

impl MpiBackend {
    /// `nodes` decides the sub-communicators of hierarchical modes;
    /// `time_phases` makes them time each phase.
    pub fn new(world: &MpiWorld, nodes: Nodes, time_phases: bool) -> Result<MpiBackend, Error> {
        Ok(MpiBackend {
            comm: world.data_communicator(),
            send: HostBuffer::new(DType::Float, 0)?,
            recv: HostBuffer::new(DType::Float, 0)?,
            scratch: HostBuffer::new(DType::Float, 0)?,
            nodes,
            time_phases,
            sub: None,
            rotation_bytes: 0,
            rotation_steps: 1,
            groups: Vec::new(),
        })
    }

    fn buf(&mut self, which: Buf) -> &mut HostBuffer {
        match which {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
        }
    }

    /// Elements both buffers span for `call`: inputs, outputs and in-place
    /// layouts all fit in it.
    fn span(call: &Call) -> usize {
        call.shape.send.max(call.shape.recv)
    }

    /// One operation. Never inlined into `launch`'s loop: inlined, the
    /// loop's invariants were hoisted into a long prologue that every
    /// launch of one operation paid (docs/overhead.md).
    #[inline(never)]
    fn run<T: Element + Equivalence>(&mut self, call: &Call, placement: Placement, iter: u64) -> Result<(), Error> {
        let op = call.op.map(system_op).transpose()?;
        let at = super::rotation_offset(Self::span(call), self.rotation_steps, iter);
        if call.collective == Collective::AllReduce && !call.hierarchy.is_flat() {
            return self.run_hierarchical::<T>(call, placement, op, at);
        }
        let count = call.shape.count;
        // Only rooted collectives make a root: rsmpi asks MPI for the
        // communicator size each time one is made.
        let comm = match call.group {
            Some(SubGroup(g)) => self.groups.get(g).and_then(Option::as_ref).ok_or_else(|| {
                Error::runtime(format!("internal error: no workload group {g} (never made, or freed)"))
            })?,
            None => &self.comm,
        };
        let shift = call.at.shift;
        let root = || comm.process_at_rank(call.at.root as i32);
        if placement == Placement::OutOfPlace
            && call.collective == Collective::Broadcast
            && call.at.rank == call.at.root
        {
            // MPI_Bcast has one buffer: at the root, its input.
            root().broadcast_into(&mut self.send.typed_mut::<T>()[at..at + count]);
            return Ok(());
        }
        let send = &self.send.typed::<T>()[at..at + call.shape.send];
        let recv = &mut self.recv.typed_mut::<T>()[at..at + Self::span(call)];
        let need_op = || op.ok_or_else(|| Error::runtime(format!("{} needs a reduction operation", call.collective)));
        match placement {
            Placement::OutOfPlace => out_of_place(comm, call, shift, send, recv, need_op),
            Placement::InPlace => in_place(comm, call, shift, recv, need_op),
        }
    }

    /// A hierarchical all-reduce over the sub-communicators.
    fn run_hierarchical<T: Element + Equivalence>(
        &mut self,
        call: &Call,
        placement: Placement,
        op: Option<SystemOperation>,
        at: usize,
    ) -> Result<(), Error> {
        let op = op.ok_or_else(|| Error::runtime("all_reduce needs a reduction operation"))?;
        let sub = self
            .sub
            .as_mut()
            .ok_or_else(|| Error::runtime("internal error: no sub-communicators"))?;
        let count = call.shape.count;
        // only rs-ar-ag has a slice; the scratch buffer may hold another type
        let scratch: &mut [T] = match call.hierarchy {
            Hierarchy::RsArAg => self.scratch.typed_mut::<T>(),
            _ => &mut [],
        };
        sub.all_reduce::<T>(
            call.hierarchy,
            placement,
            op,
            &self.send.typed::<T>()[at..at + count],
            &mut self.recv.typed_mut::<T>()[at..at + count],
            scratch,
        )
    }
}

/// One out-of-place collective: input in `send`, output at the start of
/// `recv`.
fn out_of_place<T: Element + Equivalence>(
    comm: &SimpleCommunicator,
    call: &Call,
    shift: usize,
    send: &[T],
    recv: &mut [T],
    need_op: impl Fn() -> Result<SystemOperation, Error>,
) -> Result<(), Error> {
    let (n, count, rank) = (call.at.nranks, call.shape.count, call.at.rank);
    let root = || comm.process_at_rank(call.at.root as i32);
    match call.collective {
        Collective::AllReduce => comm.all_reduce_into(send, &mut recv[..count], need_op()?),
        Collective::AllGather => comm.all_gather_into(send, &mut recv[..count * n]),
        Collective::ReduceScatter => comm.reduce_scatter_block_into(send, &mut recv[..count], need_op()?),
        Collective::Broadcast => root().broadcast_into(&mut recv[..count]),
        Collective::Reduce if rank == call.at.root => root().reduce_into_root(send, &mut recv[..count], need_op()?),
        Collective::Reduce => root().reduce_into(send, need_op()?),
        Collective::AllToAll => comm.all_to_all_into(send, &mut recv[..count * n]),
        Collective::AllToAllV => raw::all_to_all_v(comm, send, recv, &alltoallv_blocks(call)?)?,
        Collective::Gather if rank == call.at.root => root().gather_into_root(send, &mut recv[..count * n]),
        Collective::Gather => root().gather_into(send),
        Collective::Scatter if rank == call.at.root => root().scatter_into_root(send, &mut recv[..count]),
        Collective::Scatter => root().scatter_into(&mut recv[..count]),
        Collective::SendRecv => {
            let (next, prev) = ring_peers(rank, n, shift);
            mpi::point_to_point::send_receive_into(
                send,
                &comm.process_at_rank(next),
                &mut recv[..count],
                &comm.process_at_rank(prev),
            );
        }
    }
    Ok(())
}

/// One in-place collective on `recv` alone (see `regions`).
fn in_place<T: Element + Equivalence>(
    comm: &SimpleCommunicator,
    call: &Call,
    shift: usize,
    recv: &mut [T],
    need_op: impl Fn() -> Result<SystemOperation, Error>,
) -> Result<(), Error> {
    let (n, count, rank) = (call.at.nranks, call.shape.count, call.at.rank);
    let root = || comm.process_at_rank(call.at.root as i32);
    match call.collective {
        Collective::AllReduce => raw::all_reduce(comm, &mut recv[..count], need_op()?)?,
        Collective::AllGather => raw::all_gather(comm, &mut recv[..count * n], count)?,
        Collective::ReduceScatter => raw::reduce_scatter_block(comm, &mut recv[..count * n], count, need_op()?)?,
        Collective::Broadcast => root().broadcast_into(&mut recv[..count]),
        Collective::Reduce if rank == call.at.root => {
            raw::reduce_at_root(comm, call.at.root, &mut recv[..count], need_op()?)?
        }
        Collective::Reduce => root().reduce_into(&recv[..count], need_op()?),
        Collective::AllToAll => raw::all_to_all(comm, &mut recv[..count * n], count)?,
        Collective::AllToAllV => raw::all_to_all_v_one_buffer(comm, recv, &alltoallv_blocks(call)?)?,
        Collective::Gather if rank == call.at.root => {
            raw::gather_at_root(comm, call.at.root, &mut recv[..count * n], count)?
        }
        Collective::Gather => root().gather_into(&recv[rank * count..(rank + 1) * count]),
        Collective::Scatter if rank == call.at.root => {
            raw::scatter_at_root(comm, call.at.root, &mut recv[..count * n], count)?
        }
        Collective::Scatter => root().scatter_into(&mut recv[rank * count..(rank + 1) * count]),
        Collective::SendRecv => {
            let (next, prev) = ring_peers(rank, n, shift);
            mpi::point_to_point::send_receive_replace_into(
                &mut recv[..count],
                &comm.process_at_rank(next),
                &comm.process_at_rank(prev),
            );
        }
    }
    Ok(())
}

/// This rank's MPI_Alltoallv blocks of `call`: back to back in peer order
/// in each buffer (`collective::alltoallv`).
fn alltoallv_blocks(call: &Call) -> Result<raw::Blocks, Error> {
    let (n, rank) = (call.at.nranks, call.at.rank);
    let peers = Peers::of(&call.shape, n);
    let send: Vec<(usize, usize)> = (0..n)
        .map(|p| (peers.count(rank, p), peers.send_offset(rank, p)))
        .collect();
    let recv: Vec<(usize, usize)> = (0..n)
        .map(|p| (peers.count(p, rank), peers.recv_offset(rank, p)))
        .collect();
    raw::Blocks::new(&send, &recv)
}

/// (send to, receive from) in the sendrecv ring, `shift` places apart.
fn ring_peers(rank: usize, n: usize, shift: usize) -> (i32, i32) {
    let k = shift % n.max(1);
    (((rank + k) % n) as i32, ((rank + n - k) % n) as i32)
}

fn system_op(op: ReduceOp) -> Result<SystemOperation, Error> {
    match op {
        ReduceOp::Sum => Ok(SystemOperation::sum()),
        ReduceOp::Prod => Ok(SystemOperation::product()),
        ReduceOp::Min => Ok(SystemOperation::min()),
        ReduceOp::Max => Ok(SystemOperation::max()),
        ReduceOp::Avg => Err(Error::usage("the mpi backend has no avg operation")),
    }
}

/// Calls `$body` with `$T` bound to the Rust type of `$dtype`, for the
/// types MPI has.
macro_rules! with_mpi_type {
    ($dtype:expr, $T:ident => $body:expr, $otherwise:expr) => {
        crate::with_listed_type!($dtype, $T => $body;
            Int8 => i8, Uint8 => u8, Int32 => i32, Uint32 => u32,
            Int64 => i64, Uint64 => u64, Float => f32, Double => f64;
            Half | Bfloat16 => $otherwise)
    };
}

impl MpiBackend {
    fn check_dtype(dtype: DType) -> Result<(), String> {
        with_mpi_type!(dtype, _T => Ok(()), Err(format!(
            "the mpi backend cannot run dtype {dtype}: MPI has no standard 16-bit floating type (use the nccl backend)"
        )))
    }

    fn check_op(op: ReduceOp) -> Result<(), String> {
        match op {
            ReduceOp::Avg => {
                Err("the mpi backend cannot run op avg: MPI has no averaging reduction (use the nccl backend)".into())
            }
            _ => Ok(()),
        }
    }
}

/// What the mpi backend runs, the same on every machine (no instance
/// needed: `suite` checks its launches against it before starting one).
pub fn capabilities(extras: &LaunchExtras) -> Capabilities {
    Capabilities {
        backend: BackendKind::Mpi.name(),
        // MPI counts are C ints (rsmpi panics beyond them).
        max_elements: i32::MAX as usize,
        refused_dtypes: refusals(&DType::ALL, MpiBackend::check_dtype),
        refused_ops: refusals(&ReduceOp::ALL, MpiBackend::check_op),
        refused_hierarchies: Vec::new(),
        refused_extras: extras.refuse_all(BackendKind::Mpi.name()).err(),
        // one buffer as MPI_Alltoallv's input and output races (raw.rs)
        unchecked: vec![(Collective::AllToAllV, Placement::InPlace)],
    }
}

impl Backend for MpiBackend {
    fn identity(&self) -> Identity {
        Identity {
            kind: BackendKind::Mpi,
            version: mpi_library_version(),
            notes: Vec::new(),
        }
    }

    fn capabilities(&self, extras: &LaunchExtras) -> Capabilities {
        capabilities(extras)
    }

    fn prepare(&mut self, call: &Call) -> Result<(), Error> {
        let shape = call.shape;
        if call.hierarchy != Hierarchy::Flat {
            if self.sub.is_none() {
                self.sub = Some(SubComms::new(&self.comm, &self.nodes, self.time_phases)?);
            }
            if let Some(sub) = &self.sub
                && call.hierarchy == Hierarchy::RsArAg
            {
                self.scratch.reshape(call.dtype, sub.slice_capacity(shape.count))?;
            }
        }
        // With rotation both buffers keep the run's largest size; without,
        // they fit the point. The receive buffer also holds in-place inputs.
        let rotated = self.rotation_bytes as usize / call.dtype.size_bytes();
        let len = Self::span(call).max(rotated);
        self.send.reshape(call.dtype, len)?;
        self.recv.reshape(call.dtype, len)?;
        self.rotation_steps = super::rotation_steps(Self::span(call), len);
        Ok(())
    }

    fn reserve(&mut self, reservation: &Reservation) -> Result<(), Error> {
        // Host buffers grow per point (up to the plan's peak, which the
        // memory check counted); with rotation they hold the peak at once.
        self.rotation_bytes = if reservation.rotate { reservation.recv_bytes } else { 0 };
        Ok(())
    }

    fn load_input(
        &mut self,
        call: &Call,
        placement: Placement,
        value: &(dyn Fn(usize) -> u64 + Sync),
    ) -> Result<(), Error> {
        let r = regions(call, placement);
        self.buf(r.output.0).poison();
        self.buf(r.input.0).fill(r.input.1, value);
        Ok(())
    }

    /// MPI has no groups: `ops` operations run one after another.
    fn launch(&mut self, call: &Call, placement: Placement, first_iter: u64, ops: u32) -> Result<(), Error> {
        for iter in first_iter..first_iter + u64::from(ops) {
            with_mpi_type!(call.dtype, T => self.run::<T>(call, placement, iter), Err(Error::usage(
                MpiBackend::check_dtype(call.dtype).err().unwrap_or_default()
            )))?;
        }
        Ok(())
    }

    fn wait(&mut self) -> Result<(), Error> {
        Ok(())
    }

    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error> {
        let (which, range) = regions(call, placement).output;
        Ok((self.buf(which), range))
    }

    fn transport(&self) -> Option<&dyn TransportObserver> {
        Some(self)
    }

    fn phase_times(&mut self) -> Option<&mut dyn PhaseTimes> {
        if self.time_phases { Some(self) } else { None }
    }

    fn sub_groups(&mut self) -> Option<&mut dyn SubGroups> {
        Some(self)
    }

    fn point_to_point(&mut self) -> Option<&mut dyn PointToPoint> {
        Some(self)
    }
}

/// A workload's groups: MPI_Comm_split of the backend's communicator.
impl SubGroups for MpiBackend {
    fn split(&mut self, color: usize, key: usize) -> Result<SubGroup, Error> {
        let color =
            i32::try_from(color).map_err(|_| Error::runtime(format!("group colour {color} exceeds MPI's int")))?;
        let key = i32::try_from(key).map_err(|_| Error::runtime(format!("group key {key} exceeds MPI's int")))?;
        let comm = self
            .comm
            .split_by_color_with_key(mpi::topology::Color::with_value(color), key)
            .ok_or_else(|| Error::runtime("MPI_Comm_split gave no communicator for a workload group"))?;
        self.groups.push(Some(comm));
        Ok(SubGroup(self.groups.len() - 1))
    }

    /// MPI_Comm_free (rsmpi frees a communicator it drops).
    fn free(&mut self, SubGroup(g): SubGroup) -> Result<(), Error> {
        match self.groups.get_mut(g).and_then(Option::take) {
            Some(comm) => {
                drop(comm);
                Ok(())
            }
            None => Err(Error::runtime(format!("internal error: no workload group {g} to free"))),
        }
    }
}

impl TransportObserver for MpiBackend {
    /// Open MPI's PML and BTLs, from the control variables still valid
    /// after MPI_Init (`raw::control_variable_names`,
    /// `topology::observe::ompi`).
    fn observe_transport(&self, query: &TransportQuery) -> Observed {
        Observed::from_mpi(query.profile, raw::control_variable_names())
    }
}

/// Host timers around the hierarchical phases (`hierarchical`).
impl PhaseTimes for MpiBackend {
    fn begin_phases(&mut self, _ops: u64) -> Result<(), Error> {
        // Nothing to make room for: only the sums so far are dropped.
        self.take_phase_times().map(|_| ())
    }

    fn take_phase_times(&mut self) -> Result<[f64; 3], Error> {
        Ok(self
            .sub
            .as_mut()
            .and_then(SubComms::take_phase_times)
            .unwrap_or([0.0; 3]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Layout;

    fn call(c: Collective, rank: usize, root: usize) -> Call {
        let n = 3;
        Call {
            collective: c,
            hierarchy: Hierarchy::Flat,
            dtype: DType::Float,
            op: c.spec().is_reduction().then_some(ReduceOp::Sum),
            shape: c.spec().shape(12, n),
            at: Layout::new(n, rank, root),
            group: None,
        }
    }

    /// A collective, a rank and a root, and the input and output regions
    /// expected there.
    type Expected = (Collective, usize, usize, (Buf, Range<usize>), (Buf, Range<usize>));

    /// Each case has its regions at 3 ranks.
    fn check_regions(placement: Placement, cases: &[Expected]) {
        for (c, rank, root, input, output) in cases.iter().cloned() {
            let r = regions(&call(c, rank, root), placement);
            assert_eq!(r, Regions { input, output }, "{c} rank {rank} root {root}");
        }
    }

    #[test]
    fn out_of_place_reads_input_from_send_and_output_from_recv() {
        check_regions(
            Placement::OutOfPlace,
            &[
                (Collective::AllGather, 1, 0, (Buf::Send, 0..4), (Buf::Recv, 0..12)),
                (Collective::Reduce, 2, 0, (Buf::Send, 0..12), (Buf::Recv, 0..0)),
                (Collective::Broadcast, 0, 0, (Buf::Send, 0..12), (Buf::Send, 0..12)),
                (Collective::Broadcast, 1, 0, (Buf::Send, 0..0), (Buf::Recv, 0..12)),
            ],
        );
    }

    #[test]
    fn in_place_follows_mpi_in_place_rules() {
        check_regions(
            Placement::InPlace,
            &[
                (Collective::AllGather, 2, 0, (Buf::Recv, 8..12), (Buf::Recv, 0..12)),
                (Collective::ReduceScatter, 2, 0, (Buf::Recv, 0..12), (Buf::Recv, 0..4)),
                (Collective::Gather, 1, 1, (Buf::Recv, 4..8), (Buf::Recv, 0..12)),
                (Collective::Gather, 2, 1, (Buf::Recv, 8..12), (Buf::Recv, 0..0)),
                (Collective::Scatter, 1, 1, (Buf::Recv, 0..12), (Buf::Recv, 4..8)),
                (Collective::Scatter, 2, 1, (Buf::Recv, 0..0), (Buf::Recv, 8..12)),
                (Collective::AllToAll, 0, 0, (Buf::Recv, 0..12), (Buf::Recv, 0..12)),
            ],
        );
    }

    #[test]
    fn ring_peers_wrap_around() {
        assert_eq!(ring_peers(0, 3, 1), (1, 2));
        assert_eq!(ring_peers(2, 3, 1), (0, 1));
        assert_eq!(ring_peers(0, 1, 1), (0, 0));
        assert_eq!(ring_peers(0, 4, 2), (2, 2));
        assert_eq!(ring_peers(1, 4, 3), (0, 2));
    }
}
