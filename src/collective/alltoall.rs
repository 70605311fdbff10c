//! alltoall: block p of rank r's input goes to block r of rank p's output.
//! Size is one rank's whole buffer (n blocks); count is the per-peer block
//! elements; busbw factor (n-1)/n: all blocks but one's own cross a link.
//! In-place: the input buffer is overwritten by the output.

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct AllToAll;

impl CollectiveSpec for AllToAll {
    fn name(&self) -> &'static str {
        "alltoall"
    }

    fn shape(&self, count: usize, nranks: usize) -> Shape {
        Shape::exchanged(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        spread_factor(nranks)
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
        let (from, j) = (i / shape.count, i % shape.count);
        pattern.input(from, at.rank * shape.count + j)
    }
}
