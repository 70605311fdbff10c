//! `collbench check`: accept or drain. A profile (configs/profiles/, read
//! by `profile`) names checks, each a collective at a size with thresholds
//! whose sources it cites; the session measures every check from repeated
//! samples (node checks on every node at once, each node's ranks on their
//! own sub-communicator; then the whole-job checks), and this module turns
//! the samples into verdicts (`judge`: pass, warn, flaky, fail, never
//! retried until it passes) and the files a scheduler acts on: a JSON
//! verdict per node (`json`), the Prometheus text format for node_exporter's
//! textfile collector (`prometheus`), one JSON line per sample
//! (`samples`), the terminal summary (`text`), the `--on-fail` command per
//! failing node (`hook`), a fleet baseline (`baseline`) and the stability
//! plot of a soak (`soak`). docs/check.md describes all of it.
//!
//! Must not: measure, touch a backend or the control plane, or know clap.

pub mod baseline;
pub mod finder;
pub mod hook;
pub mod json;
pub mod judge;
pub mod profile;
pub mod prometheus;
pub mod samples;
pub mod shipped;
pub mod soak;
pub mod text;

use serde::Serialize;

pub use judge::{Judged, Status, judge};
pub use profile::{CheckSpec, Metric, Profile, Rule, Scope};

use crate::collective::Collective;
use crate::error::exit;

/// Writes `text` to `path` whole or not at all (`report::WholeFile`: a
/// temporary file beside it, then a rename; node_exporter's textfile
/// collector must never read half a file). Any failure here is the run's,
/// after the measurement (exit 1).
pub fn write_atomic(path: &std::path::Path, text: &str) -> Result<(), crate::error::Error> {
    let failed = |e: String| crate::error::Error::runtime(format!("cannot write {}: {e}", path.display()));
    crate::report::WholeFile::create(path, true, "file")
        .map_err(|e| failed(e.to_string()))?
        .commit(text.as_bytes())
        .map_err(|e| failed(e.to_string()))
}

/// The exit code of a check run that found a failing (or flaky) check,
/// or, with `--strict`, a warning (docs/exit-codes.md).
pub const EXIT_FAILED: u8 = 6;

/// The exit code of a check run that failed nothing but could not judge
/// a required check (one rank, one node for a pair check, fewer nodes
/// than the finder needs, a group too noisy to tell): neither pass nor
/// fail (docs/exit-codes.md). A failure found wins (6).
pub const EXIT_NOT_JUDGED: u8 = 9;

// Whatever else grows here, 6 is the code of a failed check, 9 of one
// that could not judge.
const _: () = assert!(EXIT_FAILED > exit::TIMEOUT && EXIT_NOT_JUDGED > exit::FINDING);

/// One group a check ran on: a node (its host and ranks) or the job.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Group {
    /// The host of a node, or `job`.
    pub label: String,
    pub hosts: Vec<String>,
    pub ranks: Vec<usize>,
}

/// One check's verdict on one group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    pub check: String,
    pub scope: &'static str,
    pub group: String,
    pub hosts: Vec<String>,
    pub ranks: Vec<usize>,
    pub collective: Collective,
    pub size_class: String,
    pub metric: &'static str,
    pub unit: &'static str,
    pub status: Status,
    /// The median sample; `None` when nothing was judged.
    pub value: Option<f64>,
    /// The 95% interval of the median.
    pub interval: Option<[f64; 2]>,
    pub samples: usize,
    /// Samples past the fail threshold.
    pub beyond: usize,
    pub threshold: Option<f64>,
    pub warn: Option<f64>,
    pub margin_pct: Option<f64>,
    pub source: String,
    /// Wrong elements in the check's validation; `None` when not checked.
    pub wrong: Option<u64>,
    /// Why it failed, warned or was not judged, in a few words (the
    /// table's last column: `below the floor`, `wrong transport path`,
    /// `named by the finder`, `not judged: 1 rank`); empty for a pass.
    pub why: String,
    pub reason: String,
}

/// The label of a check's sizes, the `size_class` of its metrics: `4K`,
/// `16G`, or `2G-8G` for several (bounded: one per check of a profile).
pub fn size_class(sizes: &[u64]) -> String {
    let label = |b: u64| {
        for (shift, suffix) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
            if b >= 1 << shift && b.is_multiple_of(1 << shift) {
                return format!("{}{suffix}", b >> shift);
            }
        }
        b.to_string()
    };
    match (sizes.iter().min(), sizes.iter().max()) {
        (Some(lo), Some(hi)) if lo != hi => format!("{}-{}", label(*lo), label(*hi)),
        (Some(one), _) => label(*one),
        _ => String::new(),
    }
}

