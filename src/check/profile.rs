//! A check profile: what `collbench check` measures and the thresholds it
//! judges against, read from a TOML file (configs/profiles/, docs/check.md).
//!
//! Every number a verdict is judged against carries its source, and every
//! mistake in a file is one line naming the file and the line: an unknown
//! key, a threshold without a source, a size that does not parse, a
//! threshold on the wrong side of its metric. What needs the launch (the
//! backend, the ranks per node, memory) is checked later against the lines
//! kept here (`Located`).

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use crate::collective::Collective;
use crate::error::Error;
use crate::topology::profile::Profile as Transport;
use crate::types::{BackendKind, DType, ReduceOp, parse_size};

/// Where a value came from: the profile file and its line, for messages.
#[derive(Clone, Debug, PartialEq)]
pub struct Located<T> {
    pub value: T,
    pub line: usize,
}

/// Where a check runs: on each node's ranks (every node at once, each on
/// its own sub-communicator), on pairs of nodes (each node with the next,
/// in rounds of disjoint pairs, each pair on its own sub-communicator), or
/// on every rank of the launch. Checks run in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    Node,
    Pair,
    Job,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Pair => "pair",
            Scope::Job => "job",
        }
    }
}

/// What a sample's value is: bus or algorithm bandwidth (GB/s, higher is
/// better, docs/bandwidth.md) or the time of one operation (us, lower is
/// better).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Busbw,
    Algbw,
    TimeUs,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Busbw => "busbw",
            Metric::Algbw => "algbw",
            Metric::TimeUs => "time",
        }
    }

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

/// One number of a rule, with where it comes from.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    pub value: f64,
    pub source: String,
    pub line: usize,
}

/// How a check's value is judged: against fixed thresholds (the metric's
/// side: below for bandwidths, above for times), or against a fleet
/// baseline (`--baseline`), failing `pct` percent worse than it.
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
}

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
}

impl CheckSpec {
    /// The largest size.
    pub fn max_size(&self) -> u64 {
        self.sizes.value.iter().copied().max().unwrap_or(0)
    }

    /// The fixed thresholds, or the baseline's.
    pub fn fail_source(&self) -> &str {
        match &self.rule {
            Rule::Fixed { fail, .. } => &fail.source,
            Rule::Baseline { fail_pct, .. } => &fail_pct.source,
        }
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
    pub notes: Vec<String>,
    pub checks: Vec<CheckSpec>,
}

impl Profile {
    /// `origin:line: message`, a usage error (exit 2).
    pub fn error_at(&self, line: usize, msg: impl AsRef<str>) -> Error {
        located(&self.origin, line, msg.as_ref())
    }

