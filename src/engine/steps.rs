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
//! the host clock: operations run one after another, never overlapped. A
//! step's time runs from the barrier to the end of its last operation, so
//! it is its operations' times plus the step's own overhead between them
//! (buffers made ready, a barrier per operation with `--blocking`). Every
//! figure of a step comes from one rank, the step's slowest (a step ends
//! when its last rank does): its step time and each of its operations'
//! times, so that a step's breakdown adds up to its time. The slowest rank
//! is found as each step ends (a gather of step times and a reduction of
//! that rank's operation times, after the clock stops), so that rank 0
//! holds every timed step's figures at any moment (`Timed`): a stop, the
//! watchdog or a dead peer loses none of them.
//!
//! Several configurations run interleaved (`run_all`): each is checked and
//! warmed up, then the timed steps go round the configurations, step 1 of
//! each, step 2 of each, ..., so that a drift of the machine reaches every
//! configuration alike and their steps compare.
//! Must not: print, or know schedules, models or files.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::{Call, LaunchExtras};
use crate::error::Error;
use crate::types::Placement;

use super::Context;
use super::straggler::IterSummary;

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
    /// Per timed step, the step's time on its slowest rank, in
    /// microseconds: from the barrier to the end of its last operation.
    pub step_us: Vec<f64>,
    /// Per timed step, per operation, that same rank's time (us).
    pub op_us: Vec<Vec<f64>>,
    /// Wrong elements over every checked operation and rank; `None` when
    /// checking is off.
    pub wrong: Option<u64>,
    /// The validation passes run over the operations (`-c`; 0: none).
    pub check_passes: u32,
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

    /// Each operation's mean time over the timed steps (us): means add up,
    /// so the operations' means and the overhead's make the mean step.
    pub fn mean_op_us(&self, ops: usize) -> Vec<f64> {
        let n = self.op_us.len().max(1) as f64;
        (0..ops)
            .map(|i| self.op_us.iter().map(|s| s.get(i).copied().unwrap_or(0.0)).sum::<f64>() / n)
            .collect()
    }

    /// The mean step time (us).
    pub fn mean_step_us(&self) -> f64 {
        self.step_us.iter().sum::<f64>() / self.step_us.len().max(1) as f64
    }
}

/// The figures of the steps timed so far, one `Steps` a configuration,
/// on rank 0: shared with what completes its reports at a stop, the
/// watchdog's or a signal's, while a step may still be running.
pub type Timed = Arc<Mutex<Vec<Steps>>>;

/// The figures behind `timed`'s lock (whole even where a panic left it).
pub fn lock(timed: &Timed) -> MutexGuard<'_, Vec<Steps>> {
    timed.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Runs the steps; `Some` on rank 0. Each call names its own group.
pub struct StepRunner<'a> {
    /// The stop request is checked on every rank before each step.
    pub cx: Context<'a>,
    /// The figures so far (rank 0's; `Timed::default()` where nothing
    /// else reads them).
    pub timed: Timed,
    /// Told after each unit of work (a configuration checked, a warm-up
    /// step, a timed step of one configuration): units done, units in all,
    /// what was done (rank 0 shows it as progress).
    pub progress: Option<OnProgress<'a>>,
}

/// `StepRunner::progress`: (done, total, what).
pub type OnProgress<'a> = &'a mut dyn FnMut(u64, u64, &str);

