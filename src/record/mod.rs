//! One measured point: the CSV schema (docs/csv.md), the one place where
//! algorithmic and bus bandwidth are computed, and `CaseKey`, the one key
//! that joins, deduplicates and groups rows; and `read`, the one reader of
//! run CSVs (compare, plot, suite and the post-run views use it).
//!
//! Columns are typed (collective, dtype, op, placement, hierarchy, backend,
//! transport): a CSV is parsed once, where it is read, and a bad value is
//! an error there. Only `read` touches files, and only to read them.

pub mod read;
pub mod torn;
pub mod workload;

use std::cmp::Ordering;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::collective::Collective;
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::{
    Algo, AlgoChoice, AlgoPin, AlgoSource, Average, BackendKind, Chosen, DType, IterPolicy, Metric, Named, Placement,
    Proto, ReduceOp, Register, TimingMethod,
};

/// Version of the CSV/JSON record schema.
pub const SCHEMA_VERSION: u32 = 1;

/// The columns, in order; field names are the header names. Optional
/// columns (`Extras`) come last and default to absent, so producers write
/// `..Record::default()` for what they do not measure (the typed columns'
/// defaults are placeholders every producer sets).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub run_id: String,
    pub timestamp: String,
    pub host: String,
    pub backend: BackendKind,
    pub backend_version: String,
    /// The requested profile.
    pub transport: Profile,
    /// What the library used, merged over ranks (free text).
    pub transport_observed: String,
    pub hierarchy: Hierarchy,
    pub collective: Collective,
    pub dtype: DType,
    /// `none` in the CSV for collectives that do not reduce.
    #[serde(with = "op_column")]
    pub op: Option<ReduceOp>,
    /// -1 in the CSV where there is no root.
    #[serde(with = "root_column")]
    pub root: Option<usize>,
    pub placement: Placement,
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
    /// How the row was measured (`METHOD_COLUMNS`, always written). `None`
    /// where a CSV written before these columns existed lacks them, or an
    /// imported tool did not say.
    /// The binary that measured the row (imported: the tool and version).
    #[serde(default)]
    pub collbench_version: Option<String>,
    #[serde(default)]
    pub timing: Option<TimingMethod>,
    #[serde(default)]
    pub average: Option<Average>,
    #[serde(default)]
    pub iter_policy: Option<IterPolicy>,
    /// The precision policy's target: relative half-width, in percent.
    #[serde(default)]
    pub precision_target_pct: Option<f64>,
    /// The achieved relative half-width of the 95% confidence interval of
    /// the time per operation, in percent.
    #[serde(default)]
    pub precision_pct: Option<f64>,
    #[serde(default)]
    pub agg_iters: Option<u32>,
    #[serde(default)]
    pub cuda_graph: Option<u32>,
    /// `-R`: `false`, `true` (ncclCommRegister) or `symmetric`
    /// (ncclCommWindowRegister).
    #[serde(default)]
    pub register: Option<Register>,
    #[serde(default)]
    pub rotate: Option<bool>,
    /// Which sample of the point this row is: the sweep it came from,
    /// from 1 (`--repeat`/`--cycles`).
    #[serde(default)]
    pub cycle: Option<u64>,
    /// Samples asked per point (`--repeat`/`--cycles`; 0: until stopped).
    #[serde(default)]
    pub samples: Option<u64>,
    /// With `--phase-times`, on hierarchical rows: the mean over ranks of
    /// each phase's time per operation (intra-node, inter-node, intra-node).
    #[serde(default)]
    pub phase_intra1_us: Option<f64>,
    #[serde(default)]
    pub phase_inter_us: Option<f64>,
    #[serde(default)]
    pub phase_intra2_us: Option<f64>,
    /// With `--algo-record` (`ALGO_COLUMNS`): which algorithm and protocol
    /// NCCL ran for the point, one or `mixed` where its launches used
    /// several (`algo_choices` lists them); none where nothing said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algo: Option<Chosen<Algo>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proto: Option<Chosen<Proto>>,
    /// The channels every launch used (none where they differ or the
    /// source does not say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nchannels: Option<u32>,
    /// Where `algo` came from: `log`, or `unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algo_source: Option<AlgoSource>,
    /// Bus bandwidth with the factor of the algorithm NCCL ran
    /// (`collective::algo_bus_factor`), where one algorithm ran and a
    /// factor is established; `busbw_gbps` keeps nccl-tests' Ring factor.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busbw_algo_gbps: Option<f64>,
    /// `--algo`/`--proto`: what the row's sweep pinned (`tree`,
    /// `ring/simple`); none where NCCL chose freely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub algo_pin: Option<AlgoPin>,
    /// Every choice of the point's launches, with how many made it (the
    /// JSON's records; not a CSV column).
    #[serde(default, skip_serializing_if = "Option::is_none", skip_deserializing)]
    pub algo_choices: Option<Vec<AlgoChoice>>,
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
    /// alltoallv: its traffic (`spread=0.5`, `matrix=FILE`); empty on
    /// other collectives and for nccl-tests' default traffic (spread 1).
    /// The column is there when the run measures alltoallv with another.
    #[serde(default)]
    pub traffic: Option<String>,
    /// With `--split`: the parallel group the row measured (`0`, `1`, ...,
    /// by ascending colour), or `all` for the aggregate nccl-tests prints.
    /// The column is there only when the run splits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// With `-I`: every timed iteration's time at its slowest rank, in
    /// microseconds, for nccl-tests' JSON (`report::nccl_tests_json`);
    /// neither a CSV column nor in our JSON.
    #[serde(skip)]
    pub iter_times_us: Option<Vec<f64>>,
}

