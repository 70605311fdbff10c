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
use crate::backend::Backend;
use crate::backend::memory::on_ranks::on_ranks;
use crate::backend::memory::{Event, Fault, Journal, Launched, MemoryBackend};
use crate::clock::Clock;
use crate::collective::Collective;
use crate::engine::stop::StopRequest;
use crate::topology::Hierarchy;
use crate::types::{DType, IterPolicy, ReduceOp, TimingMethod};

mod control;
mod graphs;
mod split;
mod stragglers;

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
        algo_record: Default::default(),
        algo_pins: Vec::new(),
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
    let ctx = context();
    on_ranks(n, |rank, world, backend, clock| {
        let mut backend = setup(rank, backend);
        let journal = backend.journal();
        let mut records = Vec::new();
        let groups = hooks.split.map(|(rule, _)| {
            Groups::of(rule, &(0..n).collect::<Vec<_>>(), rank)
                .split(&mut backend, rank)
                .unwrap()
        });
        let group_plan = hooks.split.zip(groups.as_ref()).map(|((_, f), g)| f(g.size()));
        let plan = group_plan.as_ref().unwrap_or(plan);
        let mut cx = Context::new(world, &mut backend)
            .with_clock(Clock::Virtual(clock))
            .with_injected_errors(hooks.inject_errors);
        if rank == 0 {
            cx = cx.with_watchdog(hooks.watchdog);
        }
        if let Some((_, stop)) = hooks.stop.as_ref().filter(|(r, _)| *r == rank) {
            cx = cx.with_stop(stop.clone());
        }
        let summary = Engine::new(cx, timing, &ctx)
            .with_groups(groups.as_ref())
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
