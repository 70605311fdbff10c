//! What a user sees in a real terminal: a 160-column tmux pane running
//! `mpirun ... collbench run`, with and without `--progress`, must keep
//! every table row intact on screen; the table's header and footer in
//! nccl-tests' form; Ctrl-C (real signals) leaving a table that agrees with
//! the CSV, and a suite that says what finished.
//!
//! tmux is needed for the terminal tests; scripts/test.sh installs it and
//! sets COLLBENCH_REQUIRE_TMUX=1, so that CI fails rather than skips.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::common::*;

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
    })
}

/// `mpirun -np N collbench ARGS` as a shell command line, with what Open
/// MPI needs on a CI machine (as `common::mpirun` gives it).
fn mpirun_line(np: usize, args: &[&str]) -> String {
    let mut line = String::from("env -u OMPI_COMM_WORLD_RANK NO_COLOR=1 ");
    if running_as_root() {
        line += "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ";
    }
    line += &format!("mpirun --oversubscribe -np {np} {BIN}");
    for a in args {
        line += &format!(" '{a}'");
    }
    line
}

/// A detached tmux session of its own server (so that nothing else's tmux
/// is touched), with a pane of a fixed size.
struct Pane {
    socket: String,
}

const END_MARK: &str = "collbench-test-ended-with";

