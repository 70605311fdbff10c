//! `collbench compare --by hierarchy|transport FILE`: the modes measured
//! inside one CSV side by side. Per group (collective, the other
//! dimension, dtype, op, root, placement, nranks) and size: each mode's
//! metric (the median of its samples), its speedup over the reference
//! mode with the speedup's interval, the winner, and the crossover sizes
//! where the winner changes.
//!
//! Speedup is metric / reference metric for bandwidths and reference time /
//! time for time, so above 1 is always better than the reference.
//!
//! A speedup, a winner or a crossover is claimed only where the samples
//! show it (`noise::judge`, the noise model of two runs, with the
//! threshold and alpha of `compare`): the mode is faster (slower) than the
//! reference by more than the threshold with p < alpha; a winner is faster
//! than every other mode in that sense; a crossover is where the winner
//! changes and each side holds at two neighbouring sizes (A A | B B), since
//! one size in many can name another winner by chance. Otherwise the view says "no
//! significant difference". Modes measured in the same launches (the
//! hierarchy modes of one run, interleaved by `--repeat`) share what the
//! launch drew, so the samples inside the launch judge them; modes from
//! separate launches (a suite's transports) need several launches of each
//! (the launch t-test), else no claim is made. One sample per point (or too
//! few for the rank test to reach alpha) makes no claim either, and the
//! report's notes say what would.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::Verdict;
use super::noise::{self, Judgement, Sample, Test};
use crate::collective::Collective;
use crate::error::Error;
use crate::record::read::Row;
use crate::record::{CaseKey, Record, op_column, root_column};
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::{DType, Dimension, Metric, Placement, ReduceOp};

impl Dimension {
    /// The mode `r` was measured in.
    fn of(self, r: &Record) -> &'static str {
        match self {
            Dimension::Hierarchy => r.hierarchy.name(),
            Dimension::Transport => r.transport.name(),
        }
    }

    /// The dimension that stays fixed inside a group.
    fn other(self, r: &Record) -> &'static str {
        match self {
            Dimension::Hierarchy => r.transport.name(),
            Dimension::Transport => r.hierarchy.name(),
        }
    }

    /// The case `r` belongs to, without its size and without this
    /// dimension: the group its modes are compared in.
    fn group_of(self, r: &Record) -> CaseKey {
        let mut key = CaseKey::of(r, true).any_size();
        match self {
            Dimension::Hierarchy => key.hierarchy = Hierarchy::default(),
            Dimension::Transport => key.transport = Profile::default(),
        }
        key
    }

    /// The mode speedups are relative to when none is given.
    fn default_reference(self) -> &'static str {
        match self {
            Dimension::Hierarchy => Hierarchy::Flat.name(),
            Dimension::Transport => Profile::Auto.name(),
        }
    }
}

/// What the modes are judged on: the metric, and the threshold and
/// significance level a difference must pass (`compare`'s).
#[derive(Clone, Copy, Debug)]
pub struct ModeOptions {
    pub metric: Metric,
    pub threshold_pct: f64,
    pub alpha: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ModeReport {
    pub dimension: Dimension,
    pub metric: Metric,
    pub reference: String,
    pub label: String,
    pub threshold_pct: f64,
    pub alpha: f64,
    pub groups: Vec<Group>,
    /// Why some differences were not judged, and what would judge them.
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Group {
    pub collective: Collective,
    /// The transport (by hierarchy) or hierarchy (by transport) of the group.
    pub fixed: String,
    pub dtype: DType,
    #[serde(with = "op_column")]
    pub op: Option<ReduceOp>,
    #[serde(with = "root_column")]
    pub root: Option<usize>,
    pub placement: Placement,
    pub nranks: u64,
    /// Modes in the order they first appear in the file, reference first.
    pub modes: Vec<String>,
    pub points: Vec<Point>,
}

/// A mode against the reference (or the winner against another mode).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Difference {
    /// Better by more than the threshold, p < alpha.
    Faster,
    /// Worse by more than the threshold, p < alpha.
    Slower,
    /// The samples show no difference beyond the threshold.
    NoSignificantDifference,
    /// The samples cannot judge (one sample, too few for the rank test,
    /// or one launch of each mode from separate launches).
    NoClaim,
}

impl Difference {
    pub fn is_claim(self) -> bool {
        matches!(self, Difference::Faster | Difference::Slower)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub size_bytes: u64,
    /// Per mode, in `Group::modes` order: the median of its samples; None
    /// where not measured.
    pub values: Vec<Option<f64>>,
    /// Per mode: how many samples.
    pub samples: Vec<usize>,
    /// Per mode, over the reference: the ratio of the medians; None
    /// without both values.
    pub speedups: Vec<Option<f64>>,
    /// Per mode: the speedup's interval at 1 - alpha, where the samples
    /// give one.
    pub intervals: Vec<Option<[f64; 2]>>,
    /// Per mode: what the samples show against the reference (None for
    /// the reference itself and where a value is missing).
    pub differences: Vec<Option<Difference>>,
    /// The mode faster than every other one at this size, where the
    /// samples show it; None otherwise ("no significant difference").
    pub winner: Option<String>,
    /// The winner differs from the winner at the two sizes below, and
    /// the same winner holds at the next size (`mark_crossovers`).
    pub crossover: bool,
}

impl Group {
    pub fn title(&self, dimension: Dimension) -> String {
        let mut t = self.collective.name().to_string();
        t.push_str(&format!(" {}", self.dtype));
        if let Some(op) = self.op {
            t.push_str(&format!(" {op}"));
        }
        if let Some(root) = self.root {
            t.push_str(&format!(" root {root}"));
        }
        let fixed = match dimension {
            Dimension::Hierarchy => "transport",
            Dimension::Transport => "hierarchy",
        };
        t.push_str(&format!(
            " {}, {} ranks, {fixed} {}",
            self.placement, self.nranks, self.fixed
        ));
        t
    }

