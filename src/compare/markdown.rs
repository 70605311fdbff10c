//! The markdown format of `compare`, for CI job summaries and pull-request
//! comments: the headline first, warnings, regressions next (with their
//! interval and p-value), the summary by collective and over all rows, the
//! one-sided cases, and every row folded away in a `<details>` block.

use super::by_mode::ModeReport;
use super::text::{ROW_HEADERS, SUMMARY_HEADERS, row_cells, side_counts, summary_rows};
use super::text::{fmt_change, fmt_interval, fmt_p, fmt_value, mode_cells, mode_claim, mode_headers, trim_float};
use super::{Comparison, Verdict};

pub fn comparison(c: &Comparison) -> String {
    let regressed = c.count(Verdict::Regressed) > 0;
    let mut out = format!("## collbench compare: {}\n\n", c.metric);
    let headline = c.headline();
    let (word, rest) = headline.split_once(':').unwrap_or((&headline, ""));
    out.push_str(&format!("**{word}**:{rest}\n\n"));
    out.push_str(&format!(
        "Base `{}` ({}), new `{}` ({}); {} in {}, threshold {}%, alpha {}.\n",
        c.base_label,
        side_counts(c.base_launches, c.rows.iter().map(|r| r.judgement.base_stats.n).sum()),
        c.new_label,
        side_counts(c.new_launches, c.rows.iter().map(|r| r.judgement.new_stats.n).sum()),
        c.metric,
        c.metric.unit(),
        trim_float(c.threshold_pct),
        trim_float(c.alpha)
    ));
    if !c.warnings.is_empty() {
        out.push('\n');
        for w in &c.warnings {
            out.push_str(&format!("> **warning**: {w}\n"));
        }
    }
    if regressed {
        out.push_str(&regressions(c));
    }
    if !c.summary.is_empty() {
        out.push_str(&format!(
            "\n### Summary by collective\n\n| {} |\n|---|{}\n",
            SUMMARY_HEADERS.join(" | "),
            "---:|".repeat(SUMMARY_HEADERS.len() - 1)
        ));
        for cells in summary_rows(c) {
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
    }
    let missing_title = if c.missing_fails() {
        "Only in base, missing from the new run"
    } else {
        "Only in base"
    };
    for (title, cases) in [(missing_title, &c.only_in_base), ("Only in new", &c.only_in_new)] {
        if !cases.is_empty() {
            out.push_str(&format!("\n### {title} ({})\n\n", cases.len()));
            for case in cases.iter() {
                out.push_str(&format!("- {}\n", case.describe()));
            }
        }
    }
    if !c.rows.is_empty() {
        out.push_str(&format!(
            "\n<details><summary>All {} compared rows</summary>\n\n| {} |\n\
             |---|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|\n",
            c.rows.len(),
            ROW_HEADERS.join(" | ")
        ));
        for r in &c.rows {
            out.push_str(&format!("| {} |\n", row_cells(r).join(" | ")));
        }
        out.push_str("\n</details>\n");
    }
    if !c.notes.is_empty() {
        out.push('\n');
        for note in &c.notes {
            out.push_str(&format!("> note: {note}\n"));
        }
    }
    out
}

/// The regressions table, with each row's interval, p-value and samples.
fn regressions(c: &Comparison) -> String {
    let mut out = String::from(
        "\n### Regressions\n\n| case | base | new | change | interval | p | n |\n|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in c.regressions() {
        let j = &r.judgement;
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {}/{} |\n",
            r.case.describe(),
            fmt_value(r.base),
            fmt_value(r.new),
            fmt_change(j.change_pct),
            fmt_interval(j.interval_pct),
            fmt_p(j.p_adjusted),
            j.base_stats.n,
            j.new_stats.n
        ));
    }
    out
}

pub fn modes(r: &ModeReport) -> String {
    let mut out = format!(
        "## collbench compare --by {}: {}\n\n{}.\n",
        r.dimension.name(),
        r.metric,
        mode_claim(r, "`")
    );
    for g in &r.groups {
        let headers = mode_headers(r, g);
        let align: String = headers.iter().map(|_| "---:|").collect();
        out.push_str(&format!(
            "\n### {}\n\n| {} |\n|{}---|\n",
            g.title(r.dimension),
            headers.join(" | "),
            &align[..align.len() - "---:|".len()]
        ));
        for p in &g.points {
            let (cells, winner) = mode_cells(r, g, p);
            let winner = if p.crossover {
                format!("**{winner}** (crossover)")
            } else {
                winner
            };
            out.push_str(&format!("| {} | {winner} |\n", cells.join(" | ")));
        }
    }
    if !r.notes.is_empty() {
        out.push('\n');
    }
    for note in &r.notes {
        out.push_str(&format!("> note: {note}\n"));
    }
    out
}
