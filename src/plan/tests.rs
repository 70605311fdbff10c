//! Unit tests of `plan`.

use super::*;

/// A backend that can do everything but avg and half, for plan tests.
fn caps() -> Capabilities {
    Capabilities {
        backend: "caps",
        max_elements: 1 << 20,
        refused_dtypes: vec![(DType::Half, "no half here".into())],
        refused_ops: vec![(ReduceOp::Avg, "no avg here".into())],
        ..Capabilities::default()
    }
}

/// `caps` with avg: for the checks that only matter where avg runs.
fn with_avg() -> Capabilities {
    Capabilities {
        refused_ops: Vec::new(),
        ..caps()
    }
}

fn one_node(n: usize) -> Nodes {
    let hosts = vec!["h".to_string(); n];
    Nodes::from_keys(&hosts, &hosts)
}

/// The defaults of `collbench run`, then `set`: (option, value) pairs
/// parsed as the command line parses them.
fn config(set: &[(&str, &str)]) -> PlanConfig {
    let mut c = PlanConfig {
        sweep: SizeSweep::new(8, 32 << 20, Step::Factor(2)).unwrap(),
        collectives: Collective::ALL.to_vec(),
        dtypes: Choice::one(DType::Float),
        ops: Choice::one(ReduceOp::Sum),
        roots: RootChoice::Rank(0),
        hierarchies: Choice::one(Hierarchy::Flat),
        ranks_per_node: None,
        split: None,
        traffic: Default::default(),
    };
    let size = |v: &str| v.parse::<crate::types::Size>().unwrap().bytes();
    let (mut min, mut max, mut step) = (8, 32 << 20, Step::Factor(2));
    for &(option, value) in set {
        match option {
            "collectives" => c.collectives = value.parse::<Choice<Collective>>().unwrap().values(),
            "dtype" => c.dtypes = value.parse().unwrap(),
            "op" => c.ops = value.parse().unwrap(),
            "root" => c.roots = value.parse().unwrap(),
            "hierarchy" => c.hierarchies = value.parse::<Choice<Hierarchy>>().unwrap(),
            "minbytes" => min = size(value),
            "maxbytes" => max = size(value),
            "stepbytes" => step = Step::Bytes(size(value)),
            other => panic!("no such test option {other}"),
        }
    }
    c.sweep = SizeSweep::new(min, max, step).unwrap();
    c
}

fn build(cfg: &PlanConfig, nodes: &Nodes, caps: &Capabilities) -> Result<Plan, Error> {
    Plan::build(cfg, caps, nodes)
}

#[test]
fn plan_orders_collective_type_op_root_size() {
    let cfg = config(&[
        ("collectives", "reduce"),
        ("dtype", "float,int8"),
        ("op", "sum,max"),
        ("root", "all"),
        ("minbytes", "64"),
        ("maxbytes", "128"),
    ]);
    let plan = build(&cfg, &one_node(2), &caps()).unwrap();
    let keys: Vec<_> = plan
        .cases
        .iter()
        .map(|c| (c.dtype, c.op.unwrap(), c.root.unwrap(), c.size_bytes()))
        .collect();
    assert_eq!(keys.len(), 2 * 2 * 2 * 2);
    assert_eq!(keys[0], (DType::Float, ReduceOp::Sum, 0, 64));
    assert_eq!(keys[1], (DType::Float, ReduceOp::Sum, 0, 128));
    assert_eq!(keys[2], (DType::Float, ReduceOp::Sum, 1, 64));
    assert_eq!(keys[4], (DType::Float, ReduceOp::Max, 0, 64));
    assert_eq!(keys[8], (DType::Int8, ReduceOp::Sum, 0, 64));
    assert_eq!(plan.points(), 32);
}

#[test]
fn non_reductions_have_no_op_and_unrooted_ones_no_root() {
    let cfg = config(&[
        ("collectives", "all_gather,broadcast"),
        ("op", "all"),
        ("minbytes", "32"),
        ("maxbytes", "32"),
    ]);
    let plan = build(&cfg, &one_node(2), &caps()).unwrap();
    assert_eq!(plan.cases.len(), 2);
    assert_eq!((plan.cases[0].op, plan.cases[0].root), (None, None));
    assert_eq!((plan.cases[1].op, plan.cases[1].root), (None, Some(0)));
}

