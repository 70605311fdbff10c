//! Unit tests of the doctor: every rule over the corpus of real logs
//! (tests/fixtures/doctor/manifest.toml: each confirmed log names its
//! cause on at least one of its evidence lines, each healthy log gives
//! nothing above info), and each rule's judgement on lines built from
//! NCCL's format strings (docs/doctor-rules-research.md) where the corpus
//! has no log.

use std::path::{Path, PathBuf};

use super::*;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn examine_text(text: &str) -> Diagnosis {
    examine(&[LogFile::new("t.log", text)])
}

fn examine_file(path: &Path) -> Diagnosis {
    let text = crate::nccl_log::read_file(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    examine(&[LogFile::new(path.display().to_string(), text)])
}

fn manifest() -> toml::Table {
    let text = std::fs::read_to_string(root().join("tests/fixtures/doctor/manifest.toml")).unwrap();
    toml::from_str(&text).unwrap()
}

fn rules_of(d: &Diagnosis, above: Severity) -> Vec<(&'static str, Severity)> {
    d.findings
        .iter()
        .filter(|f| f.severity >= above)
        .map(|f| (f.rule, f.severity))
        .collect()
}

#[test]
fn every_confirmed_log_of_the_corpus_names_its_cause_on_its_evidence_lines() {
    let m = manifest();
    let logs = m["log"].as_array().unwrap();
    let mut failures = Vec::new();
    let mut named = 0;
    for e in logs {
        let file = e["file"].as_str().unwrap();
        let cause = e["cause"].as_str().unwrap();
        let d = examine_file(&root().join("tests/fixtures/doctor").join(file));
        if cause == "healthy" {
            continue;
        }
        let want: Vec<usize> = e["evidence_lines"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_integer().unwrap() as usize)
            .collect();
        let found = d
            .findings
            .iter()
            .find(|f| f.rule == cause && f.severity > Severity::Info);
        match found {
            Some(f) if f.evidence.iter().any(|ev| want.contains(&ev.line)) => named += 1,
            Some(f) => failures.push(format!(
                "{file}: {cause} found on lines {:?}, not on its evidence lines {want:?}",
                f.evidence.iter().map(|e| e.line).collect::<Vec<_>>()
            )),
            None => failures.push(format!(
                "{file}: {cause} not found; found {:?}",
                rules_of(&d, Severity::Info)
            )),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(named >= 25, "{named} confirmed logs");
}

#[test]
fn no_healthy_log_gives_a_finding_above_info() {
    let m = manifest();
    let mut paths: Vec<PathBuf> = m["log"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cause"].as_str() == Some("healthy"))
        .map(|e| root().join("tests/fixtures/doctor").join(e["file"].as_str().unwrap()))
        .collect();
    for e in m["healthy_fixture"].as_array().unwrap() {
        paths.push(root().join(e["path"].as_str().unwrap()));
    }
    let shared = std::env::var_os("COLLBENCH_REAL_LOGS")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared/real-logs"));
    for e in m["healthy_shared"].as_array().unwrap() {
        let p = shared.join(e["path"].as_str().unwrap());
        if p.is_file() {
            paths.push(p);
        }
    }
    assert!(paths.len() >= 5, "{paths:?}");
    for p in paths {
        let d = examine_file(&p);
        assert!(
            !d.problem_found(),
            "{}: {:?}",
            p.display(),
            rules_of(&d, Severity::Warn)
        );
    }
}

#[test]
fn a_log_without_info_lines_says_what_could_not_be_judged() {
    let d = examine_text("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device\n");
    assert_eq!(rules_of(&d, Severity::Info), [("shm-too-small", Severity::Error)]);
    assert_eq!(d.not_judged.len(), 1);
    assert!(
        d.not_judged[0].enable.starts_with("NCCL_DEBUG=INFO"),
        "{:?}",
        d.not_judged
    );
    // INFO lines of one process, no channel or network lines
    let d = examine_text("h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n");
    assert!(!d.problem_found());
    let checks: Vec<&str> = d.not_judged.iter().map(|u| u.check).collect();
    assert!(
        checks.iter().any(|c| c.starts_with("the transport of each connection")),
        "{checks:?}"
    );
    assert!(
        checks.iter().any(|c| c.starts_with("the network NCCL chose")),
        "{checks:?}"
    );
    assert!(
        checks.iter().any(|c| c.starts_with("differences between ranks")),
        "{checks:?}"
    );
}

/// Lines in the formats of NCCL 2.21.5 (docs/doctor-rules-research.md)
/// for one process `pid` on host `host`, device `dev`.
fn info(host: &str, pid: u32, dev: u32, msg: &str) -> String {
    format!("{host}:{pid}:{pid} [{dev}] NCCL INFO {msg}\n")
}

#[test]
fn p2p_disabled_by_the_user_is_named_as_info_and_shm_beside_nvlink_as_a_warning() {
    let mut text = info("n1", 1, 0, "NCCL_P2P_DISABLE set by environment to 1.");
    text += &info("n1", 1, 0, "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct");
    let d = examine_text(&text);
    assert_eq!(rules_of(&d, Severity::Info), [("p2p-degraded", Severity::Info)]);
    assert!(
        d.findings[0]
            .detail
            .contains("as asked: NCCL_P2P_DISABLE set by environment to 1"),
        "{}",
        d.findings[0].detail
    );
    let mut text = info(
        "n1",
        1,
        0,
        "Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type NVL/PIX, sameChannels 1",
    );
    text += &info("n1", 1, 0, "Channel 00 : 0[0] -> 1[1] via SHM/direct/direct");
    assert_eq!(
        rules_of(&examine_text(&text), Severity::Warn),
        [("p2p-degraded", Severity::Warn)]
    );
    let text = "\nn1:1:1 [0] graph/paths.cc:325 NCCL WARN P2P is disabled between NVLINK connected GPUs 1 and 0. This should not be the case given their connectivity, and is probably due to a hardware issue. If you still want to proceed, you can set NCCL_IGNORE_DISABLED_P2P=1.\n";
    assert_eq!(
        rules_of(&examine_text(text), Severity::Warn),
        [("p2p-degraded", Severity::Error)]
    );
}

#[test]
fn a_host_listing_fewer_hcas_than_the_others_is_named_with_its_missing_ports() {
    let mut text = info(
        "a",
        1,
        0,
        "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>",
    );
    text += &info("b", 2, 0, "NET/IB : Using [0]mlx5_0:1/IB [RO]; OOB ib0:10.0.0.2<0>");
    let d = examine_text(&text);
    assert_eq!(rules_of(&d, Severity::Warn), [("hca-missing", Severity::Warn)]);
    let f = &d.findings[0];
    assert_eq!(
        f.detail,
        "b lists 1 of 2 (missing: mlx5_1:1): a port that is not active is skipped without a word"
    );
    assert_eq!(f.hosts, ["a", "b"]);
    assert_eq!(f.evidence.iter().map(|e| e.line).collect::<Vec<_>>(), [1, 2]);
}

#[test]
fn settings_and_versions_that_differ_between_processes_are_errors_but_per_host_names_warnings() {
    let mut text = info("a", 1, 0, "NCCL version 2.21.5+cuda12.4");
    text += &info("a", 1, 0, "NCCL_PROTO set by environment to Simple");
    text += &info("a", 1, 0, "NCCL_SOCKET_IFNAME set by environment to eth0");
    text += &info("b", 2, 0, "NCCL version 2.23.4+cuda12.6");
    text += &info("b", 2, 0, "NCCL_PROTO set by environment to LL128");
    text += &info("b", 2, 0, "NCCL_SOCKET_IFNAME set by environment to ens1");
    let d = examine_text(&text);
    let got: Vec<(&str, Severity, &str)> = d
        .findings
        .iter()
        .map(|f| (f.rule, f.severity, f.detail.as_str()))
        .collect();
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0].2, "the log shows NCCL 2.21.5 (line 1) and 2.23.4 (line 4)");
    assert_eq!(
        got[1].2,
        "NCCL_PROTO differs between processes: `LL128` on 1 process (line 5) and `Simple` on 1 process (line 2)"
    );
    assert_eq!((got[2].0, got[2].1), ("env-or-version-mismatch", Severity::Warn));
    assert_eq!(d.versions, ["2.21.5", "2.23.4"]);
}

#[test]
fn channel_limits_plugins_and_unknown_warns_are_judged() {
    let mut text = info("a", 1, 0, "NCCL_MAX_NCHANNELS set by environment to 2.");
    text += &info(
        "a",
        1,
        0,
        "2 coll channels, 0 collnet channels, 0 nvls channels, 2 p2p channels, 2 p2p channels per peer",
    );
    let d = examine_text(&text);
    assert_eq!(rules_of(&d, Severity::Info), [("few-channels", Severity::Warn)]);
    assert_eq!(
        d.findings[0].detail,
        "NCCL_MAX_NCHANNELS set by environment to 2 (line 1) limits the channels; NCCL reports 2 coll channels"
    );
    // the default plugin name not found is no finding; a named one is
    let none = info(
        "a",
        1,
        0,
        "NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
    );
    assert!(examine_text(&none).findings.is_empty());
    let ofi = info(
        "a",
        1,
        0,
        "NET/Plugin: Could not find: libnccl-net-ofi.so. Using internal network plugin.",
    ) + &info("a", 1, 0, "Using network Socket");
    let d = examine_text(&ofi);
    assert_eq!(rules_of(&d, Severity::Warn), [("net-plugin-failed", Severity::Warn)]);
    assert!(
        d.findings[0].detail.contains("\"Using network Socket\""),
        "{}",
        d.findings[0].detail
    );
    // NCCL's RAS report is passed through (NVIDIA/nccl#1911's wording)
    let d = examine_text("  Communicator ranks have different AllGather operation counts\n");
    assert_eq!(rules_of(&d, Severity::Info), [("nccl-ras", Severity::Error)]);
    // a WARN no rule knows is quoted, as a warning
    let d = examine_text("\nh:1:1 [0] foo.cc:1 NCCL WARN something new\n");
    assert_eq!(rules_of(&d, Severity::Info), [("warn-before-hang", Severity::Warn)]);
}

#[test]
fn sockets_asked_for_are_named_as_info_and_sockets_over_ipoib_as_a_warning() {
    // `collbench run --transport socket`'s variables
    let mut text = info("n1", 1, 0, "NCCL_IB_DISABLE set by environment to 1.");
    text += &info("n1", 1, 0, "NET/Socket : Using [0]eth0:10.0.0.5<0>");
    text += &info("n1", 1, 0, "Using network Socket");
    let d = examine_text(&text);
    assert_eq!(rules_of(&d, Severity::Info), [("socket-where-ib", Severity::Info)]);
    let text = text.replace("[0]eth0:10.0.0.5<0>", "[0]ib0:10.0.0.5<0>");
    assert_eq!(
        rules_of(&examine_text(&text), Severity::Info),
        [("socket-where-ib", Severity::Warn)]
    );
}

#[test]
fn the_rules_page_lists_every_rule_as_the_table_has_it() {
    let page = std::fs::read_to_string(root().join("docs/doctor.md")).unwrap();
    let (begin, end) = (
        "<!-- rules: generated by rules::rules_markdown -->\n",
        "<!-- end of rules -->",
    );
    let want = rules::rules_markdown();
    if std::env::var_os("COLLBENCH_BLESS").is_some() {
        let (head, rest) = page.split_once(begin).expect("the begin marker");
        let (_, tail) = rest.split_once(end).expect("the end marker");
        std::fs::write(root().join("docs/doctor.md"), format!("{head}{begin}{want}{end}{tail}")).unwrap();
        return;
    }
    let got = page
        .split_once(begin)
        .and_then(|(_, r)| r.split_once(end))
        .map(|(g, _)| g);
    assert_eq!(
        got,
        Some(want.as_str()),
        "docs/doctor.md's rules differ: COLLBENCH_BLESS=1 cargo test --lib rules_page"
    );
}

#[test]
fn gpudirect_rdma_disabled_for_an_hca_is_gdr_off_unless_a_channel_of_that_host_has_it() {
    // graph/topo.cc, 2.13.4+: `NET/%s : GPU Direct RDMA %s for HCA %d '%s'`
    let text = info("a", 1, 0, "NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'");
    let d = examine_text(&text);
    assert_eq!(rules_of(&d, Severity::Info), [("gdr-off", Severity::Warn)]);
    assert!(
        d.findings[0].detail.contains("HCA mlx5_0 (line 1; 1 line)"),
        "{}",
        d.findings[0].detail
    );
    // the socket transport's devices are not HCAs
    let text = info("a", 1, 0, "NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'");
    assert!(rules_of(&examine_text(&text), Severity::Info).is_empty());
    // a receive with /GDRDMA on that host says otherwise (DMA-BUF, another HCA)
    let mut text = info("a", 1, 0, "NET/IB : GPU Direct RDMA Disabled for HCA 1 'mlx5_1'");
    text += &info("a", 1, 0, "Channel 00/0 : 8[0] -> 0[0] [receive] via NET/IB/0/GDRDMA");
    assert!(rules_of(&examine_text(&text), Severity::Info).is_empty());
    // `Enabled` is the healthy line
    let text = info("a", 1, 0, "NET/IB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'");
    assert!(rules_of(&examine_text(&text), Severity::Info).is_empty());
}

#[test]
fn a_socket_error_then_a_bootstrap_error_in_one_process_is_an_unreachable_bootstrap_interface() {
    // NCCL's INFO trace of returned errors (NCCLCHECK), 2.18.5's line numbers
    let mut text = info("a", 1, 0, "Bootstrap : Using ib0:192.168.0.1<0>");
    text += &info("a", 1, 0, "misc/socket.cc:567 -> 2");
    text += &info("a", 1, 0, "bootstrap.cc:270 -> 2");
    let d = examine_text(&text);
    assert_eq!(rules_of(&d, Severity::Info), [("bad-socket-ifname", Severity::Error)]);
    assert_eq!(
        d.findings[0].detail,
        "NCCL's bootstrap failed on a socket error (line 3); it connects over ib0 (line 1), which the other processes cannot reach"
    );
    assert_eq!(
        d.findings[0].evidence.iter().map(|e| e.line).collect::<Vec<_>>(),
        [1, 3]
    );
    // a bootstrap error without a socket error in that process is not this
    // (bootstrap.cc's `Message truncated`, NVIDIA/nccl#1176)
    let mut text = info("a", 1, 0, "misc/socket.cc:567 -> 2");
    text += &info("b", 2, 0, "bootstrap.cc:554 -> 3");
    assert!(rules_of(&examine_text(&text), Severity::Info).is_empty());
    // a trace of success is no error
    let mut text = info("a", 1, 0, "misc/socket.cc:567 -> 0");
    text += &info("a", 1, 0, "bootstrap.cc:270 -> 0");
    assert!(rules_of(&examine_text(&text), Severity::Info).is_empty());
}

#[test]
fn the_ofi_plugin_finding_no_provider_is_a_failed_plugin_not_an_unknown_warn() {
    // aws-ofi-nccl's WARN, quoted by sjeaugey in NVIDIA/nccl#229
    let text = "\nh:1:1 [0] get_ofi_provider:312 NCCL WARN NET/OFI Could not find any optimal provider\n";
    let d = examine_text(text);
    assert_eq!(rules_of(&d, Severity::Info), [("net-plugin-failed", Severity::Warn)]);
}
