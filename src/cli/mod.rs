//! Command-line definitions (clap), each option once: its flag, value type,
//! default and help text. Nothing else in the crate imports clap but the
//! workload strategies' knobs (`workload::options::KnobArgs`, flattened
//! here), defined beside the options they set.
//!
//! Values are typed: sizes, lists, switches and names parse and print
//! themselves (`types`), the closed vocabularies are clap value enums (so a
//! bad value gets the allowed ones and a "did you mean"). Everything else
//! derives from these definitions: the `--config` file's keys (`config`
//! reads it as more arguments, checked against the flags here), the
//! cross-rank digest (`RunArgs::digest`), a suite launch's command line
//! (`RunArgs::to_args`) and the option table of docs/options.md
//! (`run_options_markdown`, checked by a test).
mod check;
mod derived;
mod doctor;
mod env;
mod groups;
mod links;
mod numbers;
mod run;
mod tools;
mod workload;

use clap::builder::PossibleValue;
use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};

use crate::links::{Level, Metric as LinkMetric};
use crate::types::{
    Algo, AlgoRecording, Average, BackendChoice, Dimension, Format, Metric, Named, Proto, SeriesBy, Source,
};
use crate::world::Launcher;
use crate::world::launch::LauncherChoice;

pub use check::CheckArgs;
pub use derived::{OptionValue, digest_of, run_options_markdown};
pub use doctor::DoctorArgs;
pub use env::{ENV_OPTIONS, FromEnv, from_env};
pub use groups::{
    BlockingArgs, CheckingArgs, CommonArgs, HookArgs, LabelArgs, LaunchArgs, OUTPUT, OverwriteArgs, ProgressArgs,
    RegisterArgs, RepeatArgs,
};
pub use links::{LinksArgs, LinksFiles};
pub use run::{
    CaseArgs, HierarchyArgs, MAX_TIMEOUT_S, OutputArgs, RunArgs, SizeArgs, TimingArgs, TransportArg, parse_run,
    progress_mode, run_command,
};
pub use tools::{CompareArgs, HelpArgs, ImportArgs, InfoArgs, PlotArgs, SuiteArgs, TopoArgs};
pub use workload::{KnobArgs, ReplayArgs, StepArgs, StepCsvArgs, StepRunArgs, WorkloadArgs};

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
mpirun -np 8 -N 8 collbench run --backend nccl -d float,half,bfloat16 -e 1G"
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
collbench compare --by hierarchy results/sweep.csv"
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
launch is reported and the others go on, and the suite ends with the highest exit code of its \
launches. Per-launch CSVs and logs go to a folder beside the merged CSV.\n\n\
Examples:\n  \
collbench suite configs/suite-local-cpu.toml\n  \
collbench suite configs/suite-ci.toml --output results/ci.csv --overwrite")]
    #[command(args_override_self = true)]
    Suite(SuiteArgs),

    /// Measure a training step's communication: DDP, ZeRO, FSDP/HSDP and tensor-parallel schedules of a model
    #[command(after_help = "Each strategy's step is the ordered collectives its framework issues \
