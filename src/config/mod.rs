//! A run's configuration: the options of `collbench run`, with the
//! `--config` file read as more arguments, validated once and split by
//! who consumes each part.
//!
//! Owns the config file (its keys are the long option names, checked
//! against clap's own definitions, each value parsed by the option's own
//! parser, every error one line with the file's line number; the command
//! line wins because its arguments come after the file's) and the checks
//! that span several options. It does not define options (`cli` does) nor
//! check what needs the rank count or the backend (`plan`).
//!
//! The other commands that measure take some of run's option groups
//! (`cli`): `RunConfig::for_command` gives them run's configuration with
//! every other group at its default, and their jobs are built here too:
//! a workload or replay (`job`), the links matrix (`links`), an
//! acceptance check (`check`). Every command's digest is of all its
//! options (`cli::digest_of`), and of the contents of the files every
//! rank reads (a matrix, a profile, a log, a topology).

mod check;
mod job;
mod links;

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::backend::StartConfig;
use crate::cli::{
    self, BlockingArgs, CommonArgs, LabelArgs, ProgressArgs, RegisterArgs, RepeatArgs, RunArgs, TransportArg,
};
use crate::collective::{Collective, Traffic, TrafficMatrix};
use crate::engine::Timing;
use crate::engine::policy::{DEFAULT_MIN_TIME, Iterations};
use crate::engine::precision::PrecisionGoal;
use crate::error::Error;
use crate::plan::{PlanConfig, SizeSweep, Step};
use crate::report::OutputConfig;
use crate::topology::Hierarchy;
use crate::types::{AlgoPin, BackendChoice, SplitRule};
pub use check::{CheckJob, Soak, listing};
pub use job::{Job, Source};
pub use links::{LinksJob, Places};

/// `-f` without `-i`, and neither given.
pub const DEFAULT_STEPFACTOR: u64 = 2;
/// `-i` without `-f`, or `-f 1` without `-i`.
pub const DEFAULT_STEPBYTES: u64 = 1 << 20;

/// A validated run configuration, one part per consumer. Rank-count- and
/// backend-dependent checks happen when the plan is built.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// What to measure (`plan`).
    pub plan: PlanConfig,
    /// How each point is measured (`engine`).
    pub timing: Timing,
    /// Which backend and control plane, and how they start (`session`).
    pub start: StartConfig,
    /// Rank 0's reports (`report`).
    pub outputs: OutputConfig,
    /// Test-only switches.
    pub hooks: TestHooks,
    /// Every option that shapes the sequence of collective calls, as
    /// (option, value), for the cross-rank check (`engine::digest`).
    pub digest: Vec<(String, String)>,
}

/// Hidden options the tests use to reach paths a healthy run never takes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TestHooks {
    /// Corrupt one received element on the last rank after each check.
    pub inject_error: bool,
    /// Each rank writes the NCCL unique ids it received here.
    pub trace_bootstrap: Option<PathBuf>,
    /// Sub-communicators from unique ids, never ncclCommSplit.
    pub no_comm_split: bool,
}

impl RunConfig {
    /// The configuration of `collbench run ARGS`: the `--config` file's
    /// keys as arguments before `ARGS`, so that `ARGS` win.
    pub fn from_command_line<T: Into<OsString> + Clone>(args: &[T]) -> Result<(RunArgs, RunConfig), Error> {
        let args: Vec<OsString> = args.iter().cloned().map(Into::into).collect();
        let given = cli::parse_run(&args).map_err(|e| Error::usage(cli::one_line(&e)))?;
        let mut all: Vec<OsString> = match &given.config {
            Some(path) => file_args(path)?.into_iter().map(OsString::from).collect(),
            None => Vec::new(),
        };
        all.extend(args);
        let with_file = |line: String| match &given.config {
            Some(path) => Error::usage(format!("with config file {}: {line}", path.display())),
            None => Error::usage(line),
        };
        let mut merged = cli::parse_run(&all).map_err(|e| with_file(cli::one_line(&e)))?;
        // nccl-tests' variables, before the file's and the command line's
        let env = cli::from_env(&merged, &|name| std::env::var(name).ok()).map_err(Error::usage)?;
        if !env.args.is_empty() {
            let before = env.args.into_iter().map(OsString::from);
            merged = cli::parse_run(before.chain(all)).map_err(|e| with_file(cli::one_line(&e)))?;
        }
        let mut cfg = RunConfig::from_args(&merged)?;
        cfg.outputs.notes = env.notes;
        Ok((merged, cfg))
    }