    pub fn crossovers(&self) -> Vec<(u64, String, String)> {
        let mut out = Vec::new();
        let mut previous: Option<&str> = None;
        for p in &self.points {
            if let (true, Some(prev), Some(now)) = (p.crossover, previous, p.winner.as_deref()) {
                out.push((p.size_bytes, prev.to_string(), now.to_string()));
            }
            if let Some(w) = p.winner.as_deref() {
                previous = Some(w);
            }
        }
        out
    }
}

/// Builds the report. `reference` defaults to `flat` (hierarchy) or `auto`
/// (transport), or the first mode in the file when that one is absent.
pub fn compare_modes(
    label: &str,
    rows: &[Row],
    dimension: Dimension,
    o: &ModeOptions,
    reference: Option<&str>,
) -> Result<ModeReport, Error> {
    let all_modes = modes_in(rows, dimension);
    if all_modes.len() < 2 {
        return Err(Error::usage(format!(
            "{label} has {} {} mode{} ({}): --by {} needs a CSV that measured several",
            all_modes.len(),
            dimension.name(),
            if all_modes.len() == 1 { "" } else { "s" },
            all_modes.join(", "),
            dimension.name()
        )));
    }
    let reference = match reference {
        Some(r) if all_modes.iter().any(|m| m == r) => r.to_string(),
        Some(r) => {
            return Err(Error::usage(format!(
                "--reference {r}: {label} has no {} mode '{r}' (it has {})",
                dimension.name(),
                all_modes.join(", ")
            )));
        }
        None => {
            let default = dimension.default_reference();
            match all_modes.iter().any(|m| m == default) {
                true => default.to_string(),
                false => all_modes[0].clone(),
            }
        }
    };
    // group -> size -> mode -> samples; fixed: the other dimension's mode
    let mut table: BTreeMap<CaseKey, (&'static str, Sizes)> = BTreeMap::new();
    for row in rows {
        let r = &row.record;
        let (_, sizes) = table
            .entry(dimension.group_of(r))
            .or_insert((dimension.other(r), BTreeMap::new()));
        sizes
            .entry(r.size_bytes)
            .or_default()
            .entry(dimension.of(r).to_string())
            .or_default()
            .push((o.metric.value(r), r.run_id.as_str()));
    }
    let mut why = BTreeSet::new();
    let groups = table
        .into_iter()
        .map(|(key, (fixed, sizes))| group(key, fixed, &sizes, &all_modes, &reference, o, &mut why))
        .collect();
    Ok(ModeReport {
        dimension,
        metric: o.metric,
        reference,
        label: label.to_string(),
        threshold_pct: o.threshold_pct,
        alpha: o.alpha,
        groups,
        notes: why.into_iter().map(|w: Unjudged| w.note(dimension, o.alpha)).collect(),
    })
}

/// Size -> mode -> the metric's samples, each with its launch (`run_id`).
type Sizes<'a> = BTreeMap<u64, BTreeMap<String, Vec<(f64, &'a str)>>>;

/// Why a comparison made no claim (each becomes one note).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Unjudged {
    /// A mode has a single sample at a size.
    OneSample,
    /// Several samples, too few for the rank test to reach alpha.
    TooFewSamples,
    /// Modes from separate launches, one launch each (whatever the
    /// samples inside each launch).
    SeparateLaunches,
    /// The winner changed between sizes without two sizes in a row on
    /// each side (`mark_crossovers`).
    UnconfirmedChange,
}

impl Unjudged {
    fn note(self, dimension: Dimension, alpha: f64) -> String {
        match self {
            Unjudged::OneSample => format!(
                "one sample per point: no speedup, winner or crossover is claimed, since one sample of each \
                 {} mode cannot tell a difference from noise; --repeat 5 (-N 5) takes five samples of every point",
                dimension.name()
            ),
            Unjudged::TooFewSamples => format!(
                "too few samples per point for the rank test to reach alpha {alpha} (3 against 3 cannot): no claim \
                 where that is so; --repeat 5 (-N 5) gives enough"
            ),
            Unjudged::SeparateLaunches => format!(
                "{} modes measured in separate launches, one launch of each: more samples inside a launch \
                 (--repeat, cycles) cannot tell a difference from launch-to-launch noise, so none is claimed; \
                 two or more launches of each mode can: `launches = 3` in a suite file",
                dimension.name()
            ),
            Unjudged::UnconfirmedChange => "the winner changes between sizes where one side wins at a single size, \
                 or sizes without a winner lie between: no crossover is claimed there (each size is judged at \
                 alpha, so one size in many can name another mode by chance); a crossover needs the old winner \
                 at the two sizes below it and the new one at it and the next size; a finer -f (-f 2) or more \
                 samples (-N 10) can show where the modes cross"
                .to_string(),
        }
    }
}

/// The modes of `dimension` in the order they first appear.
fn modes_in(rows: &[Row], dimension: Dimension) -> Vec<String> {
    let mut modes: Vec<String> = Vec::new();
    for r in rows {
        let m = dimension.of(&r.record);
        if !modes.iter().any(|x| x == m) {
            modes.push(m.to_string());
        }
    }
    modes
}

/// One group: its modes (the reference first), and per size each mode's
/// value, speedup and what the samples show, the winner and whether it
/// changed.
fn group(
    key: CaseKey,
    fixed: &str,
    sizes: &Sizes,
    all_modes: &[String],
    reference: &str,
    o: &ModeOptions,
    why: &mut BTreeSet<Unjudged>,
) -> Group {
    let mut modes: Vec<String> = vec![reference.to_string()];
    for m in all_modes {
        if m != reference && sizes.values().any(|v| v.contains_key(m)) {
            modes.push(m.clone());
        }
    }
    let mut points: Vec<Point> = sizes
        .iter()
        .map(|(&size_bytes, by_mode)| point(size_bytes, by_mode, &modes, o, why))
        .collect();
    mark_crossovers(&mut points, why);
    Group {
        collective: key.collective,
        fixed: fixed.to_string(),
        dtype: key.dtype,
        op: key.op,
        root: key.root,
        placement: key.placement,
        nranks: key.nranks.unwrap_or(0),
        modes,
        points,
    }
}

/// `better` against `worse`'s samples: what the samples show, the ratio
/// of the medians as a speedup (above 1: `better` is better), and its
/// interval.
fn versus(
    base: &[(f64, &str)],
    new: &[(f64, &str)],
    o: &ModeOptions,
    why: &mut BTreeSet<Unjudged>,
) -> (Difference, Option<[f64; 2]>) {
    let launches = |s: &[(f64, &str)]| -> BTreeSet<String> { s.iter().map(|x| x.1.to_string()).collect() };
    // modes of the same launches share what the launch drew
    let same_launches = launches(base) == launches(new);
    let params = noise::Params {
        metric: o.metric,
        threshold_pct: o.threshold_pct,
        alpha: o.alpha,
        within_launch: same_launches,
        // the bound is measured between launches of two runs, not between
        // the modes of one launch (docs/ci.md)
        launch_bound: None,
    };
    let j: Judgement = noise::judge(&samples(base), &samples(new), &params);
    let interval = j.interval_pct.map(|[lo, hi]| {
        let (lo, hi) = (1.0 + lo / 100.0, 1.0 + hi / 100.0);
        if o.metric.higher_is_better() {
            [lo, hi]
        } else {
            [1.0 / hi, 1.0 / lo]
        }
    });
    let difference = if j.test == Test::ThresholdOnly {
        // samples of separate launches claim nothing however many they
        // are (`Verdict::Unproven`): only more launches can
        why.insert(if !same_launches {
            Unjudged::SeparateLaunches
        } else if base.len() < 2 || new.len() < 2 {
            Unjudged::OneSample
        } else {
            Unjudged::TooFewSamples
        });
        Difference::NoClaim
    } else {
        match j.verdict {
            Verdict::Improved => Difference::Faster,
            Verdict::Regressed => Difference::Slower,
            Verdict::WithinNoise | Verdict::TooNoisy => Difference::NoSignificantDifference,
            Verdict::Unproven => {
                why.insert(Unjudged::SeparateLaunches);
                Difference::NoClaim
            }
        }
    };
    (difference, interval)
}

/// Samples as the noise model takes them.
fn samples<'a>(s: &[(f64, &'a str)]) -> Vec<Sample<'a>> {
    s.iter().map(|&(value, launch)| Sample { value, launch }).collect()
}

