use super::*;

const GOOD: &str = r#"
name = "demo"
description = "two checks"
backend = "mpi"
transport = "auto"

[[check]]
name = "node-ar"
scope = "node"
collective = "all_reduce"
size = "4K"
iters = 100
ranks = 2
fail_below = { value = 0.3, source = "measured" }
warn_below = { value = 0.5, source = "measured" }

[[check]]
name = "job-time"
scope = "job"
collective = "broadcast"
sizes = ["2G", 4096]
metric = "time"
fail_above = { value = 100.0, source = "a figure" }
"#;

fn err(text: &str) -> String {
    parse(text, "p.toml").unwrap_err().to_string()
}

#[test]
fn a_profile_reads_its_checks_with_defaults_and_lines() {
    let p = parse(GOOD, "p.toml").unwrap();
    assert_eq!(p.name, "demo");
    assert_eq!(p.backend.value, BackendNeed::Only(BackendKind::Mpi));
    assert_eq!(p.checks.len(), 2);
    let a = &p.checks[0];
    assert_eq!(
        (a.scope, a.collective, a.op),
        (Scope::Node, Collective::AllReduce, Some(ReduceOp::Sum))
    );
    assert_eq!((a.samples, a.iters, a.warmup), (DEFAULT_SAMPLES, 100, DEFAULT_WARMUP));
    assert_eq!(a.sizes.value, vec![4096]);
    assert_eq!(a.sizes.line, 11);
    assert_eq!(a.line, 7);
    assert_eq!(a.ranks.as_ref().map(|r| (r.value, r.line)), Some((2, 13)));
    match &a.rule {
        Rule::Fixed { fail, warn } => {
            assert_eq!((fail.value, fail.line), (0.3, 14));
            assert_eq!(warn.as_ref().map(|w| w.value), Some(0.5));
        }
        other => panic!("{other:?}"),
    }
    let b = &p.checks[1];
    assert_eq!((b.metric, b.op), (Metric::TimeUs, None));
    assert_eq!(b.sizes.value, vec![2 << 30, 4096]);
    assert_eq!(b.max_size(), 2 << 30);
}

#[test]
fn an_unknown_key_names_the_file_and_its_line() {
    let text = GOOD.replace("iters = 100", "iterations = 100");
    let e = err(&text);
    assert!(e.starts_with("p.toml:12: "), "{e}");
    assert!(e.contains("iterations"), "{e}");
    assert!(!e.contains('\n'), "{e}");
}

