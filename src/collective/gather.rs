//! gather: the root ends with the concatenation of all ranks' inputs; other
//! ranks have no output. Size is the root's full buffer (n x per-rank input);
//! count is the per-rank elements; busbw factor (n-1)/n.
//! In-place: each rank's input sits at its own block of the root-sized buffer.

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct Gather;

impl CollectiveSpec for Gather {
    fn name(&self) -> &'static str {
        "gather"
    }

    fn has_root(&self) -> bool {
        true
    }

    fn shape(&self, count: usize, nranks: usize) -> Shape {
        Shape::gathered(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        spread_factor(nranks)
    }

    fn output_len(&self, shape: &Shape, at: &Layout) -> usize {
        if at.rank == at.root { shape.recv } else { 0 }
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, _at: &Layout, i: usize) -> u64 {
        pattern.input(i / shape.count, i % shape.count)
    }
}
