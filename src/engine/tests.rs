//! The engine's tests: its arithmetic alone, then whole sweeps on the
//! in-memory backend (`backend::memory`), one thread per rank of a
//! `ThreadWorld`, with virtual clocks so that every time is exact: the
//! loop, the checks, the timing methods, `-m`, `-G`, `-I`, adaptive
//! iteration counts, cycles, stop, watchdog and failures, without mpirun.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::groups::Groups;
use super::policy::Iterations;
use super::*;
use crate::backend::memory::{Event, Fault, Journal, Launched, MemoryBackend};
use crate::clock::VirtualClock;
use crate::collective::Collective;
use crate::topology::Hierarchy;
use crate::types::{DType, IterPolicy, ReduceOp};
use crate::world::threads::ThreadWorld;

#[test]
fn time_per_operation_counts_every_operation_of_every_replay() {
    // nccl-tests: elapsed / (iters * agg_iters), / graph launches
    assert_eq!(per_op_seconds(1.0, 10, 1, 0), 0.1);
    assert_eq!(per_op_seconds(1.0, 10, 4, 0), 1.0 / 40.0);
    assert_eq!(per_op_seconds(1.0, 10, 4, 5), 1.0 / 200.0);
    assert_eq!(per_op_seconds(1.0, 10, 1, 1), 0.1);
    assert_eq!(per_op_seconds(3.0, 1, 1, 0), 3.0);
    // nothing divides by zero
    assert_eq!(per_op_seconds(2.0, 0, 0, 0), 2.0);
}

#[test]
fn a_replayed_graph_holds_a_share_of_the_calibrated_iterations() {
    assert_eq!(captured_iterations(100, 0), 100);
    assert_eq!(captured_iterations(100, 1), 100);
    assert_eq!(captured_iterations(100, 10), 10);
    assert_eq!(captured_iterations(101, 10), 11);
    assert_eq!(captured_iterations(5, 100), 1);
    assert_eq!(captured_iterations(1, 3), 1);
}

#[test]
fn descriptions_name_a_point_for_messages_and_profiler_timelines() {
    let case = |c: Collective, hierarchy, op, root| Case {
        collective: c,
        hierarchy,
        dtype: DType::Float,
        op,
        root,
        shape: c.spec().shape(256, 2),
    };
    let all_reduce = case(Collective::AllReduce, Hierarchy::Flat, Some(ReduceOp::Sum), None);
    assert_eq!(
        describe(&all_reduce, Placement::InPlace),
        "all_reduce float sum 1024 B in_place"
    );
    let rs = case(Collective::AllReduce, Hierarchy::RsArAg, Some(ReduceOp::Max), None);
    assert_eq!(
        describe(&rs, Placement::OutOfPlace),
        "all_reduce (rs-ar-ag) float max 1024 B out_of_place"
    );
    let bcast = case(Collective::Broadcast, Hierarchy::Flat, None, Some(1));
    assert_eq!(
        describe(&bcast, Placement::OutOfPlace),
        "broadcast float root 1 1024 B out_of_place"
    );
}

// ---------------------------------------------------------------------------
// Sweeps on the in-memory backend

fn timing() -> Timing {
    Timing {
        iterations: Iterations::Fixed(4),
        per_iter: false,
        straggler_threshold_pct: 20.0,
        rotate: false,
        rotate_asked: None,
        warmup: 1,
        check: 1,
        average: Average::Avg,
        blocking: false,
        agg_iters: 1,
        cuda_graph: 0,
        register: crate::types::Register::Off,
        phase_times: false,
        cycles: 1,
        timeout: None,
    }
}

fn context() -> RunContext {
    RunContext {
        run_id: "test".into(),
        host: "host".into(),
        backend: BackendKind::Memory,
        backend_version: "memory".into(),
        transport: Profile::Auto,
        transport_observed: "none".into(),
        nnodes: 1,
        ranks_per_node: 1,
        label: None,
    }
}

/// `bytes` of `collective` on floats at `n` ranks (sum where it reduces).
fn case(collective: Collective, bytes: usize, n: usize) -> Case {
    let spec = collective.spec();
    Case {
        collective,
        hierarchy: Hierarchy::Flat,
        dtype: DType::Float,
        op: spec.is_reduction().then_some(ReduceOp::Sum),
        root: spec.has_root().then_some(n - 1),
        shape: spec.shape(bytes / 4, n),
    }
}