#[test]
fn a_threshold_without_a_source_is_refused_at_its_line() {
    let text = GOOD.replace(r#"{ value = 0.3, source = "measured" }"#, "{ value = 0.3 }");
    assert_eq!(
        err(&text),
        "p.toml:14: check node-ar: fail_below = 0.3 has no source: every threshold says where it \
         comes from (source = \"...\": a file, an issue, a measurement)"
    );
    let text = GOOD.replace(r#"source = "a figure""#, r#"source = "  ""#);
    assert!(err(&text).starts_with("p.toml:23: check job-time: fail_above = 100 has no source"));
}

#[test]
fn thresholds_sit_on_their_metrics_side_and_in_order() {
    let e = err(&GOOD.replace("fail_above", "fail_below"));
    assert!(e.starts_with("p.toml:23: check job-time: fail_below on time"), "{e}");
    let e = err(&GOOD.replace("value = 0.5", "value = 0.1"));
    assert!(
        e.starts_with("p.toml:15: check node-ar: the warn threshold 0.1 is past"),
        "{e}"
    );
    let e = err(&GOOD.replace("fail_above = { value = 100.0, source = \"a figure\" }", ""));
    assert!(e.starts_with("p.toml:17: check job-time: no fail threshold"), "{e}");
}

#[test]
fn bad_values_name_their_line() {
    assert!(
        err(&GOOD.replace("\"4K\"", "\"4Q\"")).starts_with("p.toml:11: check node-ar: size '4Q' has an unknown unit")
    );
    assert!(err(&GOOD.replace("\"node\"", "\"rack\"")).starts_with("p.toml:9: check node-ar: scope 'rack'"));
    assert!(
        err(&GOOD.replace("\"broadcast\"", "\"allreduce2\""))
            .starts_with("p.toml:20: check job-time: unknown collective")
    );
    assert!(
        err(&GOOD.replace("transport = \"auto\"", "transport = \"nvlink\""))
            .starts_with("p.toml:5: transport nvlink steers the nccl backend")
    );
    assert!(err(&GOOD.replace("iters = 100", "iters = 0")).starts_with("p.toml:12: check node-ar: iters = 0"));
    assert!(
        err(&GOOD.replace("name = \"job-time\"", "name = \"node-ar\""))
            .starts_with("p.toml:17: a second check named 'node-ar'")
    );
    let broken = err("name = \"x\"\ndescription = \"d\"\n[[check]\n");
    assert!(broken.starts_with("p.toml:3: "), "{broken}");
}

#[test]
fn each_count_says_the_range_it_accepts() {
    // a warm-up of 0 is none (as `run -w 0`); samples and iterations start at 1
    let zero = parse(&GOOD.replace("iters = 100", "iters = 100\nwarmup = 0"), "p.toml").unwrap();
    assert_eq!(zero.checks[0].warmup, 0);
    assert_eq!(
        err(&GOOD.replace("iters = 100", "iters = 100\nwarmup = -1")),
        "p.toml:13: check node-ar: warmup = -1: give a whole number from 0 to 1000000"
    );
    let top = parse(
        &GOOD.replace("iters = 100", "iters = 1000000\nwarmup = 1000000"),
        "p.toml",
    )
    .unwrap();
    assert_eq!((top.checks[0].iters, top.checks[0].warmup), (1_000_000, 1_000_000));
    assert_eq!(
        err(&GOOD.replace("iters = 100", "iters = 100\nwarmup = 1000001")),
        "p.toml:13: check node-ar: warmup = 1000001: give a whole number from 0 to 1000000"
    );
    assert_eq!(
        err(&GOOD.replace("iters = 100", "iters = 0")),
        "p.toml:12: check node-ar: iters = 0: give a whole number from 1 to 1000000"
    );
    assert_eq!(
        err(&GOOD.replace("iters = 100", "iters = 100\nsamples = 0")),
        "p.toml:13: check node-ar: samples = 0: give a whole number from 1 to 1000000"
    );
}

#[test]
fn a_checks_group_size_of_0_names_the_check_and_the_profiles_counts_do_not() {
    assert_eq!(
        err(&GOOD.replace("ranks = 2", "ranks = 0")),
        "p.toml:13: check node-ar: ranks = 0: give a whole number of at least 1"
    );
    assert_eq!(
        err(&GOOD.replace("transport = \"auto\"", "transport = \"auto\"\nnodes = 0")),
        "p.toml:6: nodes = 0: give a whole number of at least 1"
    );
}

#[test]
fn a_baseline_rule_takes_percentages() {
    let text = GOOD.replace(
        "fail_below = { value = 0.3, source = \"measured\" }\nwarn_below = { value = 0.5, source = \"measured\" }",
        "fail_below_baseline_pct = { value = 5, source = \"SuperBench\" }",
    );
    let p = parse(&text, "p.toml").unwrap();
    assert!(p.needs_baseline());
    assert!(matches!(&p.checks[0].rule, Rule::Baseline { fail_pct, .. } if fail_pct.value == 5.0));
}

const FINDER: &str = r#"
name = "f"
description = "the finder"

[[check]]
name = "pair-finder"
scope = "pair"
finder = true
size = "256K"
samples = 12
"#;

#[test]
fn a_finder_check_takes_a_probe_and_what_a_finding_is() {
    let p = parse(FINDER, "f.toml").unwrap();
    let c = &p.checks[0];
    assert!(c.is_finder() && !c.optional);
    assert_eq!((c.scope, c.collective), (Scope::Pair, Collective::SendRecv));
    assert_eq!(
        (c.sizes.value.as_slice(), c.samples, c.iters),
        (&[256 << 10][..], 12, DEFAULT_ITERS)
    );
    assert_eq!(
        c.rule,
        Rule::Finder {
            warn: false,
            margin: None
        }
    );
    assert_eq!(c.fail_source(), FINDER_SOURCE);
    let w = parse(&format!("{FINDER}on_finding = \"warn\"\noptional = true\n"), "f.toml").unwrap();
    assert_eq!(
        w.checks[0].rule,
        Rule::Finder {
            warn: true,
            margin: None
        }
    );
    assert!(w.checks[0].optional);
    assert_eq!(w.checks[0].finder_rule(), crate::links::rule::Rule::DEFAULT);
    // the rule's percentage for a noisier fabric, with its source
    let m = parse(
        &format!("{FINDER}min_deficit_pct = {{ value = 50.0, source = \"measured here\" }}\n"),
        "f.toml",
    )
    .unwrap();
    let c = &m.checks[0];
    assert!(matches!(&c.rule, Rule::Finder { margin: Some(t), .. } if t.value == 50.0 && t.line == 11));
    assert_eq!(c.finder_rule().min_deficit_pct, 50.0);
    assert_eq!(c.finder_rule().spreads, crate::links::rule::Rule::DEFAULT.spreads);
    assert_eq!(c.fail_source(), "measured here");
    assert_eq!(
        FINDER_NODES, 4,
        "3 partners each: the rule's fewest to tell a node from a link"
    );
}

#[test]
fn a_finder_check_refuses_what_it_does_not_use_at_its_line() {
    let ferr = |extra: &str| err(&format!("{FINDER}{extra}\n"));
    let e = ferr("collective = \"all_reduce\"");
    assert!(
        e.starts_with("p.toml:11: check pair-finder: collective does not apply to a finder check"),
        "{e}"
    );
    let e = ferr("fail_below = { value = 1.0, source = \"a floor\" }");
    assert!(
        e.starts_with("p.toml:11: check pair-finder: fail_below does not apply"),
        "{e}"
    );
    let e = ferr("on_finding = \"drain\"");
    assert!(
        e.starts_with("p.toml:11: check pair-finder: on_finding 'drain': expected fail or warn"),
        "{e}"
    );
    let e = ferr("min_deficit_pct = { value = 50.0 }");
    assert!(
        e.starts_with("p.toml:11: check pair-finder: min_deficit_pct = 50 has no source"),
        "{e}"
    );
    let e = ferr("min_deficit_pct = { value = 100.0, source = \"s\" }");
    assert!(e.contains("min_deficit_pct = 100: a percentage below 100"), "{e}");
    let e = ferr("min_deficit_pct = { value = 0.0, source = \"s\" }");
    assert!(e.contains("give a number above 0"), "{e}");
    let e = err(&FINDER.replace("\"pair\"", "\"node\""));
    assert!(
        e.starts_with("p.toml:7: check pair-finder: a finder check measures pairs of nodes"),
        "{e}"
    );
    let e = err(&FINDER.replace("size = \"256K\"", "sizes = [\"256K\", \"1M\"]"));
    assert!(
        e.starts_with("p.toml:9: check pair-finder: a finder check takes one size"),
        "{e}"
    );
    let e = err(&FINDER.replace("\"256K\"", "1022"));
    assert!(e.contains("a multiple of 4 bytes"), "{e}");
}

/// A size that is no whole number of elements would be measured at
/// another size than the verdict names (size 3 ran 8 bytes of float).
#[test]
fn a_size_is_a_whole_number_of_elements() {
    let e = err(&GOOD.replace("size = \"4K\"", "size = 6"));
    assert!(
        e.starts_with("p.toml:11: check node-ar: size 6 bytes is not a whole number of float elements (4 bytes each)"),
        "{e}"
    );
    let e = err(&GOOD.replace("sizes = [\"2G\", 4096]", "sizes = [\"2G\", 4097]"));
    assert!(e.contains("check job-time: size 4097 bytes"), "{e}");
}

#[test]
fn a_collective_check_names_its_collective_and_may_be_optional() {
    let e = err(&GOOD.replace("collective = \"all_reduce\"\n", ""));
    assert!(e.starts_with("p.toml:7: check node-ar: no collective"), "{e}");
    let e = err(&GOOD.replace("iters = 100", "iters = 100\non_finding = \"warn\""));
    assert!(
        e.starts_with("p.toml:13: check node-ar: on_finding is for finder checks"),
        "{e}"
    );
    let e = err(&GOOD.replace(
        "iters = 100",
        "iters = 100\nmin_deficit_pct = { value = 50.0, source = \"s\" }",
    ));
    assert!(
        e.starts_with("p.toml:13: check node-ar: min_deficit_pct is for finder checks"),
        "{e}"
    );
    let p = parse(&GOOD.replace("iters = 100", "iters = 100\noptional = true"), "p.toml").unwrap();
    assert!(p.checks[0].optional && !p.checks[1].optional);
}
