//! How the rows were measured, side against side (docs/ci.md, "Measured
//! the same way"): the method columns that make two rows
//! incomparable (a refusal, exit 2, unless `--allow-method-change`), the
//! identity columns that only earn a warning, rows imported from another
//! tool, and files written before the method columns existed.
//!
//! Only finds and words the differences; `compare` decides what to do
//! with them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use crate::record::Record;
use crate::record::read::Row;

/// Whether a difference in a column stops the comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Weight {
    /// Rows measured this differently do not compare (`--allow-method-change`).
    Refuse,
    /// Worth knowing, never a reason to refuse.
    Warn,
}

/// A column's value as the CSV writes it; None when unknown (an older CSV,
/// an imported row).
type Getter = fn(&Record) -> Option<String>;

/// The columns checked, in the order differences are reported.
pub const COLUMNS: [(&str, Weight, Getter); 11] = [
    ("backend", Weight::Refuse, |r| Some(r.backend.name().to_string())),
    ("timing", Weight::Refuse, |r| r.timing.map(|t| t.name().to_string())),
    ("average", Weight::Refuse, |r| r.average.map(|a| a.name().to_string())),
    ("iter_policy", Weight::Refuse, |r| {
        r.iter_policy.map(|p| p.name().to_string())
    }),
    ("agg_iters", Weight::Refuse, |r| r.agg_iters.map(|v| v.to_string())),
    ("cuda_graph", Weight::Refuse, |r| r.cuda_graph.map(|v| v.to_string())),
    ("register", Weight::Refuse, |r| {
        r.register.map(|v| v.column().to_string())
    }),
    ("rotate", Weight::Refuse, |r| r.rotate.map(|v| v.to_string())),
    ("collbench_version", Weight::Warn, |r| {
        r.collbench_version
            .clone()
            .filter(|v| !v.is_empty() && tool(v).is_none())
    }),
    ("precision_target_pct", Weight::Warn, |r| {
        r.precision_target_pct.map(|v| v.to_string())
    }),
    // no label is a value of its own: `nightly` against none differs
    ("label", Weight::Warn, |r| {
        Some(
            r.label
                .clone()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| "(none)".into()),
        )
    }),
];

/// A column whose values differ between the sides on some joined case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    pub column: &'static str,
    pub weight: Weight,
    pub base: String,
    pub new: String,
}

impl Difference {
    /// `timing (base batched, new blocking)`
    pub fn describe(&self) -> String {
        format!("{} (base {}, new {})", self.column, self.base, self.new)
    }
}

/// The first difference of each column over the joined cases, each case
/// given as its base rows and its new rows. Unknown values are left out:
/// a column unknown on a side cannot differ (`unknown_method` says so).
pub fn differences<'a>(cases: impl IntoIterator<Item = (&'a [&'a Row], &'a [&'a Row])>) -> Vec<Difference> {
    let mut found: BTreeMap<usize, Difference> = BTreeMap::new();
    for (base, new) in cases {
        for (i, (column, weight, get)) in COLUMNS.iter().enumerate() {
            if found.contains_key(&i) {
                continue;
            }
            let values = |rows: &[&Row]| -> BTreeSet<String> { rows.iter().filter_map(|r| get(&r.record)).collect() };
            let (b, n) = (values(base), values(new));
            if !b.is_empty() && !n.is_empty() && b != n {
                let join = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>().join("+");
                found.insert(
                    i,
                    Difference {
                        column,
                        weight: *weight,
                        base: join(b),
                        new: join(n),
                    },
                );
            }
        }
    }
    found.into_values().collect()
}

/// The tool a `collbench_version` value names, for rows imported from
/// another tool (`nccl-tests 2.17.8`, `osu 7.4`): a value that is not a
/// bare version number.
pub fn tool(version: &str) -> Option<&str> {
    let v = version.trim();
    let first = v.split_whitespace().next()?;
    let bare_version = !v.contains(char::is_whitespace) && first.starts_with(|c: char| c.is_ascii_digit());
    (!bare_version).then_some(first)
}

/// The tools (`collbench` for collbench's own rows) the rows of a side
/// were measured with, as `collbench_version` names them.
pub fn tools(rows: &[&Row]) -> BTreeSet<String> {
    rows.iter()
        .filter_map(|r| r.record.collbench_version.as_deref())
        .filter(|v| !v.trim().is_empty())
        .map(|v| match tool(v) {
            Some(_) => v.trim().to_string(),
            None => "collbench".to_string(),
        })
        .collect()
}

/// The files of a side none of whose rows say how they were measured
/// (written before the method columns existed, or imported without them).
pub fn unknown_method(rows: &[Row]) -> Vec<PathBuf> {
    let mut known: BTreeMap<&PathBuf, bool> = BTreeMap::new();
    for r in rows {
        let has = r.record.timing.is_some() || r.record.average.is_some() || r.record.iter_policy.is_some();
        *known.entry(&r.file).or_insert(false) |= has;
    }
    known.into_iter().filter(|(_, k)| !k).map(|(f, _)| f.clone()).collect()
}
