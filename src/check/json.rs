//! The verdict files as JSON: one per node (what a scheduler reads about
//! that node: host, ranks, GPUs, status, the failed checks with their
//! reasons, and every verdict that concerns it), and one for the whole
//! launch on rank 0. Schemas in docs/check.md.

use serde_json::{Value, json};

use super::{Report, Verdict};

/// The per-node file's schema name and version.
pub const NODE_SCHEMA: &str = "collbench-check-node/1";
/// The launch file's.
pub const LAUNCH_SCHEMA: &str = "collbench-check/1";

fn verdict(v: &Verdict) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// `host`'s verdict document.
pub fn node(report: &Report, host: &str) -> Value {
    let info = report.hosts.iter().find(|h| h.host == host);
    let mine = report.verdicts_of(host);
    let failed: Vec<Value> = report
        .against(host)
        .iter()
        .filter(|v| v.status.fails(report.strict))
        .map(|v| {
            json!({
                "check": v.check,
                "scope": v.scope,
                "group": v.group,
                "status": v.status,
                "why": v.why,
                "reason": v.reason,
                "value": v.value,
                "threshold": v.threshold,
                "unit": v.unit,
                "margin_pct": v.margin_pct,
                "source": v.source,
            })
        })
        .collect();
    let not_judged: Vec<Value> = mine
        .iter()
        .filter(|v| v.status == super::Status::NotJudged)
        .map(|v| {
            json!({
                "check": v.check,
                "scope": v.scope,
                "group": v.group,
                "why": v.why,
                "reason": v.reason,
            })
        })
        .collect();
    let doc = json!({
        "schema": NODE_SCHEMA,
        "host": host,
        "status": report.status_of(host),
        "not_judged": not_judged,
        "ranks": info.map(|h| h.ranks.clone()).unwrap_or_default(),
        "gpus": info.map(|h| h.gpus.clone()).unwrap_or_default(),
        "failed": failed,
        "checks": mine.iter().map(|v| verdict(v)).collect::<Vec<_>>(),
    });
    with_run(report, doc)
}

/// `doc` with the fields of the run both files carry (JSON objects keep
/// their keys sorted, so where they are added does not matter).
fn with_run(report: &Report, mut doc: Value) -> Value {
    let run = json!({
        "run_id": report.run_id,
        "started": report.started,
        "finished": report.finished,
        "profile": report.profile,
        "profile_file": report.profile_file,
        "backend": report.backend,
        "transport": report.transport,
        "strict": report.strict,
        "complete": report.stopped_by.is_none(),
    });
    if let (Value::Object(doc), Value::Object(run)) = (&mut doc, run) {
        doc.extend(run);
    }
    doc
}

/// The whole launch: every node's document and every verdict.
pub fn launch(report: &Report) -> Value {
    let doc = json!({
        "schema": LAUNCH_SCHEMA,
        "status": report.status(),
        "exit_code": report.exit_code(),
        "counts": report.counts(),
        "notes": report.notes,
        "stopped_by": report.stopped_by,
        "nodes": report.hosts.iter().map(|h| node(report, &h.host)).collect::<Vec<_>>(),
        "verdicts": report.verdicts.iter().map(verdict).collect::<Vec<_>>(),
    });
    with_run(report, doc)
}

/// Pretty JSON text with a final newline.
pub fn text(doc: &Value) -> String {
    let mut s = serde_json::to_string_pretty(doc).unwrap_or_default();
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::super::tests::{b_fails, verdict_on};
    use super::*;
    use crate::check::Status;

    #[test]
    fn a_node_file_lists_its_failed_checks_with_reasons() {
        let job = verdict_on("job-ar", "job", &["a", "b"], Status::Pass);
        let r = b_fails("node-ar", vec![job], &["a", "b"]);
        let b = node(&r, "b");
        assert_eq!(b["schema"], NODE_SCHEMA);
        assert_eq!(b["host"], "b");
        assert_eq!(b["status"], "fail");
        assert_eq!(b["ranks"], json!([2, 3]));
        assert_eq!(b["failed"].as_array().unwrap().len(), 1);
        assert_eq!(b["failed"][0]["check"], "node-ar");
        assert_eq!(b["failed"][0]["reason"], "Fail on b");
        assert_eq!(
            b["checks"].as_array().unwrap().len(),
            2,
            "its node check and the pair's job check"
        );
        let a = node(&r, "a");
        assert_eq!(
            (a["status"].as_str(), a["failed"].as_array().map(Vec::len)),
            (Some("pass"), Some(0))
        );
        let all = launch(&r);
        assert_eq!(all["exit_code"], 6);
        assert_eq!(all["nodes"].as_array().unwrap().len(), 2);
        assert!(text(&all).ends_with("}\n"));
    }

    #[test]
    fn a_check_not_judged_is_listed_with_why_and_the_run_counts_each_verdict() {
        let mut nj = verdict_on("node-ar", "node", &["a"], Status::NotJudged);
        nj.why = "not judged: 1 rank".into();
        let r = crate::check::tests::report(vec![nj, verdict_on("job-ar", "job", &["a"], Status::Pass)], &["a"]);
        let a = node(&r, "a");
        assert_eq!(a["status"], "not_judged");
        assert_eq!(a["not_judged"][0]["check"], "node-ar");
        assert_eq!(a["not_judged"][0]["why"], "not judged: 1 rank");
        assert_eq!(a["failed"], json!([]));
        let all = launch(&r);
        assert_eq!(
            (all["status"].as_str(), all["exit_code"].as_u64()),
            (Some("not_judged"), Some(9))
        );
        assert_eq!(
            all["counts"],
            json!({"passed": 1, "warned": 0, "failed": 0, "flaky": 0, "not_judged": 1, "skipped": 0})
        );
    }
}
