//! An in-memory data plane for tests: host buffers, and every collective
//! computed exactly across the ranks of one process, one `MemoryBackend`
//! per rank thread (as `world::threads` gives one `ThreadWorld` per rank).
//! The engine's loop, checks, timing arithmetic, `-m`, `-G`, `-I`, stop and
//! watchdog bookkeeping run on it without mpirun.
//!
//! What each operation "takes" and where it fails are injected per call:
//! `with_delay` (a closure, or `script` for a list of durations) and
//! `with_fault`; what a rank's own work takes (filling its input, handing
//! over its output: the check's part outside the collective) by
//! `with_work`. A delay advances the rank's `VirtualClock` when one is
//! attached (`with_clock`; give the engine the same clock and its times are
//! exact), and is slept on the host clock otherwise. A failed rank breaks
//! the exchange, so its peers end with an error instead of waiting.
//!
//! Layout: NCCL's, as nccl-tests lays it out (`collective::regions`):
//! `send` holds a rank's input out of place, `recv` the output, and in
//! place both. Reductions run in
//! rank order in the element type (16-bit floats through f32, rounded to
//! nearest even); avg is the sum over the ranks divided by their number.
//!
//! Point-to-point groups (`PointToPoint`) go through mailboxes of the home
//! fabric, one queue per ordered pair of ranks: sends are eager, receives
//! wait for their message, so a group never deadlocks; the group's delay
//! and fault are those of one operation (`Launched::peer` names the peer).
//!
//! Sub-communicators are fabrics of their own: `MemoryBackend::create(k)`
//! for each group, one backend of it to each member. Every all-reduce runs
//! flat (the hierarchical modes are refused), and nothing here prints.
//! `Journal` records what the engine asked, for tests to read back.

mod arith;
mod extensions;
mod fabric;

use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{
    Backend, Call, Graphs, Identity, IterationMarks, LaunchExtras, PeerOp, PointToPoint, ProfilerRanges, SubGroup,
    SubGroups, refusals, rotation_offset, rotation_steps,
};
use crate::buffer::HostBuffer;
use crate::clock::{Clock, VirtualClock};
use crate::collective::{Buf, Collective, Convention, Regions};
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::Hierarchy;
use crate::types::{BackendKind, DType, Placement};
use crate::with_element_type;
use arith::compute;
use fabric::{Fabric, lock};

/// One operation as a delay or fault closure sees it.
#[derive(Clone, Copy, Debug)]
pub struct Launched {
    pub call: Call,
    pub placement: Placement,
    /// The operation's number within its point (`Backend::launch`).
    pub iter: u64,
    /// Operations this rank has run before this one, over the whole run
    /// (a graph's replayed operations count each time).
    pub seq: u64,
    /// The peer of a point-to-point group (its first operation's).
    pub peer: Option<usize>,
}

/// What an injected fault does to one operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The operation fails with this message; the rank's peers fail too.
    Fail(String),
    /// The operation completes, then its first `n` output elements are
    /// flipped (so a check finds `n` wrong elements on this rank).
    Corrupt(usize),
}

type DelayFn = Box<dyn FnMut(&Launched) -> Duration + Send>;
type FaultFn = Box<dyn FnMut(&Launched) -> Option<Fault> + Send>;
type WorkFn = Box<dyn FnMut(&Call) -> Duration + Send>;

/// The durations of `script`, one per operation in turn, starting again
/// from the first when it runs out (nothing when it is empty).
pub fn script(durations: Vec<Duration>) -> impl FnMut(&Launched) -> Duration + Send + 'static {
    move |op: &Launched| match durations.len() {
        0 => Duration::ZERO,
        n => durations[(op.seq % n as u64) as usize],
    }
}

