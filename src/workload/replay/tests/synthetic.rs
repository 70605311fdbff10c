//! Unit tests of `replay` on logs built line by line (`coll`,
//! `init_line`): ranks of one process, splits, divergences, one-sided
//! sends, cut lines and call traces.

use super::*;

/// `host:pid:tid [dev] NCCL INFO` for process `pid` on device `dev`.
fn coll(
    (pid, dev): (u32, u32),
    name: &str,
    op_count: u32,
    count: u64,
    datatype: i64,
    root: i64,
    (comm, nranks): (&str, usize),
) -> String {
    format!(
        "h:{pid}:{pid} [{dev}] NCCL INFO {name}: opCount {op_count:x} sendbuff 0x1 recvbuff 0x2 count {count} datatype {datatype} op 0 root {root} comm {comm} [nranks={nranks}] stream 0x3\n"
    )
}

fn init_line(pid: u32, dev: u32, comm: &str, rank: usize, nranks: usize, id: &str) -> String {
    format!(
        "h:{pid}:{pid} [{dev}] NCCL INFO ncclCommInitRank comm {comm} rank {rank} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId 1000 commId {id} - Init COMPLETE\n"
    )
}

/// INIT lines of `n` ranks, one a process and device, on communicators
/// 0xa0, 0xa1, ... of commId 0x10.
fn inits(n: u32) -> String {
    (0..n)
        .map(|r| init_line(r, r, &format!("0xa{r}"), r as usize, n as usize, "0x10"))
        .collect()
}

#[test]
fn a_send_and_recv_with_the_rank_itself_replay_as_one_local_copy() {
    // PyTorch all_to_all_single on 2 ranks before NCCL 2.28: grouped
    // Send/Recv to every peer, itself included
    let mut text = init_line(1, 0, "0xa0", 0, 2, "0x10") + &init_line(2, 1, "0xb0", 1, 2, "0x10");
    for (pid, dev, comm) in [(1, 0, "0xa0"), (2, 1, "0xb0")] {
        for peer in 0..2 {
            text += &coll((pid, dev), "Send", 0, 64, 7, peer, (comm, 2));
            text += &coll((pid, dev), "Recv", 0, 64, 7, peer, (comm, 2));
        }
    }
    let log = parse(&text);
    let got: Vec<(Collective, Option<usize>)> = log.calls.iter().map(|c| (c.collective, c.shift)).collect();
    assert_eq!(
        got,
        vec![(Collective::SendRecv, Some(0)), (Collective::SendRecv, Some(1))]
    );
    let s = log.schedule(2, false).unwrap();
    assert_eq!(s.ops[0].shift, Some(0));
    let v = crate::workload::StepVolume::new(&s, &GroupLayout::new(2, 2, 1).unwrap()).unwrap();
    assert_eq!(v.per_op[0].bus_bytes, 0.0, "a local copy moves nothing between ranks");
    assert_eq!(v.per_op[1].bus_bytes, 256.0);
    assert_note(&log, |n| n.starts_with("1 Send/Recv pairs with the rank itself"));
}

#[test]
fn one_process_with_the_same_calls_on_several_communicators_is_several_ranks() {
    // RCCL's replayer: one process, [7] on every line, 4 communicators
    let mut text = String::new();
    for (r, comm) in ["0xa0", "0xb0", "0xc0", "0xd0"].iter().enumerate() {
        text += &coll((9, 7), "AllReduce", 3, 1024, 6, 0, (comm, 4))
            .replace("stream 0x3", &format!("stream 0x3 task 0 globalrank {r}"));
    }
    let log = parse(&text);
    assert_eq!((log.world, log.rank, log.calls.len()), (4, Some(0), 1));
    assert_eq!(log.source, "rank 0 (h pid 9 device 7 comm 0xa0)");
    assert_note(&log, |n| {
        n.contains("read as 4 ranks of one process, told apart by RCCL's globalrank")
    });
    // without globalrank, the same calls on each tell them apart too
    let plain = text.replace(" task 0 globalrank", " x");
    let log = parse(&plain);
    assert_eq!(log.calls.len(), 1);
    assert_note(&log, |n| n.contains("told apart by their communicators"));
    // different calls on two communicators: one rank on both
    let two = coll((9, 7), "AllReduce", 0, 8, 7, 0, ("0xa0", 4)) + &coll((9, 7), "AllGather", 0, 8, 7, 0, ("0xb0", 4));
    assert_eq!(parse(&two).calls.len(), 2);
}

