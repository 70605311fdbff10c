//! sendrecv: a ring exchange; every rank sends its buffer to rank r+1 and
//! receives rank r-1's (modulo n), or with a `Layout::shift` of k to r+k
//! and from r-k (a replayed log's exchanges). Size is the buffer; count its
//! elements; busbw factor 1. At one rank the rank sends to itself.
//! In-place: the received buffer replaces the sent one.

use super::{CollectiveSpec, Layout, Pattern, Shape};

pub struct SendRecv;

impl CollectiveSpec for SendRecv {
    fn name(&self) -> &'static str {
        "sendrecv"
    }

    fn shape(&self, count: usize, _nranks: usize) -> Shape {
        Shape::whole(count)
    }

    fn bus_factor(&self, _nranks: usize) -> f64 {
        1.0
    }

    fn output_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.recv
    }

    fn expected(&self, pattern: &Pattern, _shape: &Shape, at: &Layout, i: usize) -> u64 {
        let n = at.nranks.max(1);
        pattern.input((at.rank + n - at.shift % n) % n, i)
    }
}
