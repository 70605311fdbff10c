//! NCCL's variables set in this process's environment while a
//! communicator is made (`--algo`, `--proto`: NCCL reads NCCL_ALGO and
//! NCCL_PROTO when a communicator is made, src/graph/tuning.cc): the only
//! place collbench changes its own environment once running, and why it
//! is `unsafe` (Rust 2024 marks `set_var`/`remove_var` so: a C `getenv` on
//! another thread at the same time may read freed memory).
#![allow(unsafe_code)]

/// Runs `make` (every rank's part of a collective communicator creation)
/// with `vars` set in this process's environment, removed after: the
/// first rank of each process (`set_here`) changes them while `barrier`
/// holds every rank, so no rank thread of this process reads the
/// environment meanwhile; `make` runs on every rank between the change
/// and its undoing.
pub fn with_nccl_variables<T>(
    vars: &[(&'static str, String)],
    set_here: bool,
    barrier: &dyn Fn(),
    make: impl FnOnce() -> T,
) -> T {
    barrier();
    if set_here {
        for (name, value) in vars {
            // SAFETY: every rank thread of this process waits at `barrier`
            // (the caller's contract: all of them call this together), and
            // NCCL's own threads of the communicators made so far read no
            // variable between two calls of the program (they read theirs
            // when a communicator is made, which no rank is doing now).
            unsafe { std::env::set_var(name, value) };
        }
    }
    barrier();
    let made = make();
    barrier();
    if set_here {
        for (name, _) in vars {
            // SAFETY: as above: every rank has made its communicator and
            // waits at the next barrier.
            unsafe { std::env::remove_var(name) };
        }
    }
    barrier();
    made
}
