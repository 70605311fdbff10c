//! reduce: the root ends with the reduction of all ranks' buffers; other
//! ranks have no output. Size is the buffer; count its elements; busbw
//! factor 1.
//! In-place: the root's input buffer is also its output buffer.

use super::{Described, Layout, Pattern, Shape};

pub(super) const SPEC: Described = Described {
    reduction: true,
    root: true,
    output_at_root: true,
    ..Described::new("reduce", Shape::whole, |_| 1.0, expected)
};

fn expected(pattern: &Pattern, _shape: &Shape, _at: &Layout, i: usize) -> u64 {
    pattern.reduced(i)
}
