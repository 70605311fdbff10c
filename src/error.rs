//! Errors that reach the user, and the one place that maps them to exit
//! codes (docs/exit-codes.md).
//!
//! Every message is one line that names the problem and, where there is one,
//! what to do about it. Nothing here prints but `say`, the one way lines
//! reach stderr (reports reach stdout through `report::print_out`).

use std::io::Write;

use thiserror::Error;

/// Writes one line to stderr, ignoring failure: a launcher that is tearing
/// the job down may already have closed the pipe, and a message that cannot
/// be shown must not turn into a panic. One write for the whole line, so
/// that a launcher forwarding stderr never splits it.
pub fn say(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(format!("{line}\n").as_bytes());
    let _ = err.flush();
}

/// What stopped a run, for a line a user reads: `stopped by SIGTERM`,
/// and for a SIGCONT what it means (it is no signal a user sends: the
/// launcher is ending the job, `engine::stop`).
pub fn stopped_by(cause: &str) -> String {
    match cause {
        "SIGCONT" => "stopped by SIGCONT (the launcher is ending the job)".into(),
        other => format!("stopped by {other}"),
    }
}

/// Process exit codes, documented in docs/exit-codes.md.
pub mod exit {
    pub const OK: u8 = 0;
    /// Something failed while running (MPI, a backend, an output file).
    pub const RUNTIME: u8 = 1;
    /// Bad arguments, configuration file or environment.
    pub const USAGE: u8 = 2;
    /// A result did not match its expected value (wrong > 0).
    pub const VALIDATION: u8 = 3;
    /// `compare` found a regression.
    pub const REGRESSION: u8 = 4;
    /// A watchdog timeout.
    pub const TIMEOUT: u8 = 5;
    /// `replay`: the log's ranks disagree (a divergence or a one-sided
    /// point-to-point call); nothing was run.
    pub const DIVERGENCE: u8 = 7;
    /// `doctor` found a problem in the NCCL logs (a finding above info).
    pub const FINDING: u8 = 8;
}

/// Every command with its own help (`collbench COMMAND --help`).
const ALL: &[&str] = &[
    "run", "compare", "plot", "import", "info", "topo", "suite", "workload", "replay", "check", "links", "doctor",
];
/// The commands that measure (and `suite`, whose code is its launches').
const MEASURING: &[&str] = &["run", "suite", "workload", "replay", "check", "links"];

/// One exit code as every place that lists it says it: `collbench
/// COMMAND --help` (`short`, for the commands that can end with it), the
/// README and docs/exit-codes.md (`long`). The one table of them is
/// `EXIT_CODES`; a test holds the README and the page to it.
pub struct ExitCodeDoc {
    /// `0`, ..., `128+N`.
    pub code: &'static str,
    pub short: &'static str,
    pub long: &'static str,
    pub commands: &'static [&'static str],
}

