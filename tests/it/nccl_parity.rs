//! Issue 26: what nccl-tests' users and their tools read. A real run at 3
//! ranks (a non-power of two) under the real `mpirun`: its table read back
//! by our own import gives every row of its CSV, and its nccl-tests JSON
//! has every key nccl-tests 2.19 writes (src/util.cu, README) with the
//! figures of the CSV.

use std::collections::BTreeSet;

use serde_json::Value;

use crate::common::*;

/// The keys nccl-tests 2.19.6 writes with `-J` (src/util.cu:
/// jsonOutputInit, writeDeviceReport, writeBenchmarkLinePreamble/Body/
/// Terminator, writePerIterReport, writeResultFooter, writeErrors,
/// jsonOutputFinalize), by object.
const TOP: [&str; 11] = [
    "version",
    "start_time",
    "args",
    "env",
    "nccl_version",
    "config",
    "results",
    "out_of_bounds",
    "average_bus_bandwidth",
    "errors",
    "end_time",
];
const CONFIG: [&str; 14] = [
    "nthreads",
    "ngpus",
    "minimum_bytes",
    "maximum_bytes",
    "warmup_iters",
    "iterations",
    "aggregated_iterations",
    "validation",
    "graph",
    "blocking_collectives",
    "per_iter_timing",
    "per_iter_skip",
    "parallel_init",
    "devices",
];
const DEVICE: [&str; 7] = [
    "rank",
    "group",
    "pid",
    "hostname",
    "device",
    "device_hex",
    "device_info",
];
const RESULT: [&str; 9] = [
    "size",
    "count",
    "type",
    "redop",
    "root",
    "out_of_place",
    "in_place",
    "actual_iterations",
    "experiment_name",
];
const BODY: [&str; 4] = ["time", "alg_bw", "bus_bw", "nwrong"];
/// `per_process_max_times_us` is not written (docs/nccl-tests.md).
const PER_ITER: [&str; 10] = [
    "skipped_iterations",
    "min_us",
    "max_us",
    "avg_us",
    "p50_us",
    "p95_us",
    "p99_us",
    "stdev_us",
    "cv_pct",
    "times_us",
];

fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

