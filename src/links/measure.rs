//! What the finder asks of a data plane (`Measurer`), and what one pair's
//! samples say (`Estimate`: median, MAD and the 95% interval of the
//! median, from the engine's statistics).
//!
//! A `Measurer` is the seam between the pure core and whatever moves the
//! bytes: `sim::SimCluster` now; the NCCL and MPI backends once
//! `collbench links` is wired (docs/links.md says what that step must
//! provide). It runs what it is asked and says what it saw; it never
//! decides anything.

use serde::{Deserialize, Serialize};

use super::metric::{Metric, PerMetric};
use super::schedule::{Pair, Schedule};
use super::{Endpoint, Level};
use crate::error::Error;
/// The statistics links reuses (the crate's one statistics leaf), imported
/// here only. `quantile` takes q in 0..1.
pub(super) use crate::stats::{Spread, median_interval_rank, quantile};

/// How each pair is measured.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Probe {
    /// The bandwidth tests' message size.
    pub size_bytes: u64,
    /// The ping-pong's message size.
    pub latency_bytes: u64,
    /// Samples per pair and metric.
    pub samples: usize,
    /// Operations timed back to back in one sample (its value is their mean).
    pub iters: usize,
    /// Untimed operations before a pair's first sample.
    pub warmup: usize,
}

impl Probe {
    /// A large message (64 MiB: on GPUs, past the size where NCCL's
    /// point-to-point bandwidth levels off), a small ping-pong and 10
    /// samples: enough for a 95% interval of the median ([x(2), x(9)]).
    pub const DEFAULT: Probe = Probe {
        size_bytes: 64 << 20,
        latency_bytes: 8,
        samples: 10,
        iters: 20,
        warmup: 5,
    };

    /// The same probe with `samples` samples.
    pub fn with_samples(self, samples: usize) -> Probe {
        Probe { samples, ..self }
    }
}

/// One pair's samples, as a measurer returns them: per metric (each
/// metric's unit and meaning: `Metric::spec`). Bandwidths in GB/s (1e9
/// bytes/s): unidirectional is `size_bytes` from `pair.a` to `pair.b` over
/// the time; bidirectional is both directions at once, 2 x `size_bytes`
/// over the time (OSU's `bibw`). Latency is half the round trip of a
/// ping-pong of `latency_bytes`, in microseconds.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PairSamples {
    pub pair: Pair,
    pub samples: PerMetric<Vec<f64>>,
    /// Mismatching received elements over all samples; `None`: not checked.
    pub wrong: Option<u64>,
}

/// A data plane as the finder drives it.
pub trait Measurer {
    /// Every rank of the launch, indexed by rank.
    fn endpoints(&self) -> &[Endpoint];

    /// Runs `rounds` one after another, the pairs of a round at once
    /// (each pair on its own, e.g. a two-rank communicator or MPI
    /// send/receive; ranks in no pair wait); returns each round's pairs'
    /// samples in the order asked.
    fn measure(&mut self, rounds: &[Vec<Pair>], probe: &Probe) -> Result<Vec<Vec<PairSamples>>, Error>;

    /// An all-reduce of `probe.size_bytes` on each subset of ranks at once,
    /// each subset its own sub-communicator (ranks in no subset wait);
    /// returns each subset's bus bandwidth samples (GB/s, docs/bandwidth.md).
    fn all_reduce(&mut self, subsets: &[Vec<usize>], probe: &Probe) -> Result<Vec<Vec<f64>>, Error>;

    /// What measured, for reports: the backend and version, or the
    /// simulation and its model.
    fn describe(&self) -> String;

    /// Seconds spent measuring so far, on the measurer's clock.
    fn elapsed_s(&self) -> f64;
}

/// What a pair's samples of one metric say.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    pub n: usize,
    pub median: f64,
    /// Median absolute deviation from the median (unscaled).
    pub mad: f64,
    /// The distribution-free 95% interval of the median (order statistics;
    /// `stats::median_interval_rank`): absent below 6 samples.
    pub lo: Option<f64>,
    pub hi: Option<f64>,
}

impl Estimate {
    /// None without a finite sample.
    pub fn of(samples: &[f64]) -> Option<Estimate> {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|v| v.is_finite()).collect();
        sorted.sort_by(f64::total_cmp);
        let summary = Spread::of(&sorted)?;
        let k = sorted.len();
        let interval = median_interval_rank(k).map(|l| (sorted[l - 1], sorted[k - l]));
        Some(Estimate {
            n: summary.n,
            median: summary.median,
            mad: summary.mad,
            lo: interval.map(|i| i.0),
            hi: interval.map(|i| i.1),
        })
    }

    /// The relative spread: MAD over the median.
    pub fn relative_mad(&self) -> f64 {
        if self.median > 0.0 { self.mad / self.median } else { 0.0 }
    }
}

crate::types::vocabulary! {
    /// Which part of the finder a measurement belongs to.
    #[derive(Default)]
    pub enum Phase: "phase", Exact {
        /// The matrix: every pair once.
        #[default]
        Matrix = "matrix",
        /// A re-test of a suspect, or a control pair beside it.
        Confirm = "confirm",
    }
}

