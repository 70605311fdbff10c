//! A workload's steps: the operations of one training step (or of a
//! replayed log), each on its own sub-communicator, validated once, then
//! run step after step and timed one by one.
//!
//! Every rank issues the same sequence; an operation runs on this rank's
//! group of its kind (the caller built the groups once with
//! `SubGroups::split`, and each call names its own), so every rank takes
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

use crate::backend::{Backend, Call, LaunchExtras};
use crate::clock::Clock;
use crate::error::Error;
use crate::types::Placement;
use crate::world::World;

use super::check::Validate;
use super::stop::StopRequest;
use super::straggler::IterSummary;
use super::watchdog::Watchdog;

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

impl Steps {
    /// Each of the step's `ops` operations' distribution over the timed
    /// steps (the slowest rank's times); `None` without timed steps.
    pub fn per_op(&self, ops: usize) -> Vec<Option<IterSummary>> {
        (0..ops)
            .map(|i| IterSummary::of(&self.op_us.iter().map(|s| s[i]).collect::<Vec<f64>>()))
            .collect()
    }

    /// The distribution of the step times; `None` without timed steps.
    pub fn per_step(&self) -> Option<IterSummary> {
        IterSummary::of(&self.step_us)
    }
}

/// Runs the steps; `Some` on rank 0. Each call names its own group.
pub struct StepRunner<'a> {
    pub world: &'a dyn World,
    pub backend: &'a mut dyn Backend,
    pub clock: Clock,
    /// Test hook: corrupt the first received element after each check.
    pub inject_error: bool,
    pub watchdog: Option<&'a Watchdog>,
    /// Checked on every rank before each step.
    pub stop: StopRequest,
}

