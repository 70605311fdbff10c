//! Unit tests of `replay::line`.

use super::*;

/// One line as the reader hands it over.
fn parse_line(text: &str) -> Parsed {
    super::parse_line(&nccl_log::line(1, text))
}

/// The origin NCCL's prefix `before` gives.
fn parse_prefix(before: &str) -> Origin {
    nccl_log::line(1, &format!("{before}NCCL INFO x")).nccl.unwrap().origin
}

fn call(text: &str) -> CallLine {
    match parse_line(text).line {
        Line::Call(c) => c,
        other => panic!("{other:?} from {text}"),
    }
}

fn init(text: &str) -> InitLine {
    match parse_line(text).line {
        Line::Init(i) => i,
        other => panic!("{other:?} from {text}"),
    }
}

fn cut(text: &str) -> CutLine {
    match parse_line(text).line {
        Line::Cut(c) => c,
        other => panic!("{other:?} from {text}"),
    }
}

#[test]
fn a_collective_line_gives_every_field() {
    // NVIDIA/nccl#1193 (Ray's prefix before NCCL's)
    let c = call(
        "(RayTrainWorker pid=615, ip=10.72.7.6) r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-fqztx:615:18953 [2] NCCL INFO AllReduce: opCount 139d sendbuff 0x78d056200000 recvbuff 0x78d056200000 count 7382228 datatype 7 op 0 root 0 comm 0x78cfda045840 [nranks=128] stream 0x78d07125e5e0",
    );
    assert_eq!(c.name, "AllReduce");
    assert_eq!(c.op_count, Some(0x139d));
    assert_eq!(c.count, 7_382_228);
    assert_eq!((c.datatype, c.op, c.root), (7, 0, 0));
    assert_eq!(c.comm, Some(0x78cf_da04_5840));
    assert_eq!(c.nranks, Some(128));
    assert_eq!(c.source, Source::Coll);
    assert_eq!(c.prefix.host, "r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-fqztx");
    assert_eq!((c.prefix.pid, c.prefix.tid, c.prefix.dev), (615, 18953, Some(2)));
}

#[test]
fn prefixes_of_launchers_and_trimmed_prefixes_are_read() {
    // torchrun's [rankN]: label (pytorch/torchtitan#1570)
    let p = parse_prefix("[rank0]:costa-671b-5-worker-1:382:675 [0] ");
    assert_eq!(p.host, "costa-671b-5-worker-1");
    assert_eq!((p.pid, p.tid, p.dev, p.rank_label), (382, 675, Some(0), Some(0)));
    // pdsh's host: prefix (NVIDIA/nccl#1029)
    let p = parse_prefix("rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19488:21063 [4] ");
    assert_eq!(
        (p.host.as_str(), p.pid, p.dev),
        ("rdma-gpu-train-worker-0", 19488, Some(4))
    );
    // a prefix cut to the device (NVIDIA/nccl#783)
    let c = call(
        "[0] NCCL INFO Send: opCount 1 sendbuff (nil) recvbuff 0x7fbfbe7a4f40 count 1572864 datatype 7 op 0 root 1 comm 0x5574e8f68900 [nranks=2] stream 0x5574b87450d0",
    );
    assert_eq!((c.prefix.host.as_str(), c.prefix.pid, c.prefix.dev), ("", 0, Some(0)));
    assert_eq!((c.name.as_str(), c.root), ("Send", 1));
    // a timestamp before the host
    let p = parse_prefix("[2024-05-01 10:00:00] host-a:12:13 [3] ");
    assert_eq!((p.host.as_str(), p.pid, p.dev), ("host-a", 12, Some(3)));
    // old RCCL: a microsecond timestamp between the device and the mark
    // (ROCm/rtg_tracer's "RCCL non-standard timestamps")
    let p = parse_prefix("rocm-framework-3:24888:25056 [1] 1558545003174220 ");
    assert_eq!(
        (p.host.as_str(), p.pid, p.tid, p.dev),
        ("rocm-framework-3", 24888, 25056, Some(1))
    );
}

