//! The doctor after a run (docs/doctor.md, "After run, check and links"):
//! on the NCCL backend every rank's private NCCL log (what NCCL printed up
//! to its communicators' set-up: the transports, the network, the
//! settings) is gathered on rank 0, kept beside the run's report as one
//! file `collbench doctor` reads again, and run through every rule. The
//! findings are printed under the table, one line each, and recorded in
//! the JSON report.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{Diagnosis, Severity, examine};
use crate::nccl_log::LogFile;

/// The most of each rank's log that is gathered: NCCL's set-up lines of
/// one rank fill a few KiB (INIT, ENV and GRAPH on 8 GPUs and 8 NICs);
/// what is cut leaves the doctor saying what it could not judge.
pub const RANK_LOG_BYTES: usize = 64 * 1024;

/// What the doctor made of one launch's NCCL logs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct KeptLogs {
    /// The ranks' logs, one file (`None`: it could not be written).
    pub file: Option<PathBuf>,
    /// Why the file is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_kept: Option<String>,
    pub ranks: usize,
    pub diagnosis: Diagnosis,
}

/// The file beside a report (`results/RUN.csv` -> `results/RUN.nccl.log`).
pub fn beside(report: &Path) -> PathBuf {
    report.with_extension("nccl.log")
}

impl KeptLogs {
    /// Every rank's log text (rank order), written to `file` (one after
    /// another: each line names its host, process and device) and examined.
    pub fn keep(texts: &[String], file: PathBuf) -> KeptLogs {
        let logs: Vec<LogFile> = texts
            .iter()
            .enumerate()
            .map(|(rank, text)| LogFile::new(format!("{} (rank {rank})", file.display()), text.as_str()))
            .collect();
        let diagnosis = examine(&logs);
        let mut whole = String::new();
        for text in texts {
            whole += text;
            if !text.is_empty() && !text.ends_with('\n') {
                whole.push('\n');
            }
        }
        let (file, not_kept) = match std::fs::write(&file, whole) {
            Ok(()) => (Some(file), None),
            Err(e) => (None, Some(format!("cannot write {}: {e}", file.display()))),
        };
        KeptLogs {
            file,
            not_kept,
            ranks: texts.len(),
            diagnosis,
        }
    }

    /// What the logs show, one sentence each: each finding (severity,
    /// rule, title, hosts) or that none was found, the checks the lines do
    /// not allow, and where the logs are kept.
    pub fn sentences(&self) -> Vec<String> {
        let d = &self.diagnosis;
        let mut lines = Vec::new();
        if d.findings.is_empty() {
            lines.push(format!(
                "no finding in the NCCL set-up lines of {} rank{} ({} lines)",
                self.ranks,
                if self.ranks == 1 { "" } else { "s" },
                d.nccl_lines
            ));
        }
        for f in &d.findings {
            lines.push(format!(
                "{} {}: {} on {}",
                f.severity.name(),
                f.rule,
                f.title,
                f.hosts.join(", ")
            ));
        }
        if !d.not_judged.is_empty() {
            let checks: Vec<&str> = d.not_judged.iter().map(|u| u.check).collect();
            lines.push(format!("not judged: {}", checks.join("; ")));
        }
        lines.push(match (&self.file, &self.not_kept) {
            (Some(file), _) => format!(
                "kept in {}; `collbench doctor {}` shows the evidence and the fix",
                file.display(),
                file.display()
            ),
            (None, why) => format!("not kept: {}", why.as_deref().unwrap_or("")),
        });
        lines
    }

    /// The lines under a table (`# NCCL log             : ...`).
    pub fn footer(&self) -> Vec<String> {
        self.sentences()
            .into_iter()
            .map(|s| format!("# {:<20} : {s}", "NCCL log"))
            .collect()
    }

