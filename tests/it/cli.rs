//! The command line as a user meets it: help, bad input of every kind (one
//! line, exit 2, no panic), output-file rules, the TOML config file,
//! the JSON report.

use crate::common::*;

#[test]
fn help_teaches_how_to_run() {
    let out = collbench(&["--help"]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    assert!(
        text.contains("run") && text.contains("mpirun -np 4 collbench run"),
        "{text}"
    );

    let out = collbench(&["run", "--help"]);
    assert_eq!(code(&out), 0);
    let text = stdout(&out);
    for flag in [
        "--minbytes",
        "--maxbytes",
        "--stepfactor",
        "--stepbytes",
        "--iters",
        "--warmup",
        "--check",
        "--dtype",
        "--op",
        "--root",
        "--average",
        "--blocking",
        "--agg-iters",
        "--cuda-graph",
        "--register",
        "--collectives",
        "--backend",
        "--csv",
        "--json",
        "--no-progress",
        "--config",
        "Exit codes",
    ] {
        assert!(text.contains(flag), "run --help lacks {flag}:\n{text}");
    }
    assert!(!text.contains("inject"), "the test hook must stay hidden");
}

/// Each value the parser refuses: exit 2 and clap's message (the value,
/// the option, why), no panic.
#[test]
fn bad_values_get_the_parser_s_message_and_exit_2() {
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["-b", "-8"], "negative"),
        (vec!["-e", "M"], "no number"),
        (vec!["-e", "16Q"], "unknown unit"),
        (vec!["-e", "1.5M"], "whole number"),
        (vec!["-e", "99999999999999999999"], "too large"),
        (vec!["-e", "99999999T"], "too large"),
        (
            vec!["-n", "0"],
            "for '--iters <N>': '0' is not a whole number of 1 or more",
        ),
        (vec!["-n", "-5"], "-5"),
        (vec!["-n", "abc"], "abc"),
        (vec!["-w", "99999999999"], "--warmup"),
        (vec!["-d", "int9"], "unknown element type 'int9'"),
        (vec!["-d", ""], "--dtype <LIST>': the list is empty"),
        (vec!["-d", "float,,int8"], "empty item"),
        (vec!["-o", "mean"], "unknown operation 'mean'"),
        (vec!["-o", "all,sum"], "cannot be combined"),
        (
            vec!["--collectives", "allreduce,barrier"],
            "unknown collective 'barrier'",
        ),
        (vec!["-r", "first"], "--root"),
        (vec!["-a", "median"], "[possible values: rank0, avg, min, max]"),
        (vec!["-a", "4"], "--average"),
        (vec!["-z", "2"], "--blocking"),
        (
            vec!["-m", "0"],
            "--agg-iters <N>': '0' is not a whole number of 1 or more",
        ),
        (
            vec!["--timeout", "-1"],
            "--timeout <SECS>': '-1' is not a whole number (digits only)",
        ),
        (vec!["--ranks-per-node", "0"], "'0' is not a whole number of 1 or more"),
        (vec!["--cycles", "x"], "'x' is not a whole number (digits only)"),
        (vec!["-m", "two"], "two"),
        (vec!["-G", "-1"], "-1"),
        (vec!["-R", "3"], "'3' is not 0, 1 or 2"),
        (vec!["--backend", "gloo"], "[possible values: auto, mpi, nccl, memory]"),
        (vec!["--label", "two\nlines"], "--label <TEXT>"),
        (vec!["--bogus"], "unexpected argument '--bogus'"),
        // alltoallv's traffic from one source: never one silently dropped
        (
            vec!["--alltoallv-matrix", "m.txt", "--alltoallv-spread", "0.5"],
            "cannot be used with '--alltoallv-spread <0..1>'",
        ),
        (
            vec!["--alltoallv-matrix-scale", "2"],
            "required arguments were not provided:\n  --alltoallv-matrix <FILE>",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["run"];
        full.extend(&args);
        let out = collbench(&full);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
        assert!(err.contains("For more information, try '--help'."), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{args:?}: {err}"
        );
    }
}