fn set(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The columns our table cannot give back (docs/import.md#collbench-tables);
/// the last three because the table's -I columns are nccl-tests': min, max,
/// p99, cv.
const NOT_IN_THE_TABLE: &str = "time_min_us time_max_us timing average iter_policy precision_target_pct \
                                precision_pct agg_iters cuda_graph register rotate \
                                time_p50_us slowest_rank slowest_excess_pct";

/// Printed with two decimals: within half a unit of the last (relative
/// 1e-3 for a time too wide for its column, printed with fewer).
fn as_printed(ours: f64, back: f64) -> bool {
    (ours - back).abs() <= 0.005 + 1e-9 || (ours - back).abs() <= ours.abs() * 1e-3
}

#[test]
fn our_table_imports_back_to_every_row_and_our_nccl_tests_json_has_nccl_tests_keys() {
    let dir = tempdir();
    let (csv_path, json_path) = (dir.path().join("run.csv"), dir.path().join("run.json"));
    let out = ok(mpirun(
        3,
        &[
            "run",
            "--collectives",
            "all_reduce,alltoallv,broadcast,sendrecv",
            "-d",
            "float,int8",
            "-b",
            "1K",
            "-e",
            "16K",
            "-f",
            "4",
            "-n",
            "3",
            "-w",
            "1",
            "-N",
            "2",
            "-I",
            "-S",
            "--label",
            "parity run",
            "--alltoallv-spread",
            "0.5",
            "--no-progress",
            "--csv",
            path_str(&csv_path),
            "--json",
            path_str(&json_path),
            "--output-format",
            "nccl-tests-json",
        ],
    ));
    let table = dir.path().join("table.txt");
    std::fs::write(&table, stdout(&out)).unwrap();
    let ours = Csv::read(&csv_path);
    // 4 collectives x 2 types x 3 sizes x 2 placements x 2 sweeps
    assert_eq!(ours.rows.len(), 96);
    assert!(ours.header.iter().any(|h| h == "traffic"), "{:?}", ours.header);

    // --- the table, imported by our own import, under either name
    for from in ["collbench", "nccl-tests"] {
        let back_path = dir.path().join(format!("back-{from}.csv"));
        let imported = ok(collbench(&[
            "import",
            "--from",
            from,
            path_str(&table),
            "-o",
            path_str(&back_path),
        ]));
        assert!(!stderr(&imported).contains("warning"), "{}", stderr(&imported));
        let back = Csv::read(&back_path);
        assert_eq!(back.rows.len(), ours.rows.len(), "{from}: every row comes back");
        for (a, b) in ours.rows.iter().zip(&back.rows) {
            for column in &ours.header {
                let (x, y) = (ours.get(a, column), back.get(b, column));
                match column.as_str() {
                    c if words(NOT_IN_THE_TABLE).contains(&c) => {}
                    "collbench_version" | "samples" | "cycle" | "label" | "traffic" => assert_eq!(x, y, "{column}"),
                    "time_us" | "time_iter_min_us" | "time_iter_max_us" | "time_p99_us" => {
                        assert!(
                            as_printed(x.parse().unwrap(), y.parse().unwrap()),
                            "{column}: {x} vs {y}"
                        )
                    }
                    "time_cv" => {
                        // printed as a percentage with one decimal
                        let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                        assert!((x - y).abs() <= 0.0005 + 1e-12, "cv {x} vs {y}");
                    }
                    "algbw_gbps" | "busbw_gbps" => {
                        // recomputed from the printed time with our formulas
                        let n = 3.0;
                        let factor = if column == "busbw_gbps" {
                            bus_factor(back.get(b, "collective"), n)
                        } else {
                            1.0
                        };
                        let want = back.num(b, "size_bytes") / (back.num(b, "time_us") * 1e-6) / 1e9 * factor;
                        assert!((back.num(b, column) - want).abs() <= want * 1e-12, "{column}");
                    }
                    // a line's -S time is its in-place record's (the later
                    // of the two), so an out-of-place row may come back a
                    // second or so later than its own record
                    "timestamp" if ours.get(a, "placement") == "out_of_place" => assert!(
                        y >= x
                            && ours
                                .rows
                                .iter()
                                .any(|r| ours.get(r, "placement") == "in_place" && ours.get(r, column) == y),
                        "{from}: timestamp {y} is not an in-place record's time at or after {x}"
                    ),
                    _ => assert_eq!(x, y, "{from}: column {column} of {a:?}"),
                }
            }
        }
    }

    // --- the nccl-tests JSON: every key nccl-tests writes, our figures
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(keys(&doc), set(&TOP));
    assert_eq!(doc["version"], 3);
    assert_eq!(doc["nccl_version"], 0, "the mpi backend has no NCCL version");
    let config = &doc["config"];
    let mut want_config = set(&CONFIG);
    want_config.insert("step_factor".into());
    assert_eq!(keys(config), want_config);
    let smallest = ours.rows.iter().map(|r| ours.num(r, "size_bytes") as u64).min();
    assert_eq!(
        (config["minimum_bytes"].as_u64(), config["step_factor"].as_u64()),
        (smallest, Some(4))
    );
    assert_eq!(config["iterations"], 3);
    let devices = config["devices"].as_array().unwrap();
    assert_eq!(devices.len(), 3);
    for (rank, d) in devices.iter().enumerate() {
        assert_eq!(keys(d), set(&DEVICE));
        assert_eq!(d["rank"], rank);
    }
    let results = doc["results"].as_array().unwrap();
    assert_eq!(
        results.len(),
        ours.rows.len() / 2,
        "one result per point, both placements"
    );
    for (i, r) in results.iter().enumerate() {
        let mut want = set(&RESULT);
        want.extend(["out_of_place_per_iter".to_string(), "in_place_per_iter".to_string()]);
        assert_eq!(keys(r), want);
        let (oop, ip) = (&ours.rows[2 * i], &ours.rows[2 * i + 1]);
        assert_eq!(r["size"].as_u64().unwrap(), ours.num(oop, "size_bytes") as u64);
        assert_eq!(r["count"].as_u64().unwrap(), ours.num(oop, "count") as u64);
        assert_eq!(r["type"], ours.get(oop, "dtype"));
        assert_eq!(r["redop"], ours.get(oop, "op"));
        assert_eq!(r["root"], format!("{:>6}", ours.get(oop, "root")));
        assert_eq!(r["actual_iterations"], 3);
        for (placement, row) in [("out_of_place", oop), ("in_place", ip)] {
            let body = &r[placement];
            assert_eq!(keys(body), set(&BODY));
            // serde_json's reader may miss the last digit of a double
            let same = |key: &str, column: &str| {
                let (a, b) = (body[key].as_f64().unwrap(), ours.num(row, column));
                assert!((a - b).abs() <= b.abs() * 1e-14, "{key} {a} vs {column} {b}");
            };
            same("time", "time_us");
            same("bus_bw", "busbw_gbps");
            same("alg_bw", "algbw_gbps");
            match ours.get(row, "wrong") {
                "" => assert!(body["nwrong"].is_null(), "not checked: null, as nccl-tests"),
                w => assert_eq!(body["nwrong"].as_f64().unwrap(), w.parse::<f64>().unwrap()),
            }
            let per = &r[format!("{placement}_per_iter")];
            assert_eq!(keys(per), set(&PER_ITER));
            let times: Vec<f64> = per["times_us"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t.as_f64().unwrap())
                .collect();
            assert_eq!(times.len(), 3, "every timed iteration");
            let close = |a: f64, b: f64| (a - b).abs() <= b.abs() * 1e-12;
            let min = times.iter().copied().fold(f64::INFINITY, f64::min);
            let max = times.iter().copied().fold(0.0, f64::max);
            assert!(close(
                per["min_us"].as_f64().unwrap(),
                ours.num(row, "time_iter_min_us")
            ));
            assert!(close(
                per["max_us"].as_f64().unwrap(),
                ours.num(row, "time_iter_max_us")
            ));
            assert_eq!(
                (per["min_us"].as_f64().unwrap(), per["max_us"].as_f64().unwrap()),
                (min, max)
            );
        }
    }
    assert_eq!(doc["out_of_bounds"]["count"], 0);
    assert_eq!(doc["out_of_bounds"]["okay"], true);
    let mean = ours.rows.iter().map(|r| ours.num(r, "busbw_gbps")).sum::<f64>() / ours.rows.len() as f64;
    let avg = doc["average_bus_bandwidth"]["bandwidth"].as_f64().unwrap();
    assert!((avg - mean).abs() <= mean * 1e-9, "{avg} vs {mean}");
    // -S: every row ends with its time, as nccl-tests prints it
    let text = stdout(&out);
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), ours.rows.len() / 2);
    for (row, csv_row) in rows.iter().zip(ours.rows.iter().skip(1).step_by(2)) {
        let stamp = ours.get(csv_row, "timestamp").replace('T', " ").replace('Z', "");
        assert!(row.ends_with(&format!("  {stamp}")), "{row} vs {stamp}");
    }
    // the table's nccl-tests footer says the same
    assert!(stdout(&out).contains("\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : "));
}

