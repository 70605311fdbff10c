//! A workload's steps: the operations of one training step (or of a
//! replayed log), each on its own sub-communicator, validated once, then
//! run step after step and timed one by one.
//!
//! Every rank issues the same sequence; an operation runs on this rank's
//! group of its kind (the caller built the groups once with
//! `SubGroups::split` and gives each call's handle), so every rank takes
//! part in its own group's operation at the same time. Each call's
//! `Layout` is the group's: validation uses the group's size and this
//! rank's index in it, and the wrong elements of every group are summed
//! over all ranks, so every collective of the step is verified.
//!
//! Timing: a barrier before each step (before each operation with
//! `--blocking`), then each operation is launched and waited for alone, on
//! the host clock: operations run one after another, never overlapped.
//! Times are the slowest rank's: a step ends when its last rank does.
//! Must not: print, or know schedules, models or files.

use crate::backend::{Backend, Call, SubGroups};
use crate::clock::Clock;
use crate::collective::{Collective, Pattern};
use crate::error::Error;
use crate::types::Placement;
use crate::world::World;

use super::watchdog::Watchdog;

/// One operation of the step, as this rank issues it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StepCall {
    /// Its `at` is this rank's group: size, index, root's index.
    pub call: Call,
    /// The group's communicator (`SubGroups::split`); `None` is the world.
    pub handle: Option<usize>,
    /// For sendrecv: places ahead the data goes (1: the ring).
    pub shift: usize,
}

/// How the steps run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepTiming {
    /// Untimed steps before the first timed one.
    pub warmup_steps: u32,
    pub steps: u32,
    /// Validation passes over the step's operations; 0 turns checking off.
    pub check: u32,
    /// A barrier before every operation instead of before every step.
    pub blocking: bool,
}

/// What the steps gave, on rank 0.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Steps {
    /// Per timed step, the slowest rank's step time in microseconds.
    pub step_us: Vec<f64>,
    /// Per timed step, per operation, the slowest rank's time (us).
    pub op_us: Vec<Vec<f64>>,
    /// Wrong elements over every checked operation and rank; `None` when
    /// checking is off.
    pub wrong: Option<u64>,
    /// Operations found wrong.
    pub failed_ops: usize,
}

/// Runs the steps; `Some` on rank 0. The caller has selected nothing: each
/// call selects its own group.
pub struct StepRunner<'a> {
    pub world: &'a dyn World,
    pub backend: &'a mut dyn Backend,
    pub clock: Clock,
    /// Test hook: corrupt the first received element after each check.
    pub inject_error: bool,
    pub watchdog: Option<&'a Watchdog>,
}

impl StepRunner<'_> {
    pub fn run(&mut self, calls: &[StepCall], t: &StepTiming) -> Result<Option<Steps>, Error> {
        let (wrong, failed_ops) = self.check(calls, t.check)?;
        for step in 0..t.warmup_steps {
            self.watch(format!("warm-up step {}", step + 1));
            self.step(calls, t.blocking, None)?;
        }
        let mut step_s = Vec::with_capacity(t.steps as usize);
        let mut op_s = Vec::with_capacity(t.steps as usize * calls.len());
        for step in 0..t.steps {
            self.watch(format!("step {}", step + 1));
            step_s.push(self.step(calls, t.blocking, Some(&mut op_s))?);
        }
        if let Some(w) = self.watchdog {
            w.idle();
        }
        let steps = self.world.max_f64s_to_root(&step_s);
        let ops = self.world.max_f64s_to_root(&op_s);
        Ok(steps.zip(ops).map(|(steps, ops)| Steps {
            step_us: steps.iter().map(|s| s * 1e6).collect(),
            op_us: ops
                .chunks(calls.len().max(1))
                .map(|c| c.iter().map(|s| s * 1e6).collect())
                .collect(),
            wrong: (t.check > 0).then_some(wrong),
            failed_ops,
        }))
    }

    fn watch(&self, what: String) {
        if let Some(w) = self.watchdog {
            w.watch(what);
        }
    }

    fn groups(&mut self) -> Result<&mut dyn SubGroups, Error> {
        self.backend
            .sub_groups()
            .ok_or_else(|| Error::usage("this backend has no sub-communicators for a workload's groups"))
    }

    /// Selects the call's group and makes its buffers ready (untimed).
    fn ready(&mut self, c: &StepCall) -> Result<(), Error> {
        self.groups()?.select(c.handle, c.shift)?;
        self.backend.prepare(&c.call)
    }

    /// One step: this rank's seconds, and each operation's pushed to `ops`.
    fn step(&mut self, calls: &[StepCall], blocking: bool, mut ops: Option<&mut Vec<f64>>) -> Result<f64, Error> {
        self.world.barrier();
        let mut total = 0.0;
        for c in calls {
            self.ready(c)?;
            if blocking {
                self.world.barrier();
            }
            let start = self.clock.now();
            self.backend.launch(&c.call, Placement::OutOfPlace, 0, 1)?;
            self.backend.wait()?;
            let took = self.clock.seconds_since(start);
            total += took;
            if let Some(ops) = ops.as_mut() {
                ops.push(took);
            }
        }
        Ok(total)
    }

    /// `passes` validation passes over every operation (every rank takes
    /// part in each sum): wrong elements in all, operations found wrong.
    fn check(&mut self, calls: &[StepCall], passes: u32) -> Result<(u64, usize), Error> {
        let (mut wrong, mut failed) = (0, 0);
        for pass in 0..u64::from(passes) {
            for (i, c) in calls.iter().enumerate() {
                self.watch(format!("checking operation {} of the step", i + 1));
                self.ready(c)?;
                let seed = pass * calls.len() as u64 + i as u64 + 1;
                let found = self.check_one(c, seed)?;
                let total = self.world.sum_u64(found);
                wrong += total;
                failed += usize::from(total > 0);
            }
        }
        Ok((wrong, failed))
    }

    fn check_one(&mut self, c: &StepCall, seed: u64) -> Result<u64, Error> {
        let call = &c.call;
        let spec = call.collective.spec();
        let pattern = Pattern::new(call.dtype, call.op, call.at.nranks, seed);
        let rank = call.at.rank;
        self.backend
            .load_input(call, Placement::OutOfPlace, &|i| pattern.input(rank, i))?;
        self.backend.launch(call, Placement::OutOfPlace, 0, 1)?;
        self.backend.wait()?;
        let (out, range) = self.backend.output(call, Placement::OutOfPlace)?;
        if self.inject_error && !range.is_empty() {
            let at = range.start * call.dtype.size_bytes();
            out.bytes_mut()[at] ^= 0x5a;
        }
        let n = call.at.nranks.max(1);
        let from = (rank + n - c.shift % n) % n;
        let want = |i| match call.collective {
            // a shifted exchange receives from `shift` places before
            Collective::SendRecv => pattern.input(from, i),
            _ => spec.expected(&pattern, &call.shape, &call.at, i),
        };
        Ok(match pattern.relative_bound() {
            Some(bound) => out.count_outside(range, want, bound),
            None => out.count_mismatches(range, want),
        })
    }
}
