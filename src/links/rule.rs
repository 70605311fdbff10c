//! The fleet-relative rule: which pairs and which ranks of the matrix are
//! suspect (docs/links.md, "The rule").
//!
//! Each pair is compared only with pairs of its class (`layout::PairClass`)
//! and on one metric at a time, in "goodness" units: the logarithm of the
//! bandwidth, or minus the logarithm of the latency, so that lower is
//! always worse and a ratio is a difference. Within each domain (pairs
//! across the network; pairs on one host) a robust two-way fit, Tukey's
//! median polish, splits every pair into
//!
//! ```text
//! g(x, y) = level(class) + effect(x) + effect(y) + residual(x, y)
//! ```
//!
//! with medians throughout, so that one slow node (every pair it is in is
//! low: a large negative effect, small residuals) and one slow link (one
//! pair low: a large negative residual, its ends' effects near zero) come
//! apart, and neither moves the level of the others. A rank is a suspect
//! when its effect is worse than the class level by more than the rule's
//! percentage and by more than `spreads` robust standard deviations (of
//! the effects over the fleet, or of one pair's residual over its partner
//! count, whichever is larger), and it is low with at least `node_share`
//! of its partners. A pair is a suspect when its residual is worse by more
//! than the percentage and by more than `spreads` robust standard
//! deviations of the residuals of its class, and the whole 95% interval
//! of its median lies below what its ends predict.
//!
//! Pure: a matrix in, judgements out; no measurement, no printing.

use std::collections::BTreeMap;

use serde::Serialize;

use super::layout::{Layout, PairClass};
use super::measure::{Estimate, Matrix, PairResult, Phase, Spread, quantile};
/// The metrics are declared in `metric.rs`; the rule's users name them here too.
pub use super::metric::Metric;
use super::schedule::Pair;

mod domain;
use domain::analyse_domain;

/// Robust standard deviation from a MAD, for normally distributed data.
const MAD_TO_SD: f64 = 1.4826;
/// A network class with fewer pairs is merged with the others (its level
/// and spread would rest on too few pairs).
const MIN_CLASS_PAIRS: usize = 6;
/// Median polish iterations at most (it settles in a handful), and the
/// largest change of an effect (goodness units: about a relative change)
/// at which it has settled: 0.01%, a thousandth of the rule's margin.
const POLISH_ROUNDS: usize = 20;
const POLISH_TOLERANCE: f64 = 1e-4;
/// The share of the rule's spreads past which a pair or rank not flagged
/// is too noisy to judge (`Rule::doubtful`).
pub const DOUBT: f64 = 0.75;

/// The rule's thresholds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rule {
    /// Worse than expected by more than this many percent ...
    pub min_deficit_pct: f64,
    /// ... and by more than this many robust standard deviations.
    pub spreads: f64,
    /// A node (rank) fault: low with at least this share of its partners.
    pub node_share: f64,
    /// Fewest partners for telling a node fault from a link fault.
    pub min_partners: usize,
}

impl Rule {
    /// 10%: a healthy fabric's pairs spread by a few percent (and
    /// SuperBench flags 5% below the fleet), while a fault worth a ticket
    /// costs more; 4 robust standard deviations keep a 256-node matrix
    /// (32640 pairs) free of chance suspects.
    pub const DEFAULT: Rule = Rule {
        min_deficit_pct: 10.0,
        spreads: 4.0,
        node_share: 0.5,
        min_partners: 3,
    };

    /// The goodness difference below which the percentage is passed.
    fn log_threshold(&self) -> f64 {
        (1.0 - self.min_deficit_pct / 100.0).max(1e-9).ln()
    }

    /// Whether a measured goodness `delta` below expected (negative: worse)
    /// passes the percentage and `spreads` times `sd`.
    pub fn worse(&self, delta: f64, sd: f64) -> bool {
        delta < self.log_threshold() && -delta > self.spreads * sd
    }

    /// Whether `delta` is past the percentage and three quarters of the
    /// spreads (3 robust standard deviations at the default: by chance, 1
    /// in 700 pairs or ranks of a healthy fleet): what is not flagged
    /// then is too noisy to judge, short of the `spreads` the rule needs
    /// to name it among many.
    pub fn doubtful(&self, delta: f64, sd: f64) -> bool {
        delta < self.log_threshold() && -delta > DOUBT * self.spreads * sd
    }
}

