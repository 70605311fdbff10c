//! OSU micro-benchmark collective output (OMB 5.x to 7.x, blocking
//! collectives). What it reads:
//! - `# OSU MPI Allreduce Latency Test v7.3` (also `MPI-CUDA`, `NCCL` ...)
//!   starts a section and names the collective;
//! - `# Datatype: MPI_FLOAT.` (7.x); without it, reductions are float (the
//!   type OMB used before 7) and the others char (int8);
//! - the column header `# Size  Avg Latency(us)  [Min Latency(us)  Max
//!   Latency(us)  Iterations]  [Validation]  [P50 Tail Lat(us) ...]`,
//!   whose names are separated by two or more spaces;
//! - rows of numbers under it.
//!
//! OSU's avg/min/max are the mean, fastest and slowest rank (each rank's
//! mean over iterations), which are exactly collbench's `time_us`,
//! `time_min_us` and `time_max_us`. OSU never prints the rank count: it
//! comes from `--nranks`, or from an echoed command line that launches an
//! `osu_*` binary with `-np N` (`mpirun`, `srun -n` ...); when both are
//! there they must agree, and without either the file is refused.
//!
//! Launcher prefixes are removed first (`launch::content`); module-system
//! noise (`Lmod is automatically replacing ...`) and other lines before the
//! table are skipped; a line under a `# Size` header that starts with a
//! number but does not fit it is reported with its line number.
//!
//! Sizes: OSU's size for allgather, alltoall, gather and scatter is what
//! one rank contributes (per peer for alltoall), so collbench's size is n
//! times it; for allreduce, reduce, reduce_scatter and bcast it is already
//! the whole buffer.

use super::launch::{self, Command};
use super::{Given, Measured, Parsed, Run, Tool, dtype_name, number, record, resolve_collective, run_id, time};
use crate::collective::Collective;
use crate::types::{BackendKind, DType, Placement};

#[derive(Default)]
struct Section {
    collective: Option<Collective>,
    version: String,
    datatype: Option<String>,
    /// The echoed command line that launched this benchmark.
    command: Option<(usize, Command)>,
    /// (line, names) of the `# Size ...` header.
    header: Option<(usize, Vec<String>)>,
    /// (size, cells by column)
    rows: Vec<(u64, Vec<String>)>,
    /// (line, why) of lines under the header that were not rows.
    rejected: Vec<(usize, String)>,
}

pub(super) fn parse(text: &str, name: &str, given: &Given) -> Result<Parsed, String> {
    let sections = read(text)?;
    let with_rows: Vec<&Section> = sections.iter().filter(|s| !s.rows.is_empty()).collect();
    if with_rows.is_empty() {
        return Err(no_rows(&sections));
    }
    let warnings = sections
        .iter()
        .flat_map(|s| s.rejected.iter())
        .map(|(line, why)| format!("line {line}: {why}: not imported"))
        .collect();
    let count = with_rows.len();
    let mut records = Vec::new();
    for (i, s) in with_rows.into_iter().enumerate() {
        let collective = resolve_collective(Tool::Osu, given, s.collective, name)?;
        let nranks = rank_count(s, given)?;
        let reduction = collective.spec().is_reduction();
        let dtype = match &s.datatype {
            Some(t) => mpi_type(t),
            None if reduction => "float".to_string(),
            None => "int8".to_string(),
        };
        let elem = DType::parse(&dtype).map_or(1, |t| t.size_bytes() as u64);
        let run = Run {
            run_id: run_id("osu", name, text, i, count),
            backend: BackendKind::Mpi,
            backend_version: if s.version.is_empty() {
                "OSU".into()
            } else {
                format!("OSU {}", s.version)
            },
            collective,
            nranks,
            hosts: Vec::new(),
            iters: 0,
            warmup: 0,
            timestamp: String::new(),
        };
        for m in points(s, collective, nranks, &dtype, elem) {
            records.push(record(&run, &m)?);
        }
    }
    Ok(Parsed { records, warnings })
}

