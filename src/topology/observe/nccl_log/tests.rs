//! Unit tests of `nccl_log`.

use super::*;

fn fixture(name: &str) -> NcclLog {
    let path = format!("{}/tests/fixtures/nccl-logs/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    parse(&text)
}

/// Ranks 0..per_node on node 0, the next per_node on node 1, ...
fn nodes_of(per_node: usize) -> impl Fn(usize, usize) -> bool {
    move |a, b| a / per_node == b / per_node
}

#[test]
fn a_2_18_log_with_bus_id_brackets_reads_as_nvlink_p2p_and_ib() {
    let log = fixture("2.18-dgx-a100-two-nodes.log");
    assert_eq!(log.version.as_deref(), Some("2.18.5+cuda12.2"));
    assert_eq!(log.network.as_deref(), Some("IB"));
    assert_eq!(log.intra_path(), Some("NVL"));
    assert_eq!(log.labels(), vec!["P2P/IPC(NVL)", "NET/IB/GDRDMA"]);
    assert_eq!(log.nvls_available, Some(false));
    assert!(log.connections.iter().all(|c| c.from < 16));
    assert_eq!(log.contradiction(Profile::Nvlink, &nodes_of(8)), None);
    assert_eq!(log.contradiction(Profile::Auto, &nodes_of(8)), None);
    let m = log.contradiction(Profile::Pcie, &nodes_of(8)).unwrap();
    assert!(m.contains("peer-to-peer"), "{m}");
    let m = log.contradiction(Profile::Ib, &nodes_of(8)).unwrap();
    assert!(m.contains("P2P, not NET/IB"), "{m}");
}

#[test]
fn a_2_21_log_with_p2p_disabled_reads_as_shm_and_passes_pcie() {
    let log = fixture("2.21-pcie-shm.log");
    assert_eq!(log.labels(), vec!["SHM"]);
    assert_eq!(log.intra_path(), Some("PHB"));
    assert!(log.env.contains(&("NCCL_P2P_DISABLE".to_string(), "1".to_string())));
    assert!(
        log.env
            .contains(&("NCCL_NET_DISABLE_INTRA".to_string(), "1".to_string()))
    );
    assert_eq!(log.contradiction(Profile::Pcie, &nodes_of(4)), None);
    let m = log.contradiction(Profile::Nvlink, &nodes_of(4)).unwrap();
    assert!(m.contains("host memory (SHM)"), "{m}");
}

#[test]
fn a_2_23_two_node_log_shows_pxn_and_the_algorithms_per_size() {
    let log = fixture("2.23-h100-two-nodes-pxn.log");
    assert_eq!(log.labels(), vec!["P2P/CUMEM(NVL)", "NET/IB/GDRDMA/PXN"]);
    assert_eq!(log.contradiction(Profile::Nvlink, &nodes_of(8)), None);
}

/// The TUNING lines of a fixture, read by the one reader of them
/// (`nccl_log::message::tuning`): `function bytes ALGO/PROTO`.
fn tunings(name: &str) -> Vec<String> {
    use crate::nccl_log::message::{Tuning, tuning};
    let path = format!("{}/tests/fixtures/nccl-logs/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    crate::nccl_log::lines(&text)
        .filter_map(|line| tuning(line.nccl?.message))
        .map(|t| match t {
            Tuning::Chosen {
                func,
                bytes,
                algo,
                proto,
                ..
            } => {
                format!("{} {bytes} {algo}/{proto}", func.unwrap_or_default())
            }
            other => format!("{other:?}"),
        })
        .collect()
}

#[test]
fn the_fixtures_tuning_lines_read_through_the_one_reader() {
    let t = tunings("2.23-h100-two-nodes-pxn.log");
    for want in [
        "AllReduce 8 tree/ll",
        "AllReduce 65536 tree/ll",
        "AllReduce 131072 ring/ll128",
        "AllReduce 33554432 ring/simple",
        "AllGather 1024 ring/simple",
    ] {
        assert!(t.iter().any(|l| l == want), "{want} not in {t:?}");
    }
    assert!(tunings("2.30-b200-nvls.log")[0].ends_with(" nvls/simple"));
}

#[test]
fn a_2_27_socket_log_passes_socket_and_fails_ib() {
    let log = fixture("2.27-socket-one-node.log");
    assert_eq!(log.network.as_deref(), Some("Socket"));
    assert_eq!(log.labels(), vec!["NET/Socket"]);
    assert_eq!(log.contradiction(Profile::Socket, &nodes_of(4)), None);
    let m = log.contradiction(Profile::Ib, &nodes_of(4)).unwrap();
    assert!(m.contains("NET/Socket, not NET/IB"), "{m}");
    let m = log.contradiction(Profile::Nvlink, &nodes_of(4)).unwrap();
    assert!(m.contains("inside a node went through the network"), "{m}");
}

#[test]
fn a_2_30_log_with_nvls_passes_nvls_and_fails_nvlink() {
    let log = fixture("2.30-b200-nvls.log");
    assert_eq!(log.nvls_available, Some(true));
    assert_eq!(log.nvls_channels, Some(16));
    assert_eq!(log.labels(), vec!["P2P/CUMEM(NVL)", "NVLS"]);
    assert_eq!(log.contradiction(Profile::Nvls, &nodes_of(8)), None);
    let m = log.contradiction(Profile::Nvlink, &nodes_of(8)).unwrap();
    assert!(m.contains("NVLS"), "{m}");
}

#[test]
fn nvls_that_is_not_available_contradicts_the_nvls_profile() {
    let log = parse("h:1:2 [0] NCCL INFO NVLS multicast support is not available on dev 0 (NVLS_NCHANNELS 0)\n");
    assert_eq!(log.nvls_available, Some(false));
    let m = log.contradiction(Profile::Nvls, &|_, _| true).unwrap();
    assert!(m.contains("not available"), "{m}");
    let log = parse(
        "h:1:2 [0] NCCL INFO NVLS multicast support is available on dev 0, transport disabled, symmetric multimem disabled\n",
    );
    assert!(!log.uses_nvls());
}

#[test]
fn warnings_timestamps_and_foreign_lines_are_handled() {
    let log = parse(
        "[2026-01-02 03:04:05] node1:99:100 [2] NCCL INFO Using network IB\n\
         node1:99:100 [2] NCCL WARN NET/IB : No device found.\n\
         some other program's line\n\
         node1:99:100 [2] NCCL INFO comm 0x5 rank 2 nRanks 8 nNodes 1 localRanks 8 localRank 2 MNNVL 0\n",
    );
    assert_eq!(log.network.as_deref(), Some("IB"));
    assert_eq!(log.warnings, vec!["NET/IB : No device found."]);
    assert!(log.connections.is_empty() && log.nvls_channels.is_none());
}

proptest::proptest! {
    #[test]
    fn the_parser_never_panics(text in "\\PC{0,300}") {
        let log = parse(&text);
        let _ = log.labels();
        for p in Profile::ALL {
            let _ = log.contradiction(p, &|a, b| a == b);
        }
    }

    #[test]
    fn the_parser_never_panics_on_mangled_channel_lines(
        channel in "[0-9/x]{0,6}", a in "[0-9\\[\\]a-f]{0,8}", b in "[0-9\\[\\]a-f()]{0,8}",
        via in "(P2P|SHM|NET|)(/[A-Za-z0-9()]{0,8}){0,5}",
    ) {
        let line = format!("h:1:1 [0] NCCL INFO Channel {channel} : {a} -> {b} [send] via {via}\n");
        let log = parse(&line);
        let _ = log.labels();
        let _ = log.contradiction(Profile::Ib, &|_, _| false);
    }
}
