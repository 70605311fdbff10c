//! NCCL's names (profiler v2 on) as NCCL's numeric codes (v1's, and what
//! the records keep): `ncclFunc_t` (src/include/device.h), `ncclDataType_t`
//! (nccl.h), `NCCL_ALGO_*` and `NCCL_PROTO_*` (nccl_common.h). `OTHER`
//! for a name this plugin does not know (a later release's).

use std::ffi::{CStr, c_char};

pub const OTHER: u8 = 255;

const FUNCS: [&[u8]; 8] = [
    b"Broadcast",
    b"Reduce",
    b"AllGather",
    b"ReduceScatter",
    b"AllReduce",
    b"SendRecv",
    b"Send",
    b"Recv",
];
const TYPES: [&[u8]; 12] = [
    b"ncclInt8",
    b"ncclUint8",
    b"ncclInt32",
    b"ncclUint32",
    b"ncclInt64",
    b"ncclUint64",
    b"ncclFloat16",
    b"ncclFloat32",
    b"ncclFloat64",
    b"ncclBfloat16",
    b"ncclFloat8e4m3",
    b"ncclFloat8e5m2",
];
const ALGOS: [&[u8]; 7] = [
    b"TREE",
    b"RING",
    b"COLLNET_DIRECT",
    b"COLLNET_CHAIN",
    b"NVLS",
    b"NVLS_TREE",
    b"PAT",
];
const PROTOS: [&[u8]; 3] = [b"LL", b"LL128", b"SIMPLE"];

/// The code of `text` in `names`, `OTHER` where none (or a null pointer).
fn code(names: &[&[u8]], text: *const c_char) -> u8 {
    if text.is_null() {
        return OTHER;
    }
    // SAFETY: NCCL passes NUL-terminated static strings (its name tables),
    // valid for the call; null was ruled out above.
    let bytes = unsafe { CStr::from_ptr(text) }.to_bytes();
    names.iter().position(|n| *n == bytes).map_or(OTHER, |i| i as u8)
}

pub fn func(text: *const c_char) -> u8 {
    code(&FUNCS, text)
}

pub fn datatype(text: *const c_char) -> u8 {
    code(&TYPES, text)
}

pub fn algo(text: *const c_char) -> u8 {
    code(&ALGOS, text)
}

pub fn proto(text: *const c_char) -> u8 {
    code(&PROTOS, text)
}

/// A v1 code kept where it is one of NCCL's, else `OTHER`.
pub fn checked(code: u8, known: usize) -> u8 {
    if usize::from(code) < known { code } else { OTHER }
}

pub const NFUNCS: usize = FUNCS.len();
pub const NTYPES: usize = TYPES.len();
pub const NALGOS: usize = ALGOS.len();
pub const NPROTOS: usize = PROTOS.len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_as_nccls_codes() {
        assert_eq!(func(c"AllReduce".as_ptr()), 4);
        assert_eq!(func(c"Broadcast".as_ptr()), 0);
        assert_eq!(datatype(c"ncclFloat32".as_ptr()), 7);
        assert_eq!(datatype(c"ncclBfloat16".as_ptr()), 9);
        assert_eq!(algo(c"RING".as_ptr()), 1);
        assert_eq!(algo(c"NVLS_TREE".as_ptr()), 5);
        assert_eq!(algo(c"PAT".as_ptr()), 6);
        assert_eq!(proto(c"LL128".as_ptr()), 1);
        assert_eq!(proto(c"SIMPLE".as_ptr()), 2);
        assert_eq!(algo(c"CE".as_ptr()), OTHER);
        assert_eq!(algo(std::ptr::null()), OTHER);
        assert_eq!(checked(6, NALGOS), 6);
        assert_eq!(checked(7, NALGOS), OTHER);
    }
}
