//! The noise model: from the samples of one case on both sides (each
//! sample a row, each tagged with its launch) to the change, its interval,
//! a p-value, the noise and a verdict. See docs/ci.md for the reasoning
//! and its sources.
//!
//! Which test, by what the samples can show:
//! - **launch t-test** when a side holds two or more launches: each
//!   launch is summarised by the median of its samples, and the log of the
//!   new/base ratio of medians is judged against the launch-to-launch
//!   spread (the pooled standard deviation of the log launch medians,
//!   standard error s sqrt(1/L_base + 1/L_new), Student's t with the
//!   pooled degrees of freedom). Samples inside one launch never see the
//!   launch-to-launch variation (buffer placement, process layout, the
//!   machine's load at the time), so they are not counted as independent.
//!   **A noisier launch**: a launch whose own samples scatter more than
//!   the launches' medians do (a new launch that ran while the machine
//!   changed speed) has a median that is less certain than s says; so
//!   each side's term is the larger of s^2 and the mean variance of its
//!   launches' medians estimated from their own samples
//!   (`stats::median_variance`): se = sqrt(max(s^2, w_base) / L_base +
//!   max(s^2, w_new) / L_new), as Welch's test gives each side its own
//!   variance. Without it, 1 or 2 of 26 rows of an unchanged machine
//!   were called regressed in 3 of 10 trials under load (docs/ci.md).
//! - **Mann-Whitney U** when each side is one launch with enough samples:
//!   the exact rank test for small samples, and the distribution-free
//!   interval of the ratio that inverts it (Hodges-Lehmann, on logs).
//!   Only the noise inside the launch is seen; `compare` notes that.
//! - **threshold only** when a side has one sample (or too few for the
//!   rank test to reach the significance level, or a metric of 0 by
//!   definition): the change alone decides, as before samples existed.
//!
//! Verdict: **regressed** (improved) when p < alpha and the change is
//! worse (better) than the threshold (criterion's rule: both the test and
//! the noise threshold must say so); otherwise **too noisy** when the
//! noise, the half-width of the interval, exceeds the threshold, or when
//! the change does but p does not reach alpha (the samples cannot tell a
//! change of that size from chance); otherwise **within noise**. Under
//! threshold only: beyond the threshold decides.
//!
//! **Many rows, one verdict** (`judge_together`): a comparison fails when
//! any row regresses, so the p-values of all its rows are adjusted
//! together by Holm's method (`stats::holm`) before they are compared
//! with alpha: the chance that an unchanged machine gets any row judged
//! regressed or improved by a test stays under alpha, whatever the
//! dependence between rows. The intervals stay per row.
//!
//! Only the launch t-test sees launch-to-launch noise. A change that the
//! rank test or the threshold alone would call regressed or improved, with
//! one launch on each side, is **unproven** instead (never a failure): the
//! samples of one launch cannot tell a change from the next launch's
//! noise. `Params::within_launch` (`--within-launch`) asks for the
//! within-launch verdict anyway, and for the modes of one launch (the
//! hierarchy modes of a run share its launch, so its noise is common to
//! both sides). One exception needs no test (`Params::launch_bound`, set
//! for run CSVs): with one launch a side, when every sample of the new
//! launch lies beyond the base launch's range by more than
//! `LAUNCH_BOUND`, far outside what two launches of one machine differ by
//! (docs/ci.md "One launch per side"), the row is regressed (improved),
//! judged by **the launch bound**.
//!
//! Pure: no files, no formatting.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Verdict;
use crate::stats::{self, Spread};
use crate::types::Metric;

/// The launch-to-launch bound, as a factor: with one launch a side, a
/// row whose every new sample lies beyond the base launch's range by
/// more than this factor (a bandwidth below the base's lowest / 1.5, a
/// time above its longest x 1.5, or the same the better way) has changed,
/// whatever the test says. Identical launches on this project's shared
/// 2-core VM, while the machine stayed in one state, had their ranges at
/// most a factor 1.12 to 1.49 apart (three measurements of 12 to 60
/// launches, docs/ci.md "One launch per side"; scripts/bench/
/// readme-compare.sh repeats it); 1.5 is above that and still sees a
/// bandwidth halved.
pub const LAUNCH_BOUND: f64 = 1.5;

/// One sample of a case: the metric's value, and the launch (`run_id`)
/// it was measured in.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    pub value: f64,
    pub launch: &'a str,
}