/// The thresholds a verdict was judged against: the fixed ones, or the
/// baseline's less the rule's percentages.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    pub fail: f64,
    pub warn: Option<f64>,
    pub source: String,
}

/// A verdict from a check's samples on a group. `wrong` > 0 fails it,
/// whatever the figures say.
pub fn verdict(spec: &CheckSpec, group: &Group, samples: &[f64], t: &Thresholds, wrong: Option<u64>) -> Verdict {
    let judged = judge(samples, spec.metric, t.fail, t.warn);
    let (status, why, reason) = match (&judged, wrong) {
        (_, Some(w)) if w > 0 => (
            Status::Fail,
            "wrong elements".to_string(),
            format!("{w} wrong elements: {} returned corrupt results", spec.collective),
        ),
        (Some(j), _) => (
            j.status,
            cause(j.status, spec.metric),
            j.reason(spec.metric, t.fail, t.warn),
        ),
        (None, _) => (
            Status::NotJudged,
            "not judged: no sample".to_string(),
            "no sample was taken".to_string(),
        ),
    };
    Verdict {
        value: judged.as_ref().map(|j| j.value),
        interval: judged.as_ref().map(|j| [j.lo, j.hi]),
        samples: judged.as_ref().map_or(0, |j| j.samples),
        beyond: judged.as_ref().map_or(0, |j| j.beyond),
        threshold: Some(t.fail),
        warn: t.warn,
        margin_pct: judged.as_ref().map(|j| j.margin_pct),
        wrong,
        why,
        ..unjudged(spec, group, status, t.source.clone(), reason)
    }
}

/// The table's few words for a verdict judged from samples.
fn cause(status: Status, metric: Metric) -> String {
    let higher = metric.higher_is_better();
    match status {
        Status::Fail if higher => "below the floor".into(),
        Status::Fail => "above the ceiling".into(),
        Status::Flaky => "flaky".into(),
        Status::Warn if higher => "below warn".into(),
        Status::Warn => "above warn".into(),
        Status::Pass | Status::NotJudged | Status::Skipped => String::new(),
    }
}

/// A verdict of `spec` on `group` without figures: no sample, threshold
/// or validation behind it.
fn unjudged(spec: &CheckSpec, group: &Group, status: Status, source: String, reason: String) -> Verdict {
    Verdict {
        check: spec.name.clone(),
        scope: spec.scope.name(),
        group: group.label.clone(),
        hosts: group.hosts.clone(),
        ranks: group.ranks.clone(),
        collective: spec.collective,
        size_class: size_class(&spec.sizes.value),
        metric: spec.metric.name(),
        unit: spec.metric.unit(),
        status,
        value: None,
        interval: None,
        samples: 0,
        beyond: 0,
        threshold: None,
        warn: None,
        margin_pct: None,
        source,
        wrong: None,
        why: String::new(),
        reason,
    }
}

/// Fails `v` when a rank of its group took another path than the check's
/// (`observed`: each of the group's ranks' transport, as collbench
/// observed it): its figures were not measured on what the thresholds
/// are for.
pub fn require_path(v: &mut Verdict, path: &str, observed: &[&str]) {
    if !v.status.judged() {
        return;
    }
    if let Some(other) = observed.iter().find(|o| !o.contains(path)) {
        v.status = Status::Fail;
        v.why = "wrong transport path".into();
        v.reason = format!(
            "the ranks took {other}, not the path the check is for ({path}): a --transport setting or the \
             environment forced another transport; {}",
            v.reason
        );
    }
}

/// Leaves `v` not judged where a rank of its group lacks the plugin
/// environment the profile's thresholds were measured with (`missing`:
/// each rank's reason, `Profile::not_judged`, empty where it has it): the
/// figures of another network stack say nothing against those thresholds,
/// a path they took included. Wrong elements still fail (a corrupt result
/// is one on any stack); a fleet baseline is the fleet's own figures, and
/// the finder compares the launch's pairs with each other, so only fixed
/// thresholds are left unjudged.
pub fn require_plugin(v: &mut Verdict, spec: &CheckSpec, missing: &[String]) {
    let wrong = v.wrong.is_some_and(|w| w > 0);
    if !v.status.judged() || wrong || !matches!(spec.rule, Rule::Fixed { .. }) {
        return;
    }
    let lacking = v
        .ranks
        .iter()
        .find_map(|&r| missing.get(r).filter(|m| !m.is_empty()).map(|m| (r, m)));
    if let Some((rank, why)) = lacking {
        v.status = Status::NotJudged;
        v.why = "not judged: no plugin".into();
        v.reason = format!("rank {rank}: {why}");
    }
}