/// What the engine asked of one rank's backend, in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Event {
    Reserve {
        rotate: bool,
    },
    Prepare {
        collective: Collective,
        count: usize,
    },
    Load {
        placement: Placement,
    },
    /// One `launch`: `ops` operations from `first_iter`, captured into a
    /// graph rather than run when `captured`.
    Launch {
        first_iter: u64,
        ops: u32,
        captured: bool,
    },
    Wait,
    BeginCapture,
    EndCapture,
    Replay {
        times: u32,
    },
    StartMarks {
        iters: u32,
    },
    Mark {
        i: u32,
    },
    RangePush(String),
    RangePop,
    /// One point-to-point group (`PointToPoint::launch_p2p`).
    PeerGroup(Vec<PeerOp>),
}

/// A rank's events, readable while (and after) the engine runs.
#[derive(Clone, Debug, Default)]
pub struct Journal(Arc<Mutex<Vec<Event>>>);

impl Journal {
    fn push(&self, event: Event) {
        lock(&self.0).push(event);
    }

    /// Every event so far.
    pub fn events(&self) -> Vec<Event> {
        lock(&self.0).clone()
    }
}

/// One rank of an in-memory communicator.
pub struct MemoryBackend {
    send: HostBuffer,
    recv: HostBuffer,
    /// Bytes of each buffer when operations rotate through them (0: off).
    rotation_bytes: u64,
    /// (span, positions) of the current point (see `rotation_offset`).
    rotation: (usize, usize),
    clock: Option<VirtualClock>,
    delay: Option<DelayFn>,
    /// What filling an input takes (`with_work`).
    work: Option<WorkFn>,
    fault: Option<FaultFn>,
    journal: Journal,
    /// Operations run so far (`Launched::seq`).
    seq: u64,
    graphs: bool,
    /// Operations captured since `begin_capture` (`None`: not capturing).
    capturing: Option<Vec<(Call, Placement, u64)>>,
    graph: Vec<(Call, Placement, u64)>,
    /// `Some` with device-style iteration marks: when each was recorded.
    marks: Option<Vec<Duration>>,
    profiler: bool,
    /// The communicator this backend was created on, and this rank in it.
    home: (Arc<Fabric>, usize),
    /// The fabrics of this rank's groups (`SubGroups`), and its index in
    /// each.
    groups: Vec<Option<(Arc<Fabric>, usize)>>,
}

impl MemoryBackend {
    /// The `nranks` ranks of one new communicator, rank `r` at index `r`,
    /// to be handed one to each rank's thread.
    pub fn create(nranks: usize) -> Result<Vec<MemoryBackend>, Error> {
        let fabric = Arc::new(Fabric::new(nranks.max(1))?);
        (0..nranks.max(1))
            .map(|rank| {
                Ok(MemoryBackend {
                    send: HostBuffer::new(DType::Float, 0)?,
                    recv: HostBuffer::new(DType::Float, 0)?,
                    rotation_bytes: 0,
                    rotation: (0, 1),
                    clock: None,
                    delay: None,
                    work: None,
                    fault: None,
                    journal: Journal::default(),
                    seq: 0,
                    graphs: true,
                    capturing: None,
                    graph: Vec::new(),
                    marks: None,
                    profiler: false,
                    home: (Arc::clone(&fabric), rank),
                    groups: Vec::new(),
                })
            })
            .collect()
    }

    /// Each operation takes `delay(op)`: on `clock` when one is attached,
    /// else slept.
    pub fn with_delay(mut self, delay: impl FnMut(&Launched) -> Duration + Send + 'static) -> Self {
        self.delay = Some(Box::new(delay));
        self
    }

    /// Filling the input of `call` (`load_input`, a rank's own work)
    /// takes `work(call)`: on `clock` when one is attached, else slept.
    pub fn with_work(mut self, work: impl FnMut(&Call) -> Duration + Send + 'static) -> Self {
        self.work = Some(Box::new(work));
        self
    }

    /// `fault(op)`, when `Some`, happens to operation `op`.
    pub fn with_fault(mut self, fault: impl FnMut(&Launched) -> Option<Fault> + Send + 'static) -> Self {
        self.fault = Some(Box::new(fault));
        self
    }

