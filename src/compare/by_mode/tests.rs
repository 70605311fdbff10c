use super::super::tests::{loaded, record};
use super::*;

fn judged(metric: Metric) -> ModeOptions {
    ModeOptions {
        metric,
        threshold_pct: 5.0,
        alpha: 0.05,
    }
}

/// (size, flat time, rs-ar-ag time) per point, `cycles` samples of
/// each in launch `run` with a 1% wobble.
fn rows(points: &[(u64, f64, f64)], cycles: usize, run: &str) -> Vec<Row> {
    let wobble = [0.0, 0.6, -0.4, 1.0, -0.9, 0.3, -0.2, 0.8];
    let mut records = Vec::new();
    for c in 0..cycles {
        for &(size, flat, hier) in points {
            for (hierarchy, t) in [(Hierarchy::Flat, flat), (Hierarchy::RsArAg, hier)] {
                let mut r = record("all_reduce", size, t * (1.0 + 0.01 * wobble[c % 8]), 0.0);
                r.hierarchy = hierarchy;
                r.run_id = run.into();
                r.cycle = Some(c as u64 + 1);
                records.push(r);
            }
        }
    }
    loaded("x.csv", records).rows
}

/// The hierarchy modes of `rows(points, cycles, "a")` compared on
/// `metric`, flat the reference.
fn by_hierarchy(points: &[(u64, f64, f64)], cycles: usize, metric: Metric) -> ModeReport {
    compare_modes(
        "x.csv",
        &rows(points, cycles, "a"),
        Dimension::Hierarchy,
        &judged(metric),
        None,
    )
    .unwrap()
}

/// flat wins small sizes, rs-ar-ag from 64 KiB on (time in us)
const PLANTED: [(u64, f64, f64); 5] = [
    (1024, 10.0, 12.0),
    (4096, 20.0, 23.0),
    (65536, 100.0, 80.0),
    (1 << 20, 1000.0, 700.0),
    (4 << 20, 4000.0, 2600.0),
];

#[test]
fn repeated_samples_claim_speedups_with_intervals_and_the_crossover() {
    let r = by_hierarchy(&PLANTED, 5, Metric::Busbw);
    assert_eq!(r.reference, "flat");
    assert!(r.notes.is_empty(), "{:?}", r.notes);
    let g = &r.groups[0];
    assert_eq!(g.modes, ["flat", "rs-ar-ag"]);
    let winners: Vec<_> = g.points.iter().map(|p| p.winner.clone().unwrap()).collect();
    assert_eq!(winners, ["flat", "flat", "rs-ar-ag", "rs-ar-ag", "rs-ar-ag"]);
    assert_eq!(
        g.points.iter().map(|p| p.crossover).collect::<Vec<_>>(),
        [false, false, true, false, false]
    );
    assert_eq!(g.crossovers(), [(65536, "flat".to_string(), "rs-ar-ag".to_string())]);
    let p = &g.points[3];
    assert_eq!(p.differences[1], Some(Difference::Faster));
    assert_eq!(g.points[0].differences[1], Some(Difference::Slower));
    let s = p.speedups[1].unwrap();
    let [lo, hi] = p.intervals[1].unwrap();
    assert!(lo < s && s < hi && lo > 1.3 && hi < 1.6, "{lo} {s} {hi}");
    assert_eq!((p.samples.clone(), p.speedups[0]), (vec![5, 5], Some(1.0)));
    // time: the same speedups and intervals (reference time / time)
    let t = by_hierarchy(&PLANTED, 5, Metric::Time);
    let tp = &t.groups[0].points[3];
    assert!((tp.speedups[1].unwrap() - s).abs() < 1e-9);
    let [tlo, thi] = tp.intervals[1].unwrap();
    assert!((tlo - lo).abs() < 1e-9 && (thi - hi).abs() < 1e-9, "{tlo} {thi}");
}

