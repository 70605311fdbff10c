//! The network: sockets where InfiniBand exists, the socket interfaces,
//! GPUDirect RDMA, the HCAs, completion errors, the network plugin.

use std::collections::{BTreeMap, BTreeSet};

use super::{at, list, more, quote};
use crate::doctor::facts::{Facts, Seen};
use crate::doctor::rules::Rule;
use crate::doctor::{Finding, Severity};
use crate::nccl_log::message::{Interface, Side, Via, connection, env_setting, hcas, interfaces};
use crate::nccl_log::whole_number;

/// `ib0`, `ibs85f0`, `ibp12s0`: an IP-over-InfiniBand interface.
fn is_ipoib(name: &str) -> bool {
    name.strip_prefix("ib")
        .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == 's' || c == 'p'))
}

/// Loopback, Docker's and other virtual interfaces that other hosts
/// cannot reach (NVIDIA's env page leaves out `lo` and `docker*` unless
/// nothing else exists; bridges, veth pairs and tunnels are the same kind).
fn is_virtual(name: &str) -> bool {
    name == "lo"
        || [
            "docker", "br-", "veth", "virbr", "tunl", "flannel", "cni", "cali", "vxlan", "kube-",
        ]
        .iter()
        .any(|p| name.starts_with(p))
}

/// `NCCL_X set by environment to V` with name `var`.
fn env_is(msg: &str, var: &str, value: Option<&str>) -> bool {
    env_setting(msg).is_some_and(|(n, v)| n == var && value.is_none_or(|want| v.eq_ignore_ascii_case(want)))
}

/// The interface lists of `Bootstrap : Using`, `Bootstrap: Using` and
/// `NET/Socket : Using` lines, with the lines that hold them (a list a
/// paste wrapped one interface per line continues on the next lines).
fn using_lists<'a, 'f>(facts: &'f Facts<'a>, prefix: &str) -> Vec<(Vec<Interface>, Vec<&'f Seen<'a>>)> {
    let mut out = Vec::new();
    for (i, s) in facts.lines.iter().enumerate() {
        let Some(at) = s.msg().find(prefix) else {
            continue;
        };
        let rest = &s.msg()[at + prefix.len()..];
        let Some(list) = rest.trim_start().strip_prefix("Using") else {
            continue;
        };
        let mut found = interfaces(list);
        let mut lines = vec![s];
        if found.is_empty() {
            for next in facts.lines[i + 1..]
                .iter()
                .take_while(|n| n.file == s.file && n.line.nccl.is_none())
            {
                let words = interfaces(next.msg());
                if words.is_empty() || words.len() != next.msg().split_whitespace().count() {
                    break;
                }
                found.extend(words);
                lines.push(next);
            }
        }
        out.push((found, lines));
    }
    out
}

pub fn socket_where_ib(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let sockets = facts.matching(|m| m.trim() == "Using network Socket" || m.contains("via NET/Socket"));
    // NCCL names its network on one node too: no connection through it, no
    // traffic over sockets (every channel line through P2P, SHM or NVLS)
    let channels = facts.matching(|m| connection(m).is_some());
    if sockets.is_empty() || (!channels.is_empty() && !channels.iter().any(|s| s.msg().contains(" via NET/"))) {
        return Vec::new();
    }
    let mut ipoib = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (ifaces, lines) in using_lists(facts, "NET/Socket :") {
        let ib: Vec<String> = ifaces
            .iter()
            .filter(|i| is_ipoib(&i.name))
            .map(|i| i.name.clone())
            .collect();
        if !ib.is_empty() {
            ipoib.extend(lines);
            names.extend(ib);
        }
    }
    names.sort();
    names.dedup();
    let listed = facts.matching(|m| m.starts_with("NET/IB : Using") && !hcas(m).is_empty());
    let asked = facts.matching(|m| env_is(m, "NCCL_IB_DISABLE", Some("1")) || env_is(m, "NCCL_NET", Some("Socket")));
    let mut lines: Vec<&Seen> = sockets.iter().take(4).copied().collect();
    lines.extend(&ipoib);
    lines.extend(asked.iter().take(2));
    let by_request = asked
        .first()
        .map(|s| format!("; {} ({})", s.msg().trim().trim_end_matches('.'), at(facts, s)))
        .unwrap_or_default();
    if !names.is_empty() || !listed.is_empty() {
        let why = if names.is_empty() {
            lines.push(listed[0]);
            format!(
                "while {} lists InfiniBand/RoCE devices ({})",
                facts.describe(listed[0]),
                at(facts, listed[0])
            )
        } else {
            format!(
                "over IP-over-InfiniBand interface{} {}",
                if names.len() > 1 { "s" } else { "" },
                list(&names)
            )
        };
        let detail = format!(
            "NCCL moves data between nodes over its socket transport ({}) {why}{by_request}",
            at(facts, sockets[0])
        );
        return vec![rule.finding(facts, rule.severity, detail, &lines)];
    }
    let detail = if asked.is_empty() {
        format!(
            "NCCL moves data over its socket transport ({}); whether these hosts have InfiniBand or RoCE is not in the log",
            at(facts, sockets[0])
        )
    } else {
        format!(
            "NCCL uses its socket transport ({}) as asked{by_request}; whether these hosts have InfiniBand or RoCE is not in the log",
            at(facts, sockets[0])
        )
    };
    vec![rule.finding(facts, Severity::Info, detail, &lines)]
}

