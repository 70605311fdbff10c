//! scatter: rank r ends with block r of the root's input. Size is the root's
//! full buffer (n x per-rank output); count is the per-rank elements; busbw
//! factor (n-1)/n.
//! In-place: each rank's output lands at its own block of the root-sized
//! buffer (on the root, its block simply stays where it is).

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct Scatter;

impl CollectiveSpec for Scatter {
    fn name(&self) -> &'static str {
        "scatter"
    }

    fn has_root(&self) -> bool {
        true
    }

    fn shape(&self, count: usize, nranks: usize) -> Shape {
        Shape::scattered(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        spread_factor(nranks)
    }

    fn input_len(&self, shape: &Shape, at: &Layout) -> usize {
        if at.rank == at.root { shape.send } else { 0 }
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
        pattern.input(at.root, at.rank * shape.count + i)
    }
}
