//! all_gather: every rank ends with the concatenation of all ranks' inputs.
//! Size is the full output (n x per-rank input); count is the per-rank input
//! elements; busbw factor (n-1)/n: each rank receives all blocks but its own.
//! In-place: each rank's input sits at its own block of the output buffer.

use super::{Described, Layout, Pattern, Shape, spread_factor};

pub(super) const SPEC: Described = Described::new("all_gather", Shape::gathered, spread_factor, expected);

fn expected(pattern: &Pattern, shape: &Shape, _at: &Layout, i: usize) -> u64 {
    pattern.input(i / shape.count, i % shape.count)
}
