//! nccl-tests' `-J FILE` output (JSON file versions 1 to 3): `args` (the
//! command line, whose binary names the collective), `config` with
//! `iterations`, `warmup_iters` and `devices` (one per rank, with
//! `hostname`), `nccl_version`, `start_time`, and `results`: per size
//! `size`, `count`, `type`, `redop`, `root` (a padded string or a number)
//! and `out_of_place` / `in_place` objects with `time` (or `cpu_time`) in
//! microseconds and `nwrong` (null when checking was off). `"nan"` strings
//! and null placements are skipped.
//!
//! With `-I` (file version 2, and 3 from nccl-tests 2.19.5 on; src/util.cu
//! `writePerIterReport`) each placement also has `<placement>_per_iter`:
//! `times_us` (one per iteration, each the slowest process's:
//! `ReduceProcessMaxIterTimes`), `per_process_max_times_us` (one list per
//! process, with several processes) and `skipped_iterations` (the first
//! ones, left out of its statistics; version 3 on). Then each timed iteration is a row of
//! its own, a sample of the point (`cycle` 1..N, `samples` N, `iters` 1):
//! its time the slowest process's, `time_min_us` the fastest's, so that
//! `compare` judges the point on its samples.
//!
//! collbench's own `--output-format nccl-tests-json` files (`args` starts
//! with the collbench binary) read back without `--collective`: each
//! result's `experiment_name` names its collective (one file may hold
//! several), and `nccl_version` 0 says the mpi backend ran
//! (docs/nccl-tests.md), whose version the file does not record.

use serde_json::Value;

use super::{
    Given, Measured, Parsed, Run, Tool, check_given, dtype_name, perf_collective, record, resolve_collective, run_id,
    usable_time, utc_timestamp,
};
use crate::collective::Collective;
use crate::types::{BackendKind, Placement};

pub(super) fn parse(text: &str, name: &str, given: &Given) -> Result<Parsed, String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    let Some(results) = doc.get("results").and_then(Value::as_array) else {
        return Err("JSON without a \"results\" list: not an nccl-tests -J file".into());
    };
    let args: Vec<&str> = doc
        .get("args")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let from_args = args.first().and_then(|a| perf_collective(a));
    // collbench's own files name each result's collective
    let named: Vec<Option<Collective>> = results.iter().map(named_collective).collect();
    let each_named = !named.is_empty() && named.iter().all(Option::is_some);
    named.iter().try_for_each(|n| check_given(Tool::NcclTests, given, *n))?;
    let collective = match resolve_collective(Tool::NcclTests, given, from_args, name) {
        Err(_) if each_named => named[0].unwrap_or(Collective::AllReduce),
        resolved => resolved?,
    };
    let config = doc.get("config");
    let devices: Vec<&Value> = config
        .and_then(|c| c.get("devices"))
        .or_else(|| doc.get("devices"))
        .and_then(Value::as_array)
        .map(|d| d.iter().collect())
        .unwrap_or_default();
    let nranks = match given.nranks {
        Some(n) => n,
        None if !devices.is_empty() => devices.len() as u64,
        None => return Err("no \"devices\" list to count the ranks from: pass --nranks N".into()),
    };
    let hosts: Vec<String> = devices
        .iter()
        .filter_map(|d| d.get("hostname").and_then(Value::as_str).map(str::to_string))
        .collect();
    let int = |v: Option<&Value>| v.and_then(Value::as_u64);
    let ours = args
        .first()
        .is_some_and(|a| std::path::Path::new(a).file_name().is_some_and(|n| n == "collbench"));
    let (backend, backend_version) = backend_of(&doc, ours);
    let run = Run {
        run_id: run_id("nccl-tests", name, text, 0, 1),
        backend,
        backend_version,
        collective,
        nranks,
        hosts: if hosts.len() == devices.len() {
            hosts
        } else {
            Vec::new()
        },
        iters: int(config.and_then(|c| c.get("iterations"))).unwrap_or(0),
        warmup: int(config.and_then(|c| c.get("warmup_iters"))).unwrap_or(0),
        timestamp: doc
            .get("start_time")
            .and_then(Value::as_str)
            .and_then(utc_timestamp)
            .unwrap_or_default(),
    };
    let mut records = Vec::new();
    let mut warnings = Vec::new();
    for (i, entry) in results.iter().enumerate() {
        // the user's --collective wins; else a result's own name
        let mut this = run.clone();
        if given.collective.is_none()
            && from_args.is_none()
            && let Some(c) = named[i]
        {
            this.collective = c;
        }
        for m in points(entry, i, &mut warnings) {
            records.push(record(&this, &m)?);
        }
    }
    if records.is_empty() {
        return Err("the JSON \"results\" list holds no measured point".into());
    }
    Ok(Parsed { records, warnings })
}

