//! Unit tests of `replay`.

use super::*;
use crate::collective::Collective;
use crate::types::{DType, ReduceOp};
use crate::workload::groups::GroupLayout;
use crate::workload::model::Model;
use crate::workload::op::Phase;
use crate::workload::options::Options;
use crate::workload::schedule::{Strategy, schedule};
use convert::{PAIR_WINDOW, partition_of};

mod synthetic;

macro_rules! fixture {
    ($name:literal) => {
        include_str!(concat!("../../../tests/fixtures/nccl-coll-logs/", $name))
    };
}

fn parse(text: &str) -> Log {
    parse_log(text, &LogOptions::default()).unwrap()
}

fn parse_rank(text: &str, rank: usize) -> Result<Log, Error> {
    parse_log(text, &LogOptions { rank: Some(rank) })
}

/// Asserts that one of `log`'s notes is `want`, listing them if none is.
fn assert_note(log: &Log, want: impl Fn(&str) -> bool) {
    assert!(log.notes.iter().any(|n| want(n)), "{:?}", log.notes);
}

fn err(r: Result<Log, Error>) -> String {
    let e = r.unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "{msg}");
    msg
}

const WORLD2: Partition = Partition { block: 2, stride: 1 };

/// The log line a kept call comes from.
fn line_of(c: &Op) -> usize {
    c.logged.map_or(0, |l| l.line)
}

/// `comm 0x55fca23fc0f0`: the communicator a kept call was logged on.
fn comm_of(c: &Op) -> String {
    format!("comm {:#x}", c.logged.map_or(0, |l| l.comm))
}

/// pytorch/torchtitan#1369: two TP ranks interleaved, no INIT lines.
#[test]
fn a_two_rank_tp_log_without_init_lines_replays_the_first_process() {
    let log = parse(fixture!("torchtitan-1369-tp2.log"));
    assert_eq!((log.world, log.world_line, log.rank), (2, 2, None));
    assert_eq!(
        log.source,
        "the first process in the log (hopper01 pid 191370 device 1)"
    );
    let got: Vec<(usize, Collective, u64)> = log.calls.iter().map(|c| (line_of(c), c.collective, c.count)).collect();
    use Collective::{AllGather as AG, ReduceScatter as RS};
    assert_eq!(
        got,
        vec![
            (2, RS, 2_097_152),
            (5, AG, 2_097_152),
            (8, RS, 2_097_152),
            (9, AG, 2_097_152)
        ]
    );
    for c in &log.calls {
        assert_eq!(
            (c.dtype, log.partition(c), comm_of(c).as_str()),
            (DType::Float, WORLD2, "comm 0x55fca23fc0f0")
        );
    }
    assert_eq!(log.calls[0].op, Some(ReduceOp::Sum));
    assert_eq!(log.calls[1].op, None);
    assert_note(&log, |n| n.contains("no INIT lines"));
    let s = log.schedule(2, false).unwrap();
    assert_eq!(s.ops.len(), 4);
    assert!(s.ops.iter().all(|o| o.group == Group::World && o.phase == Phase::Log));
    assert_eq!(s.ops[0].label, "line 2 comm 0x55fca23fc0f0");
}

/// NVIDIA/nccl#1193: 128-rank communicators under Ray.
#[test]
fn a_128_rank_log_needs_rescaling_for_a_smaller_launch_and_keeps_counts() {
    let log = parse(fixture!("nccl-1193-ray-128ranks.log"));
    assert_eq!((log.world, log.world_line), (128, 1));
    assert!(log.source.contains("pid 615 device 2"), "{}", log.source);
    assert_eq!(log.calls.len(), 1);
    assert_eq!((log.calls[0].count, log.calls[0].dtype), (7_382_228, DType::Float));
    let e = log.schedule(2, false).unwrap_err().to_string();
    assert_eq!(
        e,
        "line 1: the logged job has 128 ranks and this launch 2: launch 128 ranks, or replay the per-call counts on 2 ranks with --rescale"
    );
    // one rank, in the singular
    let e = log.schedule(1, false).unwrap_err().to_string();
    assert!(
        e.ends_with("replay the per-call counts on 1 rank with --rescale"),
        "{e}"
    );
    let s = log.schedule(2, true).unwrap();
    assert_eq!((s.ops[0].count, s.ops[0].group), (7_382_228, Group::World));
    let e = err(parse_rank(fixture!("nccl-1193-ray-128ranks.log"), 0));
    assert_eq!(
        e,
        "rank 0 cannot be found: the log has no INIT lines that tell ranks (log with NCCL_DEBUG_SUBSYS=INIT,COLL)"
    );
}

