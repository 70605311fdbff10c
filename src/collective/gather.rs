//! gather: the root ends with the concatenation of all ranks' inputs; other
//! ranks have no output. Size is the root's full buffer (n x per-rank input);
//! count is the per-rank elements; busbw factor (n-1)/n.
//! In-place: each rank's input sits at its own block of the root-sized buffer.

use super::{Described, Layout, Pattern, Shape, spread_factor};

pub(super) const SPEC: Described = Described {
    root: true,
    output_at_root: true,
    ..Described::new("gather", Shape::gathered, spread_factor, expected)
};

fn expected(pattern: &Pattern, shape: &Shape, _at: &Layout, i: usize) -> u64 {
    pattern.input(i / shape.count, i % shape.count)
}
