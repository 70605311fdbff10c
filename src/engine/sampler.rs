//! A check's samples (`collbench check`, docs/check.md): every rank runs
//! its own call (on its group: its node's sub-communicator, or the whole
//! job), all groups at once, and each rank's time per operation comes back
//! to every rank, so that the caller can judge each group apart.
//!
//! One sample, per call and placement (out-of-place, then in-place, as
//! nccl-tests' "Avg bus bandwidth" averages both): a barrier of every
//! rank, the clock, `iters` operations launched back to back, wait, the
//! clock (nccl-tests' method, as the sweep's). Validation runs each call
//! once per placement before any sample, and reports this rank's wrong
//! elements (a group's are its ranks' sum).
//!
//! Must not: print, judge, or know profiles and files.

use crate::backend::{Backend, Call, LaunchExtras};
use crate::clock::Clock;
use crate::error::Error;
use crate::types::Placement;
use crate::world::World;

use super::check::Validate;
use super::watchdog::Watchdog;

/// The placements of a sample, in the order they are timed.
pub const PLACEMENTS: [Placement; 2] = [Placement::OutOfPlace, Placement::InPlace];

pub struct Sampler<'a> {
    pub world: &'a dyn World,
    pub backend: &'a mut dyn Backend,
    pub clock: Clock,
    /// Test hook: corrupt the first received element after each check.
    pub inject_error: bool,
    pub watchdog: Option<&'a Watchdog>,
    /// This rank is in no group of the check (a node out of a round of
    /// pairs): it launches nothing, keeps step with the barriers and
    /// reports zero times.
    pub idle: bool,
}

