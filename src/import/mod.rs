//! `collbench import`: other tools' output as collbench CSV rows, so that
//! old logs and new runs compare and plot together. One file per format:
//! `nccl_text` (nccl-tests' text output), `nccl_json` (its `-J` file) and
//! `osu` (OSU micro-benchmark collectives), `collbench_table` (our own
//! table, for a run whose CSV was lost); `nccl_log::decode` turns a file's
//! bytes into text first (UTF-16, BOMs, gzip) or names what it is instead
//! (the one decoder of logs, which the NCCL log reader shares); `launch`
//! reads what launchers add (line prefixes, echoed command lines).
//! docs/import.md is the user's account of every decision taken here.
//!
//! Parsers take the text as it is and return records plus warnings (one
//! line each, with the line number, for every line that looked like a
//! result and was not imported) or a one-line reason for refusing the
//! whole file; they never panic on any input (property-tested). Nothing is
//! dropped without a word, and a file whose rank count cannot be known is
//! refused rather than imported with a guessed one. Sizes are converted to
//! collbench's semantics (docs/bandwidth.md: the larger of one rank's buffers), and
//! algbw and busbw are recomputed with `record::bandwidth_gbps` and our bus
//! factors; the bandwidths a file printed are never copied.
//!
//! Imported rows say what is unknown instead of guessing: `transport` is
//! `auto` and `transport_observed` `unknown`; `nnodes` and `ranks_per_node`
//! are 0 when the file names no hosts; `warmup` is 0 when not recorded; and
//! `time_min_us`/`time_max_us` equal `time_us` when the tool records no
//! spread across ranks (nccl-tests), so `compare` judges such rows by the
//! threshold alone.

mod collbench_table;
mod launch;
mod nccl_json;
mod nccl_text;
mod osu;

use std::path::{Path, PathBuf};

use crate::collective::Collective;
use crate::error::Error;
use crate::record::{Record, bandwidth_gbps};
use crate::topology::Nodes;
use crate::types::{BackendKind, DType, Placement, ReduceOp, Source, known};

#[derive(Clone, Debug)]
pub struct ImportOptions {
    pub source: Source,
    pub files: Vec<PathBuf>,
    pub output: PathBuf,
    pub collective: Option<Collective>,
    pub nranks: Option<u64>,
    pub overwrite: bool,
}

/// What the user said on the command line, which wins over the file.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Given {
    pub collective: Option<Collective>,
    pub nranks: Option<u64>,
}

/// Everything a run section of a file says about all of its rows.
#[derive(Clone, Debug)]
pub(crate) struct Run {
    pub run_id: String,
    pub backend: BackendKind,
    pub backend_version: String,
    pub collective: Collective,
    pub nranks: u64,
    /// Host of every rank, in rank order; empty when the file names none.
    pub hosts: Vec<String>,
    pub iters: u64,
    pub warmup: u64,
    pub timestamp: String,
}

/// One point as measured, sizes already in collbench's semantics.
/// Importers write the point's own fields and `..Measured::timed(t)`.
#[derive(Clone, Debug, Default)]
pub(crate) struct Measured {
    pub dtype: String,
    pub op: String,
    pub root: i64,
    pub placement: Placement,
    pub size_bytes: u64,
    pub count: u64,
    pub time_us: f64,
    pub time_min_us: f64,
    pub time_max_us: f64,
    pub wrong: Option<u64>,
    /// Overrides the run's timestamp (nccl-tests' timestamp column).
    pub timestamp: Option<String>,
    /// Overrides the run's iteration count (OSU's Iterations column).
    pub iters: Option<u64>,
    /// One sample of several of the point (nccl-tests' per-iteration
    /// times): which one, from 1, and how many.
    pub sample: Option<(u64, u64)>,
}

impl Measured {
    /// A point of one time, `time_us`: its fastest and slowest are that
    /// time, the run's timestamp and iterations stand, and it is not one
    /// sample of several. The case's fields are placeholders every
    /// importer sets.
    pub fn timed(time_us: f64) -> Measured {
        Measured {
            time_us,
            time_min_us: time_us,
            time_max_us: time_us,
            ..Measured::default()
        }
    }
}

/// What a parser made of one file: its records, and one line (with the
/// line number) for everything it saw and did not import.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub records: Vec<Record>,
    pub warnings: Vec<String>,
}