impl StepRunner<'_> {
    /// The steps' figures (`Some` on rank 0), and the signal that stopped
    /// them early on any rank (every rank knows it; the steps timed before
    /// it are kept).
    pub fn run(&mut self, calls: &[Call], t: &StepTiming) -> Result<(Option<Steps>, Option<u64>), Error> {
        let (wrong, failed_ops) = self.check(calls, t.check)?;
        for step in 0..t.warmup_steps {
            self.watch(format!("warm-up step {}", step + 1));
            self.step(calls, t.blocking, None)?;
        }
        let mut step_s = Vec::with_capacity(t.steps as usize);
        let mut op_s = Vec::with_capacity(t.steps as usize * calls.len());
        let mut stopped_by = None;
        for step in 0..t.steps {
            // Ranks stop together, between steps, when any got a signal.
            let signal = self.world.max_u64(self.stop.signal());
            if signal != 0 {
                stopped_by = Some(signal);
                break;
            }
            self.watch(format!("step {}", step + 1));
            step_s.push(self.step(calls, t.blocking, Some(&mut op_s))?);
        }
        if let Some(w) = self.watchdog {
            w.idle();
        }
        let steps = self.world.max_f64s_to_root(&step_s);
        let ops = self.world.max_f64s_to_root(&op_s);
        let steps = steps.zip(ops).map(|(steps, ops)| Steps {
            step_us: steps.iter().map(|s| s * 1e6).collect(),
            op_us: ops
                .chunks(calls.len().max(1))
                .map(|c| c.iter().map(|s| s * 1e6).collect())
                .collect(),
            wrong: (t.check > 0).then_some(wrong),
            failed_ops,
        });
        Ok((steps, stopped_by))
    }

    fn watch(&self, what: String) {
        if let Some(w) = self.watchdog {
            w.watch(what);
        }
    }

    /// One step: this rank's seconds, and each operation's pushed to `ops`.
    fn step(&mut self, calls: &[Call], blocking: bool, mut ops: Option<&mut Vec<f64>>) -> Result<f64, Error> {
        self.world.barrier();
        let mut total = 0.0;
        for c in calls {
            // its buffers made ready, untimed
            self.backend.prepare(c)?;
            if blocking {
                self.world.barrier();
            }
            let start = self.clock.now();
            self.backend.launch(c, Placement::OutOfPlace, 0, 1)?;
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
    /// part in each sum; an operation whose output the backend leaves
    /// undefined is not checked): wrong elements in all, operations found
    /// wrong.
    fn check(&mut self, calls: &[Call], passes: u32) -> Result<(u64, usize), Error> {
        let caps = self.backend.capabilities(&LaunchExtras::default());
        let validate = Validate {
            world: self.world,
            caps: &caps,
            // a step's operations are launched one by one (-G is refused)
            through_graph: false,
            inject_error: self.inject_error,
        };
        let (mut wrong, mut failed) = (0, 0);
        for pass in 0..u64::from(passes) {
            for (i, c) in calls.iter().enumerate() {
                self.watch(format!("checking operation {} of the step", i + 1));
                self.backend.prepare(c)?;
                let seed = pass * calls.len() as u64 + i as u64 + 1;
                if let Some(total) = validate.once(&mut *self.backend, c, Placement::OutOfPlace, seed)? {
                    wrong += total;
                    failed += usize::from(total > 0);
                }
            }
        }
        Ok((wrong, failed))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::SubGroup;
    use crate::backend::memory::{Fault, Launched, MemoryBackend};
    use crate::clock::VirtualClock;
    use crate::collective::Collective;
    use crate::collective::Layout;
    use crate::topology::Hierarchy;
    use crate::types::{DType, ReduceOp};
    use crate::world::threads::ThreadWorld;

    /// One call on this rank's group: `n` ranks, this rank at `index`, on
    /// `group`, a sendrecv `shift` places ahead.
    fn call(
        collective: Collective,
        count: usize,
        (n, index): (usize, usize),
        group: Option<SubGroup>,
        shift: usize,
    ) -> Call {
        let spec = collective.spec();
        Call {
            collective,
            hierarchy: Hierarchy::Flat,
            dtype: DType::Float,
            op: spec.is_reduction().then_some(ReduceOp::Sum),
            shape: spec.shape(count, n),
            at: Layout {
                nranks: n,
                rank: index,
                root: 0,
                shift,
            },
            group,
        }
    }

    /// Runs `steps` on 4 rank threads whose groups are pairs {0,1} {2,3};
    /// each operation takes (1 + its sequence number in the step) ms.
    fn on_pairs(timing: StepTiming, fault: fn(usize, &Launched) -> Option<Fault>) -> Vec<Option<Steps>> {
        let worlds = ThreadWorld::create(4);
        let backends = MemoryBackend::create(4).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = worlds
                .iter()
                .zip(backends)
                .enumerate()
                .map(|(rank, (world, backend))| {
                    s.spawn(move || {
                        let clock = VirtualClock::new();
                        let calls_per_step = 3;
                        let mut backend = backend
                            .with_clock(clock.clone())
                            .with_delay(move |op: &Launched| Duration::from_millis(1 + op.seq % calls_per_step))
                            .with_fault(move |op: &Launched| fault(rank, op));
                        let pair = backend.sub_groups().unwrap().split(rank / 2, rank % 2).unwrap();
                        let calls = [
                            call(Collective::AllReduce, 64, (2, rank % 2), Some(pair), 1),
                            call(Collective::AllGather, 64, (4, rank), None, 1),
                            call(Collective::SendRecv, 16, (4, rank), None, 2),
                        ];
                        let mut runner = StepRunner {
                            world,
                            backend: &mut backend,
                            clock: Clock::Virtual(clock),
                            inject_error: false,
                            watchdog: None,
                            stop: StopRequest::never(),
                        };
                        runner.run(&calls, &timing).unwrap().0
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    fn timing(check: u32) -> StepTiming {
        StepTiming {
            warmup_steps: 1,
            steps: 2,
            check,
            blocking: false,
        }
    }

    #[test]
    fn each_operation_runs_on_its_group_and_is_timed_alone_step_by_step() {
        // without checks every step's operations are sequence 0, 1, 2 mod 3
        let all = on_pairs(timing(0), |_, _| None);
        assert!(all[1..].iter().all(Option::is_none));
        let steps = all[0].clone().unwrap();
        assert_eq!(steps.op_us, vec![vec![1000.0, 2000.0, 3000.0]; 2]);
        assert_eq!(steps.step_us, vec![6000.0; 2]);
        assert_eq!(steps.wrong, None);
    }

    #[test]
    fn every_collective_of_the_step_is_validated_on_its_own_group() {
        // the pair all-reduce, the world all-gather and the exchange two
        // places ahead are all exact
        let steps = on_pairs(timing(1), |_, _| None)[0].clone().unwrap();
        assert_eq!((steps.wrong, steps.failed_ops), (Some(0), 0));
        // one corrupted element of the exchange on rank 3 (its third call)
        fn corrupt(rank: usize, op: &Launched) -> Option<Fault> {
            (rank == 3 && op.seq == 2).then_some(Fault::Corrupt(1))
        }
        let steps = on_pairs(timing(1), corrupt)[0].clone().unwrap();
        assert_eq!((steps.wrong, steps.failed_ops), (Some(1), 1));
    }
}
