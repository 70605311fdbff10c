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
    CollV1, CollV2, CollV3, CollV4, CollV5, Descr, DescrV1, DescrV2, DescrV3, DescrV4, DescrV5, Head8, Head64, InitV1,
    InitV4, InitV5, Logger, NcclResult, PROFILE_COLL, Profiler, SUCCESS,
};
use context::{Context, Record};

pub use query::{
    collbench_profiler_abi, collbench_profiler_find, collbench_profiler_generation, collbench_profiler_read,
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

/// A descriptor's head: the event type and the originating rank.
trait Head {
    fn kind(&self) -> u64;
    fn rank(&self) -> c_int;
}

impl Head for Head8 {
    fn kind(&self) -> u64 {
        u64::from(self.kind)
    }
    fn rank(&self) -> c_int {
        self.rank
    }
}

impl Head for Head64 {
    fn kind(&self) -> u64 {
        self.kind
    }
    fn rank(&self) -> c_int {
        self.rank
    }
}

/// A version's collective member, as one record.
trait Coll {
    fn record(&self, rank: c_int) -> Record;
}

/// v1: NCCL's codes already, kept where they are NCCL's.
impl Coll for CollV1 {
    fn record(&self, rank: c_int) -> Record {
        Record {
            comm_hash: self.comm_hash,
            seq: self.seq_number,
            count: self.count as u64,
            rank,
            func: codes::checked(self.func, codes::NFUNCS),
            datatype: codes::checked(self.datatype, codes::NTYPES),
            algo: codes::checked(self.algo, codes::NALGOS),
            proto: codes::checked(self.proto, codes::NPROTOS),
            nchannels: self.n_max_channels,
            nwarps: self.n_warps,
            pad: [0; 2],
        }
    }
}

/// v2 on: names as codes; the communicator's hash where the member has
/// it (v2, v3; from v4 the context holds it), its channel count field.
macro_rules! named_coll {
    ($t:ty, $hash:expr, $channels:ident) => {
        impl Coll for $t {
            fn record(&self, rank: c_int) -> Record {
                let hash: fn(&$t) -> u64 = $hash;
                Record {
                    comm_hash: hash(self),
                    seq: self.seq_number,
                    count: self.count as u64,
                    rank,
                    func: codes::func(self.func),
                    datatype: codes::datatype(self.datatype),
                    algo: codes::algo(self.algo),
                    proto: codes::proto(self.proto),
                    nchannels: self.$channels,
                    nwarps: self.n_warps,
                    pad: [0; 2],
                }
            }
        }
    };
}

named_coll!(CollV2, |c| c.comm_hash, n_max_channels);
named_coll!(CollV3, |c| c.comm_hash, n_max_channels);
named_coll!(CollV4, |_| 0, n_channels);
named_coll!(CollV5, |_| 0, n_channels);

/// `startEvent` of every version: a collective event's record into the
/// context's ring; other events (none is asked for) are left alone. The
/// handle is null: nothing to do at the stop.
///
/// # Safety
/// NCCL's arguments: `context` null or one `init` made and `finalize` has
/// not freed, `descr` null or a descriptor of this version's layout.
unsafe extern "C" fn start_event<H: Head, C: Coll>(
    context: *mut c_void,
    handle: *mut *mut c_void,
    descr: *mut Descr<H, C>,
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
        if d.head.kind() == PROFILE_COLL {
            ctx.push(&d.coll.record(d.head.rank()));
        }
        SUCCESS
    })
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
pub static ncclProfiler_v1: Profiler<InitV1, DescrV1> = table!(init_v1, start_event);
/// NCCL 2.24 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v2: Profiler<InitV1, DescrV2> = table!(init_v1, start_event);
/// NCCL 2.26 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v3: Profiler<InitV1, DescrV3> = table!(init_v1, start_event);
/// NCCL 2.27 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v4: Profiler<InitV4, DescrV4> = table!(init_v4, start_event);
/// NCCL 2.28 and later.
#[unsafe(no_mangle)]
pub static ncclProfiler_v5: Profiler<InitV5, DescrV5> = table!(init_v5, start_event);
/// NCCL 2.29 and later: v5's collective descriptor and init.
#[unsafe(no_mangle)]
pub static ncclProfiler_v6: Profiler<InitV5, DescrV5> = table!(init_v5, start_event);
