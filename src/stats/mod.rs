//! Statistics on plain slices, the one place they live: order statistics
//! (quantiles, median, the spread summary of `Spread`, the coefficient of
//! variation), the distribution-free interval of a median, the
//! Mann-Whitney U test and its interval of a shift (`rank`), and the
//! normal, Student's t and binomial distributions (`dist`), Holm's
//! adjustment of many p-values judged together (`family`). The engine's precision
//! policy and per-iteration statistics, the JSON report's points and
//! `compare`'s noise model all use these, so that they agree on the same
//! samples.
//!
//! A leaf: pure functions of their inputs, no knowledge of rows, metrics
//! or verdicts, no random numbers (two runs on the same samples give the
//! same figures). Formulas follow the textbook definitions (Hyndman & Fan
//! for quantiles; Conover, "Practical Nonparametric Statistics", 3.2 for
//! the median's interval; Hollander, Wolfe & Chicken, "Nonparametric
//! Statistical Methods", chapter 4; Press et al., "Numerical Recipes",
//! 6.1-6.4); the tests check them against published tables and
//! brute-force enumeration.

mod dist;
mod family;
mod rank;

pub use dist::{
    beta_inc, binomial_upper_tail, ln_gamma, normal_cdf, normal_quantile, t_cdf, t_quantile, t_two_sided_p,
};
pub use family::holm;
pub use rank::{EXACT_MAX_TOTAL, RankTest, mann_whitney, shift_interval, smallest_p_value, u_distribution};

/// The spread summary of a set of samples (the samples of a point, one
/// side of a comparison): count, median, quartiles, the median absolute
/// deviation from the median (unscaled: multiply by 1.4826 for a normal
/// distribution's standard deviation), and the range.
#[derive(Clone, Debug, PartialEq)]
pub struct Spread {
    pub n: usize,
    pub median: f64,
    pub q1: f64,
    pub q3: f64,
    /// Median absolute deviation from the median (unscaled).
    pub mad: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// None for an empty slice or one holding a value that is not finite.
    pub fn of(values: &[f64]) -> Option<Spread> {
        let sorted = sorted(values)?;
        let median = quantile(&sorted, 0.5);
        let deviations: Vec<f64> = sorted.iter().map(|v| (v - median).abs()).collect();
        let deviations = self::sorted(&deviations)?;
        Some(Spread {
            n: sorted.len(),
            median,
            q1: quantile(&sorted, 0.25),
            q3: quantile(&sorted, 0.75),
            mad: quantile(&deviations, 0.5),
            min: sorted[0],
            max: sorted[sorted.len() - 1],
        })
    }

    pub fn iqr(&self) -> f64 {
        self.q3 - self.q1
    }
}

/// The values in ascending order; None when empty or when one is NaN or
/// infinite.
pub fn sorted(values: &[f64]) -> Option<Vec<f64>> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(v)
}

/// The q-quantile of ascending `sorted` by linear interpolation between
/// order statistics (Hyndman & Fan type 7, as R's and numpy's default):
/// the median of an even count is the mean of the two middle values. NaN
/// for no values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let Some(last) = sorted.len().checked_sub(1) else {
        return f64::NAN;
    };
    let h = last as f64 * q.clamp(0.0, 1.0);
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    match sorted.get(lo + 1) {
        Some(next) if frac > 0.0 => sorted[lo] + frac * (next - sorted[lo]),
        _ => sorted[lo],
    }
}

/// The median; None for no values or one that is not finite.
pub fn median(values: &[f64]) -> Option<f64> {
    sorted(values).map(|s| quantile(&s, 0.5))
}

/// The variance of the median of `values`, estimated from the values
/// themselves: a sample median's asymptotic variance is 1 / (4 n f(m)^2),
/// f the density at the median, which for a normal distribution is
/// pi sigma^2 / (2 n); sigma is estimated robustly as 1.4826 MAD. 0 for fewer than
/// two values or a value that is not finite.
pub fn median_variance(values: &[f64]) -> f64 {
    match Spread::of(values) {
        Some(s) if s.n >= 2 => {
            let sigma = 1.4826 * s.mad;
            std::f64::consts::PI * sigma * sigma / (2.0 * s.n as f64)
        }
        _ => 0.0,
    }
}

/// Sample standard deviation (n - 1) over the mean; 0 for fewer than two
/// samples or a zero mean.
pub fn coefficient_of_variation(samples: &[f64]) -> f64 {
    let n = samples.len();
    if n < 2 {
        return 0.0;
    }
    let mean = samples.iter().sum::<f64>() / n as f64;
    if mean == 0.0 {
        return 0.0;
    }
    let var = samples.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1) as f64;
    var.sqrt() / mean
}

/// The half-width of the 95% order-statistic interval of the median of
/// `samples`, relative to the median: `(x(k+1-l) - x(l)) / 2 / median`
/// (`median_interval_rank`). None below 6 samples, with a value that is
/// not finite, or when the median is 0.
pub fn relative_half_width(samples: &[f64]) -> Option<f64> {
    let l = median_interval_rank(samples.len())?;
    let sorted = sorted(samples)?;
    let k = sorted.len();
    let m = quantile(&sorted, 0.5);
    (m > 0.0).then(|| (sorted[k - l] - sorted[l - 1]) / 2.0 / m)
}

