//! What collbench calls (src/backend/nccl/profiler.rs declares the same):
//! the interface's version, how many communicators were made so far, the
//! context of the communicator this thread made after a mark, and its
//! records since the last read. C calls, so that nothing depends on two
//! builds agreeing on Rust's layouts; never called by NCCL.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::context::{self, Record};

/// The version of this query interface (of `Record` and the
/// calls); collbench refuses another.
#[unsafe(no_mangle)]
pub extern "C" fn collbench_profiler_abi() -> u32 {
    1
}

/// How many communicators NCCL made with this plugin so far: a mark to
/// take before making one.
#[unsafe(no_mangle)]
pub extern "C" fn collbench_profiler_generation() -> u64 {
    catch_unwind(context::registry_len).unwrap_or(0)
}

/// The first live communicator's context made by the calling thread after
/// the `since`th: its id, 0 where none.
#[unsafe(no_mangle)]
pub extern "C" fn collbench_profiler_find(since: u64) -> u64 {
    catch_unwind(|| context::find(since)).unwrap_or(0)
}

/// Takes up to `cap` records of context `id` into `out`, the oldest
/// first; writes how many were dropped (a full ring) to `dropped`.
/// Returns the records written, or -1 where `id` is no live context (or
/// an argument is null).
///
/// # Safety
/// `out` points at `cap` writable records and `dropped` at one u64.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn collbench_profiler_read(id: u64, out: *mut Record, cap: usize, dropped: *mut u64) -> i64 {
    if out.is_null() || dropped.is_null() {
        return -1;
    }
    // SAFETY: the caller's contract: `cap` records at `out`.
    let out = unsafe { std::slice::from_raw_parts_mut(out, cap) };
    let taken = catch_unwind(AssertUnwindSafe(|| context::take(id, out)));
    let (n, lost) = match taken {
        Ok(Some((n, lost))) => (n as i64, lost),
        _ => (-1, 0),
    };
    // SAFETY: the caller's contract: one writable u64.
    unsafe { *dropped = lost };
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `Record`'s layout, as collbench's side declares it.
    #[test]
    fn the_record_is_forty_bytes() {
        assert_eq!(std::mem::size_of::<Record>(), 40);
        assert_eq!(std::mem::offset_of!(Record, rank), 24);
        assert_eq!(std::mem::offset_of!(Record, nwarps), 33);
    }
}
