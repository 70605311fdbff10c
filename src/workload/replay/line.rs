//! One line of an NCCL debug log, parsed: a collective call (NCCL_DEBUG_SUBSYS
//! COLL), a communicator's INIT line, the version banner, or nothing of
//! interest.
//!
//! Formats (NCCL 2.1x to 2.3x; the COLL format string of enqueue.cc has not
//! changed in that span, and libnccl 2.32.3's strings still hold it):
//! - `AllReduce: opCount 139d sendbuff 0x7fd.. recvbuff 0x7fd.. count
//!   7382228 datatype 7 op 0 root 0 comm 0x78cfda045840 [nranks=128]
//!   stream 0x78d0..`; `opCount` is hex; `root` is the peer for Send and
//!   Recv; NCCL 2.12 put a Send's buffer in `recvbuff` (NVIDIA/nccl#783);
//! - INIT, `... - Init COMPLETE` or `... - Init START`: `comm 0x.. rank 36
//!   nranks 64 cudaDev 4 busId 9b000 - Init COMPLETE` (older versions print
//!   no commId, NVIDIA/nccl#629), `... commId 0x5ae77eb5ea4ec1ee` (by 2.15,
//!   cupy/cupy#9090), `... nvmlDev 4 ...` (by 2.18, NVIDIA/nccl#1038), prefixed
//!   by the init function (`ncclCommInitRank comm ...`, NVIDIA/nccl-tests#252;
//!   `ncclCommSplit comm ... parent 0x.. color .. key ..`);
//! - `NCCL version 2.21.5+cuda12.4`, with or without the line prefix.
//!
//! Each NCCL line starts `host:pid:tid [cudaDev] NCCL INFO `, possibly after
//! a launcher's own prefix (`[rank0]:` from torchrun, `(RayTrainWorker
//! pid=615, ip=10.72.7.6) ` from Ray, `worker-0: ` from pdsh) or a
//! timestamp; `types::split_info` splits it at its last mark, as the
//! transport observation does.

use crate::types::{NcclVersion, split_info};

/// Where a line came from.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    /// Empty when the line has no `host:pid:tid` part.
    pub host: String,
    pub pid: u64,
    pub tid: u64,
    /// The CUDA device in brackets.
    pub dev: Option<u32>,
    /// A torchrun `[rankN]:` label before the host.
    pub rank_label: Option<usize>,
}

/// A collective or point-to-point call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallLine {
    pub prefix: Prefix,
    /// `AllReduce`, `Send`, ...
    pub name: String,
    pub op_count: u64,
    pub count: u64,
    pub datatype: i64,
    pub op: i64,
    /// The root (broadcast, reduce) or the peer (send, recv).
    pub root: i64,
    pub comm: u64,
    pub nranks: usize,
}

/// A communicator's INIT START or COMPLETE line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InitLine {
    pub prefix: Prefix,
    pub comm: u64,
    pub rank: usize,
    pub nranks: usize,
    pub cuda_dev: Option<u32>,
    pub comm_id: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Call(CallLine),
    Init(InitLine),
    Version(NcclVersion),
    /// A call's text without its `NCCL INFO` prefix: a fragment of output
    /// interleaved with another process's line.
    Orphan,
    Other,
}

/// Parses one line. `Err` (one line, without the line number) for a call
/// line that lacks a field it needs.
pub fn parse_line(text: &str) -> Result<Line, String> {
    let text = text.trim_end();
    let Some((before, body)) = split_info(text) else {
        if let Some(v) = NcclVersion::find(text) {
            return Ok(Line::Version(v));
        }
        return Ok(if call_name(text.trim_start()).is_some() {
            Line::Orphan
        } else {
            Line::Other
        });
    };
    let prefix = parse_prefix(before);
    if let Some(name) = call_name(body) {
        return parse_call(prefix, name, &body[name.len() + 1..]).map(Line::Call);
    }
    if body.ends_with("- Init COMPLETE") || body.ends_with("- Init START") {
        return Ok(parse_init(prefix, body).map_or(Line::Other, Line::Init));
    }
    Ok(NcclVersion::find(body).map_or(Line::Other, Line::Version))
}

