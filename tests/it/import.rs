//! `collbench import` on fixtures written from nccl-tests' and OSU's own
//! output formats: every supported layout converts, the bandwidths are
//! ours (recomputed from size and time), sizes follow our semantics, and
//! the result goes straight into `compare`. Unknown input: one line, exit 2,
//! no file written.
//!
//! Then the corpus of real, published logs in ../shared/real-logs (or
//! $COLLBENCH_REAL_LOGS), read where it lies, never copied: every file
//! imports with every row, the right rank count and a busbw within the
//! rounding of the one the log printed, or is refused with one line that
//! says what is missing. Without the corpus those tests say so loudly and
//! pass; everything else here needs no corpus.

use std::io::Write;
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
    assert_eq!(csv.header, default_header());
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
    assert_stdout_has(&out, "0 regressed");
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
    assert_stdout_has(&out, "(0 improved, 0 regressed, 20 within noise, 0 too noisy)");
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
    assert_eq!(csv.get(last, "timestamp"), "2025-10-14T12:00:02Z");
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
    let (dir, out_path) = temp_file("both.csv");
    let (a, b) = (fixture("osu-7.3-allreduce.txt"), fixture("osu-5.9-allgather-full.txt"));
    ok(collbench(&argv![
        "import --from osu --nranks 4",
        path_str(&a),
        path_str(&b),
        "-o",
        path_str(&out_path)
    ]));
    assert_eq!(Csv::read(&out_path).rows.len(), 36);
    let svg = dir.path().join("osu.svg");
    ok(collbench(&["plot", path_str(&out_path), "-o", path_str(&svg)]));
}

#[test]
fn unknown_or_incomplete_input_is_one_line_exit_2_and_no_file() {
    let (dir, junk) = temp_file("junk.txt");
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
            "[possible values: nccl-tests, osu, collbench]",
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
    ok(collbench(&argv![
        "import --from nccl-tests --collective all_reduce",
        path_str(&nccl_no_name),
        "-o",
        path_str(&out_path)
    ]));
    // an existing output is not replaced without --overwrite
    let out = collbench(&argv![
        "import --from nccl-tests --collective all_reduce",
        path_str(&nccl_no_name),
        "-o",
        path_str(&out_path)
    ]);
    assert_eq!(code(&out), 2);
    assert_stderr_has(&out, "already exists");
}

/// Runs `collbench import` and returns (exit code, stderr, CSV if written).
fn import_any(from: &str, input: &Path, extra: &[&str]) -> (i32, String, Option<Csv>) {
    let (_dir, out_path) = temp_file("out.csv");
    let mut args = vec!["import", "--from", from, path_str(input), "-o", path_str(&out_path)];
    args.extend(extra);
    let out = collbench(&args);
    let csv = out_path.exists().then(|| Csv::read(&out_path));
    (code(&out), stderr(&out), csv)
}

