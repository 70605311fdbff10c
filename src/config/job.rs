//! What a `collbench workload` or `collbench replay` measures, from its
//! options, before any rank starts: the model and strategies (or the
//! parsed log) and the steps. On every rank, `Job::configs` then turns it
//! into the schedules of this launch's size.
//!
//! Must not: start MPI, touch a backend, or print.

use std::path::Path;

use super::{RunConfig, Taken, fingerprint};
use crate::cli::{ReplayArgs, StepArgs, StepRunArgs, WorkloadArgs};
use crate::engine::steps::StepTiming;
use crate::error::{Error, exit};
use crate::types::{Choice, DType, count_of, human_bytes};
use crate::workload::plan::Config;
use crate::workload::replay::{check, keep, read_log as read_log_text};
use crate::workload::{
    Count, GroupLayout, Log, LogOptions, Model, NOT_MODELLED, Options, PlainSpec, Strategy, TorchVersion, not_modelled,
    parse_log, schedule,
};

/// Where the step's operations come from.
#[derive(Clone, Debug)]
pub enum Source {
    Strategies {
        model: Box<Model>,
        strategies: Vec<Strategy>,
        /// DDP, ZeRO and tp bucket sizes in bytes (`None`: the default).
        buckets: Vec<Option<u64>>,
        tp: usize,
        /// Expert-parallel and pipeline degrees (`None`: the largest that
        /// divides both the ranks and the experts, or the layers).
        ep: Option<usize>,
        pp: Option<usize>,
        /// `--reduce-dtype` (`None`: each framework's own).
        reduce: Option<DType>,
        opts: Options,
    },
    Log {
        log: Box<Log>,
        path: String,
        rescale: bool,
        top: usize,
    },
}

/// A workload or replay, validated.
#[derive(Clone, Debug)]
pub struct Job {
    pub source: Source,
    pub timing: StepTiming,
}

impl Job {
    /// `collbench workload`: the job and the run's configuration.
    pub fn workload(a: &WorkloadArgs) -> Result<(Job, RunConfig), Error> {
        let cfg = RunConfig::for_command("workload", a, taken(&a.run), Vec::new())?;
        let model = model(a)?;
        let mut strategies = a.strategy.values();
        // `all` is every strategy the model has: moe needs experts
        if matches!(a.strategy, Choice::All) && model.moe.is_none() {
            strategies.retain(|&s| s != Strategy::Moe);
        }
        for (given, option, strategy) in [
            (a.tp > 1, format!("--tp {}", a.tp), Strategy::Tp),
            (a.ep.is_some(), format!("--ep {}", a.ep.unwrap_or(0)), Strategy::Moe),
            (a.pp.is_some(), format!("--pp {}", a.pp.unwrap_or(0)), Strategy::Pp),
            (
                a.knobs.micro_batches.is_some(),
                format!("--micro-batches {}", a.knobs.micro_batches.unwrap_or(0)),
                Strategy::Pp,
            ),
            (
                a.knobs.moe_imbalance > 1.0,
                format!("--moe-imbalance {}", a.knobs.moe_imbalance),
                Strategy::Moe,
            ),
        ] {
            if given && !strategies.contains(&strategy) {
                return Err(Error::usage(format!(
                    "{option} only applies to the {strategy} strategy; add {strategy} to --strategy"
                )));
            }
        }
        let degree = |v: Option<u64>, what: &str| -> Result<Option<usize>, Error> {
            v.map(|d| usize::try_from(d).map_err(|_| Error::usage(format!("--{what} is too large"))))
                .transpose()
        };
        let mut buckets: Vec<Option<u64>> = Vec::new();
        for b in a.bucket.iter().map(|b| Some(b.bytes())) {
            if !buckets.contains(&b) {
                buckets.push(b);
            }
        }
        if buckets.is_empty() {
            buckets.push(None);
        }
        let opts = Options::with_knobs(&a.knobs).map_err(|e| {
            Error::runtime(format!(
                "internal error: the workload knobs do not fit the options: {e}"
            ))
        })?;
        let source = Source::Strategies {
            model: Box::new(model),
            strategies,
            buckets,
            tp: usize::try_from(a.tp).map_err(|_| Error::usage("--tp is too large"))?,
            ep: degree(a.ep, "ep")?,
            pp: degree(a.pp, "pp")?,
            reduce: a.reduce_dtype,
            opts,
        };
        Ok((
            Job {
                source,
                timing: timing(&a.steps, &cfg),
            },
            cfg,
        ))
    }

