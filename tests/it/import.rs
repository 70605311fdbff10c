//! `collbench import` on fixtures written from nccl-tests' and OSU's own
//! output formats: every supported layout converts, the bandwidths are
//! ours (recomputed from size and time), sizes follow our semantics, and
//! the result goes straight into `compare`. Unknown input: one line, exit 2,
//! no file written.

use std::path::{Path, PathBuf};

use crate::common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/import")
        .join(name)
}

fn import(dir: &Path, from: &str, file: &str, extra: &[&str]) -> (PathBuf, Csv) {
    let out_path = dir.join(format!("{file}.csv"));
    let input = fixture(file);
    let mut args = vec!["import", "--from", from, path_str(&input), "-o", path_str(&out_path)];
    args.extend(extra);
    let out = collbench(&args);
    assert_eq!(code(&out), 0, "{file}: {}", stderr(&out));
    let csv = Csv::read(&out_path);
    assert_eq!(csv.header, SCHEMA_1.to_vec());
    (out_path, csv)
}

/// algbw and busbw recomputed from size and time with our factors.
fn assert_our_bandwidths(csv: &Csv, n: f64) {
    assert!(!csv.rows.is_empty());
    for row in &csv.rows {
        let size = csv.num(row, "size_bytes");
        let t = csv.num(row, "time_us");
        let alg = size / (t * 1e-6) / 1e9;
        let bus = alg * bus_factor(csv.get(row, "collective"), n);
        assert!((csv.num(row, "algbw_gbps") - alg).abs() <= 1e-9 * alg, "{row:?}");
        assert!(
            (csv.num(row, "busbw_gbps") - bus).abs() <= 1e-9 * bus.max(1e-12),
            "{row:?}"
        );
        assert_eq!(csv.num(row, "nranks"), n, "{row:?}");
    }
}

