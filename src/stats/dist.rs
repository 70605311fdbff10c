//! The standard normal and Student's t distributions, by the special
//! functions they need (Numerical Recipes 6.1-6.4).

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

/// P(X >= k) for X ~ Binomial(n, p): the one-sided tail of a sign test.
/// 1 for k = 0, 0 for k > n; the regularized incomplete beta function
/// `I_p(k, n - k + 1)` otherwise (Press et al., Numerical Recipes 6.4).
pub fn binomial_upper_tail(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        1.0
    } else if k > n {
        0.0
    } else {
        beta_inc(k as f64, (n - k + 1) as f64, p.clamp(0.0, 1.0))
    }
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
        // the binomial tail against its sum, term by term
        for (n, p) in [(10u64, 0.5f64), (24, 0.5), (30, 1.0 / 3.0), (7, 0.25)] {
            for k in 0..=n + 1 {
                let brute: f64 = (k..=n)
                    .map(|j| {
                        let ln_choose =
                            ln_gamma(n as f64 + 1.0) - ln_gamma(j as f64 + 1.0) - ln_gamma((n - j) as f64 + 1.0);
                        (ln_choose + j as f64 * p.ln() + (n - j) as f64 * (1.0 - p).ln()).exp()
                    })
                    .sum();
                assert!(
                    (binomial_upper_tail(k, n, p) - brute).abs() < 1e-10,
                    "n {n} k {k} p {p}"
                );
            }
        }
        // 24 of 24 at one half: 2^-24
        assert!(close(binomial_upper_tail(24, 24, 0.5), 0.5f64.powi(24), 1e-9));
    }
}
