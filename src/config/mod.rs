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

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::backend::StartConfig;
use crate::cli::{self, RunArgs, TransportArg};
use crate::collective::{Collective, Traffic, TrafficMatrix};
use crate::engine::Timing;
use crate::engine::policy::{DEFAULT_MIN_TIME, Iterations};
use crate::engine::precision::PrecisionGoal;
use crate::error::Error;
use crate::plan::{PlanConfig, SizeSweep, Step};
use crate::report::OutputConfig;
use crate::topology::Hierarchy;
use crate::types::{BackendChoice, SplitRule};

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
        let merged = match &given.config {
            None => given,
            Some(path) => {
                let mut all: Vec<OsString> = file_args(path)?.into_iter().map(OsString::from).collect();
                all.extend(args);
                cli::parse_run(&all)
                    .map_err(|e| Error::usage(format!("with config file {}: {}", path.display(), cli::one_line(&e))))?
            }
        };
        let cfg = RunConfig::from_args(&merged)?;
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
        let plan = plan_config(a)?;
        let timing = timing(a);
        let start = start_config(a)?;
        check_launch_extras(&timing, &plan.hierarchies)?;
        let mut digest = a.digest()?;
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
                csv: a.csv.clone(),
                json: a.json.clone(),
                nccl_tests_json: json_format(a)?,
                timestamps: a.timestamps.on(),
                overwrite: a.overwrite,
                progress: cli::progress_mode(a.no_progress, a.progress),
                label: a.label.clone(),
            },
            hooks: TestHooks {
                inject_error: a.inject_error,
                trace_bootstrap: a.trace_bootstrap.clone(),
                no_comm_split: a.no_comm_split,
            },
            digest,
        })
    }
}

fn plan_config(a: &RunArgs) -> Result<PlanConfig, Error> {
    let step = match (a.stepfactor, a.stepbytes) {
        (Some(0), _) => return Err(Error::usage("--stepfactor must be at least 1")),
        (Some(f), _) if f > 1 => Step::Factor(f),
        (_, Some(b)) => Step::Bytes(b.bytes()),
        (Some(_), None) => Step::Bytes(DEFAULT_STEPBYTES),
        (None, None) => Step::Factor(DEFAULT_STEPFACTOR),
    };
    let ranks_per_node = match a.ranks_per_node {
        None => None,
        Some(k) => Some(usize::try_from(k).map_err(|_| Error::usage(format!("--ranks-per-node {k} is too large")))?),
    };
    let collectives = a.collectives.values();
    Ok(PlanConfig {
        sweep: SizeSweep::new(a.minbytes.bytes(), a.maxbytes.bytes(), step)?,
        traffic: traffic(a, &collectives)?,
        collectives,
        dtypes: a.dtype.clone(),
        ops: a.op.clone(),
        roots: a.root,
        hierarchies: a.hierarchy.values(),
        ranks_per_node,
        split: split(a)?,
    })
}

/// `--split` or `--split-mask` (nccl-tests' two variables), never both;
/// groups run flat collectives only.
fn split(a: &RunArgs) -> Result<Option<SplitRule>, Error> {
    let rule = match (a.split, a.split_mask) {
        (Some(_), Some(_)) => {
            return Err(Error::usage(
                "--split (NCCL_TESTS_SPLIT) and --split-mask (NCCL_TESTS_SPLIT_MASK) both give the groups: keep one",
            ));
        }
        (rule, mask) => rule.or(mask),
    };
    if let Some(rule) = rule
        && a.hierarchy.values().iter().any(|h| !h.is_flat())
    {
        return Err(Error::usage(format!(
            "--split {rule}: each group runs flat collectives; drop --hierarchy or --split"
        )));
    }
    Ok(rule)
}

/// Whether `--json` is in nccl-tests' schema (`--output-format`); the
/// format alone, without a file, is refused rather than ignored.
fn json_format(a: &RunArgs) -> Result<bool, Error> {
    match a.output_format.as_str() {
        "collbench" => Ok(false),
        _ if a.json.is_none() => Err(Error::usage(
            "--output-format nccl-tests-json says how to write the --json file: give --json PATH too",
        )),
        _ => Ok(true),
    }
}

