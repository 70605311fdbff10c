//! Adaptive iteration counts (when `-n` is not given): per point, find how
//! long one operation takes, then time as many as fit in `--min-time`,
//! within a floor and a cap. Small messages get thousands of iterations,
//! gigabytes a handful.
//!
//! Calibration runs batches of 1, 2, 4, ... operations until a batch takes
//! at least a tenth of the budget (or the cap is reached); the estimate is
//! the fastest batch's time per operation, so that one batch the system
//! interrupted (a 2-core CI machine preempts often) does not cut the count. Every rank feeds the controller the
//! slowest rank's batch time, so all ranks decide the same count.

use std::time::Duration;

/// Fewest timed iterations of an adaptive point.
pub const MIN_ITERS: u32 = 5;
/// Most timed iterations of an adaptive point.
pub const MAX_ITERS: u32 = 10_000;

#[derive(Clone, Debug)]
pub struct Calibrator {
    budget: f64,
    next: u32,
    done: u32,
    /// The fastest time per operation of any batch so far: a batch that
    /// the system interrupted only looks slower, never faster.
    fastest: f64,
    estimate: Option<f64>,
}

impl Calibrator {
    pub fn new(budget: Duration) -> Calibrator {
        Calibrator {
            budget: budget.as_secs_f64(),
            next: 1,
            done: 0,
            fastest: f64::INFINITY,
            estimate: None,
        }
    }

    /// Size of the next calibration batch, or `None` when calibrated.
    pub fn next_batch(&self) -> Option<u32> {
        (self.estimate.is_none()).then_some(self.next)
    }

    /// `elapsed_s` for the batch of `next_batch()` operations.
    pub fn observe(&mut self, elapsed_s: f64) {
        let batch = self.next;
        self.done += batch;
        let per_op = elapsed_s / f64::from(batch);
        if per_op.is_finite() {
            self.fastest = self.fastest.min(per_op);
        }
        if elapsed_s >= self.budget / 10.0 || self.done >= MAX_ITERS || !per_op.is_finite() {
            self.estimate = Some(if self.fastest.is_finite() { self.fastest } else { per_op });
        } else {
            self.next = batch.saturating_mul(2).min(MAX_ITERS - self.done.min(MAX_ITERS - 1));
        }
    }

    /// Operations calibration has run (extra warm-up, not timed).
    pub fn calibration_iters(&self) -> u32 {
        self.done
    }

    /// The timed iteration count: the budget over the estimate, within the
    /// floor and the cap.
    pub fn iterations(&self) -> u32 {
        match self.estimate {
            Some(t) if t > 0.0 => {
                let n = (self.budget / t).round();
                if n >= f64::from(MAX_ITERS) {
                    MAX_ITERS
                } else {
                    (n as u32).clamp(MIN_ITERS, MAX_ITERS)
                }
            }
            Some(_) => MAX_ITERS,
            None => MIN_ITERS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a calibrator with a synthetic per-operation time.
    fn run(budget_s: f64, per_op: impl Fn(u32) -> f64) -> (u32, u32, Vec<u32>) {
        let mut c = Calibrator::new(Duration::from_secs_f64(budget_s));
        let mut batches = Vec::new();
        while let Some(b) = c.next_batch() {
            batches.push(b);
            let elapsed: f64 = (0..b).map(&per_op).sum();
            c.observe(elapsed);
            assert!(batches.len() < 64, "calibration does not end");
        }
        (c.iterations(), c.calibration_iters(), batches)
    }

    #[test]
    fn small_messages_get_thousands_of_iterations() {
        // 3 us per op, 0.1 s budget: 33334, capped
        let (n, cal, batches) = run(0.1, |_| 3e-6);
        assert_eq!(n, MAX_ITERS);
        assert!(cal <= MAX_ITERS, "{cal}");
        assert_eq!(&batches[..4], &[1, 2, 4, 8]);
        // 50 us per op: 2000
        let (n, _, _) = run(0.1, |_| 50e-6);
        assert_eq!(n, 2000);
    }

    #[test]
    fn large_messages_get_a_handful() {
        // 40 ms per op: the first batch already takes 1/10 of the budget
        let (n, cal, batches) = run(0.1, |_| 0.04);
        assert_eq!((n, cal, batches), (MIN_ITERS, 1, vec![1]));
        let (n, _, _) = run(1.0, |_| 0.04);
        assert_eq!(n, 25);
    }

    #[test]
    fn a_slow_first_operation_does_not_fix_the_count() {
        // the first op is cold (5 ms), then 10 us
        let (n, _, batches) = run(0.1, |i| if i == 0 { 5e-3 } else { 10e-6 });
        assert!(batches.len() > 1, "{batches:?}");
        assert!(n > 1000, "{n}");
    }

    #[test]
    fn one_interrupted_batch_does_not_cut_the_count() {
        // 3 us per op, but the batch of 8 is preempted for 20 ms
        let mut c = Calibrator::new(Duration::from_secs_f64(0.1));
        while let Some(b) = c.next_batch() {
            c.observe(f64::from(b) * 3e-6 + if b == 8 { 0.02 } else { 0.0 });
        }
        assert_eq!(c.iterations(), MAX_ITERS);
    }

    #[test]
    fn counts_stay_within_the_floor_and_the_cap() {
        for per_op in [1e-9, 1e-7, 1e-5, 1e-3, 0.1, 10.0] {
            for budget in [0.001, 0.1, 5.0] {
                let (n, cal, _) = run(budget, |_| per_op);
                assert!((MIN_ITERS..=MAX_ITERS).contains(&n), "{per_op} {budget}: {n}");
                assert!(cal <= MAX_ITERS, "{cal}");
            }
        }
        let (n, _, _) = run(0.1, |_| 0.0);
        assert_eq!(n, MAX_ITERS);
    }
}
