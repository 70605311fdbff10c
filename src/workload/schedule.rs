//! The strategies: their names and what each follows and simplifies, and
//! `schedule`, the step of a strategy for a model on a layout (built by
//! one file per strategy from `op` and `options`).

use crate::error::Error;
use crate::types::{DType, Named};

use super::groups::GroupLayout;
use super::model::Model;
use super::op::Schedule;
use super::options::Options;
use super::{ddp, fsdp, moe, pp, tp, zero};

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
    /// Megatron mixture of experts with expert parallelism of the
    /// layout's degree (all-to-all token dispatch).
    Moe,
    /// Megatron pipeline parallelism of the layout's stages (1F1B).
    Pp,
}

impl Strategy {
    pub const ALL: [Strategy; 10] = [
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
        Strategy::Moe,
        Strategy::Pp,
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
            Strategy::Moe => "moe",
            Strategy::Pp => "pp",
        }
    }

    /// Accepts the names and the frameworks' own (`full_shard`,
    /// `shard_grad_op`, `hybrid_shard`, `megatron`). Not `zero3`:
    /// DeepSpeed's stage 3 is not FSDP's schedule (`Strategy::refused`).
    pub fn parse(text: &str) -> Option<Strategy> {
        let key: String = text.trim().to_ascii_lowercase().replace('_', "-");
        let alias = match key.as_str() {
            "full-shard" => "fsdp",
            "shard-grad-op" => "fsdp-grad-op",
            "hybrid-shard" => "hsdp",
            "-hybrid-shard-zero2" | "hybrid-shard-zero2" => "hsdp-grad-op",
            "zero-1" => "zero1",
            "zero-2" => "zero2",
            "megatron" | "megatron-tp" => "tp",
            "ep" | "expert-parallel" | "megatron-moe" => "moe",
            "pipeline" | "1f1b" | "megatron-pp" => "pp",
            other => other,
        };
        Strategy::ALL.into_iter().find(|s| s.name() == alias)
    }
}

/// What every schedule leaves out, for the output's header (`not_modelled`
/// words the micro-batch line for a job with pp).
pub const NOT_MODELLED: &[&str] = &[
    "operations run one after another: overlap with compute (and with each other) is not measured",
    "forward, backward and optimizer compute are not measured; the step time is communication only",
    "one micro-batch per step: no gradient accumulation",
    "no sequence parallelism, no activation checkpointing; pipeline parallelism only in the pp strategy, expert parallelism only in moe",
];

/// `NOT_MODELLED` for a job of `strategies`: pp's step is its
/// micro-batches through the pipeline, so where pp runs, the micro-batch
/// line says so.
pub fn not_modelled(strategies: &[Strategy]) -> Vec<&'static str> {
    let pp = strategies.contains(&Strategy::Pp);
    NOT_MODELLED
        .iter()
        .map(|&l| {
            if pp && l == NOT_MODELLED[2] {
                "one micro-batch per step (pp: its micro-batches through the pipeline, --micro-batches, gradients \
                 reduced once after the last): no gradient accumulation over more"
            } else {
                l
            }
        })
        .collect()
}

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
            Strategy::Moe => {
                "Megatron-LM mixture of experts, all-to-all token dispatcher (moe/token_dispatcher.py): per MoE layer a token-count all_gather, dispatch (tokens, probabilities) and combine all-to-alls over the expert-parallel group, reversed in backward; dense gradients over all ranks, expert gradients over the ranks holding the same experts"
            }
            Strategy::Pp => {
                "Megatron-LM pipeline parallelism, 1F1B (pipeline_parallel/schedules.py): activations to the next stage and their gradients to the previous one per micro-batch; each stage's gradients over its data-parallel ranks"
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
            Strategy::Moe => &[
                "tensor parallelism 1; a router's imbalance (--moe-imbalance) pads every rank's block to the busiest, as capacity-factor dispatch sends it; data-parallel buckets use the DDP bucket size",
            ],
            Strategy::Pp => &[
                "every stage transfers at once (a ring: the last stage's send wraps to the first); the largest stage's data-parallel gradients stand for all; no bubble, no interleaving, tied embeddings not reduced",
            ],
        }
    }
}

impl Strategy {
    /// The type the framework reduces gradients in when its parameters
    /// (the compute type) are `param`.
    pub fn reduce_dtype(self, param: DType) -> DType {
        match self {
            // torch.autocast keeps fp32 parameters: their gradients, and
            // DDP's all-reduce of them, are fp32
            Strategy::Ddp => {
                if param == DType::Double {
                    DType::Double
                } else {
                    DType::Float
                }
            }
            // Megatron: bf16 "requires gradient accumulation and all-reduce
            // to be done in fp32" (arguments.py, accumulate_allreduce_grads_in_fp32)
            Strategy::Tp | Strategy::Moe | Strategy::Pp if param == DType::Bfloat16 => DType::Float,
            // DeepSpeed's communication_data_type is the model's type;
            // FSDP's MixedPrecision.reduce_dtype defaults to param_dtype
            _ => param,
        }
    }