fn compare_to_itself(path: &Path) {
    let out = collbench(&["compare", path_str(path), path_str(path)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("0 regressed"), "{}", stdout(&out));
}

#[test]
fn nccl_tests_2_13_text_and_its_json_import_to_the_same_rows() {
    let dir = tempdir();
    let (text_csv, text) = import(dir.path(), "nccl-tests", "nccl-tests-2.13-all_reduce_perf.txt", &[]);
    let (json_csv, json) = import(dir.path(), "nccl-tests", "nccl-tests-2.17-all_reduce_perf.json", &[]);
    assert_eq!(text.rows.len(), 20, "10 sizes, out-of-place and in-place");
    assert_eq!(json.rows.len(), 20);
    assert_our_bandwidths(&text, 2.0);
    assert_our_bandwidths(&json, 2.0);
    let first = &text.rows[0];
    assert_eq!(text.get(first, "collective"), "all_reduce");
    assert_eq!(text.get(first, "host"), "gpu-node");
    assert_eq!(text.get(first, "wrong"), "0");
    assert_eq!(text.get(first, "iters"), "20");
    // the text and the JSON of one run join row for row, with no change
    let out = collbench(&["compare", path_str(&text_csv), path_str(&json_csv)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(
        stdout(&out).contains("(0 improved, 0 regressed, 20 within noise)"),
        "{}",
        stdout(&out)
    );
    compare_to_itself(&text_csv);
}

#[test]
fn nccl_tests_2_19_with_timestamps_tags_and_no_checking() {
    let dir = tempdir();
    let (path, csv) = import(
        dir.path(),
        "nccl-tests",
        "nccl-tests-2.19-all_gather_perf-timestamps.txt",
        &[],
    );
    assert_eq!(csv.rows.len(), 6);
    assert_our_bandwidths(&csv, 8.0);
    let last = csv.rows.last().unwrap();
    assert_eq!(csv.get(last, "collective"), "all_gather");
    assert_eq!(csv.get(last, "timestamp"), "2025-10-14 12:00:02");
    assert_eq!(csv.get(last, "wrong"), "", "N/A: checking was off");
    assert_eq!((csv.get(last, "nnodes"), csv.get(last, "ranks_per_node")), ("2", "4"));
    // nccl-tests' all_gather size is already the total: 1 MiB, 32768 per rank
    assert_eq!(
        (csv.get(last, "size_bytes"), csv.get(last, "count")),
        ("1048576", "32768")
    );
    assert!(csv.get(last, "backend_version").contains("2.27.3"));
    compare_to_itself(&path);
}

#[test]
fn osu_default_and_full_formats_import_with_total_sizes() {
    let dir = tempdir();
    let (path, ar) = import(dir.path(), "osu", "osu-7.3-allreduce.txt", &["--nranks", "4"]);
    assert_eq!(ar.rows.len(), 19);
    assert_our_bandwidths(&ar, 4.0);
    assert_eq!(ar.get(&ar.rows[0], "dtype"), "float");
    compare_to_itself(&path);

    let (path, ag) = import(dir.path(), "osu", "osu-5.9-allgather-full.txt", &["--nranks", "4"]);
    assert_eq!(ag.rows.len(), 17);
    assert_our_bandwidths(&ag, 4.0);
    let last = ag.rows.last().unwrap();
    // OSU's 65536 bytes per rank are 4 x 65536 in total
    assert_eq!(ag.get(last, "size_bytes"), "262144");
    assert_eq!(ag.get(last, "count"), "65536");
    assert_eq!(ag.get(last, "iters"), "100");
    assert_eq!(
        (ag.num(last, "time_min_us"), ag.num(last, "time_max_us")),
        (296.33, 324.11)
    );
    compare_to_itself(&path);
}

#[test]
fn several_files_go_into_one_csv_that_compares_and_plots() {
    let dir = tempdir();
    let out_path = dir.path().join("both.csv");
    let (a, b) = (fixture("osu-7.3-allreduce.txt"), fixture("osu-5.9-allgather-full.txt"));
    let out = collbench(&[
        "import",
        "--from",
        "osu",
        "--nranks",
        "4",
        path_str(&a),
        path_str(&b),
        "-o",
        path_str(&out_path),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(Csv::read(&out_path).rows.len(), 36);
    let svg = dir.path().join("osu.svg");
    let out = collbench(&["plot", path_str(&out_path), "-o", path_str(&svg)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

#[test]
fn unknown_or_incomplete_input_is_one_line_exit_2_and_no_file() {
    let dir = tempdir();
    let junk = dir.path().join("junk.txt");
    std::fs::write(&junk, "hello\n1 2 3\n").unwrap();
    let osu = fixture("osu-7.3-allreduce.txt");
    let nccl_no_name = dir.path().join("log.txt");
    let text = std::fs::read_to_string(fixture("nccl-tests-2.13-all_reduce_perf.txt")).unwrap();
    std::fs::write(&nccl_no_name, text.replace("all_reduce_perf", "a.out")).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--from", "nccl-tests", path_str(&junk)],
            "no nccl-tests result rows",
        ),
        (
            vec!["--from", "osu", "--nranks", "2", path_str(&junk)],
            "no OSU result rows",
        ),
        (
            vec!["--from", "nccl-tests", path_str(&osu)],
            "no nccl-tests result rows",
        ),
        (vec!["--from", "osu", path_str(&osu)], "--nranks"),
        (vec!["--from", "nccl-tests", path_str(&nccl_no_name)], "--collective"),
        (vec!["--from", "osu", "/nonexistent/osu.txt"], "cannot read"),
    ];
    let parser_cases: [(&[&str], &str); 3] = [
        (
            &["--from", "mpi-bench", path_str(&junk)],
            "[possible values: nccl-tests, osu]",
        ),
        (&["--from", "osu", "--nranks", "0", path_str(&osu)], "--nranks <N>"),
        (
            &["--from", "osu", "--collective", "barrier", path_str(&osu)],
            "unknown collective 'barrier'",
        ),
    ];
    for (args, needle) in parser_cases {
        let out_path = dir.path().join("out.csv");
        let mut full = vec!["import"];
        full.extend(args);
        full.extend(["-o", path_str(&out_path)]);
        assert_parser_error(&collbench(&full), needle);
        assert!(!out_path.exists(), "{args:?} left a file behind");
    }
    for (args, needle) in cases {
        let out_path = dir.path().join("out.csv");
        let mut full = vec!["import"];
        full.extend(&args);
        full.extend(["-o", path_str(&out_path)]);
        let out = collbench(&full);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: want {needle:?} in {err}");
        assert!(!out_path.exists(), "{args:?} left a file behind");
    }
    // --collective names what the log does not
    let out_path = dir.path().join("named.csv");
    let out = collbench(&[
        "import",
        "--from",
        "nccl-tests",
        "--collective",
        "all_reduce",
        path_str(&nccl_no_name),
        "-o",
        path_str(&out_path),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // an existing output is not replaced without --overwrite
    let out = collbench(&[
        "import",
        "--from",
        "nccl-tests",
        "--collective",
        "all_reduce",
        path_str(&nccl_no_name),
        "-o",
        path_str(&out_path),
    ]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
}