/// `misc/socket.cc:567 -> 2`: NCCL's INFO trace of an error (a non-zero
/// ncclResult_t) returned at a line of a file whose name starts with one
/// of `files` (every release prints the trace; debug.h, NCCLCHECK).
fn error_returned(msg: &str, files: &[&str]) -> bool {
    let Some((place, code)) = msg.trim().split_once(" -> ") else {
        return false;
    };
    let file = place.rsplit('/').next().unwrap_or(place);
    files.iter().any(|f| file.starts_with(f))
        && file.contains(':')
        && code
            .split_whitespace()
            .next()
            .and_then(|c| c.parse::<u32>().ok())
            .is_some_and(|c| c != 0)
}

/// The lines where a process's bootstrap failed on a socket error: an error
/// returned from NCCL's socket code, then from bootstrap.cc, in one process.
/// The bootstrap only uses TCP sockets (sjeaugey, NVIDIA/nccl#1000).
fn bootstrap_failed<'f, 'a>(facts: &'f Facts<'a>) -> Vec<&'f Seen<'a>> {
    let mut socket_failed = BTreeSet::new();
    let mut out = Vec::new();
    for s in &facts.lines {
        if error_returned(s.msg(), &["socket.", "net_socket."]) {
            socket_failed.insert(s.process());
        } else if error_returned(s.msg(), &["bootstrap."]) && socket_failed.contains(&s.process()) {
            out.push(s);
        }
    }
    out
}

/// The bootstrap interface a line names: `Bootstrap : Using eth0:...` or
/// the `OOB ib0:...` of a `NET/IB : Using` line.
fn bootstrap_interface(msg: &str) -> Option<&str> {
    let rest = msg
        .split_once("Bootstrap : Using ")
        .or_else(|| msg.split_once("Bootstrap: Using "))
        .or_else(|| msg.split_once("; OOB "))?
        .1;
    let name = rest.trim_start_matches(|c: char| c == '[' || c.is_ascii_digit() || c == ']');
    name.split(':').next().filter(|n| !n.is_empty())
}

/// A socket error ended NCCL's bootstrap: the interface it bootstraps over
/// does not reach the other hosts (NVIDIA/nccl#1000: IPoIB in containers;
/// "setting NCCL_SOCKET_IFNAME to the ethernet NIC works").
fn bootstrap_unreachable(facts: &Facts, rule: &Rule) -> Option<Finding> {
    let failed = bootstrap_failed(facts);
    let first = *failed.first()?;
    let named = facts.matching(|m| bootstrap_interface(m).is_some());
    let mut names: Vec<String> = named
        .iter()
        .filter_map(|s| bootstrap_interface(s.msg()).map(String::from))
        .collect();
    names.sort();
    names.dedup();
    let over = match names.as_slice() {
        [] => "an interface the log does not name".to_string(),
        _ => format!("{} ({})", list(&names), at(facts, named[0])),
    };
    let detail = format!(
        "NCCL's bootstrap failed on a socket error ({}{}); it connects over {over}, which the other processes cannot reach",
        at(facts, first),
        more(failed.len())
    );
    let mut lines: Vec<&Seen> = failed.iter().take(4).copied().collect();
    lines.extend(named.iter().take(1));
    Some(rule.finding(facts, Severity::Error, detail, &lines))
}

