//! The terminal format of `compare`: aligned columns sized to their
//! content, one line per case (medians, change, its interval, p-value,
//! test, sample counts, spread as MAD / median of each side, verdict; a
//! case column that holds one value in every row is said once above the
//! table, `every row: hierarchy flat, ...`), then the one-sided rows, a summary
//! per collective and over all rows, the notes and the headline.
//! Warnings are not repeated here: they went to stderr.

use super::by_mode::{Difference, Group, ModeReport, Point};
use super::{Compared, Comparison, human_size};

pub fn comparison(c: &Comparison) -> String {
    let mut out = format!(
        "collbench compare: {} ({}), threshold {}%, alpha {}\n  base: {}\n  new:  {}\n\n",
        c.metric,
        c.metric.unit(),
        trim_float(c.threshold_pct),
        trim_float(c.alpha),
        side_line(
            &c.base_label,
            c.base_launches,
            c.rows.iter().map(|r| r.judgement.base_stats.n).sum()
        ),
        side_line(
            &c.new_label,
            c.new_launches,
            c.rows.iter().map(|r| r.judgement.new_stats.n).sum()
        ),
    );
    if c.rows.is_empty() {
        out.push_str("No case was measured on both sides.\n");
    } else {
        let rows = c.rows.iter().map(row_cells).collect();
        out.push_str(&folded_table(&ROW_HEADERS, rows, &[5, 7, 8, 9, 10, 11, 13, 15, 16]));
    }
    for (title, cases) in [
        (
            if c.missing_fails() {
                "Only in base, missing from the new run"
            } else {
                "Only in base"
            },
            &c.only_in_base,
        ),
        ("Only in new", &c.only_in_new),
    ] {
        if !cases.is_empty() {
            out.push_str(&format!("\n{title} ({}):\n", cases.len()));
            for case in cases.iter() {
                out.push_str(&format!("  {}\n", case.describe()));
            }
        }
    }
    if !c.summary.is_empty() {
        out.push_str("\nSummary by collective:\n");
        let rows = summary_rows(c).into_iter().collect();
        out.push_str(&table(&SUMMARY_HEADERS, rows, &[1, 2, 3, 4, 5, 6, 7, 8, 9]));
    }
    out.push('\n');
    for note in &c.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&c.headline());
    out.push('\n');
    out
}

/// `results/base (5 launches, 120 samples)`
fn side_line(label: &str, launches: usize, rows: usize) -> String {
    format!("{label} ({})", side_counts(launches, rows))
}

/// `5 launches, 120 samples`
pub(super) fn side_counts(launches: usize, rows: usize) -> String {
    format!(
        "{launches} launch{}, {rows} sample{}",
        if launches == 1 { "" } else { "es" },
        if rows == 1 { "" } else { "s" }
    )
}

/// The columns of one joined row, shared with the markdown format.
pub(super) const ROW_HEADERS: [&str; 18] = [
    "collective",
    "hierarchy",
    "transport",
    "dtype",
    "op",
    "root",
    "placement",
    "size",
    "ranks",
    "base",
    "new",
    "change",
    "interval",
    "p",
    "test",
    "n",
    "spread",
    "verdict",
];

pub(super) const SUMMARY_HEADERS: [&str; 10] = [
    "collective",
    "compared",
    "improved",
    "regressed",
    "within noise",
    "too noisy",
    "unproven",
    "only in base",
    "only in new",
    "geomean change",
];

/// The summary's cells per collective, then `all`.
pub(super) fn summary_rows(c: &Comparison) -> Vec<Vec<String>> {
    c.summary
        .iter()
        .chain(std::iter::once(&c.overall))
        .map(|s| {
            vec![
                s.collective.map_or_else(|| "all".to_string(), |c| c.name().to_string()),
                s.compared.to_string(),
                s.improved.to_string(),
                s.regressed.to_string(),
                s.within_noise.to_string(),
                s.too_noisy.to_string(),
                s.unproven.to_string(),
                s.only_in_base.to_string(),
                s.only_in_new.to_string(),
                fmt_change(s.geomean_change_pct),
            ]
        })
        .collect()
}

