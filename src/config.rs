//! Every user input of a run, validated once: command-line values merged over
//! an optional TOML file into a `RunConfig`.
//!
//! Owns size parsing, list parsing and the TOML schema; every error is one
//! `Error::Usage` line naming the option (the TOML keys are the long option
//! names) and what was wrong. Checks that need the rank count or the backend
//! live in `engine::plan`.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::RunArgs;
use crate::collective::Collective;
use crate::error::Error;
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::{Average, DType, ReduceOp};

/// Most sizes one sweep may have; beyond it the step is surely a mistake.
pub const MAX_SIZES: usize = 4096;

pub const DEFAULT_MINBYTES: u64 = 8;
pub const DEFAULT_MAXBYTES: u64 = 32 << 20;
pub const DEFAULT_STEPFACTOR: u64 = 2;
pub const DEFAULT_STEPBYTES: u64 = 1 << 20;
pub const DEFAULT_MIN_TIME_S: f64 = 0.1;
pub const DEFAULT_STRAGGLER_PCT: f64 = 10.0;
pub const DEFAULT_WARMUP: u32 = 5;
pub const DEFAULT_CHECK: u32 = 1;
pub const DEFAULT_TIMEOUT_S: u64 = 600;

/// A validated run configuration. Rank-count-dependent checks (roots in
/// range, counts MPI can express) happen when the plan is built.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    pub sweep: SizeSweep,
    /// Timed iterations per point; `None` adapts to `min_time`.
    pub iters: Option<u32>,
    pub min_time: std::time::Duration,
    /// `-I`: time every iteration.
    pub per_iter: bool,
    /// A rank this much slower than the median (a fraction) is named.
    pub straggler_threshold: f64,
    /// Rotate operations through the largest size's allocation.
    pub rotate: bool,
    pub warmup: u32,
    pub check: u32,
    pub average: Average,
    pub blocking: bool,
    /// `-m`: operations per timed iteration, in one NCCL group.
    pub agg_iters: u32,
    /// `-G`: replays of the captured timed iterations; 0 = no graph.
    pub cuda_graph: u32,
    /// `-R`: register the buffers with the communicator.
    pub register: bool,
    /// Sweeps to run; 0 = until stopped.
    pub cycles: u64,
    /// Longest a point or the set-up may take; `None` = no watchdog.
    pub timeout: Option<std::time::Duration>,
    pub collectives: Vec<Collective>,
    pub dtypes: Choice<DType>,
    pub ops: Choice<ReduceOp>,
    pub roots: RootChoice,
    /// All-reduce modes to run (other collectives always run flat).
    pub hierarchies: Vec<Hierarchy>,
    /// Virtual nodes of this many consecutive ranks, instead of hosts.
    pub ranks_per_node: Option<usize>,
    pub phase_times: bool,
    pub backend: BackendChoice,
    /// `--transport`: the profile applied before MPI and NCCL start.
    pub transport: Profile,
    pub csv: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub overwrite: bool,
    pub progress: ProgressMode,
    /// `--nccl-lib`: the NCCL library (file or folder) to use.
    pub nccl_lib: Option<PathBuf>,
    /// `-g N`: run N ranks as threads of this one process (no MPI).
    pub threads: Option<usize>,
    pub inject_error: bool,
    /// Test-only: each rank writes the NCCL unique id it received here.
    pub trace_bootstrap: Option<PathBuf>,
    /// Test-only: sub-communicators from unique ids, never ncclCommSplit.
    pub no_comm_split: bool,
}