    /// `collbench replay`: the log read and parsed (every rank reads it).
    pub fn replay(a: &ReplayArgs) -> Result<(Job, RunConfig), Error> {
        let text = read_log(&a.log)?;
        let contents = vec![("LOG contents".to_string(), fingerprint(text.as_bytes()))];
        let cfg = RunConfig::for_command("replay", a, taken(&a.run), contents)?;
        if let Some(csv) = &cfg.outputs.csv {
            crate::report::paths::check_distinct(&[("--csv", csv)], &[("the log", &a.log)])?;
        }
        let log = parse_log(&text, &LogOptions { rank: a.replay_rank })
            .map_err(|e| Error::from_code(e.exit_code(), format!("{}: {e}", a.log.display())))?;
        let source = Source::Log {
            log: Box::new(log),
            path: a.log.display().to_string(),
            rescale: a.rescale,
            top: a.top,
        };
        Ok((
            Job {
                source,
                timing: timing(&a.steps, &cfg),
            },
            cfg,
        ))
    }

    /// `collbench replay --check-only`: the check of the log's ranks and
    /// the sequence a replay would run, as lines, and the exit code (6
    /// when the ranks disagree, 2 when the kept rank cannot be replayed).
    pub fn check(a: &ReplayArgs) -> Result<(Vec<String>, u8), Error> {
        let text = read_log(&a.log)?;
        let path = a.log.display().to_string();
        let (scan, check) =
            read_log_text(&text).map_err(|e| Error::from_code(e.exit_code(), format!("{path}: {e}")))?;
        let mut lines = vec![
            format!("# collbench replay --check-only: {path}"),
            format!(
                "# {}a job of {}; {} shown, {}",
                scan.version.map(|v| format!("NCCL {v}; ")).unwrap_or_default(),
                count_of(scan.world, "rank"),
                count_of(scan.slots.len(), "rank"),
                count_of(scan.calls.len(), "call")
            ),
        ];
        lines.extend(check::report(&check));
        let mut code = exit::OK;
        match keep(&scan, &check, &LogOptions { rank: a.replay_rank }) {
            Ok(log) => {
                let own: Vec<&String> = log.notes.iter().filter(|n| !check.notes.contains(n)).collect();
                if !own.is_empty() {
                    lines.push("replay notes".into());
                    lines.extend(own.iter().map(|n| format!("  {n}")));
                }
                lines.push(format!("kept: {}: {}", log.source, count_of(log.calls.len(), "call")));
                lines.extend(log.describe_calls().into_iter().map(|c| format!("  {c}")));
            }
            Err(e) => {
                lines.push(format!("kept: cannot be replayed: {e}"));
                code = e.exit_code();
            }
        }
        let verdict = match check.first() {
            Some(f) => {
                code = exit::DIVERGENCE;
                format!(
                    "verdict: the ranks disagree (line {}): a replay refuses this log (exit 7)",
                    f.line
                )
            }
            None if code == exit::OK => "verdict: the ranks agree as far as the log shows".to_string(),
            None => format!(
                "verdict: the ranks agree as far as the log shows; the kept rank cannot be replayed (exit {code})"
            ),
        };
        lines.push(verdict);
        Ok((lines, code))
    }

