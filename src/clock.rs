//! Where the engine reads time: the host's monotonic clock, or a virtual
//! clock that the in-memory test backend (`backend::memory`) advances by the
//! time it is told each operation takes, so that timing arithmetic,
//! iteration policies and statistics are tested on exact synthetic times.
//!
//! A leaf of the crate (it knows nothing of it); it must not sleep or
//! measure anything itself.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// One reading of a clock, for the timed loops (`engine::context`): they
/// read the clock at both ends of what they time and compute the seconds
/// between afterwards, so that no arithmetic falls inside the timed
/// region (on the host, a reading is one `Instant::now`).
#[derive(Clone, Copy, Debug)]
pub enum Stamp {
    Host(Instant),
    Virtual(Duration),
}

impl Stamp {
    /// Seconds from `earlier` to this reading (0 when `earlier` is later,
    /// or of another clock, which one context never mixes).
    pub fn seconds_since(self, earlier: Stamp) -> f64 {
        match (self, earlier) {
            (Stamp::Host(now), Stamp::Host(then)) => now.saturating_duration_since(then).as_secs_f64(),
            (Stamp::Virtual(now), Stamp::Virtual(then)) => now.saturating_sub(then).as_secs_f64(),
            _ => 0.0,
        }
    }
}

/// A monotonic clock: time since an origin of its own.
#[derive(Clone, Debug, Default)]
pub enum Clock {
    /// The host's monotonic clock (`Instant`).
    #[default]
    Host,
    /// Time that only moves when something advances it.
    Virtual(VirtualClock),
}

impl Clock {
    /// Time since this clock's origin.
    pub fn now(&self) -> Duration {
        match self {
            Clock::Host => host_origin().elapsed(),
            Clock::Virtual(v) => v.now(),
        }
    }

    /// Seconds from `since` (a `now()` of this clock) to now.
    pub fn seconds_since(&self, since: Duration) -> f64 {
        self.now().saturating_sub(since).as_secs_f64()
    }

    /// One reading, and nothing computed after it (`Stamp`).
    #[inline]
    pub fn stamp(&self) -> Stamp {
        match self {
            Clock::Host => Stamp::Host(Instant::now()),
            Clock::Virtual(v) => Stamp::Virtual(v.now()),
        }
    }
}

fn host_origin() -> Instant {
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    *ORIGIN.get_or_init(Instant::now)
}

/// A clock that stands still until `advance`d; clones share one time.
/// Nanoseconds in a u64 last 584 years.
#[derive(Clone, Debug, Default)]
pub struct VirtualClock(Arc<AtomicU64>);

impl VirtualClock {
    pub fn new() -> VirtualClock {
        VirtualClock::default()
    }

    pub fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::SeqCst))
    }

    /// Moves time forward by `by` (rounded down to whole nanoseconds).
    pub fn advance(&self, by: Duration) {
        let ns = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(ns, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_virtual_clock_moves_only_when_advanced_and_clones_share_it() {
        let v = VirtualClock::new();
        let clock = Clock::Virtual(v.clone());
        let start = clock.now();
        assert_eq!(clock.seconds_since(start), 0.0);
        v.advance(Duration::from_micros(1500));
        assert_eq!(clock.seconds_since(start), 0.0015);
        assert_eq!(clock.now(), Duration::from_micros(1500));
    }

    #[test]
    fn stamps_give_the_seconds_between_two_readings() {
        let v = VirtualClock::new();
        let clock = Clock::Virtual(v.clone());
        let start = clock.stamp();
        v.advance(Duration::from_micros(250));
        let end = clock.stamp();
        assert_eq!(end.seconds_since(start), 0.00025);
        assert_eq!(start.seconds_since(end), 0.0);
        let host = Clock::Host.stamp();
        assert!(Clock::Host.stamp().seconds_since(host) >= 0.0);
        assert_eq!(host.seconds_since(start), 0.0);
    }

    #[test]
    fn the_host_clock_never_goes_back() {
        let clock = Clock::Host;
        let a = clock.now();
        let b = clock.now();
        assert!(b >= a);
        assert!(clock.seconds_since(b + Duration::from_secs(1)) == 0.0);
    }
}