impl Metric {
    /// The value of this metric in row `r`.
    pub fn value(self, r: &Record) -> f64 {
        match self {
            Metric::Busbw => r.busbw_gbps,
            Metric::Algbw => r.algbw_gbps,
            Metric::Time => r.time_us,
        }
    }
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

/// How each row was measured, and which sample it is: written on every
/// row, after the schema-1 columns (docs/csv.md: more columns may follow).
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

/// Extra columns written after the schema-1 columns with `--phase-times`.
pub const PHASE_COLUMNS: [&str; 3] = ["phase_intra1_us", "phase_inter_us", "phase_intra2_us"];

/// Extra columns written with `--algo-record` (docs/csv.md).
pub const ALGO_COLUMNS: [&str; 6] = [
    "algo",
    "proto",
    "nchannels",
    "algo_source",
    "busbw_algo_gbps",
    "algo_pin",
];

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
    /// `label` (`--label`).
    pub label: bool,
    /// `traffic` (the run measures alltoallv with a traffic other than
    /// the default).
    pub traffic: bool,
    /// `group` (`--split`).
    pub group: bool,
    /// `ALGO_COLUMNS` (`--algo-record`).
    pub algo: bool,
}

impl Extras {
    pub fn header(&self) -> Vec<&'static str> {
        let mut h = COLUMNS.to_vec();
        h.extend(METHOD_COLUMNS);
        if self.per_iter {
            h.extend(ITER_COLUMNS);
        }
        if self.phases {
            h.extend(PHASE_COLUMNS);
        }
        if self.label {
            h.push("label");
        }
        if self.traffic {
            h.push("traffic");
        }
        if self.group {
            h.push("group");
        }
        if self.algo {
            h.extend(ALGO_COLUMNS);
        }
        h
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_default()
}

impl Record {
    /// `busbw_algo_gbps`: the algorithm bandwidth times the bus factor of
    /// the one algorithm the row's launches ran, on the row's ranks
    /// (`collective::algo_bus_factor`); `None` where several ran, none is
    /// known, or no factor is established.
    pub fn busbw_of_algorithm(&self) -> Option<f64> {
        let Some(Chosen::One(algo)) = self.algo else {
            return None;
        };
        let n = usize::try_from(self.nranks).ok()?;
        crate::collective::algo_bus_factor(self.collective, algo, n).map(|f| self.algbw_gbps * f)
    }

