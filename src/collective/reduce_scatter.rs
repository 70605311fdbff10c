//! reduce_scatter: rank r ends with block r of the reduction of all ranks'
//! inputs. Size is the full input (n x per-rank output); count is the
//! per-rank output elements; busbw factor (n-1)/n.
//! In-place: the input buffer holds the full input; where the output block
//! lands is the backend's convention (NCCL: block r of the buffer; MPI's
//! MPI_Reduce_scatter_block with MPI_IN_PLACE: the start of the buffer).

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct ReduceScatter;

impl CollectiveSpec for ReduceScatter {
    fn name(&self) -> &'static str {
        "reduce_scatter"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["reducescatterblock"]
    }

    fn is_reduction(&self) -> bool {
        true
    }

    fn shape(&self, count: usize, nranks: usize) -> Shape {
        Shape::scattered(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        spread_factor(nranks)
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
        pattern.reduced(at.rank * shape.count + i)
    }
}
