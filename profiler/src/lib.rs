//! collbench's NCCL profiler plugin (docs/algorithms.md, "The profiler
//! plugin"): NCCL opens this library by the path in NCCL_PROFILER_PLUGIN
//! and looks up, newest first, the interface versions its release knows
//! (`ncclProfiler_v6` .. `ncclProfiler_v1`, NCCL 2.23 to 2.30; `abi`). It
//! calls `init` when it makes a communicator, `startEvent` for every
//! collective it schedules (the plugin asks for collective events only),
//! `finalize` when it destroys the communicator.
//!
//! Each communicator's context keeps its collectives in a ring allocated
//! at `init`: the hot path (`startEvent`) reads the descriptor, turns
//! NCCL's names into codes and appends one record with a few relaxed
//! atomic stores and one release store; no lock, no allocation. collbench
//! loads the same library (one path, one handle) and reads the records
//! back through `collbench_profiler_*` (`query`), which do take the
//! registry's lock: never on NCCL's hot path.
//!
//! Nothing here panics across the boundary: every entry point runs inside
//! `catch_unwind` and answers success with nothing recorded where anything
//! went wrong (NCCL then goes on without this plugin's records).

mod abi;
mod codes;
mod context;
mod query;

use std::ffi::{c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use abi::{
    DescrV1, DescrV2, DescrV3, DescrV4, DescrV5, InitV1, InitV4, InitV5, Logger, NcclResult, PROFILE_COLL, Profiler,
    SUCCESS,
};
use context::{Context, Record};

pub use query::{
    CollbenchRecord, collbench_profiler_abi, collbench_profiler_find, collbench_profiler_generation,
    collbench_profiler_read,
};

/// The plugin's name, as NCCL prints it on its INIT line (2.26 on).
const NAME: &std::ffi::CStr = c"collbench";

/// Runs `f`, answering success where it panicked (nothing recorded).
fn guarded(f: impl FnOnce() -> NcclResult) -> NcclResult {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(SUCCESS)
}

/// A context for a communicator; `comm_hash` where `init` gives it (v4
/// on), `rank` where it does (v4 on), else from the first event.
///
/// # Safety
/// `context` and `mask` are NCCL's out-pointers (null is refused).
unsafe fn init(context: *mut *mut c_void, mask: *mut c_int, comm_hash: u64, rank: c_int) -> NcclResult {
    guarded(|| {
        if context.is_null() || mask.is_null() {
            return SUCCESS;
        }
        let made = Context::register(comm_hash, rank);
        // SAFETY: both out-pointers were checked non-null; NCCL owns them
        // for the call.
        unsafe {
            *context = made.map_or(std::ptr::null_mut(), |c| c.cast());
            *mask = if made.is_some() { PROFILE_COLL as c_int } else { 0 };
        }
        SUCCESS
    })
}

unsafe extern "C" fn init_v1(context: *mut *mut c_void, mask: *mut c_int) -> NcclResult {
    // SAFETY: NCCL's pointers, passed on.
    unsafe { init(context, mask, 0, -1) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    _name: *const c_char,
    comm_hash: u64,
    _nnodes: c_int,
    _nranks: c_int,
    rank: c_int,
    _log: Logger,
) -> NcclResult {
    // SAFETY: NCCL's pointers, passed on.
    unsafe { init(context, mask, comm_hash, rank) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_v5(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    _name: *const c_char,
    _nnodes: c_int,
    _nranks: c_int,
    rank: c_int,
    _log: Logger,
) -> NcclResult {
    // SAFETY: NCCL's pointers, passed on.
    unsafe { init(context, mask, comm_id, rank) }
}

/// A collective event's record, read by `read` from the descriptor, into
/// `context`'s ring. The handle is null: nothing to do at the stop.
///
/// # Safety
/// `context` is null or one `init` made and `finalize` has not freed;
/// `descr` is null or NCCL's descriptor of the version `read` reads.
unsafe fn start<D>(
    context: *mut c_void,
    handle: *mut *mut c_void,
    descr: *mut D,
    read: impl FnOnce(&D) -> Option<Record>,
) -> NcclResult {
    guarded(|| {
        if !handle.is_null() {
            // SAFETY: NCCL's out-pointer, checked non-null.
            unsafe { *handle = std::ptr::null_mut() };
        }
        // SAFETY: the function's contract: NCCL's descriptor for the call,
        // and a live context of this plugin's (or null, refused).
        let (Some(ctx), Some(d)) = (unsafe { context.cast::<Context>().as_ref() }, unsafe { descr.as_ref() }) else {
            return SUCCESS;
        };
        if let Some(rec) = read(d) {
            ctx.push(&rec);
        }
        SUCCESS
    })
}

fn is_coll(kind: u64) -> bool {
    kind == PROFILE_COLL
}

unsafe extern "C" fn start_v1(context: *mut c_void, handle: *mut *mut c_void, descr: *mut DescrV1) -> NcclResult {
    // SAFETY: NCCL's arguments for a v1 plugin.
    unsafe {
        start(context, handle, descr, |d| {
            let c = &d.coll;
            is_coll(u64::from(d.head.kind)).then(|| Record {
                comm_hash: c.comm_hash,
                seq: c.seq_number,
                count: c.count as u64,
                rank: d.head.rank,
                func: codes::checked(c.func, codes::NFUNCS),
                datatype: codes::checked(c.datatype, codes::NTYPES),
                algo: codes::checked(c.algo, codes::NALGOS),
                proto: codes::checked(c.proto, codes::NPROTOS),
                nchannels: c.n_max_channels,
                nwarps: c.n_warps,
            })
        })
    }
}

/// The record of a collective descriptor of v2 on: names as codes.
#[allow(clippy::too_many_arguments)]
fn named(
    comm_hash: u64,
    seq: u64,
    count: usize,
    rank: c_int,
    names: [*const c_char; 4],
    nchannels: u8,
    nwarps: u8,
) -> Record {
    let [func, datatype, algo, proto] = names;
    Record {
        comm_hash,
        seq,
        count: count as u64,
        rank,
        func: codes::func(func),
        datatype: codes::datatype(datatype),
        algo: codes::algo(algo),
        proto: codes::proto(proto),
        nchannels,
        nwarps,
    }
}

unsafe extern "C" fn start_v2(context: *mut c_void, handle: *mut *mut c_void, descr: *mut DescrV2) -> NcclResult {
    // SAFETY: NCCL's arguments for a v2 plugin.
    unsafe {
        start(context, handle, descr, |d| {
            let c = &d.coll;
            let names = [c.func, c.datatype, c.algo, c.proto];
            is_coll(u64::from(d.head.kind)).then(|| {
                named(
                    c.comm_hash,
                    c.seq_number,
                    c.count,
                    d.head.rank,
                    names,
                    c.n_max_channels,
                    c.n_warps,
                )
            })
        })
    }
}

unsafe extern "C" fn start_v3(context: *mut c_void, handle: *mut *mut c_void, descr: *mut DescrV3) -> NcclResult {
    // SAFETY: NCCL's arguments for a v3 plugin.
    unsafe {
        start(context, handle, descr, |d| {
            let c = &d.coll;
            let names = [c.func, c.datatype, c.algo, c.proto];
            is_coll(u64::from(d.head.kind)).then(|| {
                named(
                    c.comm_hash,
                    c.seq_number,
                    c.count,
                    d.head.rank,
                    names,
                    c.n_max_channels,
                    c.n_warps,
                )
            })
        })
    }
}

unsafe extern "C" fn start_v4(context: *mut c_void, handle: *mut *mut c_void, descr: *mut DescrV4) -> NcclResult {
    // SAFETY: NCCL's arguments for a v4 plugin.
    unsafe {
        start(context, handle, descr, |d| {
            let c = &d.coll;
            let names = [c.func, c.datatype, c.algo, c.proto];
            is_coll(u64::from(d.head.kind))
                .then(|| named(0, c.seq_number, c.count, d.head.rank, names, c.n_channels, c.n_warps))
        })
    }
}

unsafe extern "C" fn start_v5(context: *mut c_void, handle: *mut *mut c_void, descr: *mut DescrV5) -> NcclResult {
    // SAFETY: NCCL's arguments for a v5 or v6 plugin (one layout).
    unsafe {
        start(context, handle, descr, |d| {
            let c = &d.coll;
            let names = [c.func, c.datatype, c.algo, c.proto];
            is_coll(d.head.kind).then(|| named(0, c.seq_number, c.count, d.head.rank, names, c.n_channels, c.n_warps))
        })
    }
}

unsafe extern "C" fn stop(_handle: *mut c_void) -> NcclResult {
    SUCCESS
}

unsafe extern "C" fn record_state(_handle: *mut c_void, _state: c_int, _args: *mut c_void) -> NcclResult {
    SUCCESS
}

unsafe extern "C" fn finalize(context: *mut c_void) -> NcclResult {
    guarded(|| {
        Context::unregister(context.cast());
        SUCCESS
    })
}

/// The table of version `vN`.
macro_rules! table {
    ($init:expr, $start:expr) => {
        Profiler {
            name: NAME.as_ptr(),
            init: $init,
            start_event: $start,
            stop_event: stop,
            record_event_state: record_state,
            finalize,
        }
    };
}

/// NCCL 2.23 and later (2.23 reads only this one).
#[unsafe(no_mangle)]
pub static ncclProfiler_v1: Profiler<InitV1, DescrV1> = table!(init_v1, start_v1);
/// NCCL 2.24 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v2: Profiler<InitV1, DescrV2> = table!(init_v1, start_v2);
/// NCCL 2.26 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v3: Profiler<InitV1, DescrV3> = table!(init_v1, start_v3);
/// NCCL 2.27 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v4: Profiler<InitV4, DescrV4> = table!(init_v4, start_v4);
/// NCCL 2.28 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v5: Profiler<InitV5, DescrV5> = table!(init_v5, start_v5);
/// NCCL 2.29 and later: v5's collective descriptor and init.
#[unsafe(no_mangle)]
pub static ncclProfiler_v6: Profiler<InitV5, DescrV5> = table!(init_v5, start_v5);
