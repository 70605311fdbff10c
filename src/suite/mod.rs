//! `collbench suite FILE`: one launch per transport profile and hierarchy
//! setting the file lists, progress across the whole suite, and one merged
//! CSV at the end.
//!
//! NCCL and the MPI library read their transport variables once per
//! process, so a suite cannot switch profiles inside one run: each
//! combination is its own `mpirun` (or `srun` inside a Slurm allocation)
//! of `collbench run`, writing its own CSV and log into a folder beside the
//! merged CSV. A launch that fails is reported with its exit code and its
//! last `collbench:` line, and the others still run; the suite's exit code
//! is 0 only when every launch succeeded. The suite never sets launcher
//! environment (run-as-root permissions, oversubscription): the file's
//! `mpirun-args`/`srun-args` and the caller's environment carry those.

pub mod file;
pub mod merge;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cli::{RunArgs, SuiteArgs, TransportArg};
use crate::error::{Error, exit};
use crate::report::ProgressMode;
use file::{Launch, Suite};

/// How often a running launch's CSV is looked at for progress.
const POLL: Duration = Duration::from_millis(250);

/// How one launch ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub launch: Launch,
    /// The launch's exit code (-1: killed by a signal or not started).
    pub code: i32,
    pub rows: usize,
    pub observed: Option<String>,
    pub seconds: f64,
    /// The launch's last `collbench:` line, or why it did not start.
    pub message: Option<String>,
    pub csv: PathBuf,
}

/// `arg` as a shell would need it, for printed commands.
fn shell_quote(arg: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "-_./,:=+@%^".contains(c);
    if !arg.is_empty() && arg.chars().all(safe) {
        arg.to_string()
    } else {
        format!("'{}'", arg.replace('\'', "'\\''"))
    }
}

/// The data rows of a CSV being written (lines after the header).
fn rows_so_far(path: &Path) -> usize {
    std::fs::read(path)
        .map(|b| b.iter().filter(|&&c| c == b'\n').count().saturating_sub(1))
        .unwrap_or(0)
}

