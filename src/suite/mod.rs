//! `collbench suite FILE`: one launch per transport profile and hierarchy
//! setting the file lists, progress across the whole suite, and one merged
//! CSV at the end.
//!
//! NCCL and the MPI library read their transport variables once per
//! process, so a suite cannot switch profiles inside one run: each
//! combination is its own `mpirun` (or `srun` inside a Slurm allocation)
//! of `collbench run`, writing its own CSV and log into a folder beside the
//! merged CSV. A launch that fails is reported with its exit code and its
//! last `collbench:` line (or the launcher's message, where collbench
//! printed none), and the others still run; the suite's exit code is 0
//! only when every launch succeeded, and a code that is the launcher's own
//! (a program it could not start, a rank killed) counts as 1 (`judge`), as
//! does exit 0 without a row written. The suite never sets launcher
//! environment (run-as-root permissions, oversubscription): the file's
//! `mpirun-args`/`srun-args` and the caller's environment carry those.

pub mod file;
pub mod merge;
mod stop;

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::cli::{RunArgs, SuiteArgs, TransportArg};
use crate::error::{Error, exit, say};
use crate::report::print_out;
use crate::report::progress::Progress;
use crate::report::table::shell_quote;
use file::{Launch, Suite};

/// How often a running launch's CSV is looked at for progress.
const POLL: Duration = Duration::from_millis(250);

/// How one launch ended.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub launch: Launch,
    /// The launch's exit code as the suite counts it (`judge`): `collbench
    /// run`'s own, else 1 (killed, not started, the launcher's own code).
    pub code: i32,
    pub rows: usize,
    pub observed: Option<String>,
    pub seconds: f64,
    /// Why it failed: its last `collbench:` line, else the launcher's
    /// message (or why it did not start).
    pub message: Option<String>,
    pub csv: PathBuf,
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

/// The launcher's last message in a launch's log, briefly: the first
/// paragraph of Open MPI's last banner (between lines of dashes), else the
/// last line that is not empty; at most `MESSAGE_CHARS` characters.
fn launcher_message(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let rule = |l: &&str| l.len() >= 10 && l.chars().all(|c| c == '-');
    let rules: Vec<usize> = (0..lines.len()).filter(|&i| rule(&lines[i])).collect();
    let words: Vec<&str> = match rules[..] {
        [.., open, close] => lines[open + 1..close]
            .iter()
            .skip_while(|l| l.is_empty())
            .take_while(|l| !l.is_empty())
            .flat_map(|l| l.split_whitespace())
            .collect(),
        _ => lines.iter().rev().find(|l| !l.is_empty())?.split_whitespace().collect(),
    };
    let message = words.join(" ");
    let message = message.trim_end_matches(':');
    match message.char_indices().nth(MESSAGE_CHARS) {
        _ if message.is_empty() => None,
        Some((cut, _)) => Some(format!("{}...", &message[..cut])),
        None => Some(message.to_string()),
    }
}

/// The most of a launcher's message a FAILED line quotes.
const MESSAGE_CHARS: usize = 160;

/// Whether `code` is one `collbench run` ends with (docs/exit-codes.md),
/// which mpirun and srun pass on from the ranks; any other is the
/// launcher's own (a program it could not start, a rank killed by a
/// signal: 128 + the signal).
fn is_run_code(code: i32) -> bool {
    crate::error::EXIT_CODES
        .iter()
        .filter(|c| c.commands.contains(&"run"))
        .any(|c| c.code.parse() == Ok(code))
        || crate::engine::stop::is_stop_code(code)
}

/// How a launch that ended counts (docs/transports.md): its code when
/// collbench's run ended with it and said why (a `collbench:` line), else
/// 1; and why it failed, in the launcher's words where collbench said
/// nothing. `launcher` is the program that ran it (`mpirun`).
fn judge(status: ExitStatus, log: &Path, launcher: &str) -> (i32, Option<String>) {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return (0, None);
    }
    let ours = last_collbench_line(log);
    let theirs = launcher_message(log).unwrap_or_else(|| "its log holds no message".into());
    let why = match status.code() {
        Some(code) if is_run_code(code) => match ours {
            Some(line) => return (code, Some(line)),
            None => theirs,
        },
        Some(code) => format!("{launcher}'s own exit code {code}: {theirs}"),
        None => format!(
            "{launcher} was killed by signal {}: {theirs}",
            status.signal().unwrap_or(0)
        ),
    };
    (i32::from(exit::RUNTIME), Some(why))
}