    /// The configurations at `world` ranks of `ranks_per_node` per node.
    pub fn configs(&self, world: usize, ranks_per_node: usize) -> Result<Vec<Config>, Error> {
        match &self.source {
            Source::Strategies {
                model,
                strategies,
                buckets,
                tp,
                ep,
                pp,
                reduce,
                opts,
            } => {
                let mut out = Vec::new();
                for &s in strategies {
                    let degree = if s == Strategy::Tp { *tp } else { 1 };
                    let mut layout = GroupLayout::new(world, ranks_per_node, degree)?;
                    match s {
                        Strategy::Moe => {
                            let experts = model.moe.map_or(1, |m| m.experts);
                            layout = layout.with_ep(ep.unwrap_or_else(|| gcd(world, experts)))?;
                        }
                        Strategy::Pp => layout = layout.with_pp(pp.unwrap_or_else(|| gcd(world, model.layers)))?,
                        _ => {}
                    }
                    let bucketed = !matches!(s, Strategy::Fsdp { .. } | Strategy::Hsdp { .. });
                    let list: &[Option<u64>] = if bucketed { buckets } else { &[None] };
                    let model = Model {
                        grad_dtype: reduce.unwrap_or_else(|| s.reduce_dtype(model.param_dtype)),
                        ..(**model).clone()
                    };
                    for &b in list {
                        let o = bucket_options(opts, b, &model);
                        let name = match b {
                            Some(b) => format!("{s} bucket {}", human_bytes(b)),
                            None => s.name().to_string(),
                        };
                        let schedule = schedule(s, &model, &layout, &o)?;
                        out.push(Config {
                            name,
                            strategy: Some(s),
                            bucket_bytes: b,
                            layout,
                            schedule,
                            notes: picked(s, &layout, &model, (*ep, *pp), opts),
                        });
                    }
                }
                Ok(out)
            }
            Source::Log { log, rescale, path, .. } => {
                let layout = GroupLayout::new(world, ranks_per_node, 1)?;
                let schedule = log
                    .schedule(world, *rescale)
                    .map_err(|e| Error::from_code(e.exit_code(), format!("{path}: {e}")))?;
                Ok(vec![Config {
                    name: "replay".into(),
                    strategy: None,
                    bucket_bytes: None,
                    layout,
                    schedule,
                    notes: Vec::new(),
                }])
            }
        }
    }

    /// The header's lines: what the job is and everything it simplifies.
    pub fn header(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.source {
            Source::Strategies {
                model,
                strategies,
                reduce,
                opts,
                buckets,
                ..
            } => {
                let experts = model
                    .moe
                    .map(|m| format!(", {} experts per MoE layer, top-{}", m.experts, m.top_k))
                    .unwrap_or_default();
                lines.push(format!(
                    "model {}: {} parameters, {}, hidden {}{experts}, parameters {}",
                    model.name,
                    model.params(),
                    count_of(model.layers, "layer"),
                    model.hidden,
                    model.param_dtype,
                ));
                for &s in strategies {
                    lines.push(format!("{s}: follows {}", s.follows()));
                    lines.push(match reduce {
                        Some(t) => format!("{s}: gradients reduced in {t} (--reduce-dtype)"),
                        None => format!(
                            "{s}: gradients reduced in {} ({})",
                            s.reduce_dtype(model.param_dtype),
                            s.reduce_dtype_why()
                        ),
                    });
                    if s == Strategy::Ddp {
                        lines.push(ddp_version_line(opts, buckets));
                    }
                    for l in s.simplifies() {
                        lines.push(format!("{s}: simplified: {l}"));
                    }
                }
                lines.extend(not_modelled(strategies).iter().map(|l| format!("not modelled: {l}")));
            }
            Source::Log { log, path, rescale, .. } => {
                lines.push(format!(
                    "replay of {path}: {} of {}, a job of {}{}",
                    count_of(log.calls.len(), "call"),
                    log.source,
                    count_of(log.world, "rank"),
                    log.version.map(|v| format!(", NCCL {v}")).unwrap_or_default()
                ));
                if *rescale {
                    lines.push(
                        "rescaled: every call keeps its count and its communicator's stride: groups over the whole \
                         logged job (the world; every s-th rank) span this launch (launch / s ranks), smaller blocks \
                         keep their size"
                            .into(),
                    );
                }
                lines.extend(log.notes.iter().cloned());
                lines.push(format!("not modelled: {}", NOT_MODELLED[0]));
            }
        }
        lines.push(format!(
            "times: each step's slowest rank (its step and its operations), each operation alone; {} warm-up \
             step(s), {} timed step(s){}",
            self.timing.warmup_steps,
            self.timing.steps,
            if matches!(self.source, Source::Log { .. }) {
                ""
            } else {
                ", the configurations' steps in turn"
            }
        ));
        lines
    }

