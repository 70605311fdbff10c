//! The terminal format of `compare`: aligned columns, one line per case,
//! then the one-sided rows, a summary per collective and the headline.

use super::by_mode::ModeReport;
use super::{Compared, Comparison, fmt_change, fmt_value, human_size, trim_float};

pub fn comparison(c: &Comparison) -> String {
    let mut out = format!(
        "collbench compare: {} ({}), threshold {}%\n  base: {}\n  new:  {}\n\n",
        c.metric,
        c.metric.unit(),
        trim_float(c.threshold_pct),
        c.base_label,
        c.new_label
    );
    if c.rows.is_empty() {
        out.push_str("No case was measured on both sides.\n");
    } else {
        let headers = [
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
            "verdict",
        ];
        let rows = c.rows.iter().map(row_cells).collect();
        out.push_str(&table(&headers, rows, &[5, 7, 8, 9, 10, 11]));
    }
    for (title, cases) in [("Only in base", &c.only_in_base), ("Only in new", &c.only_in_new)] {
        if !cases.is_empty() {
            out.push_str(&format!("\n{title} ({}):\n", cases.len()));
            for case in cases.iter() {
                out.push_str(&format!("  {}\n", case.describe()));
            }
        }
    }
    if !c.summary.is_empty() {
        out.push_str("\nSummary by collective:\n");
        let headers = [
            "collective",
            "compared",
            "improved",
            "regressed",
            "within noise",
            "only in base",
            "only in new",
            "geomean change",
        ];
        let rows = c
            .summary
            .iter()
            .map(|s| {
                vec![
                    s.collective.name().to_string(),
                    s.compared.to_string(),
                    s.improved.to_string(),
                    s.regressed.to_string(),
                    s.within_noise.to_string(),
                    s.only_in_base.to_string(),
                    s.only_in_new.to_string(),
                    fmt_change(s.geomean_change_pct),
                ]
            })
            .collect();
        out.push_str(&table(&headers, rows, &[1, 2, 3, 4, 5, 6, 7]));
    }
    out.push('\n');
    for note in &c.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out.push_str(&c.headline());
    out.push('\n');
    out
}

/// The cells of one joined row, shared with the markdown format.
pub(super) fn row_cells(r: &Compared) -> Vec<String> {
    let case = &r.case;
    let ranks = if r.base_nranks == r.new_nranks {
        r.base_nranks.to_string()
    } else {
        format!("{}->{}", r.base_nranks, r.new_nranks)
    };
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
        fmt_change(r.change_pct),
        r.verdict.name().to_string(),
    ]
}

pub fn modes(r: &ModeReport) -> String {
    let mut out = format!(
        "collbench compare --by {}: {} ({}) in {}; speedup over {}\n",
        r.dimension.name(),
        r.metric,
        r.metric.unit(),
        r.label,
        r.reference
    );
    for g in &r.groups {
        out.push_str(&format!("\n{}\n", g.title(r.dimension)));
        let mut headers = vec!["size".to_string()];
        for m in &g.modes {
            headers.push(m.clone());
            if *m != r.reference {
                headers.push("speedup".into());
            }
        }
        headers.push("winner".into());
        let rows = g
            .points
            .iter()
            .map(|p| {
                let mut cells = vec![human_size(p.size_bytes)];
                for (i, m) in g.modes.iter().enumerate() {
                    cells.push(p.values[i].map_or("-".into(), fmt_value));
                    if *m != r.reference {
                        cells.push(p.speedups[i].map_or("-".into(), |s| format!("{s:.2}x")));
                    }
                }
                let winner = p.winner.clone().unwrap_or_else(|| "-".into());
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
    out
}

/// Columns padded to their widest cell; `right` lists right-aligned columns.
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
