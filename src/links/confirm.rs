//! The finder's re-tests: which suspects the matrix gives, in which
//! rounds they are re-tested against known-good partners, each beside a
//! matched control, and what the re-tests say (docs/links.md, "The
//! finder", step 3).

use std::collections::{BTreeMap, BTreeSet};

use super::Endpoint;
use super::finder::FinderConfig;
use super::layout::{Layout, PairClass};
use super::rule::{Analysis, Domain, Metric};
use super::schedule::{Level, Pair};

mod judge;

/// A rank re-test task: (suspect, rank to pair with a known-good partner,
/// domain, times left).
type RankTask = (usize, usize, Domain, usize);
/// A pair re-test task: (suspect, pair, re-tests left).
type PairTask = (usize, Pair, usize);

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
    /// (round index, re-test) -> its matched control, or another re-test
    /// of the same round where no known-good pair was free (then in
    /// `substitute`).
    matched: BTreeMap<(usize, Pair), Pair>,
    substitute: BTreeSet<(usize, Pair)>,
    pub notes: Vec<String>,
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
    /// each; then, beside each re-test, its matched control, or where
    /// none fits another re-test of the round (`add_round`: a
    /// re-test is judged against a pair of its own round, never against
    /// pairs of other rounds alone). A pair suspect that fits in no round
    /// is left untested (and so never named).
    pub(super) fn plan_retests(&self, suspects: &[Suspect], units: &[usize]) -> RetestPlan {
        let mut plan = RetestPlan::default();
        if suspects.is_empty() {
            return plan;
        }
        let good = self.good(units);
        let partners: Vec<usize> = good.iter().copied().chain(self.fallback(units, &good)).collect();
        // a fallback partner never re-tests a rank it is low with
        let low: BTreeSet<Pair> = self.analysis.pair_suspects().map(|p| p.pair).collect();
        let pairs_suspected = suspects.iter().any(|s| matches!(s, Suspect::Pair { .. }));
        let total = self.cfg.partners.max(1).max(if pairs_suspected { 2 } else { 1 });
        let (mut rank_tasks, mut end_tasks, mut pair_tasks) = self.retest_tasks(suspects);
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
                    !busy.contains(&g)
                        && self.compatible(rank, g, domain)
                        && !used.contains(&Pair::new(rank, g))
                        && !low.contains(&Pair::new(rank, g))
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
                let shared =
                    |t: &&mut (usize, Pair, usize)| suspect_ranks.contains(&t.1.a) || suspect_ranks.contains(&t.1.b);
                for task in pair_tasks.iter_mut().filter(shared) {
                    place_pair(task, round_index, &mut busy, &mut round, &mut pair_round);
                }
            }
            for task in rank_tasks.iter_mut() {
                with_partner(task, &mut busy, &mut round);
            }
            for task in pair_tasks.iter_mut() {
                place_pair(task, round_index, &mut busy, &mut round, &mut pair_round);
            }
            for task in end_tasks.iter_mut() {
                if pair_round.get(&task.0).is_some_and(|&r| r < round_index) {
                    with_partner(task, &mut busy, &mut round);
                }
            }
            if round.is_empty() {
                break;
            }
            self.add_round(&mut plan, round_index, round, &partners, &mut busy);
        }
        self.untested_notes(&mut plan, &rank_tasks, &pair_tasks, &pair_round);
        plan
    }

    /// The re-test tasks of the suspects: ranks to re-test with known-good
    /// partners, ends of pairs to re-test so, and pairs to re-test
    /// themselves (twice when the matrix vouches for their ends).
    fn retest_tasks(&self, suspects: &[Suspect]) -> (Vec<RankTask>, Vec<RankTask>, Vec<PairTask>) {
        let mut rank_tasks: Vec<RankTask> = Vec::new();
        let mut end_tasks: Vec<RankTask> = Vec::new();
        let mut pair_tasks: Vec<PairTask> = Vec::new();
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
        (rank_tasks, end_tasks, pair_tasks)
    }

    /// A round into the plan: beside each re-test its matched control
    /// (where one can be placed), and what each pair of the round is for.
    /// A re-test without one (no known-good ranks free, as at a few nodes)
    /// is compared with another re-test of the same round, if any (another
    /// suspect's, or the other end's of the same link): like with like;
    /// such a reference may be slow itself, which can hide a fault, and
    /// the judge asks the matrix to agree too.
    fn add_round(
        &self,
        plan: &mut RetestPlan,
        round_index: usize,
        mut round: Vec<(Pair, Option<usize>)>,
        partners: &[usize],
        busy: &mut BTreeSet<usize>,
    ) {
        let tests: Vec<Pair> = round.iter().map(|t| t.0).collect();
        for &p in &tests {
            if let Some(c) = self.matched_control(p, partners, busy) {
                round.push((c, None));
                plan.matched.insert((round_index, p), c);
            } else if let Some(&other) = tests.iter().find(|&&t| t != p) {
                plan.matched.insert((round_index, p), other);
                plan.substitute.insert((round_index, p));
            }
        }
        for (p, purpose) in &round {
            plan.purpose.insert((round_index, *p), *purpose);
        }
        plan.rounds.push(round.into_iter().map(|(p, _)| p).collect());
    }

    /// Notes for the suspect ranks short of known-good partners and the
    /// suspect pairs never re-tested.
    fn untested_notes(
        &self,
        plan: &mut RetestPlan,
        rank_tasks: &[RankTask],
        pair_tasks: &[PairTask],
        pair_round: &BTreeMap<usize, usize>,
    ) {
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
    }

    /// The median goodness, less its ends' effects, of the matrix's pairs
    /// of `class` on `metric` that touch no suspect rank; `None` when
    /// there is none.
    pub(super) fn clean_level(&self, class: PairClass, metric: Metric) -> Option<f64> {
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
}

/// Puts pair suspect `task` (suspect index, pair, re-tests left) in
/// `round` when it has re-tests left and both its ranks are free there.
fn place_pair(
    task: &mut PairTask,
    round_index: usize,
    busy: &mut BTreeSet<usize>,
    round: &mut Vec<(Pair, Option<usize>)>,
    pair_round: &mut BTreeMap<usize, usize>,
) {
    let (i, p, left) = *task;
    if left == 0 || busy.contains(&p.a) || busy.contains(&p.b) {
        return;
    }
    busy.insert(p.a);
    busy.insert(p.b);
    round.push((p, Some(i)));
    pair_round.entry(i).or_insert(round_index);
    task.2 -= 1;
}

/// A suspect pair whose ends each have this many partners in the matrix
/// is re-tested itself twice (two routing draws); with fewer, once, and its
/// ends with known-good partners.
const ENDS_KNOWN_PARTNERS: usize = 8;