/// A verdict that did not pass, on a host whose NCCL log shows a problem
/// (`finding_on(host)`: the doctor's most serious finding above info
/// there, `doctor::kept`), gives that finding as its first reason: what a
/// drain hook or a ticket reads (docs/check.md). A pass stays a pass: the
/// figures decide the verdict, the log says why.
pub fn explain_by_nccl_log(v: &mut Verdict, finding_on: &dyn Fn(&str) -> Option<String>) {
    if !v.status.judged() || v.status == Status::Pass {
        return;
    }
    if let Some(finding) = v.hosts.iter().find_map(|h| finding_on(h)) {
        v.reason = format!("NCCL's log shows {finding}; {}", v.reason);
    }
}

/// A check that could not run on a group (`short`: the table's few
/// words, `reason`: the whole sentence): skipped where the profile marks
/// it optional, else not judged.
pub fn unrun(spec: &CheckSpec, group: &Group, short: &str, reason: &str) -> Verdict {
    let status = if spec.optional {
        Status::Skipped
    } else {
        Status::NotJudged
    };
    let mut v = unjudged(spec, group, status, spec.fail_source().to_string(), reason.to_string());
    v.why = format!("{}: {short}", status.word().to_lowercase());
    v
}

/// How many verdicts of each kind a run has (the summary, check.json).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub passed: usize,
    pub warned: usize,
    pub failed: usize,
    pub flaky: usize,
    pub not_judged: usize,
    pub skipped: usize,
}

impl Counts {
    pub fn of(verdicts: &[Verdict]) -> Counts {
        let mut c = Counts::default();
        for v in verdicts {
            *match v.status {
                Status::Pass => &mut c.passed,
                Status::Warn => &mut c.warned,
                Status::Fail => &mut c.failed,
                Status::Flaky => &mut c.flaky,
                Status::NotJudged => &mut c.not_judged,
                Status::Skipped => &mut c.skipped,
            } += 1;
        }
        c
    }
}

/// One host of the launch: its ranks and their GPUs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Host {
    pub host: String,
    pub ranks: Vec<usize>,
    /// Each rank's GPU, where the backend has one.
    pub gpus: Vec<String>,
}

/// Everything a check run concluded, on rank 0 (and, serialized, on each
/// node's first rank, which writes its node's files).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub run_id: String,
    pub started: String,
    pub finished: String,
    pub profile: String,
    pub profile_file: String,
    pub backend: String,
    pub transport: String,
    pub strict: bool,
    pub hosts: Vec<Host>,
    pub verdicts: Vec<Verdict>,
    /// The signal that ended sampling early, if one did.
    pub stopped_by: Option<String>,
    /// What the run could not tell or left out, one sentence each (the
    /// finder's notes).
    pub notes: Vec<String>,
}

impl Report {
    /// The verdicts that concern `host`: its node's checks, and the
    /// job's checks when the job is this node or a node pair (a pair's
    /// collective is both nodes' verdict, as Google's Cluster Health
    /// Scanner labels both). A job check over more nodes names no node.
    pub fn verdicts_of(&self, host: &str) -> Vec<&Verdict> {
        let attributable_jobs = self.hosts.len() <= 2;
        self.verdicts
            .iter()
            .filter(|v| v.hosts.iter().any(|h| h == host) && (v.scope != "job" || attributable_jobs))
            .collect()
    }