/// Which fit a pair belongs to: pairs across the network, or pairs on one
/// host (NVLink, PCIe), whose bandwidths have nothing to do with each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Domain {
    Network,
    IntraHost,
}

impl Domain {
    pub fn of(class: PairClass) -> Domain {
        if class.network() {
            Domain::Network
        } else {
            Domain::IntraHost
        }
    }
}

/// One class's reference on one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Reference {
    pub class: PairClass,
    pub metric: Metric,
    pub pairs: usize,
    /// The median of the class's pair medians, in the metric's unit.
    pub median: f64,
    /// Robust standard deviation of the pairs' residuals (goodness units,
    /// about a relative spread).
    pub resid_sd: f64,
}

/// One pair on one metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PairCheck {
    pub pair: Pair,
    pub metric: Metric,
    pub class: PairClass,
    pub value: f64,
    pub lo: Option<f64>,
    pub hi: Option<f64>,
    /// The class's median.
    pub reference: f64,
    /// What the pair's ends predict: the class level and both ends' effects.
    pub expected: f64,
    /// Percent worse than `expected` (negative: better).
    pub deficit_pct: f64,
    /// Percent worse than the class's median.
    pub below_reference_pct: f64,
    pub low: bool,
    /// Too noisy to judge: worse than expected by more than the rule's
    /// percentage and `DOUBT` of its spreads, but not by all of them, or
    /// its interval reaches what its ends predict: neither flagged nor
    /// fine.
    pub noisy: bool,
}

/// One rank (a node at `--level node`) on one metric in one domain.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct UnitCheck {
    pub rank: usize,
    pub domain: Domain,
    pub metric: Metric,
    pub partners: usize,
    /// Partners with which its pair is worse than the percentage, after
    /// the partner's own effect.
    pub low_partners: usize,
    /// Its effect: percent worse than comparable pairs (negative: better).
    pub deficit_pct: f64,
    /// Its pairs' goodness relative to their class median (1 = median;
    /// bandwidth ratio, or inverse latency ratio), over its partners.
    pub ratio: Estimate,
    /// The spread-based margin its effect had to pass, in percent.
    pub margin_pct: f64,
    pub suspect: bool,
    /// Too noisy to judge: worse than comparable pairs by more than the
    /// rule's percentage and `DOUBT` of its spreads, and low with enough
    /// of its partners, but not past all its spreads, or with its pairs'
    /// interval reaching the class median: neither a suspect nor fine.
    pub noisy: bool,
}

/// The rule applied to a matrix.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Analysis {
    pub rule: Option<Rule>,
    pub references: Vec<Reference>,
    pub units: Vec<UnitCheck>,
    pub pairs: Vec<PairCheck>,
    pub notes: Vec<String>,
    #[serde(skip)]
    pair_index: BTreeMap<(Pair, Metric), usize>,
    #[serde(skip)]
    classes: BTreeMap<Pair, PairClass>,
}

impl Analysis {
    pub fn unit_suspects(&self) -> impl Iterator<Item = &UnitCheck> {
        self.units.iter().filter(|u| u.suspect)
    }

    pub fn pair_suspects(&self) -> impl Iterator<Item = &PairCheck> {
        self.pairs.iter().filter(|p| p.low)
    }

    /// The ranks too noisy to judge (`UnitCheck::noisy`) and suspect on
    /// no metric.
    pub fn noisy_units(&self) -> impl Iterator<Item = &UnitCheck> {
        let suspects: std::collections::BTreeSet<usize> = self.unit_suspects().map(|u| u.rank).collect();
        self.units
            .iter()
            .filter(move |u| u.noisy && !suspects.contains(&u.rank))
    }

