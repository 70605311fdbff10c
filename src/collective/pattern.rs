//! Validation patterns: the value of every input element of every rank, and
//! the exact reduction of an element over all ranks, in closed form.
//!
//! Every value is a non-negative integer chosen so that the exact result is
//! representable in the element type and independent of reduction order:
//! every partial result stays at or below `DType::exact_max() - 1`. The value
//! `exact_max` itself is kept free because output buffers are poisoned with
//! all-ones bytes before a check (`uint8` 255, `int8` -1, floats NaN), so an
//! operation that writes nothing can never pass.
//!
//! One exception, avg on half, bfloat16, float and double: NCCL does not
//! compute sum/n but multiplies each input by `(T)(1/n)` and then sums
//! (ncclDevPreMulSum, set up in NCCL's enqueue.cc), so its result is the
//! exact average only up to rounding. `relative_bound` gives the bound the
//! check then allows (see there); integers keep NCCL's exact sum-then-divide.
//!
//! Input of rank `r`, element `i`: `x = (a_i + r) mod m` with
//! `a_i = mix(i ^ seed) mod m`, transformed by the operation (see `Kind`).
//! Because `x` walks consecutive residues over the ranks, sums, minima,
//! maxima and products over all ranks have closed forms, so the expected
//! output costs O(1) per element whatever the rank count.

use crate::types::{DType, ReduceOp};

/// Largest modulus used: keeps values small and spread.
const MAX_MODULUS: u64 = 1 << 20;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Data movement: `x` itself.
    Data,
    Sum,
    /// `2` where `x == 0`, else `1`: products are powers of two.
    Prod,
    Min,
    Max,
    /// `n * x`, so that the sum divides exactly by `n`.
    Avg,
}

/// Pattern for one (type, operation, rank count, repetition).
#[derive(Clone, Debug)]
pub struct Pattern {
    kind: Kind,
    modulus: u64,
    nranks: u64,
    seed: u64,
    /// Unit roundoff of a floating type (2^-p for p significand bits).
    unit_roundoff: Option<f64>,
}

impl Pattern {
    /// `op` is `None` for collectives that move data without reducing it.
    /// `seed` varies the pattern between check iterations.
    pub fn new(dtype: DType, op: Option<ReduceOp>, nranks: usize, seed: u64) -> Pattern {
        let n = nranks.max(1) as u64;
        // Every partial result must stay at or below `limit`.
        let limit = dtype.exact_max() - 1;
        let (kind, modulus) = match op {
            None => (Kind::Data, limit.saturating_add(1)),
            Some(ReduceOp::Min) => (Kind::Min, limit.saturating_add(1)),
            Some(ReduceOp::Max) => (Kind::Max, limit.saturating_add(1)),
            // n * (m - 1) <= limit
            Some(ReduceOp::Sum) => (Kind::Sum, limit / n + 1),
            // sum of n * x over ranks <= limit: n * n * (m - 1) <= limit
            Some(ReduceOp::Avg) => (Kind::Avg, limit / n / n + 1),
            Some(ReduceOp::Prod) => {
                // At most ceil(n / m) ranks contribute a factor 2 to an
                // element; 2^twos <= limit.
                let twos = (u64::BITS - 1 - limit.leading_zeros()) as u64;
                (Kind::Prod, n.div_ceil(twos.max(1)).max(1))
            }
        };
        let unit_roundoff = match dtype {
            DType::Half => Some(2f64.powi(-11)),
            DType::Bfloat16 => Some(2f64.powi(-8)),
            DType::Float => Some(2f64.powi(-24)),
            DType::Double => Some(2f64.powi(-53)),
            _ => None,
        };
        Pattern {
            kind,
            modulus: modulus.clamp(1, MAX_MODULUS),
            nranks: n,
            seed,
            unit_roundoff,
        }
    }

