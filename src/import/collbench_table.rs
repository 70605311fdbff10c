//! collbench's own table (what `collbench run` prints on standard output),
//! read back into the rows its CSV holds: for a run whose CSV was lost, or
//! a log kept from a job's standard output. docs/import.md says what comes
//! back and what cannot.
//!
//! What it reads, by the words `report::table` writes:
//! - `# collbench VERSION  run RUN_ID` starts a run (several runs may
//!   follow each other in one file);
//! - the header lines `backend`, `ranks`, `measure`, `alltoallv`,
//!   `transport`, `label` and the `#  Rank N on HOST pid P` lines;
//! - `# COLLECTIVE (hierarchy MODE)` starts a section, `# cycle N` a sweep
//!   of a `-N` run;
//! - the column-name line (`# size count type redop root time ...`),
//!   which places every value by name, twice: out-of-place, then in-place;
//! - result rows: one record per placement whose block is not all `-`.
//!
//! Times come back as printed (two decimals); algbw and busbw are
//! recomputed from them with our formulas, as for every import. What the
//! table does not print (the spread across ranks, precision, method
//! columns) stays empty, and `time_min_us`/`time_max_us` equal `time_us`.

use super::{Given, Measured, Parsed, Run, record};
use crate::collective::Collective;
use crate::record::Record;
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::{AlgoPin, AlgoSource, BackendKind, Chosen, Placement};

/// Whether `text` is a collbench table: its first non-empty line is our
/// banner.
pub(super) fn is_ours(text: &str) -> bool {
    text.lines()
        .map(|l| super::launch::content(l).trim())
        .find(|l| !l.is_empty())
        .is_some_and(|l| banner(l).is_some())
}

/// `# collbench 0.1.0  run ID` -> (version, run id).
fn banner(line: &str) -> Option<(String, String)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["#", "collbench", version, "run", id, ..] => Some((version.to_string(), id.to_string())),
        _ => None,
    }
}

/// Everything the header of one run says.
#[derive(Clone, Debug, Default)]
struct Header {
    version: String,
    run_id: String,
    backend: Option<BackendKind>,
    backend_version: String,
    /// Where the `algo` cells came from, as the backend note says
    /// (`AlgoSource::in_header`); `None` where the run recorded nothing.
    algo_source: Option<AlgoSource>,
    nranks: Option<u64>,
    nnodes: u64,
    ranks_per_node: u64,
    /// Each listed rank's host, by rank.
    rank_hosts: Vec<(u64, String)>,
    iters: u64,
    warmup: u64,
    transport: Option<Profile>,
    observed: String,
    label: Option<String>,
    traffic: Option<String>,
    /// `--split`: the backend note names the groups (`report::table`).
    split: bool,
    /// The run's CSV, as the `csv` header line names it.
    csv: Option<String>,
}

/// Where rows are: the section, the sweep and the columns.
#[derive(Clone, Debug, Default)]
struct Place {
    collective: Option<Collective>,
    hierarchy: Hierarchy,
    cycle: Option<u64>,
    /// The names of one placement's block (`time algbw busbw ... #wrong`).
    block: Vec<String>,
    /// `-S`: each row ends with its date and time.
    timestamped: bool,
    /// `--algo-record`: an `algo` column after the two blocks.
    algo: bool,
    /// `--algo`/`--proto`: the section's pin (`# all_reduce (hierarchy
    /// flat) pinned tree`).
    pin: Option<AlgoPin>,
}

pub(super) fn parse(text: &str, name: &str, given: &Given) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut header: Option<Header> = None;
    let mut place = Place::default();
    let mut runs = 0;
    let mut split_rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let line = super::launch::content(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some((version, run_id)) = banner(line) {
            runs += 1;
            header = Some(Header {
                version,
                run_id,
                ..Header::default()
            });
            place = Place::default();
            continue;
        }
        let Some(h) = header.as_mut() else {
            continue;
        };
        // a --split run's rows: its `# gN` group rows and its `all` rows
        if h.split && (group_row(line) || !line.starts_with('#')) {
            split_rows.push((no, h.csv.clone()));
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            read_comment(h, &mut place, comment);
            continue;
        }
        match read_row(h, &place, line, given) {
            Ok(records) => parsed.records.extend(records),
            Err(why) => parsed.warnings.push(format!("line {no}: {why}: not imported")),
        }
    }
    parsed.warnings.extend(split_warnings(&split_rows));
    if runs == 0 {
        return Err(format!(
            "{name} is not a collbench table: its first line is not '# collbench VERSION  run ID'"
        ));
    }
    // one sweep has no `# cycle` heading; several say how many there were
    let mut sweeps: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for r in &parsed.records {
        let most = sweeps.entry(r.run_id.clone()).or_default();
        *most = (*most).max(r.cycle.unwrap_or(1));
    }
    for r in &mut parsed.records {
        r.cycle = r.cycle.or(Some(1));
        r.samples = sweeps.get(&r.run_id).copied();
    }
    if parsed.records.is_empty() {
        let first = parsed.warnings.first().cloned().unwrap_or_default();
        return Err(format!("no result rows found in the collbench table {first}")
            .trim_end()
            .to_string());
    }
    Ok(parsed)
}

