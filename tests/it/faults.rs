//! The fault suite: what happens when a rank dies, hangs, disagrees, is
//! interrupted, or cannot write. Every job must end, with the documented
//! exit code, one line saying why, and every finished row intact.

use std::time::Duration;

use crate::common::*;

/// A CSV whose every row is complete and parses, with at least one row.
fn assert_intact(csv_path: &std::path::Path, columns: usize) -> usize {
    let text = std::fs::read_to_string(csv_path).unwrap();
    assert!(text.ends_with('\n'), "a row was cut in the middle");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    assert_eq!(reader.headers().unwrap().len(), columns);
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.expect("a row does not parse")).collect();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|r| r.len() == columns));
    rows.len()
}

/// An endless sweep of small points, so that faults hit it mid-run.
fn endless(csv: &str) -> Vec<&str> {
    vec!["run", "-e", "64K", "--cycles", "0", "--csv", csv, "--no-progress"]
}

#[test]
fn a_rank_killed_with_sigkill_ends_the_job_and_the_csv_stays_intact() {
    let (_dir, csv_path) = temp_file("killed.csv");
    let job = spawn_mpirun(3, &endless(path_str(&csv_path)));
    let pids = job.rank_pids(3, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    signal(pids[2], "KILL");
    let (code, _) = job.finish(Duration::from_secs(120));
    assert_ne!(code, 0);
    assert_intact(&csv_path, default_header().len());
}

#[test]
fn a_stopped_rank_trips_the_watchdog_which_names_the_point_and_exits_5() {
    let (_dir, csv_path) = temp_file("stopped.csv");
    let mut args = endless(path_str(&csv_path));
    args.extend(["--timeout", "5"]);
    let job = spawn_mpirun(3, &args);
    let pids = job.rank_pids(3, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    signal(pids[1], "STOP");
    let (code, lines) = job.finish(Duration::from_secs(120));
    // mpirun wakes the stopped rank (SIGCONT) when it ends the job
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pids[1].to_string()])
        .status();
    assert_eq!(code, 5, "{lines:?}");
    let timeout_line = lines.iter().find(|l| l.contains("timeout")).expect("no timeout line");
    assert!(
        timeout_line.contains(" B out_of_place") || timeout_line.contains(" B in_place"),
        "{timeout_line}"
    );
    assert!(timeout_line.contains("rank "), "{timeout_line}");
    assert_intact(&csv_path, default_header().len());
}

/// The JSON report at `path`: whole, `"complete": false`, stopped by
/// `cause`, with as many records as the CSV has rows; no `.partial` left.
fn assert_stopped_json(path: &std::path::Path, cause: &str, rows: usize) {
    let text = std::fs::read_to_string(path).expect("the JSON report was written");
    let doc: serde_json::Value = serde_json::from_str(&text).expect("the JSON report is whole");
    assert_eq!(doc["summary"]["complete"], false, "{text}");
    assert_eq!(doc["summary"]["stopped_by"], cause, "{text}");
    assert_eq!(doc["records"].as_array().unwrap().len(), rows);
    assert_eq!(doc["summary"]["points"].as_u64().unwrap() as usize, rows);
    let mut partial = path.as_os_str().to_owned();
    partial.push(".partial");
    assert!(!std::path::Path::new(&partial).exists(), "a .partial JSON was left");
}

#[test]
fn a_stopped_peer_times_out_and_rank_0_alive_completes_its_table_and_json() {
    let (dir, csv_path) = temp_file("peer.csv");
    let json_path = dir.path().join("peer.json");
    let mut args = endless(path_str(&csv_path));
    args.extend(["--timeout", "5", "--json", path_str(&json_path)]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    signal(pids[1], "STOP");
    let (code, lines) = job.finish(Duration::from_secs(120));
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pids[1].to_string()])
        .status();
    assert_eq!(code, 5, "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("collbench: rank 0 on ") && l.contains("timeout")),
        "{lines:?}"
    );
    assert!(
        !lines.iter().any(|l| l.contains("stopped by")),
        "the timeout is the one cause: {lines:?}"
    );
    let rows = assert_intact(&csv_path, default_header().len());
    assert_stopped_json(&json_path, "timeout", rows);
}

