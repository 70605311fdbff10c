//! Helpers shared by the integration tests: the real binary, the real
//! `mpirun`, real files.
//!
//! Every program a test starts (the binary, `mpirun`, a script) goes
//! through `output_of` or `spawn_mpirun`, which hold one of a few job slots
//! while it runs: where one harness runs many tests in parallel (plain
//! `cargo test`), more than two jobs of busy-polling MPI ranks on a 2-core
//! machine make each take many times as long (`COLLBENCH_TEST_JOBS` sets
//! the number, default 2). Under cargo-nextest, as scripts/test.sh runs
//! them, every test is a process of its own and nextest's test threads are
//! the slots (.config/nextest.toml, which also runs the fake-node, Slurm
//! and statistical tests alone). The helpers also guard against hangs: a
//! program still running after `COLLBENCH_TEST_HANG_S` seconds (default
//! 300) is killed with its whole process group, and the test fails saying
//! it hung; and they log every program's wall time where
//! `COLLBENCH_TEST_LOG` names a file. Tests assert no durations: a timing
//! target is a script that prints figures, never a timed assertion.
#![allow(dead_code)]

use std::cell::Cell;
use std::io::{BufRead, BufReader, Read};
use std::marker::PhantomData;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Condvar, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod args;
mod rows;

pub(crate) use args::argv;
pub use args::words;
pub use rows::*;

pub const BIN: &str = env!("CARGO_BIN_EXE_collbench");

/// Jobs that may run at once, over every test of the harness.
fn job_slots() -> usize {
    std::env::var("COLLBENCH_TEST_JOBS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or(2)
}

/// How long one program may run before it counts as hung.
fn hang_limit() -> Duration {
    let secs = std::env::var("COLLBENCH_TEST_HANG_S")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&s: &u64| s > 0)
        .unwrap_or(300);
    Duration::from_secs(secs)
}

/// The free job slots: a counting semaphore.
struct Slots {
    free: Mutex<Free>,
    freed: Condvar,
}

struct Free {
    slots: usize,
}

fn slots() -> &'static Slots {
    static SLOTS: OnceLock<Slots> = OnceLock::new();
    SLOTS.get_or_init(|| Slots {
        free: Mutex::new(Free { slots: job_slots() }),
        freed: Condvar::new(),
    })
}

thread_local! {
    /// Permits this test thread holds: a test that starts a second program
    /// while its first runs (a job, then `kill`) reuses its slot, so that
    /// one slot can never deadlock.
    static HELD: Cell<usize> = const { Cell::new(0) };
}

/// Job slots, held while a program runs; released on drop. Not `Send`:
/// the slot count is kept per test thread.
pub struct Permit {
    took: usize,
    _thread_bound: PhantomData<*const ()>,
}

/// Counts this thread's permit; whether it already held one.
fn nested() -> bool {
    HELD.with(|h| {
        let held = h.get();
        h.set(held + 1);
        held > 0
    })
}

/// Waits for a job slot (none when this thread already holds one).
pub fn permit() -> Permit {
    let mut took = 0;
    if !nested() {
        let slots = slots();
        let mut free = slots.free.lock().unwrap_or_else(|e| e.into_inner());
        while free.slots == 0 {
            free = slots.freed.wait(free).unwrap_or_else(|e| e.into_inner());
        }
        free.slots -= 1;
        took = 1;
    }
    Permit {
        took,
        _thread_bound: PhantomData,
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        HELD.with(|h| h.set(h.get().saturating_sub(1)));
        if self.took > 0 {
            let slots = slots();
            slots.free.lock().unwrap_or_else(|e| e.into_inner()).slots += self.took;
            slots.freed.notify_all();
        }
    }
}

/// Kills `child` and every process of its group (mpirun's ranks with it).
fn kill_group(child: &mut Child) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{}", child.id())])
        .status();
    let _ = child.kill();
    let _ = child.wait();
}

/// Reads `stream` to its end on a thread of its own: the bytes, when joined.
fn drain(stream: Option<Box<dyn Read + Send>>) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut s) = stream {
            let _ = s.read_to_end(&mut bytes);
        }
        bytes
    })
}

/// Drains the stdout and stderr of `child` (both piped), each on a thread.
fn drain_both(child: &mut Child) -> (JoinHandle<Vec<u8>>, JoinHandle<Vec<u8>>) {
    let out = drain(child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>));
    (out, err)
}

