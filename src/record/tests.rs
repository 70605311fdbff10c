//! Unit tests of `record`.

use super::*;

/// The record a CSV of `header` and one row of `fields` reads back as.
fn read_back(header: &[&str], fields: &[String]) -> Record {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(header).unwrap();
    w.write_record(fields).unwrap();
    let bytes = w.into_inner().unwrap();
    csv::Reader::from_reader(&bytes[..])
        .deserialize()
        .next()
        .unwrap()
        .unwrap()
}

#[test]
fn bandwidth_is_bytes_per_nanosecond_times_the_factor() {
    // 1 GB in 1 s is 1 GB/s; all_reduce at 8 ranks: busbw = 1.75 x algbw
    assert_eq!(bandwidth_gbps(1_000_000_000, 1.0, 1.75), (1.0, 1.75));
    // 32 MiB in 1 ms
    let (alg, bus) = bandwidth_gbps(32 << 20, 1e-3, 0.75);
    assert!((alg - 33.554432).abs() < 1e-9);
    assert!((bus - 25.165824).abs() < 1e-9);
    assert_eq!(bandwidth_gbps(8, 0.0, 1.0), (0.0, 0.0));
}

pub(crate) fn sample() -> Record {
    Record {
        run_id: "r".into(),
        timestamp: "t".into(),
        host: "h".into(),
        backend: BackendKind::Mpi,
        backend_version: "v".into(),
        transport: Profile::Auto,
        transport_observed: "unknown".into(),
        hierarchy: Hierarchy::Flat,
        collective: Collective::AllReduce,
        dtype: DType::Float,
        op: Some(ReduceOp::Sum),
        root: None,
        placement: Placement::InPlace,
        size_bytes: 8,
        count: 2,
        nranks: 2,
        nnodes: 1,
        ranks_per_node: 2,
        iters: 20,
        warmup: 5,
        time_us: 1.5,
        time_min_us: 1.0,
        time_max_us: 2.0,
        algbw_gbps: 0.1,
        busbw_gbps: 1.0 / 3.0,
        wrong: None,
        phase_intra1_us: Some(0.25),
        phase_inter_us: None,
        phase_intra2_us: Some(1e-3),
        collbench_version: Some("0.1.0".into()),
        timing: Some(TimingMethod::Blocking),
        average: Some(Average::Max),
        iter_policy: Some(IterPolicy::Precision),
        precision_target_pct: Some(1.5),
        precision_pct: Some(0.75),
        agg_iters: Some(4),
        cuda_graph: Some(10),
        register: Some(crate::types::Register::Buffers),
        rotate: Some(false),
        cycle: Some(3),
        samples: Some(5),
        time_iter_min_us: Some(1.0),
        time_p50_us: Some(1.25),
        time_p99_us: Some(2.5),
        time_iter_max_us: Some(3.0),
        time_cv: Some(0.125),
        slowest_rank: Some(1),
        slowest_excess_pct: Some(12.5),
        label: Some("nightly, a \"quoted\" name".into()),
        traffic: Some("spread=0.5".into()),
        group: None,
        algo: Some(crate::types::Chosen::One(crate::types::Algo::NvlsTree)),
        proto: Some(crate::types::Chosen::Mixed),
        nchannels: Some(16),
        algo_source: Some(crate::types::AlgoSource::Log),
        busbw_algo_gbps: Some(0.2),
        algo_pin: crate::types::AlgoPin::parse("tree/simple"),
        algo_choices: None,
        iter_times_us: None,
    }
}