    /// The CSV fields of `extras.header()`. Floats are written with Rust's
    /// shortest round-trip form, so every value reads back exactly.
    pub fn csv_fields(&self, extras: Extras) -> Vec<String> {
        let mut f = vec![
            self.run_id.clone(),
            self.timestamp.clone(),
            self.host.clone(),
            self.backend.name().into(),
            self.backend_version.clone(),
            self.transport.name().into(),
            self.transport_observed.clone(),
            self.hierarchy.name().into(),
            self.collective.name().into(),
            self.dtype.name().into(),
            op_column::text(self.op).into(),
            root_column::value(self.root).to_string(),
            self.placement.name().into(),
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
            self.collbench_version.clone().unwrap_or_default(),
            opt(self.timing),
            opt(self.average),
            opt(self.iter_policy),
            opt(self.precision_target_pct),
            opt(self.precision_pct),
            opt(self.agg_iters),
            opt(self.cuda_graph),
            opt(self.register.map(Register::column)),
            opt(self.rotate),
            opt(self.cycle),
            opt(self.samples),
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
        if extras.label {
            f.push(self.label.clone().unwrap_or_default());
        }
        if extras.traffic {
            f.push(self.traffic.clone().unwrap_or_default());
        }
        if extras.group {
            f.push(self.group.clone().unwrap_or_default());
        }
        if extras.algo {
            f.extend([
                opt(self.algo),
                opt(self.proto),
                opt(self.nchannels),
                opt(self.algo_source),
                opt(self.busbw_algo_gbps),
                opt(self.algo_pin),
            ]);
        }
        f
    }
}

/// `op`: an operation's name, or `none`.
pub(crate) mod op_column {
    use super::*;

    pub fn text(op: Option<ReduceOp>) -> &'static str {
        op.map_or("none", ReduceOp::name)
    }

    pub fn serialize<S: Serializer>(op: &Option<ReduceOp>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(text(*op))
    }