/// What a terminal and a launcher do together: SIGINT to every rank (the
/// foreground process group), then SIGTERM (mpirun) and SIGHUP (a closed
/// pseudo-terminal), and a user's second Ctrl-C: the first signal stops
/// the run, the later ones cannot end a rank before rank 0's reports are
/// whole.
#[test]
fn any_number_of_signals_on_every_rank_leave_whole_reports_naming_the_first() {
    let (dir, csv_path) = temp_file("many.csv");
    let json_path = dir.path().join("many.json");
    let mut args = vec![
        "run", "-b", "64K", "-e", "64K", "-n", "4000", "-w", "1", "--cycles", "0",
    ];
    args.extend([
        "--no-progress",
        "--csv",
        path_str(&csv_path),
        "--json",
        path_str(&json_path),
    ]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    for pid in &pids {
        signal(*pid, "INT");
    }
    std::thread::sleep(Duration::from_millis(5));
    for sig in ["TERM", "HUP", "INT", "TERM"] {
        for pid in &pids {
            let _ = std::process::Command::new("kill")
                .args([&format!("-{sig}"), &pid.to_string()])
                .status();
        }
    }
    let (code, lines) = job.finish(Duration::from_secs(120));
    assert!([129, 130, 143].contains(&code), "exit {code}: {lines:?}");
    let stopped: Vec<&String> = lines.iter().filter(|l| l.contains("stopped by")).collect();
    assert_eq!(stopped.len(), 1, "{lines:?}");
    assert!(
        stopped[0].starts_with("collbench: stopped by SIGINT after "),
        "{lines:?}"
    );
    let rows = assert_intact(&csv_path, default_header().len());
    assert_stopped_json(&json_path, "SIGINT", rows);
}

#[test]
fn sigterm_stops_every_rank_at_a_point_boundary_with_complete_reports_and_exit_143() {
    let (dir, csv_path) = temp_file("term.csv");
    let json_path = dir.path().join("term.json");
    let mut args = endless(path_str(&csv_path));
    args.extend(["--json", path_str(&json_path)]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    for pid in &pids {
        signal(*pid, "TERM");
    }
    let (code, lines) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 143, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("stopped by SIGTERM") && lines[0].contains("incomplete"),
        "{lines:?}"
    );
    let rows = assert_intact(&csv_path, default_header().len());
    assert_stopped_json(&json_path, "SIGTERM", rows);
}

/// mpirun ends a job with SIGCONT to every rank, SIGTERM a second later,
/// SIGKILL a second after that, and Open MPI's ranks may end on their own
/// (they lose mpirun) before the SIGTERM: a SIGCONT alone, to running
/// ranks, completes rank 0's reports and stops the run (exit 146).
#[test]
fn a_launchers_sigcont_alone_stops_the_run_with_whole_reports() {
    let (dir, csv_path) = temp_file("cont.csv");
    let json_path = dir.path().join("cont.json");
    let mut args = endless(path_str(&csv_path));
    args.extend(["--json", path_str(&json_path)]);
    let job = spawn_mpirun(3, &args);
    let pids = job.rank_pids(3, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    for pid in &pids {
        signal(*pid, "CONT");
    }
    let (code, lines) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 146, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("collbench: stopped by SIGCONT (the launcher is ending the job) after "),
        "{lines:?}"
    );
    let rows = assert_intact(&csv_path, default_header().len());
    assert_stopped_json(&json_path, "SIGCONT", rows);
}

/// A SIGCONT that resumes stopped ranks (Ctrl-Z then `fg`, a suspended
/// Slurm job) is no stop: the run goes on until the SIGTERM that follows.
#[test]
fn a_sigcont_that_resumes_stopped_ranks_does_not_stop_the_run() {
    let (dir, csv_path) = temp_file("resume.csv");
    let json_path = dir.path().join("resume.json");
    let mut args = endless(path_str(&csv_path));
    args.extend(["--json", path_str(&json_path)]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, Duration::from_secs(120));
    job.wait_for_rows(Duration::from_secs(120));
    for pid in &pids {
        signal(*pid, "STOP");
    }
    // stopped for longer than the clock's gap (engine::stop): a delay,
    // not a timing assertion
    std::thread::sleep(Duration::from_secs(2));
    for pid in &pids {
        signal(*pid, "CONT");
    }
    std::thread::sleep(Duration::from_secs(2));
    for pid in &pids {
        signal(*pid, "TERM");
    }
    let (code, lines) = job.finish(Duration::from_secs(120));
    assert_eq!(code, 143, "the resume stopped the run: {lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("stopped by SIGTERM"), "{lines:?}");
    let rows = assert_intact(&csv_path, default_header().len());
    assert_stopped_json(&json_path, "SIGTERM", rows);
}

#[test]
fn ranks_given_different_plans_stop_before_measuring_with_exit_2_naming_the_field() {
    let (_dir, csv_path) = temp_file("mpmd.csv");
    let csv = path_str(&csv_path);
    let mut cmd = std::process::Command::new("mpirun");
    cmd.args(argv![
        "--oversubscribe -np 1",
        BIN,
        "run -e 1M --csv",
        csv,
        ": -np 2",
        BIN,
        "run"
    ]);
    cmd.args(["-e", "2M", "--csv", csv]);
    cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    let out = exits(2, output_of(cmd));
    assert_eq!(
        our_lines(&out),
        vec![
            "collbench: ranks run different plans: --maxbytes is 1048576 on rank 0 but 2097152 on rank 1; every rank \
             must get the same options (check an MPMD command line or per-node config files)"
        ]
    );
    assert!(!csv_path.exists(), "nothing may be written when the plans differ");
}

#[test]
fn an_unwritable_output_path_is_named_before_any_work() {
    for path in ["/proc/collbench-test.csv", "/dev/null/x.csv"] {
        let out = exits(2, mpirun(2, &["run", "--csv", path]));
        let lines = our_lines(&out);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("cannot create CSV file") && lines[0].contains(path),
            "{lines:?}"
        );
    }
}

/// A tmpfs of `size` mounted on a folder of its own (root only), unmounted
/// when dropped.
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<SmallDisk> {
        if !is_root() {
            eprintln!("note: a full disk needs a tmpfs mount, which needs root; test skipped");
            return None;
        }
        let dir = tempdir();
        let mounted = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size}"),
                "tmpfs",
                path_str(dir.path()),
            ])
            .status()
            .expect("mount runs");
        assert!(mounted.success(), "cannot mount a tmpfs as root");
        Some(SmallDisk { dir })
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.path().join(name)
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(self.dir.path()).status();
    }
}

