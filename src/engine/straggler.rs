//! What `-I` says about a measured point: its per-iteration distribution,
//! the slowest rank against the median rank, and the end-of-run slow-rank
//! verdict. The numbers (type-7 quantiles, the coefficient of variation,
//! the binomial tail of the sign test) are `crate::stats`'s.
//!
//! Two signals could name a slow rank, and only one can:
//! - **duration**, each rank's time for the timed operations (the CSV's
//!   `slowest_rank`, `slowest_excess_pct`; nccl-tests' per-process
//!   per-iteration times, which its `analyze_perf_json.py --straggler`
//!   ranks): a synchronising collective ends on every rank together, so
//!   the ranks' durations differ only by when each left the barrier before
//!   them and noticed the end after them. A rank slowed for real makes
//!   every rank's operations slower alike (measured: a rank held to 10% of
//!   a CPU by a cgroup quota, the slowest duration under 1% above the
//!   other's, and the slowed rank the slowest at half the points), and
//!   a rank that starts late has the *shortest* duration. It is reported
//!   per point, and names no one.
//! - **arrival skew**, how much later than the others a rank arrives at a
//!   synchronisation after the same work: the rank the others wait for
//!   (trace analysers name the rank that arrives last and waits least).
//!   The engine times each rank's own part of checking a point (filling its
//!   input, fetching and comparing its output: the same work on every rank
//!   of a symmetric collective, between the synchronisations that the
//!   check's collective and its reduction of the wrong count are), and
//!   this is what the verdict rests on.
//!
//! The verdict (`Arrivals::verdict`): at each point, the rank whose work
//! took longest, by more than the threshold over the median of the other
//! ranks, arrived late. Ranks doing the same work on a healthy machine are
//! each that rank with probability at most 1/n, so a rank late at k of the
//! N points from some size on, where P(Binomial(N, 1/n) >= k) is below
//! `ALPHA` after a Bonferroni correction over the ranks and the starting
//! sizes tried, is named, with how late on average and from which size
//! (a rank slowed by its CPU is late where its own work is long enough for
//! the slowdown to land in it: the larger sizes). Fewer points than the
//! test needs, `--check 0` or rooted collectives only: the footer says it
//! cannot tell, and why.

use std::collections::BTreeMap;

use crate::stats::{coefficient_of_variation, quantile};

/// Distribution of per-iteration times, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IterSummary {
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Standard deviation / mean (0 for fewer than two samples).
    pub cv: f64,
}

impl IterSummary {
    pub fn of(samples: &[f64]) -> Option<IterSummary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        Some(IterSummary {
            min: sorted[0],
            p50: quantile(&sorted, 0.5),
            p99: quantile(&sorted, 0.99),
            max: sorted[sorted.len() - 1],
            cv: coefficient_of_variation(samples),
        })
    }
}

/// The slowest rank of a point and how far its time is above the median
/// rank's, as a fraction (0.14 = 14% slower).
pub fn slowest_rank(times: &[f64]) -> Option<(usize, f64)> {
    let (rank, &slowest) = times.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1))?;
    let mut sorted = times.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = quantile(&sorted, 0.5);
    let excess = if median > 0.0 { slowest / median - 1.0 } else { 0.0 };
    Some((rank, excess))
}

/// The family-wise significance level of the slow-rank verdict.
pub const ALPHA: f64 = 0.01;

/// Each rank's arrival at the check's synchronisations, per size: from
/// which the end-of-run verdict comes (rank 0). Bounded: sizes x ranks.
#[derive(Debug, Default)]
pub struct Arrivals {
    /// Late means over the median of the other ranks by more than this
    /// fraction (`--straggler-threshold`).
    threshold: f64,
    by_size: BTreeMap<u64, SizeTally>,
}

/// Points at one size, and rank -> (points it arrived late at, sum of its
/// excess there).
type SizeTally = (u64, BTreeMap<usize, (u64, f64)>);

