//! reduce_scatter: rank r ends with block r of the reduction of all ranks'
//! inputs. Size is the full input (n x per-rank output); count is the
//! per-rank output elements; busbw factor (n-1)/n.
//! In-place: the input buffer holds the full input; where the output block
//! lands is the backend's convention (NCCL: block r of the buffer; MPI's
//! MPI_Reduce_scatter_block with MPI_IN_PLACE: the start of the buffer).

use super::{Described, Layout, Pattern, Shape, spread_factor};

pub(super) const SPEC: Described = Described {
    aliases: &["reducescatterblock"],
    reduction: true,
    ..Described::new("reduce_scatter", Shape::scattered, spread_factor, expected)
};

fn expected(pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
    pattern.reduced(at.rank * shape.count + i)
}