pub fn bad_ifname(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut out: Vec<Finding> = bootstrap_unreachable(facts, rule).into_iter().collect();
    let set = facts.matching(|m| env_is(m, "NCCL_SOCKET_IFNAME", None) || m.starts_with("NCCL_SOCKET_IFNAME set to "));
    let failed = facts.symptoms(rule);
    if let Some(first) = failed.first() {
        let named = set
            .first()
            .map(|s| {
                let value = s.msg().rsplit(" to ").next().unwrap_or("").trim();
                format!("NCCL_SOCKET_IFNAME is `{value}` ({}), and ", at(facts, s))
            })
            .unwrap_or_default();
        let empty = first.msg().contains("address  with family");
        let detail = format!(
            "{named}NCCL found no interface to use{}: {}{}",
            if empty {
                " (it connects to an empty address)"
            } else {
                ""
            },
            quote(first),
            more(failed.len())
        );
        let mut lines = set.clone();
        lines.extend(&failed);
        out.push(rule.finding(facts, Severity::Error, detail, &lines));
    }
    let hosts = facts.hosts().len();
    let mut mixed: Vec<&Seen> = Vec::new();
    let mut virtuals: Vec<String> = Vec::new();
    let mut real: Vec<String> = Vec::new();
    for (ifaces, lines) in using_lists(facts, "NET/Socket :") {
        let (v, r): (Vec<&Interface>, Vec<&Interface>) = ifaces.iter().partition(|i| is_virtual(&i.name));
        if !v.is_empty() && !r.is_empty() {
            mixed.extend(lines);
            virtuals.extend(v.iter().map(|i| i.name.clone()));
            real.extend(r.iter().map(|i| i.name.clone()));
        }
    }
    if !mixed.is_empty() {
        virtuals.dedup();
        real.sort();
        real.dedup();
        let shown: Vec<String> = virtuals.iter().take(4).cloned().collect();
        let detail = format!(
            "NCCL's sockets use {} virtual interface{} ({}{}) next to {}: traffic to other nodes may go where they cannot reach",
            virtuals.len(),
            if virtuals.len() > 1 { "s" } else { "" },
            shown.join(", "),
            if virtuals.len() > 4 { ", ..." } else { "" },
            list(&real)
        );
        out.push(rule.finding(facts, Severity::Warn, detail, &mixed));
    }
    if hosts > 1 {
        let mut lo: Vec<&Seen> = Vec::new();
        for (ifaces, lines) in using_lists(facts, "Bootstrap")
            .into_iter()
            .chain(using_lists(facts, "NET/Socket :"))
        {
            if !ifaces.is_empty() && ifaces.iter().all(|i| is_virtual(&i.name)) {
                lo.extend(lines);
            }
        }
        if let Some(first) = lo.first() {
            let detail = format!(
                "the job spans {hosts} hosts but NCCL's sockets use only loopback or virtual interfaces: {}",
                quote(first)
            );
            out.push(rule.finding(facts, Severity::Error, detail, &lo));
        }
    }
    out
}

pub fn gdr_off(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut off: Vec<&Seen> = Vec::new();
    let mut on_hosts: Vec<String> = Vec::new();
    let mut receives = 0;
    for s in &facts.lines {
        let Some(c) = connection(s.msg()) else {
            continue;
        };
        let Via::Net { name, gdr, .. } = &c.via else {
            continue;
        };
        if c.side != Some(Side::Receive) || name.eq_ignore_ascii_case("Socket") {
            continue;
        }
        receives += 1;
        if *gdr {
            on_hosts.extend(s.host().map(String::from));
        } else {
            off.push(s);
        }
    }
    on_hosts.sort();
    on_hosts.dedup();
    let Some(first) = off.first() else {
        return disabled_for_hca(facts, rule, &on_hosts);
    };
    let net = match connection(first.msg()).map(|c| c.via) {
        Some(Via::Net { name, .. }) => name,
        _ => "IB".into(),
    };
    let why = facts.symptoms(rule);
    let mut detail = format!(
        "{} of {receives} receiving connections over NET/{net} lack /GDRDMA ({}{})",
        off.len(),
        at(facts, first),
        if off.len() > 1 { ", ..." } else { "" }
    );
    if !on_hosts.is_empty() {
        detail += &format!("; on {} they have it", list(&on_hosts));
    }
    if let Some(w) = why.first() {
        detail += &format!("; NCCL says {}", quote(w));
    }
    let mut lines: Vec<&Seen> = off.iter().take(8).copied().collect();
    lines.extend(why.iter().take(2));
    vec![rule.finding(facts, rule.severity, detail, &lines)]
}

