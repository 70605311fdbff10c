//! The comparison's summary: counts per collective and over every row,
//! the geometric mean of the changes, and notes on which test judged how
//! many rows.

use std::collections::BTreeMap;

use super::{CaseKey, Compared, Fallback, Judgement, Summary, Test, Verdict, rows_of};
use crate::collective::Collective;

/// Notes on how the rows were judged: the family the p-values were
/// adjusted over, one line per test used (with how many rows), why rows
/// fell back to the threshold, and what an unproven row lacks.
pub(super) fn test_notes(rows: &[Compared], within_launch: bool) -> Vec<String> {
    let count = |f: &dyn Fn(&Judgement) -> bool| rows.iter().filter(|r| f(&r.judgement)).count();
    let mut notes = Vec::new();
    let tested = count(&|j| j.p_value.is_some());
    if tested > 1 {
        notes.push(format!(
            "p-values adjusted for the {tested} rows tested together (Holm's method), so that the chance of an \
             unchanged run failing any of them stays under alpha; the p column shows the adjusted value \
             (JSON: p_adjusted, and p_value the row's own)"
        ));
    }
    let launch_t = count(&|j| j.test == Test::LaunchT);
    if launch_t > 0 {
        notes.push(format!(
            "{} judged against the launch-to-launch spread (t-test on the launches' medians)",
            rows_of(launch_t)
        ));
    }
    let rank = count(&|j| j.test == Test::MannWhitney);
    if rank > 0 {
        let how = if within_launch {
            "(--within-launch)"
        } else {
            "(a change beyond the threshold is unproven)"
        };
        notes.push(format!(
            "{} judged by the Mann-Whitney U test on one launch per side {how}: it sees the noise inside a \
             launch, not from launch to launch; a baseline of several launches (a folder of CSVs) shows that",
            rows_of(rank)
        ));
    }
    for why in [Fallback::OneSample, Fallback::TooFewSamples, Fallback::NotPositive] {
        let n = count(&|j| j.fallback == Some(why));
        if n > 0 {
            notes.push(format!(
                "{} judged by the threshold alone: {}",
                rows_of(n),
                why.describe()
            ));
        }
    }
    let bound = count(&|j| j.test == Test::LaunchBound);
    if bound > 0 {
        notes.push(format!(
            "{} judged from one launch per side by the launch bound: every sample of the new launch lies beyond \
             the base launch's range by more than a factor of {} (docs/ci.md, \"One launch per side\"), far \
             outside what two launches of an unchanged machine differ by",
            rows_of(bound),
            super::text::trim_float(super::noise::LAUNCH_BOUND)
        ));
    }
    let unproven = count(&|j| j.verdict == Verdict::Unproven);
    if unproven > 0 {
        notes.push(format!(
            "{} unproven: changed by more than the threshold, but with one launch per side the samples \
             cannot tell a change from launch-to-launch noise (it is not beyond the launch bound), so they \
             fail nothing; a baseline of several \
             launches can (a folder of CSVs: scripts/ci-regression.sh --create-baseline makes one), or \
             --within-launch judges them by the samples inside the launches",
            rows_of(unproven)
        ));
    }
    notes
}

pub(super) fn summarise(rows: &[Compared], only_base: &[CaseKey], only_new: &[CaseKey]) -> Vec<Summary> {
    let mut table: BTreeMap<Collective, Summary> = BTreeMap::new();
    fn get(table: &mut BTreeMap<Collective, Summary>, c: Collective) -> &mut Summary {
        table.entry(c).or_insert_with(|| Summary {
            collective: Some(c),
            ..Default::default()
        })
    }
    for r in rows {
        count_into(get(&mut table, r.case.collective), r);
    }
    for c in only_base {
        get(&mut table, c.collective).only_in_base += 1;
    }
    for c in only_new {
        get(&mut table, c.collective).only_in_new += 1;
    }
    table
        .into_values()
        .map(|mut s| {
            let collective = s.collective;
            s.geomean_change_pct = geomean(rows.iter().filter(|r| Some(r.case.collective) == collective));
            s
        })
        .collect()
}

fn count_into(s: &mut Summary, r: &Compared) {
    s.compared += 1;
    match r.verdict() {
        Verdict::Improved => s.improved += 1,
        Verdict::Regressed => s.regressed += 1,
        Verdict::WithinNoise => s.within_noise += 1,
        Verdict::TooNoisy => s.too_noisy += 1,
        Verdict::Unproven => s.unproven += 1,
    }
}

/// Every row's counts, and the geometric mean over every row.
pub(super) fn total(summary: &[Summary], rows: &[Compared]) -> Summary {
    let mut all = Summary::default();
    for s in summary {
        all.compared += s.compared;
        all.improved += s.improved;
        all.regressed += s.regressed;
        all.within_noise += s.within_noise;
        all.too_noisy += s.too_noisy;
        all.unproven += s.unproven;
        all.only_in_base += s.only_in_base;
        all.only_in_new += s.only_in_new;
    }
    all.geomean_change_pct = geomean(rows.iter());
    all
}

/// The geometric mean of new / base over rows with both medians above 0,
/// as a change in percent.
fn geomean<'a>(rows: impl Iterator<Item = &'a Compared>) -> Option<f64> {
    let logs: Vec<f64> = rows
        .filter(|r| r.base > 0.0 && r.new > 0.0)
        .map(|r| (r.new / r.base).ln())
        .collect();
    (!logs.is_empty()).then(|| ((logs.iter().sum::<f64>() / logs.len() as f64).exp() - 1.0) * 100.0)
}
