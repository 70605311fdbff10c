//! Where a rank's input goes and where its output lies in its two buffers
//! (`send`, `recv`), per collective and placement: the one definition of
//! in-place layouts, by the convention of the library that runs the call.
//!
//! Out of place, the input is at the start of `send` and the output at the
//! start of `recv`. In place, both are in `recv`:
//! - NCCL's (and nccl-tests' `sendInplaceOffset`/`recvInplaceOffset`), which
//!   the nccl and memory backends follow: all_gather's and gather's input
//!   at block `rank` of the output (NCCL's in-place condition `sendbuff ==
//!   recvbuff + rank*count`), reduce_scatter's and scatter's output at
//!   block `rank` of the input, every other collective at the start;
//! - MPI's (MPI_IN_PLACE), which the mpi backend follows: the same, but
//!   reduce_scatter puts a rank's block at the start of the buffer, and out
//!   of place the broadcast root's output is its input (MPI_Bcast has one
//!   buffer).
//!
//! Lengths are `CollectiveSpec::input_len` and `output_len` (0 where a
//! rank has no input or output, such as non-roots of scatter and gather).

use std::ops::Range;

use super::{Collective, Layout, Shape};
use crate::types::Placement;

/// Whose in-place layout a backend follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Convention {
    Nccl,
    Mpi,
}

/// One of a rank's two buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
}

/// Where this rank's input goes and where its output is, in elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Regions {
    pub input: (Buf, Range<usize>),
    pub output: (Buf, Range<usize>),
}

impl Convention {
    /// The regions of `collective` of `shape` on `at` in `placement`.
    pub fn regions(self, collective: Collective, shape: &Shape, at: &Layout, placement: Placement) -> Regions {
        use Collective::*;
        let spec = collective.spec();
        let input = 0..spec.input_len(shape, at);
        let output = 0..spec.output_len(shape, at);
        let block = at.rank * shape.count..(at.rank + 1) * shape.count;
        match placement {
            Placement::OutOfPlace => {
                let root_bcast = collective == Broadcast && at.rank == at.root;
                let out = if self == Convention::Mpi && root_bcast {
                    Buf::Send
                } else {
                    Buf::Recv
                };
                Regions {
                    input: (Buf::Send, input),
                    output: (out, output),
                }
            }
            Placement::InPlace => {
                let (input, output) = match collective {
                    AllGather | Gather => (block, output),
                    ReduceScatter if self == Convention::Nccl => (input, block),
                    Scatter => (input, block),
                    _ => (input, output),
                };
                Regions {
                    input: (Buf::Recv, input),
                    output: (Buf::Recv, output),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 12 elements at 3 ranks, root 1.
    fn regions(convention: Convention, c: Collective, rank: usize, placement: Placement) -> Regions {
        let at = Layout::new(3, rank, 1);
        convention.regions(c, &c.spec().shape(12, 3), &at, placement)
    }

    #[test]
    fn nccl_puts_outputs_where_nccl_writes_them() {
        let reg = |c, rank, placement| regions(Convention::Nccl, c, rank, placement);
        // out of place, the broadcast root's output is its recv buffer too
        assert_eq!(
            reg(Collective::Broadcast, 1, Placement::OutOfPlace),
            Regions {
                input: (Buf::Send, 0..12),
                output: (Buf::Recv, 0..12)
            }
        );
        assert_eq!(
            reg(Collective::ReduceScatter, 2, Placement::InPlace),
            Regions {
                input: (Buf::Recv, 0..12),
                output: (Buf::Recv, 8..12)
            }
        );
        assert_eq!(
            reg(Collective::AllGather, 2, Placement::InPlace),
            Regions {
                input: (Buf::Recv, 8..12),
                output: (Buf::Recv, 0..12)
            }
        );
        assert_eq!(
            reg(Collective::Scatter, 0, Placement::InPlace),
            Regions {
                input: (Buf::Recv, 0..0),
                output: (Buf::Recv, 0..4)
            }
        );
        assert_eq!(
            reg(Collective::Gather, 0, Placement::InPlace),
            Regions {
                input: (Buf::Recv, 0..4),
                output: (Buf::Recv, 0..0)
            }
        );
    }

    #[test]
    fn the_conventions_differ_only_where_mpi_in_place_does() {
        for c in Collective::ALL {
            for rank in 0..3 {
                for placement in Placement::BOTH {
                    let (nccl, mpi) = (
                        regions(Convention::Nccl, c, rank, placement),
                        regions(Convention::Mpi, c, rank, placement),
                    );
                    let differs = match placement {
                        Placement::OutOfPlace => c == Collective::Broadcast && rank == 1,
                        // rank 0's block is the start of the buffer
                        Placement::InPlace => c == Collective::ReduceScatter && rank != 0,
                    };
                    assert_eq!(nccl != mpi, differs, "{c} rank {rank} {placement}");
                }
            }
        }
        let mpi_rs = regions(Convention::Mpi, Collective::ReduceScatter, 2, Placement::InPlace);
        assert_eq!(mpi_rs.output, (Buf::Recv, 0..4));
    }
}
