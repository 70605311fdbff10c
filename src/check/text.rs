//! What `collbench check` prints: the list of profiles, one profile in
//! full, the docs' table of shipped profiles (generated: docs/check.md),
//! and the verdicts of a run.

use super::judge::figure;
use super::profile::{CheckSpec, FINDER_SOURCE, Profile, Rule};
use super::{Report, Status, size_class};

fn backend(p: &Profile) -> &'static str {
    p.backend.value.name()
}

fn scopes(p: &Profile) -> String {
    let mut s: Vec<&str> = p.checks.iter().map(|c| c.scope.name()).collect();
    s.dedup();
    let shape = match (p.nodes.as_ref(), p.ranks_per_node.as_ref()) {
        (Some(n), Some(r)) => format!(" ({} nodes x {})", n.value, r.value),
        (Some(n), None) => format!(" ({} nodes)", n.value),
        (None, Some(r)) => format!(" ({} per node)", r.value),
        (None, None) => String::new(),
    };
    format!("{}{shape}", s.join(","))
}

/// `--list-profiles`: one line each.
pub fn list(profiles: &[Profile]) -> String {
    let width = profiles.iter().map(|p| p.name.len()).max().unwrap_or(4).max(7);
    let mut out = format!("{:width$}  {:<7} {:<20} description\n", "profile", "backend", "scope");
    for p in profiles {
        out += &format!(
            "{:width$}  {:<7} {:<20} {}\n",
            p.name,
            backend(p),
            scopes(p),
            p.description
        );
    }
    out += "\ncollbench check --show-profile NAME prints a profile's checks and the source of every threshold\n";
    out
}

fn rule_lines(c: &CheckSpec) -> Vec<String> {
    let unit = c.metric.unit();
    let side = if c.metric.higher_is_better() { "below" } else { "above" };
    match &c.rule {
        Rule::Fixed { fail, warn } => {
            let mut v = vec![format!("fail {side} {} {unit}: {}", figure(fail.value), fail.source)];
            if let Some(w) = warn {
                v.push(format!("warn {side} {} {unit}: {}", figure(w.value), w.source));
            }
            v
        }
        Rule::Baseline { fail_pct, warn_pct } => {
            let mut v = vec![format!(
                "fail {}% below the fleet baseline (--baseline): {}",
                fail_pct.value, fail_pct.source
            )];
            if let Some(w) = warn_pct {
                v.push(format!("warn {}% below the fleet baseline: {}", w.value, w.source));
            }
            v
        }
        Rule::Finder { warn, margin } => vec![format!(
            "{} where the finder names a node, GPU or link: {}",
            if *warn { "warn" } else { "fail" },
            finder_source(margin.as_ref())
        )],
    }
}

/// A finder check's source: links' rule, with the check's own
/// percentage and its source where it gives one.
fn finder_source(margin: Option<&super::profile::Threshold>) -> String {
    match margin {
        None => FINDER_SOURCE.into(),
        Some(m) => format!(
            "collbench links' fleet-relative rule (docs/links.md) at min_deficit_pct = {}: more than {}% and 4 \
             robust spreads worse than comparable pairs, and again when re-tested; {}% because {}",
            m.value, m.value, m.value, m.source
        ),
    }
}

/// What a check measures, in one phrase: `all_reduce float sum 16G
/// busbw`, or the finder's probe.
fn measures(c: &CheckSpec) -> String {
    if c.is_finder() {
        return format!(
            "the links matrix and finder at node level, {} probe",
            size_class(&c.sizes.value)
        );
    }
    format!(
        "{} {} {}{} {}",
        c.collective,
        c.dtype,
        c.op.map(|o| format!("{o} ")).unwrap_or_default(),
        size_class(&c.sizes.value),
        c.metric.name()
    )
}

/// `--show-profile NAME`: everything the profile says.
pub fn show(p: &Profile) -> String {
    let mut out = format!("# {} ({})\n{}\n\n", p.name, p.origin, p.description);
    out += &format!("backend          : {}\n", backend(p));
    if let Some(r) = &p.ranks_per_node {
        out += &format!("ranks per node   : {}\n", r.value);
    }
    if let Some(n) = &p.nodes {
        out += &format!("nodes            : {}\n", n.value);
    }
    out += &format!("transport        : {}\n", p.transport.value.name());
    for (k, v) in &p.env {
        out += &format!("environment      : {k}={}\n", v.value);
    }
    for n in &p.notes {
        out += &format!("note             : {n}\n");
    }
    for c in &p.checks {
        out += &format!(
            "\ncheck {}: {} scope{}, {}, {} samples x {} iterations (warm-up {})\n",
            c.name,
            c.scope.name(),
            if c.optional { " (optional)" } else { "" },
            measures(c),
            c.samples,
            c.iters,
            c.warmup
        );
        if let Some(r) = &c.ranks {
            out += &format!("  for groups of {} ranks\n", r.value);
        }
        if let Some(p) = &c.path {
            out += &format!("  on the path {} (the transport observed must hold it)\n", p.value);
        }
        for l in rule_lines(c) {
            out += &format!("  {l}\n");
        }
        if let Some(f) = &c.follows {
            out += &format!("  follows: {f}\n");
        }
    }
    out
}

