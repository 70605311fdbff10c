//! An in-memory data plane for tests: host buffers, and every collective
//! computed exactly across the ranks of one process, one `MemoryBackend`
//! per rank thread (as `world::threads` gives one `ThreadWorld` per rank).
//! The engine's loop, checks, timing arithmetic, `-m`, `-G`, `-I`, stop and
//! watchdog bookkeeping run on it without mpirun.
//!
//! What each operation "takes" and where it fails are injected per call:
//! `with_delay` (a closure, or `script` for a list of durations) and
//! `with_fault`. A delay advances the rank's `VirtualClock` when one is
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
//! Sub-communicators are fabrics of their own: `MemoryBackend::create(k)`
//! for each group, one backend of it to each member. Every all-reduce runs
//! flat (the hierarchical modes are refused), and nothing here prints.
//! `Journal` records what the engine asked, for tests to read back.

use std::ops::Range;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use super::{
    Backend, Call, Graphs, Identity, IterationMarks, LaunchExtras, ProfilerRanges, SubGroup, SubGroups, refusals,
    rotation_offset, rotation_steps,
};
use crate::buffer::{Bf16, Half, HostBuffer};
use crate::clock::{Clock, VirtualClock};
use crate::collective::{Buf, Collective, Convention, Regions};
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::Hierarchy;
use crate::types::{BackendKind, DType, Placement, ReduceOp};
use crate::with_element_type;

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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a rank thread panicked; the data is still
    // valid and the test reports the panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The exchange every rank of one communicator meets at, once per
/// operation: each publishes its input, all compute their outputs from
/// every input, all wait until everyone has read.
struct Fabric {
    nranks: usize,
    state: Mutex<Rendezvous>,
    turn: Condvar,
}

struct Rendezvous {
    /// Each rank's input of the current operation.
    inputs: Vec<HostBuffer>,
    arrived: usize,
    /// Barriers completed; a waiting rank leaves when it moves.
    generation: u64,
    /// Set when a rank failed or left: every later wait ends with it.
    broken: Option<String>,
    /// Each rank's (colour, key) of the split in progress (`SubGroups`).
    colors: Vec<(usize, usize)>,
    /// The fabrics splits made, by (split number, colour).
    subs: Vec<((u64, usize), Arc<Fabric>)>,
}

impl Fabric {
    fn new(nranks: usize) -> Result<Fabric, Error> {
        let inputs = (0..nranks)
            .map(|_| HostBuffer::new(DType::Float, 0))
            .collect::<Result<_, _>>()?;
        Ok(Fabric {
            nranks,
            state: Mutex::new(Rendezvous {
                inputs,
                arrived: 0,
                generation: 0,
                broken: None,
                colors: vec![(0, 0); nranks],
                subs: Vec::new(),
            }),
            turn: Condvar::new(),
        })
    }

    /// Waits until every rank has arrived (holding `state`), or the fabric
    /// broke.
    fn barrier<'a>(&'a self, mut state: MutexGuard<'a, Rendezvous>) -> Result<MutexGuard<'a, Rendezvous>, Error> {
        if let Some(why) = &state.broken {
            return Err(Error::runtime(why.clone()));
        }
        let generation = state.generation;
        state.arrived += 1;
        if state.arrived == self.nranks {
            state.arrived = 0;
            state.generation += 1;
            self.turn.notify_all();
            return Ok(state);
        }
        loop {
            state = self.turn.wait(state).unwrap_or_else(PoisonError::into_inner);
            if state.generation != generation {
                return Ok(state);
            }
            if let Some(why) = &state.broken {
                return Err(Error::runtime(why.clone()));
            }
        }
    }