/// `all`, or an explicit list (in the user's order, without repeats).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice<T> {
    All,
    List(Vec<T>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RootChoice {
    All,
    Rank(usize),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendChoice {
    /// nccl where every rank has a GPU and libnccl, else mpi.
    Auto,
    Mpi,
    Nccl,
}

impl BackendChoice {
    pub fn name(self) -> &'static str {
        match self {
            BackendChoice::Auto => "auto",
            BackendChoice::Mpi => "mpi",
            BackendChoice::Nccl => "nccl",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProgressMode {
    /// Drawn when stderr is a terminal.
    Auto,
    Always,
    Never,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Factor(u64),
    Bytes(u64),
}

/// Requested sizes, in bytes: `min`, then stepping while `<= max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeSweep {
    pub min: u64,
    pub max: u64,
    pub step: Step,
}

impl SizeSweep {
    pub fn new(min: u64, max: u64, step: Step) -> Result<SizeSweep, Error> {
        if min == 0 {
            return Err(Error::usage("--minbytes must be at least 1 byte"));
        }
        if min > max {
            return Err(Error::usage(format!(
                "--minbytes {min} is larger than --maxbytes {max}"
            )));
        }
        match step {
            Step::Factor(f) if f < 2 => {
                return Err(Error::usage("--stepfactor must be at least 2 to step by factor"));
            }
            Step::Bytes(0) => return Err(Error::usage("--stepbytes must be at least 1 byte")),
            _ => {}
        }
        let sweep = SizeSweep { min, max, step };
        let n = sweep.len();
        if n > MAX_SIZES {
            return Err(Error::usage(format!(
                "the sweep from {min} to {max} bytes has {n} sizes, more than {MAX_SIZES}; use a larger --stepfactor or --stepbytes"
            )));
        }
        Ok(sweep)
    }

    fn next(&self, size: u64) -> Option<u64> {
        let next = match self.step {
            Step::Factor(f) => size.checked_mul(f)?,
            Step::Bytes(b) => size.checked_add(b)?,
        };
        (next <= self.max).then_some(next)
    }

    /// Number of sizes, computed without listing them.
    fn len(&self) -> usize {
        match self.step {
            Step::Bytes(b) => usize::try_from((self.max - self.min) / b + 1).unwrap_or(usize::MAX),
            Step::Factor(_) => self.sizes().len(),
        }
    }

    pub fn sizes(&self) -> Vec<u64> {
        std::iter::successors(Some(self.min), |&s| self.next(s)).collect()
    }
}

/// Parses a byte size: digits with an optional binary suffix K, M, G or T
/// (also KB/KiB, case-insensitive), as nccl-tests' `-b/-e` take them.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.is_empty() {
        return Err("empty size".into());
    }
    if t.starts_with('-') {
        return Err(format!("'{t}' is negative; sizes are byte counts"));
    }
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, suffix) = t.split_at(digits_end);
    if digits.is_empty() {
        return Err(format!("'{t}' has no number; write e.g. 8, 64K, 16M, 1G"));
    }
    let shift = match suffix.to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        s if s.starts_with('.') => return Err(format!("'{t}' is not a whole number of bytes")),
        _ => {
            return Err(format!("'{t}' has an unknown unit '{suffix}' (use K, M, G or T)"));
        }
    };
    let value: u64 = digits.parse().map_err(|_| format!("'{t}' is too large"))?;
    value
        .checked_mul(1u64 << shift)
        .ok_or_else(|| format!("'{t}' is too large"))
}

/// Splits a comma-separated list (or takes a TOML array), rejecting empty
/// items, mapping `all`, parsing and removing repeats.
fn parse_list<T: PartialEq>(
    option: &str,
    items: Vec<String>,
    what: &str,
    known: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Choice<T>, Error> {
    let items: Vec<String> = items
        .iter()
        .flat_map(|s| s.split(','))
        .map(|s| s.trim().to_string())
        .collect();
    if items.iter().all(|s| s.is_empty()) {
        return Err(Error::usage(format!("--{option} is empty; give a {what} or `all`")));
    }
    if items.iter().any(|s| s.is_empty()) {
        return Err(Error::usage(format!("--{option} has an empty item in its list")));
    }
    if items.iter().any(|s| s.eq_ignore_ascii_case("all")) {
        if items.len() > 1 {
            return Err(Error::usage(format!(
                "--{option}: `all` cannot be combined with other values"
            )));
        }
        return Ok(Choice::All);
    }
    let mut out = Vec::new();
    for s in &items {
        let v = parse(s)
            .ok_or_else(|| Error::usage(format!("--{option}: unknown {what} '{s}' (expected {known}, or all)")))?;
        if !out.contains(&v) {
            out.push(v);
        }
    }
    Ok(Choice::List(out))
}

fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> String {
    all.iter().map(|&t| name(t)).collect::<Vec<_>>().join(", ")
}

// ---------------------------------------------------------------------------
// TOML file

/// An integer or a string, for keys that accept both (`maxbytes = "16M"`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum IntOrString {
    Int(i64),
    Str(String),
}

impl IntOrString {
    fn into_text(self) -> String {
        match self {
            IntOrString::Int(i) => i.to_string(),
            IntOrString::Str(s) => s,
        }
    }
}

/// A comma-separated string or an array of strings.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum StringList {
    One(String),
    Many(Vec<String>),
}

impl StringList {
    fn into_vec(self) -> Vec<String> {
        match self {
            StringList::One(s) => vec![s],
            StringList::Many(v) => v,
        }
    }
}

/// A number or a string, for keys such as `min-time = 0.5`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum FloatOrString {
    Float(f64),
    Str(String),
}

impl FloatOrString {
    fn into_text(self) -> String {
        match self {
            FloatOrString::Float(f) => f.to_string(),
            FloatOrString::Str(s) => s,
        }
    }
}

/// A positive, finite number of `what` (seconds, percent) from text.
fn positive_number(option: &str, text: &str, max: f64) -> Result<f64, Error> {
    match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= max => Ok(v),
        _ => Err(Error::usage(format!(
            "--{option}: '{}' is not a number above 0 and at most {max}",
            text.trim()
        ))),
    }
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum BoolOrInt {
    Bool(bool),
    Int(i64),
}

/// The TOML schema: the long option names of `collbench run`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct FileConfig {
    minbytes: Option<IntOrString>,
    maxbytes: Option<IntOrString>,
    stepfactor: Option<u64>,
    stepbytes: Option<IntOrString>,
    iters: Option<u64>,
    min_time: Option<FloatOrString>,
    per_iter: Option<bool>,
    straggler_threshold: Option<FloatOrString>,
    no_rotate: Option<bool>,
    warmup: Option<u64>,
    check: Option<u64>,
    average: Option<IntOrString>,
    blocking: Option<BoolOrInt>,
    agg_iters: Option<u64>,
    cuda_graph: Option<u64>,
    register: Option<BoolOrInt>,
    cycles: Option<u64>,
    timeout: Option<u64>,
    collectives: Option<StringList>,
    dtype: Option<StringList>,
    op: Option<StringList>,
    root: Option<IntOrString>,
    hierarchy: Option<StringList>,
    ranks_per_node: Option<u64>,
    phase_times: Option<bool>,
    backend: Option<String>,
    transport: Option<String>,
    csv: Option<PathBuf>,
    json: Option<PathBuf>,
    overwrite: Option<bool>,
    no_progress: Option<bool>,
    progress: Option<bool>,
    nccl_lib: Option<PathBuf>,
    ngpus: Option<u64>,
}

