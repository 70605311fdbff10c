//! nccl-tests' text output (2.13 and later; older layouts work where their
//! header names the columns). What it reads:
//! - `# nThread 1 nGpus 1 minBytes ... warmup iters: 5 iters: 20 ...`
//!   starts a run section (a file may hold several runs back to back);
//! - `#  Rank  0 Group  0 Pid 1234 on host device  0 [...] NVIDIA ...`
//!   device lines: ranks are counted and hosts taken from them;
//! - `# Collective test starting: all_reduce_perf`, or any `xxx_perf`
//!   binary name (a command line echoed in the log, the file name), names
//!   the collective;
//! - the column header `#  size count type redop root time algbw busbw
//!   #wrong time ...`, which places every value, including the optional
//!   `timestamp` column (two tokens, `YYYY-MM-DD HH:MM:SS`, first or last)
//!   and the per-iteration columns (`i_min` ...), which are skipped;
//! - result rows: out-of-place then in-place, each with its time and
//!   `#wrong` (a number, or `N/A` when checking was off).
//!
//! `mpirun --tag-output` prefixes (`[1,0]<stdout>:`) are removed first.
//! Lines that fit nowhere (NCCL INFO/WARN lines, banners) are skipped.

use super::{Given, Measured, Run, dtype_name, perf_collective, record, resolve_collective, run_id, time};
use crate::collective::Collective;
use crate::record::Record;
use crate::types::{BackendKind, Placement};

/// The layout of 2.13 to 2.19 without optional columns.
const DEFAULT_COLUMNS: [&str; 13] = [
    "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong",
];

#[derive(Default)]
struct Section {
    collective: Option<Collective>,
    /// (rank, host) from the device lines.
    ranks: Vec<(u64, Option<String>)>,
    iters: u64,
    warmup: u64,
    columns: Option<Vec<String>>,
    points: Vec<Measured>,
}