/// The cells of one joined row (`ROW_HEADERS`).
pub(super) fn row_cells(r: &Compared) -> Vec<String> {
    let case = &r.case;
    let j = &r.judgement;
    let ranks = if r.base_nranks == r.new_nranks {
        r.base_nranks.to_string()
    } else {
        format!("{}->{}", r.base_nranks, r.new_nranks)
    };
    let spread = |p: Option<f64>| p.map_or_else(|| "-".to_string(), |p| format!("{p:.1}%"));
    vec![
        case.collective.name().into(),
        case.hierarchy.name().into(),
        case.transport.name().into(),
        case.dtype.name().into(),
        crate::record::op_column::text(case.op).into(),
        case.root.map_or_else(|| "-".into(), |r| r.to_string()),
        case.placement.name().into(),
        human_size(case.size_bytes),
        ranks,
        fmt_value(r.base),
        fmt_value(r.new),
        fmt_change(j.change_pct),
        fmt_interval(j.interval_pct),
        fmt_p(j.p_adjusted),
        j.test.short().to_string(),
        format!("{}/{}", j.base_stats.n, j.new_stats.n),
        format!("{}/{}", spread(j.base_stats.mad_pct), spread(j.new_stats.mad_pct)),
        j.verdict.name().to_string(),
    ]
}

