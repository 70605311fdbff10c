//! What every measurement of the engine runs with, and the two timed loops
//! they all go through.
//!
//! A `Context` is one rank's world, backend and clock, with the run's
//! watchdog, stop request and test hook. The sweep (`Engine`), a
//! workload's steps (`steps::StepRunner`), a check's samples
//! (`sampler::Sampler`) and the links pairs (`pairs`) each hold one, so
//! that they share the same set-up and the same way of timing:
//!
//! - `batch`: a barrier of every rank, the clock, `n` operations launched
//!   back to back, wait, the clock (nccl-tests' method; OSU's per batch).
//!   Every back-to-back measurement is one of these.
//! - `one_by_one`: a barrier, then operations each launched and waited for
//!   alone, each timed (a barrier before each with `--blocking`, OSU's
//!   method; a workload's steps without it).
//!
//! Nothing in a timed region allocates, prints or checks.
//! Must not: print, judge, or know plans, schedules or files.

use std::time::Duration;

use crate::backend::Backend;
use crate::clock::Clock;
use crate::error::Error;
use crate::plan::Capabilities;
use crate::world::World;

use super::check::Validate;
use super::stop::StopRequest;
use super::watchdog::Watchdog;

/// One rank's means of measuring.
pub struct Context<'a> {
    pub world: &'a dyn World,
    pub backend: &'a mut dyn Backend,
    /// Where times are read: the host clock, or a test's virtual clock.
    pub clock: Clock,
    /// Each step is watched (`--timeout`).
    pub watchdog: Option<&'a Watchdog>,
    /// A signal on any rank ends the measurement at the next boundary the
    /// ranks agree on.
    pub stop: StopRequest,
    /// Test hook: after each check, every rank with an output corrupts its
    /// first received element, so that validation must fail.
    pub inject_error: bool,
}

impl<'a> Context<'a> {
    /// On the host clock, unwatched, never stopped, nothing corrupted.
    pub fn new(world: &'a dyn World, backend: &'a mut dyn Backend) -> Self {
        Context {
            world,
            backend,
            clock: Clock::Host,
            watchdog: None,
            stop: StopRequest::never(),
            inject_error: false,
        }
    }

    /// Times are read from `clock` (a test's virtual clock).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Every step is watched by `watchdog`.
    pub fn with_watchdog(mut self, watchdog: Option<&'a Watchdog>) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// The measurement stops at its next boundary when `stop` fires on any
    /// rank.
    pub fn with_stop(mut self, stop: StopRequest) -> Self {
        self.stop = stop;
        self
    }

    /// Test hook: every check's output is corrupted (`inject_error`).
    pub fn with_injected_errors(mut self, inject: bool) -> Self {
        self.inject_error = inject;
        self
    }

    /// The watchdog now watches `what` (made only when there is one).
    pub fn watch(&self, what: impl FnOnce() -> String) {
        if let Some(w) = self.watchdog {
            w.watch(what());
        }
    }

    /// Nothing is being measured (the watchdog rests).
    pub fn idle(&self) {
        if let Some(w) = self.watchdog {
            w.idle();
        }
    }

    /// The signal any rank received, agreed by every rank (0: none); every
    /// rank takes part.
    pub fn stop_signal(&self) -> u64 {
        self.world.max_u64(self.stop.signal())
    }

    /// The validation of this context's backend, as `caps` defines its
    /// outputs (`through_graph`: `-G`).
    pub fn validate<'c>(&self, caps: &'c Capabilities, through_graph: bool) -> Validate<'c>
    where
        'a: 'c,
    {
        Validate {
            world: self.world,
            caps,
            through_graph,
            inject_error: self.inject_error,
            clock: self.clock.clone(),
        }
    }

    /// The timed batch: a barrier of every rank, the clock, `n` operations
    /// (`op(backend, i, start)` for i in 0..n, `start` the first reading)
    /// launched back to back, wait for all of them, the clock; the seconds
    /// between the two readings.
    pub fn batch(
        &mut self,
        n: u32,
        mut op: impl FnMut(&mut dyn Backend, u32, Duration) -> Result<(), Error>,
    ) -> Result<f64, Error> {
        self.world.barrier();
        let start = self.clock.now();
        for i in 0..n {
            op(&mut *self.backend, i, start)?;
        }
        self.backend.wait()?;
        Ok(self.clock.seconds_since(start))
    }

    /// Operations timed one by one: a barrier of every rank, the clock;
    /// then for each of the `n` operations, `prepare(backend, i)` (untimed:
    /// buffers made ready), a barrier with `barrier_each`, the operation
    /// (`op(backend, i)`) launched and waited for alone, its seconds given
    /// to `took(i, seconds)`. Returns the seconds from the first reading to
    /// the end of the last operation (the operations and what came between
    /// them).
    pub fn one_by_one(
        &mut self,
        n: usize,
        barrier_each: bool,
        mut prepare: impl FnMut(&mut dyn Backend, usize) -> Result<(), Error>,
        mut op: impl FnMut(&mut dyn Backend, usize) -> Result<(), Error>,
        mut took: impl FnMut(usize, f64),
    ) -> Result<f64, Error> {
        self.world.barrier();
        let first = self.clock.now();
        for i in 0..n {
            prepare(&mut *self.backend, i)?;
            if barrier_each {
                self.world.barrier();
            }
            let start = self.clock.now();
            op(&mut *self.backend, i)?;
            self.backend.wait()?;
            took(i, self.clock.seconds_since(start));
        }
        Ok(self.clock.seconds_since(first))
    }
}
