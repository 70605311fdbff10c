//! Unit tests of `compare`.

use super::*;
use crate::record::Record;
use crate::types::{Average, Metric, TimingMethod};

/// A record with the given busbw at 2 ranks (all_reduce: factor 1),
/// measured by this collbench's defaults.
pub fn record(collective: &str, size: u64, time_us: f64, spread: f64) -> Record {
    let algbw = size as f64 / (time_us * 1e-6) / 1e9;
    let collective = Collective::parse(collective).unwrap();
    let all_reduce = collective == Collective::AllReduce;
    Record {
        timestamp: "2026-01-01T00:00:00Z".into(),
        collective,
        dtype: crate::types::DType::Float,
        op: all_reduce.then_some(crate::types::ReduceOp::Sum),
        root: None,
        placement: crate::types::Placement::OutOfPlace,
        size_bytes: size,
        count: size / 4,
        time_us,
        time_min_us: time_us * (1.0 - spread),
        time_max_us: time_us * (1.0 + spread),
        algbw_gbps: algbw,
        busbw_gbps: algbw * if all_reduce { 1.0 } else { 0.5 },
        wrong: Some(0),
        ..Record {
            phase_intra1_us: None,
            phase_intra2_us: None,
            cycle: None,
            ..crate::record::tests::sample()
        }
    }
}

pub fn loaded(label: &str, records: Vec<Record>) -> Loaded {
    Loaded {
        label: label.into(),
        rows: records
            .into_iter()
            .map(|record| Row {
                record,
                stats: Default::default(),
                file: PathBuf::from(label),
            })
            .collect(),
        files: vec![PathBuf::from(label)],
    }
}

/// Side `label` of one record per (collective, size, time), each of one
/// exact time.
fn exact(label: &str, points: &[(&str, u64, f64)]) -> Loaded {
    loaded(
        label,
        points.iter().map(|&(c, size, t)| record(c, size, t, 0.0)).collect(),
    )
}

/// `times` as the cycles of one launch of an all_reduce 1 MiB point.
fn cycles(run_id: &str, times: &[f64]) -> Vec<Record> {
    times
        .iter()
        .enumerate()
        .map(|(i, &t)| Record {
            run_id: run_id.into(),
            cycle: Some(i as u64 + 1),
            samples: Some(times.len() as u64),
            ..record("all_reduce", 1 << 20, t, 0.0)
        })
        .collect()
}

fn opts() -> CompareOptions {
    CompareOptions::default()
}

#[test]
fn one_sample_a_side_is_judged_by_the_threshold_alone_and_fails_only_when_asked() {
    let base = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.01)]);
    let new = loaded("n", vec![record("all_reduce", 1 << 20, 125.0, 0.01)]);
    // one launch a side cannot tell a change from launch noise: unproven,
    // exit 0, and the headline says why
    let c = compare(&base, &new, &opts()).unwrap();
    assert_eq!(c.rows[0].verdict(), Verdict::Unproven);
    assert_eq!(c.rows[0].judgement.fallback, Some(Fallback::OneSample));
    assert!((c.rows[0].change_pct().unwrap() + 20.0).abs() < 1e-9);
    assert_eq!((c.exit_code(), c.failure()), (0, None));
    assert_eq!(
        c.headline(),
        "NO VERDICT: 1 of 1 rows changed busbw by more than 5%, but one launch per side cannot tell a \
         change from launch-to-launch noise (0 improved, 0 regressed, 0 within noise, 0 too noisy, 1 unproven)"
    );
    assert!(
        c.notes
            .iter()
            .any(|n| n.starts_with("1 row unproven:") && n.contains("--within-launch"))
    );
    assert_eq!((c.overall.unproven, c.summary[0].unproven), (1, 1));
    // --within-launch: the threshold alone decides, and the failure says so
    let within = CompareOptions {
        within_launch: true,
        ..opts()
    };
    let c = compare(&base, &new, &within).unwrap();
    assert_eq!((c.rows[0].verdict(), c.exit_code()), (Verdict::Regressed, 4));
    assert!(c.headline().starts_with("REGRESSION: 1 of 1 rows"));
    assert_eq!(
        c.failure().unwrap(),
        "regression: 1 of 1 rows lost more than 5% busbw (1 judged within one launch per side \
         (--within-launch), 1 of them by the threshold alone)"
    );
    assert!(
        c.notes
            .iter()
            .any(|n| n == "1 row judged by the threshold alone: one sample on a side")
    );
    // the cross-rank spread no longer excuses a change: it says
    // nothing about run-to-run noise
    let wide = loaded("b", vec![record("all_reduce", 1 << 20, 100.0, 0.5)]);
    assert_eq!(compare(&wide, &new, &within).unwrap().exit_code(), 4);
}

