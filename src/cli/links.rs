//! `collbench links`' options.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::links::{Level, Metric as LinkMetric};
use crate::types::Size;

use super::groups::{CommonArgs, LabelArgs, OUTPUT};

/// Options of `collbench links`: what to pair and how, its files, then the
/// groups that apply (launch, validation, overwriting, the label).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Links")]
pub struct LinksArgs {
    /// Who pairs up: node (one rank per node), rank (every rank), rail (the ranks of one local index across nodes, each rail on its own)
    #[arg(long, value_name = "LEVEL", default_value = "node", ignore_case = true)]
    pub level: Level,

    /// One pair at a time, instead of rounds of disjoint pairs at once: the contention-free reference
    #[arg(long)]
    pub isolated: bool,

    /// Find the bad node, GPU or link: the rule on the matrix, re-tests of each suspect against known-good partners, all-reduce bisection for what only collectives show
    #[arg(long)]
    pub find: bool,

    /// Bandwidth message size, a multiple of 4 bytes [default: 64M on GPUs (nccl), 4M on host memory (mpi)]
    #[arg(long, value_name = "SIZE")]
    pub size: Option<Size>,

    /// Ping-pong message size of the latency, a multiple of 4 bytes
    #[arg(long, value_name = "SIZE", default_value = "8")]
    pub latency_size: Size,

    /// Samples per pair and metric (6 or more give the median's 95% interval, which the finder needs)
    #[arg(long, value_name = "N", default_value = "10", value_parser = clap::value_parser!(u64).range(1..=100000))]
    pub samples: u64,

    /// Where hosts sit: a file of `host leaf [rack]` lines (pairs are compared within their class: one host, one leaf, across leaves, across racks)
    #[arg(long, value_name = "FILE", conflicts_with = "host_pattern")]
    pub topology: Option<PathBuf>,

    /// Where hosts sit, from their names: literal text, {leaf}, {rack} and * (gpu-r{rack}-l{leaf}-* places gpu-r2-l07-n13 under leaf 07 of rack 2)
    #[arg(long, value_name = "PATTERN")]
    pub host_pattern: Option<String>,

    /// The metric of the matrix on screen and of the heatmap
    #[arg(long, value_name = "METRIC", default_value = "uni", ignore_case = true)]
    pub metric: LinkMetric,

    /// Operations timed back to back in one sample (its value is their mean)
    #[arg(short = 'n', long, value_name = "N", default_value = "20", value_parser = clap::value_parser!(u64).range(1..))]
    pub iters: u64,

    /// Untimed operations before a pair's first sample of each metric
    #[arg(short = 'w', long, value_name = "N", default_value = "5")]
    pub warmup: u64,

    #[command(flatten)]
    #[serde(flatten)]
    pub files: LinksFiles,

    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub label: LabelArgs,
}

/// `collbench links`' files (rank 0's).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = OUTPUT)]
pub struct LinksFiles {
    /// Pairs CSV path: a row per measured pair, written as each round ends (docs/links.md) [default: results/links-<run id>.csv]
    #[arg(long, value_name = "PATH")]
    pub csv: Option<PathBuf>,

    /// Also write a JSON report: the probe, the endpoints, every pair, the rule's suspects and the finder's report
    #[arg(long, value_name = "PATH")]
    pub json: Option<PathBuf>,

    /// Draw the matrix as a heatmap, ordered and grouped by rack, leaf and host (.png or .svg)
    #[arg(long, value_name = "PATH")]
    pub heatmap: Option<PathBuf>,
}
