//! Which algorithm NCCL chose, as its log says (docs/algorithms.md): the
//! TUNING line a communicator's rank 0 prints per collective it schedules
//! (src/enqueue.cc of each release, `if (comm->rank == 0) INFO(NCCL_TUNING,
//! ...)`, printed only where NCCL_DEBUG_SUBSYS names TUNING):
//! - 2.20.3 to 2.22.3: `%ld Bytes -> Algo %d proto %d time %f` (NCCL's
//!   numeric codes; no function);
//! - 2.23.4: `%s: %ld Bytes -> Algo %d proto %d time %f` (the function
//!   first, `AllReduce`);
//! - 2.24.3 on: `%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}`
//!   (`RING`, `SIMPLE`);
//! - 2.27.3 on, symmetric kernels: `%s [Symmetric]: %ld Bytes -> Kernel %s
//!   nchannels %d nthreads %d`; 2.29 on, copy-engine collectives
//!   `%s [Copy Engine]: ...`: no algorithm NCCL_ALGO names (`Special`).
//!
//! Before 2.20 the line is commented out. The bytes are NCCL's own count
//! (its formula changed between releases), not collbench's `size_bytes`.

use crate::types::{Algo, Proto};

/// What one TUNING line says NCCL chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tuning {
    /// An algorithm and protocol (2.20 and later).
    Chosen {
        /// NCCL's function name (`AllReduce`); `None` before 2.23.
        func: Option<String>,
        bytes: u64,
        algo: Algo,
        proto: Proto,
        /// `channel{Lo..Hi}` from 2.24: the channels used, `Hi - Lo + 1`.
        nchannels: Option<u32>,
    },
    /// A kernel outside NCCL's algorithms (`AllReduce [Symmetric]`,
    /// `AllGather [Copy Engine]`): the function and the bracketed kind.
    Special { func: String, kind: String },
    /// A TUNING line whose algorithm or protocol this release's codes do
    /// not name (a later NCCL's).
    Unreadable(String),
}

/// `123 Bytes -> REST`: the bytes and what follows the arrow.
fn bytes_arrow(text: &str) -> Option<(u64, &str)> {
    let (bytes, rest) = text.split_once(" Bytes -> ")?;
    Some((bytes.trim().parse().ok()?, rest))
}

/// `Algo X proto Y` and what follows it.
fn algo_proto(rest: &str) -> Option<(&str, &str, &str)> {
    let rest = rest.strip_prefix("Algo ")?;
    let (algo, rest) = rest.split_once(" proto ")?;
    let (proto, tail) = rest.split_once(' ').unwrap_or((rest, ""));
    Some((algo.trim(), proto.trim(), tail))
}

/// `channel{Lo..Hi}={0..3}` -> 4.
fn channels(tail: &str) -> Option<u32> {
    let set = tail.trim().strip_prefix("channel{Lo..Hi}={")?.strip_suffix('}')?;
    let (lo, hi) = set.split_once("..")?;
    let (lo, hi): (u32, u32) = (lo.trim().parse().ok()?, hi.trim().parse().ok()?);
    hi.checked_sub(lo).map(|d| d + 1)
}