    /// Delays advance `clock` instead of sleeping (also `Clock::Virtual`
    /// for the engine, so that it reads the same time).
    pub fn with_clock(mut self, clock: VirtualClock) -> Self {
        self.clock = Some(clock);
        self
    }

    /// Whether CUDA-graph-style capture and replay (`-G`) is offered (it
    /// is by default).
    pub fn with_graphs(mut self, on: bool) -> Self {
        self.graphs = on;
        self
    }

    /// Offers per-iteration marks as a device backend does (`-I` then
    /// reads them instead of the host clock after each launch).
    pub fn with_iteration_marks(mut self) -> Self {
        self.marks = Some(Vec::new());
        self
    }

    /// Offers profiler ranges, recorded in the journal.
    pub fn with_profiler(mut self) -> Self {
        self.profiler = true;
        self
    }

    /// What the engine asks of this rank, for the test to read.
    pub fn journal(&self) -> Journal {
        self.journal.clone()
    }

    fn clock(&self) -> Clock {
        self.clock.clone().map_or(Clock::Host, Clock::Virtual)
    }

    fn buffer(&mut self, which: Buf) -> &mut HostBuffer {
        match which {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
        }
    }

    /// Runs one operation: its fault, the exchange, its delay.
    fn run(&mut self, call: &Call, placement: Placement, iter: u64) -> Result<(), Error> {
        let (op, fault) = self.begin_op(call, placement, iter, None)?;
        let shift = rotation_offset(self.rotation.0, self.rotation.1, iter);
        self.exchange(call, placement, shift)?;
        if let Some(Fault::Corrupt(n)) = fault {
            let (buf, range) = regions(call, placement).output;
            let e = call.dtype.size_bytes();
            let corrupt = (range.start + shift) * e..(range.start + shift + n.min(range.len())) * e;
            for byte in &mut self.buffer(buf).bytes_mut()[corrupt] {
                *byte ^= 0x5a;
            }
        }
        self.end_op(&op);
        Ok(())
    }

    /// Numbers one operation and asks for its fault; a failure breaks
    /// every communicator of this rank and is the operation's error.
    fn begin_op(
        &mut self,
        call: &Call,
        placement: Placement,
        iter: u64,
        peer: Option<usize>,
    ) -> Result<(Launched, Option<Fault>), Error> {
        let op = Launched {
            call: *call,
            placement,
            iter,
            seq: self.seq,
            peer,
        };
        self.seq += 1;
        let fault = self.fault.as_mut().and_then(|f| f(&op));
        if let Some(Fault::Fail(why)) = &fault {
            self.break_all(format!("rank {} of the memory backend failed", self.home.1));
            return Err(Error::runtime(why.clone()));
        }
        Ok((op, fault))
    }

    /// The operation's delay, once it has run.
    fn end_op(&mut self, op: &Launched) {
        if let Some(delay) = self.delay.as_mut() {
            let took = delay(op);
            self.pass(took);
        }
    }

    /// `took` passes: on the rank's virtual clock, else slept on the host.
    fn pass(&self, took: Duration) {
        match &self.clock {
            Some(clock) => clock.advance(took),
            None => std::thread::sleep(took),
        }
    }

    /// Publishes this rank's input, waits for every rank's, computes this
    /// rank's output from them, and waits until every rank has read.
    fn exchange(&mut self, call: &Call, placement: Placement, shift: usize) -> Result<(), Error> {
        let r = regions(call, placement);
        let e = call.dtype.size_bytes();
        let (fabric, rank) = self.communicator(call)?;
        let mut state = lock(&fabric.state);
        {
            let from = match r.input.0 {
                Buf::Send => &self.send,
                Buf::Recv => &self.recv,
            };
            let input = &from.bytes()[(r.input.1.start + shift) * e..(r.input.1.end + shift) * e];
            let slot = &mut state.inputs[rank];
            slot.reshape(call.dtype, r.input.1.len())?;
            slot.bytes_mut().copy_from_slice(input);
        }
        state = fabric.barrier(state)?;
        let out = r.output.1.start + shift..r.output.1.end + shift;
        let output = match r.output.0 {
            Buf::Send => &mut self.send,
            Buf::Recv => &mut self.recv,
        };
        with_element_type!(call.dtype, T => compute::<T>(call, &state.inputs, &mut output.typed_mut::<T>()[out]));
        drop(fabric.barrier(state)?);
        Ok(())
    }

