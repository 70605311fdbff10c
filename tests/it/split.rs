//! `--split` (nccl-tests' NCCL_TESTS_SPLIT): every group runs each point at
//! once on its own communicator; the CSV has a row per group and the
//! aggregate (`all`), each row's size, count and bus bandwidth by the
//! formulas at its own rank count. MPI_Comm_split's groups under the real
//! `mpirun`: groups colour processes, as nccl-tests' do, so the ranks of
//! one process (`-g N`, the memory backend's threads) are one group.

use std::collections::BTreeMap;

use crate::common::*;

/// Checks every row at its own rank count (`assert_rows_consistent`,
/// which wants 0 wrong), and returns the rows by point.
fn checked_rows_by_point(csv: &Csv) -> BTreeMap<(String, String, String), BTreeMap<String, Vec<String>>> {
    let mut by_n: BTreeMap<u64, Vec<Vec<String>>> = BTreeMap::new();
    for row in &csv.rows {
        by_n.entry(csv.num(row, "nranks") as u64).or_default().push(row.clone());
    }
    for (n, rows) in by_n {
        let part = Csv {
            header: csv.header.clone(),
            rows,
        };
        assert_rows_consistent(&part, n);
    }
    rows_by_point(csv)
}

/// The rows by (collective, the point's index in its sweep, placement),
/// then group.
fn rows_by_point(csv: &Csv) -> BTreeMap<(String, String, String), BTreeMap<String, Vec<String>>> {
    // rows come as group 0, 1, ..., all for each point: key by the point's
    // position in the sweep
    let mut points: BTreeMap<(String, String, String), BTreeMap<String, Vec<String>>> = BTreeMap::new();
    let mut seen: BTreeMap<(String, String), usize> = BTreeMap::new();
    for row in &csv.rows {
        let (collective, placement, group) = (
            csv.get(row, "collective"),
            csv.get(row, "placement"),
            csv.get(row, "group"),
        );
        let k = (collective.to_string(), placement.to_string());
        let index = *seen.get(&k).unwrap_or(&0);
        let key = (collective.to_string(), format!("{index:04}"), placement.to_string());
        points.entry(key).or_default().insert(group.to_string(), row.clone());
        if group == "all" {
            *seen.entry(k).or_default() += 1;
        }
    }
    points
}

/// Where a split run runs: under mpirun on the mpi backend, or as threads
/// on the memory backend.
#[derive(Clone, Copy)]
enum On {
    Mpi,
    Memory,
}

