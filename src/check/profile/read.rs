//! The TOML side of a profile: the raw shapes serde reads, and the reader
//! that turns them into checked `CheckSpec`s, every mistake located at
//! its line.

use std::collections::BTreeMap;
use std::ops::Range;

use serde::Deserialize;
use toml::Spanned;

use super::{
    BackendNeed, CheckSpec, DEFAULT_ITERS, DEFAULT_SAMPLES, DEFAULT_WARMUP, Located, Metric, Profile, Rule, Scope,
    Threshold, located,
};
use crate::collective::Collective;
use crate::error::Error;
use crate::topology::profile::Profile as Transport;
use crate::types::{DType, ReduceOp, parse_size};

/// The most samples, iterations or warm-up operations a check may ask for.
const MOST_COUNT: u64 = 1_000_000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfile {
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
    plugin: Option<Spanned<super::plugin::RawPlugin>>,
    #[serde(default, rename = "check")]
    checks: Vec<Spanned<RawCheck>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheck {
    name: Spanned<String>,
    scope: Spanned<String>,
    collective: Option<Spanned<String>>,
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
    optional: Option<Spanned<bool>>,
    finder: Option<Spanned<bool>>,
    on_finding: Option<Spanned<String>>,
    min_deficit_pct: Option<Spanned<RawThreshold>>,
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

/// Byte offsets to line numbers.
pub(super) struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub(super) fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    /// The 1-based line holding byte `at`.
    pub(super) fn line(&self, at: usize) -> usize {
        self.starts.partition_point(|&s| s <= at).max(1)
    }
}

pub(super) struct Reader<'a> {
    pub(super) origin: &'a str,
    pub(super) lines: &'a LineIndex,
}

