//! broadcast: every rank ends with the root's buffer. Size is the buffer;
//! count its elements; busbw factor 1 (every rank receives the whole buffer
//! once, whatever the algorithm).
//! In-place: the root's input buffer is also its output buffer.

use super::{Described, Layout, Pattern, Shape};

pub(super) const SPEC: Described = Described {
    aliases: &["bcast"],
    root: true,
    input_at_root: true,
    ..Described::new("broadcast", Shape::whole, |_| 1.0, expected)
};

fn expected(pattern: &Pattern, _shape: &Shape, at: &Layout, i: usize) -> u64 {
    pattern.input(at.root, i)
}
