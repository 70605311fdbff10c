//! What the host GPU simulation decides as NCCL does (issue 37): symmetric
//! windows NCCL declines, registration on every communicator a row runs
//! on, NCCL's own variables and INFO lines per release, per-process
//! visible devices, asynchronous streams. The real binary on the
//! simulation (tests/gpu-sim, `$GPUSIM_DIR`); skipped without it, as
//! `gpu_sim`.
#![cfg(feature = "nccl")]

use crate::common::*;
use crate::gpu_sim::{one_line, sim_dir, sim_rows, sim_run, traced_windows};

/// The `register` values of a CSV's rows, by (hierarchy, collective).
fn registers(csv: &Csv) -> std::collections::BTreeSet<(String, String)> {
    csv.rows
        .iter()
        .map(|r| (csv.get(r, "hierarchy").to_string(), csv.get(r, "register").to_string()))
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> std::collections::BTreeSet<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

/// `-R 2` where NCCL returns success and no window (issue 37, item 1):
/// across two simulated nodes on 2.29 and later, with NCCL_WIN_ENABLE=0
/// on 2.29 and later, with NCCL_LOCAL_REGISTER=0 on 2.27. Before: every
/// rank exited 1 with "ncclCommWindowRegister failed: returned no window".
/// After: the run validates, the header names each communicator without a
/// window and why, the rows on it say `register` false, and no window is
/// registered or released there (the trace); communicators that got
/// windows keep them (the intra-node ones), and the releases whose rule
/// gives a window give one.
#[test]
fn symmetric_windows_nccl_declines_are_kept_and_said_per_communicator() {
    let Some(dir) = sim_dir() else { return };
    let args = argv![
        "run --backend nccl -g 4 --ranks-per-node 2 --hierarchy flat,rs-ar-ag --collectives all_reduce -d float -b 1K -e 4K -f 4 -n 2 -R 2 --no-progress"
    ];
    // two simulated nodes of two ranks, the release the headers are (2.29+)
    let (_tmp, trace) = temp_file("trace");
    let env = [("GPUSIM_NODE_RANKS", "2"), ("GPUSIM_NCCL_TRACE", path_str(&trace))];
    let (out, csv) = sim_rows(4, &args, |a| sim_run(&dir, 4, &env, a));
    let text = stdout(&out);
    // the header names the communicators made before the first point (the
    // hierarchical modes' are made at their first point: their rows say)
    assert!(
        text.contains("-R 2: NCCL returned no symmetric window on the world communicator (")
            && text.contains("more than one NVLink domain without GIN"),
        "{text}"
    );
    assert_eq!(registers(&csv), pairs(&[("flat", "false"), ("rs-ar-ag", "false")]));
    // windows only on the intra-node communicators: two per rank
    let (registered, released) = traced_windows(&std::fs::read_to_string(&trace).unwrap());
    assert_eq!(registered, released);
    assert_eq!(registered.len(), 4 * 2, "{registered:?}");
    assert!(registered.iter().all(|w| w.0 == "0" || w.0 == "1"), "{registered:?}");

    // 2.28.9 has no node rule: windows everywhere
    let env = [("GPUSIM_NODE_RANKS", "2"), ("GPUSIM_NCCL_VERSION", "22809")];
    let (out, csv) = sim_rows(4, &args, |a| sim_run(&dir, 4, &env, a));
    assert!(!stdout(&out).contains("no symmetric window"), "{}", stdout(&out));
    assert_eq!(
        registers(&csv),
        pairs(&[("flat", "symmetric"), ("rs-ar-ag", "symmetric")])
    );

    // NCCL_WIN_ENABLE=0 on one node: 2.29.7 declines every window, 2.27.7
    // (whose rule is local registration and cuMem) does not
    let flat =
        argv!["run --backend nccl -g 4 --collectives all_reduce -d float -b 1K -e 4K -f 4 -n 2 -R 2 --no-progress"];
    for (version, var, want) in [
        ("22907", ("NCCL_WIN_ENABLE", "0"), "false"),
        ("22707", ("NCCL_WIN_ENABLE", "0"), "symmetric"),
        ("22707", ("NCCL_LOCAL_REGISTER", "0"), "false"),
    ] {
        let env = [("GPUSIM_NCCL_VERSION", version), var];
        let (out, csv) = sim_rows(4, &flat, |a| sim_run(&dir, 4, &env, a));
        assert_eq!(registers(&csv), pairs(&[("flat", want)]), "{version} {var:?}");
        let text = stdout(&out);
        if want == "false" {
            assert!(text.contains(&format!("here {}={}", var.0, var.1)), "{text}");
        }
    }
}

/// `-R 1` and `-R 2` on `--split` groups (issue 37, item 1): the buffers
/// are registered on the communicator each row runs on. The simulation's
/// detector (GPUSIM_NCCL_REQUIRE_REGISTERED=1) refuses any operation on
/// buffers not registered with its communicator. Before: the groups'
/// communicators got nothing, so the run failed under the detector
/// (ncclAllReduce ... not registered with communicator) while its rows
/// said `register` true. After: it validates, and with `-R 2` each
/// group's communicator holds its windows (the trace: ranks 0 and 1 of
/// each two-rank group).
#[test]
fn split_groups_run_on_buffers_registered_with_their_own_communicator() {
    let Some(dir) = sim_dir() else { return };
    let args = argv![
        "run --backend nccl -g 4 --split MOD_2 -b 1K -e 4K -f 4 -n 2 --collectives all_reduce,all_gather --no-progress"
    ];
    let args: Vec<&str> = args.iter().map(|a| if *a == "MOD_2" { "MOD 2" } else { a }).collect();
    let detector = [("GPUSIM_NCCL_REQUIRE_REGISTERED", "1")];
    // the detector catches an unregistered run
    let out = exits(1, sim_run(&dir, 4, &detector, &args));
    assert!(one_line(&out).contains("ncclInvalidUsage") || one_line(&out).contains("ncclResult_t 5"));
    for (register, want) in [("1", "true"), ("2", "symmetric")] {
        let mut a = args.clone();
        a.extend(["-R", register]);
        let (_tmp, csv_path) = temp_file("split.csv");
        let (_t, trace) = temp_file("trace");
        let env = [detector[0], ("GPUSIM_NCCL_TRACE", path_str(&trace))];
        ok(sim_run(
            &dir,
            4,
            &env,
            &[a, vec!["--csv", path_str(&csv_path)]].concat(),
        ));
        let csv = Csv::read(&csv_path);
        assert!(!csv.rows.is_empty());
        for r in &csv.rows {
            assert_eq!(csv.get(r, "register"), want, "{r:?}");
            assert_eq!(csv.get(r, "wrong"), "0", "{r:?}");
        }
        if register == "2" {
            // the world's windows (ranks 0..3: two each) and each group's
            // (its ranks 0 and 1: world ranks 0 and 2, 1 and 3): ranks 0
            // and 1 of the trace hold two more per group
            let (registered, _) = traced_windows(&std::fs::read_to_string(&trace).unwrap());
            for rank in 0..4 {
                let n = registered.iter().filter(|w| w.0 == rank.to_string()).count();
                assert_eq!(n, if rank < 2 { 2 + 2 * 2 } else { 2 }, "rank {rank}: {registered:?}");
            }
        }
    }
    // a workload's groups too
    let workload = argv![
        "workload --backend nccl -g 4 --ranks-per-node 2 --params 1M --layers 2 --hidden 128 --vocab 1000 --strategy hsdp --steps 2 -R 1"
    ];
    ok(sim_run(&dir, 4, &detector, &workload));
}