/// A `--split` run's group row: `# g0     4096   1024  float ...`.
fn group_row(line: &str) -> bool {
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        ["#", group, size, ..] => {
            group
                .strip_prefix('g')
                .is_some_and(|g| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit()))
                && size.parse::<u64>().is_ok()
        }
        _ => false,
    }
}

/// One warning per block of consecutive lines of a `--split` run's rows
/// (line, the run's CSV), which are not imported: the table prints
/// neither a group's rank count nor the `all` row's bus factor (rank 0's
/// group's size, docs/csv.md), so no row of it would be exact.
fn split_warnings(lines: &[(usize, Option<String>)]) -> Vec<String> {
    let mut blocks: Vec<(usize, usize, &Option<String>)> = Vec::new();
    for (no, csv) in lines {
        match blocks.last_mut() {
            Some(last) if last.1 + 1 == *no => last.1 = *no,
            _ => blocks.push((*no, *no, csv)),
        }
    }
    blocks
        .into_iter()
        .map(|(first, last, csv)| {
            let csv = csv.as_deref().unwrap_or("--csv");
            format!(
                "lines {first}-{last}: {} rows of a --split run (its '# gN' group rows and 'all' rows) are not \
                 imported: the table prints neither a group's rank count nor the 'all' row's bus factor; import \
                 the run's CSV ({csv}), which has them",
                last - first + 1
            )
        })
        .collect()
}

