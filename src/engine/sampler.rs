//! A check's samples (`collbench check`, docs/check.md): every rank runs
//! its own call (on its group: its node's sub-communicator, or the whole
//! job), all groups at once, and each rank's time per operation comes back
//! to every rank, so that the caller can judge each group apart.
//!
//! One sample, per call and placement (out-of-place, then in-place, as
//! nccl-tests' "Avg bus bandwidth" averages both): a barrier of every
//! rank, the clock, `iters` operations launched back to back, wait, the
//! clock (`Context::batch`, nccl-tests' method, as the sweep's).
//! Validation runs each call once per placement before any sample, and
//! reports this rank's wrong elements (a group's are its ranks' sum).
//!
//! `Sampler::run` is a check's whole loop: validate, warm up, then samples
//! until their count, the soak's end or a stop signal (which the ranks
//! agree on before every sample), each handed to the caller as it comes
//! (as the sweep hands each record to its sinks).
//!
//! Must not: print, judge, or know profiles and files.

use std::time::Duration;

use crate::backend::{Call, LaunchExtras};
use crate::error::Error;
use crate::types::Placement;

use super::Context;

/// The placements of a sample, in the order they are timed.
pub const PLACEMENTS: [Placement; 2] = [Placement::OutOfPlace, Placement::InPlace];

pub struct Sampler<'a> {
    pub cx: Context<'a>,
    /// This rank is in no group of the check (a node out of a round of
    /// pairs): it launches nothing, keeps step with the barriers and
    /// reports zero times.
    pub idle: bool,
}

/// How one check is sampled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sampling {
    /// Samples to take (a soak: `usize::MAX`, until `until` or a stop).
    pub samples: usize,
    /// Operations per sample, back to back.
    pub iters: u32,
    /// Untimed operations of each call in each placement first.
    pub warmup: u32,
    /// Validate each call once in both placements first (seeds from
    /// `seed` on).
    pub check: bool,
    pub seed: u64,
    /// A soak's length: rank 0 ends the sampling once it has run this long.
    pub until: Option<Duration>,
}

/// What sampling one check gave this rank.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sampled {
    /// This rank's wrong elements (`None`: not checked, or nothing here
    /// checked).
    pub wrong: Option<u64>,
    /// Samples taken.
    pub taken: usize,
    /// The signal that stopped the sampling on any rank.
    pub stopped_by: Option<u64>,
    /// Seconds from the first sample to the end of the last.
    pub elapsed_s: f64,
}

impl Sampler<'_> {
    /// Validates, warms up, then samples until `how.samples`, the soak's
    /// end or a stop signal (which the ranks agree on before every
    /// sample). `on_sample(times, index, elapsed_s)` gets each sample on
    /// every rank (`sample`'s times, seconds since the first sample); an
    /// error from it ends the sampling on that rank.
    pub fn run(
        &mut self,
        calls: &[Call],
        how: &Sampling,
        mut on_sample: impl FnMut(&[Vec<f64>], usize, f64) -> Result<(), Error>,
    ) -> Result<Sampled, Error> {
        let wrong = if how.check {
            self.validate(calls, how.seed)?
        } else {
            None
        };
        self.warm_up(calls, how.warmup)?;
        let clock = self.cx.clock.clone();
        let first = self.cx.world.rank() == 0;
        let start = clock.now();
        let mut out = Sampled {
            wrong,
            ..Sampled::default()
        };
        while out.taken < how.samples {
            let expired = first && how.until.is_some_and(|d| clock.now().saturating_sub(start) >= d);
            let flag = self.cx.world.max_u64((self.cx.stop.signal() << 1) | u64::from(expired));
            if flag >> 1 != 0 {
                out.stopped_by = Some(flag >> 1);
                break;
            }
            if flag & 1 != 0 {
                break;
            }
            let times = self.sample(calls, how.iters)?;
            on_sample(&times, out.taken, clock.seconds_since(start))?;
            out.taken += 1;
        }
        out.elapsed_s = clock.seconds_since(start);
        Ok(out)
    }

    /// Validates each call in both placements: this rank's wrong elements
    /// (`None` when the backend checks none of them). No collective of
    /// the control plane: every rank validates its own output.
    pub fn validate(&mut self, calls: &[Call], seed: u64) -> Result<Option<u64>, Error> {
        if self.idle {
            return Ok(None);
        }
        let caps = self.cx.backend.capabilities(&LaunchExtras::default());
        let validate = self.cx.validate(&caps, false);
        let mut wrong = None;
        for (i, call) in calls.iter().enumerate() {
            self.cx.watch(|| {
                format!(
                    "checking {} of {} B",
                    call.collective,
                    call.shape.size_bytes(call.dtype)
                )
            });
            self.cx.backend.prepare(call)?;
            for (p, placement) in PLACEMENTS.into_iter().enumerate() {
                let seed = seed + 2 * i as u64 + p as u64;
                if let Some(w) = validate.local(&mut *self.cx.backend, call, placement, seed)? {
                    wrong = Some(wrong.unwrap_or(0) + w);
                }
            }
        }
        Ok(wrong)
    }

    /// `ops` untimed operations of each call in each placement.
    pub fn warm_up(&mut self, calls: &[Call], ops: u32) -> Result<(), Error> {
        for call in calls.iter().filter(|_| !self.idle) {
            self.cx.watch(|| format!("warming up {}", call.collective));
            self.cx.backend.prepare(call)?;
            for placement in PLACEMENTS {
                for i in 0..ops {
                    self.cx.backend.launch(call, placement, u64::from(i), 1)?;
                }
                self.cx.backend.wait()?;
            }
        }
        self.cx.world.barrier();
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
                PLACEMENTS.iter().for_each(|_| self.cx.world.barrier());
                mine.extend([0.0; PLACEMENTS.len()]);
                continue;
            }
            self.cx.backend.prepare(call)?;
            for placement in PLACEMENTS {
                self.cx
                    .watch(|| format!("sampling {} in {}", call.collective, placement.name()));
                let took = self
                    .cx
                    .batch(iters, |backend, i, _| backend.launch(call, placement, u64::from(i), 1))?;
                mine.push(took / f64::from(iters));
            }
        }
        self.cx.idle();
        let bits: Vec<u64> = mine.iter().map(|s| s.to_bits()).collect();
        let all = self.cx.world.all_gather_u64s(&bits);
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
    use crate::backend::Backend;
    use crate::backend::SubGroup;
    use crate::backend::memory::on_ranks::on_ranks;
    use crate::backend::memory::{Fault, Launched};
    use crate::clock::Clock;
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
                cx: Context::new(world, &mut backend).with_clock(Clock::Virtual(clock)),
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
