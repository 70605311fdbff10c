//! A launch's identity: the one description of a run that every header
//! (the sweep's table, a workload's, links', check's) and every file's
//! metadata (CSV columns, JSON reports, check's node files) take their
//! run id, start, command line, backend, control plane and hosts from.
//! The session builds it once, on every rank alike, before the task runs
//! (`session::Session::prepare`); nothing else makes a run id.
//!
//! Must not: print, read the world or a backend (the session hands the
//! values in).

use serde::Serialize;

use crate::types::BackendKind;

/// What a launch is, the same on every rank.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunIdentity {
    /// `20261129T084645Z-host-1234`: rank 0's start, host and pid.
    pub run_id: String,
    /// Rank 0's start, RFC 3339 to the second.
    pub started: String,
    /// This process's command line.
    pub command_line: Vec<String>,
    pub backend: BackendKind,
    pub backend_version: String,
    /// Why `--backend auto` chose this backend, and the backend's own
    /// notes (registration, ...), joined; `None` when there are none. The
    /// sweep takes the backend's notes again once its buffers are reserved
    /// (what registration and NCCL's connections got is known by then).
    pub backend_note: Option<String>,
    /// The control plane's library or store ("Open MPI v4.1.4", ...).
    pub control_plane: String,
    /// Every host of the job, in rank order of first appearance.
    pub hosts: Vec<String>,
    /// `--label`.
    pub label: Option<String>,
}

impl RunIdentity {
    /// Now, as a run's start is written: RFC 3339 to the second, UTC.
    pub fn now() -> String {
        humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
    }

    /// `20261129T084645Z-host-1234`: sortable, unique per launch, safe in
    /// file names, from rank 0's start (`now`), host and process id.
    pub fn run_id(started: &str, host: &str, pid: u32) -> String {
        let stamp: String = started.chars().filter(|c| *c != '-' && *c != ':').collect();
        let host: String = host
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' })
            .take(32)
            .collect();
        format!("{stamp}-{host}-{pid}")
    }

    /// "nccl (2.32.3)  [auto: every rank has a GPU and NCCL, using nccl]":
    /// the backend as headers name it, with its note.
    pub fn backend_line(&self) -> String {
        let note = self
            .backend_note
            .as_ref()
            .map(|n| format!("  [{n}]"))
            .unwrap_or_default();
        format!("{} ({}){note}", self.backend.name(), self.backend_version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_id_sorts_by_start_and_is_safe_in_file_names() {
        let id = RunIdentity::run_id("2026-11-29T08:46:45Z", "node/7 a", 1234);
        assert_eq!(id, "20261129T084645Z-node_7_a-1234");
        let long = RunIdentity::run_id("2026-11-29T08:46:45Z", &"h".repeat(80), 1);
        assert_eq!(long.len(), "20261129T084645Z-".len() + 32 + 2);
    }
}
