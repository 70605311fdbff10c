//! The samples of each point of a run with `--repeat R` (one row per
//! sample, one sample per sweep): rank 0 keeps every point's times as the
//! rows stream past, and at the end the JSON report gives each point's
//! count, median and spread with the samples themselves, and the terminal
//! a table of the same.
//!
//! It only gathers and displays; the statistics are `crate::stats`'s.
//! Memory is one number per row up to `MAX_KEPT` samples of a point (a
//! `--repeat 0` soak keeps the first `MAX_KEPT` of each and counts the
//! rest).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::{CaseKey, Record};
use crate::stats::Spread;

/// Samples kept per point.
pub const MAX_KEPT: usize = 1000;

/// Every point's sample times, in report order.
#[derive(Clone, Debug, Default)]
pub struct SampleTally {
    points: BTreeMap<CaseKey, Kept>,
}

#[derive(Clone, Debug, Default)]
struct Kept {
    times_us: Vec<f64>,
    measured: u64,
}

/// One point's samples, as the JSON report's `points` list gives them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PointSamples {
    #[serde(flatten)]
    pub case: CaseKey,
    /// Samples the statistics summarize.
    pub n: usize,
    /// Samples measured (more than `n` only past `MAX_KEPT`).
    pub measured: u64,
    pub median_us: f64,
    /// Interquartile range (p75 - p25).
    pub iqr_us: f64,
    /// Median absolute deviation from the median, unscaled.
    pub mad_us: f64,
    /// Each sample's `time_us`, in the order measured.
    pub samples_us: Vec<f64>,
}

impl SampleTally {
    pub fn add(&mut self, record: &Record) {
        let kept = self.points.entry(CaseKey::of(record, true)).or_default();
        kept.measured += 1;
        if kept.times_us.len() < MAX_KEPT {
            kept.times_us.push(record.time_us);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Each point with its statistics, in report order.
    pub fn points(&self) -> Vec<PointSamples> {
        self.points
            .iter()
            .filter_map(|(case, kept)| {
                let s = Spread::of(&kept.times_us)?;
                Some(PointSamples {
                    case: case.clone(),
                    n: s.n,
                    measured: kept.measured,
                    median_us: s.median,
                    iqr_us: s.iqr(),
                    mad_us: s.mad,
                    samples_us: kept.times_us.clone(),
                })
            })
            .collect()
    }
}

/// The end-of-run table of a run with several samples per point: each
/// point's median and spread (IQR, MAD, and the IQR relative to the
/// median), one line per point, every line a `#` comment as nccl-tests'
/// non-result lines are, so that its parsers read only result rows.
pub fn samples_table(tally: &SampleTally) -> String {
    let points = tally.points();
    if points.is_empty() {
        return String::new();
    }
    let mut s = String::from("#\n# samples per point: median and spread of time_us over the sweeps\n");
    s += &format!(
        "# {:<16} {:<10} {:<8} {:<13} {:>12} {:>4} {:>11} {:>10} {:>10} {:>7}\n",
        "collective",
        "hierarchy",
        "dtype",
        "placement",
        "size (B)",
        "n",
        "median (us)",
        "IQR (us)",
        "MAD (us)",
        "IQR %"
    );
    for p in &points {
        let relative = if p.median_us > 0.0 {
            format!("{:.1}", p.iqr_us / p.median_us * 100.0)
        } else {
            "N/A".to_string()
        };
        s += &format!(
            "# {:<16} {:<10} {:<8} {:<13} {:>12} {:>4} {:>11.2} {:>10.2} {:>10.2} {:>7}\n",
            p.case.collective.name(),
            p.case.hierarchy.name(),
            p.case.dtype.name(),
            p.case.placement.name(),
            p.case.size_bytes,
            p.n,
            p.median_us,
            p.iqr_us,
            p.mad_us,
            relative
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::types::Placement;

    fn row(collective: Collective, size_bytes: u64, placement: Placement, time_us: f64) -> Record {
        Record {
            collective,
            size_bytes,
            placement,
            time_us,
            nranks: 2,
            ..Record::default()
        }
    }

    #[test]
    fn samples_of_one_point_are_gathered_whatever_the_order_of_rows() {
        let mut t = SampleTally::default();
        // three sweeps of two points, each in both placements
        for (i, time) in [10.0, 30.0, 20.0].into_iter().enumerate() {
            for size in [8, 1024] {
                t.add(&row(
                    Collective::AllReduce,
                    size,
                    Placement::OutOfPlace,
                    time + size as f64,
                ));
                t.add(&row(Collective::AllReduce, size, Placement::InPlace, 100.0 + i as f64));
            }
        }
        let points = t.points();
        assert_eq!(points.len(), 4);
        let first = &points[0];
        assert_eq!(
            (first.case.size_bytes, first.case.placement),
            (8, Placement::OutOfPlace)
        );
        assert_eq!(first.samples_us, vec![18.0, 38.0, 28.0]);
        assert_eq!((first.n, first.measured, first.median_us), (3, 3, 28.0));
        // type-7 quartiles of 18 28 38: 23 and 33
        assert_eq!((first.iqr_us, first.mad_us), (10.0, 10.0));
        let in_place = &points[1];
        assert_eq!(in_place.case.placement, Placement::InPlace);
        assert_eq!(in_place.median_us, 101.0);
    }

    #[test]
    fn a_long_soak_keeps_a_bounded_number_of_samples_and_counts_the_rest() {
        let mut t = SampleTally::default();
        for i in 0..MAX_KEPT + 5 {
            t.add(&row(Collective::Broadcast, 64, Placement::OutOfPlace, i as f64));
        }
        let p = &t.points()[0];
        assert_eq!(
            (p.n, p.measured, p.samples_us.len()),
            (MAX_KEPT, MAX_KEPT as u64 + 5, MAX_KEPT)
        );
    }

    #[test]
    fn the_table_gives_each_point_its_median_and_spread() {
        let mut t = SampleTally::default();
        for time in [4.0, 5.0, 6.0, 50.0] {
            t.add(&row(Collective::AllGather, 4096, Placement::OutOfPlace, time));
        }
        let text = samples_table(&t);
        let line = text.lines().find(|l| l.contains("all_gather")).unwrap();
        let fields: Vec<&str> = line.split_whitespace().collect();
        // a comment line, so that nccl-tests' parsers read no row here
        assert_eq!(fields[0], "#");
        // size, n, median, IQR (p75 17 - p25 4.75), MAD (median of .5 .5 1.5 44.5), IQR %
        assert_eq!(&fields[5..], ["4096", "4", "5.50", "12.25", "1.00", "222.7"]);
        assert_eq!(samples_table(&SampleTally::default()), "");
    }
}
