//! NCCL's profiler plugin interface, as each version's header lays it out
//! (src/include/plugin/profiler/profiler_vN.h from NCCL 2.26;
//! src/include/nccl_profiler.h in 2.23 to 2.25): the event descriptor's
//! head and its `coll` member (the only event this plugin asks for), and
//! the table of entry points a plugin exports as `ncclProfiler_vN`.
//!
//! The union of event members starts after `type`, `parentObj` and `rank`;
//! every member of it holds a pointer or a 64-bit field, so it starts at
//! byte 24 in every version, and the `coll` structures below are laid at
//! the same place. Only what a collective event carries is declared: NCCL
//! allocates the whole descriptor, the plugin reads the `coll` member. The
//! offsets are checked in the tests below against the figures of the
//! headers (x86_64 and aarch64 Linux, LP64).

use std::ffi::{c_char, c_int, c_void};

/// `ncclResult_t`: 0 success; 3 internal error.
pub type NcclResult = c_int;
pub const SUCCESS: NcclResult = 0;

/// `ncclProfileColl` (1 << 1) in every version's event-type enum.
pub const PROFILE_COLL: u64 = 1 << 1;

/// The head of `ncclProfilerEventDescr_v1_t` to `_v4_t`: `uint8_t type`.
#[repr(C)]
pub struct Head8 {
    pub kind: u8,
    pub parent: *mut c_void,
    pub rank: c_int,
}

/// The head of `ncclProfilerEventDescr_v5_t` and `_v6_t`: `uint64_t type`.
#[repr(C)]
pub struct Head64 {
    pub kind: u64,
    pub parent: *mut c_void,
    pub rank: c_int,
}

/// v1's `coll` (2.23): numeric function, type, algorithm and protocol.
#[repr(C)]
pub struct CollV1 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: u8,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: u8,
    pub op: u32,
    pub traffic_bytes: usize,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: u8,
    pub proto: u8,
    pub is_collnet: c_int,
    pub is_nvls: c_int,
}

/// v2's `coll` (2.24, 2.25): names instead of codes.
#[repr(C)]
pub struct CollV2 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub traffic_bytes: usize,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// v3's `coll` (2.26): v2's without `trafficBytes`.
#[repr(C)]
pub struct CollV3 {
    pub name: *const c_char,
    pub comm_hash: u64,
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_max_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// v4's `coll` (2.27): the communicator moved to `init`.
#[repr(C)]
pub struct CollV4 {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

/// v5's and v6's `coll` (2.28 to 2.30): v4's and the parent group.
#[repr(C)]
pub struct CollV5 {
    pub seq_number: u64,
    pub func: *const c_char,
    pub send_buff: *const c_void,
    pub recv_buff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub n_channels: u8,
    pub n_warps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
    pub parent_group: *mut c_void,
}

/// A descriptor: its head, then (for a collective event) its `coll`.
#[repr(C)]
pub struct Descr<H, C> {
    pub head: H,
    pub coll: C,
}

pub type DescrV1 = Descr<Head8, CollV1>;
pub type DescrV2 = Descr<Head8, CollV2>;
pub type DescrV3 = Descr<Head8, CollV3>;
pub type DescrV4 = Descr<Head8, CollV4>;
pub type DescrV5 = Descr<Head64, CollV5>;

/// `ncclDebugLogger_t`: the init arguments of v4 on carry it; never called.
pub type Logger = *const c_void;

pub type InitV1 = unsafe extern "C" fn(*mut *mut c_void, *mut c_int) -> NcclResult;
/// v4: (context, mask, commName, commHash, nNodes, nranks, rank, logger).
pub type InitV4 =
    unsafe extern "C" fn(*mut *mut c_void, *mut c_int, *const c_char, u64, c_int, c_int, c_int, Logger) -> NcclResult;
/// v5, v6: (context, commId, mask, commName, nNodes, nranks, rank, logger).
pub type InitV5 =
    unsafe extern "C" fn(*mut *mut c_void, u64, *mut c_int, *const c_char, c_int, c_int, c_int, Logger) -> NcclResult;
pub type Start<D> = unsafe extern "C" fn(*mut c_void, *mut *mut c_void, *mut D) -> NcclResult;
pub type Stop = unsafe extern "C" fn(*mut c_void) -> NcclResult;
/// (handle, `ncclProfilerEventState_t`, state arguments): never used.
pub type RecordState = unsafe extern "C" fn(*mut c_void, c_int, *mut c_void) -> NcclResult;
pub type Finalize = unsafe extern "C" fn(*mut c_void) -> NcclResult;

/// `ncclProfiler_vN_t`: the name, then five entry points.
#[repr(C)]
pub struct Profiler<I, D> {
    pub name: *const c_char,
    pub init: I,
    pub start_event: Start<D>,
    pub stop_event: Stop,
    pub record_event_state: RecordState,
    pub finalize: Finalize,
}

// SAFETY: the table is immutable; its name points at a static C string.
unsafe impl<I, D> Sync for Profiler<I, D> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{offset_of, size_of};