fn split_run(
    on: On,
    np: usize,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (std::process::Output, Csv, tempfile::TempDir) {
    let (dir, csv_path) = temp_file("split.csv");
    let mut args = argv![
        "run --collectives all_reduce,all_gather,broadcast,alltoall -b 1K -e 64K -f 8 -n 3 -w 1 --no-progress --csv",
        path_str(&csv_path)
    ];
    args.extend_from_slice(extra);
    let out = match on {
        On::Mpi => {
            args.extend(["--backend", "mpi"]);
            mpirun_env(np, env, &args)
        }
        On::Memory => {
            let n = np.to_string();
            args.extend(["-g", &n, "--backend", "memory"]);
            let mut cmd = std::process::Command::new(BIN);
            cmd.args(&args)
                .envs(env.iter().copied())
                .env("NO_COLOR", "1")
                .env_remove("OMPI_COMM_WORLD_RANK");
            output_of(cmd)
        }
    };
    let csv = if csv_path.exists() {
        Csv::read(&csv_path)
    } else {
        Csv {
            header: Vec::new(),
            rows: Vec::new(),
        }
    };
    (out, csv, dir)
}

#[test]
fn mod_2_at_4_ranks_runs_two_groups_of_two_with_a_row_each_and_the_aggregate() {
    let (out, csv, _dir) = split_run(On::Mpi, 4, &[], &["--split", "MOD 2"]);
    assert_eq!(code(&out), 0, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let mut header = default_header();
    header.push("group");
    assert_eq!(csv.header, header);
    let points = checked_rows_by_point(&csv);
    // 4 collectives x 3 sizes x 2 placements, each with groups 0, 1, all
    assert_eq!(points.len(), 24);
    for (key, groups) in &points {
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["0", "1", "all"], "{key:?}");
        for row in groups.values() {
            assert_eq!(csv.num(row, "nranks"), 2.0, "{row:?}");
            assert_eq!(csv.get(row, "wrong"), "0", "{row:?}");
        }
        // equal groups: the same size; the aggregate's time is every rank's
        // mean, the mean of the groups' means
        let (g0, g1, all) = (&groups["0"], &groups["1"], &groups["all"]);
        assert_eq!(csv.get(g0, "size_bytes"), csv.get(all, "size_bytes"));
        assert_eq!(csv.get(g1, "size_bytes"), csv.get(all, "size_bytes"));
        let mean = (csv.num(g0, "time_us") + csv.num(g1, "time_us")) / 2.0;
        assert!((csv.num(all, "time_us") - mean).abs() <= 1e-9 * mean, "{key:?}");
        let min = csv.num(g0, "time_min_us").min(csv.num(g1, "time_min_us"));
        assert_eq!(csv.num(all, "time_min_us"), min, "{key:?}");
    }
    // the table: nccl-tests' parsers (skipping '#') read the aggregate only
    let text = stdout(&out);
    let data: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    assert_eq!(data.len(), 12, "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("# g0 ")).count(), 12, "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("# g1 ")).count(), 12, "{text}");
    assert!(
        text.contains("2 groups (MOD 2): 0 = ranks 0,2; 1 = ranks 1,3"),
        "{text}"
    );
    assert!(text.contains("# Out of bounds values : 0 OK"), "{text}");
}

#[test]
fn nccl_tests_variable_at_3_ranks_makes_groups_of_two_and_one() {
    // nccl-tests' own variable and spelling
    let (out, csv, _dir) = split_run(On::Mpi, 3, &[("NCCL_TESTS_SPLIT", "%2")], &[]);
    assert_eq!(code(&out), 0, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let points = checked_rows_by_point(&csv);
    assert_eq!(points.len(), 24);
    for (key, groups) in &points {
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["0", "1", "all"], "{key:?}");
        let (g0, g1, all) = (&groups["0"], &groups["1"], &groups["all"]);
        // group 0 is ranks 0 and 2, group 1 rank 1 alone; the aggregate
        // takes rank 0's group's size and rank count (as nccl-tests prints)
        assert_eq!(csv.num(g0, "nranks"), 2.0);
        assert_eq!(csv.num(g1, "nranks"), 1.0);
        assert_eq!(csv.num(all, "nranks"), 2.0);
        assert_eq!(csv.get(all, "size_bytes"), csv.get(g0, "size_bytes"), "{key:?}");
        // every rank's mean: two ranks of group 0, one of group 1
        let mean = (2.0 * csv.num(g0, "time_us") + csv.num(g1, "time_us")) / 3.0;
        assert!((csv.num(all, "time_us") - mean).abs() <= 1e-9 * mean, "{key:?}");
        for row in [g0, g1, all] {
            assert_eq!(csv.get(row, "wrong"), "0", "{row:?}");
        }
    }
    assert_stdout_has(&out, "0 = ranks 0,2; 1 = rank 1");
}

/// The ranks of one process share its colour, as the GPUs of one
/// nccl-tests process do (docs/nccl-tests.md, "Parallel groups"): on the
/// memory backend's `-g 4` threads `MOD 2` is one group of four, where
/// four processes under mpirun make two groups of two (above).
#[test]
fn the_ranks_of_one_process_are_one_group() {
    let (out, csv, _dir) = split_run(On::Memory, 4, &[], &["--split", "MOD 2"]);
    assert_eq!(code(&out), 0, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let points = checked_rows_by_point(&csv);
    assert_eq!(points.len(), 24);
    for (key, groups) in &points {
        assert_eq!(groups.keys().collect::<Vec<_>>(), ["0", "all"], "{key:?}");
        assert_eq!(csv.num(&groups["0"], "nranks"), 4.0, "{key:?}");
        assert_eq!(
            csv.get(&groups["0"], "size_bytes"),
            csv.get(&groups["all"], "size_bytes")
        );
    }
    assert_stdout_has(&out, "1 group (MOD 2): 0 = ranks 0,1,2,3;");
}

#[test]
fn wrong_elements_are_counted_per_group_and_in_the_aggregate() {
    let (out, csv, _dir) = split_run(
        On::Mpi,
        4,
        &[],
        &["--split", "AND 0x1", "--inject-error", "--collectives", "all_reduce"],
    );
    assert_eq!(code(&out), 3, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    for (key, groups) in rows_by_point(&csv) {
        let wrong = |g: &str| csv.num(&groups[g], "wrong");
        // each rank corrupts one received element
        assert_eq!((wrong("0"), wrong("1"), wrong("all")), (2.0, 2.0, 4.0), "{key:?}");
    }
}

/// The nccl backend on the host GPU simulation (every run says so): each
/// group's communicator is ncclCommSplit's, at 3 ranks DIV 2 ({0, 1} and
/// {2}, a communicator of one) under mpirun, and at 4 ranks MOD 2 as `-g 4`
/// threads of one process, which share the process's colour as in
/// nccl-tests: one group of four.
#[cfg(feature = "nccl")]
#[test]
fn groups_run_on_ncclcommsplit_communicators_on_the_simulation() {
    use crate::gpu_sim::{assert_sim_rows, sim_dir, sim_env};
    let Some(sim) = sim_dir() else { return };
    let dir = tempdir();
    let cases: [(usize, usize, &str, &[u64]); 2] = [(3, 1, "DIV 2", &[2, 1]), (1, 4, "MOD 2", &[4])];
    for (np, threads, rule, sizes) in cases {
        let csv_path = dir.path().join(format!("sim{np}x{threads}.csv"));
        let mut args = argv![
            "run --backend nccl --collectives all_reduce,all_gather,reduce_scatter,broadcast -b 1K -e 16K -f 4 -n 2 -w 1 --split",
            rule,
            "--no-progress --csv",
            path_str(&csv_path)
        ];
        let env = sim_env(&sim, np * threads);
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let g = threads.to_string();
        let out = if threads > 1 {
            args.extend(["-g", &g]);
            let mut cmd = std::process::Command::new(BIN);
            cmd.args(&args)
                .env_remove("OMPI_COMM_WORLD_RANK")
                .envs(env.iter().copied());
            output_of(cmd)
        } else {
            mpirun_env(np, &env, &args)
        };
        assert_eq!(code(&out), 0, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
        let csv = Csv::read(&csv_path);
        for n in [1u64, 2, 4] {
            let rows: Vec<Vec<String>> = csv
                .rows
                .iter()
                .filter(|r| csv.num(r, "nranks") as u64 == n)
                .cloned()
                .collect();
            if !rows.is_empty() {
                assert_sim_rows(
                    &Csv {
                        header: csv.header.clone(),
                        rows,
                    },
                    n,
                );
            }
        }
        for (key, groups) in rows_by_point(&csv) {
            let mut want: Vec<String> = (0..sizes.len()).map(|g| g.to_string()).collect();
            want.push("all".into());
            assert_eq!(groups.keys().cloned().collect::<Vec<String>>(), want, "{key:?}");
            for (g, size) in sizes.iter().enumerate() {
                assert_eq!(csv.num(&groups[&g.to_string()], "nranks") as u64, *size);
            }
        }
    }
}

/// A bad value in one of nccl-tests' variables names the variable, its
/// value and what is allowed (not an option nobody gave), once, exit 2;
/// an alltoallv variable in a run without alltoallv is ignored, and the
/// header says so.
#[test]
fn a_bad_variable_is_named_and_an_alltoallv_one_is_ignored_when_no_alltoallv_runs() {
    let out = exits(
        2,
        mpirun_env(
            2,
            &[("NCCL_TESTS_SPLIT", "garbage")],
            &argv!["run --collectives all_reduce -e 1K"],
        ),
    );
    let line = only_line(&out);
    assert!(
        line.starts_with("collbench: NCCL_TESTS_SPLIT=garbage: 'garbage' is not a split rule: AND, OR, MOD or DIV")
            && line.ends_with("(it sets --split; fix or unset it)"),
        "{line}"
    );
    let out = exits(
        2,
        mpirun_env(2, &[("NCCL_TESTS_ALLTOALLV_SPREAD", "abc")], &argv!["run -e 1K"]),
    );
    assert_eq!(
        only_line(&out),
        "collbench: NCCL_TESTS_ALLTOALLV_SPREAD=abc: 'abc' is not a spread between 0 and 1 (it sets \
         --alltoallv-spread; fix or unset it)"
    );
    let out = ok(mpirun_env(
        2,
        &[("NCCL_TESTS_ALLTOALLV_SPREAD", "abc")],
        &argv!["run --collectives all_reduce -e 1K -n 2"],
    ));
    assert_stdout_has(
        &out,
        "\n# note      : NCCL_TESTS_ALLTOALLV_SPREAD=abc is ignored: this run measures no alltoallv\n",
    );
    assert!(our_lines(&out).is_empty(), "{}", stderr(&out));
}
