//! The statistics `compare` needs, on plain slices: order statistics
//! (median, quartiles, MAD), the Mann-Whitney U test with its exact null
//! distribution for small samples, the matching distribution-free interval
//! of a shift (Hodges-Lehmann), and Student's t distribution.
//!
//! Pure functions of their inputs: no random numbers (two runs of `compare`
//! on the same files print the same figures), no knowledge of rows,
//! metrics or verdicts (`noise` owns those). Formulas follow the textbook
//! definitions (Hollander, Wolfe & Chicken, "Nonparametric Statistical
//! Methods", chapter 4; Press et al., "Numerical Recipes", 6.1-6.4); the
//! tests check them against published tables and brute-force enumeration.

/// Largest pooled sample size for which the U test's null distribution is
/// counted exactly: the number of arrangements, C(m + n, m), must fit the
/// 128-bit integers it is counted in (C(100, 50) is about 1e29).
pub const EXACT_MAX_TOTAL: usize = 100;

/// Order statistics of one side's samples.
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
/// the median of an even count is the mean of the two middle values.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q.clamp(0.0, 1.0);
    let (lo, frac) = (h.floor() as usize, h - h.floor());
    match sorted.get(lo + 1) {
        Some(next) if frac > 0.0 => sorted[lo] + frac * (next - sorted[lo]),
        _ => sorted[lo],
    }
}

pub fn median(values: &[f64]) -> Option<f64> {
    sorted(values).map(|s| quantile(&s, 0.5))
}

/// The outcome of a two-sided Mann-Whitney U test of `x` against `y`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankTest {
    /// U of `x`: the number of pairs (x_i, y_j) with x_i > y_j, ties
    /// counting one half.
    pub u: f64,
    pub p_value: f64,
    /// The p-value comes from the exact null distribution (no ties and at
    /// most `EXACT_MAX_TOTAL` samples); otherwise from the normal
    /// approximation with the tie and continuity corrections.
    pub exact: bool,
}

