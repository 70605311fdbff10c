//! `collbench compare --by hierarchy|transport FILE`: the modes measured
//! inside one CSV side by side. Per group (collective, the other
//! dimension, dtype, op, root, placement, nranks) and size: each mode's
//! metric, its speedup over the reference mode, the winner, and the
//! crossover sizes where the winner changes from the previous size.
//!
//! Speedup is metric / reference metric for bandwidths and reference time /
//! time for time, so above 1 is always better than the reference. A point
//! measured several times (cycles, launches) counts with the median of
//! its samples.

use std::collections::BTreeMap;

use serde::Serialize;

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

#[derive(Clone, Debug, Serialize)]
pub struct ModeReport {
    pub dimension: Dimension,
    pub metric: Metric,
    pub reference: String,
    pub label: String,
    pub groups: Vec<Group>,
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

#[derive(Clone, Debug, Serialize)]
pub struct Point {
    pub size_bytes: u64,
    /// Per mode, in `Group::modes` order; None where not measured.
    pub values: Vec<Option<f64>>,
    /// Per mode, over the reference; None without both values.
    pub speedups: Vec<Option<f64>>,
    pub winner: Option<String>,
    /// The winner differs from the previous size's winner.
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
    metric: Metric,
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
    // group -> size -> mode -> value; fixed: the other dimension's mode
    let mut table: BTreeMap<CaseKey, (&'static str, Samples)> = BTreeMap::new();
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
            .push(metric.value(r));
    }
    let groups = table
        .into_iter()
        .map(|(key, (fixed, samples))| {
            let sizes = medians(samples);
            group(key, fixed, sizes, &all_modes, &reference, metric)
        })
        .collect();
    Ok(ModeReport {
        dimension,
        metric,
        reference,
        label: label.to_string(),
        groups,
    })
}

/// Size -> mode -> the metric's value.
type Sizes = BTreeMap<u64, BTreeMap<String, f64>>;

/// Size -> mode -> the metric's samples (several cycles or launches).
type Samples = BTreeMap<u64, BTreeMap<String, Vec<f64>>>;

/// Each mode's value at a size: the median of its samples.
fn medians(samples: Samples) -> Sizes {
    samples
        .into_iter()
        .map(|(size, modes)| {
            let values = modes
                .into_iter()
                .filter_map(|(mode, v)| crate::stats::median(&v).map(|m| (mode, m)))
                .collect();
            (size, values)
        })
        .collect()
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
/// value, speedup, the winner and whether it changed.
fn group(key: CaseKey, fixed: &str, sizes: Sizes, all_modes: &[String], reference: &str, metric: Metric) -> Group {
    let mut modes: Vec<String> = vec![reference.to_string()];
    for m in all_modes {
        if m != reference && sizes.values().any(|v| v.contains_key(m)) {
            modes.push(m.clone());
        }
    }
    let mut previous: Option<String> = None;
    let points = sizes
        .into_iter()
        .map(|(size_bytes, by_mode)| {
            let p = point(size_bytes, &by_mode, &modes, metric, previous.as_deref());
            if p.winner.is_some() {
                previous = p.winner.clone();
            }
            p
        })
        .collect();
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

/// One size of a group; `previous` is the last size's winner.
fn point(
    size_bytes: u64,
    by_mode: &BTreeMap<String, f64>,
    modes: &[String],
    metric: Metric,
    previous: Option<&str>,
) -> Point {
    let values: Vec<Option<f64>> = modes.iter().map(|m| by_mode.get(m).copied()).collect();
    let reference_value = values[0];
    let speedups = values
        .iter()
        .map(|v| match (v, reference_value) {
            (Some(v), Some(r)) if *v > 0.0 && r > 0.0 => Some(if metric.higher_is_better() { v / r } else { r / v }),
            _ => None,
        })
        .collect();
    let winner = modes
        .iter()
        .zip(&values)
        .filter_map(|(m, v)| v.map(|v| (m, v)))
        .fold(None, |best: Option<(&String, f64)>, (m, v)| match best {
            Some((_, b)) if !metric.better(v, b) => best,
            _ => Some((m, v)),
        })
        .map(|(m, _)| m.clone());
    let crossover = matches!((previous, &winner), (Some(p), Some(w)) if p != w);
    Point {
        size_bytes,
        values,
        speedups,
        winner,
        crossover,
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{loaded, record};
    use super::*;

    fn rows() -> Vec<Row> {
        let mut records = Vec::new();
        // flat wins small sizes, rs-ar-ag from 64 KiB on
        for (size, flat, hier) in [(1024u64, 10.0, 12.0), (65536, 100.0, 80.0), (1 << 20, 1000.0, 700.0)] {
            let mut f = record("all_reduce", size, flat, 0.0);
            f.hierarchy = Hierarchy::Flat;
            let mut h = record("all_reduce", size, hier, 0.0);
            h.hierarchy = Hierarchy::RsArAg;
            records.push(h);
            records.push(f);
        }
        loaded("x.csv", records).rows
    }

    #[test]
    fn speedups_are_over_flat_and_the_crossover_is_marked() {
        let r = compare_modes("x.csv", &rows(), Dimension::Hierarchy, Metric::Busbw, None).unwrap();
        assert_eq!(r.reference, "flat");
        let g = &r.groups[0];
        assert_eq!(g.modes, ["flat", "rs-ar-ag"]);
        let winners: Vec<_> = g.points.iter().map(|p| p.winner.clone().unwrap()).collect();
        assert_eq!(winners, ["flat", "rs-ar-ag", "rs-ar-ag"]);
        assert_eq!(
            g.points.iter().map(|p| p.crossover).collect::<Vec<_>>(),
            [false, true, false]
        );
        assert_eq!(g.crossovers(), [(65536, "flat".to_string(), "rs-ar-ag".to_string())]);
        let s = g.points[2].speedups[1].unwrap();
        assert!((s - 1000.0 / 700.0).abs() < 1e-9, "{s}");
        assert_eq!(g.points[0].speedups[0], Some(1.0));
        // time: the same speedups (reference time / time)
        let t = compare_modes("x.csv", &rows(), Dimension::Hierarchy, Metric::Time, None).unwrap();
        assert!((t.groups[0].points[2].speedups[1].unwrap() - s).abs() < 1e-9);
    }

    #[test]
    fn a_single_mode_or_an_unknown_reference_is_a_usage_error() {
        let flat: Vec<Row> = rows().into_iter().filter(|r| r.record.hierarchy.is_flat()).collect();
        let e = compare_modes("x.csv", &flat, Dimension::Hierarchy, Metric::Busbw, None).unwrap_err();
        assert!(e.to_string().contains("needs a CSV that measured several"), "{e}");
        let e = compare_modes("x.csv", &rows(), Dimension::Hierarchy, Metric::Busbw, Some("ring")).unwrap_err();
        assert!(e.to_string().contains("no hierarchy mode 'ring'"), "{e}");
        // transport: no `auto` here, so the first mode is the reference
        let mut rs = rows();
        for (i, r) in rs.iter_mut().enumerate() {
            r.record.transport = if i % 2 == 0 { Profile::Nvlink } else { Profile::Ib };
            r.record.hierarchy = Hierarchy::Flat;
        }
        let t = compare_modes("x.csv", &rs, Dimension::Transport, Metric::Busbw, None).unwrap();
        assert_eq!(t.reference, "nvlink");
    }
}
