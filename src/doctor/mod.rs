//! `collbench doctor`: what a job's NCCL log says is misconfigured, with
//! the lines that show it and the fix (docs/doctor.md). The logs come
//! from the one NCCL log reader (`nccl_log`); the rules are table entries
//! (`rules::RULES`: symptom lines per NCCL release, meaning, cited fix,
//! severity) with a small function each (`judge`); `examine` runs every
//! rule over the logs and says what it could not judge (a subsystem's
//! lines absent, one process only), and `report` prints the findings as
//! text or JSON.
//!
//! `examine` is the library's entry point: log files in, a `Diagnosis`
//! out; a command that keeps each rank's NCCL log (run, check, links) can
//! call it after the run. Pure but for `command` (the subcommand: files
//! in, the report printed).

mod command;
mod facts;
pub mod judge;
pub mod kept;
pub mod report;
pub mod rules;

use serde::Serialize;

use crate::nccl_log::LogFile;
pub use command::command;
pub use facts::Evidence;
use facts::Facts;

/// How serious a finding is: `error`, the job fails or hangs; `warn`, it
/// runs with a loss the log explains; `info`, worth saying, not a fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warn,
    Error,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warn => "warn",
            Severity::Error => "error",
        }
    }
}

/// One thing the logs show, with its evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The rule's id (docs/doctor.md).
    pub rule: &'static str,
    pub severity: Severity,
    pub title: &'static str,
    /// What these logs show, in one sentence.
    pub detail: String,
    pub hosts: Vec<String>,
    /// `host pid P device D (rank R of N)`, or the file of a line without
    /// NCCL's prefix.
    pub processes: Vec<String>,
    pub evidence: Vec<Evidence>,
    pub meaning: &'static str,
    pub fix: &'static str,
    /// Where the fix is stated.
    pub cited: &'static str,
}

/// A check the logs do not let the doctor make, and what would.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Unjudged {
    pub check: &'static str,
    pub why: String,
    /// The setting that prints the lines it needs.
    pub enable: &'static str,
}

/// Everything `examine` found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    pub files: Vec<String>,
    pub lines: usize,
    /// Lines that carry one of NCCL's marks (`NCCL INFO`, `NCCL WARN`, ...).
    pub nccl_lines: usize,
    pub hosts: Vec<String>,
    pub processes: usize,
    /// The NCCL versions the logs print.
    pub versions: Vec<String>,
    /// The most serious first, then in the rules' order.
    pub findings: Vec<Finding>,
    pub not_judged: Vec<Unjudged>,
}

impl Diagnosis {
    /// The most serious finding's severity.
    pub fn worst(&self) -> Option<Severity> {
        self.findings.iter().map(|f| f.severity).max()
    }

    /// A finding above info: `collbench doctor` exits 8.
    pub fn problem_found(&self) -> bool {
        self.worst().is_some_and(|s| s > Severity::Info)
    }

    /// Whether the logs hold anything the doctor reads: NCCL's lines, or
    /// a symptom quoted without them.
    pub fn read_anything(&self) -> bool {
        self.nccl_lines > 0 || !self.findings.is_empty()
    }
}

/// Every rule over the logs.
pub fn examine(logs: &[LogFile]) -> Diagnosis {
    let facts = Facts::new(logs);
    let mut findings: Vec<(usize, Finding)> = Vec::new();
    for (i, rule) in rules::RULES.iter().enumerate() {
        findings.extend((rule.judge)(&facts, rule).into_iter().map(|f| (i, f)));
    }
    findings.sort_by(|a, b| b.1.severity.cmp(&a.1.severity).then(a.0.cmp(&b.0)));
    let findings: Vec<Finding> = findings.into_iter().map(|(_, f)| f).collect();
    Diagnosis {
        files: logs.iter().map(|l| l.name.clone()).collect(),
        lines: facts.lines.len(),
        nccl_lines: facts.nccl_lines(),
        hosts: facts.hosts().into_iter().map(String::from).collect(),
        processes: facts.processes().len(),
        versions: facts.versions().iter().map(|(v, _)| v.to_string()).collect(),
        not_judged: unjudged(&facts, &findings),
        findings,
    }
}