impl StepRunner<'_> {
    /// One configuration's steps (`run_all` with one).
    pub fn run(&mut self, calls: &[Call], t: &StepTiming) -> Result<(Option<Steps>, Option<u64>), Error> {
        let (mut steps, stopped_by) = self.run_all(std::slice::from_ref(&calls.to_vec()), t)?;
        Ok((steps.pop().flatten(), stopped_by))
    }

    /// Every configuration's steps, interleaved (module doc): each one's
    /// figures (`Some` on rank 0), and the signal that stopped them early
    /// on any rank (every rank knows it; the steps timed before it are
    /// kept). Ranks look for a stop before each configuration's check,
    /// each warm-up step and each round of timed steps. On rank 0 the
    /// figures grow in `self.timed` a step at a time (each step's slowest
    /// rank is found as it ends), for reports completed at a stop.
    pub fn run_all(
        &mut self,
        configs: &[Vec<Call>],
        t: &StepTiming,
    ) -> Result<(Vec<Option<Steps>>, Option<u64>), Error> {
        let many = configs.len() > 1;
        let name = |c: usize| {
            if many {
                format!(" of configuration {}", c + 1)
            } else {
                String::new()
            }
        };
        let total = configs.len() as u64 * (1 + u64::from(t.warmup_steps) + u64::from(t.steps));
        let mut done = 0;
        let mut tell = |progress: &mut Option<OnProgress<'_>>, what: String| {
            done += 1;
            if let Some(p) = progress.as_mut() {
                p(done, total, &what);
            }
        };
        let first = self.cx.world.rank() == 0;
        *lock(&self.timed) = vec![Steps::default(); configs.len()];
        let stopped = |runner: &Self| Some(runner.cx.stop_signal()).filter(|&s| s != 0);
        let mut stopped_by = None;
        'run: {
            for (c, calls) in configs.iter().enumerate() {
                if let Some(s) = stopped(self) {
                    stopped_by = Some(s);
                    break 'run;
                }
                let (wrong, failed_ops) = self.check(calls, t.check)?;
                let figures = &mut lock(&self.timed)[c];
                (figures.wrong, figures.failed_ops) = ((t.check > 0).then_some(wrong), failed_ops);
                figures.check_passes = t.check;
                tell(&mut self.progress, format!("checked the operations{}", name(c)));
            }
            for (c, calls) in configs.iter().enumerate() {
                for step in 0..t.warmup_steps {
                    if let Some(s) = stopped(self) {
                        stopped_by = Some(s);
                        break 'run;
                    }
                    self.watch(format!("warm-up step {}{}", step + 1, name(c)));
                    self.step(calls, t.blocking, None)?;
                    tell(&mut self.progress, format!("warm-up step {}{}", step + 1, name(c)));
                }
            }
            for step in 0..t.steps {
                // Ranks stop together, between steps, when any got a signal.
                if let Some(s) = stopped(self) {
                    stopped_by = Some(s);
                    break 'run;
                }
                for (c, calls) in configs.iter().enumerate() {
                    self.watch(format!("step {}{}", step + 1, name(c)));
                    self.timed_step(c, calls, t.blocking)?;
                    tell(
                        &mut self.progress,
                        format!("step {} of {}{}", step + 1, t.steps, name(c)),
                    );
                }
            }
        }
        self.cx.idle();
        let figures = lock(&self.timed).clone();
        Ok((figures.into_iter().map(|f| first.then_some(f)).collect(), stopped_by))
    }

    /// One timed step of configuration `c`, its slowest rank's figures
    /// added to `self.timed` on rank 0.
    fn timed_step(&mut self, c: usize, calls: &[Call], blocking: bool) -> Result<(), Error> {
        let mut ops = Vec::with_capacity(calls.len());
        let took = self.step(calls, blocking, Some(&mut ops))?;
        if let Some((step_us, op_us)) = self.slowest(&[took], &ops, calls.len()) {
            let figures = &mut lock(&self.timed)[c];
            figures.step_us.extend(step_us);
            figures.op_us.extend(op_us);
        }
        Ok(())
    }

    /// On rank 0, per step: the time of the rank whose step took longest
    /// (the lowest such rank on a tie), and that rank's time of each of the
    /// step's `ops` operations, in microseconds. Every rank takes part.
    #[allow(clippy::type_complexity)]
    fn slowest(&self, step_s: &[f64], op_s: &[f64], ops: usize) -> Option<(Vec<f64>, Vec<Vec<f64>>)> {
        let steps = step_s.len();
        let bits: Vec<u64> = step_s.iter().map(|s| s.to_bits()).collect();
        let all = self.cx.world.all_gather_u64s(&bits);
        let me = self.cx.world.rank();
        // each rank offers its operations' times of the steps it was the slowest in
        let mut mine = vec![0.0; steps * ops];
        let mut step_us = Vec::with_capacity(steps);
        for k in 0..steps {
            let (slowest, time) = (0..self.cx.world.size())
                .map(|r| (r, f64::from_bits(all[r * steps + k])))
                .fold(
                    (0, f64::NEG_INFINITY),
                    |best, (r, t)| if t > best.1 { (r, t) } else { best },
                );
            step_us.push(time * 1e6);
            if slowest == me {
                mine[k * ops..(k + 1) * ops].copy_from_slice(&op_s[k * ops..(k + 1) * ops]);
            }
        }
        let ops_of_slowest = self.cx.world.max_f64s_to_root(&mine)?;
        let op_us = ops_of_slowest
            .chunks(ops.max(1))
            .take(steps)
            .map(|c| c.iter().map(|s| s * 1e6).collect())
            .collect();
        Some((step_us, op_us))
    }

    fn watch(&self, what: String) {
        self.cx.watch(|| what);
    }

    /// One step: this rank's seconds from the barrier to the end of its
    /// last operation, and each operation's pushed to `ops`. Each
    /// operation's buffers are made ready before it: the step's own
    /// overhead, not the operation's.
    fn step(&mut self, calls: &[Call], blocking: bool, mut ops: Option<&mut Vec<f64>>) -> Result<f64, Error> {
        self.cx.one_by_one(
            calls.len(),
            blocking,
            |backend, i| backend.prepare(&calls[i]),
            |backend, i| backend.launch(&calls[i], Placement::OutOfPlace, 0, 1),
            |_, took| {
                if let Some(ops) = ops.as_mut() {
                    ops.push(took);
                }
            },
        )
    }

    /// `passes` validation passes over every operation (every rank takes
    /// part in each sum; an operation whose output the backend leaves
    /// undefined is not checked): wrong elements in all, operations found
    /// wrong.
    fn check(&mut self, calls: &[Call], passes: u32) -> Result<(u64, usize), Error> {
        let caps = self.cx.backend.capabilities(&LaunchExtras::default());
        // a step's operations are launched one by one (-G is refused)
        let validate = self.cx.validate(&caps, false);
        let (mut wrong, mut failed) = (0, 0);
        for pass in 0..u64::from(passes) {
            for (i, c) in calls.iter().enumerate() {
                self.watch(format!("checking operation {} of the step", i + 1));
                self.cx.backend.prepare(c)?;
                let seed = pass * calls.len() as u64 + i as u64 + 1;
                if let Some(total) = validate
                    .timed(&mut *self.cx.backend, c, Placement::OutOfPlace, seed)?
                    .wrong
                {
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
    use crate::backend::memory::on_ranks::on_ranks;
    use crate::backend::memory::{Event, Fault, Launched, MemoryBackend};
    use crate::backend::{Backend, SubGroup};
    use crate::clock::VirtualClock;
    use crate::collective::Collective;
    use crate::collective::Layout;
    use crate::topology::Hierarchy;
    use crate::types::{DType, ReduceOp};

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

    /// A runner of `world` on `backend`, timed on `clock`, unchecked
    /// outputs uncorrupted, no watchdog, never stopped.
    fn runner<'a>(
        world: &'a dyn crate::world::World,
        backend: &'a mut MemoryBackend,
        clock: VirtualClock,
    ) -> StepRunner<'a> {
        StepRunner {
            cx: Context::new(world, backend).with_clock(crate::clock::Clock::Virtual(clock)),
            timed: Timed::default(),
            progress: None,
        }
    }

    /// Runs `steps` on 4 rank threads whose groups are pairs {0,1} {2,3};
    /// each operation takes (1 + its sequence number in the step) ms.
    fn on_pairs(timing: StepTiming, fault: fn(usize, &Launched) -> Option<Fault>) -> Vec<Option<Steps>> {
        on_ranks(4, |rank, world, backend, clock| {
            let calls_per_step = 3;
            let mut backend = backend
                .with_delay(move |op: &Launched| Duration::from_millis(1 + op.seq % calls_per_step))
                .with_fault(move |op: &Launched| fault(rank, op));
            let pair = backend.sub_groups().unwrap().split(rank / 2, rank % 2).unwrap();
            let calls = [
                call(Collective::AllReduce, 64, (2, rank % 2), Some(pair), 1),
                call(Collective::AllGather, 64, (4, rank), None, 1),
                call(Collective::SendRecv, 16, (4, rank), None, 2),
            ];
            let mut runner = runner(world, &mut backend, clock);
            runner.run(&calls, &timing).unwrap().0
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
        assert_eq!((steps.wrong, steps.check_passes), (None, 0));
    }

    /// Runs `configs` (each a list of all-reduce element counts) on 2
    /// rank threads without checks; `delay(rank, count)` says what an
    /// operation of `count` elements takes there, in microseconds. Rank
    /// 0's figures, and the counts in the order rank 0 ran them.
    fn two_ranks(configs: &[&[usize]], delay: fn(usize, usize) -> u64) -> (Vec<Steps>, Vec<usize>) {
        on_ranks(2, |rank, world, backend, clock| {
            let mut backend =
                backend.with_delay(move |op: &Launched| Duration::from_micros(delay(rank, op.call.shape.count)));
            let journal = backend.journal();
            let calls: Vec<Vec<Call>> = configs
                .iter()
                .map(|c| {
                    c.iter()
                        .map(|&n| call(Collective::AllReduce, n, (2, rank), None, 1))
                        .collect()
                })
                .collect();
            let mut runner = runner(world, &mut backend, clock);
            let t = StepTiming {
                warmup_steps: 0,
                steps: 2,
                check: 0,
                blocking: false,
            };
            let (steps, stopped) = runner.run_all(&calls, &t).unwrap();
            assert_eq!(stopped, None);
            let order = journal
                .events()
                .into_iter()
                .filter_map(|e| match e {
                    Event::Prepare { count, .. } => Some(count),
                    _ => None,
                })
                .collect();
            (steps.into_iter().flatten().collect::<Vec<_>>(), order)
        })
        .into_iter()
        .next()
        .unwrap()
    }

    #[test]
    fn a_steps_figures_all_come_from_its_slowest_rank_so_they_add_up() {
        // rank 0: 3 + 1 + 1 us; rank 1: 1 + 1 + 4 us. The slowest rank of
        // each operation would sum to 8 us for a 6 us step.
        fn delay(rank: usize, count: usize) -> u64 {
            match (rank, count) {
                (0, 16) => 3,
                (1, 64) => 4,
                _ => 1,
            }
        }
        let (steps, _) = two_ranks(&[&[16, 32, 64]], delay);
        let s = &steps[0];
        assert_eq!(s.step_us, vec![6.0; 2]);
        assert_eq!(s.op_us, vec![vec![1.0, 1.0, 4.0]; 2]);
        // the means add up: operations and overhead (none on a virtual clock)
        let ops: f64 = s.mean_op_us(3).iter().sum();
        assert_eq!((ops, s.mean_step_us()), (6.0, 6.0));
    }

    #[test]
    fn configurations_run_their_timed_steps_in_turn() {
        let (steps, order) = two_ranks(&[&[16], &[32, 48]], |_, count| count as u64);
        // no check, no warm-up: step 1 of each, then step 2 of each
        assert_eq!(order, [16, 32, 48, 16, 32, 48]);
        assert_eq!(steps.len(), 2);
        assert_eq!(steps[0].step_us, vec![16.0; 2]);
        assert_eq!(steps[1].op_us, vec![vec![32.0, 48.0]; 2]);
    }

    #[test]
    fn every_collective_of_the_step_is_validated_on_its_own_group() {
        // the pair all-reduce, the world all-gather and the exchange two
        // places ahead are all exact
        let steps = on_pairs(timing(1), |_, _| None)[0].clone().unwrap();
        assert_eq!((steps.wrong, steps.failed_ops, steps.check_passes), (Some(0), 0, 1));
        // one corrupted element of the exchange on rank 3 (its third call)
        fn corrupt(rank: usize, op: &Launched) -> Option<Fault> {
            (rank == 3 && op.seq == 2).then_some(Fault::Corrupt(1))
        }
        let steps = on_pairs(timing(1), corrupt)[0].clone().unwrap();
        assert_eq!((steps.wrong, steps.failed_ops), (Some(1), 1));
    }
}