/// The record of one point, with our bandwidth formulas: where an
/// imported row becomes a typed `Record`, so a type, operation or root the
/// file names that collbench does not know is refused here, in one line.
pub(crate) fn record(run: &Run, m: &Measured) -> Result<Record, String> {
    let row = || format!("the {} B row", m.size_bytes);
    let dtype = DType::parse(&m.dtype).ok_or_else(|| {
        format!(
            "{} has element type '{}', which collbench does not know (it knows {})",
            row(),
            m.dtype,
            known::<DType>()
        )
    })?;
    let spec = run.collective.spec();
    // nccl-tests prints `sum` as the redop of sendrecv (and old alltoall an
    // empty one): collbench's schema says `none` for every non-reduction,
    // and -1 for every collective without a root.
    let op = match m.op.trim() {
        _ if !spec.is_reduction() => None,
        none if none.eq_ignore_ascii_case("none") => None,
        name => Some(ReduceOp::parse(name).ok_or_else(|| format!("{} has an unknown operation '{name}'", row()))?),
    };
    let root = match m.root {
        _ if !spec.has_root() => None,
        -1 => None,
        r => Some(usize::try_from(r).map_err(|_| format!("{} has root {r}, neither a rank nor -1", row()))?),
    };
    let factor = spec.bus_factor(run.nranks as usize);
    let (algbw_gbps, busbw_gbps) = bandwidth_gbps(m.size_bytes, m.time_us * 1e-6, factor);
    let nodes = Nodes::from_keys(&run.hosts, &run.hosts);
    Ok(Record {
        run_id: run.run_id.clone(),
        timestamp: m.timestamp.clone().unwrap_or_else(|| run.timestamp.clone()),
        host: run.hosts.first().cloned().unwrap_or_default(),
        backend: run.backend,
        backend_version: run.backend_version.clone(),
        transport: Default::default(),
        transport_observed: "unknown".into(),
        hierarchy: Default::default(),
        collective: run.collective,
        dtype,
        op,
        root,
        placement: m.placement,
        size_bytes: m.size_bytes,
        count: m.count,
        nranks: run.nranks,
        nnodes: nodes.nnodes() as u64,
        ranks_per_node: nodes.ranks_per_node() as u64,
        iters: m.iters.unwrap_or(run.iters),
        warmup: run.warmup,
        time_us: m.time_us,
        time_min_us: m.time_min_us,
        time_max_us: m.time_max_us,
        algbw_gbps,
        busbw_gbps,
        wrong: m.wrong,
        cycle: m.sample.map(|s| s.0),
        samples: m.sample.map(|s| s.1),
        ..Record::default()
    })
}

/// A tool whose logs import, for the collectives it has a benchmark of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Tool {
    NcclTests,
    Osu,
}

impl Tool {
    fn name(self) -> &'static str {
        match self {
            Tool::NcclTests => "nccl-tests",
            Tool::Osu => "OSU",
        }
    }

    /// Whether the tool has a benchmark of `c` that import reads:
    /// nccl-tests has none of alltoallv; OSU none of sendrecv, and its
    /// alltoallv is not one import reads (docs/import.md).
    fn measures(self, c: Collective) -> bool {
        match self {
            Tool::NcclTests => c != Collective::AllToAllV,
            Tool::Osu => !matches!(c, Collective::SendRecv | Collective::AllToAllV),
        }
    }
}

/// Refuses a `--collective` that `tool` has no benchmark of, or that
/// contradicts the collective the log names (`found`): `--collective` is
/// for logs that do not name it, never a way to relabel one.
pub(crate) fn check_given(tool: Tool, given: &Given, found: Option<Collective>) -> Result<(), String> {
    let Some(c) = given.collective else {
        return Ok(());
    };
    if !tool.measures(c) {
        return Err(format!(
            "--collective {}: {} has no benchmark of it, so no {} log measured it",
            c.name(),
            tool.name(),
            tool.name()
        ));
    }
    match found {
        Some(f) if f != c => Err(format!(
            "--collective {} contradicts the log, which measured {}: leave --collective out (it is for logs \
             that do not name their collective)",
            c.name(),
            f.name()
        )),
        _ => Ok(()),
    }
}