/// `AllReduce` in `AllReduce: opCount ...`.
fn call_name(body: &str) -> Option<&str> {
    let (name, rest) = body.split_once(':')?;
    let is_name = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphabetic());
    (is_name && rest.starts_with(" opCount ")).then_some(name)
}

fn parse_prefix(before: &str) -> Prefix {
    let mut p = Prefix::default();
    let mut rest = before.trim_end();
    if rest.ends_with(']')
        && let Some(open) = rest.rfind('[')
    {
        p.dev = rest[open + 1..rest.len() - 1].trim().parse().ok();
        rest = rest[..open].trim_end();
    }
    let token = rest.rsplit(char::is_whitespace).next().unwrap_or("");
    let parts: Vec<&str> = token.rsplitn(4, ':').collect();
    if parts.len() >= 3
        && let (Ok(tid), Ok(pid)) = (parts[0].parse(), parts[1].parse())
    {
        p.tid = tid;
        p.pid = pid;
        p.host = parts[2].to_string();
        if let Some(label) = parts.get(3) {
            p.rank_label = label
                .strip_prefix("[rank")
                .and_then(|l| l.strip_suffix(']'))
                .and_then(|n| n.parse().ok());
        }
    }
    p
}

fn hex(text: &str) -> Option<u64> {
    if text == "(nil)" {
        return Some(0);
    }
    u64::from_str_radix(text.strip_prefix("0x").unwrap_or(text), 16).ok()
}

/// The value after `key` in a whitespace-separated list.
fn field<'a>(tokens: &[&'a str], key: &str) -> Option<&'a str> {
    tokens.windows(2).find(|w| w[0] == key).map(|w| w[1])
}

fn parse_call(prefix: Prefix, name: &str, rest: &str) -> Result<CallLine, String> {
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    // fields in the order NCCL prints them, so a truncated line names the
    // first one it lost
    let need = |key: &str| field(&tokens, key).ok_or_else(|| format!("{name} line without `{key}` (truncated?)"));
    let bad = |key: &str| format!("{name} line with a malformed `{key}`");
    let int = |key: &str| -> Result<i64, String> { need(key)?.parse().map_err(|_| bad(key)) };
    let op_count = hex(need("opCount")?).ok_or_else(|| bad("opCount"))?;
    let count: u64 = need("count")?.parse().map_err(|_| bad("count"))?;
    let datatype = int("datatype")?;
    let op = int("op")?;
    let root = int("root")?;
    let comm = hex(need("comm")?).ok_or_else(|| bad("comm"))?;
    let nranks = tokens
        .iter()
        .find_map(|t| t.strip_prefix("[nranks=")?.strip_suffix(']')?.parse().ok())
        .ok_or_else(|| format!("{name} line without `[nranks=N]` (truncated?)"))?;
    Ok(CallLine {
        prefix,
        name: name.to_string(),
        op_count,
        count,
        datatype,
        op,
        root,
        comm,
        nranks,
    })
}