/// Two-sided Mann-Whitney U test (Wilcoxon rank-sum). None when a side is
/// empty or holds a value that is not finite.
pub fn mann_whitney(x: &[f64], y: &[f64]) -> Option<RankTest> {
    let (m, n) = (x.len(), y.len());
    if m == 0 || n == 0 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let mut pooled: Vec<(f64, bool)> = x
        .iter()
        .map(|&v| (v, true))
        .chain(y.iter().map(|&v| (v, false)))
        .collect();
    pooled.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Mid-ranks, and the tie term sum(t^3 - t) of the variance correction.
    let (mut rank_sum_x, mut tie_term, mut i) = (0.0, 0.0, 0);
    while i < pooled.len() {
        let mut j = i;
        while j + 1 < pooled.len() && pooled[j + 1].0 == pooled[i].0 {
            j += 1;
        }
        let mid_rank = (i + j) as f64 / 2.0 + 1.0;
        rank_sum_x += pooled[i..=j].iter().filter(|p| p.1).count() as f64 * mid_rank;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let u = rank_sum_x - (m * (m + 1)) as f64 / 2.0;
    let mn = (m * n) as f64;
    if tie_term == 0.0 && m + n <= EXACT_MAX_TOTAL {
        let counts = u_distribution(m, n);
        let total: f64 = counts.iter().map(|&c| c as f64).sum();
        let k = u.round() as usize;
        let below: f64 = counts[..=k].iter().map(|&c| c as f64).sum();
        let above: f64 = counts[k..].iter().map(|&c| c as f64).sum();
        let p_value = (2.0 * below.min(above) / total).min(1.0);
        return Some(RankTest {
            u,
            p_value,
            exact: true,
        });
    }
    let big_n = (m + n) as f64;
    let variance = mn / 12.0 * ((big_n + 1.0) - tie_term / (big_n * (big_n - 1.0)));
    let p_value = if variance <= 0.0 {
        1.0
    } else {
        let z = ((u - mn / 2.0).abs() - 0.5).max(0.0) / variance.sqrt();
        (2.0 * (1.0 - normal_cdf(z))).min(1.0)
    };
    Some(RankTest {
        u,
        p_value,
        exact: false,
    })
}

/// The smallest two-sided p-value the U test can give with m and n
/// samples (both sides apart, no ties): 2 / C(m + n, m). When it is not
/// below the significance level, the test cannot find anything.
pub fn smallest_p_value(m: usize, n: usize) -> f64 {
    // C(m + n, m) as a product of ratios, in floating point: only its
    // order of magnitude matters here.
    let (m, n) = (m.min(n), m.max(n));
    let arrangements: f64 = (1..=m).map(|i| (n + i) as f64 / i as f64).product();
    (2.0 / arrangements).min(1.0)
}

/// How many of the C(m + n, m) equally likely arrangements of m x-values
/// and n y-values give U = u, for u = 0 ..= m n: the coefficients of the
/// Gaussian binomial [m + n choose m] in q, built as the product over i of
/// (1 - q^(n+i)) / (1 - q^i). Each step's division is exact in integers.
pub fn u_distribution(m: usize, n: usize) -> Vec<u128> {
    let (m, n) = (m.min(n), m.max(n));
    let mut c = vec![0i128; m * n + m + 1];
    c[0] = 1;
    let mut degree = 0;
    for i in 1..=m {
        let s = n + i;
        for k in (s..=degree + s).rev() {
            c[k] -= c[k - s];
        }
        degree += s;
        for k in i..=degree {
            c[k] += c[k - i];
        }
        degree -= i;
    }
    c.truncate(m * n + 1);
    c.into_iter().map(|v| v.max(0) as u128).collect()
}

/// The distribution-free confidence interval, at level 1 - alpha, of the
/// shift d in "y is distributed as x + d" that inverts the U test
/// (Hodges-Lehmann; Hollander, Wolfe & Chicken 4.3): the c-th smallest and
/// c-th largest of the m n differences y_j - x_i, where c - 1 is the
/// largest U whose lower tail probability is at most alpha / 2 (exact
/// distribution up to `EXACT_MAX_TOTAL` samples, normal approximation
/// beyond). None when the samples are too few for any interval at this
/// level (the test could not reject a shift of any size) or a side is empty.
pub fn shift_interval(x: &[f64], y: &[f64], alpha: f64) -> Option<(f64, f64)> {
    let (m, n) = (x.len(), y.len());
    if m == 0 || n == 0 {
        return None;
    }
    let mn = m * n;
    let c = if m + n <= EXACT_MAX_TOTAL {
        let counts = u_distribution(m, n);
        let total: f64 = counts.iter().map(|&v| v as f64).sum();
        let mut below = 0.0;
        let mut c = 0;
        for &count in &counts {
            below += count as f64;
            if below / total > alpha / 2.0 {
                break;
            }
            c += 1;
        }
        c
    } else {
        let sigma = ((mn * (m + n + 1)) as f64 / 12.0).sqrt();
        let largest = (mn as f64 / 2.0 - 0.5 - sigma * normal_quantile(1.0 - alpha / 2.0)).floor();
        if largest < 0.0 { 0 } else { largest as usize + 1 }
    };
    if c == 0 || c > mn.div_ceil(2) {
        return None;
    }
    let mut differences: Vec<f64> = y.iter().flat_map(|&b| x.iter().map(move |&a| b - a)).collect();
    if differences.iter().any(|d| !d.is_finite()) {
        return None;
    }
    differences.sort_by(f64::total_cmp);
    Some((differences[c - 1], differences[mn - c]))
}

/// Standard normal distribution function.
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// The p-quantile of the standard normal distribution, by bisection.
pub fn normal_quantile(p: f64) -> f64 {
    bisect(normal_cdf, p, -40.0, 40.0)
}

/// Complementary error function, fractional error below 1.2e-7
/// everywhere (Numerical Recipes' Chebyshev fit, `erfcc`).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

/// Student's t distribution function with `df` degrees of freedom
/// (df > 0): 1 - I_x(df/2, 1/2) / 2 with x = df / (df + t^2) for t >= 0.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    if t.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if t.is_infinite() {
        return if t > 0.0 { 1.0 } else { 0.0 };
    }
    let tail = 0.5 * beta_inc(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 { 1.0 - tail } else { tail }
}

/// The p-quantile of Student's t with `df` degrees of freedom.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    bisect(|t| t_cdf(t, df), p, -1e7, 1e7)
}

