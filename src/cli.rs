//! Command-line definitions (clap), each option once: its flag, value type,
//! default and help text. Nothing else in the crate imports clap.
//!
//! Values are typed: sizes, lists, switches and names parse and print
//! themselves (`types`), the closed vocabularies are clap value enums (so a
//! bad value gets the allowed ones and a "did you mean"). Everything else
//! derives from these definitions: the `--config` file's keys (`config`
//! reads it as more arguments, checked against the flags here), the
//! cross-rank digest (`RunArgs::digest`), a suite launch's command line
//! (`RunArgs::to_args`) and the option table of docs/options.md
//! (`run_options_markdown`, checked by a test).

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{ArgAction, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use serde::Serialize;

use crate::collective::{Collective, Spread};
use crate::error::Error;
use crate::links::{Level, Metric as LinkMetric};
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::{
    Average, BackendChoice, Choice, DType, Dimension, Format, Metric, ProgressMode, ReduceOp, Register, RootChoice,
    SeriesBy, Size, Source, SplitRule, Switch,
};
use crate::workload::{Count, PresetName, Strategy, TorchVersion};
use crate::world::Launcher;
use crate::world::launch::LauncherChoice;

#[derive(Debug, Parser)]
#[command(
    name = "collbench",
    version,
    about = "Collective-communication benchmark: every collective, every size, verified, in CSV",
    long_about = "collbench measures collective communication the way nccl-tests does \
(same size semantics, same algbw/busbw formulas, out-of-place and in-place), but one \
launch sweeps every collective, verifies every result and writes a CSV row per point.\n\n\
Launch one process per rank (one per GPU) with your MPI launcher (mpirun, srun), or \
run one process with -g N for N GPUs of one node; rank 0 prints the table and writes \
the files. `collbench info` shows the NCCL library, CUDA driver and GPUs found.",
    after_help = "Examples:\n  \
mpirun -np 4 collbench run -b 8 -e 16M -f 2\n  \
mpirun -np 2 collbench run --collectives all_reduce,all_gather -d float,int8 -o all\n  \
mpirun -np 16 -N 8 collbench run --backend nccl -b 8 -e 8G -f 2\n  \
collbench run -g 8 -b 8 -e 8G -f 2     8 GPUs of one node, one thread each, no MPI\n  \
collbench info           NCCL, CUDA driver and GPUs found on this machine\n  \
collbench run --help     every option of a run\n  \
collbench compare base.csv new.csv     regression verdicts (exit 4 on a regression)",
    disable_help_subcommand = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a benchmark sweep (under mpirun/srun, one process per rank; or -g N, one thread per GPU)
    #[command(
        after_help = "Sizes take binary K, M, G, T suffixes (16M = 16777216 bytes). Sizes step by \
-f (multiply) or, when only -i is given, by -i (add). Lists are comma-separated; `all` \
selects every value the backend supports.\n\n\
Examples:\n  \
mpirun -np 4 collbench run --backend mpi -b 8 -e 16M -f 2\n  \
mpirun -np 8 collbench run --collectives all_reduce -d all -o all -n 50 -w 10\n  \
mpirun -np 3 collbench run --collectives broadcast,reduce -r all --csv bcast.csv\n  \
mpirun -np 4 collbench run --config configs/quick.toml -e 1M\n  \
mpirun -np 8 -N 8 collbench run --backend nccl -d float,half,bfloat16 -e 1G\n\n\
Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error, 3 validation failed \
(wrong > 0), 5 timeout, 130/143 stopped by SIGINT/SIGTERM (finished points are kept)."
    )]
    #[command(allow_negative_numbers = true, args_override_self = true)]
    Run(Box<RunArgs>),

    /// Compare two runs row by row (exit 4 on a regression), or the modes inside one run
    #[command(
        after_help = "Rows join on collective, hierarchy, transport, dtype, op, root, placement, \
size_bytes and nranks; every row of a case is a sample of it (the cycles of a launch, the \
launches of a folder: BASE or NEW may be a folder of CSVs). A row regressed when the change \
of the medians is worse than the threshold AND statistically clear (p < alpha): a t-test on \
the launches' medians when a side holds several launches, else the Mann-Whitney U test on the \
samples; with one sample on a side, the threshold alone. Only launches show launch-to-launch \
noise: with one launch on each side, a change beyond the threshold is \"unproven\" and fails \
nothing unless --within-launch. Rows whose noise (half the width of the change's interval) \
exceeds the threshold are too noisy to judge. Rows only in BASE fail \
unless --allow-missing. Sides measured differently (timing, average, iteration policy, -m, \
-G, -R, rotation, backend) are refused unless --allow-method-change. Details: docs/ci.md.\n\n\
Examples:\n  \
collbench compare results/baselines/local-2ranks/ results/new.csv\n  \
collbench compare --within-launch one-launch.csv another-launch.csv\n  \
collbench compare --metric time --threshold 10 --format markdown base.csv new.csv\n  \
collbench compare --export-markdown summary.md base/ new.csv\n  \
collbench compare --by hierarchy results/sweep.csv\n\n\
Exit codes: 0 no regression, 2 unreadable or incompatible input (or a method change), \
4 a regression or rows of BASE missing from NEW."
    )]
    #[command(allow_negative_numbers = true, args_override_self = true)]
    Compare(CompareArgs),

    /// Plot a metric against size from one or more CSV reports (SVG or PNG)
    #[command(
        after_help = "One line per series: rows are apart whenever their file, run, backend, \
transport, hierarchy mode or rank count differ; the samples of one point (--cycles) are drawn as \
their median with their range shaded. Lines are named by what differs between them, led by the \
run's label (run --label, or plot --label per file).\n\n\
Examples:\n  \
collbench plot results/a.csv results/b.csv --label before --label after -o busbw.svg\n  \
collbench plot results/sweep.csv --metric time --title 'all_reduce modes' -o time.png"
    )]
    #[command(args_override_self = true)]
    Plot(PlotArgs),

    /// Convert nccl-tests or OSU micro-benchmark output into a collbench CSV
    #[command(after_help = "nccl-tests: the text output of any *_perf binary (2.13 and later, \
with or without timestamps or per-iteration columns) or its -J JSON file. OSU: the output of \
osu_allreduce, osu_allgather, osu_alltoall, osu_bcast, osu_reduce, osu_reduce_scatter, \
osu_gather or osu_scatter, with or without -f. collbench: the table `collbench run` prints \
(a job log whose CSV was lost). Bandwidths are recomputed with collbench's \
formulas; OSU's per-rank sizes become totals.\n\n\
Examples:\n  \
collbench import --from nccl-tests all_reduce.log -o old.csv\n  \
collbench import --from osu --nranks 16 osu_allreduce.txt -o osu.csv")]
    #[command(args_override_self = true)]
    Import(ImportArgs),

    /// Show what this machine offers: NCCL library and version, CUDA driver, GPUs, MPI
    #[command(
        after_help = "Runs without MPI and without a GPU; every line says what was found or why not.\n\n\
Examples:\n  \
collbench info\n  \
collbench info --nccl-lib /opt/nccl/lib/libnccl.so.2"
    )]
    #[command(args_override_self = true)]
    Info(InfoArgs),
    /// Show this machine's GPUs, GPU-GPU and GPU-NIC links, NICs, CPUs and NUMA nodes
    #[command(after_help = "GPUs and links come from NVML (loaded at run time), else from \
`nvidia-smi topo -m`; CPUs, NUMA nodes and network interfaces from /proc and /sys. Link \
classes: NV# bonded NVLinks, PIX one PCIe switch, PXB several, PHB through the CPU's host \
bridge, NODE between host bridges of a NUMA node, SYS across NUMA nodes.\n\n\
Examples:\n  \
collbench topo\n  \
collbench topo --json > node.json")]
    #[command(args_override_self = true)]
    Topo(TopoArgs),

    /// Run a suite: one launch per transport profile and hierarchy setting, merged into one CSV
    #[command(after_help = "The suite file lists the profiles and hierarchy settings, the rank \