    /// Whether the CSV says `rescaled`.
    pub fn rescaled(&self) -> bool {
        matches!(self.source, Source::Log { rescale: true, .. })
    }

    /// Operations listed as the top by time (replay only).
    pub fn top(&self) -> Option<usize> {
        match self.source {
            Source::Log { top, .. } => Some(top),
            Source::Strategies { .. } => None,
        }
    }
}

/// `--bucket` applied: DDP's and tp's cap in bytes, ZeRO's in elements of
/// the gradient type (DeepSpeed's `reduce_bucket_size` counts elements).
fn bucket_options(opts: &Options, bucket: Option<u64>, model: &Model) -> Options {
    let Some(b) = bucket else { return *opts };
    Options {
        bucket_cap_bytes: b,
        bucket_explicit: true,
        zero_bucket_elements: (b / model.grad_dtype.size_bytes() as u64).max(1),
        ..*opts
    }
}

/// What the header says of strategy `s` at `layout`: a degree of 1 that
/// leaves tp, moe or pp without the calls its `follows` line describes
/// (given, or the most that divides the ranks and the experts or layers),
/// and pp's stages and micro-batches. `given`: `--ep` and `--pp`.
fn picked(
    s: Strategy,
    layout: &GroupLayout,
    model: &Model,
    given: (Option<usize>, Option<usize>),
    opts: &Options,
) -> Vec<String> {
    let ranks = count_of(layout.world, "rank");
    let why = |given: Option<usize>, option: &str, what: String| match given {
        Some(_) => format!("{option} 1"),
        None => format!("the most that divides both the {ranks} and the {what}"),
    };
    let note = match s {
        Strategy::Tp if layout.tp == 1 => format!(
            "tp: tensor-parallel degree 1 (--tp, default 1): no activation all-reduces, only the gradients' \
             all-reduce over all {ranks}"
        ),
        Strategy::Moe if layout.ep == 1 => {
            let experts = model.moe.map_or(0, |m| m.experts);
            format!(
                "moe: expert-parallel degree 1 ({}): every rank holds all {experts} experts and no token leaves its \
                 rank: no all-to-all, only the gradients' all-reduces over all {ranks}",
                why(given.0, "--ep", format!("{experts} experts"))
            )
        }
        Strategy::Pp if layout.pp == 1 => format!(
            "pp: 1 pipeline stage ({}): no stage transfers, only the gradients' all-reduce over all {ranks}",
            why(given.1, "--pp", count_of(model.layers, "layer"))
        ),
        Strategy::Pp => {
            let m = opts.micro_batches.map_or(layout.pp as u64, |m| m);
            format!(
                "pp: {} pipeline stages of {} each, {} per step{}",
                layout.pp,
                count_of(model.layers / layout.pp, "layer"),
                if m == 1 {
                    "1 micro-batch".to_string()
                } else {
                    format!("{m} micro-batches")
                },
                if opts.micro_batches.is_none() {
                    " (as many as stages; --micro-batches N)"
                } else {
                    ""
                }
            )
        }
        _ => return Vec::new(),
    };
    vec![note]
}

/// The greatest common divisor (the default expert-parallel degree and
/// pipeline stages: the most that divide both the ranks and the experts, or
/// the layers).
fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a.max(1) } else { gcd(b, a % b) }
}