/// The checks the logs leave out, and the setting that prints their lines
/// (docs/doctor-rules-research.md: which subsystem prints what, and the
/// default NCCL_DEBUG_SUBSYS per release).
fn unjudged(facts: &Facts, findings: &[Finding]) -> Vec<Unjudged> {
    let mut out = Vec::new();
    let has = |f: &dyn Fn(&str) -> bool| facts.lines.iter().any(|s| s.line.nccl.is_some() && f(s.msg()));
    let info = facts
        .lines
        .iter()
        .any(|s| s.line.level() == Some(crate::nccl_log::Level::Info));
    if !info {
        out.push(Unjudged {
            check: "every check that reads NCCL's INFO lines (transports, network, settings, versions)",
            why: "the logs hold no `NCCL INFO` line".into(),
            enable: "NCCL_DEBUG=INFO (and NCCL_DEBUG_FILE=/path/nccl.%h.%p for one file per process)",
        });
        return out;
    }
    if !has(&|m| crate::nccl_log::message::connection(m).is_some()) {
        out.push(Unjudged {
            check: "the transport of each connection (socket-where-ib, gdr-off, p2p-degraded)",
            why: "no channel line (`Channel 00/0 : 0[0] -> 1[1] via ...`): NCCL prints them when a communicator connects, so the log ends before, or INIT is not in NCCL_DEBUG_SUBSYS".into(),
            enable: "NCCL_DEBUG=INFO with INIT in NCCL_DEBUG_SUBSYS (the default), and a log that reaches the first collective",
        });
    }
    if !has(&|m| m.starts_with("Using network ") || m.starts_with("NET/IB : ") || m.starts_with("NET/Socket : Using")) {
        out.push(Unjudged {
            check: "the network NCCL chose and its devices (socket-where-ib, hca-missing)",
            why: "no `Using network`, `NET/IB : Using` or `NET/Socket : Using` line".into(),
            enable: "NCCL_DEBUG=INFO with INIT in NCCL_DEBUG_SUBSYS (the default), from the start of the job",
        });
    }
    let processes = facts.processes().len();
    if processes < 2 {
        out.push(Unjudged {
            check: "differences between ranks and hosts (HCA counts, settings, versions)",
            why: format!(
                "the logs show {} process{} by NCCL's prefix",
                processes,
                if processes == 1 { "" } else { "es" }
            ),
            enable: "every rank's log: the job's whole output, or NCCL_DEBUG_FILE=/path/nccl.%h.%p and the folder",
        });
    } else if !has(&|m| m.contains(" set by environment to ")) && !shows_env_by_default(facts) {
        out.push(Unjudged {
            check: "NCCL_* settings compared between ranks (env-or-version-mismatch)",
            why: "no `... set by environment to` line, and the logs do not show an NCCL version (2.16.5 and later) that prints them by default".into(),
            enable: "NCCL_DEBUG_SUBSYS=INIT,ENV (NCCL before 2.16.5)",
        });
    }
    if findings.iter().any(|f| f.rule == "gdr-off") && !has(&|m| m.contains("GPU Direct RDMA")) {
        out.push(Unjudged {
            check: "why GPUDirect RDMA is off (no peer-memory module, or the GPU-NIC distance)",
            why: "no `GPU Direct RDMA Disabled for HCA ...` line: NCCL prints it under NET, not in the default mask"
                .into(),
            enable: "NCCL_DEBUG_SUBSYS=INIT,NET (and NCCL_DEBUG=TRACE for the per-GPU line from NCCL 2.30.3)",
        });
    }
    let hints = has(&|m| m.starts_with("HINT: "));
    let recent = facts
        .versions()
        .iter()
        .any(|(v, _)| *v >= crate::types::NcclVersion::new(2, 30, 7));
    if recent && !hints && facts.lines.iter().any(|s| s.is_warn()) {
        out.push(Unjudged {
            check: "NCCL's own hints after its WARN lines (nccl-hint)",
            why: "no `HINT:` line: NCCL 2.30.7 prints them under NET or GRAPH, not in the default mask".into(),
            enable: "NCCL_DEBUG_SUBSYS=INIT,NET,GRAPH",
        });
    }
    out
}

/// Whether every NCCL version the logs print shows ENV lines by default
/// (2.16.5 and later): then no such line means nothing is set.
fn shows_env_by_default(facts: &Facts) -> bool {
    let versions = facts.versions();
    !versions.is_empty()
        && versions
            .iter()
            .all(|(v, _)| *v >= crate::types::NcclVersion::new(2, 16, 5))
}

#[cfg(test)]
mod tests;
