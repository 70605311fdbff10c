//! The precision-driven iteration policy, the default when neither `-n`
//! nor `--min-time` is given: time a point in batches until the median of
//! the batch times is known well enough, or a time cap is reached.
//!
//! A batch is nccl-tests' timed region in small (barrier, clock, `ops`
//! operations back to back, wait; with `--blocking` each of the `ops`
//! operations is timed alone after a barrier and the times are summed).
//! First, calibration batches of 1, 2, 4, ... operations (extra warm-up,
//! never reported) run until one lasts `BATCH_S` (and at least two ran);
//! the timed batches then hold the power of two of operations that makes
//! `BATCH_S` at the fastest time per operation seen, so that a preempted
//! calibration batch, which only looks slower, cannot shrink them. Then timed
//! batches of that many operations run until
//! - the 95% confidence interval of the median batch time is narrower than
//!   the target (its half-width relative to the median, `--precision`),
//!   after at least `MIN_BATCHES` batches; or
//! - the timed batches have taken `--max-time` and there are at least
//!   `MIN_CI_BATCHES` (the fewest for which a 95% interval of a median
//!   exists); or
//! - `MAX_BATCHES` batches ran.
//!
//! The interval is the distribution-free one of order statistics
//! (Conover, Practical Nonparametric Statistics, 3rd ed., section 3.2;
//! `stats::relative_half_width`):
//! `[x(l), x(k+1-l)]` with the largest `l` for which a Binomial(k, 1/2) is
//! below `l` with probability at most 2.5%. It assumes nothing about the
//! shape of the times, and a batch the system preempted moves it by one
//! order statistic, not by its length.
//!
//! Every rank feeds the policy the slowest rank's time of each batch, so
//! all ranks stop after the same batch. This module only decides; it
//! never times, prints or talks to other ranks.

use std::time::Duration;

use crate::stats::relative_half_width;

/// Fewest timed batches before the target may stop a point.
pub const MIN_BATCHES: usize = 10;
/// Fewest timed batches for which a 95% interval of the median exists
/// (six: all on one side has probability 2 / 2^6 = 3.1%); the time cap
/// stops a point no earlier.
pub const MIN_CI_BATCHES: usize = 6;
/// Most timed batches of a point.
pub const MAX_BATCHES: usize = 1000;
/// A batch lasts at least this long (once calibrated). The clock starts
/// after a barrier, so what a batch adds is the ranks' skew leaving it
/// (about 1 us on one node: 0.5% of a batch); short batches are what keep
/// the median robust on a loaded machine, where a batch that a preemption
/// hits counts once however long it is.
pub const BATCH_S: f64 = 0.2e-3;
/// Most operations in one batch.
pub const MAX_OPS_PER_BATCH: u32 = 1 << 16;
/// The default target: the 95% interval's half-width relative to the
/// median, in percent (`--precision 5`). Launch-to-launch noise on shared
/// machines is several times larger (issue 13: 18-22% CV per point), so a
/// tighter default buys time, not trust; a quiet GPU node reaches it in
/// the minimum of batches and reports the precision it really has.
pub const DEFAULT_TARGET_PCT: f64 = 5.0;
/// The default cap on a point's timed batches (`--max-time 0.1`): about
/// what OSU's 100 iterations of a 4 MiB all-reduce take on a CPU node.
pub const DEFAULT_CAP: Duration = Duration::from_millis(100);

/// What the policy aims for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PrecisionGoal {
    /// Half-width of the 95% interval of the median to reach, in percent
    /// of the median.
    pub target_pct: f64,
    /// Time of the timed batches (the slowest rank's) after which a point
    /// stops, precise or not.
    pub cap: Duration,
}

impl Default for PrecisionGoal {
    fn default() -> Self {
        PrecisionGoal {
            target_pct: DEFAULT_TARGET_PCT,
            cap: DEFAULT_CAP,
        }
    }
}

/// The next batch to run: `ops` operations, and whether it is timed (a
/// calibration batch is not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    pub ops: u32,
    pub timed: bool,
}

/// Why a point stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The interval became narrower than the target.
    Precise,
    /// The time cap.
    Cap,
    /// `MAX_BATCHES`.
    MostBatches,
}

/// The policy's state for one point.
#[derive(Clone, Debug)]
pub struct Precision {
    goal: PrecisionGoal,
    /// Operations of the next batch.
    ops: u32,
    calibrated: bool,
    calibration_ops: u64,
    calibration_batches: u32,
    /// The fastest time per operation of a calibration batch.
    fastest_s: f64,
    /// Time per operation of each timed batch, the slowest rank's.
    per_op_s: Vec<f64>,
    timed_s: f64,
    stop: Option<Stop>,
}

impl Precision {
    pub fn new(goal: PrecisionGoal) -> Precision {
        Precision {
            goal,
            ops: 1,
            calibrated: false,
            calibration_ops: 0,
            calibration_batches: 0,
            fastest_s: f64::INFINITY,
            per_op_s: Vec::new(),
            timed_s: 0.0,
            stop: None,
        }
    }