/// alltoallv's traffic: the matrix file where one is given (and alltoallv
/// runs: a file named in the environment for another run is not read),
/// else the generated traffic of `--alltoallv-spread`, as nccl-tests.
fn traffic(a: &RunArgs, collectives: &[Collective]) -> Result<Traffic, Error> {
    match &a.alltoallv_matrix {
        Some(path) if collectives.contains(&Collective::AllToAllV) => {
            TrafficMatrix::read(path, a.alltoallv_matrix_scale)
                .map(Traffic::Matrix)
                .map_err(|e| Error::usage(format!("--alltoallv-matrix {e}")))
        }
        _ => Ok(Traffic::Weighted(a.alltoallv_spread)),
    }
}

/// `-n` wins over `--min-time`, which wins over the precision policy; a
/// CUDA graph (`-G`) needs its iteration count before the timed region,
/// so without `-n` it takes the min-time policy (`engine::policy`).
fn iterations(a: &RunArgs) -> Iterations {
    let seconds = std::time::Duration::from_secs_f64;
    match (a.iters, a.min_time) {
        (Some(n), _) => Iterations::Fixed(n),
        (None, Some(t)) => Iterations::MinTime(seconds(t)),
        (None, None) if a.cuda_graph > 0 => Iterations::MinTime(DEFAULT_MIN_TIME),
        (None, None) => Iterations::Precision(PrecisionGoal {
            target_pct: a.precision,
            cap: seconds(a.max_time),
        }),
    }
}

fn timing(a: &RunArgs) -> Timing {
    Timing {
        iterations: iterations(a),
        per_iter: a.per_iter,
        straggler_threshold_pct: a.straggler_threshold,
        // --no-rotate and --rotate override each other: the last one wins;
        // without either, the backend's method (`Timing::for_backend`)
        rotate: a.rotate,
        rotate_asked: match (a.rotate, a.no_rotate) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
        warmup: a.warmup,
        check: a.check,
        average: a.average,
        blocking: a.blocking.on(),
        agg_iters: a.agg_iters,
        cuda_graph: a.cuda_graph,
        register: a.register,
        phase_times: a.phase_times,
        cycles: a.cycles,
        timeout: (a.timeout > 0).then(|| std::time::Duration::from_secs(a.timeout)),
    }
}

