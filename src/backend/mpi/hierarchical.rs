//! Hierarchical all-reduce on MPI: sub-communicators built once per run,
//! and the two algorithms of docs/hierarchy.md composed from MPI collectives.
//!
//! - rs-ar-ag: MPI_Reduce_scatter inside the node (slices differ by at most
//!   one element, so no tail is dropped), MPI_Allreduce of each slice among
//!   the ranks with the same local rank, MPI_Allgatherv inside the node.
//! - reduce-bcast: MPI_Reduce to the node leader (local rank 0),
//!   MPI_Allreduce among leaders, MPI_Bcast inside the node.
//!
//! A one-rank communicator makes its phase a local copy (one node: intra
//! only; one rank per node: inter only). Phase times are measured only when
//! asked for, so the default timed loop holds nothing but MPI calls.

use std::time::Instant;

use mpi::collective::SystemOperation;
use mpi::datatype::{Equivalence, PartitionMut};
use mpi::topology::{Color, Communicator, SimpleCommunicator};
use mpi::traits::*;

use super::raw;
use crate::buffer::Element;
use crate::error::Error;
use crate::topology::{Hierarchy, Nodes, slices};
use crate::types::Placement;

/// The sub-communicators of one rank.
pub struct SubComms {
    /// The ranks of this rank's node, ordered by rank.
    intra: SimpleCommunicator,
    /// The ranks with this rank's local rank, one per node, ordered by node.
    inter: SimpleCommunicator,
    /// The node leaders (local rank 0), on leaders only.
    leaders: Option<SimpleCommunicator>,
    local_rank: usize,
    local_size: usize,
    /// Seconds per phase since the last `take_phase_times`, when timing.
    phase_s: Option<[f64; 3]>,
}

impl SubComms {
    /// Splits `comm` by node; collective over `comm`.
    pub fn new(comm: &SimpleCommunicator, nodes: &Nodes, time_phases: bool) -> Result<SubComms, Error> {
        let rank = comm.rank() as usize;
        let node = nodes.node_of_rank[rank];
        let local_rank = nodes.local_rank(rank);
        let split = |color: Color, key: usize, what: &str| {
            comm.split_by_color_with_key(color, key as i32)
                .ok_or_else(|| Error::runtime(format!("MPI_Comm_split gave no {what} communicator")))
        };
        let intra = split(Color::with_value(node as i32), rank, "intra-node")?;
        let inter = split(Color::with_value(local_rank as i32), node, "inter-node")?;
        let leader_color = if local_rank == 0 {
            Color::with_value(0)
        } else {
            Color::undefined()
        };
        let leaders = comm.split_by_color_with_key(leader_color, node as i32);
        Ok(SubComms {
            local_size: intra.size() as usize,
            intra,
            inter,
            leaders,
            local_rank,
            phase_s: time_phases.then_some([0.0; 3]),
        })
    }

    /// Elements of this rank's rs-ar-ag slice buffer for `count` elements.
    pub fn slice_capacity(&self, count: usize) -> usize {
        count.div_ceil(self.local_size.max(1))
    }

    pub fn take_phase_times(&mut self) -> Option<[f64; 3]> {
        let taken = self.phase_s?;
        self.phase_s = Some([0.0; 3]);
        Some(taken)
    }

    /// One hierarchical all-reduce of `recv.len()` elements: from `send`
    /// (or `recv` in place) into `recv`, with `scratch` for the slice.
    pub fn all_reduce<T: Element + Equivalence>(
        &mut self,
        mode: Hierarchy,
        placement: Placement,
        op: SystemOperation,
        send: &[T],
        recv: &mut [T],
        scratch: &mut [T],
    ) -> Result<(), Error> {
        let count = recv.len();
        let mut clock = PhaseClock::start(self.phase_s.is_some());
        match mode {
            Hierarchy::Flat => return Err(Error::runtime("internal error: flat all-reduce sent to the hierarchy")),
            Hierarchy::RsArAg => {
                let parts = slices(count, self.local_size);
                let counts: Vec<i32> = parts.iter().map(|&(_, len)| count_i32(len)).collect::<Result<_, _>>()?;
                let displs: Vec<i32> = parts.iter().map(|&(off, _)| count_i32(off)).collect::<Result<_, _>>()?;
                let mine = parts[self.local_rank].1;
                let slice = &mut scratch[..mine];
                match placement {
                    Placement::OutOfPlace => {
                        raw::reduce_scatter(&self.intra, send, slice, &counts, op)?;
                        clock.lap(0);
                        raw::all_reduce(&self.inter, slice, op)?;
                    }
                    Placement::InPlace => {
                        // MPI leaves this rank's reduced slice at the start of
                        // the buffer; the inter-node step moves it to scratch.
                        raw::reduce_scatter_in_place(&self.intra, recv, &counts, op)?;
                        clock.lap(0);
                        self.inter.all_reduce_into(&recv[..mine], slice, op);
                    }
                }
                clock.lap(1);
                let mut whole = PartitionMut::new(recv, &counts[..], &displs[..]);
                self.intra.all_gather_varcount_into(&*slice, &mut whole);
                clock.lap(2);
            }
            Hierarchy::ReduceBcast => {
                let leader = self.intra.process_at_rank(0);
                match (placement, self.local_rank == 0) {
                    (Placement::OutOfPlace, true) => leader.reduce_into_root(send, recv, op),
                    (Placement::OutOfPlace, false) => leader.reduce_into(send, op),
                    (Placement::InPlace, true) => raw::reduce_at_root(&self.intra, 0, recv, op)?,
                    (Placement::InPlace, false) => leader.reduce_into(&*recv, op),
                }
                clock.lap(0);
                if let Some(leaders) = &self.leaders {
                    raw::all_reduce(leaders, recv, op)?;
                }
                clock.lap(1);
                leader.broadcast_into(recv);
                clock.lap(2);
            }
        }
        if let Some(sums) = self.phase_s.as_mut() {
            for (sum, t) in sums.iter_mut().zip(clock.laps) {
                *sum += t;
            }
        }
        Ok(())
    }
}

fn count_i32(n: usize) -> Result<i32, Error> {
    i32::try_from(n).map_err(|_| Error::runtime(format!("{n} elements exceed MPI's count limit")))
}

/// Times consecutive phases when enabled; free otherwise.
struct PhaseClock {
    last: Option<Instant>,
    laps: [f64; 3],
}

impl PhaseClock {
    fn start(enabled: bool) -> PhaseClock {
        PhaseClock {
            last: enabled.then(Instant::now),
            laps: [0.0; 3],
        }
    }

    fn lap(&mut self, phase: usize) {
        if let Some(last) = self.last {
            let now = Instant::now();
            self.laps[phase] = (now - last).as_secs_f64();
            self.last = Some(now);
        }
    }
}
