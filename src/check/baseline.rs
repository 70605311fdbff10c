//! A fleet baseline (`--baseline FILE`): one value per check, measured on
//! known-good nodes of one's own fleet, against which a profile's
//! baseline rules judge (`fail_below_baseline_pct`, as SuperBench's rules
//! flag a node more than 5% below its baseline). `--write-baseline FILE`
//! writes one from a run: per check, the median over its groups' medians.
//! The format (TOML) and the recipe: docs/check.md.

use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::profile::{CheckSpec, Rule};
use super::{Report, Thresholds};
use crate::error::Error;
use crate::stats::median;

#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub check: String,
    pub value: f64,
    pub unit: String,
    pub source: String,
    pub line: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Baseline {
    pub path: String,
    pub profile: String,
    pub entries: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    profile: String,
    #[serde(default, rename = "baseline")]
    entries: Vec<Spanned<RawEntry>>,
}

#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct RawEntry {
    check: String,
    value: f64,
    unit: String,
    source: String,
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

impl Baseline {
    pub fn read(path: &std::path::Path) -> Result<Baseline, Error> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::usage(format!("--baseline {shown}: cannot read it: {e}")))?;
        let raw: RawFile = toml::from_str(&text).map_err(|e| {
            let line = e.span().map(|s| line_of(&text, s.start)).unwrap_or(1);
            Error::usage(format!("{shown}:{line}: {}", e.message().trim()))
        })?;
        let mut entries = Vec::new();
        for e in raw.entries {
            let line = line_of(&text, e.span().start);
            let e = e.into_inner();
            if !e.value.is_finite() || e.value <= 0.0 {
                return Err(Error::usage(format!(
                    "{shown}:{line}: the baseline of {} is {}: give a number above 0",
                    e.check, e.value
                )));
            }
            if e.source.trim().is_empty() {
                return Err(Error::usage(format!(
                    "{shown}:{line}: the baseline of {} has no source: say which nodes and run it comes from",
                    e.check
                )));
            }
            entries.push(Entry {
                check: e.check,
                value: e.value,
                unit: e.unit,
                source: e.source,
                line,
            });
        }
        Ok(Baseline {
            path: shown,
            profile: raw.profile,
            entries,
        })
    }

    pub fn get(&self, check: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.check == check)
    }
}

/// A check's thresholds: its fixed ones, or its baseline's less the
/// rule's percentages. A baseline rule without a baseline value (or of
/// another unit) is a usage error naming the profile's line.
pub fn thresholds(spec: &CheckSpec, baseline: Option<&Baseline>, origin: &str) -> Result<Thresholds, Error> {
    match &spec.rule {
        Rule::Fixed { fail, warn } => Ok(Thresholds {
            fail: fail.value,
            warn: warn.as_ref().map(|w| w.value),
            source: fail.source.clone(),
        }),
        Rule::Baseline { fail_pct, warn_pct } => {
            let at = |msg: String| Error::usage(format!("{origin}:{}: {msg}", fail_pct.line));
            let b = baseline.ok_or_else(|| {
                at(format!(
                    "check {} judges against a fleet baseline: give --baseline FILE (docs/check.md says how to make one)",
                    spec.name
                ))
            })?;
            let entry = b
                .get(&spec.name)
                .ok_or_else(|| at(format!("check {}: {} has no baseline for it", spec.name, b.path)))?;
            if entry.unit != spec.metric.unit() {
                return Err(at(format!(
                    "check {}: the baseline in {} is in {}, the check measures {}",
                    spec.name,
                    b.path,
                    entry.unit,
                    spec.metric.unit()
                )));
            }
            let of = |pct: f64| entry.value * (1.0 - pct / 100.0);
            Ok(Thresholds {
                fail: of(fail_pct.value),
                warn: warn_pct.as_ref().map(|w| of(w.value)),
                source: format!(
                    "{}% below the fleet baseline {} {} ({}:{}: {}); rule: {}",
                    fail_pct.value, entry.value, entry.unit, b.path, entry.line, entry.source, fail_pct.source
                ),
            })
        }
        Rule::Finder { .. } => Err(Error::usage(format!(
            "{origin}:{}: check {} is a finder check: it has no thresholds (links' rule judges it)",
            spec.line, spec.name
        ))),
    }
}