    /// The configuration a TOML table gives on its own (a suite's `[run]`
    /// table), validated as `--config` would be.
    pub fn from_table(table: &toml::Table) -> Result<(RunArgs, RunConfig), Error> {
        let mut args = Vec::new();
        for (key, value) in table {
            args.extend(key_args(key, value).map_err(Error::usage)?);
        }
        let a = cli::parse_run(&args).map_err(|e| Error::usage(cli::one_line(&e)))?;
        let cfg = RunConfig::from_args(&a)?;
        Ok((a, cfg))
    }

    /// Validates parsed options and splits them by consumer.
    pub fn from_args(a: &RunArgs) -> Result<RunConfig, Error> {
        // a folder is no report file, with --overwrite or without: one
        // line now, not "exists" or "Is a directory" after the set-up
        for (path, what) in [(&a.output.csv, "CSV"), (&a.output.json, "JSON")] {
            if let Some(path) = path {
                crate::report::refuse_folder(path, what)?;
            }
        }
        let plan = plan_config(a)?;
        let timing = timing(a);
        check_launch_extras(&timing, &plan.hierarchies_asked())?;
        let start = start_config(a)?;
        check_pins(&timing.algo_pins, &plan, start.backend)?;
        let mut digest = cli::digest_of("run", a)?;
        if let Traffic::Matrix(m) = plan.traffic {
            // every rank must read the same matrix, not just the same path
            digest.push(("--alltoallv-matrix contents".into(), m.fingerprint()));
        }
        // `auto` is checked once it has chosen (session).
        if let BackendChoice::Only(kind) = start.backend {
            start.transport.check_backend(kind, "")?;
        }
        Ok(RunConfig {
            plan,
            timing,
            start,
            outputs: OutputConfig {
                csv: a.output.csv.clone(),
                json: a.output.json.clone(),
                nccl_tests_json: json_format(a)?,
                timestamps: a.output.timestamps.on(),
                overwrite: a.common.overwrite.overwrite,
                progress: a.output.progress.mode(),
                label: a.label.label.clone(),
                timings: a.common.timings.timings,
                config: a.config.clone(),
                notes: Vec::new(),
            },
            hooks: TestHooks {
                inject_error: a.common.hooks.inject_error,
                trace_bootstrap: a.common.hooks.trace_bootstrap.clone(),
                no_comm_split: a.common.hooks.no_comm_split,
            },
            digest,
        })
    }
}

/// What another command takes of `run`'s option groups; the groups it
/// leaves out keep run's defaults.
pub struct Taken<'a> {
    /// Launch, checking, overwriting, the test hooks (every command).
    pub common: &'a CommonArgs,
    pub blocking: Option<&'a BlockingArgs>,
    pub register: Option<&'a RegisterArgs>,
    pub repeat: Option<&'a RepeatArgs>,
    pub label: Option<&'a LabelArgs>,
    pub progress: Option<&'a ProgressArgs>,
    /// Its own report paths (rank 0's).
    pub csv: Option<PathBuf>,
    pub json: Option<PathBuf>,
}

impl RunConfig {
    /// The configuration of `collbench SUBCOMMAND`, whose parsed options
    /// are `args` and take `taken` of run's groups: run's, with every other
    /// group at its default, and the digest of all of `args` (plus
    /// `files`: the contents of what every rank reads, as (what,
    /// fingerprint)).
    pub fn for_command(
        subcommand: &str,
        args: &impl Serialize,
        taken: Taken<'_>,
        files: Vec<(String, String)>,
    ) -> Result<RunConfig, Error> {
        let mut a = RunArgs::defaults();
        a.common = taken.common.clone();
        if let Some(b) = taken.blocking {
            a.blocking = b.clone();
        }
        if let Some(r) = taken.register {
            a.register = r.clone();
        }
        if let Some(r) = taken.repeat {
            a.repeat = r.clone();
        }
        if let Some(l) = taken.label {
            a.label = l.clone();
        }
        if let Some(p) = taken.progress {
            a.output.progress = p.clone();
        }
        a.output.csv = taken.csv;
        a.output.json = taken.json;
        let mut cfg = RunConfig::from_args(&a)?;
        cfg.digest = cli::digest_of(subcommand, args)?;
        cfg.digest.extend(files);
        Ok(cfg)
    }
}

