//! `collbench run`'s options (`RunArgs`: every group, `groups.rs`'s shared
//! ones and the sweep's own here), their value parsers, and the `run`
//! subcommand parsed on its own (`--config` files, suites).

use std::path::PathBuf;

use clap::{Args, CommandFactory, FromArgMatches};
use serde::Serialize;

use crate::collective::{Collective, Spread};
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::{
    Algo, AlgoRecording, Average, Choice, DType, ProgressMode, Proto, ReduceOp, Register, RootChoice, Size, SplitRule,
    Switch,
};

use super::Cli;
use super::groups::{BlockingArgs, CommonArgs, LabelArgs, MEASUREMENT, OUTPUT, ProgressArgs, RegisterArgs, RepeatArgs};

/// Options of `collbench run`: every group, each flattened (its fields
/// keep their clap ids, and the serialization the digest and `to_args`
/// read stays flat). Every one can also come from `--config` (its long
/// name is the key).
#[derive(Clone, Debug, Args, Serialize)]
pub struct RunArgs {
    /// Read options from a TOML file whose keys are the long option names; command-line options win
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    #[command(flatten)]
    #[serde(flatten)]
    pub sizes: SizeArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub cases: CaseArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub hierarchy: HierarchyArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub timing: TimingArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub repeat: RepeatArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub blocking: BlockingArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub register: RegisterArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub label: LabelArgs,
}

/// The sizes of a sweep.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Sizes")]
pub struct SizeArgs {
    /// Smallest size in bytes
    #[arg(short = 'b', long, value_name = "SIZE", default_value = "8")]
    pub minbytes: Size,

    /// Largest size in bytes
    #[arg(short = 'e', long, value_name = "SIZE", default_value = "32M")]
    pub maxbytes: Size,

    /// Multiply the size by N between points [default: 2 unless -i is given]
    #[arg(short = 'f', long, value_name = "N")]
    pub stepfactor: Option<u64>,

    /// Add SIZE between points, used when -f is not given or is 1 [default: 1M]
    #[arg(short = 'i', long, value_name = "SIZE")]
    pub stepbytes: Option<Size>,
}

/// How a sweep's points are timed.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = MEASUREMENT)]
pub struct TimingArgs {
    /// Timed iterations per point, exactly N as nccl-tests [default: until --precision is reached]
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: Option<u32>,

    /// Without -n: time each point until the 95% confidence interval of its median batch time is within +-PCT%, or --max-time
    #[arg(long, value_name = "PCT", default_value = "5", value_parser = precision_percent)]
    pub precision: f64,

    /// The precision policy's cap: a point's timed batches stop after SECS, precise or not (at least 6 batches)
    #[arg(long, value_name = "SECS", default_value = "0.1", value_parser = seconds_up_to_an_hour)]
    pub max_time: f64,

    /// Without -n: time each point for about SECS (5 to 10000 iterations) instead of the precision policy
    #[arg(long, value_name = "SECS", value_parser = seconds_up_to_an_hour)]
    pub min_time: Option<f64>,

    /// Time every iteration: p50, p99, CV and the slowest rank (duration) per point, and a slow-rank verdict (arrival skew at the checks)
    #[arg(short = 'I', long)]
    pub per_iter: bool,

