//! `collbench workload`'s and `collbench replay`'s options; the
//! strategies' knobs are `workload::options::KnobArgs`.

use std::path::PathBuf;

use clap::{ArgAction, Args};
use serde::Serialize;

use crate::types::{Choice, DType, Size};
pub use crate::workload::options::KnobArgs;
use crate::workload::{Count, PresetName, Strategy};

use super::groups::{BlockingArgs, CommonArgs, OUTPUT, ProgressArgs, RegisterArgs};

/// Options of `collbench workload`: what to model, the strategies' knobs,
/// the steps, the CSV, then the groups that apply (launch, validation,
/// `--blocking`, registration, overwriting). Values are typed: a bad one
/// is one line naming the option (`app`).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Workload")]
pub struct WorkloadArgs {
    /// Strategies: ddp, zero1, zero2, fsdp (full_shard), fsdp-grad-op, hsdp, hsdp-grad-op, tp (megatron), moe (expert parallel), pp (pipeline), or all
    #[arg(long, value_name = "LIST", default_value = "ddp")]
    pub strategy: Choice<Strategy>,

    /// A model preset (gpt2, tinyllama-1.1b, llama-3.2-1b, llama-2-7b, mistral-7b, llama-3-8b, llama-2-70b, llama-3-70b, deepseek-moe-16b, mixtral-8x7b)
    #[arg(long, value_name = "NAME", conflicts_with = "params")]
    pub model: Option<PresetName>,

    /// The plain form: parameter count (7e9, 7B, 350M), with --layers
    #[arg(long, value_name = "N", requires = "layers")]
    pub params: Option<Count>,

    /// The plain form: transformer layers
    #[arg(long, value_name = "N", requires = "params")]
    pub layers: Option<usize>,

    /// The plain form: hidden size [default: from the parameter count]
    #[arg(long, value_name = "N", requires = "params")]
    pub hidden: Option<Count>,

    /// The plain form: vocabulary (a tied embedding) [default: none]
    #[arg(long, value_name = "N", requires = "params")]
    pub vocab: Option<Count>,

    /// Parameter element type (all-gathers of FSDP and ZeRO, activations of tp, moe and pp)
    #[arg(long, value_name = "TYPE", default_value = "bfloat16", value_parser = dtype_arg)]
    pub param_dtype: DType,

    /// The plain form: a mixture of experts, each layer's MLP split into N experts
    #[arg(long, value_name = "N", requires = "params")]
    pub experts: Option<usize>,

    /// The plain form's experts per token [default: 2]
    #[arg(long, value_name = "K", requires = "experts")]
    pub top_k: Option<usize>,

    /// Type gradients are reduced in (all-reduces and reduce-scatters of gradients) [default: each framework's: float for DDP under AMP and Megatron with bf16, the parameter type for FSDP and DeepSpeed]
    #[arg(long, visible_alias = "grad-dtype", value_name = "TYPE", value_parser = dtype_arg)]
    pub reduce_dtype: Option<DType>,

    /// DDP (and the data-parallel gradients of tp, moe and pp) bucket sizes, bytes with binary suffixes; several give a side-by-side view [default: 25M, PyTorch's bucket_cap_mb]
    #[arg(long, value_name = "LIST", value_delimiter = ',', action = ArgAction::Set, value_parser = bucket_size)]
    pub bucket: Vec<Size>,

    /// Tensor-parallel degree of the tp strategy
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u64).range(1..))]
    pub tp: u64,

    /// Expert-parallel degree of the moe strategy [default: the most that divide both the ranks and the experts]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ep: Option<u64>,

    /// Pipeline stages of the pp strategy [default: the most that divide both the ranks and the layers]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub pp: Option<u64>,

    #[command(flatten)]
    #[serde(flatten)]
    pub knobs: KnobArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub steps: StepArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub run: StepRunArgs,
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
#[command(next_help_heading = "Steps")]
pub struct StepArgs {
    /// Timed steps; median and p99 are over them
    #[arg(long, value_name = "N", default_value = "10", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub steps: u32,

    /// Untimed steps before the timed ones
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u32).range(..=1000))]
    pub warmup_steps: u32,
}

/// Options of `collbench replay`: the log, the steps, the CSV, then the
/// groups that apply (as `collbench workload`'s).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Replay")]
pub struct ReplayArgs {
    /// The NCCL debug log (one rank's, or several concatenated)
    #[arg(value_name = "LOG")]
    pub log: PathBuf,

    /// Whose sequence to replay: the job's rank R [default: the lowest in the log]
    #[arg(long = "rank", value_name = "R")]
    pub replay_rank: Option<usize>,

    /// Replay a job of more ranks at this launch's size, keeping every call's count
    #[arg(long)]
    pub rescale: bool,

    /// Operations listed as the top by time (0: none)
    #[arg(long, value_name = "N", default_value = "10")]
    pub top: usize,

    /// Only check the log: every communicator's calls across its ranks and every Send's Recv, then the kept rank's sequence; nothing runs (exit 7 when the ranks disagree)
    #[arg(long)]
    pub check_only: bool,

    #[command(flatten)]
    #[serde(flatten)]
    pub steps: StepArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub run: StepRunArgs,
}

/// The groups of `run`'s options a workload and a replay take, their CSV
/// and rank 0's progress.
#[derive(Clone, Debug, Args, Serialize)]
pub struct StepRunArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub csv: StepCsvArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub progress: ProgressArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub blocking: BlockingArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub register: RegisterArgs,
}

/// The CSV of a workload or replay (rank 0's).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct StepCsvArgs {
    /// CSV report path: a row per timed step and per operation (docs/workload.md) [default: none]
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,
}