/// Two-sided p-value of a t statistic.
pub fn t_two_sided_p(t: f64, df: f64) -> f64 {
    (2.0 * (1.0 - t_cdf(t.abs(), df))).clamp(0.0, 1.0)
}

/// The x where the increasing `f` reaches `target`, in [lo, hi].
fn bisect(f: impl Fn(f64) -> f64, target: f64, mut lo: f64, mut hi: f64) -> f64 {
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if f(mid) < target {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-12 * mid.abs().max(1.0) {
            break;
        }
    }
    0.5 * (lo + hi)
}

/// Regularized incomplete beta function I_x(a, b), by its continued
/// fraction (Numerical Recipes 6.4), using the symmetry
/// I_x(a, b) = 1 - I_{1-x}(b, a) where the fraction converges faster.
pub fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front = (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(a, b, x) / a
    } else {
        1.0 - front * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..=300 {
        let m = m as f64;
        let m2 = 2.0 * m;
        for aa in [
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ] {
            d = 1.0 + aa * d;
            if d.abs() < TINY {
                d = TINY;
            }
            c = 1.0 + aa / c;
            if c.abs() < TINY {
                c = TINY;
            }
            d = 1.0 / d;
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine coefficients; relative error
/// about 1e-15).
pub fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 - x) = π / sin(π x).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        sum += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol * b.abs().max(1e-300)
    }

    /// U test p-value by enumerating every assignment of the pooled
    /// values to the two sides (the definition of the exact test).
    fn brute_force_p(x: &[f64], y: &[f64]) -> f64 {
        let pooled: Vec<f64> = x.iter().chain(y).copied().collect();
        let u_of = |xs: &[f64], ys: &[f64]| -> f64 {
            xs.iter()
                .map(|a| {
                    ys.iter()
                        .map(|b| {
                            if a > b {
                                1.0
                            } else if a == b {
                                0.5
                            } else {
                                0.0
                            }
                        })
                        .sum::<f64>()
                })
                .sum()
        };
        let observed = u_of(x, y);
        let centre = (x.len() * y.len()) as f64 / 2.0;
        let (mut extreme, mut total) = (0u64, 0u64);
        for mask in 0u32..(1 << pooled.len()) {
            if mask.count_ones() as usize != x.len() {
                continue;
            }
            let (xs, ys): (Vec<_>, Vec<_>) = pooled.iter().enumerate().partition(|(i, _)| mask & (1 << i) != 0);
            let xs: Vec<f64> = xs.into_iter().map(|(_, v)| *v).collect();
            let ys: Vec<f64> = ys.into_iter().map(|(_, v)| *v).collect();
            total += 1;
            if (u_of(&xs, &ys) - centre).abs() >= (observed - centre).abs() - 1e-9 {
                extreme += 1;
            }
        }
        extreme as f64 / total as f64
    }

    #[test]
    fn the_exact_u_distribution_matches_the_published_counts() {
        // m = n = 5: 252 arrangements; P(U <= 2) = 4/252, P(U <= 3) = 7/252
        // (Mann & Whitney 1947, table 1).
        let counts = u_distribution(5, 5);
        assert_eq!(counts.len(), 26);
        assert_eq!(counts.iter().sum::<u128>(), 252);
        assert_eq!(&counts[..5], &[1, 1, 2, 3, 5]);
        assert_eq!(counts, counts.iter().rev().copied().collect::<Vec<_>>());
        // C(100, 50) arrangements, counted exactly
        let big = u_distribution(50, 50);
        assert_eq!(big.iter().sum::<u128>(), 100_891_344_545_564_193_334_812_497_256);
        assert_eq!(u_distribution(3, 7), u_distribution(7, 3));
    }

    #[test]
    fn exact_p_values_equal_brute_force_enumeration() {
        let cases: [(&[f64], &[f64]); 4] = [
            (&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]),
            (&[1.1, 2.5, 3.9, 8.0], &[2.0, 4.5, 6.1, 7.0, 9.5]),
            (&[10.0, 11.0, 12.5, 13.0, 14.0, 15.0], &[1.0, 2.0, 3.0, 16.0]),
            (&[5.0], &[1.0, 2.0, 3.0, 4.0, 6.0]),
        ];
        for (x, y) in cases {
            let test = mann_whitney(x, y).unwrap();
            assert!(test.exact);
            let want = brute_force_p(x, y);
            assert!(
                close(test.p_value, want, 1e-12),
                "{x:?} {y:?}: {} vs {want}",
                test.p_value
            );
        }
        // fully apart, 5 against 5: 2/252
        let t = mann_whitney(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]).unwrap();
        assert!(close(t.p_value, 2.0 / 252.0, 1e-12));
        assert_eq!(t.u, 0.0);
        assert!(close(smallest_p_value(5, 5), 2.0 / 252.0, 1e-12));
        assert!(close(smallest_p_value(3, 3), 0.1, 1e-12));
    }

    #[test]
    fn ties_use_the_corrected_normal_approximation() {
        // identical samples: no evidence at all
        let t = mann_whitney(&[3.0, 3.0, 3.0], &[3.0, 3.0, 3.0]).unwrap();
        assert!(!t.exact);
        assert_eq!(t.p_value, 1.0);
        // x = [1, 2, 2, 3, 4], y = [3, 4, 4, 5, 6]: mid-ranks give R_x = 17.5,
        // U = 2.5; ties of 2, 2 and 3 values: sum(t^3 - t) = 36, so
        // var = 25/12 (11 - 36/90) and z = (|2.5 - 12.5| - 0.5) / sqrt(var)
        // = 2.0216, p = erfc(z / sqrt 2) = 0.04322 (as scipy's
        // mannwhitneyu(method="asymptotic") computes it)
        let t = mann_whitney(&[1.0, 2.0, 2.0, 3.0, 4.0], &[3.0, 4.0, 4.0, 5.0, 6.0]).unwrap();
        assert_eq!(t.u, 2.5);
        assert!((t.p_value - 0.043_22).abs() < 1e-5, "{}", t.p_value);
    }

    #[test]
    fn the_shift_interval_uses_the_textbook_order_statistics() {
        // m = n = 5 at 95%: the 3rd smallest and 3rd largest of the 25
        // differences (P(U <= 2) = 0.016 <= 0.025 < P(U <= 3) = 0.028)
        let x = [0.0, 1.0, 2.0, 3.0, 4.0];
        let y = [10.0, 20.0, 30.0, 40.0, 50.0];
        let mut d: Vec<f64> = y.iter().flat_map(|b| x.iter().map(move |a| b - a)).collect();
        d.sort_by(f64::total_cmp);
        assert_eq!(shift_interval(&x, &y, 0.05), Some((d[2], d[22])));
        // 3 against 3 cannot reach 5%: no interval
        assert_eq!(shift_interval(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0], 0.05), None);
        // a pure shift is recovered inside the interval, large samples too
        let x: Vec<f64> = (0..80).map(|i| (i as f64 * 0.37).sin()).collect();
        let y: Vec<f64> = x.iter().map(|v| v + 0.25).collect();
        let (lo, hi) = shift_interval(&x, &y, 0.05).unwrap();
        assert!(lo < 0.25 && 0.25 < hi && hi - lo < 0.6, "{lo} {hi}");
    }

    #[test]
    fn t_and_normal_distributions_match_printed_tables() {
        // two-sided 95% critical values
        for (df, want) in [
            (1.0, 12.7062),
            (2.0, 4.3027),
            (4.0, 2.7764),
            (10.0, 2.2281),
            (30.0, 2.0423),
        ] {
            assert!(close(t_quantile(0.975, df), want, 1e-4), "df {df}");
        }
        assert!(close(t_quantile(0.995, 4.0), 4.6041, 1e-4));
        assert!(close(t_cdf(0.0, 3.0), 0.5, 1e-12));
        assert!(close(t_two_sided_p(2.7764, 4.0), 0.05, 1e-3));
        assert!(close(normal_cdf(1.959964), 0.975, 1e-6));
        assert!(close(normal_quantile(0.975), 1.959964, 1e-5));
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-12));
        assert!(close(ln_gamma(0.5), std::f64::consts::PI.sqrt().ln(), 1e-12));
        assert!(close(beta_inc(2.0, 3.0, 0.4), 0.5248, 1e-4));
    }

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
}