count and the options of every run (a [run] table with the keys of `collbench run --config`). \
Each combination is one `mpirun` (or `srun` inside a Slurm allocation) of this binary; a failed \
launch is reported and the others go on. Per-launch CSVs and logs go to a folder beside the \
merged CSV.\n\n\
Examples:\n  \
collbench suite configs/suite-local-cpu.toml\n  \
collbench suite configs/suite-ci.toml --output results/ci.csv --overwrite\n\n\
Exit codes: 0 every launch succeeded, 2 a bad suite file, otherwise the highest exit code of \
a failed launch (1 runtime, 3 validation, 5 timeout, ...).")]
    #[command(args_override_self = true)]
    Suite(SuiteArgs),

    /// Measure a training step's communication: DDP, ZeRO, FSDP/HSDP and tensor-parallel schedules of a model
    #[command(after_help = "Each strategy's step is the ordered collectives its framework issues \
(docs/workload.md says what each follows and leaves out), run on the groups it needs (node, \
tensor-parallel, data-parallel), every collective validated once, then --steps steps timed op by \
op (operations run one after another: overlap with compute is not measured). Output: per \
strategy and bucket size, step time (median, p99), the bytes each rank moves from first \
principles, effective bus bandwidth, breakdowns by collective and message size, and a \
side-by-side view with each one's ratio to the best. Of `run`'s options, the backend, \
checking (-c), --blocking, --timeout, --ranks-per-node, --transport, --csv, --overwrite and \
--label apply; the others are refused.\n\n\
Examples:\n  \
mpirun -np 4 collbench workload --model llama-3.2-1b --strategy ddp,fsdp\n  \
mpirun -np 8 collbench workload --params 7e9 --layers 32 --strategy ddp --bucket 1M,4M,25M\n  \
mpirun -np 8 collbench workload --model gpt2 --strategy tp --tp 2 --csv tp.csv\n  \
mpirun -np 8 collbench workload --model llama-3-8b --strategy hsdp --ranks-per-node 4\n\n\
Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error, 3 validation failed.")]
    #[command(args_override_self = true)]
    Workload(Box<WorkloadArgs>),

    /// Replay the collective sequence of a real job from its NCCL debug log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL)
    #[command(
        after_help = "One rank's sequence (--rank, default the lowest) is replayed by every \
rank of this launch on sub-communicators of the same shape as the log's, validated once, then \
timed --steps times; the output lists total and per-operation time and the top operations. A \
log from more ranks than this launch needs --rescale (groups over the whole job span this \
launch, per-call counts are kept). Details: docs/workload.md.\n\n\
Examples:\n  \
mpirun -np 2 collbench replay nccl.log\n  \
mpirun -np 4 collbench replay job.log --rank 3 --rescale --csv replay.csv\n\n\
Exit codes: 0 ok, 1 runtime failure, 2 a log this launch cannot replay (one line says what is \
missing), 3 validation failed."
    )]
    #[command(args_override_self = true)]
    Replay(Box<ReplayArgs>),

    /// Accept or drain: judge every node (and the job) against a hardware profile's sourced thresholds
    #[command(
        after_help = "A profile (configs/profiles/, --list-profiles) names checks: a collective at a size, \
with fail and warn thresholds whose sources it cites. One launch runs the node checks on every node at \
once (each node's ranks on their own sub-communicator), then the whole-job checks; each is judged from \
repeated samples, never retried until it passes: pass, warn, flaky (the threshold inside the 95% interval \
of the median) or fail, with the value, the threshold, the margin and the source. Each node's first rank \
writes its verdict as JSON and in Prometheus' text format (node_exporter's textfile collector); rank 0 \
writes every sample as a JSON line. Details: docs/check.md.\n\n\
Examples:\n  \
collbench check --list-profiles\n  \
mpirun -np 2 collbench check --profile local-cpu\n  \
mpirun -np 16 -N 8 collbench check --profile azure-nd-h100-v5 --prometheus /var/lib/node_exporter/collbench.prom\n  \
srun -N 2 --ntasks-per-node=8 collbench check --profile gcp-a3-ultragpu \\\n      \
--on-fail 'scontrol update NodeName={host} State=drain Reason=\"{reason}\"' --execute\n  \
mpirun -np 8 collbench check --profile my.toml --only node-all-reduce --duration 1h\n\n\
Exit codes: 0 every check passed (warnings too, unless --strict), 6 a check failed or was flaky, 1 runtime \
failure, 2 usage or a profile the launch cannot run (one line naming the file and line), 5 timeout, \
130/143 stopped (the samples taken are judged and kept)."
    )]
    #[command(allow_negative_numbers = true, args_override_self = true)]
    Check(Box<CheckArgs>),
    /// Measure every pair of nodes or ranks (bandwidth both ways, latency) and find the bad node, GPU or link
    #[command(after_help = "Pairs run in rounds of disjoint pairs, all of a round at once (the \
circle method: n-1 rounds of n/2 pairs); per pair, unidirectional and bidirectional bandwidth at \
--size and a ping-pong's latency at --latency-size, each from --samples samples of -n operations, \
what was received checked. --level node pairs one rank per node (nodes are hosts, or \
--ranks-per-node groups), rank every rank, rail the ranks with the same local index on different \
nodes. --find judges each pair against comparable pairs, re-tests every suspect against \
known-good partners and names the node, GPU or link, or the host that only all-reduces show \
(docs/links.md: the rule, the verdicts, what they cannot see, the pairs CSV). Of `run`'s \
options, the backend, -n, -w, -c, --timeout, --ranks-per-node, --transport, -g, --nccl-lib, \
--launcher, --csv, --json, --overwrite and --label apply; the others are refused.\n\n\
Examples:\n  \
mpirun -np 4 --map-by node --hostfile hosts collbench links --find\n  \
mpirun -np 16 -N 8 collbench links --level rank --heatmap links.png\n  \
srun -N 64 --ntasks-per-node=8 --mpi=pmix collbench links --level rail --find --json links.json\n  \
mpirun --oversubscribe -np 4 collbench links --ranks-per-node 1 --size 1M --find   4 virtual nodes on one machine\n\n\
Exit codes: 0 measured (with or without suspects: the report and the JSON name them), 1 runtime \
failure, 2 usage or configuration error, 3 validation failed, 5 timeout.")]
    #[command(args_override_self = true)]
    Links(Box<LinksArgs>),

    /// Print this message or the help of the given subcommand
    Help(HelpArgs),
}