fn read_file_config(path: &Path) -> Result<FileConfig, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read config file {}: {e}", path.display())))?;
    parse_file_config(&text).map_err(|msg| Error::usage(format!("config file {}: {msg}", path.display())))
}

/// Parses TOML text into `T`; the error is one line with the line number
/// (toml's own messages span several lines with a source excerpt).
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', " ");
        match e.span() {
            Some(span) => {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                format!("line {line}: {msg}")
            }
            None => msg,
        }
    })
}

fn parse_file_config(text: &str) -> Result<FileConfig, String> {
    parse_toml(text)
}

// ---------------------------------------------------------------------------
// Merge and validate

fn size_option(option: &str, value: Option<String>, default: u64) -> Result<u64, Error> {
    match value {
        None => Ok(default),
        Some(text) => parse_size(&text).map_err(|m| Error::usage(format!("--{option}: {m}"))),
    }
}

fn count_option(option: &str, value: Option<u64>, default: u32, min: u32) -> Result<u32, Error> {
    let v = match value {
        None => return Ok(default),
        Some(v) => {
            u32::try_from(v).map_err(|_| Error::usage(format!("--{option} {v} is too large (at most {})", u32::MAX)))?
        }
    };
    if v < min {
        return Err(Error::usage(format!("--{option} must be at least {min}")));
    }
    Ok(v)
}

fn parse_blocking(text: &str) -> Result<bool, Error> {
    parse_switch("blocking", text)
}

/// `1`/`0` (and true/false, yes/no, on/off) of an option like `-z` or `-R`.
fn parse_switch(option: &str, text: &str) -> Result<bool, Error> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        other => Err(Error::usage(format!("--{option}: '{other}' is not 0 or 1"))),
    }
}

/// `-R`: nccl-tests' `-R 2` (symmetric memory windows) is not offered.
fn parse_register(text: &str) -> Result<bool, Error> {
    if text.trim() == "2" {
        return Err(Error::usage(
            "--register 2 (nccl-tests' symmetric memory windows) is not supported; use -R or -R 1",
        ));
    }
    parse_switch("register", text)
}

/// Combinations of `-m`, `-G` and the other options that cannot be
/// measured as asked; each refusal says why in one line.
fn check_launch_extras(
    agg_iters: u32,
    cuda_graph: u32,
    blocking: bool,
    per_iter: bool,
    phase_times: bool,
    hierarchies: &[Hierarchy],
) -> Result<(), Error> {
    if cuda_graph > 0 {
        let clash = if blocking {
            Some("--blocking times each operation alone, but a replayed graph runs its iterations back to back")
        } else if per_iter {
            Some("-I times each iteration with events between launches, but a replayed graph has none")
        } else if phase_times {
            Some("--phase-times records events between phases, but a replayed graph has none")
        } else {
            None
        };
        if let Some(why) = clash {
            return Err(Error::usage(format!(
                "-G/--cuda-graph {cuda_graph} cannot be combined: {why}; drop one of the two"
            )));
        }
    }
    if agg_iters > 1
        && let Some(mode) = hierarchies.iter().find(|h| !h.is_flat())
    {
        return Err(Error::usage(format!(
            "-m/--agg-iters {agg_iters} puts whole operations in one NCCL group, but the phases of the {mode} \
             all-reduce depend on each other and cannot share one; run the hierarchical modes with -m 1"
        )));
    }
    Ok(())
}

fn parse_root(text: &str) -> Result<RootChoice, Error> {
    let t = text.trim();
    if t.eq_ignore_ascii_case("all") {
        return Ok(RootChoice::All);
    }
    t.parse::<usize>()
        .map(RootChoice::Rank)
        .map_err(|_| Error::usage(format!("--root: '{t}' is not a rank number or `all`")))
}

fn parse_backend(text: &str) -> Result<BackendChoice, Error> {
    match text.trim().to_ascii_lowercase().as_str() {
        "auto" => Ok(BackendChoice::Auto),
        "mpi" => Ok(BackendChoice::Mpi),
        "nccl" => Ok(BackendChoice::Nccl),
        other => Err(Error::usage(format!(
            "--backend: unknown backend '{other}' (expected auto, mpi or nccl)"
        ))),
    }
}

