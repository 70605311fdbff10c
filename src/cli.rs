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
collbench run --help     every option of a run"
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
(wrong > 0)."
    )]
    #[command(allow_negative_numbers = true)]
    Run(Box<RunArgs>),
    /// Show what this machine offers: NCCL library and version, CUDA driver, GPUs, MPI
    #[command(
        after_help = "Runs without MPI and without a GPU; every line says what was found or why not.\n\n\
Examples:\n  \
collbench info\n  \
collbench info --nccl-lib /opt/nccl/lib/libnccl.so.2"
    )]
    Info(InfoArgs),
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

    /// Timed iterations per point [default: 20]
    #[arg(short = 'n', long, value_name = "N", help_heading = "Measurement")]
    pub iters: Option<u64>,

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

    /// Data plane: auto (nccl when every rank has a GPU and libnccl, else mpi), mpi or nccl [default: auto]
    #[arg(long, value_name = "NAME", help_heading = "What to run")]
    pub backend: Option<String>,

    /// Run N ranks as threads of this one process, one GPU each (no MPI needed; nccl backend)
    #[arg(short = 'g', long, value_name = "N", help_heading = "What to run")]
    pub ngpus: Option<u64>,

    /// The NCCL library to use, a file or a folder [default: COLLBENCH_NCCL_LIB, NCCL_HOME/lib, the loader's search, Python site-packages]
    #[arg(long, value_name = "PATH", help_heading = "What to run")]
    pub nccl_lib: Option<PathBuf>,

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

    /// Test-only: each rank writes the NCCL unique id it received to DIR/rank-R.id
    #[arg(long, hide = true, value_name = "DIR")]
    pub trace_bootstrap: Option<PathBuf>,
}