#[test]
fn the_device_after_the_mark_and_rccl_fields_are_read() {
    let c = call(
        "node-07:21879:21879 NCCL INFO [2] AllReduce: opCount 1 sendbuff 0x7f2a0000000 recvbuff 0x7f2a0000000 count 1048576 datatype 7 op 0 root 0 comm 0x55f2c3d40000 [nranks=4] stream 0x55f200001230",
    );
    assert_eq!((c.prefix.pid, c.prefix.dev, c.count), (21879, Some(2), 1_048_576));
    // RCCL: `task N globalrank R` after the stream (src/enqueue.cc)
    let c = call(
        "banff-cyxtera-s78-4:54466:54466 [7] NCCL INFO AllReduce: opCount 3 sendbuff 0x7f96cb400000 recvbuff 0x7f96cb400000 count 268435456 datatype 6 op 0 root 0 comm 0x4c3ea60 [nranks=8] stream 0x4930d30 task 0 globalrank 1",
    );
    assert_eq!((c.global_rank, c.prefix.dev, c.nranks), (Some(1), Some(7), Some(8)));
    // rccl-tests pasted without a prefix or a stream (mxxm-t/mx-llama.cpp#7)
    let c = call(
        "NCCL INFO AllReduce: opCount 0 sendbuff 0x7cb27a400000 recvbuff 0x7cb23a200000 count 2 datatype 7 op 0 root 0 comm 0x5a3ea68dbe40 [nranks=2]",
    );
    assert_eq!(
        (c.prefix.host.as_str(), c.count, c.comm),
        ("", 2, Some(0x5a3e_a68d_be40))
    );
    // NCCL 2.28's AlltoAll
    assert_eq!(
        call("h:1:1 [0] NCCL INFO AlltoAll: opCount 0 sendbuff 0x1 recvbuff 0x2 count 1048576 datatype 9 op 0 root 0 comm 0xa [nranks=2] stream 0x3").name,
        "AlltoAll"
    );
}

#[test]
fn call_trace_lines_are_read_and_elided_pointers_are_unknown() {
    // from the README of phu0ngng/nccl's replay test (github), NCCL 2.16.3
    let c = call(
        "gc01:41073:41073 NCCL CALL ncclAllReduce(7f5d92a00000,7f5d93400000,10485760,0,0,0,0x55d8c12613d0,0x55d8c09207b0)",
    );
    assert_eq!(
        (
            c.name.as_str(),
            c.count,
            c.datatype,
            c.op,
            c.root,
            c.comm,
            c.nranks,
            c.op_count
        ),
        ("AllReduce", 10_485_760, 0, 0, 0, Some(0x55d8_c126_13d0), None, None)
    );
    assert_eq!((c.source, c.prefix.pid, c.prefix.dev), (Source::Trace, 41073, None));
    let i = init("gc01:41073:41128 NCCL CALL ncclCommInitRank(0x55d8c12613d0, 16, 0x521631e3a56ecc2c, 0, 0)");
    assert_eq!(
        (i.comm, i.nranks, i.rank, i.cuda_dev, i.comm_id),
        (0x55d8_c126_13d0, 16, 0, Some(0), Some(0x5216_31e3_a56e_cc2c))
    );
    let i = init("h:1:2 NCCL CALL ncclCommSplit(0x55aa, 1, 3, 0x55bb, 1, 2)");
    assert_eq!((i.comm, i.rank, i.nranks), (0x55bb, 1, 2));
    assert_eq!(
        i.split,
        Some(SplitOf {
            parent: 0x55aa,
            count: None,
            color: 1,
            key: 3
        })
    );
    // NCCL's documentation elides every pointer
    let c = call("node-01:1897248:1897248 NCCL CALL ncclAllReduce(0x...,0x...,2,7,0,0,0x...,0x...)");
    assert_eq!((c.count, c.comm), (2, None));
    assert_eq!(parse_line("h:1:1 NCCL CALL ncclGroupStart()").line, Line::Other);
    assert!(matches!(
        parse_line("h:1:1 NCCL CALL ncclAllReduce(7f5d,7f5e,10,0").line,
        Line::Cut(_)
    ));
}

#[test]
fn interleaved_output_keeps_the_last_line_and_flags_orphans() {
    // NVIDIA/nccl#147: two processes' output on one line
    let p = parse_line(
        "learnfair062:32619:32711 [2] NCCL INFO learnfair062:32629:32629 [7] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f372c7f5400 recvbuff 0x7f372c7f5400 count 53 datatype 4 op 0 root 0 comm 0x7f372005a260 [nranks=8] stream 0x5599dafdc1f0",
    );
    let Line::Call(c) = p.line else { panic!() };
    assert_eq!((c.prefix.pid, c.prefix.dev), (32629, Some(7)));
    // the first process's text was empty: nothing of it is lost
    assert_eq!(p.interrupted, None);
    let orphan = "Broadcast: opCount 1 sendbuff 0x7f5836000000 recvbuff 0x7f5836000000 count 25503912 datatype 6 op 0 root 0 comm 0x7f584405a260 [nranks=8] stream 0x563448681ac0";
    assert_eq!(
        parse_line(orphan).line,
        Line::Orphan {
            comm: Some(0x7f58_4405_a260)
        }
    );
    // a call printed into another call: the first one is cut
    let p = parse_line(
        "h:1:1 [0] NCCL INFO AllReduce: opCount 2 sendbuff 0x1 recvbuff 0x1 count 65h:2:2 [1] NCCL INFO AllReduce: opCount 2 sendbuff 0x5 recvbuff 0x5 count 6553600 datatype 9 op 0 root 0 comm 0xb [nranks=2] stream 0x6",
    );
    assert!(matches!(p.line, Line::Call(ref c) if c.prefix.pid == 2));
    let i = p.interrupted.unwrap();
    assert_eq!((i.prefix.pid, i.name.as_str()), (1, "AllReduce"));
}