/// Why a launch that ended with exit code 0 but wrote no row failed.
fn no_rows(log: &Path) -> String {
    let header = match planned_points(log) {
        Some(points) => format!("its plan has {points} points"),
        None => "its log holds no run header: is the program launched collbench (--binary)?".into(),
    };
    format!("ended with exit code 0 without writing a row ({header})")
}

/// One launch as it will run: the command, and where its CSV and log go.
struct Planned {
    launch: Launch,
    cmd: Vec<String>,
    csv: PathBuf,
    log: PathBuf,
}

/// Runs the suite; the exit code is 0 when every launch succeeded, else
/// the highest code a launch counts as (`judge`: 1 when one was killed or
/// could not start).
pub fn run(args: &SuiteArgs) -> Result<u8, Error> {
    let suite = Suite::load(&args.file)?;
    let launcher = args
        .launcher
        .unwrap_or(suite.launcher)
        .resolve(std::env::var_os("SLURM_JOB_ID").is_some());
    let binary = match &args.binary {
        Some(b) => {
            check_binary(b)?;
            b.clone()
        }
        None => std::env::current_exe()
            .map_err(|e| Error::runtime(format!("cannot find this program's path ({e}); pass --binary")))?,
    };
    let output = output_path(args, &suite)?;
    let folder = {
        let stem = output
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        output.with_file_name(format!("{stem}-launches"))
    };
    let run_toml = folder.join("run.toml");
    let planned = plan_launches(&suite, launcher, &binary, &folder, &run_toml)?;
    if args.dry_run {
        let lines: String = planned
            .iter()
            .map(|p| {
                let line: Vec<String> = p.cmd.iter().map(|a| shell_quote(a)).collect();
                format!(
                    "{} > {} 2>&1\n",
                    line.join(" "),
                    shell_quote(&p.log.display().to_string())
                )
            })
            .collect();
        print_out(&lines);
        return Ok(exit::OK);
    }
    std::fs::create_dir_all(&folder)
        .map_err(|e| Error::usage(format!("cannot create the folder {}: {e}", folder.display())))?;
    std::fs::write(&run_toml, &suite.run_toml)
        .map_err(|e| Error::usage(format!("cannot write {}: {e}", run_toml.display())))?;
    say(&format!(
        "collbench suite {}: {} launch{} with {} ({}), per-launch files in {}",
        suite.name,
        planned.len(),
        if planned.len() == 1 { "" } else { "es" },
        launcher.program(),
        suite
            .ranks
            .map_or_else(|| "the launcher's rank count".into(), |r| format!("{r} ranks")),
        folder.display()
    ));
    let mut progress = SuiteProgress {
        // The suite is one process writing to its own terminal: the bar is
        // safe there whenever stderr is one (`report::progress`).
        bar: Progress::new(args.progress(), None, false, "collbench suite"),
        done_points: 0,
        per_launch: None,
        cycles: suite.cycles.max(1),
        stop: stop::Stop::install()?,
    };
    let (outcomes, interrupted) = progress.launches(&planned);
    progress.bar.finish();
    match progress.stop.signal {
        Some(signal) => stop::finish(
            signal,
            &planned,
            &outcomes,
            interrupted.as_ref(),
            &output,
            args.overwrite,
        ),
        None => finish(&suite, &outcomes, &output, args.overwrite),
    }
}

/// `--binary`, refused (exit 2, before any launch) unless it is an
/// executable file here; a name without a `/` is looked up in PATH, as
/// the launcher looks it up.
fn check_binary(binary: &Path) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    let why = |path: &Path| match path.metadata() {
        Err(e) => Some(format!("cannot be read ({e})")),
        Ok(m) if m.is_dir() => Some("is a folder".to_string()),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => Some("is not executable".to_string()),
        Ok(_) => None,
    };
    let problem = if binary.to_string_lossy().contains('/') {
        why(binary)
    } else {
        let paths = std::env::var_os("PATH").unwrap_or_default();
        let found = std::env::split_paths(&paths).any(|folder| why(&folder.join(binary)).is_none());
        (!found).then(|| "is no executable file in a folder of PATH".to_string())
    };
    match problem {
        None => Ok(()),
        Some(why) => Err(Error::usage(format!(
            "--binary {} {why}: each launch runs it as `collbench run`; give the path of a collbench binary",
            binary.display()
        ))),
    }
}