/// The real nccl-tests -J file of the import fixtures has no key we lack.
#[test]
fn a_real_nccl_tests_json_has_no_key_our_list_lacks() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/import/nccl-tests-2.17-all_reduce_perf.json"),
    )
    .unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert!(keys(&doc).is_subset(&set(&TOP)));
    let mut config = set(&CONFIG);
    config.extend(["step_factor".to_string(), "step_bytes".to_string()]);
    assert!(keys(&doc["config"]).is_subset(&config));
    assert!(keys(&doc["config"]["devices"][0]).is_subset(&set(&DEVICE)));
    let r = &doc["results"][0];
    assert!(keys(r).is_subset(&set(&RESULT)));
    assert!(keys(&r["out_of_place"]).is_subset(&set(&BODY)));
}

/// A matrix file through nccl-tests' own variable, with -b below what the
/// busiest rank sends: refused in one line naming the need, exit 2.
#[test]
fn an_alltoallv_matrix_needs_one_size_large_enough() {
    let (_dir, matrix) = temp_file("m.txt");
    std::fs::write(&matrix, "0 1000 2000\n100 0 300\n64 64 64\n").unwrap();
    let sweep = exits(
        2,
        mpirun(
            3,
            &argv![
                "run --collectives alltoallv --alltoallv-matrix",
                path_str(&matrix),
                "-b 1K -e 4K"
            ],
        ),
    );
    assert_stderr_has(&sweep, "-b equal to -e");
    // rank 0 sends 0 + 992 + 2000 = 2992 bytes, the most of any rank
    let small = exits(
        2,
        mpirun(
            3,
            &argv![
                "run --collectives alltoallv --alltoallv-matrix",
                path_str(&matrix),
                "-b 2K -e 2K"
            ],
        ),
    );
    assert_stderr_has(&small, "at least 2992");
    assert_eq!(our_lines(&small).len(), 1, "{}", stderr(&small));
}
