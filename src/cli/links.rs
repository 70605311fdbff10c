//! `collbench links`' options.

use std::path::PathBuf;

use clap::Args;

use crate::links::{Level, Metric as LinkMetric};
use crate::types::Size;

use super::{OUTPUT, RunArgs};

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
