//! broadcast: every rank ends with the root's buffer. Size is the buffer;
//! count its elements; busbw factor 1 (every rank receives the whole buffer
//! once, whatever the algorithm).
//! In-place: the root's input buffer is also its output buffer.

use super::{CollectiveSpec, Layout, Pattern, Shape};

pub struct Broadcast;

impl CollectiveSpec for Broadcast {
    fn name(&self) -> &'static str {
        "broadcast"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["bcast"]
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

    fn input_len(&self, shape: &Shape, at: &Layout) -> usize {
        if at.rank == at.root { shape.send } else { 0 }
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, _shape: &Shape, at: &Layout, i: usize) -> u64 {
        pattern.input(at.root, i)
    }
}
