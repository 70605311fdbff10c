//! reduce: the root ends with the reduction of all ranks' buffers; other
//! ranks have no output. Size is the buffer; count its elements; busbw
//! factor 1.
//! In-place: the root's input buffer is also its output buffer.

use super::{CollectiveSpec, Layout, Pattern, Shape};

pub struct Reduce;

impl CollectiveSpec for Reduce {
    fn name(&self) -> &'static str {
        "reduce"
    }

    fn is_reduction(&self) -> bool {
        true
    }

    fn has_root(&self) -> bool {
        true
    }

    fn shape(&self, count: usize, _nranks: usize) -> Shape {
        Shape::whole(count)
    }

    fn bus_factor(&self, _nranks: usize) -> f64 {
        1.0
    }

    fn output_len(&self, shape: &Shape, at: &Layout) -> usize {
        if at.rank == at.root { shape.recv } else { 0 }
    }

    fn expected(&self, pattern: &Pattern, _shape: &Shape, _at: &Layout, i: usize) -> u64 {
        pattern.reduced(i)
    }
}