/// A rank that arrived late significantly often: the verdict printed at
/// the end.
#[derive(Clone, Debug, PartialEq)]
pub struct Straggler {
    pub rank: usize,
    /// Mean excess of its work over the median of the other ranks' at the
    /// points where it was late, as a fraction.
    pub excess: f64,
    /// The smallest size of the points tested.
    pub from_size: u64,
    /// The points tested are every measured size's.
    pub every_size: bool,
    /// Late at this many of `points`.
    pub late: u64,
    pub points: u64,
    /// The sign test's one-sided p-value, before the correction.
    pub p_value: f64,
}

impl Straggler {
    /// Its own work over the other ranks' median, as a factor (1.5: half
    /// as long again).
    pub fn work_factor(&self) -> f64 {
        1.0 + self.excess
    }
}

/// The end-of-run verdict on slow ranks (`-I`).
#[derive(Clone, Debug, PartialEq)]
pub enum SlowRank {
    /// Cannot tell: no point gave every rank's arrival, or too few to
    /// reach `ALPHA` (the reason).
    NotJudged(String),
    /// Judged: no rank arrived late significantly often.
    NoneFound {
        points: u64,
    },
    Named(Straggler),
}

impl Arrivals {
    pub fn new(threshold: f64) -> Arrivals {
        Arrivals {
            threshold,
            by_size: BTreeMap::new(),
        }
    }

    /// One point: each rank's seconds for the work every rank does alike
    /// before the synchronisation (rank order).
    pub fn add(&mut self, size_bytes: u64, work_s: &[f64]) {
        let Some((rank, &late)) = work_s.iter().enumerate().max_by(|a, b| a.1.total_cmp(b.1)) else {
            return;
        };
        if work_s.len() < 2 || !work_s.iter().all(|w| w.is_finite()) {
            return;
        }
        let others: Vec<f64> = work_s
            .iter()
            .enumerate()
            .filter(|&(r, _)| r != rank)
            .map(|(_, &w)| w)
            .collect();
        let median = crate::stats::median(&others).unwrap_or(0.0);
        let (points, ranks) = self.by_size.entry(size_bytes).or_default();
        *points += 1;
        if median > 0.0 && late / median - 1.0 > self.threshold {
            let (count, sum) = ranks.entry(rank).or_default();
            *count += 1;
            *sum += late / median - 1.0;
        }
    }