    /// For avg on a floating type, the relative error NCCL's arithmetic may
    /// leave, which the check allows: `|got - avg| <= bound * avg`. `None`:
    /// the result is exact.
    ///
    /// NCCL computes `sum_r fl(x_r * s)` with `s = fl(1/n)` (half and
    /// bfloat16: the float 1/n rounded to the type), summed in whatever
    /// order its algorithm takes, each step rounded (unit roundoff `u`).
    /// With every `x_r >= 0` (the patterns'), `s = (1/n)(1 + d0)`, each
    /// product carries one more `(1 + d)`, and any summation order of n
    /// non-negative terms adds at most `(1 + u)^(n-1)` (Higham, "Accuracy
    /// and Stability of Numerical Algorithms", 4.2), so the error is within
    /// `gamma(n + 1) = (n + 1)u / (1 - (n + 1)u)` of the average. The
    /// hierarchical modes average twice (inside nodes of L ranks, then among
    /// M nodes, L * M = n): `gamma(L + 1) + gamma(M + 1)` plus their
    /// product, below `gamma(n + 3)` for every L, M >= 1 since L + M <= n + 1;
    /// that bound is the one used, for every mode.
    pub fn relative_bound(&self) -> Option<f64> {
        if self.kind != Kind::Avg {
            return None;
        }
        let u = self.unit_roundoff?;
        let k = (self.nranks + 3) as f64 * u;
        Some(k / (1.0 - k).max(f64::MIN_POSITIVE))
    }

    fn base(&self, i: usize) -> u64 {
        mix(i as u64 ^ self.seed) % self.modulus
    }

    /// Input value of element `i` of rank `rank`'s send buffer.
    pub fn input(&self, rank: usize, i: usize) -> u64 {
        let x = (self.base(i) + rank as u64 % self.modulus) % self.modulus;
        match self.kind {
            Kind::Prod => {
                if x == 0 {
                    2
                } else {
                    1
                }
            }
            Kind::Avg => self.nranks * x,
            Kind::Data | Kind::Sum | Kind::Min | Kind::Max => x,
        }
    }

    /// Element `i` reduced over all ranks with the pattern's operation.
    pub fn reduced(&self, i: usize) -> u64 {
        let (a, m, n) = (self.base(i), self.modulus, self.nranks);
        let wraps = a + n > m;
        match self.kind {
            Kind::Sum | Kind::Data => residue_sum(a, m, n),
            // sum of n * x, divided by n
            Kind::Avg => residue_sum(a, m, n),
            Kind::Min => {
                if wraps {
                    0
                } else {
                    a
                }
            }
            Kind::Max => {
                if wraps {
                    m - 1
                } else {
                    a + n - 1
                }
            }
            Kind::Prod => {
                let first_zero = (m - a) % m;
                let twos = if first_zero >= n {
                    0
                } else {
                    (n - 1 - first_zero) / m + 1
                };
                1 << twos
            }
        }
    }
}

/// `sum over r in 0..n of (a + r) mod m`, for `a < m`.
fn residue_sum(a: u64, m: u64, n: u64) -> u64 {
    let full_cycles = n / m;
    let rest = n % m;
    let cycle = m * (m - 1) / 2;
    // The rest runs a, a+1, ... up to m-1, then wraps to 0, 1, ...
    let before_wrap = rest.min(m - a);
    let after_wrap = rest - before_wrap;
    full_cycles * cycle
        + before_wrap * a
        + before_wrap * before_wrap.saturating_sub(1) / 2
        + after_wrap * after_wrap.saturating_sub(1) / 2
}