impl RunConfig {
    /// What every rank must agree on before the first collective, as
    /// (name, value) pairs; the collbench version comes first. Output paths
    /// and the progress bar are rank 0's business and not included.
    pub fn digest_fields(&self) -> Vec<(&'static str, String)> {
        vec![
            ("collbench version", env!("CARGO_PKG_VERSION").to_string()),
            ("--minbytes", self.sweep.min.to_string()),
            ("--maxbytes", self.sweep.max.to_string()),
            ("--stepfactor/--stepbytes", format!("{:?}", self.sweep.step)),
            ("--collectives", format!("{:?}", self.collectives)),
            ("--dtype", format!("{:?}", self.dtypes)),
            ("--op", format!("{:?}", self.ops)),
            ("--root", format!("{:?}", self.roots)),
            ("--hierarchy", format!("{:?}", self.hierarchies)),
            ("--ranks-per-node", format!("{:?}", self.ranks_per_node)),
            ("--phase-times", self.phase_times.to_string()),
            ("--iters", format!("{:?}", self.iters)),
            ("--min-time", format!("{:?}", self.min_time)),
            ("-I/--per-iter", self.per_iter.to_string()),
            ("--no-rotate", (!self.rotate).to_string()),
            ("--warmup", self.warmup.to_string()),
            ("--check", self.check.to_string()),
            ("--average", self.average.name().to_string()),
            ("--blocking", self.blocking.to_string()),
            ("-m/--agg-iters", self.agg_iters.to_string()),
            ("-G/--cuda-graph", self.cuda_graph.to_string()),
            ("-R/--register", self.register.to_string()),
            ("--cycles", self.cycles.to_string()),
            ("--timeout", format!("{:?}", self.timeout)),
            ("--backend", self.backend.name().to_string()),
            ("--transport", self.transport.name().to_string()),
            ("test hook --inject-error", self.inject_error.to_string()),
            ("test hook --no-comm-split", self.no_comm_split.to_string()),
        ]
    }

    /// Command-line values over the `--config` file over the defaults.
    pub fn load(args: &RunArgs) -> Result<RunConfig, Error> {
        let file = match &args.config {
            Some(path) => read_file_config(path)?,
            None => FileConfig::default(),
        };
        RunConfig::merge(args, file)
    }

    /// The configuration a TOML text gives on its own (a suite's `[run]`
    /// table), validated as `--config` would be.
    pub fn from_toml(text: &str) -> Result<RunConfig, Error> {
        let file = parse_file_config(text).map_err(Error::usage)?;
        RunConfig::merge(&RunArgs::default(), file)
    }

