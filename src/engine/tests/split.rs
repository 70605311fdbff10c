//! `--split`: parallel groups, each with its row beside the aggregate.

use super::*;

/// `--split RULE` at `n` ranks, each rank's plan of `cases` at its group's
/// size.
fn split_sweep(
    n: usize,
    rule: &str,
    cases: fn(usize) -> Plan,
    setup: impl Fn(usize, MemoryBackend) -> MemoryBackend + Sync,
    inject: bool,
) -> Vec<Ran> {
    let hooks = Hooks {
        split: Some((rule.parse().unwrap(), cases)),
        inject_errors: inject,
        ..Hooks::default()
    };
    // the plan argument is replaced by each rank's group plan
    sweep_with(n, &timing(), &cases(n), setup, &hooks)
}

fn row<'r>(records: &'r [Record], group: &str, placement: Placement) -> Vec<&'r Record> {
    records
        .iter()
        .filter(|r| r.group.as_deref() == Some(group) && r.placement == placement)
        .collect()
}

#[test]
fn split_groups_run_at_once_and_each_gets_its_row_beside_the_aggregate() {
    // 4 ranks, MOD 2: groups {0, 2} and {1, 3}; rank r takes r+1 us an op
    fn cases(n: usize) -> Plan {
        plan(n, vec![case(Collective::AllReduce, 1 << 20, n)])
    }
    // every operation runs in the rank's group: a group of 2, by its index
    let in_group = |rank: usize, b: MemoryBackend| {
        b.with_delay(move |op: &Launched| {
            assert_eq!(
                (op.call.group.is_some(), op.call.at.nranks, op.call.at.rank),
                (true, 2, rank / 2)
            );
            micros(rank as u64 + 1)
        })
    };
    let ran = split_sweep(4, "MOD 2", cases, in_group, false);
    let records = &ran[0].records;
    assert!(ran[1..].iter().all(|r| r.records.is_empty()));
    // per point: group 0, group 1, all; out-of-place and in-place of each together
    let order: Vec<(&str, Placement)> = records
        .iter()
        .map(|r| (r.group.as_deref().unwrap(), r.placement))
        .collect();
    use Placement::{InPlace, OutOfPlace};
    assert_eq!(
        order,
        vec![
            ("0", OutOfPlace),
            ("0", InPlace),
            ("1", OutOfPlace),
            ("1", InPlace),
            ("all", OutOfPlace),
            ("all", InPlace)
        ]
    );
    let s = ran[0].summary();
    assert_eq!((s.points, s.checked_points, s.wrong), (2, 2, 0));
    for placement in Placement::BOTH {
        let (g0, g1, all) = (
            row(records, "0", placement)[0],
            row(records, "1", placement)[0],
            row(records, "all", placement)[0],
        );
        // each group's ranks: the mean of their times (--average avg)
        assert!((g0.time_us - 2.0).abs() < 1e-9, "{}", g0.time_us);
        assert!((g1.time_us - 3.0).abs() < 1e-9, "{}", g1.time_us);
        assert_eq!((g0.time_min_us, g0.time_max_us), (1.0, 3.0));
        // nccl-tests' aggregate: every rank's time, rank 0's group's size
        assert!((all.time_us - 2.5).abs() < 1e-9, "{}", all.time_us);
        for r in [g0, g1, all] {
            assert_eq!(
                (r.nranks, r.size_bytes, r.count, r.wrong),
                (2, 1 << 20, 1 << 18, Some(0))
            );
            // all_reduce at 2 ranks: busbw = algbw * 2(n-1)/n = algbw
            let algbw = (1 << 20) as f64 / (r.time_us * 1e-6) / 1e9;
            assert!((r.algbw_gbps - algbw).abs() < 1e-9 * algbw);
            assert!((r.busbw_gbps - algbw).abs() < 1e-9 * algbw);
        }
    }
}

#[test]
fn split_groups_of_different_sizes_report_their_own_size_and_bus_factor() {
    // 3 ranks, MOD 2: {0, 2} and {1}; all_gather's count is per rank
    fn cases(n: usize) -> Plan {
        plan(n, vec![case(Collective::AllGather, 1 << 12, n)])
    }
    let ran = split_sweep(3, "MOD 2", cases, per_rank_delay(&[4, 8, 2]), false);
    let records = &ran[0].records;
    let (g0, g1, all) = (
        row(records, "0", Placement::OutOfPlace)[0],
        row(records, "1", Placement::OutOfPlace)[0],
        row(records, "all", Placement::OutOfPlace)[0],
    );
    let at = |n: usize| case(Collective::AllGather, 1 << 12, n);
    assert_eq!(
        (g0.nranks, g0.size_bytes, g0.count),
        (2, at(2).size_bytes(), at(2).shape.count as u64)
    );
    assert_eq!(
        (g1.nranks, g1.size_bytes, g1.count),
        (1, at(1).size_bytes(), at(1).shape.count as u64)
    );
    assert_eq!((all.nranks, all.size_bytes), (2, at(2).size_bytes()));
    assert!((g0.time_us - 3.0).abs() < 1e-9 && (g1.time_us - 8.0).abs() < 1e-9);
    assert!((all.time_us - 14.0 / 3.0).abs() < 1e-9);
    // all_gather's bus factor (n-1)/n: 1/2 at 2 ranks, 0 at 1
    assert!((g0.busbw_gbps - g0.algbw_gbps / 2.0).abs() < 1e-9 * g0.algbw_gbps);
    assert_eq!(g1.busbw_gbps, 0.0);
    assert!(records.iter().all(|r| r.wrong == Some(0)));
}

#[test]
fn split_groups_count_their_own_ranks_wrong_elements() {
    fn cases(n: usize) -> Plan {
        plan(n, vec![case(Collective::AllReduce, 1 << 10, n)])
    }
    // rank 3 (group 1) corrupts 5 elements of its first check
    let ran = split_sweep(
        4,
        "AND 0x1",
        cases,
        |rank, b| b.with_fault(move |op: &Launched| (rank == 3 && op.iter == 0).then_some(Fault::Corrupt(5))),
        false,
    );
    let records = &ran[0].records;
    let wrong = |g: &str| row(records, g, Placement::OutOfPlace)[0].wrong;
    assert_eq!((wrong("0"), wrong("1"), wrong("all")), (Some(0), Some(5), Some(5)));
    assert_eq!(
        ran[0].summary().wrong,
        ran[0]
            .records
            .iter()
            .filter(|r| r.group.as_deref() == Some("all"))
            .map(|r| r.wrong.unwrap())
            .sum::<u64>()
    );
}