/// The collective: what the file said, else `--collective`, else an
/// `xxx_perf` name in the file name; `check_given` first.
pub(crate) fn resolve_collective(
    tool: Tool,
    given: &Given,
    found: Option<Collective>,
    name: &str,
) -> Result<Collective, String> {
    check_given(tool, given, found)?;
    found
        .or(given.collective)
        .or_else(|| perf_collective(name))
        .ok_or_else(|| "cannot tell which collective this measured: pass --collective NAME".to_string())
}

/// `all_reduce_perf` or `all_reduce_perf_mpi` (the name NGC containers
/// ship the MPI build under), anywhere in `text` -> all_reduce.
pub(crate) fn perf_collective(text: &str) -> Option<Collective> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .find_map(perf_binary)
}

/// The collective of one word that is an nccl-tests binary name.
pub(crate) fn perf_binary(word: &str) -> Option<Collective> {
    let stem = word.strip_suffix("_mpi").unwrap_or(word);
    stem.strip_suffix("_perf").and_then(Collective::parse)
}

/// collbench's name of a type name such as `float`, `fp32` or `int`;
/// unknown names are kept, lower-cased.
pub(crate) fn dtype_name(s: &str) -> String {
    DType::parse(s).map_or_else(|| s.trim().to_ascii_lowercase(), |t| t.name().to_string())
}

/// `run_id` of an imported file: the tool, the file's stem and a short
/// fingerprint of its text (`nccl-tests-alltoall-3f2a9c1e`), so that two
/// logs of the same name (one per node or per job) are separate launches
/// for `compare`, and the same log imported twice is the same one; then
/// the section's number when the file holds several runs.
pub(crate) fn run_id(tool: &str, name: &str, text: &str, section: usize, sections: usize) -> String {
    let stem = Path::new(name)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let stem: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    // 32 bits of FNV-1a: readable, and enough to tell a folder of logs apart
    let print = crate::engine::digest::fnv1a(text.as_bytes()) >> 32;
    if sections > 1 {
        format!("{tool}-{stem}-{print:08x}-{}", section + 1)
    } else {
        format!("{tool}-{stem}-{print:08x}")
    }
}

/// Reads every file, converts it, and writes one CSV; nothing is written
/// unless every file converts. Returns the number of rows.
pub fn import(opts: &ImportOptions) -> Result<usize, Error> {
    let given = Given {
        collective: opts.collective,
        nranks: opts.nranks,
    };
    let inputs: Vec<(&str, &Path)> = opts.files.iter().map(|p| ("", p.as_path())).collect();
    crate::report::paths::check_distinct(&[("-o", &opts.output)], &inputs)?;
    let mut records = Vec::new();
    let mut warnings = Vec::new();
    for path in &opts.files {
        let bytes = std::fs::read(path).map_err(|e| Error::usage(format!("cannot read {}: {e}", path.display())))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let parsed = crate::nccl_log::decode(&bytes).and_then(|text| parse(opts.source, &text, &name, &given));
        let parsed = parsed.map_err(|e| Error::usage(format!("{}: {e}", path.display())))?;
        records.extend(parsed.records);
        warnings.extend(parsed.warnings.into_iter().map(|w| format!("{}: {w}", path.display())));
    }
    crate::report::csv::write_records(&opts.output, opts.overwrite, &records)?;
    // Only once the CSV is written: a refused import says one line, no more.
    for w in &warnings {
        crate::error::say(&format!("collbench: warning: {w}"));
    }
    Ok(records.len())
}

/// One file's text in the format of `source`.
pub(crate) fn parse(source: Source, text: &str, name: &str, given: &Given) -> Result<Parsed, String> {
    match source {
        Source::Collbench => collbench_table::parse(text, name, given),
        // our own table passed as nccl-tests' (it looks like one)
        Source::NcclTests if collbench_table::is_ours(text) => collbench_table::parse(text, name, given),
        Source::NcclTests if text.trim_start().starts_with('{') => nccl_json::parse(text, name, given),
        Source::NcclTests => nccl_text::parse(text, name, given),
        Source::Osu => osu::parse(text, name, given),
    }
}