/// docs/check.md's table of shipped profiles: one row per check.
pub fn profiles_markdown(profiles: &[Profile]) -> String {
    let cell = |t: &str| t.replace('|', "\\|");
    let mut out = String::from("| profile | scope | check | fail | warn | source |\n|---|---|---|---|---|---|\n");
    for p in profiles {
        for c in &p.checks {
            let unit = c.metric.unit();
            let what = if c.is_finder() {
                format!("links finder, {} probe", size_class(&c.sizes.value))
            } else {
                format!("{} {} {}", c.collective, size_class(&c.sizes.value), c.metric.name())
            };
            let (fail, warn, source) = match &c.rule {
                Rule::Fixed { fail, warn } => (
                    format!("{} {unit}", figure(fail.value)),
                    warn.as_ref()
                        .map(|w| format!("{} {unit}", figure(w.value)))
                        .unwrap_or_else(|| "-".into()),
                    match warn {
                        Some(w) => format!("fail: {} warn: {}", fail.source, w.source),
                        None => fail.source.clone(),
                    },
                ),
                Rule::Baseline { fail_pct, warn_pct } => (
                    format!("{}% below baseline", fail_pct.value),
                    warn_pct
                        .as_ref()
                        .map(|w| format!("{}% below", w.value))
                        .unwrap_or_else(|| "-".into()),
                    fail_pct.source.clone(),
                ),
                Rule::Finder { warn, margin } => {
                    let named = "named by the finder".to_string();
                    let source = finder_source(margin.as_ref());
                    if *warn {
                        ("-".into(), named, source)
                    } else {
                        (named, "-".into(), source)
                    }
                }
            };
            out += &format!(
                "| `{}` | {} | {} | {} | {} | {} |\n",
                p.name,
                scopes(p),
                cell(&what),
                fail,
                warn,
                cell(&source)
            );
        }
    }
    out
}

/// The verdicts as a table, then the sources, the reasons of every
/// verdict but a pass, the notes, the counts and the run's verdict.
pub fn summary(r: &Report, files: &str) -> String {
    let mut out = verdict_table(r);
    let mut sources: Vec<(&str, &str)> = Vec::new();
    for v in &r.verdicts {
        if v.status != Status::Skipped && !sources.iter().any(|(c, _)| *c == v.check) {
            sources.push((&v.check, &v.source));
        }
    }
    out += "#\n";
    for (c, s) in sources {
        out += &format!("# source of {c}: {s}\n");
    }
    for v in r.verdicts.iter().filter(|v| v.status != Status::Pass) {
        out += &format!(
            "# {} on {}: {}: {}\n",
            v.check,
            v.group,
            v.status.name().replace('_', " "),
            v.reason
        );
    }
    for n in &r.notes {
        out += &format!("# note: {n}\n");
    }
    let verdict = run_verdict(r);
    if let Some(sig) = &r.stopped_by {
        let stopped = crate::error::stopped_by(sig);
        out += &format!("# {stopped}: judged from the samples taken before it\n");
    }
    let c = r.counts();
    out += &format!(
        "# checks : {} passed, {} warned, {} failed, {} flaky, {} not judged{}\n",
        c.passed,
        c.warned,
        c.failed,
        c.flaky,
        c.not_judged,
        if c.skipped > 0 {
            format!(", {} skipped (optional)", c.skipped)
        } else {
            String::new()
        }
    );
    out += &format!("# verdict: {verdict}\n# files  : {files}\n");
    out
}

/// The header and one row a verdict; the last column says why a verdict
/// is not a pass, in a few words.
fn verdict_table(r: &Report) -> String {
    let cw = r.verdicts.iter().map(|v| v.check.len()).max().unwrap_or(5).max(5);
    let gw = r.verdicts.iter().map(|v| v.group.len()).max().unwrap_or(5).max(5);
    let mut out = format!(
        "#\n# {:cw$}  {:5}  {:gw$}  {:10}  {:>12}  {:>12}  {:>8}  {:>7}  why\n",
        "check", "scope", "group", "verdict", "value", "threshold", "margin", "samples"
    );
    for v in &r.verdicts {
        let value = v
            .value
            .map(|x| format!("{} {}", figure(x), v.unit))
            .unwrap_or_else(|| "-".into());
        let threshold = v
            .threshold
            .map(|x| format!("{} {}", figure(x), v.unit))
            .unwrap_or_else(|| "-".into());
        let margin = v.margin_pct.map(|m| format!("{m:+.1}%")).unwrap_or_else(|| "-".into());
        let why = if v.why.is_empty() { "-" } else { v.why.as_str() };
        out += &format!(
            "  {:cw$}  {:5}  {:gw$}  {:10}  {:>12}  {:>12}  {:>8}  {:>7}  {why}\n",
            v.check,
            v.scope,
            v.group,
            v.status.word(),
            value,
            threshold,
            margin,
            v.samples
        );
    }
    out
}