impl Sampler<'_> {
    fn watch(&self, what: impl FnOnce() -> String) {
        if let Some(w) = self.watchdog {
            w.watch(what());
        }
    }

    /// Validates each call in both placements: this rank's wrong elements
    /// (`None` when the backend checks none of them). No collective of
    /// the control plane: every rank validates its own output.
    pub fn validate(&mut self, calls: &[Call], seed: u64) -> Result<Option<u64>, Error> {
        if self.idle {
            return Ok(None);
        }
        let caps = self.backend.capabilities(&LaunchExtras::default());
        let validate = Validate {
            world: self.world,
            caps: &caps,
            inject_error: self.inject_error,
            through_graph: false,
            clock: self.clock.clone(),
        };
        let mut wrong = None;
        for (i, call) in calls.iter().enumerate() {
            self.watch(|| {
                format!(
                    "checking {} of {} B",
                    call.collective,
                    call.shape.size_bytes(call.dtype)
                )
            });
            self.backend.prepare(call)?;
            for (p, placement) in PLACEMENTS.into_iter().enumerate() {
                let seed = seed + 2 * i as u64 + p as u64;
                if let Some(w) = validate.local(&mut *self.backend, call, placement, seed)? {
                    wrong = Some(wrong.unwrap_or(0) + w);
                }
            }
        }
        Ok(wrong)
    }

    /// `ops` untimed operations of each call in each placement.
    pub fn warm_up(&mut self, calls: &[Call], ops: u32) -> Result<(), Error> {
        for call in calls.iter().filter(|_| !self.idle) {
            self.watch(|| format!("warming up {}", call.collective));
            self.backend.prepare(call)?;
            for placement in PLACEMENTS {
                for i in 0..ops {
                    self.backend.launch(call, placement, u64::from(i), 1)?;
                }
                self.backend.wait()?;
            }
        }
        self.world.barrier();
        Ok(())
    }

    /// One sample: every rank's seconds per operation of each call in each
    /// placement, rank-major (`[rank][2 * call + placement]`), on every
    /// rank.
    pub fn sample(&mut self, calls: &[Call], iters: u32) -> Result<Vec<Vec<f64>>, Error> {
        let iters = iters.max(1);
        let mut mine = Vec::with_capacity(calls.len() * PLACEMENTS.len());
        for call in calls {
            if self.idle {
                // the same barriers as a rank that runs the call
                PLACEMENTS.iter().for_each(|_| self.world.barrier());
                mine.extend([0.0; PLACEMENTS.len()]);
                continue;
            }
            self.backend.prepare(call)?;
            for placement in PLACEMENTS {
                self.watch(|| format!("sampling {} in {}", call.collective, placement.name()));
                self.world.barrier();
                let start = self.clock.now();
                for i in 0..iters {
                    self.backend.launch(call, placement, u64::from(i), 1)?;
                }
                self.backend.wait()?;
                mine.push(self.clock.seconds_since(start) / f64::from(iters));
            }
        }
        if let Some(w) = self.watchdog {
            w.idle();
        }
        let bits: Vec<u64> = mine.iter().map(|s| s.to_bits()).collect();
        let all = self.world.all_gather_u64s(&bits);
        Ok(all
            .chunks(mine.len().max(1))
            .map(|r| r.iter().map(|b| f64::from_bits(*b)).collect())
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::SubGroup;
    use crate::backend::memory::on_ranks::on_ranks;
    use crate::backend::memory::{Fault, Launched};
    use crate::collective::{Collective, Layout};
    use crate::topology::Hierarchy;
    use crate::types::{DType, ReduceOp};

    fn all_reduce(count: usize, n: usize, index: usize, group: Option<SubGroup>) -> Call {
        let spec = Collective::AllReduce.spec();
        Call {
            collective: Collective::AllReduce,
            hierarchy: Hierarchy::Flat,
            dtype: DType::Float,
            op: Some(ReduceOp::Sum),
            shape: spec.shape(count, n),
            at: Layout::new(n, index, 0),
            group,
        }
    }

    /// 4 rank threads in two groups {0,1} {2,3}; an operation of rank r
    /// takes (1 + r) ms; rank 3 corrupts what it receives when `corrupt`.
    fn on_pairs(corrupt: bool) -> Vec<(Option<u64>, Vec<Vec<f64>>)> {
        on_ranks(4, |rank, world, backend, clock| {
            let mut backend = backend
                .with_delay(move |_: &Launched| Duration::from_millis(1 + rank as u64))
                .with_fault(move |_: &Launched| (corrupt && rank == 3).then_some(Fault::Corrupt(1)));
            let pair = backend.sub_groups().unwrap().split(rank / 2, rank % 2).unwrap();
            let calls = [all_reduce(64, 2, rank % 2, Some(pair))];
            let mut sampler = Sampler {
                world,
                backend: &mut backend,
                clock: Clock::Virtual(clock),
                inject_error: false,
                watchdog: None,
                idle: false,
            };
            let wrong = sampler.validate(&calls, 1).unwrap();
            sampler.warm_up(&calls, 2).unwrap();
            let sample = sampler.sample(&calls, 4).unwrap();
            (wrong, sample)
        })
    }

    #[test]
    fn every_rank_gets_every_ranks_time_per_operation_in_both_placements() {
        let all = on_pairs(false);
        for (wrong, sample) in &all {
            assert_eq!(*wrong, Some(0));
            assert_eq!(sample.len(), 4, "one row per rank");
            for (rank, row) in sample.iter().enumerate() {
                let ms = 1e-3 * (1 + rank) as f64;
                assert_eq!(row.len(), 2, "out-of-place and in-place");
                for t in row {
                    assert!((t - ms).abs() < 1e-12, "rank {rank}: {t}");
                }
            }
        }
    }

    #[test]
    fn wrong_elements_stay_with_the_rank_that_received_them() {
        let all = on_pairs(true);
        let wrong: Vec<Option<u64>> = all.iter().map(|(w, _)| *w).collect();
        assert_eq!(wrong[..3], [Some(0), Some(0), Some(0)]);
        assert!(wrong[3].unwrap() > 0, "{wrong:?}");
    }
}