    /// The pairs too noisy to judge (`PairCheck::noisy`), low on no
    /// metric and with no suspect rank at an end (whose slowness they
    /// show).
    pub fn noisy_pairs(&self) -> impl Iterator<Item = &PairCheck> {
        let suspects: std::collections::BTreeSet<usize> = self.unit_suspects().map(|u| u.rank).collect();
        let low: std::collections::BTreeSet<Pair> = self.pair_suspects().map(|p| p.pair).collect();
        self.pairs.iter().filter(move |p| {
            p.noisy && !low.contains(&p.pair) && !suspects.contains(&p.pair.a) && !suspects.contains(&p.pair.b)
        })
    }

    pub fn check(&self, pair: Pair, metric: Metric) -> Option<&PairCheck> {
        self.pair_index.get(&(pair, metric)).map(|&i| &self.pairs[i])
    }

    /// The class a pair was judged in (after merging small classes).
    pub fn class(&self, pair: Pair) -> Option<PairClass> {
        self.classes.get(&pair).copied()
    }

    pub fn reference(&self, class: PairClass, metric: Metric) -> Option<&Reference> {
        self.references.iter().find(|r| r.class == class && r.metric == metric)
    }

    /// How clean a rank looks: the largest |effect| over its checks, in
    /// percent (None: never measured).
    pub fn unit_distance(&self, rank: usize) -> Option<f64> {
        self.units
            .iter()
            .filter(|u| u.rank == rank)
            .map(|u| u.deficit_pct.abs())
            .reduce(f64::max)
    }

    /// The class a new pair of `class` is compared in: the merged class
    /// where small network classes were merged.
    pub fn class_like(&self, class: PairClass) -> PairClass {
        if class.network() && !self.references.iter().any(|r| r.class == class) {
            PairClass::InterHost
        } else {
            class
        }
    }

    /// A rank's fitted effect on one metric in one domain, in goodness
    /// units (0: like the fleet; negative: worse).
    pub fn effect(&self, rank: usize, domain: Domain, metric: Metric) -> f64 {
        self.units
            .iter()
            .find(|u| u.rank == rank && u.domain == domain && u.metric == metric)
            .map_or(0.0, |u| (1.0 - u.deficit_pct / 100.0).max(1e-12).ln())
    }

    /// A rank's partners in one domain.
    pub fn partners(&self, rank: usize, domain: Domain) -> usize {
        self.units
            .iter()
            .find(|u| u.rank == rank && u.domain == domain)
            .map_or(0, |u| u.partners)
    }

    /// Ranks suspect themselves, and the ends of low pairs. A low pair
    /// with a suspect rank at one end does not count against the other
    /// end: a slow node's pairs are low with whoever it meets (with a few
    /// partners, one of them is often flagged as a pair too), and its
    /// partners are what it must be re-tested against.
    pub fn involved(&self) -> std::collections::BTreeSet<usize> {
        let suspects: std::collections::BTreeSet<usize> = self.unit_suspects().map(|u| u.rank).collect();
        let mut out = suspects.clone();
        for p in self.pair_suspects() {
            if !suspects.contains(&p.pair.a) && !suspects.contains(&p.pair.b) {
                out.insert(p.pair.a);
                out.insert(p.pair.b);
            }
        }
        out
    }
}

/// Median of `values` (reordered); NaN when empty.
fn median(values: &mut [f64]) -> f64 {
    values.sort_unstable_by(f64::total_cmp);
    quantile(values, 0.5)
}

/// Robust standard deviation of `values`.
fn robust_sd(values: &[f64]) -> f64 {
    Spread::of(values).map_or(0.0, |s| s.mad * MAD_TO_SD)
}

/// One observation of a domain's fit.
struct Obs {
    x: usize,
    y: usize,
    class: usize,
    g: f64,
}