/// One measured pair.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairResult {
    pub pair: Pair,
    pub phase: Phase,
    /// The round it ran in, from 1, counted over the whole finder run.
    pub round: usize,
    /// Each metric's estimate, under the metric's name.
    #[serde(flatten)]
    pub estimates: PerMetric<Option<Estimate>>,
    pub wrong: Option<u64>,
}

impl PairResult {
    pub fn of(samples: &PairSamples, phase: Phase, round: usize) -> PairResult {
        PairResult {
            pair: samples.pair,
            phase,
            round,
            estimates: PerMetric::from_fn(|m| Estimate::of(samples.samples.get(m))),
            wrong: samples.wrong,
        }
    }

    pub fn estimate(&self, metric: Metric) -> Option<&Estimate> {
        self.estimates.get(metric).as_ref()
    }
}

/// The matrix: every pair of the schedule, measured once.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Matrix {
    pub level: Level,
    pub isolated: bool,
    pub endpoints: Vec<Endpoint>,
    /// The measured ranks (the schedule's members).
    pub units: Vec<usize>,
    pub rounds: usize,
    pub probe: Probe,
    pub pairs: Vec<PairResult>,
}

/// Rounds handed to a measurer in one call: a real data plane interleaves
/// the samples of the rounds of one call (sample k of every round before
/// sample k + 1 of any), so that a load that comes and goes (other jobs,
/// a busy host) touches every pair of the block alike instead of the
/// rounds it happens to fall on; the CSV is written block by block.
pub const BLOCK_ROUNDS: usize = 16;

/// Runs `rounds` on `measurer`, `BLOCK_ROUNDS` per call, so that a caller
/// sees each round's results as soon as its block is measured (`seen`,
/// once per round with the round's pairs), numbering rounds from
/// `first_round`. A measurer that answers for other pairs than it was
/// asked is a runtime error.
pub fn run_rounds(
    measurer: &mut dyn Measurer,
    rounds: &[Vec<Pair>],
    probe: &Probe,
    phase: Phase,
    first_round: usize,
    seen: &mut dyn FnMut(&[PairResult]),
) -> Result<Vec<PairResult>, Error> {
    let mut out = Vec::with_capacity(rounds.iter().map(Vec::len).sum());
    for (b, block) in rounds.chunks(BLOCK_ROUNDS).enumerate() {
        let answered = measurer.measure(block, probe)?;
        for (i, round) in block.iter().enumerate() {
            let number = first_round + b * BLOCK_ROUNDS + i;
            let got: Vec<Pair> = answered.get(i).into_iter().flatten().map(|s| s.pair).collect();
            if answered.len() != block.len() || got != *round {
                return Err(Error::runtime(format!(
                    "{}: asked for {} pairs in round {number}, got {} (a bug in the measurer)",
                    measurer.describe(),
                    round.len(),
                    got.len()
                )));
            }
            let measured: Vec<PairResult> = answered[i].iter().map(|s| PairResult::of(s, phase, number)).collect();
            seen(&measured);
            out.extend(measured);
        }
    }
    Ok(out)
}

/// The matrix of `schedule` measured on `measurer` with `probe`, `seen`
/// called with each round's pairs as it ends: what `find` starts from,
/// and all a caller needs that judges the pairs itself.
pub fn measure_matrix(
    measurer: &mut dyn Measurer,
    schedule: &Schedule,
    probe: &Probe,
    seen: &mut dyn FnMut(&[PairResult]),
) -> Result<Matrix, Error> {
    let pairs = run_rounds(measurer, &schedule.rounds, probe, Phase::Matrix, 1, seen)?;
    Ok(Matrix {
        level: schedule.level,
        isolated: schedule.isolated,
        endpoints: measurer.endpoints().to_vec(),
        units: schedule.units(),
        rounds: schedule.rounds.len(),
        probe: *probe,
        pairs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_estimate_has_the_median_its_spread_and_the_order_statistic_interval() {
        // 10 samples: the 95% interval of the median is [x(2), x(9)]
        let samples: Vec<f64> = (1..=10).rev().map(f64::from).collect();
        let e = Estimate::of(&samples).unwrap();
        assert_eq!((e.n, e.median, e.mad), (10, 5.5, 2.5));
        assert_eq!((e.lo, e.hi), (Some(2.0), Some(9.0)));
        // 5 samples: too few for an interval
        let e = Estimate::of(&[3.0, 1.0, 2.0, 5.0, 4.0]).unwrap();
        assert_eq!((e.median, e.lo, e.hi), (3.0, None, None));
        // non-finite samples are left out; none at all is no estimate
        let e = Estimate::of(&[f64::NAN, 2.0, 4.0]).unwrap();
        assert_eq!((e.n, e.median), (2, 3.0));
        assert_eq!(Estimate::of(&[f64::INFINITY]), None);
        assert_eq!(Estimate::of(&[]), None);
        assert!((Estimate::of(&[9.0, 10.0, 11.0]).unwrap().relative_mad() - 0.1).abs() < 1e-12);
    }
}