/// `NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'` (2.13.4+; with
/// ` (no module)` 2.5.6-2.12.12): neither the peer-memory module nor DMA-BUF
/// is usable with that HCA (graph/topo.cc), so no connection over it uses
/// GPUDirect RDMA. Judged on hosts whose channel lines show no /GDRDMA
/// receive; the socket transport's devices are not HCAs.
fn disabled_for_hca(facts: &Facts, rule: &Rule, on_hosts: &[String]) -> Vec<Finding> {
    let off: Vec<&Seen> = facts
        .matching(|m| m.contains("GPU Direct RDMA Disabled for HCA") && !m.trim_start().starts_with("NET/Socket"))
        .into_iter()
        .filter(|s| s.host().is_none_or(|h| !on_hosts.iter().any(|o| o == h)))
        .collect();
    let Some(first) = off.first() else {
        return Vec::new();
    };
    let mut names: Vec<String> = off
        .iter()
        .filter_map(|s| s.msg().split('\'').nth(1).map(String::from))
        .collect();
    names.sort();
    names.dedup();
    let detail = format!(
        "NCCL says GPU Direct RDMA is disabled for HCA{} {} ({}; {} line{}): data between these NICs and the GPUs is staged through host memory",
        if names.len() > 1 { "s" } else { "" },
        list(&names),
        at(facts, first),
        off.len(),
        if off.len() > 1 { "s" } else { "" }
    );
    let lines: Vec<&Seen> = off.iter().take(8).copied().collect();
    vec![rule.finding(facts, rule.severity, detail, &lines)]
}

pub fn hca(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut out = Vec::new();
    let failed = facts.symptoms(rule);
    let listed = facts.matching(|m| m.starts_with("NET/IB : Using") && !hcas(m).is_empty());
    if let Some(first) = failed.first() {
        let procs: Vec<_> = failed.iter().map(|s| s.process()).collect();
        let mut lines = failed.clone();
        lines.extend(listed.iter().filter(|s| procs.contains(&s.process())).take(2));
        let detail = format!(
            "an HCA NCCL listed cannot be used: {}{}",
            quote(first),
            more(failed.len())
        );
        out.push(rule.finding(facts, rule.severity, detail, &lines));
    }
    // the ports each host lists, the most any of its lines lists
    let mut ports: BTreeMap<String, (Vec<String>, &Seen)> = BTreeMap::new();
    for s in &listed {
        let Some(host) = s.host() else {
            continue;
        };
        let names: Vec<String> = hcas(s.msg()).into_iter().map(|h| h.port).collect();
        let e = ports.entry(host.to_string()).or_insert_with(|| (names.clone(), s));
        if names.len() > e.0.len() {
            *e = (names, s);
        }
    }
    let most = ports.values().map(|(p, _)| p.len()).max().unwrap_or(0);
    let fewer: Vec<(&String, &(Vec<String>, &Seen))> = ports.iter().filter(|(_, (p, _))| p.len() < most).collect();
    if ports.len() > 1 && !fewer.is_empty() {
        let full = ports
            .values()
            .find(|(p, _)| p.len() == most)
            .map(|(p, s)| (p.clone(), *s));
        let mut lines: Vec<&Seen> = fewer.iter().map(|(_, (_, s))| *s).collect();
        let mut missing: Vec<String> = Vec::new();
        if let Some((all, s)) = &full {
            lines.push(s);
            for (_, (p, _)) in &fewer {
                missing.extend(all.iter().filter(|x| !p.contains(x)).cloned());
            }
        }
        missing.sort();
        missing.dedup();
        let hosts: Vec<String> = fewer
            .iter()
            .map(|(h, (p, _))| format!("{h} lists {} of {most}", p.len()))
            .collect();
        let detail = format!(
            "{}{}: a port that is not active is skipped without a word",
            list(&hosts),
            if missing.is_empty() {
                String::new()
            } else {
                format!(" (missing: {})", missing.join(", "))
            }
        );
        out.push(rule.finding(facts, Severity::Warn, detail, &lines));
    }
    let none = facts.matching(|m| m.trim() == "NET/IB : No device found.");
    if let (Some(first), Some(other)) = (none.first(), listed.first())
        && first.host() != other.host()
    {
        let detail = format!(
            "{} finds no InfiniBand/RoCE device ({}) while {} lists some ({})",
            facts.describe(first),
            at(facts, first),
            facts.describe(other),
            at(facts, other)
        );
        out.push(rule.finding(facts, Severity::Warn, detail, &[*first, *other]));
    }
    out
}

