//! What compare says about its two sides before the numbers: the method
//! check's refusal or warnings, rows written by another tool, and rows of
//! one side that repeat or mix measurements.

use std::collections::BTreeSet;

use super::{CompareOptions, method};
use crate::error::Error;
use crate::record::CaseKey;
use crate::record::read::{Loaded, Row};

/// The method check (`method`): a refusal as a usage error, or the
/// warnings to print.
pub(super) fn method_warnings(
    base: &Loaded,
    new: &Loaded,
    joined: &[(&[&Row], &[&Row])],
    opts: &CompareOptions,
) -> Result<Vec<String>, Error> {
    let differences = method::differences(joined.iter().copied());
    let refused: Vec<&method::Difference> = differences
        .iter()
        .filter(|d| d.weight == method::Weight::Refuse)
        .collect();
    if !refused.is_empty() && !opts.allow_method_change {
        let list: Vec<String> = refused.iter().map(|d| d.describe()).collect();
        return Err(Error::usage(format!(
            "{} and {} were measured differently: {}; such rows do not compare \
             (pass --allow-method-change to compare them anyway)",
            base.label,
            new.label,
            list.join(", ")
        )));
    }
    let mut warnings = Vec::new();
    for d in &differences {
        warnings.push(match d.weight {
            method::Weight::Refuse => format!(
                "measured differently: {}; compared anyway (--allow-method-change)",
                d.describe()
            ),
            method::Weight::Warn => format!("{} differs", d.describe()),
        });
    }
    warnings.extend(tool_warning(joined));
    if let Some(algo) = algo_change(joined) {
        if !opts.allow_algo_change {
            return Err(Error::usage(format!(
                "{} and {}: {algo}; such rows do not compare, a busbw follows the algorithm as much as the \
                 machine (pass --allow-algo-change to compare them anyway, or pin both runs with --algo; \
                 docs/algorithms.md)",
                base.label, new.label
            )));
        }
        warnings.push(format!("{algo}; compared anyway (--allow-algo-change)"));
    }
    for (side, loaded) in [("base", base), ("new", new)] {
        warnings.extend(side_warnings(side, loaded));
    }
    Ok(warnings)
}

/// Rows imported from another tool joined with rows of collbench (or of
/// another tool), as `collbench_version` names them.
fn tool_warning(joined: &[(&[&Row], &[&Row])]) -> Option<String> {
    let tools = |side: usize| -> BTreeSet<String> {
        let rows: Vec<&Row> = joined
            .iter()
            .flat_map(|j| if side == 0 { j.0 } else { j.1 })
            .copied()
            .collect();
        method::tools(&rows)
    };
    let (base_tools, new_tools) = (tools(0), tools(1));
    let join = |s: &BTreeSet<String>| s.iter().cloned().collect::<Vec<_>>().join(", ");
    (!base_tools.is_empty() && !new_tools.is_empty() && base_tools != new_tools).then(|| {
        format!(
            "base rows come from {} and new rows from {}: the tools time differently, \
             so a change may be the tool's, not the machine's",
            join(&base_tools),
            join(&new_tools)
        )
    })
}

/// Joined cases where NCCL ran another algorithm or protocol on one side
/// than on the other (`--algo-record`, docs/algorithms.md), as far as both
/// sides recorded it, the first three named: a refusal unless
/// `--allow-algo-change`, as a method change is (a change of NCCL's
/// choice may be what a regression is made of: the reader then compares
/// with the option and sees both).
fn algo_change(joined: &[(&[&Row], &[&Row])]) -> Option<String> {
    let choices = |rows: &[&Row]| -> BTreeSet<String> {
        rows.iter()
            .filter_map(|r| Some(format!("{}/{}", r.record.algo?, r.record.proto?)))
            .collect()
    };
    let differ: Vec<String> = joined
        .iter()
        .filter_map(|(base, new)| {
            let (b, n) = (choices(base), choices(new));
            let join = |s: BTreeSet<String>| s.into_iter().collect::<Vec<_>>().join("+");
            let case = base.first().map(|r| CaseKey::of(&r.record, false).describe())?;
            (!b.is_empty() && !n.is_empty() && b != n).then(|| format!("{case} (base {}, new {})", join(b), join(n)))
        })
        .collect();
    let (first, more) = (
        differ.iter().take(3).cloned().collect::<Vec<_>>(),
        differ.len().saturating_sub(3),
    );
    (!differ.is_empty()).then(|| {
        format!(
            "NCCL ran another algorithm or protocol on {} joined case{}: {}{}",
            differ.len(),
            if differ.len() == 1 { "" } else { "s" },
            first.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    })
}

/// One side's own warnings: files without method columns (one line for
/// the side), measurements read twice.
fn side_warnings(side: &str, loaded: &Loaded) -> Vec<String> {
    let mut warnings = Vec::new();
    let unknown = method::unknown_method(&loaded.rows);
    if !unknown.is_empty() {
        let what = if loaded.files.len() == 1 {
            format!("{side} {} has", loaded.label)
        } else {
            let names: Vec<String> = unknown.iter().take(3).map(|f| f.display().to_string()).collect();
            let more = if unknown.len() > 3 { ", ..." } else { "" };
            format!(
                "{side}: {} of {} files ({}{more}) have",
                unknown.len(),
                loaded.files.len(),
                names.join(", ")
            )
        };
        warnings.push(format!(
            "{what} no method columns (an older collbench, or an import): \
             its method is unknown, compared as if measured the same way"
        ));
    }
    let repeated = repeated_measurements(&loaded.rows);
    if repeated > 0 {
        warnings.push(format!(
            "{side} {}: {repeated} row{} repeat a measurement already read (same run_id, cycle and case: \
             a file given twice?); each counts as a sample",
            loaded.label,
            if repeated == 1 { "" } else { "s" }
        ));
    }
    warnings
}

/// Rows whose run_id, cycle and case were already seen (the same
/// measurement read twice, e.g. a CSV copied into the baseline folder).
fn repeated_measurements(rows: &[Row]) -> usize {
    let mut seen = BTreeSet::new();
    rows.iter()
        .filter(|r| !r.record.run_id.is_empty())
        .filter(|r| !seen.insert((r.record.run_id.as_str(), r.record.cycle, CaseKey::of(&r.record, true))))
        .count()
}