/// NVIDIA/nccl#783: Send lines of NCCL 2.12, prefix trimmed to `[0]`.
#[test]
fn sends_to_the_other_of_two_ranks_become_ring_exchanges() {
    let log = parse(fixture!("nccl-783-send-prefix-trimmed.log"));
    assert_eq!(log.calls.len(), 4);
    for c in &log.calls {
        assert_eq!(
            (c.collective, c.count, c.shift, c.root),
            (Collective::SendRecv, 1_572_864, Some(1), None)
        );
    }
    assert!(log.source.contains("device 0"), "{}", log.source);
}

/// NVIDIA/nccl#584: Sends on two communicators, then a Recv.
#[test]
fn a_recv_that_completes_an_earlier_send_is_counted_once() {
    let log = parse(fixture!("nccl-584-send-recv.log"));
    let comms: Vec<String> = log.calls.iter().map(comm_of).collect();
    let got: Vec<(usize, Option<usize>, &str)> = log
        .calls
        .iter()
        .zip(&comms)
        .map(|(c, comm)| (line_of(c), c.shift, comm.as_str()))
        .collect();
    assert_eq!(
        got,
        vec![
            (1, Some(1), "comm 0x7f5128002e10"),
            (2, Some(1), "comm 0x7f5128002e10"),
            (6, Some(1), "comm 0x7f516c002e10"),
            (7, Some(1), "comm 0x7f516c002e10"),
        ]
    );
    assert_note(&log, |n| n.starts_with("1 Recv lines complete"));
}

/// NVIDIA/nccl#147 ("Random NCCL hang after several broadcasts"):
/// interleaved stdout of 8 DDP ranks, where rank 0 (device 0) broadcasts
/// its parameters at opCount 0 while the others broadcast 53 int64: the
/// hang the issue reports.
#[test]
fn interleaved_output_is_attributed_by_the_last_prefix_and_the_hang_is_found() {
    let text = fixture!("nccl-147-interleaved.log");
    let e = parse_log(text, &LogOptions::default()).unwrap_err();
    assert_eq!(e.exit_code(), 7);
    assert_eq!(
        e.to_string(),
        "line 1: the ranks diverge on the communicator of all 8 ranks at opCount 0x0: learnfair062 pid 32629 device 7, learnfair062 pid 32625 device 5 and learnfair062 pid 32617 device 1 Broadcast 53 int64 root 0 (lines 1, 2 and 5); learnfair062 pid 32615 device 0 Broadcast 25503912 half root 0 (line 3); nothing was run (collbench replay --check-only LOG prints the whole analysis)"
    );
    // the sequence of the first process, read without the check
    let (s, c) = read_log(text).unwrap();
    let log = keep(&s, &c, &LogOptions::default()).unwrap();
    assert_eq!(log.world, 8);
    assert!(log.source.contains("pid 32629 device 7"), "{}", log.source);
    assert_eq!(log.calls.len(), 1);
    let call = &log.calls[0];
    assert_eq!(
        (call.collective, call.count, call.dtype, call.root),
        (Collective::Broadcast, 53, DType::Int64, Some(0))
    );
    assert_note(&log, |n| n.starts_with("1 call lines without") && n.ends_with("line 6"));
    let s = log.schedule(8, false).unwrap();
    assert_eq!(s.ops[0].root, Some(0));
}

