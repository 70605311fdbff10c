//! A finder check's verdicts (docs/check.md, "The finder"): what
//! `collbench links --find` concluded at node level, turned into one
//! verdict per node and one per named link. A node, GPU or collective
//! host the finder names fails (or warns, `on_finding = "warn"`), with
//! the finder's evidence as the reason, whatever the absolute floors of
//! the other checks say; a node the rule found worse than comparable
//! pairs but could not tell from noise is not judged; every other node
//! passes. What the finder could not see is said in the run's notes.
//!
//! Must not: measure (the session runs the finder), print or open files.

use super::{CheckSpec, Group, Status, Verdict, unjudged};
use crate::links::finder::{Dismissed, Finding, FindingKind, Outcome};
use crate::links::output::{evidence_line, headline, noisy_line};
use crate::links::rule::Rule;

/// The finder's verdicts on `nodes` (each node's group, its label the
/// host name the finder's endpoints carry), and its notes.
pub fn verdicts(spec: &CheckSpec, nodes: &[Group], o: &Outcome) -> (Vec<Verdict>, Vec<String>) {
    let named = match spec.rule {
        super::Rule::Finder { warn: true, .. } => Status::Warn,
        _ => Status::Fail,
    };
    let mut out: Vec<Verdict> = nodes.iter().map(|g| node_verdict(spec, g, o, named)).collect();
    for f in o.report.findings.iter().filter(|f| f.kind == FindingKind::Link) {
        let ends: Vec<&Group> = f
            .hosts
            .iter()
            .filter_map(|h| nodes.iter().find(|g| &g.label == h))
            .collect();
        let link = Group {
            label: f.hosts.join("+"),
            hosts: f.hosts.clone(),
            ranks: ends.iter().flat_map(|g| g.ranks.iter().copied()).collect(),
        };
        out.push(of_finder(
            spec,
            &link,
            named,
            "named by the finder",
            finding_reason(f, o),
        ));
    }
    out.extend(unconfirmed_links(spec, nodes, o));
    (out, notes(spec, o))
}

/// A link suspect of the matrix that its re-tests did not show again,
/// neither of its ends named: not judged (samples on both sides), a
/// verdict on both its ends.
fn unconfirmed_links(spec: &CheckSpec, nodes: &[Group], o: &Outcome) -> Vec<Verdict> {
    let named = |rank: usize| {
        o.report
            .findings
            .iter()
            .any(|f| f.kind != FindingKind::Link && f.endpoints.iter().any(|e| e.rank == rank))
    };
    let node_of = |rank: usize| nodes.iter().find(|g| g.ranks.contains(&rank));
    let mut out: Vec<Verdict> = Vec::new();
    for d in &o.report.dismissed {
        let Some(pair) = d.pair else { continue };
        let (Some(a), Some(b)) = (node_of(pair.a), node_of(pair.b)) else {
            continue;
        };
        let label = format!("{}+{}", a.label, b.label);
        if named(pair.a) || named(pair.b) || out.iter().any(|v| v.group == label) {
            continue;
        }
        let link = Group {
            label,
            hosts: vec![a.label.clone(), b.label.clone()],
            ranks: a.ranks.iter().chain(&b.ranks).copied().collect(),
        };
        let (why, reason) = unconfirmed(d);
        out.push(of_finder(spec, &link, Status::NotJudged, why, reason));
    }
    out
}