impl Pane {
    /// `None` when tmux is missing and COLLBENCH_REQUIRE_TMUX is not 1.
    fn open() -> Option<Pane> {
        static N: AtomicUsize = AtomicUsize::new(0);
        if Command::new("tmux").arg("-V").output().is_err() {
            assert!(
                !std::env::var("COLLBENCH_REQUIRE_TMUX").is_ok_and(|v| v == "1"),
                "COLLBENCH_REQUIRE_TMUX=1 but tmux is not installed: run scripts/test.sh as root, or install tmux"
            );
            eprintln!("skipped: tmux is not installed (scripts/test.sh installs it)");
            return None;
        }
        let socket = format!(
            "collbench-test-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        Some(Pane { socket })
    }

    fn tmux(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .expect("tmux runs")
    }

    /// Runs `command` in a new `width` x 50 pane, waits for it to end (at
    /// most `limit`) and returns every line it left, scrollback included,
    /// and its exit code.
    fn run(&self, width: u16, command: &str, limit: Duration) -> (String, i32) {
        self.start(width, command);
        self.wait_end(limit)
    }

    /// Starts `command` in a new `width` x 50 pane. The shell around it
    /// survives a Ctrl-C (a trap, which the command does not inherit), so
    /// that the command's exit code and screen stay.
    fn start(&self, width: u16, command: &str) {
        let script = format!("trap : INT; {command}; echo {END_MARK} $?; sleep 600");
        let columns = width.to_string();
        let started = self.tmux(&argv!["new-session -d -x", &columns, "-y 50 sh -c", &script]);
        assert!(started.status.success(), "tmux: {}", stderr(&started));
        self.tmux(&["set-option", "-g", "history-limit", "50000"]);
        let width_seen = stdout(&self.tmux(&["display-message", "-p", "#{pane_width}"]));
        assert_eq!(
            width_seen.trim(),
            width.to_string(),
            "the pane is not {width} columns wide"
        );
    }

    /// Every line on screen, scrollback included.
    fn screen(&self) -> String {
        stdout(&self.tmux(&["capture-pane", "-p", "-J", "-S", "-"]))
    }

    /// Types `keys` into the pane (tmux's names: `C-c` is Ctrl-C).
    fn keys(&self, keys: &str) {
        let sent = self.tmux(&["send-keys", keys]);
        assert!(sent.status.success(), "tmux: {}", stderr(&sent));
    }

    /// Waits for the started command to end (at most `limit`): the screen
    /// and its exit code.
    fn wait_end(&self, limit: Duration) -> (String, i32) {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if let Some(at) = screen.find(END_MARK) {
                let code = screen[at + END_MARK.len()..]
                    .split_whitespace()
                    .next()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(-1);
                return (screen, code);
            }
            assert!(Instant::now() < deadline, "the command did not end in time:\n{screen}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// One table line: its collective, `size count`, and the time of each
/// placement it shows.
type TableRow = (String, String, Vec<String>);

/// The table rows the CSV says were measured, as the table lays them out:
/// an out-of-place row and its in-place twin share a line; each time with
/// 2 decimals.
fn expected_rows(csv_path: &Path) -> Vec<TableRow> {
    let csv = Csv::read(&csv_path.to_path_buf());
    let mut rows: Vec<(TableRow, bool)> = Vec::new();
    for r in &csv.rows {
        let collective = csv.get(r, "collective").to_string();
        let size = format!("{} {}", csv.get(r, "size_bytes"), csv.get(r, "count"));
        let time = format!("{:.2}", csv.num(r, "time_us"));
        let in_place = csv.get(r, "placement") == "in_place";
        match rows.last_mut() {
            Some((last, open)) if in_place && *open && (&last.0, &last.1) == (&collective, &size) => {
                last.2.push(time);
                *open = false;
            }
            _ => rows.push(((collective, size, vec![time]), !in_place)),
        }
    }
    rows.into_iter().map(|(row, _)| row).collect()
}

/// The data lines of a table on screen, each checked whole (13 fields:
/// size, count, type, op, root, then time, algbw, busbw, #wrong per
/// placement, `-` where a placement was not measured).
fn table_rows(screen: &str) -> Vec<TableRow> {
    let mut section = String::new();
    let mut got = Vec::new();
    for line in screen.lines() {
        // the terminal echoes a Ctrl-C as `^C` where the cursor was
        let line = line.trim_start_matches("^C");
        if let Some(rest) = line.strip_prefix("# ")
            && rest.contains("(hierarchy ")
        {
            section = rest.split_whitespace().next().unwrap_or("").to_string();
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first().is_some_and(|f| f.parse::<u64>().is_ok()) {
            assert_eq!(fields.len(), 13, "a damaged table row: {line:?}\n{screen}");
            let times = [fields[5], fields[9]]
                .iter()
                .filter(|t| **t != "-")
                .map(|t| t.to_string())
                .collect();
            got.push((section.clone(), format!("{} {}", fields[0], fields[1]), times));
        }
    }
    got
}

/// Every row of the CSV is in the table, whole, under its collective's
/// heading, in order, and nothing else is.
fn assert_table_matches_csv(screen: &str, csv_path: &Path) {
    let want = expected_rows(csv_path);
    assert!(!want.is_empty(), "the CSV has no rows");
    let got = table_rows(screen);
    assert_eq!(got.len(), want.len(), "rows in the table:\n{screen}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, &g.1), (&w.0, &w.1), "{screen}");
        assert_eq!(g.2, w.2, "the times of {} {} differ from the CSV's", w.0, w.1);
    }
}

/// The table survived on screen: every row, the header, the footer.
fn assert_table_survived(screen: &str, csv_path: &Path) {
    assert_table_matches_csv(screen, csv_path);
    for footer in ["# Avg bus bandwidth    : ", "# Validation           : OK"] {
        assert!(screen.contains(footer), "no {footer:?} on screen:\n{screen}");
    }
    assert!(screen.contains("# collbench "), "the header is gone:\n{screen}");
}

fn terminal_run(extra: &[&str]) {
    let Some(pane) = Pane::open() else {
        return;
    };
    let (_dir, csv_path) = temp_file("t.csv");
    let mut args = argv![
        "run --collectives all_reduce,all_gather -e 1M --csv",
        path_str(&csv_path)
    ];
    args.extend(extra);
    let (screen, code) = pane.run(160, &mpirun_line(2, &args), Duration::from_secs(240));
    assert_eq!(code, 0, "{screen}");
    assert_table_survived(&screen, &csv_path);
    if extra.contains(&"--progress") {
        let lines: Vec<&str> = screen
            .lines()
            .filter(|l| l.starts_with("collbench: progress "))
            .collect();
        assert!(
            lines.last().is_some_and(|l| l.contains(" 68/68 points (100%)")),
            "{lines:?}"
        );
        assert!(lines.len() >= 10, "a line per tenth: {lines:?}");
    }
}

#[test]
fn progress_under_mpirun_in_a_160_column_terminal_keeps_every_table_row_on_screen() {
    terminal_run(&["--progress"]);
}

#[test]
fn without_progress_every_table_row_is_on_screen_too() {
    terminal_run(&[]);
}

/// `-e 64K -f 4` ends at 32 KiB: the header says 65536 as asked (as
/// nccl-tests prints -e), then the sizes measured; the JSON keeps both.
#[test]
fn the_header_prints_the_maxbytes_asked_for_and_the_sizes_measured() {
    let dir = tempdir();
    let json = dir.path().join("r.json");
    let csv = dir.path().join("r.csv");
    let out = ok(on_memory(
        2,
        &argv![
            "run --collectives all_reduce -b 8 -e 64K -f 4 -n 1 -w 0 --json",
            path_str(&json),
            "--csv",
            path_str(&csv)
        ],
    ));
    let text = stdout(&out);
    assert!(
        text.contains("# sizes     : minBytes 8 maxBytes 65536 step: 4(factor) (8 B to 32.0 KiB, 7 sizes)\n"),
        "{text}"
    );
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let sweep = &report["run"]["sweep"];
    assert_eq!(
        (
            &sweep["min_bytes"],
            &sweep["max_bytes"],
            &sweep["requested_min_bytes"],
            &sweep["requested_max_bytes"]
        ),
        (&8.into(), &32768.into(), &8.into(), &65536.into()),
        "{sweep}"
    );
}

#[test]
fn the_header_echoes_the_command_and_sizes_and_the_footer_reads_as_nccl_tests_does() {
    let (_dir, csv_path) = temp_file("f.csv");
    let args = [
        "run",
        "--collectives",
        "all_reduce",
        "-b",
        "64",
        "-e",
        "4K",
        "-n",
        "3",
        "--label",
        "two words",
        "--csv",
        path_str(&csv_path),
    ];
    let out = ok(mpirun(2, &args));
    let text = stdout(&out);
    let command = text
        .lines()
        .find_map(|l| l.strip_prefix("# command   : "))
        .expect("a command line in the header");
    assert!(
        command.ends_with(&format!(
            "run --collectives all_reduce -b 64 -e 4K -n 3 --label 'two words' --csv {}",
            path_str(&csv_path)
        )),
        "{command}"
    );
    assert!(
        text.contains("# sizes     : minBytes 64 maxBytes 4096 step: 2(factor) (64 B to 4.0 KiB, 7 sizes)\n"),
        "{text}"
    );
    // nccl-tests' two footer lines, in its order, as its parsers read them
    assert!(
        text.contains("#\n# Out of bounds values : 0 OK\n# Avg bus bandwidth    : "),
        "{text}"
    );
    // what `grep 'Avg bus bandwidth' | awk '{print $NF}'` reads
    let avg_lines: Vec<&str> = text.lines().filter(|l| l.contains("Avg bus bandwidth")).collect();
    assert_eq!(avg_lines.len(), 1, "{text}");
    assert!(avg_lines[0].starts_with("# Avg bus bandwidth    : "), "{text}");
    let value: f64 = avg_lines[0]
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .expect("a number last");
    let csv = Csv::read(&csv_path);
    let mean = csv.rows.iter().map(|r| csv.num(r, "busbw_gbps")).sum::<f64>() / csv.rows.len() as f64;
    assert!((value - mean).abs() <= mean * 1e-5, "footer {value}, CSV mean {mean}");
    assert!(
        text.contains(&format!("# Points averaged      : {}\n", csv.rows.len())),
        "{text}"
    );
}

/// A process with its stdout and stderr in files of `dir`.
struct Spawned {
    child: std::process::Child,
    out: std::path::PathBuf,
    err: std::path::PathBuf,
}

impl Spawned {
    fn start(mut cmd: Command, dir: &Path) -> Spawned {
        let (out, err) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
        cmd.env_remove("OMPI_COMM_WORLD_RANK")
            .env_remove("SLURM_JOB_ID")
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        if running_as_root() {
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        Spawned {
            child: cmd.spawn().expect("the test could not start the command"),
            out,
            err,
        }
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err).unwrap_or_default()
    }

    /// Waits until `ready` holds (checked every 100 ms), at most `limit`.
    fn wait_until(&mut self, limit: Duration, mut ready: impl FnMut(&Spawned) -> bool) {
        let deadline = Instant::now() + limit;
        while !ready(self) {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("ended early ({status}):\n{}\n{}", self.stdout(), self.stderr());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("not ready in time:\n{}\n{}", self.stdout(), self.stderr());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the end, at most `limit`; the exit code.
    fn finish(&mut self, limit: Duration) -> i32 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code().unwrap_or(-1);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("did not end in time:\n{}\n{}", self.stdout(), self.stderr());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn csv_rows(path: &Path) -> usize {
    std::fs::read_to_string(path).map_or(0, |t| t.lines().count().saturating_sub(1))
}

#[test]
fn ctrl_c_to_mpirun_leaves_the_table_with_its_footer_and_every_row_of_the_csv() {
    let (dir, csv_path) = temp_file("int.csv");
    let json_path = dir.path().join("int.json");
    // points of a second or more: mpirun's SIGKILL, a second after its
    // SIGTERM, comes before the point in flight can end
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", "2", BIN]);
    cmd.args(argv!["run --collectives all_reduce -b 64K -e 64K -n 8000 -w 1"]);
    cmd.args(argv![
        "--cycles 0 --no-progress --csv",
        path_str(&csv_path),
        "--json",
        path_str(&json_path)
    ]);
    let mut job = Spawned::start(cmd, dir.path());
    job.wait_until(Duration::from_secs(120), |_| csv_rows(&csv_path) >= 3);
    // what Ctrl-C does in a terminal: SIGINT to mpirun (the ranks are in
    // process groups of their own)
    signal(job.child.id(), "INT");
    job.finish(Duration::from_secs(60));
    let (table, err) = (job.stdout(), job.stderr());
    let rows = csv_rows(&csv_path);
    assert_table_matches_csv(&table, &csv_path);
    // mpirun ends a job with SIGCONT, a second later SIGTERM: its ranks
    // stop at the SIGCONT (engine::stop), where they may still write
    let footer = format!("# Run                  : incomplete, stopped by SIGCONT after {rows} points\n");
    assert!(table.contains(&footer), "want {footer:?} in\n{table}\n{err}");
    assert!(table.contains(&format!("# Points averaged      : {rows}\n")), "{table}");
    assert!(
        table.trim_end().ends_with('#'),
        "the footer is not the table's end:\n{table}"
    );
    // the rank may be killed before it ends in order; if it says so, once
    assert!(err.matches("collbench: stopped by").count() <= 1, "{err}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["records"].as_array().unwrap().len(), rows);
    assert_eq!(doc["summary"]["points"].as_u64().unwrap() as usize, rows);
    assert_eq!(doc["summary"]["stopped_by"], "SIGCONT");
}

/// Ctrl-C typed into a real terminal (tmux) running `mpirun -np 2`: the
/// terminal signals mpirun's process group, mpirun sends SIGTERM to the
/// ranks and SIGKILL a second later, while a point takes longer than that
/// second. Every measured row stays in the CSV, the table shows them with
/// its footer marked incomplete, the JSON is whole with `"complete":
/// false`, and one line names the signal.
#[test]
fn ctrl_c_typed_in_a_terminal_under_mpirun_leaves_the_csv_the_footer_and_a_whole_json() {
    let Some(pane) = Pane::open() else {
        return;
    };
    let (dir, csv_path) = temp_file("int.csv");
    let json_path = dir.path().join("int.json");
    let mut args = argv!["run --collectives all_reduce -b 64K -e 64K -n 8000 -w 1 --cycles 0 --no-progress"];
    args.extend(["--csv", path_str(&csv_path), "--json", path_str(&json_path)]);
    pane.start(160, &mpirun_line(2, &args));
    let deadline = Instant::now() + Duration::from_secs(180);
    while csv_rows(&csv_path) < 3 {
        assert!(Instant::now() < deadline, "no rows in time:\n{}", pane.screen());
        std::thread::sleep(Duration::from_millis(200));
    }
    pane.keys("C-c");
    let (screen, code) = pane.wait_end(Duration::from_secs(60));
    // mpirun ends with 1 after Ctrl-C; a rank's own 128 + signal otherwise
    assert!([1, 130, 143].contains(&code), "exit {code}:\n{screen}");
    let rows = csv_rows(&csv_path);
    assert_table_matches_csv(&screen, &csv_path);
    let stopped: Vec<&str> = screen
        .lines()
        .map(|l| l.trim_start_matches("^C"))
        .filter(|l| l.starts_with("collbench: stopped by "))
        .collect();
    assert_eq!(stopped.len(), 1, "one line names the signal:\n{screen}");
    let signal = stopped[0]["collbench: stopped by ".len()..]
        .split_whitespace()
        .next()
        .unwrap();
    // the terminal's SIGINT where it reaches the ranks first, else
    // mpirun's SIGCONT (its first step in ending the job)
    assert!(["SIGINT", "SIGTERM", "SIGCONT"].contains(&signal), "{}", stopped[0]);
    assert!(
        stopped[0].contains(&format!(" after {rows} points;")),
        "{}\n{screen}",
        stopped[0]
    );
    let footer = format!("# Run                  : incomplete, stopped by {signal} after {rows} points");
    assert!(screen.contains(&footer), "want {footer:?} in\n{screen}");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["summary"]["complete"], false);
    assert_eq!(doc["summary"]["stopped_by"], signal);
    assert_eq!(doc["records"].as_array().unwrap().len(), rows);
    assert!(!dir.path().join("int.json.partial").exists());
}

/// A suite of two launches (shm, then tcp) of a few seconds each: 7 sizes, so a
/// launch seen writing its first row is still seconds from its end when the signal
/// comes (3 sizes once ended between the first row and the signal on a quiet machine).
fn two_launch_suite(dir: &Path) -> std::path::PathBuf {
    let suite = dir.join("two.toml");
    std::fs::write(
        &suite,
        "name = \"two\"\nranks = 2\ntransports = [\"shm\", \"tcp\"]\n[run]\nbackend = \"mpi\"\n\
         collectives = \"all_reduce\"\nminbytes = \"16K\"\nmaxbytes = \"256K\"\niters = 3000\nwarmup = 1\n",
    )
    .unwrap();
    suite
}

fn suite_command(suite: &Path, merged: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["suite", path_str(suite), "--launcher", "mpirun", "-o", path_str(merged)])
        .env("OMPI_MCA_rmaps_base_oversubscribe", "1");
    cmd
}

#[test]
fn ctrl_c_during_a_suite_stops_the_launch_merges_the_finished_ones_and_says_so() {
    let (dir, merged) = temp_file("two.csv");
    let mut suite = Spawned::start(suite_command(&two_launch_suite(dir.path()), &merged), dir.path());
    let second = dir.path().join("two-launches/02-tcp-flat.csv");
    suite.wait_until(Duration::from_secs(180), |s| {
        s.stderr().contains("[1/2] shm flat: ok") && csv_rows(&second) >= 1
    });
    signal(suite.child.id(), "INT");
    let code = suite.finish(Duration::from_secs(60));
    let err = suite.stderr();
    assert_eq!(code, 130, "{err}");
    let first_rows = csv_rows(&dir.path().join("two-launches/01-shm-flat.csv"));
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("stopped by")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    let want = format!(
        "collbench suite: stopped by SIGINT: 1 of 2 finished ([1/2] shm flat ok), their {first_rows} rows are in {}; \
         not finished: [2/2] tcp flat stopped after ",
        merged.display()
    );
    assert!(lines[0].starts_with(&want), "want {want:?}\n{err}");
    let csv = Csv::read(&merged);
    assert_eq!(csv.rows.len(), first_rows);
    assert!(csv.rows.iter().all(|r| csv.get(r, "transport") == "shm"));
    // the launch was told to stop, and its ranks completed their reports
    let log = std::fs::read_to_string(dir.path().join("two-launches/02-tcp-flat.log")).unwrap();
    assert!(
        log.contains("# Run                  : incomplete, stopped by SIGCONT"),
        "{log}"
    );
}

#[test]
fn sigterm_during_the_first_launch_of_a_suite_says_nothing_finished_and_exits_143() {
    let (dir, merged) = temp_file("two.csv");
    let mut suite = Spawned::start(suite_command(&two_launch_suite(dir.path()), &merged), dir.path());
    let first = dir.path().join("two-launches/01-shm-flat.csv");
    suite.wait_until(Duration::from_secs(120), |_| csv_rows(&first) >= 1);
    signal(suite.child.id(), "TERM");
    let code = suite.finish(Duration::from_secs(60));
    let err = suite.stderr();
    assert_eq!(code, 143, "{err}");
    assert!(
        err.contains(
            "collbench suite: stopped by SIGTERM: no launch finished; not finished: [1/2] shm flat stopped after "
        ) && err.contains(", [2/2] tcp flat not started\n"),
        "{err}"
    );
    assert!(!merged.exists(), "a merged CSV of nothing");
    assert!(
        !dir.path().join("two-launches/02-tcp-flat.log").exists(),
        "the second launch started"
    );
}

/// alltoallv rounds each size to whole blocks, so its sizes differ from
/// all_reduce's: the header still counts the steps of the sweep, once.
#[test]
fn the_header_counts_each_size_of_the_sweep_once_though_alltoallv_rounds_it() {
    let out = ok(mpirun(
        3,
        &argv!["run --collectives all_reduce,alltoallv -b 8 -e 1K -n 2 --no-progress"],
    ));
    // 8, 16, ..., 1024 for all_reduce; alltoallv at 3 ranks skips the
    // sizes that round to nothing, but is no extra size
    assert_stdout_has(&out, "(8 B to 1.0 KiB, 8 sizes)\n");
}

/// A process alone in a terminal (an MPI singleton, whose MPI_Init sets
/// OMPI_COMM_WORLD_RANK in the process) draws the progress bar the docs
/// promise, and the table survives it.
#[test]
fn a_process_alone_in_a_terminal_draws_the_progress_bar() {
    let Some(pane) = Pane::open() else {
        return;
    };
    let (_dir, csv_path) = temp_file("alone.csv");
    let command = format!(
        "env -u OMPI_COMM_WORLD_RANK NO_COLOR=1 {BIN} run --collectives all_reduce -b 1M -e 16M -n 1500 -w 1 --csv {}",
        path_str(&csv_path)
    );
    pane.start(160, &command);
    let deadline = Instant::now() + Duration::from_secs(240);
    let mut bar = None;
    while bar.is_none() {
        let screen = pane.screen();
        assert!(!screen.contains(END_MARK), "it ended with no bar drawn:\n{screen}");
        assert!(Instant::now() < deadline, "no bar in time:\n{screen}");
        bar = screen
            .lines()
            .find(|l| l.contains("/10 points  all_reduce float"))
            .map(str::to_string);
        std::thread::sleep(Duration::from_millis(100));
    }
    let (screen, code) = pane.wait_end(Duration::from_secs(240));
    assert_eq!(code, 0, "{screen}");
    assert_table_survived(&screen, &csv_path);
}
