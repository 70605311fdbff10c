//! all_reduce: every rank ends with the reduction of all ranks' buffers.
//! Size is the buffer; count is its elements; busbw factor 2(n-1)/n, since a
//! bandwidth-optimal all-reduce is a reduce-scatter plus an all-gather, each
//! moving (n-1)/n of the buffer through every rank's link.
//! In-place: the output overwrites the input buffer.

use super::{Described, Layout, Pattern, Shape, spread_factor};

pub(super) const SPEC: Described = Described {
    reduction: true,
    ..Described::new("all_reduce", Shape::whole, |n| 2.0 * spread_factor(n), expected)
};

fn expected(pattern: &Pattern, _shape: &Shape, _at: &Layout, i: usize) -> u64 {
    pattern.reduced(i)
}