/// The finder's verdict on node `g` (`named`: what a finding is): wrong
/// elements fail it; named by the finder, `named`; too noisy to tell, or
/// a suspect its re-tests did not show again, not judged; else a pass.
fn node_verdict(spec: &CheckSpec, g: &Group, o: &Outcome, named: Status) -> Verdict {
    let report = &o.report;
    let mine = |f: &&Finding| f.kind != FindingKind::Link && f.hosts.first() == Some(&g.label);
    let found: Vec<&Finding> = report.findings.iter().filter(mine).collect();
    let links: Vec<&Finding> = report
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::Link && f.hosts.contains(&g.label))
        .collect();
    let wrong: u64 = o
        .matrix
        .pairs
        .iter()
        .filter(|p| g.ranks.contains(&p.pair.a) || g.ranks.contains(&p.pair.b))
        .filter_map(|p| p.wrong)
        .sum();
    let dismissed = report
        .dismissed
        .iter()
        .find(|d| links.is_empty() && d.rank.is_some_and(|r| g.ranks.contains(&r)));
    if wrong > 0 {
        let reason = format!("{wrong} wrong elements received in the finder's exchanges with this node");
        return of_finder(spec, g, Status::Fail, "wrong elements", reason);
    }
    if !found.is_empty() {
        let reason: Vec<String> = found.iter().map(|f| finding_reason(f, o)).collect();
        return of_finder(spec, g, named, "named by the finder", reason.join(" | "));
    }
    if let Some(why) = too_noisy(g, o) {
        return of_finder(spec, g, Status::NotJudged, "not judged: too noisy", why);
    }
    if let Some(d) = dismissed {
        let (why, reason) = unconfirmed(d);
        return of_finder(spec, g, Status::NotJudged, why, reason);
    }
    let mut reason = format!(
        "not named by the finder: no pair of it more than {}% and {} robust spreads worse than comparable \
         pairs, or not again when re-tested ({} pairs measured, {} rounds)",
        report.rule.min_deficit_pct,
        report.rule.spreads,
        o.matrix.pairs.len(),
        report.rounds.matrix + report.rounds.beyond_matrix()
    );
    for f in &links {
        reason += &format!("; an end of the link {} named by the finder", f.hosts.join(" - "));
    }
    of_finder(spec, g, Status::Pass, "", reason)
}

/// A suspect of the matrix its re-tests did not name, as a verdict's
/// why and reason: not slow again (samples on both sides), or not
/// re-tested (no re-test of it could be judged: the samples neither show
/// it nor clear it).
fn unconfirmed(d: &Dismissed) -> (&'static str, String) {
    if d.retested {
        let reason = format!(
            "slow in the matrix, not again when re-tested (samples on both sides: never re-tested until it \
             passes): {}: {}",
            d.what, d.why
        );
        ("not judged: not slow again", reason)
    } else {
        let reason = format!(
            "slow in the matrix, and no re-test of it could be judged, so the samples neither show it nor clear \
             it: {}: {}",
            d.what, d.why
        );
        ("not judged: not re-tested", reason)
    }
}