/// `12` of `... error 12, ...`, `status=12 ...` or `status=IBV_WC_RETRY_EXC_ERR(12)`.
fn status(msg: &str) -> Option<u32> {
    let after = msg
        .split_once("with error ")
        .or_else(|| msg.split_once("status="))
        .map(|(_, r)| r)?;
    let digits = match after.split_once('(') {
        Some((name, rest)) if !name.starts_with(|c: char| c.is_ascii_digit()) => rest,
        _ => after,
    };
    whole_number(digits).and_then(|n| u32::try_from(n).ok())
}

pub fn completion(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let lines: Vec<&Seen> = facts
        .symptoms(rule)
        .into_iter()
        .filter(|s| !s.msg().contains("No such device"))
        .collect();
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    let what = match status(first.msg()) {
        Some(12) if first.msg().contains("completion") => {
            "status 12 is a transport retry timeout: the NICs cannot reach each other (RoCE GID or routing)"
        }
        Some(5) if first.msg().contains("completion") => "status 5 is a request flushed after an earlier error",
        Some(4) if first.msg().contains("completion") => {
            "status 4 is a local protection error (with GPUDirect RDMA: ACS)"
        }
        _ => "the queue pair or completion failed",
    };
    let mut all = lines.clone();
    all.extend(
        facts
            .matching(|m| env_is(m, "NCCL_IB_GID_INDEX", None))
            .into_iter()
            .take(2),
    );
    let detail = format!("{what}: {}{}", quote(first), more(lines.len()));
    vec![rule.finding(facts, rule.severity, detail, &all)]
}

/// The plugin a `NET/Plugin` line names, and whether the line says it
/// failed to load (rather than that it is not there).
fn plugin_line(msg: &str) -> Option<(String, bool)> {
    let rest = msg
        .strip_prefix("NET/Plugin")?
        .trim_start_matches([' ', ':'])
        .trim_start();
    if let Some(name) = rest.strip_prefix("Could not find:") {
        let name = name.trim().split(['.', ' ']).next().unwrap_or("");
        let name = if name == "libnccl-net" { "libnccl-net.so" } else { name };
        return Some((name.to_string(), false));
    }
    if let Some(load) = rest.strip_prefix("Plugin load") {
        let name = load
            .trim_start()
            .strip_prefix('(')
            .and_then(|r| r.split_once(')'))
            .map(|(n, _)| n.to_string())
            .or_else(|| load.rsplit_once("when loading ").map(|(_, n)| n.trim().to_string()))
            .unwrap_or_else(|| "libnccl-net.so".into());
        let missing = load.contains("cannot open shared object file");
        return Some((name, !missing));
    }
    // 2.28.3+: `NET/Plugin: libnccl-net-ofi.so: <the loader's error>`
    let (file, error) = rest.split_once(": ")?;
    let file = file.trim_start_matches("dlerror=");
    (file.ends_with(".so") && !file.contains(' '))
        .then(|| (file.to_string(), !error.contains("cannot open shared object file")))
}

pub fn plugin(facts: &Facts, rule: &Rule) -> Vec<Finding> {
    let mut lines = facts.symptoms(rule);
    let mut named: Vec<String> = Vec::new();
    for s in &facts.lines {
        if let Some((name, failed)) = plugin_line(s.msg())
            && (failed || name != "libnccl-net.so")
        {
            lines.push(s);
            named.push(name);
        }
    }
    let Some(first) = lines.first() else {
        return Vec::new();
    };
    named.sort();
    named.dedup();
    let severity = if facts
        .matching(|m| m.contains("Failed to initialize any NET plugin"))
        .is_empty()
    {
        rule.severity
    } else {
        Severity::Error
    };
    let network = facts.matching(|m| m.starts_with("Using network "));
    let fell_back = network
        .first()
        .map(|s| format!("; NCCL then says {} ({})", quote(s), at(facts, s)))
        .unwrap_or_default();
    let detail = format!(
        "NCCL did not load the network plugin{} {}: {}{}{fell_back}",
        if named.len() > 1 { "s" } else { "" },
        if named.is_empty() {
            "it needs".to_string()
        } else {
            list(&named)
        },
        quote(first),
        more(lines.len())
    );
    lines.extend(network.into_iter().take(1));
    vec![rule.finding(facts, severity, detail, &lines)]
}
