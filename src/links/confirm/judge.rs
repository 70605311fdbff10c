//! What the re-tests say: each re-test against its matched control and
//! the matrix, the suspects they confirm or dismiss, and the findings and
//! evidence that name them.

use std::collections::{BTreeMap, BTreeSet};

use super::{Context, RetestPlan, Suspect};
use crate::links::finder::{Dismissed, Evidence, Finding, FindingKind, Measured, Retest};
use crate::links::layout::PairClass;
use crate::links::measure::{Estimate, PairResult};
use crate::links::rule::{Domain, Metric, PairCheck};
use crate::links::schedule::Pair;

/// A re-test that could not be judged: (suspect, pair).
type Unjudged = (usize, Pair);

/// A link re-tested this many times slower than its slow end is with
/// known-good partners, on the same metric, is named as the link, not the
/// end.
const LINK_OVER_RANK: f64 = 2.0;

/// The worst slowdown among the re-tests found low (1.0 when none was).
fn slowdown(tests: &[Retest]) -> f64 {
    tests
        .iter()
        .filter(|r| r.low)
        .map(|r| 1.0 / (1.0 - r.measured.deficit_pct / 100.0).max(1e-9))
        .fold(1.0, f64::max)
}

/// A rank suspect the re-tests bore out.
struct Confirmed {
    rank: usize,
    /// The domain it was re-tested in.
    domain: Domain,
    /// What the matrix showed: confirmed metrics, and the other domain's.
    evidence: Vec<(Domain, Metric)>,
    retests: Vec<Retest>,
    /// Its judged re-tests on every metric, flagged or not: what a link
    /// at it is compared with, metric by metric.
    every: Vec<Retest>,
    /// Where it was named from its slow pairs (`shared_ends`): those.
    links: Vec<Pair>,
}

