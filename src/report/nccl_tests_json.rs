//! The JSON file nccl-tests writes with `-J` (its format version 3, as
//! 2.19 writes it: src/util.cu), for `--output-format nccl-tests-json`, so
//! that nccl-tests' own readers (tools/analyze_perf_json.py, dashboards
//! fed from it) read our runs. docs/nccl-tests.md lists every key and what
//! we put in it.
//!
//! One result object per point, out-of-place and in-place together, as
//! nccl-tests prints one line for both: `size`, `count`, `type`, `redop`,
//! `root` (a string, `%6i` as nccl-tests writes it), `out_of_place` and
//! `in_place` (`time`, `alg_bw`, `bus_bw`, `nwrong`, null when not
//! checked), with `-I` `out_of_place_per_iter` and `in_place_per_iter`
//! (`skipped_iterations`, `min_us`, `max_us`, `avg_us`, `p50_us`, `p95_us`,
//! `p99_us`, `stdev_us`, `cv_pct`, `times_us`: every iteration at its
//! slowest rank, as nccl-tests' `times_us`), `actual_iterations`, and
//! `experiment_name`, which nccl-tests leaves empty and we fill with the
//! collective and hierarchy (one file may hold several collectives). The
//! document is assembled in memory and written when the run ends, through
//! a temporary file, so a reader never sees half of it.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use super::{RunInfo, Sink};
use crate::engine::Summary;
use crate::error::Error;
use crate::record::Record;
use crate::types::{BackendKind, Placement};

/// nccl-tests' `JSON_FILE_VERSION` in 2.19.
pub const FORMAT_VERSION: u64 = 3;

pub struct NcclTestsJsonSink {
    path: PathBuf,
    overwrite: bool,
    /// The document's head (version .. config), set at `begin`.
    head: Map<String, Value>,
    results: Vec<Value>,
    /// The out-of-place record waiting for its in-place twin.
    pending: Option<Record>,
    busbw_sum: f64,
    busbw_n: u64,
}

impl NcclTestsJsonSink {
    /// Refuses an existing file unless `overwrite`, now rather than at the
    /// end of the run.
    pub fn create(path: &Path, overwrite: bool) -> Result<NcclTestsJsonSink, Error> {
        super::refuse_existing_json(path, overwrite)?;
        Ok(NcclTestsJsonSink {
            path: path.to_path_buf(),
            overwrite,
            head: Map::new(),
            results: Vec::new(),
            pending: None,
            busbw_sum: 0.0,
            busbw_n: 0,
        })
    }

    fn push(&mut self, oop: Option<&Record>, ip: Option<&Record>) {
        if let Some(key) = oop.or(ip) {
            self.results.push(result(key, oop, ip));
        }
    }
}

/// `2.27.3` (or `2.32.3-sim`) as NCCL_VERSION_CODE (22703); 0 for what
/// is not an NCCL version (the mpi backend).
pub fn version_code(backend: BackendKind, version: &str) -> u64 {
    if backend != BackendKind::Nccl {
        return 0;
    }
    let core = version.split(['-', ' ']).next().unwrap_or("");
    let parts: Vec<u64> = core.split('.').filter_map(|p| p.parse().ok()).collect();
    match parts.as_slice() {
        [major, minor, patch] => major * 10000 + minor * 100 + patch,
        _ => 0,
    }
}

/// `2026-12-02T12:42:09Z` as nccl-tests' `%Y-%m-%d %H:%M:%S`.
fn nccl_time(iso: &str) -> String {
    iso.trim_end_matches('Z').replacen('T', " ", 1)
}

fn now() -> String {
    nccl_time(&humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string())
}

/// One placement's figures, as `writeBenchmarkLineBody` writes them.
fn body(r: &Record) -> Value {
    json!({
        "time": r.time_us,
        "alg_bw": r.algbw_gbps,
        "bus_bw": r.busbw_gbps,
        "nwrong": r.wrong.map(|w| w as f64),
    })
}