/// The stderr lines that are collbench's warnings.
fn warnings(err: &str) -> Vec<&str> {
    err.lines().filter(|l| l.starts_with("collbench: warning:")).collect()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Every column but run_id (which comes from the file name).
fn rows_without_run_id(csv: &Csv) -> Vec<Vec<String>> {
    let skip = csv.header.iter().position(|h| h == "run_id").unwrap();
    csv.rows
        .iter()
        .map(|r| {
            r.iter()
                .enumerate()
                .filter(|(i, _)| *i != skip)
                .map(|(_, v)| v.clone())
                .collect()
        })
        .collect()
}

#[test]
fn utf16_utf8_bom_crlf_and_gzip_copies_of_a_log_import_the_same_rows() {
    let dir = tempdir();
    let plain = std::fs::read_to_string(fixture("nccl-tests-2.13-all_reduce_perf.txt")).unwrap();
    let (c, err, want) = import_any("nccl-tests", &fixture("nccl-tests-2.13-all_reduce_perf.txt"), &[]);
    assert_eq!(c, 0, "{err}");
    let want = rows_without_run_id(&want.unwrap());
    let utf16 = |bom: &[u8], little: bool| {
        let mut b = bom.to_vec();
        for u in plain.encode_utf16() {
            b.extend(if little { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        b
    };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(plain.as_bytes()).unwrap();
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("utf16le-bom.txt", utf16(&[0xff, 0xfe], true)),
        ("utf16le.txt", utf16(&[], true)),
        ("utf16be-bom.txt", utf16(&[0xfe, 0xff], false)),
        ("utf8-bom.txt", [&[0xef, 0xbb, 0xbf][..], plain.as_bytes()].concat()),
        ("crlf.txt", plain.replace('\n', "\r\n").into_bytes()),
        ("log.txt.gz", gz.finish().unwrap()),
    ];
    for (name, bytes) in variants {
        let (c, err, csv) = import_any("nccl-tests", &write(dir.path(), name, &bytes), &[]);
        assert_eq!(c, 0, "{name}: {err}");
        assert!(warnings(&err).is_empty(), "{name}: {err}");
        assert_eq!(rows_without_run_id(&csv.unwrap()), want, "{name}");
    }
}

#[test]
fn binaries_archives_and_empty_files_are_refused_in_one_line_that_names_them() {
    let dir = tempdir();
    let mut random = vec![0u8; 3000];
    let mut x: u32 = 12345;
    for b in &mut random {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        *b = (x >> 16) as u8;
    }
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("empty.txt", Vec::new(), "the file is empty (0 bytes)"),
        (
            "a.out",
            b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec(),
            "an ELF binary",
        ),
        (
            "log.xz",
            b"\xfd7zXZ\0\0\x04".to_vec(),
            "xz-compressed, not a text log: unxz it first",
        ),
        ("logs.zip", b"PK\x03\x04\x14\0".to_vec(), "a zip archive"),
        ("random.bin", random, "a binary file, not text"),
        (
            "cut.gz",
            vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3, 1, 2],
            "gzip-compressed but damaged",
        ),
    ];
    for (name, bytes, needle) in cases {
        let (c, err, csv) = import_any("nccl-tests", &write(dir.path(), name, &bytes), &[]);
        assert_eq!(c, 2, "{name}: {err}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(err.contains(needle), "{name}: want {needle:?} in {err}");
        assert!(csv.is_none(), "{name} left a file behind");
    }
}

#[test]
fn warnings_name_the_line_and_come_only_once_the_csv_is_written() {
    let dir = tempdir();
    let text = std::fs::read_to_string(fixture("nccl-tests-2.13-all_reduce_perf.txt")).unwrap();
    let row = "     8192          2048     float     sum      -1";
    assert!(text.contains(row));
    let split = text.replace(row, &format!("{row}\ngpu-node:1:2 [0] NCCL INFO Connected all rings\n"));
    let truncated = &text[..text.find("     2097152").unwrap() + 30];
    for (name, body, rows, needle) in [
        (
            "split.log",
            split.as_str(),
            20,
            "line 16: a result row split by interleaved output (line 17) was joined",
        ),
        (
            "cut.log",
            truncated,
            18,
            "line 20: the file ends inside this result row (2 of 13 values): truncated",
        ),
    ] {
        let (c, err, csv) = import_any("nccl-tests", &write(dir.path(), name, body.as_bytes()), &[]);
        assert_eq!(c, 0, "{name}: {err}");
        assert_eq!(csv.unwrap().rows.len(), rows, "{name}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 2, "{name}: {err}");
        assert!(
            lines[0].starts_with("collbench: warning: ") && lines[0].contains(needle),
            "{name}: {err}"
        );
        assert!(
            lines[1].starts_with(&format!("collbench: imported {rows} rows into ")),
            "{name}: {err}"
        );
    }
    // refused: the one line, and not a warning with it
    let bad = text.replace("   float", "   float  x");
    let (c, err, _) = import_any("nccl-tests", &write(dir.path(), "bad.log", bad.as_bytes()), &[]);
    assert_eq!(c, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("the nccl-tests column header (line 9) was found, but none of the 10 rows"),
        "{err}"
    );
}

// ---- the real-log corpus ----

/// The corpus folder, or None (said loudly) when this machine lacks it.
fn real_logs() -> Option<PathBuf> {
    let dir = std::env::var_os("COLLBENCH_REAL_LOGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/real-logs"));
    if dir.join("nccl-tests").is_dir() {
        return Some(dir);
    }
    // Straight to stderr: the test harness would swallow eprintln! of a passing test.
    let line = format!(
        "\n*** SKIPPED: real-log corpus tests: no corpus at {} (set COLLBENCH_REAL_LOGS to its folder) ***\n",
        dir.display()
    );
    let _ = std::io::stderr().write_all(line.as_bytes());
    None
}

enum Expect {
    /// The runs in file order: (collective, nranks, rows); warnings that
    /// must be printed (one needle each, no other warning); the log whose
    /// printed busbw the rows are checked against (None: this file).
    Import(
        &'static [(&'static str, u64, usize)],
        &'static [&'static str],
        Option<&'static str>,
    ),
    Refuse(&'static str),
}