#[test]
fn modes_within_the_threshold_or_the_noise_claim_nothing() {
    // 2% apart, clearly, but under the 5% threshold: no winner at all
    let r = by_hierarchy(&[(1024, 10.0, 10.2), (65536, 100.0, 98.0)], 6, Metric::Busbw);
    for p in &r.groups[0].points {
        assert_eq!((p.winner.as_deref(), p.crossover), (None, false));
        assert_eq!(p.differences[1], Some(Difference::NoSignificantDifference));
        assert!(p.intervals[1].is_some());
    }
    assert!(r.groups[0].crossovers().is_empty());
}

#[test]
fn a_change_of_winner_at_one_size_or_across_a_gap_is_noted_not_claimed() {
    let claimed = |points: &[(u64, f64, f64)]| {
        let r = by_hierarchy(points, 5, Metric::Busbw);
        let g = &r.groups[0];
        let winners: Vec<Option<String>> = g.points.iter().map(|p| p.winner.clone()).collect();
        (winners, g.crossovers(), r.notes)
    };
    let (f, h, tie) = ((10.0, 12.0), (12.0, 10.0), (10.0, 10.0));
    let at = |cells: &[(f64, f64)]| -> Vec<(u64, f64, f64)> {
        cells
            .iter()
            .enumerate()
            .map(|(i, &(a, b))| (1024 << (2 * i), a, b))
            .collect()
    };
    let name = |w: &str| Some(w.to_string());
    // one size names rs-ar-ag among flat's: a winner there, no crossover
    let (winners, crossovers, notes) = claimed(&at(&[f, f, h, f, f]));
    assert_eq!(winners[2], name("rs-ar-ag"));
    assert!(crossovers.is_empty(), "{crossovers:?}");
    assert!(
        notes.iter().any(|n| n.contains("no crossover is claimed there")),
        "{notes:?}"
    );
    // the new winner holds at one size only, at the end
    let (_, crossovers, _) = claimed(&at(&[f, f, f, h]));
    assert!(crossovers.is_empty(), "{crossovers:?}");
    // the old winner held at one size only
    let (_, crossovers, _) = claimed(&at(&[f, h, h, h]));
    assert!(crossovers.is_empty(), "{crossovers:?}");
    // a size without a winner between the two sides
    let (winners, crossovers, notes) = claimed(&at(&[f, f, tie, h, h]));
    assert_eq!(winners[2], None);
    assert!(crossovers.is_empty(), "{crossovers:?}");
    assert!(notes.iter().any(|n| n.contains("-f 2")), "{notes:?}");
    // two sizes on each side: claimed, at the first size of the new winner,
    // and no note about unconfirmed changes
    let (_, crossovers, notes) = claimed(&at(&[tie, f, f, h, h, tie]));
    assert_eq!(crossovers, [(1024 << 6, "flat".to_string(), "rs-ar-ag".to_string())]);
    assert!(notes.is_empty(), "{notes:?}");
}

#[test]
fn one_sample_per_point_claims_nothing_and_says_what_would() {
    let r = by_hierarchy(&PLANTED, 1, Metric::Busbw);
    let g = &r.groups[0];
    assert!(g.points.iter().all(|p| p.winner.is_none() && !p.crossover));
    assert!(g.points.iter().all(|p| p.differences[1] == Some(Difference::NoClaim)));
    assert!(g.points.iter().all(|p| p.intervals[1].is_none()));
    // the ratio of the values is still there, as data
    assert!((g.points[3].speedups[1].unwrap() - 1000.0 / 700.0).abs() < 1e-9);
    assert_eq!(r.notes.len(), 1);
    assert!(r.notes[0].starts_with("one sample per point") && r.notes[0].contains("--repeat 5"));
    // three samples cannot reach p < 0.05 either
    let r = by_hierarchy(&PLANTED, 3, Metric::Busbw);
    assert!(r.groups[0].points.iter().all(|p| p.winner.is_none()));
    assert!(r.notes[0].starts_with("too few samples"), "{:?}", r.notes);
}

/// Each transport in launches of its own: `launches` per transport.
fn transports(launches: usize) -> Vec<Row> {
    transports_sampled(launches, 5)
}