/// Options of `collbench check`: the profile, the verdicts' files and
/// hooks, then `run`'s options that apply (backend, launcher, transport,
/// timeout, nodes, `-N/--repeat` as the sample count).
#[derive(Clone, Debug, Args)]
pub struct CheckArgs {
    /// The profile: a shipped name (--list-profiles) or a TOML file
    #[arg(long, value_name = "NAME|FILE", required_unless_present_any = ["list_profiles", "show_profile"],
          help_heading = "Check")]
    pub profile: Option<String>,

    /// List the shipped profiles and exit
    #[arg(long, help_heading = "Check")]
    pub list_profiles: bool,

    /// Print a profile's checks, thresholds and their sources, and exit
    #[arg(long, value_name = "NAME|FILE", help_heading = "Check")]
    pub show_profile: Option<String>,

    /// Run only these checks of the profile (comma-separated names)
    #[arg(long, value_name = "LIST", value_delimiter = ',', help_heading = "Check")]
    pub only: Vec<String>,

    /// A warning fails the run too
    #[arg(long, help_heading = "Check")]
    pub strict: bool,

    /// A command run once per failing node by rank 0, {host}, {checks} and {reason} replaced (printed only, unless --execute)
    #[arg(long, value_name = "CMD", help_heading = "Check")]
    pub on_fail: Option<String>,

    /// Run the --on-fail command instead of printing it
    #[arg(long, requires = "on_fail", help_heading = "Check")]
    pub execute: bool,

    /// Soak: keep sampling one check this long (90s, 30m, 1h), then plot its stability (--repeat 0: until stopped)
    #[arg(long, value_name = "DURATION", value_parser = soak_duration, help_heading = "Check")]
    pub duration: Option<std::time::Duration>,

    /// A fleet baseline for the profile's baseline rules (--write-baseline makes one)
    #[arg(long, value_name = "FILE", help_heading = "Check")]
    pub baseline: Option<PathBuf>,

    /// Write each check's median over the groups as a fleet baseline
    #[arg(long, value_name = "FILE", help_heading = "Check")]
    pub write_baseline: Option<PathBuf>,

    /// The verdicts' folder: each node's first rank writes HOST.json and HOST.prom there, rank 0 samples.jsonl and check.json [default: results/check-<run id>]
    #[arg(long, value_name = "DIR", help_heading = "Check")]
    pub out: Option<PathBuf>,

    /// Also write each node's Prometheus file here (node_exporter's textfile directory); {host} is replaced
    #[arg(long, value_name = "PATH", help_heading = "Check")]
    pub prometheus: Option<String>,

    /// The soak's stability plot, .svg or .png [default: DIR/stability.svg]
    #[arg(long, value_name = "FILE", help_heading = "Check")]
    pub plot: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// A soak's length: `90s`, `30m`, `1h` (humantime's syntax).
fn soak_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("'{}' is not a duration like 90s, 30m or 1h: {e}", text.trim()))
}

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

/// The strategies' knobs, with the frameworks' defaults: each field is the
/// `workload::Options` field of the same name (`Job::workload` reads them
/// into it through serde), so a knob is one field here and one there.
#[derive(Clone, Debug, Args, Serialize)]
pub struct KnobArgs {
    /// Activations of tp, moe and pp: sequence length (tokens per micro-batch)
    #[arg(long, value_name = "N", default_value = "2048", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Workload")]
    pub seq_len: u64,

    /// Activations of tp, moe and pp: micro-batch size
    #[arg(long, value_name = "N", default_value = "1", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Workload")]
    pub micro_batch: u64,

    /// pp's micro-batches per step [default: as many as stages]
    #[arg(
        long,
        value_name = "N",
        default_value = "0",
        hide_default_value = true,
        help_heading = "Workload"
    )]
    pub micro_batches: u64,

    /// moe's router imbalance: the busiest expert rank's tokens over the mean (1: balanced)
    #[arg(long, value_name = "F", default_value = "1", value_parser = imbalance_arg, help_heading = "Workload")]
    pub moe_imbalance: f64,

    /// The PyTorch release DDP is modelled on (2.3: a 1 MiB first bucket even with --bucket) [default: current, 2.4 and later]
    #[arg(long, value_name = "VERSION", help_heading = "Workload")]
    pub pytorch: Option<TorchVersion>,
}

/// `--moe-imbalance`: a finite factor of at least 1.
fn imbalance_arg(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(f) if f.is_finite() && f >= 1.0 => Ok(f),
        _ => Err("the router's imbalance is a factor of at least 1 (the busiest rank's tokens over the mean)".into()),
    }
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

/// Options of `collbench links`: what to pair and how, then `run`'s
/// options that apply (`LINKS_REFUSED` lists the others).
#[derive(Clone, Debug, Args)]
pub struct LinksArgs {
    /// Who pairs up: node (one rank per node), rank (every rank), rail (the ranks of one local index across nodes, each rail on its own)
    #[arg(
        long,
        value_name = "LEVEL",
        default_value = "node",
        ignore_case = true,
        help_heading = "Links"
    )]
    pub level: Level,

    /// One pair at a time, instead of rounds of disjoint pairs at once: the contention-free reference
    #[arg(long, help_heading = "Links")]
    pub isolated: bool,

    /// Find the bad node, GPU or link: the rule on the matrix, re-tests of each suspect against known-good partners, all-reduce bisection for what only collectives show
    #[arg(long, help_heading = "Links")]
    pub find: bool,

    /// Bandwidth message size, a multiple of 4 bytes [default: 64M on GPUs (nccl), 4M on host memory (mpi)]
    #[arg(long, value_name = "SIZE", help_heading = "Links")]
    pub size: Option<Size>,

    /// Ping-pong message size of the latency, a multiple of 4 bytes
    #[arg(long, value_name = "SIZE", default_value = "8", help_heading = "Links")]
    pub latency_size: Size,

    /// Samples per pair and metric (6 or more give the median's 95% interval, which the finder needs)
    #[arg(long, value_name = "N", default_value = "10", value_parser = clap::value_parser!(u64).range(1..=100000),
          help_heading = "Links")]
    pub samples: u64,

    /// Where hosts sit: a file of `host leaf [rack]` lines (pairs are compared within their class: one host, one leaf, across leaves, across racks)
    #[arg(long, value_name = "FILE", conflicts_with = "host_pattern", help_heading = "Links")]
    pub topology: Option<PathBuf>,

    /// Where hosts sit, from their names: literal text, {leaf}, {rack} and * (gpu-r{rack}-l{leaf}-* places gpu-r2-l07-n13 under leaf 07 of rack 2)
    #[arg(long, value_name = "PATTERN", help_heading = "Links")]
    pub host_pattern: Option<String>,

    /// The metric of the matrix on screen and of the heatmap
    #[arg(
        long,
        value_name = "METRIC",
        default_value = "uni",
        ignore_case = true,
        help_heading = "Links"
    )]
    pub metric: LinkMetric,

    /// Draw the matrix as a heatmap, ordered and grouped by rack, leaf and host (.png or .svg)
    #[arg(long, value_name = "PATH", help_heading = OUTPUT)]
    pub heatmap: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// Options of `collbench help`: clap's own help subcommand takes no
/// options, so `collbench help --help` would be an error.
#[derive(Debug, Args)]
pub struct HelpArgs {
    /// The subcommand whose help to print
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

/// Options of `collbench topo`.
#[derive(Debug, Args)]
pub struct TopoArgs {
    /// Print JSON instead of the table
    #[arg(long)]
    pub json: bool,
}

/// Options of `collbench suite`.
#[derive(Debug, Args)]
pub struct SuiteArgs {
    /// The suite file (TOML)
    #[arg(value_name = "SUITE.toml")]
    pub file: PathBuf,

    /// The merged CSV [default: the file's `output`, else results/suite-<name>-<time>.csv]
    #[arg(short = 'o', long, value_name = "PATH")]
    pub output: Option<PathBuf>,

    /// Replace the merged CSV if it exists
    #[arg(long)]
    pub overwrite: bool,

    /// Launcher: auto (srun inside a Slurm allocation, else mpirun), mpirun or srun [default: the file's, else auto]
    #[arg(long, value_name = "NAME", ignore_case = true)]
    pub launcher: Option<Launcher>,

    /// The collbench binary each launch runs [default: this one]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,

    /// Print the launch commands without running them
    #[arg(long)]
    pub dry_run: bool,

    /// No progress bar
    #[arg(long, overrides_with = "progress")]
    pub no_progress: bool,

    /// Show progress even when stderr is not a terminal: plain lines (every tenth of the points, at least every 30 s) where a bar cannot be drawn
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
}

impl SuiteArgs {
    pub fn progress(&self) -> ProgressMode {
        progress_mode(self.no_progress, self.progress)
    }
}

/// Options of `collbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// BASE (a CSV file or a folder of them) and NEW; with --by, a single CSV
    #[arg(value_name = "CSV", required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,

    /// What to compare
    #[arg(long, value_name = "METRIC", default_value = "busbw", ignore_case = true)]
    pub metric: Metric,

    /// Largest change in percent that is never a regression [default: 5]
    #[arg(long, value_name = "PCT")]
    pub threshold: Option<f64>,