/// The points of a section's rows, sizes in collbench's semantics.
fn points(s: &Section, collective: Collective, nranks: u64, dtype: &str, elem: u64) -> Vec<Measured> {
    let reduction = collective.spec().is_reduction();
    let columns = s.header.as_ref().map(|h| h.1.as_slice()).unwrap_or_default();
    let col = |name: &str| columns.iter().position(|c| c.starts_with(name));
    let (avg, min, max, iters, valid) = (
        col("Avg").unwrap_or(1),
        col("Min"),
        col("Max"),
        col("Iterations"),
        col("Validation"),
    );
    let mut out = Vec::new();
    for (osu_size, cells) in &s.rows {
        let get = |i: Option<usize>| i.and_then(|i| cells.get(i)).map(String::as_str);
        let Some(time_us) = get(Some(avg)).and_then(time) else {
            continue;
        };
        let (size_bytes, count) = match collective {
            Collective::AllGather | Collective::Gather | Collective::Scatter | Collective::AllToAll => {
                (osu_size.saturating_mul(nranks), osu_size / elem)
            }
            Collective::ReduceScatter => (*osu_size, osu_size / elem / nranks.max(1)),
            _ => (*osu_size, osu_size / elem),
        };
        let m = Measured {
            dtype: dtype.to_string(),
            op: if reduction { "sum" } else { "none" }.into(),
            root: if collective.spec().has_root() { 0 } else { -1 },
            placement: Placement::OutOfPlace,
            size_bytes,
            count,
            time_us,
            time_min_us: get(min).and_then(time).unwrap_or(time_us).min(time_us),
            time_max_us: get(max).and_then(time).unwrap_or(time_us).max(time_us),
            // OSU says Pass or Fail, not how many: a failure counts as
            // at least one wrong element.
            wrong: get(valid).map(|v| u64::from(!v.eq_ignore_ascii_case("pass"))),
            timestamp: None,
            iters: get(iters)
                .and_then(number)
                .filter(|n| n.is_finite() && *n >= 0.0)
                .map(|n| n as u64),
            sample: None,
        };
        out.push(m);
    }
    out
}

