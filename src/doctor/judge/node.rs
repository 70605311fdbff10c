//! One node: /dev/shm, peer-to-peer between its GPUs, NVLink SHARP, the
//! channels of its communicators.

use super::{at, list, more, quote};
use crate::doctor::facts::{Facts, Seen};
use crate::doctor::rules::Rule;
use crate::doctor::{Finding, Severity};
use crate::nccl_log::message::{Via, connection, env_setting};
use crate::nccl_log::whole_number;

/// The segment's size in a segment error, `(size N)`, where its `)` shows
/// the line was not cut inside it. (`failed to extend F to N bytes` names
/// the file's size, the segment and NCCL's 4-byte reference count.)
fn segment_bytes(msg: &str) -> Option<u64> {
    whole_number(msg.split_once("(size ")?.1)
}

pub fn shm(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let lines = facts.matching(|m| {
        m.contains("Call to posix_fallocate failed")
            || (m.contains("failed to extend") && (m.contains("/dev/shm") || m.contains("No space left")))
            || (m.contains("Error while") && m.contains("shared memory segment"))
    });
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    let size = lines
        .iter()
        .find_map(|s| segment_bytes(s.msg()))
        .map(|b| format!(" of {b} bytes"))
        .unwrap_or_default();
    let detail = format!(
        "NCCL could not create its shared-memory segment{size} in /dev/shm: {}{}",
        quote(first),
        more(lines.len())
    );
    vec![rule.finding(facts, rule.severity, detail, &lines)]
}

fn via_shm(msg: &str) -> bool {
    connection(msg).is_some_and(|c| matches!(c.via, Via::Shm { .. }))
}

pub fn p2p(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut out = Vec::new();
    let nvlink = facts.matching(|m| m.contains("P2P is disabled between NVLINK connected GPUs"));
    if let Some(first) = nvlink.first() {
        let detail = format!(
            "NVML reports peer-to-peer broken between NVLink-connected GPUs (a hardware issue, NCCL says): {}",
            quote(first)
        );
        out.push(rule.finding(facts, Severity::Error, detail, &nvlink));
    }
    let pcie = facts.matching(|m| m.contains("P2P is disabled between connected GPUs"));
    if let Some(first) = pcie.first() {
        let detail = format!(
            "NVML reports peer-to-peer not available between {} GPU pair{} ({}): normal on GeForce cards; on data-center GPUs, ACS or the IOMMU",
            pcie.len(),
            if pcie.len() > 1 { "s" } else { "" },
            at(facts, first)
        );
        out.push(rule.finding(facts, Severity::Info, detail, &pcie));
    }
    let shm = facts.matching(via_shm);
    let Some(first) = shm.first() else {
        return out;
    };
    let asked = facts.matching(|m| {
        env_setting(m)
            .is_some_and(|(n, v)| (n == "NCCL_P2P_DISABLE" && v == "1") || (n == "NCCL_P2P_LEVEL" && v == "LOC"))
    });
    let nvl = facts.matching(|m| m.starts_with("Pattern ") && m.contains("type NVL/"));
    let mut lines: Vec<&Seen> = shm.iter().take(4).copied().collect();
    let (severity, why) = if let Some(a) = asked.first() {
        lines.push(a);
        (
            Severity::Info,
            format!("as asked: {} ({})", a.msg().trim().trim_end_matches('.'), at(facts, a)),
        )
    } else if let Some(g) = nvl.first() {
        lines.push(g);
        (
            Severity::Warn,
            format!("although NCCL's topology search found NVLink ({})", at(facts, g)),
        )
    } else {
        (
            Severity::Info,
            "whether these GPUs have NVLink or a PCIe switch between them is not in the log".to_string(),
        )
    };
    let detail = format!(
        "{} connection{} inside a node go{} through host memory (SHM, {}) {why}",
        shm.len(),
        if shm.len() > 1 { "s" } else { "" },
        if shm.len() > 1 { "" } else { "es" },
        at(facts, first)
    );
    out.push(rule.finding(facts, severity, detail, &lines));
    out
}

/// A line that continues a multi-line NVLS message NCCL printed.
fn nvls_continuation(msg: &str) -> bool {
    [
        "This is usually caused by",
        "Do not force-enable NVLS",
        "Disable NVLS (NCCL_NVLS_ENABLE=0)",
    ]
    .iter()
    .any(|p| msg.trim_start().starts_with(p))
}

pub fn nvls(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut bind: Vec<&Seen> = Vec::new();
    for (i, s) in facts.lines.iter().enumerate() {
        let cuda_in_nvls = s.is_warn()
            && s.line
                .nccl
                .as_ref()
                .and_then(|n| n.source)
                .is_some_and(|src| src.contains("nvls"))
            && s.msg().contains("Cuda failure");
        if s.msg().contains("Failed to bind NVLink SHARP") || cuda_in_nvls {
            bind.push(s);
            let rest = facts.lines[i + 1..]
                .iter()
                .take_while(|n| n.file == s.file && nvls_continuation(n.msg()));
            bind.extend(rest);
        }
    }
    if let Some(first) = bind.first() {
        let proceeding = bind.iter().all(|s| s.msg().contains("Proceeding without NVLS support"));
        let (severity, what) = if proceeding {
            (Severity::Warn, "NCCL runs without NVLS")
        } else {
            (Severity::Error, "NCCL fails")
        };
        let detail = format!("{what}: {}", quote(first));
        out.push(rule.finding(facts, severity, detail, &bind));
    }
    let off = facts.matching(|m| m.starts_with("NVLS multicast support is not available"));
    if let Some(first) = off.first()
        && bind.is_empty()
    {
        let detail = format!(
            "NCCL finds no NVLS multicast support ({}{}): normal without NVSwitch; on an NVSwitch system, the fabric manager",
            at(facts, first),
            if off.len() > 1 {
                format!(" and {} more", off.len() - 1)
            } else {
                String::new()
            }
        );
        out.push(rule.finding(facts, Severity::Info, detail, &off));
    }
    out
}

pub fn channels(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let limits = facts.matching(|m| {
        env_setting(m).is_some_and(|(n, _)| {
            ["NCCL_MAX_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_NCHANNELS_PER_NET_PEER"].contains(&n.as_str())
        })
    });
    let Some(first) = limits.first() else {
        return Vec::new();
    };
    let counts = facts.matching(|m| m.contains(" coll channels, "));
    let mut seen: Vec<String> = counts
        .iter()
        .filter_map(|s| s.msg().split_whitespace().next().map(|n| format!("{n} coll channels")))
        .collect();
    seen.sort();
    seen.dedup();
    let detail = format!(
        "{} ({}) limits the channels{}",
        first.msg().trim().trim_end_matches('.'),
        at(facts, first),
        if seen.is_empty() {
            String::new()
        } else {
            format!("; NCCL reports {}", list(&seen))
        }
    );
    let mut lines = limits.clone();
    lines.extend(counts.iter().take(2));
    vec![rule.finding(facts, rule.severity, detail, &lines)]
}