    /// Significance level of the tests; the intervals are at 1 - ALPHA [default: 0.05]
    #[arg(long, value_name = "ALPHA")]
    pub alpha: Option<f64>,

    /// Output format
    #[arg(long, value_name = "FORMAT", default_value = "table", ignore_case = true)]
    pub format: Format,

    /// Compare runs with different rank counts (busbw is meant to compare across them)
    #[arg(long)]
    pub allow_different_ranks: bool,

    /// Compare sides measured differently (timing, average, iteration policy, -m, -G, -R,
    /// rotation, backend), with a warning per column, instead of refusing
    #[arg(long)]
    pub allow_method_change: bool,

    /// Rows of BASE missing from NEW are listed, not a failure
    #[arg(long)]
    pub allow_missing: bool,

    /// With one launch on each side, judge rows by the samples inside the launches (the rank
    /// test, or the threshold alone) as if launches did not vary, so that they may regress (exit
    /// 4); without it such rows are "unproven" and never fail
    #[arg(long)]
    pub within_launch: bool,

    /// Also write the markdown report to FILE (one compare for the terminal and a CI summary)
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,

    /// Also write the JSON report to FILE
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,

    /// Compare the modes inside one CSV instead of two runs
    #[arg(long, value_name = "DIMENSION", ignore_case = true)]
    pub by: Option<Dimension>,

    /// Mode the speedups are relative to [default: flat, or auto, or the first in the file]
    #[arg(long, value_name = "MODE", requires = "by")]
    pub reference: Option<String>,
}

/// Options of `collbench plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// CSV reports to plot
    #[arg(value_name = "CSV", required = true)]
    pub files: Vec<PathBuf>,

    /// Output file; the extension (.svg or .png) picks the format
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: PathBuf,

    /// What to plot against size
    #[arg(long, value_name = "METRIC", default_value = "busbw", ignore_case = true)]
    pub metric: Metric,

    /// Legend name of each CSV file, in the files' order (one per file) [default: the run's `label` column, else what tells the series apart]
    #[arg(long, value_name = "NAME", action = clap::ArgAction::Append, value_parser = one_line_text)]
    pub label: Vec<String>,

    /// The picture's title [default: the metric against message size]
    #[arg(long, value_name = "TEXT", value_parser = one_line_text)]
    pub title: Option<String>,

    /// Accepted for old command lines; lines are always split by run, backend, transport, hierarchy and rank count
    #[arg(long, value_name = "SERIES", ignore_case = true)]
    pub by: Option<SeriesBy>,

    /// Replace the output file if it exists
    #[arg(long)]
    pub overwrite: bool,
}

/// Options of `collbench import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The tool that wrote the files
    #[arg(long, value_name = "TOOL", ignore_case = true)]
    pub from: Source,

    /// Output files of that tool
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// CSV file to write
    #[arg(short = 'o', long, value_name = "OUT.csv")]
    pub output: PathBuf,

    /// The collective, when the file does not name it (e.g. all_reduce)
    #[arg(long, value_name = "NAME")]
    pub collective: Option<Collective>,

    /// The rank count, when the file does not record it (OSU output never does)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub nranks: Option<u64>,

    /// Replace the output file if it exists
    #[arg(long)]
    pub overwrite: bool,
}

/// Options of `collbench info`.
#[derive(Debug, Default, Args)]
pub struct InfoArgs {
    /// The NCCL library to use (a file, or a folder holding libnccl.so.2)
    #[arg(long, value_name = "PATH")]
    pub nccl_lib: Option<PathBuf>,
}

/// Options of `collbench run`; every one can also come from `--config`
/// (its long name is the key). Field names are clap's ids and the keys of
/// the serialization the digest and `to_args` read.
#[derive(Clone, Debug, Args, Serialize)]
pub struct RunArgs {
    /// Smallest size in bytes
    #[arg(short = 'b', long, value_name = "SIZE", default_value = "8", help_heading = "Sizes")]
    pub minbytes: Size,