/// The backend that ran and its version: NCCL at `nccl_version`, but the
/// mpi backend in collbench's own file (`ours`) where that is 0.
fn backend_of(doc: &Value, ours: bool) -> (BackendKind, String) {
    let code = doc.get("nccl_version").and_then(Value::as_u64);
    if ours && code == Some(0) {
        return (BackendKind::Mpi, "unknown (not in the nccl-tests JSON)".into());
    }
    let version = match code {
        // NCCL_VERSION_CODE since 2.9: major * 10000 + minor * 100 + patch
        Some(code) if code >= 20900 => format!("NCCL {}.{}.{}", code / 10000, code / 100 % 100, code % 100),
        Some(code) => format!("NCCL {code}"),
        None => "nccl-tests".into(),
    };
    (BackendKind::Nccl, version)
}

/// The collective a result's `experiment_name` starts with (collbench
/// writes `all_reduce flat`; nccl-tests leaves it empty).
fn named_collective(entry: &Value) -> Option<Collective> {
    let name = entry.get("experiment_name")?.as_str()?;
    Collective::parse(name.split_whitespace().next()?)
}

/// The out-of-place and in-place points of `results[i]`.
fn points(entry: &Value, i: usize, warnings: &mut Vec<String>) -> Vec<Measured> {
    let int = |v: Option<&Value>| v.and_then(Value::as_u64);
    let mut out = Vec::new();
    let Some(size_bytes) = int(entry.get("size")) else {
        warnings.push(format!("results[{i}] has no \"size\": not imported"));
        return out;
    };
    let text_of = |key: &str, default: &str| {
        entry
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or(default)
            .trim()
            .to_string()
    };
    let root = match entry.get("root") {
        Some(Value::String(s)) => s.trim().parse().unwrap_or(-1),
        Some(v) => v.as_i64().unwrap_or(-1),
        None => -1,
    };
    for (key, placement) in [
        ("out_of_place", Placement::OutOfPlace),
        ("in_place", Placement::InPlace),
    ] {
        let Some(p) = entry.get(key).filter(|p| p.is_object()) else {
            continue;
        };
        let time_us = p
            .get("time")
            .or_else(|| p.get("cpu_time"))
            .and_then(Value::as_f64)
            .filter(|&t| usable_time(t));
        let Some(time_us) = time_us else {
            warnings.push(format!(
                "results[{i}].{key} has no usable \"time\": that point is not imported"
            ));
            continue;
        };
        let wrong = p
            .get("nwrong")
            .and_then(Value::as_f64)
            .filter(|w| w.is_finite() && *w >= 0.0)
            .map(|w| w as u64);
        let m = Measured {
            dtype: dtype_name(&text_of("type", "float")),
            op: text_of("redop", "none").to_ascii_lowercase(),
            root,
            placement,
            size_bytes,
            count: int(entry.get("count")).unwrap_or(0),
            wrong,
            ..Measured::timed(time_us)
        };
        match entry.get(format!("{key}_per_iter")).filter(|p| p.is_object()) {
            Some(per_iter) => match samples(per_iter, &m) {
                Ok(rows) => out.extend(rows),
                Err(why) => {
                    warnings.push(format!(
                        "results[{i}].{key}_per_iter: {why}: that point is not imported"
                    ));
                }
            },
            None => out.push(m),
        }
    }
    out
}