/// A baseline from a run: per check, the median of its judged groups'
/// medians, with where it comes from.
pub fn from_report(report: &Report) -> String {
    let mut out = format!(
        "# A fleet baseline written by collbench check --write-baseline (docs/check.md).\n\
         # Judge with: collbench check --profile {} --baseline FILE\n\
         profile = {}\n",
        report.profile,
        toml_string(&report.profile)
    );
    let mut names: Vec<&str> = Vec::new();
    for v in &report.verdicts {
        if !names.contains(&v.check.as_str()) {
            names.push(&v.check);
        }
    }
    for name in names {
        let judged: Vec<&super::Verdict> = report
            .verdicts
            .iter()
            .filter(|v| v.check == name && v.value.is_some())
            .collect();
        let values: Vec<f64> = judged.iter().filter_map(|v| v.value).collect();
        let Some(m) = median(&values) else { continue };
        let groups: Vec<&str> = judged.iter().map(|v| v.group.as_str()).collect();
        let entry = RawEntry {
            check: name.to_string(),
            value: (m * 1000.0).round() / 1000.0,
            unit: judged[0].unit.to_string(),
            source: format!(
                "median of {} group medians ({}), collbench check run {} ({})",
                values.len(),
                groups.join(", "),
                report.run_id,
                report.started
            ),
        };
        out += &format!(
            "\n[[baseline]]\ncheck = {}\nvalue = {}\nunit = {}\nsource = {}\n",
            toml_string(&entry.check),
            entry.value,
            toml_string(&entry.unit),
            toml_string(&entry.source)
        );
    }
    out
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{report, verdict_on};
    use super::*;
    use crate::check::Status;
    use crate::check::profile::parse;

    const PROFILE: &str = r#"
name = "fleet"
description = "against a baseline"
[[check]]
name = "node-ar"
scope = "node"
collective = "all_reduce"
size = "8G"
fail_below_baseline_pct = { value = 5, source = "SuperBench rule" }
warn_below_baseline_pct = { value = 2, source = "tighter" }
"#;

    #[test]
    fn a_written_baseline_reads_back_and_sets_the_thresholds() {
        let mut a = verdict_on("node-ar", "node", &["a"], Status::Pass);
        a.value = Some(200.0);
        let mut b = verdict_on("node-ar", "node", &["b"], Status::Pass);
        b.value = Some(220.0);
        let mut c = verdict_on("node-ar", "node", &["c"], Status::Pass);
        c.value = Some(240.0);
        let text = from_report(&report(vec![a, b, c], &["a", "b", "c"]));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("base.toml");
        std::fs::write(&path, &text).unwrap();
        let base = Baseline::read(&path).unwrap();
        assert_eq!(base.profile, "local-cpu");
        let e = base.get("node-ar").unwrap();
        assert_eq!((e.value, e.unit.as_str()), (220.0, "GB/s"));
        assert!(
            e.source.starts_with("median of 3 group medians (a, b, c)"),
            "{}",
            e.source
        );
        let p = parse(PROFILE, "fleet.toml").unwrap();
        let t = thresholds(&p.checks[0], Some(&base), &p.origin).unwrap();
        assert!(
            (t.fail - 209.0).abs() < 1e-9 && (t.warn.unwrap() - 215.6).abs() < 1e-9,
            "{t:?}"
        );
        assert!(
            t.source.starts_with("5% below the fleet baseline 220 GB/s"),
            "{}",
            t.source
        );
        let none = thresholds(&p.checks[0], None, &p.origin).unwrap_err();
        assert!(
            none.to_string()
                .starts_with("fleet.toml:9: check node-ar judges against a fleet baseline"),
            "{none}"
        );
    }

    #[test]
    fn a_bad_baseline_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("b.toml");
        let error = |text: &str| {
            std::fs::write(&path, text).unwrap();
            Baseline::read(&path).unwrap_err().to_string()
        };
        let e = error("profile = \"p\"\n[[baseline]]\ncheck = \"x\"\nvalue = 1\nunit = \"GB/s\"\nsourc = \"s\"\n");
        assert!(e.contains("b.toml:6: "), "{e}");
        let e = error("profile = \"p\"\n[[baseline]]\ncheck = \"x\"\nvalue = 1\nunit = \"GB/s\"\nsource = \"\"\n");
        assert!(e.contains("b.toml:2: the baseline of x has no source"), "{e}");
    }
}