    /// With -I: a rank is late at a point when its own part of the check takes this many percent longer than the other ranks' median; one late significantly often is named
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = percent)]
    pub straggler_threshold: f64,

    /// Shift each operation one point-size further through buffers of the largest size, as nccl-tests does (the default on nccl)
    #[arg(long, overrides_with = "no_rotate")]
    pub rotate: bool,

    /// Reuse one buffer for every operation of a point, as OSU and IMB do (the default on mpi)
    #[arg(long, overrides_with = "rotate")]
    pub no_rotate: bool,

    /// Operations per timed iteration, issued as one NCCL group (nccl-tests' -m; nccl backend)
    #[arg(short = 'm', long, alias = "agg_iters", value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub agg_iters: u32,

    /// Capture the timed iterations in a CUDA graph and replay it N times; 0 is off (nccl backend, NCCL 2.9+)
    #[arg(short = 'G', long, alias = "cudagraph", value_name = "N", default_value = "0")]
    pub cuda_graph: u32,

    /// Untimed warm-up iterations per point
    #[arg(short = 'w', long, alias = "warmup_iters", value_name = "N", default_value = "5")]
    pub warmup: u32,

    /// Cross-rank time reduction (nccl-tests' 0..3 name the same four)
    #[arg(short = 'a', long, value_name = "MODE", default_value = "avg", ignore_case = true)]
    pub average: Average,

    /// Record which algorithm, protocol and channels NCCL chose for each row (the algo columns, nccl backend): plugin uses collbench's profiler plugin (NCCL 2.23+); log reads rank 0's TUNING lines (NCCL 2.20+; one log line per collective, written inside the timed loop); auto: the plugin, else the log, else unknown
    #[arg(long, value_name = "HOW", default_value = "auto", ignore_case = true)]
    pub algo_record: AlgoRecording,

    /// Pin NCCL's algorithm: one sweep per value, of the collectives it runs, on a communicator made with NCCL_ALGO set (nccl backend; docs/algorithms.md)
    #[arg(long = "algo", value_name = "LIST", value_delimiter = ',', ignore_case = true)]
    pub algos: Vec<Algo>,

    /// Pin NCCL's protocol: one sweep per value (with --algo, per pair), on a communicator made with NCCL_PROTO set (nccl backend)
    #[arg(long = "proto", value_name = "LIST", value_delimiter = ',', ignore_case = true)]
    pub protos: Vec<Proto>,
}

/// Which collectives, types, operations, roots and groups a sweep runs.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "What to run")]
pub struct CaseArgs {
    /// Collectives to run: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, alltoallv, gather, scatter, sendrecv, or all
    #[arg(long, value_name = "LIST", default_value = "all")]
    pub collectives: Choice<Collective>,

    /// Element types: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, or all
    #[arg(short = 'd', long, alias = "datatype", value_name = "LIST", default_value = "float")]
    pub dtype: Choice<DType>,

    /// Reduction operations: sum, prod, min, max, avg, or all
    #[arg(short = 'o', long, value_name = "LIST", default_value = "sum")]
    pub op: Choice<ReduceOp>,

    /// Root rank of broadcast, reduce, gather and scatter, or all
    #[arg(short = 'r', long, value_name = "RANK", default_value = "0")]
    pub root: RootChoice,

    /// alltoallv's generated traffic (nccl-tests' NCCL_TESTS_ALLTOALLV_SPREAD): 0 sends every peer the same, 1 weights each peer by its distance (none to itself); every rank sends the same total
    #[arg(long, value_name = "0..1", default_value = "1", conflicts_with = "alltoallv_matrix")]
    pub alltoallv_spread: Spread,

    /// alltoallv's traffic from a file instead (nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_FILE): a square matrix, row i column j the bytes rank i sends rank j; one size, -b equal to -e
    #[arg(long, value_name = "FILE")]
    pub alltoallv_matrix: Option<PathBuf>,

    /// Every cell of --alltoallv-matrix times X (nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_SCALE)
    #[arg(long, value_name = "X", default_value = "1",
          value_parser = non_negative, requires = "alltoallv_matrix")]
    pub alltoallv_matrix_scale: f64,

    /// Parallel groups (nccl-tests' NCCL_TESTS_SPLIT): ranks whose process (the world rank under a launcher; one for all of -g) gives the same colour under AND, OR, MOD or DIV of a value ('MOD 2', 'AND 0x7'; 010 is octal, as in nccl-tests) run the sweep together, every group at once; a row per group and one for all
    #[arg(long, value_name = "RULE")]
    pub split: Option<SplitRule>,

    /// --split AND of this hexadecimal mask (nccl-tests' NCCL_TESTS_SPLIT_MASK)
    #[arg(long, value_name = "HEX", value_parser = SplitRule::mask)]
    pub split_mask: Option<SplitRule>,
}

/// How all-reduce is organised.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Hierarchy")]
pub struct HierarchyArgs {
    /// All-reduce organisation: flat, rs-ar-ag, reduce-bcast, or all; other collectives always run flat
    #[arg(long, value_name = "LIST", default_value = "flat")]
    pub hierarchy: Choice<Hierarchy>,

    /// Add the time of each hierarchical phase (intra, inter, intra) to the CSV
    #[arg(long)]
    pub phase_times: bool,
}