/// Each bad combination or file the parser cannot see: exit 2, exactly one
/// line on stderr naming the problem, no panic.
#[test]
fn bad_command_lines_get_one_line_and_exit_2() {
    let (dir, existing) = temp_file("exists.csv");
    std::fs::write(&existing, "x\n").unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["-b", "0"], "--minbytes"),
        (vec!["-b", "1G", "-e", "1M"], "larger than --maxbytes"),
        (vec!["-f", "0"], "--stepfactor"),
        (vec!["-i", "0", "-f", "1"], "--stepbytes"),
        (
            vec!["-f", "1", "-e", "1K"],
            "-f 1 steps by -i, whose default is 1M (as nccl-tests): from -b 8 the next size is past -e 1024",
        ),
        (vec!["-b", "1", "-e", "1G", "-i", "1"], "sizes"),
        (vec!["-d", "half"], "dtype half"),
        (vec!["-d", "bfloat16"], "bfloat16"),
        (vec!["-o", "avg"], "op avg"),
        (vec!["-r", "1"], "--root 1 is out of range"),
        (vec!["-G", "2", "-z"], "--blocking"),
        (vec!["-G", "2", "-I"], "-I times each iteration"),
        (vec!["-G", "1", "--phase-times"], "--phase-times"),
        (
            vec!["-m", "2", "--hierarchy", "all"],
            "run the hierarchical modes with -m 1",
        ),
        (vec!["--csv", "/nonexistent-folder/x.csv"], "cannot create CSV file"),
        (vec!["--csv", path_str(&existing)], "already exists"),
        (vec!["--json", path_str(&existing)], "already exists"),
        // refused up front, not after the sweep at the rename
        (vec!["--json", path_str(dir.path()), "--overwrite"], "is a folder"),
        (
            vec!["--config", "/nonexistent/collbench.toml"],
            "cannot read config file",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["run"];
        full.extend(&args);
        let out = collbench_in(dir.path(), &full);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?} printed more than one line:\n{err}");
        assert!(err.starts_with("collbench: "), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: expected {needle:?} in {err}");
        assert!(
            !err.contains("panicked") && !err.contains("RUST_BACKTRACE"),
            "{args:?}: {err}"
        );
    }
    // no failed run left a report behind
    let results = dir.path().join("results");
    let left: Vec<_> = std::fs::read_dir(&results)
        .map(|d| d.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

/// nccl-tests' extras need NCCL: on the mpi backend each is one line and
/// exit 2, and nothing is written. (Under mpirun such an error, found
/// before MPI starts, is printed once:
/// `usage_errors_under_mpirun_are_printed_once_and_every_rank_exits_2`.)
#[cfg(feature = "mpi")]
#[test]
fn nccl_extras_on_the_mpi_backend_are_refused_with_one_line() {
    let (_dir, csv_path) = temp_file("never.csv");
    let cases: [(&[&str], &str); 5] = [
        (
            &["-m", "2"],
            "-m/--agg-iters 2 issues several operations as one NCCL group",
        ),
        (&["-G", "1"], "-G/--cuda-graph 1 captures NCCL launches in a CUDA graph"),
        (&["-R"], "-R/--register registers buffers"),
        (&["-R", "1"], "-R/--register registers buffers"),
        (&["--agg-iters", "3", "--cuda-graph", "2"], "-m/--agg-iters 3"),
    ];
    for (extra, needle) in cases {
        let mut args = vec!["run", "--backend", "mpi", "-e", "64", "--csv", path_str(&csv_path)];
        args.extend(extra);
        let out = collbench(&args);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{extra:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{extra:?}: {err}");
        assert!(
            err.starts_with("collbench: ") && err.contains(needle),
            "{extra:?}: {err}"
        );
        assert!(
            err.contains("needs the nccl backend, and this run's backend is mpi"),
            "{err}"
        );
    }
    assert!(!csv_path.exists(), "no report for a refused run");
    // the defaults are no request at all
    ok(collbench(&argv![
        "run --backend mpi -e 64 -m 1 -G 0 -R 0 --collectives all_reduce --csv",
        path_str(&csv_path)
    ]));
}

#[test]
fn bad_config_files_get_one_line_with_the_line_number_and_exit_2() {
    let dir = tempdir();
    let cases = [
        ("minbytes = 8\nbogus-key = 1\n", "line 2"),
        ("iters = 5\niters = 6\n", "line 2"),
        ("iters = -5\n", "line 1"),
        ("maxbytes = \"16Q\"\n", "unknown unit"),
        ("dtype = [\"float\", \"int9\"]\n", "int9"),
        ("collectives = []\n", "--collectives <LIST>': the list is empty"),
        ("minbytes = 8\n[section\n", "line 2"),
        ("root = \"-1\"\n", "--root"),
        ("op = 7\n", "line 1"),
        ("agg-iters = 0\n", "--agg-iters"),
        ("cuda-graph = 2\nblocking = true\n", "--blocking"),
        ("register = 3\n", "is not 0, 1 or 2"),
        // the command line's "did you mean", for a misspelt key too
        (
            "maxbyte = \"1K\"\n",
            "line 1: unknown key `maxbyte`: it is not an option of `collbench run`; did you mean `maxbytes`?",
        ),
        ("timeout = -1\n", "'-1' is not a whole number"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("c{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let out = collbench(&["run", "--config", path_str(&path)]);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{text:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{text:?}: {err}");
        assert!(err.contains("config file") || err.contains("--"), "{text:?}: {err}");
        assert!(err.contains(needle), "{text:?}: expected {needle:?} in {err}");
    }
}

#[test]
fn usage_errors_under_mpirun_are_printed_once_and_every_rank_exits_2() {
    // known only after MPI starts (the rank count), so every rank must agree
    let out = exits(2, mpirun(3, &["run", "-r", "3", "-e", "64"]));
    let lines = our_lines(&out);
    assert_eq!(
        lines,
        vec!["collbench: --root 3 is out of range: the job has 3 ranks (0..=2)"]
    );
    // found by the parser before MPI starts: a_usage_error_under_mpirun_is_printed_once
    // found after parsing, before MPI starts: only rank 0 prints
    let out = mpirun(3, &["run", "-b", "0"]);
    assert_eq!(code(&out), 2);
    assert_eq!(our_lines(&out), ["collbench: --minbytes must be at least 1 byte"]);
}

#[test]
fn a_toml_config_runs_and_the_command_line_wins() {
    let (dir, config) = temp_file("suite.toml");
    let csv_path = dir.path().join("from-config.csv");
    std::fs::write(
        &config,
        format!(
            "collectives = [\"all_reduce\", \"broadcast\"]\ndtype = \"int32\"\nminbytes = \"1K\"\nmaxbytes = \"64K\"\n\
             stepfactor = 4\niters = 3\nwarmup = 1\ncsv = \"{}\"\nno-progress = true\n",
            path_str(&csv_path)
        ),
    )
    .unwrap();
    let (_, csv) = memory_rows(2, &["run", "--config", path_str(&config), "-e", "4K"], &csv_path);
    let sizes: Vec<&str> = csv.rows.iter().map(|r| csv.get(r, "size_bytes")).collect();
    assert_eq!(sizes, ["1024", "1024", "4096", "4096", "1024", "1024", "4096", "4096"]);
    assert!(
        csv.rows
            .iter()
            .all(|r| csv.get(r, "dtype") == "int32" && csv.get(r, "iters") == "3")
    );
}

#[test]
fn json_report_carries_the_run_and_every_record() {
    let (dir, csv_path) = temp_file("r.csv");
    let json_path = dir.path().join("r.json");
    ok(on_memory(
        2,
        &argv![
            "run --collectives scatter -e 256 --csv",
            path_str(&csv_path),
            "--json",
            path_str(&json_path)
        ],
    ));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["schema_version"], 1);
    assert_eq!(doc["run"]["nranks"], 2);
    assert_eq!(doc["run"]["backend"], "memory");
    // nccl-tests' extras, at their defaults
    assert_eq!(doc["run"]["agg_iters"], 1);
    assert_eq!(doc["run"]["cuda_graph"], 0);
    assert_eq!(doc["run"]["register"], false);
    assert_eq!(doc["summary"]["complete"], true);
    let csv = Csv::read(&csv_path);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), csv.rows.len());
    assert_eq!(records[0]["collective"], "scatter");
    assert!(!dir.path().join("r.json.partial").exists());
}