/// A 64 KiB disk fills mid-run: rank 0 says so once and takes the job
/// down (exit 1); the CSV ends with its last whole row (the row that did
/// not fit is cut back out), the table's footer counts exactly those rows,
/// the JSON that could not be completed is absent (no `.partial`), and
/// compare and plot read the CSV.
#[test]
fn a_full_disk_leaves_whole_rows_a_footer_and_no_half_json() {
    let Some(disk) = SmallDisk::mount("64k") else {
        return;
    };
    let (csv_path, json_path) = (disk.path("t.csv"), disk.path("t.json"));
    let mut args = endless(path_str(&csv_path));
    args.extend(["--json", path_str(&json_path)]);
    let out = exits(1, mpirun(2, &args));
    let line = only_line(&out);
    assert!(
        line.contains(&format!("cannot write CSV file {}", csv_path.display())) && line.contains("No space left"),
        "{line}"
    );
    let rows = assert_intact(&csv_path, default_header().len());
    let table = stdout(&out);
    assert!(
        table.contains(&format!(
            "# Run                  : incomplete, stopped by error after {rows} points\n"
        )),
        "{table}"
    );
    let left: Vec<_> = std::fs::read_dir(disk.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        vec![std::ffi::OsString::from("t.csv")],
        "the JSON is whole or absent"
    );
    let dir = tempdir();
    ok(collbench(&["compare", path_str(&csv_path), path_str(&csv_path)]));
    ok(collbench(&[
        "plot",
        path_str(&csv_path),
        "-o",
        path_str(&dir.path().join("p.svg")),
    ]));
}

