//! all_gather: every rank ends with the concatenation of all ranks' inputs.
//! Size is the full output (n x per-rank input); count is the per-rank input
//! elements; busbw factor (n-1)/n: each rank receives all blocks but its own.
//! In-place: each rank's input sits at its own block of the output buffer.

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct AllGather;

impl CollectiveSpec for AllGather {
    fn name(&self) -> &'static str {
        "all_gather"
    }

    fn shape(&self, count: usize, nranks: usize) -> Shape {
        Shape::gathered(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        spread_factor(nranks)
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, _at: &Layout, i: usize) -> u64 {
        pattern.input(i / shape.count, i % shape.count)
    }
}
