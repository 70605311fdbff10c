//! Unit tests of `memory`.

use super::*;
use crate::collective::{Layout, Pattern};
use crate::types::ReduceOp;
use crate::world::World;
use crate::world::threads::ThreadWorld;

use super::on_ranks::on_ranks;

fn call(collective: Collective, dtype: DType, op: Option<ReduceOp>, n: usize, rank: usize) -> Call {
    Call {
        collective,
        hierarchy: Hierarchy::Flat,
        dtype,
        op,
        shape: collective.spec().shape(48, n),
        at: Layout::new(n, rank, n - 1),
        group: None,
    }
}

/// Wrong elements of one check of `call` on every rank, summed.
fn wrong_elements(w: &ThreadWorld, mut b: MemoryBackend, c: Call, placement: Placement) -> u64 {
    let pattern = Pattern::new(c.dtype, c.op, c.at.nranks, 7);
    b.prepare(&c).unwrap();
    b.load_input(&c, placement, &|i| pattern.input(c.at.rank, i)).unwrap();
    b.launch(&c, placement, 0, 1).unwrap();
    b.wait().unwrap();
    let (out, range) = b.output(&c, placement).unwrap();
    let spec = c.collective.spec();
    let want = |i| spec.expected(&pattern, &c.shape, &c.at, i);
    let local = match pattern.relative_bound() {
        Some(bound) => out.count_outside(range, want, bound),
        None => out.count_mismatches(range, want),
    };
    w.sum_u64(local)
}

#[test]
fn every_collective_type_and_op_is_exact_in_both_placements_at_1_to_4_ranks() {
    for n in 1..=4 {
        for collective in Collective::ALL {
            let ops: Vec<Option<ReduceOp>> = if collective.spec().is_reduction() {
                ReduceOp::ALL.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            for dtype in DType::ALL {
                for &op in &ops {
                    for placement in Placement::BOTH {
                        let wrong = on_ranks(n, |_, w, b, _| {
                            wrong_elements(w, b, call(collective, dtype, op, n, w.rank()), placement)
                        });
                        assert_eq!(wrong[0], 0, "{collective} {dtype} {op:?} {placement} at {n} ranks");
                    }
                }
            }
        }
    }
}

#[test]
fn a_corrupted_operation_is_wrong_exactly_where_it_was_corrupted() {
    let wrong = on_ranks(3, |_, w, b, _| {
        let b = b.with_fault(move |op| (op.call.at.rank == 1).then_some(Fault::Corrupt(5)));
        let c = call(Collective::AllGather, DType::Int32, None, 3, w.rank());
        wrong_elements(w, b, c, Placement::OutOfPlace)
    });
    assert_eq!(wrong, vec![5, 5, 5]);
}

#[test]
fn a_failed_rank_ends_its_peers_exchange_with_an_error_instead_of_a_hang() {
    let results = on_ranks(3, |_, w, b, _| {
        let mut b = b.with_fault(|op| (op.call.at.rank == 2).then(|| Fault::Fail("injected".into())));
        let c = call(Collective::AllReduce, DType::Float, Some(ReduceOp::Sum), 3, w.rank());
        b.prepare(&c).unwrap();
        b.launch(&c, Placement::OutOfPlace, 0, 1).map_err(|e| e.to_string())
    });
    assert_eq!(results[2], Err("injected".to_string()));
    for r in &results[..2] {
        assert_eq!(r, &Err("rank 2 of the memory backend failed".to_string()));
    }
}

#[test]
fn delays_advance_the_virtual_clock_one_scripted_duration_per_operation() {
    let clock = VirtualClock::new();
    let mut b = MemoryBackend::create(1)
        .unwrap()
        .remove(0)
        .with_clock(clock.clone())
        .with_delay(script(vec![Duration::from_micros(3), Duration::from_micros(5)]));
    let c = call(Collective::Broadcast, DType::Uint8, None, 1, 0);
    b.prepare(&c).unwrap();
    b.launch(&c, Placement::OutOfPlace, 0, 3).unwrap();
    assert_eq!(clock.now(), Duration::from_micros(3 + 5 + 3));
    assert_eq!(
        b.journal().events().last(),
        Some(&Event::Launch {
            first_iter: 0,
            ops: 3,
            captured: false
        })
    );
}

#[test]
fn a_call_for_another_layout_is_refused() {
    let mut b = MemoryBackend::create(2).unwrap().remove(0);
    let e = b
        .prepare(&call(Collective::AllReduce, DType::Float, None, 3, 0))
        .unwrap_err();
    assert!(e.to_string().contains("rank 0 of 3"), "{e}");
}
