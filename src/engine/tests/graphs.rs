//! `-G`: timed iterations captured once and replayed, checks through a
//! graph of their own, and a backend without graphs refused.

use super::*;

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