#[test]
fn sizes_that_round_to_nothing_or_repeat_are_skipped() {
    // alltoall of floats at 3 ranks, per-peer counts cut to 16 bytes
    // (4 floats): 8, 16, 32 B -> 0, 1, 2 per peer -> 0; 64 B -> 16 -> 5
    // -> 4 per peer (48 B); 128 B -> 32 -> 10 -> 8 per peer (96 B)
    let cfg = config(&[("collectives", "alltoall"), ("maxbytes", "128")]);
    let plan = build(&cfg, &one_node(3), &caps()).unwrap();
    let sizes: Vec<u64> = plan.cases.iter().map(Case::size_bytes).collect();
    assert_eq!(sizes, vec![48, 96]);
    // 64 to 68 bytes of int8 at 4 ranks all give 16 per rank
    let cfg = config(&[
        ("collectives", "all_gather"),
        ("dtype", "int8"),
        ("minbytes", "60"),
        ("maxbytes", "68"),
        ("stepbytes", "1"),
    ]);
    let sizes: Vec<u64> = build(&cfg, &one_node(4), &caps())
        .unwrap()
        .cases
        .iter()
        .map(Case::size_bytes)
        .collect();
    assert_eq!(sizes, vec![64]);
}

#[test]
fn all_expands_to_what_the_backend_supports() {
    let cfg = config(&[
        ("collectives", "all_reduce"),
        ("dtype", "all"),
        ("op", "all"),
        ("maxbytes", "8"),
    ]);
    let plan = build(&cfg, &one_node(1), &caps()).unwrap();
    assert!(
        plan.cases
            .iter()
            .all(|c| c.dtype != DType::Half && c.op != Some(ReduceOp::Avg))
    );
    assert_eq!(plan.cases.len(), 9 * 4);
}

#[test]
fn unsupported_choices_and_bad_roots_are_usage_errors() {
    let bad = |set: &[(&str, &str)], n: usize| match build(&config(set), &one_node(n), &caps()) {
        Err(Error::Usage(m)) => m,
        other => panic!("{other:?}"),
    };
    assert!(bad(&[("dtype", "half")], 2).contains("half"));
    assert!(bad(&[("op", "avg")], 2).contains("avg"));
    assert!(bad(&[("root", "2")], 2).contains("--root 2 is out of range"));
    assert!(bad(&[("maxbytes", "1G")], 2).contains("limit"));
    assert!(bad(&[("collectives", "alltoall"), ("maxbytes", "8")], 4).contains("nothing to measure"));
}

/// `--hierarchy all` is every mode the backend runs, as `-d all` is
/// every type: on a backend of flat all-reduces only (the memory
/// backend's), flat; a mode named that it refuses stays an error.
#[test]
fn hierarchy_all_is_the_modes_the_backend_runs() {
    let flat_only = Capabilities {
        refused_hierarchies: [Hierarchy::RsArAg, Hierarchy::ReduceBcast]
            .into_iter()
            .map(|h| (h, format!("--hierarchy {h}: flat only")))
            .collect(),
        ..caps()
    };
    let cfg = config(&[("collectives", "all_reduce"), ("hierarchy", "all"), ("maxbytes", "64")]);
    let plan = build(&cfg, &one_node(4), &flat_only).unwrap();
    assert!(plan.cases.iter().all(|c| c.hierarchy == Hierarchy::Flat));
    assert_eq!(cfg.hierarchies_on(&flat_only).unwrap(), [Hierarchy::Flat]);
    assert_eq!(cfg.hierarchies_asked(), Hierarchy::ALL.to_vec());
    let named = config(&[("collectives", "all_reduce"), ("hierarchy", "flat,rs-ar-ag")]);
    let e = build(&named, &one_node(4), &flat_only).unwrap_err();
    assert_eq!(e.to_string(), "--hierarchy rs-ar-ag: flat only");
}

#[test]
fn hierarchy_modes_apply_to_all_reduce_only() {
    let cfg = config(&[
        ("collectives", "all_reduce,all_gather"),
        ("hierarchy", "all"),
        ("minbytes", "64"),
        ("maxbytes", "64"),
    ]);
    let plan = build(
        &cfg,
        &Nodes::consecutive(2, &vec!["h".to_string(); 4]).unwrap(),
        &caps(),
    )
    .unwrap();
    let got: Vec<_> = plan.cases.iter().map(|c| (c.collective, c.hierarchy)).collect();
    assert_eq!(
        got,
        vec![
            (Collective::AllReduce, Hierarchy::Flat),
            (Collective::AllReduce, Hierarchy::RsArAg),
            (Collective::AllReduce, Hierarchy::ReduceBcast),
            (Collective::AllGather, Hierarchy::Flat),
        ]
    );
    // a backend sizes its scratch by the hierarchical all-reduces alone
    let r = plan.reservation(true);
    let count = plan.cases[0].shape.count;
    assert_eq!(
        r.hierarchical,
        vec![
            (Hierarchy::RsArAg, DType::Float, count),
            (Hierarchy::ReduceBcast, DType::Float, count)
        ]
    );
    assert!(r.rotate);
}

#[test]
fn rs_ar_ag_needs_uniform_nodes() {
    let cfg = config(&[("hierarchy", "rs-ar-ag")]);
    let hosts: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
    let uneven = Nodes::from_keys(&hosts, &hosts);
    match build(&cfg, &uneven, &caps()) {
        Err(Error::Usage(m)) => assert!(m.contains("same number of ranks"), "{m}"),
        other => panic!("{other:?}"),
    }
    let cfg = config(&[("hierarchy", "reduce-bcast"), ("maxbytes", "64")]);
    assert!(build(&cfg, &uneven, &caps()).is_ok());
}

