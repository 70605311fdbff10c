//! Validation, the one path the sweep (`Engine`) and a workload's steps
//! (`steps::StepRunner`) take: this rank's input is the pattern of a seed,
//! one operation runs, and its output is compared with what the collective
//! defines (`CollectiveSpec::expected`; within a relative bound for avg on
//! floating types, whose arithmetic NCCL does not make exact:
//! collective/pattern.rs), and the wrong elements are summed over every
//! rank. An output the backend leaves undefined (`Capabilities::validates`)
//! is not checked. Under `-G` the one operation is captured in a CUDA graph,
//! instantiated and replayed once, so that what is validated is what the
//! timed replays run (as nccl-tests validates through the graph).

use crate::backend::{Backend, Call, Graphs};
use crate::collective::Pattern;
use crate::error::Error;
use crate::plan::Capabilities;
use crate::types::Placement;
use crate::world::World;

/// What a validation needs besides the call: the ranks, what the backend
/// defines, and the test hook that corrupts an output.
pub struct Validate<'a> {
    pub world: &'a dyn World,
    pub caps: &'a Capabilities,
    /// `-G`: the operation runs through a graph of its own.
    pub through_graph: bool,
    /// Test hook: every rank with an output corrupts its first received
    /// element, so that validation must fail.
    pub inject_error: bool,
}

impl Validate<'_> {
    /// One validation of `call` in `placement` with the pattern of `seed`:
    /// the wrong elements of every rank, summed (every rank takes part);
    /// `None` where the backend leaves this output undefined (every rank
    /// alike: no rank takes part then). The call's buffers are ready
    /// (`Backend::prepare`).
    pub fn once(
        &self,
        backend: &mut dyn Backend,
        call: &Call,
        placement: Placement,
        seed: u64,
    ) -> Result<Option<u64>, Error> {
        Ok(self
            .local(backend, call, placement, seed)?
            .map(|local| self.world.sum_u64(local)))
    }

    /// As `once`, but this rank's wrong elements only: the caller sums
    /// them over ranks (every rank must take part in that sum).
    pub fn local(
        &self,
        backend: &mut dyn Backend,
        call: &Call,
        placement: Placement,
        seed: u64,
    ) -> Result<Option<u64>, Error> {
        if !self.caps.validates(call.collective, placement) {
            return Ok(None);
        }
        let spec = call.collective.spec();
        let pattern = Pattern::new(call.dtype, call.op, call.at.nranks, seed);
        let rank = call.at.rank;
        backend.load_input(call, placement, &|i| pattern.input(rank, i))?;
        self.launch(backend, call, placement)?;
        backend.wait()?;
        let (out, range) = backend.output(call, placement)?;
        if self.inject_error && !range.is_empty() {
            // flip bits of the first received element
            let at = range.start * call.dtype.size_bytes();
            out.bytes_mut()[at] ^= 0x5a;
        }
        let want = spec.expectation(&pattern, &call.shape, &call.at);
        let local = match pattern.relative_bound() {
            Some(bound) => out.count_outside(range, &want, bound),
            None => out.count_mismatches(range, &want),
        };
        Ok(Some(local))
    }

    /// The one operation, at the start of the buffers; through a graph
    /// (captured, instantiated, replayed once) with `through_graph`.
    fn launch(&self, backend: &mut dyn Backend, call: &Call, placement: Placement) -> Result<(), Error> {
        if !self.through_graph {
            return backend.launch(call, placement, 0, 1);
        }
        graphs(backend, self.caps)?.begin_capture()?;
        let captured = backend.launch(call, placement, 0, 1);
        // The capture always ends, so the stream is usable whatever failed.
        let ended = graphs(backend, self.caps)?.end_capture();
        captured?;
        ended?;
        graphs(backend, self.caps)?.replay(1)
    }
}

/// The backend's CUDA graphs, which `-G` needs (the sweep refuses a
/// backend without them before its first point).
fn graphs<'b>(backend: &'b mut dyn Backend, caps: &Capabilities) -> Result<&'b mut dyn Graphs, Error> {
    let why = format!(
        "-G/--cuda-graph: the {} backend has no CUDA graphs; drop -G",
        caps.backend
    );
    backend.graphs().ok_or_else(|| Error::usage(why))
}
