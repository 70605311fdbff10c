use super::super::finder::{FinderConfig, find};
use super::super::sim::{Fault, SimCluster, SimConfig};
use super::super::{Measurer, schedule};
use super::*;

fn outcome(nodes: usize, per: usize, level: Level, faults: Vec<Fault>) -> (super::super::finder::Outcome, Layout) {
    let mut sim = SimCluster::new(SimConfig::nodes(nodes, per), faults);
    let s = schedule::build(sim.endpoints(), level, false).unwrap();
    let layout = Layout::new(sim.endpoints(), &s.units(), sim.topology().as_ref());
    let o = find(&mut sim, &s, &layout, &FinderConfig::DEFAULT, &mut |_| {}).unwrap();
    (o, layout)
}

fn meta() -> RunMeta {
    RunMeta {
        run_id: "r1".into(),
        timestamp: "2025-01-01T00:00:00Z".into(),
        collbench_version: "0.1.0".into(),
        backend: "simulation".into(),
        backend_version: "links::sim".into(),
        timing: Some(TimingMethod::Batched),
        label: None,
    }
}

#[test]
fn the_pairs_csv_has_its_header_and_reads_back_the_same_rows() {
    let (o, layout) = outcome(6, 1, Level::Node, vec![Fault::slow_node(2, 1.5)]);
    let rows = rows(&o.matrix, &layout, &meta());
    // 15 pairs of the matrix, then the re-tests
    assert!(rows.len() > 15);
    assert_eq!(rows.iter().filter(|r| r.pair.phase == Phase::Matrix).count(), 15);
    assert!(
        rows.iter()
            .filter(|r| r.pair.phase == Phase::Matrix)
            .all(|r| r.pair.concurrent == 3)
    );
    let mut buf = Vec::new();
    write_csv(&mut buf, &rows).unwrap();
    let text = String::from_utf8(buf.clone()).unwrap();
    assert_eq!(text.lines().next().unwrap(), columns().join(","));
    assert!(
        text.lines()
            .nth(1)
            .unwrap()
            .starts_with("r1,2025-01-01T00:00:00Z,node,matrix,1,3,"),
        "{text}"
    );
    let back = read_csv(&buf[..]).unwrap();
    assert_eq!(back, rows);
    // the bandwidth columns hold the estimate's figures
    let first = &o.matrix.pairs[0];
    assert_eq!(
        rows[0].metrics.get(Metric::Uni).median,
        first.estimate(Metric::Uni).map(|e| e.median)
    );
    assert_eq!(
        rows[0].metrics.get(Metric::Bidi).lo,
        first.estimate(Metric::Bidi).and_then(|e| e.lo)
    );
    let bad = read_csv(&b"run_id,timestamp\nx,y\n"[..]).unwrap_err();
    assert!(bad.contains("not a links pairs CSV"), "{bad}");
    let mut cut = text.lines().take(2).collect::<Vec<_>>().join("\n");
    cut = cut.replace(",node,matrix,", ",nodes,matrix,");
    assert!(read_csv(cut.as_bytes()).unwrap_err().starts_with("line 2:"));
}

#[test]
fn the_json_holds_the_rows_and_the_report() {
    let (o, layout) = outcome(6, 1, Level::Node, vec![]);
    let v = json(&meta(), &o.matrix, &layout, &o.analysis, Some(&o.report));
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["kind"], "links");
    assert_eq!(v["pairs"].as_array().unwrap().len(), o.matrix.pairs.len());
    // a pair's object holds every CSV column by name, each metric's
    // estimate under its four
    let first = &v["pairs"][0];
    let mut keys: Vec<&str> = first.as_object().unwrap().keys().map(String::as_str).collect();
    let mut want = columns();
    keys.sort_unstable();
    want.sort_unstable();
    assert_eq!(keys, want);
    let e = o.matrix.pairs[0].estimate(Metric::Latency).unwrap();
    assert_eq!(first["latency_us"], e.median);
    assert_eq!(first["latency_mad_us"], e.mad);
    assert_eq!(first["run_id"], "r1");
    assert_eq!(v["report"]["rounds"]["matrix"], 5);
    assert!(v["report"]["findings"].as_array().unwrap().is_empty());
}

#[test]
fn the_matrix_prints_for_small_launches_and_flags_the_slow_pairs() {
    let (o, layout) = outcome(4, 1, Level::Node, vec![Fault::slow_link(1, 3, 2.0)]);
    let text = matrix_text(&o.matrix, &layout, &o.analysis, Metric::Uni).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2 + 4, "{text}");
    assert!(lines[3].contains('!') && lines[5].contains('!'), "{text}");
    assert_eq!(text.matches('!').count(), 2 + 1, "{text}");
    let (big, layout) = outcome(17, 1, Level::Node, vec![]);
    assert!(matrix_text(&big.matrix, &layout, &big.analysis, Metric::Uni).is_none());
}

#[test]
fn the_report_names_the_node_with_evidence_or_says_no_suspect() {
    let (o, _) = outcome(8, 1, Level::Node, vec![Fault::slow_node(6, 1.5)]);
    let text = report_text(&o.report, &o.matrix, &o.analysis);
    assert!(
        text.contains("SUSPECT node l00-n006 (rank 6, local 0, GPU 0000:18:00.0, NIC mlx5_0)"),
        "{text}"
    );
    assert!(text.contains("low with 7 of 7 partners"), "{text}");
    assert!(text.contains("re-test round 8:"), "{text}");
    assert!(text.contains("simulation"), "{text}");
    let (o, _) = outcome(8, 1, Level::Node, vec![]);
    let text = report_text(&o.report, &o.matrix, &o.analysis);
    assert!(text.contains("\nno suspect: "), "{text}");
    assert!(text.contains("bisection:"), "{text}");
}

#[test]
fn rails_get_one_summary_row_each() {
    let (o, _) = outcome(4, 2, Level::Rail, vec![Fault::slow_rank(3, 1.5)]);
    let rails = rail_rows(&o.matrix, &o.analysis);
    assert_eq!(rails.len(), 2);
    assert_eq!((rails[0].pairs, rails[1].pairs), (6, 6));
    // rank 3 is on rail 1
    assert!(rails[1].worst.unwrap().0.has(3));
    let text = report_text(&o.report, &o.matrix, &o.analysis);
    assert!(text.contains("per rail (unidirectional):\n  rail 0: 6 pairs"), "{text}");
}

#[test]
fn a_collective_finding_says_its_pairs_look_fine_only_when_none_was_low() {
    use super::super::finder::{Finding, FindingKind};
    let (o, _) = outcome(8, 1, Level::Node, vec![Fault::slow_link(2, 5, 2.0)]);
    assert!(o.analysis.pair_suspects().any(|p| p.pair == Pair::new(2, 5)));
    let on = |rank: usize| Finding {
        kind: FindingKind::Collective,
        hosts: vec![o.matrix.endpoints[rank].host.clone()],
        endpoints: vec![o.matrix.endpoints[rank].clone()],
        evidence: vec![],
        retests: vec![],
        links: vec![],
        steps: vec![],
    };
    let fine = headline(&on(0), &o.matrix, &o.analysis);
    assert!(fine.ends_with("while its pairs look fine"), "{fine}");
    let low = headline(&on(2), &o.matrix, &o.analysis);
    assert!(!low.contains("look fine"), "{low}");
    assert!(
        low.ends_with("; in the matrix, 1 of its pairs were low and 0 too noisy to judge"),
        "{low}"
    );
}
