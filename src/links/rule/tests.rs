use super::super::Endpoint;
use super::super::measure::Probe;
use super::super::schedule::{self, Level};
use super::*;

/// A deterministic spread of about `rel` around 1.
fn jitter(i: usize, rel: f64) -> f64 {
    let u = ((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 11) as f64 / (1u64 << 53) as f64;
    1.0 + rel * (2.0 * u - 1.0)
}

/// A matrix of `n` one-rank nodes whose pair bandwidth is
/// `bw(a, b)`, with 10 samples each spread by 1%.
fn matrix(n: usize, bw: impl Fn(usize, usize) -> f64) -> (Matrix, Layout) {
    let endpoints: Vec<Endpoint> = (0..n)
        .map(|r| Endpoint {
            rank: r,
            host: format!("h{r}"),
            ..Endpoint::default()
        })
        .collect();
    let s = schedule::build(&endpoints, Level::Node, false).unwrap();
    let mut pairs = Vec::new();
    let mut k = 0;
    for (round, ps) in s.rounds.iter().enumerate() {
        for p in ps {
            let base = bw(p.a, p.b);
            let samples = |scale: f64, k: &mut usize| -> Vec<f64> {
                (0..10)
                    .map(|_| {
                        *k += 1;
                        scale * jitter(*k, 0.02)
                    })
                    .collect()
            };
            let mut per_metric = super::super::metric::PerMetric::<Vec<f64>>::default();
            *per_metric.get_mut(Metric::Uni) = samples(base, &mut k);
            *per_metric.get_mut(Metric::Bidi) = samples(2.0 * base, &mut k);
            *per_metric.get_mut(Metric::Latency) = samples(3.0 * 24.0 / base, &mut k);
            pairs.push(PairResult::of(
                &super::super::PairSamples {
                    pair: *p,
                    samples: per_metric,
                    wrong: None,
                },
                Phase::Matrix,
                round + 1,
            ));
        }
    }
    let layout = Layout::new(&endpoints, &s.units(), None);
    let m = Matrix {
        level: Level::Node,
        isolated: false,
        endpoints,
        units: s.units(),
        rounds: s.rounds.len(),
        probe: Probe::DEFAULT,
        pairs,
    };
    (m, layout)
}

/// A static per-pair spread of about 2%.
fn healthy(a: usize, b: usize) -> f64 {
    24.0 * jitter(a * 1000 + b, 0.02)
}

#[test]
fn a_healthy_fleet_has_no_suspect() {
    for n in [4, 5, 16, 40] {
        let (m, l) = matrix(n, healthy);
        let a = analyse(&m, &l, &Rule::DEFAULT);
        assert_eq!(a.unit_suspects().count(), 0, "n = {n}");
        assert_eq!(a.pair_suspects().count(), 0, "n = {n}");
        let r = a.reference(PairClass::InterHost, Metric::Uni).unwrap();
        assert!((r.median / 24.0 - 1.0).abs() < 0.02, "{r:?}");
        assert_eq!(r.pairs, n * (n - 1) / 2);
    }
}

#[test]
fn a_slow_node_is_a_unit_suspect_with_every_partner_and_no_pair_is() {
    for n in [4, 7, 16, 40] {
        let slow = n / 2;
        let (m, l) = matrix(n, |a, b| healthy(a, b) / if a == slow || b == slow { 1.5 } else { 1.0 });
        let a = analyse(&m, &l, &Rule::DEFAULT);
        let suspects: Vec<&UnitCheck> = a.unit_suspects().collect();
        assert!(!suspects.is_empty(), "n = {n}");
        assert!(suspects.iter().all(|u| u.rank == slow), "n = {n}: {suspects:?}");
        assert_eq!(a.pair_suspects().count(), 0, "n = {n}");
        let u = suspects.iter().find(|u| u.metric == Metric::Uni).unwrap();
        assert_eq!((u.partners, u.low_partners), (n - 1, n - 1));
        assert!((u.deficit_pct - 33.3).abs() < 2.0, "{u:?}");
        // the latency was 50% longer: a suspect there too
        assert!(suspects.iter().any(|u| u.metric == Metric::Latency));
    }
}

#[test]
fn a_slow_link_is_a_pair_suspect_and_its_ends_are_not() {
    for n in [4, 6, 16, 40] {
        let (x, y) = (1, n - 1);
        let (m, l) = matrix(n, |a, b| healthy(a, b) / if (a, b) == (x, y) { 1.5 } else { 1.0 });
        let a = analyse(&m, &l, &Rule::DEFAULT);
        assert_eq!(a.unit_suspects().count(), 0, "n = {n}");
        let pairs: Vec<&PairCheck> = a.pair_suspects().collect();
        assert!(!pairs.is_empty(), "n = {n}");
        assert!(pairs.iter().all(|p| p.pair == Pair::new(x, y)), "n = {n}: {pairs:?}");
        let p = a.check(Pair::new(x, y), Metric::Uni).unwrap();
        assert!(p.low && (p.below_reference_pct - 33.3).abs() < 3.0, "{p:?}");
    }
}

#[test]
fn small_differences_pass_the_spread_but_not_the_percentage() {
    // a node 6% slow on an almost noiseless fleet: many spreads away, yet
    // under the 10% that makes a suspect
    let (m, l) = matrix(16, |a, b| 24.0 / if a == 3 || b == 3 { 1.06 } else { 1.0 });
    let a = analyse(&m, &l, &Rule::DEFAULT);
    assert_eq!(a.unit_suspects().count(), 0);
    let five = Rule {
        min_deficit_pct: 5.0,
        ..Rule::DEFAULT
    };
    let a = analyse(&m, &l, &five);
    assert!(a.unit_suspects().all(|u| u.rank == 3) && a.unit_suspects().count() > 0);
}

#[test]
fn the_rule_needs_the_percentage_and_the_spreads() {
    let r = Rule::DEFAULT;
    let ln = |x: f64| x.ln();
    assert!(r.worse(ln(0.85), 0.01));
    assert!(!r.worse(ln(0.95), 0.001), "5% is under the percentage");
    assert!(!r.worse(ln(0.85), 0.05), "15% is under 4 spreads of 5%");
    assert_eq!(Metric::parse("BIDI"), Some(Metric::Bidi));
    assert!(Metric::Latency.goodness(2.0) < Metric::Latency.goodness(1.0));
}

#[test]
fn what_is_past_the_percentage_and_most_spreads_but_short_of_them_is_too_noisy() {
    let r = Rule::DEFAULT;
    let ln = |x: f64| x.ln();
    // 15% down with 5% spreads: past 3 of them, short of 4
    assert!(r.doubtful(ln(0.85), 0.05) && !r.worse(ln(0.85), 0.05));
    assert!(!r.doubtful(ln(0.85), 0.07), "within 3 spreads: fine");
    assert!(!r.doubtful(ln(0.95), 0.001), "under the percentage: fine");

    // a fleet whose pairs spread by +-30%: a pair 3.5 spreads down is neither
    // flagged nor fine; a node 50% down is a suspect, not noise, and its
    // pairs are its, not noise of their own
    // squared: a Weyl sequence of a * 1000 + b would be additive in a and b
    let noisy = |a: usize, b: usize| 24.0 * jitter((a * 1000 + b).pow(2), 0.3);
    let (m, l) = matrix(16, noisy);
    let a = analyse(&m, &l, &Rule::DEFAULT);
    let sd = a.reference(PairClass::InterHost, Metric::Uni).unwrap().resid_sd;
    assert!(
        3.0 * sd > (1.0f64 / 0.9).ln(),
        "3 spreads are past 10% on this fleet: {sd}"
    );
    let fine = a.check(Pair::new(2, 5), Metric::Uni).unwrap();
    assert!(!fine.low && !fine.noisy, "as it is, 2-5 is fine: {fine:?}");
    // pair 2-5 3.5 spreads below what its ends predict
    let slow = a.check(Pair::new(2, 5), Metric::Uni).unwrap().expected * (-3.5 * sd).exp();
    let (m, l) = matrix(16, |a, b| if (a, b) == (2, 5) { slow } else { noisy(a, b) });
    let a = analyse(&m, &l, &Rule::DEFAULT);
    let p = a.check(Pair::new(2, 5), Metric::Uni).unwrap();
    assert!(!p.low && p.noisy, "{p:?}");
    assert!(a.noisy_pairs().any(|c| c.pair == Pair::new(2, 5)));
    assert_eq!(a.unit_suspects().count(), 0);
    let text = crate::links::output::matrix_text(&m, &l, &a, Metric::Uni).unwrap();
    assert!(text.contains("? = too noisy to judge"), "{text}");
    let row = text.lines().nth(4).unwrap();
    assert!(row.contains(" 2  h2") && row.contains('?'), "row of rank 2: {text}");
    let line = crate::links::output::noisy_line(&m, &a).unwrap();
    assert!(
        line.starts_with("too noisy to judge: ") && line.contains("h2 - h5"),
        "{line}"
    );

    let (m, l) = matrix(8, |a, b| noisy(a, b) * if a == 6 || b == 6 { 0.5 } else { 1.0 });
    let a = analyse(&m, &l, &Rule::DEFAULT);
    assert!(a.unit_suspects().any(|u| u.rank == 6));
    assert!(a.noisy_units().all(|u| u.rank != 6), "a suspect is not noise");
    assert!(a.noisy_pairs().all(|p| !p.pair.has(6)), "its pairs show it");
}