/// What `cmd` runs, for the program log: the program's file name and its
/// first arguments.
fn described(cmd: &Command) -> (String, String) {
    let program = Path::new(cmd.get_program())
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let args: Vec<String> = cmd
        .get_args()
        .take(6)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    (program, args.join(" "))
}

/// Appends one line to the file `COLLBENCH_TEST_LOG` names, when it is
/// set: the wall time of one program a test ran, the test, the program and
/// its first arguments, tab-separated (scripts/dev/slowest-tests.py reads
/// it). One `write` per line, in append mode: the tests of every process
/// share the file.
fn log_program(what: &(String, String), took: Duration) {
    use std::io::Write;
    let Some(path) = std::env::var_os("COLLBENCH_TEST_LOG") else {
        return;
    };
    let test = std::thread::current().name().unwrap_or("?").to_string();
    let line = format!(
        "{:.3}\t{test}\t{}\t{}\n",
        took.as_secs_f64(),
        what.0,
        what.1.replace(['\t', '\n'], " ")
    );
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = f.write_all(line.as_bytes());
    }
}

/// Runs `cmd` to its end in a job slot, in a process group of its own,
/// with its output captured (stdin closed, as `Command::output` does);
/// kills it and fails the test when it runs longer than the hang limit.
pub fn output_of(mut cmd: Command) -> Output {
    let _slot = permit();
    let what = format!("{:?}", cmd.get_program());
    let logged = described(&cmd);
    let started = Instant::now();
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("the test could not start {what}: {e}"));
    let (out, err) = drain_both(&mut child);
    let limit = hang_limit();
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                kill_group(&mut child);
                let stderr = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
                panic!("hung: {what} did not end within {limit:?} and was killed; its stderr:\n{stderr}");
            }
            Err(e) => panic!("waiting for {what}: {e}"),
        }
    };
    log_program(&logged, started.elapsed());
    Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    }
}

/// `mpirun -np N collbench ARGS...`, with what Open MPI needs on a CI
/// machine: root permission when running as root, and oversubscription
/// because CI has fewer cores than the tests have ranks.
pub fn mpirun(np: usize, args: &[&str]) -> Output {
    mpirun_env(np, &[], args)
}

/// `mpirun` with `env` set for every rank (and nothing of collbench's NCCL
/// search inherited from the caller unless `env` sets it).
pub fn mpirun_env(np: usize, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = mpirun_command(np, args);
    cmd.env_remove("COLLBENCH_NCCL_LIB").env_remove("NCCL_HOME");
    cmd.envs(env.iter().copied());
    run(cmd)
}

/// `mpirun -np N collbench ARGS` writing the CSV `csv`, asserting exit 0
/// and every row's arithmetic (`assert_rows_consistent` at N ranks); the
/// output and the CSV.
#[track_caller]
pub fn mpirun_rows(np: usize, args: &[&str], csv: &PathBuf) -> (Output, Csv) {
    checked_rows(mpirun(np, args), np, csv)
}

/// `out`, which must have exited 0, and the CSV `csv` it wrote, every row
/// checked at `np` ranks.
#[track_caller]
fn checked_rows(out: Output, np: usize, csv: &PathBuf) -> (Output, Csv) {
    let out = ok(out);
    let table = Csv::read(csv);
    assert_rows_consistent(&table, np as u64);
    (out, table)
}

/// `mpirun_rows` with `--csv` to a file of its own after `args`.
#[track_caller]
pub fn mpirun_csv(np: usize, args: &[&str]) -> (Output, Csv) {
    let (_dir, csv) = temp_file("rows.csv");
    mpirun_rows(np, &[args, &["--csv", path_str(&csv)]].concat(), &csv)
}

/// `collbench ARGS -g N --backend memory`: N ranks as threads of one
/// process, real collectives and validation in host memory, no MPI. For
/// what a multi-rank run prints and writes (tables, reports, sequences),
/// not for MPI itself. `ARGS` must not name another backend.
pub fn on_memory(np: usize, args: &[&str]) -> Output {
    let n = np.to_string();
    let mut all = args.to_vec();
    all.extend(["-g", &n, "--backend", "memory"]);
    collbench(&all)
}