/// The finder's notes, each prefixed with the check's name: what it could
/// not do, what was too noisy to judge, the suspects dismissed.
fn notes(spec: &CheckSpec, o: &Outcome) -> Vec<String> {
    let report = &o.report;
    let mut notes: Vec<String> = report.notes.iter().map(|n| format!("{}: {n}", spec.name)).collect();
    if let Some(line) = noisy_line(&o.matrix, &o.analysis) {
        notes.push(format!("{}: {line}", spec.name));
    }
    if !report.dismissed.is_empty() {
        notes.push(format!(
            "{}: {} suspect(s) of the matrix dismissed after re-tests (slow in the matrix, not when re-tested): {}",
            spec.name,
            report.dismissed.len(),
            report
                .dismissed
                .iter()
                .take(3)
                .map(|d| d.what.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    notes
}

/// A verdict of the finder on `group`: no figure of its own (the
/// reason carries the finder's), its samples those of each pair.
fn of_finder(spec: &CheckSpec, group: &Group, status: Status, why: &str, reason: String) -> Verdict {
    let mut v = unjudged(spec, group, status, spec.fail_source().into(), reason);
    v.metric = METRIC;
    v.unit = "";
    v.samples = spec.samples;
    v.why = why.into();
    v
}

/// A finder verdict's metric: it has no value of its own.
pub const METRIC: &str = "finder";

/// A finding as one line: its headline, its evidence per metric, its
/// re-tests.
fn finding_reason(f: &Finding, o: &Outcome) -> String {
    let mut parts = vec![headline(f, &o.matrix, &o.analysis)];
    parts.extend(f.evidence.iter().map(evidence_line));
    if !f.retests.is_empty() {
        let slow = f.retests.iter().filter(|r| r.low).count();
        let how = if f.links.is_empty() {
            "re-tested against known-good partners"
        } else {
            "its pairs re-tested"
        };
        parts.push(format!("{how}: {slow} of {} slow again", f.retests.len()));
    }
    if !f.steps.is_empty() {
        parts.push(format!("{} bisection round(s) of all-reduces", f.steps.len()));
    }
    parts.join("; ")
}

/// Why the finder could not tell `node` from noise: the rule found it
/// worse than comparable pairs by more than its percentage, low with
/// enough partners, but not past its spreads (`UnitCheck::noisy`).
fn too_noisy(node: &Group, o: &Outcome) -> Option<String> {
    let rule = o.analysis.rule.unwrap_or(Rule::DEFAULT);
    let noisy: Vec<String> = o
        .analysis
        .noisy_units()
        .filter(|u| node.ranks.contains(&u.rank))
        .map(|u| {
            format!(
                "{} {:.0}% worse than comparable pairs (low with {} of {} partners), short of the {:.0}% the spread \
                 of the samples asks before naming it",
                u.metric, u.deficit_pct, u.low_partners, u.partners, u.margin_pct
            )
        })
        .collect();
    (!noisy.is_empty()).then(|| {
        format!(
            "too noisy to judge: {}: more than {}% and {} robust spreads, not {}; neither named nor fine",
            noisy.join(", "),
            rule.min_deficit_pct,
            crate::links::rule::DOUBT * rule.spreads,
            rule.spreads
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::profile::parse;
    use crate::links::finder::{FinderConfig, find};
    use crate::links::sim::{Fault, SimCluster, SimConfig};
    use crate::links::{Layout, Level, Measurer, schedule};

    const PROFILE: &str = r#"
name = "f"
description = "the finder"

[[check]]
name = "pair-finder"
scope = "pair"
finder = true
size = "1M"
"#;

    fn spec(warn: bool) -> CheckSpec {
        let text = if warn {
            format!("{PROFILE}on_finding = \"warn\"\n")
        } else {
            PROFILE.to_string()
        };
        parse(&text, "f.toml").unwrap().checks.remove(0)
    }

    fn run(nodes: usize, faults: Vec<Fault>, warn: bool) -> (Vec<Verdict>, Vec<String>, Vec<Group>) {
        let (o, groups) = outcome(nodes, faults);
        let (v, notes) = verdicts(&spec(warn), &groups, &o);
        (v, notes, groups)
    }

    fn outcome(nodes: usize, faults: Vec<Fault>) -> (Outcome, Vec<Group>) {
        let mut sim = SimCluster::new(SimConfig::nodes(nodes, 1), faults);
        let s = schedule::build(sim.endpoints(), Level::Node, false).unwrap();
        let layout = Layout::new(sim.endpoints(), &s.units(), None);
        let groups: Vec<Group> = sim
            .endpoints()
            .iter()
            .map(|e| Group {
                label: e.host.clone(),
                hosts: vec![e.host.clone()],
                ranks: vec![e.rank],
            })
            .collect();
        let o = find(&mut sim, &s, &layout, &FinderConfig::DEFAULT, &mut |_| {}).unwrap();
        (o, groups)
    }

    #[test]
    fn a_suspect_its_re_tests_did_not_show_again_is_not_judged_unless_explained() {
        use crate::links::Pair;
        let (mut o, groups) = outcome(5, vec![]);
        let dismissed = |rank: Option<usize>, pair: Option<Pair>| Dismissed {
            what: "a suspect".into(),
            rank,
            pair,
            retested: true,
            why: "not slow with known-good partners: 0-4 uni +3%".into(),
        };
        o.report.dismissed = vec![dismissed(Some(4), None), dismissed(None, Some(Pair::new(1, 3)))];
        // node 4's verdict: (status, why, reason)
        let node4 = |o: &Outcome| {
            let (v, _) = verdicts(&spec(false), &groups, o);
            let x = v.into_iter().find(|x| x.group == groups[4].label).unwrap();
            (x.status, x.why, x.reason)
        };
        let (status, why, reason) = node4(&o);
        assert_eq!(
            (status, why.as_str()),
            (Status::NotJudged, "not judged: not slow again")
        );
        assert!(
            reason.starts_with("slow in the matrix, not again when re-tested"),
            "{reason}"
        );
        let (v, notes) = verdicts(&spec(false), &groups, &o);
        let of = |label: &str| v.iter().find(|x| x.group == label).unwrap();
        let link = of(&format!("{}+{}", groups[1].label, groups[3].label));
        assert_eq!((link.status, link.ranks.as_slice()), (Status::NotJudged, &[1, 3][..]));
        assert_eq!(of(&groups[0].label).status, Status::Pass);
        assert!(
            notes.iter().any(|n| n.contains("2 suspect(s) of the matrix dismissed")),
            "{notes:?}"
        );
        // none of its re-tests judged (no pair beside it to compare with):
        // not re-tested, neither named nor cleared
        let mut unjudged = o.clone();
        unjudged.report.dismissed[0].retested = false;
        let (status, why, reason) = node4(&unjudged);
        assert_eq!((status, why.as_str()), (Status::NotJudged, "not judged: not re-tested"));
        assert!(reason.contains("no re-test of it could be judged"), "{reason}");
        // a dismissed link at a node the finder named is that node's (here
        // named from its pairs' re-tests, which its reason says)
        let retest = crate::links::finder::Retest {
            round: 4,
            pair: Pair::new(1, 3),
            measured: crate::links::finder::Measured {
                metric: crate::links::rule::Metric::Uni,
                value: 1.0,
                lo: None,
                hi: None,
                reference: 10.0,
                deficit_pct: 90.0,
            },
            control: 10.0,
            low: true,
        };
        o.report.findings = vec![crate::links::finder::Finding {
            kind: FindingKind::Node,
            hosts: vec![groups[3].label.clone()],
            endpoints: vec![o.matrix.endpoints[3].clone()],
            evidence: vec![],
            retests: vec![retest],
            links: vec![Pair::new(1, 3)],
            steps: vec![],
        }];
        let link = link.group.clone();
        let (v, _) = verdicts(&spec(false), &groups, &o);
        assert!(v.iter().all(|x| x.group != link), "{v:?}");
        let node3 = v.iter().find(|x| x.group == groups[3].label).unwrap();
        assert_eq!(node3.status, Status::Fail);
        assert!(
            node3.reason.contains(&format!(
                "slow with most partners: its pairs {} - {} slow when re-tested, and none of its re-tests fine",
                groups[1].label, groups[3].label
            )),
            "{}",
            node3.reason
        );
        assert!(
            node3.reason.ends_with("its pairs re-tested: 1 of 1 slow again"),
            "{}",
            node3.reason
        );
    }

    #[test]
    fn a_node_the_finder_names_fails_with_its_evidence_and_the_others_pass() {
        let (v, _, groups) = run(6, vec![Fault::slow_node(2, 1.5)], false);
        assert_eq!(v.len(), 6, "one verdict a node: {v:?}");
        for (i, x) in v.iter().enumerate() {
            assert_eq!(x.group, groups[i].label);
            assert_eq!(x.scope, "pair");
            if i == 2 {
                assert_eq!(x.status, Status::Fail, "{x:?}");
                assert_eq!(x.why, "named by the finder");
                assert!(x.reason.starts_with("SUSPECT node "), "{}", x.reason);
                assert!(x.reason.contains("below the"), "{}", x.reason);
                assert!(x.reason.contains("slow again"), "{}", x.reason);
            } else {
                assert_eq!(x.status, Status::Pass, "{x:?}");
                assert!(x.reason.starts_with("not named by the finder"), "{}", x.reason);
            }
        }
        let (v, _, _) = run(6, vec![Fault::slow_node(2, 1.5)], true);
        assert_eq!(v[2].status, Status::Warn, "on_finding = warn");
    }

    #[test]
    fn a_link_the_finder_names_is_a_verdict_on_both_its_ends() {
        let (v, _, groups) = run(6, vec![Fault::slow_link(1, 4, 2.0)], false);
        assert_eq!(v.len(), 7, "{v:?}");
        assert!(v[..6].iter().all(|x| x.status == Status::Pass), "{v:?}");
        let link = &v[6];
        assert_eq!(link.status, Status::Fail);
        assert_eq!(link.group, format!("{}+{}", groups[1].label, groups[4].label));
        assert_eq!(link.ranks, [1, 4]);
        assert!(link.reason.starts_with("SUSPECT link "), "{}", link.reason);
        assert!(v[1].reason.contains("an end of the link"), "{}", v[1].reason);
    }

    #[test]
    fn a_healthy_cluster_passes_every_node() {
        let (v, notes, _) = run(5, vec![], false);
        assert!(v.iter().all(|x| x.status == Status::Pass && x.why.is_empty()), "{v:?}");
        assert!(notes.iter().all(|n| n.starts_with("pair-finder: ")), "{notes:?}");
    }
}
