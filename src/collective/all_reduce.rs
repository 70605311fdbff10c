//! all_reduce: every rank ends with the reduction of all ranks' buffers.
//! Size is the buffer; count is its elements; busbw factor 2(n-1)/n, since a
//! bandwidth-optimal all-reduce is a reduce-scatter plus an all-gather, each
//! moving (n-1)/n of the buffer through every rank's link.
//! In-place: the output overwrites the input buffer.

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct AllReduce;

impl CollectiveSpec for AllReduce {
    fn name(&self) -> &'static str {
        "all_reduce"
    }

    fn is_reduction(&self) -> bool {
        true
    }

    fn shape(&self, count: usize, _nranks: usize) -> Shape {
        Shape::whole(count)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        2.0 * spread_factor(nranks)
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, _shape: &Shape, _at: &Layout, i: usize) -> u64 {
        pattern.reduced(i)
    }
}