#[test]
fn init_only_excerpts_parse_line_by_line_and_say_how_to_get_call_lines() {
    let cases: [(&str, usize); 5] = [
        (fixture!("nccl-1814-init-64ranks.log"), 4),
        (fixture!("nccl-629-init-no-commid.log"), 3),
        (fixture!("nccl-tests-252-init-start.log"), 3),
        (fixture!("cupy-9090-init-2.15.log"), 2),
        (fixture!("nccl-1038-init-2.18.3.log"), 1),
    ];
    for (text, inits) in cases {
        let parsed: Vec<line::Line> = crate::nccl_log::lines(text)
            .map(|l| line::parse_line(&l).line)
            .collect();
        assert_eq!(
            parsed.iter().filter(|l| matches!(l, line::Line::Init(_))).count(),
            inits
        );
        assert_eq!(err(parse_log(text, &LogOptions::default())), NO_CALLS);
    }
    let s = scan::scan(fixture!("nccl-1038-init-2.18.3.log")).unwrap();
    assert_eq!(s.version, Some(NcclVersion::new(2, 18, 3)));
    let s = scan::scan(fixture!("nccl-1814-init-64ranks.log")).unwrap();
    assert_eq!((s.world, s.world_line), (64, 2));
    assert!(
        s.members
            .iter()
            .all(|m| m.key == scan::CommKey::Id(0x5ae7_7eb5_ea4e_c1ee))
    );
    let s = scan::scan(fixture!("nccl-629-init-no-commid.log")).unwrap();
    assert!(s.members.iter().all(|m| !matches!(m.key, scan::CommKey::Id(_))));
}

/// Written for this test: GPT-2 under DDP on 2 ranks.
#[test]
fn a_ddp_log_replays_the_workload_schedule_of_ddp() {
    let text = fixture!("own-2.21-ddp-gpt2-2ranks.log");
    let log = parse(text);
    assert_eq!(log.version, Some(NcclVersion::new(2, 21, 5)));
    assert_eq!((log.world, log.rank), (2, Some(0)));
    assert_eq!(log.source, "rank 0 (node0 pid 4101 device 0)");
    let (first, grads) = log.calls.split_first().unwrap();
    let m = Model::preset("gpt2").unwrap();
    assert_eq!(
        (first.collective, first.count, first.root),
        (Collective::Broadcast, m.params(), Some(0))
    );
    let l = GroupLayout::new(2, 2, 1).unwrap();
    let ddp = schedule(Strategy::Ddp, &m, &l, &Options::default()).unwrap();
    let logged: Vec<(Collective, u64, DType)> = grads.iter().map(|c| (c.collective, c.count, c.dtype)).collect();
    let modelled: Vec<(Collective, u64, DType)> = ddp.ops.iter().map(|o| (o.collective, o.count, o.dtype)).collect();
    assert_eq!(logged, modelled);
    let rank1 = parse_rank(text, 1).unwrap();
    assert_eq!(rank1.calls.len(), log.calls.len());
    assert_eq!(rank1.source, "rank 1 (node0 pid 4102 device 1)");
    assert_eq!(
        err(parse_rank(text, 5)),
        "rank 5 is not in the log (it shows ranks 0, 1)"
    );
}