    /// The verdict for `nranks` ranks (module doc).
    pub fn verdict(&self, nranks: usize) -> SlowRank {
        let points: u64 = self.by_size.values().map(|(p, _)| p).sum();
        if nranks < 2 || points == 0 {
            return SlowRank::NotJudged(
                "no point timed every rank's check of a symmetric collective (arrival skew needs the check, \
                 two ranks or more, and a collective every rank checks alike)"
                    .into(),
            );
        }
        let p0 = 1.0 / nranks as f64;
        let tests = (nranks * self.by_size.len()) as f64;
        // with every point late, the smallest p-value there is
        if crate::stats::binomial_upper_tail(points, points, p0) * tests >= ALPHA {
            // the points a rank late at every one of them would need
            let needed = (1..).find(|&n| p0.powi(n) * tests < ALPHA).unwrap_or(i32::MAX);
            return SlowRank::NotJudged(format!(
                "{points} checked point{} of symmetric collectives, and a rank late at every one of them would \
                 need {needed} at {nranks} ranks to be told from chance; more sizes or -N give more",
                if points == 1 { "" } else { "s" }
            ));
        }
        let sizes: Vec<u64> = self.by_size.keys().copied().collect();
        let mut best: Option<Straggler> = None;
        for rank in 0..nranks {
            for (i, &from) in sizes.iter().enumerate() {
                let (mut n, mut k, mut sum) = (0, 0, 0.0);
                for (_, (p, ranks)) in self.by_size.range(from..) {
                    n += p;
                    if let Some((c, s)) = ranks.get(&rank) {
                        k += c;
                        sum += s;
                    }
                }
                let p_value = crate::stats::binomial_upper_tail(k, n, p0);
                if k > 0 && best.as_ref().is_none_or(|b| p_value < b.p_value) {
                    best = Some(Straggler {
                        rank,
                        excess: sum / k as f64,
                        from_size: from,
                        every_size: i == 0,
                        late: k,
                        points: n,
                        p_value,
                    });
                }
            }
        }
        match best {
            Some(s) if s.p_value * tests < ALPHA => SlowRank::Named(s),
            _ => SlowRank::NoneFound { points },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_ordered_and_exact_on_known_samples() {
        let samples = [5.0, 1.0, 3.0, 2.0, 4.0];
        let s = IterSummary::of(&samples).unwrap();
        assert_eq!((s.min, s.p50, s.max), (1.0, 3.0, 5.0));
        assert!((s.p99 - 4.96).abs() < 1e-12);
        assert!(s.min <= s.p50 && s.p50 <= s.p99 && s.p99 <= s.max);
        assert_eq!(IterSummary::of(&[]), None);
    }

    #[test]
    fn the_slowest_rank_is_measured_against_the_median() {
        assert_eq!(
            slowest_rank(&[1.0, 1.0, 1.2, 1.0]).map(|(r, e)| (r, (e * 100.0).round())),
            Some((2, 20.0))
        );
        assert_eq!(slowest_rank(&[2.0]), Some((0, 0.0)));
        assert_eq!(slowest_rank(&[]), None);
    }

    #[test]
    fn a_rank_late_at_every_large_point_is_named_from_the_size_it_starts_at() {
        let mut a = Arrivals::new(0.10);
        for size in [8u64, 1024, 1 << 20, 4 << 20] {
            for i in 0..8 {
                // rank 2 of 4 takes 3x the others' time from 1 MiB on;
                // below, a different rank is a little late each time
                let mut work = vec![1e-3; 4];
                if size >= 1 << 20 {
                    work[2] = 3e-3;
                } else {
                    work[i % 4] = 1.2e-3;
                }
                a.add(size, &work);
            }
        }
        let SlowRank::Named(s) = a.verdict(4) else {
            panic!("{:?}", a.verdict(4))
        };
        assert_eq!((s.rank, s.from_size, s.every_size), (2, 1 << 20, false));
        assert_eq!((s.late, s.points), (16, 16));
        assert!((s.excess - 2.0).abs() < 1e-12, "{}", s.excess);
        assert!((s.p_value - 0.25f64.powi(16)).abs() < 1e-15);
    }

    #[test]
    fn ranks_late_in_turn_or_by_little_are_no_straggler() {
        // each rank late in turn, by 50%: nobody significantly often
        let mut a = Arrivals::new(0.10);
        for i in 0..40 {
            let mut work = vec![1e-3; 2];
            work[i % 2] = 1.5e-3;
            a.add(1 << 20, &work);
        }
        assert_eq!(a.verdict(2), SlowRank::NoneFound { points: 40 });
        // always the same rank, but by 5%: under the threshold
        let mut a = Arrivals::new(0.10);
        for _ in 0..40 {
            a.add(1 << 20, &[1e-3, 1.05e-3]);
        }
        assert_eq!(a.verdict(2), SlowRank::NoneFound { points: 40 });
    }

    #[test]
    fn too_few_points_or_none_are_not_judged() {
        let a = Arrivals::new(0.10);
        assert!(matches!(a.verdict(2), SlowRank::NotJudged(w) if w.contains("no point")));
        // 6 points at 2 ranks: even 6 of 6 (p = 1/64, x 2 ranks) cannot reach 1%
        let mut a = Arrivals::new(0.10);
        for _ in 0..6 {
            a.add(1024, &[1e-3, 3e-3]);
        }
        assert!(
            matches!(a.verdict(2), SlowRank::NotJudged(w) if w.contains("6 checked points") && w.contains("need 8"))
        );
        // one rank: nothing to compare
        let mut a = Arrivals::new(0.10);
        a.add(1024, &[1e-3]);
        assert!(matches!(a.verdict(1), SlowRank::NotJudged(_)));
    }
}