pub(super) fn parse(text: &str, name: &str, given: &Given) -> Result<Vec<Record>, String> {
    let mut sections: Vec<Section> = Vec::new();
    let mut pending: Option<Collective> = None;
    let mut version = String::new();
    let mut nccl_version = String::new();
    for raw in text.lines() {
        let line = strip_tag(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(c) = perf_collective(line) {
            pending = Some(c);
            if let Some(s) = sections.last_mut().filter(|s| s.points.is_empty()) {
                s.collective = Some(c);
            }
        }
        if let Some(rest) = line.strip_prefix("NCCL version") {
            nccl_version = format!("NCCL {}", rest.trim());
            continue;
        }
        if let Some(body) = line.strip_prefix('#') {
            let body = body.trim();
            let words: Vec<&str> = body.split_whitespace().collect();
            match words.as_slice() {
                ["nThread", ..] => sections.push(Section {
                    collective: pending,
                    iters: iters_after(&words, None).unwrap_or(0),
                    warmup: iters_after(&words, Some("warmup")).unwrap_or(0),
                    ..Section::default()
                }),
                ["Rank", rank, rest @ ..] => {
                    if let Ok(rank) = rank.parse::<u64>() {
                        let host = rest
                            .iter()
                            .position(|w| *w == "on")
                            .and_then(|i| rest.get(i + 1))
                            .map(|h| h.to_string());
                        current(&mut sections, pending).ranks.push((rank, host));
                    }
                }
                ["nccl-tests", "version", v, ..] => version = format!("nccl-tests {v}"),
                _ if words.contains(&"size") && words.contains(&"count") => {
                    current(&mut sections, pending).columns = Some(words.iter().map(|w| w.to_string()).collect());
                }
                _ => {}
            }
            continue;
        }
        let tokens = merge_timestamps(line.split_whitespace().collect());
        let section = current(&mut sections, pending);
        if let Some(points) = row(&tokens, section.columns.as_deref()) {
            section.points.extend(points);
        }
    }

    let with_points: Vec<Section> = sections.into_iter().filter(|s| !s.points.is_empty()).collect();
    if with_points.is_empty() {
        return Err("no nccl-tests result rows found (expected the output of an nccl-tests *_perf binary)".into());
    }
    let backend_version = match (version.is_empty(), nccl_version.is_empty()) {
        (false, false) => format!("{version}, {nccl_version}"),
        (false, true) => version,
        (true, false) => nccl_version,
        (true, true) => "nccl-tests".into(),
    };
    let count = with_points.len();
    let mut records = Vec::new();
    for (i, s) in with_points.into_iter().enumerate() {
        let collective = resolve_collective(given, s.collective, name)?;
        let mut ranks = s.ranks.clone();
        ranks.sort_by_key(|r| r.0);
        ranks.dedup_by_key(|r| r.0);
        let nranks = match given.nranks {
            Some(n) => n,
            None if !ranks.is_empty() => ranks.len() as u64,
            None => {
                return Err("no '#  Rank N ... device' lines to count the ranks from: pass --nranks N".into());
            }
        };
        let hosts: Vec<String> = ranks.iter().filter_map(|r| r.1.clone()).collect();
        let run = Run {
            run_id: run_id("nccl-tests", name, i, count),
            backend: BackendKind::Nccl,
            backend_version: backend_version.clone(),
            collective,
            nranks,
            hosts: if hosts.len() == ranks.len() { hosts } else { Vec::new() },
            iters: s.iters,
            warmup: s.warmup,
            timestamp: String::new(),
        };
        for m in &s.points {
            records.push(record(&run, m)?);
        }
    }
    Ok(records)
}

fn current(sections: &mut Vec<Section>, pending: Option<Collective>) -> &mut Section {
    if sections.is_empty() {
        sections.push(Section {
            collective: pending,
            ..Section::default()
        });
    }
    let last = sections.len() - 1;
    &mut sections[last]
}

/// Removes `[1,0]<stdout>:` that `mpirun --tag-output` puts before lines.
fn strip_tag(line: &str) -> &str {
    match line.find("]<stdout>:") {
        Some(i) if line.trim_start().starts_with('[') => &line[i + "]<stdout>:".len()..],
        _ => line,
    }
}

/// The number after `iters:`, the plain one or the one after `prefix`
/// (`warmup iters: 5 iters: 20 agg iters: 1`).
fn iters_after(words: &[&str], prefix: Option<&str>) -> Option<u64> {
    words.windows(3).find_map(|w| {
        let matches = match prefix {
            Some(p) => w[0] == p && w[1] == "iters:",
            None => w[1] == "iters:" && w[0] != "warmup" && w[0] != "agg",
        };
        if matches { w[2].parse().ok() } else { None }
    })
}

/// Joins `2025-10-14` `12:00:01` into one token.
fn merge_timestamps(tokens: Vec<&str>) -> Vec<String> {
    let is_date = |t: &str| t.len() == 10 && t.as_bytes().get(4) == Some(&b'-') && t.as_bytes().get(7) == Some(&b'-');
    let is_time = |t: &str| t.len() == 8 && t.as_bytes().get(2) == Some(&b':') && t.as_bytes().get(5) == Some(&b':');
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    let mut i = 0;
    while i < tokens.len() {
        if is_date(tokens[i]) && tokens.get(i + 1).is_some_and(|t| is_time(t)) {
            out.push(format!("{} {}", tokens[i], tokens[i + 1]));
            i += 2;
        } else {
            out.push(tokens[i].to_string());
            i += 1;
        }
    }
    out
}

/// The out-of-place and in-place points of one result row, or None when
/// the line is not one.
fn row(tokens: &[String], columns: Option<&[String]>) -> Option<Vec<Measured>> {
    let default: Vec<String> = DEFAULT_COLUMNS.iter().map(|c| c.to_string()).collect();
    let columns = columns.unwrap_or(&default);
    if tokens.len() != columns.len() {
        return None;
    }
    let at = |name: &str| columns.iter().position(|c| c == name).and_then(|i| tokens.get(i));
    let nth = |names: &[&str], n: usize| {
        columns
            .iter()
            .enumerate()
            .filter(|(_, c)| names.contains(&c.as_str()))
            .nth(n)
            .and_then(|(i, _)| tokens.get(i))
    };
    let size_bytes: u64 = at("size")?.parse().ok()?;
    let count: u64 = at("count").and_then(|c| c.parse().ok()).unwrap_or(0);
    let dtype = dtype_name(at("type").map_or("float", String::as_str));
    let op = at("redop").map_or("none", String::as_str).to_ascii_lowercase();
    let root: i64 = match at("root") {
        Some(r) => r.parse().ok()?,
        None => -1,
    };
    let timestamp = at("timestamp").cloned();
    let mut points = Vec::new();
    for (n, placement) in Placement::BOTH.into_iter().enumerate() {
        let Some(t) = nth(&["time", "cputime"], n).and_then(|t| time(t)) else {
            continue;
        };
        let wrong = nth(&["#wrong", "error", "wrong"], n)
            .and_then(|w| super::number(w))
            .filter(|w| w.is_finite() && *w >= 0.0)
            .map(|w| w as u64);
        points.push(Measured {
            dtype: dtype.clone(),
            op: op.clone(),
            root,
            placement,
            size_bytes,
            count,
            time_us: t,
            time_min_us: t,
            time_max_us: t,
            wrong,
            timestamp: timestamp.clone(),
            iters: None,
        });
    }
    (!points.is_empty()).then_some(points)
}

#[cfg(test)]
mod tests {
    use super::*;

    const V2_13: &str = "\
# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   4242 on    node-a device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid   4243 on    node-a device  1 [0x0b] NVIDIA A100-SXM4-80GB
#  Rank  2 Group  0 Pid   4244 on    node-b device  0 [0x07] NVIDIA A100-SXM4-80GB
#  Rank  3 Group  0 Pid   4245 on    node-b device  1 [0x0b] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    20.00    0.00    0.00      0    19.50    0.00    0.00      0
        1024           256     float     sum      -1    25.00    0.04    0.06    N/A    24.00    0.04    0.06    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.03
";

    #[test]
    fn a_2_13_log_gives_both_placements_with_our_bandwidths() {
        let given = Given::default();
        let rows = parse(V2_13, "all_reduce_perf.log", &given).unwrap();
        assert_eq!(rows.len(), 4);
        let r = &rows[3];
        assert_eq!((r.collective.name(), r.placement.name()), ("all_reduce", "in_place"));
        assert_eq!(
            (r.size_bytes, r.count, r.nranks, r.nnodes, r.ranks_per_node),
            (1024, 256, 4, 2, 2)
        );
        assert_eq!((r.iters, r.warmup, r.wrong), (20, 5, None));
        assert_eq!(rows[0].wrong, Some(0));
        // 1024 B in 24 us, factor 2*3/4
        assert!((r.algbw_gbps - 1024.0 / 24e-6 / 1e9).abs() < 1e-12);
        assert!((r.busbw_gbps - r.algbw_gbps * 1.5).abs() < 1e-12);
    }

    #[test]
    fn without_a_collective_name_or_rank_lines_the_user_is_asked() {
        let e = parse(V2_13, "log.txt", &Given::default()).unwrap_err();
        assert!(e.contains("--collective"), "{e}");
        let no_ranks: String = V2_13
            .lines()
            .filter(|l| !l.contains("Rank"))
            .map(|l| format!("{l}\n"))
            .collect();
        let given = Given {
            collective: Some(Collective::AllReduce),
            nranks: None,
        };
        let e = parse(&no_ranks, "log.txt", &given).unwrap_err();
        assert!(e.contains("--nranks"), "{e}");
    }

    #[test]
    fn timestamps_and_tags_are_understood() {
        let text = "\
[1,0]<stdout>:# Collective test starting: broadcast_perf
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 64 maxBytes 64 step: 2(factor) warmup iters: 1 iters: 10 agg iters: 1 validation: 1 graph: 0
[1,0]<stdout>:#  Rank  0 Group  0 Pid  1 on h device  0 [0000:07:00] NVIDIA H100
[1,0]<stdout>:#  Rank  1 Group  0 Pid  2 on h device  1 [0000:0b:00] NVIDIA H100
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong           timestamp
[1,0]<stdout>:          64            16     float    none       0    10.00    0.01    0.01      0     9.00    0.01    0.01      0 2025-10-14 12:00:01
";
        let rows = parse(text, "x.log", &Given::default()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].collective.name(), "broadcast");
        assert_eq!(rows[0].timestamp, "2025-10-14 12:00:01");
        assert_eq!((rows[0].root, rows[0].op), (Some(0), None));
        assert_eq!(rows[1].time_us, 9.0);
    }

    #[test]
    fn text_without_result_rows_is_refused() {
        let e = parse("hello\nworld\n", "x", &Given::default()).unwrap_err();
        assert!(e.contains("no nccl-tests result rows"), "{e}");
    }
}