/// `on_memory` writing the CSV `csv`, asserting exit 0 and every row's
/// arithmetic (`assert_rows_consistent` at N ranks); the output and the
/// CSV.
#[track_caller]
pub fn memory_rows(np: usize, args: &[&str], csv: &PathBuf) -> (Output, Csv) {
    checked_rows(on_memory(np, args), np, csv)
}

/// The binary alone with `env` added: for subcommands that start `mpirun`
/// themselves (suite), which then needs root permission and
/// oversubscription on a CI machine, as `mpirun` gets it here.
pub fn collbench_launching(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args).envs(env.iter().copied());
    cmd.env("OMPI_MCA_rmaps_base_oversubscribe", "1")
        .env_remove("SLURM_JOB_ID");
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    run(cmd)
}

fn mpirun_command(np: usize, args: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string()]);
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    cmd.arg(BIN).args(args).env_remove("OMPI_COMM_WORLD_RANK");
    cmd
}

/// A running `mpirun ... collbench ...` whose output can be watched. It
/// holds a job slot until it ends; dropped before `finish` (a failed
/// assertion), it is killed with its ranks.
pub struct Job {
    pub child: Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    ended: bool,
    /// For the program log, when the job ends.
    logged: (String, String),
    started: Instant,
    _slot: Permit,
}

/// Starts `mpirun -np N collbench ARGS` without waiting for it.
pub fn spawn_mpirun(np: usize, args: &[&str]) -> Job {
    spawn_job(mpirun_command(np, args))
}

/// Starts `cmd` (a launcher with its job) without waiting for it, in a
/// job slot and a process group of its own.
pub fn spawn_job(mut cmd: Command) -> Job {
    let slot = permit();
    let logged = described(&cmd);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).process_group(0);
    let mut child = cmd.spawn().expect("the test could not start mpirun");
    let lines = |stream: Box<dyn std::io::Read + Send>| {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    };
    let stdout = lines(Box::new(child.stdout.take().unwrap()));
    let stderr = lines(Box::new(child.stderr.take().unwrap()));
    Job {
        child,
        stdout,
        stderr,
        ended: false,
        logged,
        started: Instant::now(),
        _slot: slot,
    }
}

impl Job {
    /// The pid of every rank, read from the table header, within `limit`.
    pub fn rank_pids(&self, np: usize, limit: Duration) -> Vec<u32> {
        let mut pids = vec![0u32; np];
        let mut found = 0;
        let deadline = Instant::now() + limit;
        while found < np {
            let line = self
                .stdout
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("hung: no rank list in the table header within the limit");
            // "#  Rank    1 on host pid 1234", then " gpu MODEL" where the
            // host has GPUs
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.len() >= 7 && words[1] == "Rank" && words[5] == "pid" {
                let rank: usize = words[2].parse().unwrap();
                pids[rank] = words[6].parse().unwrap();
                found += 1;
            }
        }
        pids
    }

    /// Waits for the first data line of the table (a point was measured).
    pub fn wait_for_rows(&self, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let line = self
                .stdout
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
                .expect("hung: no measured row within the limit");
            if !line.starts_with('#') && !line.trim().is_empty() {
                return;
            }
        }
    }

    /// Waits for the job to end; when it is still running `limit` after
    /// this call (a generous bound: a hang guard, not a speed target), kills
    /// it and fails saying it hung. Returns the exit code and the collbench
    /// lines of stderr.
    pub fn finish(self, limit: Duration) -> (i32, Vec<String>) {
        let (code, lines) = self.finish_with_stderr(limit);
        (
            code,
            lines.into_iter().filter(|l| l.starts_with("collbench:")).collect(),
        )
    }

    /// As `finish`, with every line of stderr (the launcher's too).
    pub fn finish_with_stderr(mut self, limit: Duration) -> (i32, Vec<String>) {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.ended = true;
                std::thread::sleep(Duration::from_millis(100));
                let lines = self.stderr.try_iter().collect();
                return (status.code().unwrap_or(-1), lines);
            }
            if Instant::now() > deadline {
                self.ended = true;
                kill_group(&mut self.child);
                panic!("hung: the job did not end within {limit:?} and was killed");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        if !self.ended {
            kill_group(&mut self.child);
        }
        log_program(&self.logged, self.started.elapsed());
    }
}