pub fn modes(r: &ModeReport) -> String {
    let mut out = format!("collbench compare --by {}: {}\n", r.dimension.name(), mode_claim(r, ""));
    for g in &r.groups {
        out.push_str(&format!("\n{}\n", g.title(r.dimension)));
        let headers = mode_headers(r, g);
        let rows = g
            .points
            .iter()
            .map(|p| {
                let (mut cells, winner) = mode_cells(r, g, p);
                cells.push(if p.crossover { format!("{winner} *") } else { winner });
                cells
            })
            .collect();
        let header_refs: Vec<&str> = headers.iter().map(String::as_str).collect();
        let numeric: Vec<usize> = (0..headers.len() - 1).collect();
        out.push_str(&table(&header_refs, rows, &numeric));
        let crossovers = g.crossovers();
        if !crossovers.is_empty() {
            let list: Vec<String> = crossovers
                .iter()
                .map(|(size, from, to)| format!("{} ({from} -> {to})", human_size(*size)))
                .collect();
            out.push_str(&format!("* crossover at {}\n", list.join(", ")));
        }
    }
    if !r.notes.is_empty() {
        out.push('\n');
    }
    for note in &r.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// What a mode comparison shows and when it claims a speedup (the line
/// under its title, in text and Markdown); names between `quote`s.
pub(super) fn mode_claim(r: &ModeReport, quote: &str) -> String {
    format!(
        "{} ({}) in {quote}{}{quote}; speedup over {quote}{}{quote}, claimed where the samples show it (beyond {}% \
         with p < {})",
        r.metric,
        r.metric.unit(),
        r.label,
        r.reference,
        trim_float(r.threshold_pct),
        trim_float(r.alpha)
    )
}

/// A mode table's columns: the size, each mode (a speedup after each but
/// the reference), the winner.
pub(super) fn mode_headers(r: &ModeReport, g: &Group) -> Vec<String> {
    let mut headers = vec!["size".to_string()];
    for m in &g.modes {
        headers.push(m.clone());
        if *m != r.reference {
            headers.push("speedup".into());
        }
    }
    headers.push("winner".into());
    headers
}

/// A mode table's row at `p`, as `mode_headers` orders it but the winner,
/// and the winner's cell (each renderer marks a crossover its own way).
pub(super) fn mode_cells(r: &ModeReport, g: &Group, p: &Point) -> (Vec<String>, String) {
    let mut cells = vec![human_size(p.size_bytes)];
    for (i, m) in g.modes.iter().enumerate() {
        cells.push(p.values[i].map_or("-".into(), fmt_value));
        if *m != r.reference {
            cells.push(speedup_cell(p, i));
        }
    }
    (cells, winner_cell(p))
}

/// A mode's speedup over the reference: `1.33x [1.30, 1.36]` where the
/// samples show a difference, `n.s. [0.97, 1.02]` where they show none
/// (the interval, never a claim), `-` where they cannot judge.
pub(super) fn speedup_cell(p: &Point, i: usize) -> String {
    let interval = p.intervals[i]
        .map(|[lo, hi]| format!(" [{lo:.2}, {hi:.2}]"))
        .unwrap_or_default();
    match (p.differences[i], p.speedups[i]) {
        (Some(d), Some(s)) if d.is_claim() => format!("{s:.2}x{interval}"),
        (Some(Difference::NoSignificantDifference), _) => format!("n.s.{interval}"),
        _ => "-".into(),
    }
}

/// The winner where the samples show one; `no significant difference`
/// where they were judged and show none; `-` where they cannot judge.
pub(super) fn winner_cell(p: &Point) -> String {
    match &p.winner {
        Some(w) => w.clone(),
        None if p.differences.iter().flatten().any(|d| *d != Difference::NoClaim) => "no significant difference".into(),
        None => "-".into(),
    }
}

/// Columns padded to their widest cell; `right` lists right-aligned columns.
/// The case columns (after `collective`, up to `ranks`) that hold one
/// value in every row are said once above the table instead of in every
/// line, so that the columns left are sized to what varies.
const FOLDABLE: std::ops::RangeInclusive<usize> = 1..=8;

/// `table` of the joined rows, with the case columns that never vary
/// folded into one line above it (`every row: hierarchy flat, ...`).
fn folded_table(headers: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let constant = |i: usize| rows.len() > 1 && rows.iter().all(|r| r.get(i) == rows[0].get(i));
    let folded: Vec<usize> = FOLDABLE.filter(|&i| constant(i)).collect();
    if folded.is_empty() {
        return table(headers, rows, right);
    }
    let common: Vec<String> = folded
        .iter()
        .map(|&i| format!("{} {}", headers[i], rows[0][i]))
        .collect();
    let kept = |i: &usize| !folded.contains(i);
    let keep_cells = |cells: Vec<String>| -> Vec<String> {
        cells
            .into_iter()
            .enumerate()
            .filter(|(i, _)| kept(i))
            .map(|(_, c)| c)
            .collect()
    };
    let kept_headers: Vec<&str> = headers
        .iter()
        .enumerate()
        .filter(|(i, _)| kept(i))
        .map(|(_, h)| *h)
        .collect();
    let kept_right: Vec<usize> = (0..headers.len())
        .filter(kept)
        .enumerate()
        .filter(|(_, old)| right.contains(old))
        .map(|(new, _)| new)
        .collect();
    let rows = rows.into_iter().map(keep_cells).collect();
    format!(
        "every row: {}\n{}",
        common.join(", "),
        table(&kept_headers, rows, &kept_right)
    )
}

fn table(headers: &[&str], rows: Vec<Vec<String>>, right: &[usize]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| -> String {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let w = widths.get(i).copied().unwrap_or(0);
                if right.contains(&i) {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(headers.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// `5` rather than `5.0`, `2.5` as is.
pub(crate) fn trim_float(v: f64) -> String {
    let s = format!("{v}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// A metric value with precision that suits its size.
pub(crate) fn fmt_value(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".into();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.001 {
        format!("{v:.4}")
    } else {
        // a collapsed bandwidth (both ranks on one core): three figures
        format!("{v:.2e}")
    }
}

pub(crate) fn fmt_change(c: Option<f64>) -> String {
    match c {
        Some(c) => format!("{c:+.1}%"),
        None => "n/a".into(),
    }
}

/// `[-8.1%, +2.0%]`, or `-` without an interval.
pub(crate) fn fmt_interval(i: Option<[f64; 2]>) -> String {
    match i {
        Some([lo, hi]) => format!("[{lo:+.1}%, {hi:+.1}%]"),
        None => "-".into(),
    }
}

/// A p-value to four decimals, `<0.0001` below that.
pub(crate) fn fmt_p(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 1e-4 => "<0.0001".into(),
        Some(p) => format!("{p:.4}"),
        None => "-".into(),
    }
}