#[test]
fn csv_fields_follow_the_column_lists_and_read_back_exactly() {
    let r = Record {
        group: Some("1".into()),
        ..sample()
    };
    for bits in 0..64u8 {
        let (per_iter, phases, label, traffic) = (bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0);
        let extras = Extras {
            per_iter,
            phases,
            label,
            traffic,
            group: bits & 16 != 0,
            algo: bits & 32 != 0,
        };
        let fields = r.csv_fields(extras);
        let header = extras.header();
        assert_eq!(fields.len(), header.len());
        let back = read_back(&header, &fields);
        let keep = |v: Option<f64>| v.filter(|_| per_iter);
        let want = Record {
            time_iter_min_us: keep(r.time_iter_min_us),
            time_p50_us: keep(r.time_p50_us),
            time_p99_us: keep(r.time_p99_us),
            time_iter_max_us: keep(r.time_iter_max_us),
            time_cv: keep(r.time_cv),
            slowest_rank: r.slowest_rank.filter(|_| per_iter),
            slowest_excess_pct: keep(r.slowest_excess_pct),
            phase_intra1_us: r.phase_intra1_us.filter(|_| phases),
            phase_intra2_us: r.phase_intra2_us.filter(|_| phases),
            label: r.label.clone().filter(|_| label),
            traffic: r.traffic.clone().filter(|_| traffic),
            group: r.group.clone().filter(|_| extras.group),
            algo: r.algo.filter(|_| extras.algo),
            proto: r.proto.filter(|_| extras.algo),
            nchannels: r.nchannels.filter(|_| extras.algo),
            algo_source: r.algo_source.filter(|_| extras.algo),
            busbw_algo_gbps: r.busbw_algo_gbps.filter(|_| extras.algo),
            algo_pin: r.algo_pin.filter(|_| extras.algo),
            ..r.clone()
        };
        assert_eq!(back, want);
    }
    // every -R reads back: false and true as before -R 2, then symmetric
    for register in [Register::Off, Register::Buffers, Register::Symmetric] {
        let r = Record {
            register: Some(register),
            ..sample()
        };
        let header = Extras::default().header();
        let fields = r.csv_fields(Extras::default());
        let column = header.iter().position(|h| *h == "register").unwrap();
        assert_eq!(fields[column], register.column());
        let back = read_back(&header, &fields);
        assert_eq!(back.register, Some(register));
    }
    let fields = r.csv_fields(Extras::default());
    assert_eq!(fields[COLUMNS.len() - 1], "", "wrong is empty when unchecked");
    // a CSV written before the method columns existed reads them as unknown
    let old = "run_id,timestamp,host,backend,backend_version,transport,transport_observed,hierarchy,collective,\
               dtype,op,root,placement,size_bytes,count,nranks,nnodes,ranks_per_node,iters,warmup,time_us,\
               time_min_us,time_max_us,algbw_gbps,busbw_gbps,wrong\n\
               r,t,h,mpi,v,auto,unknown,flat,all_reduce,float,sum,-1,in_place,8,2,2,1,2,20,5,1.5,1,2,0.1,0.3,0\n";
    let back: Record = csv::Reader::from_reader(old.as_bytes())
        .deserialize()
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        (back.timing, back.rotate, back.cycle, back.samples),
        (None, None, None, None)
    );
    assert_eq!(fields[24], (1.0f64 / 3.0).to_string());
}

#[test]
fn a_bad_value_of_a_typed_column_is_named_with_its_vocabulary() {
    for (column, text, why) in [
        ("backend", "gloo", "unknown backend 'gloo'"),
        ("transport", "nvlnk", "unknown transport profile 'nvlnk'"),
        ("hierarchy", "tree", "unknown hierarchy mode 'tree'"),
        ("collective", "all_redux", "unknown collective 'all_redux'"),
        ("dtype", "int9", "unknown element type 'int9'"),
        ("placement", "IN_PLACE", "unknown placement 'IN_PLACE'"),
        ("timing", "batch", "unknown timing method 'batch'"),
        ("average", "4", "unknown average mode '4'"),
        ("iter_policy", "min_time", "unknown iteration policy 'min_time'"),
    ] {
        assert_eq!(check_column(column, text), Err(why.to_string()), "{column}");
    }
    for (column, text) in [
        ("backend", "NCCL"),
        ("hierarchy", "RS_AR_AG"),
        ("dtype", "fp32"),
        ("timing", ""),
        ("average", ""),
        ("iter_policy", ""),
        ("average", "mean"),
        ("label", "anything"),
    ] {
        assert_eq!(check_column(column, text), Ok(()), "{column} {text:?}");
    }
}
