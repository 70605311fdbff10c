//! The options of the commands around runs: `suite`, `compare`, `plot`,
//! `import`, `info`, `topo` and `help`.

use std::path::PathBuf;

use clap::Args;

use crate::collective::Collective;
use crate::types::{Dimension, Format, Metric, ProgressMode, SeriesBy, Source};
use crate::world::Launcher;

use super::progress_mode;
use super::run::one_line_text;

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

    /// The collbench binary each launch runs, an executable file [default: this one]
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

    /// Compare cases where NCCL ran another algorithm or protocol on each side (the run
    /// recorded it: docs/algorithms.md), with a warning, instead of refusing
    #[arg(long)]
    pub allow_algo_change: bool,

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