fn parse_init(prefix: Prefix, body: &str) -> Option<InitLine> {
    let tokens: Vec<&str> = body.split_whitespace().collect();
    Some(InitLine {
        prefix,
        comm: hex(field(&tokens, "comm")?)?,
        rank: field(&tokens, "rank")?.parse().ok()?,
        nranks: field(&tokens, "nranks")?.parse().ok()?,
        cuda_dev: field(&tokens, "cudaDev").and_then(|d| d.parse().ok()),
        comm_id: field(&tokens, "commId").and_then(hex),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(text: &str) -> CallLine {
        match parse_line(text) {
            Ok(Line::Call(c)) => c,
            other => panic!("{other:?} from {text}"),
        }
    }

    fn init(text: &str) -> InitLine {
        match parse_line(text) {
            Ok(Line::Init(i)) => i,
            other => panic!("{other:?} from {text}"),
        }
    }

    #[test]
    fn a_collective_line_gives_every_field() {
        // NVIDIA/nccl#1193 (Ray's prefix before NCCL's)
        let c = call(
            "(RayTrainWorker pid=615, ip=10.72.7.6) r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-fqztx:615:18953 [2] NCCL INFO AllReduce: opCount 139d sendbuff 0x78d056200000 recvbuff 0x78d056200000 count 7382228 datatype 7 op 0 root 0 comm 0x78cfda045840 [nranks=128] stream 0x78d07125e5e0",
        );
        assert_eq!(c.name, "AllReduce");
        assert_eq!(c.op_count, 0x139d);
        assert_eq!(c.count, 7_382_228);
        assert_eq!((c.datatype, c.op, c.root), (7, 0, 0));
        assert_eq!(c.comm, 0x78cf_da04_5840);
        assert_eq!(c.nranks, 128);
        assert_eq!(c.prefix.host, "r24-02-22-23-29-0066-raycluster-lv52c-worker-l4-8-fqztx");
        assert_eq!((c.prefix.pid, c.prefix.tid, c.prefix.dev), (615, 18953, Some(2)));
    }

    #[test]
    fn prefixes_of_launchers_and_trimmed_prefixes_are_read() {
        // torchrun's [rankN]: label (pytorch/torchtitan#1570)
        let p = parse_prefix("[rank0]:costa-671b-5-worker-1:382:675 [0] ");
        assert_eq!(p.host, "costa-671b-5-worker-1");
        assert_eq!((p.pid, p.tid, p.dev, p.rank_label), (382, 675, Some(0), Some(0)));
        // pdsh's host: prefix (NVIDIA/nccl#1029)
        let p = parse_prefix("rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19488:21063 [4] ");
        assert_eq!(
            (p.host.as_str(), p.pid, p.dev),
            ("rdma-gpu-train-worker-0", 19488, Some(4))
        );
        // a prefix cut to the device (NVIDIA/nccl#783)
        let c = call(
            "[0] NCCL INFO Send: opCount 1 sendbuff (nil) recvbuff 0x7fbfbe7a4f40 count 1572864 datatype 7 op 0 root 1 comm 0x5574e8f68900 [nranks=2] stream 0x5574b87450d0",
        );
        assert_eq!((c.prefix.host.as_str(), c.prefix.pid, c.prefix.dev), ("", 0, Some(0)));
        assert_eq!((c.name.as_str(), c.root), ("Send", 1));
        // a timestamp before the host
        let p = parse_prefix("[2024-05-01 10:00:00] host-a:12:13 [3] ");
        assert_eq!((p.host.as_str(), p.pid, p.dev), ("host-a", 12, Some(3)));
    }

    #[test]
    fn interleaved_output_keeps_the_last_line_and_flags_orphans() {
        // NVIDIA/nccl#147: two processes' output on one line
        let c = call(
            "learnfair062:32619:32711 [2] NCCL INFO learnfair062:32629:32629 [7] NCCL INFO Broadcast: opCount 0 sendbuff 0x7f372c7f5400 recvbuff 0x7f372c7f5400 count 53 datatype 4 op 0 root 0 comm 0x7f372005a260 [nranks=8] stream 0x5599dafdc1f0",
        );
        assert_eq!((c.prefix.pid, c.prefix.dev), (32629, Some(7)));
        let orphan = "Broadcast: opCount 1 sendbuff 0x7f5836000000 recvbuff 0x7f5836000000 count 25503912 datatype 6 op 0 root 0 comm 0x7f584405a260 [nranks=8] stream 0x563448681ac0";
        assert_eq!(parse_line(orphan), Ok(Line::Orphan));
    }

    #[test]
    fn init_lines_of_every_format_give_rank_nranks_and_comm_id() {
        // an older version: no commId (NVIDIA/nccl#629)
        let i = init(
            "A03-R28-I49-3-9000018:193027:193119 [7] NCCL INFO comm 0x7fdf08000d00 rank 15 nranks 16 cudaDev 7 busId e7000 - Init COMPLETE",
        );
        assert_eq!(
            (i.comm, i.rank, i.nranks, i.cuda_dev, i.comm_id),
            (0x7fdf_0800_0d00, 15, 16, Some(7), None)
        );
        // 2.15 (cupy/cupy#9090)
        let i = init(
            "pg00:1822703:1822703 [1] NCCL INFO comm 0x55f205c38300 rank 1 nranks 2 cudaDev 1 busId 89000 commId 0x1328ee0a0e0cb7aa - Init COMPLETE",
        );
        assert_eq!(i.comm_id, Some(0x1328_ee0a_0e0c_b7aa));
        // 2.18+ with nvmlDev (NVIDIA/nccl#1814)
        let i = init(
            "hostname-test:984:1257 [4] NCCL INFO comm 0x557fe785f7a0 rank 36 nranks 64 cudaDev 4 nvmlDev 4 busId 9b000 commId 0x5ae77eb5ea4ec1ee - Init COMPLETE",
        );
        assert_eq!((i.rank, i.nranks, i.cuda_dev), (36, 64, Some(4)));
        // the init function's name first (NVIDIA/nccl-tests#252)
        let i = init(
            "kolyoz2:25146:25827 [0] NCCL INFO ncclCommInitRank comm 0x559d5aa8ca00 rank 4 nranks 8 cudaDev 0 nvmlDev 0 busId 42000 commId 0x996ee6f117cb8e1e - Init START",
        );
        assert_eq!((i.rank, i.nranks, i.comm_id), (4, 8, Some(0x996e_e6f1_17cb_8e1e)));
        // a split (format of NCCL 2.2x's ncclCommSplit)
        let i = init(
            "h:1:2 [0] NCCL INFO ncclCommSplit comm 0x55aa rank 1 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 parent 0x55bb color 7 key 1 commId 0xabc - Init COMPLETE",
        );
        assert_eq!((i.comm, i.rank, i.nranks, i.comm_id), (0x55aa, 1, 2, Some(0xabc)));
    }

    #[test]
    fn other_lines_are_ignored_and_the_version_banner_is_read() {
        assert_eq!(
            parse_line("NCCL version 2.21.5+cuda12.4"),
            Ok(Line::Version(NcclVersion::new(2, 21, 5)))
        );
        assert_eq!(
            parse_line("host-2:38610:38610 [0] NCCL INFO NCCL version 2.18.3+cuda12.2"),
            Ok(Line::Version(NcclVersion::new(2, 18, 3)))
        );
        for text in [
            "",
            "hostname-test:983:1261 [3] NCCL INFO Connected NVLS tree",
            "costa:382:675 [0] NCCL INFO comm 0x43be0680 rank 0 nRanks 4 nNodes 1 localRanks 4 localRank 0 MNNVL 0",
            "h:1:1 [0] NCCL INFO comm 0x55 rank 0 nRanks 8 cudaDev 0 busId 1000 commId 0x1 - Destroy START",
            "[titan] 2025-07-07 20:12:54,779 - root - INFO - Training starts at step 1.",
            "h:1:1 [0] NCCL INFO AllReduce: opCount",
        ] {
            assert!(matches!(parse_line(text), Ok(Line::Other)), "{text}");
        }
    }

    #[test]
    fn a_truncated_call_line_is_an_error_naming_the_missing_field() {
        let e = parse_line(
            "ubuntu:199574:201142 [1] NCCL INFO Send: opCount d64 sendbuff 0x7f502c600000 recvbuff (nil) count 2420736 da",
        )
        .unwrap_err();
        assert_eq!(e, "Send line without `datatype` (truncated?)");
        let e = parse_line("h:1:1 [0] NCCL INFO AllGather: opCount 1 count x datatype 7").unwrap_err();
        assert_eq!(e, "AllGather line with a malformed `count`");
    }
}
