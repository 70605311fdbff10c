//! `collbench links` as users run it: the real binary under real `mpirun`
//! at 3 ranks and as threads on the memory backend at 4 (the circle
//! method's rounds, odd and even, every pair once, what was received
//! checked); the levels and `--isolated`, a corrupted receive and bad
//! input, which are the matrix's and not MPI's, on the memory backend; the
//! NCCL path on the GPU simulation with one slow pair and one slow rank;
//! and 4 fake nodes with a real slow node (CPU quota) and a real slow link
//! (HTB on lo), each named by `--find`.
// The helpers serve the MPI tests, which builds without MPI leave out.
#![cfg_attr(not(feature = "mpi"), allow(dead_code, unused_imports))]

use std::collections::BTreeSet;
use std::path::Path;

use crate::common::*;

/// The pairs CSV's (round, rank_a, rank_b) rows.
fn pairs_of(csv: &Csv) -> Vec<(usize, usize, usize)> {
    csv.rows
        .iter()
        .map(|r| {
            (
                csv.get(r, "round").parse().unwrap(),
                csv.get(r, "rank_a").parse().unwrap(),
                csv.get(r, "rank_b").parse().unwrap(),
            )
        })
        .collect()
}

/// Every row of the matrix: measured, positive, validated.
fn assert_rows_measured(csv: &Csv, size: &str) {
    for r in &csv.rows {
        assert_eq!(csv.get(r, "phase"), "matrix", "{r:?}");
        assert_eq!(csv.get(r, "size_bytes"), size, "{r:?}");
        assert_eq!(csv.get(r, "wrong"), "0", "{r:?}");
        for col in ["uni_gbps", "bidi_gbps", "latency_us"] {
            let v = csv.num(r, col);
            assert!(v.is_finite() && v > 0.0, "{col} = {v}: {r:?}");
        }
    }
}

/// The matrix's rounds: every pair of `n` ranks exactly once, no rank
/// twice in a round, and `rounds` rounds.
fn assert_circle(pairs: &[(usize, usize, usize)], n: usize, rounds: usize) {
    let all: BTreeSet<(usize, usize)> = pairs.iter().map(|&(_, a, b)| (a, b)).collect();
    assert_eq!(all.len(), pairs.len(), "a pair measured twice: {pairs:?}");
    assert_eq!(all.len(), n * (n - 1) / 2, "{pairs:?}");
    assert!(all.iter().all(|&(a, b)| a < b && b < n));
    let numbers: BTreeSet<usize> = pairs.iter().map(|p| p.0).collect();
    assert_eq!(numbers, (1..=rounds).collect(), "{pairs:?}");
    for round in numbers {
        let ranks: Vec<usize> = pairs.iter().filter(|p| p.0 == round).flat_map(|p| [p.1, p.2]).collect();
        let unique: BTreeSet<usize> = ranks.iter().copied().collect();
        assert_eq!(unique.len(), ranks.len(), "round {round}: {pairs:?}");
    }
}