const XXRJUN: &str = "nccl-tests/repo-xxrjun-10node-80gpu-5collectives-2.17.8.txt";
const XXRJUN_RUNS: &[(&str, u64, usize)] = &[
    ("all_reduce", 80, 20),
    ("all_gather", 80, 20),
    ("reduce_scatter", 80, 20),
    ("alltoall", 80, 20),
    ("sendrecv", 80, 20),
];
const NO_COLLECTIVE: &str = "cannot tell which collective this measured (no *_perf binary name in the log or in the \
                             file name): pass --collective NAME";

/// Every corpus file, with the options it is imported with and what must come of it.
fn corpus() -> Vec<(&'static str, &'static str, Vec<&'static str>, Expect)> {
    use Expect::*;
    let n = "nccl-tests";
    vec![
        ("README.md", n, vec![], Refuse("no nccl-tests result rows found")),
        (XXRJUN, n, vec![], Import(XXRJUN_RUNS, &[], None)),
        (
            "nccl-tests/repo-xxrjun-2node-alltoall-sendrecv-2.17.6.txt",
            n,
            vec![],
            Import(&[("alltoall", 2, 20), ("sendrecv", 2, 20)], &[], None),
        ),
        (
            "nccl-tests/repo-lessizzmore-a3mega-2node-16gpu-allreduce.txt",
            n,
            vec![],
            Refuse(NO_COLLECTIVE),
        ),
        (
            "nccl-tests/repo-lessizzmore-a3mega-2node-16gpu-allreduce.txt",
            n,
            vec!["--collective", "all_reduce"],
            Import(&[("all_reduce", 16, 62)], &[], None),
        ),
        (
            "nccl-tests/repo-lessizzmore-a3mega-2node-16gpu-allreduce.txt",
            n,
            vec!["--collective", "sendrecv"],
            Refuse("the log's busbw 338.82 is not what sendrecv gives with 16 ranks"),
        ),
        (
            "nccl-tests/repo-li-plus-playground-8gpu-sendrecv.txt",
            n,
            vec![],
            Import(&[("sendrecv", 8, 8)], &[], None),
        ),
        (
            "nccl-tests/repo-li-plus-playground-8gpu-sendrecv.txt",
            n,
            vec!["--collective", "broadcast"],
            Refuse(
                "--collective broadcast contradicts the log, which measured sendrecv: leave --collective out (it is \
                 for logs that do not name their collective)",
            ),
        ),
        (
            "nccl-tests/repo-azureml-examples-k80-4gpu-allreduce-info.txt",
            n,
            vec![],
            Refuse(NO_COLLECTIVE),
        ),
        (
            "nccl-tests/repo-azureml-examples-k80-4gpu-allreduce-info.txt",
            n,
            vec!["--collective", "all_reduce"],
            Import(&[("all_reduce", 4, 14)], &[], None),
        ),
        (
            "nccl-tests/repo-wohlbier-nccl-tests-dgx2-12gpu-5runs-2020-old-format.txt",
            n,
            vec![],
            Import(
                &[
                    ("all_gather", 12, 62),
                    ("all_reduce", 12, 62),
                    ("broadcast", 12, 62),
                    ("reduce", 12, 62),
                    ("reduce_scatter", 12, 62),
                ],
                &["line 52: this run reports 4 FAILED checks; its 'error' column is a maximum error, not a count"],
                None,
            ),
        ),
        (
            "nccl-tests/repo-anthony-hoo-autodl-2080ti-6runs-multi-collective.txt",
            n,
            vec![],
            Import(
                &[
                    ("all_reduce", 2, 56),
                    ("all_gather", 2, 56),
                    ("broadcast", 2, 56),
                    ("reduce", 2, 56),
                    ("reduce", 1, 56),
                    ("alltoall", 2, 56),
                ],
                &[],
                None,
            ),
        ),
        (
            "nccl-tests/repo-awsome-distributed-training-slurm-104-scatter-16gpu-srun-label.txt",
            n,
            vec![],
            Refuse(NO_COLLECTIVE),
        ),
        (
            "nccl-tests/repo-awsome-distributed-training-slurm-104-scatter-16gpu-srun-label.txt",
            n,
            vec!["--collective", "scatter"],
            Import(&[("scatter", 16, 58)], &[], None),
        ),
        (
            "nccl-tests/repo-awsome-distributed-training-aws-batch-p5-allreduce-tag-output.txt",
            n,
            vec![],
            Refuse(
                "nor how many ranks ran it (no '#  Rank N' device lines, no echoed command line): pass --collective NAME and --nranks N",
            ),
        ),
        (
            "nccl-tests/repo-awsome-distributed-training-aws-batch-p5-allreduce-tag-output.txt",
            n,
            vec!["--collective", "all_reduce"],
            Refuse(
                "cannot tell how many ranks ran this: no '#  Rank N' device lines and no echoed command line with the launch: pass --nranks N",
            ),
        ),
        (
            "nccl-tests/repo-awsome-distributed-training-aws-batch-p5-allreduce-tag-output.txt",
            n,
            vec!["--collective", "all_reduce", "--nranks", "8"],
            Import(&[("all_reduce", 8, 64)], &[], None),
        ),
        (
            "nccl-tests/repo-awsome-distributed-training-aws-batch-p5-allreduce-tag-output.txt",
            n,
            vec!["--collective", "all_reduce", "--nranks", "16"],
            Refuse("line 35: the log's busbw 483.35 is not what all_reduce gives with 16 ranks"),
        ),
        (
            "nccl-tests/repo-nccl-ebpf-broadcast_perf_mpi-2.18.0-2rank.txt",
            n,
            vec![],
            Import(&[("broadcast", 2, 18)], &[], None),
        ),
        (
            "osu/repo-archer2-docs-osu-allreduce-5.4.1-256ranks.txt",
            "osu",
            vec![],
            Refuse("pass --nranks N"),
        ),
        (
            "osu/repo-archer2-docs-osu-allreduce-5.4.1-256ranks.txt",
            "osu",
            vec!["--nranks", "256"],
            Import(&[("all_reduce", 256, 19)], &[], None),
        ),
        (
            "osu/repo-archer2-docs-osu-allreduce-5.4.1-256ranks.txt",
            "osu",
            vec!["--collective", "all_gather", "--nranks", "256"],
            Refuse("--collective all_gather contradicts the log, which measured all_reduce"),
        ),
        (
            "osu/repo-archer2-docs-osu-allreduce-5.4.1-256ranks.txt",
            "osu",
            vec!["--collective", "sendrecv", "--nranks", "256"],
            Refuse("--collective sendrecv: OSU has no benchmark of it, so no OSU log measured it"),
        ),
        (
            "osu/repo-meow-rest-osu-allreduce-5.7.1-4ranks.txt",
            "osu",
            vec![],
            Import(&[("all_reduce", 4, 19)], &[], None),
        ),
        (
            "osu/repo-meow-rest-osu-allreduce-5.7.1-4ranks.txt",
            "osu",
            vec!["--nranks", "8"],
            Refuse("--nranks 8, but the command line at line 1 starts 4 processes"),
        ),
        (
            "near-miss/README.md",
            n,
            vec![],
            Refuse("no nccl-tests result rows found"),
        ),
        (
            "near-miss/binary-elf-head.bin",
            n,
            vec![],
            Refuse("an ELF binary (a program or library), not a text log"),
        ),
        (
            "near-miss/random-bytes.bin",
            n,
            vec![],
            Refuse("a binary file, not text"),
        ),
        ("near-miss/empty.txt", n, vec![], Refuse("the file is empty (0 bytes)")),
        ("near-miss/crlf-xxrjun.txt", n, vec![], Import(XXRJUN_RUNS, &[], None)),
        (
            "near-miss/utf8-bom-xxrjun.txt",
            n,
            vec![],
            Import(XXRJUN_RUNS, &[], None),
        ),
        (
            "near-miss/utf16le-xxrjun.txt",
            n,
            vec![],
            Import(XXRJUN_RUNS, &[], Some(XXRJUN)),
        ),
        (
            "near-miss/gzipped-log.txt.gz",
            n,
            vec![],
            Import(XXRJUN_RUNS, &[], Some(XXRJUN)),
        ),
        (
            "near-miss/nccl-info-between-rows-xxrjun.txt",
            n,
            vec![],
            Import(XXRJUN_RUNS, &[], None),
        ),
        (
            "near-miss/nccl-info-splits-a-row-xxrjun.txt",
            n,
            vec![],
            Import(
                XXRJUN_RUNS,
                &["line 94: a result row split by interleaved output (line 95) was joined with its rest on line 96"],
                Some(XXRJUN),
            ),
        ),
        (
            "near-miss/rank-lines-elided-xxrjun.txt",
            n,
            vec![],
            Refuse(
                "the run starting at line 137: 74 of the '#  Rank 0..79' lines are missing (elided?), so the rank \
                 count is at least 80 but not known, and sendrecv's busbw does not depend on it: pass --nranks N",
            ),
        ),
        (
            "near-miss/rank-lines-elided-xxrjun.txt",
            n,
            vec!["--nranks", "80"],
            Import(XXRJUN_RUNS, &[], None),
        ),
        (
            "near-miss/rank-lines-elided-xxrjun.txt",
            n,
            vec!["--nranks", "79"],
            Refuse("79 ranks (--nranks), but there is a '#  Rank 79' line"),
        ),
        (
            "near-miss/markdown-hash-stripped-lessizzmore-HEAD.txt",
            n,
            vec![],
            Refuse(NO_COLLECTIVE),
        ),
        (
            "near-miss/markdown-hash-stripped-lessizzmore-HEAD.txt",
            n,
            vec!["--collective", "all_reduce"],
            Import(&[("all_reduce", 16, 62)], &[], None),
        ),
        (
            "near-miss/truncated-midline-xxrjun.txt",
            n,
            vec![],
            Import(
                &[("all_reduce", 80, 20), ("all_gather", 80, 4)],
                &["line 201: the file ends inside this result row (3 of 13 values): truncated, not imported"],
                None,
            ),
        ),
        (
            "near-miss/truncated-in-last-token-xxrjun.txt",
            n,
            vec![],
            Import(
                &XXRJUN_RUNS_BUT_SENDRECV,
                &["line 520: the file ends inside this result row ('N/' is not a valid #wrong value): truncated"],
                None,
            ),
        ),
    ]
}