impl Context<'_> {
    /// Each re-test against what its matched control and the matrix
    /// predict: the control's median less its ends' matrix effects, plus
    /// the effects of the pair's ranks other than the rank under test (a
    /// rank suspect, or a suspect pair's end re-tested with a known-good
    /// partner; both ends for the suspect pair itself), so that a pair
    /// suspect at a slow node is judged on what is left after the node,
    /// and an end on what it is with another partner. A re-test is low only when it is also below its control
    /// itself by the rule's percentage: like with like, whatever the
    /// round did to both (a crowded uplink; on an oversubscribed host,
    /// which ranks share a core), since the matrix's effects were
    /// measured in other rounds. Where no known-good pair was free, the
    /// control is another re-test of the same round, and the
    /// re-test must be low against the matrix's pairs that touch no
    /// suspect too (that control may be slow itself). A re-test with
    /// neither is not judged: the second list holds (suspect, re-test).
    fn retest_checks(
        &self,
        suspects: &[Suspect],
        plan: &RetestPlan,
        results: &[PairResult],
        first_round: usize,
    ) -> (Vec<(usize, Retest)>, Vec<Unjudged>) {
        let mut out = Vec::new();
        let mut uncontrolled = Vec::new();
        let measured: BTreeMap<(usize, Pair), &PairResult> =
            results.iter().map(|r| ((r.round - first_round, r.pair), r)).collect();
        for metric in Metric::ALL {
            for r in results {
                let idx = r.round - first_round;
                let Some(Some(suspect)) = plan.purpose.get(&(idx, r.pair)) else {
                    continue;
                };
                let Some(e) = r.estimate(metric) else { continue };
                let control = plan
                    .matched
                    .get(&(idx, r.pair))
                    .and_then(|c| Some((*c, measured.get(&(idx, *c))?.estimate(metric)?.median)));
                let Some(control) = control else {
                    if !uncontrolled.contains(&(*suspect, r.pair)) {
                        uncontrolled.push((*suspect, r.pair));
                    }
                    continue;
                };
                let substitute = plan.substitute.contains(&(idx, r.pair));
                let retest = self.retest(&suspects[*suspect], r, e, metric, control, substitute);
                out.push((*suspect, retest));
            }
        }
        (out, uncontrolled)
    }

    /// One re-test `r` of `suspect` on `metric` (its estimate `e`) against
    /// its control (the pair, its median) measured in the same round.
    fn retest(
        &self,
        suspect: &Suspect,
        r: &PairResult,
        e: &Estimate,
        metric: Metric,
        (control, control_value): (Pair, f64),
        substitute: bool,
    ) -> Retest {
        let class = self.analysis.class_like(self.layout.class(r.pair.a, r.pair.b));
        let domain = Domain::of(class);
        let sd = self.analysis.reference(class, metric).map_or(0.0, |m| m.resid_sd);
        let effects = |p: Pair| self.analysis.effect(p.a, domain, metric) + self.analysis.effect(p.b, domain, metric);
        // the effects of the re-test's ranks other than the one under test:
        // a rank suspect, or the end of a suspect pair re-tested with a
        // known-good partner (its own effect would cancel what it tests)
        let under_test = match suspect {
            Suspect::Rank { rank, .. } => Some(*rank),
            Suspect::Pair { pair, .. } if *pair != r.pair => [r.pair.a, r.pair.b].into_iter().find(|&x| pair.has(x)),
            Suspect::Pair { .. } => None,
        };
        let adjust: f64 = [r.pair.a, r.pair.b]
            .into_iter()
            .filter(|&x| Some(x) != under_test)
            .map(|x| self.analysis.effect(x, domain, metric))
            .sum();
        let best = if metric.spec().lower_is_better { e.lo } else { e.hi };
        // below what `reference` (goodness, its ends' effects taken out)
        // predicts, past the rule, with the interval's best end below
        let low_against = |reference: f64| {
            let expected = reference + adjust;
            let delta = metric.goodness(e.median) - expected;
            let below = best.is_none_or(|b| metric.goodness(b) < expected);
            (expected, delta, self.cfg.rule.worse(delta, sd) && below)
        };
        let (expected, delta, low) = low_against(metric.goodness(control_value) - effects(control));
        // below the control measured beside it, by the percentage
        let beside = metric.goodness(e.median) - metric.goodness(control_value);
        let matrix_too = !substitute || self.clean_level(class, metric).is_none_or(|g| low_against(g).2);
        Retest {
            round: r.round,
            pair: r.pair,
            measured: Measured {
                metric,
                value: e.median,
                lo: e.lo,
                hi: e.hi,
                reference: metric.from_goodness(expected),
                deficit_pct: (1.0 - delta.exp()) * 100.0,
            },
            control: control_value,
            low: low && self.cfg.rule.worse(beside, 0.0) && matrix_too,
        }
    }

    pub(in crate::links) fn judge(
        &self,
        suspects: &[Suspect],
        plan: &RetestPlan,
        results: &[PairResult],
    ) -> (Vec<Finding>, Vec<Dismissed>) {
        let first_round = results.iter().map(|r| r.round).min().unwrap_or(0);
        let (checks, uncontrolled) = self.retest_checks(suspects, plan, results, first_round);
        let mut confirmed_ranks: Vec<Confirmed> = Vec::new();
        let mut findings = Vec::new();
        let mut dismissed = Vec::new();
        for (i, s) in suspects.iter().enumerate() {
            let mine: Vec<&Retest> = checks.iter().filter(|c| c.0 == i).map(|c| &c.1).collect();
            let none = match uncontrolled.iter().filter(|u| u.0 == i).count() {
                0 => None,
                n => Some(format!(
                    "{n} re-test(s) had no known-good pair free beside them in their round to compare with"
                )),
            };
            match s {
                Suspect::Rank {
                    rank,
                    domain,
                    metrics,
                    also,
                } => {
                    let none = none.as_deref().unwrap_or("no known-good partner was free");
                    if let Some(c) = self.judge_rank(*rank, *domain, metrics, also, (&mine, none), &mut dismissed) {
                        confirmed_ranks.push(c);
                    }
                }
                Suspect::Pair { pair, metrics } => {
                    let none = none
                        .as_deref()
                        .unwrap_or("it shared a rank with other suspects in every re-test round");
                    if let Some(f) = self.judge_pair(*pair, metrics, (&mine, none), &mut dismissed) {
                        findings.push(f);
                    }
                }
            }
        }
        let re_tested: BTreeSet<usize> = confirmed_ranks.iter().map(|c| c.rank).collect();
        let (findings, mut confirmed_ranks) = self.links_or_ranks(findings, confirmed_ranks, &mut dismissed);
        let judged: Vec<&Retest> = checks.iter().map(|c| &c.1).collect();
        let mut findings = self.ends_of_links(findings, &judged, &re_tested, &mut confirmed_ranks, &mut dismissed);
        findings.extend(self.rank_findings(confirmed_ranks));
        (findings, dismissed)
    }

    /// A rank suspect: confirmed on the metrics its re-tests with
    /// known-good partners all found low, else dismissed (`none`: why,
    /// when no re-test of it was judged).
    fn judge_rank(
        &self,
        rank: usize,
        domain: Domain,
        metrics: &[Metric],
        also: &[(Domain, Metric)],
        (mine, none): (&[&Retest], &str),
        dismissed: &mut Vec<Dismissed>,
    ) -> Option<Confirmed> {
        let tests = on_metrics(mine, metrics);
        let ok: Vec<Metric> = metrics.iter().copied().filter(|m| all_low(&tests, *m)).collect();
        if ok.is_empty() {
            dismissed.push(Dismissed {
                what: format!("rank {}", self.endpoints[rank].name()),
                rank: Some(rank),
                pair: None,
                retested: !tests.is_empty(),
                why: why_not(&tests, "with known-good partners", none),
            });
            None
        } else {
            let mut evidence: Vec<(Domain, Metric)> = ok.iter().map(|m| (domain, *m)).collect();
            evidence.extend(also.iter().copied());
            Some(Confirmed {
                rank,
                domain,
                evidence,
                retests: tests,
                every: mine.iter().map(|r| (*r).clone()).collect(),
                links: Vec::new(),
            })
        }
    }

    /// A pair suspect: a link finding on the metrics its own re-tests all
    /// found low and neither end's re-tests did, else dismissed (`none`:
    /// why, when no re-test of it was judged).
    fn judge_pair(
        &self,
        pair: Pair,
        metrics: &[Metric],
        (mine, none): (&[&Retest], &str),
        dismissed: &mut Vec<Dismissed>,
    ) -> Option<Finding> {
        let tests = on_metrics(mine, metrics);
        let itself: Vec<&Retest> = tests.iter().filter(|r| r.pair == pair).collect();
        // an end slow with its partner on a metric, unless the link is far
        // slower still on it (an end's re-test beside the other end's, at
        // a few nodes, can be low by the round's noise)
        let own_on = |m: Metric| -> Vec<Retest> {
            itself
                .iter()
                .filter(|r| r.measured.metric == m)
                .map(|r| (*r).clone())
                .collect()
        };
        let ends_low: Vec<&Retest> = tests
            .iter()
            .filter(|r| r.pair != pair && r.low)
            .filter(|r| !far_slower(&own_on(r.measured.metric), &[*r], slowdown(std::slice::from_ref(*r))))
            .collect();
        let ok: Vec<Metric> = metrics
            .iter()
            .copied()
            .filter(|m| all_low(itself.iter().copied(), *m))
            .filter(|m| !ends_low.iter().any(|r| r.measured.metric == *m))
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
                    end.pair, end.measured.deficit_pct
                )
            } else {
                why_not(
                    &itself.iter().map(|r| (*r).clone()).collect::<Vec<_>>(),
                    "when re-tested",
                    none,
                )
            };
            dismissed.push(Dismissed {
                what: name,
                rank: None,
                pair: Some(pair),
                retested: !itself.is_empty() || !ends_low.is_empty(),
                why,
            });
            None
        } else {
            Some(Finding {
                kind: FindingKind::Link,
                hosts: vec![self.endpoints[pair.a].host.clone(), self.endpoints[pair.b].host.clone()],
                endpoints: vec![self.endpoints[pair.a].clone(), self.endpoints[pair.b].clone()],
                evidence: ok.iter().filter_map(|m| self.pair_evidence(pair, *m)).collect(),
                retests: tests,
                links: Vec::new(),
                steps: Vec::new(),
            })
        }
    }

    /// A link at a confirmed slow rank is that rank's slowness seen
    /// through one partner (the rank's re-tests carry the evidence),
    /// unless the link is far slower than the rank is with known-good
    /// partners on the same metric (`link_far_slower`): then it is the
    /// link, and the rank's milder slowness is what the link did to its
    /// figures (at a few nodes, one link is a third of a rank's pairs).
    /// Returns the findings kept and the ranks
    /// still confirmed; the rest go to `dismissed`.
    fn links_or_ranks(
        &self,
        findings: Vec<Finding>,
        confirmed_ranks: Vec<Confirmed>,
        dismissed: &mut Vec<Dismissed>,
    ) -> (Vec<Finding>, Vec<Confirmed>) {
        let mut kept = Vec::new();
        let mut links_kept: BTreeSet<usize> = BTreeSet::new();
        for f in findings {
            let at: Vec<&Confirmed> = confirmed_ranks
                .iter()
                .filter(|c| f.kind == FindingKind::Link && f.endpoints.iter().any(|e| e.rank == c.rank))
                .collect();
            if at.is_empty() {
                kept.push(f);
                continue;
            }
            let pair = Pair::new(f.endpoints[0].rank, f.endpoints[1].rank);
            let own: Vec<Retest> = f.retests.iter().filter(|r| r.pair == pair).cloned().collect();
            if link_far_slower(&own, &at) {
                links_kept.extend(at.iter().map(|c| c.rank));
                kept.push(f);
                continue;
            }
            let end = at[0].rank;
            dismissed.push(Dismissed {
                what: format!("link {} - {}", f.endpoints[0].name(), f.endpoints[1].name()),
                rank: None,
                pair: Some(pair),
                retested: true,
                why: format!(
                    "slow again, but its end {} is slow with known-good partners too: not a fault of this pair alone",
                    self.endpoints[end].name()
                ),
            });
        }
        let (confirmed_ranks, explained): (Vec<Confirmed>, Vec<Confirmed>) =
            confirmed_ranks.into_iter().partition(|c| !links_kept.contains(&c.rank));
        for c in explained {
            dismissed.push(Dismissed {
                what: format!("rank {}", self.endpoints[c.rank].name()),
                rank: Some(c.rank),
                pair: None,
                retested: true,
                why: format!(
                    "slow with known-good partners ({:.1}x at worst), but far less than its slow link: the link's",
                    slowdown(&c.retests)
                ),
            });
        }
        (kept, confirmed_ranks)
    }

    /// A rank two or more of whose pairs its re-tests found slow (a
    /// suspect link itself, or a link's end with a known-good partner), at
    /// least half of its partners, and none fine (`shared_ends`): that
    /// rank's slowness, not its links' (docs/links.md, "The finder"). The
    /// rule can flag a slow node's pairs and not the node (at 4 nodes,
    /// when the matrix's other pairs are noisy), and then no known-good
    /// partner is left free to re-test the node. The rank is confirmed
    /// from those re-tests, the links named at it are dismissed; ranks in
    /// `re_tested` (confirmed by their own re-tests) are
    /// `links_or_ranks`'.
    fn ends_of_links(
        &self,
        findings: Vec<Finding>,
        judged: &[&Retest],
        re_tested: &BTreeSet<usize>,
        ranks: &mut Vec<Confirmed>,
        dismissed: &mut Vec<Dismissed>,
    ) -> Vec<Finding> {
        let pair_of = |f: &Finding| Pair::new(f.endpoints[0].rank, f.endpoints[1].rank);
        let domain_of = |p: Pair| Domain::of(self.analysis.class(p).unwrap_or(PairClass::InterHost));
        let ends = shared_ends(judged, |rank, p| self.analysis.partners(rank, domain_of(p)), re_tested);
        let mut gone: BTreeSet<Pair> = BTreeSet::new();
        for (rank, pairs) in ends {
            let domain = domain_of(pairs[0]);
            let retests: Vec<Retest> = judged
                .iter()
                .filter(|r| r.low && pairs.contains(&r.pair))
                .map(|r| (*r).clone())
                .collect();
            let metrics: BTreeSet<Metric> = retests.iter().map(|r| r.measured.metric).collect();
            let name = self.endpoints[rank].name();
            let list: Vec<String> = pairs.iter().map(ToString::to_string).collect();
            dismissed.retain(|d| d.rank != Some(rank));
            for f in findings
                .iter()
                .filter(|f| f.kind == FindingKind::Link && pairs.contains(&pair_of(f)))
            {
                dismissed.push(Dismissed {
                    what: format!("link {} - {}", f.endpoints[0].name(), f.endpoints[1].name()),
                    rank: None,
                    pair: Some(pair_of(f)),
                    retested: true,
                    why: format!(
                        "slow again, and so were {} of the {} partners of its end {name} when re-tested ({}), \
                         none fine: that end's slowness, named instead",
                        pairs.len(),
                        self.analysis.partners(rank, domain),
                        list.join(", ")
                    ),
                });
                gone.insert(pair_of(f));
            }
            ranks.push(Confirmed {
                rank,
                domain,
                evidence: metrics.into_iter().map(|m| (domain, m)).collect(),
                retests,
                every: Vec::new(),
                links: pairs,
            });
        }
        findings
            .into_iter()
            .filter(|f| f.kind != FindingKind::Link || !gone.contains(&pair_of(f)))
            .collect()
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
                    links: network.iter().flat_map(|c| c.links.iter().copied()).collect(),
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
                    links: c.links.clone(),
                    steps: Vec::new(),
                });
            }
        }
        out
    }

    fn pair_evidence(&self, pair: Pair, metric: Metric) -> Option<Evidence> {
        let p = self.analysis.check(pair, metric)?;
        Some(Evidence {
            measured: Measured {
                metric,
                value: p.value,
                lo: p.lo,
                hi: p.hi,
                reference: p.reference,
                deficit_pct: p.below_reference_pct,
            },
            class: p.class,
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
        // a ratio of goodness (above 1: better) in the metric's unit
        let to_value = |ratio: f64| metric.from_goodness(metric.goodness(reference) + ratio.ln());
        let (lo, hi) = match metric.spec().lower_is_better {
            true => (u.ratio.hi.map(to_value), u.ratio.lo.map(to_value)),
            false => (u.ratio.lo.map(to_value), u.ratio.hi.map(to_value)),
        };
        Some(Evidence {
            measured: Measured {
                metric,
                value: to_value(u.ratio.median),
                lo,
                hi,
                reference,
                deficit_pct: (1.0 - u.ratio.median) * 100.0,
            },
            class,
            low_pairs: u.low_partners,
            pairs: u.partners,
            worst: mine.iter().take(3).map(|p| (p.pair, p.value)).collect(),
        })
    }
}

/// How many times slower a re-test was than the pair measured beside it
/// (its control), as measured.
fn beside(r: &Retest) -> f64 {
    (r.measured.metric.goodness(r.control) - r.measured.metric.goodness(r.measured.value)).exp()
}

/// Whether a link's own re-tests (`own`) show it far slower than its
/// confirmed end(s) `at` are with known-good partners (`far_slower`).
fn link_far_slower(own: &[Retest], at: &[&Confirmed]) -> bool {
    let theirs: Vec<&Retest> = at.iter().flat_map(|c| &c.every).collect();
    let rank_factor = at.iter().map(|c| slowdown(&c.retests)).fold(1.0, f64::max);
    far_slower(own, &theirs, rank_factor)
}

/// Whether a link's re-tests (`own`) show it far slower than its end's
/// other pairs' (`theirs`), on every metric it was found low on: more
/// than `LINK_OVER_RANK` times slower than the pair beside it, against
/// their most on that metric, **and** its best re-test that many times
/// below their worst, as measured. Like with like: a metric against its
/// like (a per-operation delay slows latency and bandwidth by different
/// factors); against a control of its own round, whatever the round did
/// to both (on 4 fake nodes a round's pairs run at up to half speed
/// together); and as measured, both pairs holding the slow end (a control
/// under load can be several times slower on latency one round than the
/// next); one measure alone, or one metric of several, is the round's
/// noise. A rate-limited link is far slower on what it limits by both; a
/// slow node's pairs on none.
/// Without a re-test of theirs on any of the link's metrics, its
/// slowdown against `their_slowdown`.
fn far_slower(own: &[Retest], theirs: &[&Retest], their_slowdown: f64) -> bool {
    let low: BTreeSet<Metric> = own.iter().filter(|r| r.low).map(|r| r.measured.metric).collect();
    let compared: Vec<bool> = low
        .into_iter()
        .filter_map(|m| {
            let link: Vec<&Retest> = own.iter().filter(|r| r.measured.metric == m).collect();
            let theirs: Vec<&Retest> = theirs.iter().copied().filter(|r| r.measured.metric == m).collect();
            if theirs.is_empty() {
                return None;
            }
            let beside_link = link.iter().map(|r| beside(r)).fold(f64::INFINITY, f64::min);
            let beside_theirs = theirs.iter().map(|r| beside(r)).fold(1.0, f64::max);
            let best_link = link
                .iter()
                .map(|r| m.goodness(r.measured.value))
                .fold(f64::NEG_INFINITY, f64::max);
            let worst_theirs = theirs
                .iter()
                .map(|r| m.goodness(r.measured.value))
                .fold(f64::INFINITY, f64::min);
            Some(beside_link > LINK_OVER_RANK * beside_theirs && best_link < worst_theirs - LINK_OVER_RANK.ln())
        })
        .collect();
    if compared.is_empty() {
        return slowdown(own) > LINK_OVER_RANK * their_slowdown;
    }
    compared.into_iter().all(|far| far)
}

/// The ranks to name instead of their links (`Context::ends_of_links`):
/// a rank not in `skip` with two or more pairs slow in the judged
/// re-tests (`judged`: a pair is slow on a metric every judged re-test of
/// it on that metric found low), at least half of its `partners` (the
/// rank, one of those pairs), no other pair of it fine in a judged
/// re-test on a metric those were slow on, and none of them far slower
/// than the others (`far_slower`: that one is a link, the others its
/// end's noise). Each with its slow pairs; the rank with the most first,
/// whose pairs then leave the count.
fn shared_ends(
    judged: &[&Retest],
    partners: impl Fn(usize, Pair) -> usize,
    skip: &BTreeSet<usize>,
) -> Vec<(usize, Vec<Pair>)> {
    let pairs: BTreeSet<Pair> = judged.iter().map(|r| r.pair).collect();
    let slow_on = |p: Pair| -> BTreeSet<Metric> {
        Metric::ALL
            .into_iter()
            .filter(|&m| all_low(judged.iter().copied().filter(|r| r.pair == p), m))
            .collect()
    };
    let mut left: BTreeSet<Pair> = pairs.iter().copied().filter(|&p| !slow_on(p).is_empty()).collect();
    let mut out = Vec::new();
    loop {
        let ends: BTreeSet<usize> = left.iter().flat_map(|p| [p.a, p.b]).collect();
        let mut best: Option<(usize, Vec<Pair>)> = None;
        for &rank in ends.difference(skip) {
            let slow: Vec<Pair> = left.iter().copied().filter(|p| p.has(rank)).collect();
            if slow.len() < 2 || 2 * slow.len() < partners(rank, slow[0]) {
                continue;
            }
            let metrics: BTreeSet<Metric> = slow.iter().flat_map(|&p| slow_on(p)).collect();
            let cleared = judged
                .iter()
                .any(|t| t.pair.has(rank) && !t.low && !slow.contains(&t.pair) && metrics.contains(&t.measured.metric));
            // a pair far slower than the rank's others is a link of its own
            let link = slow.iter().any(|&p| {
                let own: Vec<Retest> = judged.iter().filter(|r| r.pair == p).map(|r| (*r).clone()).collect();
                let others: Vec<&Retest> = judged
                    .iter()
                    .copied()
                    .filter(|r| r.pair != p && slow.contains(&r.pair))
                    .collect();
                let low: Vec<Retest> = others.iter().filter(|r| r.low).map(|r| (*r).clone()).collect();
                far_slower(&own, &others, slowdown(&low))
            });
            if !cleared && !link && best.as_ref().is_none_or(|b| slow.len() > b.1.len()) {
                best = Some((rank, slow));
            }
        }
        let Some((rank, slow)) = best else { break };
        left.retain(|p| !slow.contains(p));
        out.push((rank, slow));
    }
    out
}

/// The re-tests among `mine` on one of `metrics`.
fn on_metrics(mine: &[&Retest], metrics: &[Metric]) -> Vec<Retest> {
    mine.iter()
        .filter(|r| metrics.contains(&r.measured.metric))
        .map(|r| (*r).clone())
        .collect()
}

/// Whether `tests` re-tested `metric` and every one of them found it low.
fn all_low<'a>(tests: impl IntoIterator<Item = &'a Retest>, metric: Metric) -> bool {
    let on: Vec<&Retest> = tests.into_iter().filter(|r| r.measured.metric == metric).collect();
    !on.is_empty() && on.iter().all(|r| r.low)
}

