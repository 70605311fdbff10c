//! Stopping on SIGINT, SIGTERM and SIGHUP: the first signal asks the sweep
//! to stop at the next point boundary, where the ranks agree to stop
//! together, the reports are completed and the process exits with 128 + the
//! signal. A second signal ends the process at once (for a run stuck where
//! it cannot reach a boundary).
//!
//! SIGHUP is there because Open MPI gives each rank a pseudo-terminal as
//! standard output: when mpirun is interrupted it sends SIGTERM, then closes
//! that terminal, which hangs the rank up before it could finish its files.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::error::Error;

#[derive(Clone)]
pub struct StopRequest {
    signal: Arc<AtomicUsize>,
}

impl StopRequest {
    /// Installs the handlers.
    pub fn install() -> Result<StopRequest, Error> {
        let signal = Arc::new(AtomicUsize::new(0));
        let armed = Arc::new(AtomicBool::new(false));
        for sig in [SIGINT, SIGTERM, SIGHUP] {
            let installed = signal_hook::flag::register_conditional_shutdown(sig, 128 + sig, Arc::clone(&armed))
                .and_then(|_| signal_hook::flag::register(sig, Arc::clone(&armed)))
                .and_then(|_| signal_hook::flag::register_usize(sig, Arc::clone(&signal), sig as usize));
            installed.map_err(|e| Error::runtime(format!("cannot install the signal handlers: {e}")))?;
        }
        Ok(StopRequest { signal })
    }

    /// A request that never fires (tests, embedding).
    pub fn never() -> StopRequest {
        StopRequest {
            signal: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Asks for a stop as `signal` would (tests; a program embedding the
    /// engine).
    pub fn raise(&self, signal: u64) {
        self.signal.store(signal as usize, Ordering::SeqCst);
    }

    /// The signal received on this rank, 0 if none.
    pub fn signal(&self) -> u64 {
        self.signal.load(Ordering::SeqCst) as u64
    }
}

/// `SIGINT`, `SIGTERM`, or the number.
pub fn signal_name(signal: u64) -> String {
    match signal as i32 {
        SIGINT => "SIGINT".into(),
        SIGTERM => "SIGTERM".into(),
        SIGHUP => "SIGHUP".into(),
        other => format!("signal {other}"),
    }
}