#[test]
fn splits_without_a_comm_id_are_matched_by_parent_split_and_color() {
    // NCCL 2.24-2.28 (`splitCount`); members {0, 2} and {1, 3}
    let mut text = inits(4);
    for r in 0..4u32 {
        text += &format!(
            "h:{r}:{r} [{r}] NCCL INFO ncclCommSplit comm 0xb{r} rank {} nranks 2 cudaDev {r} nvmlDev {r} busId 1 parent 0xa{r} splitCount 1 color {} key {r} - Init COMPLETE\n",
            r / 2,
            r % 2
        );
    }
    for r in 0..4u32 {
        text += &coll((r, r), "AllReduce", 0, 8, 7, 0, (&format!("0xb{r}"), 2));
    }
    let log = parse(&text);
    assert_eq!(log.partition(&log.calls[0]), Partition { block: 4, stride: 2 });
    // 2.23 prints no splitCount: the split's order per parent counts
    let old = text.replace("splitCount 1 ", "");
    let old = parse(&old);
    assert_eq!(old.partition(&old.calls[0]), Partition { block: 4, stride: 2 });
}

#[test]
fn ranks_issuing_different_collectives_at_one_place_are_a_divergence_of_its_own_exit_code() {
    let mut text = inits(2);
    text += &coll((0, 0), "AllReduce", 0, 8, 7, 0, ("0xa0", 2));
    text += &coll((1, 1), "AllReduce", 0, 8, 7, 0, ("0xa1", 2));
    text += &coll((0, 0), "AllReduce", 0, 8, 7, 0, ("0xa0", 2));
    text += &coll((1, 1), "Broadcast", 0, 8, 7, 1, ("0xa1", 2));
    let e = parse_log(&text, &LogOptions::default()).unwrap_err();
    assert_eq!(e.exit_code(), 7);
    assert_eq!(
        e.to_string(),
        "line 5: the ranks diverge on commId 0x10 at its call 2 in each rank's order: rank 0 AllReduce 8 float sum (line 5); rank 1 Broadcast 8 float root 1 (line 6); nothing was run (collbench replay --check-only LOG prints the whole analysis)"
    );
    // a rank whose log ends earlier is no divergence, only a note
    let short = text.lines().take(5).collect::<Vec<_>>().join("\n");
    let log = parse(&short);
    assert_note(&log, |n| {
        n.starts_with("commId 0x10: rank 1 shows fewer calls than rank 0 (1 more: line 5)")
    });
}

#[test]
fn a_send_whose_peer_goes_on_without_its_recv_is_one_sided() {
    let mut text = inits(2);
    text += &coll((0, 0), "Send", 0, 8, 7, 1, ("0xa0", 2));
    text += &coll((0, 0), "AllReduce", 1, 8, 7, 0, ("0xa0", 2));
    text += &coll((1, 1), "AllReduce", 1, 8, 7, 0, ("0xa1", 2));
    let e = parse_log(&text, &LogOptions::default()).unwrap_err();
    assert_eq!(e.exit_code(), 7);
    assert!(
        e.to_string().starts_with("line 3: one-sided Send: rank 0 sends 8 float to rank 1 on commId 0x10 (line 3), and rank 1 posts no matching Recv from rank 0 though its log goes on (line 5)"),
        "{e}"
    );
    // the peer's log ends before the Send: a note
    let cut = text.lines().take(4).collect::<Vec<_>>().join("\n");
    let log = parse(&cut);
    assert_note(&log, |n| {
        n.contains("has no counterpart in rank 1's log, which ends before it")
    });
}

#[test]
fn cut_lines_are_skipped_and_named_unless_they_are_the_kept_ranks() {
    let mut text = init_line(1, 0, "0xa0", 0, 2, "0x10") + &init_line(2, 1, "0xb0", 1, 2, "0x10");
    text += &coll((1, 0), "AllReduce", 0, 8, 7, 0, ("0xa0", 2));
    text += &coll((2, 1), "AllReduce", 0, 8, 7, 0, ("0xb0", 2))[..90];
    text += "\n";
    let log = parse(&text);
    assert_eq!((log.rank, log.calls.len()), (Some(0), 1));
    assert_note(&log, |n| {
        n == "1 lines cut short (line 4) were skipped: none is rank 0's"
    });
    let e = err(parse_rank(&text, 1));
    assert!(
        e.starts_with("rank 1's sequence has a gap: its call line 4 is cut short"),
        "{e}"
    );
}

