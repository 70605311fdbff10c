//! Command-line definitions (clap). Nothing else in the crate imports clap:
//! `config` turns these raw values, merged with a TOML file, into a validated
//! `RunConfig`, and parse errors become one line in `app`.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

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
collbench compare base.csv new.csv     regression verdicts (exit 4 on a regression)"
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
    #[command(allow_negative_numbers = true)]
    Run(Box<RunArgs>),

    /// Compare two runs row by row (exit 4 on a regression), or the modes inside one run
    #[command(
        after_help = "Rows join on collective, hierarchy, transport, dtype, op, root, placement, \
size_bytes and nranks. A row regressed when its metric got worse by more than the threshold \
AND the new value lies outside the base row's recorded spread (fastest to slowest rank, \
widened by per-iteration statistics where the CSV has them) and the base value outside the \
new row's. BASE may be a folder: its CSV files are merged, the latest timestamp winning \
for a case measured twice.\n\n\
Examples:\n  \
collbench compare results/baselines/local-2ranks.csv results/new.csv\n  \
collbench compare --metric time --threshold 10 --format markdown base.csv new.csv\n  \
collbench compare --by hierarchy results/sweep.csv\n\n\
Exit codes: 0 no regression, 2 unreadable or incompatible input, 4 a regression."
    )]
    #[command(allow_negative_numbers = true)]
    Compare(CompareArgs),

    /// Plot a metric against size from one or more CSV reports (SVG or PNG)
    #[command(after_help = "Examples:\n  \
collbench plot results/a.csv results/b.csv -o busbw.svg\n  \
collbench plot results/sweep.csv --by hierarchy --metric time -o time.png")]
    Plot(PlotArgs),

    /// Convert nccl-tests or OSU micro-benchmark output into a collbench CSV
    #[command(after_help = "nccl-tests: the text output of any *_perf binary (2.13 and later, \
with or without timestamps or per-iteration columns) or its -J JSON file. OSU: the output of \
osu_allreduce, osu_allgather, osu_alltoall, osu_bcast, osu_reduce, osu_reduce_scatter, \
osu_gather or osu_scatter, with or without -f. Bandwidths are recomputed with collbench's \
formulas; OSU's per-rank sizes become totals.\n\n\
Examples:\n  \
collbench import --from nccl-tests all_reduce.log -o old.csv\n  \
collbench import --from osu --nranks 16 osu_allreduce.txt -o osu.csv")]
    Import(ImportArgs),

    /// Show what this machine offers: NCCL library and version, CUDA driver, GPUs, MPI
    #[command(
        after_help = "Runs without MPI and without a GPU; every line says what was found or why not.\n\n\
Examples:\n  \
collbench info\n  \
collbench info --nccl-lib /opt/nccl/lib/libnccl.so.2"
    )]
    Info(InfoArgs),
    /// Show this machine's GPUs, GPU-GPU and GPU-NIC links, NICs, CPUs and NUMA nodes
    #[command(after_help = "GPUs and links come from NVML (loaded at run time), else from \
`nvidia-smi topo -m`; CPUs, NUMA nodes and network interfaces from /proc and /sys. Link \
classes: NV# bonded NVLinks, PIX one PCIe switch, PXB several, PHB through the CPU's host \
bridge, NODE between host bridges of a NUMA node, SYS across NUMA nodes.\n\n\
Examples:\n  \
collbench topo\n  \
collbench topo --json > node.json")]
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
    Suite(SuiteArgs),
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
    #[arg(long, value_name = "NAME", value_parser = ["auto", "mpirun", "srun"])]
    pub launcher: Option<String>,

    /// The collbench binary each launch runs [default: this one]
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,

    /// Print the launch commands without running them
    #[arg(long)]
    pub dry_run: bool,

    /// No progress bar
    #[arg(long, conflicts_with = "progress")]
    pub no_progress: bool,

    /// Draw the progress bar even when stderr is not a terminal
    #[arg(long)]
    pub progress: bool,
}