#[test]
fn init_lines_of_every_format_give_rank_nranks_and_comm_id() {
    // an older version: no commId (NVIDIA/nccl#629)
    let i = init(
        "A03-R28-I49-3-9000018:193027:193119 [7] NCCL INFO comm 0x7fdf08000d00 rank 15 nranks 16 cudaDev 7 busId e7000 - Init COMPLETE",
    );
    assert_eq!(
        (i.comm, i.rank, i.nranks, i.cuda_dev, i.comm_id, i.cut),
        (0x7fdf_0800_0d00, 15, 16, Some(7), None, false)
    );
    // 2.15 (cupy/cupy#9090)
    let i = init(
        "pg00:1822703:1822703 [1] NCCL INFO comm 0x55f205c38300 rank 1 nranks 2 cudaDev 1 busId 89000 commId 0x1328ee0a0e0cb7aa - Init COMPLETE",
    );
    assert_eq!(i.comm_id, Some(0x1328_ee0a_0e0c_b7aa));
    // 2.18+ with nvmlDev (NVIDIA/nccl#1814)
    let i = init(
        "hostname-test:984:1257 [4] NCCL INFO comm 0x557fe785f7a0 rank 36 nranks 64 cudaDev 4 nvmlDev 4 busId 9b000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE",
    );
    assert_eq!((i.rank, i.nranks, i.cuda_dev), (36, 64, Some(4)));
    // the init function's name first (NVIDIA/nccl-tests#252)
    let i = init(
        "kolyoz2:25146:25827 [0] NCCL INFO ncclCommInitRank comm 0x559d5aa8ca00 rank 4 nranks 8 cudaDev 0 nvmlDev 0 busId 42000 commId 0x996ee6f117cb8e1e - Init START",
    );
    assert_eq!((i.rank, i.nranks, i.comm_id), (4, 8, Some(0x996e_e6f1_17cb_8e1e)));
    // a split of 2.21/2.22: parent, color, key and a commId (src/init.cc)
    let i = init(
        "h:1:2 [0] NCCL INFO ncclCommSplit comm 0x55aa rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 parent 0x55bb color 7 key 1 commId 0xabc - Init COMPLETE",
    );
    assert_eq!((i.comm, i.rank, i.nranks, i.comm_id), (0x55aa, 1, 2, Some(0xabc)));
    assert_eq!(
        i.split,
        Some(SplitOf {
            parent: 0x55bb,
            count: None,
            color: 7,
            key: 1
        })
    );
    // 2.23: no commId; 2.24-2.28: splitCount; 2.29+: childCount; the START
    // line glues `key 3- Init START`
    let i = init(
        "h:1:2 [0] NCCL INFO ncclCommSplit comm 0x55aa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 parent 0x55bb color 0 key 0 - Init COMPLETE",
    );
    assert_eq!((i.comm_id, i.split.unwrap().count), (None, None));
    let i = init(
        "h:1:2 [0] NCCL INFO ncclCommSplit comm 0x55aa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 parent 0x55bb splitCount 2 color 1 key 3- Init START",
    );
    assert_eq!(i.split.map(|s| (s.count, s.color, s.key)), Some((Some(2), 1, 3)));
    let i = init(
        "h:1:2 [0] NCCL INFO ncclCommSplit comm 0x55aa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 parent 0x55bb childCount 4 color 1 key 3 - Init COMPLETE",
    );
    assert_eq!(i.split.unwrap().count, Some(4));
    // an INIT line cut after its fields is read up to the cut
    let i = init(
        "dgx-07:40212:40212 [1] NCCL INFO ncclCommInitRankConfig comm 0x5602b3c4d5e0 rank 1 nranks 2 cudaDev 1 nvmlDev 1 busId 43000 commId 0x9b8a7c6d5e4f3a21 - Init COM",
    );
    assert_eq!(
        (i.rank, i.nranks, i.comm_id, i.cut),
        (1, 2, Some(0x9b8a_7c6d_5e4f_3a21), true)
    );
    // ... but not a value the cut may have shortened
    let c = cut("h:1:1 [0] NCCL INFO ncclCommInitRank comm 0x55 rank 1 nranks 1");
    assert_eq!(c.name, "INIT");
}