/// The run's verdict line: pass, which nodes and links fail, or what
/// could not be judged.
fn run_verdict(r: &Report) -> String {
    let failing = r.failing_nodes();
    let status = r.status();
    let nodes = r.hosts.len();
    let judged = r.verdicts.iter().filter(|v| v.status.judged()).count();
    let code = r.exit_code();
    if code == super::EXIT_NOT_JUDGED {
        let unjudged: Vec<String> = r
            .verdicts
            .iter()
            .filter(|v| v.status == Status::NotJudged)
            .map(|v| {
                format!(
                    "{} on {} ({})",
                    v.check,
                    v.group,
                    v.why.trim_start_matches("not judged: ")
                )
            })
            .collect();
        let what = if unjudged.is_empty() {
            "no check could run here".to_string()
        } else {
            unjudged.join(", ")
        };
        format!(
            "NOT JUDGED: {judged} of {} check{} judged on {nodes} node{}, none failed; not judged: {what}",
            r.verdicts.len(),
            plural(r.verdicts.len()),
            plural(nodes)
        )
    } else if code == 0 {
        let warned = if status == Status::Warn { " (with warnings)" } else { "" };
        format!(
            "PASS{warned}: {judged} check{} on {nodes} node{}",
            plural(judged),
            plural(nodes)
        )
    } else if failing.is_empty() {
        "FAIL: the whole-job collective fails, and no node's own check does: collbench links finds which node or link"
            .into()
    } else {
        let names: Vec<String> = failing
            .iter()
            .map(|(h, vs)| {
                let mut checks: Vec<&str> = vs.iter().map(|v| v.check.as_str()).collect();
                checks.dedup();
                format!("{h} ({})", checks.join(", "))
            })
            .collect();
        let links: Vec<String> = r
            .failing_links()
            .iter()
            .map(|v| format!("{} ({})", v.group, v.check))
            .collect();
        let links = if links.is_empty() {
            String::new()
        } else {
            format!(
                "; the link{} {} fail{} where each node passes with another",
                plural(links.len()),
                links.join(", "),
                if links.len() == 1 { "s" } else { "" }
            )
        };
        format!(
            "FAIL: {} of {nodes} node{}: {}{links}",
            failing.len(),
            plural(nodes),
            names.join("; ")
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::super::shipped;
    use super::super::tests::{b_fails, report, verdict_on};
    use super::*;

    /// docs/check.md's table of shipped profiles is generated from the
    /// profiles; `COLLBENCH_BLESS=1` rewrites it.
    #[test]
    fn the_docs_profile_table_is_the_one_the_profiles_give() {
        const BEGIN: &str = "<!-- profiles: generated from check::text::profiles_markdown -->\n";
        const END: &str = "<!-- end of profiles -->";
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/check.md");
        let page = std::fs::read_to_string(&path).unwrap();
        let (before, rest) = page.split_once(BEGIN).expect("docs/check.md has the profiles marker");
        let (table, after) = rest.split_once(END).expect("docs/check.md has the end marker");
        let want = profiles_markdown(&shipped::all().unwrap());
        if table != want {
            if std::env::var_os("COLLBENCH_BLESS").is_some() {
                std::fs::write(&path, format!("{before}{BEGIN}{want}{END}{after}")).unwrap();
            } else {
                panic!(
                    "docs/check.md's profile table differs from configs/profiles/; \
                     run `COLLBENCH_BLESS=1 cargo test --lib profile_table` to regenerate it"
                );
            }
        }
    }

    #[test]
    fn the_list_and_a_profile_show_every_source() {
        let all = shipped::all().unwrap();
        let l = list(&all);
        let words = |line: &str| line.split_whitespace().take(6).collect::<Vec<_>>().join(" ");
        assert!(
            l.lines()
                .any(|line| words(line) == "azure-nd-h100-v5 nccl node (8 per node)"),
            "{l}"
        );
        assert!(
            l.lines()
                .any(|line| words(line).starts_with("local-cpu mpi node,pair,job")),
            "{l}"
        );
        assert!(l.contains("gcp-a3-highgpu"), "{l}");
        let p = all.iter().find(|p| p.name == "azure-nd-h100-v5").unwrap();
        let s = show(p);
        assert!(s.contains("fail below 460 GB/s: Azure/azurehpc-health-checks"), "{s}");
        assert!(
            s.contains("check nvlink-all-reduce-16g: node scope, all_reduce float sum 16G"),
            "{s}"
        );
    }

    #[test]
    fn the_summary_names_the_failing_node_and_the_sources() {
        let r = b_fails("node-ar", vec![], &["a", "b"]);
        let s = summary(&r, "results/x/");
        assert!(s.contains("  node-ar  node   b      FAIL"), "{s}");
        assert!(s.contains("# source of node-ar: measured \"here\""), "{s}");
        assert!(s.contains("# verdict: FAIL: 1 of 2 nodes: b (node-ar)"), "{s}");
        let ok = report(vec![verdict_on("node-ar", "node", &["a"], Status::Pass)], &["a"]);
        assert!(summary(&ok, "f").contains("# verdict: PASS: 1 check on 1 node\n"));
    }

    #[test]
    fn the_table_says_why_and_the_summary_counts_each_verdict() {
        let mut failed = verdict_on("node-ar", "node", &["b"], Status::Fail);
        failed.why = "wrong transport path".into();
        let mut nj = verdict_on("job-ar", "job", &["a", "b"], Status::NotJudged);
        nj.why = "not judged: 1 rank".into();
        let r = report(
            vec![verdict_on("node-ar", "node", &["a"], Status::Pass), failed, nj],
            &["a", "b"],
        );
        let s = summary(&r, "f/");
        let row = |needle: &str| s.lines().find(|l| l.contains(needle)).unwrap_or_default().to_string();
        assert!(row("  node-ar  node   b").ends_with("  wrong transport path"), "{s}");
        assert!(row("  node-ar  node   a").ends_with("  -"), "{s}");
        assert!(row("  job-ar").contains("  NOT JUDGED  "), "{s}");
        assert!(row("  job-ar").ends_with("  not judged: 1 rank"), "{s}");
        assert!(
            s.contains("# checks : 1 passed, 0 warned, 1 failed, 0 flaky, 1 not judged\n"),
            "{s}"
        );
        assert!(s.contains("# verdict: FAIL: 1 of 2 nodes: b (node-ar)"), "{s}");

        let r = report(
            vec![verdict_on("node-ar", "node", &["a"], Status::Pass), nj_of("job-ar")],
            &["a"],
        );
        let s = summary(&r, "f/");
        assert!(
            s.contains("# verdict: NOT JUDGED: 1 of 2 checks judged on 1 node, none failed; not judged: job-ar on job (1 rank)\n"),
            "{s}"
        );
        assert!(s.contains("# job-ar on job: not judged: "), "{s}");
        let r = report(vec![], &["a"]);
        assert!(summary(&r, "f/").contains("not judged: no check could run here"));
    }

    #[test]
    fn a_link_the_finder_names_is_a_link_whatever_its_ends_own_verdicts() {
        // the finder named the link a+b; b's own verdict is not judged
        // (too noisy), so the link is b's only judged verdict: b is not
        // the node at fault for it, and the link is named as the link
        let own = |h: &str, status: Status| {
            let mut v = verdict_on("pair-finder", "pair", &[h], status);
            v.metric = super::super::finder::METRIC;
            v
        };
        let mut link = verdict_on("pair-finder", "pair", &["a", "b"], Status::Fail);
        link.group = "a+b".into();
        let r = report(
            vec![
                own("a", Status::Pass),
                own("b", Status::NotJudged),
                own("c", Status::Pass),
                own("d", Status::Pass),
                link,
            ],
            &["a", "b", "c", "d"],
        );
        assert!(!r.blamed("b", "pair-finder") && !r.blamed("a", "pair-finder"));
        let s = summary(&r, "f/");
        assert!(
            s.contains(
                "# verdict: FAIL: 2 of 4 nodes: a (pair-finder); b (pair-finder); the link a+b (pair-finder) fails"
            ),
            "{s}"
        );
        // a node the finder names is the node at fault, its link too
        let mut r = r;
        r.verdicts[1].status = Status::Fail;
        assert!(r.blamed("b", "pair-finder") && !r.blamed("a", "pair-finder"));
        assert!(summary(&r, "f/").contains("# verdict: FAIL: 1 of 4 nodes: b (pair-finder)\n"));
    }

    fn nj_of(check: &str) -> crate::check::Verdict {
        let mut v = verdict_on(check, "job", &["a"], Status::NotJudged);
        v.group = "job".into();
        v.why = "not judged: 1 rank".into();
        v
    }
}