/// A sweep's reports.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct OutputArgs {
    /// CSV report path [default: results/<run id>.csv]
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,

    /// Also write a JSON report (records plus the run's configuration)
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// A timestamp (%Y-%m-%d %H:%M:%S, UTC) at the end of every table row, as nccl-tests' -S; `-S 0` turns it off
    #[arg(short = 'S', long, value_name = "0|1", num_args = 0..=1, default_value = "0", default_missing_value = "1")]
    pub timestamps: Switch,

    /// The schema of --json: collbench (ours), or nccl-tests-json (the file nccl-tests' -J writes, which its tools/analyze_perf_json.py reads)
    #[arg(long, value_name = "FORMAT", default_value = "collbench",
          value_parser = ["collbench", "nccl-tests-json"])]
    pub output_format: String,

    #[command(flatten)]
    #[serde(flatten)]
    pub progress: ProgressArgs,
}

/// Longest `--timeout`: a year.
pub const MAX_TIMEOUT_S: u64 = 365 * 24 * 3600;

/// `--transport`: a profile, or `help` (print every profile and exit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportArg {
    Help,
    Profile(Profile),
}

impl std::str::FromStr for TransportArg {
    type Err = String;

    fn from_str(text: &str) -> Result<TransportArg, String> {
        if text.trim().eq_ignore_ascii_case("help") {
            return Ok(TransportArg::Help);
        }
        Profile::parse(text).map(TransportArg::Profile).ok_or_else(|| {
            format!(
                "unknown profile '{}' (expected {}; `--transport help` lists what each sets)",
                text.trim(),
                Profile::names()
            )
        })
    }
}

impl std::fmt::Display for TransportArg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TransportArg::Help => f.write_str("help"),
            TransportArg::Profile(p) => f.write_str(p.name()),
        }
    }
}

impl Serialize for TransportArg {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A positive number of seconds, at most an hour (`--min-time`).
fn seconds_up_to_an_hour(text: &str) -> Result<f64, String> {
    positive_number(text, 3600.0)
}

/// A finite number of at least 0 (`--alltoallv-matrix-scale`).
fn non_negative(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("'{}' is not a number of at least 0", text.trim())),
    }
}

/// A positive percentage (`--straggler-threshold`).
fn percent(text: &str) -> Result<f64, String> {
    positive_number(text, 1e6)
}

/// A precision target: above 0, at most 100 percent.
fn precision_percent(text: &str) -> Result<f64, String> {
    positive_number(text, 100.0)
}

fn positive_number(text: &str, max: f64) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= max => Ok(v),
        _ => Err(format!("'{}' is not a number above 0 and at most {max}", text.trim())),
    }
}

/// Free text that fits on one line of a table, a CSV cell or a legend.
pub(super) fn one_line_text(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("the text is empty".into());
    }
    if text.chars().any(char::is_control) {
        return Err("the text must be one line, without control characters".into());
    }
    Ok(text.to_string())
}

/// `-R 0|1|2`, as nccl-tests' `--local_register`.
pub(super) fn register_mode(text: &str) -> Result<Register, String> {
    text.parse()
}

/// `--progress` and `--no-progress`, of which the last given wins.
pub fn progress_mode(no_progress: bool, progress: bool) -> ProgressMode {
    match (no_progress, progress) {
        (true, _) => ProgressMode::Never,
        (false, true) => ProgressMode::Always,
        (false, false) => ProgressMode::Auto,
    }
}

/// The `run` subcommand as `Cli` defines it.
pub fn run_command() -> clap::Command {
    let mut cli = Cli::command();
    cli.build();
    cli.find_subcommand("run")
        .cloned()
        .unwrap_or_else(|| RunArgs::augment_args(clap::Command::new("run")))
}

/// Parses the arguments of `collbench run` (without the program and
/// subcommand names).
pub fn parse_run<I, T>(args: I) -> Result<RunArgs, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let argv = std::iter::once(std::ffi::OsString::from("run")).chain(args.into_iter().map(Into::into));
    let mut cmd = run_command();
    let matches = cmd
        .clone()
        .try_get_matches_from(argv)
        .map_err(|e| super::numbers::readable(e, &mut cmd))?;
    RunArgs::from_arg_matches(&matches)
}
