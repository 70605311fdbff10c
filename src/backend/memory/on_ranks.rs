//! Tests' rank threads (this backend's and the engine's): one
//! `ThreadWorld` and one `MemoryBackend` of a single communicator per rank,
//! each rank on its own `VirtualClock`.

use super::MemoryBackend;
use crate::clock::VirtualClock;
use crate::world::threads::ThreadWorld;

/// Runs `rank(r, world, backend, clock)` on `n` rank threads, the backend
/// already on the rank's clock, and returns what each gave, in rank order.
pub fn on_ranks<R: Send>(
    n: usize,
    rank: impl Fn(usize, &ThreadWorld, MemoryBackend, VirtualClock) -> R + Sync,
) -> Vec<R> {
    let worlds = ThreadWorld::create(n);
    let backends = MemoryBackend::create(n).unwrap();
    std::thread::scope(|s| {
        let handles: Vec<_> = worlds
            .iter()
            .zip(backends)
            .enumerate()
            .map(|(r, (world, backend))| {
                let rank = &rank;
                s.spawn(move || {
                    let clock = VirtualClock::new();
                    rank(r, world, backend.with_clock(clock.clone()), clock)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}
