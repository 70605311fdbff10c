//! NCCL's debug log lines, split where NCCL's own text starts: the one
//! splitter of both readers of those logs, the transport observation
//! (`topology::observe::nccl_log`) and replay (`workload::replay::line`).
//!
//! Each NCCL line is `host:pid:tid [cudaDev] NCCL INFO text`, possibly
//! after a launcher's own prefix (`[rank0]:` from torchrun, `worker-0: `
//! from pdsh) or a timestamp (NCCL_DEBUG_TIMESTAMP_FORMAT). Output of
//! several processes can interleave mid-line, so the text after the last
//! `NCCL INFO ` is the line's own, and its prefix is what stands just
//! before it.

/// What NCCL writes before the text of each of its INFO lines.
pub const INFO_MARK: &str = "NCCL INFO ";

/// `line` split at its last `NCCL INFO `: the prefix before it and the
/// text after it; `None` for a line that has none.
pub fn split_info(line: &str) -> Option<(&str, &str)> {
    let at = line.rfind(INFO_MARK)?;
    Some((&line[..at], &line[at + INFO_MARK.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_splits_at_its_last_mark() {
        assert_eq!(
            split_info("[rank0]:h:1:2 [0] NCCL INFO Using network IB"),
            Some(("[rank0]:h:1:2 [0] ", "Using network IB"))
        );
        // two processes' output interleaved: the second line is the whole one
        assert_eq!(
            split_info("h:1:2 [0] NCCL INFO Chanh:3:4 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct"),
            Some((
                "h:1:2 [0] NCCL INFO Chanh:3:4 [1] ",
                "Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct"
            ))
        );
        assert_eq!(split_info("mpirun: noise"), None);
    }
}