    /// Largest size in bytes
    #[arg(
        short = 'e',
        long,
        value_name = "SIZE",
        default_value = "32M",
        help_heading = "Sizes"
    )]
    pub maxbytes: Size,

    /// Multiply the size by N between points [default: 2 unless -i is given]
    #[arg(short = 'f', long, value_name = "N", help_heading = "Sizes")]
    pub stepfactor: Option<u64>,

    /// Add SIZE between points, used when -f is not given or is 1 [default: 1M]
    #[arg(short = 'i', long, value_name = "SIZE", help_heading = "Sizes")]
    pub stepbytes: Option<Size>,

    /// Timed iterations per point, exactly N as nccl-tests [default: until --precision is reached]
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = "Measurement")]
    pub iters: Option<u32>,

    /// Without -n: time each point until the 95% confidence interval of its median batch time is within +-PCT%, or --max-time
    #[arg(long, value_name = "PCT", default_value = "5", value_parser = precision_percent, help_heading = "Measurement")]
    pub precision: f64,

    /// The precision policy's cap: a point's timed batches stop after SECS, precise or not (at least 6 batches)
    #[arg(long, value_name = "SECS", default_value = "0.1", value_parser = seconds_up_to_an_hour, help_heading = "Measurement")]
    pub max_time: f64,

    /// Without -n: time each point for about SECS (5 to 10000 iterations) instead of the precision policy
    #[arg(long, value_name = "SECS", value_parser = seconds_up_to_an_hour, help_heading = "Measurement")]
    pub min_time: Option<f64>,

    /// Time every iteration: p50, p99, CV and the slowest rank (duration) per point, and a slow-rank verdict (arrival skew at the checks)
    #[arg(short = 'I', long, help_heading = "Measurement")]
    pub per_iter: bool,

    /// With -I: a rank is late at a point when its own part of the check takes this many percent longer than the other ranks' median; one late significantly often is named
    #[arg(long, value_name = "PCT", default_value = "10", value_parser = percent, help_heading = "Measurement")]
    pub straggler_threshold: f64,

    /// Shift each operation one point-size further through buffers of the largest size, as nccl-tests does (the default on nccl)
    #[arg(long, overrides_with = "no_rotate", help_heading = "Measurement")]
    pub rotate: bool,

    /// Reuse one buffer for every operation of a point, as OSU and IMB do (the default on mpi)
    #[arg(long, overrides_with = "rotate", help_heading = "Measurement")]
    pub no_rotate: bool,

    /// Operations per timed iteration, issued as one NCCL group (nccl-tests' -m; nccl backend)
    #[arg(short = 'm', long, alias = "agg_iters", value_name = "N", default_value = "1",
          value_parser = clap::value_parser!(u32).range(1..), help_heading = "Measurement")]
    pub agg_iters: u32,

    /// Capture the timed iterations in a CUDA graph and replay it N times; 0 is off (nccl backend, NCCL 2.9+)
    #[arg(
        short = 'G',
        long,
        alias = "cudagraph",
        value_name = "N",
        default_value = "0",
        help_heading = "Measurement"
    )]
    pub cuda_graph: u32,

    /// Register the buffers (nccl backend): 1 with ncclCommRegister where the library has it, 2 as symmetric windows (ncclCommWindowRegister, NCCL 2.27+); `-R 0` turns it off
    #[arg(short = 'R', long, value_name = "0|1|2", num_args = 0..=1, default_value = "0", default_missing_value = "1",
          value_parser = register_mode, help_heading = "Measurement")]
    pub register: Register,

    /// Untimed warm-up iterations per point
    #[arg(
        short = 'w',
        long,
        alias = "warmup_iters",
        value_name = "N",
        default_value = "5",
        help_heading = "Measurement"
    )]
    pub warmup: u32,

    /// Validation iterations per point; 0 turns checking off
    #[arg(
        short = 'c',
        long,
        value_name = "N",
        default_value = "1",
        help_heading = "Measurement"
    )]
    pub check: u32,

    /// Cross-rank time reduction (nccl-tests' 0..3 name the same four)
    #[arg(
        short = 'a',
        long,
        value_name = "MODE",
        default_value = "avg",
        ignore_case = true,
        help_heading = "Measurement"
    )]
    pub average: Average,

    /// Time each operation alone, with a barrier between (OSU's method); `-z 0` turns it off
    #[arg(short = 'z', long, value_name = "0|1", num_args = 0..=1, default_value = "0", default_missing_value = "1",
          help_heading = "Measurement")]
    pub blocking: Switch,

    /// Samples of every point: the whole sweep runs N times, interleaved (nccl-tests' -N/--cycles); 0 repeats until stopped
    #[arg(
        short = 'N',
        long = "repeat",
        visible_alias = "cycles",
        alias = "run_cycles",
        value_name = "N",
        default_value = "1",
        help_heading = "Measurement"
    )]
    pub cycles: u64,

    /// End the job (exit 5) when one point, or the set-up, runs longer than SECS; 0 turns it off
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = clap::value_parser!(u64).range(..=MAX_TIMEOUT_S),
          help_heading = "Measurement")]
    pub timeout: u64,

    /// Collectives to run: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, alltoallv, gather, scatter, sendrecv, or all
    #[arg(long, value_name = "LIST", default_value = "all", help_heading = "What to run")]
    pub collectives: Choice<Collective>,

    /// Element types: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, or all
    #[arg(
        short = 'd',
        long,
        alias = "datatype",
        value_name = "LIST",
        default_value = "float",
        help_heading = "What to run"
    )]
    pub dtype: Choice<DType>,

    /// Reduction operations: sum, prod, min, max, avg, or all
    #[arg(
        short = 'o',
        long,
        value_name = "LIST",
        default_value = "sum",
        help_heading = "What to run"
    )]
    pub op: Choice<ReduceOp>,

    /// Root rank of broadcast, reduce, gather and scatter, or all
    #[arg(
        short = 'r',
        long,
        value_name = "RANK",
        default_value = "0",
        help_heading = "What to run"
    )]
    pub root: RootChoice,

    /// alltoallv's generated traffic (nccl-tests' NCCL_TESTS_ALLTOALLV_SPREAD): 0 sends every peer the same, 1 weights each peer by its distance (none to itself); every rank sends the same total
    #[arg(
        long,
        value_name = "0..1",
        env = "NCCL_TESTS_ALLTOALLV_SPREAD",
        default_value = "1",
        help_heading = "What to run"
    )]
    pub alltoallv_spread: Spread,

    /// alltoallv's traffic from a file instead (nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_FILE): a square matrix, row i column j the bytes rank i sends rank j; one size, -b equal to -e
    #[arg(
        long,
        value_name = "FILE",
        env = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE",
        help_heading = "What to run"
    )]
    pub alltoallv_matrix: Option<PathBuf>,

    /// Every cell of --alltoallv-matrix times X (nccl-tests' NCCL_TESTS_ALLTOALLV_MATRIX_SCALE)
    #[arg(long, value_name = "X", env = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE", default_value = "1",
          value_parser = non_negative, help_heading = "What to run")]
    pub alltoallv_matrix_scale: f64,

    /// Parallel groups (nccl-tests' NCCL_TESTS_SPLIT): ranks whose world rank gives the same colour under AND, OR, MOD or DIV of a value ('MOD 2', 'AND 0x7') run the sweep together, every group at once; a row per group and one for all
    #[arg(long, value_name = "RULE", env = "NCCL_TESTS_SPLIT", help_heading = "What to run")]
    pub split: Option<SplitRule>,

    /// --split AND of this hexadecimal mask (nccl-tests' NCCL_TESTS_SPLIT_MASK)
    #[arg(long, value_name = "HEX", env = "NCCL_TESTS_SPLIT_MASK", value_parser = SplitRule::mask,
          help_heading = "What to run")]
    pub split_mask: Option<SplitRule>,

    /// All-reduce organisation: flat, rs-ar-ag, reduce-bcast, or all; other collectives always run flat
    #[arg(long, value_name = "LIST", default_value = "flat", help_heading = "Hierarchy")]
    pub hierarchy: Choice<Hierarchy>,

    /// Treat every K consecutive ranks as one node (virtual nodes) instead of the ranks sharing a host
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..), help_heading = "Hierarchy")]
    pub ranks_per_node: Option<u64>,

    /// Add the time of each hierarchical phase (intra, inter, intra) to the CSV
    #[arg(long, help_heading = "Hierarchy")]
    pub phase_times: bool,

    /// Data plane; auto is nccl when every rank has a GPU and libnccl, else mpi
    #[arg(
        long,
        value_name = "NAME",
        default_value = "auto",
        ignore_case = true,
        help_heading = "What to run"
    )]
    pub backend: BackendChoice,

    /// How the ranks find each other: auto (from the environment), mpi (mpirun, srun --mpi=pmix), or without MPI: slurm (srun --mpi=none), torchrun, k8s (an Indexed Job), whose ranks meet at a TCP store on rank 0 (docs/launch.md)
    #[arg(
        long,
        value_name = "NAME",
        default_value = "auto",
        ignore_case = true,
        help_heading = "What to run"
    )]
    pub launcher: LauncherChoice,

    /// Run N ranks as threads of this one process, one GPU each (no MPI needed; nccl backend)
    #[arg(short = 'g', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), help_heading = "What to run")]
    pub ngpus: Option<u64>,

    /// The NCCL library to use, a file or a folder [default: COLLBENCH_NCCL_LIB, NCCL_HOME/lib, the loader's search, Python site-packages]
    #[arg(long, value_name = "PATH", help_heading = "What to run")]
    pub nccl_lib: Option<PathBuf>,

    /// Transport profile: auto, nvlink, nvls, pcie, ib, socket (nccl); shm, tcp, ucx (mpi); `help` lists the variables each sets
    #[arg(long, value_name = "PROFILE", default_value = "auto", help_heading = "What to run")]
    pub transport: TransportArg,

    /// CSV report path [default: results/<run id>.csv]
    #[arg(long, value_name = "PATH", help_heading = OUTPUT)]
    pub csv: Option<PathBuf>,

    /// Also write a JSON report (records plus the run's configuration)
    #[arg(long, value_name = "PATH", help_heading = OUTPUT)]
    pub json: Option<PathBuf>,

    /// A timestamp (%Y-%m-%d %H:%M:%S, UTC) at the end of every table row, as nccl-tests' -S; `-S 0` turns it off
    #[arg(short = 'S', long, value_name = "0|1", num_args = 0..=1, default_value = "0", default_missing_value = "1",
          help_heading = OUTPUT)]
    pub timestamps: Switch,

    /// The schema of --json: collbench (ours), or nccl-tests-json (the file nccl-tests' -J writes, which its tools/analyze_perf_json.py reads)
    #[arg(long, value_name = "FORMAT", default_value = "collbench",
          value_parser = ["collbench", "nccl-tests-json"], help_heading = OUTPUT)]
    pub output_format: String,

    /// Replace output files that already exist instead of refusing
    #[arg(long, help_heading = OUTPUT)]
    pub overwrite: bool,

    /// No progress bar
    #[arg(long, overrides_with = "progress", help_heading = OUTPUT)]
    pub no_progress: bool,

    /// Show progress even where a bar cannot be drawn (stderr not a terminal, or under mpirun/srun): plain lines on stderr, one per tenth of the points and at least every 30 s, with points done, elapsed and time left
    #[arg(long, overrides_with = "no_progress", help_heading = OUTPUT)]
    pub progress: bool,

    /// A name for this run, in the table header, the CSV's `label` column and the JSON
    #[arg(long, value_name = "TEXT", value_parser = one_line_text, help_heading = OUTPUT)]
    pub label: Option<String>,

    /// Read options from a TOML file whose keys are the long option names; command-line options win
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Test-only: after each check, every rank with an output corrupts its first received element
    #[arg(long, hide = true)]
    pub inject_error: bool,

    /// Test-only: each rank writes the NCCL unique ids it received to DIR/rank-R.id
    #[arg(long, hide = true, value_name = "DIR")]
    pub trace_bootstrap: Option<PathBuf>,

    /// Test-only: make the hierarchical sub-communicators from broadcast unique ids even where ncclCommSplit exists
    #[arg(long, hide = true)]
    pub no_comm_split: bool,
}