    fn break_with(&self, why: String) {
        let mut state = lock(&self.state);
        if state.broken.is_none() {
            state.broken = Some(why);
        }
        self.turn.notify_all();
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
    groups: Vec<(Arc<Fabric>, usize)>,
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
        let op = Launched {
            call: *call,
            placement,
            iter,
            seq: self.seq,
        };
        self.seq += 1;
        let fault = self.fault.as_mut().and_then(|f| f(&op));
        if let Some(Fault::Fail(why)) = &fault {
            self.break_all(format!("rank {} of the memory backend failed", self.home.1));
            return Err(Error::runtime(why.clone()));
        }
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
        if let Some(delay) = self.delay.as_mut() {
            let took = delay(&op);
            match &self.clock {
                Some(clock) => clock.advance(took),
                None => std::thread::sleep(took),
            }
        }
        Ok(())
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
        let (fabric, rank) = match call.group {
            None => &self.home,
            Some(SubGroup(g)) => self
                .groups
                .get(g)
                .ok_or_else(|| Error::runtime(format!("internal error: no memory group {g}")))?,
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
        for (fabric, _) in &self.groups {
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
        self.groups.push((fabric, index));
        Ok(SubGroup(self.groups.len() - 1))
    }
}

impl Backend for MemoryBackend {
    fn identity(&self) -> Identity {
        Identity {
            kind: BackendKind::Memory,
            version: format!("memory ({} ranks in one process)", self.home.0.nranks),
            notes: Vec::new(),
        }
    }

    fn capabilities(&self, extras: &LaunchExtras) -> Capabilities {
        let refused_extras = if extras.register {
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
}

impl Graphs for MemoryBackend {
    fn begin_capture(&mut self) -> Result<(), Error> {
        self.journal.push(Event::BeginCapture);
        self.capturing = Some(Vec::new());
        Ok(())
    }

    fn end_capture(&mut self) -> Result<(), Error> {
        self.journal.push(Event::EndCapture);
        self.graph = self.capturing.take().unwrap_or_default();
        Ok(())
    }

    fn replay(&mut self, times: u32) -> Result<(), Error> {
        self.journal.push(Event::Replay { times });
        let graph = std::mem::take(&mut self.graph);
        let mut result = Ok(());
        'replays: for _ in 0..times {
            for (call, placement, iter) in &graph {
                result = self.run(call, *placement, *iter);
                if result.is_err() {
                    break 'replays;
                }
            }
        }
        self.graph = graph;
        result
    }
}

impl IterationMarks for MemoryBackend {
    fn start_marks(&mut self, iters: u32) -> Result<(), Error> {
        self.journal.push(Event::StartMarks { iters });
        self.marks = Some(Vec::with_capacity(iters as usize + 1));
        Ok(())
    }

    fn mark_iteration(&mut self, i: u32) -> Result<(), Error> {
        self.journal.push(Event::Mark { i });
        let now = self.clock().now();
        let marks = self.marks.get_or_insert_with(Vec::new);
        marks.truncate(i as usize);
        marks.push(now);
        Ok(())
    }

    fn marked_times(&mut self) -> Result<Vec<f64>, Error> {
        let marks = self.marks.as_deref().unwrap_or_default();
        Ok(marks
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]).as_secs_f64())
            .collect())
    }
}

impl ProfilerRanges for MemoryBackend {
    fn range_push(&mut self, label: &str) {
        self.journal.push(Event::RangePush(label.to_string()));
    }

    fn range_pop(&mut self) {
        self.journal.push(Event::RangePop);
    }
}

/// NCCL's layout (the module comment).
fn regions(call: &Call, placement: Placement) -> Regions {
    Convention::Nccl.regions(call.collective, &call.shape, &call.at, placement)
}

/// This rank's output of `call` from every rank's input (`inputs[r]` is
/// rank `r`'s input region, `out` this rank's output region).
fn compute<T: Arith>(call: &Call, inputs: &[HostBuffer], out: &mut [T]) {
    let (n, c, rank, root) = (call.at.nranks, call.shape.count, call.at.rank, call.at.root);
    let input = |r: usize| inputs[r].typed::<T>();
    let op = call.op.unwrap_or(ReduceOp::Sum);
    let reduce = |i: usize| {
        let mut acc = input(0)[i];
        for r in 1..n {
            acc = acc.combine(input(r)[i], op);
        }
        if op == ReduceOp::Avg { acc.average(n) } else { acc }
    };
    match call.collective {
        Collective::AllReduce | Collective::Reduce => {
            for (i, x) in out.iter_mut().enumerate() {
                *x = reduce(i);
            }
        }
        Collective::ReduceScatter => {
            for (i, x) in out.iter_mut().enumerate() {
                *x = reduce(rank * c + i);
            }
        }
        Collective::Broadcast => out.copy_from_slice(&input(root)[..out.len()]),
        Collective::AllGather | Collective::Gather => {
            for (p, block) in out.chunks_mut(c.max(1)).enumerate() {
                block.copy_from_slice(&input(p)[..block.len()]);
            }
        }
        Collective::AllToAll => {
            for (p, block) in out.chunks_mut(c.max(1)).enumerate() {
                block.copy_from_slice(&input(p)[rank * c..rank * c + block.len()]);
            }
        }
        Collective::Scatter => out.copy_from_slice(&input(root)[rank * c..rank * c + out.len()]),
        Collective::SendRecv => out.copy_from_slice(&input((rank + n - call.at.shift % n) % n)[..out.len()]),
    }
}