/// Every launch's command line, CSV and log (in `folder`).
fn plan_launches(
    suite: &Suite,
    launcher: crate::world::Launcher,
    binary: &Path,
    folder: &Path,
    run_toml: &Path,
) -> Result<Vec<Planned>, Error> {
    let mut planned = Vec::new();
    for (i, l) in suite.launches.iter().enumerate() {
        let base = folder.join(format!("{:02}-{}", i + 1, l.label()));
        let csv = base.with_extension("csv");
        let mut cmd = suite.launcher_args(launcher);
        cmd.extend([binary.display().to_string(), "run".into()]);
        cmd.extend(launch_options(l, run_toml, &csv).to_args()?);
        planned.push(Planned {
            launch: l.clone(),
            cmd,
            log: base.with_extension("log"),
            csv,
        });
    }
    Ok(planned)
}

/// The merged CSV: `--output`, else the file's `output`, else one named
/// after the suite and the time; an existing one is refused unless
/// `--overwrite`, a folder even with it.
fn output_path(args: &SuiteArgs, suite: &Suite) -> Result<PathBuf, Error> {
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
    crate::report::paths::check_distinct(&[("--output", &output)], &[("the suite file", &args.file)])?;
    crate::report::refuse_existing(&output, args.overwrite, "CSV")?;
    crate::report::paths::check_writable("--output", &output)?;
    Ok(output)
}

/// Progress across the whole suite: points done, and the points one
/// launch plans (read from the first launch's table header).
struct SuiteProgress {
    bar: Progress,
    done_points: u64,
    per_launch: Option<u64>,
    cycles: u64,
    stop: stop::Stop,
}

impl SuiteProgress {
    /// Runs every launch in turn until a stop signal: the launches that
    /// ended before it, and the one it interrupted.
    fn launches(&mut self, planned: &[Planned]) -> (Vec<Outcome>, Option<Outcome>) {
        let mut finished = Vec::new();
        for i in 0..planned.len() {
            if self.stop.requested() {
                return (finished, None);
            }
            let outcome = self.launch(planned, i);
            if self.stop.signal.is_some() {
                return (finished, Some(outcome));
            }
            finished.push(outcome);
        }
        (finished, None)
    }

    /// Runs launch `i` of `planned` to its end, watching its CSV grow.
    fn launch(&mut self, planned: &[Planned], i: usize) -> Outcome {
        let (n, p) = (planned.len(), &planned[i]);
        let started = Instant::now();
        let spawned = File::create(&p.log)
            .and_then(|f| Ok((f.try_clone()?, f)))
            .and_then(|(out, err)| {
                // A group of its own: a Ctrl-C reaches the suite alone,
                // which tells the launch once (`stop`).
                Command::new(&p.cmd[0])
                    .args(&p.cmd[1..])
                    .process_group(0)
                    .stdin(Stdio::null())
                    .stdout(out)
                    .stderr(err)
                    .spawn()
            });
        let (code, message) = match spawned {
            Err(e) => (
                i32::from(exit::RUNTIME),
                Some(format!("cannot start {}: {e}", p.cmd[0])),
            ),
            Ok(mut child) => match self.wait(&mut child, p, (i, n)) {
                Ok(status) => judge(status, &p.log, &p.cmd[0]),
                Err(e) => (i32::from(exit::RUNTIME), Some(format!("lost the launch: {e}"))),
            },
        };
        let rows = rows_so_far(&p.csv);
        // exit 0 is not enough: the launch must have measured
        let (code, message) = match (code, rows) {
            (0, 0) => (i32::from(exit::RUNTIME), Some(no_rows(&p.log))),
            _ => (code, message),
        };
        self.done_points += rows as u64;
        let outcome = Outcome {
            launch: p.launch.clone(),
            code,
            rows,
            observed: observed_of(&p.csv),
            seconds: started.elapsed().as_secs_f64(),
            message,
            csv: p.csv.clone(),
        };
        if self.stop.signal.is_none() {
            self.bar.suspend(|| say(&outcome_line(i + 1, n, &outcome, &p.log)));
        }
        outcome
    }

    /// Waits for `child`, moving the bar as its CSV grows; `remaining`
    /// launches come after it.
    fn wait(
        &mut self,
        child: &mut std::process::Child,
        p: &Planned,
        (i, n): (usize, usize),
    ) -> std::io::Result<ExitStatus> {
        let remaining = n - i - 1;
        loop {
            if let Some(status) = child.try_wait()? {
                return Ok(status);
            }
            self.stop.watch(child);
            if self.per_launch.is_none() {
                self.per_launch = planned_points(&p.log).map(|points| points * self.cycles);
            }
            let planned = self.per_launch.unwrap_or(0);
            let current = rows_so_far(&p.csv) as u64;
            let total = self.done_points + planned.max(current) * (remaining as u64 + 1);
            let what = format!("[{}/{n}] {} {}", i + 1, p.launch.transport, p.launch.hierarchy);
            self.bar.set(self.done_points + current, Some(total), &what);
            std::thread::sleep(POLL);
        }
    }
}