    /// Where `reduce_dtype` comes from, in words.
    pub fn reduce_dtype_why(self) -> &'static str {
        match self {
            Strategy::Ddp => {
                "PyTorch DDP all-reduces each parameter's gradient in its type, and under AMP (torch.autocast) parameters stay fp32; --reduce-dtype bfloat16 for a model cast to bf16"
            }
            Strategy::Zero1 | Strategy::Zero2 => {
                "DeepSpeed's communication_data_type defaults to the model's type (engine.py)"
            }
            Strategy::Fsdp { .. } | Strategy::Hsdp { .. } => {
                "FSDP's MixedPrecision.reduce_dtype defaults to param_dtype"
            }
            Strategy::Tp | Strategy::Moe | Strategy::Pp => {
                "Megatron-LM reduces bf16 gradients in fp32 (--accumulate-allreduce-grads-in-fp32, set for --bf16), others in the parameter type"
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

    /// `zero3`: DeepSpeed ZeRO-3 gathers parameters in prefetch buckets
    /// (`stage3_prefetch_bucket_size`), keeps small ones whole
    /// (`stage3_param_persistence_threshold`) and reduce-scatters in
    /// `reduce_bucket_size` buckets: its calls, their count and sizes are
    /// not FSDP's, and it is not modelled.
    fn refused(text: &str) -> Option<String> {
        let key = text.trim().to_ascii_lowercase().replace(['_', '-'], "");
        matches!(key.as_str(), "zero3" | "deepspeedzero3" | "stage3").then(|| {
            format!(
                "strategy '{}': DeepSpeed ZeRO-3 is not modelled (its prefetch buckets, persistent parameters and message sizes are not FSDP's); fsdp is PyTorch FSDP FULL_SHARD, the same sharding with FSDP's schedule",
                text.trim()
            )
        })
    }
}

crate::types::display_by_name!(Strategy);

/// The step of `strategy` for `model` on `layout`.
pub fn schedule(strategy: Strategy, model: &Model, layout: &GroupLayout, opts: &Options) -> Result<Schedule, Error> {
    opts.check()?;
    for (degree, what, owner) in [
        (layout.tp, "tensor-parallel", Strategy::Tp),
        (layout.ep, "expert-parallel", Strategy::Moe),
        (layout.pp, "pipeline-parallel", Strategy::Pp),
    ] {
        if degree > 1 && strategy != owner {
            return Err(Error::usage(format!(
                "a {what} degree of {degree} only applies to the {owner} strategy, not {strategy}"
            )));
        }
    }
    let mut ops = match strategy {
        Strategy::Ddp => ddp::step(model, opts),
        Strategy::Zero1 => zero::step(model, layout, opts, 1),
        Strategy::Zero2 => zero::step(model, layout, opts, 2),
        Strategy::Fsdp { reshard_after_forward } => fsdp::step(model, layout, reshard_after_forward, false),
        Strategy::Hsdp { reshard_after_forward } => fsdp::step(model, layout, reshard_after_forward, true),
        Strategy::Tp => tp::step(model, layout, opts),
        Strategy::Moe => moe::step(model, layout, opts)?,
        Strategy::Pp => pp::step(model, layout, opts)?,
    };
    // a unit without parameters (FSDP's root without a vocabulary) makes
    // no call, as a replayed call of 0 elements is skipped
    ops.retain(|op| op.count > 0);
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
        assert_eq!(Strategy::parse("full_shard").unwrap(), fsdp);
        assert_eq!(Strategy::parse("zero3"), None);
        let err = "ddp,ZeRO-3".parse::<crate::types::Choice<Strategy>>().unwrap_err();
        assert!(
            err.starts_with("strategy 'ZeRO-3': DeepSpeed ZeRO-3 is not modelled"),
            "{err}"
        );
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
        assert_eq!(Strategy::parse("pipeline").unwrap(), Strategy::Pp);
        assert_eq!(Strategy::parse("expert_parallel").unwrap(), Strategy::Moe);
        let err = "ddp,pipelined".parse::<crate::types::Choice<Strategy>>().unwrap_err();
        assert_eq!(
            err,
            "unknown strategy 'pipelined' (expected ddp, zero1, zero2, fsdp, fsdp-grad-op, hsdp, hsdp-grad-op, tp, moe, pp, or all)"
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

    /// Without `--vocab` FSDP's root unit has no parameters: no call for
    /// it (it was a timed all-gather and reduce-scatter of 0 elements).
    #[test]
    fn a_unit_without_parameters_makes_no_call() {
        use crate::workload::model::PlainSpec;
        let spec = |vocab| PlainSpec {
            params: 300_000,
            layers: 2,
            hidden: None,
            vocab,
            experts: None,
            top_k: None,
        };
        let l = GroupLayout::new(2, 2, 1).unwrap();
        for hybrid in [false, true] {
            let strategy = if hybrid {
                Strategy::Hsdp {
                    reshard_after_forward: true,
                }
            } else {
                Strategy::Fsdp {
                    reshard_after_forward: true,
                }
            };
            let bare = schedule(strategy, &Model::plain(spec(None)).unwrap(), &l, &Options::default()).unwrap();
            assert!(
                bare.ops.iter().all(|op| op.count > 0 && op.label != "root"),
                "{:?}",
                bare.ops
            );
            let tied = schedule(
                strategy,
                &Model::plain(spec(Some(1000))).unwrap(),
                &l,
                &Options::default(),
            )
            .unwrap();
            assert!(tied.ops.iter().any(|op| op.label == "root"));
            assert_eq!(tied.ops.len(), bare.ops.len() + if hybrid { 3 } else { 2 });
        }
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
