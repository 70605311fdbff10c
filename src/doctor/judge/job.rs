//! What only the whole job shows: settings and versions that differ
//! between its processes, and NCCL's WARN lines, each explained.

use std::collections::BTreeMap;

use super::{at, list, more, quote};
use crate::doctor::facts::{Facts, Process, Seen};
use crate::doctor::rules::{RULES, Rule};
use crate::doctor::{Finding, Severity};
use crate::nccl_log::message::env_setting;

/// Variables that may differ between hosts (an interface's or a device's
/// name is the host's own).
const PER_HOST: [&str; 4] = ["NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_TOPO_FILE", "NCCL_DEBUG_FILE"];

pub fn mismatch(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut out = Vec::new();
    let warned = facts.symptoms(rule);
    if let Some(first) = warned.first() {
        let detail = format!(
            "ranks exchanged buffers of different sizes or run different versions: {}{}",
            quote(first),
            more(warned.len())
        );
        out.push(rule.finding(facts, rule.severity, detail, &warned));
    }
    let versions = facts.versions();
    if versions.len() > 1 {
        let shown: Vec<String> = versions
            .iter()
            .map(|(v, s)| format!("{v} ({})", at(facts, s)))
            .collect();
        let lines: Vec<&Seen> = versions.iter().map(|(_, s)| *s).collect();
        let detail = format!("the log shows NCCL {}", list(&shown));
        out.push(rule.finding(facts, Severity::Error, detail, &lines));
    }
    out.extend(settings(facts, rule));
    out
}

/// A variable's values, each with the first line of every process that printed it.
type Values<'f, 'a> = BTreeMap<String, Vec<(Process, &'f Seen<'a>)>>;

/// Variables NCCL reports set to different values by different processes.
fn settings(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    // variable -> value -> the first line of each process that printed it
    let mut seen: BTreeMap<String, Values> = BTreeMap::new();
    for s in &facts.lines {
        let (Some((name, value)), Process::Pid(..)) = (env_setting(s.msg()), s.process()) else {
            continue;
        };
        let procs = seen.entry(name).or_default().entry(value).or_default();
        if !procs.iter().any(|(p, _)| *p == s.process()) {
            procs.push((s.process(), s));
        }
    }
    let mut out = Vec::new();
    for (name, values) in seen.into_iter().filter(|(_, v)| v.len() > 1) {
        let shown: Vec<String> = values
            .iter()
            .map(|(v, procs)| {
                format!(
                    "`{v}` on {} process{} ({})",
                    procs.len(),
                    if procs.len() > 1 { "es" } else { "" },
                    at(facts, procs[0].1)
                )
            })
            .collect();
        let lines: Vec<&Seen> = values.values().map(|p| p[0].1).collect();
        let per_host = PER_HOST.contains(&name.as_str());
        let severity = if per_host { Severity::Warn } else { rule.severity };
        let detail = format!(
            "{name} differs between processes: {}{}",
            list(&shown),
            if per_host {
                " (a per-host name may differ; the value must name the same network on every host)"
            } else {
                ""
            }
        );
        out.push(rule.finding(facts, severity, detail, &lines));
    }
    out
}

/// A known WARN: what it says, and how serious it is.
struct Known {
    find: &'static [&'static str],
    means: &'static str,
    severity: Severity,
}

const KNOWN: &[Known] = &[
    Known {
        find: &["Failed to open libibverbs"],
        means: "libibverbs is not installed: NCCL cannot use InfiniBand or RoCE on this host, which is harmless where there is none (ptrblck, pytorch/pytorch#73790)",
        severity: Severity::Info,
    },
    Known {
        find: &["invalid device function"],
        means: "the NCCL build has no kernels for this GPU's architecture (\"It would look like NCCL was not compiled for your GPU architecture\", sjeaugey, NVIDIA/nccl#444): use an NCCL (or PyTorch) build for it",
        severity: Severity::Error,
    },
    Known {
        find: &["Connection closed by remote peer"],
        means: "a peer process closed its connection: it died or failed first; the first error on its host is the cause",
        severity: Severity::Error,
    },
    Known {
        find: &["has already checked in"],
        means: "two processes claimed one rank number: the launcher started a rank twice or mapped ranks wrongly",
        severity: Severity::Error,
    },
    Known {
        find: &["mismatch in rank count", "mismatch in info from procs"],
        means: "the ranks disagree on the communicator's size: processes of two launches, or a wrong world size",
        severity: Severity::Error,
    },
    Known {
        find: &["Socket recv failed"],
        means: "a rank's proxy lost its peer: the WARN before it on that host is the cause",
        severity: Severity::Error,
    },
    Known {
        find: &["Connect to ", "PollConnect to "],
        means: "a rank cannot reach a peer's address: a firewall, a route, or an interface the peer cannot reach (NCCL_SOCKET_IFNAME)",
        severity: Severity::Error,
    },
    Known {
        find: &["Cuda failure"],
        means: "a CUDA call failed; the message names the error",
        severity: Severity::Error,
    },
];

/// Whether another rule judges a line (its symptoms, or the texts its
/// code reads).
fn claimed(msg: &str) -> bool {
    const ELSEWHERE: [&str; 4] = [
        "failed to extend",
        "shared memory segment",
        "NCCL_SOCKET_IFNAME",
        "Unable to open device",
    ];
    RULES
        .iter()
        .filter(|r| r.id != "warn-before-hang")
        .any(|r| r.symptoms.iter().any(|y| !y.find.is_empty() && msg.contains(y.find)))
        || ELSEWHERE.iter().any(|t| msg.contains(t))
}

pub fn warns(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut groups: Vec<(Option<&Known>, Vec<&Seen>)> = Vec::new();
    for s in &facts.lines {
        let known = KNOWN.iter().find(|k| k.find.iter().any(|f| s.msg().contains(f)));
        // a known WARN text counts where a paste lost NCCL's mark
        // (PyTorch's `Last error:`), an unknown one only with it
        if !(s.is_warn() || known.is_some_and(|k| k.severity > Severity::Info && s.line.nccl.is_none())) {
            continue;
        }
        if known.is_none() && claimed(s.msg()) {
            continue;
        }
        match groups
            .iter_mut()
            .find(|(k, _)| k.map(|k| k.means) == known.map(|k| k.means))
        {
            Some((_, lines)) => lines.push(s),
            None => groups.push((known, vec![s])),
        }
    }
    let mut out = Vec::new();
    for (known, lines) in groups {
        let first = lines[0];
        let (severity, means) = match known {
            Some(k) => (k.severity, k.means.to_string()),
            None => (
                Severity::Warn,
                "NCCL warned; the doctor has no explanation of this line: the first WARN of each host is usually the cause".to_string(),
            ),
        };
        let hosts = first_per_host(&lines);
        let detail = format!("{means}: {}{}", quote(first), more(lines.len()));
        let mut evidence = hosts;
        evidence.extend(lines.iter().take(8));
        out.push(rule.finding(facts, severity, detail, &evidence));
    }
    out
}

/// The first line of each host (and of the lines without one).
fn first_per_host<'f, 'a>(lines: &[&'f Seen<'a>]) -> Vec<&'f Seen<'a>> {
    let mut out: Vec<&Seen> = Vec::new();
    for s in lines {
        if !out.iter().any(|o| o.host() == s.host()) {
            out.push(s);
        }
    }
    out
}