(docs/workload.md says what each follows and leaves out), run on the groups it needs (node, \
tensor-parallel, data-parallel), every collective validated once, then --steps steps timed op by \
op (operations run one after another: overlap with compute is not measured). Output: per \
strategy and bucket size, step time (median, p99), the bytes each rank moves from first \
principles, effective bus bandwidth, breakdowns by collective and message size, and a \
side-by-side view with each one's ratio to the best. The options below are all it takes: \
sizes, -n, -w and the other sweep options of `run` have no meaning for a step.\n\n\
Examples:\n  \
mpirun -np 4 collbench workload --model llama-3.2-1b --strategy ddp,fsdp\n  \
mpirun -np 8 collbench workload --params 7e9 --layers 32 --strategy ddp --bucket 1M,4M,25M\n  \
mpirun -np 8 collbench workload --model gpt2 --strategy tp --tp 2 --csv tp.csv\n  \
mpirun -np 8 collbench workload --model llama-3-8b --strategy hsdp --ranks-per-node 4")]
    #[command(args_override_self = true)]
    Workload(Box<WorkloadArgs>),

    /// Replay the collective sequence of a real job from its NCCL debug log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,COLL)
    #[command(
        after_help = "One rank's sequence (--rank, default the lowest) is replayed by every \
rank of this launch on sub-communicators of the same shape as the log's, validated once, then \
timed --steps times; the output lists total and per-operation time and the top operations. A \
log from more ranks than this launch needs --rescale (groups over the whole job, the world or \
every s-th rank, span this launch with their stride; smaller blocks and per-call counts are kept). \
Details: docs/workload.md.\n\n\
Examples:\n  \
mpirun -np 2 collbench replay nccl.log\n  \
mpirun -np 4 collbench replay job.log --rank 3 --rescale --csv replay.csv"
    )]
    #[command(args_override_self = true)]
    Replay(Box<ReplayArgs>),

    /// Accept or drain: judge every node (and the job) against a hardware profile's sourced thresholds
    #[command(
        after_help = "A profile (configs/profiles/, --list-profiles) names checks: a collective at a size, \
with fail and warn thresholds whose sources it cites. One launch runs the node checks on every node at \
once (each node's ranks on their own sub-communicator), the pair checks on pairs of nodes (a finder check: \
the links matrix and finder, which names a slow node or link against the fleet), then the whole-job checks; \
each is judged from repeated samples, never retried until it passes: pass, warn, flaky (the threshold inside \
the 95% interval of the median) or fail, with the value, the threshold, the margin, why and the source; a \
required check that cannot run (one rank, one node) is not judged, neither pass nor fail. Each node's first rank \
writes its verdict as JSON and in Prometheus' text format (node_exporter's textfile collector); rank 0 \
writes every sample as a JSON line. Details: docs/check.md.\n\n\
Examples:\n  \
collbench check --list-profiles\n  \
mpirun -np 2 collbench check --profile local-cpu\n  \
mpirun -np 16 -N 8 collbench check --profile azure-nd-h100-v5 --prometheus /var/lib/node_exporter/collbench.prom\n  \
srun -N 2 --ntasks-per-node=8 collbench check --profile gcp-a3-ultragpu \\\n      \
--on-fail 'scontrol update NodeName={host} State=drain Reason=\"{reason}\"' --execute\n  \
mpirun -np 8 collbench check --profile my.toml --only node-all-reduce --duration 1h"
    )]
    #[command(allow_negative_numbers = true, args_override_self = true)]
    Check(Box<CheckArgs>),
    Doctor(DoctorArgs),
    /// Measure every pair of nodes or ranks (bandwidth both ways, latency) and find the bad node, GPU or link
    #[command(after_help = "Pairs run in rounds of disjoint pairs, all of a round at once (the \
circle method: n-1 rounds of n/2 pairs); per pair, unidirectional and bidirectional bandwidth at \
--size and a ping-pong's latency at --latency-size, each from --samples samples of -n operations, \
what was received checked. --level node pairs one rank per node (nodes are hosts, or \
--ranks-per-node groups), rank every rank, rail the ranks with the same local index on different \
nodes. --find judges each pair against comparable pairs, re-tests every suspect against \
known-good partners and names the node, GPU or link, or the host that only all-reduces show \
(docs/links.md: the rule, the verdicts, what they cannot see, the pairs CSV). The options \
below are all it takes.\n\n\
Examples:\n  \
mpirun -np 4 --map-by node --hostfile hosts collbench links --find\n  \
mpirun -np 16 -N 8 collbench links --level rank --heatmap links.png\n  \
srun -N 64 --ntasks-per-node=8 --mpi=pmix collbench links --level rail --find --json links.json\n  \
mpirun --oversubscribe -np 4 collbench links --ranks-per-node 1 --size 1M --find   4 virtual nodes on one machine")]
    #[command(args_override_self = true)]
    Links(Box<LinksArgs>),

    /// Print this message or the help of the given subcommand
    Help(HelpArgs),
}

/// Closed vocabularies as clap value enums: clap lists the allowed names
/// in help and errors, takes the aliases and suggests the nearest one.
/// Each type keeps its names (and aliases) itself (`types::Named`).
macro_rules! value_enum {
    ($($t:ty),+ $(,)?) => {$(
        impl ValueEnum for $t {
            fn value_variants<'a>() -> &'a [Self] {
                <$t as Named>::all()
            }

            fn to_possible_value(&self) -> Option<PossibleValue> {
                Some(PossibleValue::new(Named::name(*self)).aliases(Named::aliases(*self).iter().copied()))
            }
        }
    )+};
}

