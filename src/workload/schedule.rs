//! The strategies: their names and what each follows and simplifies, and
//! `schedule`, the step of a strategy for a model on a layout (built by
//! one file per strategy from `op` and `options`).

use std::fmt;

use crate::error::Error;
use crate::types::Named;

use super::groups::GroupLayout;
use super::model::Model;
use super::op::Schedule;
use super::options::Options;
use super::{ddp, fsdp, tp, zero};

/// The strategies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// PyTorch DistributedDataParallel.
    Ddp,
    /// DeepSpeed ZeRO stage 1 (optimizer states sharded).
    Zero1,
    /// DeepSpeed ZeRO stage 2 (gradients sharded too).
    Zero2,
    /// PyTorch FSDP over all ranks: FULL_SHARD, or SHARD_GRAD_OP when
    /// parameters are kept after forward.
    Fsdp { reshard_after_forward: bool },
    /// PyTorch FSDP HYBRID_SHARD (or _HYBRID_SHARD_ZERO2 when parameters are
    /// kept after forward): shard inside the node, replicate across nodes.
    Hsdp { reshard_after_forward: bool },
    /// Megatron tensor parallelism of the layout's degree, with data
    /// parallelism over the rest.
    Tp,
}

impl Strategy {
    pub const ALL: [Strategy; 8] = [
        Strategy::Ddp,
        Strategy::Zero1,
        Strategy::Zero2,
        Strategy::Fsdp {
            reshard_after_forward: true,
        },
        Strategy::Fsdp {
            reshard_after_forward: false,
        },
        Strategy::Hsdp {
            reshard_after_forward: true,
        },
        Strategy::Hsdp {
            reshard_after_forward: false,
        },
        Strategy::Tp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Ddp => "ddp",
            Strategy::Zero1 => "zero1",
            Strategy::Zero2 => "zero2",
            Strategy::Fsdp {
                reshard_after_forward: true,
            } => "fsdp",
            Strategy::Fsdp {
                reshard_after_forward: false,
            } => "fsdp-grad-op",
            Strategy::Hsdp {
                reshard_after_forward: true,
            } => "hsdp",
            Strategy::Hsdp {
                reshard_after_forward: false,
            } => "hsdp-grad-op",
            Strategy::Tp => "tp",
        }
    }

    /// Accepts the names and the frameworks' own (`full_shard`,
    /// `shard_grad_op`, `hybrid_shard`, `zero3`, `megatron`).
    pub fn parse(text: &str) -> Option<Strategy> {
        let key: String = text.trim().to_ascii_lowercase().replace('_', "-");
        let alias = match key.as_str() {
            "zero3" | "zero-3" | "full-shard" => "fsdp",
            "shard-grad-op" => "fsdp-grad-op",
            "hybrid-shard" => "hsdp",
            "-hybrid-shard-zero2" | "hybrid-shard-zero2" => "hsdp-grad-op",
            "zero-1" => "zero1",
            "zero-2" => "zero2",
            "megatron" | "megatron-tp" => "tp",
            other => other,
        };
        Strategy::ALL.into_iter().find(|s| s.name() == alias)
    }
}

/// What every schedule leaves out, for the output's header.
pub const NOT_MODELLED: &[&str] = &[
    "operations run one after another: overlap with compute (and with each other) is not measured",
    "forward, backward and optimizer compute are not measured; the step time is communication only",
    "one micro-batch per step: no gradient accumulation",
    "no pipeline parallelism, no sequence parallelism, no activation checkpointing",
];

impl Strategy {
    /// The framework behaviour the schedule follows, in one line.
    pub fn follows(self) -> &'static str {
        match self {
            Strategy::Ddp => {
                "PyTorch DDP (reducer.cpp): gradient all_reduce per bucket, bucket_cap_mb buckets after a 1 MiB first one, reverse parameter order"
            }
            Strategy::Zero1 => {
                "DeepSpeed ZeRO-1 (stage_1_and_2.py): gradient all_reduce per reduce_bucket_size bucket after backward in parameter order, one all_gather of the updated partitions"
            }
            Strategy::Zero2 => {
                "DeepSpeed ZeRO-2 (stage_1_and_2.py): gradient all_reduce per reduce_bucket_size bucket in backward order, one all_gather of the updated partitions"
            }
            Strategy::Fsdp {
                reshard_after_forward: true,
            } => {
                "PyTorch FSDP FULL_SHARD (_runtime_utils.py): per-layer all_gather in forward and again in backward (BACKWARD_PRE prefetch), reduce_scatter per layer; the root is gathered once"
            }
            Strategy::Fsdp {
                reshard_after_forward: false,
            } => {
                "PyTorch FSDP SHARD_GRAD_OP (_runtime_utils.py): per-layer all_gather in forward only, reduce_scatter per layer"
            }
            Strategy::Hsdp {
                reshard_after_forward: true,
            } => {
                "PyTorch FSDP HYBRID_SHARD: FULL_SHARD inside the node, all_reduce of each gradient shard across nodes"
            }
            Strategy::Hsdp {
                reshard_after_forward: false,
            } => {
                "PyTorch FSDP _HYBRID_SHARD_ZERO2: SHARD_GRAD_OP inside the node, all_reduce of each gradient shard across nodes"
            }
            Strategy::Tp => {
                "Megatron-LM tensor parallelism (tensor_parallel/layers.py): 2 activation all_reduces per layer forward and 2 backward, vocabulary-parallel embedding and loss; DDP buckets of the 1/T gradient shard over the data-parallel group"
            }
        }
    }

    /// What this schedule simplifies beyond `NOT_MODELLED`.
    pub fn simplifies(self) -> &'static [&'static str] {
        match self {
            Strategy::Ddp => &[
                "steady-state buckets (after the first iteration's rebuild); no parameter broadcast, no buffer broadcast",
            ],
            Strategy::Zero1 | Strategy::Zero2 => &[
                "one parameter group; a tensor larger than reduce_bucket_size is one all_reduce (DeepSpeed may split it at partition boundaries)",
            ],
            Strategy::Fsdp { .. } | Strategy::Hsdp { .. } => &[
                "FSDP1 with one unit per transformer layer plus the root; forward_prefetch off; FSDP2 (fully_shard) differs in details",
            ],
            Strategy::Tp => {
                &["no sequence parallelism; data-parallel buckets use the DDP bucket size, reduced after backward"]
            }
        }
    }
}