    fn merge(args: &RunArgs, file: FileConfig) -> Result<RunConfig, Error> {
        let text = |cli: &Option<String>, file: Option<IntOrString>| cli.clone().or(file.map(IntOrString::into_text));
        let list = |cli: &Option<String>, file: Option<StringList>| -> Option<Vec<String>> {
            cli.clone().map(|s| vec![s]).or(file.map(StringList::into_vec))
        };

        let min = size_option("minbytes", text(&args.minbytes, file.minbytes), DEFAULT_MINBYTES)?;
        let max = size_option("maxbytes", text(&args.maxbytes, file.maxbytes), DEFAULT_MAXBYTES)?;
        let stepbytes = text(&args.stepbytes, file.stepbytes);
        let stepfactor = args.stepfactor.or(file.stepfactor);
        let step = match (stepfactor, stepbytes) {
            (Some(0), _) => return Err(Error::usage("--stepfactor must be at least 1")),
            (Some(f), _) if f > 1 => Step::Factor(f),
            (_, Some(b)) => Step::Bytes(size_option("stepbytes", Some(b), 0)?),
            (Some(_), None) => Step::Bytes(DEFAULT_STEPBYTES),
            (None, None) => Step::Factor(DEFAULT_STEPFACTOR),
        };
        let sweep = SizeSweep::new(min, max, step)?;

        let iters = match args.iters.or(file.iters) {
            None => None,
            n => Some(count_option("iters", n, 0, 1)?),
        };
        let min_time = match args.min_time.clone().or(file.min_time.map(FloatOrString::into_text)) {
            None => std::time::Duration::from_secs_f64(DEFAULT_MIN_TIME_S),
            Some(t) => std::time::Duration::from_secs_f64(positive_number("min-time", &t, 3600.0)?),
        };
        let straggler_threshold = match args
            .straggler_threshold
            .clone()
            .or(file.straggler_threshold.map(FloatOrString::into_text))
        {
            None => DEFAULT_STRAGGLER_PCT,
            Some(t) => positive_number("straggler-threshold", &t, 1e6)?,
        } / 100.0;
        let warmup = count_option("warmup", args.warmup.or(file.warmup), DEFAULT_WARMUP, 0)?;
        let check = count_option("check", args.check.or(file.check), DEFAULT_CHECK, 0)?;

        let average = match text(&args.average, file.average) {
            None => Average::Avg,
            Some(t) => Average::parse(&t)
                .ok_or_else(|| Error::usage(format!("--average: '{t}' is not rank0, avg, min, max or 0..3")))?,
        };
        let blocking = match (&args.blocking, file.blocking) {
            (Some(t), _) => parse_blocking(t)?,
            (None, Some(BoolOrInt::Bool(b))) => b,
            (None, Some(BoolOrInt::Int(i))) => parse_blocking(&i.to_string())?,
            (None, None) => false,
        };

        let agg_iters = count_option("agg-iters", args.agg_iters.or(file.agg_iters), 1, 1)?;
        let cuda_graph = count_option("cuda-graph", args.cuda_graph.or(file.cuda_graph), 0, 0)?;
        let register = match (&args.register, file.register) {
            (Some(t), _) => parse_register(t)?,
            (None, Some(BoolOrInt::Bool(b))) => b,
            (None, Some(BoolOrInt::Int(i))) => parse_register(&i.to_string())?,
            (None, None) => false,
        };

        let cycles = args.cycles.or(file.cycles).unwrap_or(1);
        let timeout = match args.timeout.or(file.timeout).unwrap_or(DEFAULT_TIMEOUT_S) {
            0 => None,
            s if s > 365 * 24 * 3600 => return Err(Error::usage(format!("--timeout {s} is more than a year"))),
            s => Some(std::time::Duration::from_secs(s)),
        };
        let collectives = match list(&args.collectives, file.collectives) {
            None => Choice::All,
            Some(items) => parse_list(
                "collectives",
                items,
                "collective",
                &names(&Collective::ALL, Collective::name),
                Collective::parse,
            )?,
        };
        let collectives = match collectives {
            Choice::All => Collective::ALL.to_vec(),
            Choice::List(v) => v,
        };
        let dtypes = match list(&args.dtype, file.dtype) {
            None => Choice::List(vec![DType::Float]),
            Some(items) => parse_list(
                "dtype",
                items,
                "element type",
                &names(&DType::ALL, DType::name),
                DType::parse,
            )?,
        };
        let ops = match list(&args.op, file.op) {
            None => Choice::List(vec![ReduceOp::Sum]),
            Some(items) => parse_list(
                "op",
                items,
                "operation",
                &names(&ReduceOp::ALL, ReduceOp::name),
                ReduceOp::parse,
            )?,
        };
        let roots = match text(&args.root, file.root) {
            None => RootChoice::Rank(0),
            Some(t) => parse_root(&t)?,
        };
        let hierarchies = match list(&args.hierarchy, file.hierarchy) {
            None => vec![Hierarchy::Flat],
            Some(items) => match parse_list(
                "hierarchy",
                items,
                "hierarchy mode",
                &names(&Hierarchy::ALL, Hierarchy::name),
                Hierarchy::parse,
            )? {
                Choice::All => Hierarchy::ALL.to_vec(),
                Choice::List(v) => v,
            },
        };
        let ranks_per_node = match args.ranks_per_node.or(file.ranks_per_node) {
            None => None,
            Some(0) => return Err(Error::usage("--ranks-per-node must be at least 1")),
            Some(k) => {
                Some(usize::try_from(k).map_err(|_| Error::usage(format!("--ranks-per-node {k} is too large")))?)
            }
        };
        let backend = match args.backend.clone().or(file.backend) {
            None => BackendChoice::Auto,
            Some(t) => parse_backend(&t)?,
        };

        let transport = match args.transport.clone().or(file.transport) {
            None => Profile::Auto,
            Some(t) => Profile::parse(&t).ok_or_else(|| {
                Error::usage(format!(
                    "--transport: unknown profile '{t}' (expected {}; `--transport help` lists what each sets)",
                    Profile::names()
                ))
            })?,
        };
        // `auto` is checked once it has chosen (app::session).
        match backend {
            BackendChoice::Mpi => transport.check_backend("mpi", "")?,
            BackendChoice::Nccl => transport.check_backend("nccl", "")?,
            BackendChoice::Auto => {}
        }

        let per_iter = args.per_iter || file.per_iter.unwrap_or(false);
        let phase_times = args.phase_times || file.phase_times.unwrap_or(false);
        check_launch_extras(agg_iters, cuda_graph, blocking, per_iter, phase_times, &hierarchies)?;

        let no_progress = args.no_progress || file.no_progress.unwrap_or(false);
        let force_progress = args.progress || file.progress.unwrap_or(false);
        let progress = match (no_progress, force_progress) {
            (true, _) => ProgressMode::Never,
            (false, true) => ProgressMode::Always,
            (false, false) => ProgressMode::Auto,
        };

        Ok(RunConfig {
            sweep,
            iters,
            min_time,
            per_iter,
            straggler_threshold,
            rotate: !(args.no_rotate || file.no_rotate.unwrap_or(false)),
            warmup,
            check,
            average,
            blocking,
            agg_iters,
            cuda_graph,
            register,
            cycles,
            timeout,
            collectives,
            dtypes,
            ops,
            roots,
            hierarchies,
            ranks_per_node,
            phase_times,
            backend,
            transport,
            csv: args.csv.clone().or(file.csv),
            json: args.json.clone().or(file.json),
            overwrite: args.overwrite || file.overwrite.unwrap_or(false),
            progress,
            nccl_lib: args.nccl_lib.clone().or(file.nccl_lib),
            threads: match args.ngpus.or(file.ngpus) {
                None => None,
                Some(n) => Some(count_option("ngpus", Some(n), 1, 1)? as usize),
            },
            inject_error: args.inject_error,
            trace_bootstrap: args.trace_bootstrap.clone(),
            no_comm_split: args.no_comm_split,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args() -> RunArgs {
        RunArgs::default()
    }

    fn usage(r: Result<RunConfig, Error>) -> String {
        match r {
            Err(Error::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("8"), Ok(8));
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("16M"), Ok(16 << 20));
        assert_eq!(parse_size("16m"), Ok(16 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("1T"), Ok(1 << 40));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size(" 4MB "), Ok(4 << 20));
    }

    #[test]
    fn bad_sizes_are_refused_with_a_reason() {
        for bad in [
            "",
            "-8",
            "M",
            "1.5M",
            "12X",
            "99999999999999999999",
            "17179869184G",
            "0x10",
        ] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn factor_sweeps_double_up_to_the_maximum() {
        let s = SizeSweep::new(8, 64, Step::Factor(2)).unwrap();
        assert_eq!(s.sizes(), vec![8, 16, 32, 64]);
        let s = SizeSweep::new(8, 100, Step::Factor(3)).unwrap();
        assert_eq!(s.sizes(), vec![8, 24, 72]);
        let s = SizeSweep::new(5, 5, Step::Factor(2)).unwrap();
        assert_eq!(s.sizes(), vec![5]);
    }

    #[test]
    fn byte_sweeps_add_the_step() {
        let s = SizeSweep::new(1 << 20, 4 << 20, Step::Bytes(1 << 20)).unwrap();
        assert_eq!(s.sizes(), vec![1 << 20, 2 << 20, 3 << 20, 4 << 20]);
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn sweeps_near_u64_max_stop_instead_of_overflowing() {
        let s = SizeSweep::new(u64::MAX / 2, u64::MAX, Step::Factor(4)).unwrap();
        assert_eq!(s.sizes(), vec![u64::MAX / 2]);
    }

    #[test]
    fn sweeps_refuse_zero_inverted_and_oversized_ranges() {
        assert!(SizeSweep::new(0, 8, Step::Factor(2)).is_err());
        assert!(SizeSweep::new(16, 8, Step::Factor(2)).is_err());
        assert!(SizeSweep::new(1, 1 << 30, Step::Bytes(1)).is_err());
        assert!(SizeSweep::new(1, 8, Step::Factor(1)).is_err());
    }

    #[test]
    fn defaults_are_a_float_sum_sweep_of_every_collective() {
        let c = RunConfig::merge(&args(), FileConfig::default()).unwrap();
        assert_eq!(
            c.sweep,
            SizeSweep {
                min: 8,
                max: 32 << 20,
                step: Step::Factor(2)
            }
        );
        assert_eq!((c.iters, c.warmup, c.check), (None, 5, 1));
        assert_eq!(c.min_time, std::time::Duration::from_millis(100));
        assert!(c.rotate && !c.per_iter);
        assert_eq!(c.straggler_threshold, 0.1);
        assert_eq!(c.collectives, Collective::ALL.to_vec());
        assert_eq!(c.dtypes, Choice::List(vec![DType::Float]));
        assert_eq!(c.ops, Choice::List(vec![ReduceOp::Sum]));
        assert_eq!(c.roots, RootChoice::Rank(0));
        assert_eq!(c.average, Average::Avg);
        assert!(!c.blocking);
        assert_eq!(c.backend, BackendChoice::Auto);
        assert_eq!(c.hierarchies, vec![Hierarchy::Flat]);
        assert_eq!(c.ranks_per_node, None);
        assert_eq!(c.transport, Profile::Auto);
    }

    #[test]
    fn transport_profiles_come_from_the_command_line_or_the_file_and_must_fit_the_backend() {
        let a = RunArgs {
            transport: Some("TCP".into()),
            ..args()
        };
        assert_eq!(
            RunConfig::merge(&a, FileConfig::default()).unwrap().transport,
            Profile::Tcp
        );
        let file = parse_file_config("transport = \"shm\"\nbackend = \"mpi\"\n").unwrap();
        let c = RunConfig::merge(&args(), file).unwrap();
        assert_eq!(c.transport, Profile::Shm);
        assert!(c.digest_fields().contains(&("--transport", "shm".to_string())));
        let m = usage(RunConfig::merge(
            &RunArgs {
                transport: Some("infiniband".into()),
                ..args()
            },
            FileConfig::default(),
        ));
        assert!(
            m.contains("--transport") && m.contains("nvlink") && m.contains("help"),
            "{m}"
        );
        let m = usage(RunConfig::merge(
            &RunArgs {
                transport: Some("nvlink".into()),
                backend: Some("mpi".into()),
                ..args()
            },
            FileConfig::default(),
        ));
        assert!(m.contains("NCCL profile") && m.contains("backend is mpi"), "{m}");
        // With auto the backend is not known yet: accepted here.
        let a = RunArgs {
            transport: Some("ib".into()),
            ..args()
        };
        assert_eq!(
            RunConfig::merge(&a, FileConfig::default()).unwrap().transport,
            Profile::Ib
        );
    }

    #[test]
    fn hierarchy_all_selects_every_mode() {
        let a = RunArgs {
            hierarchy: Some("all".into()),
            ranks_per_node: Some(2),
            ..args()
        };
        let c = RunConfig::merge(&a, FileConfig::default()).unwrap();
        assert_eq!(c.hierarchies, Hierarchy::ALL.to_vec());
        assert_eq!(c.ranks_per_node, Some(2));
        let file = parse_file_config("hierarchy = [\"rs-ar-ag\"]\nranks-per-node = 3\nphase-times = true\n").unwrap();
        let c = RunConfig::merge(&args(), file).unwrap();
        assert_eq!(c.hierarchies, vec![Hierarchy::RsArAg]);
        assert_eq!(c.ranks_per_node, Some(3));
        assert!(c.phase_times);
    }

    #[test]
    fn launch_extras_default_to_one_operation_without_graph_or_registration() {
        let c = RunConfig::merge(&args(), FileConfig::default()).unwrap();
        assert_eq!((c.agg_iters, c.cuda_graph, c.register), (1, 0, false));
        let a = RunArgs {
            agg_iters: Some(4),
            cuda_graph: Some(10),
            register: Some("1".into()),
            ..args()
        };
        let c = RunConfig::merge(&a, FileConfig::default()).unwrap();
        assert_eq!((c.agg_iters, c.cuda_graph, c.register), (4, 10, true));
        for field in ["-m/--agg-iters", "-G/--cuda-graph", "-R/--register"] {
            assert!(c.digest_fields().iter().any(|(k, _)| *k == field), "{field}");
        }
        let file = parse_file_config("agg-iters = 2\ncuda-graph = 3\nregister = true\n").unwrap();
        let c = RunConfig::merge(&args(), file).unwrap();
        assert_eq!((c.agg_iters, c.cuda_graph, c.register), (2, 3, true));
        let file = parse_file_config("register = 0\n").unwrap();
        assert!(!RunConfig::merge(&args(), file).unwrap().register);
        // -R 0 turns it off; the command line wins over the file
        let file = parse_file_config("register = 1\n").unwrap();
        let a = RunArgs {
            register: Some("0".into()),
            ..args()
        };
        assert!(!RunConfig::merge(&a, file).unwrap().register);
    }

    #[test]
    fn launch_extras_refuse_what_cannot_be_measured_as_asked() {
        let refused = |a: RunArgs, needles: &[&str]| {
            let m = usage(RunConfig::merge(&a, FileConfig::default()));
            for n in needles {
                assert!(m.contains(n), "{n} not in {m}");
            }
            assert!(!m.contains('\n'), "{m}");
        };
        refused(
            RunArgs {
                agg_iters: Some(0),
                ..args()
            },
            &["--agg-iters must be at least 1"],
        );
        refused(
            RunArgs {
                register: Some("2".into()),
                ..args()
            },
            &["--register 2", "not supported"],
        );
        refused(
            RunArgs {
                register: Some("maybe".into()),
                ..args()
            },
            &["--register", "not 0 or 1"],
        );
        refused(
            RunArgs {
                cuda_graph: Some(5),
                blocking: Some("1".into()),
                ..args()
            },
            &["-G/--cuda-graph 5", "--blocking"],
        );
        refused(
            RunArgs {
                cuda_graph: Some(1),
                per_iter: true,
                ..args()
            },
            &["-G/--cuda-graph 1", "-I"],
        );
        refused(
            RunArgs {
                cuda_graph: Some(1),
                phase_times: true,
                ..args()
            },
            &["--phase-times"],
        );
        refused(
            RunArgs {
                agg_iters: Some(2),
                hierarchy: Some("flat,reduce-bcast".into()),
                ..args()
            },
            &["-m/--agg-iters 2", "reduce-bcast", "-m 1"],
        );
        // what does combine
        for a in [
            RunArgs {
                agg_iters: Some(8),
                cuda_graph: Some(4),
                ..args()
            },
            RunArgs {
                agg_iters: Some(2),
                per_iter: true,
                blocking: Some("1".into()),
                hierarchy: Some("flat".into()),
                ..args()
            },
            RunArgs {
                cuda_graph: Some(0),
                per_iter: true,
                phase_times: true,
                hierarchy: Some("all".into()),
                ..args()
            },
        ] {
            assert!(RunConfig::merge(&a, FileConfig::default()).is_ok());
        }
    }

    #[test]
    fn stepbytes_alone_steps_by_bytes_and_stepfactor_wins_when_both_are_given() {
        let a = RunArgs {
            stepbytes: Some("1M".into()),
            ..args()
        };
        assert_eq!(
            RunConfig::merge(&a, FileConfig::default()).unwrap().sweep.step,
            Step::Bytes(1 << 20)
        );
        let a = RunArgs {
            stepbytes: Some("1M".into()),
            stepfactor: Some(4),
            ..args()
        };
        assert_eq!(
            RunConfig::merge(&a, FileConfig::default()).unwrap().sweep.step,
            Step::Factor(4)
        );
        let a = RunArgs {
            stepfactor: Some(1),
            minbytes: Some("1M".into()),
            ..args()
        };
        assert_eq!(
            RunConfig::merge(&a, FileConfig::default()).unwrap().sweep.step,
            Step::Bytes(1 << 20)
        );
    }

    #[test]
    fn lists_parse_all_and_drop_repeats() {
        let a = RunArgs {
            dtype: Some("float, int8,float".into()),
            op: Some("all".into()),
            ..args()
        };
        let c = RunConfig::merge(&a, FileConfig::default()).unwrap();
        assert_eq!(c.dtypes, Choice::List(vec![DType::Float, DType::Int8]));
        assert_eq!(c.ops, Choice::All);
    }

    #[test]
    fn bad_values_name_the_option() {
        let cases: Vec<(RunArgs, &str)> = vec![
            (
                RunArgs {
                    dtype: Some("float,bogus".into()),
                    ..args()
                },
                "--dtype",
            ),
            (
                RunArgs {
                    dtype: Some("".into()),
                    ..args()
                },
                "--dtype",
            ),
            (
                RunArgs {
                    op: Some("sum,,max".into()),
                    ..args()
                },
                "--op",
            ),
            (
                RunArgs {
                    op: Some("all,sum".into()),
                    ..args()
                },
                "--op",
            ),
            (
                RunArgs {
                    collectives: Some("allreduce,barrier".into()),
                    ..args()
                },
                "--collectives",
            ),
            (
                RunArgs {
                    root: Some("-1".into()),
                    ..args()
                },
                "--root",
            ),
            (
                RunArgs {
                    average: Some("4".into()),
                    ..args()
                },
                "--average",
            ),
            (
                RunArgs {
                    blocking: Some("2".into()),
                    ..args()
                },
                "--blocking",
            ),
            (
                RunArgs {
                    backend: Some("gloo".into()),
                    ..args()
                },
                "--backend",
            ),
            (
                RunArgs {
                    iters: Some(0),
                    ..args()
                },
                "--iters",
            ),
            (
                RunArgs {
                    iters: Some(1 << 40),
                    ..args()
                },
                "--iters",
            ),
            (
                RunArgs {
                    minbytes: Some("0".into()),
                    ..args()
                },
                "--minbytes",
            ),
            (
                RunArgs {
                    minbytes: Some("1G".into()),
                    maxbytes: Some("1M".into()),
                    ..args()
                },
                "--minbytes",
            ),
            (
                RunArgs {
                    stepfactor: Some(0),
                    ..args()
                },
                "--stepfactor",
            ),
            (
                RunArgs {
                    stepbytes: Some("0".into()),
                    ..args()
                },
                "--stepbytes",
            ),
        ];
        for (a, option) in cases {
            let m = usage(RunConfig::merge(&a, FileConfig::default()));
            assert!(m.contains(option), "{option}: {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn toml_files_use_the_long_option_names_and_the_command_line_wins() {
        let file = parse_file_config(
            "minbytes = 1024\nmaxbytes = \"1M\"\ndtype = [\"int8\", \"double\"]\nop = \"min,max\"\nroot = \"all\"\n\
             blocking = true\nno-progress = true\ncollectives = \"all_reduce\"\naverage = 3\n",
        )
        .unwrap();
        let a = RunArgs {
            maxbytes: Some("4K".into()),
            ..args()
        };
        let c = RunConfig::merge(&a, file).unwrap();
        assert_eq!((c.sweep.min, c.sweep.max), (1024, 4096));
        assert_eq!(c.dtypes, Choice::List(vec![DType::Int8, DType::Double]));
        assert_eq!(c.ops, Choice::List(vec![ReduceOp::Min, ReduceOp::Max]));
        assert_eq!(c.roots, RootChoice::All);
        assert!(c.blocking);
        assert_eq!(c.progress, ProgressMode::Never);
        assert_eq!(c.collectives, vec![Collective::AllReduce]);
        assert_eq!(c.average, Average::Max);
    }

    #[test]
    fn toml_errors_are_one_line_with_the_line_number() {
        for (text, line) in [
            ("iters = 5\nbogus = 1\n", 2),
            ("iters = 5\niters = 6\n", 2),
            ("iters = -5\n", 1),
            ("\n\nminbytes = [\n", 3),
            ("dtype = 5\n", 1),
        ] {
            let m = parse_file_config(text).unwrap_err();
            assert!(m.starts_with(&format!("line {line}:")), "{text:?}: {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    proptest! {
        #[test]
        fn size_parser_never_panics(s in "\\PC{0,12}") {
            let _ = parse_size(&s);
        }

        #[test]
        fn size_parser_round_trips_suffixed_values(v in 0u64..(1 << 20), unit in 0usize..4) {
            let (suffix, shift) = [("", 0), ("K", 10), ("M", 20), ("G", 30)][unit];
            prop_assert_eq!(parse_size(&format!("{v}{suffix}")), Ok(v << shift));
        }

        #[test]
        fn config_loader_never_panics_on_arbitrary_toml(s in "[a-z\\-]{1,12} = (\"[a-zA-Z0-9,]{0,8}\"|-?[0-9]{1,22}|true|\\[\\])\n") {
            if let Ok(file) = parse_file_config(&s) {
                let _ = RunConfig::merge(&RunArgs::default(), file);
            }
        }

        #[test]
        fn sweeps_are_increasing_and_bounded(min in 1u64..1_000_000, span in 0u64..1_000_000_000, f in 2u64..9) {
            if let Ok(s) = SizeSweep::new(min, min + span, Step::Factor(f)) {
                let sizes = s.sizes();
                prop_assert_eq!(sizes[0], min);
                prop_assert!(sizes.windows(2).all(|w| w[1] == w[0] * f));
                prop_assert!(*sizes.last().unwrap() <= min + span);
                prop_assert!(sizes.last().unwrap() * f > min + span);
            }
        }
    }
}