    /// The fabric `call` runs on and this rank's index in it.
    fn communicator(&self, call: &Call) -> Result<(Arc<Fabric>, usize), Error> {
        let (fabric, rank) =
            match call.group {
                None => &self.home,
                Some(SubGroup(g)) => self.groups.get(g).and_then(Option::as_ref).ok_or_else(|| {
                    Error::runtime(format!("internal error: no memory group {g} (never made, or freed)"))
                })?,
            };
        Ok((Arc::clone(fabric), *rank))
    }

    fn check_layout(&self, call: &Call) -> Result<(), Error> {
        let (fabric, rank) = self.communicator(call)?;
        if call.at.nranks != fabric.nranks || call.at.rank != rank {
            return Err(Error::usage(format!(
                "a call for rank {} of {} reached rank {} of a memory communicator of {}",
                call.at.rank, call.at.nranks, rank, fabric.nranks
            )));
        }
        Ok(())
    }
}

impl MemoryBackend {
    /// Breaks every communicator of this rank, so no peer waits for it.
    fn break_all(&self, why: String) {
        self.home.0.break_with(why.clone());
        for (fabric, _) in self.groups.iter().flatten() {
            fabric.break_with(why.clone());
        }
    }
}

impl Drop for MemoryBackend {
    fn drop(&mut self) {
        // Peers still exchanging would wait for this rank forever.
        self.break_all(format!("rank {} of the memory backend has left", self.home.1));
    }
}

/// Splits meet on the home fabric: every rank publishes its colour and
/// key, and the first of a colour to look makes the group's fabric.
impl SubGroups for MemoryBackend {
    fn split(&mut self, color: usize, key: usize) -> Result<SubGroup, Error> {
        let (home, me) = (Arc::clone(&self.home.0), self.home.1);
        let round = self.groups.len() as u64;
        let mut state = lock(&home.state);
        state.colors[me] = (color, key);
        state = home.barrier(state)?;
        let mut members: Vec<(usize, usize)> = (0..home.nranks)
            .filter(|&r| state.colors[r].0 == color)
            .map(|r| (state.colors[r].1, r))
            .collect();
        members.sort();
        let index = members.iter().position(|&(_, r)| r == me).unwrap_or(0);
        let fabric = match state.subs.iter().find(|(k, _)| *k == (round, color)) {
            Some((_, f)) => Arc::clone(f),
            None => {
                let f = Arc::new(Fabric::new(members.len())?);
                state.subs.push(((round, color), Arc::clone(&f)));
                f
            }
        };
        // Nobody publishes the next split's colour before all have read.
        drop(home.barrier(state)?);
        self.groups.push(Some((fabric, index)));
        Ok(SubGroup(self.groups.len() - 1))
    }

    /// Drops this rank's handle of the group's fabric.
    fn free(&mut self, SubGroup(g): SubGroup) -> Result<(), Error> {
        match self.groups.get_mut(g).and_then(Option::take) {
            Some(_) => Ok(()),
            None => Err(Error::runtime(format!("internal error: no memory group {g} to free"))),
        }
    }
}

impl Backend for MemoryBackend {
    fn identity(&self) -> Identity {
        Identity {
            kind: BackendKind::Memory,
            version: in_one_process(self.home.0.nranks),
            notes: Vec::new(),
        }
    }

