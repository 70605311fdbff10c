//! Many tests judged together: Holm's step-down adjustment of p-values
//! (S. Holm, "A simple sequentially rejective multiple test procedure",
//! Scandinavian Journal of Statistics 6 (1979), 65-70). Rejecting every
//! hypothesis whose adjusted p-value is under alpha keeps the chance of
//! rejecting any true one (the family-wise error rate) under alpha, under
//! any dependence between the tests.

/// Holm's adjusted p-values, in the order given: sorted ascending, the
/// i-th smallest (from 0) is multiplied by m - i, then each is raised to
/// the largest adjusted value before it (so that the order is kept) and
/// capped at 1. A p-value that is not a number counts as 1.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let p: Vec<f64> = p_values
        .iter()
        .map(|&v| if v.is_nan() { 1.0 } else { v.clamp(0.0, 1.0) })
        .collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]));
    let mut adjusted = vec![1.0; m];
    let mut running: f64 = 0.0;
    for (i, &at) in order.iter().enumerate() {
        running = running.max(((m - i) as f64 * p[at]).min(1.0));
        adjusted[at] = running;
    }
    adjusted
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-12)
    }

    #[test]
    fn holm_matches_the_published_step_down_values() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm")
        //    -> 0.03 0.06 0.06 0.02
        let got = holm(&[0.01, 0.04, 0.03, 0.005]);
        assert!(close(&got, &[0.03, 0.06, 0.06, 0.02]), "{got:?}");
        // one test: unchanged
        assert!(close(&holm(&[0.2]), &[0.2]));
        assert!(holm(&[]).is_empty());
    }

    #[test]
    fn holm_keeps_the_order_caps_at_one_and_reads_nan_as_one() {
        let got = holm(&[0.5, 0.001, f64::NAN, 0.4]);
        // sorted: 0.001 (x4), 0.4 (x3 = 1.2 -> 1), 0.5 (x2 = 1), NaN -> 1
        assert!(close(&got, &[1.0, 0.004, 1.0, 1.0]), "{got:?}");
        // ties get the same adjusted value
        let got = holm(&[0.01, 0.01, 0.01]);
        assert!(close(&got, &[0.03, 0.03, 0.03]), "{got:?}");
    }

    #[test]
    fn rejecting_under_alpha_is_bonferroni_at_the_smallest_and_never_less_strict() {
        // 24 rows at alpha 0.05: the smallest p must be under 0.05 / 24
        let mut p = vec![0.5; 24];
        p[7] = 0.05 / 24.0 * 0.99;
        assert!(holm(&p)[7] < 0.05);
        p[7] = 0.05 / 24.0 * 1.01;
        assert!(holm(&p)[7] > 0.05);
        // every adjusted value is at least its own p
        let p = [0.001, 0.02, 0.03, 0.9, 0.0001];
        for (a, b) in holm(&p).iter().zip(p) {
            assert!(*a >= b);
        }
    }
}