/// Marks the crossovers of a group's points (in size order): where the
/// winner changes from A to B with A the winner at the two sizes just
/// below and B at this size and the next (A A | B B, no size between
/// without a winner). One size's winner is judged at alpha, and a group
/// has many sizes, so a lone size that names another mode is expected now
/// and then from noise alone; two sizes in a row on each side are not.
/// A change of winner that falls short of this is noted, not claimed.
fn mark_crossovers(points: &mut [Point], why: &mut BTreeSet<Unjudged>) {
    let winners: Vec<Option<String>> = points.iter().map(|p| p.winner.clone()).collect();
    let at = |i: usize| winners.get(i).and_then(|w| w.as_deref());
    let mut last: Option<&str> = None;
    for (i, p) in points.iter_mut().enumerate() {
        let Some(now) = at(i) else { continue };
        if last.is_some_and(|l| l != now) {
            let before = i.checked_sub(1).and_then(at);
            let confirmed =
                before.is_some_and(|b| b != now) && i.checked_sub(2).and_then(at) == before && at(i + 1) == Some(now);
            p.crossover = confirmed;
            if !confirmed {
                why.insert(Unjudged::UnconfirmedChange);
            }
        }
        last = Some(now);
    }
}

/// One size of a group (its `crossover` is set by `mark_crossovers`).
fn point(
    size_bytes: u64,
    by_mode: &BTreeMap<String, Vec<(f64, &str)>>,
    modes: &[String],
    o: &ModeOptions,
    why: &mut BTreeSet<Unjudged>,
) -> Point {
    let metric = o.metric;
    let of = |m: &String| by_mode.get(m).filter(|s| !s.is_empty());
    let median = |s: &Vec<(f64, &str)>| crate::stats::median(&s.iter().map(|x| x.0).collect::<Vec<_>>());
    let values: Vec<Option<f64>> = modes.iter().map(|m| of(m).and_then(median)).collect();
    let reference_value = values[0];
    let speedups = values
        .iter()
        .map(|v| match (v, reference_value) {
            (Some(v), Some(r)) if *v > 0.0 && r > 0.0 => Some(if metric.higher_is_better() { v / r } else { r / v }),
            _ => None,
        })
        .collect();
    let mut intervals = vec![None; modes.len()];
    let mut differences = vec![None; modes.len()];
    if let Some(reference) = of(&modes[0]) {
        for (i, m) in modes.iter().enumerate().skip(1) {
            if let Some(samples) = of(m) {
                let (d, interval) = versus(reference, samples, o, why);
                differences[i] = Some(d);
                intervals[i] = interval;
            }
        }
    }
    // the best median, if the samples show it better than every other mode
    let best = modes
        .iter()
        .zip(&values)
        .filter_map(|(m, v)| v.map(|v| (m, v)))
        .fold(None, |best: Option<(&String, f64)>, (m, v)| match best {
            Some((_, b)) if !metric.better(v, b) => best,
            _ => Some((m, v)),
        })
        .map(|(m, _)| m.clone());
    let winner = best.filter(|w| {
        let others: Vec<&String> = modes.iter().filter(|m| *m != w && of(m).is_some()).collect();
        let Some(w_samples) = of(w) else { return false };
        !others.is_empty()
            && others.iter().all(|m| {
                let (d, _) = match of(m) {
                    Some(s) => versus(s, w_samples, o, why),
                    None => (Difference::NoClaim, None),
                };
                d == Difference::Faster
            })
    });
    Point {
        size_bytes,
        values,
        samples: modes.iter().map(|m| of(m).map_or(0, Vec::len)).collect(),
        speedups,
        intervals,
        differences,
        winner,
        crossover: false,
    }
}

#[cfg(test)]
mod tests;