#[test]
fn the_default_csv_lands_in_a_new_file_under_results() {
    let dir = tempdir();
    let mut cmd = std::process::Command::new(BIN);
    cmd.current_dir(dir.path())
        .args(["run", "--collectives", "sendrecv", "-e", "16"]);
    let out = ok(output_of(cmd));
    let files: Vec<_> = std::fs::read_dir(dir.path().join("results"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].extension().unwrap() == "csv");
    let csv = Csv::read(&files[0]);
    assert_rows_consistent(&csv, 1);
    assert!(stdout(&out).contains(path_str(&files[0]).rsplit('/').next().unwrap()));
}

#[test]
fn overwrite_replaces_an_existing_report() {
    let (_dir, csv_path) = temp_file("again.csv");
    std::fs::write(&csv_path, "old\n").unwrap();
    ok(collbench(&argv![
        "run --collectives sendrecv -e 16 --csv",
        path_str(&csv_path),
        "--overwrite"
    ]));
    assert_eq!(Csv::read(&csv_path).header, default_header());
}

/// Issue 15, point 4: repeating an option is not an error; the last one
/// wins, as in most command-line tools (wrappers append options), and the
/// command line wins over the config file.
#[test]
fn a_repeated_option_keeps_its_last_value() {
    let (dir, csv_path) = temp_file("last.csv");
    let config = dir.path().join("c.toml");
    std::fs::write(&config, "collectives = \"all_reduce\"\nmaxbytes = \"1M\"\niters = 2\n").unwrap();
    ok(collbench(&argv![
        "run --config",
        path_str(&config),
        "--collectives broadcast --collectives sendrecv -e 1K -e 64 -b 64 --csv",
        path_str(&csv_path),
        "--csv",
        path_str(&csv_path),
        "--no-progress --no-progress"
    ]));
    let csv = Csv::read(&csv_path);
    assert_rows_consistent(&csv, 1);
    assert!(
        csv.rows.iter().all(|r| csv.get(r, "collective") == "sendrecv"
            && csv.get(r, "size_bytes") == "64"
            && csv.get(r, "iters") == "2"),
        "{:?}",
        csv.rows
    );
}