fn start_config(a: &RunArgs) -> Result<StartConfig, Error> {
    let transport = match a.transport {
        TransportArg::Profile(p) => p,
        TransportArg::Help => {
            return Err(Error::usage(
                "--transport help prints the profiles; it cannot be part of a run",
            ));
        }
    };
    let threads = match a.ngpus {
        None => None,
        Some(n) => Some(usize::try_from(n).map_err(|_| Error::usage(format!("--ngpus {n} is too large")))?),
    };
    Ok(StartConfig {
        backend: a.backend,
        transport,
        nccl_lib: a.nccl_lib.clone(),
        threads,
        launcher: a.launcher,
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
        .ok_or_else(|| format!("unknown key `{key}`: it is not an option of `collbench run`"))?;
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
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::topology::profile::Profile;
    use crate::types::ProgressMode;
    use crate::types::{Average, BackendKind, Choice, DType, ReduceOp, Register, RootChoice};
    use proptest::prelude::*;

    fn config(args: &[&str]) -> Result<RunConfig, Error> {
        RunConfig::from_command_line(args).map(|(_, c)| c)
    }

    fn usage(r: Result<RunConfig, Error>) -> String {
        match r {
            Err(Error::Usage(m)) => m,
            other => panic!("expected a usage error, got {other:?}"),
        }
    }

    /// A config file with `text`, then `args`.
    fn with_file(text: &str, args: &[&str]) -> Result<RunConfig, Error> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, text).unwrap();
        let mut all = vec!["--config", path.to_str().unwrap()];
        all.extend(args);
        config(&all)
    }

    #[test]
    fn the_iteration_policy_is_n_then_min_time_then_precision() {
        let policy = |args: &[&str]| config(args).unwrap().timing.iterations;
        let ms = std::time::Duration::from_millis;
        assert_eq!(policy(&["-n", "7", "--min-time", "0.5"]), Iterations::Fixed(7));
        assert_eq!(policy(&["--min-time", "0.5"]), Iterations::MinTime(ms(500)));
        assert_eq!(
            policy(&["--precision", "0.5", "--max-time", "2"]),
            Iterations::Precision(PrecisionGoal {
                target_pct: 0.5,
                cap: ms(2000)
            })
        );
        // a graph needs its count before the timed region
        assert_eq!(policy(&["-G", "3"]), Iterations::MinTime(DEFAULT_MIN_TIME));
        assert_eq!(policy(&["-G", "3", "-n", "4"]), Iterations::Fixed(4));
        for (bad, option) in [("0", "--precision"), ("101", "--precision"), ("-1", "--max-time")] {
            let e = usage(config(&[option, bad]));
            assert!(e.contains(option), "{e}");
        }
    }

    /// nccl-tests shifts its buffers every iteration, OSU and IMB reuse
    /// one: each backend's default is its reference tool's, and the last
    /// of --rotate and --no-rotate wins on either.
    #[test]
    fn buffers_rotate_by_default_on_nccl_only_unless_asked() {
        use crate::types::BackendKind::{Memory, Mpi, Nccl};
        let rotates = |args: &[&str]| {
            let t = config(args).unwrap().timing;
            [Nccl, Mpi, Memory].map(|b| t.for_backend(b).rotate)
        };
        assert_eq!(rotates(&[]), [true, false, false]);
        assert_eq!(rotates(&["--rotate"]), [true; 3]);
        assert_eq!(rotates(&["--no-rotate"]), [false; 3]);
        assert_eq!(rotates(&["--rotate", "--no-rotate"]), [false; 3]);
        assert_eq!(rotates(&["--no-rotate", "--rotate"]), [true; 3]);
    }

    #[test]
    fn defaults_are_a_float_sum_sweep_of_every_collective() {
        let c = config(&[]).unwrap();
        assert_eq!(
            c.plan.sweep,
            SizeSweep {
                min: 8,
                max: 32 << 20,
                step: Step::Factor(2)
            }
        );
        let t = &c.timing;
        assert_eq!((t.warmup, t.check), (5, 1));
        assert_eq!(t.iterations, Iterations::Precision(PrecisionGoal::default()));
        assert!(!t.rotate && !t.per_iter && !t.blocking);
        assert_eq!(t.straggler_threshold_pct, 10.0);
        assert_eq!(t.average, Average::Avg);
        assert_eq!(t.timeout, Some(std::time::Duration::from_secs(600)));
        assert_eq!(c.plan.collectives, Collective::ALL.to_vec());
        assert_eq!(c.plan.dtypes, Choice::List(vec![DType::Float]));
        assert_eq!(c.plan.ops, Choice::List(vec![ReduceOp::Sum]));
        assert_eq!(c.plan.roots, RootChoice::Rank(0));
        assert_eq!(c.plan.hierarchies, vec![Hierarchy::Flat]);
        assert_eq!(c.plan.ranks_per_node, None);
        assert_eq!(c.start.backend, BackendChoice::Auto);
        assert_eq!(c.start.transport, Profile::Auto);
        assert_eq!(c.outputs.progress, ProgressMode::Auto);
    }

    #[test]
    fn transport_profiles_come_from_the_command_line_or_the_file_and_must_fit_the_backend() {
        assert_eq!(config(&["--transport", "TCP"]).unwrap().start.transport, Profile::Tcp);
        let c = with_file("transport = \"shm\"\nbackend = \"mpi\"\n", &[]).unwrap();
        assert_eq!(c.start.transport, Profile::Shm);
        assert!(c.digest.contains(&("--transport".to_string(), "shm".to_string())));
        let m = usage(config(&["--transport", "infiniband"]));
        assert!(
            m.contains("--transport") && m.contains("nvlink") && m.contains("help"),
            "{m}"
        );
        let m = usage(config(&["--transport", "nvlink", "--backend", "mpi"]));
        assert!(m.contains("NCCL profile") && m.contains("backend is mpi"), "{m}");
        // With auto the backend is not known yet: accepted here.
        assert_eq!(config(&["--transport", "ib"]).unwrap().start.transport, Profile::Ib);
    }

    #[test]
    fn hierarchy_all_selects_every_mode() {
        let c = config(&["--hierarchy", "all", "--ranks-per-node", "2"]).unwrap();
        assert_eq!(c.plan.hierarchies, Hierarchy::ALL.to_vec());
        assert_eq!(c.plan.ranks_per_node, Some(2));
        let c = with_file(
            "hierarchy = [\"rs-ar-ag\"]\nranks-per-node = 3\nphase-times = true\n",
            &[],
        )
        .unwrap();
        assert_eq!(c.plan.hierarchies, vec![Hierarchy::RsArAg]);
        assert_eq!(c.plan.ranks_per_node, Some(3));
        assert!(c.timing.phase_times);
    }

    #[test]
    fn launch_extras_default_to_one_operation_without_graph_or_registration() {
        let t = config(&[]).unwrap().timing;
        assert_eq!((t.agg_iters, t.cuda_graph, t.register), (1, 0, Register::Off));
        let c = config(&["-m", "4", "-G", "10", "-R", "1"]).unwrap();
        assert_eq!(
            (c.timing.agg_iters, c.timing.cuda_graph, c.timing.register),
            (4, 10, Register::Buffers)
        );
        assert_eq!(config(&["-R", "2"]).unwrap().timing.register, Register::Symmetric);
        for field in ["--agg-iters", "--cuda-graph", "--register"] {
            assert!(c.digest.iter().any(|(k, _)| k == field), "{field}");
        }
        let t = with_file("agg-iters = 2\ncuda-graph = 3\nregister = true\n", &[])
            .unwrap()
            .timing;
        assert_eq!((t.agg_iters, t.cuda_graph, t.register), (2, 3, Register::Buffers));
        assert!(!with_file("register = 0\n", &[]).unwrap().timing.register.on());
        assert_eq!(
            with_file("register = 2\n", &[]).unwrap().timing.register,
            Register::Symmetric
        );
        // -R 0 turns it off; the command line wins over the file
        assert!(!with_file("register = 1\n", &["-R", "0"]).unwrap().timing.register.on());
    }

    #[test]
    fn launch_extras_refuse_what_cannot_be_measured_as_asked() {
        let refused = |args: &[&str], needles: &[&str]| {
            let m = usage(config(args));
            for n in needles {
                assert!(m.contains(n), "{n} not in {m}");
            }
            assert!(!m.contains('\n'), "{m}");
        };
        refused(&["-m", "0"], &["--agg-iters"]);
        refused(&["-R", "maybe"], &["--register", "not 0, 1 or 2"]);
        refused(&["-G", "5", "-z", "1"], &["-G/--cuda-graph 5", "--blocking"]);
        refused(&["-G", "1", "-I"], &["-G/--cuda-graph 1", "-I"]);
        refused(&["-G", "1", "--phase-times"], &["--phase-times"]);
        refused(
            &["-m", "2", "--hierarchy", "flat,reduce-bcast"],
            &["-m/--agg-iters 2", "reduce-bcast", "-m 1"],
        );
        // what does combine
        for args in [
            &["-m", "8", "-G", "4"][..],
            &["-m", "2", "-I", "-z", "1", "--hierarchy", "flat"],
            &["-G", "0", "-I", "--phase-times", "--hierarchy", "all"],
        ] {
            assert!(config(args).is_ok(), "{args:?}");
        }
    }

    #[test]
    fn stepbytes_alone_steps_by_bytes_and_stepfactor_wins_when_both_are_given() {
        assert_eq!(config(&["-i", "1M"]).unwrap().plan.sweep.step, Step::Bytes(1 << 20));
        assert_eq!(
            config(&["-i", "1M", "-f", "4"]).unwrap().plan.sweep.step,
            Step::Factor(4)
        );
        assert_eq!(
            config(&["-f", "1", "-b", "1M"]).unwrap().plan.sweep.step,
            Step::Bytes(1 << 20)
        );
    }

    #[test]
    fn bad_values_name_the_option() {
        for (args, option) in [
            (&["-d", "float,bogus"][..], "--dtype"),
            (&["-d", ""], "--dtype"),
            (&["-o", "sum,,max"], "--op"),
            (&["-o", "all,sum"], "--op"),
            (&["--collectives", "allreduce,barrier"], "--collectives"),
            (&["-r", "-1"], "--root"),
            (&["-a", "4"], "--average"),
            (&["-z", "2"], "--blocking"),
            (&["--backend", "gloo"], "--backend"),
            (&["-n", "0"], "--iters"),
            (&["-n", "1099511627776"], "--iters"),
            (&["-b", "0"], "--minbytes"),
            (&["-b", "1G", "-e", "1M"], "--minbytes"),
            (&["-f", "0"], "--stepfactor"),
            (&["-i", "0"], "--stepbytes"),
        ] {
            let m = usage(config(args));
            assert!(m.contains(option), "{option}: {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn toml_files_use_the_long_option_names_and_the_command_line_wins() {
        let c = with_file(
            "minbytes = 1024\nmaxbytes = \"1M\"\ndtype = [\"int8\", \"double\"]\nop = \"min,max\"\nroot = \"all\"\n\
             blocking = true\nno-progress = true\ncollectives = \"all_reduce\"\naverage = 3\n",
            &["-e", "4K", "--progress"],
        )
        .unwrap();
        assert_eq!((c.plan.sweep.min, c.plan.sweep.max), (1024, 4096));
        assert_eq!(c.plan.dtypes, Choice::List(vec![DType::Int8, DType::Double]));
        assert_eq!(c.plan.ops, Choice::List(vec![ReduceOp::Min, ReduceOp::Max]));
        assert_eq!(c.plan.roots, RootChoice::All);
        assert!(c.timing.blocking);
        assert_eq!(
            c.outputs.progress,
            ProgressMode::Always,
            "the command line's --progress wins"
        );
        assert_eq!(c.plan.collectives, vec![Collective::AllReduce]);
        assert_eq!(c.timing.average, Average::Max);
        assert_eq!(
            with_file("backend = \"nccl\"\n", &[]).unwrap().start.backend,
            BackendChoice::Only(BackendKind::Nccl)
        );
    }

    #[test]
    fn toml_errors_are_one_line_with_the_line_number() {
        for (text, line) in [
            ("iters = 5\nbogus = 1\n", 2),
            ("iters = 5\niters = 6\n", 2),
            ("iters = -5\n", 1),
            ("\n\nminbytes = [\n", 3),
            ("dtype = 5\n", 1),
            ("warmup = 2\nper-iter = 1\n", 2),
            ("inject-error = true\n", 1),
            ("config = \"other.toml\"\n", 1),
            ("maxbytes = \"1M\"\n[table]\nx = 1\n", 2),
        ] {
            let m = text_args(text).unwrap_err();
            assert!(m.starts_with(&format!("line {line}:")), "{text:?}: {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn every_shipped_run_config_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let mut found = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.ends_with(".toml") && !name.starts_with("suite-") {
                config(&["--config", path.to_str().unwrap()]).unwrap_or_else(|e| panic!("{name}: {e}"));
                found += 1;
            }
        }
        assert!(found >= 2, "expected quick.toml and validate-all.toml, found {found}");
    }

    proptest! {
        #[test]
        fn config_loader_never_panics_on_arbitrary_toml(s in "[a-z\\-]{1,12} = (\"[a-zA-Z0-9,]{0,8}\"|-?[0-9]{1,22}|true|\\[\\])\n") {
            if let Ok(args) = text_args(&s) {
                let _ = cli::parse_run(&args).map(|a| RunConfig::from_args(&a));
            }
        }
    }
}
