//! The finder's re-tests: which suspects the matrix gives, in which
//! rounds they are re-tested against known-good partners, each beside a
//! matched control, and what the re-tests say (docs/links.md, "The
//! finder", step 3).

use std::collections::{BTreeMap, BTreeSet};

use super::Endpoint;
use super::finder::{Dismissed, Evidence, FinderConfig, Finding, FindingKind, Retest};
use super::layout::{Layout, PairClass};
use super::measure::PairResult;
use super::rule::{Analysis, Domain, Metric, PairCheck};
use super::schedule::{Level, Pair};

/// A suspect from the matrix, over the metrics it was flagged on.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Suspect {
    /// Re-tested in `domain` on `metrics`; `also`: flagged in the other
    /// domain too (kept as evidence).
    Rank {
        rank: usize,
        domain: Domain,
        metrics: Vec<Metric>,
        also: Vec<(Domain, Metric)>,
    },
    Pair {
        pair: Pair,
        metrics: Vec<Metric>,
    },
}

/// The re-test rounds, and what each re-test is for.
#[derive(Debug, Default)]
pub(super) struct RetestPlan {
    pub rounds: Vec<Vec<Pair>>,
    /// (round index, pair) -> the suspect it re-tests (index into the
    /// suspects), or None for a control.
    purpose: BTreeMap<(usize, Pair), Option<usize>>,
    /// (round index, re-test) -> its matched control.
    matched: BTreeMap<(usize, Pair), Pair>,
    pub notes: Vec<String>,
}

/// A rank suspect the re-tests bore out.
struct Confirmed {
    rank: usize,
    /// The domain it was re-tested in.
    domain: Domain,
    /// What the matrix showed: confirmed metrics, and the other domain's.
    evidence: Vec<(Domain, Metric)>,
    retests: Vec<Retest>,
}

pub(super) struct Context<'a> {
    pub endpoints: &'a [Endpoint],
    pub layout: &'a Layout,
    pub level: Level,
    pub analysis: &'a Analysis,
    pub cfg: &'a FinderConfig,
}