/// `-I`: as `writePerIterReport`, from every iteration's time.
fn per_iter(r: &Record) -> Option<Value> {
    let times = r.iter_times_us.as_ref().filter(|t| !t.is_empty())?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    // nccl-tests' percentile index: ceil(n * p / 100) - 1
    let at = |p: usize| sorted[((n * p).div_ceil(100)).saturating_sub(1).min(n - 1)];
    let avg = sorted.iter().sum::<f64>() / n as f64;
    let stdev = (sorted.iter().map(|t| (t - avg) * (t - avg)).sum::<f64>() / n as f64).sqrt();
    Some(json!({
        "skipped_iterations": 0,
        "min_us": sorted[0],
        "max_us": sorted[n - 1],
        "avg_us": avg,
        "p50_us": sorted[n / 2],
        "p95_us": at(95),
        "p99_us": at(99),
        "stdev_us": stdev,
        "cv_pct": if avg > 0.0 { stdev / avg * 100.0 } else { 0.0 },
        "times_us": times,
    }))
}

/// One result object: both placements of a point.
fn result(key: &Record, oop: Option<&Record>, ip: Option<&Record>) -> Value {
    let mut o = Map::new();
    o.insert("size".into(), json!(key.size_bytes));
    o.insert("count".into(), json!(key.count));
    o.insert("type".into(), json!(key.dtype.to_string()));
    o.insert("redop".into(), json!(crate::record::op_column::text(key.op)));
    o.insert(
        "root".into(),
        json!(format!("{:6}", crate::record::root_column::value(key.root))),
    );
    for (name, r) in [("out_of_place", oop), ("in_place", ip)] {
        o.insert(name.into(), r.map_or(Value::Null, body));
        if let Some(per) = r.and_then(per_iter) {
            o.insert(format!("{name}_per_iter"), per);
        }
    }
    o.insert("actual_iterations".into(), json!(key.iters));
    o.insert(
        "experiment_name".into(),
        json!(format!("{} {}", key.collective, key.hierarchy)),
    );
    Value::Object(o)
}

fn same_point(a: &Record, b: &Record) -> bool {
    (a.collective, a.hierarchy, a.dtype, a.op, a.root, a.size_bytes, a.cycle)
        == (b.collective, b.hierarchy, b.dtype, b.op, b.root, b.size_bytes, b.cycle)
}

impl Sink for NcclTestsJsonSink {
    fn begin(&mut self, run: &RunInfo) -> io::Result<()> {
        let t = &run.timing;
        let mut config = Map::new();
        config.insert("nthreads".into(), json!(1));
        config.insert("ngpus".into(), json!(1));
        config.insert("minimum_bytes".into(), json!(run.sweep.min_bytes));
        config.insert("maximum_bytes".into(), json!(run.sweep.max_bytes));
        match run.sweep.step {
            crate::plan::Step::Factor(f) => config.insert("step_factor".into(), json!(f)),
            crate::plan::Step::Bytes(b) => config.insert("step_bytes".into(), json!(b)),
        };
        config.insert("warmup_iters".into(), json!(t.warmup));
        let iters = match t.iterations {
            crate::engine::policy::Iterations::Fixed(n) => n,
            _ => 0,
        };
        config.insert("iterations".into(), json!(iters));
        config.insert("aggregated_iterations".into(), json!(t.agg_iters));
        config.insert("validation".into(), json!(t.check));
        config.insert("graph".into(), json!(t.cuda_graph));
        config.insert("blocking_collectives".into(), json!(t.blocking));
        config.insert("per_iter_timing".into(), json!(t.per_iter));
        config.insert("per_iter_skip".into(), json!(0));
        config.insert("parallel_init".into(), json!(false));
        let devices: Vec<Value> = run
            .ranks
            .iter()
            .map(|r| {
                json!({
                    "rank": r.rank,
                    "group": 0,
                    "pid": r.pid,
                    "hostname": r.host,
                    "device": -1,
                    "device_hex": "",
                    "device_info": r.gpu.clone().unwrap_or_default(),
                })
            })
            .collect();
        config.insert("devices".into(), Value::Array(devices));
        let env: Vec<String> = std::env::vars()
            .filter(|(k, _)| k.starts_with("NCCL_") || k.starts_with("CUDA_"))
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        self.head.insert("version".into(), json!(FORMAT_VERSION));
        self.head.insert("start_time".into(), json!(nccl_time(&run.started)));
        self.head.insert("args".into(), json!(run.command_line));
        self.head.insert("env".into(), json!(env));
        self.head.insert(
            "nccl_version".into(),
            json!(version_code(run.backend, &run.backend_version)),
        );
        self.head.insert("config".into(), Value::Object(config));
        Ok(())
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        // nccl-tests writes the aggregate of --split groups only
        if crate::report::table::is_group_row(record) {
            return Ok(());
        }
        self.busbw_sum += record.busbw_gbps;
        self.busbw_n += 1;
        match (record.placement, self.pending.take()) {
            (Placement::InPlace, Some(oop)) if same_point(&oop, record) => self.push(Some(&oop), Some(record)),
            (Placement::InPlace, other) => {
                if let Some(oop) = other {
                    self.push(Some(&oop), None);
                }
                self.push(None, Some(record));
            }
            (_, other) => {
                if let Some(oop) = other {
                    self.push(Some(&oop), None);
                }
                self.pending = Some(record.clone());
            }
        }
        Ok(())
    }