/// A `YYYY-MM-DD HH:MM:SS` time (or with a `T`), which names no zone
/// (nccl-tests' `timestamp` column and JSON `start_time`, collbench's `-S`
/// column), as the CSV's RFC 3339 UTC `timestamp`: read as UTC
/// (docs/import.md says so). None for any other text.
pub(crate) fn utc_timestamp(text: &str) -> Option<String> {
    let (date, time) = text.trim().split_once([' ', 'T'])?;
    let shaped = |s: &str, sep: u8| {
        s.len() == if sep == b'-' { 10 } else { 8 }
            && s.bytes().enumerate().all(|(i, b)| match i {
                _ if sep == b'-' && (i == 4 || i == 7) => b == sep,
                _ if sep == b':' && (i == 2 || i == 5) => b == sep,
                _ => b.is_ascii_digit(),
            })
    };
    (shaped(date, b'-') && shaped(time, b':')).then(|| format!("{date}T{time}Z"))
}

/// Reads a number the way C's printf wrote it (`12.5`, `1e+06`, `nan`).
pub(crate) fn number(s: &str) -> Option<f64> {
    s.trim().parse::<f64>().ok()
}

/// A usable time: finite and above 0 (a time of 0 measured nothing, and
/// no CSV reader takes it: docs/csv.md).
pub(crate) fn time(s: &str) -> Option<f64> {
    number(s).filter(|&t| usable_time(t))
}