/// Written for this test: TP 2 x DP 2 on 4 ranks, split communicators.
#[test]
fn split_communicators_map_to_consecutive_and_strided_groups() {
    let text = fixture!("own-2.23-tp2-dp2-4ranks.log");
    let tp = Partition { block: 2, stride: 1 };
    let dp = Partition { block: 4, stride: 2 };
    let world = Partition { block: 4, stride: 1 };
    for rank in 0..4 {
        let log = parse_rank(text, rank).unwrap();
        let parts: Vec<Partition> = log.calls.iter().map(|c| log.partition(c)).collect();
        assert_eq!(parts, vec![tp, tp, dp, world], "rank {rank}");
        assert_eq!(log.version, Some(NcclVersion::new(2, 23, 4)));
    }
    let log = parse(text);
    assert_eq!(log.rank, Some(0));
    let s = log.schedule(4, false).unwrap();
    assert_eq!(
        s.groups(),
        vec![Group::Partition(tp), Group::Partition(dp), Group::World]
    );
    let l = GroupLayout::new(4, 4, 2).unwrap();
    assert_eq!(l.groups(Group::Partition(dp)), l.groups(Group::Dp));
    assert_eq!(l.groups(Group::Partition(tp)), l.groups(Group::Tp));
    // rescaled: TP blocks keep their size, groups over the job span the launch
    let s = log.schedule(8, true).unwrap();
    let dp8 = Partition { block: 8, stride: 2 };
    assert_eq!(
        s.groups(),
        vec![Group::Partition(tp), Group::Partition(dp8), Group::World]
    );
    let s = log.schedule(2, true).unwrap();
    assert_eq!(s.groups()[0], Group::World, "a TP pair is the whole of a 2-rank launch");
    let e = log.schedule(3, true).unwrap_err().to_string();
    assert!(
        e.ends_with("(blocks of 2) does not fit 3 ranks: blocks of 2 ranks do not divide 3 ranks"),
        "{e}"
    );
    assert!(e.starts_with("line 14: comm 0x5600aa000100"), "{e}");
}

/// Written for this test: one rank's own log, NCCL 2.26.
#[test]
fn fp8_moves_as_bytes_premultiplied_sums_as_sums_and_empty_calls_are_skipped() {
    let log = parse(fixture!("own-2.26-fp8-premul-p2p-rank0.log"));
    assert_eq!((log.world, log.rank), (2, Some(0)));
    type Row = (Collective, u64, DType, Option<ReduceOp>, Option<usize>);
    let got: Vec<Row> = log
        .calls
        .iter()
        .map(|c| (c.collective, c.count, c.dtype, c.op, c.shift))
        .collect();
    use Collective::*;
    assert_eq!(
        got,
        vec![
            (AllGather, 4_194_304, DType::Uint8, None, None),
            (ReduceScatter, 4_194_304, DType::Bfloat16, Some(ReduceOp::Sum), None),
            (SendRecv, 65_536, DType::Bfloat16, None, Some(1)),
            (AllReduce, 1, DType::Float, Some(ReduceOp::Max), None),
        ]
    );
    let notes = log.notes.join(" | ");
    for want in [
        "1 calls of 0 elements were skipped",
        "1 reductions use a user-defined operation",
        "1 calls on 8-bit floats are replayed as uint8",
        "1 Recv lines complete an exchange",
    ] {
        assert!(notes.contains(want), "{notes}");
    }
}

const INIT4: &str = "h:1:1 [0] NCCL INFO comm 0xa0 rank 0 nranks 4 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\n";

fn call_line(name: &str, datatype: i64, op: i64, root: i64, comm: &str, nranks: usize) -> String {
    format!(
        "h:1:1 [0] NCCL INFO {name}: opCount 0 sendbuff 0x1 recvbuff 0x2 count 8 datatype {datatype} op {op} root {root} comm {comm} [nranks={nranks}] stream 0x3\n"
    )
}