#[test]
fn call_traces_replay_and_formats_without_calls_are_named() {
    let trace = "gc01:41073:41128 NCCL CALL ncclCommInitRank(0x55d8c12613d0, 4, 0x5216, 0, 0)\ngc01:41073:41073 NCCL CALL ncclAllReduce(7f5d92a00000,7f5d93400000,1024,7,0,0,0x55d8c12613d0,0x55d8c09207b0)\n";
    let log = parse(trace);
    assert_eq!((log.world, log.rank, log.calls.len()), (4, Some(0), 1));
    assert_eq!(
        (log.calls[0].collective, log.calls[0].count),
        (Collective::AllReduce, 1024)
    );
    let no_init = "gc01:41073:41073 NCCL CALL ncclAllReduce(7f5d92a00000,7f5d93400000,1024,7,0,0,0x55d8c12613d0,0x55d8c09207b0)\n";
    assert!(
        err(parse_log(no_init, &LogOptions::default()))
            .contains("whose ncclCommInitRank (or ncclCommSplit) line is not in the log")
    );
    let unnamed = "dgx1:3301:3301 [0] NCCL INFO opCount 0 sendbuff 0x7f1c09000000 recvbuff 0x7f1c09000000 count 2 size 8 datatype 7 op 0 root 0 comm 0x7f1c40001c30 [nranks=2] stream 0x1c03a50\n";
    assert!(err(parse_log(unnamed, &LogOptions::default())).starts_with("line 1: an NCCL 2.3 COLL line"));
    let fr = "{\"version\": \"2.10\", \"pg_config\": {}, \"entries\": []}";
    assert!(err(parse_log(fr, &LogOptions::default())).starts_with("a PyTorch Flight Recorder dump"));
}

#[test]
fn a_log_of_single_rank_groups_replays_at_any_size_and_counts_its_processes() {
    // NVIDIA/Megatron-LM#275: two processes, each on a 1-rank group
    let text =
        coll((11, 1), "Broadcast", 0, 240, 0, 0, ("0xa0", 1)) + &coll((12, 0), "Broadcast", 0, 240, 0, 0, ("0xb0", 1));
    let log = parse(&text);
    assert_eq!(log.world, 2);
    for launch in [1, 2, 3] {
        let s = log.schedule(launch, false).unwrap();
        assert_eq!(
            s.ops[0].group,
            if launch == 1 {
                Group::World
            } else {
                Group::Partition(Partition { block: 1, stride: 1 })
            }
        );
    }
}

#[test]
fn a_kept_ranks_last_call_line_cut_short_replays_the_calls_before_it() {
    // a job killed while writing, or the end of a paste (issue: refused as a gap)
    let mut text = init_line(1, 0, "0xa0", 0, 2, "0x10") + &init_line(2, 1, "0xb0", 1, 2, "0x10");
    for op_count in 0..3 {
        text += &coll((1, 0), "AllReduce", op_count, 8, 7, 0, ("0xa0", 2));
        text += &coll((2, 1), "AllReduce", op_count, 8, 7, 0, ("0xb0", 2));
    }
    text.truncate(text.len() - 60);
    let log = parse(&text);
    assert_eq!((log.rank, log.calls.len()), (Some(0), 3));
    let log = parse_rank(&text, 1).unwrap();
    assert_eq!(log.calls.len(), 2);
    assert_note(&log, |n| {
        n.starts_with("line 8, rank 1's last call line, is cut short (it lacks ")
            && n.ends_with("the 2 calls before it are replayed")
    });
    assert!(!log.notes.iter().any(|n| n.contains("were skipped")), "{:?}", log.notes);
    // the same cut in the middle of its sequence is a gap
    let mut middle = text.clone();
    middle += "\n";
    middle += &coll((2, 1), "AllReduce", 3, 8, 7, 0, ("0xb0", 2));
    let e = err(parse_rank(&middle, 1));
    assert!(
        e.starts_with("rank 1's sequence has a gap: its call line 8 is cut short"),
        "{e}"
    );
}

#[test]
fn a_call_line_with_a_value_that_cannot_be_read_is_named_and_refused_only_for_its_rank() {
    let mut text = init_line(1, 0, "0xa0", 0, 2, "0x10") + &init_line(2, 1, "0xb0", 1, 2, "0x10");
    for op_count in 0..2 {
        text += &coll((1, 0), "AllReduce", op_count, 8, 7, 0, ("0xa0", 2));
        text += &coll((2, 1), "AllReduce", op_count, 8, 7, 0, ("0xb0", 2));
    }
    // line 4: rank 1's first call, its count damaged
    let damaged = text.replacen(
        "count 8 datatype 7 op 0 root 0 comm 0xb0",
        "count 8x datatype 7 op 0 root 0 comm 0xb0",
        1,
    );
    let log = parse(&damaged);
    assert_eq!((log.rank, log.calls.len()), (Some(0), 2));
    assert_note(&log, |n| {
        n == "1 call lines with a value that cannot be read were skipped (line 4: count (`8x`)): none is rank 0's"
    });
    let e = err(parse_rank(&damaged, 1));
    assert!(
        e.starts_with("rank 1's sequence has a gap: its call line 4 cannot be read: it has no readable count (`8x`)"),
        "{e}"
    );
}
