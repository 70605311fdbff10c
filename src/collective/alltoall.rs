//! alltoall: block p of rank r's input goes to block r of rank p's output.
//! Size is one rank's whole buffer (n blocks); count is the per-peer block
//! elements; busbw factor (n-1)/n: all blocks but one's own cross a link.
//! In-place: the input buffer is overwritten by the output.

use super::{Described, Layout, Pattern, Shape, spread_factor};

pub(super) const SPEC: Described = Described::new("alltoall", Shape::exchanged, spread_factor, expected);

fn expected(pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
    let (from, j) = (i / shape.count, i % shape.count);
    pattern.input(from, at.rank * shape.count + j)
}