/// splitmix64's finaliser: a cheap, well-spread hash of the element index.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const TYPES: [DType; 10] = DType::ALL;

    fn brute(p: &Pattern, op: ReduceOp, i: usize, n: usize) -> u64 {
        let vals = (0..n).map(|r| p.input(r, i));
        match op {
            ReduceOp::Sum => vals.sum(),
            ReduceOp::Avg => vals.sum::<u64>() / n as u64,
            ReduceOp::Prod => vals.product(),
            ReduceOp::Min => vals.min().unwrap(),
            ReduceOp::Max => vals.max().unwrap(),
        }
    }

    #[test]
    fn closed_forms_match_brute_force_for_every_type_op_and_small_rank_count() {
        for dtype in TYPES {
            for op in ReduceOp::ALL {
                for n in 1..=9 {
                    for seed in 0..3 {
                        let p = Pattern::new(dtype, Some(op), n, seed);
                        for i in 0..200 {
                            assert_eq!(p.reduced(i), brute(&p, op, i, n), "{dtype} {op} n={n} i={i}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn reductions_never_reach_the_poison_value_or_overflow() {
        for dtype in TYPES {
            for op in ReduceOp::ALL {
                for n in [1, 2, 3, 4, 8, 64, 127, 128, 1000, 4096] {
                    let p = Pattern::new(dtype, Some(op), n, 7);
                    let limit = dtype.exact_max() - 1;
                    for i in 0..64 {
                        // every partial result is bounded by the full one for
                        // non-negative values (sum, prod) or by an input (min, max)
                        assert!(p.reduced(i) <= limit, "{dtype} {op} n={n}");
                        assert!(p.input(n - 1, i) <= limit, "{dtype} {op} n={n}");
                        if op == ReduceOp::Sum || op == ReduceOp::Avg {
                            let total: u64 = (0..n).map(|r| p.input(r, i)).sum();
                            assert!(total <= limit, "{dtype} {op} n={n}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn int8_sums_at_four_ranks_use_more_than_one_value() {
        let p = Pattern::new(DType::Int8, Some(ReduceOp::Sum), 4, 1);
        let distinct: std::collections::BTreeSet<u64> = (0..100).map(|i| p.input(0, i)).collect();
        assert!(distinct.len() > 10, "{distinct:?}");
    }

    #[test]
    fn data_patterns_differ_between_ranks_and_seeds() {
        let p = Pattern::new(DType::Float, None, 4, 1);
        let q = Pattern::new(DType::Float, None, 4, 2);
        assert_ne!(p.input(0, 5), p.input(1, 5));
        assert!((0..16).any(|i| p.input(0, i) != q.input(0, i)));
    }

    /// NCCL's avg on float32 (premultiply by (float)(1/n), then sum in
    /// rank order, each step rounded): not the exact average at some rank
    /// counts (so an exact check would fail on real GPUs), always within
    /// `relative_bound`.
    #[test]
    fn nccls_float_avg_is_inexact_at_some_rank_counts_and_always_within_the_bound() {
        let mut inexact = Vec::new();
        for n in 1..=64usize {
            let p = Pattern::new(DType::Float, Some(ReduceOp::Avg), n, 5);
            let bound = p.relative_bound().unwrap();
            let s = (1.0f64 / n as f64) as f32;
            for i in 0..200 {
                let got = (0..n).fold(0f32, |acc, r| acc + (p.input(r, i) as f32) * s) as f64;
                let want = p.reduced(i) as f64;
                assert!((got - want).abs() <= bound * want, "n={n} i={i}: {got} vs {want}");
                if got != want && !inexact.contains(&n) {
                    inexact.push(n);
                }
            }
        }
        assert!(inexact.contains(&7), "{inexact:?}");
        assert!(
            Pattern::new(DType::Int32, Some(ReduceOp::Avg), 7, 1)
                .relative_bound()
                .is_none()
        );
        assert!(
            Pattern::new(DType::Float, Some(ReduceOp::Sum), 7, 1)
                .relative_bound()
                .is_none()
        );
    }

    proptest! {
        #[test]
        fn residue_sum_matches_its_definition(m in 1u64..50, a_raw in 0u64..50, n in 0u64..300) {
            let a = a_raw % m;
            let direct: u64 = (0..n).map(|r| (a + r) % m).sum();
            prop_assert_eq!(residue_sum(a, m, n), direct);
        }
    }
}