#[test]
fn cycles_of_a_launch_are_the_samples_of_a_point() {
    let base = loaded("b", cycles("r1", &[100.0, 101.0, 99.5, 100.4, 100.9, 99.8]));
    let slower = loaded("n", cycles("r2", &[125.0, 126.0, 124.1, 125.5, 124.9, 125.2]));
    let within = CompareOptions {
        within_launch: true,
        ..opts()
    };
    let c = compare(&base, &slower, &within).unwrap();
    assert_eq!(c.rows.len(), 1);
    let j = &c.rows[0].judgement;
    assert_eq!((j.test, j.base_stats.n, j.new_stats.n), (Test::MannWhitney, 6, 6));
    assert_eq!(j.verdict, Verdict::Regressed);
    assert!(j.p_value.unwrap() < 0.01);
    assert!(
        c.notes.iter().any(|n| n.contains("not from launch to launch")),
        "{:?}",
        c.notes
    );
    assert!(
        c.failure()
            .unwrap()
            .contains("(1 judged within one launch per side (--within-launch))")
    );
    // without --within-launch the same clear change is unproven
    let c = compare(&base, &slower, &opts()).unwrap();
    assert_eq!((c.rows[0].verdict(), c.exit_code()), (Verdict::Unproven, 0));
    // the same values from another launch: within noise
    let same = loaded("n", cycles("r2", &[100.4, 99.5, 100.0, 101.0, 99.8, 100.9]));
    let c = compare(&base, &same, &opts()).unwrap();
    assert_eq!((c.rows[0].verdict(), c.exit_code()), (Verdict::WithinNoise, 0));
}

#[test]
fn a_baseline_of_launches_judges_one_new_launch_against_their_spread() {
    // three base launches a few percent apart; a new launch at half the
    // busbw regresses (launch t-test), one inside their spread does not
    let mut base = Vec::new();
    for (run, t) in [("b1", 100.0), ("b2", 103.0), ("b3", 98.0)] {
        base.extend(cycles(run, &[t, t * 1.01, t * 0.99]));
    }
    let base = loaded("base", base);
    let slow = loaded("n", cycles("n1", &[200.0, 201.0, 199.0]));
    let c = compare(&base, &slow, &opts()).unwrap();
    assert_eq!(
        (c.rows[0].judgement.test, c.rows[0].verdict()),
        (Test::LaunchT, Verdict::Regressed)
    );
    assert_eq!(c.failure().unwrap(), "regression: 1 of 1 rows lost more than 5% busbw");
    let same = loaded("n", cycles("n1", &[101.0, 100.0, 102.0]));
    assert_eq!(compare(&base, &same, &opts()).unwrap().exit_code(), 0);
}

