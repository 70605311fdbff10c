//! PyTorch Flight Recorder dumps (TORCH_NCCL_TRACE_BUFFER_SIZE,
//! torch/csrc/distributed/c10d FlightRecorder: `version`, `pg_config`,
//! `pg_status`, `entries` of `profiling_name`, `collective_seq_id`,
//! `input_sizes`, `input_dtypes`, ...), as JSON, as the tutorial prints
//! them, or as a pickle printed by Python: recognised, so that replay names
//! the format instead of advising NCCL_DEBUG settings for a file that is no
//! NCCL log. A dump records no reduction, no root and one rank only (the
//! rank is in its file name), so it does not hold a replayable sequence.

/// One line saying what the file is and why it is not replayed, when it
/// is a Flight Recorder dump.
pub fn refusal(text: &str) -> Option<String> {
    let body: Vec<&str> = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty())
        .take(4000)
        .collect();
    let first = body.first()?.trim_start();
    if !first.starts_with('{') {
        return None;
    }
    let joined = body.join("\n");
    let keys = ["entries", "pg_config", "profiling_name", "collective_seq_id"];
    let found = keys
        .iter()
        .filter(|k| joined.contains(&format!("\"{k}\"")) || joined.contains(&format!("'{k}'")))
        .count();
    if found < 2 {
        return None;
    }
    let version = ["\"version\": \"", "'version': '"].iter().find_map(|k| {
        let at = joined.find(k)? + k.len();
        let end = joined[at..].find(['"', '\''])?;
        Some(joined[at..at + end].to_string())
    });
    let entries = joined.matches("profiling_name").count();
    Some(format!(
        "a PyTorch Flight Recorder dump{} ({entries} entries), not an NCCL debug log: it records one rank's collectives without their reduction, root or peers, so collbench replay does not read it; replay the job's NCCL log (NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,COLL), and use PyTorch's `python -m torch.distributed.flight_recorder.fr_trace` to match dumps of several ranks",
        version.map(|v| format!(" (format version {v})")).unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_in_json_and_python_literals_are_named_and_logs_are_not() {
        let json = "{\n  \"version\": \"2.10\",\n  \"pg_config\": {},\n  \"entries\": [{\"profiling_name\": \"nccl:all_reduce\", \"collective_seq_id\": 5}]\n}\n";
        let why = refusal(json).unwrap();
        assert!(
            why.starts_with("a PyTorch Flight Recorder dump (format version 2.10) (1 entries)"),
            "{why}"
        );
        let py = "# a comment\n{'version': '2.10',\n 'entries': [{'profiling_name': 'nccl:broadcast',\n   'collective_seq_id': 6}]}\n";
        assert!(refusal(py).unwrap().contains("format version 2.10"));
        assert_eq!(refusal("h:1:1 [0] NCCL INFO AllReduce: opCount 0"), None);
        assert_eq!(refusal("{\"results\": []}"), None);
        assert_eq!(refusal(""), None);
    }
}
