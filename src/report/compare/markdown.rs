//! The markdown format of `compare`, for CI job summaries and pull-request
//! comments: the headline first, regressions next, the summary by
//! collective, and every row folded away in a `<details>` block.

use super::by_mode::ModeReport;
use super::text::row_cells;
use super::{Comparison, Verdict, fmt_change, fmt_value, human_size, trim_float};

pub fn comparison(c: &Comparison) -> String {
    let regressed = c.count(Verdict::Regressed) > 0;
    let mut out = format!("## collbench compare: {}\n\n", c.metric);
    let headline = c.headline();
    let (word, rest) = headline.split_once(':').unwrap_or((&headline, ""));
    out.push_str(&format!("**{word}**:{rest}\n\n"));
    out.push_str(&format!(
        "Base `{}`, new `{}`; {} in {}, threshold {}%.\n",
        c.base_label,
        c.new_label,
        c.metric,
        c.metric.unit(),
        trim_float(c.threshold_pct)
    ));
    if regressed {
        out.push_str("\n### Regressions\n\n| case | base | new | change |\n|---|---:|---:|---:|\n");
        for r in c.regressions() {
            out.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                r.case.describe(),
                fmt_value(r.base),
                fmt_value(r.new),
                fmt_change(r.change_pct)
            ));
        }
    }
    if !c.summary.is_empty() {
        out.push_str(
            "\n### Summary by collective\n\n\
             | collective | compared | improved | regressed | within noise | only in base | only in new | geomean change |\n\
             |---|---:|---:|---:|---:|---:|---:|---:|\n",
        );
        for s in &c.summary {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.collective,
                s.compared,
                s.improved,
                s.regressed,
                s.within_noise,
                s.only_in_base,
                s.only_in_new,
                fmt_change(s.geomean_change_pct)
            ));
        }
    }
    for (title, cases) in [("Only in base", &c.only_in_base), ("Only in new", &c.only_in_new)] {
        if !cases.is_empty() {
            out.push_str(&format!("\n### {title} ({})\n\n", cases.len()));
            for case in cases.iter() {
                out.push_str(&format!("- {}\n", case.describe()));
            }
        }
    }
    if !c.rows.is_empty() {
        out.push_str(&format!(
            "\n<details><summary>All {} compared rows</summary>\n\n\
             | collective | hierarchy | transport | dtype | op | root | placement | size | ranks | base | new | change | verdict |\n\
             |---|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|\n",
            c.rows.len()
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

pub fn modes(r: &ModeReport) -> String {
    let mut out = format!(
        "## collbench compare --by {}: {}\n\n{} ({}) in `{}`; speedup over `{}`.\n",
        r.dimension.name(),
        r.metric,
        r.metric,
        r.metric.unit(),
        r.label,
        r.reference
    );
    for g in &r.groups {
        out.push_str(&format!("\n### {}\n\n| size |", g.title(r.dimension)));
        let mut align = String::from("|---:|");
        for m in &g.modes {
            out.push_str(&format!(" {m} |"));
            align.push_str("---:|");
            if *m != r.reference {
                out.push_str(" speedup |");
                align.push_str("---:|");
            }
        }
        out.push_str(&format!(" winner |\n{align}---|\n"));
        for p in &g.points {
            out.push_str(&format!("| {} |", human_size(p.size_bytes)));
            for (i, m) in g.modes.iter().enumerate() {
                out.push_str(&format!(" {} |", p.values[i].map_or("-".into(), fmt_value)));
                if *m != r.reference {
                    out.push_str(&format!(
                        " {} |",
                        p.speedups[i].map_or("-".into(), |s| format!("{s:.2}x"))
                    ));
                }
            }
            let winner = p.winner.clone().unwrap_or_else(|| "-".into());
            if p.crossover {
                out.push_str(&format!(" **{winner}** (crossover) |\n"));
            } else {
                out.push_str(&format!(" {winner} |\n"));
            }
        }
    }
    out
}