/// The rank `l` (from 1) of the lower end of the 95% interval of a median
/// of `k` samples, `[x(l), x(k+1-l)]`: the largest `l` for which a
/// Binomial(k, 1/2) is below `l` with probability at most 2.5%. None when
/// `k` is too small for such an interval (under 6).
pub fn median_interval_rank(k: usize) -> Option<usize> {
    // P(Binomial(k, 1/2) <= i), accumulated in log space so that no term
    // underflows for the largest k.
    let ln_half_k = k as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0f64; // ln C(k, i)
    let mut below = 0.0; // P(B <= i - 1), i.e. P(B < l) for l = i
    let mut l = 0;
    for i in 0..=k / 2 {
        let p_i = (ln_choose + ln_half_k).exp();
        if below + p_i > 0.025 {
            break;
        }
        below += p_i;
        l = i + 1;
        ln_choose += ((k - i) as f64).ln() - ((i + 1) as f64).ln();
    }
    (l >= 1).then_some(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics_interpolate_like_numpy() {
        let s = Spread::of(&[4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.n, s.median, s.q1, s.q3), (4, 2.5, 1.75, 3.25));
        assert_eq!((s.min, s.max, s.mad), (1.0, 4.0, 1.0));
        assert_eq!(Spread::of(&[7.0]).unwrap().iqr(), 0.0);
        assert!(Spread::of(&[]).is_none());
        assert!(Spread::of(&[1.0, f64::NAN]).is_none());
        assert_eq!(median(&[5.0, 1.0, 3.0]), Some(3.0));
    }

    #[test]
    fn quantiles_interpolate_between_order_statistics() {
        let s = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(quantile(&s, 0.0), 1.0);
        assert_eq!(quantile(&s, 0.5), 2.5);
        assert_eq!(quantile(&s, 1.0), 4.0);
        let hundred: Vec<f64> = (1..=101).map(f64::from).collect();
        assert_eq!(quantile(&hundred, 0.99), 100.0);
        assert_eq!(quantile(&hundred, 0.5), 51.0);
        assert_eq!(quantile(&[7.0], 0.99), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn cv_is_the_sample_standard_deviation_over_the_mean() {
        // mean 5, sample variance 32/7
        let s = [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0];
        let cv = coefficient_of_variation(&s);
        assert!((cv - (32.0f64 / 7.0).sqrt() / 5.0).abs() < 1e-12, "{cv}");
        assert_eq!(coefficient_of_variation(&[3.0, 3.0, 3.0]), 0.0);
        assert_eq!(coefficient_of_variation(&[3.0]), 0.0);
    }

    #[test]
    fn spreads_give_the_median_iqr_and_mad_of_known_samples() {
        // sorted 1 2 3 4 100: median 3, p25 2, p75 4; deviations 0 1 1 2 97
        let s = Spread::of(&[4.0, 100.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.n, s.median, s.iqr(), s.mad), (5, 3.0, 2.0, 1.0));
        // an even count: median 2.5; p25 1.75, p75 3.25; deviations .5 .5 1.5 1.5
        let s = Spread::of(&[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!((s.n, s.median, s.iqr(), s.mad), (4, 2.5, 1.5, 1.0));
        let one = Spread::of(&[7.0]).unwrap();
        assert_eq!((one.n, one.median, one.iqr(), one.mad), (1, 7.0, 0.0, 0.0));
    }

    #[test]
    fn the_interval_of_a_median_follows_the_binomial_table() {
        // Conover's table A3 (alpha = 0.05, two-sided): the lower rank for
        // k samples.
        assert_eq!(median_interval_rank(5), None);
        assert_eq!(median_interval_rank(6), Some(1));
        assert_eq!(median_interval_rank(8), Some(1));
        assert_eq!(median_interval_rank(9), Some(2));
        assert_eq!(median_interval_rank(10), Some(2));
        assert_eq!(median_interval_rank(11), Some(2));
        assert_eq!(median_interval_rank(12), Some(3));
        assert_eq!(median_interval_rank(20), Some(6));
        assert_eq!(median_interval_rank(30), Some(10));
        assert_eq!(median_interval_rank(100), Some(40));
        // large k: about k/2 - 0.98 sqrt(k), and no underflow
        let l = median_interval_rank(1000).unwrap();
        assert!((468..=470).contains(&l), "{l}");
    }

    #[test]
    fn the_median_variance_is_pi_sigma_squared_over_2n() {
        // MAD of [1, 2, 3, 4, 5] is 1: sigma 1.4826, n 5
        let v = median_variance(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let want = std::f64::consts::PI * 1.4826 * 1.4826 / 10.0;
        assert!((v - want).abs() < 1e-12, "{v} {want}");
        assert_eq!(median_variance(&[7.0]), 0.0);
        assert_eq!(median_variance(&[1.0, f64::NAN]), 0.0);
        assert_eq!(median_variance(&[2.0, 2.0, 2.0]), 0.0);
    }

    #[test]
    fn the_half_width_is_half_the_interval_over_the_median() {
        // 10 samples: the interval is [x(2), x(9)]
        let xs = [10.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0];
        let hw = relative_half_width(&xs).unwrap();
        assert!((hw - (9.0 - 2.0) / 2.0 / 5.5).abs() < 1e-12, "{hw}");
        assert_eq!(relative_half_width(&xs[..5]), None, "too few for an interval");
        assert_eq!(relative_half_width(&[0.0; 10]), None, "a zero median");
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[]), None);
    }
}
