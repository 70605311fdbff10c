//! `-I`'s slow-rank verdict: a rank late with its own work is named, a
//! rank whose operations alone are slower is not.

use super::*;

/// The slow-rank verdict of a 3-rank sweep of all_reduce at 4 sizes, 4
/// cycles, `-I`, where `setup` says what each rank's operations and own
/// work take.
fn slow_rank_of(setup: impl Fn(usize, MemoryBackend) -> MemoryBackend + Sync) -> straggler::SlowRank {
    let sizes = [1024, 4096, 16384, 65536];
    let p = plan(3, sizes.iter().map(|&b| case(Collective::AllReduce, b, 3)).collect());
    let t = Timing {
        per_iter: true,
        cycles: 4,
        ..timing()
    };
    let ran = sweep(3, &t, &p, setup);
    assert!(ran[1..].iter().all(|r| r.summary.as_ref().unwrap().straggler.is_none()));
    ran[0].summary.as_ref().unwrap().straggler.clone().unwrap()
}

#[test]
fn a_rank_whose_own_work_is_slower_arrives_late_and_is_named() {
    // rank 2 fills its input in 30 us, the others in 10 us: at every
    // point the others wait 20 us for it at the check's collective
    let named = slow_rank_of(|rank, b| b.with_work(move |_| micros(if rank == 2 { 30 } else { 10 })));
    let straggler::SlowRank::Named(s) = named else {
        panic!("{named:?}")
    };
    assert_eq!((s.rank, s.late, s.points, s.every_size), (2, 32, 32, true));
    assert!((s.excess - 2.0).abs() < 1e-9, "{}", s.excess);
    // only from 16 KiB on (a fault that needs a long enough work to land in)
    let named = slow_rank_of(|rank, b| {
        b.with_work(move |call| micros(if rank == 1 && call.shape.count >= 4096 { 25 } else { 10 }))
    });
    let straggler::SlowRank::Named(s) = named else {
        panic!("{named:?}")
    };
    assert_eq!((s.rank, s.from_size, s.late, s.points), (1, 16384, 16, 16));
}

#[test]
fn a_rank_whose_operations_alone_take_longer_is_not_named() {
    // duration: rank 1's operations take twice as long on its own clock,
    // and its own work is the others': no arrival skew, no name
    let verdict = slow_rank_of(|rank, b| {
        b.with_delay(move |_| micros(if rank == 1 { 20 } else { 10 }))
            .with_work(|_| micros(10))
    });
    assert_eq!(verdict, straggler::SlowRank::NoneFound { points: 32 });
    // and without a check there is nothing to judge by
    let p = plan(2, vec![case(Collective::AllReduce, 1024, 2)]);
    let t = Timing {
        per_iter: true,
        check: 0,
        ..timing()
    };
    let ran = sweep(2, &t, &p, |_, b| b);
    assert!(matches!(
        ran[0].summary.as_ref().unwrap().straggler,
        Some(straggler::SlowRank::NotJudged(_))
    ));
}

#[test]
fn a_rank_slow_at_everything_is_named_only_where_enough_points_show_it() {
    // rank 0 as a starved CPU makes it: its operations and its own work
    // both 3x the others'
    let slow = |rank: usize, b: MemoryBackend| {
        let f = if rank == 0 { 3 } else { 1 };
        b.with_delay(move |_| micros(10 * f)).with_work(move |_| micros(10 * f))
    };
    let named = slow_rank_of(slow);
    let straggler::SlowRank::Named(s) = named else {
        panic!("{named:?}")
    };
    assert_eq!((s.rank, s.late, s.points), (0, 32, 32));
    // the same rank at one size, one cycle: 2 points (in and out of
    // place), late at both, which chance gives one time in 9 at 3 ranks
    let p = plan(3, vec![case(Collective::AllReduce, 4096, 3)]);
    let t = Timing {
        per_iter: true,
        ..timing()
    };
    let ran = sweep(3, &t, &p, slow);
    let verdict = ran[0].summary.as_ref().unwrap().straggler.clone().unwrap();
    let straggler::SlowRank::NotJudged(why) = verdict else {
        panic!("{verdict:?}")
    };
    assert!(
        why.starts_with("2 checked points") && why.contains("need 6 at 3 ranks"),
        "{why}"
    );
}
