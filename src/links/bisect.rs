//! The finder's bisection for faults that only collectives show: all-reduces
//! on sub-communicators of halves of the hosts, down to one host
//! (docs/links.md, "The finder", step 4).

use std::collections::{BTreeMap, BTreeSet};

use super::Endpoint;
use super::finder::{BisectStep, FinderConfig, Finding, FindingKind, host_order};
use super::layout::Layout;
use super::measure::{Estimate, Measurer, Probe};
use super::rule::Rule;
use super::schedule::hosts;
use crate::error::Error;

/// The bisection over the hosts not already named by `findings`.
pub(super) fn check_collectives(
    measurer: &mut dyn Measurer,
    layout: &Layout,
    findings: &[Finding],
    cfg: &FinderConfig,
    round: &mut usize,
    steps: &mut Vec<BisectStep>,
) -> Result<(Option<Finding>, Option<String>), Error> {
    let endpoints = measurer.endpoints().to_vec();
    let named: BTreeSet<&str> = findings
        .iter()
        .flat_map(|f| f.hosts.iter().map(String::as_str))
        .collect();
    let candidates: Vec<String> = host_order(layout, &endpoints)
        .into_iter()
        .filter(|h| !named.contains(h.as_str()))
        .collect();
    if candidates.len() < MIN_BISECT_HOSTS {
        let note = format!(
            "no bisection for faults only collectives show: it needs {MIN_BISECT_HOSTS} hosts or more not already named, and there are {}",
            candidates.len()
        );
        return Ok((None, Some(note)));
    }
    Ok((bisect(measurer, &endpoints, &candidates, cfg, round, steps)?, None))
}

/// Fewest hosts to bisect: each half must be a real multi-host all-reduce.
pub const MIN_BISECT_HOSTS: usize = 4;

/// Whether `slow` is worse than `fast` by the rule: by more than the
/// percentage, and with the 95% intervals of the two medians apart.
fn slower(rule: &Rule, slow: &Estimate, fast: &Estimate) -> bool {
    let delta = (slow.median / fast.median).ln();
    let apart = match (slow.hi, fast.lo) {
        (Some(h), Some(l)) => h < l,
        _ => false,
    };
    rule.worse(delta, 0.0) && apart
}

/// The all-reduces of a bisection, one round per call.
struct Rounds<'a> {
    measurer: &'a mut dyn Measurer,
    ranks_of: BTreeMap<String, Vec<usize>>,
    probe: Probe,
    rule: Rule,
    round: &'a mut usize,
}

/// Which half of a step is slower.
enum Verdict {
    First,
    Second,
    Neither,
}

impl Rounds<'_> {
    /// One round: an all-reduce on each subset of hosts at once.
    fn run(&mut self, subsets: Subsets) -> Result<BisectStep, Error> {
        let asked: Vec<Vec<usize>> = subsets
            .iter()
            .map(|(_, hs)| hs.iter().flat_map(|h| self.ranks_of[h].iter().copied()).collect())
            .collect();
        let got = self.measurer.all_reduce(&asked, &self.probe)?;
        if got.len() != asked.len() {
            return Err(Error::runtime(format!(
                "{}: asked for {} all-reduces, got {} (a bug in the measurer)",
                self.measurer.describe(),
                asked.len(),
                got.len()
            )));
        }
        *self.round += 1;
        Ok(BisectStep {
            round: *self.round,
            subsets,
            busbw: got.iter().map(|s| Estimate::of(s)).collect(),
            outcome: String::new(),
        })
    }

    /// The first two subsets of `step` against its third (the reference)
    /// where there is one, else against each other.
    fn judge(&self, step: &mut BisectStep) -> Verdict {
        let (Some(a), Some(b)) = (step.busbw[0], step.busbw[1]) else {
            return Verdict::Neither;
        };
        let (low_a, low_b) = match step.busbw.get(2).copied().flatten() {
            Some(r) => (slower(&self.rule, &a, &r), slower(&self.rule, &b, &r)),
            None => (slower(&self.rule, &a, &b), slower(&self.rule, &b, &a)),
        };
        match (low_a, low_b) {
            (true, false) => Verdict::First,
            (false, true) => Verdict::Second,
            (true, true) => {
                step.outcome =
                    "both halves slower than the reference (more than one host?): following the slower".into();
                if a.median <= b.median {
                    Verdict::First
                } else {
                    Verdict::Second
                }
            }
            (false, false) => Verdict::Neither,
        }
    }
}