    /// The most serious finding above info on `host` (any host: `None`),
    /// for a verdict's reason: `rule: title`.
    pub fn serious(&self, host: Option<&str>) -> Option<String> {
        self.diagnosis
            .findings
            .iter()
            .find(|f| f.severity > Severity::Info && host.is_none_or(|h| f.hosts.iter().any(|x| x == h)))
            .map(|f| format!("{}: {}", f.rule, f.title))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Real-format lines: NCCL 2.23's socket network and a P2P channel.
    fn rank(host: &str, pid: u32, dev: u32, extra: &str) -> String {
        format!(
            "{host}:{pid}:{pid} [{dev}] NCCL INFO NCCL version 2.23.4+cuda12.6\n\
             {host}:{pid}:{pid} [{dev}] NCCL INFO Using network Socket\n\
             {host}:{pid}:{pid} [{dev}] NCCL INFO Channel 00/0 : {dev}[{dev}] -> {}[{}] via NET/Socket/0\n{extra}",
            1 - dev,
            1 - dev
        )
    }

    #[test]
    fn the_ranks_logs_are_kept_as_one_file_that_the_doctor_reads_and_each_finding_is_one_footer_line() {
        let dir = tempfile::tempdir().unwrap();
        let file = beside(&dir.path().join("run.csv"));
        assert_eq!(file, dir.path().join("run.nccl.log"));
        let texts = vec![rank("a", 10, 0, ""), rank("b", 20, 1, "")];
        let kept = KeptLogs::keep(&texts, file.clone());
        assert_eq!(kept.file.as_deref(), Some(file.as_path()));
        assert_eq!(kept.ranks, 2);
        // the file is what `collbench doctor` reads: the same diagnosis
        let again = examine(&[LogFile::new("x", std::fs::read_to_string(&file).unwrap())]);
        assert_eq!(again.findings.len(), kept.diagnosis.findings.len());
        assert_eq!(again.processes, 2);
        let footer = kept.footer();
        let socket: Vec<&String> = footer.iter().filter(|l| l.contains("socket-where-ib")).collect();
        assert_eq!(socket.len(), 1, "{footer:?}");
        assert!(
            socket[0].starts_with("# NCCL log             : info socket-where-ib: "),
            "{footer:?}"
        );
        assert!(socket[0].ends_with(" on a, b"), "{footer:?}");
        assert!(
            footer.last().unwrap().ends_with(&format!(
                "`collbench doctor {}` shows the evidence and the fix",
                file.display()
            )),
            "{footer:?}"
        );
        assert_eq!(kept.serious(None), None, "a note is not a reason");
    }

    #[test]
    fn a_log_that_cannot_be_kept_is_still_examined_and_says_why() {
        let kept = KeptLogs::keep(&[rank("a", 10, 0, "")], PathBuf::from("/dev/null/x.nccl.log"));
        assert_eq!(kept.file, None);
        assert!(
            kept.not_kept
                .as_deref()
                .unwrap()
                .starts_with("cannot write /dev/null/x.nccl.log: ")
        );
        assert!(kept.footer().last().unwrap().contains("not kept: cannot write"));
        assert_eq!(kept.diagnosis.processes, 1);
    }

    #[test]
    fn a_warning_is_a_reason_and_no_finding_says_so() {
        let warn = "a:10:10 [0] NCCL INFO NET/Socket : Using [0]ib0:10.0.0.1<0>\n";
        let kept = KeptLogs::keep(&[rank("a", 10, 0, warn)], PathBuf::from("/dev/null/x"));
        let socket = "socket-where-ib: traffic between processes goes over NCCL's socket transport (slow where InfiniBand/RoCE exists)";
        assert_eq!(kept.serious(None).as_deref(), Some(socket));
        assert_eq!(kept.serious(Some("a")).as_deref(), Some(socket));
        assert_eq!(
            kept.serious(Some("b")),
            None,
            "another host's finding is not its reason"
        );
        let quiet = KeptLogs::keep(&[String::new()], PathBuf::from("/dev/null/x"));
        assert_eq!(
            quiet.footer()[0],
            "# NCCL log             : no finding in the NCCL set-up lines of 1 rank (0 lines)"
        );
    }
}