    fn finish(&mut self, _run: &RunInfo, summary: &Summary) -> io::Result<()> {
        if let Some(oop) = self.pending.take() {
            self.push(Some(&oop), None);
        }
        let mut doc = std::mem::take(&mut self.head);
        doc.insert("results".into(), Value::Array(std::mem::take(&mut self.results)));
        doc.insert(
            "out_of_bounds".into(),
            json!({"count": summary.failed_points, "okay": summary.failed_points == 0}),
        );
        let avg = if self.busbw_n == 0 {
            0.0
        } else {
            self.busbw_sum / self.busbw_n as f64
        };
        doc.insert(
            "average_bus_bandwidth".into(),
            json!({"bandwidth": avg, "okay": "unchecked"}),
        );
        doc.insert("errors".into(), json!([]));
        doc.insert("end_time".into(), json!(now()));
        let temp = super::partial_path(&self.path);
        let mut file = io::BufWriter::new(super::create_file(&temp, true, "JSON").map_err(io::Error::other)?);
        serde_json::to_writer_pretty(&mut file, &Value::Object(doc)).map_err(io::Error::other)?;
        file.write_all(b"\n")?;
        file.flush()?;
        drop(file);
        if self.path.exists() && !self.overwrite {
            return Err(io::Error::other(format!(
                "{} appeared during the run",
                self.path.display()
            )));
        }
        std::fs::rename(&temp, &self.path)
    }

    fn target(&self) -> String {
        format!("nccl-tests JSON file {}", self.path.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_versions_become_nccl_version_codes() {
        assert_eq!(version_code(BackendKind::Nccl, "2.27.3"), 22703);
        assert_eq!(version_code(BackendKind::Nccl, "2.32.3-sim"), 23203);
        assert_eq!(version_code(BackendKind::Mpi, "Open MPI v4.1.4"), 0);
        assert_eq!(version_code(BackendKind::Nccl, "unknown"), 0);
        assert_eq!(nccl_time("2026-12-02T12:42:09Z"), "2026-12-02 12:42:09");
    }

    /// nccl-tests' statistics of times 1..=10 us: p50 sorted[5] = 6, p95
    /// index ceil(9.5) - 1 = 9, p99 likewise; stdev over n (population).
    #[test]
    fn per_iteration_statistics_are_nccl_tests_own() {
        let r = Record {
            iter_times_us: Some((1..=10).map(f64::from).collect()),
            ..Record::default()
        };
        let v = per_iter(&r).unwrap();
        assert_eq!(v["min_us"], 1.0);
        assert_eq!(v["max_us"], 10.0);
        assert_eq!(v["avg_us"], 5.5);
        assert_eq!(v["p50_us"], 6.0);
        assert_eq!(v["p95_us"], 10.0);
        let stdev = 8.25f64.sqrt();
        assert!((v["stdev_us"].as_f64().unwrap() - stdev).abs() < 1e-12);
        assert!((v["cv_pct"].as_f64().unwrap() - stdev / 5.5 * 100.0).abs() < 1e-12);
        assert_eq!(v["times_us"].as_array().unwrap().len(), 10);
        assert!(per_iter(&Record::default()).is_none());
    }
}