fn halves(v: &[String]) -> (Vec<String>, Vec<String>) {
    let mid = v.len().div_ceil(2);
    (v[..mid].to_vec(), v[mid..].to_vec())
}

/// The two halves of `suspects`, each padded with known-good hosts to the
/// size of the larger (and at least 2), and a known-good reference of that
/// size where enough are left; None when too few are known good.
/// Subsets of hosts, each with what it is ("half", "reference").
type Subsets = Vec<(String, Vec<String>)>;

fn split(suspects: &[String], good: &[String]) -> Option<(Vec<String>, Vec<String>, Subsets)> {
    let (s1, s2) = halves(suspects);
    let size = s1.len().max(2);
    let mut pool = good.iter().cloned();
    let mut pad = |mut s: Vec<String>| -> Option<Vec<String>> {
        while s.len() < size {
            s.push(pool.next()?);
        }
        Some(s)
    };
    let (a, b) = (pad(s1.clone())?, pad(s2.clone())?);
    let reference: Vec<String> = pool.take(size).collect();
    let mut subsets = vec![("half".to_string(), a), ("half".to_string(), b)];
    if reference.len() == size {
        subsets.push(("reference".into(), reference));
    }
    Some((s1, s2, subsets))
}

/// Bisection of `hosts` by all-reduces on sub-communicators; returns the
/// host found, if any, and appends its steps.
fn bisect(
    measurer: &mut dyn Measurer,
    endpoints: &[Endpoint],
    hosts_in_order: &[String],
    cfg: &FinderConfig,
    round: &mut usize,
    steps: &mut Vec<BisectStep>,
) -> Result<Option<Finding>, Error> {
    let mut rounds = Rounds {
        measurer,
        ranks_of: hosts(endpoints).into_iter().collect(),
        probe: cfg.probe.with_samples(cfg.confirm_samples),
        rule: cfg.rule,
        round,
    };
    // Step 1: the two halves against each other.
    let (h1, h2) = halves(hosts_in_order);
    let mut step = rounds.run(vec![("half".into(), h1.clone()), ("half".into(), h2.clone())])?;
    let (mut suspects, mut good) = match rounds.judge(&mut step) {
        Verdict::First => (h1, h2),
        Verdict::Second => (h2, h1),
        Verdict::Neither => {
            step.outcome = "the halves' all-reduces agree: no host slows collectives alone".into();
            steps.push(step);
            return Ok(None);
        }
    };
    step.outcome = format!("the half with {} is slower", list_hosts(&suspects));
    let mut path = vec![step.clone()];
    steps.push(step);
    // Then the slower part, halved, beside a known-good reference.
    while suspects.len() > 1 {
        let Some((s1, s2, subsets)) = split(&suspects, &good) else {
            break;
        };
        let mut step = rounds.run(subsets)?;
        let (bad, fine) = match rounds.judge(&mut step) {
            Verdict::First => (s1, s2),
            Verdict::Second => (s2, s1),
            Verdict::Neither => {
                step.outcome = format!(
                    "neither part is slower: the fault among {} shows only with all of them",
                    list_hosts(&suspects)
                );
                steps.push(step);
                return Ok(None);
            }
        };
        if step.outcome.is_empty() {
            step.outcome = format!("the subset with {} is slower", list_hosts(&bad));
        }
        good.extend(fine);
        suspects = bad;
        path.push(step.clone());
        steps.push(step);
    }
    let [host] = suspects.as_slice() else {
        return Ok(None);
    };
    Ok(Some(Finding {
        kind: FindingKind::Collective,
        hosts: vec![host.clone()],
        endpoints: endpoints.iter().filter(|e| &e.host == host).cloned().collect(),
        evidence: Vec::new(),
        retests: Vec::new(),
        links: Vec::new(),
        steps: path,
    }))
}

fn list_hosts(hosts: &[String]) -> String {
    if hosts.len() <= 3 {
        hosts.join(", ")
    } else {
        format!("{}, ... ({} hosts)", hosts[..2].join(", "), hosts.len())
    }
}