#[test]
fn a_label_names_the_run_in_the_header_every_csv_row_and_the_json() {
    let (dir, csv_path) = temp_file("l.csv");
    let json_path = dir.path().join("l.json");
    let label = "nightly, node \"a\"";
    let out = ok(on_memory(
        2,
        &argv![
            "run --collectives all_reduce -e 64 --label",
            label,
            "--csv",
            path_str(&csv_path),
            "--json",
            path_str(&json_path)
        ],
    ));
    assert!(
        stdout(&out).contains(&format!("# label     : {label}\n")),
        "{}",
        stdout(&out)
    );
    let csv = Csv::read(&csv_path);
    assert_eq!(csv.header.last().map(String::as_str), Some("label"));
    assert_eq!(csv.header[..SCHEMA_1.len()], SCHEMA_1);
    assert_rows_consistent(&csv, 2);
    assert!(csv.rows.iter().all(|r| csv.get(r, "label") == label));
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["run"]["label"], label);
    let records = doc["records"].as_array().unwrap();
    assert!(!records.is_empty() && records.iter().all(|r| r["label"] == label));

    // without --label, no column; a label must be one line
    let plain = dir.path().join("plain.csv");
    ok(collbench(&argv![
        "run --collectives sendrecv -e 16 --csv",
        path_str(&plain)
    ]));
    assert_eq!(Csv::read(&plain).header, default_header());
    let out = exits(
        2,
        collbench(&[
            "run",
            "--label",
            "two\nlines",
            "--csv",
            path_str(&dir.path().join("x.csv")),
        ]),
    );
    assert_stderr_has(&out, "invalid value");
}

/// Issue 15, point 3: a usage error found by the command-line parser is
/// clap's own complete message (the required arguments named, the allowed
/// values, "did you mean", the right subcommand's usage and help pointer),
/// with exit 2.
#[test]
fn usage_errors_keep_the_parser_s_complete_message() {
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["plot", "A.csv"],
            &[
                "required arguments were not provided",
                "--output <FILE>",
                "Usage: collbench plot",
            ],
        ),
        (
            &["run", "--average", "medain"],
            &[
                "invalid value 'medain' for '--average <MODE>'",
                "[possible values: rank0, avg, min, max]",
            ],
        ),
        (&["run", "--backend", "ncl"], &["a similar value exists: 'nccl'"]),
        (
            &["run", "--mxbytes", "1K"],
            &["a similar argument exists: '--maxbytes'"],
        ),
        (
            &["info", "--bogus"],
            &["unexpected argument '--bogus'", "Usage: collbench info"],
        ),
        (&["cmopare", "a.csv"], &["a similar subcommand exists: 'compare'"]),
    ];
    for (args, needles) in cases {
        let out = collbench(args);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        for needle in needles {
            assert!(err.contains(needle), "{args:?}: expected {needle:?} in\n{err}");
        }
        assert!(err.contains("For more information, try '--help'."), "{args:?}: {err}");
        assert!(
            !err.contains("collbench run --help") || args[0] == "run",
            "{args:?}: {err}"
        );
    }
    // help about help is help
    ok(collbench(&["help", "--help"]));
    let out = ok(collbench(&["help", "plot"]));
    assert_stdout_has(&out, "--output <FILE>");
}

/// Under mpirun every rank finds the same usage error; rank 0 alone prints
/// clap's message, and every rank exits 2.
#[test]
fn a_usage_error_under_mpirun_is_printed_once() {
    let out = mpirun(3, &["run", "--mxbytes", "1K"]);
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert_eq!(err.matches("unexpected argument '--mxbytes'").count(), 1, "{err}");
    assert_eq!(err.matches("Usage: collbench run").count(), 1, "{err}");
}
