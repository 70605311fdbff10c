//! `collbench check` (docs/check.md) with the real binary under real
//! `mpirun`: the shipped `local-cpu` profile at 2 and 3 ranks writes every
//! file and judges every check (whether a healthy machine passes is a
//! calibrated threshold that a loaded machine can break: the figure is
//! scripts/bench/check-local-cpu.sh's, false failures over N runs), fails
//! with the node named when TCP is forced inside a node, and, across fake
//! nodes, with the node or the link named under a CPU quota and a
//! rate-limited link; the Prometheus file read by a real parser (Debian's
//! python3-prometheus-client); the `--on-fail` hook, printed and run; bad
//! profiles refused in one line naming the file and line.
// Without MPI only the helpers build.
#![cfg_attr(not(feature = "mpi"), allow(dead_code, unused_imports))]

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common::*;
#[cfg(feature = "mpi")]
use crate::fake_nodes;

fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn show(out: &Output) -> String {
    format!("exit {}\n{}\n{}", code(out), stdout(out), stderr(out))
}

/// The node's verdict file of a run's folder.
fn node_file(dir: &Path, host: &str) -> Value {
    json(&dir.join(format!("{host}.json")))
}

/// The hosts of a run, from its check.json, in launch order.
fn hosts(dir: &Path) -> Vec<String> {
    json(&dir.join("check.json"))["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["host"].as_str().unwrap().to_string())
        .collect()
}

/// Reads a Prometheus text file with the prometheus_client parser:
/// (name, labels as `k=v,...` sorted, value) per sample. `None` where no
/// parser is installed (scripts/test.sh installs it as root).
fn parse_prometheus(path: &Path) -> Option<Vec<(String, String, f64)>> {
    let script = r#"import sys
from prometheus_client.parser import text_string_to_metric_families
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    assert f.type == 'gauge', f.type
    for s in f.samples:
        print(s.name, ','.join(k + '=' + v for k, v in sorted(s.labels.items())), repr(s.value), sep='\t')
"#;
    let candidates = std::env::var("COLLBENCH_PROM_PYTHON")
        .map(|p| vec![p])
        .unwrap_or_else(|_| vec!["python3".into(), "/usr/bin/python3".into()]);
    for py in candidates {
        let has = Command::new(&py)
            .args(["-c", "import prometheus_client.parser"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !has {
            continue;
        }
        let out = Command::new(&py).args(["-c", script]).arg(path).output().unwrap();
        assert!(
            out.status.success(),
            "the Prometheus parser refuses {}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        let rows = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f[0].to_string(), f[1].to_string(), f[2].parse().unwrap())
            })
            .collect();
        return Some(rows);
    }
    if std::env::var("COLLBENCH_REQUIRE_PROM_PARSER").is_ok_and(|v| v == "1") {
        panic!("COLLBENCH_REQUIRE_PROM_PARSER=1 but no python3 has prometheus_client");
    }
    eprintln!("note: prometheus_client not installed; the parser's check skipped");
    None
}

/// What a healthy machine's verdict may be: pass, or, where other jobs
/// load it, flaky or a failed threshold (exit 6); never a usage or runtime
/// error. The verdict itself is scripts/bench/check-local-cpu.sh's figure.
fn judged(out: &Output) -> bool {
    let text = stdout(out);
    match code(out) {
        0 => text.contains("# verdict: PASS"),
        6 => text.contains("# verdict: FAIL") || text.contains("# verdict: FLAKY"),
        _ => false,
    }
}

#[cfg(feature = "mpi")]
#[test]
fn local_cpu_at_2_ranks_writes_every_file_and_at_3_ranks_judges_its_job_check() {
    let (dir, out_dir) = temp_file("ok");
    let out = mpirun(2, &["check", "--profile", "local-cpu", "--out", path_str(&out_dir)]);
    assert!(judged(&out), "{}", show(&out));
    let text = stdout(&out);
    assert!(
        text.contains("# source of node-all-reduce-4k: measured on the CI machine class"),
        "{text}"
    );
    let host = &hosts(&out_dir)[0];
    let node = node_file(&out_dir, host);
    assert_eq!(node["schema"], "collbench-check-node/1");
    if code(&out) == 0 {
        assert_eq!(node["status"], "pass", "{node}");
        assert_eq!(node["failed"], serde_json::json!([]));
    }
    assert_eq!(node["ranks"], serde_json::json!([0, 1]));
    let checks = node["checks"].as_array().unwrap();
    let node_check = checks.iter().find(|c| c["check"] == "node-all-reduce-4k").unwrap();
    assert_eq!(node_check["samples"], 10);
    assert_eq!(node_check["wrong"], 0);
    let pair = checks.iter().find(|c| c["check"] == "pair-all-reduce-1m").unwrap();
    assert_eq!(pair["status"], "skipped", "one node has no pair");
    let samples = std::fs::read_to_string(out_dir.join("samples.jsonl")).unwrap();
    // 10 samples of the node check (1 node) and 15 of the job check
    assert_eq!(samples.lines().count(), 25, "{samples}");
    for line in samples.lines() {
        let s: Value = serde_json::from_str(line).unwrap();
        assert!(s["value"].as_f64().unwrap() > 0.0 && s["time"].is_string(), "{line}");
    }
    if let Some(rows) = parse_prometheus(&out_dir.join(format!("{host}.prom"))) {
        let result: Vec<_> = rows.iter().filter(|r| r.0 == "collbench_check_result").collect();
        assert_eq!(
            result.len(),
            2,
            "node and job checks; the skipped pair has no series: {rows:?}"
        );
        if code(&out) == 0 {
            assert!(result.iter().all(|r| r.2 == 0.0), "{rows:?}");
        }
    }

    let three = dir.path().join("three");
    let out = mpirun(
        3,
        &argv![
            "check --profile local-cpu --only job-all-reduce-64k --out",
            path_str(&three)
        ],
    );
    assert!(judged(&out), "{}", show(&out));
    let launch = json(&three.join("check.json"));
    let v = &launch["verdicts"][0];
    assert_eq!(v["ranks"], serde_json::json!([0, 1, 2]));
    if code(&out) == 0 {
        assert_eq!(v["status"], "pass", "{v}");
    }
}

#[cfg(feature = "mpi")]
#[test]
fn tcp_forced_inside_a_node_fails_it_by_name_in_every_file_and_the_hook() {
    let (dir, out_dir) = temp_file("tcp");
    let marker = dir.path().join("hook.txt");
    let hook = format!(
        "sh -c 'printf \"%s|%s|%s\" \"$1\" \"$2\" \"$3\" > {}' hook {{host}} {{checks}} {{reason}}",
        marker.display()
    );
    let args = argv![
        "check --profile local-cpu --transport tcp --only node-all-reduce-4k --out",
        path_str(&out_dir),
        "--on-fail",
        &hook
    ];
    let out = mpirun(2, &args);
    assert_eq!(code(&out), 6, "{}", show(&out));
    let host = hosts(&out_dir)[0].clone();
    let text = stdout(&out);
    assert!(
        text.contains(&format!("# verdict: FAIL: 1 of 1 node: {host} (node-all-reduce-4k)")),
        "{text}"
    );
    assert!(
        text.contains("sh -c") && text.contains(&format!("hook {host} node-all-reduce-4k")),
        "printed: {text}"
    );
    assert!(!marker.exists(), "printed only, without --execute");
    let node = node_file(&out_dir, &host);
    assert_eq!(node["status"], "fail");
    let failed = &node["failed"][0];
    assert_eq!(failed["check"], "node-all-reduce-4k");
    let reason = failed["reason"].as_str().unwrap();
    assert!(reason.contains("not the path the check is for (vader)"), "{reason}");
    if let Some(rows) = parse_prometheus(&out_dir.join(format!("{host}.prom"))) {
        let labels = format!("check=node-all-reduce-4k,collective=all_reduce,host={host},size_class=4K");
        assert!(
            rows.contains(&("collbench_check_result".into(), labels.clone(), 3.0)),
            "{rows:?}"
        );
        assert!(
            rows.iter()
                .any(|r| r.0 == "collbench_check_busbw_threshold_gbps" && r.1 == labels && r.2 == 0.05)
        );
        assert!(
            rows.contains(&("collbench_check_node_result".into(), format!("host={host}"), 3.0)),
            "{rows:?}"
        );
    }

    let mut executed = args.to_vec();
    executed.extend(["--execute", "--overwrite"]);
    let out = mpirun(2, &executed);
    assert_eq!(code(&out), 6, "{}", show(&out));
    let got = std::fs::read_to_string(&marker).expect("the hook ran");
    let parts: Vec<&str> = got.splitn(3, '|').collect();
    assert_eq!(parts[0], host);
    assert_eq!(parts[1], "node-all-reduce-4k");
    assert!(
        parts[2].starts_with("node-all-reduce-4k fail: the ranks took ob1/tcp"),
        "{got}"
    );
}

/// A bad profile is one line naming its file and line, and nothing is
/// written: a mistake the reader finds, and what the run finds once it has
/// its backend (a size that no buffer holds, a GPU profile without GPUs) (the reader's other
/// refusals are tests/it/option_errors.rs's, in this process).
#[test]
fn bad_profiles_are_one_line_naming_the_file_and_line() {
    let dir = tempdir();
    let good = "name = \"t\"\ndescription = \"t\"\nbackend = \"mpi\"\n\n[[check]]\nname = \"c\"\nscope = \"job\"\ncollective = \"all_reduce\"\n";
    let rule = "fail_below = { value = 1.0, source = \"a long enough source\" }\n";
    let cases = [
        (
            "unknown-key",
            format!("{good}size = \"4K\"\ncolour = \"red\"\n{rule}"),
            ":10:",
            "colour",
        ),
        (
            "too-large",
            format!("{good}size = \"64T\"\n{rule}"),
            ":9:",
            "cannot hold",
        ),
        (
            "gpus",
            format!("{}size = \"4K\"\n{rule}", good.replace("\"mpi\"", "\"nccl\"")),
            ":3:",
            "GPU",
        ),
    ];
    for (name, text, line, needle) in cases {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let out_dir = dir.path().join(name);
        let out = collbench(&["check", "--profile", path_str(&path), "--out", path_str(&out_dir)]);
        assert_eq!(code(&out), 2, "{name}: {}", show(&out));
        let ours = our_lines(&out);
        assert_eq!(ours.len(), 1, "{name}: one line: {}", show(&out));
        assert!(
            ours[0].contains(&format!("{}{line}", path.display())),
            "{name}: {}",
            ours[0]
        );
        assert!(ours[0].contains(needle), "{name}: {}", ours[0]);
        assert!(
            !out_dir.join("check.json").exists(),
            "{name}: a refused check wrote its verdict"
        );
    }
    let out = collbench(&["check", "--profile", "no-such-profile"]);
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("no such profile or file"), "{}", show(&out));
}

/// A fake-node run of `local-cpu`: 3 nodes of 1 rank (a node check has
/// nothing to judge there; the pair and job checks do).
#[cfg(feature = "mpi")]
fn on_three_nodes(dir: &Path, name: &str, faults: &fake_nodes::Faults, extra: &[&str]) -> (Output, std::path::PathBuf) {
    let out_dir = dir.join(name);
    let mut args = vec!["check", "--profile", "local-cpu", "--out", path_str(&out_dir)];
    args.extend(extra);
    let out = fake_nodes::mpirun("cbnode1:1,cbnode2:1,cbnode3:1", faults, &args);
    (out, out_dir)
}

/// The faults are named, and only they fail (a healthy node or link may
/// be found flaky where other jobs load the machine). That a healthy
/// cluster passes is scripts/bench/check-local-cpu.sh's figure.
#[cfg(feature = "mpi")]
#[test]
fn on_fake_nodes_a_slow_node_and_a_slow_link_fail_by_name() {
    if !fake_nodes::available() {
        return;
    }
    let dir = tempdir();

    // 1% of a CPU: its pairs an order of magnitude below the pair check's
    // threshold (5% leaves them at 0.08-0.10 GB/s, above it)
    let slow_node = fake_nodes::Faults {
        slow_node: Some(("cbnode2", 1)),
        ..Default::default()
    };
    // the faults make everything slow: the pair check alone, which names
    // the node or link (scripts/bench/check-local-cpu.sh runs the whole
    // profile)
    let (out, d) = on_three_nodes(dir.path(), "slow-node", &slow_node, &["--only", "pair-all-reduce-1m"]);
    assert_eq!(code(&out), 6, "{}", show(&out));
    assert!(
        stdout(&out).contains("# verdict: FAIL: 1 of 3 nodes: cbnode2 (pair-all-reduce-1m"),
        "{}",
        show(&out)
    );
    assert_eq!(hosts(&d), ["cbnode1", "cbnode2", "cbnode3"]);
    assert_eq!(node_file(&d, "cbnode2")["status"], "fail");
    assert_ne!(
        node_file(&d, "cbnode1")["status"],
        "fail",
        "its pair with cbnode3 passes"
    );
    assert_ne!(node_file(&d, "cbnode3")["status"], "fail");

    let slow_link = fake_nodes::Faults {
        slow_link: Some(("cbnode1-cbnode2", "100mbit")),
        ..Default::default()
    };
    let (out, d) = on_three_nodes(dir.path(), "slow-link", &slow_link, &["--only", "pair-all-reduce-1m"]);
    assert_eq!(code(&out), 6, "{}", show(&out));
    assert!(
        stdout(&out)
            .contains("the link cbnode1+cbnode2 (pair-all-reduce-1m) fails where each node passes with another"),
        "{}",
        show(&out)
    );
    assert_ne!(node_file(&d, "cbnode3")["status"], "fail");
    for h in ["cbnode1", "cbnode2"] {
        let n = node_file(&d, h);
        assert_eq!(n["status"], "fail", "{h}: an end of the failing link");
        assert_eq!(n["failed"][0]["group"], "cbnode1+cbnode2", "{n}");
    }
}