    fn capabilities(&self, extras: &LaunchExtras) -> Capabilities {
        let refused_extras = if extras.register.on() {
            Some("-R/--register: the memory backend has no communicator to register buffers with".into())
        } else if extras.cuda_graph > 0 && !self.graphs {
            Some("-G/--cuda-graph: this memory backend was made without graphs".into())
        } else {
            None
        };
        Capabilities {
            backend: "memory",
            max_elements: usize::MAX >> 8,
            refused_dtypes: Vec::new(),
            refused_ops: Vec::new(),
            refused_hierarchies: refusals(&Hierarchy::ALL, |h| match h {
                Hierarchy::Flat => Ok(()),
                _ => Err(format!(
                    "--hierarchy {h}: the memory backend runs every all-reduce flat (it has no sub-communicators)"
                )),
            }),
            refused_extras,
            unchecked: Vec::new(),
        }
    }

    fn reserve(&mut self, reservation: &Reservation) -> Result<(), Error> {
        let rotate = reservation.rotate;
        self.journal.push(Event::Reserve { rotate });
        self.rotation_bytes = if rotate { reservation.recv_bytes } else { 0 };
        Ok(())
    }

    fn prepare(&mut self, call: &Call) -> Result<(), Error> {
        self.check_layout(call)?;
        self.journal.push(Event::Prepare {
            collective: call.collective,
            count: call.shape.count,
        });
        let span = call.shape.send.max(call.shape.recv);
        let len = span.max(self.rotation_bytes as usize / call.dtype.size_bytes());
        self.send.reshape(call.dtype, len)?;
        self.recv.reshape(call.dtype, len)?;
        self.rotation = (span, rotation_steps(span, len));
        Ok(())
    }

    fn load_input(
        &mut self,
        call: &Call,
        placement: Placement,
        value: &(dyn Fn(usize) -> u64 + Sync),
    ) -> Result<(), Error> {
        self.journal.push(Event::Load { placement });
        let r = regions(call, placement);
        self.buffer(r.output.0).poison();
        self.buffer(r.input.0).fill(r.input.1, value);
        if let Some(work) = self.work.as_mut() {
            let took = work(call);
            self.pass(took);
        }
        Ok(())
    }

    fn launch(&mut self, call: &Call, placement: Placement, first_iter: u64, ops: u32) -> Result<(), Error> {
        self.check_layout(call)?;
        let captured = self.capturing.is_some();
        self.journal.push(Event::Launch {
            first_iter,
            ops,
            captured,
        });
        for a in 0..u64::from(ops) {
            match self.capturing.as_mut() {
                Some(graph) => graph.push((*call, placement, first_iter + a)),
                None => self.run(call, placement, first_iter + a)?,
            }
        }
        Ok(())
    }

    fn wait(&mut self) -> Result<(), Error> {
        // Every operation ran inside `launch`.
        self.journal.push(Event::Wait);
        Ok(())
    }

    fn output(&mut self, call: &Call, placement: Placement) -> Result<(&mut HostBuffer, Range<usize>), Error> {
        let (buf, range) = regions(call, placement).output;
        Ok((self.buffer(buf), range))
    }

    fn graphs(&mut self) -> Option<&mut dyn Graphs> {
        if self.graphs { Some(self) } else { None }
    }

    fn iteration_marks(&mut self) -> Option<&mut dyn IterationMarks> {
        if self.marks.is_some() { Some(self) } else { None }
    }

    fn profiler(&mut self) -> Option<&mut dyn ProfilerRanges> {
        if self.profiler { Some(self) } else { None }
    }

    fn sub_groups(&mut self) -> Option<&mut dyn SubGroups> {
        Some(self)
    }

    fn point_to_point(&mut self) -> Option<&mut dyn PointToPoint> {
        Some(self)
    }
}

/// NCCL's layout (the module comment).
fn regions(call: &Call, placement: Placement) -> Regions {
    Convention::Nccl.regions(call.collective, &call.shape, &call.at, placement)
}

/// The memory backend's "version", as the header and the CSV's
/// `backend_version` name it: what it is, since no library is behind it.
pub fn in_one_process(nranks: usize) -> String {
    let ranks = if nranks == 1 { "rank" } else { "ranks" };
    format!("{nranks} {ranks} in one process")
}

#[cfg(test)]
pub(crate) mod on_ranks;
#[cfg(test)]
mod tests;