    pub fn parse(text: &str) -> Result<Option<ReduceOp>, String> {
        if text.trim().eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        ReduceOp::parse(text)
            .map(Some)
            .ok_or_else(|| format!("unknown operation '{text}' (expected none or a reduction)"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<ReduceOp>, D::Error> {
        let text = std::borrow::Cow::<str>::deserialize(d)?;
        parse(&text).map_err(serde::de::Error::custom)
    }
}

/// `root`: a rank, or -1 where there is none.
pub(crate) mod root_column {
    use super::*;

    pub fn value(root: Option<usize>) -> i64 {
        root.map_or(-1, |r| r as i64)
    }

    pub fn serialize<S: Serializer>(root: &Option<usize>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_i64(value(*root))
    }

    pub fn parse(root: i64) -> Result<Option<usize>, String> {
        match root {
            -1 => Ok(None),
            r => usize::try_from(r)
                .map(Some)
                .map_err(|_| format!("root {r} is neither a rank nor -1")),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        parse(i64::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

/// Why `text` is not a value of the typed column `name`, if it is not:
/// for a row the CSV reader refused without saying which column.
pub fn check_column(name: &str, text: &str) -> Result<(), String> {
    fn known<T: Named>(text: &str) -> Result<(), String> {
        match T::parse(text) {
            Some(_) => Ok(()),
            None => Err(format!("unknown {} '{text}'", T::WHAT)),
        }
    }
    match name {
        "backend" => known::<BackendKind>(text),
        "transport" => known::<Profile>(text),
        "hierarchy" => known::<Hierarchy>(text),
        "collective" => known::<Collective>(text),
        "dtype" => known::<DType>(text),
        "placement" => known::<Placement>(text),
        "timing" | "average" | "iter_policy" if text.is_empty() => Ok(()),
        "timing" => known::<TimingMethod>(text),
        "average" => known::<Average>(text),
        "iter_policy" => known::<IterPolicy>(text),
        "algo" | "proto" | "algo_source" if text.is_empty() => Ok(()),
        "algo" => Chosen::<Algo>::parse(text)
            .map(drop)
            .ok_or_else(|| format!("unknown algorithm '{text}'")),
        "proto" => Chosen::<Proto>::parse(text)
            .map(drop)
            .ok_or_else(|| format!("unknown protocol '{text}'")),
        "algo_source" => known::<AlgoSource>(text),
        "op" => op_column::parse(text).map(drop),
        "root" => match text.trim().parse::<i64>() {
            Ok(r) => root_column::parse(r).map(drop),
            Err(e) => Err(e.to_string()),
        },
        _ => Ok(()),
    }
}

/// A measured case: what two rows must share to be the same measurement
/// (compare joins on it, a folder of CSVs keeps the latest row of each,
/// `--by` and plot group on it with some fields left out). Serializes as
/// compare's JSON names a case.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CaseKey {
    pub collective: Collective,
    pub hierarchy: Hierarchy,
    pub transport: Profile,
    pub dtype: DType,
    #[serde(with = "op_column")]
    pub op: Option<ReduceOp>,
    #[serde(with = "root_column")]
    pub root: Option<usize>,
    pub placement: Placement,
    pub size_bytes: u64,
    /// Absent when rows of different rank counts are compared.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nranks: Option<u64>,
    /// alltoallv's traffic: runs of different traffic are different cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
    /// `--split`: each group's rows and the aggregate are different cases.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `--algo`/`--proto`: each pinned sweep's rows are cases of their own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub algo_pin: Option<AlgoPin>,
}

impl CaseKey {
    /// The case of `r`, with its rank count unless `with_ranks` is false.
    pub fn of(r: &Record, with_ranks: bool) -> CaseKey {
        CaseKey {
            collective: r.collective,
            hierarchy: r.hierarchy,
            transport: r.transport,
            dtype: r.dtype,
            op: r.op,
            root: r.root,
            placement: r.placement,
            size_bytes: r.size_bytes,
            nranks: with_ranks.then_some(r.nranks),
            traffic: r.traffic.clone(),
            group: r.group.clone(),
            algo_pin: r.algo_pin,
        }
    }

    /// The case without its size: the line or group a size belongs to.
    pub fn any_size(mut self) -> CaseKey {
        self.size_bytes = 0;
        self
    }

    /// Report order: collectives as a sweep runs them, then hierarchy,
    /// transport, type and operation by name, root, size, out-of-place
    /// before in-place, rank count.
    fn order(&self) -> impl Ord + '_ {
        (
            self.collective,
            self.hierarchy.name(),
            self.transport.name(),
            self.dtype.name(),
            op_column::text(self.op),
            root_column::value(self.root),
            self.size_bytes,
            self.placement == Placement::InPlace,
            self.nranks,
            self.traffic.as_deref(),
            self.group.as_deref(),
            self.algo_pin,
        )
    }

    /// `all_reduce rs-ar-ag transport ib float sum out_of_place 1 MiB`,
    /// naming only what a human needs (no op or root where there is none).
    pub fn describe(&self) -> String {
        let mut parts = vec![self.collective.name().to_string()];
        if !self.hierarchy.is_flat() {
            parts.push(self.hierarchy.name().into());
        }
        if self.transport != Profile::Auto {
            parts.push(format!("transport {}", self.transport));
        }
        parts.push(self.dtype.name().into());
        if let Some(op) = self.op {
            parts.push(op.name().into());
        }
        if let Some(root) = self.root {
            parts.push(format!("root {root}"));
        }
        parts.push(self.placement.name().into());
        parts.push(human_size(self.size_bytes));
        if let Some(n) = self.nranks {
            parts.push(format!("{n} ranks"));
        }
        if let Some(traffic) = &self.traffic {
            parts.push(traffic.clone());
        }
        if let Some(group) = &self.group {
            parts.push(format!("group {group}"));
        }
        if let Some(pin) = self.algo_pin {
            parts.push(format!("pinned {pin}"));
        }
        parts.join(" ")
    }
}

impl PartialOrd for CaseKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for CaseKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.order().cmp(&other.order())
    }
}

/// `8 B`, `64 KiB`, `1 MiB`; sizes that are not a whole number of the
/// unit stay in bytes.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 4] = [(1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (scale, unit) in UNITS {
        if bytes >= scale && bytes.is_multiple_of(scale) {
            return format!("{} {unit}", bytes / scale);
        }
    }
    format!("{bytes} B")
}

/// (algbw, busbw) in GB/s (1 GB = 1e9 bytes) for `size_bytes` moved in
/// `time_s` seconds by a collective whose bus factor is `factor`:
/// algbw = size / time, busbw = algbw * factor (docs/bandwidth.md, after
/// nccl-tests' doc/PERFORMANCE.md).
pub fn bandwidth_gbps(size_bytes: u64, time_s: f64, factor: f64) -> (f64, f64) {
    if time_s <= 0.0 || !time_s.is_finite() {
        return (0.0, 0.0);
    }
    let algbw = size_bytes as f64 / time_s / 1e9;
    (algbw, algbw * factor)
}

#[cfg(test)]
pub(crate) mod tests;
