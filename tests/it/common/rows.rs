//! Parsed CSVs and the arithmetic every row must satisfy, written out
//! independently of the crate.

use std::collections::BTreeSet;
use std::path::PathBuf;

/// A parsed CSV: header and rows as column-name lookups.
pub struct Csv {
    pub header: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Csv {
    pub fn read(path: &PathBuf) -> Csv {
        let mut r = csv::Reader::from_path(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let header = r.headers().unwrap().iter().map(str::to_string).collect();
        let rows = r
            .records()
            .map(|x| x.unwrap().iter().map(str::to_string).collect())
            .collect();
        Csv { header, rows }
    }

    fn col(&self, name: &str) -> usize {
        self.header
            .iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name}"))
    }

    pub fn get<'a>(&self, row: &'a [String], name: &str) -> &'a str {
        &row[self.col(name)]
    }

    pub fn num(&self, row: &[String], name: &str) -> f64 {
        self.get(row, name)
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number: {row:?}"))
    }
}

/// What identifies each row: its values in the columns `cols` (the
/// white-space separated names); the same points measured, the same keys.
pub fn row_keys(csv: &Csv, cols: &str) -> BTreeSet<Vec<String>> {
    csv.rows
        .iter()
        .map(|r| cols.split_whitespace().map(|c| csv.get(r, c).to_string()).collect())
        .collect()
}

/// Bus factor of each collective, written out independently of the crate.
pub fn bus_factor(collective: &str, n: f64) -> f64 {
    match collective {
        "all_reduce" => 2.0 * (n - 1.0) / n,
        "all_gather" | "reduce_scatter" | "alltoall" | "alltoallv" | "gather" | "scatter" => (n - 1.0) / n,
        "broadcast" | "reduce" | "sendrecv" => 1.0,
        other => panic!("unknown collective {other}"),
    }
}

/// size_bytes from the count column, per nccl-tests' size semantics
/// (alltoallv: its default traffic, spread 1).
pub fn expected_size(collective: &str, count: u64, elem: u64, n: u64) -> u64 {
    match collective {
        "all_gather" | "reduce_scatter" | "alltoall" | "gather" | "scatter" => count * n * elem,
        "alltoallv" => (0..n).map(|d| alltoallv_block(count * n * elem, n, d, 1.0)).sum(),
        _ => count * elem,
    }
}

/// nccl-tests' alltoallv_perf (src/alltoallv.cu): the bytes a rank sends
/// the rank `distance` places after it, with `total` bytes per rank and a
/// `spread`: (1 - spread) * total / n + spread * distance * total / (n(n-1)/2),
/// rounded down to 16 bytes (all of it, to itself, at one rank).
pub fn alltoallv_block(total: u64, n: u64, distance: u64, spread: f64) -> u64 {
    if n == 1 {
        return total / 16 * 16;
    }
    let uniform = total as f64 / n as f64;
    let weighted = distance as f64 * total as f64 / (n * (n - 1) / 2) as f64;
    ((1.0 - spread) * uniform + spread * weighted) as u64 / 16 * 16
}

pub fn elem_size(dtype: &str) -> u64 {
    match dtype {
        "int8" | "uint8" => 1,
        "half" | "bfloat16" => 2,
        "int32" | "uint32" | "float" => 4,
        "int64" | "uint64" | "double" => 8,
        other => panic!("unknown dtype {other}"),
    }
}

pub const SCHEMA_1: [&str; 26] = [
    "run_id",
    "timestamp",
    "host",
    "backend",
    "backend_version",
    "transport",
    "transport_observed",
    "hierarchy",
    "collective",
    "dtype",
    "op",
    "root",
    "placement",
    "size_bytes",
    "count",
    "nranks",
    "nnodes",
    "ranks_per_node",
    "iters",
    "warmup",
    "time_us",
    "time_min_us",
    "time_max_us",
    "algbw_gbps",
    "busbw_gbps",
    "wrong",
];

/// The method and sample columns every row carries after schema 1.
pub const METHOD_COLUMNS: [&str; 12] = [
    "collbench_version",
    "timing",
    "average",
    "iter_policy",
    "precision_target_pct",
    "precision_pct",
    "agg_iters",
    "cuda_graph",
    "register",
    "rotate",
    "cycle",
    "samples",
];

/// The header of a run without optional columns: schema 1, then the
/// method columns.
pub fn default_header() -> Vec<&'static str> {
    SCHEMA_1.iter().chain(METHOD_COLUMNS.iter()).copied().collect()
}

/// Checks every row's arithmetic: size semantics, algbw from size and time,
/// busbw from algbw and the factor, the time spread, wrong = 0.
pub fn assert_rows_consistent(csv: &Csv, n: u64) {
    assert!(!csv.rows.is_empty(), "no rows");
    for row in &csv.rows {
        let collective = csv.get(row, "collective");
        let size = csv.num(row, "size_bytes");
        let time_us = csv.num(row, "time_us");
        let algbw = csv.num(row, "algbw_gbps");
        let busbw = csv.num(row, "busbw_gbps");
        let count = csv.num(row, "count") as u64;
        let elem = elem_size(csv.get(row, "dtype"));
        assert_eq!(csv.num(row, "nranks") as u64, n, "{row:?}");
        assert_eq!(
            size as u64,
            expected_size(collective, count, elem, n),
            "size semantics: {row:?}"
        );
        assert!(time_us > 0.0, "{row:?}");
        let want_alg = size / (time_us * 1e-6) / 1e9;
        assert!(
            (algbw - want_alg).abs() <= 1e-9 * want_alg.max(1e-12),
            "algbw {algbw} != {want_alg}: {row:?}"
        );
        let want_bus = want_alg * bus_factor(collective, n as f64);
        assert!(
            (busbw - want_bus).abs() <= 1e-9 * want_bus.max(1e-12),
            "busbw {busbw} != {want_bus}: {row:?}"
        );
        let (tmin, tmax) = (csv.num(row, "time_min_us"), csv.num(row, "time_max_us"));
        assert!(
            tmin <= time_us * (1.0 + 1e-12) && time_us <= tmax * (1.0 + 1e-12),
            "{row:?}"
        );
        // MPI_Alltoallv on one buffer races: not checked (docs/collectives.md)
        let unchecked = collective == "alltoallv" && csv.get(row, "placement") == "in_place";
        assert_eq!(csv.get(row, "wrong"), if unchecked { "" } else { "0" }, "{row:?}");
    }
}