/// A CSV whose last row was cut short (copied from a disk that filled
/// before this version, a writer killed mid-row): compare and plot leave
/// that row out with one warning naming the file and its line.
#[test]
fn readers_leave_out_a_torn_final_row_with_a_warning() {
    let dir = tempdir();
    let (_d, whole) = temp_file("whole.csv");
    ok(mpirun(
        2,
        &[
            "run",
            "--collectives",
            "all_reduce",
            "-e",
            "1K",
            "--csv",
            path_str(&whole),
        ],
    ));
    let text = std::fs::read_to_string(&whole).unwrap();
    let rows = text.lines().count() - 1;
    let torn = dir.path().join("torn.csv");
    let last = text.trim_end().lines().last().unwrap();
    std::fs::write(&torn, format!("{text}{}", &last[..last.len() / 2])).unwrap();
    let out = ok(collbench(&["compare", path_str(&whole), path_str(&torn)]));
    let warning = only_line(&out);
    assert!(
        warning.starts_with(&format!(
            "collbench: warning: CSV file {}: line {}, its last row",
            torn.display(),
            rows + 2
        )),
        "{warning}"
    );
    assert!(
        stdout(&out).contains(&format!("{rows} within noise")),
        "{}",
        stdout(&out)
    );
    let out = ok(collbench(&[
        "plot",
        path_str(&torn),
        "-o",
        path_str(&dir.path().join("t.png")),
    ]));
    assert_eq!(
        our_lines(&out).iter().filter(|l| l.contains("no line end")).count(),
        1,
        "{}",
        stderr(&out)
    );
}

/// `--csv` and `--json` on one file, or an output on the `--config` file
/// (even with `--overwrite`): one line naming both, exit 2, nothing
/// measured, nothing written, the config file intact.
#[test]
fn an_output_on_another_output_or_on_the_config_file_is_refused_before_measuring() {
    let dir = tempdir();
    let same = dir.path().join("same.out");
    let out = exits(
        2,
        mpirun(
            2,
            &["run", "-e", "1K", "--csv", path_str(&same), "--json", path_str(&same)],
        ),
    );
    assert_eq!(
        only_line(&out),
        format!(
            "collbench: --json {0} is also --csv's file: each output needs a path of its own",
            same.display()
        )
    );
    assert!(!stdout(&out).contains("float"), "nothing measured");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "nothing written");
    let config = dir.path().join("run.conf");
    std::fs::write(&config, "maxbytes = \"1K\"\n").unwrap();
    let out = exits(
        2,
        mpirun(
            2,
            &[
                "run",
                "--config",
                path_str(&config),
                "--json",
                path_str(&config),
                "--overwrite",
            ],
        ),
    );
    assert!(
        only_line(&out).starts_with(&format!(
            "collbench: --json {} is the --config file, an input",
            config.display()
        )),
        "{}",
        stderr(&out)
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), "maxbytes = \"1K\"\n");
}

#[test]
fn cycles_repeat_the_sweep_and_number_the_rows() {
    let (_dir, csv_path) = temp_file("cycles.csv");
    let out = ok(mpirun(
        2,
        &argv!["run --collectives sendrecv -e 64 -N 3 --csv", path_str(&csv_path)],
    ));
    let csv = Csv::read(&csv_path);
    assert_eq!(csv.header, default_header());
    assert!(csv.rows.iter().all(|r| csv.get(r, "samples") == "3"));
    let cycles: Vec<&str> = csv.rows.iter().map(|r| csv.get(r, "cycle")).collect();
    assert_eq!(cycles.len(), 3 * 4 * 2);
    assert!(
        cycles[..8].iter().all(|c| *c == "1") && cycles[16..].iter().all(|c| *c == "3"),
        "{cycles:?}"
    );
    assert_eq!(stdout(&out).matches("# cycle ").count(), 3);
}
