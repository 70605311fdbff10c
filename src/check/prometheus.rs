//! One node's verdicts in the Prometheus text exposition format (version
//! 0.0.4), for node_exporter's textfile collector: no timestamps (the
//! collector refuses them; the run's time is a gauge of its own), every
//! family with its HELP and TYPE once, label values escaped. Labels are
//! host, check, collective and size_class only, all bounded by the
//! profile: a node has one series per check. Names and meanings:
//! docs/check.md.

use super::{Report, Verdict};

/// One metric family: name, help, and its samples as (labels, value).
struct Family {
    name: &'static str,
    help: &'static str,
    samples: Vec<(String, f64)>,
}

/// A label value as the format wants it: backslash, double quote and
/// newline escaped.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v}")
    }
}

fn labels(host: &str, v: &Verdict) -> String {
    format!(
        "host=\"{}\",check=\"{}\",collective=\"{}\",size_class=\"{}\"",
        escape_label(host),
        escape_label(&v.check),
        v.collective.name(),
        escape_label(&v.size_class)
    )
}

/// The metric family of a check's measured value and of its threshold,
/// and the factor from the verdict's unit to the family's; `None` for a
/// verdict without a value of its own (the finder's).
fn value_families(metric: &str) -> Option<(&'static str, &'static str, f64)> {
    match metric {
        "busbw" => Some((
            "collbench_check_busbw_gbps",
            "collbench_check_busbw_threshold_gbps",
            1.0,
        )),
        "algbw" => Some((
            "collbench_check_algbw_gbps",
            "collbench_check_algbw_threshold_gbps",
            1.0,
        )),
        "time" => Some((
            "collbench_check_time_seconds",
            "collbench_check_time_threshold_seconds",
            1e-6,
        )),
        _ => None,
    }
}

/// The per-check families, each still without samples.
fn check_families() -> Vec<Family> {
    vec![
        Family {
            name: "collbench_check_result",
            help: "Verdict of one check on this host: 0 pass, 1 warn, 2 flaky, 3 fail, 4 not judged",
            samples: vec![],
        },
        Family {
            name: "collbench_check_busbw_gbps",
            help: "Median bus bandwidth of the check's samples, GB/s (1e9 bytes/s)",
            samples: vec![],
        },
        Family {
            name: "collbench_check_busbw_threshold_gbps",
            help: "The bus bandwidth below which the check fails, GB/s",
            samples: vec![],
        },
        Family {
            name: "collbench_check_algbw_gbps",
            help: "Median algorithm bandwidth of the check's samples, GB/s (1e9 bytes/s)",
            samples: vec![],
        },
        Family {
            name: "collbench_check_algbw_threshold_gbps",
            help: "The algorithm bandwidth below which the check fails, GB/s",
            samples: vec![],
        },
        Family {
            name: "collbench_check_time_seconds",
            help: "Median time of one operation over the check's samples, seconds",
            samples: vec![],
        },
        Family {
            name: "collbench_check_time_threshold_seconds",
            help: "The time of one operation above which the check fails, seconds",
            samples: vec![],
        },
        Family {
            name: "collbench_check_margin_ratio",
            help: "How far the median is from the fail threshold, as a fraction of it: positive on the good side",
            samples: vec![],
        },
        Family {
            name: "collbench_check_samples",
            help: "Samples the check's verdict was judged from",
            samples: vec![],
        },
    ]
}

