//! `collbench doctor` as users run it, on the real binary: every log of
//! the corpus (tests/fixtures/doctor/manifest.toml: a confirmed log exits 8
//! naming its cause in the JSON, a healthy one exits 0 with nothing above
//! info), a folder of per-rank files with a gzip one and a core file,
//! standard input, and inputs it cannot read (one line, exit 2).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::common::*;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/doctor")
}

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stdout(out)))
}

/// The (rule, severity) of every finding of a `--json` report.
fn findings(v: &serde_json::Value) -> Vec<(String, String)> {
    v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().into(),
                f["severity"].as_str().unwrap().into(),
            )
        })
        .collect()
}

#[test]
fn every_log_of_the_corpus_exits_with_its_verdict_and_names_its_cause() {
    let text = std::fs::read_to_string(corpus().join("manifest.toml")).unwrap();
    let m: toml::Table = toml::from_str(&text).unwrap();
    let mut failures = Vec::new();
    for e in m["log"].as_array().unwrap() {
        let file = corpus().join(e["file"].as_str().unwrap());
        let cause = e["cause"].as_str().unwrap();
        let out = collbench(&["doctor", "--json", path_str(&file)]);
        let v = json(&out);
        let found = findings(&v);
        let serious = found.iter().any(|(_, s)| s != "info");
        let named = found.iter().any(|(r, s)| r == cause && s != "info");
        let (want, good) = if cause == "healthy" { (0, !serious) } else { (8, named) };
        if code(&out) != want || !good || v["exit_code"] != want {
            failures.push(format!(
                "{}: exit {}, {found:?} (cause {cause})",
                file.display(),
                code(&out)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_folder_of_rank_files_with_gzip_and_standard_input_are_read_as_the_job() {
    let dir = tempdir();
    let ranks = dir.path().join("ranks");
    std::fs::create_dir(&ranks).unwrap();
    let lines = std::fs::read_to_string(corpus().join("nccl-1412-gdr-off-no-gdrdma.log")).unwrap();
    // lines 1-4 in one file, 5-14 (a receiving connection at line 6) in the gzip one
    let at = lines.match_indices('\n').nth(3).unwrap().0 + 1;
    let (a, b) = lines.split_at(at);
    std::fs::write(ranks.join("nccl.a.log"), a).unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b.as_bytes()).unwrap();
    std::fs::write(ranks.join("nccl.b.log.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(ranks.join("core"), b"\x7fELF\x02\x01\x01").unwrap();
    let out = exits(8, collbench(&["doctor", path_str(&ranks)]));
    let report = stdout(&out);
    assert!(report.starts_with("collbench doctor: 2 files, 14 lines"), "{report}");
    assert!(report.contains("warn   gdr-off: "), "{report}");
    assert!(
        report.contains("nccl.b.log.gz:"),
        "an evidence line of the gzip file: {report}"
    );
    assert!(
        report.contains("verdict: a problem was found (0 errors, 1 warning); exit 8"),
        "{report}"
    );
    assert_stderr_has(&out, "collbench doctor: skipped ");
    assert_stderr_has(&out, "core: an ELF binary");
    // the same lines through a pipe
    let mut child = Command::new(BIN)
        .args(["doctor", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(lines.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(code(&out), 8);
    assert!(stdout(&out).contains("gdr-off"), "{}", stdout(&out));
}

#[test]
fn a_healthy_log_exits_0_and_says_what_it_could_not_judge() {
    let file = corpus().join("healthy-dstack-2712-ib-after-libibverbs-installed-2.26.2.log");
    let out = ok(collbench(&["doctor", path_str(&file)]));
    let report = stdout(&out);
    assert!(
        report.contains("not judged:\n  the transport of each connection"),
        "{report}"
    );
    assert!(
        report.ends_with("verdict: no problem found in what the logs show\n"),
        "{report}"
    );
}

/// A log whose last line was cut while NCCL wrote it (a job killed, no
/// line end) gives no number the cut may have shortened: not the size of
/// `(size 9637` (of 9637888), not the size of `nranks 1` (of 16); the same
/// line written whole gives its size.
#[test]
fn a_number_on_a_last_line_cut_short_is_not_read() {
    let dir = tempdir();
    let (a, b) = (dir.path().join("a.log"), dir.path().join("b.log"));
    std::fs::write(
        &a,
        "h1:10:10 [0] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on device
         h1:10:10 [0] NCCL INFO ncclCommInitRank comm 0x55aa rank 1 nranks 1",
    )
    .unwrap();
    let cut = "h2:20:20 [0] include/shm.h:48 NCCL WARN Error while creating shared memory segment nccl-shm-recv-6c6b-0-1-0 (size 9637";
    std::fs::write(&b, cut).unwrap();
    let shm = |out: &std::process::Output| {
        let v = json(out);
        let f = v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["rule"] == "shm-too-small")
            .cloned();
        f.unwrap_or_else(|| panic!("no shm-too-small: {}", stdout(out)))
    };
    let f = shm(&exits(8, collbench(&["doctor", "--json", path_str(&a), path_str(&b)])));
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("NCCL could not create its shared-memory segment in /dev/shm: "),
        "{detail}"
    );
    let processes: Vec<&str> = f["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(processes, ["h1 pid 10 device 0", "h2 pid 20 device 0"]);
    std::fs::write(&b, format!("{cut}888)\n")).unwrap();
    let f = shm(&exits(8, collbench(&["doctor", "--json", path_str(&b)])));
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .starts_with("NCCL could not create its shared-memory segment of 9637888 bytes in /dev/shm: "),
        "{f}"
    );
}

#[test]
fn logs_it_cannot_read_or_without_nccl_lines_get_one_line_and_exit_2() {
    let dir = tempdir();
    let plain = dir.path().join("plain.log");
    std::fs::write(&plain, "epoch 1 loss 2.3\nepoch 2 loss 2.1\n").unwrap();
    let line = only_line(&exits(2, collbench(&["doctor", path_str(&plain)])));
    assert!(
        line.contains("no NCCL line") && line.contains("NCCL_DEBUG=INFO"),
        "{line}"
    );
    let line = only_line(&exits(
        2,
        collbench(&["doctor", path_str(&dir.path().join("missing.log"))]),
    ));
    assert!(line.contains("cannot read") && line.contains("missing.log"), "{line}");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let line = only_line(&exits(2, collbench(&["doctor", path_str(&empty)])));
    assert!(line.contains("holds no files"), "{line}");
    assert_parser_error(
        &collbench(&["doctor"]),
        "the following required arguments were not provided",
    );
}

/// A run on the NCCL backend keeps its ranks' NCCL logs beside its report
/// and prints what the doctor's rules find under the table, in the JSON
/// report too: on 3 simulated GPUs under mpirun (the simulation prints
/// NCCL's real-format set-up lines), NCCL_P2P_DISABLE=1 is named; without
/// it nothing is found; a user's own NCCL_DEBUG leaves the log to them.
#[cfg(all(feature = "mpi", feature = "nccl"))]
#[test]
fn a_run_on_nccl_names_what_its_nccl_logs_show_under_the_table_and_in_the_json() {
    let Some(sim) = crate::gpu_sim::sim_dir() else { return };
    let dir = tempdir();
    let env = crate::gpu_sim::sim_env(&sim, 3);
    let run = |name: &str, extra: &[(&str, &str)]| {
        let csv = dir.path().join(format!("{name}.csv"));
        let json_path = dir.path().join(format!("{name}.json"));
        let mut all: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        all.extend_from_slice(extra);
        let args = [
            "run",
            "--backend",
            "nccl",
            "-b",
            "1K",
            "-e",
            "4K",
            "--collectives",
            "all_reduce",
            "--csv",
            path_str(&csv),
            "--json",
            path_str(&json_path),
        ];
        let out = mpirun_env(3, &all, &args);
        assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
        (out, csv, doc)
    };
    let (out, csv, doc) = run("p2p-off", &[("NCCL_P2P_DISABLE", "1")]);
    let text = stdout(&out);
    let ours: Vec<&str> = text.lines().filter(|l| l.starts_with("# NCCL log ")).collect();
    let kept = dir.path().join("p2p-off.nccl.log");
    assert_eq!(ours.len(), 2, "{text}");
    assert!(
        ours[0].starts_with(
            "# NCCL log             : info p2p-degraded: GPUs of one node exchange data through host memory on "
        ),
        "{text}"
    );
    assert_eq!(
        ours[1],
        format!(
            "# NCCL log             : kept in {}; `collbench doctor {}` shows the evidence and the fix",
            kept.display(),
            kept.display()
        ),
        "{text}"
    );
    assert!(csv.exists());
    let k = &doc["run"]["nccl_log"];
    assert_eq!(k["ranks"], 3);
    assert_eq!(k["file"].as_str(), Some(path_str(&kept)));
    assert_eq!(
        findings(&k["diagnosis"]),
        [("p2p-degraded".to_string(), "info".to_string())]
    );
    // the kept file is every rank's log, which the doctor reads again
    let again = collbench(&["doctor", "--json", path_str(&kept)]);
    assert_eq!(code(&again), 0, "{}", stderr(&again));
    let v = json(&again);
    assert_eq!(v["processes"], 3);
    assert_eq!(findings(&v), [("p2p-degraded".to_string(), "info".to_string())]);
    // nothing to say on a plain run; the user's own log is theirs
    let (out, _, doc) = run("plain", &[]);
    assert!(
        stdout(&out).contains("# NCCL log             : no finding in the NCCL set-up lines of 3 ranks ("),
        "{}",
        stdout(&out)
    );
    assert_eq!(doc["run"]["nccl_log"]["diagnosis"]["findings"], serde_json::json!([]));
    let (out, _, doc) = run("theirs", &[("NCCL_DEBUG", "WARN")]);
    assert!(!stdout(&out).contains("# NCCL log "), "{}", stdout(&out));
    assert!(doc["run"].get("nccl_log").is_none());
    assert!(!dir.path().join("theirs.nccl.log").exists());
}
