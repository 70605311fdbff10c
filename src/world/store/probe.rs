//! The benchmark's probe (`bench`): when the frame of each rank's answer
//! was written, by rank 0 or by the rank's parent in the release tree, so
//! that the benchmark tells the release's own spread from the wait of
//! 1,024 threads for two cores. Recorded in tests only: in a build the
//! calls are empty and compile to nothing.

#[cfg(test)]
pub use recorder::{sent, start, stop};

/// Nothing outside tests.
#[cfg(not(test))]
#[inline(always)]
pub fn sent(_rank: usize, _seq: u64) {}

#[cfg(test)]
mod recorder {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Instant;

    static ON: AtomicBool = AtomicBool::new(false);
    static SENT: Mutex<Vec<(usize, u64, Instant)>> = Mutex::new(Vec::new());

    /// Starts recording (and forgets what was recorded).
    pub fn start() {
        SENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clear();
        ON.store(true, Ordering::SeqCst);
    }

    /// Stops recording: every (rank, exchange, when its frame was written).
    pub fn stop() -> Vec<(usize, u64, Instant)> {
        ON.store(false, Ordering::SeqCst);
        std::mem::take(&mut *SENT.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
    }

    pub fn sent(rank: usize, seq: u64) {
        if ON.load(Ordering::Relaxed) {
            let now = Instant::now();
            SENT.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((rank, seq, now));
        }
    }
}
