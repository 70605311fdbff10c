//! Measurement quality under the real mpirun: per-iteration statistics and
//! the slowest rank (-I), the three iteration policies (precision, the
//! default; min-time; fixed, which is only counting and runs as threads on
//! the memory backend) and the columns that record them, buffer rotation
//! on and off.

use crate::common::*;

#[test]
fn per_iteration_statistics_are_ordered_and_name_a_real_rank() {
    let (out, csv) = mpirun_csv(
        3,
        &argv!["run -I --collectives all_reduce,alltoall,reduce -b 64 -e 256K -f 8 -n 30"],
    );
    for row in &csv.rows {
        let v = |c: &str| csv.num(row, c);
        let (min, p50, p99, max) = (
            v("time_iter_min_us"),
            v("time_p50_us"),
            v("time_p99_us"),
            v("time_iter_max_us"),
        );
        assert!(0.0 < min && min <= p50 && p50 <= p99 && p99 <= max, "{row:?}");
        assert!(v("time_cv") >= 0.0, "{row:?}");
        let slowest = v("slowest_rank");
        assert!(slowest.fract() == 0.0 && (0.0..3.0).contains(&slowest), "{row:?}");
        assert!(v("slowest_excess_pct") >= 0.0, "{row:?}");
        // the slowest rank's time is the row's time_max_us
        let excess = v("slowest_excess_pct");
        assert!(
            v("time_max_us") >= v("time_min_us") * (1.0 + excess / 100.0) - 1e-6,
            "{row:?}"
        );
    }
    let text = stdout(&out);
    // nccl-tests' -I columns, after #wrong, in its order
    let names = text.lines().find(|l| l.contains("#wrong")).expect("a column header");
    let words: Vec<&str> = names.split_whitespace().collect();
    let want = ["time", "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%"];
    assert!(words.windows(8).filter(|w| *w == want).count() == 2, "{names}");
    // the slow-rank line names its signal, whatever it found
    let line = text
        .lines()
        .find(|l| l.starts_with("# Stragglers           : "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("(arrival skew)"), "{line}");
}

#[test]
fn without_n_every_point_gets_an_adaptive_count_within_the_bounds() {
    let (out, csv) = mpirun_csv(
        2,
        &argv!["run --collectives all_reduce -b 8 -e 4M -f 512 --min-time 0.05"],
    );
    let iters: Vec<u64> = csv.rows.iter().map(|r| csv.num(r, "iters") as u64).collect();
    assert!(iters.iter().all(|n| (5..=10_000).contains(n)), "{iters:?}");
    // That small sizes get more iterations than large ones depends on how
    // long each took here, which a loaded machine decides: the engine's
    // tests check it on exact synthetic times
    // (`adaptive_counts_fill_min_time_at_the_slowest_ranks_pace_within_the_bounds`).
    assert!(stdout(&out).contains("iters adaptive (--min-time 0.05 s)"));
    for row in &csv.rows {
        assert_eq!(csv.get(row, "iter_policy"), "min-time");
        assert_eq!(
            (csv.get(row, "precision_target_pct"), csv.get(row, "precision_pct")),
            ("", "")
        );
    }
}

#[test]
fn by_default_points_run_batches_until_precise_and_rows_say_how_precise() {
    let (_dir, json_path) = temp_file("precision.json");
    let (out, csv) = mpirun_csv(
        3,
        &argv![
            "run --collectives all_reduce,gather -b 8 -e 1M -f 32 --precision 20 --max-time 0.05 --json",
            path_str(&json_path)
        ],
    );
    for row in &csv.rows {
        assert_eq!(csv.get(row, "iter_policy"), "precision", "{row:?}");
        assert_eq!(csv.num(row, "precision_target_pct"), 20.0, "{row:?}");
        let achieved = csv.num(row, "precision_pct");
        assert!(achieved.is_finite() && achieved >= 0.0, "{row:?}");
        // at least the six batches a 95% interval of a median needs
        assert!(csv.num(row, "iters") >= 6.0, "{row:?}");
    }
    // That small messages are batched into many more iterations than
    // large ones depends on how long each took here, which a loaded machine
    // decides (an 8-byte all_reduce took 7 ms at load 12): the engine's
    // tests check it on exact synthetic times
    // (`calibration_grows_the_batch_until_it_lasts_long_enough`,
    // `a_slow_operation_is_timed_one_per_batch`).
    assert_stdout_has(&out, "iters until the median is within +-20% (95% CI) or 0.05 s");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    let run = &json["run"];
    assert_eq!(run["iter_policy"], "precision");
    assert_eq!(
        (run["precision_target_pct"].as_f64(), run["max_time_s"].as_f64()),
        (Some(20.0), Some(0.05))
    );
    assert!(run["iters"].is_null() && run["min_time_s"].is_null());
}

#[test]
fn with_n_every_point_runs_exactly_n_iterations() {
    let (_dir, csv_path) = temp_file("fixed.csv");
    ok(on_memory(
        2,
        &argv!["run --collectives all_gather -e 64K -n 7 --csv", path_str(&csv_path)],
    ));
    let csv = Csv::read(&csv_path);
    assert!(csv.rows.iter().all(|r| csv.get(r, "iters") == "7"));
    assert!(csv.rows.iter().all(|r| csv.get(r, "iter_policy") == "fixed"));
    assert!(csv.rows.iter().all(|r| csv.get(r, "precision_pct").is_empty()));
}

#[test]
fn rotation_on_and_off_both_validate_and_one_reused_buffer_is_the_default() {
    for (flag, rotate) in [(Some("--rotate"), true), (Some("--no-rotate"), false), (None, false)] {
        let (_dir, csv_path) = temp_file("rot.csv");
        let mut args = argv![
            "run --collectives all -d int8,double -b 8 -e 32K -f 16 -n 9 -c 2 --csv",
            path_str(&csv_path)
        ];
        args.extend(flag);
        let out = mpirun(3, &args);
        assert_eq!(code(&out), 0, "{flag:?}: {}", stderr(&out));
        let csv = Csv::read(&csv_path);
        assert_rows_consistent(&csv, 3);
        assert_eq!(stdout(&out).contains("buffers rotate"), rotate, "{flag:?}");
        assert!(
            csv.rows.iter().all(|r| csv.get(r, "rotate") == rotate.to_string()),
            "{flag:?}"
        );
    }
}
