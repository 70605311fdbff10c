//! Flat against hierarchical all-reduce under the real mpirun, on virtual
//! nodes: every mode validates on the layouts that find bugs (2 x 2; two
//! nodes of 3, whose counts the node size does not divide; an odd number
//! of nodes of one rank; one node; one rank), rows carry the layout, and
//! busbw uses all ranks.

use std::collections::BTreeSet;

use crate::common::*;

fn modes_validate_on(np: usize, per_node: usize) {
    let (_dir, csv_path) = temp_file("h.csv");
    let per_node_text = per_node.to_string();
    let out = mpirun(
        np,
        &[
            "run",
            "--collectives",
            "all_reduce",
            "--hierarchy",
            "all",
            "--ranks-per-node",
            &per_node_text,
            "--phase-times",
            // 4 B .. 1372 B: 1, 7, 49 and 343 elements of int32/float
            "-b",
            "4",
            "-e",
            "1372",
            "-f",
            "7",
            "-d",
            "int32,float,double",
            "-o",
            "sum,max",
            "-n",
            "3",
            "-w",
            "1",
            "--csv",
            path_str(&csv_path),
        ],
    );
    assert_eq!(
        code(&out),
        0,
        "np={np} k={per_node}\n{}\n{}",
        stdout(&out),
        stderr(&out)
    );
    let csv = Csv::read(&csv_path);
    assert_rows_consistent(&csv, np as u64);
    let modes: BTreeSet<&str> = csv.rows.iter().map(|r| csv.get(r, "hierarchy")).collect();
    assert_eq!(modes, BTreeSet::from(["flat", "reduce-bcast", "rs-ar-ag"]));
    let counts: BTreeSet<u64> = csv.rows.iter().map(|r| csv.num(r, "count") as u64).collect();
    assert!(
        counts.iter().any(|c| c % per_node as u64 != 0) || per_node == 1,
        "{counts:?}"
    );
    for row in &csv.rows {
        assert_eq!(csv.num(row, "nnodes") as usize, np / per_node, "{row:?}");
        assert_eq!(csv.num(row, "ranks_per_node") as usize, per_node, "{row:?}");
        let phases: Vec<&str> = ["phase_intra1_us", "phase_inter_us", "phase_intra2_us"]
            .iter()
            .map(|c| csv.get(row, c))
            .collect();
        if csv.get(row, "hierarchy") == "flat" {
            assert_eq!(phases, ["", "", ""], "{row:?}");
        } else {
            let p: Vec<f64> = phases.iter().map(|v| v.parse().unwrap()).collect();
            assert!(p.iter().all(|&t| t >= 0.0), "{row:?}");
            // the phases are timed inside each timed operation
            assert!(
                p.iter().sum::<f64>() <= csv.num(row, "time_us") * (1.0 + 1e-9),
                "{row:?}"
            );
        }
    }
    // every (mode, type, op, size) in both placements
    let per_mode = csv.rows.iter().filter(|r| csv.get(r, "hierarchy") == "flat").count();
    for mode in ["rs-ar-ag", "reduce-bcast"] {
        assert_eq!(
            csv.rows.iter().filter(|r| csv.get(r, "hierarchy") == mode).count(),
            per_mode
        );
    }
    // int32 and float: 1, 7, 49, 343 elements; double: 3, 24, 171 (4 B holds none)
    assert_eq!(per_mode, (4 + 4 + 3) * 2 * 2);
    // the run ends with the side-by-side view, every line a comment
    let text = stdout(&out);
    let view = text
        .split("collbench compare --by hierarchy")
        .nth(1)
        .expect("no comparison view");
    assert!(
        view.contains("rs-ar-ag") && view.contains("speedup") && view.contains("winner"),
        "{view}"
    );
    // one sample per point: no speedup or crossover is claimed, and the
    // view says what would make one
    assert!(!view.contains("crossover at") && !view.contains('*'), "{view}");
    assert!(
        view.contains("# note: one sample per point") && view.contains("--repeat 5"),
        "{view}"
    );
    assert!(
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .all(|l| l.split_whitespace().count() == 13 || l.is_empty())
    );
}

#[test]
fn hierarchical_modes_validate_on_two_nodes_of_two() {
    modes_validate_on(4, 2);
}

#[test]
fn hierarchical_modes_validate_on_two_nodes_of_three() {
    modes_validate_on(6, 3);
}

#[test]
fn hierarchical_modes_validate_on_three_nodes_of_one_rank() {
    modes_validate_on(3, 1);
}

#[test]
fn hierarchical_modes_validate_on_one_node_of_three() {
    modes_validate_on(3, 3);
}

#[test]
fn hierarchical_modes_validate_at_one_rank() {
    modes_validate_on(1, 1);
}