/// What the model needs to know besides the samples.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    pub metric: Metric,
    pub threshold_pct: f64,
    pub alpha: f64,
    /// Judge one launch per side by the samples inside the launches (the
    /// rank test, or the threshold alone) as if launches did not vary.
    pub within_launch: bool,
    /// With one launch per side, a row beyond the other side's range by
    /// more than this factor is judged by it (`LAUNCH_BOUND` for run
    /// CSVs, whose launch-to-launch spread was measured); None: never.
    pub launch_bound: Option<f64>,
}

/// Which test judged a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Test {
    LaunchT,
    MannWhitney,
    ThresholdOnly,
    /// One launch a side, every sample beyond the other side's range by
    /// more than `LAUNCH_BOUND`.
    LaunchBound,
}

impl Test {
    /// The short name in the table's `test` column.
    pub fn short(self) -> &'static str {
        match self {
            Test::LaunchT => "launch-t",
            Test::MannWhitney => "U",
            Test::ThresholdOnly => "threshold",
            Test::LaunchBound => "bound",
        }
    }
}

/// Why a row fell back to the threshold alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// A side has a single sample.
    OneSample,
    /// Each side is one launch, and the samples are too few for the rank
    /// test to reach the significance level (3 against 3 at 5%).
    TooFewSamples,
    /// A value is 0, so no ratio exists: only where the formula gives 0
    /// (a size of 0, busbw at one rank), since the CSV reader refuses a
    /// measured 0, a negative value and one that is not finite.
    NotPositive,
}

impl Fallback {
    pub fn describe(self) -> &'static str {
        match self {
            Fallback::OneSample => "one sample on a side",
            Fallback::TooFewSamples => "too few samples for the rank test",
            Fallback::NotPositive => "the metric is 0 by definition (a size of 0, or busbw at one rank)",
        }
    }
}

/// One side's samples, summarised (the JSON's `base_stats`, `new_stats`).
#[derive(Clone, Debug, Serialize)]
pub struct SideStats {
    pub n: usize,
    pub launches: usize,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    pub iqr: f64,
    pub mad: f64,
    pub min: f64,
    pub max: f64,
    /// MAD / median in percent: the spread the table shows.
    pub mad_pct: Option<f64>,
    pub samples: Vec<f64>,
}

impl SideStats {
    fn of(samples: &[Sample]) -> SideStats {
        let values: Vec<f64> = samples.iter().map(|s| s.value).collect();
        let nan = f64::NAN;
        let s = Spread::of(&values).unwrap_or(Spread {
            n: values.len(),
            median: nan,
            q1: nan,
            q3: nan,
            mad: nan,
            min: nan,
            max: nan,
        });
        SideStats {
            n: values.len(),
            launches: by_launch(samples).len(),
            median: s.median,
            q1: s.q1,
            q3: s.q3,
            iqr: s.iqr(),
            mad: s.mad,
            min: s.min,
            max: s.max,
            mad_pct: (s.median > 0.0).then(|| s.mad / s.median * 100.0),
            samples: values,
        }
    }
}

/// A row's verdict and the figures it rests on.
#[derive(Clone, Debug, Serialize)]
pub struct Judgement {
    pub base_stats: SideStats,
    pub new_stats: SideStats,
    /// (new median - base median) / base median, in percent; None when
    /// the base median is 0 and the new one is not.
    pub change_pct: Option<f64>,
    /// The interval of the change at level 1 - alpha, in percent.
    pub interval_pct: Option<[f64; 2]>,
    /// Half the width of the interval, as a ratio in percent: the change
    /// the samples cannot tell from chance.
    pub noise_pct: Option<f64>,
    pub p_value: Option<f64>,
    /// The p-value adjusted for every row judged together (Holm), the
    /// one the verdict compares with alpha; the p-value itself for a
    /// case judged alone.
    pub p_adjusted: Option<f64>,
    pub test: Test,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    pub verdict: Verdict,
}

/// Judges one case on its own (a family of one: `--by`'s points).
pub fn judge(base: &[Sample], new: &[Sample], p: &Params) -> Judgement {
    let mut j = measure(base, new, p.alpha);
    decide(&mut j, p);
    j
}

/// Judges the cases of one comparison together (module doc, "Many rows,
/// one verdict"): each case's test as in `judge`, then Holm's adjustment
/// over every p-value of the family, then each verdict from its adjusted
/// p-value. In the order given.
pub fn judge_together(cases: &[(&[Sample], &[Sample])], p: &Params) -> Vec<Judgement> {
    let mut judged: Vec<Judgement> = cases.iter().map(|(b, n)| measure(b, n, p.alpha)).collect();
    let tested: Vec<usize> = (0..judged.len()).filter(|&i| judged[i].p_value.is_some()).collect();
    let raw: Vec<f64> = tested.iter().filter_map(|&i| judged[i].p_value).collect();
    for (&i, adjusted) in tested.iter().zip(stats::holm(&raw)) {
        judged[i].p_adjusted = Some(adjusted);
    }
    for j in &mut judged {
        decide(j, p);
    }
    judged
}