/// The help heading of the options that only say where rank 0 puts its
/// reports: they are left out of the cross-rank digest.
pub const OUTPUT: &str = "Output";

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
fn one_line_text(text: &str) -> Result<String, String> {
    if text.trim().is_empty() {
        return Err("the text is empty".into());
    }
    if text.chars().any(char::is_control) {
        return Err("the text must be one line, without control characters".into());
    }
    Ok(text.to_string())
}

/// `-R 0|1|2`, as nccl-tests' `--local_register`.
fn register_mode(text: &str) -> Result<Register, String> {
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

/// Closed vocabularies as clap value enums: clap lists the allowed names
/// in help and errors and suggests the nearest one. Each type keeps its
/// names (and aliases) itself.
macro_rules! value_enum {
    ($t:ty, $all:expr, $aliases:expr) => {
        impl ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                &$all
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                let aliases: fn($t) -> &'static [&'static str] = $aliases;
                Some(PossibleValue::new(self.name()).aliases(aliases(*self).iter().copied()))
            }
        }
    };
}

value_enum!(Average, Average::ALL, Average::aliases);
value_enum!(BackendChoice, BackendChoice::ALL, |_| &[]);
value_enum!(Metric, Metric::ALL, Metric::aliases);
value_enum!(Format, Format::ALL, Format::aliases);
value_enum!(Dimension, Dimension::ALL, |_| &[]);
value_enum!(SeriesBy, SeriesBy::ALL, |_| &[]);
value_enum!(Source, Source::ALL, Source::aliases);
value_enum!(Launcher, Launcher::ALL, |_| &[]);
value_enum!(LauncherChoice, LauncherChoice::ALL, |_| &[]);
value_enum!(Level, Level::ALL, |_| &[]);
value_enum!(LinkMetric, LinkMetric::ALL, |_| &[]);

/// `run`'s options that mean nothing for a step of `workload` or `replay`,
/// by clap id, each with what to use instead where there is something:
/// the one list both the refusal (`RunArgs::step_refusal`) and the help
/// (hidden there, so it lists only what applies) come from.
pub const STEP_REFUSED: [(&str, &str); 30] = [
    ("minbytes", ""),
    ("maxbytes", ""),
    ("stepfactor", ""),
    ("stepbytes", ""),
    ("iters", "use --steps"),
    ("min_time", ""),
    ("precision", ""),
    ("max_time", ""),
    ("per_iter", ""),
    ("agg_iters", ""),
    ("cuda_graph", ""),
    ("warmup", "use --warmup-steps"),
    ("cycles", "use --steps"),
    ("collectives", ""),
    ("dtype", "use --param-dtype, --grad-dtype"),
    ("op", ""),
    ("root", ""),
    ("hierarchy", ""),
    ("alltoallv_spread", ""),
    ("alltoallv_matrix", ""),
    ("alltoallv_matrix_scale", ""),
    ("split", ""),
    ("split_mask", ""),
    ("average", "times are the slowest rank's"),
    ("json", ""),
    ("output_format", ""),
    ("timestamps", ""),
    ("rotate", ""),
    ("phase_times", ""),
    ("config", ""),
];

/// `run`'s options that mean nothing for `collbench links`, by clap id,
/// with what to use instead where there is something: the refusal
/// (`RunArgs::refusal`) and the help (hidden there) come from it.
pub const LINKS_REFUSED: [(&str, &str); 26] = [
    ("minbytes", "use --size"),
    ("maxbytes", "use --size"),
    ("stepfactor", ""),
    ("stepbytes", ""),
    ("min_time", "use -n"),
    ("precision", "use -n and --samples"),
    ("max_time", ""),
    ("per_iter", ""),
    ("straggler_threshold", ""),
    ("rotate", ""),
    ("agg_iters", ""),
    ("cuda_graph", ""),
    ("register", ""),
    ("average", "a pair's time is its slower end's"),
    ("blocking", ""),
    ("cycles", "use --samples"),
    ("collectives", ""),
    ("dtype", ""),
    ("op", ""),
    ("root", ""),
    ("hierarchy", ""),
    ("phase_times", ""),
    ("no_progress", ""),
    ("progress", ""),
    ("config", ""),
    ("no_rotate", ""),
];

/// `run`'s options that mean nothing for `collbench check` (the profile
/// says what to measure and how often), each with what to use instead.
pub const CHECK_REFUSED: [(&str, &str); 26] = [
    ("minbytes", "the profile sets each check's size"),
    ("maxbytes", "the profile sets each check's size"),
    ("stepfactor", ""),
    ("stepbytes", ""),
    ("iters", "the profile sets each check's iterations"),
    ("min_time", ""),
    ("precision", ""),
    ("max_time", ""),
    ("per_iter", ""),
    ("straggler_threshold", ""),
    ("agg_iters", ""),
    ("cuda_graph", ""),
    ("warmup", "the profile sets each check's warm-up"),
    (
        "collectives",
        "the profile names each check's collective; --only picks checks",
    ),
    ("dtype", ""),
    ("op", ""),
    ("root", ""),
    ("hierarchy", ""),
    ("average", "a group's time is its ranks' mean, as nccl-tests'"),
    ("blocking", ""),
    ("csv", "use --out"),
    ("json", "use --out"),
    ("rotate", ""),
    ("phase_times", ""),
    ("label", ""),
    ("config", ""),
];

/// The whole command line, with `workload` and `replay` showing only the
/// options of `run` that apply to them.
pub fn cli_command() -> clap::Command {
    let hide = |mut c: clap::Command| {
        // --straggler-threshold needs -I, --no-rotate is the only layout
        for id in STEP_REFUSED
            .iter()
            .map(|(id, _)| *id)
            .chain(["straggler_threshold", "no_rotate"])
        {
            c = c.mut_arg(id, |a| a.hide(true));
        }
        c.mut_arg("csv", |a| {
            a.help("CSV report path: a row per timed step and per operation (docs/workload.md) [default: none]")
                .hide_default_value(true)
        })
    };
    let hide_for_check = |mut c: clap::Command| {
        for id in CHECK_REFUSED.iter().map(|(id, _)| *id).chain(["no_rotate"]) {
            c = c.mut_arg(id, |a| a.hide(true));
        }
        c.mut_arg("cycles", |a| {
            a.help("Samples of each check, in place of the profile's; 0 samples one check until stopped (a soak)")
        })
    };
    let links = |mut c: clap::Command| {
        for (id, _) in LINKS_REFUSED {
            c = c.mut_arg(id, |a| a.hide(true));
        }
        c.mut_arg("csv", |a| {
            a.help("Pairs CSV path: a row per measured pair, written as each round ends (docs/links.md) [default: results/links-<run id>.csv]")
        })
        .mut_arg("json", |a| {
            a.help("Also write a JSON report: the probe, the endpoints, every pair, the rule's suspects and the finder's report")
        })
        .mut_arg("iters", |a| {
            a.help("Operations timed back to back in one sample (its value is their mean) [default: 20]")
        })
        .mut_arg("warmup", |a| a.help("Untimed operations before a pair's first sample of each metric"))
        .mut_arg("check", |a| {
            a.help("Validated exchanges per pair (both directions, every received element compared); 0 turns checking off")
        })
        .mut_arg("timeout", |a| {
            a.help("End the job (exit 5) when one round, or the set-up, runs longer than SECS; 0 turns it off")
        })
        .mut_arg("ranks_per_node", |a| {
            a.help("Treat every K consecutive ranks as one node (virtual nodes) instead of the ranks sharing a host")
        })
    };
    Cli::command()
        .mut_subcommand("workload", hide)
        .mut_subcommand("replay", hide)
        .mut_subcommand("check", hide_for_check)
        .mut_subcommand("links", links)
}