/// The timed iterations of one placement, each a sample row of `m`.
fn samples(per_iter: &Value, m: &Measured) -> Result<Vec<Measured>, String> {
    let numbers = |v: &Value| -> Option<Vec<f64>> {
        v.as_array()?
            .iter()
            .map(|t| t.as_f64().filter(|&t| usable_time(t)))
            .collect()
    };
    let times = per_iter
        .get("times_us")
        .and_then(numbers)
        .ok_or("\"times_us\" is not a list of times")?;
    let skip = per_iter.get("skipped_iterations").and_then(Value::as_u64).unwrap_or(0) as usize;
    if skip >= times.len() {
        return Err(format!(
            "{} times and {skip} skipped iterations leave no sample",
            times.len()
        ));
    }
    let procs: Vec<Vec<f64>> = match per_iter.get("per_process_max_times_us") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => v
            .as_array()
            .and_then(|lists| lists.iter().map(numbers).collect::<Option<Vec<_>>>())
            .filter(|lists| lists.iter().all(|l| l.len() == times.len()))
            .ok_or("\"per_process_max_times_us\" is not one list of times per process")?,
    };
    let n = (times.len() - skip) as u64;
    let mut out = Vec::with_capacity(n as usize);
    for (k, i) in (skip..times.len()).enumerate() {
        let fastest = procs.iter().map(|p| p[i]).fold(f64::INFINITY, f64::min);
        out.push(Measured {
            time_us: times[i],
            time_min_us: if fastest.is_finite() {
                fastest.min(times[i])
            } else {
                times[i]
            },
            time_max_us: times[i],
            iters: Some(1),
            sample: Some((k as u64 + 1, n)),
            ..m.clone()
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_json_file_gives_the_same_rows_as_its_text() {
        let json = r#"{"version":2,"start_time":"2025-06-01 10:00:00","args":["./build/all_gather_perf","-b","1K"],
          "env":[],"nccl_version":22703,
          "config":{"nthreads":1,"ngpus":1,"minimum_bytes":1024,"maximum_bytes":1024,"step_factor":2,
            "warmup_iters":5,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,
            "devices":[{"rank":0,"group":0,"pid":1,"hostname":"h","device":0,"device_hex":"0000:07:00","device_info":"NVIDIA H100"},
                       {"rank":1,"group":0,"pid":2,"hostname":"h","device":1,"device_hex":"0000:0b:00","device_info":"NVIDIA H100"}]},
          "results":[{"size":1024,"count":128,"type":"float","redop":"none","root":"    -1",
             "out_of_place":{"time":12.0,"alg_bw":0.09,"bus_bw":0.04,"nwrong":0},
             "in_place":{"time":"nan","alg_bw":0,"bus_bw":0,"nwrong":null},
             "actual_iterations":20,"experiment_name":""},
            {"size":2048,"count":256,"type":"float","redop":"none","root":"    -1",
             "out_of_place":{"time":0,"alg_bw":0.1,"bus_bw":0.05,"nwrong":0},
             "in_place":{"time":-1.5,"alg_bw":0,"bus_bw":0,"nwrong":0}}],
          "out_of_bounds":{"count":0,"okay":"true"}}"#;
        let parsed = parse(json, "r.json", &Given::default()).unwrap();
        let rows = parsed.records;
        assert_eq!(rows.len(), 1, "the nan, 0 and negative times are skipped");
        assert_eq!(
            parsed.warnings,
            [
                "results[0].in_place has no usable \"time\": that point is not imported",
                "results[1].out_of_place has no usable \"time\": that point is not imported",
                "results[1].in_place has no usable \"time\": that point is not imported"
            ]
        );
        let r = &rows[0];
        assert_eq!(
            (r.collective.name(), r.nranks, r.count, r.root),
            ("all_gather", 2, 128, None)
        );
        assert_eq!(r.backend_version, "NCCL 2.27.3");
        assert_eq!(
            (r.iters, r.warmup, r.timestamp.as_str()),
            (20, 5, "2025-06-01T10:00:00Z")
        );
        assert!((r.busbw_gbps - 1024.0 / 12e-6 / 1e9 * 0.5).abs() < 1e-12);
    }

    #[test]
    fn per_iteration_times_become_one_sample_row_each() {
        // nccl-tests 2.19.6 -J with -I 1 on 2 processes (src/util.cu)
        let json = r#"{"version":3,"args":["./build/all_reduce_perf"],"nccl_version":22805,
          "config":{"iterations":4,"warmup_iters":1,"devices":[{"rank":0,"hostname":"a"},{"rank":1,"hostname":"b"}]},
          "results":[{"size":1024,"count":256,"type":"float","redop":"sum","root":"    -1",
             "out_of_place":{"time":12.0,"alg_bw":0.09,"bus_bw":0.09,"nwrong":0},
             "out_of_place_per_iter":{"skipped_iterations":1,"times_us":[40.0,10.0,12.0,14.0],
                "per_process_max_times_us":[[40.0,9.0,12.0,13.0],[39.0,10.0,11.0,14.0]]},
             "in_place":{"time":11.0,"alg_bw":0.09,"bus_bw":0.09,"nwrong":0},
             "in_place_per_iter":{"skipped_iterations":0,"times_us":[11.0,"x"]}}]}"#;
        let parsed = parse(json, "r.json", &Given::default()).unwrap();
        let rows: Vec<(u64, u64, f64, f64, u64)> = parsed
            .records
            .iter()
            .map(|r| (r.cycle.unwrap(), r.samples.unwrap(), r.time_us, r.time_min_us, r.iters))
            .collect();
        assert_eq!(
            rows,
            [(1, 3, 10.0, 9.0, 1), (2, 3, 12.0, 11.0, 1), (3, 3, 14.0, 13.0, 1)],
            "the skipped first iteration is no sample; the fastest process is time_min_us"
        );
        assert!(parsed.records.iter().all(|r| r.placement == Placement::OutOfPlace));
        let r = &parsed.records[0];
        assert!(
            (r.busbw_gbps - 1024.0 / 10e-6 / 1e9).abs() < 1e-12,
            "busbw from the sample's own time"
        );
        assert_eq!(
            parsed.warnings,
            ["results[0].in_place_per_iter: \"times_us\" is not a list of times: that point is not imported"]
        );
    }

    #[test]
    fn json_that_is_not_an_nccl_tests_file_is_refused() {
        assert!(
            parse("{\"a\":1}", "x.json", &Given::default())
                .unwrap_err()
                .contains("results")
        );
        assert!(
            parse("{", "x.json", &Given::default())
                .unwrap_err()
                .contains("not valid JSON")
        );
    }
}