/// A fingerprint of a file's contents for the digest (FNV-1a of its
/// bytes): ranks that read different files under one name disagree.
pub fn fingerprint(bytes: &[u8]) -> String {
    format!("{:016x} ({} bytes)", crate::engine::digest::fnv1a(bytes), bytes.len())
}

fn plan_config(a: &RunArgs) -> Result<PlanConfig, Error> {
    let step = match (a.sizes.stepfactor, a.sizes.stepbytes) {
        (Some(0), _) => return Err(Error::usage("--stepfactor must be at least 1")),
        (Some(f), _) if f > 1 => Step::Factor(f),
        (_, Some(b)) => Step::Bytes(b.bytes()),
        // nccl-tests' meaning of -f 1: step by -i, 1M unless given; say so
        // where that leaves only -b of a wider sweep
        (Some(_), None)
            if a.sizes.minbytes.bytes() < a.sizes.maxbytes.bytes()
                && a.sizes.minbytes.bytes().saturating_add(DEFAULT_STEPBYTES) > a.sizes.maxbytes.bytes() =>
        {
            return Err(Error::usage(format!(
                "-f 1 steps by -i, whose default is 1M (as nccl-tests): from -b {} the next size is past -e {}, so only \
                 -b would be measured; give -i SIZE to step by SIZE, or -f 2 or more to multiply",
                a.sizes.minbytes.bytes(),
                a.sizes.maxbytes.bytes()
            )));
        }
        (Some(_), None) => Step::Bytes(DEFAULT_STEPBYTES),
        (None, None) => Step::Factor(DEFAULT_STEPFACTOR),
    };
    let ranks_per_node = match a.common.launch.ranks_per_node {
        None => None,
        Some(k) => Some(usize::try_from(k).map_err(|_| Error::usage(format!("--ranks-per-node {k} is too large")))?),
    };
    let collectives = a.cases.collectives.values();
    Ok(PlanConfig {
        sweep: SizeSweep::new(a.sizes.minbytes.bytes(), a.sizes.maxbytes.bytes(), step)?,
        traffic: traffic(a, &collectives)?,
        collectives,
        dtypes: a.cases.dtype.clone(),
        ops: a.cases.op.clone(),
        roots: a.cases.root,
        hierarchies: a.hierarchy.hierarchy.clone(),
        ranks_per_node,
        split: split(a)?,
    })
}

/// `--split` or `--split-mask` (nccl-tests' two variables), never both;
/// groups run flat collectives only.
fn split(a: &RunArgs) -> Result<Option<SplitRule>, Error> {
    let rule = match (a.cases.split, a.cases.split_mask) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "--split (NCCL_TESTS_SPLIT) and --split-mask (NCCL_TESTS_SPLIT_MASK) both give the groups: keep one",
            ));
        }
        (rule, mask) => rule.or(mask),
    };
    if let Some(rule) = rule
        && a.hierarchy.hierarchy.values().iter().any(|h| !h.is_flat())
    {
        return Err(Error::usage(format!(
            "--split {rule}: each group runs flat collectives; drop --hierarchy or --split"
        )));
    }
    Ok(rule)
}

/// `--algo`/`--proto`: each pinned sweep runs flat collectives on one
/// communicator of every rank, on NCCL (docs/algorithms.md).
fn check_pins(pins: &[AlgoPin], plan: &PlanConfig, backend: BackendChoice) -> Result<(), Error> {
    let Some(pin) = pins.first() else {
        return Ok(());
    };
    let what = "--algo/--proto";
    if let BackendChoice::Only(kind) = backend
        && kind != crate::types::BackendKind::Nccl
    {
        return Err(Error::usage(format!(
            "{what} {pin}: pins NCCL's choice; the {kind} backend has none (use --backend nccl)"
        )));
    }
    if plan.hierarchies_asked().iter().any(|h| !h.is_flat()) {
        return Err(Error::usage(format!(
            "{what} {pin}: a pinned sweep runs flat collectives on one communicator; drop --hierarchy or {what}"
        )));
    }
    if let Some(rule) = plan.split {
        return Err(Error::usage(format!(
            "{what} {pin}: a pinned sweep runs on one communicator of every rank; drop --split {rule} or {what}"
        )));
    }
    Ok(())
}