#[test]
fn bad_logs_get_one_line_naming_the_line() {
    let banner = "NCCL version 2.21.5+cuda12.4\n";
    let cases: Vec<(String, &str)> = vec![
        (String::new(), NO_CALLS),
        ("no nccl here\n".into(), NO_CALLS),
        (
            call_line("AllReduce", 12, 0, 0, "0xa0", 4),
            "line 1: unknown datatype 12: NCCL has 0 = ncclInt8 ... 11 = ncclFloat8e5m2",
        ),
        (
            format!("{banner}{}", call_line("AllGather", 10, 0, 0, "0xa0", 4)),
            "line 2: unknown datatype 10: NCCL 2.21.5 has 0 = ncclInt8 ... 9 = ncclBfloat16",
        ),
        (
            call_line("ReduceScatter", 10, 0, 0, "0xa0", 4),
            "line 1: ncclFloat8e4m3 in a reduction: collbench has no 8-bit float arithmetic to replay it",
        ),
        (
            call_line("AlltoAllv", 7, 0, 0, "0xa0", 4),
            "line 1: `AlltoAllv` calls are not replayed (collbench replays AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, AlltoAll, Gather, Scatter, Send and Recv)",
        ),
        (
            format!("{INIT4}{}", call_line("Broadcast", 7, 0, 4, "0xa0", 4)),
            "line 2: root or peer 4 is outside the 4 ranks of its communicator",
        ),
        (
            format!("{INIT4}{}", call_line("AllReduce", 7, 0, 0, "0xa0", 2)),
            "line 2: comm 0xa0 has 4 ranks in its INIT line (line 1) but [nranks=2] here",
        ),
        (
            "h:1:1 [0] NCCL INFO Send: opCount 0 sendbuff 0x1 recvbuff (nil) count 8 da\n".into(),
            "every call line of the log is cut short (line 1): nothing can be replayed",
        ),
    ];
    for (text, want) in cases {
        assert_eq!(err(parse_log(&text, &LogOptions::default())), want, "{text}");
    }
}

#[test]
fn a_communicator_whose_members_are_not_in_the_log_is_refused() {
    // one rank's own log: the world and a 2-rank split, only its own INIT lines
    let split = "h:1:1 [0] NCCL INFO ncclCommSplit comm 0xb0 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1 parent 0xa0 color 0 key 0 commId 0x20 - Init COMPLETE\n";
    let text = format!("{INIT4}{split}{}", call_line("AllReduce", 7, 0, 0, "0xb0", 2));
    assert_eq!(
        err(parse_log(&text, &LogOptions::default())),
        "line 3: comm 0xb0 (2 of 4 ranks), commId 0x20: the log shows the rank in the job of 1 of its 2 members; log every rank (one NCCL_DEBUG_FILE per rank, concatenated) so its membership is known"
    );
    // no INIT line at all for the communicator
    let text = format!("{INIT4}{}", call_line("AllReduce", 7, 0, 0, "0xc0", 2));
    assert_eq!(
        err(parse_log(&text, &LogOptions::default())),
        "line 2: comm 0xc0 (2 of 4 ranks) has no INIT line in the log, so which ranks it spans is unknown: log the job from its start with NCCL_DEBUG_SUBSYS=INIT,COLL"
    );
    // an INIT line without commId (older NCCL, NVIDIA/nccl#629)
    let old = "h:1:1 [0] NCCL INFO comm 0xd0 rank 0 nranks 2 cudaDev 0 busId 1 - Init COMPLETE\n";
    let text = format!("{INIT4}{old}{}", call_line("AllReduce", 7, 0, 0, "0xd0", 2));
    assert_eq!(
        err(parse_log(&text, &LogOptions::default())),
        "line 3: comm 0xd0 (2 of 4 ranks) has no commId in its INIT line (line 2; NCCL before 2.15 prints none) and is no split of a known communicator, so its members cannot be matched across processes"
    );
}

