//! Ending a sweep: a stop request, the watchdog, profiler ranges around
//! each point, and a failed operation.

use super::*;

#[test]
fn a_stop_on_one_rank_ends_every_rank_at_the_same_point_boundary() {
    let p = plan(3, Collective::ALL.iter().map(|&c| case(c, 1024, 3)).collect());
    let stop = StopRequest::never();
    let raise = stop.clone();
    let ran = sweep_with(
        3,
        &Timing { cycles: 0, ..timing() },
        &p,
        move |rank, b| {
            let raise = raise.clone();
            // rank 2 gets SIGTERM during its 40th operation
            b.with_delay(move |op| {
                if rank == 2 && op.seq == 40 {
                    raise.raise(15);
                }
                Duration::ZERO
            })
        },
        &Hooks {
            stop: Some((2, stop)),
            ..Hooks::default()
        },
    );
    let points = ran[0].summary().points;
    assert!(points > 0 && points < 18, "{points}");
    for r in &ran {
        assert_eq!((r.summary().stopped_by, r.summary().points), (Some(15), points));
    }
    assert_eq!(ran[0].records.len(), points);
}

#[test]
fn the_watchdog_watches_each_point_by_name_and_is_idle_after_the_sweep() {
    let dog = Arc::new(watchdog::Watchdog::start(Duration::from_secs(3600), "rank 0".into()));
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let cases = vec![case(Collective::Scatter, 384, 3), case(Collective::AllReduce, 96, 3)];
    let p = plan(3, cases.clone());
    let (watched, log) = (Arc::clone(&dog), Arc::clone(&seen));
    let ran = sweep_with(
        3,
        &timing(),
        &p,
        move |rank, b| {
            let (dog, log) = (Arc::clone(&watched), Arc::clone(&log));
            b.with_delay(move |_| {
                if rank == 0
                    && let Some(what) = dog.watching()
                {
                    log.lock().unwrap().push(what);
                }
                Duration::ZERO
            })
        },
        &Hooks {
            watchdog: Some(&*dog),
            ..Hooks::default()
        },
    );
    assert_eq!(ran[0].summary().points, 4);
    let mut names = seen.lock().unwrap().clone();
    names.dedup();
    let want: Vec<String> = cases
        .iter()
        .flat_map(|c| Placement::BOTH.map(|p| describe(c, p)))
        .collect();
    assert_eq!(names, want);
    assert_eq!(dog.watching(), None);
}

#[test]
fn profiler_ranges_name_each_point_and_close_around_it() {
    let c = case(Collective::AllToAll, 192, 2);
    let ran = sweep(2, &timing(), &plan(2, vec![c]), |_, b| b.with_profiler());
    let ranges: Vec<Event> = ran[0]
        .journal
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::RangePush(_) | Event::RangePop))
        .collect();
    assert_eq!(
        ranges,
        vec![
            Event::RangePush(describe(&c, Placement::OutOfPlace)),
            Event::RangePop,
            Event::RangePush(describe(&c, Placement::InPlace)),
            Event::RangePop,
        ]
    );
}

#[test]
fn a_failed_operation_ends_the_sweep_on_every_rank_with_its_error() {
    let p = plan(
        3,
        vec![case(Collective::AllReduce, 96, 3), case(Collective::Gather, 96, 3)],
    );
    let fail = |rank: usize, b: MemoryBackend| {
        b.with_fault(move |op| (rank == 2 && op.seq == 20).then(|| Fault::Fail("injected on rank 2".into())))
    };
    let ran = sweep(3, &timing(), &p, fail);
    assert_eq!(ran[2].summary.as_ref().unwrap_err(), "injected on rank 2");
    for r in &ran[..2] {
        assert_eq!(r.summary.as_ref().unwrap_err(), "rank 2 of the memory backend failed");
    }
    // 6 operations a point (1 warm-up, 1 check, 4 timed): operation 20
    // (from 0) is in the fourth point; the three before it were recorded
    assert_eq!(ran[0].records.len(), 3);
}