/// Why re-tests did not confirm a suspect, in one line.
fn why_not(tests: &[Retest], how: &str, none: &str) -> String {
    if tests.is_empty() {
        return format!("not re-tested: {none}");
    }
    let parts: Vec<String> = tests
        .iter()
        .map(|t| format!("{} {} {:+.0}%", t.pair, t.measured.metric, -t.measured.deficit_pct))
        .collect();
    format!("not slow {how}: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A judged re-test of `pair` on `metric`: `value` beside a control
    /// at 1.0 (bandwidths) or 1.0 us (latency).
    fn retest(pair: (usize, usize), metric: Metric, value: f64, low: bool) -> Retest {
        let control = 1.0;
        Retest {
            round: 4,
            pair: Pair::new(pair.0, pair.1),
            measured: Measured {
                metric,
                value,
                lo: None,
                hi: None,
                reference: control,
                deficit_pct: (1.0 - (metric.goodness(value) - metric.goodness(control)).exp()) * 100.0,
            },
            control,
            low,
        }
    }

    /// `shared_ends` at 4 nodes (3 partners each), no rank skipped.
    fn ends(judged: &[Retest]) -> Vec<(usize, Vec<Pair>)> {
        let judged: Vec<&Retest> = judged.iter().collect();
        shared_ends(&judged, |_, _| 3, &BTreeSet::new())
    }

    fn pairs(of: &[(usize, usize)]) -> Vec<Pair> {
        of.iter().map(|&(a, b)| Pair::new(a, b)).collect()
    }

    #[test]
    fn two_slow_pairs_at_one_rank_none_fine_are_that_rank() {
        // a run on 4 simulated GPUs under load: the rule flagged rank 3's
        // pairs, not rank 3; 0-3 (latency) and 1-3 (uni) slow again, 1's
        // re-test with 2 fine, none of 3 with a known-good partner
        let judged = vec![
            retest((0, 3), Metric::Latency, 40.0, true),
            retest((1, 3), Metric::Uni, 0.04, true),
            retest((1, 2), Metric::Uni, 0.95, false),
        ];
        assert_eq!(ends(&judged), [(3, pairs(&[(0, 3), (1, 3)]))]);
        // another: one link suspect 0-3 slow again, its end 0 fine with 1,
        // its end 3 slow with 2 (each end's re-test the other's control)
        let link_and_end = vec![
            retest((0, 3), Metric::Uni, 0.05, true),
            retest((0, 1), Metric::Uni, 1.0, false),
            retest((2, 3), Metric::Uni, 0.05, true),
        ];
        assert_eq!(ends(&link_and_end), [(3, pairs(&[(0, 3), (2, 3)]))]);
        // a rate-limited link 30x slower, its end slow by 20% with a
        // known-good partner (noise): the link, not the end
        let rate_limited = vec![
            retest((1, 3), Metric::Uni, 1.0 / 30.0, true),
            retest((1, 2), Metric::Uni, 0.8, true),
        ];
        assert_eq!(ends(&rate_limited), []);
        // one slow pair stays a link, whatever its ends' re-tests
        assert_eq!(ends(&judged[1..]), []);
        assert_eq!(ends(&link_and_end[..2]), []);
        // a re-test of another pair of 3 fine on a metric its pairs were
        // slow on clears it; fine on another metric, or slow, it does not
        for (test, cleared) in [
            (retest((2, 3), Metric::Uni, 0.97, false), true),
            (retest((2, 3), Metric::Latency, 1.1, false), true),
            (retest((2, 3), Metric::Bidi, 0.97, false), false),
        ] {
            let mut with = judged.clone();
            with.push(test.clone());
            let want = if cleared {
                vec![]
            } else {
                vec![(3, pairs(&[(0, 3), (1, 3)]))]
            };
            assert_eq!(ends(&with), want, "{test:?}");
        }
        // a pair re-tested twice on a metric, slow once: not slow
        let mut twice = judged.clone();
        twice.push(retest((1, 3), Metric::Uni, 1.0, false));
        assert_eq!(ends(&twice), []);
        // under half of its partners (2 of 63): links
        let refs: Vec<&Retest> = judged.iter().collect();
        assert_eq!(shared_ends(&refs, |_, _| 63, &BTreeSet::new()), []);
        // a rank confirmed by its own re-tests is links_or_ranks' to judge
        assert_eq!(shared_ends(&refs, |_, _| 3, &BTreeSet::from([3])), []);
    }

    #[test]
    fn the_rank_with_the_most_slow_pairs_is_named_first() {
        // 0-3, 1-3, 2-3 and 0-1 slow: 3 takes its three; 0-1 is left, one
        // pair at each end, and stays a link
        let judged: Vec<Retest> = [(0, 1), (0, 3), (1, 3), (2, 3)]
            .into_iter()
            .map(|p| retest(p, Metric::Uni, 0.05, true))
            .collect();
        assert_eq!(ends(&judged), [(3, pairs(&[(0, 3), (1, 3), (2, 3)]))]);
    }

    #[test]
    fn a_round_slow_as_a_whole_makes_no_rank_slow() {
        // 0-1 and 2-3 re-tested beside each other, neither low: nothing
        let judged = vec![
            retest((0, 1), Metric::Uni, 0.5, false),
            retest((2, 3), Metric::Uni, 0.5, false),
        ];
        assert_eq!(ends(&judged), []);
    }

    fn confirmed(every: Vec<Retest>) -> Confirmed {
        Confirmed {
            rank: 3,
            domain: Domain::Network,
            evidence: vec![],
            retests: every
                .iter()
                .filter(|r| r.measured.metric == Metric::Uni)
                .cloned()
                .collect(),
            every,
            links: vec![],
        }
    }

    #[test]
    fn a_link_is_far_slower_than_its_end_only_on_a_metric_of_its_own() {
        // the run that named 1-3 on latency beside rank 3, which its
        // re-tests confirmed on bandwidth: the link 122x slower than the
        // pair beside it, rank 3 with a known-good partner 87x on latency
        // (and 20x on bandwidth)
        let link = vec![retest((1, 3), Metric::Latency, 122.0, true)];
        let rank = confirmed(vec![
            retest((0, 3), Metric::Uni, 0.05, true),
            retest((0, 3), Metric::Latency, 87.0, true),
        ]);
        assert!(!link_far_slower(&link, &[&rank]));
        let with_control = |mut r: Retest, control: f64| {
            r.control = control;
            r
        };
        // another: 1-3 low on bandwidth and latency, on bandwidth 29x slower
        // than its control (7.0 GB/s), rank 3 13x slower than its (3.5,
        // under load), as measured 0.24 against 0.26 GB/s; on latency as
        // slow as rank 3 is with a known-good partner: rank 3's
        let link = vec![
            with_control(retest((1, 3), Metric::Uni, 0.239, true), 7.01),
            with_control(retest((1, 3), Metric::Latency, 4229.0, true), 38.2),
        ];
        let rank = confirmed(vec![
            with_control(retest((2, 3), Metric::Uni, 0.263, true), 3.49),
            with_control(retest((2, 3), Metric::Latency, 4214.0, true), 33.3),
        ]);
        assert!(!link_far_slower(&link, &[&rank]));
        // a third: 2-3 on latency beside a control at 38 us, rank 3 with a
        // known-good partner beside one at 205 us (load): 93x against 16x
        // beside their controls, 3510 us against 3360 us as measured
        let link = vec![with_control(retest((2, 3), Metric::Latency, 3510.0, true), 37.8)];
        let rank = confirmed(vec![with_control(retest((1, 3), Metric::Latency, 3360.0, true), 205.0)]);
        assert!(!link_far_slower(&link, &[&rank]));
        // and a round at half speed: the link 5x its control, 2.2x below its
        // end's re-test as measured, its end 5x its own control
        let link = vec![with_control(retest((2, 3), Metric::Uni, 4.3, true), 21.0)];
        let rank = confirmed(vec![with_control(retest((1, 3), Metric::Uni, 9.6, true), 46.0)]);
        assert!(!link_far_slower(&link, &[&rank]));
        // a rate limit: the link 30x slower, its end fine on bandwidth
        let link = vec![retest((1, 3), Metric::Uni, 1.0 / 30.0, true)];
        let rank = confirmed(vec![
            retest((0, 3), Metric::Uni, 0.7, true),
            retest((0, 3), Metric::Latency, 1.0, false),
        ]);
        assert!(link_far_slower(&link, &[&rank]));
        // as slow as its end is with a known-good partner: the end's
        let rank = confirmed(vec![retest((0, 3), Metric::Uni, 1.0 / 20.0, true)]);
        assert!(!link_far_slower(&link, &[&rank]));
        // no re-test of the end on the link's metric: its slowdowns on its
        // own metrics (against what their controls predicted)
        let only = |r: Retest| Confirmed {
            retests: vec![r],
            ..confirmed(vec![])
        };
        assert!(link_far_slower(
            &link,
            &[&only(retest((0, 3), Metric::Latency, 2.0, true))]
        ));
        assert!(!link_far_slower(
            &link,
            &[&only(retest((0, 3), Metric::Latency, 20.0, true))]
        ));
    }
}