/// `--strategy` lists them (`Choice<Strategy>`).
impl Named for Strategy {
    const WHAT: &'static str = "strategy";
    fn all() -> &'static [Self] {
        &Strategy::ALL
    }
    fn name(self) -> &'static str {
        Strategy::name(self)
    }
    fn parse(text: &str) -> Option<Self> {
        Strategy::parse(text)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The step of `strategy` for `model` on `layout`.
pub fn schedule(strategy: Strategy, model: &Model, layout: &GroupLayout, opts: &Options) -> Result<Schedule, Error> {
    opts.check()?;
    if layout.tp > 1 && strategy != Strategy::Tp {
        return Err(Error::usage(format!(
            "a tensor-parallel degree of {} only applies to the tp strategy, not {strategy}",
            layout.tp
        )));
    }
    let ops = match strategy {
        Strategy::Ddp => ddp::step(model, opts),
        Strategy::Zero1 => zero::step(model, layout, opts, 1),
        Strategy::Zero2 => zero::step(model, layout, opts, 2),
        Strategy::Fsdp { reshard_after_forward } => fsdp::step(model, layout, reshard_after_forward, false),
        Strategy::Hsdp { reshard_after_forward } => fsdp::step(model, layout, reshard_after_forward, true),
        Strategy::Tp => tp::step(model, layout, opts),
    };
    Ok(Schedule {
        name: strategy.name().into(),
        ops,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::groups::Group;

    #[test]
    fn strategies_parse_from_their_names_and_the_frameworks_names() {
        for s in Strategy::ALL {
            assert_eq!(Strategy::parse(s.name()).unwrap(), s);
            assert_eq!(Strategy::parse(&s.name().to_uppercase()).unwrap(), s);
        }
        let fsdp = Strategy::Fsdp {
            reshard_after_forward: true,
        };
        assert_eq!(Strategy::parse("FULL_SHARD").unwrap(), fsdp);
        assert_eq!(Strategy::parse("zero3").unwrap(), fsdp);
        assert_eq!(
            Strategy::parse("shard_grad_op").unwrap(),
            Strategy::Fsdp {
                reshard_after_forward: false
            }
        );
        assert_eq!(
            Strategy::parse("_HYBRID_SHARD_ZERO2").unwrap(),
            Strategy::Hsdp {
                reshard_after_forward: false
            }
        );
        assert_eq!(Strategy::parse("megatron").unwrap(), Strategy::Tp);
        assert_eq!(Strategy::parse("pipeline"), None);
        let err = "ddp,pipeline".parse::<crate::types::Choice<Strategy>>().unwrap_err();
        assert_eq!(
            err,
            "unknown strategy 'pipeline' (expected ddp, zero1, zero2, fsdp, fsdp-grad-op, hsdp, hsdp-grad-op, tp, or all)"
        );
    }

    #[test]
    fn every_strategy_says_what_it_follows_and_simplifies_in_one_line_each() {
        for s in Strategy::ALL {
            assert!(!s.follows().is_empty() && !s.follows().contains('\n'), "{s}");
            assert!(!s.simplifies().is_empty(), "{s}");
            assert!(s.simplifies().iter().all(|l| !l.contains('\n')), "{s}");
        }
        assert!(NOT_MODELLED.iter().any(|l| l.contains("overlap with compute")));
    }

    #[test]
    fn zero_options_and_a_stray_tp_degree_are_refused() {
        let m = Model::preset("gpt2").unwrap();
        let l = GroupLayout::new(4, 4, 1).unwrap();
        let opts = Options {
            bucket_cap_bytes: 0,
            ..Options::default()
        };
        let err = schedule(Strategy::Ddp, &m, &l, &opts).unwrap_err();
        assert_eq!(err.to_string(), "the DDP bucket size must be at least 1");
        let l = GroupLayout::new(4, 4, 2).unwrap();
        let err = schedule(Strategy::Ddp, &m, &l, &Options::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a tensor-parallel degree of 2 only applies to the tp strategy, not ddp"
        );
    }

    #[test]
    fn a_schedule_lists_its_groups_once_in_order_of_first_use() {
        let m = Model::preset("gpt2").unwrap();
        let l = GroupLayout::new(4, 2, 2).unwrap();
        let s = schedule(Strategy::Tp, &m, &l, &Options::default()).unwrap();
        assert_eq!(s.groups(), vec![Group::Tp, Group::Dp]);
        let l = GroupLayout::new(4, 2, 1).unwrap();
        let hsdp = Strategy::Hsdp {
            reshard_after_forward: true,
        };
        let s = schedule(hsdp, &m, &l, &Options::default()).unwrap();
        assert_eq!(s.groups(), vec![Group::Node, Group::CrossNode]);
    }
}
