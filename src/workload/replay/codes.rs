//! NCCL's numeric codes in a log line, by NCCL version: `datatype` is an
//! `ncclDataType_t`, `op` an `ncclRedOp_t` (nccl.h).
//!
//! ncclDataType_t: ncclInt8 = 0, ncclUint8 = 1, ncclInt32 = 2, ncclUint32
//! = 3, ncclInt64 = 4, ncclUint64 = 5, ncclFloat16 = 6, ncclFloat32 = 7,
//! ncclFloat64 = 8, ncclBfloat16 = 9 (from 2.10: release notes of 2.10.3,
//! "Added support for bfloat16 type"), ncclFloat8e4m3 = 10, ncclFloat8e5m2
//! = 11 (from 2.24: "NCCL added support for Float8e4m3 and Float8e5m2 in
//! 2.24", pytorch/pytorch#152706; cudarc's bindings of 2.22 lack them).
//! ncclRedOp_t: ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3,
//! ncclAvg = 4 (from 2.10, same notes); values from ncclNumOps = 5 up are
//! operations made with ncclRedOpCreatePreMulSum (2.11), a sum of
//! pre-scaled inputs, which moves the same data as a sum.
//! When the log has no version banner, every code above is accepted.

use crate::types::NcclVersion;
use crate::types::{DType, ReduceOp};

const BF16_SINCE: NcclVersion = NcclVersion::new(2, 10, 0);
const FP8_SINCE: NcclVersion = NcclVersion::new(2, 24, 0);
const AVG_SINCE: NcclVersion = NcclVersion::new(2, 10, 0);
const PREMUL_SINCE: NcclVersion = NcclVersion::new(2, 11, 0);

/// NCCL's name of each datatype code.
pub const DATATYPE_NAMES: [&str; 12] = [
    "ncclInt8",
    "ncclUint8",
    "ncclInt32",
    "ncclUint32",
    "ncclInt64",
    "ncclUint64",
    "ncclFloat16",
    "ncclFloat32",
    "ncclFloat64",
    "ncclBfloat16",
    "ncclFloat8e4m3",
    "ncclFloat8e5m2",
];

/// A logged datatype: one collbench has, or an 8-bit float it has not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogType {
    Known(DType),
    Fp8E4M3,
    Fp8E5M2,
}

impl LogType {
    /// The code's NCCL name.
    pub fn nccl_name(self) -> &'static str {
        match self {
            LogType::Known(t) => {
                // DType::ALL is in ncclDataType_t's order (the test below)
                let code = DType::ALL.iter().position(|&d| d == t).unwrap_or(0);
                DATATYPE_NAMES[code]
            }
            LogType::Fp8E4M3 => DATATYPE_NAMES[10],
            LogType::Fp8E5M2 => DATATYPE_NAMES[11],
        }
    }
}

fn known_list(version: Option<NcclVersion>) -> String {
    let last = match version {
        Some(v) if v < BF16_SINCE => 8,
        Some(v) if v < FP8_SINCE => 9,
        _ => 11,
    };
    format!("0 = {} ... {last} = {}", DATATYPE_NAMES[0], DATATYPE_NAMES[last])
}

/// The datatype of `code` in a log of `version` (one line on failure).
pub fn datatype(code: i64, version: Option<NcclVersion>) -> Result<LogType, String> {
    let at = |since: NcclVersion| version.is_none_or(|v| v >= since);
    let t = match code {
        0..=8 => LogType::Known(DType::ALL[code as usize]),
        9 if at(BF16_SINCE) => LogType::Known(DType::Bfloat16),
        10 if at(FP8_SINCE) => LogType::Fp8E4M3,
        11 if at(FP8_SINCE) => LogType::Fp8E5M2,
        _ => {
            let of = version.map_or("NCCL".to_string(), |v| format!("NCCL {v}"));
            return Err(format!("unknown datatype {code}: {of} has {}", known_list(version)));
        }
    };
    Ok(t)
}