/// Runs `cmds` together to their ends (the ranks of one job a plain
/// launcher loop starts, each its own process), in one job slot; when one
/// is still running after the hang limit, kills them all and fails the
/// test saying it hung. Outputs in the order of `cmds`.
pub fn run_all(cmds: Vec<Command>) -> Vec<Output> {
    let _slot = permit();
    let logged: Vec<(String, String)> = cmds.iter().map(described).collect();
    let started = Instant::now();
    let mut children: Vec<Child> = cmds
        .into_iter()
        .map(|mut cmd| {
            cmd.stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            cmd.spawn()
                .unwrap_or_else(|e| panic!("the test could not start {:?}: {e}", cmd.get_program()))
        })
        .collect();
    let drains: Vec<_> = children.iter_mut().map(drain_both).collect();
    let deadline = Instant::now() + hang_limit();
    let mut statuses = vec![None; children.len()];
    while statuses.iter().any(Option::is_none) {
        for (child, status) in children.iter_mut().zip(statuses.iter_mut()) {
            if status.is_none() {
                *status = child.try_wait().expect("waiting for a rank");
            }
        }
        if Instant::now() > deadline {
            for child in &mut children {
                kill_group(child);
            }
            panic!(
                "hung: the ranks did not all end within {:?} and were killed",
                hang_limit()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for what in &logged {
        log_program(what, started.elapsed());
    }
    statuses
        .into_iter()
        .zip(drains)
        .map(|(status, (out, err))| Output {
            status: status.expect("every rank ended"),
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        })
        .collect()
}

/// Sends `signal` (a name such as TERM, STOP, KILL) to `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) {
    let ok = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .unwrap();
    assert!(ok.success(), "kill -{signal} {pid} failed");
}

/// The binary alone (an MPI singleton where it gets that far), in the
/// current folder.
pub fn collbench(args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    run(cmd)
}

/// The binary alone, in `dir`.
pub fn collbench_in(dir: &Path, args: &[&str]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.current_dir(dir).args(args);
    run(cmd)
}

fn run(mut cmd: Command) -> Output {
    cmd.env_remove("OMPI_COMM_WORLD_RANK").env("NO_COLOR", "1");
    output_of(cmd)
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

pub fn code(out: &Output) -> i32 {
    out.status.code().unwrap_or(-1)
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `out`, asserting its exit code is 0 (its stderr shown where not).
#[track_caller]
pub fn ok(out: Output) -> Output {
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    out
}

/// `out`, asserting it exited with `want` (its stderr shown where not).
#[track_caller]
pub fn exits(want: i32, out: Output) -> Output {
    assert_eq!(code(&out), want, "{}", stderr(&out));
    out
}

/// Asserts the stdout of `out` holds `needle` (shown where not).
#[track_caller]
pub fn assert_stdout_has(out: &Output, needle: &str) {
    assert!(stdout(out).contains(needle), "{}", stdout(out));
}

/// Asserts the stderr of `out` holds `needle` (shown where not).
#[track_caller]
pub fn assert_stderr_has(out: &Output, needle: &str) {
    assert!(stderr(out).contains(needle), "{}", stderr(out));
}

/// The lines collbench itself wrote to stderr (mpirun adds banners).
pub fn our_lines(out: &Output) -> Vec<String> {
    stderr(out)
        .lines()
        .filter(|l| l.starts_with("collbench:"))
        .map(str::to_string)
        .collect()
}

/// The one line collbench wrote to stderr, asserting there is exactly one.
#[track_caller]
pub fn only_line(out: &Output) -> String {
    let lines = our_lines(out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    lines[0].clone()
}

pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary folder")
}

/// A temporary folder and the path of `name` in it (not created).
pub fn temp_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempdir();
    let path = dir.path().join(name);
    (dir, path)
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// A command line the parser refused: exit 2 and clap's complete message
/// (issue 15: the message, the allowed values, the usage and the help
/// pointer), holding `needle`, printed once.
pub fn assert_parser_error(out: &Output, needle: &str) {
    let err = stderr(out);
    assert_eq!(code(out), 2, "{err}");
    assert!(err.contains("error: "), "{err}");
    assert_eq!(err.matches(needle).count(), 1, "want {needle:?} once in\n{err}");
    assert_eq!(err.matches("For more information, try '--help'.").count(), 1, "{err}");
}
