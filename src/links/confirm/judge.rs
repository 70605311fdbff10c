//! What the re-tests say: each re-test against its matched control and
//! the matrix, the suspects they confirm or dismiss, and the findings and
//! evidence that name them.

use std::collections::{BTreeMap, BTreeSet};

use super::{Context, RetestPlan, Suspect};
use crate::links::finder::{Dismissed, Evidence, Finding, FindingKind, Retest};
use crate::links::measure::{Estimate, PairResult};
use crate::links::rule::{Domain, Metric, PairCheck};
use crate::links::schedule::Pair;

/// A re-test that could not be judged: (suspect, pair).
type Unjudged = (usize, Pair);

/// A link re-tested this many times slower than its slow end is with
/// known-good partners is named as the link, not the end.
const LINK_OVER_RANK: f64 = 2.0;

/// The worst slowdown among the re-tests found low (1.0 when none was).
fn slowdown(tests: &[Retest]) -> f64 {
    tests
        .iter()
        .filter(|r| r.low)
        .map(|r| 1.0 / (1.0 - r.deficit_pct / 100.0).max(1e-9))
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
}

impl Context<'_> {
    /// Each re-test against what its matched control and the matrix
    /// predict: the control's median less its ends' matrix effects, plus
    /// the effects of the pair's ranks other than the suspect under test
    /// (both ends, for a suspect pair and its ends' re-tests), so that a
    /// pair suspect at a slow node is judged on what is left after the
    /// node. A re-test is low only when it is also below its control
    /// itself by the rule's percentage: like with like, whatever the
    /// round did to both (a crowded uplink; on an oversubscribed host,
    /// which ranks share a core), since the matrix's effects were
    /// measured in other rounds. Where no known-good pair was free, the
    /// control is another suspect's re-test of the same round, and the
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
        // the effects of the re-test's ranks other than the suspect
        let adjust: f64 = [r.pair.a, r.pair.b]
            .into_iter()
            .filter(|&x| !matches!(suspect, Suspect::Rank { rank, .. } if *rank == x))
            .map(|x| self.analysis.effect(x, domain, metric))
            .sum();
        let best = match metric {
            Metric::Latency => e.lo,
            _ => e.hi,
        };
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
            metric,
            value: e.median,
            lo: e.lo,
            hi: e.hi,
            reference: match metric {
                Metric::Latency => (-expected).exp(),
                _ => expected.exp(),
            },
            deficit_pct: (1.0 - delta.exp()) * 100.0,
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
        let (mut findings, confirmed_ranks) = self.links_or_ranks(findings, confirmed_ranks, &mut dismissed);
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
        let ends_low: Vec<&Retest> = tests.iter().filter(|r| r.pair != pair && r.low).collect();
        let ok: Vec<Metric> = metrics
            .iter()
            .copied()
            .filter(|m| all_low(itself.iter().copied(), *m))
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
                steps: Vec::new(),
            })
        }
    }

    /// A link at a confirmed slow rank is that rank's slowness seen
    /// through one partner (the rank's re-tests carry the evidence),
    /// unless the link is far slower than the rank is with known-good
    /// partners: then it is the link, and the rank's milder slowness is
    /// what the link did to its figures (at a few nodes, one link is a
    /// third of a rank's pairs). Returns the findings kept and the ranks
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
            let link_factor = slowdown(&f.retests.iter().filter(|r| r.pair == pair).cloned().collect::<Vec<_>>());
            let rank_factor = at.iter().map(|c| slowdown(&c.retests)).fold(1.0, f64::max);
            if link_factor > LINK_OVER_RANK * rank_factor {
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

/// The re-tests among `mine` on one of `metrics`.
fn on_metrics(mine: &[&Retest], metrics: &[Metric]) -> Vec<Retest> {
    mine.iter()
        .filter(|r| metrics.contains(&r.metric))
        .map(|r| (*r).clone())
        .collect()
}

/// Whether `tests` re-tested `metric` and every one of them found it low.
fn all_low<'a>(tests: impl IntoIterator<Item = &'a Retest>, metric: Metric) -> bool {
    let on: Vec<&Retest> = tests.into_iter().filter(|r| r.metric == metric).collect();
    !on.is_empty() && on.iter().all(|r| r.low)
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