value_enum!(
    Algo,
    Proto,
    AlgoRecording,
    Average,
    BackendChoice,
    Metric,
    Format,
    Dimension,
    SeriesBy,
    Source,
    Launcher,
    LauncherChoice,
    Level,
    LinkMetric
);

/// The whole command line.
pub fn cli_command() -> clap::Command {
    with_exit_codes(Cli::command())
}

/// Every help ends with the exit codes its command can end with, from
/// the one table (`error::EXIT_CODES`, docs/exit-codes.md).
fn with_exit_codes(cli: clap::Command) -> clap::Command {
    let append = |c: clap::Command, line: String| {
        let before = c.get_after_help().map(|h| format!("{h}\n\n")).unwrap_or_default();
        c.after_help(format!("{before}{line}"))
    };
    let names: Vec<String> = cli.get_subcommands().map(|c| c.get_name().to_string()).collect();
    let mut cli = append(cli, crate::error::exit_codes_line(None));
    for name in names.iter().filter(|n| *n != "help") {
        let line = crate::error::exit_codes_line(Some(name));
        cli = cli.mut_subcommand(name, |c| append(c, line));
    }
    cli
}

/// Parses a command line (the program name first) with `cli_command`.
pub fn parse_cli<I, T>(argv: I) -> Result<Cli, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let mut cmd = cli_command();
    let argv: Vec<std::ffi::OsString> = argv.into_iter().map(Into::into).collect();
    let matches = cmd.clone().try_get_matches_from(&argv).map_err(|e| {
        // the usage the message ends with is the subcommand's
        let name = argv.get(1).and_then(|a| a.to_str()).unwrap_or_default();
        match cmd.find_subcommand_mut(name) {
            Some(sub) => numbers::readable(e, &mut sub.clone().bin_name(format!("collbench {name}"))),
            None => numbers::readable(e, &mut cmd),
        }
    })?;
    Cli::from_arg_matches(&matches)
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
    let why = match (std::error::Error::source(e), e.get(ContextKind::Custom)) {
        (Some(source), _) => source.to_string(),
        (None, Some(ContextValue::String(why))) => why.clone(),
        _ => return None,
    };
    if why.starts_with(flag) {
        return Some(why);
    }
    let value = match e.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(v)) => v.as_str(),
        _ => "",
    };
    Some(format!("{flag} {value}: {why}"))
}

/// The run option clap suggests for `--KEY` (the command line's own "did
/// you mean"), for a config file's unknown key: `maxbytes` for `maxbyte`.
pub fn suggested_option(key: &str) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let e = run_command()
        .try_get_matches_from(["run".to_string(), format!("--{key}")])
        .err()?;
    match e.get(ContextKind::SuggestedArg) {
        Some(ContextValue::String(s)) => Some(s.trim_start_matches("--").to_string()),
        _ => None,
    }
}

/// For an option `subcommand` does not take that `collbench run` does
/// (`collbench workload -n 5`): a line saying so, after clap's own
/// message, so that nobody thinks it a typo. Each command takes only the
/// option groups that apply to it (`groups`).
pub fn run_option_tip(e: &clap::Error, subcommand: Option<&str>) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let sub = subcommand.filter(|s| *s != "run")?;
    if e.kind() != ErrorKind::UnknownArgument {
        return None;
    }
    let Some(ContextValue::String(given)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let flag = given.split('=').next().unwrap_or(given);
    let run = run_command();
    let arg = run.get_arguments().find(|a| {
        !a.is_hide_set()
            && (flag.strip_prefix("--").is_some_and(|l| a.get_long() == Some(l))
                || flag.strip_prefix('-').is_some_and(|c| {
                    let mut chars = c.chars();
                    chars.next().is_some_and(|c| a.get_short() == Some(c)) && chars.next().is_none()
                }))
    })?;
    let long = arg.get_long().unwrap_or_default();
    let name = match arg.get_short() {
        Some(c) => format!("-{c}/--{long}"),
        None => format!("--{long}"),
    };
    Some(format!(
        "collbench: {name} is an option of `collbench run`; `collbench {sub}` does not take it (`collbench {sub} --help` lists what it does)"
    ))
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

#[cfg(test)]
mod tests;