/// One `#` line of the header or between tables.
fn read_comment(h: &mut Header, place: &mut Place, comment: &str) {
    let words: Vec<&str> = comment.split_whitespace().collect();
    let field = |key: &str| {
        let rest = comment.trim_start().strip_prefix(key)?;
        rest.trim_start().strip_prefix(':').map(str::trim)
    };
    if let Some(v) = field("backend") {
        // `mpi (Open MPI v4.1.4)  [note]`
        let (kind, rest) = v.split_once(' ').unwrap_or((v, ""));
        h.backend = BackendKind::parse(kind);
        let rest = rest.trim();
        h.algo_source = AlgoSource::in_header(rest);
        h.split = rest.contains("--split ");
        if let Some(inside) = rest.strip_prefix('(') {
            h.backend_version = inside.split_once(')').map_or(inside, |(a, _)| a).to_string();
        }
    } else if let Some(v) = field("ranks") {
        // `3 on 1 node (3 per node), host: vm`
        let w: Vec<&str> = v.split_whitespace().collect();
        h.nranks = w.first().and_then(|n| n.parse().ok());
        h.nnodes = w.get(2).and_then(|n| n.parse().ok()).unwrap_or(0);
        h.ranks_per_node = v
            .split_once('(')
            .and_then(|(_, r)| r.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
    } else if let Some(v) = field("measure") {
        let number_after = |key: &str| {
            v.split(',')
                .find_map(|part| part.trim().strip_prefix(key))
                .and_then(|n| n.trim().parse().ok())
        };
        h.iters = number_after("iters ").unwrap_or(0);
        h.warmup = number_after("warmup ").unwrap_or(0);
    } else if let Some(v) = field("alltoallv") {
        h.traffic = traffic(v);
    } else if let Some(v) = field("transport") {
        // `auto, observed ob1/tcp+vader   control plane: ...`
        let (profile, rest) = v.split_once(',').unwrap_or((v, ""));
        h.transport = Profile::parse(profile.trim());
        let observed = rest.trim().strip_prefix("observed").unwrap_or("").trim_start();
        h.observed = observed.split("   ").next().unwrap_or("").trim().to_string();
    } else if let Some(v) = field("csv") {
        h.csv = Some(v.to_string());
    } else if let Some(v) = field("label") {
        h.label = Some(v.to_string());
    } else if let ["Rank", rank, "on", host, ..] = words.as_slice() {
        if let Ok(rank) = rank.parse() {
            h.rank_hosts.push((rank, host.to_string()));
        }
    } else if let ["cycle", n] = words.as_slice() {
        place.cycle = n.parse().ok();
    } else if let [collective, "(hierarchy", mode, pinned @ ..] = words.as_slice()
        && let Some(mode) = mode.strip_suffix(')')
    {
        place.collective = Collective::parse(collective);
        place.hierarchy = Hierarchy::parse(mode).unwrap_or_default();
        place.pin = match pinned {
            ["pinned", pin] => AlgoPin::parse(pin),
            _ => None,
        };
        place.block.clear();
    } else if let ["size", "count", "type", "redop", "root", rest @ ..] = words.as_slice() {
        let (rest, timestamped) = match rest {
            [blocks @ .., "timestamp"] => (blocks, true),
            _ => (rest, false),
        };
        let (rest, algo) = match rest {
            [blocks @ .., "algo"] => (blocks, true),
            _ => (rest, false),
        };
        if !rest.is_empty() && rest.len() % 2 == 0 {
            place.block = rest[..rest.len() / 2].iter().map(|s| s.to_string()).collect();
            place.timestamped = timestamped;
            place.algo = algo;
        }
    }
}

/// The CSV's `traffic` of the header's alltoallv line: `spread 1 (...)` ->
/// `spread=1`; `traffic matrix FILE (NxN file, ..., scale S)` ->
/// `matrix=FILE`, with `*S` where S is not 1.
fn traffic(v: &str) -> Option<String> {
    if let Some(rest) = v.strip_prefix("spread ") {
        // the default, spread 1, has no column (`Traffic::column`)
        let spread = rest.split_whitespace().next()?;
        return (spread.parse::<f64>() != Ok(1.0)).then(|| format!("spread={spread}"));
    }
    let rest = v.strip_prefix("traffic matrix ")?;
    let (file, details) = rest.rsplit_once(" (")?;
    let scale = details.rsplit_once("scale ")?.1.trim_end_matches(')').trim();
    Some(match scale.parse::<f64>() {
        Ok(1.0) => format!("matrix={file}"),
        _ => format!("matrix={file}*{scale}"),
    })
}

/// The records of one result row (one per placement measured).
fn read_row(h: &Header, place: &Place, line: &str, given: &Given) -> Result<Vec<Record>, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let collective = place
        .collective
        .ok_or("a line outside any '# COLLECTIVE (hierarchy MODE)' section")?;
    if place.block.is_empty() {
        return Err("a line before its table's column names".into());
    }
    let want = 5 + 2 * place.block.len() + usize::from(place.algo) + if place.timestamped { 2 } else { 0 };
    if words.len() != want {
        return Err(format!("{} values where the table has {want} columns", words.len()));
    }
    let int = |i: usize, what: &str| {
        words[i]
            .parse::<u64>()
            .map_err(|_| format!("'{}' is not a {what}", words[i]))
    };
    let (size_bytes, count) = (int(0, "size")?, int(1, "count")?);
    let root: i64 = words[4].parse().map_err(|_| format!("'{}' is not a root", words[4]))?;
    let nranks = h
        .nranks
        .or(given.nranks)
        .ok_or("no '# ranks' line in the header to say how many ranks ran: pass --nranks N")?;
    let run = run_of(h, place, &words, want, collective, nranks)?;
    let mut records = Vec::new();
    for (k, placement) in [Placement::OutOfPlace, Placement::InPlace].into_iter().enumerate() {
        let cells = &words[5 + k * place.block.len()..5 + (k + 1) * place.block.len()];
        if cells.iter().all(|c| *c == "-") {
            continue;
        }
        let cell = |name: &str| {
            place
                .block
                .iter()
                .position(|n| n == name)
                .map(|j| cells[j])
                .filter(|c| *c != "-")
        };
        let number = |name: &str| cell(name).and_then(super::number);
        let time_us = cell("time")
            .and_then(super::time)
            .ok_or_else(|| format!("no usable {} time", placement.name()))?;
        let wrong = match cell("#wrong") {
            None | Some("N/A") => None,
            Some(w) => Some(w.parse::<u64>().map_err(|_| format!("'{w}' is not a #wrong count"))?),
        };
        let m = Measured {
            dtype: words[2].to_string(),
            op: words[3].to_string(),
            root,
            placement,
            size_bytes,
            count,
            wrong,
            ..Measured::timed(time_us)
        };
        let mut r = record(&run, &m)?;
        from_header(&mut r, h, place, &run);
        r.time_p50_us = number("p50");
        r.time_p99_us = number("p99").or_else(|| number("i_p99"));
        r.time_iter_min_us = number("i_min");
        r.time_iter_max_us = number("i_max");
        r.time_cv = number("cv").or_else(|| number("i_cv%")).map(|c| c / 100.0);
        if place.algo {
            let cell = words[5 + 2 * place.block.len()];
            let cell = cell
                .split_once('|')
                .map_or(cell, |(oop, ip)| if k == 0 { oop } else { ip });
            algo_cell(&mut r, cell, h.algo_source)?;
            r.busbw_algo_gbps = r.busbw_of_algorithm();
        }
        records.push(r);
    }
    Ok(records)
}

