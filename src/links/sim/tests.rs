use super::*;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn the_model_gives_nominal_bandwidth_and_the_injected_factors() {
    let mut sim = SimCluster::new(
        SimConfig::nodes(4, 2),
        vec![Fault::slow_node(1, 1.5), Fault::slow_link(4, 6, 2.0)],
    );
    let probe = Probe::DEFAULT.with_samples(200);
    // 0-4 and 5-7: healthy; 2-6: host 1 (ranks 2, 3) is 1.5x slower
    let round = vec![Pair::new(0, 4), Pair::new(2, 6), Pair::new(5, 7)];
    let got = sim.measure(&[round.clone(), vec![Pair::new(0, 1)]], &probe).unwrap();
    let uni: Vec<f64> = got[0]
        .iter()
        .map(|s| median(s.samples.get(Metric::Uni).clone()))
        .collect();
    for (got, want) in uni.iter().zip([48.0, 32.0, 48.0]) {
        assert!((got / want - 1.0).abs() < 0.06, "{uni:?}");
    }
    // on one host: NVLink
    assert!((median(got[1][0].samples.get(Metric::Uni).clone()) / 360.0 - 1.0).abs() < 0.06);
    let lat: Vec<f64> = got[0]
        .iter()
        .map(|s| median(s.samples.get(Metric::Latency).clone()))
        .collect();
    assert!((lat[1] / 4.5 - 1.0).abs() < 0.06, "{lat:?}");
    let got = sim.measure(&[vec![Pair::new(4, 6)]], &probe).unwrap();
    assert!((median(got[0][0].samples.get(Metric::Uni).clone()) / 24.0 - 1.0).abs() < 0.06);
    assert!(sim.elapsed_s() > 0.0);
    assert!(sim.describe().starts_with("simulation"));
    let e = sim.measure(&[vec![Pair::new(0, 99)]], &probe).unwrap_err();
    assert_eq!(e.exit_code(), 1);
}

#[test]
fn oversubscribed_uplinks_share_a_crowded_round() {
    let cfg = SimConfig {
        leaf_size: 4,
        oversubscription: 2.0,
        noise: Noise {
            collisions: 0.0,
            ..Noise::DEFAULT
        },
        ..SimConfig::nodes(8, 1)
    };
    let mut sim = SimCluster::new(cfg, vec![]);
    let probe = Probe::DEFAULT.with_samples(50);
    // four flows from leaf 0 to leaf 1 against two uplinks' worth: half each
    let crowded = vec![Pair::new(0, 4), Pair::new(1, 5), Pair::new(2, 6), Pair::new(3, 7)];
    let got = sim.measure(&[crowded], &probe).unwrap();
    assert!((median(got[0][0].samples.get(Metric::Uni).clone()) / 24.0 - 1.0).abs() < 0.08);
    let light = vec![Pair::new(0, 4), Pair::new(1, 2)];
    let got = sim.measure(&[light], &probe).unwrap();
    assert!((median(got[0][0].samples.get(Metric::Uni).clone()) / 48.0 - 1.0).abs() < 0.08);
}

#[test]
fn only_all_reduces_see_a_collective_fault() {
    let mut sim = SimCluster::new(SimConfig::nodes(8, 1), vec![Fault::collective_only(2, 2.0)]);
    let probe = Probe::DEFAULT.with_samples(50);
    let got = sim.all_reduce(&[vec![0, 1, 2, 3], vec![4, 5, 6, 7]], &probe).unwrap();
    let (a, b) = (median(got[0].clone()), median(got[1].clone()));
    assert!((a / b - 0.5).abs() < 0.05, "{a} {b}");
    let pairs = sim.measure(&[vec![Pair::new(2, 3)]], &probe).unwrap();
    assert!((median(pairs[0][0].samples.get(Metric::Uni).clone()) / 48.0 - 1.0).abs() < 0.06);
}

#[test]
fn the_simulation_names_hosts_by_leaf_and_the_pattern_finds_them() {
    let sim = SimCluster::new(SimConfig::nodes(40, 1), vec![]);
    assert_eq!(sim.endpoints()[17].host, "l01-n017");
    let t = sim.topology().unwrap();
    assert_eq!(t.place("l02-n039").leaf.as_deref(), Some("02"));
    assert!(SimCluster::new(SimConfig::nodes(16, 1), vec![]).topology().is_none());
    let same = |seed| {
        let mut s = SimCluster::new(
            SimConfig {
                seed,
                ..SimConfig::nodes(4, 1)
            },
            vec![],
        );
        s.measure(&[vec![Pair::new(0, 1)]], &Probe::DEFAULT).unwrap()
    };
    assert_eq!(same(7), same(7));
    assert_ne!(same(7), same(8));
}