#[test]
fn irregular_memberships_and_two_jobs_in_one_log_are_refused() {
    let mut text = String::new();
    for r in 0..4 {
        text += &format!(
            "h:{r}:1 [0] NCCL INFO comm 0xa{r} rank {r} nranks 4 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\n"
        );
    }
    // ranks 0, 1, 3 share a 3-rank communicator
    for (i, r) in [0, 1, 3].into_iter().enumerate() {
        text += &format!(
            "h:{r}:1 [0] NCCL INFO comm 0xb{r} rank {i} nranks 3 cudaDev 0 busId 1 commId 0x30 - Init COMPLETE\n"
        );
    }
    text += "h:0:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x1 count 8 datatype 7 op 0 root 0 comm 0xb0 [nranks=3] stream 0x3\n";
    assert_eq!(
        err(parse_log(&text, &LogOptions::default())),
        "line 8: comm 0xb0 (3 of 4 ranks) spans ranks 0, 1, 3: neither consecutive nor evenly strided, so no sub-communicator of a launch has its shape"
    );
    let twice = "h:0:1 [0] NCCL INFO comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\nh:9:1 [0] NCCL INFO comm 0xa0 rank 0 nranks 2 cudaDev 0 busId 1 commId 0x11 - Init COMPLETE\n";
    let text = format!(
        "{twice}{}",
        call_line("AllReduce", 7, 0, 0, "0xa0", 2).replace("h:1:1", "h:0:1")
    );
    assert_eq!(
        err(parse_log(&text, &LogOptions::default())),
        "line 2: a second process claims rank 0 of 2 (first at line 1): the log mixes two jobs"
    );
}

#[test]
fn a_recv_too_far_from_its_send_is_an_exchange_of_its_own() {
    let send = call_line("Send", 7, 0, 1, "0xa0", 2);
    let recv = call_line("Recv", 7, 0, 1, "0xa0", 2);
    let near = format!("{send}{recv}");
    assert_eq!(parse(&near).calls.len(), 1);
    let far = format!("{}{recv}", send.repeat(PAIR_WINDOW + 1));
    // the first Send left the window; the Recv pairs with a later one
    assert_eq!(parse(&far).calls.len(), PAIR_WINDOW + 1);
    let apart = format!(
        "{send}{}{recv}",
        call_line("Send", 7, 0, 1, "0xa0", 2)
            .replace("count 8", "count 9")
            .repeat(PAIR_WINDOW)
    );
    assert_eq!(parse(&apart).calls.len(), PAIR_WINDOW + 2);
}

#[test]
fn a_rank_that_made_no_calls_is_named() {
    let text = format!(
        "{INIT4}h:2:1 [0] NCCL INFO comm 0xa0 rank 1 nranks 4 cudaDev 0 busId 1 commId 0x10 - Init COMPLETE\n{}",
        call_line("AllReduce", 7, 0, 0, "0xa0", 4)
    );
    assert_eq!(err(parse_rank(&text, 1)), "rank 1 made no collective calls in the log");
    assert_eq!(parse_rank(&text, 0).unwrap().calls.len(), 1);
}

#[test]
fn memberships_become_partitions_when_regular() {
    assert_eq!(partition_of(&[0, 1, 2, 3], 4), Some(Partition { block: 4, stride: 1 }));
    assert_eq!(partition_of(&[2, 3], 8), Some(Partition { block: 2, stride: 1 }));
    assert_eq!(partition_of(&[1, 3, 5, 7], 8), Some(Partition { block: 8, stride: 2 }));
    assert_eq!(partition_of(&[4, 6], 8), Some(Partition { block: 4, stride: 2 }));
    assert_eq!(partition_of(&[5], 8), Some(Partition { block: 1, stride: 1 }));
    assert_eq!(partition_of(&[1, 2], 8), None, "a pair across two blocks of two");
    assert_eq!(partition_of(&[0, 1, 3], 4), None);
    assert_eq!(partition_of(&[0, 3], 6), Some(Partition { block: 6, stride: 3 }));
    assert_eq!(
        partition_of(&[0, 2], 6),
        None,
        "stride 2 of two ranks would need blocks of 4"
    );
    assert_eq!(partition_of(&[0, 9], 8), None);
    // said in English ordinals
    let said = |block, stride| Partition { block, stride }.to_string();
    assert_eq!(said(4, 2), "every 2nd rank in blocks of 4");
    assert_eq!(said(6, 3), "every 3rd rank in blocks of 6");
    assert_eq!(said(8, 4), "every 4th rank in blocks of 8");
    assert_eq!(said(4, 1), "blocks of 4");
}