/// Parses a command line (the program name first) with `cli_command`.
pub fn parse_cli<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let matches = cli_command().try_get_matches_from(argv)?;
    Cli::from_arg_matches(&matches)
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
    let matches = run_command().try_get_matches_from(argv)?;
    RunArgs::from_arg_matches(&matches)
}

/// A bad value of a `workload` or `replay` option (the `subcommand`) as
/// one line naming the option, as their other refusals are: `--bucket
/// lots: ...`, or the value parser's message where it names the option
/// itself. `None` for any other error, which clap prints in full.
pub fn step_value_error(e: &clap::Error, subcommand: Option<&str>) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    if !matches!(subcommand, Some("workload" | "replay")) || e.kind() != ErrorKind::ValueValidation {
        return None;
    }
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = arg.split_whitespace().next()?;
    let why = std::error::Error::source(e)?.to_string();
    if why.starts_with(flag) {
        return Some(why);
    }
    let value = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) => v.as_str(),
        _ => "",
    };
    Some(format!("{flag} {value}: {why}"))
}

/// A clap error as one line: its message, the allowed values and the tip,
/// without the usage and the help pointer (for config files and suites,
/// whose errors name their line or table instead).
pub fn one_line(e: &clap::Error) -> String {
    let text = e.render().to_string();
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more information"))
        .collect();
    let joined = parts.join("; ");
    joined.strip_prefix("error: ").unwrap_or(&joined).to_string()
}

/// One option of `collbench run` with its value in a given `RunArgs`.
#[derive(Clone, Debug, PartialEq)]
pub struct OptionValue {
    /// clap's id: the field name.
    pub id: String,
    /// `--maxbytes`.
    pub flag: String,
    /// A flag without a value (`--per-iter`): `value` is "true" or "false".
    pub is_flag: bool,
    pub heading: Option<String>,
    /// The value as it would be typed; `None` when not given and without a
    /// default.
    pub value: Option<String>,
}

impl RunArgs {
    /// Every option at its default.
    pub fn defaults() -> RunArgs {
        match parse_run(std::iter::empty::<String>()) {
            Ok(args) => args,
            // The definitions above give every required value a default;
            // a test parses them.
            Err(e) => panic!("collbench run has an option without a default: {e}"),
        }
    }

    /// Every option, in definition order, with its value here.
    pub fn options(&self) -> Result<Vec<OptionValue>, Error> {
        let values = match serde_json::to_value(self) {
            Ok(serde_json::Value::Object(map)) => map,
            Ok(_) => return Err(Error::runtime("internal error: run options are not a map")),
            Err(e) => return Err(Error::usage(format!("the run's options cannot be written out: {e}"))),
        };
        let command = run_command();
        let mut out = Vec::new();
        for arg in command.get_arguments() {
            let id = arg.get_id().as_str();
            let (Some(long), Some(value)) = (arg.get_long(), values.get(id)) else {
                continue;
            };
            let is_flag = matches!(arg.get_action(), ArgAction::SetTrue);
            let value = match value {
                serde_json::Value::Null => None,
                serde_json::Value::String(s) => Some(s.clone()),
                other => Some(other.to_string()),
            };
            out.push(OptionValue {
                id: id.to_string(),
                flag: format!("--{long}"),
                is_flag,
                heading: arg.get_help_heading().map(str::to_string),
                value,
            });
        }
        Ok(out)
    }

    /// The arguments that give these options over the defaults: only what
    /// differs from them, as `--flag` or `--name=value` (so a value that
    /// starts with `-` stays a value).
    pub fn to_args(&self) -> Result<Vec<String>, Error> {
        let defaults = RunArgs::defaults().options()?;
        let mut args = Vec::new();
        for (o, d) in self.options()?.into_iter().zip(defaults) {
            if o.value == d.value {
                continue;
            }
            match (o.is_flag, o.value) {
                (true, Some(v)) if v == "true" => args.push(o.flag),
                (true, _) | (false, None) => {}
                (false, Some(v)) => args.push(format!("{}={v}", o.flag)),
            }
        }
        Ok(args)
    }

    /// What every rank must agree on before the first collective, as
    /// (option, value): every option but the outputs (rank 0's business)
    /// and `--config` (its keys are in the other options already), after
    /// the collbench version.
    pub fn digest(&self) -> Result<Vec<(String, String)>, Error> {
        let mut fields = vec![("collbench version".to_string(), env!("CARGO_PKG_VERSION").to_string())];
        for o in self.options()? {
            if o.heading.as_deref() == Some(OUTPUT) || o.id == "config" {
                continue;
            }
            fields.push((o.flag, o.value.unwrap_or_default()));
        }
        Ok(fields)
    }
}

impl RunArgs {
    /// The first option of `STEP_REFUSED` given a value other than its
    /// default, as a refusal names it: `-n/--iters (use --steps)`.
    pub fn step_refusal(&self) -> Result<Option<String>, Error> {
        self.refusal(&STEP_REFUSED)
    }

    /// The first option of `refused` (clap id, what to use instead) given
    /// a value other than its default, as a refusal names it.
    pub fn refusal(&self, refused: &[(&str, &str)]) -> Result<Option<String>, Error> {
        let defaults = RunArgs::defaults().options()?;
        let given = self.options()?;
        let command = run_command();
        for &(id, instead) in refused {
            let differs = |o: &&OptionValue| o.id == id && defaults.iter().any(|d| d.id == id && d.value != o.value);
            if !given.iter().any(|o| differs(&o)) {
                continue;
            }
            let arg = command.get_arguments().find(|a| a.get_id() == id);
            let long = arg.and_then(|a| a.get_long()).unwrap_or(id);
            let mut name = match arg.and_then(|a| a.get_short()) {
                Some(c) => format!("-{c}/--{long}"),
                None => format!("--{long}"),
            };
            if !instead.is_empty() {
                name += &format!(" ({instead})");
            }
            return Ok(Some(name));
        }
        Ok(None)
    }
}