/// The TUNING line `msg` (an INFO line's message), if it is one, in any
/// release's format.
pub fn tuning(msg: &str) -> Option<Tuning> {
    let msg = msg.trim();
    // the function before `: ` from 2.23 (none before); a word, or a word
    // and a bracketed kind
    let (func, body) = match msg.split_once(": ") {
        Some((f, b)) if !f.contains(' ') || f.ends_with(']') => (Some(f), b),
        _ => (None, msg),
    };
    let (bytes, rest) = bytes_arrow(body)?;
    if let Some((name, kind)) = func.and_then(|f| f.strip_suffix(']')?.split_once(" [")) {
        return Some(Tuning::Special {
            func: name.into(),
            kind: kind.into(),
        });
    }
    let (algo_text, proto_text, tail) = algo_proto(rest)?;
    // numeric codes up to 2.23, NCCL's names from 2.24
    let algo = match algo_text.parse::<i64>() {
        Ok(code) => Algo::from_code(code),
        Err(_) => Algo::parse(algo_text),
    };
    let proto = match proto_text.parse::<i64>() {
        Ok(code) => Proto::from_code(code),
        Err(_) => Proto::parse(proto_text),
    };
    let (Some(algo), Some(proto)) = (algo, proto) else {
        return Some(Tuning::Unreadable(msg.into()));
    };
    Some(Tuning::Chosen {
        func: func.map(str::to_string),
        bytes,
        algo,
        proto,
        nchannels: channels(tail),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Each message as the release's format string prints it (src/enqueue.cc).

    fn chosen(func: Option<&str>, bytes: u64, algo: Algo, proto: Proto, nchannels: Option<u32>) -> Option<Tuning> {
        Some(Tuning::Chosen {
            func: func.map(str::to_string),
            bytes,
            algo,
            proto,
            nchannels,
        })
    }

    #[test]
    fn tuning_lines_of_every_release_give_the_choice() {
        // 2.20.3-2.22.3: "%ld Bytes -> Algo %d proto %d time %f"
        assert_eq!(
            tuning("4096 Bytes -> Algo 1 proto 0 time 11.300000"),
            chosen(None, 4096, Algo::Ring, Proto::Ll, None)
        );
        // 2.23.4: "%s: %ld Bytes -> Algo %d proto %d time %f"
        assert_eq!(
            tuning("AllReduce: 33554432 Bytes -> Algo 0 proto 2 time 123.456001"),
            chosen(Some("AllReduce"), 33554432, Algo::Tree, Proto::Simple, None)
        );
        assert_eq!(
            tuning("ReduceScatter: 64 Bytes -> Algo 6 proto 1 time 3.000000"),
            chosen(Some("ReduceScatter"), 64, Algo::Pat, Proto::Ll128, None)
        );
        // 2.24.3 on: "%s: %ld Bytes -> Algo %s proto %s channel{Lo..Hi}={%d..%d}"
        assert_eq!(
            tuning("ReduceScatter: 1048576 Bytes -> Algo PAT proto SIMPLE channel{Lo..Hi}={0..7}"),
            chosen(Some("ReduceScatter"), 1048576, Algo::Pat, Proto::Simple, Some(8))
        );
        assert_eq!(
            tuning("AllReduce: 8 Bytes -> Algo NVLS_TREE proto LL128 channel{Lo..Hi}={2..2}"),
            chosen(Some("AllReduce"), 8, Algo::NvlsTree, Proto::Ll128, Some(1))
        );
        assert_eq!(
            tuning("AllGather: 8 Bytes -> Algo COLLNET_DIRECT proto LL channel{Lo..Hi}={0..1}"),
            chosen(Some("AllGather"), 8, Algo::CollnetDirect, Proto::Ll, Some(2))
        );
    }

    #[test]
    fn symmetric_and_copy_engine_lines_are_told_apart() {
        // 2.27.3: "%s [Symmetric]: %ld Bytes -> Kernel %s nchannels %d nthreads %d"
        assert_eq!(
            tuning("AllReduce [Symmetric]: 65536 Bytes -> Kernel AllReduce_AGxLL_R nchannels 4 nthreads 512"),
            Some(Tuning::Special {
                func: "AllReduce".into(),
                kind: "Symmetric".into()
            })
        );
        // 2.29: "%s [Copy Engine]: %ld Bytes -> cudaMemcpy%s"
        assert_eq!(
            tuning("AllGather [Copy Engine]: 1024 Bytes -> cudaMemcpy"),
            Some(Tuning::Special {
                func: "AllGather".into(),
                kind: "Copy Engine".into()
            })
        );
    }

    #[test]
    fn other_lines_are_not_tuning_lines() {
        for msg in [
            "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
            "comm 0x55d0 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
            "AllReduce: opCount 4 sendbuff 0x7f recvbuff 0x7f count 1 datatype 7 op 0 root 0 comm 0x55 [nranks=2] stream 0x0",
            "NCCL_ALGO set by environment to Ring",
            "  Algorithm   |   Tree | Ring",
            "AllReduce: tuner chunk size 1 exceeds buffer max 2, clamping",
            "12 Bytes -> Algo",
        ] {
            assert_eq!(tuning(msg), None, "{msg}");
        }
        for msg in [
            "AllReduce: 8 Bytes -> Algo 9 proto 0 time 1.000000",
            "AllReduce: 8 Bytes -> Algo RING proto LL256 channel{Lo..Hi}={0..0}",
        ] {
            assert!(matches!(tuning(msg), Some(Tuning::Unreadable(_))), "{msg}");
        }
    }
}
