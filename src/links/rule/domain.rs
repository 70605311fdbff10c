//! One domain and metric of the rule (docs/links.md, "The rule"): the
//! pairs' goodness fitted as class levels plus rank effects, and each pair
//! and rank checked against the fit.

use std::collections::BTreeMap;

use super::{
    Analysis, Domain, MIN_CLASS_PAIRS, Metric, Obs, PairCheck, Reference, Rule, UnitCheck, median, polish, robust_sd,
};
use crate::links::layout::PairClass;
use crate::links::measure::{Estimate, PairResult};
use crate::links::schedule::Pair;

/// A measured pair of the domain: its result, its estimate on the metric,
/// its class.
type Row<'a> = (&'a PairResult, &'a Estimate, PairClass);

/// One domain and metric's fit: the observations, the class levels and
/// rank effects, the residuals and their spreads, the classes' medians.
struct Fit<'a> {
    domain: Domain,
    metric: Metric,
    rule: &'a Rule,
    class_list: Vec<PairClass>,
    unit_list: Vec<usize>,
    obs: Vec<Obs>,
    by_unit: Vec<Vec<usize>>,
    level: Vec<f64>,
    effect: Vec<f64>,
    residual: Vec<f64>,
    domain_sd: f64,
    class_sd: Vec<f64>,
    medians: Vec<f64>,
}

