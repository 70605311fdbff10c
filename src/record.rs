//! One measured point: the CSV schema (DESIGN.md "CSV (schema 1)") and the
//! one place where algorithmic and bus bandwidth are computed.

use serde::{Deserialize, Serialize};

/// Version of the CSV/JSON record schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The columns, in order; field names are the header names. Optional
/// columns (`Extras`) come last and default to absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub run_id: String,
    pub timestamp: String,
    pub host: String,
    pub backend: String,
    pub backend_version: String,
    pub transport: String,
    pub transport_observed: String,
    pub hierarchy: String,
    pub collective: String,
    pub dtype: String,
    pub op: String,
    pub root: i64,
    pub placement: String,
    pub size_bytes: u64,
    pub count: u64,
    pub nranks: u64,
    pub nnodes: u64,
    pub ranks_per_node: u64,
    pub iters: u64,
    pub warmup: u64,
    pub time_us: f64,
    pub time_min_us: f64,
    pub time_max_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Empty when checking is off.
    pub wrong: Option<u64>,
    /// With `--phase-times`, on hierarchical rows: the mean over ranks of
    /// each phase's time per operation (intra-node, inter-node, intra-node).
    #[serde(default)]
    pub phase_intra1_us: Option<f64>,
    #[serde(default)]
    pub phase_inter_us: Option<f64>,
    #[serde(default)]
    pub phase_intra2_us: Option<f64>,
    /// With `--cycles` other than 1: which sweep (from 1).
    #[serde(default)]
    pub cycle: Option<u64>,
    /// With `-I`: the distribution of per-iteration times, each iteration
    /// taken at its slowest rank, in microseconds, and its coefficient of
    /// variation (standard deviation / mean).
    #[serde(default)]
    pub time_iter_min_us: Option<f64>,
    #[serde(default)]
    pub time_p50_us: Option<f64>,
    #[serde(default)]
    pub time_p99_us: Option<f64>,
    #[serde(default)]
    pub time_iter_max_us: Option<f64>,
    #[serde(default)]
    pub time_cv: Option<f64>,
    /// With `-I`: the rank whose time was the longest, and by how much it
    /// exceeds the median rank's, in percent.
    #[serde(default)]
    pub slowest_rank: Option<u64>,
    #[serde(default)]
    pub slowest_excess_pct: Option<f64>,
    /// With `--label`: the run's label.
    #[serde(default)]
    pub label: Option<String>,
}

/// Header of schema 1, in column order.
pub const COLUMNS: [&str; 26] = [
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

/// Extra columns written after the schema-1 columns with `--phase-times`.
pub const PHASE_COLUMNS: [&str; 3] = ["phase_intra1_us", "phase_inter_us", "phase_intra2_us"];

/// Extra columns written with `-I`.
pub const ITER_COLUMNS: [&str; 7] = [
    "time_iter_min_us",
    "time_p50_us",
    "time_p99_us",
    "time_iter_max_us",
    "time_cv",
    "slowest_rank",
    "slowest_excess_pct",
];

/// Which optional columns a CSV carries, after the schema-1 ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// `ITER_COLUMNS` (`-I`).
    pub per_iter: bool,
    /// `PHASE_COLUMNS` (`--phase-times`).
    pub phases: bool,
    /// `cycle` (`--cycles` other than 1).
    pub cycle: bool,
    /// `label` (`--label`).
    pub label: bool,
}