/// A row's `algo` cell as the table prints it (`report::table`):
/// `ring/ll`, `mixed/simple`, `unknown`, `pinned`, or `-` (nothing
/// recorded). The cell does not say where a choice came from: the run's
/// recording source (`recorded`, from the header) on a flat row, as the
/// run records flat rows only (`engine::row`); a pin's values where the
/// run recorded nothing or the row is hierarchical (a pinned flat row
/// whose launches went unrecorded reads as recorded: the table cannot
/// tell them apart); the TUNING lines where a header predates the words
/// (the log was the only source then).
fn algo_cell(r: &mut Record, cell: &str, recorded: Option<AlgoSource>) -> Result<(), String> {
    let bad = || format!("'{cell}' is not an algo cell (ALGO/PROTO, unknown or -)");
    match cell {
        "-" => {}
        "unknown" => r.algo_source = Some(AlgoSource::Unknown),
        // a pin of one of the two, unrecorded: the pin's value
        "pinned" => {
            r.algo_source = Some(AlgoSource::Pinned);
            r.algo = r.algo_pin.and_then(|p| p.algo).map(Chosen::One);
            r.proto = r.algo_pin.and_then(|p| p.proto).map(Chosen::One);
        }
        _ => {
            let (algo, proto) = cell.split_once('/').ok_or_else(bad)?;
            r.algo = Some(Chosen::parse(algo).ok_or_else(bad)?);
            r.proto = Some(Chosen::parse(proto).ok_or_else(bad)?);
            r.algo_source = Some(match (recorded, r.algo_pin) {
                (Some(source), _) if r.hierarchy.is_flat() => source,
                (_, Some(_)) => AlgoSource::Pinned,
                (Some(source), None) => source,
                (None, None) => AlgoSource::Log,
            });
        }
    }
    Ok(())
}

/// The run of a row (of `want` words): the header's, the row's collective,
/// `nranks` ranks, and its timestamp (the row's own with `-S`).
fn run_of(
    h: &Header,
    place: &Place,
    words: &[&str],
    want: usize,
    collective: Collective,
    nranks: u64,
) -> Result<Run, String> {
    // every rank's host where the header lists them all
    let mut hosts: Vec<(u64, String)> = h.rank_hosts.clone();
    hosts.sort();
    let hosts: Vec<String> = if hosts.len() as u64 == nranks && hosts.iter().enumerate().all(|(i, r)| r.0 == i as u64) {
        hosts.into_iter().map(|(_, host)| host).collect()
    } else {
        Vec::new()
    };
    Ok(Run {
        run_id: h.run_id.clone(),
        backend: h.backend.ok_or("the header names no backend")?,
        backend_version: h.backend_version.clone(),
        collective,
        nranks,
        hosts,
        iters: h.iters,
        warmup: h.warmup,
        timestamp: match words.get(want - 2..).filter(|_| place.timestamped) {
            // `-S`: the row's own `2026-12-02 13:10:45`
            Some([date, time]) => super::utc_timestamp(&format!("{date} {time}")).unwrap_or_default(),
            _ => timestamp_of(&h.run_id),
        },
    })
}