/// The reduction of `code`; `true` when it is a user-defined (pre-multiplied
/// sum) operation replayed as a sum.
pub fn reduce_op(code: i64, version: Option<NcclVersion>) -> Result<(ReduceOp, bool), String> {
    let at = |since: NcclVersion| version.is_none_or(|v| v >= since);
    match code {
        0 => Ok((ReduceOp::Sum, false)),
        1 => Ok((ReduceOp::Prod, false)),
        2 => Ok((ReduceOp::Max, false)),
        3 => Ok((ReduceOp::Min, false)),
        4 if at(AVG_SINCE) => Ok((ReduceOp::Avg, false)),
        c if c >= 5 && at(PREMUL_SINCE) => Ok((ReduceOp::Sum, true)),
        _ => {
            let of = version.map_or("NCCL".to_string(), |v| format!("NCCL {v}"));
            Err(format!(
                "unknown reduction {code}: {of} has ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3{}",
                if at(AVG_SINCE) { ", ncclAvg = 4" } else { "" }
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datatype_codes_follow_nccl_h() {
        // nccl-tests' order, `DType::ALL`, is nccl.h's ncclDataType_t order
        for (code, t) in DType::ALL.into_iter().enumerate() {
            assert_eq!(datatype(code as i64, None), Ok(LogType::Known(t)));
            assert_eq!(LogType::Known(t).nccl_name(), DATATYPE_NAMES[code]);
        }
        assert_eq!(datatype(10, None), Ok(LogType::Fp8E4M3));
        assert_eq!(datatype(11, Some(NcclVersion::new(2, 27, 3))), Ok(LogType::Fp8E5M2));
        assert_eq!(LogType::Fp8E5M2.nccl_name(), "ncclFloat8e5m2");
    }

    #[test]
    fn codes_a_version_does_not_have_are_refused_with_what_it_has() {
        let v = |minor| Some(NcclVersion::new(2, minor, 0));
        assert_eq!(
            datatype(10, v(21)).unwrap_err(),
            "unknown datatype 10: NCCL 2.21.0 has 0 = ncclInt8 ... 9 = ncclBfloat16"
        );
        assert_eq!(
            datatype(9, v(8)).unwrap_err(),
            "unknown datatype 9: NCCL 2.8.0 has 0 = ncclInt8 ... 8 = ncclFloat64"
        );
        assert_eq!(
            datatype(12, None).unwrap_err(),
            "unknown datatype 12: NCCL has 0 = ncclInt8 ... 11 = ncclFloat8e5m2"
        );
        assert!(datatype(-1, None).is_err());
        assert!(datatype(9, v(10)).is_ok());
    }

    #[test]
    fn reduction_codes_follow_nccl_h_and_premul_sums_replay_as_sums() {
        assert_eq!(reduce_op(0, None), Ok((ReduceOp::Sum, false)));
        assert_eq!(reduce_op(1, None), Ok((ReduceOp::Prod, false)));
        assert_eq!(reduce_op(2, None), Ok((ReduceOp::Max, false)));
        assert_eq!(reduce_op(3, None), Ok((ReduceOp::Min, false)));
        assert_eq!(reduce_op(4, None), Ok((ReduceOp::Avg, false)));
        assert_eq!(reduce_op(5, None), Ok((ReduceOp::Sum, true)));
        assert_eq!(
            reduce_op(17, Some(NcclVersion::new(2, 18, 1))),
            Ok((ReduceOp::Sum, true))
        );
        assert_eq!(
            reduce_op(4, Some(NcclVersion::new(2, 9, 9))).unwrap_err(),
            "unknown reduction 4: NCCL 2.9.9 has ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3"
        );
        assert!(reduce_op(-2, None).is_err());
    }

    #[test]
    fn the_version_banner_parses_with_or_without_its_cuda_suffix() {
        assert_eq!(
            NcclVersion::find("NCCL version 2.21.5+cuda12.4"),
            Some(NcclVersion::new(2, 21, 5))
        );
        assert_eq!(
            NcclVersion::find("x NCCL version 2.18.3"),
            Some(NcclVersion::new(2, 18, 3))
        );
        assert_eq!(NcclVersion::find("NCCL version 2.18"), None);
        assert_eq!(NcclVersion::find("NCCL version"), None);
        assert!(NcclVersion::new(2, 9, 0) < NcclVersion::new(2, 10, 0));
        assert_eq!(NcclVersion::new(2, 23, 4).to_string(), "2.23.4");
    }
}