#[test]
fn two_single_launches_at_half_the_busbw_regress_by_the_launch_bound_and_say_so() {
    let base = loaded("b", cycles("r1", &[100.0, 101.0, 99.5, 100.4, 100.9]));
    // every time doubled: busbw halved on every sample
    let half = loaded("n", cycles("r2", &[200.0, 202.0, 199.0, 200.8, 201.8]));
    let c = compare(&base, &half, &opts()).unwrap();
    let j = &c.rows[0].judgement;
    assert_eq!((j.test, j.verdict), (Test::LaunchBound, Verdict::Regressed));
    assert_eq!(c.exit_code(), 4);
    assert_eq!(
        c.failure().unwrap(),
        "regression: 1 of 1 rows lost more than 5% busbw (1 judged from one launch per side, beyond the \
         launch-to-launch bound)"
    );
    assert!(
        c.notes.iter().any(|n| n.starts_with(
            "1 row judged from one launch per side by the launch bound: every sample of the new launch lies \
             beyond the base launch's range by more than a factor of 1.5"
        )),
        "{:?}",
        c.notes
    );
    // 20% slower is inside the bound: not judged, as before
    let slower = loaded("n", cycles("r2", &[125.0, 126.0, 124.1, 125.5, 124.9]));
    let c = compare(&base, &slower, &opts()).unwrap();
    assert_eq!((c.rows[0].verdict(), c.exit_code()), (Verdict::Unproven, 0));
}

#[test]
fn a_time_regression_took_longer_and_never_lost_time() {
    let time = CompareOptions {
        metric: Metric::Time,
        ..opts()
    };
    let base = loaded("b", cycles("r1", &[100.0, 101.0, 99.5, 100.4, 100.9]));
    let c = compare(&base, &base, &time).unwrap();
    assert_eq!(
        c.headline(),
        "OK: no row took more than 5% longer (0 improved, 0 regressed, 1 within noise, 0 too noisy)"
    );
    let slow = loaded("n", cycles("r2", &[200.0, 202.0, 199.0, 200.8, 201.8]));
    let c = compare(&base, &slow, &time).unwrap();
    assert!(
        c.failure()
            .unwrap()
            .starts_with("regression: 1 of 1 rows took more than 5% longer (1 judged from one launch"),
        "{:?}",
        c.failure()
    );
    let slower = loaded("n", cycles("r2", &[125.0, 126.0, 124.1, 125.5, 124.9]));
    let c = compare(&base, &slower, &time).unwrap();
    assert!(
        c.headline()
            .starts_with("NO VERDICT: 1 of 1 rows changed time by more than 5%, but")
    );
}

#[test]
fn the_notes_say_when_p_values_were_adjusted_over_several_rows() {
    let mut base = Vec::new();
    let mut new = Vec::new();
    for size in [8, 64, 512] {
        for (run, t) in [("b1", 100.0), ("b2", 103.0), ("b3", 98.0)] {
            base.extend(cycles(run, &[t, t * 1.01]).into_iter().map(|r| at_size(r, size)));
        }
        new.extend(cycles("n1", &[100.0, 101.0]).into_iter().map(|r| at_size(r, size)));
    }
    let c = compare(&loaded("b", base), &loaded("n", new), &opts()).unwrap();
    assert_eq!(c.rows.len(), 3);
    assert!(
        c.notes
            .iter()
            .any(|n| n.starts_with("p-values adjusted for the 3 rows tested together (Holm's method)")),
        "{:?}",
        c.notes
    );
    // one row: nothing to adjust, no note
    let one = loaded("n", cycles("n1", &[100.0, 101.0]));
    let c = compare(&one, &one, &opts()).unwrap();
    assert!(!c.notes.iter().any(|n| n.contains("Holm")), "{:?}", c.notes);
}

/// `r` moved to `size` bytes.
fn at_size(mut r: Record, size: u64) -> Record {
    r.size_bytes = size;
    r
}

