//! The real binary under the real `mpirun`: every collective, both
//! placements, every type and operation the mpi backend supports, every
//! root, at 1 rank (the degenerate job) and 3 (not a power of two, where
//! per-rank counts and roots go wrong first); every row validated and its
//! arithmetic checked. Two and four ranks run in every other module.

use std::collections::{BTreeMap, BTreeSet};

use crate::common::*;

/// Runs a full-coverage sweep at `np` ranks and checks the CSV.
fn full_sweep_is_correct_at(np: usize) {
    let (_dir, csv_path) = temp_file("sweep.csv");
    let out = mpirun(
        np,
        &argv![
            "run --backend mpi -b 8 -e 2K -f 16 -d all -o all -r all -n 2 -w 1 --csv",
            path_str(&csv_path)
        ],
    );
    assert_eq!(code(&out), 0, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let csv = Csv::read(&csv_path);
    assert_eq!(csv.header, default_header());
    assert_rows_consistent(&csv, np as u64);

    // Every collective, type, op and root, in both placements.
    let mut seen: BTreeMap<(String, String, String, String), BTreeSet<String>> = BTreeMap::new();
    for row in &csv.rows {
        let key = (
            csv.get(row, "collective").to_string(),
            csv.get(row, "dtype").to_string(),
            csv.get(row, "op").to_string(),
            csv.get(row, "root").to_string(),
        );
        seen.entry(key)
            .or_default()
            .insert(csv.get(row, "placement").to_string());
    }
    let types = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float", "double"];
    let ops = ["sum", "prod", "min", "max"];
    let mut expected = 0;
    for collective in
        argv!["all_reduce all_gather reduce_scatter broadcast reduce alltoall alltoallv gather scatter sendrecv"]
    {
        let reduces = matches!(collective, "all_reduce" | "reduce_scatter" | "reduce");
        let rooted = matches!(collective, "broadcast" | "reduce" | "gather" | "scatter");
        for t in types {
            let case_ops: Vec<&str> = if reduces { ops.to_vec() } else { vec!["none"] };
            let roots: Vec<String> = if rooted {
                (0..np).map(|r| r.to_string()).collect()
            } else {
                vec!["-1".into()]
            };
            for op in &case_ops {
                for root in &roots {
                    let key = (collective.to_string(), t.to_string(), op.to_string(), root.clone());
                    let placements = seen.get(&key).unwrap_or_else(|| panic!("missing {key:?} at np={np}"));
                    assert_eq!(placements.len(), 2, "{key:?}");
                    expected += 1;
                }
            }
        }
    }
    assert_eq!(seen.len(), expected, "unexpected extra cases at np={np}");
    for row in &csv.rows {
        assert_eq!(csv.get(row, "backend"), "mpi");
        assert_eq!(csv.get(row, "hierarchy"), "flat");
        assert_eq!(csv.get(row, "nnodes"), "1");
        assert_eq!(csv.get(row, "ranks_per_node"), np.to_string());
        assert_eq!(csv.get(row, "iters"), "2");
        assert_eq!(csv.get(row, "warmup"), "1");
    }
}

#[test]
fn every_collective_type_op_and_root_validates_at_one_rank() {
    full_sweep_is_correct_at(1);
}

#[test]
fn every_collective_type_op_and_root_validates_at_three_ranks() {
    full_sweep_is_correct_at(3);
}

#[test]
fn larger_buffers_validate_with_several_check_iterations_and_blocking_timing() {
    // one size of 2 MiB: int8 and double counts past a million elements
    // and past Open MPI's eager limit, through every collective
    let (_, csv) = mpirun_csv(3, &argv!["run -b 2M -e 2M -d int8,double -c 2 -n 3 -w 1 -z -a max"]);
    // -a max: the reported time is the slowest rank's
    for row in &csv.rows {
        assert_eq!(csv.num(row, "time_us"), csv.num(row, "time_max_us"));
    }
}

#[test]
fn rank_zero_prints_an_nccl_tests_style_table_once() {
    let (_dir, csv_path) = temp_file("t.csv");
    let out = ok(mpirun(
        2,
        &argv![
            "run --collectives all_reduce,gather -b 8 -e 64 --csv",
            path_str(&csv_path),
            "--no-progress"
        ],
    ));
    let text = stdout(&out);
    assert_eq!(text.matches("# collbench ").count(), 1, "{text}");
    assert!(text.contains("# backend   : mpi (Open MPI"), "{text}");
    assert!(text.contains("# ranks     : 2 on 1 node"), "{text}");
    assert!(text.contains("out-of-place") && text.contains("in-place"), "{text}");
    assert!(text.contains("#wrong"), "{text}");
    assert!(
        text.contains("# all_reduce (hierarchy flat)") && text.contains("# gather (hierarchy flat)"),
        "{text}"
    );
    assert!(
        text.contains("# Validation           : OK, 0 wrong elements in 12 checked points"),
        "{text}"
    );
    // one data line per size, with both placements on it: all_reduce at 8,
    // 16, 32, 64 B; gather only at 32 and 64 B (per-rank counts are cut to
    // 16 bytes, as nccl-tests does)
    let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(lines.len(), 4 + 2, "{text}");
    assert!(
        lines[0].split_whitespace().collect::<Vec<_>>()[..5] == ["8", "2", "float", "sum", "-1"],
        "{text}"
    );
    assert_eq!(lines[0].split_whitespace().count(), 13, "{text}");
    // the progress bar stays off a pipe
    assert!(!stderr(&out).contains("points"), "{}", stderr(&out));
}

#[test]
fn a_one_rank_run_says_no_data_crossed_a_link_and_what_its_busbw_is() {
    let (_dir, csv_path) = temp_file("one.csv");
    let out = ok(mpirun(
        1,
        &argv![
            "run --collectives all_reduce,broadcast -b 1K -e 4K -n 5 --csv",
            path_str(&csv_path),
            "--no-progress"
        ],
    ));
    let text = stdout(&out);
    let header = text
        .lines()
        .find(|l| l.starts_with("# one rank  :"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(header.contains("no data crosses a link"), "{header}");
    assert!(header.contains("0 where the bus factor is (n-1)/n"), "{header}");
    assert!(
        text.contains("# One rank             : no data crossed a link; the bus bandwidths above are not a link's"),
        "{text}"
    );
    // nccl-tests' footer line is still there for scripts that read it
    assert!(text.contains("# Avg bus bandwidth    : "), "{text}");
    // and the figures are what the header says: all_reduce's busbw is 0,
    // broadcast's is its algbw (a local copy)
    let csv = Csv::read(&csv_path);
    for row in &csv.rows {
        let (algbw, busbw) = (csv.num(row, "algbw_gbps"), csv.num(row, "busbw_gbps"));
        match csv.get(row, "collective") {
            "all_reduce" => assert_eq!(busbw, 0.0),
            _ => assert!((busbw - algbw).abs() <= 1e-9 * algbw.max(1.0), "{row:?}"),
        }
    }
    // more ranks: no such line
    let out = ok(mpirun(
        2,
        &argv![
            "run --collectives all_reduce -e 1K -n 2 --csv",
            path_str(&csv_path),
            "--overwrite --no-progress"
        ],
    ));
    assert!(!stdout(&out).contains("one rank"), "{}", stdout(&out));
}

#[test]
fn a_corrupted_result_is_caught_and_exits_3() {
    let (_dir, csv_path) = temp_file("bad.csv");
    let out = exits(
        3,
        mpirun(
            2,
            &argv![
                "run --collectives all_reduce,reduce -b 64 -e 64 --inject-error --csv",
                path_str(&csv_path)
            ],
        ),
    );
    let lines = our_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("validation failed"), "{lines:?}");
    assert_stdout_has(&out, "# Validation           : FAILED");
    let csv = Csv::read(&csv_path);
    assert_eq!(csv.rows.len(), 4);
    // all_reduce: one corrupted element on each of 2 ranks; reduce: only
    // the root has an output
    let wrong: Vec<&str> = csv.rows.iter().map(|r| csv.get(r, "wrong")).collect();
    assert_eq!(wrong, vec!["2", "2", "1", "1"]);
}

#[test]
fn checking_off_leaves_wrong_empty() {
    let (_dir, csv_path) = temp_file("nocheck.csv");
    let out = ok(mpirun(
        2,
        &argv!["run --collectives sendrecv -e 64 -c 0 --csv", path_str(&csv_path)],
    ));
    let csv = Csv::read(&csv_path);
    assert!(csv.rows.iter().all(|r| csv.get(r, "wrong").is_empty()));
    assert!(stdout(&out).contains("N/A"));
    assert!(stdout(&out).contains("Validation           : off"));
}
