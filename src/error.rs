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
    }
}