const XXRJUN_RUNS_BUT_SENDRECV: [(&str, u64, usize); 4] = [
    ("all_reduce", 80, 20),
    ("all_gather", 80, 20),
    ("reduce_scatter", 80, 20),
    ("alltoall", 80, 20),
];

/// Half the last digit printf printed (`12.5` -> 0.05, `105854` -> 0.5).
fn printed_half_unit(text: &str) -> f64 {
    let (mantissa, exponent) = match text.to_ascii_lowercase().split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap()),
        None => (text.to_string(), 0),
    };
    let decimals = mantissa.split_once('.').map_or(0, |(_, d)| d.len() as i32);
    0.5 * 10f64.powi(exponent - decimals)
}

/// Each imported row against the row the log printed: the line holding
/// its size and time, whose next-but-one value is the printed busbw. Our
/// busbw, from size / time and the collective's factor at nranks, must be
/// within the rounding of the printed time and busbw.
fn check_printed_busbw(file: &str, log: &str, csv: &Csv) -> Result<(), String> {
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split_whitespace().collect()).collect();
    let mut at = 0;
    for row in &csv.rows {
        let size = csv.get(row, "size_bytes");
        let time = csv.num(row, "time_us");
        let in_place = csv.get(row, "placement") == "in_place";
        let found = (at..lines.len()).find_map(|i| {
            let w = &lines[i];
            let s = w.iter().position(|t| *t == size)?;
            let times: Vec<usize> = (s + 1..w.len().saturating_sub(2))
                .filter(|&j| w[j].parse::<f64>() == Ok(time) && w[j + 2].parse::<f64>().is_ok())
                .collect();
            let j = if in_place { times.last() } else { times.first() }?;
            Some((i, w[*j], w[*j + 2]))
        });
        let Some((i, time_text, busbw_text)) = found else {
            return Err(format!("{file}: no printed row for {row:?} after line {at}"));
        };
        at = if in_place { i + 1 } else { i };
        let (n, coll) = (csv.num(row, "nranks"), csv.get(row, "collective"));
        let size: f64 = size.parse().unwrap();
        let bus = |t: f64| {
            if t > 0.0 {
                size / t / 1e3 * bus_factor(coll, n)
            } else {
                f64::INFINITY
            }
        };
        let (dt, printed, db) = (
            printed_half_unit(time_text),
            busbw_text.parse::<f64>().unwrap(),
            printed_half_unit(busbw_text),
        );
        let (lo, hi) = (bus(time + dt) - db - 1e-9, bus(time - dt) + db + 1e-9);
        if !(size == 0.0 || (lo..=hi).contains(&printed)) {
            return Err(format!(
                "{file} line {}: printed busbw {busbw_text}, ours {} ({coll}, {n} ranks) is outside [{lo}, {hi}]",
                i + 1,
                bus(time)
            ));
        }
        let ours = csv.num(row, "busbw_gbps");
        if (ours - bus(time)).abs() > 1e-9 * bus(time).max(1.0) {
            return Err(format!(
                "{file}: busbw_gbps {ours} is not size / time x factor = {}",
                bus(time)
            ));
        }
    }
    Ok(())
}