pub(super) fn analyse_domain(
    measured: &[&PairResult],
    classes: &BTreeMap<Pair, PairClass>,
    domain: Domain,
    metric: Metric,
    rule: &Rule,
    out: &mut Analysis,
) {
    let rows: Vec<Row> = measured
        .iter()
        .filter_map(|p| {
            let class = classes[&p.pair];
            let e = p.estimate(metric).filter(|e| e.median > 0.0)?;
            (Domain::of(class) == domain).then_some((*p, e, class))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    let (class_list, unit_list, obs, by_unit) = observations(&rows, metric);
    let (level, effect) = polish(&obs, &by_unit, class_list.len());
    let residual: Vec<f64> = obs
        .iter()
        .map(|o| o.g - level[o.class] - effect[o.x] - effect[o.y])
        .collect();
    let domain_sd = robust_sd(&residual);
    let class_sd = class_sds(&obs, &residual, class_list.len(), domain_sd);
    let mut medians = Vec::new();
    for (c, class) in class_list.iter().enumerate() {
        let mut v: Vec<f64> = rows.iter().filter(|r| r.2 == *class).map(|r| r.1.median).collect();
        let count = v.len();
        medians.push(median(&mut v));
        out.references.push(Reference {
            class: *class,
            metric,
            pairs: count,
            median: medians[c],
            resid_sd: class_sd[c],
        });
    }
    let fit = Fit {
        domain,
        metric,
        rule,
        class_list,
        unit_list,
        obs,
        by_unit,
        level,
        effect,
        residual,
        domain_sd,
        class_sd,
        medians,
    };
    fit.check_pairs(&rows, out);
    fit.check_units(out);
}

/// The rows as observations: the classes and ranks present (sorted), the
/// observations indexing them, and each rank's observations.
fn observations(rows: &[Row], metric: Metric) -> (Vec<PairClass>, Vec<usize>, Vec<Obs>, Vec<Vec<usize>>) {
    let class_list: Vec<PairClass> = {
        let mut v: Vec<PairClass> = rows.iter().map(|r| r.2).collect();
        v.sort();
        v.dedup();
        v
    };
    let mut unit_list: Vec<usize> = rows.iter().flat_map(|r| [r.0.pair.a, r.0.pair.b]).collect();
    unit_list.sort();
    unit_list.dedup();
    let unit_index: BTreeMap<usize, usize> = unit_list.iter().enumerate().map(|(i, &u)| (u, i)).collect();
    let class_index = |c: PairClass| class_list.iter().position(|x| *x == c).unwrap_or(0);
    let obs: Vec<Obs> = rows
        .iter()
        .map(|(p, e, c)| Obs {
            x: unit_index[&p.pair.a],
            y: unit_index[&p.pair.b],
            class: class_index(*c),
            g: metric.goodness(e.median),
        })
        .collect();
    let mut by_unit: Vec<Vec<usize>> = vec![Vec::new(); unit_list.len()];
    for (i, o) in obs.iter().enumerate() {
        by_unit[o.x].push(i);
        by_unit[o.y].push(i);
    }
    (class_list, unit_list, obs, by_unit)
}

/// Each class's robust spread of residuals; the domain's where the class
/// has too few pairs.
fn class_sds(obs: &[Obs], residual: &[f64], classes: usize, domain_sd: f64) -> Vec<f64> {
    (0..classes)
        .map(|c| {
            let r: Vec<f64> = obs
                .iter()
                .zip(residual)
                .filter(|(o, _)| o.class == c)
                .map(|(_, r)| *r)
                .collect();
            if r.len() >= MIN_CLASS_PAIRS {
                robust_sd(&r)
            } else {
                domain_sd
            }
        })
        .collect()
}

impl Fit<'_> {
    /// Each pair against what the fit expects of it.
    fn check_pairs(&self, rows: &[Row], out: &mut Analysis) {
        let (metric, level, effect, residual) = (self.metric, &self.level, &self.effect, &self.residual);
        for (i, ((p, e, _), o)) in rows.iter().zip(&self.obs).enumerate() {
            let expected_g = level[o.class] + effect[o.x] + effect[o.y];
            let below_interval = metric
                .best_end(e.lo, e.hi)
                .is_none_or(|end| metric.goodness(end) < expected_g);
            let reference = self.medians[o.class];
            let low = self.rule.worse(residual[i], self.class_sd[o.class]) && below_interval;
            out.pairs.push(PairCheck {
                pair: p.pair,
                metric,
                class: self.class_list[o.class],
                value: e.median,
                lo: e.lo,
                hi: e.hi,
                reference,
                expected: metric.from_goodness(expected_g),
                deficit_pct: (1.0 - residual[i].exp()) * 100.0,
                below_reference_pct: (1.0 - (o.g - metric.goodness(reference)).exp()) * 100.0,
                low,
                noisy: !low && self.rule.doubtful(residual[i], self.class_sd[o.class]),
            });
        }
    }

    /// Each rank's effect against the spread of the effects.
    fn check_units(&self, out: &mut Analysis) {
        let (metric, rule, level, effect) = (self.metric, self.rule, &self.level, &self.effect);
        let effect_sd = robust_sd(effect);
        for (u, &rank) in self.unit_list.iter().enumerate() {
            let mine: Vec<(&Obs, usize)> = self.by_unit[u].iter().map(|&i| (&self.obs[i], i)).collect();
            let partners = mine.len();
            let low_partners = mine
                .iter()
                .filter(|(o, _)| {
                    let other = if o.x == u { o.y } else { o.x };
                    o.g - level[o.class] - effect[other] < rule.log_threshold()
                })
                .count();
            let ratios: Vec<f64> = mine
                .iter()
                .map(|(o, _)| (o.g - metric.goodness(self.medians[o.class])).exp())
                .collect();
            let Some(ratio) = Estimate::of(&ratios) else { continue };
            let sd = effect_sd.max(self.domain_sd / (partners as f64).sqrt());
            // a node's pattern: enough partners, low with enough of them
            let shaped = partners >= rule.min_partners && low_partners as f64 >= rule.node_share * partners as f64;
            let suspect = shaped && rule.worse(effect[u], sd) && ratio.hi.is_none_or(|hi| hi < 1.0);
            out.units.push(UnitCheck {
                rank,
                domain: self.domain,
                metric,
                partners,
                low_partners,
                deficit_pct: (1.0 - effect[u].exp()) * 100.0,
                ratio,
                margin_pct: (1.0 - (-rule.spreads * sd).exp()) * 100.0,
                suspect,
                noisy: shaped && !suspect && rule.doubtful(effect[u], sd),
            });
        }
    }
}