/// A case's figures (statistics, change, test, interval, p-value), with
/// its p-value as its own adjusted one, before any verdict.
fn measure(base: &[Sample], new: &[Sample], alpha: f64) -> Judgement {
    let (base_stats, new_stats) = (SideStats::of(base), SideStats::of(new));
    let (b, n) = (base_stats.median, new_stats.median);
    let change_pct = if b != 0.0 {
        Some((n - b) / b * 100.0)
    } else if n == 0.0 {
        Some(0.0)
    } else {
        None
    };
    let (test, fallback, interval, p_value) = match evidence(base, new, alpha) {
        Ok(e) => (e.test, None, Some(e.ratio_interval), Some(e.p_value)),
        Err(why) => (Test::ThresholdOnly, Some(why), None, None),
    };
    Judgement {
        base_stats,
        new_stats,
        change_pct,
        interval_pct: interval.map(|(lo, hi)| [(lo - 1.0) * 100.0, (hi - 1.0) * 100.0]),
        noise_pct: interval.map(|(lo, hi)| ((hi / lo).sqrt() - 1.0) * 100.0),
        p_value,
        p_adjusted: p_value,
        test,
        fallback,
        verdict: Verdict::WithinNoise,
    }
}

/// The verdict of a measured case (module doc, "Verdict"), from its
/// adjusted p-value; a row the launch bound decides says so in its test.
fn decide(j: &mut Judgement, p: &Params) {
    let beyond = |better: bool| {
        j.change_pct.is_some_and(|c| {
            let gain = if p.metric.higher_is_better() { c } else { -c };
            if better {
                gain > p.threshold_pct
            } else {
                -gain > p.threshold_pct
            }
        })
    };
    let clear = j.p_adjusted.is_none_or(|pv| pv < p.alpha);
    // only launches show launch-to-launch noise (module doc)
    let separates = j.test == Test::LaunchT || p.within_launch;
    let apart = p
        .launch_bound
        .and_then(|bound| beyond_launch_bound(&j.base_stats, &j.new_stats, p.metric, bound));
    j.verdict = match apart {
        Some(better) if beyond(better) => {
            j.test = Test::LaunchBound;
            j.fallback = None;
            if better { Verdict::Improved } else { Verdict::Regressed }
        }
        _ if clear && beyond(false) => {
            if separates {
                Verdict::Regressed
            } else {
                Verdict::Unproven
            }
        }
        _ if clear && beyond(true) => {
            if separates {
                Verdict::Improved
            } else {
                Verdict::Unproven
            }
        }
        // not clear once the family is counted, yet beyond the threshold:
        // the samples cannot tell a change of that size from chance
        _ if j.noise_pct.is_some_and(|noise| noise > p.threshold_pct) || beyond(false) || beyond(true) => {
            Verdict::TooNoisy
        }
        _ => Verdict::WithinNoise,
    };
}

/// With one launch on each side: whether every sample of the new launch
/// lies beyond the base launch's range by more than `LAUNCH_BOUND` (a
/// bandwidth below the base's lowest divided by it, or above its highest
/// times it; a time the other way round): `Some(true)` better, `Some(false)`
/// worse, None otherwise or with several launches on a side.
fn beyond_launch_bound(base: &SideStats, new: &SideStats, metric: Metric, bound: f64) -> Option<bool> {
    let measured = |s: &SideStats| s.launches == 1 && s.min > 0.0 && s.max.is_finite();
    if !measured(base) || !measured(new) {
        return None;
    }
    let higher = metric.higher_is_better();
    if new.max * bound < base.min {
        Some(!higher)
    } else if new.min > base.max * bound {
        Some(higher)
    } else {
        None
    }
}

/// What a test found: the interval of new/base, and the p-value.
struct Evidence {
    test: Test,
    ratio_interval: (f64, f64),
    p_value: f64,
}