/// Whether `t` microseconds is a time a CSV row may hold.
pub(crate) fn usable_time(t: f64) -> bool {
    t.is_finite() && t > 0.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_binary_names_give_the_collective() {
        assert_eq!(
            perf_collective("$ ./build/all_reduce_perf -b 8"),
            Some(Collective::AllReduce)
        );
        assert_eq!(
            perf_collective("# Collective test starting: alltoall_perf"),
            Some(Collective::AllToAll)
        );
        assert_eq!(perf_collective("sendrecv_perf.log"), Some(Collective::SendRecv));
        assert_eq!(
            perf_collective("# Collective test starting: broadcast_perf_mpi"),
            Some(Collective::Broadcast)
        );
        assert_eq!(
            perf_collective("/usr/bin/all_gather_perf_mpi -b 8"),
            Some(Collective::AllGather)
        );
        assert_eq!(perf_collective("hypercube_perf"), None);
        assert_eq!(perf_collective("all_reduce"), None);
    }

    #[test]
    fn a_collective_given_must_not_contradict_the_log_nor_be_one_the_tool_lacks() {
        let given = |c| Given {
            collective: Some(c),
            nranks: None,
        };
        let all_gather = given(Collective::AllGather);
        let e = resolve_collective(Tool::Osu, &all_gather, Some(Collective::AllReduce), "x").unwrap_err();
        assert!(
            e.starts_with("--collective all_gather contradicts the log, which measured all_reduce"),
            "{e}"
        );
        // for a log that does not name it, and over a file name
        assert_eq!(
            resolve_collective(Tool::Osu, &all_gather, None, "x"),
            Ok(Collective::AllGather)
        );
        assert_eq!(
            resolve_collective(Tool::NcclTests, &all_gather, None, "all_reduce_perf.log"),
            Ok(Collective::AllGather)
        );
        assert_eq!(
            resolve_collective(Tool::NcclTests, &Given::default(), Some(Collective::SendRecv), "x"),
            Ok(Collective::SendRecv)
        );
        for (tool, c) in [
            (Tool::Osu, Collective::SendRecv),
            (Tool::Osu, Collective::AllToAllV),
            (Tool::NcclTests, Collective::AllToAllV),
        ] {
            let e = resolve_collective(tool, &given(c), None, "x").unwrap_err();
            assert!(e.contains("has no benchmark of it"), "{e}");
        }
    }

    #[test]
    fn zoneless_times_become_rfc_3339_utc() {
        assert_eq!(
            utc_timestamp("2025-03-14 09:26:53").as_deref(),
            Some("2025-03-14T09:26:53Z")
        );
        assert_eq!(
            utc_timestamp("2025-03-14T09:26:53").as_deref(),
            Some("2025-03-14T09:26:53Z")
        );
        for bad in [
            "",
            "2025-03-14",
            "yesterday 09:26:53",
            "2025-03-14 9:26:53",
            "2025/03/14 09:26:53",
        ] {
            assert_eq!(utc_timestamp(bad), None, "{bad}");
        }
    }

    #[test]
    fn records_use_our_bandwidth_formulas() {
        let run = Run {
            run_id: "x".into(),
            backend: BackendKind::Nccl,
            backend_version: String::new(),
            collective: Collective::AllReduce,
            nranks: 8,
            hosts: vec!["a".into(), "a".into(), "b".into(), "b".into()],
            iters: 20,
            warmup: 5,
            timestamp: String::new(),
        };
        let m = Measured {
            dtype: "float".into(),
            op: "sum".into(),
            root: -1,
            placement: Placement::InPlace,
            size_bytes: 1_000_000_000,
            count: 250_000_000,
            time_us: 1e6,
            time_min_us: 1e6,
            time_max_us: 1e6,
            wrong: Some(0),
            timestamp: None,
            iters: None,
            sample: None,
        };
        let r = record(&run, &m).unwrap();
        assert_eq!((r.algbw_gbps, r.busbw_gbps), (1.0, 1.75));
        assert_eq!((r.nnodes, r.ranks_per_node, r.host.as_str()), (2, 2, "a"));
        assert_eq!(r.placement, Placement::InPlace);
        // what collbench has no type for is refused, never kept as text
        let fp8 = Measured {
            dtype: "f8e4m3".into(),
            ..m
        };
        let e = record(&run, &fp8).unwrap_err();
        assert!(e.contains("element type 'f8e4m3'") && e.contains("bfloat16"), "{e}");
    }

    mod never_panic {
        use super::super::{Given, nccl_json, nccl_text, osu};
        use crate::collective::Collective;
        use proptest::prelude::*;

        const NCCL_TEXT: &str =
            include_str!("../../tests/fixtures/import/nccl-tests-2.19-all_gather_perf-timestamps.txt");
        const NCCL_OLD: &str = include_str!("../../tests/fixtures/import/nccl-tests-2.13-all_reduce_perf.txt");
        const NCCL_JSON: &str = include_str!("../../tests/fixtures/import/nccl-tests-2.17-all_reduce_perf.json");
        const OSU: &str = include_str!("../../tests/fixtures/import/osu-5.9-allgather-full.txt");

        fn all(text: &str) {
            for given in [
                Given::default(),
                Given {
                    collective: Some(Collective::Scatter),
                    nranks: Some(3),
                },
            ] {
                let _ = nccl_text::parse(text, "all_reduce_perf.log", &given);
                let _ = nccl_json::parse(text, "x.json", &given);
                let _ = osu::parse(text, "x.txt", &given);
            }
        }

        /// Real lines of every format, in any order, some with a token
        /// replaced by an arbitrary one.
        fn shuffled_lines() -> impl Strategy<Value = String> {
            let lines: Vec<&'static str> = [NCCL_TEXT, NCCL_OLD, OSU].iter().flat_map(|t| t.lines()).collect();
            prop::collection::vec(
                (prop::sample::select(lines), any::<usize>(), "[-+0-9a-zA-Z.#:/ ]{0,12}"),
                0..40,
            )
            .prop_map(|picks| {
                picks
                    .into_iter()
                    .map(|(line, at, token)| {
                        let mut words: Vec<String> = line.split(' ').map(str::to_string).collect();
                        if at % 3 == 0 && !words.is_empty() {
                            let i = at % words.len();
                            words[i] = token;
                        }
                        words.join(" ") + "\n"
                    })
                    .collect()
            })
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(200))]

            #[test]
            fn parsers_never_panic_on_arbitrary_text(text in "\\PC*") {
                all(&text);
            }

            #[test]
            fn decoding_never_panics_on_arbitrary_bytes(bytes in prop::collection::vec(any::<u8>(), 0..600)) {
                if let Ok(text) = crate::nccl_log::decode(&bytes) {
                    all(&text);
                }
            }

            #[test]
            fn parsers_never_panic_on_real_lines_shuffled_and_mutated(text in shuffled_lines()) {
                all(&text);
            }

            #[test]
            fn the_json_parser_never_panics_on_damaged_json(at in any::<usize>(), cut in any::<bool>(), insert in "\\PC{0,6}") {
                let mut text = NCCL_JSON.to_string();
                let mut i = at % (text.len() + 1);
                while !text.is_char_boundary(i) {
                    i -= 1;
                }
                if cut {
                    text.truncate(i);
                } else {
                    text.insert_str(i, &insert);
                }
                all(&text);
            }
        }
    }
}