/// `host`'s file: every verdict that concerns it (skipped checks are
/// left out; a check not judged is 4), the node's worst verdict and the
/// time of the run.
pub fn node(report: &Report, host: &str, finished_unix_s: f64) -> String {
    let mut fams = check_families();
    let mut push = |name: &str, labels: &str, v: f64| {
        if let Some(f) = fams.iter_mut().find(|f| f.name == name) {
            f.samples.push((labels.to_string(), v));
        }
    };
    for v in report.one_per_check(host) {
        let Some(code) = v.status.code() else { continue };
        let l = labels(host, v);
        push("collbench_check_result", &l, f64::from(code));
        if let Some((measured, threshold, factor)) = value_families(v.metric) {
            if let Some(x) = v.value {
                push(measured, &l, x * factor);
            }
            if let Some(t) = v.threshold {
                push(threshold, &l, t * factor);
            }
        }
        if let Some(m) = v.margin_pct {
            push("collbench_check_margin_ratio", &l, m / 100.0);
        }
        push("collbench_check_samples", &l, v.samples as f64);
    }
    let host_label = format!("host=\"{}\"", escape_label(host));
    let status = report.status_of(host).code().unwrap_or(0);
    fams.push(Family {
        name: "collbench_check_node_result",
        help: "The worst verdict of this host's checks: 0 pass, 1 warn, 2 flaky, 3 fail, 4 not judged (worse than a warning, better than flaky or fail)",
        samples: vec![(host_label.clone(), f64::from(status))],
    });
    fams.push(Family {
        name: "collbench_check_last_run_timestamp_seconds",
        help: "When the collbench check run that wrote this file ended, Unix time",
        samples: vec![(host_label, finished_unix_s)],
    });
    let mut out = String::new();
    for f in fams.iter().filter(|f| !f.samples.is_empty()) {
        out += &format!("# HELP {} {}\n# TYPE {} gauge\n", f.name, f.help, f.name);
        for (l, v) in &f.samples {
            out += &format!("{}{{{l}}} {}\n", f.name, value(*v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::tests::{report, verdict_on};
    use super::*;
    use crate::check::Status;

    #[test]
    fn a_node_file_has_one_series_per_check_and_family() {
        let mut odd = verdict_on("node-ar", "node", &["b\"x"], Status::Fail);
        odd.hosts = vec!["b".into()];
        let r = report(
            vec![
                odd,
                verdict_on("node-ar", "node", &["a"], Status::Pass),
                verdict_on("skipped", "node", &["b"], Status::Skipped),
            ],
            &["a", "b"],
        );
        let text = node(&r, "b", 1.5e9);
        assert!(text.ends_with('\n'));
        assert!(text.contains("# TYPE collbench_check_result gauge\n"), "{text}");
        assert!(
            text.contains(
                "collbench_check_result{host=\"b\",check=\"node-ar\",collective=\"all_reduce\",size_class=\"4K\"} 3\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("collbench_check_busbw_gbps{host=\"b\",check=\"node-ar\""),
            "{text}"
        );
        assert!(text.contains("collbench_check_margin_ratio{host=\"b\",check=\"node-ar\",collective=\"all_reduce\",size_class=\"4K\"} -0.667\n"), "{text}");
        assert!(text.contains("collbench_check_node_result{host=\"b\"} 3\n"), "{text}");
        assert!(
            text.contains("collbench_check_last_run_timestamp_seconds{host=\"b\"} 1500000000\n"),
            "{text}"
        );
        assert!(!text.contains("skipped"), "skipped checks are left out: {text}");
        assert!(!text.contains("host=\"a\""), "only this host's series: {text}");
        assert_eq!(text.matches("# HELP collbench_check_result ").count(), 1);
        assert!(!text.contains("time_seconds"), "families without samples are left out");
        assert_eq!(escape_label("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn a_check_not_judged_has_its_own_value_and_a_finder_verdict_no_figure() {
        let mut finder = verdict_on("pair-finder", "pair", &["a"], Status::Fail);
        finder.metric = crate::check::finder::METRIC;
        finder.value = None;
        finder.threshold = None;
        finder.margin_pct = None;
        let r = report(
            vec![
                verdict_on("node-ar", "node", &["a"], Status::NotJudged),
                verdict_on("skipped", "node", &["a"], Status::Skipped),
                finder,
            ],
            &["a"],
        );
        let text = node(&r, "a", 1.0);
        assert!(
            text.contains(
                "collbench_check_result{host=\"a\",check=\"node-ar\",collective=\"all_reduce\",size_class=\"4K\"} 4\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("3 fail, 4 not judged"),
            "documented in the HELP line: {text}"
        );
        assert!(
            text.contains("collbench_check_result{host=\"a\",check=\"pair-finder\""),
            "{text}"
        );
        assert!(!text.contains("_gbps{host=\"a\",check=\"pair-finder\""), "{text}");
        assert!(!text.contains("skipped"), "{text}");
        assert!(
            text.contains("collbench_check_node_result{host=\"a\"} 3\n"),
            "a failure outranks: {text}"
        );
        let alone = report(vec![verdict_on("node-ar", "node", &["a"], Status::NotJudged)], &["a"]);
        assert!(node(&alone, "a", 1.0).contains("collbench_check_node_result{host=\"a\"} 4\n"));
    }
}
