//! A check profile: what `collbench check` measures and the thresholds it
//! judges against, read from a TOML file (configs/profiles/, docs/check.md).
//!
//! Every number a verdict is judged against carries its source, and every
//! mistake in a file is one line naming the file and the line: an unknown
//! key, a threshold without a source, a size that does not parse, a
//! threshold on the wrong side of its metric. What needs the launch (the
//! backend, the ranks per node, memory) is checked later against the lines
//! kept here (`Located`).

use crate::collective::Collective;
use crate::error::Error;
use crate::topology::profile::Profile as Transport;
use crate::types::{BackendKind, DType, ReduceOp};

mod plugin;
mod read;

pub use plugin::{NeededVar, PluginNeed};
use read::{LineIndex, RawProfile, Reader};

/// Where a value came from: the profile file and its line, for messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

crate::types::vocabulary! {
    /// Where a check runs: on each node's ranks (every node at once, each on
    /// its own sub-communicator), on pairs of nodes (each node with the next,
    /// in rounds of disjoint pairs, each pair on its own sub-communicator), or
    /// on every rank of the launch. Checks run in this order.
    #[derive(PartialOrd, Ord)]
    pub enum Scope: "scope", Exact { Node = "node", Pair = "pair", Job = "job" }
}

crate::types::vocabulary! {
    /// What a sample's value is: bus or algorithm bandwidth (GB/s, higher is
    /// better, docs/bandwidth.md) or the time of one operation (us, lower is
    /// better).
    pub enum Metric: "metric", Exact { Busbw = "busbw", Algbw = "algbw", TimeUs = "time" }
}

impl Metric {
    pub fn unit(self) -> &'static str {
        match self {
            Metric::Busbw | Metric::Algbw => "GB/s",
            Metric::TimeUs => "us",
        }
    }

    pub fn higher_is_better(self) -> bool {
        !matches!(self, Metric::TimeUs)
    }
}

/// The backend a profile is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendNeed {
    Any,
    Only(BackendKind),
}

impl BackendNeed {
    pub fn name(self) -> &'static str {
        match self {
            BackendNeed::Any => "any",
            BackendNeed::Only(kind) => kind.name(),
        }
    }

    /// A profile's `backend`: `any`, `nccl` or `mpi`, in lower case.
    pub fn parse(text: &str) -> Option<BackendNeed> {
        match text.trim() {
            "any" => Some(BackendNeed::Any),
            kind @ ("nccl" | "mpi") => BackendKind::parse(kind).map(BackendNeed::Only),
            _ => None,
        }
    }
}

/// One number of a rule, with where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub value: f64,
    pub source: String,
    pub line: usize,
}

/// How a check's value is judged: against fixed thresholds (the metric's
/// side: below for bandwidths, above for times), against a fleet
/// baseline (`--baseline`), failing `pct` percent worse than it, or, for
/// a finder check (`finder = true`), by `collbench links`' fleet-relative
/// rule and finder: a node, GPU or link it names fails (`warn`: warns).
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    Fixed {
        fail: Threshold,
        warn: Option<Threshold>,
    },
    Baseline {
        fail_pct: Threshold,
        warn_pct: Option<Threshold>,
    },
    Finder {
        warn: bool,
        /// The rule's percentage where the fabric's noise needs another
        /// than links' 10% (`min_deficit_pct`, with its source).
        margin: Option<Threshold>,
    },
}

/// Where a finder check's rule comes from (it has no threshold of its own).
pub const FINDER_SOURCE: &str = "collbench links' fleet-relative rule (docs/links.md): more than 10% and 4 robust \
     spreads worse than comparable pairs, and again when re-tested against known-good partners";

/// Nodes a finder check needs: each node with 3 partners or more, the
/// fewest with which the rule tells a slow node from a slow link
/// (`links::Rule::DEFAULT.min_partners` + 1).
pub const FINDER_NODES: usize = crate::links::Rule::DEFAULT.min_partners + 1;