impl Reader<'_> {
    fn at(&self, span: Range<usize>) -> usize {
        self.lines.line(span.start)
    }

    fn err(&self, span: Range<usize>, msg: impl AsRef<str>) -> Error {
        located(self.origin, self.at(span), msg.as_ref())
    }

    /// `err`, for the other parts of the reader.
    pub(super) fn err_at(&self, span: Range<usize>, msg: impl AsRef<str>) -> Error {
        self.err(span, msg)
    }

    /// The line of `span`, for the other parts of the reader.
    pub(super) fn line_of(&self, span: Range<usize>) -> usize {
        self.at(span)
    }

    pub(super) fn profile(&self, raw: RawProfile) -> Result<Profile, Error> {
        let name = raw.name.get_ref().trim().to_string();
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
            return Err(self.err(
                raw.name.span(),
                format!("name '{name}': use letters, digits, '-' and '_' only"),
            ));
        }
        let backend = self.backend(&raw)?;
        let transport = self.transport(&raw, backend.value)?;
        let ranks_per_node = self.count(raw.ranks_per_node.as_ref(), "ranks_per_node", None)?;
        let nodes = self.count(raw.nodes.as_ref(), "nodes", None)?;
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
        let plugin = self.plugin(raw.plugin.as_ref())?;
        let checks = self.checks(&raw)?;
        Ok(Profile {
            name,
            description: raw.description.get_ref().trim().to_string(),
            origin: self.origin.to_string(),
            backend,
            ranks_per_node,
            nodes,
            transport,
            env,
            plugin,
            notes: raw.notes,
            checks,
        })
    }

    /// The profile's `backend` key: `any` when it is left out.
    fn backend(&self, raw: &RawProfile) -> Result<Located<BackendNeed>, Error> {
        Ok(match &raw.backend {
            None => Located {
                value: BackendNeed::Any,
                line: self.at(raw.name.span()),
            },
            Some(b) => Located {
                value: BackendNeed::parse(b.get_ref()).ok_or_else(|| {
                    self.err(
                        b.span(),
                        format!("backend '{}': expected nccl, mpi or any", b.get_ref().trim()),
                    )
                })?,
                line: self.at(b.span()),
            },
        })
    }

    /// The profile's `transport` key (`auto` when it is left out), which
    /// must agree with the backend it needs.
    fn transport(&self, raw: &RawProfile, backend: BackendNeed) -> Result<Located<Transport>, Error> {
        Ok(match &raw.transport {
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
                if let (Some(kind), BackendNeed::Only(need)) = (value.backend(), backend)
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
        })
    }

    /// The profile's `[[check]]` tables: at least one, names all different.
    fn checks(&self, raw: &RawProfile) -> Result<Vec<CheckSpec>, Error> {
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
        Ok(checks)
    }

    /// A whole number of at least 1: the profile's (`check` `None`) or the
    /// named check's, whose name its message then begins with as every
    /// check's does.
    fn count(&self, v: Option<&Spanned<i64>>, key: &str, check: Option<&str>) -> Result<Option<Located<usize>>, Error> {
        let Some(v) = v else { return Ok(None) };
        match usize::try_from(*v.get_ref()) {
            Ok(n) if n >= 1 => Ok(Some(Located {
                value: n,
                line: self.at(v.span()),
            })),
            _ => Err(self.err(
                v.span(),
                format!(
                    "{}{key} = {}: give a whole number of at least 1",
                    check.map_or(String::new(), |name| format!("check {name}: ")),
                    v.get_ref()
                ),
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
        let scope = self.scope(c, &name)?;
        if c.finder.as_ref().is_some_and(|f| *f.get_ref()) {
            return self.finder_check(c, name, line, scope);
        }
        let finder_only = [
            ("on_finding", c.on_finding.as_ref().map(Spanned::span)),
            ("min_deficit_pct", c.min_deficit_pct.as_ref().map(Spanned::span)),
        ];
        if let Some((key, span)) = finder_only.into_iter().find_map(|(k, s)| s.map(|s| (k, s))) {
            return Err(self.err(
                span,
                format!("check {name}: {key} is for finder checks (finder = true)"),
            ));
        }
        let collective = self.collective(c, &name, line)?;
        let sizes = self.sizes(c, &name, line)?;
        let dtype = self.dtype(c, &name)?;
        let element = dtype.size_bytes() as u64;
        if let Some(bad) = sizes.value.iter().find(|&&b| b % element != 0) {
            // it would be measured at another size than the verdict names
            return Err(located(
                self.origin,
                sizes.line,
                &format!(
                    "check {name}: size {bad} bytes is not a whole number of {dtype} elements ({element} bytes each)"
                ),
            ));
        }
        let op = self.op(c, &name, collective)?;
        let metric = self.metric(c, &name)?;
        let (samples, iters, warmup) = self.counts(c, &name)?;
        let ranks = self.count(c.ranks.as_ref(), "ranks", Some(&name))?;
        let path = self.path(c, &name)?;
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
            optional: c.optional.as_ref().is_some_and(|o| *o.get_ref()),
        })
    }

    /// Samples, iterations and warm-up, each with its default; a warm-up
    /// of 0 is none (as `run -w 0`).
    fn counts(&self, c: &RawCheck, name: &str) -> Result<(usize, u32, u32), Error> {
        let samples = self.number(&c.samples, "samples", 1, DEFAULT_SAMPLES as u64, name)? as usize;
        let iters = self.number(&c.iters, "iters", 1, u64::from(DEFAULT_ITERS), name)? as u32;
        let warmup = self.number(&c.warmup, "warmup", 0, u64::from(DEFAULT_WARMUP), name)? as u32;
        Ok((samples, iters, warmup))
    }

    /// The collective, which every check but a finder check names.
    fn collective(&self, c: &RawCheck, name: &str, line: usize) -> Result<Collective, Error> {
        let Some(text) = &c.collective else {
            return Err(located(
                self.origin,
                line,
                &format!("check {name}: no collective: give collective = \"all_reduce\" (or finder = true)"),
            ));
        };
        Collective::parse(text.get_ref()).ok_or_else(|| {
            self.err(
                text.span(),
                format!(
                    "check {name}: unknown collective '{}' (expected {})",
                    text.get_ref().trim(),
                    crate::types::known::<Collective>()
                ),
            )
        })
    }

    /// A finder check (`finder = true`): `collbench links`' matrix and
    /// finder at node level, on the pair scope; one probe size (whole
    /// 4-byte elements), samples, iterations, warm-up, what a finding is
    /// (`on_finding`: fail or warn). It has no collective, metric, path,
    /// group size or threshold of its own: the rule is links'.
    fn finder_check(&self, c: &RawCheck, name: String, line: usize, scope: Scope) -> Result<CheckSpec, Error> {
        if scope != Scope::Pair {
            return Err(self.err(
                c.scope.span(),
                format!("check {name}: a finder check measures pairs of nodes: give scope = \"pair\""),
            ));
        }
        let foreign = [
            ("collective", c.collective.as_ref().map(Spanned::span)),
            ("dtype", c.dtype.as_ref().map(Spanned::span)),
            ("op", c.op.as_ref().map(Spanned::span)),
            ("metric", c.metric.as_ref().map(Spanned::span)),
            ("ranks", c.ranks.as_ref().map(Spanned::span)),
            ("path", c.path.as_ref().map(Spanned::span)),
            ("fail_below", c.fail_below.as_ref().map(Spanned::span)),
            ("warn_below", c.warn_below.as_ref().map(Spanned::span)),
            ("fail_above", c.fail_above.as_ref().map(Spanned::span)),
            ("warn_above", c.warn_above.as_ref().map(Spanned::span)),
            (
                "fail_below_baseline_pct",
                c.fail_below_baseline_pct.as_ref().map(Spanned::span),
            ),
            (
                "warn_below_baseline_pct",
                c.warn_below_baseline_pct.as_ref().map(Spanned::span),
            ),
        ];
        if let Some((key, span)) = foreign.into_iter().find_map(|(k, s)| s.map(|s| (k, s))) {
            return Err(self.err(
                span,
                format!(
                    "check {name}: {key} does not apply to a finder check (finder = true): it judges pairs of \
                     nodes by links' fleet-relative rule (docs/links.md)"
                ),
            ));
        }
        let sizes = self.sizes(c, &name, line)?;
        if sizes.value.len() != 1 || sizes.value[0] % 4 != 0 {
            return Err(located(
                self.origin,
                sizes.line,
                &format!(
                    "check {name}: a finder check takes one size, a multiple of 4 bytes (its probe: links --size)"
                ),
            ));
        }
        let warn = match &c.on_finding {
            None => false,
            Some(o) => match o.get_ref().trim() {
                "fail" => false,
                "warn" => true,
                other => {
                    return Err(self.err(
                        o.span(),
                        format!("check {name}: on_finding '{other}': expected fail or warn"),
                    ));
                }
            },
        };
        let margin = self.finder_margin(c, &name)?;
        let (samples, iters, warmup) = self.counts(c, &name)?;
        Ok(CheckSpec {
            name,
            line,
            scope,
            collective: Collective::SendRecv,
            dtype: crate::types::DType::Float,
            op: None,
            sizes,
            metric: Metric::Busbw,
            samples,
            iters,
            warmup,
            ranks: None,
            follows: c.follows.as_ref().map(|f| f.get_ref().trim().to_string()),
            path: None,
            rule: Rule::Finder { warn, margin },
            optional: c.optional.as_ref().is_some_and(|o| *o.get_ref()),
        })
    }

    fn scope(&self, c: &RawCheck, name: &str) -> Result<Scope, Error> {
        Scope::parse(c.scope.get_ref()).ok_or_else(|| {
            self.err(
                c.scope.span(),
                format!(
                    "check {name}: scope '{}': expected node (each node's ranks together), pair (two nodes' ranks together) or job (every rank)",
                    c.scope.get_ref().trim()
                ),
            )
        })
    }

    /// The element type, float when it is left out.
    fn dtype(&self, c: &RawCheck, name: &str) -> Result<DType, Error> {
        Ok(match &c.dtype {
            None => DType::Float,
            Some(d) => DType::parse(d.get_ref()).ok_or_else(|| {
                self.err(
                    d.span(),
                    format!("check {name}: unknown element type '{}'", d.get_ref().trim()),
                )
            })?,
        })
    }

    /// The reduction: sum when a reducing collective leaves it out, none
    /// (and an error when given) for one that does not reduce.
    fn op(&self, c: &RawCheck, name: &str, collective: Collective) -> Result<Option<ReduceOp>, Error> {
        Ok(match (&c.op, collective.spec().is_reduction()) {
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
        })
    }

    /// The judged metric, busbw when it is left out.
    fn metric(&self, c: &RawCheck, name: &str) -> Result<Metric, Error> {
        Ok(match &c.metric {
            None => Metric::Busbw,
            Some(m) => Metric::parse(m.get_ref()).ok_or_else(|| {
                self.err(
                    m.span(),
                    format!(
                        "check {name}: metric '{}': expected busbw, algbw or time",
                        m.get_ref().trim()
                    ),
                )
            })?,
        })
    }

    /// A whole number from `least` to `MOST_COUNT`, `default` when it is
    /// left out.
    fn number(&self, v: &Option<Spanned<i64>>, key: &str, least: u64, default: u64, name: &str) -> Result<u64, Error> {
        match v {
            None => Ok(default),
            Some(s) => match u64::try_from(*s.get_ref()) {
                Ok(n) if (least..=MOST_COUNT).contains(&n) => Ok(n),
                _ => Err(self.err(
                    s.span(),
                    format!(
                        "check {name}: {key} = {}: give a whole number from {least} to {MOST_COUNT}",
                        s.get_ref()
                    ),
                )),
            },
        }
    }

    /// The optional `path`, which must not be empty when given.
    fn path(&self, c: &RawCheck, name: &str) -> Result<Option<Located<String>>, Error> {
        Ok(match &c.path {
            Some(p) if p.get_ref().trim().is_empty() => {
                return Err(self.err(p.span(), format!("check {name}: path is empty")));
            }
            Some(p) => Some(Located {
                value: p.get_ref().trim().to_string(),
                line: self.at(p.span()),
            }),
            None => None,
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

    /// A finder check's `min_deficit_pct`: the rule's percentage, with
    /// its source, below 100.
    fn finder_margin(&self, c: &RawCheck, name: &str) -> Result<Option<Threshold>, Error> {
        let Some(t) = &c.min_deficit_pct else {
            return Ok(None);
        };
        let margin = self.threshold(t, "min_deficit_pct", name)?;
        if margin.value >= 100.0 {
            return Err(self.err(
                t.span(),
                format!(
                    "check {name}: min_deficit_pct = {}: a percentage below 100 (how much worse than comparable \
                     pairs a node or link must be)",
                    margin.value
                ),
            ));
        }
        Ok(Some(margin))
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
        self.no_wrong_side(
            name,
            metric,
            [
                (&fail_above, "fail_above", higher),
                (&warn_above, "warn_above", higher),
                (&fail_below, "fail_below", !higher),
                (&warn_below, "warn_below", !higher),
            ],
        )?;
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
            (Some(fail), None) => self.fixed_rule(name, line, higher, fail, warn, base_warn),
            (None, Some(fail_pct)) => self.baseline_rule(name, higher, fail_pct, warn, base_warn),
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

    /// Refuses the first threshold given on the side the metric does not
    /// judge (`wrong` true): fail_above on a bandwidth, fail_below on time.
    fn no_wrong_side(
        &self,
        name: &str,
        metric: Metric,
        given: [(&Option<Threshold>, &str, bool); 4],
    ) -> Result<(), Error> {
        let higher = metric.higher_is_better();
        for (given, key, wrong) in given {
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
        Ok(())
    }

    /// A fixed-threshold rule: its warn threshold, if any, short of the
    /// fail threshold, and no baseline warn percentage.
    fn fixed_rule(
        &self,
        name: &str,
        line: usize,
        higher: bool,
        fail: Threshold,
        warn: Option<Threshold>,
        base_warn: Option<Threshold>,
    ) -> Result<Rule, Error> {
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

    /// A baseline rule: on a bandwidth only, with no fixed warn threshold,
    /// its warn percentage, if any, short of the fail percentage.
    fn baseline_rule(
        &self,
        name: &str,
        higher: bool,
        fail_pct: Threshold,
        warn: Option<Threshold>,
        base_warn: Option<Threshold>,
    ) -> Result<Rule, Error> {
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
                &format!("check {name}: a fixed warn threshold beside a baseline rule; use warn_below_baseline_pct"),
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
}