#[test]
fn reduce_bcast_averages_only_over_nodes_of_one_size() {
    let hosts: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
    let uneven = Nodes::from_keys(&hosts, &hosts);
    let cfg = config(&[
        ("collectives", "all_reduce"),
        ("hierarchy", "reduce-bcast"),
        ("op", "sum,avg"),
        ("maxbytes", "64"),
    ]);
    match build(&cfg, &uneven, &with_avg()) {
        Err(Error::Usage(m)) => assert!(m.contains("--op avg") && m.contains("between 1 and 2"), "{m}"),
        other => panic!("{other:?}"),
    }
    let even = Nodes::consecutive(2, &vec!["h".to_string(); 4]).unwrap();
    assert!(build(&cfg, &even, &with_avg()).is_ok());
    let sum_only = config(&[("hierarchy", "reduce-bcast"), ("maxbytes", "64")]);
    assert!(build(&sum_only, &uneven, &with_avg()).is_ok());
}

#[test]
fn launch_extras_the_backend_refuses_refuse_the_plan() {
    let refusing = Capabilities {
        refused_extras: Some("-m/--agg-iters 2: it needs the nccl backend".into()),
        ..caps()
    };
    match build(&config(&[("maxbytes", "64")]), &one_node(2), &refusing) {
        Err(Error::Usage(m)) => assert!(m.starts_with("-m/--agg-iters 2"), "{m}"),
        other => panic!("{other:?}"),
    }
    assert!(build(&config(&[("maxbytes", "64")]), &one_node(2), &caps()).is_ok());
}

#[test]
fn memory_check_counts_every_rank_on_the_node() {
    let cfg = config(&[
        ("collectives", "all_gather"),
        ("dtype", "int8"),
        ("minbytes", "1M"),
        ("maxbytes", "1M"),
    ]);
    let plan = build(&cfg, &one_node(4), &caps()).unwrap();
    // two buffers of the 1 MiB output
    let r = plan.reservation(false);
    assert_eq!(
        (r.send_bytes, r.recv_bytes, r.peak_bytes()),
        (256 << 10, 1 << 20, 2 << 20)
    );
    assert!(r.check_host_memory(4, 8 << 20, "lower --maxbytes").is_ok());
    let e = r
        .check_host_memory(4, (8 << 20) - 1, "lower --maxbytes")
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("; lower --maxbytes") && !e.contains('\n'), "{e}");
}

#[test]
fn factor_sweeps_double_up_to_the_maximum() {
    let s = SizeSweep::new(8, 64, Step::Factor(2)).unwrap();
    assert_eq!(s.sizes(), vec![8, 16, 32, 64]);
    let s = SizeSweep::new(8, 100, Step::Factor(3)).unwrap();
    assert_eq!(s.sizes(), vec![8, 24, 72]);
    let s = SizeSweep::new(5, 5, Step::Factor(2)).unwrap();
    assert_eq!(s.sizes(), vec![5]);
}

#[test]
fn byte_sweeps_add_the_step() {
    let s = SizeSweep::new(1 << 20, 4 << 20, Step::Bytes(1 << 20)).unwrap();
    assert_eq!(s.sizes(), vec![1 << 20, 2 << 20, 3 << 20, 4 << 20]);
    assert_eq!(s.len(), 4);
}

#[test]
fn sweeps_near_u64_max_stop_instead_of_overflowing() {
    let s = SizeSweep::new(u64::MAX / 2, u64::MAX, Step::Factor(4)).unwrap();
    assert_eq!(s.sizes(), vec![u64::MAX / 2]);
}

#[test]
fn sweeps_refuse_zero_inverted_and_oversized_ranges() {
    assert!(SizeSweep::new(0, 8, Step::Factor(2)).is_err());
    assert!(SizeSweep::new(16, 8, Step::Factor(2)).is_err());
    assert!(SizeSweep::new(1, 1 << 30, Step::Bytes(1)).is_err());
    assert!(SizeSweep::new(1, 8, Step::Factor(1)).is_err());
}

proptest::proptest! {
    #[test]
    fn sweeps_are_increasing_and_bounded(min in 1u64..1_000_000, span in 0u64..1_000_000_000, f in 2u64..9) {
        if let Ok(s) = SizeSweep::new(min, min + span, Step::Factor(f)) {
            let sizes = s.sizes();
            proptest::prop_assert_eq!(sizes[0], min);
            proptest::prop_assert!(sizes.windows(2).all(|w| w[1] == w[0] * f));
            proptest::prop_assert!(*sizes.last().unwrap() <= min + span);
            proptest::prop_assert!(sizes.last().unwrap() * f > min + span);
        }
    }
}