/// The arithmetic of reductions, in each element type.
trait Arith: crate::buffer::Element + Copy {
    fn combine(self, other: Self, op: ReduceOp) -> Self;
    /// This sum over `n` ranks, divided by `n`.
    fn average(self, n: usize) -> Self;
}

macro_rules! int_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                // NCCL's integer arithmetic wraps.
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self.wrapping_add(other),
                    ReduceOp::Prod => self.wrapping_mul(other),
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }

            fn average(self, n: usize) -> Self {
                self / (n.max(1) as $t)
            }
        }
    )*};
}
int_arith!(i8, u8, i32, u32, i64, u64);

macro_rules! float_arith {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn combine(self, other: Self, op: ReduceOp) -> Self {
                match op {
                    ReduceOp::Sum | ReduceOp::Avg => self + other,
                    ReduceOp::Prod => self * other,
                    ReduceOp::Min => self.min(other),
                    ReduceOp::Max => self.max(other),
                }
            }

            fn average(self, n: usize) -> Self {
                self / (n.max(1) as $t)
            }
        }
    )*};
}
float_arith!(f32, f64);

impl Arith for Half {
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        Half(f32_to_half(half_to_f32(self).combine(half_to_f32(other), op)))
    }

    fn average(self, n: usize) -> Self {
        Half(f32_to_half(half_to_f32(self).average(n)))
    }
}

impl Arith for Bf16 {
    fn combine(self, other: Self, op: ReduceOp) -> Self {
        Bf16(f32_to_bf16(bf16_to_f32(self).combine(bf16_to_f32(other), op)))
    }

    fn average(self, n: usize) -> Self {
        Bf16(f32_to_bf16(bf16_to_f32(self).average(n)))
    }
}

fn half_to_f32(h: Half) -> f32 {
    // Every binary16 value is an f32 value.
    crate::buffer::Element::to_f64(h) as f32
}

fn bf16_to_f32(b: Bf16) -> f32 {
    f32::from_bits(u32::from(b.0) << 16)
}

/// `x` as binary16, rounded to nearest even (IEEE 754); beyond 65504
/// rounds to infinity, NaN stays NaN.
fn f32_to_half(x: f32) -> u16 {
    let bits = x.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let exp = ((bits >> 23) & 0xff) as i32;
    let man = bits & 0x7f_ffff;
    if exp == 0xff {
        return sign | 0x7c00 | if man != 0 { 0x200 } else { 0 };
    }
    let e = exp - 127 + 15;
    if e >= 0x1f {
        return sign | 0x7c00;
    }
    // Keeps `kept = m >> shift` and rounds on what the shift drops.
    let round = |m: u32, shift: u32| {
        let kept = m >> shift;
        let dropped = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        kept + u32::from(dropped > half || (dropped == half && kept & 1 == 1))
    };
    if e <= 0 {
        // subnormal: value = m10 * 2^-24, so m10 = (1.man as 24 bits) >> (14 - e)
        if e < -10 {
            return sign;
        }
        return sign | round(man | 0x80_0000, (14 - e) as u32) as u16;
    }
    // a carry out of the mantissa moves into the exponent, as it should
    sign | (((e as u32) << 10) + round(man, 13)) as u16
}