/// (collective, nranks, rows) of each run, in file order.
fn runs(csv: &Csv) -> Vec<(String, u64, usize)> {
    let mut out: Vec<(String, String, u64, usize)> = Vec::new();
    for row in &csv.rows {
        let id = csv.get(row, "run_id").to_string();
        match out.last_mut() {
            Some(last) if last.0 == id => last.3 += 1,
            _ => out.push((
                id,
                csv.get(row, "collective").to_string(),
                csv.num(row, "nranks") as u64,
                1,
            )),
        }
        let n = csv.num(row, "nranks") as u64;
        assert_eq!(out.last().unwrap().2, n, "one rank count per run: {row:?}");
    }
    out.into_iter().map(|(_, c, n, k)| (c, n, k)).collect()
}

fn check_corpus_case(root: &Path, file: &str, from: &str, args: &[&str], expect: &Expect) -> Result<(), String> {
    let (code, err, csv) = import_any(from, &root.join(file), args);
    let case = format!("{file} {args:?}");
    match expect {
        Expect::Refuse(needle) => {
            if code != 2 || err.lines().count() != 1 || !err.contains(needle) || csv.is_some() {
                return Err(format!(
                    "{case}: want exit 2, one line with {needle:?} and no CSV; got exit {code}: {err}"
                ));
            }
        }
        Expect::Import(want_runs, want_warnings, reference) => {
            let Some(csv) = csv.filter(|_| code == 0) else {
                return Err(format!("{case}: exit {code}: {err}"));
            };
            let got: Vec<(String, u64, usize)> = runs(&csv);
            let want: Vec<(String, u64, usize)> = want_runs.iter().map(|(c, n, k)| (c.to_string(), *n, *k)).collect();
            if got != want {
                return Err(format!("{case}: runs {got:?}, want {want:?}"));
            }
            let w = warnings(&err);
            if w.len() != want_warnings.len() || !want_warnings.iter().all(|n| w.iter().any(|l| l.contains(n))) {
                return Err(format!("{case}: warnings {w:?}, want {want_warnings:?}"));
            }
            if from == "nccl-tests" {
                let log_file = reference.unwrap_or(file);
                let log = String::from_utf8_lossy(&std::fs::read(root.join(log_file)).unwrap()).into_owned();
                check_printed_busbw(&case, &log, &csv)?;
            } else {
                for row in &csv.rows {
                    let alg = csv.num(row, "size_bytes") / csv.num(row, "time_us") / 1e3;
                    let bus = alg * bus_factor(csv.get(row, "collective"), csv.num(row, "nranks"));
                    if (csv.num(row, "busbw_gbps") - bus).abs() > 1e-9 * bus.max(1.0) {
                        return Err(format!("{case}: busbw of {row:?} is not {bus}"));
                    }
                }
            }
        }
    }
    Ok(())
}