impl Context<'_> {
    pub(super) fn suspects(&self) -> Vec<Suspect> {
        // a rank suspect in both domains is re-tested across the network,
        // its slowness on its own host kept as evidence
        let mut ranks: BTreeMap<usize, Vec<(Domain, Metric)>> = BTreeMap::new();
        for u in self.analysis.unit_suspects() {
            ranks.entry(u.rank).or_default().push((u.domain, u.metric));
        }
        let mut pairs: BTreeMap<Pair, Vec<Metric>> = BTreeMap::new();
        for p in self.analysis.pair_suspects() {
            pairs.entry(p.pair).or_default().push(p.metric);
        }
        ranks
            .into_iter()
            .map(|(rank, checks)| {
                let domain = checks.iter().map(|c| c.0).min().unwrap_or(Domain::Network);
                let (mine, also): (Vec<_>, Vec<_>) = checks.into_iter().partition(|c| c.0 == domain);
                Suspect::Rank {
                    rank,
                    domain,
                    metrics: mine.into_iter().map(|c| c.1).collect(),
                    also,
                }
            })
            .chain(pairs.into_iter().map(|(pair, metrics)| Suspect::Pair { pair, metrics }))
            .collect()
    }

    /// Whether `x` and `y` can pair in `domain` at this level.
    fn compatible(&self, x: usize, y: usize, domain: Domain) -> bool {
        let (ex, ey) = (&self.endpoints[x], &self.endpoints[y]);
        match domain {
            Domain::IntraHost => x != y && ex.host == ey.host,
            Domain::Network => ex.host != ey.host && (self.level != Level::Rail || ex.local == ey.local),
        }
    }

    /// Ranks in no suspect and no low pair, the closest to the fleet first.
    fn good(&self, units: &[usize]) -> Vec<usize> {
        let involved = self.analysis.involved();
        let mut good: Vec<(f64, usize)> = units
            .iter()
            .filter(|r| !involved.contains(r))
            .map(|&r| (self.analysis.unit_distance(r).unwrap_or(f64::INFINITY), r))
            .collect();
        good.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        good.into_iter().map(|(_, r)| r).collect()
    }

    /// Partners for a rank suspect when the known-good ranks run out: the
    /// ends of low pairs that are not suspect themselves, the closest to
    /// the fleet first. At a few nodes one spurious low pair among the
    /// fast ones would otherwise leave a slow node no partner at all.
    fn fallback(&self, units: &[usize], good: &[usize]) -> Vec<usize> {
        let suspects: BTreeSet<usize> = self.analysis.unit_suspects().map(|u| u.rank).collect();
        let mut more: Vec<(f64, usize)> = units
            .iter()
            .filter(|r| !suspects.contains(r) && !good.contains(r))
            .map(|&r| (self.analysis.unit_distance(r).unwrap_or(f64::INFINITY), r))
            .collect();
        more.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        more.into_iter().map(|(_, r)| r).collect()
    }

    /// The re-test rounds: `partners` of them (two when there are pair
    /// suspects). In each, first every rank suspect with its next
    /// known-good partner, then the pair suspects that fit, then the ends
    /// of pairs re-tested in an earlier round with a known-good partner
    /// each; then, beside each re-test, its matched control. A pair
    /// suspect that fits in no round is left untested (and so never named).
    pub(super) fn plan_retests(&self, suspects: &[Suspect], units: &[usize]) -> RetestPlan {
        let mut plan = RetestPlan::default();
        if suspects.is_empty() {
            return plan;
        }
        let good = self.good(units);
        let partners: Vec<usize> = good.iter().copied().chain(self.fallback(units, &good)).collect();
        let pairs_suspected = suspects.iter().any(|s| matches!(s, Suspect::Pair { .. }));
        let total = self.cfg.partners.max(1).max(if pairs_suspected { 2 } else { 1 });
        // (suspect, rank to pair with a known-good partner, domain, times left)
        let mut rank_tasks: Vec<(usize, usize, Domain, usize)> = Vec::new();
        let mut end_tasks: Vec<(usize, usize, Domain, usize)> = Vec::new();
        // (suspect, pair, re-tests left)
        let mut pair_tasks: Vec<(usize, Pair, usize)> = Vec::new();
        for (i, s) in suspects.iter().enumerate() {
            match s {
                Suspect::Rank { rank, domain, .. } => rank_tasks.push((i, *rank, *domain, self.cfg.partners)),
                Suspect::Pair { pair, .. } => {
                    let domain = Domain::of(self.analysis.class(*pair).unwrap_or(PairClass::InterHost));
                    let known = [pair.a, pair.b]
                        .iter()
                        .all(|&r| self.analysis.partners(r, domain) >= ENDS_KNOWN_PARTNERS);
                    if known {
                        // the matrix vouches for the ends: the pair itself twice
                        pair_tasks.push((i, *pair, 2));
                    } else {
                        pair_tasks.push((i, *pair, 1));
                        end_tasks.push((i, pair.a, domain, 1));
                        end_tasks.push((i, pair.b, domain, 1));
                    }
                }
            }
        }
        pair_tasks.sort_by(|x, y| self.severity(y.1).total_cmp(&self.severity(x.1)));
        let mut used: BTreeSet<Pair> = BTreeSet::new();
        let mut pair_round: BTreeMap<usize, usize> = BTreeMap::new();
        for round_index in 0..total {
            let mut busy: BTreeSet<usize> = BTreeSet::new();
            let mut round: Vec<(Pair, Option<usize>)> = Vec::new();
            let mut with_partner = |task: &mut (usize, usize, Domain, usize),
                                    busy: &mut BTreeSet<usize>,
                                    round: &mut Vec<(Pair, Option<usize>)>| {
                let (i, rank, domain, left) = *task;
                if left == 0 || busy.contains(&rank) {
                    return;
                }
                let partner = partners.iter().copied().find(|&g| {
                    !busy.contains(&g) && self.compatible(rank, g, domain) && !used.contains(&Pair::new(rank, g))
                });
                if let Some(g) = partner {
                    busy.insert(rank);
                    busy.insert(g);
                    used.insert(Pair::new(rank, g));
                    round.push((Pair::new(rank, g), Some(i)));
                    task.3 -= 1;
                }
            };
            // pairs re-tested fewer times first, the worst first among equals
            pair_tasks.sort_by_key(|t| pair_round.contains_key(&t.0));
            // In the first round, a pair suspect at a suspect rank goes
            // before that rank's re-tests, which then take the later
            // rounds: otherwise the rank would hold its end in every
            // round, and a slow link whose end looks slow (a few partners,
            // one of them the link) would never be re-tested itself.
            if round_index == 0 && total > 1 {
                let suspect_ranks: BTreeSet<usize> = rank_tasks.iter().map(|t| t.1).collect();
                for task in pair_tasks.iter_mut() {
                    let (i, p, left) = *task;
                    let shared = suspect_ranks.contains(&p.a) || suspect_ranks.contains(&p.b);
                    if left == 0 || !shared || busy.contains(&p.a) || busy.contains(&p.b) {
                        continue;
                    }
                    busy.insert(p.a);
                    busy.insert(p.b);
                    round.push((p, Some(i)));
                    pair_round.entry(i).or_insert(round_index);
                    task.2 -= 1;
                }
            }
            for task in rank_tasks.iter_mut() {
                with_partner(task, &mut busy, &mut round);
            }
            for task in pair_tasks.iter_mut() {
                let (i, p, left) = *task;
                if left == 0 || busy.contains(&p.a) || busy.contains(&p.b) {
                    continue;
                }
                busy.insert(p.a);
                busy.insert(p.b);
                round.push((p, Some(i)));
                pair_round.entry(i).or_insert(round_index);
                task.2 -= 1;
            }
            for task in end_tasks.iter_mut() {
                if pair_round.get(&task.0).is_some_and(|&r| r < round_index) {
                    with_partner(task, &mut busy, &mut round);
                }
            }
            if round.is_empty() {
                break;
            }
            let tests: Vec<Pair> = round.iter().map(|(p, _)| *p).collect();
            for p in tests {
                if let Some(c) = self.matched_control(p, &partners, &mut busy) {
                    round.push((c, None));
                    plan.matched.insert((round_index, p), c);
                }
            }
            for (p, purpose) in &round {
                plan.purpose.insert((round_index, *p), *purpose);
            }
            plan.rounds.push(round.into_iter().map(|(p, _)| p).collect());
        }
        let short = rank_tasks.iter().filter(|t| t.3 > 0).count();
        if short > 0 {
            plan.notes.push(format!(
                "{short} suspect rank{} could not be re-tested with {} known-good partners (too few ranks outside the suspects)",
                if short == 1 { "" } else { "s" },
                self.cfg.partners
            ));
        }
        let untested = pair_tasks.iter().filter(|t| !pair_round.contains_key(&t.0)).count();
        if untested > 0 {
            plan.notes.push(format!(
                "{untested} suspect pair{} shared a rank with other suspects in every re-test round and could not be re-tested",
                if untested == 1 { "" } else { "s" }
            ));
        }
        plan
    }

    /// The median goodness, less its ends' effects, of the matrix's pairs
    /// of `class` on `metric` that touch no suspect rank; `None` when
    /// there is none.
    fn clean_level(&self, class: PairClass, metric: Metric) -> Option<f64> {
        let suspects: BTreeSet<usize> = self.analysis.unit_suspects().map(|u| u.rank).collect();
        let domain = Domain::of(class);
        let mut g: Vec<f64> = self
            .analysis
            .pairs
            .iter()
            .filter(|p| p.metric == metric && self.analysis.class_like(p.class) == class)
            .filter(|p| !suspects.contains(&p.pair.a) && !suspects.contains(&p.pair.b))
            .map(|p| {
                metric.goodness(p.value)
                    - self.analysis.effect(p.pair.a, domain, metric)
                    - self.analysis.effect(p.pair.b, domain, metric)
            })
            .filter(|x| x.is_finite())
            .collect();
        if g.is_empty() {
            return None;
        }
        g.sort_by(f64::total_cmp);
        let n = g.len();
        Some(if n % 2 == 1 {
            g[n / 2]
        } else {
            (g[n / 2 - 1] + g[n / 2]) / 2.0
        })
    }

    /// How far below expected a pair is at worst over the metrics, percent.
    fn severity(&self, pair: Pair) -> f64 {
        Metric::ALL
            .iter()
            .filter_map(|m| self.analysis.check(pair, *m))
            .map(|c| c.deficit_pct)
            .fold(f64::NEG_INFINITY, f64::max)
    }

    /// A control for re-test `p`: a pair of free known-good ranks at the
    /// same places (each end's rack and leaf, its host for a pair on one
    /// host, its rail), measured at the same time, so that whatever the
    /// round does to that path (a crowded uplink) it does to both.
    fn matched_control(&self, p: Pair, good: &[usize], busy: &mut BTreeSet<usize>) -> Option<Pair> {
        let class = self.analysis.class_like(self.layout.class(p.a, p.b));
        let domain = Domain::of(class);
        let like = |c: usize, x: usize| {
            let (ec, ex) = (&self.endpoints[c], &self.endpoints[x]);
            !busy.contains(&c)
                && self.layout.place(c) == self.layout.place(x)
                && (domain == Domain::Network || ec.host == ex.host)
                && (self.level != Level::Rail || ec.local == ex.local)
        };
        let firsts: Vec<usize> = good.iter().copied().filter(|&c| like(c, p.a)).collect();
        let seconds: Vec<usize> = good.iter().copied().filter(|&d| like(d, p.b)).collect();
        let (c, d) = firsts.iter().find_map(|&c| {
            seconds
                .iter()
                .copied()
                .find(|&d| {
                    d != c
                        && self.compatible(c, d, domain)
                        && self.analysis.class_like(self.layout.class(c, d)) == class
                })
                .map(|d| (c, d))
        })?;
        busy.insert(c);
        busy.insert(d);
        Some(Pair::new(c, d))
    }

    /// Each re-test against what its matched control and the matrix
    /// predict: the control's median less its ends' matrix effects, plus
    /// the effects of the pair's ranks other than the suspect under test
    /// (both ends, for a suspect pair and its ends' re-tests), so that a
    /// pair suspect at a slow node is judged on what is left after the
    /// node. A re-test whose control could not be placed is not judged.
    fn retest_checks(
        &self,
        suspects: &[Suspect],
        plan: &RetestPlan,
        results: &[PairResult],
        first_round: usize,
    ) -> Vec<(usize, Retest)> {
        let mut out = Vec::new();
        let measured: BTreeMap<(usize, Pair), &PairResult> =
            results.iter().map(|r| ((r.round - first_round, r.pair), r)).collect();
        for metric in Metric::ALL {
            for r in results {
                let idx = r.round - first_round;
                let Some(Some(suspect)) = plan.purpose.get(&(idx, r.pair)) else {
                    continue;
                };
                let Some(e) = r.estimate(metric) else { continue };
                let class = self.analysis.class_like(self.layout.class(r.pair.a, r.pair.b));
                let matrix_ref = self.analysis.reference(class, metric);
                let domain = Domain::of(class);
                let effects =
                    |p: Pair| self.analysis.effect(p.a, domain, metric) + self.analysis.effect(p.b, domain, metric);
                // the matched control, less its own ends' effects; without
                // one (too few ranks free at a few nodes), the matrix's
                // pairs of the class that touch no suspect rank
                let control = plan
                    .matched
                    .get(&(idx, r.pair))
                    .and_then(|c| Some((*c, measured.get(&(idx, *c))?.estimate(metric)?.median)));
                let reference_g = match control {
                    Some((control, value)) => metric.goodness(value) - effects(control),
                    None => match self.clean_level(class, metric) {
                        Some(g) => g,
                        None => continue,
                    },
                };
                let sd = matrix_ref.map_or(0.0, |m| m.resid_sd);
                let adjust: f64 = [r.pair.a, r.pair.b]
                    .into_iter()
                    .filter(|&x| !matches!(suspects[*suspect], Suspect::Rank { rank, .. } if rank == x))
                    .map(|x| self.analysis.effect(x, domain, metric))
                    .sum();
                let expected = reference_g + adjust;
                let reference = match metric {
                    Metric::Latency => (-expected).exp(),
                    _ => expected.exp(),
                };
                let delta = metric.goodness(e.median) - expected;
                let best = match metric {
                    Metric::Latency => e.lo,
                    _ => e.hi,
                };
                let below = best.is_none_or(|b| metric.goodness(b) < expected);
                out.push((
                    *suspect,
                    Retest {
                        round: r.round,
                        pair: r.pair,
                        metric,
                        value: e.median,
                        lo: e.lo,
                        hi: e.hi,
                        reference,
                        deficit_pct: (1.0 - delta.exp()) * 100.0,
                        low: self.cfg.rule.worse(delta, sd) && below,
                    },
                ));
            }
        }
        out
    }

    pub(super) fn judge(
        &self,
        suspects: &[Suspect],
        plan: &RetestPlan,
        results: &[PairResult],
    ) -> (Vec<Finding>, Vec<Dismissed>) {
        let first_round = results.iter().map(|r| r.round).min().unwrap_or(0);
        let checks = self.retest_checks(suspects, plan, results, first_round);
        let mut confirmed_ranks: Vec<Confirmed> = Vec::new();
        let mut findings = Vec::new();
        let mut dismissed = Vec::new();
        for (i, s) in suspects.iter().enumerate() {
            let mine: Vec<&Retest> = checks.iter().filter(|c| c.0 == i).map(|c| &c.1).collect();
            match s {
                Suspect::Rank {
                    rank,
                    domain,
                    metrics,
                    also,
                } => {
                    let tests: Vec<Retest> = mine
                        .iter()
                        .filter(|r| metrics.contains(&r.metric))
                        .map(|r| (*r).clone())
                        .collect();
                    let ok: Vec<Metric> = metrics
                        .iter()
                        .copied()
                        .filter(|m| {
                            let t: Vec<&Retest> = tests.iter().filter(|r| r.metric == *m).collect();
                            !t.is_empty() && t.iter().all(|r| r.low)
                        })
                        .collect();
                    if ok.is_empty() {
                        dismissed.push(Dismissed {
                            what: format!("rank {}", self.endpoints[*rank].name()),
                            why: why_not(&tests, "with known-good partners", "no known-good partner was free"),
                        });
                    } else {
                        let mut evidence: Vec<(Domain, Metric)> = ok.iter().map(|m| (*domain, *m)).collect();
                        evidence.extend(also.iter().copied());
                        confirmed_ranks.push(Confirmed {
                            rank: *rank,
                            domain: *domain,
                            evidence,
                            retests: tests,
                        });
                    }
                }
                Suspect::Pair { pair, metrics } => {
                    let tests: Vec<Retest> = mine
                        .iter()
                        .filter(|r| metrics.contains(&r.metric))
                        .map(|r| (*r).clone())
                        .collect();
                    let itself: Vec<&Retest> = tests.iter().filter(|r| r.pair == *pair).collect();
                    let ends_low: Vec<&Retest> = tests.iter().filter(|r| r.pair != *pair && r.low).collect();
                    let ok: Vec<Metric> = metrics
                        .iter()
                        .copied()
                        .filter(|m| {
                            let t: Vec<&&Retest> = itself.iter().filter(|r| r.metric == *m).collect();
                            !t.is_empty() && t.iter().all(|r| r.low)
                        })
                        .filter(|m| !ends_low.iter().any(|r| r.metric == *m))
                        .collect();
                    let name = format!(
                        "link {} - {}",
                        self.endpoints[pair.a].name(),
                        self.endpoints[pair.b].name()
                    );
                    if ok.is_empty() {
                        let why = if let Some(end) = ends_low.first() {
                            format!(
                                "its end {} was also slow with a known-good partner ({:.0}% below): not a fault of this pair alone",
                                end.pair, end.deficit_pct
                            )
                        } else {
                            why_not(
                                &itself.iter().map(|r| (*r).clone()).collect::<Vec<_>>(),
                                "when re-tested",
                                "it shared a rank with other suspects in every re-test round",
                            )
                        };
                        dismissed.push(Dismissed { what: name, why });
                    } else {
                        findings.push(Finding {
                            kind: FindingKind::Link,
                            hosts: vec![self.endpoints[pair.a].host.clone(), self.endpoints[pair.b].host.clone()],
                            endpoints: vec![self.endpoints[pair.a].clone(), self.endpoints[pair.b].clone()],
                            evidence: ok.iter().filter_map(|m| self.pair_evidence(*pair, *m)).collect(),
                            retests: tests,
                            steps: Vec::new(),
                        });
                    }
                }
            }
        }
        // a link at a confirmed slow rank is that rank's slowness seen
        // through one partner (the rank's re-tests carry the evidence)
        let slow: BTreeSet<usize> = confirmed_ranks.iter().map(|c| c.rank).collect();
        let (links, kept): (Vec<Finding>, Vec<Finding>) = findings
            .into_iter()
            .partition(|f| f.kind == FindingKind::Link && f.endpoints.iter().any(|e| slow.contains(&e.rank)));
        let mut findings = kept;
        for f in links {
            let at = f
                .endpoints
                .iter()
                .find(|e| slow.contains(&e.rank))
                .map_or(0, |e| e.rank);
            dismissed.push(Dismissed {
                what: format!("link {} - {}", f.endpoints[0].name(), f.endpoints[1].name()),
                why: format!(
                    "slow again, but its end {} is slow with known-good partners too: not a fault of this pair alone",
                    self.endpoints[at].name()
                ),
            });
        }
        findings.extend(self.rank_findings(confirmed_ranks));
        (findings, dismissed)
    }

    /// Confirmed slow ranks as findings: a host when most of its measured
    /// ranks are slow across the network (or it has one measured rank), else
    /// each rank's GPU or NIC.
    fn rank_findings(&self, confirmed: Vec<Confirmed>) -> Vec<Finding> {
        let measured_per_host: BTreeMap<&str, usize> = {
            let mut m = BTreeMap::new();
            for u in &self.layout.order {
                *m.entry(self.endpoints[*u].host.as_str()).or_default() += 1;
            }
            m
        };
        let mut by_host: BTreeMap<String, Vec<Confirmed>> = BTreeMap::new();
        for c in confirmed {
            by_host.entry(self.endpoints[c.rank].host.clone()).or_default().push(c);
        }
        let evidence = |c: &Confirmed| -> Vec<Evidence> {
            c.evidence
                .iter()
                .filter_map(|(d, m)| self.rank_evidence(c.rank, *d, *m))
                .collect()
        };
        let mut out = Vec::new();
        for (host, ranks) in by_host {
            let network: Vec<&Confirmed> = ranks.iter().filter(|c| c.domain == Domain::Network).collect();
            let measured = measured_per_host.get(host.as_str()).copied().unwrap_or(1);
            let whole = !network.is_empty() && (measured <= 1 || 2 * network.len() > measured);
            if whole {
                out.push(Finding {
                    kind: FindingKind::Node,
                    hosts: vec![host.clone()],
                    endpoints: network.iter().map(|c| self.endpoints[c.rank].clone()).collect(),
                    evidence: network.iter().flat_map(|c| evidence(c)).collect(),
                    retests: network.iter().flat_map(|c| c.retests.iter().cloned()).collect(),
                    steps: Vec::new(),
                });
            }
            for c in ranks.iter().filter(|c| !(whole && c.domain == Domain::Network)) {
                out.push(Finding {
                    kind: FindingKind::Gpu,
                    hosts: vec![host.clone()],
                    endpoints: vec![self.endpoints[c.rank].clone()],
                    evidence: evidence(c),
                    retests: c.retests.clone(),
                    steps: Vec::new(),
                });
            }
        }
        out
    }

    fn pair_evidence(&self, pair: Pair, metric: Metric) -> Option<Evidence> {
        let p = self.analysis.check(pair, metric)?;
        Some(Evidence {
            metric,
            class: p.class,
            value: p.value,
            lo: p.lo,
            hi: p.hi,
            reference: p.reference,
            deficit_pct: p.below_reference_pct,
            low_pairs: 1,
            pairs: 1,
            worst: vec![(pair, p.value)],
        })
    }

    fn rank_evidence(&self, rank: usize, domain: Domain, metric: Metric) -> Option<Evidence> {
        let u = self
            .analysis
            .units
            .iter()
            .find(|u| u.rank == rank && u.domain == domain && u.metric == metric)?;
        let mut mine: Vec<&PairCheck> = self
            .analysis
            .pairs
            .iter()
            .filter(|p| p.metric == metric && p.pair.has(rank) && Domain::of(p.class) == domain)
            .collect();
        mine.sort_by(|a, b| b.below_reference_pct.total_cmp(&a.below_reference_pct));
        let class = mine.first()?.class;
        let reference = self.analysis.reference(class, metric)?.median;
        // the rank's median pair, in the metric's unit, and its interval
        let to_value = |ratio: f64| match metric {
            Metric::Latency => reference / ratio,
            _ => reference * ratio,
        };
        let (lo, hi) = match metric {
            Metric::Latency => (u.ratio.hi.map(to_value), u.ratio.lo.map(to_value)),
            _ => (u.ratio.lo.map(to_value), u.ratio.hi.map(to_value)),
        };
        Some(Evidence {
            metric,
            class,
            value: to_value(u.ratio.median),
            lo,
            hi,
            reference,
            deficit_pct: (1.0 - u.ratio.median) * 100.0,
            low_pairs: u.low_partners,
            pairs: u.partners,
            worst: mine.iter().take(3).map(|p| (p.pair, p.value)).collect(),
        })
    }
}

/// Why re-tests did not confirm a suspect, in one line.
fn why_not(tests: &[Retest], how: &str, none: &str) -> String {
    if tests.is_empty() {
        return format!("not re-tested: {none}");
    }
    let parts: Vec<String> = tests
        .iter()
        .map(|t| format!("{} {} {:+.0}%", t.pair, t.metric, -t.deficit_pct))
        .collect();
    format!("not slow {how}: {}", parts.join(", "))
}

/// A suspect pair whose ends each have this many partners in the matrix
/// is re-tested itself twice (two routing draws); with fewer, once, and its
/// ends with known-good partners.
const ENDS_KNOWN_PARTNERS: usize = 8;