/// One check of a profile.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckSpec {
    pub name: String,
    /// The line of its `[[check]]` table.
    pub line: usize,
    pub scope: Scope,
    pub collective: Collective,
    pub dtype: DType,
    /// The operation of a reduction (sum unless given); `None` otherwise.
    pub op: Option<ReduceOp>,
    /// Sizes in bytes (nccl-tests' size semantics); a sample's value is
    /// the mean over them, as nccl-tests' "Avg bus bandwidth" of a run of
    /// these sizes.
    pub sizes: Located<Vec<u64>>,
    pub metric: Metric,
    /// Samples judged (each: `iters` operations back to back, timed).
    pub samples: usize,
    pub iters: u32,
    /// Untimed operations before the first sample.
    pub warmup: u32,
    /// The group size the thresholds hold for, where the profile says.
    pub ranks: Option<Located<usize>>,
    /// What the check follows (the command and method of its source).
    pub follows: Option<String>,
    /// Text the transport observed on every rank of a group must hold
    /// (`vader`, `P2P`, `NET/IB`: collbench's `transport_observed`), or
    /// the check fails whatever its figures: the path it was set for was
    /// not taken.
    pub path: Option<Located<String>>,
    pub rule: Rule,
    /// Whether a launch may leave it out: an optional check that cannot
    /// run (one rank, one node) is skipped, a required one is not judged.
    pub optional: bool,
}

impl CheckSpec {
    /// The largest size.
    pub fn max_size(&self) -> u64 {
        self.sizes.value.iter().copied().max().unwrap_or(0)
    }

    /// The fixed thresholds, or the baseline's, or the finder's rule.
    pub fn fail_source(&self) -> &str {
        match &self.rule {
            Rule::Fixed { fail, .. } => &fail.source,
            Rule::Baseline { fail_pct, .. } => &fail_pct.source,
            Rule::Finder { margin: None, .. } => FINDER_SOURCE,
            Rule::Finder { margin: Some(m), .. } => &m.source,
        }
    }

    /// The links rule a finder check judges by: links' own, its
    /// percentage the check's `min_deficit_pct` where it gives one.
    pub fn finder_rule(&self) -> crate::links::rule::Rule {
        let rule = crate::links::rule::Rule::DEFAULT;
        match &self.rule {
            Rule::Finder { margin: Some(m), .. } => crate::links::rule::Rule {
                min_deficit_pct: m.value,
                ..rule
            },
            _ => rule,
        }
    }

    /// Whether it runs `collbench links`' matrix and finder rather than a
    /// collective.
    pub fn is_finder(&self) -> bool {
        matches!(self.rule, Rule::Finder { .. })
    }
}

/// A parsed and checked profile.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub name: String,
    pub description: String,
    /// The file, as messages name it.
    pub origin: String,
    pub backend: Located<BackendNeed>,
    /// Ranks on every node the thresholds hold for (one per GPU).
    pub ranks_per_node: Option<Located<usize>>,
    /// Nodes the launch must have (2 for a node-pair profile).
    pub nodes: Option<Located<usize>>,
    /// The transport pin: every check runs with it (one launch, one
    /// transport: NCCL and MPI read their variables once per process).
    pub transport: Located<Transport>,
    /// Variables every rank's environment must hold, as the source ran.
    pub env: Vec<(String, Located<String>)>,
    /// The plugin environment the thresholds were measured with, where
    /// the profile says: without it the checks are not judged
    /// (`not_judged`).
    pub plugin: Option<PluginNeed>,
    pub notes: Vec<String>,
    pub checks: Vec<CheckSpec>,
}

impl Profile {
    /// `origin:line: message`, a usage error (exit 2).
    pub fn error_at(&self, line: usize, msg: impl AsRef<str>) -> Error {
        located(&self.origin, line, msg.as_ref())
    }

    /// Why this rank's environment (`env`) cannot have its figures judged
    /// against the profile's thresholds: `origin:line: its thresholds were
    /// measured with ...` where it lacks the plugin environment, else
    /// `None`. A verdict of "not judged", not a failure: the figures of
    /// another network stack say nothing against these thresholds.
    pub fn not_judged(&self, env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        let plugin = self.plugin.as_ref()?;
        let why = plugin.missing(env)?;
        Some(format!("{}:{}: {why}", self.origin, plugin.line))
    }

    /// Whether any check judges against a fleet baseline.
    pub fn needs_baseline(&self) -> bool {
        self.checks.iter().any(|c| matches!(c.rule, Rule::Baseline { .. }))
    }
}

fn located(origin: &str, line: usize, msg: &str) -> Error {
    Error::usage(format!("{origin}:{line}: {msg}"))
}

/// Samples, iterations and warm-up when a check does not say.
pub const DEFAULT_SAMPLES: usize = 10;
pub const DEFAULT_ITERS: u32 = 20;
pub const DEFAULT_WARMUP: u32 = 5;

/// Reads a profile from its TOML `text`; `origin` names it in messages.
pub fn parse(text: &str, origin: &str) -> Result<Profile, Error> {
    let lines = LineIndex::new(text);
    let raw: RawProfile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| lines.line(s.start)).unwrap_or(1);
        located(origin, line, e.message().trim())
    })?;
    Reader { origin, lines: &lines }.profile(raw)
}

#[cfg(test)]
mod tests;