fn json_of(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The finder's findings in a JSON report: (kind, hosts).
fn findings(doc: &serde_json::Value) -> Vec<(String, Vec<String>)> {
    finding_ranks(doc).into_iter().map(|(k, h, _)| (k, h)).collect()
}

/// The finder's findings in a JSON report: (kind, hosts, ranks).
fn finding_ranks(doc: &serde_json::Value) -> Vec<(String, Vec<String>, Vec<u64>)> {
    doc["report"]["findings"]
        .as_array()
        .unwrap_or_else(|| panic!("no report: {doc}"))
        .iter()
        .map(|f| {
            (
                f["kind"].as_str().unwrap().to_string(),
                f["hosts"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|h| h.as_str().unwrap().to_string())
                    .collect(),
                f["endpoints"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|e| e["rank"].as_u64().unwrap())
                    .collect(),
            )
        })
        .collect()
}

const SMALL: [&str; 8] = ["--size", "64K", "-n", "2", "-w", "1", "--samples", "3"];

/// `collbench links ARGS` at `n` ranks: under mpirun on the mpi backend
/// (`mpi`), or as threads on the memory backend.
fn links(n: usize, mpi: bool, args: &[&str]) -> std::process::Output {
    let mut all = vec!["links"];
    all.extend(args);
    if mpi {
        all.extend(["--backend", "mpi"]);
        mpirun(n, &all)
    } else {
        on_memory(n, &all)
    }
}

#[cfg(feature = "mpi")]
#[test]
fn every_pair_is_measured_once_in_circle_rounds_at_3_ranks_under_mpirun_and_4_as_threads() {
    let dir = tempdir();
    for (n, mpi) in [(3usize, true), (4, false)] {
        let csv_path = dir.path().join(format!("p{n}.csv"));
        let json_path = dir.path().join(format!("p{n}.json"));
        let mut args = vec!["--ranks-per-node", "1"];
        args.extend(SMALL);
        args.extend(["--csv", path_str(&csv_path), "--json", path_str(&json_path)]);
        let out = links(n, mpi, &args);
        assert_eq!(code(&out), 0, "{n} ranks: {}", stderr(&out));
        let text = stdout(&out);
        // n - 1 rounds of n / 2 pairs; n rounds when n is odd
        let rounds = if n % 2 == 0 { n - 1 } else { n };
        let plural = |k: usize, what: &str| format!("{k} {what}{}", if k == 1 { "" } else { "s" });
        let says = format!("{} in {}", plural(n * (n - 1) / 2, "pair"), plural(rounds, "round"));
        assert!(text.contains(&says), "{says}: {text}");
        assert!(
            text.contains("unidirectional bandwidth (GB/s), median of 3 samples"),
            "{text}"
        );
        let csv = Csv::read(&csv_path);
        assert_rows_measured(&csv, "65536");
        assert_circle(&pairs_of(&csv), n, rounds);
        for r in &csv.rows {
            let backend = if mpi { "mpi" } else { "memory" };
            assert_eq!((csv.get(r, "backend"), csv.get(r, "samples")), (backend, "3"));
            assert_eq!(csv.get(r, "concurrent"), (n / 2).to_string(), "{r:?}");
        }
        let doc = json_of(&json_path);
        assert_eq!(doc["kind"], "links");
        assert_eq!(doc["pairs"].as_array().unwrap().len(), csv.rows.len());
    }
}

#[test]
fn isolated_rank_and_rail_levels_pair_what_they_say() {
    let dir = tempdir();
    let run = |name: &str, extra: &[&str]| {
        let csv_path = dir.path().join(format!("{name}.csv"));
        let mut args = vec!["--ranks-per-node", "2"];
        args.extend(SMALL);
        args.extend(extra);
        args.extend(["--csv", path_str(&csv_path)]);
        let out = links(4, false, &args);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        Csv::read(&csv_path)
    };
    // one pair at a time: 6 rounds of one
    let csv = run("isolated", &["--level", "rank", "--isolated"]);
    assert_rows_measured(&csv, "65536");
    assert_circle(&pairs_of(&csv), 4, 6);
    assert!(csv.rows.iter().all(|r| csv.get(r, "concurrent") == "1"));
    // every rank pair, the two on one virtual node intra-host
    let csv = run("rank", &["--level", "rank"]);
    assert_circle(&pairs_of(&csv), 4, 3);
    for r in &csv.rows {
        let same = csv.get(r, "host_a") == csv.get(r, "host_b");
        assert_eq!(csv.get(r, "class") == "intra-host", same, "{r:?}");
    }
    // rails: local 0 with local 0, local 1 with local 1, side by side
    let csv = run("rail", &["--level", "rail"]);
    let rails: BTreeSet<(usize, usize, String)> = csv
        .rows
        .iter()
        .map(|r| {
            (
                csv.get(r, "rank_a").parse().unwrap(),
                csv.get(r, "rank_b").parse().unwrap(),
                csv.get(r, "rail").to_string(),
            )
        })
        .collect();
    assert_eq!(rails, [(0, 2, "0".into()), (1, 3, "1".into())].into_iter().collect());
    // the node level takes one rank per node
    let csv = run("node", &[]);
    assert_eq!(pairs_of(&csv), [(1, 0, 2)]);
}

#[test]
fn a_corrupted_receive_is_counted_and_the_job_exits_3() {
    let (_dir, csv_path) = temp_file("bad.csv");
    let mut args = vec!["--ranks-per-node", "1", "--inject-error"];
    args.extend(SMALL);
    args.extend(["--csv", path_str(&csv_path)]);
    let out = exits(3, links(2, false, &args));
    let csv = Csv::read(&csv_path);
    assert_eq!(csv.rows.len(), 1);
    assert!(csv.num(&csv.rows[0], "wrong") >= 2.0, "{:?}", csv.rows[0]);
    let lines = our_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("validation"), "{lines:?}");
}

