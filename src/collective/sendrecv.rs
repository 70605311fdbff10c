//! sendrecv: a ring exchange; every rank sends its buffer to rank r+1 and
//! receives rank r-1's (modulo n), or with a `Layout::shift` of k to r+k
//! and from r-k (a replayed log's exchanges). Size is the buffer; count its
//! elements; busbw factor 1. At one rank the rank sends to itself.
//! In-place: the received buffer replaces the sent one.

use super::{Described, Layout, Pattern, Shape};

pub(super) const SPEC: Described = Described::new("sendrecv", Shape::whole, |_| 1.0, expected);

fn expected(pattern: &Pattern, _shape: &Shape, at: &Layout, i: usize) -> u64 {
    let n = at.nranks.max(1);
    pattern.input((at.rank + n - at.shift % n) % n, i)
}