/// `x` as bfloat16 (the upper half of an f32), rounded to nearest even.
fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Layout, Pattern};
    use crate::world::World;
    use crate::world::threads::ThreadWorld;

    /// Runs `f` on every rank of an `n`-rank world and memory
    /// communicator, one thread each.
    fn on_ranks<T: Send>(n: usize, f: impl Fn(&ThreadWorld, MemoryBackend) -> T + Sync) -> Vec<T> {
        let worlds = ThreadWorld::create(n);
        let backends = MemoryBackend::create(n).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = worlds
                .iter()
                .zip(backends)
                .map(|(w, b)| {
                    let f = &f;
                    s.spawn(move || f(w, b))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    fn call(collective: Collective, dtype: DType, op: Option<ReduceOp>, n: usize, rank: usize) -> Call {
        Call {
            collective,
            hierarchy: Hierarchy::Flat,
            dtype,
            op,
            shape: collective.spec().shape(48, n),
            at: Layout {
                nranks: n,
                rank,
                root: n - 1,
                shift: 1,
            },
            group: None,
        }
    }

    /// Wrong elements of one check of `call` on every rank, summed.
    fn wrong_elements(w: &ThreadWorld, mut b: MemoryBackend, c: Call, placement: Placement) -> u64 {
        let pattern = Pattern::new(c.dtype, c.op, c.at.nranks, 7);
        b.prepare(&c).unwrap();
        b.load_input(&c, placement, &|i| pattern.input(c.at.rank, i)).unwrap();
        b.launch(&c, placement, 0, 1).unwrap();
        b.wait().unwrap();
        let (out, range) = b.output(&c, placement).unwrap();
        let spec = c.collective.spec();
        let want = |i| spec.expected(&pattern, &c.shape, &c.at, i);
        let local = match pattern.relative_bound() {
            Some(bound) => out.count_outside(range, want, bound),
            None => out.count_mismatches(range, want),
        };
        w.sum_u64(local)
    }

    #[test]
    fn every_collective_type_and_op_is_exact_in_both_placements_at_1_to_4_ranks() {
        for n in 1..=4 {
            for collective in Collective::ALL {
                let ops: Vec<Option<ReduceOp>> = if collective.spec().is_reduction() {
                    ReduceOp::ALL.iter().copied().map(Some).collect()
                } else {
                    vec![None]
                };
                for dtype in DType::ALL {
                    for &op in &ops {
                        for placement in Placement::BOTH {
                            let wrong = on_ranks(n, |w, b| {
                                wrong_elements(w, b, call(collective, dtype, op, n, w.rank()), placement)
                            });
                            assert_eq!(wrong[0], 0, "{collective} {dtype} {op:?} {placement} at {n} ranks");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_corrupted_operation_is_wrong_exactly_where_it_was_corrupted() {
        let wrong = on_ranks(3, |w, b| {
            let b = b.with_fault(move |op| (op.call.at.rank == 1).then_some(Fault::Corrupt(5)));
            let c = call(Collective::AllGather, DType::Int32, None, 3, w.rank());
            wrong_elements(w, b, c, Placement::OutOfPlace)
        });
        assert_eq!(wrong, vec![5, 5, 5]);
    }

    #[test]
    fn a_failed_rank_ends_its_peers_exchange_with_an_error_instead_of_a_hang() {
        let results = on_ranks(3, |w, b| {
            let mut b = b.with_fault(|op| (op.call.at.rank == 2).then(|| Fault::Fail("injected".into())));
            let c = call(Collective::AllReduce, DType::Float, Some(ReduceOp::Sum), 3, w.rank());
            b.prepare(&c).unwrap();
            b.launch(&c, Placement::OutOfPlace, 0, 1).map_err(|e| e.to_string())
        });
        assert_eq!(results[2], Err("injected".to_string()));
        for r in &results[..2] {
            assert_eq!(r, &Err("rank 2 of the memory backend failed".to_string()));
        }
    }

    #[test]
    fn delays_advance_the_virtual_clock_one_scripted_duration_per_operation() {
        let clock = VirtualClock::new();
        let mut b = MemoryBackend::create(1)
            .unwrap()
            .remove(0)
            .with_clock(clock.clone())
            .with_delay(script(vec![Duration::from_micros(3), Duration::from_micros(5)]));
        let c = call(Collective::Broadcast, DType::Uint8, None, 1, 0);
        b.prepare(&c).unwrap();
        b.launch(&c, Placement::OutOfPlace, 0, 3).unwrap();
        assert_eq!(clock.now(), Duration::from_micros(3 + 5 + 3));
        assert_eq!(
            b.journal().events().last(),
            Some(&Event::Launch {
                first_iter: 0,
                ops: 3,
                captured: false
            })
        );
    }

    #[test]
    fn a_call_for_another_layout_is_refused() {
        let mut b = MemoryBackend::create(2).unwrap().remove(0);
        let e = b
            .prepare(&call(Collective::AllReduce, DType::Float, None, 3, 0))
            .unwrap_err();
        assert!(e.to_string().contains("rank 0 of 3"), "{e}");
    }

    #[test]
    fn sixteen_bit_floats_round_to_nearest_even() {
        for (x, bits) in [
            (0.0, 0x0000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00),
            (2049.0, 0x6800),
            (2051.0, 0x6802),
            (2f32.powi(-24), 0x0001),
            (2f32.powi(-14), 0x0400),
            (f32::INFINITY, 0x7c00),
        ] {
            assert_eq!(f32_to_half(x), bits, "{x}");
        }
        assert!(half_to_f32(Half(f32_to_half(f32::NAN))).is_nan());
        for v in 0..=2048u16 {
            assert_eq!(half_to_f32(Half(f32_to_half(f32::from(v)))), f32::from(v));
        }
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(257.0), 0x4380, "257 ties to even 256");
        assert_eq!(f32_to_bf16(259.0), 0x4382, "259 ties to even 260");
        assert!(f32::from_bits(u32::from(f32_to_bf16(f32::NAN)) << 16).is_nan());
    }
}
