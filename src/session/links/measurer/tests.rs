use std::time::Duration;

use super::*;
use crate::backend::memory::{Fault, MemoryBackend};
use crate::links::finder::{FinderConfig, FindingKind};
use crate::links::schedule::{self, Level};
use crate::links::{Layout, Matrix};
use crate::world::threads::ThreadWorld;

const N: usize = 4;

fn probe() -> Probe {
    Probe {
        size_bytes: 4096,
        latency_bytes: 8,
        samples: 6,
        iters: 2,
        warmup: 1,
    }
}

fn endpoints() -> Vec<Endpoint> {
    (0..N)
        .map(|rank| Endpoint {
            rank,
            host: format!("h{rank}"),
            local: 0,
            gpu: None,
            nic: None,
        })
        .collect()
}

/// Every rank of a thread world on the memory backend runs `body` with
/// its measurer; rank 0's answer and every rank's (wrong, checked).
fn on_ranks<T: Send>(
    mut backends: Vec<MemoryBackend>,
    check: u32,
    body: impl Fn(&mut BackendMeasurer<'_>) -> T + Sync,
) -> Vec<(T, u64, u64)> {
    let worlds = ThreadWorld::create(N);
    std::thread::scope(|s| {
        let handles: Vec<_> = worlds
            .iter()
            .zip(backends.iter_mut())
            .map(|(world, backend)| {
                let body = &body;
                s.spawn(move || {
                    let cx = Context::new(world, backend);
                    let mut m = BackendMeasurer::new(cx, endpoints(), check).unwrap();
                    let out = body(&mut m);
                    (out, m.wrong(), m.checked())
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn every_rank_holds_the_same_matrix_and_a_delayed_pair_is_named_as_a_link() {
    // every group takes 2 ms (so that the host's scheduling noise is
    // small beside it), those between ranks 1 and 2 20 ms
    let backends: Vec<MemoryBackend> = MemoryBackend::create(N)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(r, b)| {
            b.with_delay(move |op| {
                let slow = matches!((r, op.peer), (1, Some(2)) | (2, Some(1)));
                Duration::from_millis(if slow { 20 } else { 2 })
            })
        })
        .collect();
    let found = on_ranks(backends, 1, |m| {
        let s = schedule::build(&endpoints(), Level::Node, false).unwrap();
        let layout = Layout::new(&endpoints(), &s.units(), None);
        let cfg = FinderConfig {
            probe: probe(),
            collectives: true,
            ..FinderConfig::DEFAULT
        };
        let o = crate::links::find(m, &s, &layout, &cfg, &mut |_| {}).unwrap();
        let f: Vec<(FindingKind, Vec<usize>)> = o
            .report
            .findings
            .iter()
            .map(|f| (f.kind, f.endpoints.iter().map(|e| e.rank).collect()))
            .collect();
        (f, o.matrix)
    });
    let first: &Matrix = &found[0].0.1;
    assert_eq!(first.pairs.iter().filter(|p| p.round <= 3).count(), 6);
    for (rank, ((f, matrix), wrong, checked)) in found.iter().enumerate() {
        assert_eq!(f, &[(FindingKind::Link, vec![1, 2])], "rank {rank}");
        assert_eq!(matrix.pairs.len(), first.pairs.len(), "rank {rank}");
        for (a, b) in matrix.pairs.iter().zip(&first.pairs) {
            assert_eq!((a.pair, a.round), (b.pair, b.round));
            assert_eq!(
                a.estimate(Metric::Uni).map(|e| e.median),
                b.estimate(Metric::Uni).map(|e| e.median)
            );
        }
        assert_eq!(*wrong, 0);
        assert!(*checked >= 6, "rank {rank}: {checked}");
    }
    // the slow pair: operations of 20 ms, at most 4096 B / 20 ms
    let slow = first.pairs.iter().find(|p| p.pair == Pair::new(1, 2)).unwrap();
    let uni = slow.estimate(Metric::Uni).unwrap().median;
    assert!(uni <= 4096.0 / 0.020 / 1e9, "{uni}");
    let lat = slow.estimate(Metric::Latency).unwrap().median;
    assert!(lat >= 15_000.0, "half a round trip of 20 ms groups: {lat} us");
}

#[test]
fn a_corrupted_receive_is_counted_on_every_rank() {
    let backends: Vec<MemoryBackend> = MemoryBackend::create(N)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(r, b)| b.with_fault(move |op| (r == 3 && op.peer.is_some()).then_some(Fault::Corrupt(2))))
        .collect();
    let got = on_ranks(backends, 1, |m| {
        let s = schedule::build(&endpoints(), Level::Node, false).unwrap();
        crate::links::measure_matrix(m, &s, &probe(), &mut |_| {}).unwrap()
    });
    for (matrix, wrong, checked) in &got {
        // rank 3's check of each of its 3 pairs: 2 wrong elements each
        assert_eq!(*wrong, 6);
        assert_eq!(*checked, 6);
        let bad: Vec<Pair> = matrix
            .pairs
            .iter()
            .filter(|p| p.wrong.is_some_and(|w| w > 0))
            .map(|p| p.pair)
            .collect();
        let mut bad = bad;
        bad.sort();
        assert_eq!(bad, [Pair::new(0, 3), Pair::new(1, 3), Pair::new(2, 3)]);
    }
}