/// Every line, sorted into one section per `# OSU ...` title.
fn read(text: &str) -> Result<Vec<Section>, String> {
    let mut sections: Vec<Section> = Vec::new();
    let mut command: Option<(usize, Command)> = None;
    for (i, raw) in text.lines().enumerate() {
        let no = i + 1;
        let line = launch::content(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(body) = line.strip_prefix('#') {
            let body = body.trim();
            if let Some(title) = body.strip_prefix("OSU ") {
                let (collective, version) = benchmark(title)?;
                sections.push(Section {
                    collective: Some(collective),
                    version,
                    command: command.take(),
                    ..Section::default()
                });
            } else if let Some(t) = body.strip_prefix("Datatype:") {
                current(&mut sections).datatype = Some(t.trim().trim_end_matches('.').to_string());
            } else if body.starts_with("Size") {
                let names = body
                    .split("  ")
                    .map(str::trim)
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect();
                current(&mut sections).header = Some((no, names));
            }
            continue;
        }
        if let Some(c) = launch::command(line, |w| w.starts_with("osu_")) {
            command = Some((no, c));
            continue;
        }
        row(current(&mut sections), no, line);
    }
    Ok(sections)
}

/// A line that is not a comment: a row when it is under a header, starts
/// with a size and has a value for every column the header named.
fn row(section: &mut Section, no: usize, line: &str) {
    let Some((_, names)) = &section.header else { return };
    let cells: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    let Some(size) = cells.first().and_then(|c| c.parse::<u64>().ok()) else {
        return;
    };
    let avg = names.iter().position(|c| c.starts_with("Avg")).unwrap_or(1);
    if cells.len() != names.len() {
        let why = format!("{} values where the '# Size' header names {}", cells.len(), names.len());
        section.rejected.push((no, why));
    } else if let Some(bad) = cells.get(avg).filter(|c| time(c).is_none()) {
        section.rejected.push((no, format!("'{bad}' is not a latency")));
    } else {
        section.rows.push((size, cells));
    }
}

fn no_rows(sections: &[Section]) -> String {
    for s in sections {
        if let (Some((header, _)), Some((line, why))) = (&s.header, s.rejected.first()) {
            return format!(
                "the OSU '# Size' header (line {header}) was found, but none of the {} rows under it could be \
                 read; the first, line {line}: {why}",
                s.rejected.len()
            );
        }
    }
    "no OSU result rows found (expected '# OSU MPI ... Latency Test' output with a '# Size' table)".into()
}

/// `--nranks`, else the `-np` of the echoed command line; they must agree.
fn rank_count(s: &Section, given: &Given) -> Result<u64, String> {
    let command = s.command.as_ref().and_then(|(line, c)| c.processes.map(|n| (*line, n)));
    match (given.nranks, command) {
        (Some(n), Some((line, c))) if n != c => Err(format!(
            "--nranks {n}, but the command line at line {line} starts {c} processes"
        )),
        (Some(n), _) | (None, Some((_, n))) => Ok(n),
        (None, None) => Err(
            "OSU output does not record the rank count, and no echoed command line (mpirun -np N ...) says it: \
             pass --nranks N (the -np of the run)"
                .into(),
        ),
    }
}

fn current(sections: &mut Vec<Section>) -> &mut Section {
    if sections.is_empty() {
        sections.push(Section::default());
    }
    let last = sections.len() - 1;
    &mut sections[last]
}

/// `MPI-CUDA Allreduce Latency Test v7.3` -> (all_reduce, "v7.3").
fn benchmark(title: &str) -> Result<(Collective, String), String> {
    let (name, rest) = title
        .split_once(" Latency Test")
        .ok_or_else(|| format!("'# OSU {title}' is not a collective latency test collbench can import"))?;
    // Drop the first word: MPI, MPI-CUDA, NCCL, ...
    let name = name.split_once(' ').map_or("", |(_, n)| n).trim();
    let collective = match name {
        "Allreduce" => Collective::AllReduce,
        "Allgather" => Collective::AllGather,
        "All-to-All Personalized Exchange" | "Alltoall" => Collective::AllToAll,
        "Broadcast" => Collective::Broadcast,
        "Reduce" => Collective::Reduce,
        "Reduce_scatter" => Collective::ReduceScatter,
        "Gather" => Collective::Gather,
        "Scatter" => Collective::Scatter,
        other => {
            return Err(format!(
                "OSU benchmark '{other}' is not one collbench imports (blocking allreduce, allgather, alltoall, \
                 bcast, reduce, reduce_scatter, gather, scatter)"
            ));
        }
    };
    Ok((collective, rest.trim().to_string()))
}

/// `MPI_FLOAT` -> float, `MPI_CHAR` -> int8; others lower-cased.
fn mpi_type(t: &str) -> String {
    let name = t.trim().trim_start_matches("MPI_");
    let mapped = match name {
        "CHAR" | "SIGNED_CHAR" | "INT8_T" | "BYTE" => "int8",
        "UNSIGNED_CHAR" | "UINT8_T" => "uint8",
        "INT" | "INT32_T" => "int32",
        "UNSIGNED" | "UINT32_T" => "uint32",
        "LONG" | "LONG_LONG" | "LONG_LONG_INT" | "INT64_T" => "int64",
        "UNSIGNED_LONG" | "UNSIGNED_LONG_LONG" | "UINT64_T" => "uint64",
        other => return dtype_name(other),
    };
    mapped.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(n: u64) -> Given {
        Given {
            collective: None,
            nranks: Some(n),
        }
    }

    #[test]
    fn the_full_format_gives_the_rank_spread() {
        let text = "\n# OSU MPI Allreduce Latency Test v7.3\n# Datatype: MPI_FLOAT.\n\
# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n\
4                       1.50              1.20              1.80        1000\n\
1048576               200.00            180.00            220.00         100\n";
        let rows = parse(text, "x.txt", &given(4)).unwrap().records;
        assert_eq!(rows.len(), 2);
        let r = &rows[1];
        assert_eq!(
            (r.collective.name(), r.dtype.name(), r.op.map_or("none", |o| o.name())),
            ("all_reduce", "float", "sum")
        );
        assert_eq!((r.size_bytes, r.count, r.iters), (1 << 20, 1 << 18, 100));
        assert_eq!((r.time_us, r.time_min_us, r.time_max_us), (200.0, 180.0, 220.0));
        assert_eq!(r.backend_version, "OSU v7.3");
        assert!((r.busbw_gbps - (1 << 20) as f64 / 200e-6 / 1e9 * 1.5).abs() < 1e-12);
    }

    #[test]
    fn per_rank_sizes_become_totals() {
        let text = "# OSU MPI All-to-All Personalized Exchange Latency Test v5.9\n\
# Size       Avg Latency(us)\n1024                   10.00\n";
        let r = &parse(text, "a2a", &given(8)).unwrap().records[0];
        assert_eq!((r.collective.name(), r.dtype.name()), ("alltoall", "int8"));
        assert_eq!((r.size_bytes, r.count, r.root), (8192, 1024, None));
        let text = "# OSU MPI Gather Latency Test v7.0\n# Size       Avg Latency(us)\n64   3.00\n";
        let r = &parse(text, "g", &given(2)).unwrap().records[0];
        assert_eq!((r.size_bytes, r.root), (128, Some(0)));
        let text = "# OSU MPI Reduce_scatter Latency Test v5.9\n# Size       Avg Latency(us)\n64   3.00\n";
        let r = &parse(text, "rs", &given(4)).unwrap().records[0];
        assert_eq!((r.size_bytes, r.count), (64, 4));
    }

    #[test]
    fn validation_and_tail_latency_columns_are_placed_by_the_header() {
        let text = "# OSU MPI Broadcast Latency Test v7.4\n# Datatype: MPI_CHAR.\n\
# Size       Avg Latency(us)        Validation   P50 Tail Lat(us)   P90 Tail Lat(us)\n\
1                       2.42              Pass               2.40               2.60\n\
2                       2.50              Fail               2.45               2.70\n";
        let rows = parse(text, "b", &given(2)).unwrap().records;
        assert_eq!(rows.iter().map(|r| r.wrong).collect::<Vec<_>>(), [Some(0), Some(1)]);
        assert_eq!(rows[0].time_us, 2.42);
    }

    #[test]
    fn missing_rank_count_and_foreign_benchmarks_are_explained() {
        let text = "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n4   1.0\n";
        assert!(parse(text, "x", &Given::default()).unwrap_err().contains("--nranks"));
        let e = parse("# OSU MPI Latency Test v7.3\n", "x", &given(2)).unwrap_err();
        assert!(e.contains("not one collbench imports"), "{e}");
        let e = parse("# OSU MPI Non-blocking Allreduce Latency Test v7.3\n", "x", &given(2)).unwrap_err();
        assert!(e.contains("Non-blocking"), "{e}");
        assert!(
            parse("1 2 3\n", "x", &given(2))
                .unwrap_err()
                .contains("no OSU result rows")
        );
        let headless = "# Size       Avg Latency(us)\n4   1.0\n";
        assert!(parse(headless, "x", &given(2)).unwrap_err().contains("--collective"));
    }

    #[test]
    fn an_echoed_launch_command_gives_the_rank_count_and_module_noise_is_skipped() {
        let text = "Lmod is automatically replacing \"cray-mpich/8.1.27\" with\n\"cray-mpich-abi/8.1.27\".\n\n\
$ ssh node1 mpirun --mca coll_tuned_allreduce_algorithm 4 -np 4 -pernode osu/bin/osu_allreduce\n\
# OSU MPI Allreduce Latency Test v5.7.1\n# Size       Avg Latency(us)\n4   74.85\n1048576   2242.14\n";
        let p = parse(text, "x", &Given::default()).unwrap();
        assert!(p.warnings.is_empty(), "{:?}", p.warnings);
        assert_eq!(p.records.len(), 2);
        assert_eq!(
            (p.records[1].nranks, p.records[1].backend_version.as_str()),
            (4, "OSU v5.7.1")
        );
        let e = parse(text, "x", &given(8)).unwrap_err();
        assert!(
            e.contains("--nranks 8, but the command line at line 4 starts 4 processes"),
            "{e}"
        );
        // srun --label prefixes are removed like nccl-tests'
        let labelled: String = text.lines().map(|l| format!(" 0: {l}\n")).collect();
        assert_eq!(parse(&labelled, "x", &Given::default()).unwrap().records.len(), 2);
    }

    #[test]
    fn rows_that_do_not_fit_the_header_are_reported_and_a_table_of_only_those_is_refused() {
        let text = "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n4   1.0\n8   2.0  3.0\n16\n";
        let p = parse(text, "x", &given(2)).unwrap();
        assert_eq!(p.records.len(), 1);
        assert_eq!(
            p.warnings,
            [
                "line 4: 3 values where the '# Size' header names 2: not imported",
                "line 5: 1 values where the '# Size' header names 2: not imported"
            ]
        );
        let text = "# OSU MPI Allreduce Latency Test v7.3\n# Size       Avg Latency(us)\n4   x\n";
        let e = parse(text, "x", &given(2)).unwrap_err();
        assert!(
            e.starts_with("the OSU '# Size' header (line 2) was found, but none of the 1 rows"),
            "{e}"
        );
        assert!(e.ends_with("line 3: 'x' is not a latency"), "{e}");
    }
}