    /// Whether any check judges against a fleet baseline.
    pub fn needs_baseline(&self) -> bool {
        self.checks.iter().any(|c| matches!(c.rule, Rule::Baseline { .. }))
    }
}

fn located(origin: &str, line: usize, msg: &str) -> Error {
    Error::usage(format!("{origin}:{line}: {msg}"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    name: Spanned<String>,
    description: Spanned<String>,
    backend: Option<Spanned<String>>,
    ranks_per_node: Option<Spanned<i64>>,
    nodes: Option<Spanned<i64>>,
    transport: Option<Spanned<String>>,
    #[serde(default)]
    env: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    notes: Vec<String>,
    #[serde(default, rename = "check")]
    checks: Vec<Spanned<RawCheck>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    name: Spanned<String>,
    scope: Spanned<String>,
    collective: Spanned<String>,
    size: Option<Spanned<SizeText>>,
    sizes: Option<Spanned<Vec<SizeText>>>,
    dtype: Option<Spanned<String>>,
    op: Option<Spanned<String>>,
    metric: Option<Spanned<String>>,
    samples: Option<Spanned<i64>>,
    iters: Option<Spanned<i64>>,
    warmup: Option<Spanned<i64>>,
    ranks: Option<Spanned<i64>>,
    follows: Option<Spanned<String>>,
    path: Option<Spanned<String>>,
    fail_below: Option<Spanned<RawThreshold>>,
    warn_below: Option<Spanned<RawThreshold>>,
    fail_above: Option<Spanned<RawThreshold>>,
    warn_above: Option<Spanned<RawThreshold>>,
    fail_below_baseline_pct: Option<Spanned<RawThreshold>>,
    warn_below_baseline_pct: Option<Spanned<RawThreshold>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawThreshold {
    value: f64,
    source: Option<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SizeText {
    Bytes(i64),
    Text(String),
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

/// Byte offsets to line numbers.
struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    /// The 1-based line holding byte `at`.
    fn line(&self, at: usize) -> usize {
        self.starts.partition_point(|&s| s <= at).max(1)
    }
}

struct Reader<'a> {
    origin: &'a str,
    lines: &'a LineIndex,
}

impl Reader<'_> {
    fn at(&self, span: Range<usize>) -> usize {
        self.lines.line(span.start)
    }

    fn err(&self, span: Range<usize>, msg: impl AsRef<str>) -> Error {
        located(self.origin, self.at(span), msg.as_ref())
    }

    fn profile(&self, raw: RawProfile) -> Result<Profile, Error> {
        let name = raw.name.get_ref().trim().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(self.err(
                raw.name.span(),
                format!("name '{name}': use letters, digits, '-' and '_' only"),
            ));
        }
        let backend = match &raw.backend {
            None => Located {
                value: BackendNeed::Any,
                line: self.at(raw.name.span()),
            },
            Some(b) => Located {
                value: match b.get_ref().trim() {
                    "any" => BackendNeed::Any,
                    "nccl" => BackendNeed::Only(BackendKind::Nccl),
                    "mpi" => BackendNeed::Only(BackendKind::Mpi),
                    other => {
                        return Err(self.err(b.span(), format!("backend '{other}': expected nccl, mpi or any")));
                    }
                },
                line: self.at(b.span()),
            },
        };
        let transport = match &raw.transport {
            None => Located {
                value: Transport::Auto,
                line: self.at(raw.name.span()),
            },
            Some(t) => {
                let value = Transport::parse(t.get_ref()).ok_or_else(|| {
                    self.err(
                        t.span(),
                        format!(
                            "transport '{}': expected one of {}",
                            t.get_ref().trim(),
                            Transport::names()
                        ),
                    )
                })?;
                if let (Some(kind), BackendNeed::Only(need)) = (value.backend(), backend.value)
                    && kind != need
                {
                    return Err(self.err(
                        t.span(),
                        format!(
                            "transport {} steers the {} backend, but the profile is for {}",
                            value.name(),
                            kind.name(),
                            need.name()
                        ),
                    ));
                }
                Located {
                    value,
                    line: self.at(t.span()),
                }
            }
        };
        let ranks_per_node = self.count(raw.ranks_per_node.as_ref(), "ranks_per_node")?;
        let nodes = self.count(raw.nodes.as_ref(), "nodes")?;
        let env = raw
            .env
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    Located {
                        value: v.get_ref().clone(),
                        line: self.at(v.span()),
                    },
                )
            })
            .collect();
        if raw.checks.is_empty() {
            return Err(located(
                self.origin,
                1,
                "the profile has no [[check]] table: give at least one",
            ));
        }
        let mut checks: Vec<CheckSpec> = Vec::new();
        for c in &raw.checks {
            let check = self.check(c.get_ref(), self.at(c.span()))?;
            if checks.iter().any(|o| o.name == check.name) {
                return Err(located(
                    self.origin,
                    check.line,
                    &format!("a second check named '{}': check names must differ", check.name),
                ));
            }
            checks.push(check);
        }
        Ok(Profile {
            name,
            description: raw.description.get_ref().trim().to_string(),
            origin: self.origin.to_string(),
            backend,
            ranks_per_node,
            nodes,
            transport,
            env,
            notes: raw.notes,
            checks,
        })
    }

    /// A whole number of at least 1.
    fn count(&self, v: Option<&Spanned<i64>>, key: &str) -> Result<Option<Located<usize>>, Error> {
        let Some(v) = v else { return Ok(None) };
        match usize::try_from(*v.get_ref()) {
            Ok(n) if n >= 1 => Ok(Some(Located {
                value: n,
                line: self.at(v.span()),
            })),
            _ => Err(self.err(
                v.span(),
                format!("{key} = {}: give a whole number of at least 1", v.get_ref()),
            )),
        }
    }

    fn check(&self, c: &RawCheck, line: usize) -> Result<CheckSpec, Error> {
        let name = c.name.get_ref().trim().to_string();
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '-' || ch == '_')
        {
            return Err(self.err(
                c.name.span(),
                format!("check name '{name}': use letters, digits, '-' and '_' only"),
            ));
        }
        let scope = match c.scope.get_ref().trim() {
            "node" => Scope::Node,
            "pair" => Scope::Pair,
            "job" => Scope::Job,
            other => {
                return Err(self.err(
                    c.scope.span(),
                    format!(
                        "check {name}: scope '{other}': expected node (each node's ranks together), pair (two nodes' ranks together) or job (every rank)"
                    ),
                ));
            }
        };
        let collective = Collective::parse(c.collective.get_ref()).ok_or_else(|| {
            self.err(
                c.collective.span(),
                format!(
                    "check {name}: unknown collective '{}' (expected {})",
                    c.collective.get_ref().trim(),
                    crate::types::known::<Collective>()
                ),
            )
        })?;
        let sizes = self.sizes(c, &name, line)?;
        let dtype = match &c.dtype {
            None => DType::Float,
            Some(d) => DType::parse(d.get_ref()).ok_or_else(|| {
                self.err(
                    d.span(),
                    format!("check {name}: unknown element type '{}'", d.get_ref().trim()),
                )
            })?,
        };
        let op = match (&c.op, collective.spec().is_reduction()) {
            (None, true) => Some(ReduceOp::Sum),
            (None, false) => None,
            (Some(o), true) => Some(ReduceOp::parse(o.get_ref()).ok_or_else(|| {
                self.err(
                    o.span(),
                    format!("check {name}: unknown operation '{}'", o.get_ref().trim()),
                )
            })?),
            (Some(o), false) => {
                return Err(self.err(
                    o.span(),
                    format!("check {name}: {collective} does not reduce; remove op"),
                ));
            }
        };
        let metric = match &c.metric {
            None => Metric::Busbw,
            Some(m) => match m.get_ref().trim() {
                "busbw" => Metric::Busbw,
                "algbw" => Metric::Algbw,
                "time" => Metric::TimeUs,
                other => {
                    return Err(self.err(
                        m.span(),
                        format!("check {name}: metric '{other}': expected busbw, algbw or time"),
                    ));
                }
            },
        };
        let positive = |v: &Option<Spanned<i64>>, key: &str, default: u64| -> Result<u64, Error> {
            match v {
                None => Ok(default),
                Some(s) => match u64::try_from(*s.get_ref()) {
                    Ok(n) if (1..=1_000_000).contains(&n) => Ok(n),
                    _ => Err(self.err(
                        s.span(),
                        format!(
                            "check {name}: {key} = {}: give a whole number from 1 to 1000000",
                            s.get_ref()
                        ),
                    )),
                },
            }
        };
        let samples = positive(&c.samples, "samples", DEFAULT_SAMPLES as u64)? as usize;
        let iters = positive(&c.iters, "iters", u64::from(DEFAULT_ITERS))? as u32;
        let warmup = match &c.warmup {
            Some(w) if *w.get_ref() == 0 => 0,
            _ => positive(&c.warmup, "warmup", u64::from(DEFAULT_WARMUP))? as u32,
        };
        let ranks = self.count(c.ranks.as_ref(), "ranks")?;
        let path = match &c.path {
            Some(p) if p.get_ref().trim().is_empty() => {
                return Err(self.err(p.span(), format!("check {name}: path is empty")));
            }
            Some(p) => Some(Located {
                value: p.get_ref().trim().to_string(),
                line: self.at(p.span()),
            }),
            None => None,
        };
        let rule = self.rule(c, &name, metric, line)?;
        Ok(CheckSpec {
            name,
            line,
            scope,
            collective,
            dtype,
            op,
            sizes,
            metric,
            samples,
            iters,
            warmup,
            ranks,
            follows: c.follows.as_ref().map(|f| f.get_ref().trim().to_string()),
            path,
            rule,
        })
    }

    fn sizes(&self, c: &RawCheck, name: &str, line: usize) -> Result<Located<Vec<u64>>, Error> {
        let (texts, at): (Vec<&SizeText>, usize) = match (&c.size, &c.sizes) {
            (Some(s), None) => (vec![s.get_ref()], self.at(s.span())),
            (None, Some(s)) if !s.get_ref().is_empty() => (s.get_ref().iter().collect(), self.at(s.span())),
            (Some(s), Some(_)) => {
                return Err(self.err(s.span(), format!("check {name}: give size or sizes, not both")));
            }
            _ => {
                return Err(located(
                    self.origin,
                    line,
                    &format!("check {name}: no size: give size = \"16G\" (or sizes = [...])"),
                ));
            }
        };
        let mut sizes = Vec::new();
        for t in texts {
            let bytes = match t {
                SizeText::Bytes(n) => u64::try_from(*n).map_err(|_| format!("'{n}' is negative")),
                SizeText::Text(s) => parse_size(s),
            }
            .map_err(|e| located(self.origin, at, &format!("check {name}: size {e}")))?;
            if bytes == 0 {
                return Err(located(self.origin, at, &format!("check {name}: a size of 0 bytes")));
            }
            sizes.push(bytes);
        }
        Ok(Located { value: sizes, line: at })
    }

    fn threshold(&self, t: &Spanned<RawThreshold>, key: &str, name: &str) -> Result<Threshold, Error> {
        let raw = t.get_ref();
        let source = raw.source.as_deref().map(str::trim).unwrap_or_default();
        if source.is_empty() {
            return Err(self.err(
                t.span(),
                format!(
                    "check {name}: {key} = {} has no source: every threshold says where it comes from \
                     (source = \"...\": a file, an issue, a measurement)",
                    raw.value
                ),
            ));
        }
        if !raw.value.is_finite() || raw.value <= 0.0 {
            return Err(self.err(
                t.span(),
                format!("check {name}: {key} = {}: give a number above 0", raw.value),
            ));
        }
        Ok(Threshold {
            value: raw.value,
            source: source.to_string(),
            line: self.at(t.span()),
        })
    }

    fn rule(&self, c: &RawCheck, name: &str, metric: Metric, line: usize) -> Result<Rule, Error> {
        let t = |v: &Option<Spanned<RawThreshold>>, key: &str| -> Result<Option<Threshold>, Error> {
            v.as_ref().map(|t| self.threshold(t, key, name)).transpose()
        };
        let fail_below = t(&c.fail_below, "fail_below")?;
        let warn_below = t(&c.warn_below, "warn_below")?;
        let fail_above = t(&c.fail_above, "fail_above")?;
        let warn_above = t(&c.warn_above, "warn_above")?;
        let base_fail = t(&c.fail_below_baseline_pct, "fail_below_baseline_pct")?;
        let base_warn = t(&c.warn_below_baseline_pct, "warn_below_baseline_pct")?;
        let higher = metric.higher_is_better();
        let wrong_side = [
            (&fail_above, "fail_above", higher),
            (&warn_above, "warn_above", higher),
            (&fail_below, "fail_below", !higher),
            (&warn_below, "warn_below", !higher),
        ];
        for (given, key, wrong) in wrong_side {
            if let (Some(th), true) = (given, wrong) {
                let side = if higher {
                    "is better higher: use fail_below/warn_below"
                } else {
                    "is better lower: use fail_above/warn_above"
                };
                return Err(located(
                    self.origin,
                    th.line,
                    &format!("check {name}: {key} on {}, which {side}", metric.name()),
                ));
            }
        }
        let (fail, warn) = if higher {
            (fail_below, warn_below)
        } else {
            (fail_above, warn_above)
        };
        for pct in [&base_fail, &base_warn].into_iter().flatten() {
            if pct.value >= 100.0 {
                return Err(located(
                    self.origin,
                    pct.line,
                    &format!("check {name}: a percentage below the baseline must be under 100"),
                ));
            }
        }
        match (fail, base_fail) {
            (Some(fail), None) => {
                if base_warn.is_some() {
                    return Err(located(
                        self.origin,
                        line,
                        &format!("check {name}: warn_below_baseline_pct needs fail_below_baseline_pct"),
                    ));
                }
                if let Some(w) = &warn {
                    let wrong = if higher {
                        w.value < fail.value
                    } else {
                        w.value > fail.value
                    };
                    if wrong {
                        return Err(located(
                            self.origin,
                            w.line,
                            &format!(
                                "check {name}: the warn threshold {} is past the fail threshold {}",
                                w.value, fail.value
                            ),
                        ));
                    }
                }
                Ok(Rule::Fixed { fail, warn })
            }
            (None, Some(fail_pct)) => {
                if !higher {
                    return Err(located(
                        self.origin,
                        fail_pct.line,
                        &format!("check {name}: baseline rules judge bandwidths (busbw, algbw), not time"),
                    ));
                }
                if let Some(w) = &warn {
                    return Err(located(
                        self.origin,
                        w.line,
                        &format!(
                            "check {name}: a fixed warn threshold beside a baseline rule; use warn_below_baseline_pct"
                        ),
                    ));
                }
                if let Some(w) = &base_warn
                    && w.value > fail_pct.value
                {
                    return Err(located(
                        self.origin,
                        w.line,
                        &format!("check {name}: warn_below_baseline_pct is past fail_below_baseline_pct"),
                    ));
                }
                Ok(Rule::Baseline {
                    fail_pct,
                    warn_pct: base_warn,
                })
            }
            (Some(_), Some(b)) => Err(located(
                self.origin,
                b.line,
                &format!("check {name}: a fixed threshold and a baseline rule; give one"),
            )),
            (None, None) => {
                let key = if higher { "fail_below" } else { "fail_above" };
                Err(located(
                    self.origin,
                    line,
                    &format!(
                        "check {name}: no fail threshold: give {key} = {{ value = ..., source = \"...\" }} \
                         or fail_below_baseline_pct"
                    ),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "demo"
description = "two checks"
backend = "mpi"
transport = "auto"

[[check]]
name = "node-ar"
scope = "node"
collective = "all_reduce"
size = "4K"
iters = 100
ranks = 2
fail_below = { value = 0.3, source = "measured" }
warn_below = { value = 0.5, source = "measured" }

[[check]]
name = "job-time"
scope = "job"
collective = "broadcast"
sizes = ["2G", 4096]
metric = "time"
fail_above = { value = 100.0, source = "a figure" }
"#;

    fn err(text: &str) -> String {
        parse(text, "p.toml").unwrap_err().to_string()
    }

    #[test]
    fn a_profile_reads_its_checks_with_defaults_and_lines() {
        let p = parse(GOOD, "p.toml").unwrap();
        assert_eq!(p.name, "demo");
        assert_eq!(p.backend.value, BackendNeed::Only(BackendKind::Mpi));
        assert_eq!(p.checks.len(), 2);
        let a = &p.checks[0];
        assert_eq!(
            (a.scope, a.collective, a.op),
            (Scope::Node, Collective::AllReduce, Some(ReduceOp::Sum))
        );
        assert_eq!((a.samples, a.iters, a.warmup), (DEFAULT_SAMPLES, 100, DEFAULT_WARMUP));
        assert_eq!(a.sizes.value, vec![4096]);
        assert_eq!(a.sizes.line, 11);
        assert_eq!(a.line, 7);
        assert_eq!(a.ranks.as_ref().map(|r| (r.value, r.line)), Some((2, 13)));
        match &a.rule {
            Rule::Fixed { fail, warn } => {
                assert_eq!((fail.value, fail.line), (0.3, 14));
                assert_eq!(warn.as_ref().map(|w| w.value), Some(0.5));
            }
            other => panic!("{other:?}"),
        }
        let b = &p.checks[1];
        assert_eq!((b.metric, b.op), (Metric::TimeUs, None));
        assert_eq!(b.sizes.value, vec![2 << 30, 4096]);
        assert_eq!(b.max_size(), 2 << 30);
    }

    #[test]
    fn an_unknown_key_names_the_file_and_its_line() {
        let text = GOOD.replace("iters = 100", "iterations = 100");
        let e = err(&text);
        assert!(e.starts_with("p.toml:12: "), "{e}");
        assert!(e.contains("iterations"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn a_threshold_without_a_source_is_refused_at_its_line() {
        let text = GOOD.replace(r#"{ value = 0.3, source = "measured" }"#, "{ value = 0.3 }");
        assert_eq!(
            err(&text),
            "p.toml:14: check node-ar: fail_below = 0.3 has no source: every threshold says where it \
             comes from (source = \"...\": a file, an issue, a measurement)"
        );
        let text = GOOD.replace(r#"source = "a figure""#, r#"source = "  ""#);
        assert!(err(&text).starts_with("p.toml:23: check job-time: fail_above = 100 has no source"));
    }

    #[test]
    fn thresholds_sit_on_their_metrics_side_and_in_order() {
        let e = err(&GOOD.replace("fail_above", "fail_below"));
        assert!(e.starts_with("p.toml:23: check job-time: fail_below on time"), "{e}");
        let e = err(&GOOD.replace("value = 0.5", "value = 0.1"));
        assert!(
            e.starts_with("p.toml:15: check node-ar: the warn threshold 0.1 is past"),
            "{e}"
        );
        let e = err(&GOOD.replace("fail_above = { value = 100.0, source = \"a figure\" }", ""));
        assert!(e.starts_with("p.toml:17: check job-time: no fail threshold"), "{e}");
    }

    #[test]
    fn bad_values_name_their_line() {
        assert!(
            err(&GOOD.replace("\"4K\"", "\"4Q\""))
                .starts_with("p.toml:11: check node-ar: size '4Q' has an unknown unit")
        );
        assert!(err(&GOOD.replace("\"node\"", "\"rack\"")).starts_with("p.toml:9: check node-ar: scope 'rack'"));
        assert!(
            err(&GOOD.replace("\"broadcast\"", "\"allreduce2\""))
                .starts_with("p.toml:20: check job-time: unknown collective")
        );
        assert!(
            err(&GOOD.replace("transport = \"auto\"", "transport = \"nvlink\""))
                .starts_with("p.toml:5: transport nvlink steers the nccl backend")
        );
        assert!(err(&GOOD.replace("iters = 100", "iters = 0")).starts_with("p.toml:12: check node-ar: iters = 0"));
        assert!(
            err(&GOOD.replace("name = \"job-time\"", "name = \"node-ar\""))
                .starts_with("p.toml:17: a second check named 'node-ar'")
        );
        let broken = err("name = \"x\"\ndescription = \"d\"\n[[check]\n");
        assert!(broken.starts_with("p.toml:3: "), "{broken}");
    }

    #[test]
    fn a_baseline_rule_takes_percentages() {
        let text = GOOD.replace(
            "fail_below = { value = 0.3, source = \"measured\" }\nwarn_below = { value = 0.5, source = \"measured\" }",
            "fail_below_baseline_pct = { value = 5, source = \"SuperBench\" }",
        );
        let p = parse(&text, "p.toml").unwrap();
        assert!(p.needs_baseline());
        assert!(matches!(&p.checks[0].rule, Rule::Baseline { fail_pct, .. } if fail_pct.value == 5.0));
    }
}