fn evidence(base: &[Sample], new: &[Sample], alpha: f64) -> Result<Evidence, Fallback> {
    if base.len() < 2 && new.len() < 2 {
        return Err(Fallback::OneSample);
    }
    let positive = |s: &[Sample]| !s.is_empty() && s.iter().all(|x| x.value.is_finite() && x.value > 0.0);
    if !positive(base) || !positive(new) {
        return Err(Fallback::NotPositive);
    }
    let (base_launches, new_launches) = (by_launch(base), by_launch(new));
    if base_launches.len() >= 2 || new_launches.len() >= 2 {
        return Ok(launch_t(base, new, &base_launches, &new_launches, alpha));
    }
    if base.len() < 2 || new.len() < 2 {
        return Err(Fallback::OneSample);
    }
    if stats::smallest_p_value(base.len(), new.len()) >= alpha {
        return Err(Fallback::TooFewSamples);
    }
    let logs = |s: &[Sample]| -> Vec<f64> { s.iter().map(|x| x.value.ln()).collect() };
    let (x, y) = (logs(base), logs(new));
    let test = stats::mann_whitney(&x, &y).ok_or(Fallback::NotPositive)?;
    let (lo, hi) = stats::shift_interval(&x, &y, alpha).ok_or(Fallback::TooFewSamples)?;
    Ok(Evidence {
        test: Test::MannWhitney,
        ratio_interval: (lo.exp(), hi.exp()),
        p_value: test.p_value,
    })
}

/// The launch-level t-test (module doc). Needs at least one side with two
/// launches (degrees of freedom >= 1) and positive values.
fn launch_t(
    base: &[Sample],
    new: &[Sample],
    base_launches: &BTreeMap<&str, Vec<f64>>,
    new_launches: &BTreeMap<&str, Vec<f64>>,
    alpha: f64,
) -> Evidence {
    let log_medians = |l: &BTreeMap<&str, Vec<f64>>| -> Vec<f64> {
        l.values().filter_map(|v| stats::median(v)).map(f64::ln).collect()
    };
    let (u_base, u_new) = (log_medians(base_launches), log_medians(new_launches));
    let squares = |u: &[f64]| {
        let mean = u.iter().sum::<f64>() / u.len() as f64;
        u.iter().map(|v| (v - mean).powi(2)).sum::<f64>()
    };
    let df = (u_base.len() + u_new.len() - 2) as f64;
    let s2 = (squares(&u_base) + squares(&u_new)) / df;
    // a side's launch medians vary at least as much as its own samples
    // make a median vary (module doc, "a noisier launch")
    let within = |l: &BTreeMap<&str, Vec<f64>>| {
        let logs = |v: &[f64]| v.iter().map(|x| x.ln()).collect::<Vec<_>>();
        l.values().map(|v| stats::median_variance(&logs(v))).sum::<f64>() / l.len() as f64
    };
    let side = |l: &BTreeMap<&str, Vec<f64>>| s2.max(within(l)) / l.len() as f64;
    let se = (side(base_launches) + side(new_launches)).sqrt();
    let median = |x: &[Sample]| stats::median(&x.iter().map(|s| s.value).collect::<Vec<_>>()).unwrap_or(f64::NAN);
    let d = (median(new) / median(base)).ln();
    let q = stats::t_quantile(1.0 - alpha / 2.0, df);
    let p_value = if se > 0.0 {
        stats::t_two_sided_p(d / se, df)
    } else if d == 0.0 {
        1.0
    } else {
        0.0
    };
    Evidence {
        test: Test::LaunchT,
        ratio_interval: ((d - q * se).exp(), (d + q * se).exp()),
        p_value,
    }
}