/// `# plan      : 144 points per sweep` from a launch's table header.
fn planned_points(log: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().find_map(|l| {
        let rest = l.strip_prefix("# plan")?.split_once(':')?.1;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The `transport_observed` of a launch's first row.
fn observed_of(csv: &Path) -> Option<String> {
    let mut r = csv::Reader::from_path(csv).ok()?;
    let at = r.headers().ok()?.iter().position(|h| h == "transport_observed")?;
    let row = r.records().next()?.ok()?;
    row.get(at).map(String::from)
}

/// The last line collbench wrote about a failure.
fn last_collbench_line(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines()
        .rev()
        .find(|l| l.starts_with("collbench:") || l.contains(": collbench:"))
        .map(|l| l.trim().to_string())
}

fn progress_bar(args: &SuiteArgs) -> ProgressBar {
    let target = match args.progress() {
        ProgressMode::Never => ProgressDrawTarget::hidden(),
        ProgressMode::Always => ProgressDrawTarget::term_like(Box::new(console::Term::stderr())),
        ProgressMode::Auto => ProgressDrawTarget::stderr(),
    };
    let bar = ProgressBar::with_draw_target(Some(0), target);
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} points  {msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// Runs the suite; the exit code is 0 when every launch succeeded, else
/// the highest code a launch returned (1 when one was killed or could not
/// start).
pub fn run(args: &SuiteArgs) -> Result<u8, Error> {
    let suite = Suite::load(&args.file)?;
    let cycles = suite.cycles.max(1);
    let launcher = args
        .launcher
        .unwrap_or(suite.launcher)
        .resolve(std::env::var_os("SLURM_JOB_ID").is_some());
    let binary = match &args.binary {
        Some(b) => b.clone(),
        None => std::env::current_exe()
            .map_err(|e| Error::runtime(format!("cannot find this program's path ({e}); pass --binary")))?,
    };
    let stamp: String = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let output = args
        .output
        .clone()
        .or_else(|| suite.output.clone())
        .unwrap_or_else(|| PathBuf::from("results").join(format!("suite-{}-{stamp}.csv", suite.name)));
    if output.exists() && !args.overwrite {
        return Err(Error::usage(format!(
            "CSV file {} already exists; choose another --output or pass --overwrite",
            output.display()
        )));
    }
    let folder = {
        let stem = output
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        output.with_file_name(format!("{stem}-launches"))
    };
    let run_toml = folder.join("run.toml");
    let mut commands: Vec<(Launch, Vec<String>, PathBuf, PathBuf)> = Vec::new();
    for (i, l) in suite.launches.iter().enumerate() {
        let base = folder.join(format!("{:02}-{}", i + 1, l.label()));
        let csv = base.with_extension("csv");
        let log = base.with_extension("log");
        let mut cmd = suite.launcher_args(launcher);
        cmd.extend([binary.display().to_string(), "run".into()]);
        cmd.extend(launch_options(l, &run_toml, &csv).to_args()?);
        commands.push((l.clone(), cmd, csv, log));
    }
    if args.dry_run {
        for (_, cmd, _, log) in &commands {
            let line: Vec<String> = cmd.iter().map(|a| shell_quote(a)).collect();
            println!("{} > {} 2>&1", line.join(" "), shell_quote(&log.display().to_string()));
        }
        return Ok(exit::OK);
    }
    std::fs::create_dir_all(&folder)
        .map_err(|e| Error::usage(format!("cannot create the folder {}: {e}", folder.display())))?;
    std::fs::write(&run_toml, &suite.run_toml)
        .map_err(|e| Error::usage(format!("cannot write {}: {e}", run_toml.display())))?;

    let n = commands.len();
    eprintln!(
        "collbench suite {}: {n} launch{} with {} ({}), per-launch files in {}",
        suite.name,
        if n == 1 { "" } else { "es" },
        launcher.program(),
        suite
            .ranks
            .map_or_else(|| "the launcher's rank count".into(), |r| format!("{r} ranks")),
        folder.display()
    );
    let bar = progress_bar(args);
    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut done_points: u64 = 0;
    let mut per_launch: Option<u64> = None;
    for (i, (launch, cmd, csv, log)) in commands.iter().enumerate() {
        bar.set_message(format!("[{}/{n}] {} {}", i + 1, launch.transport, launch.hierarchy));
        let started = Instant::now();
        let spawned = File::create(log)
            .and_then(|f| Ok((f.try_clone()?, f)))
            .and_then(|(out, err)| {
                Command::new(&cmd[0])
                    .args(&cmd[1..])
                    .stdin(Stdio::null())
                    .stdout(out)
                    .stderr(err)
                    .spawn()
            });
        let (code, message) = match spawned {
            Err(e) => (-1, Some(format!("cannot start {}: {e}", cmd[0]))),
            Ok(mut child) => {
                let status = loop {
                    match child.try_wait() {
                        Ok(Some(status)) => break Ok(status),
                        Ok(None) => {}
                        Err(e) => break Err(e),
                    }
                    if per_launch.is_none() {
                        per_launch = planned_points(log).map(|p| p * cycles);
                    }
                    let planned = per_launch.unwrap_or(0);
                    let remaining = (n - i - 1) as u64;
                    let current = rows_so_far(csv) as u64;
                    bar.set_length(done_points + planned.max(current) * (remaining + 1));
                    bar.set_position(done_points + current);
                    std::thread::sleep(POLL);
                };
                match status {
                    Ok(s) => (
                        s.code().unwrap_or(-1),
                        (!s.success()).then(|| last_collbench_line(log)).flatten(),
                    ),
                    Err(e) => (-1, Some(format!("lost the launch: {e}"))),
                }
            }
        };
        let rows = rows_so_far(csv);
        done_points += rows as u64;
        bar.set_position(done_points);
        let outcome = Outcome {
            launch: launch.clone(),
            code,
            rows,
            observed: observed_of(csv),
            seconds: started.elapsed().as_secs_f64(),
            message,
            csv: csv.clone(),
        };
        bar.suspend(|| eprintln!("{}", outcome_line(i + 1, n, &outcome, log)));
        outcomes.push(outcome);
    }
    bar.finish_and_clear();

    let inputs: Vec<&Path> = outcomes
        .iter()
        .filter(|o| o.csv.exists())
        .map(|o| o.csv.as_path())
        .collect();
    let merged = if inputs.is_empty() {
        None
    } else {
        Some(merge::merge(&inputs, &output, args.overwrite)?.iter().sum::<usize>())
    };
    print!("{}", summary(&suite, &outcomes, merged, &output));
    let ok: Vec<&Outcome> = outcomes.iter().filter(|o| o.code == 0).collect();
    let transports: Vec<&str> = {
        let mut t: Vec<&str> = ok.iter().map(|o| o.launch.transport.name()).collect();
        t.dedup();
        t
    };
    if transports.len() > 1 && merged.is_some() {
        print_transport_comparison(&output, transports[0]);
    }
    let worst = outcomes
        .iter()
        .filter(|o| o.code != 0)
        .map(|o| u8::try_from(o.code).unwrap_or(exit::RUNTIME))
        .max();
    Ok(worst.unwrap_or(exit::OK))
}

/// What one launch's `collbench run` is given on its command line: the
/// `[run]` table as its config file, and what the suite sets per launch
/// (which the table may not set, so no option is given twice).
fn launch_options(l: &Launch, run_toml: &Path, csv: &Path) -> RunArgs {
    let mut args = RunArgs::defaults();
    args.config = Some(run_toml.to_path_buf());
    args.transport = TransportArg::Profile(l.transport);
    args.hierarchy = l.hierarchy.clone();
    args.csv = Some(csv.to_path_buf());
    args.overwrite = true;
    args.no_progress = true;
    args
}

fn outcome_line(i: usize, n: usize, o: &Outcome, log: &Path) -> String {
    let what = format!("[{i}/{n}] {} {}", o.launch.transport, o.launch.hierarchy);
    if o.code == 0 {
        format!(
            "collbench suite: {what}: ok, {} rows, observed {}, {:.1} s",
            o.rows,
            o.observed.as_deref().unwrap_or("-"),
            o.seconds
        )
    } else {
        format!(
            "collbench suite: {what}: FAILED with exit code {} after {:.1} s{} (log: {})",
            o.code,
            o.seconds,
            o.message.as_deref().map(|m| format!(": {m}")).unwrap_or_default(),
            log.display()
        )
    }
}

/// The table after the suite: one line per launch.
fn summary(suite: &Suite, outcomes: &[Outcome], merged: Option<usize>, output: &Path) -> String {
    let failed = outcomes.iter().filter(|o| o.code != 0).count();
    let mut s = format!(
        "# suite {}: {} launches, {} ok, {failed} failed; ",
        suite.name,
        outcomes.len(),
        outcomes.len() - failed
    );
    s += &match merged {
        Some(rows) => format!("{rows} rows in {}\n", output.display()),
        None => "no rows to merge\n".into(),
    };
    s += &format!(
        "# {:>3}  {:<8} {:<24} {:<8} {:>6}  {:<28} {:>8}\n",
        "", "profile", "hierarchy", "result", "rows", "observed", "seconds"
    );
    for (i, o) in outcomes.iter().enumerate() {
        s += &format!(
            "# {:>3}  {:<8} {:<24} {:<8} {:>6}  {:<28} {:>8.1}\n",
            i + 1,
            o.launch.transport.name(),
            o.launch.hierarchy,
            if o.code == 0 {
                "ok".to_string()
            } else {
                format!("exit {}", o.code)
            },
            o.rows,
            o.observed.as_deref().unwrap_or("-"),
            o.seconds
        );
    }
    s
}

/// The profiles side by side, out-of-place rows, as `collbench compare
/// --by transport` shows them (which also has the in-place rows).
fn print_transport_comparison(csv: &Path, reference: &str) {
    use crate::report::compare::{Metric, by_mode, input, text};
    let report = input::read_file(csv).and_then(|rows| {
        let rows: Vec<_> = rows
            .into_iter()
            .filter(|r| r.record.placement == crate::types::Placement::OutOfPlace)
            .collect();
        by_mode::compare_modes(
            "this suite",
            &rows,
            by_mode::Dimension::Transport,
            Metric::Busbw,
            Some(reference),
        )
    });
    match report {
        Ok(report) => {
            for line in text::modes(&report).lines() {
                println!("# {line}");
            }
        }
        Err(e) => eprintln!("collbench suite: warning: no transport comparison: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_commands_quote_what_a_shell_would_split() {
        assert_eq!(shell_quote("--transport"), "--transport");
        assert_eq!(shell_quote("rs-ar-ag,reduce-bcast"), "rs-ar-ag,reduce-bcast");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn progress_reads_the_plan_and_the_rows_written_so_far() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        std::fs::write(&log, "# collbench 0.1.0\n# plan      : 144 points per sweep\n").unwrap();
        assert_eq!(planned_points(&log), Some(144));
        let csv = dir.path().join("x.csv");
        std::fs::write(&csv, "a,transport_observed\n1,ob1/vader\n2,ob1/vader\n").unwrap();
        assert_eq!(rows_so_far(&csv), 2);
        assert_eq!(observed_of(&csv).as_deref(), Some("ob1/vader"));
        assert_eq!(rows_so_far(&dir.path().join("missing.csv")), 0);
        std::fs::write(&log, "mpirun noise\ncollbench: rank 1 on h: boom\nmore noise\n").unwrap();
        assert_eq!(
            last_collbench_line(&log).as_deref(),
            Some("collbench: rank 1 on h: boom")
        );
    }
}
