//! The option groups more than one command takes, each declared once with
//! its help heading: a command flattens the groups that apply to it, so
//! that its help lists only what it uses and clap refuses the rest
//! (docs/ARCHITECTURE.md, "Options: defined once"). `collbench run` takes
//! every group (`run.rs`); workload, replay, links and check take what
//! applies (`workload.rs`, `links.rs`, `check.rs`).
//!
//! A struct's `next_help_heading` also applies to the fields after it in
//! the struct that flattens it: a command lists its own options first,
//! then the groups.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::types::{BackendChoice, ProgressMode, Register, Switch};
use crate::world::launch::LauncherChoice;

use super::run::{MAX_TIMEOUT_S, TransportArg, one_line_text, progress_mode, register_mode};

/// The help heading of the options that only say where rank 0 puts its
/// reports: they are left out of the cross-rank digest.
pub const OUTPUT: &str = "Output";
/// How the ranks start and which data plane they use.
pub const LAUNCH: &str = "Launch";
/// How each point (step, pair, sample) is measured.
pub const MEASUREMENT: &str = "Measurement";

/// The groups every command that measures takes: how the ranks start and
/// move data, validation, overwriting, the test hooks.
#[derive(Clone, Debug, Args, Serialize)]
pub struct CommonArgs {
    #[command(flatten)]
    #[serde(flatten)]
    pub launch: LaunchArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub checking: CheckingArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub overwrite: OverwriteArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub timings: TimingsArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub hooks: HookArgs,
}

/// How the ranks start, find each other and move data (every command).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = LAUNCH)]
pub struct LaunchArgs {
    /// Data plane; auto is nccl when every rank has a GPU and libnccl, else mpi; memory runs the -g ranks as threads on host memory, to try the tool without MPI or a GPU
    #[arg(long, value_name = "NAME", default_value = "auto", ignore_case = true)]
    pub backend: BackendChoice,

    /// How the ranks find each other: auto (from the environment), mpi (mpirun, srun --mpi=pmix), or without MPI: slurm (srun --mpi=none), torchrun, k8s (an Indexed Job), whose ranks meet at a TCP store on rank 0 (docs/launch.md)
    #[arg(long, value_name = "NAME", default_value = "auto", ignore_case = true)]
    pub launcher: LauncherChoice,

    /// Run N ranks as threads of this one process, no MPI needed: one GPU each (nccl backend), or host memory (--backend memory)
    #[arg(short = 'g', long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ngpus: Option<u64>,

    /// The NCCL library to use, a file or a folder [default: COLLBENCH_NCCL_LIB, NCCL_HOME/lib, the loader's search, Python site-packages]
    #[arg(long, value_name = "PATH")]
    pub nccl_lib: Option<PathBuf>,

    /// Transport profile: auto, nvlink, nvls, pcie, ib, socket (nccl); shm, tcp, ucx (mpi); `help` lists the variables each sets
    #[arg(long, value_name = "PROFILE", default_value = "auto")]
    pub transport: TransportArg,

    /// Treat every K consecutive ranks as one node (virtual nodes) instead of the ranks sharing a host
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u64).range(1..))]
    pub ranks_per_node: Option<u64>,

    /// End the job (exit 5) when one step (a point, a workload step, a links round, a check sample), or the set-up, runs longer than SECS; 0 turns it off
    #[arg(long, value_name = "SECS", default_value = "600", value_parser = clap::value_parser!(u64).range(..=MAX_TIMEOUT_S))]
    pub timeout: u64,
}

/// Validation of every result (every command).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = MEASUREMENT)]
pub struct CheckingArgs {
    /// Validation passes: per point (run), over a step's operations (workload, replay), per pair (links, both directions), per check; 0 turns checking off
    #[arg(short = 'c', long, value_name = "N", default_value = "1")]
    pub check: u32,
}

/// Buffer registration on the nccl backend (run, workload, replay, check).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = MEASUREMENT)]
pub struct RegisterArgs {
    /// Register the buffers (nccl backend): 1 with ncclCommRegister where the library has it, 2 as symmetric windows (ncclCommWindowRegister, NCCL 2.27+); `-R 0` turns it off
    #[arg(short = 'R', long, value_name = "0|1|2", num_args = 0..=1, default_value = "0", default_missing_value = "1",
          value_parser = register_mode)]
    pub register: Register,
}

/// OSU's method: a barrier before every operation (run, workload, replay).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = MEASUREMENT)]
pub struct BlockingArgs {
    /// Time each operation alone, with a barrier between (OSU's method); `-z 0` turns it off
    #[arg(short = 'z', long, value_name = "0|1", num_args = 0..=1, default_value = "0", default_missing_value = "1")]
    pub blocking: Switch,
}

/// How many samples each measurement takes (run, check).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = MEASUREMENT)]
pub struct RepeatArgs {
    /// Samples of every point (run: the whole sweep runs N times, interleaved, nccl-tests' -N/--cycles; check: each check, in place of the profile's count); 0 repeats until stopped (a check's soak)
    #[arg(
        short = 'N',
        long = "repeat",
        visible_alias = "cycles",
        alias = "run_cycles",
        value_name = "N",
        default_value = "1"
    )]
    pub cycles: u64,
}

/// Whether an existing output file may be replaced (every command).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct OverwriteArgs {
    /// Replace output files that already exist instead of refusing
    #[arg(long)]
    pub overwrite: bool,
}

/// Where a launch's time went (every command that measures).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct TimingsArgs {
    /// At the end, print on stderr how long each phase of the launch took on rank 0: MPI's start, each set-up step, the measurement, the reports, MPI's end
    #[arg(long)]
    pub timings: bool,
}

/// Rank 0's progress on stderr (run, workload, replay).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct ProgressArgs {
    /// No progress bar
    #[arg(long, overrides_with = "progress")]
    pub no_progress: bool,

    /// Show progress even where a bar cannot be drawn (stderr not a terminal, or under mpirun/srun): plain lines on stderr, one per tenth of the work (a run's points, a workload's steps) and at least every 30 s, with what is done, elapsed and time left
    #[arg(long, overrides_with = "no_progress")]
    pub progress: bool,
}

impl ProgressArgs {
    /// `--progress` and `--no-progress`, of which the last given wins.
    pub fn mode(&self) -> ProgressMode {
        progress_mode(self.no_progress, self.progress)
    }
}

/// A name for the run (run, links).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct LabelArgs {
    /// A name for this run, in the header, the CSV's `label` column and the JSON
    #[arg(long, value_name = "TEXT", value_parser = one_line_text)]
    pub label: Option<String>,
}

/// Test-only switches, hidden from help (every command that measures).
/// Their own heading: they are digested, unlike the outputs.
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Testing")]
pub struct HookArgs {
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
