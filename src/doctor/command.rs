//! `collbench doctor LOG...`: read the logs, examine them, print the
//! report (or its JSON), and the exit code: 8 when a problem was found.

use std::path::PathBuf;

use super::{examine, report};
use crate::error::{Error, say};

/// Reads `paths` (files, folders, gzip, `-`), prints the report, and
/// returns the exit code; a log that cannot be read, or logs without a
/// single NCCL line, are an error (exit 2).
pub fn command(paths: &[PathBuf], json: bool) -> Result<u8, Error> {
    let (logs, skipped) = crate::nccl_log::read_paths(paths)?;
    for note in &skipped {
        say(&format!("collbench doctor: {note}"));
    }
    let d = examine(&logs);
    if !d.read_anything() {
        let names: Vec<&str> = paths.iter().filter_map(|p| p.to_str()).collect();
        return Err(Error::usage(format!(
            "{}: no NCCL line (`host:pid:tid [dev] NCCL INFO ...` or `NCCL WARN`) and no symptom the doctor knows: run the job with NCCL_DEBUG=INFO and give the doctor its output",
            names.join(", ")
        )));
    }
    crate::report::print_out(&if json { report::json(&d) } else { report::text(&d) });
    Ok(report::exit_code(&d))
}
