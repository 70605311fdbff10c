//! What `-I` says about a measured point: its per-iteration distribution,
//! the slowest rank against the median rank, and the end-of-run straggler
//! verdict. The numbers (type-7 quantiles, the coefficient of variation)
//! are `crate::stats`'s.

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

/// Which rank was slowest how often, per size: a bounded record (sizes x
/// ranks that were ever slowest) from which the end-of-run verdict comes.
#[derive(Debug, Default)]
pub struct Stragglers {
    by_size: BTreeMap<u64, SizeTally>,
}

/// Points at one size, and rank -> (times it was slowest, sum of excess).
type SizeTally = (u64, BTreeMap<usize, (u64, f64)>);

/// A rank that was persistently slow: the verdict printed at the end.
#[derive(Clone, Debug, PartialEq)]
pub struct Straggler {
    pub rank: usize,
    /// Mean excess over the median rank, as a fraction.
    pub excess: f64,
    /// The smallest size from which on it was slow.
    pub from_size: u64,
    /// It was slow at every measured size.
    pub every_size: bool,
}

/// A rank counts as the straggler at a size when it was the slowest in at
/// least this share of that size's points.
const PERSISTENT_SHARE: f64 = 0.75;

impl Stragglers {
    pub fn add(&mut self, size_bytes: u64, rank: usize, excess: f64) {
        let (points, ranks) = self.by_size.entry(size_bytes).or_default();
        *points += 1;
        let (count, sum) = ranks.entry(rank).or_default();
        *count += 1;
        *sum += excess;
    }

    /// The rank that was the slowest at every size from some size up to the
    /// largest, by more than `threshold` on average over those sizes.
    pub fn verdict(&self, threshold: f64) -> Option<Straggler> {
        let (_, (_, largest)) = self.by_size.iter().next_back()?;
        // the candidate: the most frequent slowest rank at the largest size
        let (&rank, _) = largest.iter().max_by_key(|(_, (count, _))| *count)?;
        let mut from_size = None;
        let (mut sum, mut count) = (0.0, 0u64);
        for (&size, (points, ranks)) in self.by_size.iter().rev() {
            let Some(&(slowest, excess)) = ranks.get(&rank) else {
                break;
            };
            if (slowest as f64) < PERSISTENT_SHARE * *points as f64 {
                break;
            }
            from_size = Some(size);
            sum += excess;
            count += slowest;
        }
        let from_size = from_size?;
        let excess = sum / count as f64;
        (excess > threshold).then(|| Straggler {
            rank,
            excess,
            from_size,
            every_size: self.by_size.keys().next() == Some(&from_size),
        })
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
    fn a_rank_slow_at_large_sizes_is_named_with_the_size_it_starts_at() {
        let mut s = Stragglers::default();
        for size in [8, 1024, 1 << 20, 64 << 20, 128 << 20] {
            for _ in 0..4 {
                if size >= 64 << 20 {
                    s.add(size, 5, 0.14);
                } else {
                    s.add(size, (size % 3) as usize, 0.02);
                }
            }
        }
        let v = s.verdict(0.10).unwrap();
        assert_eq!((v.rank, v.from_size, v.every_size), (5, 64 << 20, false));
        assert!((v.excess - 0.14).abs() < 1e-12);
        assert_eq!(s.verdict(0.20), None);
    }

    #[test]
    fn occasional_or_small_excess_is_no_straggler() {
        let mut s = Stragglers::default();
        // rank 1 slowest at half the points only
        for i in 0..8 {
            s.add(1024, i % 2, 0.5);
        }
        assert_eq!(s.verdict(0.10), None);
        let mut s = Stragglers::default();
        for size in [8, 16] {
            s.add(size, 3, 0.30);
        }
        let v = s.verdict(0.10).unwrap();
        assert!(v.every_size && v.rank == 3);
        assert_eq!(Stragglers::default().verdict(0.1), None);
    }
}
