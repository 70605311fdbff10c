//! Multi-node launches on this one machine (scripts/fake-nodes.sh): real
//! Open MPI jobs with one daemon per fake node, each node with its own
//! hostname and address, so that node detection, the hierarchy modes,
//! placement and topology run as on a cluster, without `--ranks-per-node`;
//! a node whose ranks are killed; the two faults (a slow node, a slow
//! link) applied to one node and undone.
//!
//! The helpers here (`mpirun`, `on`, `Faults`) are what other modules use
//! to put ranks on fake nodes. The tests need root (hostnames, cgroups,
//! tc): elsewhere they are skipped with a note, unless
//! COLLBENCH_REQUIRE_FAKE_NODES=1 (scripts/test.sh as root), where they
//! fail.
// Helpers for other modules, which builds without MPI use in part.
#![allow(dead_code)]

use std::process::{Command, Output};
use std::sync::OnceLock;
#[cfg(feature = "mpi")]
use std::time::Duration;

use crate::common::*;

pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/fake-nodes.sh");

/// Whether fake nodes work here: root, and `fake-nodes.sh setup` (host
/// names cbnode1..8, the shim) succeeded once.
pub fn available() -> bool {
    static READY: OnceLock<Result<(), String>> = OnceLock::new();
    let ready = READY.get_or_init(|| {
        if !is_root() {
            return Err("not root".into());
        }
        let out = Command::new(SCRIPT)
            .args(["setup", "8"])
            .output()
            .map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    match ready {
        Ok(()) => true,
        Err(why) if std::env::var("COLLBENCH_REQUIRE_FAKE_NODES").is_ok_and(|v| v == "1") => {
            panic!("COLLBENCH_REQUIRE_FAKE_NODES=1 but fake nodes cannot run here: {why}")
        }
        Err(why) => {
            eprintln!("note: fake nodes unavailable ({why}); test skipped");
            false
        }
    }
}

/// The faults of a fake-node run (`fake-nodes.sh --slow-node/--slow-link`).
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// A node whose processes share this percentage of one CPU.
    pub slow_node: Option<(&'static str, u32)>,
    /// A node (or `a-b`, a pair) whose traffic goes at this tc rate.
    pub slow_link: Option<(&'static str, &'static str)>,
}

impl Faults {
    pub fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some((node, pct)) = self.slow_node {
            args.extend(["--slow-node".to_string(), format!("{node}={pct}")]);
        }
        if let Some((node, rate)) = self.slow_link {
            args.extend(["--slow-link".to_string(), format!("{node}={rate}")]);
        }
        args
    }
}

/// `fake-nodes.sh [faults] mpirun HOSTS -- PROGRAM ARGS`, not yet started:
/// Open MPI with one daemon per node of `hosts` (`cbnode1:2,cbnode2:2`).
pub fn mpirun_command(hosts: &str, faults: &Faults, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(SCRIPT);
    cmd.args(faults.args())
        .args(["mpirun", hosts, "--"])
        .arg(program)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("COLLBENCH_NCCL_LIB")
        .env_remove("NCCL_HOME");
    cmd
}

/// `collbench ARGS` under `mpirun_command`, to its end.
pub fn mpirun(hosts: &str, faults: &Faults, args: &[&str]) -> Output {
    output_of(mpirun_command(hosts, faults, BIN, args))
}

/// `PROGRAM ARGS` as a process of `node` (its hostname and address):
/// `fake-nodes.sh on NODE -- PROGRAM ARGS`.
pub fn on(node: &str, program: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(SCRIPT);
    cmd.args(["on", node, "--", program]).args(args).env("NO_COLOR", "1");
    cmd
}

/// The hosts of the ranks, from a run's JSON report, in rank order.
fn rank_hosts(json: &std::path::Path) -> Vec<String> {
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(json).unwrap()).unwrap();
    doc["run"]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["host"].as_str().unwrap().to_string())
        .collect()
}

#[cfg(feature = "mpi")]
#[test]
fn two_fake_nodes_of_two_ranks_are_found_by_hostname_in_every_hierarchy_mode() {
    if !available() {
        return;
    }
    let dir = tempdir();
    let (csv_path, json_path) = (dir.path().join("2x2.csv"), dir.path().join("2x2.json"));
    let out = ok(mpirun(
        "cbnode1:2,cbnode2:2",
        &Faults::default(),
        &argv![
            "run --collectives all_reduce,all_gather,sendrecv --hierarchy all -e 64K -f 8 -n 3 --no-progress --csv",
            path_str(&csv_path),
            "--json",
            path_str(&json_path)
        ],
    ));
    let text = stdout(&out);
    assert!(
        text.contains("# ranks     : 4 on 2 nodes (2 per node), hosts: cbnode1, cbnode2"),
        "{text}"
    );
    assert!(text.contains("launcher mpirun"), "{text}");
    assert_eq!(rank_hosts(&json_path), ["cbnode1", "cbnode1", "cbnode2", "cbnode2"]);
    let csv = Csv::read(&csv_path);
    assert_rows_consistent(&csv, 4);
    for row in &csv.rows {
        assert_eq!(
            (csv.get(row, "nnodes"), csv.get(row, "ranks_per_node")),
            ("2", "2"),
            "{row:?}"
        );
    }
    let modes: std::collections::BTreeSet<&str> = csv.rows.iter().map(|r| csv.get(r, "hierarchy")).collect();
    assert_eq!(modes, ["flat", "reduce-bcast", "rs-ar-ag"].into_iter().collect());
}