/// Which PyTorch DDP is modelled on, and what that means for its first
/// bucket here.
fn ddp_version_line(opts: &Options, buckets: &[Option<u64>]) -> String {
    let since = TorchVersion::FIRST_BUCKET_FOLLOWS_CAP;
    let version = match opts.pytorch {
        Some(v) => format!("PyTorch {v} (--pytorch)"),
        None => format!("PyTorch {since} and later (the default; --pytorch for an older release)"),
    };
    let follows = opts.pytorch.is_none_or(|v| v >= since);
    let first = match (buckets.iter().any(Option::is_some), follows) {
        (false, _) => "the default bucket_cap_mb keeps the 1 MiB first bucket".to_string(),
        (true, true) => format!(
            "an explicit bucket_cap_mb (--bucket) sizes the first bucket too (since {since}, pytorch/pytorch#121640)"
        ),
        (true, false) => format!("the first bucket stays 1 MiB whatever bucket_cap_mb is (before {since})"),
    };
    format!("ddp: {version}: {first}")
}

/// What a workload and a replay take of `run`'s option groups.
fn taken(r: &StepRunArgs) -> Taken<'_> {
    Taken {
        common: &r.common,
        blocking: Some(&r.blocking),
        register: Some(&r.register),
        repeat: None,
        label: None,
        progress: Some(&r.progress),
        csv: r.csv.csv.clone(),
        json: None,
    }
}

fn timing(steps: &StepArgs, cfg: &RunConfig) -> StepTiming {
    StepTiming {
        warmup_steps: steps.warmup_steps,
        steps: steps.steps,
        check: cfg.timing.check,
        blocking: cfg.timing.blocking,
    }
}

fn model(a: &WorkloadArgs) -> Result<Model, Error> {
    let m = match (a.model, a.params) {
        (Some(preset), _) => preset.model(),
        (None, Some(Count(params))) => Model::plain(PlainSpec {
            params,
            layers: a.layers.unwrap_or(0),
            hidden: a.hidden.map(|c| c.0),
            vocab: a.vocab.map(|c| c.0),
            experts: a.experts,
            top_k: a.top_k,
        })?,
        (None, None) => return Err(Error::usage("give a model: --model PRESET, or --params N --layers N")),
    };
    // each strategy reduces in its framework's type unless --reduce-dtype
    // says (Job::configs)
    m.with_dtypes(a.param_dtype, a.reduce_dtype.unwrap_or(a.param_dtype))
}