#[test]
fn every_real_log_imports_with_every_row_and_the_printed_busbw_or_is_refused_in_one_line() {
    let Some(root) = real_logs() else { return };
    let cases = corpus();
    // every file of the corpus has a case, and every case a file
    let mut files = Vec::new();
    for sub in ["", "nccl-tests", "osu", "near-miss"] {
        for entry in std::fs::read_dir(root.join(sub)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                let rel = path.strip_prefix(&root).unwrap().to_string_lossy().into_owned();
                files.push(rel);
            }
        }
    }
    let mut failures: Vec<String> = files
        .iter()
        .filter(|f| !cases.iter().any(|c| c.0 == f.as_str()))
        .map(|f| format!("{f}: no case for this corpus file"))
        .collect();
    for (file, from, args, expect) in &cases {
        if !files.iter().any(|f| f == file) {
            failures.push(format!("{file}: not in the corpus"));
            continue;
        }
        if let Err(e) = check_corpus_case(&root, file, from, args, expect) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn old_nccl_tests_algbw_with_the_folded_factor_is_recomputed_and_its_error_column_is_no_count() {
    let Some(root) = real_logs() else { return };
    let file = root.join("nccl-tests/repo-wohlbier-nccl-tests-dgx2-12gpu-5runs-2020-old-format.txt");
    let (c, err, csv) = import_any("nccl-tests", &file, &[]);
    assert_eq!(c, 0, "{err}");
    let csv = csv.unwrap();
    // all_gather 8589934560 B in 106773 us: the log printed algbw 73.75 =
    // size / time x 11/12; ours is size / time, and busbw is the printed one
    let row = csv
        .rows
        .iter()
        .find(|r| csv.get(r, "collective") == "all_gather" && csv.get(r, "size_bytes") == "8589934560")
        .unwrap();
    assert!((csv.num(row, "algbw_gbps") - 8589934560.0 / 106773.0 / 1e3).abs() < 1e-9);
    assert!((csv.num(row, "algbw_gbps") * 11.0 / 12.0 - 73.75).abs() < 0.005);
    assert!((csv.num(row, "busbw_gbps") - 73.75).abs() < 0.005);
    // `error` printed 1e+00 here: a maximum error, not one wrong element
    assert!(csv.rows.iter().all(|r| csv.get(r, "wrong").is_empty()));
}

/// collbench's own nccl-tests JSON of a run of two collectives on the mpi
/// backend reads back without --collective: each row its collective, the
/// backend mpi (not nccl), the same rows as the run's CSV.
#[test]
fn collbench_s_own_nccl_tests_json_imports_back_as_the_run_it_was() {
    let dir = tempdir();
    let (json, csv) = (dir.path().join("run.json"), dir.path().join("run.csv"));
    ok(mpirun(
        2,
        &argv![
            "run --backend mpi --collectives all_reduce,broadcast -e 1K -n 2 --output-format nccl-tests-json --json",
            path_str(&json),
            "--csv",
            path_str(&csv)
        ],
    ));
    let back = dir.path().join("back.csv");
    ok(collbench(&argv![
        "import --from nccl-tests",
        path_str(&json),
        "-o",
        path_str(&back)
    ]));
    let (run, imported) = (Csv::read(&csv), Csv::read(&back));
    assert_eq!(imported.rows.len(), run.rows.len());
    let key =
        |c: &Csv, r: &[String]| ["collective", "backend", "size_bytes", "placement"].map(|k| c.get(r, k).to_string());
    let mut want: Vec<_> = run.rows.iter().map(|r| key(&run, r)).collect();
    let mut got: Vec<_> = imported.rows.iter().map(|r| key(&imported, r)).collect();
    want.sort();
    got.sort();
    assert_eq!(got, want);
    assert!(got.iter().any(|k| k[0] == "broadcast") && got.iter().all(|k| k[1] == "mpi"));
}

#[test]
fn logs_of_the_same_name_from_separate_launches_get_separate_run_ids() {
    let dir = tempdir();
    let text = std::fs::read_to_string(fixture("nccl-tests-2.13-all_reduce_perf.txt")).unwrap();
    // node2 measured the same sweep on another host
    let other = text.replace("gpu-node", "gpu-node2");
    assert_ne!(other, text);
    let mut ids = Vec::new();
    for (node, body) in [("node1", &text), ("node2", &other), ("again", &text)] {
        std::fs::create_dir_all(dir.path().join(node)).unwrap();
        let log = write(&dir.path().join(node), "all_reduce_perf.log", body.as_bytes());
        let (c, err, csv) = import_any("nccl-tests", &log, &[]);
        assert_eq!(c, 0, "{err}");
        let csv = csv.unwrap();
        let id = csv.get(&csv.rows[0], "run_id").to_string();
        assert!(csv.rows.iter().all(|r| csv.get(r, "run_id") == id));
        assert!(id.starts_with("nccl-tests-all_reduce_perf-"), "{id}");
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1], "two launches, one file name");
    assert_eq!(ids[0], ids[2], "the same log imported twice is the same launch");
}