    /// The offsets of the fields this plugin reads, and of what follows
    /// them, as NCCL's headers lay them out: figures from v2.30.7-1
    /// src/include/plugin/profiler/profiler_v1.h .. profiler_v6.h (the
    /// same layouts as v2.23.4-1 src/include/nccl_profiler.h for v1,
    /// v2.24.3-1 for v2, v2.26.2-1 for v3, v2.27.3-1 for v4, v2.28.3-1 for
    /// v5, v2.29.2-1 for v6), offsetof() of each `coll.` field on x86_64.
    #[test]
    fn collective_descriptors_match_nccls_headers() {
        let coll = offset_of!(DescrV1, coll);
        assert_eq!((offset_of!(DescrV1, head) + offset_of!(Head8, rank), coll), (16, 24));
        let v1 = |f: usize| coll + f;
        assert_eq!(v1(offset_of!(CollV1, comm_hash)), 32);
        assert_eq!(v1(offset_of!(CollV1, seq_number)), 40);
        assert_eq!(v1(offset_of!(CollV1, func)), 48);
        assert_eq!(v1(offset_of!(CollV1, count)), 72);
        assert_eq!(v1(offset_of!(CollV1, datatype)), 84);
        assert_eq!(v1(offset_of!(CollV1, op)), 88);
        assert_eq!(v1(offset_of!(CollV1, traffic_bytes)), 96);
        assert_eq!(v1(offset_of!(CollV1, n_max_channels)), 104);
        assert_eq!(v1(offset_of!(CollV1, n_warps)), 105);
        assert_eq!(v1(offset_of!(CollV1, algo)), 106);
        assert_eq!(v1(offset_of!(CollV1, proto)), 107);
        assert_eq!(v1(offset_of!(CollV1, is_nvls)), 112);

        assert_eq!(offset_of!(DescrV2, coll), 24);
        let v2 = |f: usize| 24 + f;
        assert_eq!(v2(offset_of!(CollV2, comm_hash)), 32);
        assert_eq!(v2(offset_of!(CollV2, seq_number)), 40);
        assert_eq!(v2(offset_of!(CollV2, func)), 48);
        assert_eq!(v2(offset_of!(CollV2, count)), 72);
        assert_eq!(v2(offset_of!(CollV2, datatype)), 88);
        assert_eq!(v2(offset_of!(CollV2, traffic_bytes)), 96);
        assert_eq!(v2(offset_of!(CollV2, n_max_channels)), 104);
        assert_eq!(v2(offset_of!(CollV2, n_warps)), 105);
        assert_eq!(v2(offset_of!(CollV2, algo)), 112);
        assert_eq!(v2(offset_of!(CollV2, proto)), 120);

        assert_eq!(offset_of!(DescrV3, coll), 24);
        let v3 = |f: usize| 24 + f;
        assert_eq!(v3(offset_of!(CollV3, comm_hash)), 32);
        assert_eq!(v3(offset_of!(CollV3, func)), 48);
        assert_eq!(v3(offset_of!(CollV3, count)), 72);
        assert_eq!(v3(offset_of!(CollV3, datatype)), 88);
        assert_eq!(v3(offset_of!(CollV3, n_max_channels)), 96);
        assert_eq!(v3(offset_of!(CollV3, n_warps)), 97);
        assert_eq!(v3(offset_of!(CollV3, algo)), 104);
        assert_eq!(v3(offset_of!(CollV3, proto)), 112);

        assert_eq!(offset_of!(DescrV4, coll), 24);
        let v4 = |f: usize| 24 + f;
        assert_eq!(v4(offset_of!(CollV4, seq_number)), 24);
        assert_eq!(v4(offset_of!(CollV4, func)), 32);
        assert_eq!(v4(offset_of!(CollV4, count)), 56);
        assert_eq!(v4(offset_of!(CollV4, datatype)), 72);
        assert_eq!(v4(offset_of!(CollV4, n_channels)), 80);
        assert_eq!(v4(offset_of!(CollV4, n_warps)), 81);
        assert_eq!(v4(offset_of!(CollV4, algo)), 88);
        assert_eq!(v4(offset_of!(CollV4, proto)), 96);

        // v5 and v6: `uint64_t type`, the same `coll`
        assert_eq!((offset_of!(Head64, rank), offset_of!(DescrV5, coll)), (16, 24));
        let v5 = |f: usize| 24 + f;
        assert_eq!(v5(offset_of!(CollV5, seq_number)), 24);
        assert_eq!(v5(offset_of!(CollV5, func)), 32);
        assert_eq!(v5(offset_of!(CollV5, count)), 56);
        assert_eq!(v5(offset_of!(CollV5, datatype)), 72);
        assert_eq!(v5(offset_of!(CollV5, n_channels)), 80);
        assert_eq!(v5(offset_of!(CollV5, n_warps)), 81);
        assert_eq!(v5(offset_of!(CollV5, algo)), 88);
        assert_eq!(v5(offset_of!(CollV5, proto)), 96);
        assert_eq!(v5(offset_of!(CollV5, parent_group)), 104);
    }

    /// `ncclProfiler_vN_t` is 48 bytes in every version: a name and five
    /// function pointers.
    #[test]
    fn entry_point_tables_are_six_pointers() {
        assert_eq!(size_of::<Profiler<InitV1, DescrV1>>(), 48);
        assert_eq!(size_of::<Profiler<InitV4, DescrV4>>(), 48);
        assert_eq!(size_of::<Profiler<InitV5, DescrV5>>(), 48);
        assert_eq!(offset_of!(Profiler<InitV5, DescrV5>, finalize), 40);
    }
}
