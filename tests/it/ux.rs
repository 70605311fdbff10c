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
        let script = format!("{command}; echo {END_MARK} $?; sleep 600");
        let started = self.tmux(&[
            "new-session",
            "-d",
            "-x",
            &width.to_string(),
            "-y",
            "50",
            "sh",
            "-c",
            &script,
        ]);
        assert!(started.status.success(), "tmux: {}", stderr(&started));
        self.tmux(&["set-option", "-g", "history-limit", "50000"]);
        let width_seen = stdout(&self.tmux(&["display-message", "-p", "#{pane_width}"]));
        assert_eq!(
            width_seen.trim(),
            width.to_string(),
            "the pane is not {width} columns wide"
        );
        let deadline = Instant::now() + limit;
        loop {
            let screen = stdout(&self.tmux(&["capture-pane", "-p", "-J", "-S", "-"]));
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

/// The table rows the CSV says were measured, as the screen must show
/// them: per collective and size, `size count` and each placement's time
/// (2 decimals), in the CSV's order.
fn expected_rows(csv_path: &Path) -> Vec<(String, String, Vec<String>)> {
    let csv = Csv::read(&csv_path.to_path_buf());
    let mut rows: Vec<(String, String, Vec<String>)> = Vec::new();
    for r in &csv.rows {
        let key = (
            csv.get(r, "collective").to_string(),
            format!("{} {}", csv.get(r, "size_bytes"), csv.get(r, "count")),
        );
        let time = format!("{:.2}", csv.num(r, "time_us"));
        match rows.last_mut() {
            Some(last) if (last.0.as_str(), last.1.as_str()) == (key.0.as_str(), key.1.as_str()) => last.2.push(time),
            _ => rows.push((key.0, key.1, vec![time])),
        }
    }
    rows
}

/// Every table row of the CSV is on screen, whole (13 fields: size, count,
/// type, op, root, then time, algbw, busbw, #wrong per placement), under
/// its collective's heading, in order; the footer is there too.
fn assert_table_survived(screen: &str, csv_path: &Path) {
    let want = expected_rows(csv_path);
    assert!(!want.is_empty(), "the CSV has no rows");
    let mut section = String::new();
    let mut got: Vec<(String, String, Vec<String>)> = Vec::new();
    for line in screen.lines() {
        if let Some(rest) = line.strip_prefix("# ")
            && rest.contains("(hierarchy ")
        {
            section = rest.split_whitespace().next().unwrap_or("").to_string();
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.first().is_some_and(|f| f.parse::<u64>().is_ok()) {
            assert_eq!(fields.len(), 13, "a damaged table row on screen: {line:?}\n{screen}");
            got.push((
                section.clone(),
                format!("{} {}", fields[0], fields[1]),
                vec![fields[5].to_string(), fields[9].to_string()],
            ));
        }
    }
    assert_eq!(got.len(), want.len(), "rows on screen:\n{screen}");
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((&g.0, &g.1), (&w.0, &w.1), "{screen}");
        assert_eq!(g.2, w.2, "the times of {} {} differ from the CSV's", w.0, w.1);
    }
    for footer in ["# Avg bus bandwidth    : ", "# Validation           : OK"] {
        assert!(screen.contains(footer), "no {footer:?} on screen:\n{screen}");
    }
    assert!(screen.contains("# collbench "), "the header is gone:\n{screen}");
}

fn terminal_run(extra: &[&str]) {
    let Some(pane) = Pane::open() else {
        return;
    };
    let dir = tempdir();
    let csv_path = dir.path().join("t.csv");
    let mut args = vec![
        "run",
        "--collectives",
        "all_reduce,all_gather",
        "-e",
        "1M",
        "--csv",
        path_str(&csv_path),
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

#[test]
fn the_header_echoes_the_command_and_sizes_and_the_footer_reads_as_nccl_tests_does() {
    let dir = tempdir();
    let csv_path = dir.path().join("f.csv");
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
    let out = mpirun(2, &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
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
