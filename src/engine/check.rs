//! Validation, the one path the sweep (`Engine`) and a workload's steps
//! (`steps::StepRunner`) take: this rank's input is the pattern of a seed,
//! one operation runs, and its output is compared with what the collective
//! defines (`CollectiveSpec::expected`; within a relative bound for avg on
//! floating types, whose arithmetic NCCL does not make exact:
//! collective/pattern.rs), and the wrong elements are summed over every
//! rank. An output the backend leaves undefined (`Capabilities::validates`)
//! is not checked. Under `-G` the one operation is captured in a CUDA graph,
//! instantiated and replayed once, so that what is validated is what the
//! timed replays run (as nccl-tests validates through the graph). Each rank
//! also times its own part of the check (filling its input, fetching and
//! comparing its output): work every rank of a symmetric collective does
//! alike between two synchronisations, whose length says how late the rank
//! arrives at the next one (`straggler`).

use crate::backend::{Backend, Call, Graphs};
use crate::buffer::HostBuffer;
use crate::clock::Clock;
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
    /// Where this rank's own work is timed.
    pub clock: Clock,
}

/// One validation: the wrong elements of every rank, summed (`None` where
/// the output is undefined), this rank's own, and this rank's seconds of its
/// own work.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Checked {
    pub wrong: Option<u64>,
    pub local: Option<u64>,
    pub work_s: f64,
}

impl Validate<'_> {
    /// One validation of `call` in `placement` with the pattern of `seed`:
    /// the wrong elements of every rank, summed (every rank takes part);
    /// `None` where the backend leaves this output undefined (every rank
    /// alike: no rank takes part then); with this rank's own count and its
    /// seconds of its own work: filling its input, then fetching and
    /// comparing its output (not the collective, nor the reduction of the
    /// count). The call's buffers are ready (`Backend::prepare`).
    pub fn timed(
        &self,
        backend: &mut dyn Backend,
        call: &Call,
        placement: Placement,
        seed: u64,
    ) -> Result<Checked, Error> {
        let (local, work_s) = self.own(backend, call, placement, seed)?;
        Ok(Checked {
            wrong: local.map(|local| self.world.sum_u64(local)),
            local,
            work_s,
        })
    }

    /// `timed` without the sum: this rank's wrong elements (a check judges
    /// each group apart). No rank takes part in anything.
    pub fn local(
        &self,
        backend: &mut dyn Backend,
        call: &Call,
        placement: Placement,
        seed: u64,
    ) -> Result<Option<u64>, Error> {
        Ok(self.own(backend, call, placement, seed)?.0)
    }

    /// This rank's wrong elements (`None` where the output is undefined)
    /// and the seconds of its own work.
    fn own(
        &self,
        backend: &mut dyn Backend,
        call: &Call,
        placement: Placement,
        seed: u64,
    ) -> Result<(Option<u64>, f64), Error> {
        if !self.caps.validates(call.collective, placement) {
            return Ok((None, 0.0));
        }
        let spec = call.collective.spec();
        let pattern = Pattern::new(call.dtype, call.op, call.at.nranks, seed);
        let rank = call.at.rank;
        let start = self.clock.now();
        backend.load_input(call, placement, &|i| pattern.input(rank, i))?;
        let mut work_s = self.clock.seconds_since(start);
        self.launch(backend, call, placement)?;
        backend.wait()?;
        let start = self.clock.now();
        let (out, range) = backend.output(call, placement)?;
        self.corrupt(out, &range, call);
        let want = spec.expectation(&pattern, &call.shape, &call.at);
        let local = match pattern.relative_bound() {
            Some(bound) => out.count_outside(range, &want, bound),
            None => out.count_mismatches(range, &want),
        };
        work_s += self.clock.seconds_since(start);
        Ok((Some(local), work_s))
    }

    /// One validated exchange of `call` (a flat sendrecv on the backend's
    /// own communicator) with `peer`: this rank's input is its pattern of
    /// `seed`, `exchange` runs the sends and receives, and what arrived is
    /// compared with the partner's pattern; this rank's wrong elements. No
    /// rank takes part in anything else.
    pub fn exchange(
        &self,
        backend: &mut dyn Backend,
        call: &Call,
        peer: usize,
        seed: u64,
        exchange: impl FnOnce(&mut dyn Backend) -> Result<(), Error>,
    ) -> Result<u64, Error> {
        let pattern = Pattern::new(call.dtype, None, self.world.size(), seed);
        let me = self.world.rank();
        backend.load_input(call, Placement::OutOfPlace, &|i| pattern.input(me, i))?;
        exchange(backend)?;
        backend.wait()?;
        let (out, range) = backend.output(call, Placement::OutOfPlace)?;
        self.corrupt(out, &range, call);
        Ok(out.count_mismatches(range, |i| pattern.input(peer, i)))
    }

    /// The test hook: flips bits of the first received element.
    fn corrupt(&self, out: &mut HostBuffer, range: &std::ops::Range<usize>, call: &Call) {
        if self.inject_error && !range.is_empty() {
            let at = range.start * call.dtype.size_bytes();
            out.bytes_mut()[at] ^= 0x5a;
        }
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