fn plan(n: usize, cases: Vec<Case>) -> Plan {
    Plan { nranks: n, cases }
}

/// What one rank's sweep gave.
struct Ran {
    summary: Result<Summary, String>,
    /// Rank 0's records (none elsewhere).
    records: Vec<Record>,
    journal: Journal,
}

impl Ran {
    fn summary(&self) -> &Summary {
        self.summary.as_ref().unwrap()
    }
}

/// A plan at a communicator's size (a `--split` group's).
type PlanAt = fn(usize) -> Plan;

/// What the ranks' engines get besides the plan.
#[derive(Default)]
struct Hooks<'w> {
    /// Rank 0's watchdog.
    watchdog: Option<&'w watchdog::Watchdog>,
    /// One rank's stop request.
    stop: Option<(usize, StopRequest)>,
    inject_errors: bool,
    /// `--split`: the rule, and each rank's plan at its group's size.
    split: Option<(crate::types::SplitRule, PlanAt)>,
}

/// Sweeps `plan` with `timing` on `n` ranks, each on its own virtual clock;
/// `setup(rank, backend)` injects delays and faults.
fn sweep_with(
    n: usize,
    timing: &Timing,
    plan: &Plan,
    setup: impl Fn(usize, MemoryBackend) -> MemoryBackend + Sync,
    hooks: &Hooks,
) -> Vec<Ran> {
    let worlds = ThreadWorld::create(n);
    let backends = MemoryBackend::create(n).unwrap();
    let ctx = context();
    std::thread::scope(|s| {
        let handles: Vec<_> = worlds
            .iter()
            .zip(backends)
            .enumerate()
            .map(|(rank, (world, backend))| {
                let (setup, ctx) = (&setup, &ctx);
                s.spawn(move || {
                    let clock = VirtualClock::new();
                    let mut backend = setup(rank, backend.with_clock(clock.clone()));
                    let journal = backend.journal();
                    let mut records = Vec::new();
                    let groups = hooks
                        .split
                        .map(|(rule, _)| Groups::of(rule, n, rank).split(&mut backend, rank).unwrap());
                    let group_plan = hooks.split.zip(groups.as_ref()).map(|((_, f), g)| f(g.size()));
                    let plan = group_plan.as_ref().unwrap_or(plan);
                    let mut engine = Engine::new(world, &mut backend, timing, ctx)
                        .with_clock(Clock::Virtual(clock))
                        .with_injected_errors(hooks.inject_errors)
                        .with_groups(groups.as_ref());
                    if rank == 0 {
                        engine = engine.with_watchdog(hooks.watchdog);
                    }
                    if let Some((_, stop)) = hooks.stop.as_ref().filter(|(r, _)| *r == rank) {
                        engine = engine.with_stop(stop.clone());
                    }
                    let summary = engine
                        .run(plan, |r| {
                            records.push(r.clone());
                            Ok(())
                        })
                        .map_err(|e| e.to_string());
                    Ran {
                        summary,
                        records,
                        journal,
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

fn sweep(
    n: usize,
    timing: &Timing,
    plan: &Plan,
    setup: impl Fn(usize, MemoryBackend) -> MemoryBackend + Sync,
) -> Vec<Ran> {
    sweep_with(n, timing, plan, setup, &Hooks::default())
}

/// alltoallv on the memory backend (which computes the exchange from
/// every rank's real input, in place too): the generated traffic at spread
/// 0, 0.5 and 1 and a matrix, int8 to double, 1 to 4 ranks, every element
/// of both placements checked, each row's size the most any rank moves.
#[test]
fn alltoallv_checks_every_element_of_every_traffic_at_1_to_4_ranks() {
    use crate::collective::{Spread, Traffic, TrafficMatrix};
    let m: &'static TrafficMatrix = Box::leak(Box::new(
        TrafficMatrix::parse("0 48 96 16\n160 32 0 64\n16 16 16 16\n256 0 48 32", 1.0, "m").unwrap(),
    ));
    let spread = |s| Traffic::Weighted(Spread::new(s).unwrap());
    for n in 1..=4 {
        let mut cases = Vec::new();
        for traffic in [spread(0.0), spread(0.5), spread(1.0), Traffic::Matrix(m)] {
            for dtype in [DType::Int8, DType::Half, DType::Float, DType::Double] {
                let shape = Collective::AllToAllV.sized(4096, n, dtype.size_bytes(), traffic);
                cases.push(Case {
                    collective: Collective::AllToAllV,
                    hierarchy: Hierarchy::Flat,
                    dtype,
                    op: None,
                    root: None,
                    shape,
                });
            }
        }
        let p = plan(n, cases.clone());
        let t = Timing { check: 2, ..timing() };
        let ran = sweep(n, &t, &p, |_, b| b.with_delay(|_| micros(10)));
        let s = ran[0].summary();
        assert_eq!((s.points, s.checked_points, s.wrong), (32, 32, 0), "n={n}");
        for (r, case) in ran[0].records.iter().zip(cases.iter().flat_map(|c| [c, c])) {
            assert_eq!(r.size_bytes, case.size_bytes());
            let peers = crate::collective::Peers::of(&case.shape, n);
            let most = (0..n).map(|k| peers.sends(k).max(peers.receives(k))).max().unwrap();
            assert_eq!(r.size_bytes, (most * case.dtype.size_bytes()) as u64);
            assert!((r.busbw_gbps - r.algbw_gbps * (n as f64 - 1.0) / n as f64).abs() < 1e-12);
        }
    }
}

fn micros(us: u64) -> Duration {
    Duration::from_micros(us)
}

/// Each rank's operations take `us[rank]` microseconds.
fn per_rank_delay(us: &'static [u64]) -> impl Fn(usize, MemoryBackend) -> MemoryBackend + Sync {
    move |rank, b| b.with_delay(move |_| micros(us[rank]))
}

/// Every `launch` of a journal: (first iteration, operations, captured).
fn launches(journal: &Journal) -> Vec<(u64, u32, bool)> {
    journal
        .events()
        .into_iter()
        .filter_map(|e| match e {
            Event::Launch {
                first_iter,
                ops,
                captured,
            } => Some((first_iter, ops, captured)),
            _ => None,
        })
        .collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1e-12)
}

#[test]
fn every_collective_is_checked_and_recorded_in_plan_order_on_rank_0_at_1_to_4_ranks() {
    for n in 1..=4 {
        for rotate in [false, true] {
            let cases: Vec<Case> = Collective::ALL.iter().map(|&c| case(c, 4096, n)).collect();
            let p = plan(n, cases.clone());
            let t = Timing {
                rotate,
                check: 2,
                ..timing()
            };
            let ran = sweep(n, &t, &p, |_, mut b| {
                b.reserve(&p.reservation(rotate)).unwrap();
                b
            });
            for (rank, r) in ran.iter().enumerate() {
                let s = r.summary();
                let points = 2 * Collective::ALL.len();
                assert_eq!(
                    (s.points, s.checked_points, s.wrong, s.failed_points),
                    (points, points, 0, 0)
                );
                assert_eq!(r.records.len(), if rank == 0 { points } else { 0 });
            }
            let order: Vec<(Collective, Placement)> =
                ran[0].records.iter().map(|r| (r.collective, r.placement)).collect();
            let want: Vec<(Collective, Placement)> = cases
                .iter()
                .flat_map(|c| Placement::BOTH.map(|p| (c.collective, p)))
                .collect();
            assert_eq!(order, want, "{n} ranks");
            for (r, c) in ran[0].records.iter().zip(cases.iter().flat_map(|c| [c, c])) {
                assert_eq!((r.wrong, r.nranks, r.iters), (Some(0), n as u64, 4));
                assert_eq!(r.size_bytes, c.size_bytes());
                assert_eq!(r.count, c.shape.count as u64);
            }
        }
    }
}

#[test]
fn wrong_elements_are_summed_over_ranks_and_each_point_with_any_fails() {
    // warm-up and check run at iteration 0, the timed iterations after it:
    // only the warm-up's and the check's outputs are corrupted
    let corrupt = |wrong: &'static [usize]| {
        move |rank: usize, b: MemoryBackend| {
            b.with_fault(move |op: &Launched| (op.iter == 0 && wrong[rank] > 0).then_some(Fault::Corrupt(wrong[rank])))
        }
    };
    let p = plan(
        3,
        vec![case(Collective::AllGather, 768, 3), case(Collective::AllReduce, 96, 3)],
    );
    let ran = sweep(3, &Timing { check: 3, ..timing() }, &p, corrupt(&[0, 3, 2]));
    for r in &ran {
        let s = r.summary();
        assert_eq!((s.points, s.checked_points, s.failed_points, s.wrong), (4, 4, 4, 20));
    }
    assert!(ran[0].records.iter().all(|r| r.wrong == Some(5)));

    // the engine's own hook: every rank with an output flips its first
    // received element, after each check
    let hooks = Hooks {
        inject_errors: true,
        ..Hooks::default()
    };
    let ran = sweep_with(3, &timing(), &p, |_, b| b, &hooks);
    assert_eq!(ran[0].summary().wrong, 4 * 3);
    // checking off: no count at all
    let ran = sweep(3, &Timing { check: 0, ..timing() }, &p, corrupt(&[1, 1, 1]));
    assert_eq!(ran[0].summary().checked_points, 0);
    assert!(ran[0].records.iter().all(|r| r.wrong.is_none()));
}

#[test]
fn the_time_per_operation_is_each_ranks_own_reduced_across_ranks_as_asked() {
    let p = plan(3, vec![case(Collective::AllReduce, 4096, 3)]);
    for (average, want_us) in [
        (Average::Avg, 20.0),
        (Average::Rank0, 10.0),
        (Average::Min, 10.0),
        (Average::Max, 30.0),
    ] {
        for blocking in [false, true] {
            let t = Timing {
                average,
                blocking,
                ..timing()
            };
            let ran = sweep(3, &t, &p, per_rank_delay(&[10, 20, 30]));
            for r in &ran[0].records {
                assert!(
                    close(r.time_us, want_us),
                    "{average} blocking={blocking}: {}",
                    r.time_us
                );
                assert!(close(r.time_min_us, 10.0) && close(r.time_max_us, 30.0), "{r:?}");
                // algbw = size / time (GB = 1e9 B); busbw = algbw * 2(n-1)/n
                let algbw = r.size_bytes as f64 / (want_us * 1e-6) / 1e9;
                assert!(
                    close(r.algbw_gbps, algbw) && close(r.busbw_gbps, algbw * 4.0 / 3.0),
                    "{r:?}"
                );
                let method = if blocking {
                    TimingMethod::Blocking
                } else {
                    TimingMethod::Batched
                };
                assert_eq!((r.timing, r.average), (Some(method), Some(average)));
            }
        }
    }
}

#[test]
fn per_iteration_samples_are_each_operations_time_at_its_slowest_rank_on_either_clock() {
    // iteration k (operations 1..=4 after one warm-up) takes k microseconds
    // on rank 0 and 2k on rank 1, so the slowest rank's are 2, 4, 6, 8
    let delay = |rank: usize, b: MemoryBackend| b.with_delay(move |op| micros(op.iter * (rank as u64 + 1)));
    let p = plan(2, vec![case(Collective::SendRecv, 64, 2)]);
    let t = Timing {
        per_iter: true,
        ..timing()
    };
    let host = sweep(2, &t, &p, delay);
    let device = sweep(2, &t, &p, move |rank, b| delay(rank, b).with_iteration_marks());
    for ran in [&host, &device] {
        let r = &ran[0].records[0];
        assert!(
            close(r.time_iter_min_us.unwrap(), 2.0) && close(r.time_iter_max_us.unwrap(), 8.0),
            "{r:?}"
        );
        assert!(close(r.time_p50_us.unwrap(), 5.0), "{r:?}");
        // per operation: 10 us over 4 on rank 0, 20 over 4 on rank 1
        assert!(close(r.time_min_us, 2.5) && close(r.time_max_us, 5.0), "{r:?}");
        assert_eq!(r.slowest_rank, Some(1));
    }
    // device marks: made before the barrier, mark 0 after it, one per launch
    let marks: Vec<Event> = device[1]
        .journal
        .events()
        .into_iter()
        .filter(|e| matches!(e, Event::StartMarks { .. } | Event::Mark { .. }))
        .take(6)
        .collect();
    let want = [Event::StartMarks { iters: 4 }]
        .into_iter()
        .chain((0..=4).map(|i| Event::Mark { i }))
        .collect::<Vec<_>>();
    assert_eq!(marks, want);
    assert!(
        host[1]
            .journal
            .events()
            .iter()
            .all(|e| !matches!(e, Event::Mark { .. }))
    );
}

#[test]
fn aggregated_iterations_launch_m_operations_at_a_time_and_divide_by_every_one() {
    let p = plan(2, vec![case(Collective::AllReduce, 256, 2)]);
    let t = Timing {
        agg_iters: 3,
        iterations: Iterations::Fixed(2),
        per_iter: true,
        ..timing()
    };
    let ran = sweep(2, &t, &p, per_rank_delay(&[7, 7]));
    let r = &ran[0].records[0];
    assert!(
        close(r.time_us, 7.0) && close(r.time_iter_max_us.unwrap(), 7.0),
        "{r:?}"
    );
    assert_eq!((r.iters, r.agg_iters), (2, Some(3)));
    // warm-up at 0, the check at 0, then 2 iterations of 3 from 1
    let first_point: Vec<_> = launches(&ran[1].journal).into_iter().take(4).collect();
    assert_eq!(
        first_point,
        vec![(0, 1, false), (0, 1, false), (1, 3, false), (4, 3, false)]
    );
}

#[test]
fn a_graph_captures_the_timed_iterations_once_and_replays_them_g_times() {
    let p = plan(2, vec![case(Collective::AllGather, 512, 2)]);
    let t = Timing {
        cuda_graph: 5,
        iterations: Iterations::Fixed(3),
        agg_iters: 2,
        ..timing()
    };
    let ran = sweep(2, &t, &p, per_rank_delay(&[4, 4]));
    let r = &ran[0].records[0];
    // 5 replays of 3 iterations of 2 operations, 4 us each
    assert!(close(r.time_us, 4.0), "{r:?}");
    assert_eq!((r.iters, r.cuda_graph, r.wrong), (3, Some(5), Some(0)));
    let events = ran[1].journal.events();
    // the point's last capture: its timed iterations (each check before
    // them has a graph of its own)
    let begin = events.iter().rposition(|e| *e == Event::BeginCapture).unwrap();
    assert_eq!(
        events[begin..begin + 6].to_vec(),
        vec![
            Event::BeginCapture,
            Event::Launch {
                first_iter: 1,
                ops: 2,
                captured: true
            },
            Event::Launch {
                first_iter: 3,
                ops: 2,
                captured: true
            },
            Event::Launch {
                first_iter: 5,
                ops: 2,
                captured: true
            },
            Event::EndCapture,
            Event::Replay { times: 5 },
        ]
    );
}

/// nccl-tests validates through the graph: with `-G`, each check's
/// operation is captured, then replayed once, and that replay's output is
/// what the check reads.
#[test]
fn with_a_graph_each_check_is_captured_and_replayed_once_before_its_output_is_read() {
    let p = plan(2, vec![case(Collective::AllReduce, 64, 2)]);
    let t = Timing {
        cuda_graph: 3,
        check: 2,
        iterations: Iterations::Fixed(2),
        ..timing()
    };
    let ran = sweep(2, &t, &p, |_, b| b);
    assert!(ran[0].records.iter().all(|r| r.wrong == Some(0)));
    let events = ran[1].journal.events();
    let load = events.iter().position(|e| matches!(e, Event::Load { .. })).unwrap();
    let check = vec![
        Event::BeginCapture,
        Event::Launch {
            first_iter: 0,
            ops: 1,
            captured: true,
        },
        Event::EndCapture,
        Event::Replay { times: 1 },
        Event::Wait,
    ];
    assert_eq!(events[load + 1..load + 6].to_vec(), check, "{events:?}");
    // and the second check does the same
    assert_eq!(
        events[load + 6],
        Event::Load {
            placement: Placement::OutOfPlace
        }
    );
    assert_eq!(events[load + 7..load + 12].to_vec(), check, "{events:?}");
}

#[test]
fn a_graph_the_backend_cannot_make_is_refused_before_any_point() {
    let p = plan(2, vec![case(Collective::AllGather, 512, 2)]);
    let t = Timing {
        cuda_graph: 2,
        ..timing()
    };
    let ran = sweep(2, &t, &p, |_, b| b.with_graphs(false));
    for r in &ran {
        let e = r.summary.as_ref().unwrap_err();
        assert_eq!(e, "-G/--cuda-graph 2: the memory backend has no CUDA graphs; drop -G");
        assert!(launches(&r.journal).is_empty());
    }
}

#[test]
fn adaptive_counts_fill_min_time_at_the_slowest_ranks_pace_within_the_bounds() {
    // calibration: batches of 1, 2, 4, 8 at the slowest rank's 20 us, until
    // one takes a tenth of 1 ms; 1 ms / 20 us = 50 iterations
    let p = plan(2, vec![case(Collective::AllReduce, 64, 2)]);
    let t = Timing {
        iterations: Iterations::MinTime(Duration::from_millis(1)),
        ..timing()
    };
    let ran = sweep(2, &t, &p, per_rank_delay(&[10, 20]));
    assert!(ran[0].records.iter().all(|r| r.iters == 50), "{:?}", ran[0].records);
    assert_eq!(ran[0].records[0].iter_policy, Some(IterPolicy::MinTime));
    // 10 us at 4 bytes, 1 ms at 64 KiB: 100 iterations, and the floor of 5
    let p = plan(
        2,
        vec![
            case(Collective::AllReduce, 4, 2),
            case(Collective::AllReduce, 1 << 16, 2),
        ],
    );
    let by_size = |_, b: MemoryBackend| {
        b.with_delay(|op: &Launched| {
            if op.call.shape.count == 1 {
                micros(10)
            } else {
                micros(1000)
            }
        })
    };
    let ran = sweep(2, &t, &p, by_size);
    let iters: Vec<u64> = ran[0].records.iter().map(|r| r.iters).collect();
    assert_eq!(
        iters,
        vec![100, 100, adaptive::MIN_ITERS.into(), adaptive::MIN_ITERS.into()]
    );
    // with -G 4 the graph holds a quarter of the calibrated count
    let ran = sweep(
        2,
        &Timing {
            cuda_graph: 4,
            ..t.clone()
        },
        &p,
        by_size,
    );
    assert_eq!(ran[0].records[0].iters, 25);
}

#[test]
fn cycles_repeat_the_plan_and_number_its_records() {
    let p = plan(
        2,
        vec![case(Collective::Broadcast, 64, 2), case(Collective::Reduce, 64, 2)],
    );
    let ran = sweep(2, &Timing { cycles: 3, ..timing() }, &p, |_, b| b);
    assert_eq!(ran[0].summary().cycles, 3);
    let cycles: Vec<Option<u64>> = ran[0].records.iter().map(|r| r.cycle).collect();
    let want: Vec<Option<u64>> = (1..=3).flat_map(|c| [Some(c); 4]).collect();
    assert_eq!(cycles, want);
    assert!(ran[0].records.iter().all(|r| r.samples == Some(3)));
}

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

#[test]
fn the_precision_policy_stops_at_once_on_steady_times_and_records_the_slowest_ranks_median() {
    // every operation takes 10 us on rank 0 and 30 us on rank 1 (virtual
    // clock): each batch's median is exact, the interval has width 0; the
    // row's time is the ranks' average (-a avg), its max the slowest's
    let p = plan(2, vec![case(Collective::AllReduce, 1024, 2)]);
    let t = Timing {
        iterations: Iterations::Precision(super::precision::PrecisionGoal::default()),
        ..timing()
    };
    let ran = sweep(2, &t, &p, per_rank_delay(&[10, 30]));
    for r in &ran[0].records {
        assert!(close(r.time_us, 20.0) && close(r.time_max_us, 30.0), "{r:?}");
        assert_eq!(r.iter_policy, Some(IterPolicy::Precision));
        assert_eq!(r.precision_pct, Some(0.0), "{r:?}");
        // a point stops far before the 0.1 s cap: 30 us x iters < 0.1 s
        assert!((r.iters as f64) * 30e-6 < 0.1, "{r:?}");
    }
}

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

// ---------------------------------------------------------------------------
// --split: parallel groups

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