    /// Whether `host` is the node at fault in pair check `check`: every
    /// judged pair it was in fails (a slow node fails each of its pairs;
    /// a slow link only the pair across it). A finder check has a verdict
    /// of each node's own (a pair-scope verdict on that host alone): the
    /// finder told node from link, so the node is at fault when that
    /// verdict fails, never for a link it is an end of.
    pub fn blamed(&self, host: &str, check: &str) -> bool {
        let mine = |v: &&Verdict| v.scope == "pair" && v.check == check && v.hosts.iter().any(|h| h == host);
        let own: Vec<&Verdict> = self
            .verdicts
            .iter()
            .filter(mine)
            .filter(|v| v.hosts.len() == 1)
            .collect();
        if !own.is_empty() {
            return own.iter().any(|v| v.status.fails(self.strict));
        }
        let pairs: Vec<&Verdict> = self
            .verdicts
            .iter()
            .filter(mine)
            .filter(|v| v.status.judged())
            .collect();
        !pairs.is_empty() && pairs.iter().all(|v| v.status.fails(self.strict))
    }

    /// Whether `v` (a verdict of `host`) counts against `host`: always,
    /// but for a pair whose other node is the one at fault (`blamed`)
    /// while this one is not.
    pub fn counts_against(&self, v: &Verdict, host: &str) -> bool {
        if v.scope != "pair" || self.blamed(host, &v.check) {
            return true;
        }
        !v.hosts.iter().filter(|h| *h != host).any(|h| self.blamed(h, &v.check))
    }

    /// The verdicts that make `host`'s status.
    pub fn against(&self, host: &str) -> Vec<&Verdict> {
        self.verdicts_of(host)
            .into_iter()
            .filter(|v| self.counts_against(v, host))
            .collect()
    }

    /// The failing pairs whose nodes are both at fault in no pair of
    /// theirs: the link between them (with 3 or more nodes, where every
    /// node is in two pairs).
    pub fn failing_links(&self) -> Vec<&Verdict> {
        if self.hosts.len() < 3 {
            return vec![];
        }
        self.verdicts
            .iter()
            .filter(|v| v.scope == "pair" && v.status.fails(self.strict))
            .filter(|v| !v.hosts.iter().any(|h| self.blamed(h, &v.check)))
            .collect()
    }

    /// `host`'s verdicts, one per check (bounded series for the Prometheus
    /// file): of a pair check's pairs, the worst of those that count
    /// against it.
    pub fn one_per_check(&self, host: &str) -> Vec<&Verdict> {
        let mut out: Vec<&Verdict> = Vec::new();
        for v in self.verdicts_of(host) {
            let rank = |x: &Verdict| {
                let counts = self.counts_against(x, host);
                (
                    counts,
                    if counts { x.status.severity().unwrap_or(0) } else { 0 },
                    -x.margin_pct.unwrap_or(0.0),
                )
            };
            match out.iter_mut().find(|o| o.check == v.check) {
                Some(o) if rank(v).partial_cmp(&rank(o)) == Some(std::cmp::Ordering::Greater) => *o = v,
                Some(_) => {}
                None => out.push(v),
            }
        }
        out
    }

    /// The worst verdict of `host` (pass when nothing concerns it but
    /// skipped checks); a failing pair counts only against the node at
    /// fault in it.
    pub fn status_of(&self, host: &str) -> Status {
        let worst = self.verdicts_of(host).iter().fold(Status::Skipped, |acc, v| {
            if self.counts_against(v, host) {
                acc.worst(v.status)
            } else {
                acc.worst(Status::Pass)
            }
        });
        if worst == Status::Skipped { Status::Pass } else { worst }
    }

    /// The worst verdict of the run; not judged when no verdict was
    /// judged at all (every check skipped or not judged).
    pub fn status(&self) -> Status {
        if !self.verdicts.iter().any(|v| v.status.judged()) {
            return Status::NotJudged;
        }
        self.verdicts.iter().fold(Status::Pass, |acc, v| acc.worst(v.status))
    }

    pub fn counts(&self) -> Counts {
        Counts::of(&self.verdicts)
    }

    /// The hosts whose verdicts fail the run, each with its failing
    /// verdicts, in the launch's host order.
    pub fn failing_nodes(&self) -> Vec<(&str, Vec<&Verdict>)> {
        self.hosts
            .iter()
            .filter_map(|h| {
                let failing: Vec<&Verdict> = self
                    .against(&h.host)
                    .into_iter()
                    .filter(|v| v.status.fails(self.strict))
                    .collect();
                (!failing.is_empty()).then_some((h.host.as_str(), failing))
            })
            .collect()
    }