/// Options of `collbench compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// BASE (a CSV file or a folder of them) and NEW; with --by, a single CSV
    #[arg(value_name = "CSV", required = true, num_args = 1..=2)]
    pub files: Vec<PathBuf>,

    /// What to compare
    #[arg(long, value_name = "METRIC", default_value = "busbw", value_parser = ["busbw", "algbw", "time"])]
    pub metric: String,

    /// Largest change in percent that is never a regression [default: 5]
    #[arg(long, value_name = "PCT")]
    pub threshold: Option<f64>,

    /// Output format
    #[arg(long, value_name = "FORMAT", default_value = "table", value_parser = ["table", "markdown", "json"])]
    pub format: String,

    /// Compare runs with different rank counts (busbw is meant to compare across them)
    #[arg(long)]
    pub allow_different_ranks: bool,

    /// Compare the modes inside one CSV instead of two runs
    #[arg(long, value_name = "DIMENSION", value_parser = ["hierarchy", "transport"])]
    pub by: Option<String>,

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
    #[arg(long, value_name = "METRIC", default_value = "busbw", value_parser = ["busbw", "algbw", "time"])]
    pub metric: String,

    /// One line per run, per hierarchy mode or per transport
    #[arg(long, value_name = "SERIES", default_value = "run", value_parser = ["run", "hierarchy", "transport"])]
    pub by: String,

    /// Replace the output file if it exists
    #[arg(long)]
    pub overwrite: bool,
}

/// Options of `collbench import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The tool that wrote the files
    #[arg(long, value_name = "TOOL", value_parser = ["nccl-tests", "osu"])]
    pub from: String,

    /// Output files of that tool
    #[arg(value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,

    /// CSV file to write
    #[arg(short = 'o', long, value_name = "OUT.csv")]
    pub output: PathBuf,

    /// The collective, when the file does not name it (e.g. all_reduce)
    #[arg(long, value_name = "NAME")]
    pub collective: Option<String>,

    /// The rank count, when the file does not record it (OSU output never does)
    #[arg(long, value_name = "N")]
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

/// Options of `collbench run`; every one can also come from `--config`.
#[derive(Debug, Default, Args)]
pub struct RunArgs {
    /// Smallest size in bytes [default: 8]
    #[arg(short = 'b', long, value_name = "SIZE", help_heading = "Sizes")]
    pub minbytes: Option<String>,

    /// Largest size in bytes [default: 32M]
    #[arg(short = 'e', long, value_name = "SIZE", help_heading = "Sizes")]
    pub maxbytes: Option<String>,

    /// Multiply the size by N between points [default: 2 unless -i is given]
    #[arg(short = 'f', long, value_name = "N", help_heading = "Sizes")]
    pub stepfactor: Option<u64>,

    /// Add SIZE between points (used when -f is not given or is 1)
    #[arg(short = 'i', long, value_name = "SIZE", help_heading = "Sizes")]
    pub stepbytes: Option<String>,

    /// Timed iterations per point, as nccl-tests [default: adapt to --min-time]
    #[arg(short = 'n', long, value_name = "N", help_heading = "Measurement")]
    pub iters: Option<u64>,

    /// Without -n: time each point for about SECS (5 to 10000 iterations) [default: 0.1]
    #[arg(long, value_name = "SECS", help_heading = "Measurement")]
    pub min_time: Option<String>,

    /// Time every iteration: p50, p99, CV and the slowest rank per point, and a straggler verdict
    #[arg(short = 'I', long, help_heading = "Measurement")]
    pub per_iter: bool,

    /// With -I: name a rank that is persistently this many percent slower than the median [default: 10]
    #[arg(long, value_name = "PCT", help_heading = "Measurement")]
    pub straggler_threshold: Option<String>,

    /// Keep each point's buffers in place instead of rotating through the largest size's allocation
    #[arg(long, help_heading = "Measurement")]
    pub no_rotate: bool,