    /// The batch to run next, or `None` when the point is done.
    pub fn next_batch(&self) -> Option<Batch> {
        self.stop.is_none().then_some(Batch {
            ops: self.ops,
            timed: self.calibrated,
        })
    }

    /// The slowest rank's elapsed time of the batch `next_batch` gave.
    pub fn observe(&mut self, elapsed_s: f64) {
        let elapsed_s = if elapsed_s.is_finite() {
            elapsed_s.max(0.0)
        } else {
            f64::MAX
        };
        if !self.calibrated {
            self.calibrate(elapsed_s);
            return;
        }
        self.per_op_s.push(elapsed_s / f64::from(self.ops));
        self.timed_s += elapsed_s;
        let k = self.per_op_s.len();
        self.stop = if k >= MIN_BATCHES && self.precision().is_some_and(|p| p * 100.0 <= self.goal.target_pct) {
            Some(Stop::Precise)
        } else if k >= MIN_CI_BATCHES && self.timed_s >= self.goal.cap.as_secs_f64() {
            Some(Stop::Cap)
        } else if k >= MAX_BATCHES {
            Some(Stop::MostBatches)
        } else {
            None
        };
    }

    fn calibrate(&mut self, elapsed_s: f64) {
        self.calibration_ops += u64::from(self.ops);
        self.calibration_batches += 1;
        self.fastest_s = self.fastest_s.min(elapsed_s / f64::from(self.ops));
        if self.ops >= MAX_OPS_PER_BATCH {
            self.calibrated = true;
        } else if elapsed_s >= BATCH_S && self.calibration_batches >= 2 {
            self.calibrated = true;
            self.ops = ops_lasting(BATCH_S, self.fastest_s);
        } else if elapsed_s < BATCH_S {
            self.ops = (self.ops * 2).min(MAX_OPS_PER_BATCH);
        }
        // else: one long batch so far; run it once more before trusting it
    }

    /// Operations per timed batch.
    pub fn ops_per_batch(&self) -> u32 {
        self.ops
    }

    /// Timed batches so far.
    pub fn batches(&self) -> usize {
        self.per_op_s.len()
    }

    /// Operations the calibration ran (extra warm-up, not timed).
    pub fn calibration_ops(&self) -> u64 {
        self.calibration_ops
    }

    /// Why the point stopped (`None` while it runs).
    pub fn stopped_by(&self) -> Option<Stop> {
        self.stop
    }

    /// The slowest rank's time per operation of each timed batch.
    pub fn batch_times(&self) -> &[f64] {
        &self.per_op_s
    }

    /// The relative half-width of the 95% interval of the median batch
    /// time so far; `None` below `MIN_CI_BATCHES` batches or when the
    /// median is 0.
    pub fn precision(&self) -> Option<f64> {
        relative_half_width(&self.per_op_s)
    }
}

