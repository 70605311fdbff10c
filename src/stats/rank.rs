//! The Mann-Whitney U test (Wilcoxon rank-sum) with its exact null
//! distribution for small samples, and the matching distribution-free
//! interval of a shift (Hodges-Lehmann; Hollander, Wolfe & Chicken 4.3).

use super::dist::{normal_cdf, normal_quantile};

/// Largest pooled sample size for which the U test's null distribution is
/// counted exactly: the number of arrangements, C(m + n, m), must fit the
/// 128-bit integers it is counted in (C(100, 50) is about 1e29).
pub const EXACT_MAX_TOTAL: usize = 100;

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
}