/// Every exit code, in order (see `exit`).
pub const EXIT_CODES: &[ExitCodeDoc] = &[
    ExitCodeDoc {
        code: "0",
        short: "ok",
        long: "ok",
        commands: ALL,
    },
    ExitCodeDoc {
        code: "1",
        short: "runtime failure",
        long: "runtime failure (MPI, NCCL, CUDA, memory, an output file mid-run; `--backend nccl` without a GPU, \
               a CUDA driver or libnccl; a transport that contradicts `--transport`); the failing rank prints one \
               line and takes the job down",
        commands: &[
            "run", "compare", "plot", "import", "suite", "workload", "replay", "check", "links",
        ],
    },
    ExitCodeDoc {
        code: "2",
        short: "usage or configuration error (an option, a file, an environment variable)",
        long: "usage or configuration error: bad option, config file, environment variable, output path (one that \
               is another output or an input of the command included), or a combination the backend cannot run; \
               nothing was measured. For `compare`, `plot` and `import`: an unreadable, incompatible or \
               unrecognised input file; for `replay`: a log this launch cannot replay; for `check`: a bad profile \
               or one the launch cannot run; for `doctor`: a log that cannot be read or holds no NCCL line",
        commands: ALL,
    },
    ExitCodeDoc {
        code: "3",
        short: "validation failed (wrong elements; every row is kept)",
        long: "validation failed: some result had wrong elements (the sweep still completes and every row is kept)",
        commands: &["run", "suite", "workload", "replay", "links"],
    },
    ExitCodeDoc {
        code: "4",
        short: "a regression or a case of BASE missing from NEW",
        long: "`compare` found a regression: some row got worse by more than the threshold, clearly (p < alpha), \
               or a case of the baseline is missing from the new run",
        commands: &["compare"],
    },
    ExitCodeDoc {
        code: "5",
        short: "timeout (a point or the set-up ran longer than --timeout)",
        long: "a point (or the set-up) ran longer than `--timeout`: a rank hung or a peer stopped; rank 0's \
               reports are completed",
        commands: MEASURING,
    },
    ExitCodeDoc {
        code: "6",
        short: "a check failed or was flaky",
        long: "`collbench check`: a check failed or was flaky (with `--strict`, warned) against its profile; the \
               verdict files name the node ([check.md](check.md#exit-code))",
        commands: &["check"],
    },
    ExitCodeDoc {
        code: "7",
        short: "the log's ranks disagree (nothing was run)",
        long: "`replay`: the log's ranks disagree (a divergence between ranks at the same place of a \
               communicator, or a one-sided Send or Recv): nothing was run; `--check-only` prints the analysis",
        commands: &["replay"],
    },
    ExitCodeDoc {
        code: "8",
        short: "doctor found a problem above info (a finding of severity warn or error)",
        long: "`doctor`: a problem was found in the NCCL logs (a finding of severity warn or error; \
               [doctor.md](doctor.md))",
        commands: &["doctor"],
    },
    ExitCodeDoc {
        code: "9",
        short: "a required check could not run or could not tell (not judged)",
        long: "`collbench check`: no check failed, but a check the profile requires could not be judged (one rank, \
               one node for a pair check, fewer than 4 nodes for a finder check, a node too noisy to tell), or \
               nothing was: neither pass nor fail ([check.md](check.md#exit-code))",
        commands: &["check"],
    },
    ExitCodeDoc {
        code: "128+N",
        short: "stopped by signal N (129 SIGHUP, 130 SIGINT, 143 SIGTERM, 146 SIGCONT: a launcher ending the job; every finished point is kept)",
        long: "stopped by SIGHUP, SIGINT, SIGTERM or a launcher's SIGCONT (129, 130, 143, 146: 128 + the signal); every finished point is kept",
        commands: MEASURING,
    },
];

/// `Exit codes: 0 ok, 1 runtime failure, ...` for `command`'s help, or
/// for every command (`None`: the README, `collbench --help`).
pub fn exit_codes_line(command: Option<&str>) -> String {
    let codes: Vec<String> = EXIT_CODES
        .iter()
        .filter(|c| command.is_none_or(|name| c.commands.contains(&name)))
        .map(|c| format!("{} {}", c.code, c.short))
        .collect();
    format!("Exit codes: {}. Details: docs/exit-codes.md.", codes.join(", "))
}

