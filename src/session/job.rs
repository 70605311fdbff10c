//! What a `collbench workload` or `collbench replay` measures, from its
//! options, before any rank starts: the model and strategies (or the
//! parsed log), the steps, and the options of `run` that do not apply
//! (refused, one line each). On every rank, `Job::configs` then turns it
//! into the schedules of this launch's size.
//!
//! Must not: start MPI, touch a backend, or print.

use std::path::Path;

use crate::cli::{ReplayArgs, RunArgs, StepArgs, WorkloadArgs};
use crate::config::RunConfig;
use crate::engine::steps::StepTiming;
use crate::error::Error;
use crate::types::human_bytes;
use crate::workload::plan::Config;
use crate::workload::{
    Count, GroupLayout, Log, LogOptions, Model, NOT_MODELLED, Options, PlainSpec, Strategy, parse_log, schedule,
};

/// Where the step's operations come from.
#[derive(Clone, Debug)]
pub enum Source {
    Strategies {
        model: Model,
        strategies: Vec<Strategy>,
        /// DDP, ZeRO and tp bucket sizes in bytes (`None`: the default).
        buckets: Vec<Option<u64>>,
        tp: usize,
        opts: Options,
    },
    Log {
        log: Box<Log>,
        path: String,
        rescale: bool,
        top: usize,
    },
    /// `collbench check` (session/check/): the session runs it apart.
    Check(Box<super::check::CheckJob>),
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
        let cfg = run_config(&a.run, "workload")?;
        let model = model(a)?;
        let strategies = a.strategy.values();
        if a.tp > 1 && !strategies.contains(&Strategy::Tp) {
            return Err(Error::usage(format!(
                "--tp {} only applies to the tp strategy; add tp to --strategy",
                a.tp
            )));
        }
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
            model,
            strategies,
            buckets,
            tp: usize::try_from(a.tp).map_err(|_| Error::usage("--tp is too large"))?,
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
        let cfg = run_config(&a.run, "replay")?;
        let text = read_log(&a.log)?;
        let log = parse_log(&text, &LogOptions { rank: a.replay_rank })
            .map_err(|e| Error::usage(format!("{}: {e}", a.log.display())))?;
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

    /// The configurations at `world` ranks of `ranks_per_node` per node.
    pub fn configs(&self, world: usize, ranks_per_node: usize) -> Result<Vec<Config>, Error> {
        match &self.source {
            Source::Strategies {
                model,
                strategies,
                buckets,
                tp,
                opts,
            } => {
                let mut out = Vec::new();
                for &s in strategies {
                    let degree = if s == Strategy::Tp { *tp } else { 1 };
                    let layout = GroupLayout::new(world, ranks_per_node, degree)?;
                    let bucketed = !matches!(s, Strategy::Fsdp { .. } | Strategy::Hsdp { .. });
                    let list: &[Option<u64>] = if bucketed { buckets } else { &[None] };
                    for &b in list {
                        let o = bucket_options(opts, b, model);
                        let name = match b {
                            Some(b) => format!("{s} bucket {}", human_bytes(b)),
                            None => s.name().to_string(),
                        };
                        let schedule = schedule(s, model, &layout, &o)?;
                        out.push(Config {
                            name,
                            strategy: Some(s),
                            bucket_bytes: b,
                            layout,
                            schedule,
                        });
                    }
                }
                Ok(out)
            }
            Source::Check(_) => Err(Error::runtime("internal error: a check has no workload configurations")),
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
                }])
            }
        }
    }

    /// The header's lines: what the job is and everything it simplifies.
    pub fn header(&self) -> Vec<String> {
        let mut lines = Vec::new();
        match &self.source {
            Source::Strategies { model, strategies, .. } => {
                lines.push(format!(
                    "model {}: {} parameters, {} layers, hidden {}, parameters {}, gradients {}",
                    model.name,
                    model.params(),
                    model.layers,
                    model.hidden,
                    model.param_dtype,
                    model.grad_dtype
                ));
                for s in strategies {
                    lines.push(format!("{s}: follows {}", s.follows()));
                    for l in s.simplifies() {
                        lines.push(format!("{s}: simplified: {l}"));
                    }
                }
                lines.extend(NOT_MODELLED.iter().map(|l| format!("not modelled: {l}")));
            }
            Source::Log { log, path, rescale, .. } => {
                lines.push(format!(
                    "replay of {path}: {} calls of {}, a job of {} ranks{}",
                    log.calls.len(),
                    log.source,
                    log.world,
                    log.version.map(|v| format!(", NCCL {v}")).unwrap_or_default()
                ));
                if *rescale {
                    lines.push(
                        "rescaled: groups over the whole logged job span this launch; every call keeps its count"
                            .into(),
                    );
                }
                lines.extend(log.notes.iter().cloned());
                lines.push(format!("not modelled: {}", NOT_MODELLED[0]));
            }
            Source::Check(_) => {}
        }
        lines.push(format!(
            "times: the slowest rank's, each operation alone; {} warm-up step(s), {} timed step(s)",
            self.timing.warmup_steps, self.timing.steps
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
            Source::Strategies { .. } | Source::Check(_) => None,
        }
    }
}

/// `--bucket` applied: DDP's and tp's cap in bytes, ZeRO's in elements of
/// the gradient type (DeepSpeed's `reduce_bucket_size` counts elements).
fn bucket_options(opts: &Options, bucket: Option<u64>, model: &Model) -> Options {
    let Some(b) = bucket else { return *opts };
    Options {
        bucket_cap_bytes: b,
        zero_bucket_elements: (b / model.grad_dtype.size_bytes() as u64).max(1),
        ..*opts
    }
}

/// `run`'s options that a workload uses (backend, checking, `--blocking`,
/// timeout, nodes, transport, outputs), validated as `run` does; the
/// others must keep their defaults.
fn run_config(a: &RunArgs, command: &str) -> Result<RunConfig, Error> {
    if let Some(option) = a.step_refusal()? {
        return Err(Error::usage(format!("{option} does not apply to collbench {command}")));
    }
    RunConfig::from_args(a)
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
        })?,
        (None, None) => return Err(Error::usage("give a model: --model PRESET, or --params N --layers N")),
    };
    m.with_dtypes(a.param_dtype, a.grad_dtype.unwrap_or(a.param_dtype))
}

fn read_log(path: &Path) -> Result<String, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::usage(format!("cannot read {}: {e}", path.display())))?;
    // Logs may hold bytes of other encodings in paths or host names.
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