#[test]
fn rows_only_in_the_base_fail_unless_allowed_and_new_rows_are_listed() {
    let base = exact("b", &[("all_reduce", 8, 10.0), ("all_gather", 8, 10.0)]);
    let new = exact("n", &[("all_reduce", 8, 10.0), ("all_reduce", 16, 10.0)]);
    let c = compare(&base, &new, &opts()).unwrap();
    assert_eq!(c.rows.len(), 1);
    assert_eq!(c.only_in_base[0].collective, Collective::AllGather);
    assert_eq!(c.only_in_new[0].size_bytes, 16);
    let ar = &c.summary[0];
    assert_eq!(
        (ar.collective, ar.compared, ar.only_in_new),
        (Some(Collective::AllReduce), 1, 1)
    );
    assert_eq!(c.summary[1].only_in_base, 1);
    assert_eq!(
        (c.overall.compared, c.overall.only_in_base, c.overall.only_in_new),
        (1, 1, 1)
    );
    assert_eq!(c.exit_code(), 4);
    assert!(
        c.headline()
            .starts_with("MISSING: 1 row of the base not in the new run")
    );
    assert!(
        c.failure()
            .unwrap()
            .contains("1 row of the base missing from the new run")
    );
    let allow = CompareOptions {
        allow_missing: true,
        ..opts()
    };
    let c = compare(&base, &new, &allow).unwrap();
    assert_eq!(c.exit_code(), 0);
    assert!(c.headline().starts_with("OK"));
    // only new rows: listed, never a failure
    let c = compare(&new, &new, &opts()).unwrap();
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn different_rank_counts_need_the_flag_and_then_join_without_nranks() {
    let base = loaded("b", vec![record("all_reduce", 8, 10.0, 0.0)]);
    let mut four = record("all_reduce", 8, 10.0, 0.0);
    four.nranks = 4;
    let new = loaded("n", vec![four]);
    let err = compare(&base, &new, &opts()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert!(err.to_string().contains("--allow-different-ranks"), "{err}");
    let allow = CompareOptions {
        allow_different_ranks: true,
        ..opts()
    };
    let c = compare(&base, &new, &allow).unwrap();
    assert_eq!(c.rows.len(), 1);
    assert_eq!((c.rows[0].base_nranks, c.rows[0].new_nranks), (2, 4));
    assert!(c.notes[0].contains("without nranks"));
}

/// A per-rank collective's rows of one request differ by the 16-byte cut
/// of each rank's share across rank counts (1024 B at 2 ranks is 1008 B
/// at 3): they join, and a row with two possible partners does not.
#[test]
fn across_rank_counts_rows_of_one_request_join_despite_the_16_byte_cut() {
    let side = |label: &str, nranks: u64, sizes: &[u64]| {
        let rows = sizes
            .iter()
            .map(|&size| Record {
                nranks,
                ..record("all_gather", size, 10.0, 0.0)
            })
            .collect();
        loaded(label, rows)
    };
    // requests 32, 64, 1024, 1 MiB: at 3 ranks 32 B gives no row, 64 B
    // gives 48, which the base's 32 and 64 could both have given
    let base = side("b", 2, &[32, 64, 1024, 1 << 20]);
    let new = side("n", 3, &[48, 1008, (1 << 20) - 16]);
    let allow = CompareOptions {
        allow_different_ranks: true,
        ..opts()
    };
    let c = compare(&base, &new, &allow).unwrap();
    let joined: Vec<u64> = c.rows.iter().map(|r| r.case.size_bytes).collect();
    assert_eq!(joined, [1024, 1 << 20]);
    let sizes = |keys: &[CaseKey]| keys.iter().map(|k| k.size_bytes).collect::<Vec<_>>();
    assert_eq!(
        (sizes(&c.only_in_base), sizes(&c.only_in_new)),
        (vec![32, 64], vec![48])
    );
    assert!(
        c.notes.iter().any(|n| n.starts_with(
            "2 rows joined across rank counts at sizes cut differently (each rank's share is a multiple of 16 bytes): \
             1024 B at 2 ranks is 1008 B at 3"
        )),
        "{:?}",
        c.notes
    );
    // all_reduce takes the request as it is: nothing to join across
    let base = loaded("b", vec![record("all_reduce", 1024, 10.0, 0.0)]);
    let new = loaded(
        "n",
        vec![Record {
            nranks: 3,
            ..record("all_reduce", 1008, 10.0, 0.0)
        }],
    );
    let c = compare(&base, &new, &allow).unwrap();
    assert!(c.rows.is_empty(), "{:?}", c.rows);
}

#[test]
fn a_method_column_that_differs_refuses_unless_allowed() {
    let mut batched = record("all_reduce", 8, 10.0, 0.0);
    batched.timing = Some(TimingMethod::Batched);
    batched.average = Some(Average::Avg);
    let base = loaded("b.csv", vec![batched]);
    let mut blocking = record("all_reduce", 8, 10.0, 0.0);
    blocking.timing = Some(TimingMethod::Blocking);
    blocking.average = Some(Average::Max);
    let new = loaded("n.csv", vec![blocking]);
    let err = compare(&base, &new, &opts()).unwrap_err();
    assert_eq!(err.exit_code(), 2);
    assert_eq!(
        err.to_string(),
        "b.csv and n.csv were measured differently: timing (base batched, new blocking), \
         average (base avg, new max); such rows do not compare (pass --allow-method-change \
         to compare them anyway)"
    );
    let allow = CompareOptions {
        allow_method_change: true,
        ..opts()
    };
    let c = compare(&base, &new, &allow).unwrap();
    assert_eq!(c.warnings.len(), 2, "{:?}", c.warnings);
    assert!(c.warnings[0].starts_with("measured differently: timing (base batched, new blocking)"));
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn version_label_and_precision_target_only_warn() {
    let base = loaded("b", vec![record("all_reduce", 8, 10.0, 0.0)]);
    let mut other = record("all_reduce", 8, 10.0, 0.0);
    other.collbench_version = Some("9.9.9".into());
    other.label = None;
    other.precision_target_pct = Some(2.0);
    let c = compare(&base, &loaded("n", vec![other]), &opts()).unwrap();
    let want = base.rows[0].record.collbench_version.clone().unwrap();
    assert_eq!(
        c.warnings[0],
        format!("collbench_version (base {want}, new 9.9.9) differs")
    );
    assert!(
        c.warnings[1].starts_with("precision_target_pct (base "),
        "{:?}",
        c.warnings
    );
    assert!(
        c.warnings
            .contains(&"label (base nightly, a \"quoted\" name, new (none)) differs".to_string()),
        "{:?}",
        c.warnings
    );
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn imported_rows_and_files_without_method_columns_warn() {
    let base = loaded("b", vec![record("all_reduce", 8, 10.0, 0.0)]);
    let mut imported = record("all_reduce", 8, 10.0, 0.0);
    imported.collbench_version = Some("nccl-tests 2.17.8".into());
    let c = compare(&base, &loaded("n", vec![imported]), &opts()).unwrap();
    assert!(
        c.warnings
            .iter()
            .any(|w| w.starts_with("base rows come from collbench and new rows from nccl-tests 2.17.8")),
        "{:?}",
        c.warnings
    );
    let mut old = record("all_reduce", 8, 10.0, 0.0);
    old.timing = None;
    old.average = None;
    old.iter_policy = None;
    old.collbench_version = None;
    let c = compare(&loaded("old.csv", vec![old]), &base, &opts()).unwrap();
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0].starts_with("base old.csv has no method columns"),
        "{}",
        c.warnings[0]
    );
    assert_eq!(c.exit_code(), 0);
}

#[test]
fn a_measurement_read_twice_is_kept_and_named() {
    let rows = cycles("r1", &[100.0, 101.0, 99.0, 100.5]);
    let twice = loaded("b", [rows.clone(), rows.clone()].concat());
    let c = compare(&twice, &loaded("n", rows), &opts()).unwrap();
    assert_eq!(c.rows[0].judgement.base_stats.n, 8);
    assert!(
        c.warnings.iter().any(|w| w.contains("4 rows repeat a measurement")),
        "{:?}",
        c.warnings
    );
}

#[test]
fn zero_bandwidth_on_both_sides_is_no_change() {
    let mut r = record("all_gather", 8, 10.0, 0.0);
    r.busbw_gbps = 0.0;
    let c = compare(&loaded("b", vec![r.clone()]), &loaded("n", vec![r]), &opts()).unwrap();
    assert_eq!(c.rows[0].change_pct(), Some(0.0));
    assert_eq!(c.rows[0].verdict(), Verdict::WithinNoise);
    assert_eq!(c.overall.geomean_change_pct, None);
}

#[test]
fn the_overall_geomean_is_over_every_row() {
    let base = exact("b", &[("all_reduce", 8, 10.0), ("all_gather", 8, 10.0)]);
    // busbw x 2 and x 0.5: the geometric mean is no change
    let new = exact("n", &[("all_reduce", 8, 5.0), ("all_gather", 8, 20.0)]);
    let c = compare(&base, &new, &opts()).unwrap();
    assert!(c.overall.geomean_change_pct.unwrap().abs() < 1e-9);
    assert!((c.summary[0].geomean_change_pct.unwrap() - 100.0).abs() < 1e-9);
    assert!((c.summary[1].geomean_change_pct.unwrap() + 50.0).abs() < 1e-9);
}

#[test]
fn sizes_read_as_people_write_them() {
    assert_eq!(human_size(8), "8 B");
    assert_eq!(human_size(1024), "1 KiB");
    assert_eq!(human_size(3 << 20), "3 MiB");
    assert_eq!(human_size(1536), "1536 B");
}

#[test]
fn a_case_where_nccl_chose_another_algorithm_is_refused_unless_allowed_and_named() {
    use crate::types::{Algo, AlgoSource, Chosen, Proto};
    let chose = |size: u64, algo: Algo, proto: Proto| Record {
        algo: Some(Chosen::One(algo)),
        proto: Some(Chosen::One(proto)),
        algo_source: Some(AlgoSource::Log),
        ..record("all_reduce", size, 10.0, 0.0)
    };
    let base = loaded(
        "b",
        vec![
            chose(8, Algo::Tree, Proto::Ll),
            chose(1 << 20, Algo::Ring, Proto::Simple),
        ],
    );
    let new = loaded(
        "n",
        vec![
            chose(8, Algo::Ring, Proto::Ll),
            chose(1 << 20, Algo::Ring, Proto::Simple),
        ],
    );
    // refused, as a method change is: exit 2, naming the case
    let refused = compare(&base, &new, &opts()).unwrap_err();
    assert_eq!(refused.exit_code(), 2);
    let text = refused.to_string();
    assert!(
        text.contains("b and n: NCCL ran another algorithm or protocol on 1 joined case: all_reduce")
            && text.contains("(base tree/ll, new ring/ll)")
            && text.contains("pass --allow-algo-change"),
        "{text}"
    );
    let allowed = CompareOptions {
        allow_algo_change: true,
        ..opts()
    };
    let c = compare(&base, &new, &allowed).unwrap();
    let algo: Vec<&String> = c
        .warnings
        .iter()
        .filter(|w| w.starts_with("NCCL ran another"))
        .collect();
    assert_eq!(algo.len(), 1, "{:?}", c.warnings);
    assert!(algo[0].contains("on 1 joined case: all_reduce"), "{}", algo[0]);
    assert!(
        algo[0].ends_with("(base tree/ll, new ring/ll); compared anyway (--allow-algo-change)"),
        "{}",
        algo[0]
    );
    // the same choices, or a side that did not record: no warning
    let unrecorded = |size: u64| Record {
        algo: None,
        proto: None,
        algo_source: None,
        ..record("all_reduce", size, 10.0, 0.0)
    };
    let unrecorded = loaded("u", vec![unrecorded(8), unrecorded(1 << 20)]);
    for other in [&base, &unrecorded] {
        let c = compare(&base, other, &opts()).unwrap();
        assert!(
            !c.warnings.iter().any(|w| w.starts_with("NCCL ran another")),
            "{:?}",
            c.warnings
        );
    }
}
