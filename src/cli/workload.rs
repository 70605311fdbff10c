//! `collbench workload`'s and `collbench replay`'s options; the
//! strategies' knobs are `workload::options::KnobArgs`.

use std::path::PathBuf;

use clap::{ArgAction, Args};
use serde::Serialize;

use crate::types::{Choice, DType, Size};
pub use crate::workload::options::KnobArgs;
use crate::workload::{Count, PresetName, Strategy};

use super::RunArgs;

/// Options of `collbench workload`: what to model, then `run`'s options.
/// Values are typed: a bad one is one line naming the option (`app`).
#[derive(Clone, Debug, Args)]
pub struct WorkloadArgs {
    /// Strategies: ddp, zero1, zero2, fsdp (full_shard), fsdp-grad-op, hsdp, hsdp-grad-op, tp (megatron), moe (expert parallel), pp (pipeline), or all
    #[arg(long, value_name = "LIST", default_value = "ddp", help_heading = "Workload")]
    pub strategy: Choice<Strategy>,

    /// A model preset (gpt2, tinyllama-1.1b, llama-3.2-1b, llama-2-7b, mistral-7b, llama-3-8b, llama-2-70b, llama-3-70b, deepseek-moe-16b, mixtral-8x7b)
    #[arg(long, value_name = "NAME", conflicts_with = "params", help_heading = "Workload")]
    pub model: Option<PresetName>,

    /// The plain form: parameter count (7e9, 7B, 350M), with --layers
    #[arg(long, value_name = "N", requires = "layers", help_heading = "Workload")]
    pub params: Option<Count>,

    /// The plain form: transformer layers
    #[arg(long, value_name = "N", requires = "params", help_heading = "Workload")]
    pub layers: Option<usize>,

    /// The plain form: hidden size [default: from the parameter count]
    #[arg(long, value_name = "N", requires = "params", help_heading = "Workload")]
    pub hidden: Option<Count>,

    /// The plain form: vocabulary (a tied embedding) [default: none]
    #[arg(long, value_name = "N", requires = "params", help_heading = "Workload")]
    pub vocab: Option<Count>,

    /// Parameter element type (all-gathers of FSDP and ZeRO, activations of tp, moe and pp)
    #[arg(long, value_name = "TYPE", default_value = "bfloat16", value_parser = dtype_arg, help_heading = "Workload")]
    pub param_dtype: DType,

    /// The plain form: a mixture of experts, each layer's MLP split into N experts
    #[arg(long, value_name = "N", requires = "params", help_heading = "Workload")]
    pub experts: Option<usize>,

    /// The plain form's experts per token [default: 2]
    #[arg(long, value_name = "K", requires = "experts", help_heading = "Workload")]
    pub top_k: Option<usize>,

    /// Type gradients are reduced in (all-reduces and reduce-scatters of gradients) [default: each framework's: float for DDP under AMP and Megatron with bf16, the parameter type for FSDP and DeepSpeed]
    #[arg(long, visible_alias = "grad-dtype", value_name = "TYPE", value_parser = dtype_arg, help_heading = "Workload")]
    pub reduce_dtype: Option<DType>,

    /// DDP (and the data-parallel gradients of tp, moe and pp) bucket sizes, bytes with binary suffixes; several give a side-by-side view [default: 25M, PyTorch's bucket_cap_mb]
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = ArgAction::Set, value_parser = bucket_size,
          help_heading = "Workload")]
    pub bucket: Vec<Size>,

    /// Tensor-parallel degree of the tp strategy
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Workload")]
    pub tp: u64,

    /// Expert-parallel degree of the moe strategy [default: the most that divide both the ranks and the experts]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Workload")]
    pub ep: Option<u64>,

    /// Pipeline stages of the pp strategy [default: the most that divide both the ranks and the layers]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Workload")]
    pub pp: Option<u64>,

    #[command(flatten)]
    pub knobs: KnobArgs,

    #[command(flatten)]
    pub steps: StepArgs,

    #[command(flatten)]
    pub run: RunArgs,
}

/// One `--bucket` size: at least a byte.
fn bucket_size(text: &str) -> Result<Size, String> {
    match text.parse::<Size>()? {
        Size(0) => Err("--bucket sizes must be at least 1 byte".into()),
        size => Ok(size),
    }
}

/// One element type by name (`--param-dtype`, `--reduce-dtype`).
fn dtype_arg(text: &str) -> Result<DType, String> {
    DType::parse(text).ok_or_else(|| {
        let names: Vec<&str> = DType::ALL.iter().map(|t| t.name()).collect();
        format!("unknown element type '{text}' (known: {})", names.join(", "))
    })
}

/// How many steps a workload or replay runs.
#[derive(Clone, Debug, Args, Serialize)]
pub struct StepArgs {
    /// Timed steps; median and p99 are over them
    #[arg(long, value_name = "N", default_value = "10", value_parser = clap::value_parser!(u32).range(1..=100000), help_heading = "Workload")]
    pub steps: u32,

    /// Untimed steps before the timed ones
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(..=1000), help_heading = "Workload")]
    pub warmup_steps: u32,
}

/// Options of `collbench replay`: the log, then `run`'s options.
#[derive(Clone, Debug, Args)]
pub struct ReplayArgs {
    /// The NCCL debug log (one rank's, or several concatenated)
    #[arg(value_name = "LOG", help_heading = "Replay")]
    pub log: PathBuf,

    /// Whose sequence to replay: the job's rank R [default: the lowest in the log]
    #[arg(long = "rank", value_name = "R", help_heading = "Replay")]
    pub replay_rank: Option<usize>,

    /// Replay a job of more ranks at this launch's size, keeping every call's count
    #[arg(long, help_heading = "Replay")]
    pub rescale: bool,

    /// Operations listed as the top by time
    #[arg(long, value_name = "N", default_value = "10", help_heading = "Replay")]
    pub top: usize,

    /// Only check the log: every communicator's calls across its ranks and every Send's Recv, then the kept rank's sequence; nothing runs (exit 7 when the ranks disagree)
    #[arg(long, help_heading = "Replay")]
    pub check_only: bool,

    #[command(flatten)]
    pub steps: StepArgs,

    #[command(flatten)]
    pub run: RunArgs,
}