/// docs/options.md's reference table of `collbench run` options, from the
/// definitions above: flag and value, default, help text.
pub fn run_options_markdown() -> String {
    let mut out = String::from("| option | default | meaning |\n|---|---|---|\n");
    for arg in run_command().get_arguments() {
        if arg.is_hide_set() || arg.get_long().is_none() || arg.get_id() == "help" {
            continue;
        }
        let switch = matches!(arg.get_action(), ArgAction::SetTrue);
        let mut flag = match arg.get_short() {
            Some(c) => format!("-{c}, --{}", arg.get_long().unwrap_or_default()),
            None => format!("--{}", arg.get_long().unwrap_or_default()),
        };
        if arg.get_action().takes_values() {
            let name = arg
                .get_value_names()
                .and_then(|n| n.first())
                .map(|n| n.to_string())
                .unwrap_or_default();
            let optional = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
            flag += &if optional {
                format!(" [{name}]")
            } else {
                format!(" {name}")
            };
        }
        let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
        let (meaning, stated) = match help.rsplit_once(" [default: ") {
            Some((text, rest)) => (text.to_string(), rest.strip_suffix(']').map(str::to_string)),
            None => (help.clone(), None),
        };
        let values: Vec<String> = arg
            .get_possible_values()
            .iter()
            .map(|v| v.get_name().to_string())
            .collect();
        let meaning = if values.is_empty() || switch {
            meaning
        } else {
            format!("{meaning}; one of {}", values.join(", "))
        };
        let default = match (arg.get_default_values().first(), stated) {
            _ if switch => "off".into(),
            (Some(d), _) => d.to_string_lossy().into_owned(),
            (None, Some(s)) => s,
            (None, None) if !arg.get_action().takes_values() => "off".into(),
            (None, None) => "none".into(),
        };
        let cell = |t: &str| t.replace('|', "\\|").replace('<', "&lt;").replace('>', "&gt;");
        out += &format!("| `{}` | {} | {} |\n", cell(&flag), cell(&default), cell(&meaning));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/options.md's `collbench run` table is generated from the
    /// definitions; `COLLBENCH_BLESS=1` rewrites it.
    #[test]
    fn the_docs_options_table_is_the_one_the_definitions_give() {
        const BEGIN: &str = "<!-- run options: generated from cli::run_options_markdown -->\n";
        const END: &str = "<!-- end of run options -->";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/options.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let (before, rest) = page
            .split_once(BEGIN)
            .expect("docs/options.md has the run options marker");
        let (table, after) = rest.split_once(END).expect("docs/options.md has the end marker");
        let want = run_options_markdown();
        if table != want {
            if std::env::var_os("COLLBENCH_BLESS").is_some() {
                std::fs::write(&path, format!("{before}{BEGIN}{want}{END}{after}")).unwrap();
            } else {
                panic!(
                    "docs/options.md's run option table differs from the clap definitions; \
                     run `COLLBENCH_BLESS=1 cargo test --lib options_table` to regenerate it"
                );
            }
        }
    }

    #[test]
    fn the_command_line_definitions_are_consistent() {
        Cli::command().debug_assert();
        let d = RunArgs::defaults();
        assert_eq!((d.minbytes, d.maxbytes), (Size(8), Size(32 << 20)));
    }

    #[test]
    fn workload_and_replay_help_hide_every_run_option_they_refuse() {
        let cmd = cli_command();
        cmd.clone().debug_assert();
        for sub in ["workload", "replay"] {
            let c = cmd.find_subcommand(sub).unwrap();
            for (id, _) in STEP_REFUSED {
                let arg = c.get_arguments().find(|a| a.get_id() == id);
                assert!(arg.is_some_and(|a| a.is_hide_set()), "{sub} {id}");
            }
            assert!(c.get_arguments().any(|a| a.get_id() == "backend" && !a.is_hide_set()));
        }
    }

    fn workload(args: &[&str]) -> Result<WorkloadArgs, clap::Error> {
        let argv = ["collbench", "workload"].iter().chain(args);
        match parse_cli(argv)?.command {
            Command::Workload(a) => Ok(*a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn workload_values_are_typed_and_bad_ones_are_one_line_naming_the_option() {
        let a = workload(&[
            "--strategy",
            "FULL_SHARD,ddp,ddp",
            "--bucket",
            "1M,4M",
            "--model",
            "GPT-2",
        ])
        .unwrap();
        let fsdp = Strategy::Fsdp {
            reshard_after_forward: true,
        };
        assert_eq!(a.strategy.values(), [fsdp, Strategy::Ddp]);
        assert_eq!(a.bucket, [Size(1 << 20), Size(4 << 20)]);
        assert_eq!(a.model.map(PresetName::name), Some("gpt2"));
        let a = workload(&["--params", "7B", "--layers", "2", "--bucket", "1M", "--bucket", "2M"]).unwrap();
        assert_eq!((a.params, a.bucket), (Some(Count(7_000_000_000)), vec![Size(2 << 20)]));
        let line = |args: &[&str]| step_value_error(&workload(args).unwrap_err(), Some("workload")).unwrap();
        assert!(line(&["--bucket", "lots"]).starts_with("--bucket lots: "));
        assert_eq!(line(&["--bucket", "1M,0"]), "--bucket sizes must be at least 1 byte");
        assert!(line(&["--strategy", "pipelined"]).contains("unknown strategy 'pipelined'"));
        assert!(line(&["--model", "gpt-5"]).starts_with("--model gpt-5: unknown model 'gpt-5'"));
        assert!(line(&["--params", "many", "--layers", "1"]).starts_with("--params many: "));
        // other errors and other commands: clap's own, complete
        let e = workload(&["--strategy"]).unwrap_err();
        assert_eq!(step_value_error(&e, Some("workload")), None);
        let e = parse_run(["-a", "medain"]).unwrap_err();
        assert_eq!(step_value_error(&e, Some("run")), None);
    }

    #[test]
    fn a_step_refuses_run_options_from_one_list() {
        let refusal = |args: &[&str]| workload(args).unwrap().run.step_refusal().unwrap();
        assert_eq!(refusal(&[]), None);
        assert_eq!(refusal(&["-d", "float", "--csv", "x.csv", "-c", "2"]), None);
        assert_eq!(refusal(&["-e", "1M"]).as_deref(), Some("-e/--maxbytes"));
        assert_eq!(refusal(&["-n", "5"]).as_deref(), Some("-n/--iters (use --steps)"));
        assert_eq!(refusal(&["-N", "3"]).as_deref(), Some("-N/--repeat (use --steps)"));
        assert_eq!(refusal(&["--phase-times"]).as_deref(), Some("--phase-times"));
        // the first of the list, whatever the command line's order
        assert_eq!(refusal(&["--rotate", "-b", "16"]).as_deref(), Some("-b/--minbytes"));
    }

    #[test]
    fn repeating_an_option_keeps_the_last_one() {
        let a = parse_run(["-e", "1K", "-e", "1M", "-z", "-z", "0", "--progress", "--no-progress"]).unwrap();
        assert_eq!(a.maxbytes, Size(1 << 20));
        assert!(!a.blocking.on());
        assert!(a.no_progress && !a.progress);
    }

    #[test]
    fn to_args_gives_back_the_same_options() {
        let a = parse_run([
            "-e",
            "64K",
            "-d",
            "float,int8",
            "-z",
            "--hierarchy",
            "rs-ar-ag",
            "--per-iter",
            "--csv=-x.csv",
            "--transport",
            "shm",
        ])
        .unwrap();
        let args = a.to_args().unwrap();
        assert_eq!(
            args,
            [
                "--maxbytes=65536",
                "--per-iter",
                "--blocking=1",
                "--dtype=float,int8",
                "--hierarchy=rs-ar-ag",
                "--transport=shm",
                "--csv=-x.csv"
            ]
        );
        let back = parse_run(&args).unwrap();
        assert_eq!(back.options().unwrap(), a.options().unwrap());
        assert!(RunArgs::defaults().to_args().unwrap().is_empty());
    }

    #[test]
    fn the_digest_covers_every_option_but_the_outputs() {
        let fields = RunArgs::defaults().digest().unwrap();
        assert_eq!(fields[0].0, "collbench version");
        let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
        for kept in [
            "--maxbytes",
            "--transport",
            "--register",
            "--inject-error",
            "--no-comm-split",
        ] {
            assert!(names.contains(&kept), "{kept} missing from {names:?}");
        }
        for left_out in [
            "--csv",
            "--json",
            "--overwrite",
            "--progress",
            "--no-progress",
            "--config",
        ] {
            assert!(!names.contains(&left_out), "{left_out} in {names:?}");
        }
        assert!(fields.contains(&("--maxbytes".to_string(), "33554432".to_string())));
    }

    #[test]
    fn values_are_typed_and_bad_ones_get_clap_s_message() {
        let a = parse_run(["-a", "3", "--backend", "NCCL", "-R"]).unwrap();
        assert_eq!(a.average, Average::Max);
        assert_eq!(a.backend, BackendChoice::Only(crate::types::BackendKind::Nccl));
        assert!(a.register.on());
        let e = parse_run(["-a", "medain"]).unwrap_err().to_string();
        assert!(e.contains("possible values: rank0, avg, min, max"), "{e}");
        let e = parse_run(["--backend", "ncl"]).unwrap_err().to_string();
        assert!(e.contains("nccl"), "{e}");
        assert_eq!(parse_run(["-R", "2"]).unwrap().register, Register::Symmetric);
        let e = parse_run(["-R", "3"]).unwrap_err().to_string();
        assert!(e.contains("not 0, 1 or 2"), "{e}");
    }
}