/// docs/exit-codes.md's table: every code, what it means, which commands
/// end with it.
pub fn exit_codes_markdown() -> String {
    let mut text = String::from("| code | meaning | commands |\n|---|---|---|\n");
    for c in EXIT_CODES {
        let commands = if c.commands == ALL {
            "every command".to_string()
        } else {
            c.commands
                .iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        text += &format!("| {} | {} | {commands} |\n", c.code, c.long);
    }
    text
}

#[derive(Debug, Error)]
pub enum Error {
    /// Bad input of any kind; nothing was measured.
    #[error("{0}")]
    Usage(String),
    /// A failure while running.
    #[error("{0}")]
    Runtime(String),
    /// The sweep finished, but some results were wrong.
    #[error("validation failed: {wrong} wrong elements in {points} of {checked} checked points")]
    Validation { wrong: u64, points: usize, checked: usize },
    /// `replay`: the logged ranks disagree; nothing was run.
    #[error("{0}")]
    Divergence(String),
    /// A failure the ranks agreed on and one of them already printed (see
    /// `World::agree`): nothing is left to say, only the exit code.
    #[error("a failure already reported (exit code {0})")]
    Reported(u8),
}

impl Error {
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::Usage(msg.into())
    }

    pub fn runtime(msg: impl Into<String>) -> Error {
        Error::Runtime(msg.into())
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => exit::USAGE,
            Error::Runtime(_) => exit::RUNTIME,
            Error::Validation { .. } => exit::VALIDATION,
            Error::Divergence(_) => exit::DIVERGENCE,
            Error::Reported(code) => *code,
        }
    }

    /// Rebuilds an error from an exit code and its message, for errors that
    /// travel between ranks as (code, text).
    pub fn from_code(code: u8, msg: String) -> Error {
        match code {
            exit::USAGE => Error::Usage(msg),
            exit::DIVERGENCE => Error::Divergence(msg),
            _ => Error::Runtime(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_names_its_signal_and_says_what_a_launchers_sigcont_means() {
        assert_eq!(stopped_by("SIGTERM"), "stopped by SIGTERM");
        assert_eq!(stopped_by("timeout"), "stopped by timeout");
        assert_eq!(
            stopped_by("SIGCONT"),
            "stopped by SIGCONT (the launcher is ending the job)"
        );
    }

    #[test]
    fn exit_codes_match_the_documented_table() {
        assert_eq!(Error::usage("x").exit_code(), 2);
        assert_eq!(Error::runtime("x").exit_code(), 1);
        assert_eq!(
            Error::Validation {
                wrong: 1,
                points: 1,
                checked: 2
            }
            .exit_code(),
            3
        );
        // compare returns it as its code; nothing else ends with it
        assert_eq!(exit::REGRESSION, 4);
        assert_eq!(exit::TIMEOUT, 5);
        assert_eq!(Error::Divergence("x".into()).exit_code(), 7);
        assert_eq!(Error::from_code(7, "x".into()).exit_code(), 7);
        // the table every help, the README and the docs quote has each
        let numbers: Vec<&str> = EXIT_CODES.iter().map(|c| c.code).collect();
        assert_eq!(numbers, ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "128+N"]);
        for code in [
            exit::OK,
            exit::RUNTIME,
            exit::USAGE,
            exit::VALIDATION,
            exit::REGRESSION,
            exit::TIMEOUT,
        ] {
            assert!(numbers.contains(&code.to_string().as_str()));
        }
        assert!(numbers.contains(&exit::DIVERGENCE.to_string().as_str()));
        assert!(numbers.contains(&exit::FINDING.to_string().as_str()));
    }

    /// `text` holds `want` between `begin` and `end`; `COLLBENCH_BLESS=1`
    /// writes it there.
    fn generated(file: &str, begin: &str, end: &str, want: &str) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let page = std::fs::read_to_string(&path).unwrap();
        let (before, rest) = page
            .split_once(begin)
            .unwrap_or_else(|| panic!("{file} has no {begin:?}"));
        let (got, after) = rest.split_once(end).unwrap_or_else(|| panic!("{file} has no {end:?}"));
        if got != want {
            if std::env::var_os("COLLBENCH_BLESS").is_some() {
                std::fs::write(&path, format!("{before}{begin}{want}{end}{after}")).unwrap();
            } else {
                panic!(
                    "{file}'s exit codes differ from error::EXIT_CODES; run `COLLBENCH_BLESS=1 cargo test --lib \
                     exit_codes` to regenerate them"
                );
            }
        }
    }

    #[test]
    fn the_docs_and_the_readme_quote_the_one_exit_code_table() {
        generated(
            "docs/exit-codes.md",
            "<!-- exit codes: generated from error::exit_codes_markdown -->\n",
            "<!-- end of exit codes -->",
            &exit_codes_markdown(),
        );
        generated(
            "README.md",
            "<!-- exit codes: generated from error::exit_codes_line -->\n",
            "\n<!-- end of exit codes -->",
            &exit_codes_line(None),
        );
    }

    #[test]
    fn each_command_lists_the_codes_it_can_end_with() {
        assert_eq!(
            exit_codes_line(Some("compare")),
            "Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error (an option, a file, an environment \
             variable), 4 a regression or a case of BASE missing from NEW. Details: docs/exit-codes.md."
        );
        let replay = exit_codes_line(Some("replay"));
        assert!(
            replay.contains(", 7 the log's ranks disagree") && !replay.contains(" 6 "),
            "{replay}"
        );
        assert!(!exit_codes_line(Some("info")).contains(" 1 "));
        assert_eq!(
            exit_codes_line(Some("doctor")),
            "Exit codes: 0 ok, 2 usage or configuration error (an option, a file, an environment variable), 8 doctor \
             found a problem above info (a finding of severity warn or error). Details: docs/exit-codes.md."
        );
        assert!(exit_codes_line(None).contains(" 6 a check failed or was flaky, 7 the log's ranks disagree"));
        let check = exit_codes_line(Some("check"));
        assert!(
            check.contains(", 6 a check failed or was flaky, 9 a required check could not run or could not tell")
                && !check.contains(" 8 "),
            "{check}"
        );
    }
}