#[test]
fn what_a_launch_cannot_serve_is_one_line_and_exit_2() {
    let (dir, topo) = temp_file("topo");
    std::fs::write(&topo, "somewhere-else leaf1\n").unwrap();
    // the launch's ranks and nodes decide; the ranks are threads here
    let cases: Vec<(usize, Vec<&str>, &str)> = vec![
        (1, vec![], "this launch has 1: launch 2 ranks or more"),
        (
            2,
            vec![],
            "--level node pairs ranks on different nodes, and this launch has one node",
        ),
        (
            3,
            vec!["--ranks-per-node", "2", "--level", "rail"],
            "--ranks-per-node 2 does not divide the 3 ranks of this job",
        ),
        (
            2,
            vec!["--ranks-per-node", "1", "--topology", path_str(&topo)],
            "names 1 host this launch does not have: somewhere-else",
        ),
        (2, vec!["--size", "1001"], "--size 1001: links moves 4-byte elements"),
        (
            2,
            vec!["--collectives", "all_reduce"],
            "--collectives is an option of `collbench run`",
        ),
    ];
    for (n, mut args, want) in cases {
        let csv_path = dir.path().join("never.csv");
        args.extend(["--csv", path_str(&csv_path)]);
        let out = links(n, false, &args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let lines = our_lines(&out);
        assert_eq!(lines.len(), 1, "{args:?}: {lines:?}");
        assert!(lines[0].contains(want), "{args:?}: {lines:?}");
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
        assert!(!csv_path.exists(), "{args:?} left a CSV");
    }
}

/// NCCL's grouped sends and receives on 4 simulated GPUs (one process, a
/// thread per rank, 4 virtual nodes): a per-pair delay in the simulation
/// is named as that link, a per-rank delay as that node.
#[cfg(feature = "nccl")]
#[test]
fn on_simulated_gpus_a_slow_pair_and_a_slow_rank_are_named() {
    let Some(sim) = crate::gpu_sim::sim_dir() else {
        return;
    };
    let dir = tempdir();
    let run = |name: &str, fault: (&str, &str)| {
        let json_path = dir.path().join(format!("{name}.json"));
        let csv_path = dir.path().join(format!("{name}.csv"));
        let mut cmd = std::process::Command::new(BIN);
        cmd.args(argv!["links --backend nccl -g 4 --ranks-per-node 1 --find"])
            .args(["--size", "1M", "-n", "3", "--samples", "6"])
            .args(["--csv", path_str(&csv_path), "--json", path_str(&json_path)])
            .env_remove("NCCL_HOME")
            .env_remove("OMPI_COMM_WORLD_RANK")
            .env("NO_COLOR", "1")
            .env(fault.0, fault.1);
        for (k, v) in crate::gpu_sim::sim_env(&sim, 4) {
            cmd.env(k, v);
        }
        let out = output_of(cmd);
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert!(
            stdout(&out).contains("-sim)"),
            "the run must say it is simulated: {}",
            stdout(&out)
        );
        let csv = Csv::read(&csv_path);
        assert!(csv.rows.iter().all(|r| csv.get(r, "wrong") == "0"));
        let found: Vec<(String, Vec<u64>)> = finding_ranks(&json_of(&json_path))
            .into_iter()
            .map(|(k, _, r)| (k, r))
            .collect();
        (found, stdout(&out))
    };
    let (f, text) = run("pair", ("GPUSIM_DELAY_PAIR", "1-2:3000"));
    assert_eq!(f, [("link".to_string(), vec![1, 2])], "{text}");
    let (f, text) = run("rank", ("GPUSIM_DELAY_RANK", "3:3000"));
    assert_eq!(f, [("node".to_string(), vec![3])], "{text}");
}

/// 4 fake nodes (scripts/fake-nodes.sh): a real rate limit between two of
/// them (HTB on lo, 100mbit against loopback's GB/s) is named as that
/// link; a real CPU quota on one runs to its end with the finder's report.
/// How often the finder names the quota, and how often it names a healthy
/// node beside a fault on a busy machine (a latency 48% worse, re-tested
/// slow, at load 11 here), are rates that scripts/bench/links-faults.sh
/// measures, not verdicts a test can hold; one try each here (the cluster
/// tier runs it alone, .config/nextest.toml).
#[cfg(feature = "mpi")]
#[test]
fn on_four_fake_nodes_a_throttled_link_and_a_throttled_node_are_named() {
    use crate::fake_nodes::{Faults, available, mpirun as fake_mpirun};
    if !available() {
        return;
    }
    // 20 operations a sample: a CPU quota throttles in bursts (5 ms of
    // each 100 ms), which a few short operations can slip between.
    // Nodes of their own: a link fault on lo matches a node's address
    // whichever test runs on it, and other tests use cbnode1 to cbnode8
    let setup = std::process::Command::new(crate::fake_nodes::SCRIPT)
        .args(["setup", "12"])
        .output()
        .unwrap();
    assert!(setup.status.success(), "{}", String::from_utf8_lossy(&setup.stderr));
    let dir = tempdir();
    let hosts = "cbnode9,cbnode10,cbnode11,cbnode12";
    let run = |name: &str, faults: Faults| {
        let json_path = dir.path().join(format!("{name}.json"));
        let csv_path = dir.path().join(format!("{name}.csv"));
        let out = fake_mpirun(
            hosts,
            &faults,
            &argv![
                "links --backend mpi --find --size 256K -n 20 --samples 10 --csv",
                path_str(&csv_path),
                "--json",
                path_str(&json_path)
            ],
        );
        assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
        assert_stdout_has(&out, "4 on 4 nodes (1 per node)");
        (findings(&json_of(&json_path)), stdout(&out))
    };
    // The rate-limited link is among the findings, as that link; a
    // finding beside it is noise this test cannot rule on (printed).
    let link = Faults {
        slow_link: Some(("cbnode10-cbnode12", "100mbit")),
        ..Faults::default()
    };
    let (f, text) = run("link", link);
    let want = ("link".to_string(), vec!["cbnode10".to_string(), "cbnode12".to_string()]);
    assert!(f.contains(&want), "{text}");
    if f.len() > 1 {
        eprintln!("note: link: {} findings beside the fault:\n{text}", f.len() - 1);
    }
    // A CPU-starved node, named as a node or by the all-reduce bisection,
    // where it is named (its rate: scripts/bench/links-faults.sh).
    let node = Faults {
        slow_node: Some(("cbnode11", 5)),
        ..Faults::default()
    };
    let (f, text) = run("node", node);
    let named = f
        .iter()
        .any(|(kind, hosts)| matches!(kind.as_str(), "node" | "collective") && hosts == &["cbnode11".to_string()]);
    eprintln!(
        "note: node: the quota {} named; findings {f:?}\n{text}",
        if named { "was" } else { "was not" }
    );
}

/// The heatmap is written whole or not at all: a PNG of the matrix where
/// it fits, and where the file cannot take it (a file-size limit, as a
/// full disk) exit 1 with one line and no file, not half a picture.
#[test]
fn a_heatmap_is_written_whole_or_not_at_all() {
    let dir = tempdir();
    let png = dir.path().join("h.png");
    let args = ["--level", "rank", "--heatmap", path_str(&png), "--csv"];
    let csv = dir.path().join("p.csv");
    let out = links(4, false, &[&args[..], &[path_str(&csv)], &SMALL[..]].concat());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let bytes = std::fs::read(&png).unwrap();
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 8 * 1024,
        "{} bytes",
        bytes.len()
    );
    std::fs::remove_file(&png).unwrap();
    std::fs::remove_file(&csv).unwrap();
    // 16 blocks of 512 bytes: the CSV fits, the picture does not
    let run = std::process::Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 16; exec \"$0\" links \"$@\"", BIN])
        .args(["--backend", "memory", "-g", "4"])
        .args(args)
        .arg(path_str(&csv))
        .args(SMALL)
        .output()
        .unwrap();
    assert_eq!(code(&run), 1, "{}", stderr(&run));
    assert_eq!(
        stderr(&run).lines().last().unwrap(),
        format!(
            "collbench: cannot write the heatmap {}: File too large (os error 27)",
            png.display()
        )
    );
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left, ["p.csv"], "no heatmap file, whole or partial");
}

/// Two outputs on one file, however spelt, are refused before anything is
/// measured (with --overwrite the JSON replaced the pairs CSV).
#[test]
fn two_outputs_on_one_file_are_refused_up_front() {
    let dir = tempdir();
    let x = dir.path().join("o.x");
    let same = dir.path().join("./o.x");
    let svg = dir.path().join("o.svg");
    for (args, needle) in [
        (
            vec!["--csv", path_str(&x), "--json", path_str(&same), "--overwrite"],
            format!("--json {} is also --csv's file", same.display()),
        ),
        (
            vec!["--json", path_str(&svg), "--heatmap", path_str(&svg)],
            format!("--heatmap {} is also --json's file", svg.display()),
        ),
    ] {
        let out = links(2, false, &[&["--level", "rank"][..], &args, &SMALL[..]].concat());
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(only_line(&out).contains(&needle), "{}", stderr(&out));
        assert!(
            std::fs::read_dir(dir.path()).unwrap().next().is_none(),
            "nothing written"
        );
    }
}