/// The log's text as the one NCCL log reader reads it (gzip, UTF-16, BOMs).
fn read_log(path: &Path) -> Result<String, Error> {
    crate::nccl_log::read_file(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Command, parse_cli};
    use crate::workload::{Group, StepVolume};

    fn job(args: &[&str]) -> Job {
        let argv = ["collbench", "workload"].iter().chain(args);
        match parse_cli(argv).unwrap().command {
            Command::Workload(a) => Job::workload(&a).unwrap().0,
            other => panic!("{other:?}"),
        }
    }

    fn volume_gb(c: &Config) -> f64 {
        StepVolume::new(&c.schedule, &c.layout).unwrap().bus_bytes() / 1e9
    }

    #[test]
    fn each_strategy_reduces_in_its_frameworks_type_and_says_so() {
        let j = job(&["--model", "llama-2-7b", "--strategy", "ddp,fsdp,tp", "--tp", "2"]);
        let c = j.configs(8, 8).unwrap();
        let types: Vec<(String, DType)> = c
            .iter()
            .map(|c| {
                let grads = c.schedule.ops.iter().rev().find(|o| o.op.is_some()).unwrap();
                (c.name.clone(), grads.dtype)
            })
            .collect();
        assert_eq!(
            types,
            [
                ("ddp".to_string(), DType::Float),
                ("fsdp".to_string(), DType::Bfloat16),
                ("tp".to_string(), DType::Float)
            ]
        );
        // DDP under AMP: 2 x 7/8 x P x 4 bytes, twice the bf16 figure
        let p = Model::preset("llama-2-7b").unwrap().params() as f64;
        assert!((volume_gb(&c[0]) - 2.0 * 7.0 / 8.0 * p * 4.0 / 1e9).abs() < 1e-6);
        let h = j.header();
        assert!(
            h.iter()
                .any(|l| l.starts_with("ddp: gradients reduced in float (PyTorch DDP")),
            "{h:?}"
        );
        assert!(
            h.iter()
                .any(|l| l.starts_with("tp: gradients reduced in float (Megatron-LM")),
            "{h:?}"
        );
        assert!(
            h.iter()
                .any(|l| l.starts_with("ddp: PyTorch 2.4 and later (the default")),
            "{h:?}"
        );
        // --reduce-dtype sets every strategy's
        let j = job(&[
            "--model",
            "llama-2-7b",
            "--strategy",
            "ddp",
            "--reduce-dtype",
            "bfloat16",
        ]);
        let c = j.configs(8, 8).unwrap();
        assert!((volume_gb(&c[0]) - 2.0 * 7.0 / 8.0 * p * 2.0 / 1e9).abs() < 1e-6);
        assert!(
            j.header()
                .contains(&"ddp: gradients reduced in bfloat16 (--reduce-dtype)".to_string())
        );
    }

    #[test]
    fn an_explicit_bucket_sizes_ddps_first_bucket_unless_pytorch_is_older_than_2_4() {
        let first = |args: &[&str]| {
            let c = job(args).configs(2, 2).unwrap();
            c[0].schedule.ops[0].count
        };
        // layers of 250K parameters: attention 4 x 64^2, two MLP matrices
        // of 117,696 (470,784 bytes of float gradients)
        let base = ["--params", "2M", "--layers", "8", "--hidden", "64", "--bucket", "4M"];
        // a bucket closes at the tensor that reaches its cap: 4 MiB of
        // float gradients is 1 Mi elements, 1 MiB a quarter of that
        let new_first = first(&base);
        assert!((1 << 20..(1 << 20) + 117_696).contains(&new_first), "{new_first}");
        let old = [&base[..], &["--pytorch", "2.3"]].concat();
        let old_first = first(&old);
        assert!((1 << 18..(1 << 18) + 117_696).contains(&old_first), "{old_first}");
        let h = job(&old).header();
        assert!(
            h.contains(
                &"ddp: PyTorch 2.3 (--pytorch): the first bucket stays 1 MiB whatever bucket_cap_mb is (before 2.4)"
                    .to_string()
            ),
            "{h:?}"
        );
    }

    #[test]
    fn moe_and_pp_default_to_the_most_that_divide_ranks_and_experts_or_layers() {
        let j = job(&["--model", "mixtral-8x7b", "--strategy", "all"]);
        let c = j.configs(6, 6).unwrap();
        let moe = c.iter().find(|c| c.strategy == Some(Strategy::Moe)).unwrap();
        assert_eq!(moe.layout.ep, 2, "8 experts on 6 ranks");
        assert!(moe.schedule.ops.iter().any(|o| o.group == Group::ExpertDp));
        let pp = c.iter().find(|c| c.strategy == Some(Strategy::Pp)).unwrap();
        assert_eq!(pp.layout.pp, 2, "32 layers on 6 ranks");
        // a dense model's `all` has no moe; asking for it is one line
        let j = job(&["--model", "gpt2", "--strategy", "all"]);
        assert!(
            j.configs(4, 4)
                .unwrap()
                .iter()
                .all(|c| c.strategy != Some(Strategy::Moe))
        );
        let e = job(&["--model", "gpt2", "--strategy", "moe"])
            .configs(4, 4)
            .unwrap_err();
        assert!(e.to_string().contains("needs a mixture-of-experts model"), "{e}");
    }

    #[test]
    fn the_micro_batch_line_says_pp_runs_its_micro_batches() {
        let line = |strategies: &str| {
            job(&["--params", "1M", "--layers", "2", "--strategy", strategies])
                .header()
                .into_iter()
                .find(|l| l.starts_with("not modelled: one micro-batch"))
                .unwrap()
        };
        assert_eq!(
            line("ddp,fsdp"),
            "not modelled: one micro-batch per step: no gradient accumulation"
        );
        assert_eq!(
            line("ddp,pp"),
            "not modelled: one micro-batch per step (pp: its micro-batches through the pipeline, --micro-batches, \
             gradients reduced once after the last): no gradient accumulation over more"
        );
        // pp's default: as many micro-batches as stages, none given
        let j = job(&["--params", "1M", "--layers", "2", "--strategy", "pp"]);
        let Source::Strategies { opts, .. } = &j.source else {
            panic!()
        };
        assert_eq!(opts.micro_batches, None);
        let forwards = |j: &Job| {
            let c = j.configs(2, 2).unwrap();
            c[0].schedule
                .ops
                .iter()
                .filter(|o| o.label.ends_with("activations"))
                .count()
        };
        assert_eq!(forwards(&j), 2, "2 stages");
        let j = job(&[
            "--params",
            "1M",
            "--layers",
            "2",
            "--strategy",
            "pp",
            "--micro-batches",
            "3",
        ]);
        assert_eq!(forwards(&j), 3);
    }

    #[test]
    fn a_degree_of_1_that_leaves_a_strategy_without_its_calls_is_said() {
        let notes = |args: &[&str], world: usize| -> Vec<String> {
            let base = ["--params", "1M", "--layers", "2"];
            let argv: Vec<&str> = base.iter().chain(args).copied().collect();
            job(&argv)
                .configs(world, world)
                .unwrap()
                .into_iter()
                .flat_map(|c| c.notes)
                .collect()
        };
        // 3 experts on 4 ranks: ep 1, no all-to-all at all
        let got = notes(&["--experts", "3", "--strategy", "moe"], 4);
        assert_eq!(
            got,
            [
                "moe: expert-parallel degree 1 (the most that divides both the 4 ranks and the 3 experts): every rank \
              holds all 3 experts and no token leaves its rank: no all-to-all, only the gradients' all-reduces over \
              all 4 ranks"
            ]
        );
        let c = job(&["--params", "1M", "--layers", "2", "--experts", "3", "--strategy", "moe"]).configs(4, 4);
        assert!(
            c.unwrap()[0]
                .schedule
                .ops
                .iter()
                .all(|o| o.collective != crate::collective::Collective::AllToAll)
        );
        // 2 layers on 3 ranks: one stage, no stage transfers; each bucket
        // size's configuration says it (the header says it once)
        let got = notes(&["--strategy", "pp", "--bucket", "1M,2M"], 3);
        let want = "pp: 1 pipeline stage (the most that divides both the 3 ranks and the 2 layers): no stage \
                    transfers, only the gradients' all-reduce over all 3 ranks";
        assert_eq!(got, [want, want]);
        assert_eq!(
            notes(&["--strategy", "pp", "--pp", "1"], 2),
            ["pp: 1 pipeline stage (--pp 1): no stage transfers, only the gradients' all-reduce over all 2 ranks"]
        );
        assert_eq!(
            notes(&["--strategy", "tp"], 2),
            [
                "tp: tensor-parallel degree 1 (--tp, default 1): no activation all-reduces, only the gradients' \
              all-reduce over all 2 ranks"
            ]
        );
        // what pp picked when it has stages: their layers, the micro-batches
        assert_eq!(
            notes(&["--strategy", "pp"], 2),
            ["pp: 2 pipeline stages of 1 layer each, 2 micro-batches per step (as many as stages; --micro-batches N)"]
        );
        assert_eq!(
            notes(&["--strategy", "pp", "--micro-batches", "1"], 4),
            ["pp: 2 pipeline stages of 1 layer each, 1 micro-batch per step"]
        );
        // nothing degenerate: nothing said
        assert!(notes(&["--strategy", "ddp,fsdp,tp", "--tp", "2"], 4).is_empty());
        assert!(notes(&["--experts", "4", "--strategy", "moe"], 4).is_empty());
    }

    #[test]
    fn the_model_line_counts_in_the_singular_for_one() {
        let h = job(&["--params", "1M", "--layers", "1", "--strategy", "ddp"]).header();
        assert!(
            h[0].starts_with("model plain: 1000000 parameters, 1 layer, hidden "),
            "{}",
            h[0]
        );
    }
}