/// The power of two of operations that lasts at least `batch_s` at
/// `per_op_s` each, within 1 and `MAX_OPS_PER_BATCH`.
fn ops_lasting(batch_s: f64, per_op_s: f64) -> u32 {
    if per_op_s.is_nan() || per_op_s <= 0.0 {
        return MAX_OPS_PER_BATCH;
    }
    let n = (batch_s / per_op_s).ceil();
    if n >= f64::from(MAX_OPS_PER_BATCH) {
        MAX_OPS_PER_BATCH
    } else {
        (n.max(1.0) as u32).next_power_of_two()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Drives a policy with synthetic batch times: `per_op(batch)` is the
    /// time per operation of the batch with that index (calibration
    /// batches counted). Returns the policy once it stopped.
    fn run(goal: PrecisionGoal, per_op: impl Fn(usize) -> f64) -> Precision {
        let mut p = Precision::new(goal);
        let mut i = 0;
        while let Some(b) = p.next_batch() {
            p.observe(per_op(i) * f64::from(b.ops));
            i += 1;
            assert!(i < 10 * MAX_BATCHES, "the policy does not stop");
        }
        p
    }

    fn goal(target: f64, cap_s: f64) -> PrecisionGoal {
        PrecisionGoal {
            target_pct: target * 100.0,
            cap: Duration::from_secs_f64(cap_s),
        }
    }

    /// A deterministic spread of `rel` around 1: the same values whatever
    /// the platform.
    fn noise(i: usize, rel: f64) -> f64 {
        let u = ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
        1.0 + rel * (2.0 * u - 1.0)
    }

    #[test]
    fn calibration_grows_the_batch_until_it_lasts_long_enough() {
        // 3 us per operation: 1, 2, ..., 128 (384 us) then timed batches of 128
        let p = run(goal(0.02, 1.0), |_| 3e-6);
        assert_eq!(p.ops_per_batch(), 128);
        assert_eq!(p.calibration_ops(), 255);
        // constant times: precise as soon as allowed
        assert_eq!((p.batches(), p.stopped_by()), (MIN_BATCHES, Some(Stop::Precise)));
        assert_eq!(p.precision(), Some(0.0));
    }

    #[test]
    fn a_slow_operation_is_timed_one_per_batch() {
        // one long calibration batch is run twice before it is trusted
        let p = run(goal(0.02, 1.0), |_| 5e-3);
        assert_eq!((p.ops_per_batch(), p.calibration_ops()), (1, 2));
        assert_eq!(p.batches(), MIN_BATCHES);
    }

    #[test]
    fn a_preempted_calibration_batch_does_not_shrink_the_batches() {
        // 2 us per operation, but the first batch (one operation) was
        // preempted for 5 ms: batches still last 0.2 ms (128 operations)
        let p = run(goal(0.02, 1.0), |i| if i == 0 { 5e-3 } else { 2e-6 });
        assert_eq!(p.ops_per_batch(), 128);
        // ... and so is one later in the doubling (16 operations, +3 ms)
        let p = run(goal(0.02, 1.0), |i| if i == 4 { 2e-6 + 3e-3 / 16.0 } else { 2e-6 });
        assert_eq!(p.ops_per_batch(), 128);
        assert_eq!(ops_lasting(BATCH_S, 0.0), MAX_OPS_PER_BATCH);
        assert_eq!(ops_lasting(BATCH_S, 1.0), 1);
    }

    #[test]
    fn quiet_points_stop_at_the_minimum_and_noisy_ones_run_longer() {
        let quiet = run(goal(0.02, 10.0), |i| 10e-6 * noise(i, 0.01));
        assert_eq!(
            (quiet.batches(), quiet.stopped_by()),
            (MIN_BATCHES, Some(Stop::Precise))
        );
        let noisy = run(goal(0.02, 10.0), |i| 10e-6 * noise(i, 0.2));
        assert!(noisy.batches() > 3 * MIN_BATCHES, "{}", noisy.batches());
        assert_eq!(noisy.stopped_by(), Some(Stop::Precise));
        assert!(noisy.precision().unwrap() <= 0.02);
        // what is reported is what was reached
        assert!(quiet.precision().unwrap() <= 0.02);
    }

    #[test]
    fn preempted_batches_do_not_keep_a_point_running() {
        // every fifth batch is 20x slower: the median's interval ignores them
        let p = run(goal(0.02, 10.0), |i| if i % 5 == 0 { 2e-4 } else { 1e-5 });
        assert_eq!(p.stopped_by(), Some(Stop::Precise));
        assert!(p.batches() <= 2 * MIN_BATCHES, "{}", p.batches());
    }

    #[test]
    fn the_time_cap_stops_a_point_that_never_gets_precise() {
        // 1 ms per operation, +-50%: the cap of 20 ms stops it after about 20 batches
        let p = run(goal(0.001, 0.02), |i| 1e-3 * noise(i, 0.5));
        assert_eq!(p.stopped_by(), Some(Stop::Cap));
        assert!((18..=23).contains(&p.batches()), "{}", p.batches());
        assert!(p.precision().unwrap() > 0.001);
    }

    #[test]
    fn the_cap_never_stops_a_point_before_an_interval_exists() {
        // one operation takes longer than the whole cap
        let p = run(goal(0.02, 0.001), |i| 0.05 * noise(i, 0.3));
        assert_eq!((p.batches(), p.stopped_by()), (MIN_CI_BATCHES, Some(Stop::Cap)));
        assert!(p.precision().is_some());
    }

    #[test]
    fn a_point_stops_after_the_most_batches_whatever_the_noise() {
        let p = run(goal(0.0, 1e6), |i| 1e-3 * noise(i, 0.5));
        assert_eq!((p.batches(), p.stopped_by()), (MAX_BATCHES, Some(Stop::MostBatches)));
    }

    #[test]
    fn zero_and_broken_times_end_calibration_and_stop() {
        // a clock that reads 0: the batch grows to its most, then the
        // median is 0 and no interval exists, so the cap or the count ends it
        let p = run(goal(0.02, 0.2), |_| 0.0);
        assert_eq!(p.ops_per_batch(), MAX_OPS_PER_BATCH);
        assert_eq!(p.stopped_by(), Some(Stop::MostBatches));
        let p = run(goal(0.02, 0.2), |_| f64::NAN);
        assert_eq!(p.ops_per_batch(), 1);
        assert_eq!(p.stopped_by(), Some(Stop::Cap));
    }

    #[test]
    fn ranks_fed_the_same_slowest_times_decide_the_same_batches() {
        // The engine feeds every rank the maximum over ranks, so every
        // rank's policy sees one sequence: the same decisions follow.
        let times: Vec<f64> = (0..MAX_BATCHES + 20).map(|i| 4e-5 * noise(i, 0.3)).collect();
        let a = run(goal(0.02, 1.0), |i| times[i]);
        let b = run(goal(0.02, 1.0), |i| times[i]);
        assert_eq!(
            (a.batches(), a.ops_per_batch(), a.stopped_by()),
            (b.batches(), b.ops_per_batch(), b.stopped_by())
        );
        assert_eq!(a.batch_times(), b.batch_times());
    }
}