/// Whether `--json` is in nccl-tests' schema (`--output-format`); the
/// format alone, without a file, is refused rather than ignored.
fn json_format(a: &RunArgs) -> Result<bool, Error> {
    match a.output.output_format.as_str() {
        "collbench" => Ok(false),
        _ if a.output.json.is_none() => Err(Error::usage(
            "--output-format nccl-tests-json says how to write the --json file: give --json PATH too",
        )),
        _ => Ok(true),
    }
}

/// alltoallv's traffic: the matrix file where one is given (and alltoallv
/// runs: a file named in the environment for another run is not read),
/// else the generated traffic of `--alltoallv-spread`, as nccl-tests.
fn traffic(a: &RunArgs, collectives: &[Collective]) -> Result<Traffic, Error> {
    match &a.cases.alltoallv_matrix {
        Some(path) if collectives.contains(&Collective::AllToAllV) => {
            TrafficMatrix::read(path, a.cases.alltoallv_matrix_scale)
                .map(Traffic::Matrix)
                .map_err(|e| Error::usage(format!("--alltoallv-matrix {e}")))
        }
        _ => Ok(Traffic::Weighted(a.cases.alltoallv_spread)),
    }
}

/// `-n` wins over `--min-time`, which wins over the precision policy; a
/// CUDA graph (`-G`) needs its iteration count before the timed region,
/// so without `-n` it takes the min-time policy (`engine::policy`).
fn iterations(a: &RunArgs) -> Iterations {
    let seconds = std::time::Duration::from_secs_f64;
    match (a.timing.iters, a.timing.min_time) {
        (Some(n), _) => Iterations::Fixed(n),
        (None, Some(t)) => Iterations::MinTime(seconds(t)),
        (None, None) if a.timing.cuda_graph > 0 => Iterations::MinTime(DEFAULT_MIN_TIME),
        (None, None) => Iterations::Precision(PrecisionGoal {
            target_pct: a.timing.precision,
            cap: seconds(a.timing.max_time),
        }),
    }
}

fn timing(a: &RunArgs) -> Timing {
    Timing {
        iterations: iterations(a),
        per_iter: a.timing.per_iter,
        straggler_threshold_pct: a.timing.straggler_threshold,
        // --no-rotate and --rotate override each other: the last one wins;
        // without either, the backend's method (`Timing::for_backend`)
        rotate: a.timing.rotate,
        rotate_asked: match (a.timing.rotate, a.timing.no_rotate) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        warmup: a.timing.warmup,
        check: a.common.checking.check,
        average: a.timing.average,
        blocking: a.blocking.blocking.on(),
        agg_iters: a.timing.agg_iters,
        cuda_graph: a.timing.cuda_graph,
        register: a.register.register,
        phase_times: a.hierarchy.phase_times,
        algo_record: a.timing.algo_record,
        algo_pins: AlgoPin::product(&a.timing.algos, &a.timing.protos),
        cycles: a.repeat.cycles,
        timeout: (a.common.launch.timeout > 0).then(|| std::time::Duration::from_secs(a.common.launch.timeout)),
    }
}

fn start_config(a: &RunArgs) -> Result<StartConfig, Error> {
    let transport = match a.common.launch.transport {
        TransportArg::Profile(p) => p,
        TransportArg::Help => {
            return Err(Error::usage(
                "--transport help prints the profiles; it cannot be part of a run",
            ));
        }
    };
    let threads = match a.common.launch.ngpus {
        None => None,
        Some(n) => Some(usize::try_from(n).map_err(|_| Error::usage(format!("--ngpus {n} is too large")))?),
    };
    Ok(StartConfig {
        backend: a.common.launch.backend,
        transport,
        nccl_lib: a.common.launch.nccl_lib.clone(),
        threads,
        launcher: a.common.launch.launcher,
    })
}