#[cfg(feature = "mpi")]
#[test]
fn four_fake_nodes_of_one_rank_run_the_hierarchical_modes_across_nodes() {
    if !available() {
        return;
    }
    let (_dir, csv_path) = temp_file("4x1.csv");
    let out = ok(mpirun(
        "cbnode1,cbnode2,cbnode3,cbnode4",
        &Faults::default(),
        &argv![
            "run --collectives all_reduce --hierarchy all -e 4K -f 8 -n 3 --no-progress --csv",
            path_str(&csv_path)
        ],
    ));
    assert_stdout_has(
        &out,
        "4 on 4 nodes (1 per node), hosts: cbnode1, cbnode2, cbnode3, cbnode4",
    );
    let csv = Csv::read(&csv_path);
    assert_rows_consistent(&csv, 4);
    assert!(
        csv.rows
            .iter()
            .all(|r| csv.get(r, "nnodes") == "4" && csv.get(r, "ranks_per_node") == "1")
    );
    assert_eq!(
        csv.rows.iter().filter(|r| csv.get(r, "hierarchy") != "flat").count(),
        2 * csv.rows.len() / 3
    );
}

#[cfg(feature = "mpi")]
#[test]
fn each_fake_node_reports_its_own_topology() {
    if !available() {
        return;
    }
    let out = output_of(mpirun_command(
        "cbnode3:1,cbnode4:1",
        &Faults::default(),
        BIN,
        &["topo"],
    ));
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for node in ["cbnode3", "cbnode4"] {
        assert_eq!(
            text.matches(&format!("# collbench topo: {node}\n")).count(),
            1,
            "{text}"
        );
    }
}

#[cfg(feature = "mpi")]
#[test]
fn a_node_whose_ranks_are_killed_ends_the_job_naming_the_host_and_keeps_every_row() {
    if !available() {
        return;
    }
    let dir = tempdir();
    let (csv_path, json_path) = (dir.path().join("killed.csv"), dir.path().join("killed.json"));
    let job = spawn_job(mpirun_command(
        "cbnode1:2,cbnode2:2",
        &Faults::default(),
        BIN,
        &argv![
            "run -e 64K --cycles 0 --no-progress --csv",
            path_str(&csv_path),
            "--json",
            path_str(&json_path)
        ],
    ));
    let pids = job.rank_pids(4, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    // cbnode2 holds ranks 2 and 3
    signal(pids[2], "KILL");
    signal(pids[3], "KILL");
    let (status, lines) = job.finish_with_stderr(Duration::from_secs(120));
    assert_ne!(status, 0);
    assert!(
        lines.iter().any(|l| l.contains("cbnode2")),
        "no line names the node: {lines:?}"
    );
    let text = std::fs::read_to_string(&csv_path).unwrap();
    assert!(text.ends_with('\n'), "a row was cut");
    let csv = Csv::read(&csv_path);
    assert!(!csv.rows.is_empty());
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["records"].as_array().unwrap().len(), csv.rows.len());
}

/// The faults land on one node's processes and traffic, and are gone
/// afterwards: rank 0 on cbnode5 reads its cgroup and the slow class's
/// counters after measuring; the script removes both at the end.
#[cfg(feature = "mpi")]
#[test]
fn a_slow_node_and_a_slow_link_hold_one_nodes_processes_and_traffic_and_are_undone() {
    if !available() {
        return;
    }
    let faults = Faults {
        slow_node: Some(("cbnode5", 50)),
        slow_link: Some(("cbnode6", "200mbit")),
    };
    let (_dir, csv) = temp_file("slow.csv");
    let script = format!(
        "{BIN} run --backend mpi --collectives sendrecv -b 64K -e 64K -n 20 -w 1 --no-progress --csv {} \
         >/dev/null && echo \"$(hostname) cgroup=$(grep -o 'collbench-fake-[0-9]*/[a-z0-9]*' /proc/self/cgroup)\" \
         && if [ \"$OMPI_COMM_WORLD_RANK\" = 0 ]; then tc -s class show dev lo; fi",
        path_str(&csv)
    );
    let out = output_of(mpirun_command("cbnode5:1,cbnode6:1", &faults, "sh", &["-c", &script]));
    let (text, err) = (stdout(&out), stderr(&out));
    assert_eq!(code(&out), 0, "{err}");
    assert!(text.contains("cbnode5 cgroup=collbench-fake-"), "{text}");
    assert!(text.contains("cbnode6 cgroup=\n"), "cbnode6 is not slow: {text}");
    // the slow class (cb0:10) carried the ranks' traffic: 20 timed and 6
    // other sendrecvs of 64 KiB each way
    let sent: u64 = text
        .split("class htb cb0:10 ")
        .nth(1)
        .and_then(|rest| rest.split("Sent ").nth(1))
        .and_then(|s| s.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no counters of the slow class: {text}"));
    assert!(sent >= 2 * 20 * 65536, "{sent} bytes through the slow class: {text}");
    // undone
    let cgroup = err
        .lines()
        .find_map(|l| l.split('(').nth(1).and_then(|p| p.strip_suffix(')')))
        .unwrap_or_else(|| panic!("no cgroup named: {err}"));
    assert!(!std::path::Path::new(cgroup).exists(), "{cgroup} is left");
    let qdiscs = Command::new("tc")
        .args(["qdisc", "show", "dev", "lo"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&qdiscs.stdout).contains("cb0:"),
        "the qdisc is left"
    );
}