    /// Operations per timed iteration, issued as one NCCL group (nccl-tests' -m; nccl backend) [default: 1]
    #[arg(
        short = 'm',
        long,
        alias = "agg_iters",
        value_name = "N",
        help_heading = "Measurement"
    )]
    pub agg_iters: Option<u64>,

    /// Capture the timed iterations in a CUDA graph and replay it N times; 0 is off (nccl backend, NCCL 2.9+) [default: 0]
    #[arg(
        short = 'G',
        long,
        alias = "cudagraph",
        value_name = "N",
        help_heading = "Measurement"
    )]
    pub cuda_graph: Option<u64>,

    /// Register the buffers with ncclCommRegister where the library has it (nccl backend); `-R 0` turns it off
    #[arg(
        short = 'R',
        long,
        value_name = "0|1",
        num_args = 0..=1,
        default_missing_value = "1",
        help_heading = "Measurement"
    )]
    pub register: Option<String>,

    /// Untimed warm-up iterations per point [default: 5]
    #[arg(
        short = 'w',
        long,
        alias = "warmup_iters",
        value_name = "N",
        help_heading = "Measurement"
    )]
    pub warmup: Option<u64>,

    /// Validation iterations per point; 0 turns checking off [default: 1]
    #[arg(short = 'c', long, value_name = "N", help_heading = "Measurement")]
    pub check: Option<u64>,

    /// Cross-rank time reduction: rank0, avg, min, max (or 0..3) [default: avg]
    #[arg(short = 'a', long, value_name = "MODE", help_heading = "Measurement")]
    pub average: Option<String>,

    /// Time each operation alone, with a barrier between (OSU's method); `-z 0` turns it off
    #[arg(
        short = 'z',
        long,
        value_name = "0|1",
        num_args = 0..=1,
        default_missing_value = "1",
        help_heading = "Measurement"
    )]
    pub blocking: Option<String>,

    /// Repeat the whole sweep N times; 0 repeats until stopped (SIGINT/SIGTERM) [default: 1]
    #[arg(
        short = 'N',
        long,
        alias = "run_cycles",
        value_name = "N",
        help_heading = "Measurement"
    )]
    pub cycles: Option<u64>,

    /// End the job (exit 5) when one point, or the set-up, runs longer than SECS; 0 turns it off [default: 600]
    #[arg(long, value_name = "SECS", help_heading = "Measurement")]
    pub timeout: Option<u64>,

    /// Collectives to run: all_reduce, all_gather, reduce_scatter, broadcast, reduce, alltoall, gather, scatter, sendrecv, or all [default: all]
    #[arg(long, value_name = "LIST", help_heading = "What to run")]
    pub collectives: Option<String>,

    /// Element types: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, or all [default: float]
    #[arg(
        short = 'd',
        long,
        alias = "datatype",
        value_name = "LIST",
        help_heading = "What to run"
    )]
    pub dtype: Option<String>,

    /// Reduction operations: sum, prod, min, max, avg, or all [default: sum]
    #[arg(short = 'o', long, value_name = "LIST", help_heading = "What to run")]
    pub op: Option<String>,

    /// Root rank of broadcast, reduce, gather and scatter, or all [default: 0]
    #[arg(short = 'r', long, value_name = "RANK", help_heading = "What to run")]
    pub root: Option<String>,

    /// All-reduce organisation: flat, rs-ar-ag, reduce-bcast, or all; other collectives always run flat [default: flat]
    #[arg(long, value_name = "LIST", help_heading = "Hierarchy")]
    pub hierarchy: Option<String>,

    /// Treat every K consecutive ranks as one node (virtual nodes) instead of the ranks sharing a host
    #[arg(long, value_name = "K", help_heading = "Hierarchy")]
    pub ranks_per_node: Option<u64>,

    /// Add the time of each hierarchical phase (intra, inter, intra) to the CSV
    #[arg(long, help_heading = "Hierarchy")]
    pub phase_times: bool,

    /// Data plane: auto (nccl when every rank has a GPU and libnccl, else mpi), mpi or nccl [default: auto]
    #[arg(long, value_name = "NAME", help_heading = "What to run")]
    pub backend: Option<String>,

    /// Run N ranks as threads of this one process, one GPU each (no MPI needed; nccl backend)
    #[arg(short = 'g', long, value_name = "N", help_heading = "What to run")]
    pub ngpus: Option<u64>,

    /// The NCCL library to use, a file or a folder [default: COLLBENCH_NCCL_LIB, NCCL_HOME/lib, the loader's search, Python site-packages]
    #[arg(long, value_name = "PATH", help_heading = "What to run")]
    pub nccl_lib: Option<PathBuf>,

    /// Transport profile: auto, nvlink, nvls, pcie, ib, socket (nccl); shm, tcp, ucx (mpi); `help` lists the variables each sets [default: auto]
    #[arg(long, value_name = "PROFILE", help_heading = "What to run")]
    pub transport: Option<String>,

    /// CSV report path [default: results/<run id>.csv]
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub csv: Option<PathBuf>,

    /// Also write a JSON report (records plus the run's configuration)
    #[arg(long, value_name = "PATH", help_heading = "Output")]
    pub json: Option<PathBuf>,

    /// Replace output files that already exist instead of refusing
    #[arg(long, help_heading = "Output")]
    pub overwrite: bool,

    /// No progress bar
    #[arg(long, conflicts_with = "progress", help_heading = "Output")]
    pub no_progress: bool,

    /// Draw the progress bar even when stderr is not a terminal (as under mpirun)
    #[arg(long, help_heading = "Output")]
    pub progress: bool,

    /// Read options from a TOML file; command-line options win
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Test-only: corrupt one received element on the last rank after each check
    #[arg(long, hide = true)]
    pub inject_error: bool,

    /// Test-only: each rank writes the NCCL unique ids it received to DIR/rank-R.id
    #[arg(long, hide = true, value_name = "DIR")]
    pub trace_bootstrap: Option<PathBuf>,

    /// Test-only: make the hierarchical sub-communicators from broadcast unique ids even where ncclCommSplit exists
    #[arg(long, hide = true)]
    pub no_comm_split: bool,
}