/// `transports`, with `samples` per point in each launch.
fn transports_sampled(launches: usize, samples: usize) -> Vec<Row> {
    let mut all = Vec::new();
    for l in 0..launches {
        for (profile, slow) in [(Profile::Shm, 1.0), (Profile::Tcp, 3.0)] {
            let run = format!("{}-{l}", profile.name());
            let mut rows = rows(&[(65536, 100.0 * slow * (1.0 + 0.01 * l as f64), 0.0)], samples, &run);
            rows.retain(|r| r.record.hierarchy.is_flat());
            for r in &mut rows {
                r.record.transport = profile;
            }
            all.extend(rows);
        }
    }
    all
}

#[test]
fn transports_from_separate_launches_need_several_launches_of_each() {
    let o = judged(Metric::Busbw);
    let r = compare_modes("s.csv", &transports(1), Dimension::Transport, &o, None).unwrap();
    let p = &r.groups[0].points[0];
    assert_eq!(
        (p.differences[1], p.winner.as_deref()),
        (Some(Difference::NoClaim), None)
    );
    assert!(
        r.notes[0].contains("separate launches, one launch of each"),
        "{:?}",
        r.notes
    );
    let r = compare_modes("s.csv", &transports(3), Dimension::Transport, &o, None).unwrap();
    let p = &r.groups[0].points[0];
    assert_eq!(
        (p.differences[1], p.winner.as_deref()),
        (Some(Difference::Slower), Some("shm"))
    );
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

/// One launch of each transport: the advice is more launches, whatever
/// the samples per point (one, a run's `cycles = 3`, `repeat = 5`), since
/// following `--repeat` advice there still claims nothing; two launches
/// of each claim (the launch t-test, 2 degrees of freedom).
#[test]
fn the_advice_for_separate_launches_names_launches_however_many_samples_each_holds() {
    let o = judged(Metric::Busbw);
    for samples in [1, 3, 5] {
        let r = compare_modes("s.csv", &transports_sampled(1, samples), Dimension::Transport, &o, None).unwrap();
        assert_eq!(r.groups[0].points[0].differences[1], Some(Difference::NoClaim));
        assert_eq!(r.notes.len(), 1, "{samples}: {:?}", r.notes);
        assert!(
            r.notes[0].starts_with("transport modes measured in separate launches, one launch of each")
                && r.notes[0].ends_with("two or more launches of each mode can: `launches = 3` in a suite file"),
            "{samples}: {:?}",
            r.notes
        );
        assert!(!r.notes[0].contains("-N 5"), "{:?}", r.notes);
    }
    let r = compare_modes("s.csv", &transports_sampled(2, 1), Dimension::Transport, &o, None).unwrap();
    let p = &r.groups[0].points[0];
    assert_eq!(
        (p.differences[1], p.winner.as_deref()),
        (Some(Difference::Slower), Some("shm"))
    );
    assert!(r.notes.is_empty(), "{:?}", r.notes);
}

#[test]
fn a_single_mode_or_an_unknown_reference_is_a_usage_error() {
    let o = judged(Metric::Busbw);
    let flat: Vec<Row> = rows(&PLANTED, 1, "a")
        .into_iter()
        .filter(|r| r.record.hierarchy.is_flat())
        .collect();
    let e = compare_modes("x.csv", &flat, Dimension::Hierarchy, &o, None).unwrap_err();
    assert!(e.to_string().contains("needs a CSV that measured several"), "{e}");
    let e = compare_modes("x.csv", &rows(&PLANTED, 1, "a"), Dimension::Hierarchy, &o, Some("ring")).unwrap_err();
    assert!(e.to_string().contains("no hierarchy mode 'ring'"), "{e}");
    // transport: no `auto` here, so the first mode is the reference
    let mut rs = rows(&PLANTED, 1, "a");
    for (i, r) in rs.iter_mut().enumerate() {
        r.record.transport = if i % 2 == 0 { Profile::Nvlink } else { Profile::Ib };
        r.record.hierarchy = Hierarchy::Flat;
    }
    let t = compare_modes("x.csv", &rs, Dimension::Transport, &o, None).unwrap();
    assert_eq!(t.reference, "nvlink");
}