#[test]
fn a_write_that_fails_midway_leaves_no_partial_csv_and_keeps_the_old_one() {
    // A file-size limit (ulimit -f, with SIGXFSZ ignored so the write
    // fails with EFBIG) stands in for a full disk: 10 runs of 20 rows
    // make a CSV of some 60 KB, the limit is 8 or 16 KB.
    let text = std::fs::read_to_string(fixture("nccl-tests-2.13-all_reduce_perf.txt")).unwrap();
    let logs = tempdir();
    let log = write(logs.path(), "all_reduce_perf.log", text.repeat(10).as_bytes());
    let dir = tempdir();
    let out = dir.path().join("w.csv");
    let limited = |extra: &str| {
        let script =
            format!("trap '' XFSZ; ulimit -f 16; exec \"$0\" import --from nccl-tests \"$1\" -o \"$2\" {extra}");
        std::process::Command::new("sh")
            .args(["-c", &script, BIN, path_str(&log), path_str(&out)])
            .output()
            .unwrap()
    };
    let o = limited("");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert!(stderr(&o).contains("cannot write CSV file"), "{}", stderr(&o));
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "nothing is left behind: {left:?}");
    // --overwrite of an existing CSV that fails keeps the old file whole
    std::fs::write(&out, "old").unwrap();
    let o = limited("--overwrite");
    assert_eq!(code(&o), 1, "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "old");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // and without the limit the same import is whole
    let (c, err, csv) = import_any("nccl-tests", &log, &[]);
    assert_eq!(c, 0, "{err}");
    assert_eq!(csv.unwrap().rows.len(), 200);
}