/// Combinations of `-m`, `-G` and the other options that cannot be
/// measured as asked; each refusal says why in one line.
fn check_launch_extras(t: &Timing, hierarchies: &[Hierarchy]) -> Result<(), Error> {
    if t.cuda_graph > 0 {
        let clash = if t.blocking {
            Some("--blocking times each operation alone, but a replayed graph runs its iterations back to back")
        } else if t.per_iter {
            Some("-I times each iteration with events between launches, but a replayed graph has none")
        } else if t.phase_times {
            Some("--phase-times records events between phases, but a replayed graph has none")
        } else {
            None
        };
        if let Some(why) = clash {
            return Err(Error::usage(format!(
                "-G/--cuda-graph {} cannot be combined: {why}; drop one of the two",
                t.cuda_graph
            )));
        }
    }
    if t.agg_iters > 1
        && let Some(mode) = hierarchies.iter().find(|h| !h.is_flat())
    {
        return Err(Error::usage(format!(
            "-m/--agg-iters {} puts whole operations in one NCCL group, but the phases of the {mode} \
             all-reduce depend on each other and cannot share one; run the hierarchical modes with -m 1",
            t.agg_iters
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// The config file

/// The keys of a `--config` file as arguments of `collbench run`.
fn file_args(path: &Path) -> Result<Vec<String>, Error> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("cannot read config file {}: {e}", path.display())))?;
    text_args(&text).map_err(|msg| Error::usage(format!("config file {}: {msg}", path.display())))
}

/// A TOML text's keys as arguments, each checked alone against the
/// option's own parser, so that an error names its line.
fn text_args(text: &str) -> Result<Vec<String>, String> {
    type Spanned<T> = toml::Spanned<T>;
    let table: std::collections::BTreeMap<Spanned<String>, Spanned<toml::Value>> = parse_toml(text)?;
    let mut args = Vec::new();
    for (key, value) in &table {
        let line = line_of(text, key.span().start);
        let these = key_args(key.get_ref(), value.get_ref()).map_err(|m| format!("line {line}: {m}"))?;
        if let Err(e) = cli::parse_run(&these) {
            return Err(format!("line {line}: {}", cli::one_line(&e)));
        }
        args.extend(these);
    }
    Ok(args)
}

/// The arguments one `key = value` stands for: `--key=value`, a switch's
/// `--key` when true (nothing when false), a list's items joined by commas.
fn key_args(key: &str, value: &toml::Value) -> Result<Vec<String>, String> {
    let command = cli::run_command();
    let arg = command
        .get_arguments()
        .find(|a| a.get_long() == Some(key) || a.get_all_aliases().is_some_and(|all| all.contains(&key)))
        .ok_or_else(|| {
            format!(
                "unknown key `{key}`: it is not an option of `collbench run`{}",
                cli::suggested_option(key).map_or_else(String::new, |s| format!("; did you mean `{s}`?"))
            )
        })?;
    if arg.is_hide_set() || arg.get_id() == "config" {
        return Err(format!("`{key}` cannot be set in a config file"));
    }
    let flag = format!("--{}", arg.get_long().unwrap_or(key));
    let is_switch = !arg.get_action().takes_values();
    match value {
        toml::Value::Boolean(true) if is_switch => Ok(vec![flag]),
        toml::Value::Boolean(false) if is_switch => Ok(Vec::new()),
        _ if is_switch => Err(format!("`{key}` is on or off: write `{key} = true` or `false`")),
        toml::Value::Array(items) => {
            let texts: Result<Vec<String>, String> = items.iter().map(|v| scalar(key, v)).collect();
            Ok(vec![format!("{flag}={}", texts?.join(","))])
        }
        other => Ok(vec![format!("{flag}={}", scalar(key, other)?)]),
    }
}

fn scalar(key: &str, value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err(format!("`{key}` takes a number, a string or a list of them")),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].matches('\n').count() + 1
}

/// Parses TOML text into `T`; the error is one line with the line number
/// (toml's own messages span several lines with a source excerpt).
pub(crate) fn parse_toml<T: serde::de::DeserializeOwned>(text: &str) -> Result<T, String> {
    toml::from_str(text).map_err(|e| {
        let msg = e.message().trim().replace('\n', " ");
        match e.span() {
            Some(span) => format!("line {}: {msg}", line_of(text, span.start)),
            None => msg,
        }
    })
}

#[cfg(test)]
mod tests;