/// Median polish: per-class levels and per-unit effects, effects centred
/// on their median. `units` indexes `x`/`y`.
fn polish(obs: &[Obs], by_unit: &[Vec<usize>], classes: usize) -> (Vec<f64>, Vec<f64>) {
    let units = by_unit.len();
    let class_medians = |effect: &[f64]| -> Vec<f64> {
        let mut per_class: Vec<Vec<f64>> = vec![Vec::new(); classes];
        for o in obs {
            per_class[o.class].push(o.g - effect[o.x] - effect[o.y]);
        }
        per_class
            .iter_mut()
            .map(|v| if v.is_empty() { 0.0 } else { median(v) })
            .collect()
    };
    let present: Vec<usize> = (0..units).filter(|&u| !by_unit[u].is_empty()).collect();
    let mut scratch = Vec::new();
    // Start from each unit's median pair (all units at once, centred), not
    // from zero effects: at 4 nodes one slow node is half of all pairs, the
    // class median falls between the fast and the slow pairs, and updating
    // one unit after another from there can settle with the slow node's
    // effect spread over its partners and one of its pairs.
    let start = class_medians(&vec![0.0; units]);
    let mut effect = vec![0.0; units];
    for &u in &present {
        scratch.clear();
        scratch.extend(by_unit[u].iter().map(|&i| obs[i].g - start[obs[i].class]));
        effect[u] = median(&mut scratch);
    }
    let mut centre: Vec<f64> = present.iter().map(|&u| effect[u]).collect();
    let m = median(&mut centre);
    if m.is_finite() {
        for &u in &present {
            effect[u] -= m;
        }
    }
    let mut level = class_medians(&effect);
    for _ in 0..POLISH_ROUNDS {
        let mut change: f64 = 0.0;
        for &u in &present {
            scratch.clear();
            scratch.extend(by_unit[u].iter().map(|&i| {
                let o = &obs[i];
                let other = if o.x == u { o.y } else { o.x };
                o.g - level[o.class] - effect[other]
            }));
            let new = median(&mut scratch);
            change = change.max((new - effect[u]).abs());
            effect[u] = new;
        }
        let mut centre: Vec<f64> = present.iter().map(|&u| effect[u]).collect();
        let m = median(&mut centre);
        if m.is_finite() {
            for &u in &present {
                effect[u] -= m;
            }
        }
        level = class_medians(&effect);
        if change < POLISH_TOLERANCE {
            break;
        }
    }
    (level, effect)
}

/// The rule over the matrix's pairs (re-tests are left out).
pub fn analyse(matrix: &Matrix, layout: &Layout, rule: &Rule) -> Analysis {
    let measured: Vec<&PairResult> = matrix.pairs.iter().filter(|p| p.phase == Phase::Matrix).collect();
    let mut classes: BTreeMap<Pair, PairClass> = measured
        .iter()
        .map(|p| (p.pair, layout.class(p.pair.a, p.pair.b)))
        .collect();
    let mut notes = Vec::new();
    // Small network classes are merged, so every level rests on enough pairs.
    let mut counts: BTreeMap<PairClass, usize> = BTreeMap::new();
    for c in classes.values() {
        *counts.entry(*c).or_default() += 1;
    }
    let network: Vec<PairClass> = counts.keys().copied().filter(|c| c.network()).collect();
    if network.len() > 1 && network.iter().any(|c| counts[c] < MIN_CLASS_PAIRS) {
        notes.push(format!(
            "fewer than {MIN_CLASS_PAIRS} pairs in some network class: all pairs across hosts are compared as one class"
        ));
        for c in classes.values_mut() {
            if c.network() {
                *c = PairClass::InterHost;
            }
        }
    }
    let mut analysis = Analysis {
        rule: Some(*rule),
        notes,
        ..Analysis::default()
    };
    for domain in [Domain::Network, Domain::IntraHost] {
        for metric in Metric::ALL {
            analyse_domain(&measured, &classes, domain, metric, rule, &mut analysis);
        }
    }
    let few: Vec<usize> = analysis
        .units
        .iter()
        .filter(|u| u.metric == Metric::Uni && u.partners < rule.min_partners)
        .map(|u| u.rank)
        .collect();
    if !few.is_empty() {
        analysis.notes.push(format!(
            "{} rank{} with fewer than {} partners in a class: for {}, a slow pair cannot be told from a slow node",
            few.len(),
            if few.len() == 1 { "" } else { "s" },
            rule.min_partners,
            if few.len() == 1 { "it" } else { "them" }
        ));
    }
    analysis.pair_index = analysis
        .pairs
        .iter()
        .enumerate()
        .map(|(i, p)| ((p.pair, p.metric), i))
        .collect();
    analysis.classes = classes;
    analysis
}

#[cfg(test)]
mod tests;