/// The CSVs of `outcomes` that exist, the files to merge.
fn written_csvs(outcomes: &[Outcome]) -> Vec<&Path> {
    outcomes
        .iter()
        .filter(|o| o.csv.exists())
        .map(|o| o.csv.as_path())
        .collect()
}

/// After the last launch: the merged CSV, the summary table, the
/// transports side by side, and the suite's exit code.
fn finish(suite: &Suite, outcomes: &[Outcome], output: &Path, overwrite: bool) -> Result<u8, Error> {
    let inputs = written_csvs(outcomes);
    let merged = if inputs.is_empty() {
        None
    } else {
        Some(merge::merge(&inputs, output, overwrite)?.iter().sum::<usize>())
    };
    print_out(&summary(suite, outcomes, merged, output));
    let mut transports: Vec<&str> = outcomes
        .iter()
        .filter(|o| o.code == 0)
        .map(|o| o.launch.transport.name())
        .collect();
    transports.dedup();
    if transports.len() > 1 && merged.is_some() {
        // the profiles side by side, out-of-place rows, as `collbench
        // compare --by transport` shows them (with the in-place rows too)
        crate::compare::print_after_run(
            output,
            ("this suite", "collbench suite"),
            |r| r.placement == crate::types::Placement::OutOfPlace,
            crate::types::Dimension::Transport,
            Some(transports[0]),
        );
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
    args.common.launch.transport = TransportArg::Profile(l.transport);
    args.hierarchy.hierarchy = l.hierarchy.clone();
    args.output.csv = Some(csv.to_path_buf());
    args.common.overwrite.overwrite = true;
    args.output.progress.no_progress = true;
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

    /// Open MPI's banner when it cannot run the program (mpirun 4.1.4).
    const NOT_STARTED: &str = "--------------------------------------------------------------------------
mpirun was unable to launch the specified application as it could not access
or execute an executable:

Executable: /nonexistent/collbench
Node: vm

while attempting to start process rank 0.
--------------------------------------------------------------------------
2 total processes failed to start
";

    #[test]
    fn a_launch_counts_with_run_s_code_only_where_collbench_said_why() {
        use std::os::unix::process::ExitStatusExt;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("x.log");
        let exited = |code: i32| ExitStatus::from_raw(code << 8);
        // mpirun's own codes: could not start (132), a rank killed (137)
        std::fs::write(&log, NOT_STARTED).unwrap();
        let (code, why) = judge(exited(132), &log, "mpirun");
        assert_eq!(code, 1);
        assert_eq!(
            why.as_deref(),
            Some(
                "mpirun's own exit code 132: mpirun was unable to launch the specified application as it could \
                 not access or execute an executable"
            )
        );
        // run's codes pass through with collbench's line
        std::fs::write(&log, "# collbench 0.1.0\ncollbench: validation failed: 3 wrong\n").unwrap();
        assert_eq!(
            judge(exited(3), &log, "mpirun"),
            (3, Some("collbench: validation failed: 3 wrong".into()))
        );
        assert_eq!(judge(exited(146), &log, "mpirun").0, 146);
        assert_eq!(judge(exited(137), &log, "mpirun").0, 1, "137 is no code of run");
        // a code of run's without collbench's word is the launcher's (too few slots)
        std::fs::write(
            &log,
            "----------\nThere are not enough slots available in the\nsystem:\n\n  x\n----------\n",
        )
        .unwrap();
        assert_eq!(
            judge(exited(1), &log, "mpirun"),
            (1, Some("There are not enough slots available in the system".into()))
        );
        std::fs::write(&log, "srun: error: task 0 launch failed: No such file\n\n").unwrap();
        assert_eq!(
            judge(exited(2), &log, "srun").1.as_deref(),
            Some("srun: error: task 0 launch failed: No such file")
        );
        std::fs::write(&log, "").unwrap();
        assert_eq!(
            judge(ExitStatus::from_raw(9), &log, "srun"),
            (1, Some("srun was killed by signal 9: its log holds no message".into()))
        );
        assert_eq!(judge(exited(0), &log, "srun"), (0, None));
        std::fs::write(&log, "x ".repeat(200)).unwrap();
        let long = launcher_message(&log).unwrap();
        assert_eq!(long.chars().count(), MESSAGE_CHARS + 3, "{long}");
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
