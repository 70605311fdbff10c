//! scatter: rank r ends with block r of the root's input. Size is the root's
//! full buffer (n x per-rank output); count is the per-rank elements; busbw
//! factor (n-1)/n.
//! In-place: each rank's output lands at its own block of the root-sized
//! buffer (on the root, its block simply stays where it is).

use super::{Described, Layout, Pattern, Shape, spread_factor};

pub(super) const SPEC: Described = Described {
    root: true,
    input_at_root: true,
    ..Described::new("scatter", Shape::scattered, spread_factor, expected)
};

fn expected(pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
    pattern.input(at.root, at.rank * shape.count + i)
}