/// A record's fields from the header and the row's section: hierarchy,
/// transport, host (rank 0's, where not every rank's is listed), nodes,
/// version, label, traffic (alltoallv) and cycle.
fn from_header(r: &mut Record, h: &Header, place: &Place, run: &Run) {
    r.hierarchy = place.hierarchy;
    r.algo_pin = place.pin;
    r.transport = h.transport.unwrap_or_default();
    if !h.observed.is_empty() {
        r.transport_observed = h.observed.clone();
    }
    if run.hosts.is_empty() {
        r.host = h
            .rank_hosts
            .iter()
            .find(|(k, _)| *k == 0)
            .map(|(_, host)| host.clone())
            .unwrap_or_default();
    }
    (r.nnodes, r.ranks_per_node) = (h.nnodes, h.ranks_per_node);
    r.collbench_version = Some(h.version.clone());
    r.label = h.label.clone();
    r.traffic = h.traffic.clone().filter(|_| run.collective == Collective::AllToAllV);
    r.cycle = place.cycle;
}

/// The run's start from its id (`20261202T124209Z-host-pid` ->
/// `2026-12-02T12:42:09Z`), as the CSV's `timestamp`; empty otherwise.
fn timestamp_of(run_id: &str) -> String {
    let b = run_id.as_bytes();
    let digits = |r: std::ops::Range<usize>| b.get(r).is_some_and(|s| s.iter().all(u8::is_ascii_digit));
    if b.len() >= 16 && digits(0..8) && b[8] == b'T' && digits(9..15) && b[15] == b'Z' {
        let s = &run_id[..16];
        format!(
            "{}-{}-{}T{}:{}:{}Z",
            &s[0..4],
            &s[4..6],
            &s[6..8],
            &s[9..11],
            &s[11..13],
            &s[13..15]
        )
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_run_s_rows_are_refused_with_a_warning_naming_its_csv() {
        // `run --split 'MOD 2'` on 4 ranks (report::table): group rows
        // `# gN` and the `all` rows, whose bus factor is rank 0's group's
        let split = "\
# collbench 0.1.0  run 20261206T144111Z-vm-7267
# backend   : mpi (Open MPI v4.1.4)  [auto: no CUDA driver, using mpi; --split 2 groups (MOD 2): 0 = ranks 0,2; 1 = ranks 1,3; row all: every rank's time, rank 0's group's size]
# ranks     : 4 on 1 node (4 per node), host: vm
# csv       : split.csv
# all_reduce (hierarchy flat)
#        size         count      type   redop    root       time    algbw    busbw  #wrong       time    algbw    busbw  #wrong
# g0     4096          1024     float     sum      -1      13.07     0.31     0.31       0      12.05     0.34     0.34       0
# g1     4096          1024     float     sum      -1      13.21     0.31     0.31       0      11.97     0.34     0.34       0
         4096          1024     float     sum      -1      13.14     0.31     0.31       0      12.01     0.34     0.34       0
# all_reduce flat      : 0.922 GB/s average bus bandwidth over 2 points
";
        let e = parse(split, "split.out", &Given::default()).unwrap_err();
        assert!(
            e.contains("lines 7-9: 3 rows of a --split run") && e.contains("import the run's CSV (split.csv)"),
            "{e}"
        );
        // with a plain run after it, that run imports and the split one is warned about
        let plain = TABLE.replace("20261202T124209Z-vm-28554", "20261202T124209Z-vm-1");
        let p = parse(&format!("{split}{plain}"), "two.out", &Given::default()).unwrap();
        assert!(p.records.iter().all(|r| r.run_id.ends_with("-vm-1")));
        let about_split: Vec<&String> = p.warnings.iter().filter(|w| w.contains("--split")).collect();
        assert_eq!(about_split.len(), 1, "{:?}", p.warnings);
        assert!(
            about_split[0].starts_with("lines 7-9: 3 rows of a --split run"),
            "{:?}",
            p.warnings
        );
    }

    const TABLE: &str = "\
# collbench 0.1.0  run 20261202T124209Z-vm-28554
# command   : collbench run --collectives all_reduce,alltoallv -b 1K -e 2K
# backend   : mpi (Open MPI v4.1.4)
# ranks     : 3 on 1 node (3 per node), host: vm
# label     : nightly
# measure   : iters 3, warmup 1, check 1, time reduction avg
# alltoallv : spread 0.5 (nccl-tests' generated traffic: 0 the same to every peer, 1 weighted by distance)
# transport : auto, observed ob1/tcp+vader   control plane: Open MPI v4.1.4, launcher mpirun
#
#  Rank    0 on vm pid 28554
#  Rank    1 on vm pid 28555
#  Rank    2 on vm pid 28556
#
# all_reduce (hierarchy flat)
#                                                                 out-of-place                           in-place
#        size         count      type   redop    root       time    algbw    busbw  #wrong       time    algbw    busbw  #wrong
#         (B)    (elements)                                 (us)   (GB/s)   (GB/s)               (us)   (GB/s)   (GB/s)
         1024           256     float     sum      -1      46.36     0.02     0.03       0      42.73     0.02     0.03       0
         2048           512     float     sum      -1    1.4e6     0.01     0.01       2          -        -        -       -
# all_reduce flat      : 0.047 GB/s average bus bandwidth over 3 points
#
# alltoallv (hierarchy flat)
#        size         count      type   redop    root       time    algbw    busbw  #wrong       time    algbw    busbw  #wrong
         1008            84     float    none      -1      97.16     0.04     0.03       0      65.33     0.12     0.08     N/A
         1008            84     float    none      -1      97.16     0.04
#
# Out of bounds values : 1 FAILED
# Avg bus bandwidth    : 0.065747
";

    #[test]
    fn every_row_of_a_table_comes_back_with_its_header() {
        assert!(is_ours(TABLE));
        let p = parse(TABLE, "t.txt", &Given::default()).unwrap();
        assert_eq!(p.records.len(), 5, "{:?}", p.warnings);
        assert_eq!(
            p.warnings,
            vec!["line 25: 7 values where the table has 13 columns: not imported"]
        );
        let r = &p.records[0];
        assert_eq!(r.run_id, "20261202T124209Z-vm-28554");
        assert_eq!(r.timestamp, "2026-12-02T12:42:09Z");
        assert_eq!(
            (r.backend, r.backend_version.as_str()),
            (BackendKind::Mpi, "Open MPI v4.1.4")
        );
        assert_eq!((r.nranks, r.nnodes, r.ranks_per_node, r.host.as_str()), (3, 1, 3, "vm"));
        assert_eq!((r.iters, r.warmup, r.time_us, r.wrong), (3, 1, 46.36, Some(0)));
        assert_eq!(r.transport_observed, "ob1/tcp+vader");
        assert_eq!(r.label.as_deref(), Some("nightly"));
        assert_eq!(r.traffic, None);
        // busbw recomputed: 1024 B in 46.36 us at 3 ranks, factor 4/3
        assert!((r.busbw_gbps - 1024.0 / 46.36e-6 / 1e9 * 4.0 / 3.0).abs() < 1e-12);
        // a wide time in an exponent, a block of `-` (no in-place row)
        assert_eq!((p.records[2].time_us, p.records[2].wrong), (1.4e6, Some(2)));
        assert_eq!(p.records[3].collective, Collective::AllToAllV);
        assert_eq!(p.records[3].traffic.as_deref(), Some("spread=0.5"));
        assert_eq!((p.records[4].placement, p.records[4].wrong), (Placement::InPlace, None));
    }

    #[test]
    fn what_is_not_a_table_is_refused_in_one_line() {
        assert!(!is_ours("# nccl-tests version 2.19.6\n"));
        let e = parse("hello\n", "x.txt", &Given::default()).unwrap_err();
        assert!(e.contains("not a collbench table"), "{e}");
        let e = parse(
            "# collbench 0.1.0  run X\n# backend   : mpi (v)\n",
            "x",
            &Given::default(),
        )
        .unwrap_err();
        assert!(e.starts_with("no result rows"), "{e}");
    }

    #[test]
    fn matrix_traffic_and_run_ids_read_back() {
        assert_eq!(traffic("spread 1 (nccl-tests' ...)"), None);
        assert_eq!(
            traffic("traffic matrix /tmp/m.txt (4x4 file, the top-left 3x3 used, scale 1)").as_deref(),
            Some("matrix=/tmp/m.txt")
        );
        assert_eq!(
            traffic("traffic matrix m (4x4 file, the top-left 3x3 used, scale 0.5)").as_deref(),
            Some("matrix=m*0.5")
        );
        assert_eq!(timestamp_of("nightly"), "");
    }
}