#[test]
fn other_lines_are_ignored_and_the_version_banner_is_read() {
    assert_eq!(
        parse_line("NCCL version 2.21.5+cuda12.4").line,
        Line::Version(NcclVersion::new(2, 21, 5))
    );
    assert_eq!(
        parse_line("host-2:38610:38610 [0] NCCL INFO NCCL version 2.18.3+cuda12.2").line,
        Line::Version(NcclVersion::new(2, 18, 3))
    );
    for text in [
        "",
        "hostname-test:983:1261 [3] NCCL INFO Connected NVLS tree",
        "costa:382:675 [0] NCCL INFO comm 0x43be0680 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0",
        "h:1:1 [0] NCCL INFO comm 0x55 rank 0 nRanks 8 cudaDev 0 busId 1000 commId 0x1 - Destroy START",
        "[titan] 2025-07-07 20:12:54,779 - root - INFO - Training starts at step 1.",
        "banff:52944:53177 [0] NCCL INFO ## [170260.347287] [07:00] 000001 KL HWID 42300700 ncclDevFunc_AllReduce_RING_LL_Sum_double nw 4",
        "Rank A:",
    ] {
        assert_eq!(parse_line(text).line, Line::Other, "{text}");
    }
    // NCCL 2.3.5: no operation name
    assert_eq!(
        parse_line("dgx1:3301:3301 [0] NCCL INFO opCount 0 sendbuff 0x7f1c09000000 recvbuff 0x7f1c09000000 count 25557032 size 102228128 datatype 7 op 0 root 0 comm 0x7f1c40001c30 [nranks=2] stream 0x1c03a50").line,
        Line::Unnamed
    );
}

#[test]
fn a_cut_call_line_names_the_first_field_it_lacks_and_its_communicator_when_whole() {
    let c = cut(
        "ubuntu:199574:201142 [1] NCCL INFO Send: opCount d64 sendbuff 0x7f502c600000 recvbuff (nil) count 2420736 da",
    );
    assert_eq!(
        (c.name.as_str(), c.missing.as_str(), c.comm),
        ("Send", "datatype", None)
    );
    let c = cut(
        "dgx-07:40212:40212 [1] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f9100000000 recvbuff 0x7f9100000000 count 25557032 datatype 7 op 0 root 0 comm 0x5602b3c4d5e0 [n",
    );
    assert_eq!((c.missing.as_str(), c.comm), ("[nranks=N]", Some(0x5602_b3c4_d5e0)));
    assert_eq!(c.prefix.pid, 40212);
    let c = cut("h:1:1 [0] NCCL INFO AllReduce: opCount");
    assert_eq!(c.missing, "sendbuff");
}

#[test]
fn a_cut_line_joins_its_rest_on_the_next_line_at_a_field_boundary() {
    // wrapped after `comm` (ROCm/rtg_tracer's RCCL example)
    let c = join(
        1,
        "rocm-framework-3:24888:25056 [1] 1558545003174220 NCCL INFO AllReduce: opCount 1 sendbuff 0x7f80b54bad00 recvbuff 0x7f81cce12200 count 1001 datatype 7 op 0 root 0 comm",
        "0x7f80467b9770 [nranks=2] stream 0x7f804680c090",
    )
    .unwrap();
    assert_eq!(
        (c.count, c.comm, c.nranks, c.prefix.pid),
        (1001, Some(0x7f80_467b_9770), Some(2), 24888)
    );
    // application output printed into the line before `datatype`
    let head = "dgx-07:40211:40211 [0] NCCL INFO AllReduce: opCount 2 sendbuff 0x7f3a20000000 recvbuff 0x7f3a20000000 count 6553600";
    let c = join(
        1,
        head,
        "Epoch 1 | step 20/500 | loss 4.1875 | 11.2 it/s datatype 9 op 0 root 0 comm 0x55c4a1b2c3d0 [nranks=2] stream 0x55c4a0f01230",
    )
    .unwrap();
    assert_eq!((c.count, c.datatype, c.comm), (6_553_600, 9, Some(0x55c4_a1b2_c3d0)));
    // a number just before the rest could be the cut value's own digits
    assert!(join(1, head, "loss 12 datatype 9 op 0 root 0 comm 0x5 [nranks=2] stream 0x6").is_none());
    // the next line is another NCCL line: no join
    assert!(
        join(
            1,
            head,
            "h:1:1 [0] NCCL INFO datatype 9 op 0 root 0 comm 0x5 [nranks=2]"
        )
        .is_none()
    );
    // the rest does not complete the line
    assert!(join(1, head, "datatype 9 op 0").is_none());
}