impl Extras {
    pub fn header(&self) -> Vec<&'static str> {
        let mut h = COLUMNS.to_vec();
        if self.per_iter {
            h.extend(ITER_COLUMNS);
        }
        if self.phases {
            h.extend(PHASE_COLUMNS);
        }
        if self.cycle {
            h.push("cycle");
        }
        if self.label {
            h.push("label");
        }
        h
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl Record {
    /// The CSV fields of `extras.header()`. Floats are written with Rust's
    /// shortest round-trip form, so every value reads back exactly.
    pub fn csv_fields(&self, extras: Extras) -> Vec<String> {
        let mut f = vec![
            self.run_id.clone(),
            self.timestamp.clone(),
            self.host.clone(),
            self.backend.clone(),
            self.backend_version.clone(),
            self.transport.clone(),
            self.transport_observed.clone(),
            self.hierarchy.clone(),
            self.collective.clone(),
            self.dtype.clone(),
            self.op.clone(),
            self.root.to_string(),
            self.placement.clone(),
            self.size_bytes.to_string(),
            self.count.to_string(),
            self.nranks.to_string(),
            self.nnodes.to_string(),
            self.ranks_per_node.to_string(),
            self.iters.to_string(),
            self.warmup.to_string(),
            self.time_us.to_string(),
            self.time_min_us.to_string(),
            self.time_max_us.to_string(),
            self.algbw_gbps.to_string(),
            self.busbw_gbps.to_string(),
            opt(self.wrong),
        ];
        if extras.per_iter {
            f.extend([
                opt(self.time_iter_min_us),
                opt(self.time_p50_us),
                opt(self.time_p99_us),
                opt(self.time_iter_max_us),
                opt(self.time_cv),
                opt(self.slowest_rank),
                opt(self.slowest_excess_pct),
            ]);
        }
        if extras.phases {
            f.extend([
                opt(self.phase_intra1_us),
                opt(self.phase_inter_us),
                opt(self.phase_intra2_us),
            ]);
        }
        if extras.cycle {
            f.push(opt(self.cycle));
        }
        if extras.label {
            f.push(self.label.clone().unwrap_or_default());
        }
        f
    }
}

/// (algbw, busbw) in GB/s (1 GB = 1e9 bytes) for `size_bytes` moved in
/// `time_s` seconds by a collective whose bus factor is `factor`:
/// algbw = size / time, busbw = algbw * factor (nccl-tests
/// doc/PERFORMANCE.md).
pub fn bandwidth_gbps(size_bytes: u64, time_s: f64, factor: f64) -> (f64, f64) {
    if time_s <= 0.0 || !time_s.is_finite() {
        return (0.0, 0.0);
    }
    let algbw = size_bytes as f64 / time_s / 1e9;
    (algbw, algbw * factor)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn bandwidth_is_bytes_per_nanosecond_times_the_factor() {
        // 1 GB in 1 s is 1 GB/s; all_reduce at 8 ranks: busbw = 1.75 x algbw
        assert_eq!(bandwidth_gbps(1_000_000_000, 1.0, 1.75), (1.0, 1.75));
        // 32 MiB in 1 ms
        let (alg, bus) = bandwidth_gbps(32 << 20, 1e-3, 0.75);
        assert!((alg - 33.554432).abs() < 1e-9);
        assert!((bus - 25.165824).abs() < 1e-9);
        assert_eq!(bandwidth_gbps(8, 0.0, 1.0), (0.0, 0.0));
    }

    pub(crate) fn sample() -> Record {
        Record {
            run_id: "r".into(),
            timestamp: "t".into(),
            host: "h".into(),
            backend: "mpi".into(),
            backend_version: "v".into(),
            transport: "auto".into(),
            transport_observed: "unknown".into(),
            hierarchy: "flat".into(),
            collective: "all_reduce".into(),
            dtype: "float".into(),
            op: "sum".into(),
            root: -1,
            placement: "in_place".into(),
            size_bytes: 8,
            count: 2,
            nranks: 2,
            nnodes: 1,
            ranks_per_node: 2,
            iters: 20,
            warmup: 5,
            time_us: 1.5,
            time_min_us: 1.0,
            time_max_us: 2.0,
            algbw_gbps: 0.1,
            busbw_gbps: 1.0 / 3.0,
            wrong: None,
            phase_intra1_us: Some(0.25),
            phase_inter_us: None,
            phase_intra2_us: Some(1e-3),
            cycle: Some(3),
            time_iter_min_us: Some(1.0),
            time_p50_us: Some(1.25),
            time_p99_us: Some(2.5),
            time_iter_max_us: Some(3.0),
            time_cv: Some(0.125),
            slowest_rank: Some(1),
            slowest_excess_pct: Some(12.5),
            label: Some("nightly, a \"quoted\" name".into()),
        }
    }

    #[test]
    fn csv_fields_follow_the_column_lists_and_read_back_exactly() {
        let r = sample();
        for bits in 0..16u8 {
            let (per_iter, phases, cycle, label) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
            let extras = Extras {
                per_iter,
                phases,
                cycle,
                label,
            };
            let fields = r.csv_fields(extras);
            let header = extras.header();
            assert_eq!(fields.len(), header.len());
            let mut w = csv::Writer::from_writer(Vec::new());
            w.write_record(&header).unwrap();
            w.write_record(&fields).unwrap();
            let bytes = w.into_inner().unwrap();
            let back: Record = csv::Reader::from_reader(&bytes[..])
                .deserialize()
                .next()
                .unwrap()
                .unwrap();
            let keep = |v: Option<f64>| v.filter(|_| per_iter);
            let want = Record {
                time_iter_min_us: keep(r.time_iter_min_us),
                time_p50_us: keep(r.time_p50_us),
                time_p99_us: keep(r.time_p99_us),
                time_iter_max_us: keep(r.time_iter_max_us),
                time_cv: keep(r.time_cv),
                slowest_rank: r.slowest_rank.filter(|_| per_iter),
                slowest_excess_pct: keep(r.slowest_excess_pct),
                phase_intra1_us: r.phase_intra1_us.filter(|_| phases),
                phase_intra2_us: r.phase_intra2_us.filter(|_| phases),
                cycle: r.cycle.filter(|_| cycle),
                label: r.label.clone().filter(|_| label),
                ..r.clone()
            };
            assert_eq!(back, want);
        }
        let fields = r.csv_fields(Extras::default());
        assert_eq!(fields[COLUMNS.len() - 1], "", "wrong is empty when unchecked");
        assert_eq!(fields[24], (1.0f64 / 3.0).to_string());
    }
}