    /// The run's exit code: `EXIT_FAILED` when a verdict fails it, else
    /// `EXIT_NOT_JUDGED` when a required check could not be judged (or
    /// nothing was).
    pub fn exit_code(&self) -> u8 {
        if self.verdicts.iter().any(|v| v.status.fails(self.strict)) {
            EXIT_FAILED
        } else if self.status() == Status::NotJudged {
            EXIT_NOT_JUDGED
        } else {
            exit::OK
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A verdict of `status` on `hosts` (tests of the outputs).
    pub fn verdict_on(check: &str, scope: &'static str, hosts: &[&str], status: Status) -> Verdict {
        Verdict {
            check: check.into(),
            scope,
            group: if scope == "job" { "job".into() } else { hosts[0].into() },
            hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ranks: (0..hosts.len() * 2).collect(),
            collective: Collective::AllReduce,
            size_class: "4K".into(),
            metric: "busbw",
            unit: "GB/s",
            status,
            value: Some(if status == Status::Fail { 0.1 } else { 1.0 }),
            interval: Some([0.09, 1.1]),
            samples: 10,
            beyond: if status == Status::Fail { 10 } else { 0 },
            threshold: Some(0.3),
            warn: None,
            margin_pct: Some(if status == Status::Fail { -66.7 } else { 233.3 }),
            source: "measured \"here\"".into(),
            wrong: Some(0),
            why: String::new(),
            reason: format!("{status:?} on {}", hosts.join(",")),
        }
    }

    pub fn report(verdicts: Vec<Verdict>, hosts: &[&str]) -> Report {
        Report {
            run_id: "20261202T000000Z-a-1".into(),
            started: "2026-12-02T00:00:00Z".into(),
            finished: "2026-12-02T00:00:05Z".into(),
            profile: "local-cpu".into(),
            profile_file: "configs/profiles/local-cpu.toml".into(),
            backend: "mpi (Open MPI v4.1.4)".into(),
            transport: "auto".into(),
            strict: false,
            hosts: hosts
                .iter()
                .enumerate()
                .map(|(i, h)| Host {
                    host: h.to_string(),
                    ranks: vec![2 * i, 2 * i + 1],
                    gpus: vec![],
                })
                .collect(),
            verdicts,
            stopped_by: None,
            notes: vec![],
        }
    }

    /// The report of node check `check` passing on a and failing on b,
    /// then the verdicts `more`, on `hosts`.
    pub fn b_fails(check: &str, more: Vec<Verdict>, hosts: &[&str]) -> Report {
        let mut verdicts = vec![
            verdict_on(check, "node", &["a"], Status::Pass),
            verdict_on(check, "node", &["b"], Status::Fail),
        ];
        verdicts.extend(more);
        report(verdicts, hosts)
    }

    #[test]
    fn a_check_whose_ranks_took_another_path_fails_whatever_its_figures() {
        let mut v = verdict_on("node", "node", &["a"], Status::Pass);
        require_path(&mut v, "vader", &["ob1/tcp+vader", "ob1/tcp+vader"]);
        assert_eq!(v.status, Status::Pass);
        require_path(&mut v, "vader", &["ob1/tcp+vader", "ob1/tcp"]);
        assert_eq!(v.status, Status::Fail);
        assert!(
            v.reason
                .starts_with("the ranks took ob1/tcp, not the path the check is for (vader)"),
            "{}",
            v.reason
        );
        let mut s = verdict_on("node", "node", &["a"], Status::Skipped);
        require_path(&mut s, "vader", &["ob1/tcp"]);
        assert_eq!(s.status, Status::Skipped);
    }

    #[test]
    fn a_failed_check_on_a_host_whose_nccl_log_shows_a_problem_gives_it_as_its_first_reason() {
        let on_b = |h: &str| (h == "b").then(|| "socket-where-ib: sockets".to_string());
        let mut failed = verdict_on("node", "node", &["b"], Status::Fail);
        let before = failed.reason.clone();
        explain_by_nccl_log(&mut failed, &on_b);
        assert_eq!(
            failed.reason,
            format!("NCCL's log shows socket-where-ib: sockets; {before}")
        );
        assert_eq!(failed.status, Status::Fail);
        let mut pair = verdict_on("pair", "pair", &["a", "b"], Status::Warn);
        explain_by_nccl_log(&mut pair, &on_b);
        assert!(
            pair.reason.starts_with("NCCL's log shows socket-where-ib"),
            "either end's log"
        );
        for (host, status) in [("b", Status::Pass), ("b", Status::NotJudged), ("a", Status::Fail)] {
            let mut v = verdict_on("node", "node", &[host], status);
            let before = v.reason.clone();
            explain_by_nccl_log(&mut v, &on_b);
            assert_eq!((v.reason, v.status), (before, status), "{host} {status:?}");
        }
    }

    #[test]
    fn size_classes_are_short_and_bounded() {
        assert_eq!(size_class(&[4096]), "4K");
        assert_eq!(size_class(&[16 << 30]), "16G");
        assert_eq!(size_class(&[2 << 30, 4 << 30, 8 << 30]), "2G-8G");
        assert_eq!(size_class(&[1536]), "1536");
    }

    #[test]
    fn a_failing_node_check_names_its_node_and_fails_the_run() {
        let job = verdict_on("job", "job", &["a", "b", "c"], Status::Pass);
        let r = b_fails("node", vec![job], &["a", "b", "c"]);
        assert_eq!(r.status_of("a"), Status::Pass);
        assert_eq!(r.status_of("b"), Status::Fail);
        assert_eq!(r.status_of("c"), Status::Pass, "nothing judged on c but the job");
        let failing = r.failing_nodes();
        assert_eq!(failing.len(), 1);
        assert_eq!(failing[0].0, "b");
        assert_eq!(r.exit_code(), EXIT_FAILED);
    }

    #[test]
    fn a_job_check_is_the_verdict_of_a_node_pair_but_names_no_node_of_three() {
        let pair = report(vec![verdict_on("job", "job", &["a", "b"], Status::Fail)], &["a", "b"]);
        assert_eq!(pair.failing_nodes().len(), 2);
        let three = report(
            vec![verdict_on("job", "job", &["a", "b", "c"], Status::Fail)],
            &["a", "b", "c"],
        );
        assert!(three.failing_nodes().is_empty());
        assert_eq!(three.exit_code(), EXIT_FAILED, "the run still fails");
    }

    fn pair(check: &str, a: &str, b: &str, status: Status) -> Verdict {
        let mut v = verdict_on(check, "pair", &[a, b], status);
        v.group = format!("{a}+{b}");
        v
    }

    #[test]
    fn a_slow_node_fails_both_its_pairs_and_a_slow_link_one() {
        let slow_node = report(
            vec![
                pair("p", "a", "b", Status::Fail),
                pair("p", "b", "c", Status::Fail),
                pair("p", "c", "a", Status::Pass),
            ],
            &["a", "b", "c"],
        );
        let failing: Vec<&str> = slow_node.failing_nodes().iter().map(|f| f.0).collect();
        assert_eq!(failing, ["b"]);
        assert_eq!(slow_node.status_of("a"), Status::Pass);
        assert!(slow_node.failing_links().is_empty());
        assert_eq!(slow_node.one_per_check("a")[0].status, Status::Pass, "a's own pair");
        assert_eq!(slow_node.one_per_check("b")[0].status, Status::Fail);

        let slow_link = report(
            vec![
                pair("p", "a", "b", Status::Fail),
                pair("p", "b", "c", Status::Pass),
                pair("p", "c", "a", Status::Pass),
            ],
            &["a", "b", "c"],
        );
        let failing: Vec<&str> = slow_link.failing_nodes().iter().map(|f| f.0).collect();
        assert_eq!(failing, ["a", "b"], "both ends of the link");
        assert_eq!(slow_link.failing_links().len(), 1);
        assert_eq!(slow_link.failing_links()[0].group, "a+b");
        assert_eq!(slow_link.exit_code(), EXIT_FAILED);

        let two = report(vec![pair("p", "a", "b", Status::Fail)], &["a", "b"]);
        assert_eq!(
            two.failing_nodes().len(),
            2,
            "2 nodes: the pair's verdict is both nodes'"
        );
        assert!(
            two.failing_links().is_empty(),
            "2 nodes cannot tell a node from the link"
        );
    }

    const SPECS: &str = r#"
name = "t"
description = "t"

[[check]]
name = "required"
scope = "node"
collective = "all_reduce"
size = "4K"
fail_below = { value = 1.0, source = "a measured floor" }
warn_below = { value = 2.0, source = "a measured line" }

[[check]]
name = "optional"
scope = "pair"
collective = "all_reduce"
size = "4K"
optional = true
fail_below = { value = 1.0, source = "a measured floor" }

[[check]]
name = "time"
scope = "job"
collective = "all_reduce"
size = "4K"
metric = "time"
fail_above = { value = 10.0, source = "a measured ceiling" }
"#;

    fn specs() -> Vec<CheckSpec> {
        profile::parse(SPECS, "t.toml").unwrap().checks
    }

    fn group(label: &str) -> Group {
        Group {
            label: label.into(),
            hosts: vec![label.into()],
            ranks: vec![0],
        }
    }

    #[test]
    fn a_required_check_that_cannot_run_is_not_judged_and_an_optional_one_skipped() {
        let s = specs();
        let v = unrun(
            &s[0],
            &group("a"),
            "1 rank",
            "1 rank on the node: a node check needs 2 or more",
        );
        assert_eq!((v.status, v.why.as_str()), (Status::NotJudged, "not judged: 1 rank"));
        assert_eq!(v.reason, "1 rank on the node: a node check needs 2 or more");
        assert_eq!((v.value, v.samples), (None, 0));
        let v = unrun(&s[1], &group("a"), "1 node", "1 node in the launch");
        assert_eq!((v.status, v.why.as_str()), (Status::Skipped, "skipped: 1 node"));
    }

    #[test]
    fn a_rank_without_the_plugin_environment_leaves_fixed_thresholds_unjudged_but_wrong_elements_fail() {
        let s = specs();
        let fixed = baseline::thresholds(&s[0], None, "t.toml").unwrap();
        let g = Group {
            label: "a".into(),
            hosts: vec!["a".into()],
            ranks: vec![2, 3],
        };
        let lacks = "t.toml:3: not judged: its thresholds were measured with the X plugin environment".to_string();
        // rank 3 lacks it: a pass and a failed floor alike are not judged
        let missing = vec![String::new(), String::new(), String::new(), lacks.clone()];
        for samples in [vec![3.0; 10], vec![0.5; 10]] {
            let mut v = verdict(&s[0], &g, &samples, &fixed, Some(0));
            assert!(v.status.judged());
            require_plugin(&mut v, &s[0], &missing);
            assert_eq!((v.status, v.why.as_str()), (Status::NotJudged, "not judged: no plugin"));
            assert_eq!(v.reason, format!("rank 3: {lacks}"));
            assert!(v.value.is_some(), "the figures stay, unjudged");
        }
        // a corrupt result fails whatever the stack
        let mut v = verdict(&s[0], &g, &[3.0; 10], &fixed, Some(4));
        require_plugin(&mut v, &s[0], &missing);
        assert_eq!((v.status, v.why.as_str()), (Status::Fail, "wrong elements"));
        // every rank of the group has it (or another group lacks it): judged
        let mut v = verdict(&s[0], &g, &[3.0; 10], &fixed, Some(0));
        require_plugin(
            &mut v,
            &s[0],
            &[lacks.clone(), String::new(), String::new(), String::new()],
        );
        assert_eq!(v.status, Status::Pass);
    }

    #[test]
    fn each_verdict_says_why_in_a_few_words() {
        let s = specs();
        let fixed = |spec: &CheckSpec| baseline::thresholds(spec, None, "t.toml").unwrap();
        let g = group("a");
        let why = |spec: &CheckSpec, samples: &[f64], wrong: Option<u64>| {
            let v = verdict(spec, &g, samples, &fixed(spec), wrong);
            (v.status, v.why)
        };
        let ten = |x: f64| vec![x; 10];
        assert_eq!(why(&s[0], &ten(3.0), Some(0)), (Status::Pass, String::new()));
        assert_eq!(why(&s[0], &ten(0.5), Some(0)), (Status::Fail, "below the floor".into()));
        assert_eq!(why(&s[0], &ten(1.5), None), (Status::Warn, "below warn".into()));
        let both: Vec<f64> = (1..=10).map(|i| f64::from(i) * 0.2).collect();
        assert_eq!(why(&s[0], &both, None), (Status::Flaky, "flaky".into()));
        assert_eq!(why(&s[2], &ten(20.0), None), (Status::Fail, "above the ceiling".into()));
        assert_eq!(why(&s[0], &ten(3.0), Some(7)), (Status::Fail, "wrong elements".into()));
        assert_eq!(
            why(&s[0], &[], None),
            (Status::NotJudged, "not judged: no sample".into()),
            "no sample is not a pass"
        );
        let mut v = verdict(&s[0], &g, &ten(3.0), &fixed(&s[0]), Some(0));
        require_path(&mut v, "vader", &["ob1/tcp"]);
        assert_eq!((v.status, v.why.as_str()), (Status::Fail, "wrong transport path"));
        assert!(
            v.margin_pct.unwrap() > 0.0,
            "a positive margin, and the why says what failed"
        );
    }

    #[test]
    fn a_launch_that_could_not_judge_a_required_check_is_not_judged_and_exits_9() {
        let nj = |c: &str, scope: &'static str, h: &[&str]| verdict_on(c, scope, h, Status::NotJudged);
        // one rank: nothing judged
        let r = report(vec![nj("node", "node", &["a"]), nj("job", "job", &["a"])], &["a"]);
        assert_eq!((r.status(), r.exit_code()), (Status::NotJudged, EXIT_NOT_JUDGED));
        assert_eq!(r.status_of("a"), Status::NotJudged);
        assert!(r.failing_nodes().is_empty(), "not judged names no node to drain");
        assert_eq!(
            r.counts(),
            Counts {
                not_judged: 2,
                ..Counts::default()
            }
        );
        // a pass beside it does not make the run pass
        let r = report(
            vec![
                verdict_on("job", "job", &["a"], Status::Pass),
                nj("node", "node", &["a"]),
            ],
            &["a"],
        );
        assert_eq!((r.status(), r.exit_code()), (Status::NotJudged, EXIT_NOT_JUDGED));
        // a failure found wins
        let r = report(
            vec![
                verdict_on("job", "job", &["a"], Status::Fail),
                nj("node", "node", &["a"]),
            ],
            &["a"],
        );
        assert_eq!((r.status(), r.exit_code()), (Status::Fail, EXIT_FAILED));
        // a warning beside it: not judged, unless --strict fails the warning
        let mut r = report(
            vec![
                verdict_on("job", "job", &["a"], Status::Warn),
                nj("node", "node", &["a"]),
            ],
            &["a"],
        );
        assert_eq!(r.exit_code(), EXIT_NOT_JUDGED);
        r.strict = true;
        assert_eq!(r.exit_code(), EXIT_FAILED);
        // optional checks skipped: the rest decides; nothing judged at all is not judged
        let skipped = |c: &str| verdict_on(c, "pair", &["a"], Status::Skipped);
        let r = report(
            vec![verdict_on("job", "job", &["a"], Status::Pass), skipped("p")],
            &["a"],
        );
        assert_eq!((r.status(), r.exit_code()), (Status::Pass, 0));
        assert_eq!(r.counts().skipped, 1);
        let r = report(vec![skipped("p"), skipped("q")], &["a"]);
        assert_eq!((r.status(), r.exit_code()), (Status::NotJudged, EXIT_NOT_JUDGED));
        assert_eq!(report(vec![], &["a"]).exit_code(), EXIT_NOT_JUDGED);
    }

    #[test]
    fn a_pair_not_judged_is_its_nodes_verdict_and_blames_neither() {
        let r = report(
            vec![
                pair("p", "a", "b", Status::NotJudged),
                pair("p", "b", "c", Status::Pass),
                pair("p", "c", "a", Status::Pass),
            ],
            &["a", "b", "c"],
        );
        assert!(!r.blamed("a", "p") && !r.blamed("b", "p"));
        assert_eq!((r.status_of("a"), r.status_of("c")), (Status::NotJudged, Status::Pass));
        assert!(r.failing_nodes().is_empty() && r.failing_links().is_empty());
        assert_eq!(r.exit_code(), EXIT_NOT_JUDGED);
    }

    #[test]
    fn warnings_fail_only_strict_runs() {
        let mut r = report(vec![verdict_on("node", "node", &["a"], Status::Warn)], &["a"]);
        assert_eq!(r.exit_code(), 0);
        r.strict = true;
        assert_eq!(r.exit_code(), EXIT_FAILED);
        assert_eq!(r.failing_nodes()[0].0, "a");
    }

    /// Every help, the README and docs/exit-codes.md quote one table
    /// (`error::EXIT_CODES`): it holds check's two codes, for check.
    #[test]
    fn the_exit_code_table_lists_a_failed_and_a_not_judged_check() {
        for code in [EXIT_FAILED, EXIT_NOT_JUDGED] {
            let row = crate::error::EXIT_CODES.iter().find(|c| c.code == code.to_string());
            assert!(row.is_some_and(|r| r.commands == ["check"]), "{code}");
        }
    }
}