/// Sample values by launch.
fn by_launch<'a>(samples: &[Sample<'a>]) -> BTreeMap<&'a str, Vec<f64>> {
    let mut launches: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in samples {
        launches.entry(s.launch).or_default().push(s.value);
    }
    launches
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Within-launch judgement, so that the tests of the rank test and
    /// the threshold see their own verdicts (`unproven` has its own test).
    const BUSBW: Params = Params {
        metric: Metric::Busbw,
        threshold_pct: 5.0,
        alpha: 0.05,
        within_launch: true,
        launch_bound: None,
    };

    /// `values` as samples of one launch.
    fn launch<'a>(name: &'a str, values: &[f64]) -> Vec<Sample<'a>> {
        values.iter().map(|&value| Sample { value, launch: name }).collect()
    }

    /// A deterministic, roughly normal sample: mean `centre`, relative
    /// standard deviation `cv`, `n` values (a sum of sines stands in for
    /// a random generator, so the test's figures never change).
    fn noisy(centre: f64, cv: f64, n: usize, seed: f64) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let x = i as f64 + seed * 7.3;
                let wobble = (x * 1.7).sin() + (x * 3.1 + 0.5).sin() * 0.6 + (x * 0.7 + 1.3).sin() * 0.4;
                centre * (1.0 + cv * wobble / 0.85)
            })
            .collect()
    }

    #[test]
    fn a_planted_shift_beyond_the_threshold_is_a_regression() {
        // one launch each, 10 samples, 1% noise, busbw down 20%
        let base = launch("a", &noisy(100.0, 0.01, 10, 1.0));
        let new = launch("b", &noisy(80.0, 0.01, 10, 2.0));
        let j = judge(&base, &new, &BUSBW);
        assert_eq!(j.test, Test::MannWhitney);
        assert_eq!(j.verdict, Verdict::Regressed);
        assert!(j.p_value.unwrap() < 1e-4, "{:?}", j.p_value);
        let [lo, hi] = j.interval_pct.unwrap();
        assert!(lo < -17.0 && hi > -23.0 && hi < -15.0, "{lo} {hi}");
        assert!((j.change_pct.unwrap() + 20.0).abs() < 2.0);
        // and the same shift upwards is an improvement
        let j = judge(&new, &base, &BUSBW);
        assert_eq!(j.verdict, Verdict::Improved);
    }

    #[test]
    fn identical_distributions_are_within_noise() {
        let base = launch("a", &noisy(100.0, 0.01, 10, 1.0));
        let new = launch("b", &noisy(100.0, 0.01, 10, 1.0));
        let j = judge(&base, &new, &BUSBW);
        assert_eq!(j.verdict, Verdict::WithinNoise);
        assert!(j.p_value.unwrap() > 0.5);
        assert_eq!(j.change_pct, Some(0.0));
        // the same values in another order, other launches: still nothing
        let mut shuffled = noisy(100.0, 0.01, 10, 1.0);
        shuffled.reverse();
        let j = judge(&base, &launch("c", &shuffled), &BUSBW);
        assert_eq!(j.verdict, Verdict::WithinNoise);
    }

    #[test]
    fn a_significant_change_under_the_threshold_is_within_noise() {
        // 2% lower, clearly (p tiny), but the threshold is 5%
        let base = launch("a", &noisy(100.0, 0.002, 12, 1.0));
        let new = launch("b", &noisy(98.0, 0.002, 12, 2.0));
        let j = judge(&base, &new, &BUSBW);
        assert!(j.p_value.unwrap() < 0.01);
        assert_eq!(j.verdict, Verdict::WithinNoise);
    }

    #[test]
    fn one_sample_falls_back_to_the_threshold_alone() {
        let base = launch("a", &[100.0]);
        for (value, want) in [
            (94.0, Verdict::Regressed),
            (96.0, Verdict::WithinNoise),
            (106.0, Verdict::Improved),
        ] {
            let j = judge(&base, &launch("b", &[value]), &BUSBW);
            assert_eq!((j.test, j.fallback), (Test::ThresholdOnly, Some(Fallback::OneSample)));
            assert_eq!(j.verdict, want, "{value}");
            assert!(j.p_value.is_none() && j.interval_pct.is_none());
        }
        // one sample against several of one launch: the same
        let j = judge(&launch("a", &[100.0, 101.0, 99.0]), &launch("b", &[90.0]), &BUSBW);
        assert_eq!((j.fallback, j.verdict), (Some(Fallback::OneSample), Verdict::Regressed));
        // 3 against 3 cannot reach p < 0.05 (smallest p 0.1): threshold only
        let j = judge(
            &launch("a", &[100.0, 101.0, 99.0]),
            &launch("b", &[90.0, 91.0, 89.0]),
            &BUSBW,
        );
        assert_eq!(
            (j.fallback, j.verdict),
            (Some(Fallback::TooFewSamples), Verdict::Regressed)
        );
    }

    #[test]
    fn noise_larger_than_the_threshold_is_too_noisy_to_judge() {
        // 30% noise, 8% lower: the rank test sees nothing, the interval is
        // far wider than 5%
        let base = launch("a", &noisy(100.0, 0.3, 8, 1.0));
        let new = launch("b", &noisy(92.0, 0.3, 8, 2.0));
        let j = judge(&base, &new, &BUSBW);
        assert_eq!(j.verdict, Verdict::TooNoisy);
        assert!(j.noise_pct.unwrap() > 5.0);
        // ... yet a 50x slowdown is a regression through that noise
        let slow = launch("b", &noisy(2.0, 0.3, 8, 2.0));
        assert_eq!(judge(&base, &slow, &BUSBW).verdict, Verdict::Regressed);
        // and a threshold above the noise judges it within noise
        let wide = Params {
            threshold_pct: 200.0,
            ..BUSBW
        };
        assert_eq!(judge(&base, &new, &wide).verdict, Verdict::WithinNoise);
    }

    #[test]
    fn launch_to_launch_noise_comes_from_the_launches_not_their_samples() {
        // five base launches whose medians differ by up to 20% although
        // each launch is tight; a new launch 15% under the base median
        let mut base = Vec::new();
        let names = ["l1", "l2", "l3", "l4", "l5"];
        for (name, centre) in names.iter().zip([100.0, 112.0, 95.0, 108.0, 91.0]) {
            base.extend(launch(name, &noisy(centre, 0.002, 5, centre)));
        }
        let new = launch("new", &noisy(86.0, 0.002, 5, 3.0));
        let j = judge(&base, &new, &BUSBW);
        assert_eq!(j.test, Test::LaunchT);
        assert_eq!((j.base_stats.launches, j.new_stats.launches), (5, 1));
        // the samples alone would call this clear (every new sample under
        // every base sample); the launches do not
        let values = |s: &[Sample]| s.iter().map(|x| x.value).collect::<Vec<_>>();
        assert!(stats::mann_whitney(&values(&base), &values(&new)).unwrap().p_value < 1e-4);
        assert!(j.p_value.unwrap() > 0.05, "{:?}", j.p_value);
        assert_eq!(j.verdict, Verdict::TooNoisy);
        // with a threshold that absorbs the launch noise: within noise
        let wide = Params {
            threshold_pct: 40.0,
            ..BUSBW
        };
        assert_eq!(judge(&base, &new, &wide).verdict, Verdict::WithinNoise);
        // a 50x slowdown is still caught
        let slow = launch("new", &noisy(2.0, 0.002, 5, 3.0));
        let j = judge(&base, &slow, &wide);
        assert_eq!(j.verdict, Verdict::Regressed);
        assert!(j.p_value.unwrap() < 1e-4);
        // the interval is the change times exp(+-t s sqrt(1/5 + 1)), t_4 = 2.776
        let [lo, hi] = j.interval_pct.unwrap();
        let c = j.change_pct.unwrap() / 100.0 + 1.0;
        assert!(((lo / 100.0 + 1.0) * (hi / 100.0 + 1.0) / (c * c) - 1.0).abs() < 1e-9);
    }

    #[test]
    fn time_is_worse_when_it_grows() {
        let time = Params {
            metric: Metric::Time,
            ..BUSBW
        };
        let base = launch("a", &noisy(10.0, 0.01, 10, 1.0));
        let new = launch("b", &noisy(12.0, 0.01, 10, 2.0));
        assert_eq!(judge(&base, &new, &time).verdict, Verdict::Regressed);
        assert_eq!(judge(&new, &base, &time).verdict, Verdict::Improved);
    }

    #[test]
    fn one_launch_a_side_is_unproven_unless_within_launch_judgement_is_asked_for() {
        let launch_only = Params {
            within_launch: false,
            ..BUSBW
        };
        // a planted 20% loss, clear inside the launches
        let base = launch("a", &noisy(100.0, 0.01, 10, 1.0));
        let new = launch("b", &noisy(80.0, 0.01, 10, 2.0));
        let j = judge(&base, &new, &launch_only);
        assert_eq!((j.test, j.verdict), (Test::MannWhitney, Verdict::Unproven));
        assert!(j.p_value.unwrap() < 1e-4, "the rank test still reports what it sees");
        assert_eq!(judge(&new, &base, &launch_only).verdict, Verdict::Unproven);
        // the threshold alone: one sample, or too few for the rank test
        for (b, n) in [
            (vec![100.0], vec![80.0]),
            (vec![100.0, 101.0, 99.0], vec![80.0, 81.0, 79.0]),
        ] {
            let j = judge(&launch("a", &b), &launch("b", &n), &launch_only);
            assert_eq!((j.test, j.verdict), (Test::ThresholdOnly, Verdict::Unproven));
            assert_eq!(
                judge(&launch("a", &b), &launch("b", &n), &BUSBW).verdict,
                Verdict::Regressed
            );
        }
        // what claims no change stays: within noise, too noisy
        let same = launch("b", &noisy(100.0, 0.01, 10, 1.0));
        assert_eq!(judge(&base, &same, &launch_only).verdict, Verdict::WithinNoise);
        let wide = launch("a", &noisy(100.0, 0.3, 8, 1.0));
        let wide_new = launch("b", &noisy(92.0, 0.3, 8, 2.0));
        assert_eq!(judge(&wide, &wide_new, &launch_only).verdict, Verdict::TooNoisy);
        // several launches on a side: the launch t-test, a real verdict
        let mut launches = Vec::new();
        for (name, centre) in ["l1", "l2", "l3"].iter().zip([100.0, 101.0, 99.0]) {
            launches.extend(launch(name, &noisy(centre, 0.002, 5, centre)));
        }
        let j = judge(&launches, &launch("new", &noisy(50.0, 0.002, 5, 3.0)), &launch_only);
        assert_eq!((j.test, j.verdict), (Test::LaunchT, Verdict::Regressed));
    }

    #[test]
    fn zero_values_compare_by_the_threshold() {
        let zero = launch("a", &[0.0, 0.0, 0.0, 0.0]);
        let j = judge(&zero, &launch("b", &[0.0, 0.0, 0.0, 0.0]), &BUSBW);
        assert_eq!((j.change_pct, j.verdict), (Some(0.0), Verdict::WithinNoise));
        assert_eq!(j.fallback, Some(Fallback::NotPositive));
        let j = judge(&zero, &launch("b", &[1.0, 1.0, 1.0, 1.0]), &BUSBW);
        assert_eq!((j.change_pct, j.verdict), (None, Verdict::WithinNoise));
    }

    /// Five base launches whose medians spread by about 1% (log sd 0.01),
    /// three samples each.
    fn five_launches(centre: f64) -> Vec<Sample<'static>> {
        let names = ["l1", "l2", "l3", "l4", "l5"];
        let mut base = Vec::new();
        for (name, z) in names.iter().zip([-1.26_f64, -0.63, 0.0, 0.63, 1.26]) {
            let m = centre * (0.01 * z).exp();
            base.extend(launch(name, &[m, m * 1.001, m * 0.999]));
        }
        base
    }

    #[test]
    fn a_new_launch_noisier_than_the_baseline_is_judged_by_its_own_noise() {
        let launch_only = Params {
            within_launch: false,
            launch_bound: Some(LAUNCH_BOUND),
            ..BUSBW
        };
        let base = five_launches(100.0);
        // a tight new launch 12% down: clear against launches 1% apart
        let tight = launch("new", &[88.0, 88.1, 87.9, 88.05, 87.95]);
        let j = judge(&base, &tight, &launch_only);
        assert_eq!((j.test, j.verdict), (Test::LaunchT, Verdict::Regressed));
        // the same median from samples that scatter by about 25%: its
        // median is uncertain by more than 12%, so nothing is clear
        let scattered = launch("new", &[60.0, 75.0, 88.0, 110.0, 120.0]);
        let j = judge(&base, &scattered, &launch_only);
        assert_eq!((j.test, j.verdict), (Test::LaunchT, Verdict::TooNoisy));
        // the standard error is the new launch's own: sqrt(s^2 / 5 + w)
        let logs: Vec<f64> = [60.0_f64, 75.0, 88.0, 110.0, 120.0].iter().map(|v| v.ln()).collect();
        let w = stats::median_variance(&logs);
        let [lo, hi] = j.interval_pct.unwrap();
        let half_width = ((hi / 100.0 + 1.0) / (lo / 100.0 + 1.0)).ln() / 2.0;
        let q = stats::t_quantile(0.975, 4.0);
        let five = |s: &[Sample]| {
            let mut medians: Vec<f64> = by_launch(s).values().map(|v| stats::median(v).unwrap().ln()).collect();
            let mean = medians.iter().sum::<f64>() / 5.0;
            medians.iter_mut().for_each(|m| *m = (*m - mean).powi(2));
            medians.iter().sum::<f64>() / 4.0
        };
        let s2 = five(&base);
        assert!(w > s2, "{w} {s2}");
        assert!((half_width - q * (s2 / 5.0 + w).sqrt()).abs() < 1e-9, "{half_width}");
        // a collapse is still caught through that noise
        let collapse = launch("new", &[6.0, 7.5, 8.8, 11.0, 12.0]);
        assert_eq!(judge(&base, &collapse, &launch_only).verdict, Verdict::Regressed);
    }

    #[test]
    fn rows_judged_together_are_held_to_holms_adjusted_p_values() {
        let launch_only = Params {
            within_launch: false,
            launch_bound: Some(LAUNCH_BOUND),
            ..BUSBW
        };
        let base = five_launches(100.0);
        // one launch 5.8% down: clear on its own (p about 0.005) ...
        let down = launch("new", &[94.2, 94.25, 94.15]);
        let alone = judge(&base, &down, &launch_only);
        let p = alone.p_value.unwrap();
        assert!(p < 0.01 && p > 0.05 / 24.0, "{p}");
        assert_eq!((alone.test, alone.verdict), (Test::LaunchT, Verdict::Regressed));
        assert_eq!(alone.p_adjusted, alone.p_value);
        // ... but one of 24 rows, the other 23 unchanged: its adjusted p is
        // 24 p, over alpha, and a change beyond the threshold that the
        // family cannot call clear is too noisy, not within noise
        let same = launch("new", &[100.0, 100.1, 99.9]);
        let mut cases: Vec<(&[Sample], &[Sample])> = vec![(&base, &same); 23];
        cases.insert(5, (&base, &down));
        let judged = judge_together(&cases, &launch_only);
        assert_eq!(judged.len(), 24);
        let j = &judged[5];
        assert_eq!(j.p_value, Some(p));
        assert!((j.p_adjusted.unwrap() - 24.0 * p).abs() < 1e-12);
        assert_eq!(j.verdict, Verdict::TooNoisy);
        assert!(
            judged
                .iter()
                .enumerate()
                .all(|(i, j)| i == 5 || j.verdict == Verdict::WithinNoise)
        );
        // a launch at half the busbw is clear in any family
        let half = launch("new", &[50.0, 50.1, 49.9]);
        cases[5] = (&base, &half);
        let judged = judge_together(&cases, &launch_only);
        assert!(judged[5].p_adjusted.unwrap() < 0.05);
        assert_eq!((judged[5].test, judged[5].verdict), (Test::LaunchT, Verdict::Regressed));
    }

    #[test]
    fn one_launch_a_side_beyond_the_launch_bound_is_judged_by_it() {
        let bounded = Params {
            within_launch: false,
            launch_bound: Some(1.5),
            ..BUSBW
        };
        let base = launch("a", &[100.0, 96.0, 104.0, 99.0, 101.0]);
        // half the busbw: every new sample under the base's lowest / 1.5
        let half = launch("b", &[50.0, 48.0, 52.0, 49.5, 50.5]);
        let j = judge(&base, &half, &bounded);
        assert_eq!(
            (j.test, j.verdict, j.fallback),
            (Test::LaunchBound, Verdict::Regressed, None)
        );
        assert_eq!(judge(&half, &base, &bounded).verdict, Verdict::Improved);
        // one sample a side: the same rule on the two values
        let j = judge(&launch("a", &[100.0]), &launch("b", &[60.0]), &bounded);
        assert_eq!((j.test, j.verdict), (Test::LaunchBound, Verdict::Regressed));
        let j = judge(&launch("a", &[100.0]), &launch("b", &[70.0]), &bounded);
        assert_eq!((j.test, j.verdict), (Test::ThresholdOnly, Verdict::Unproven));
        // 30% down: beyond the threshold, within the bound: unproven as before
        let lower = launch("b", &[70.0, 67.0, 73.0, 69.0, 71.0]);
        assert_eq!(judge(&base, &lower, &bounded).verdict, Verdict::Unproven);
        // medians at half, but one new sample inside the base's range: the
        // ranges are not apart, so not judged
        let overlapping = launch("b", &[50.0, 48.0, 52.0, 49.5, 97.0]);
        assert_eq!(judge(&base, &overlapping, &bounded).verdict, Verdict::Unproven);
        // time: twice as long is worse
        let time = Params {
            metric: Metric::Time,
            ..bounded
        };
        let j = judge(&launch("a", &[10.0, 10.5]), &launch("b", &[20.0, 21.0]), &time);
        assert_eq!((j.test, j.verdict), (Test::LaunchBound, Verdict::Regressed));
        // the threshold still has its say (criterion's rule)
        let lenient = Params {
            threshold_pct: 60.0,
            ..bounded
        };
        assert_ne!(judge(&base, &half, &lenient).verdict, Verdict::Regressed);
        // without a bound (--by's modes, workload CSVs): unproven
        let unbounded = Params {
            launch_bound: None,
            ..bounded
        };
        assert_eq!(judge(&base, &half, &unbounded).verdict, Verdict::Unproven);
        // several launches on a side: the launch t-test, never the bound
        let mut two = base.clone();
        two.extend(launch("c", &[100.0, 101.0]));
        assert_eq!(judge(&two, &half, &bounded).test, Test::LaunchT);
    }
}
