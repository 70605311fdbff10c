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
/// (ncclAllReduce ... invalid usage) while its rows said `register` true.
/// After: it validates, and with `-R 2` each group's communicator holds its
/// windows (the trace). Under mpirun each rank is a process, so `MOD 2`
/// makes two groups; with `-g 4` the ranks of the one process share its
/// colour (nccl-tests'), one group of four.
#[cfg(feature = "mpi")]
#[test]
fn split_groups_run_on_buffers_registered_with_their_own_communicator() {
    let Some(dir) = sim_dir() else { return };
    let args = argv![
        "run --backend nccl --split MOD_2 -b 1K -e 4K -f 4 -n 2 --collectives all_reduce,all_gather --no-progress"
    ];
    let args: Vec<&str> = args.iter().map(|a| if *a == "MOD_2" { "MOD 2" } else { a }).collect();
    let detector = [("GPUSIM_NCCL_REQUIRE_REGISTERED", "1")];
    // the detector catches an unregistered run (every rank fails)
    let out = exits(1, crate::gpu_sim::sim_mpirun(&dir, 4, &detector, &args));
    assert!(
        stderr(&out).contains("ncclAllReduce failed: invalid usage"),
        "{}",
        stderr(&out)
    );
    for (register, want) in [("1", "true"), ("2", "symmetric")] {
        let mut a = args.clone();
        a.extend(["-R", register]);
        let (_tmp, trace) = temp_file("trace");
        let env = [detector[0], ("GPUSIM_NCCL_TRACE", path_str(&trace))];
        let (_, csv) = sim_rows_any(&a, |a| crate::gpu_sim::sim_mpirun(&dir, 4, &env, a));
        let groups: std::collections::BTreeSet<&str> = csv.rows.iter().map(|r| csv.get(r, "group")).collect();
        assert_eq!(groups, ["0", "1", "all"].into_iter().collect());
        assert!(csv.rows.iter().all(|r| csv.get(r, "register") == want));
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
    // -g 4: one process, one colour, one group of four
    let mut g = args.clone();
    g.extend(["-g", "4", "-R", "1"]);
    let (_, csv) = sim_rows_any(&g, |a| sim_run(&dir, 4, &detector, a));
    let groups: std::collections::BTreeSet<&str> = csv.rows.iter().map(|r| csv.get(r, "group")).collect();
    assert_eq!(groups, ["0", "all"].into_iter().collect());
    assert!(csv.rows.iter().all(|r| csv.get(r, "register") == "true"));
    // a workload's groups too
    let workload = argv![
        "workload --backend nccl -g 4 --ranks-per-node 2 --params 1M --layers 2 --hidden 128 --vocab 1000 --strategy hsdp --steps 2 -R 1"
    ];
    ok(sim_run(&dir, 4, &detector, &workload));
}

/// `collbench check`'s node and pair groups take `-R` too (issue 37, item
/// 1): under the simulation's detector (GPUSIM_NCCL_REQUIRE_REGISTERED=1)
/// a node check and a pair check on two virtual nodes of two ranks fail
/// without `-R` (operations on buffers no communicator registered) and
/// are judged with `-R 1`, the buffers registered with each group's
/// communicator as it is split; with `-R 2` where NCCL declines windows
/// (NCCL_WIN_ENABLE=0) the header says so.
#[test]
fn check_groups_run_on_buffers_registered_with_their_own_communicator() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let profile = tmp.path().join("groups.toml");
    let check = |name: &str, scope: &str| {
        format!(
            "[[check]]\nname = \"{name}\"\nscope = \"{scope}\"\ncollective = \"all_reduce\"\nsize = \"4K\"\n\
             iters = 2\nsamples = 3\nfail_below = {{ value = 1e-9, source = \"a floor any run clears\" }}\n"
        )
    };
    let text = format!(
        "name = \"groups\"\ndescription = \"node and pair groups\"\n\n{}\n{}",
        check("node-all-reduce-4k", "node"),
        check("pair-all-reduce-4k", "pair")
    );
    std::fs::write(&profile, text).unwrap();
    let detector = [("GPUSIM_NCCL_REQUIRE_REGISTERED", "1")];
    let run = |name: &str, extra: &[&str]| {
        let out_dir = tmp.path().join(name);
        let mut args = argv!["check --profile", path_str(&profile), "--out", path_str(&out_dir)];
        args.extend(["--backend", "nccl", "-g", "4", "--ranks-per-node", "2"]);
        args.extend_from_slice(extra);
        sim_run(&dir, 4, &detector, &args)
    };
    let out = exits(1, run("unregistered", &[]));
    assert!(stderr(&out).contains("invalid usage"), "{}", stderr(&out));
    let out = run("registered", &["-R", "1"]);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("# checks : 3 passed, 0 warned, 0 failed, 0 flaky, 0 not judged"),
        "two node groups and one pair: {}",
        stdout(&out)
    );
    // -R 2 where NCCL declines every window: judged unregistered, and the
    // header says so (its note is taken once the buffers are registered)
    let out_dir = tmp.path().join("nowin");
    let mut args = argv!["check --profile", path_str(&profile), "--out", path_str(&out_dir)];
    args.extend(["--backend", "nccl", "-g", "4", "--ranks-per-node", "2", "-R", "2"]);
    let out = sim_run(&dir, 4, &[("NCCL_WIN_ENABLE", "0")], &args);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.starts_with("# backend   : ")
            && l.contains("-R 2: NCCL returned no symmetric window on the world communicator")),
        "{text}"
    );
}

/// `run(ARGS --csv FILE)`, which must succeed, with every row validated
/// (`wrong` 0 out of place): its output and CSV. (`--split` rows carry
/// their group's rank count, which `sim_rows` does not expect.)
#[cfg(feature = "mpi")]
fn sim_rows_any(args: &[&str], run: impl FnOnce(&[&str]) -> std::process::Output) -> (std::process::Output, Csv) {
    let (_tmp, csv_path) = temp_file("rows.csv");
    let out = ok(run(&[args, &["--csv", path_str(&csv_path)]].concat()));
    let csv = Csv::read(&csv_path);
    assert!(!csv.rows.is_empty());
    for r in &csv.rows {
        if csv.get(r, "placement") == "out_of_place" {
            assert_eq!(csv.get(r, "wrong"), "0", "{r:?}");
        }
    }
    (out, csv)
}

/// NCCL's INFO lines of one log, without the `host:pid:tid [dev] NCCL INFO `
/// prefix, each message once.
fn messages(log: &str) -> std::collections::BTreeSet<String> {
    log.lines()
        .filter_map(|l| l.split_once(" NCCL INFO ").map(|(_, m)| m.to_string()))
        .collect()
}

/// A message with its numbers and pointers replaced, to compare with a
/// format string (`%d`, `%p`, `%lx` all read as `#`): a number starts at a
/// digit that follows no letter or digit (nor a `.` after one), runs over
/// hexadecimal digits (a `0x` included) and a `.` between digits.
fn shape(message: &str) -> String {
    let chars: Vec<char> = message.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let word = |j: usize| chars[j].is_ascii_alphanumeric();
        let after_word = i > 0 && (word(i - 1) || (i > 1 && chars[i - 1] == '.' && word(i - 2)));
        if !chars[i].is_ascii_digit() || after_word {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        i += 1;
        if chars.get(i) == Some(&'x') {
            i += 1;
        }
        while i < chars.len() {
            let dot = chars[i] == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit);
            if !(chars[i].is_ascii_hexdigit() || dot) {
                break;
            }
            i += 1;
        }
        out.push('#');
    }
    out
}

/// The simulation writes NCCL's own lines, in the format strings of the
/// release it plays (issue 37, item 3; docs/doctor-rules-research.md): the
/// version line, the init lines, the channel count, the rings and their
/// transports, and rank 0's TUNING line, each in its release's form (here
/// every form the simulation has, one release each); shapes compared with
/// NCCL's format strings (numbers as `#`).
#[test]
fn nccls_lines_follow_each_release_s_format_strings() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let args = argv!["--collectives all_reduce -b 1K -e 1K -n 1 -w 0"];
    // (release, lines that must be there, lines that must not)
    let cases: [(&str, &[&str], &[&str]); 6] = [
        (
            "21602",
            &[
                "comm # rank # nranks # cudaDev # busId # commId # - Init COMPLETE",
                "# coll channels, # p2p channels, # p2p channels per peer",
                "Channel #/# : #[#] -> #[#] via P2P/direct pointer",
                "Connected all rings",
            ],
            &["Bytes -> Algo"],
        ),
        (
            "21803",
            &[
                "comm # rank # nranks # cudaDev # nvmlDev # busId # commId # - Init COMPLETE",
                "# coll channels, # nvls channels, # p2p channels, # p2p channels per peer",
                "Channel #/# : #[#] -> #[#] via P2P/direct pointer",
            ],
            &["Bytes -> Algo", "nNodes"],
        ),
        (
            "22203",
            &[
                "ncclCommInitRank comm # rank # nranks # cudaDev # nvmlDev # busId # commId # - Init COMPLETE",
                "comm # rank # nRanks # nNodes # localRanks # localRank # MNNVL #",
                "# Bytes -> Algo # proto # time #",
                "NCCL version #+cuda12.9",
            ],
            &[],
        ),
        ("22304", &["AllReduce: # Bytes -> Algo # proto # time #"], &[]),
        (
            "22907",
            &[
                "AllReduce: # Bytes -> Algo TREE proto LL channel{Lo..Hi}={#..#}",
                "Connected all rings, use ring PXN # GDR #",
                "# coll channels, # collnet channels, # nvls channels, # p2p channels, # p2p channels per peer",
            ],
            &[],
        ),
        ("23007", &["Channel #/# : #[#] -> #[#] via P2P/direct pointer"], &[]),
    ];
    let env_base = [("NCCL_DEBUG_SUBSYS", "INIT,ENV,TUNING")];
    for (version, want, never) in cases {
        let env = [env_base[0], ("GPUSIM_NCCL_VERSION", version)];
        let (out, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), version, &env, &args);
        assert_eq!(code(&out), 0, "{version}: {}", stderr(&out));
        let shapes: std::collections::BTreeSet<String> = messages(&log).iter().map(|m| shape(m)).collect();
        for line in want {
            assert!(shapes.contains(*line), "{version}: no {line:?} in\n{log}");
        }
        for part in never {
            assert!(
                !shapes.iter().any(|s| s.contains(part)),
                "{version}: {part:?} in\n{log}"
            );
        }
    }
    // where symmetric memory is not (v2.29.7-1 src/init.cc:1478-1480)
    let env = [("GPUSIM_NCCL_VERSION", "22907"), ("NCCL_WIN_ENABLE", "0")];
    let (_, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "nowin", &env, &args);
    let line =
        "Symmetric memory is not supported. cuMemEnable 1, globalGinSupport 0, globalNicFused 0 cuMemGdrSupport 1";
    assert!(messages(&log).contains(line), "{log}");
    // up to 2.21.5 the version line is a bare printf to standard output
    let env = [("GPUSIM_NCCL_VERSION", "22105")];
    let (out, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "v22105", &env, &args);
    assert!(
        stdout(&out).lines().any(|l| l == "NCCL version 2.21.5+cuda12.9"),
        "{}",
        stdout(&out)
    );
    assert!(log.contains("NCCL INFO NCCL version 2.21.5+cuda12.9"), "{log}");
}

/// Every collbench line of stderr holds `needs` (ranks that fail alike
/// each say so: a `-g` run may print one line per rank), and there is one.
fn every_line(out: &std::process::Output, needs: &str) -> bool {
    let lines = our_lines(out);
    !lines.is_empty() && lines.iter().all(|l| l.contains(needs))
}

/// The simulation reads NCCL's own variables as the release played does
/// (issue 37, item 3): NCCL_ALGO and NCCL_PROTO with each release's syntax
/// and refusals, NCCL_NET, NCCL_RUNTIME_CONNECT, NCCL_COMM_BLOCKING. Before,
/// it read none of them: every run here passed alike.
#[test]
fn nccls_variables_decide_as_in_the_release_played() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let args = argv!["--collectives all_reduce,all_gather -b 1K -e 1K -n 1 -w 0"];
    let tuning = [("NCCL_DEBUG_SUBSYS", "INIT,ENV,TUNING")];
    // "FUNC: ALGO PROTO" of each TUNING line
    let algos = |log: &str| -> std::collections::BTreeSet<String> {
        messages(log)
            .iter()
            .filter(|m| m.contains(" Bytes -> Algo "))
            .map(|m| {
                let word = |after: &str| m.split(after).nth(1).and_then(|r| r.split(' ').next()).unwrap_or("");
                format!(
                    "{}: {} {}",
                    m.split(':').next().unwrap_or(""),
                    word("Algo "),
                    word("proto ")
                )
            })
            .collect()
    };
    // 2.24 and later: per-function lists
    let env = [
        tuning[0],
        ("NCCL_ALGO", "ring;allreduce:tree"),
        ("NCCL_PROTO", "^simple"),
    ];
    let (out, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "percoll", &env, &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        log.contains("NCCL INFO NCCL_ALGO set by environment to ring;allreduce:tree"),
        "{log}"
    );
    assert_eq!(
        algos(&log),
        ["AllGather: RING LL128", "AllReduce: TREE LL128"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        "{log}"
    );
    // an unknown name: 2.24 and later refuse the communicator (WARN, invalid usage) ...
    let env = [("NCCL_ALGO", "ring,bogus")];
    let (out, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "bogus", &env, &args);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        every_line(&out, "ncclCommInitRankConfig failed: invalid usage"),
        "{}",
        stderr(&out)
    );
    assert!(
        log.contains("graph/tuning.cc:109 NCCL WARN Unrecognized element token \"bogus\" when parsing \"ring,bogus\""),
        "{log}"
    );
    // ... 2.23 ignores it
    let env = [("NCCL_ALGO", "ring,bogus"), ("GPUSIM_NCCL_VERSION", "22304")];
    let (out, _, _) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "bogus23", &env, &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // no algorithm left for a function: the call is refused, with NCCL_ALGO named
    let env = [("NCCL_ALGO", "allreduce:^ring,tree")];
    let (out, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "none", &env, &args);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        every_line(&out, "ncclAllReduce failed: invalid usage"),
        "{}",
        stderr(&out)
    );
    assert!(log.contains("NCCL WARN No algorithm/protocol available for function AllReduce with datatype ncclFloat32. NCCL_ALGO was set to allreduce:^ring,tree."), "{log}");
    // NCCL_NET names a network the machine lacks (no HCA here)
    for (version, warn) in [
        (
            "23203",
            "plugin/net.cc:349 NCCL WARN Failed to initialize any NET plugin",
        ),
        ("22603", "plugin/net.cc:232 NCCL WARN Error: network IB not found."),
    ] {
        let env = [("NCCL_NET", "IB"), ("GPUSIM_NCCL_VERSION", version)];
        let (out, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), &format!("net{version}"), &env, &args);
        assert_eq!(code(&out), 1, "{}", stderr(&out));
        assert!(log.contains(warn), "{version}: {log}");
    }
    let env = [("NCCL_NET", "Socket")];
    assert_eq!(
        code(&crate::gpu_sim::sim_logged(&dir, tmp.path(), "socket", &env, &args).0),
        0
    );
    // NCCL_RUNTIME_CONNECT: rings at the first collective (2.22 and later's
    // default), or at init with 0
    let ring_before_init = |log: &str| {
        let ring = log.find("Connected all rings").unwrap();
        ring < log.find("Init COMPLETE").unwrap()
    };
    let (_, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "lazy", &[], &args);
    assert!(!ring_before_init(&log), "{log}");
    let (_, _, log) = crate::gpu_sim::sim_logged(&dir, tmp.path(), "eager", &[("NCCL_RUNTIME_CONNECT", "0")], &args);
    assert!(ring_before_init(&log), "{log}");
    assert!(
        log.contains("NCCL INFO NCCL_RUNTIME_CONNECT set by environment to 0."),
        "{log}"
    );
    // NCCL_COMM_BLOCKING=0 makes every communicator non-blocking from 2.17:
    // refused in one line before any communicator (before: "ncclCommInitRankConfig
    // failed: NCCL operation in progress")
    for value in ["0", "0x0"] {
        let out = exits(
            2,
            sim_run(
                &dir,
                2,
                &[("NCCL_COMM_BLOCKING", value)],
                &[&argv!["run --backend nccl -g 2 --no-progress"][..], &args].concat(),
            ),
        );
        assert!(
            one_line(&out).contains(&format!(
                "NCCL_COMM_BLOCKING={value} makes NCCL 2.32.3-sim's communicators non-blocking"
            )),
            "{}",
            stderr(&out)
        );
    }
    ok(sim_run(
        &dir,
        2,
        &[("NCCL_COMM_BLOCKING", "1")],
        &[&argv!["run --backend nccl -g 2 --no-progress"][..], &args].concat(),
    ));
}

/// The simulation runs every stream's work on a worker of its own, after
/// the call returns (issue 37, item 3), and GPUSIM_STREAM_LAG_US keeps
/// each item a while behind the host, so that a read before its
/// synchronisation sees stale bytes every time (tests/gpu-sim/misuse.c
/// plants one, and an event recorded before its work; a build of
/// collbench with the synchronisation after its device-to-host copy
/// removed fails validation here, where the synchronous simulation passed
/// it). Every collective, the hierarchical modes with `--phase-times`,
/// `-I`, `-R`, `-m`, `-G` and point-to-point validate on streams 300 µs
/// behind: the backend waits for everything it reads.
#[test]
fn every_path_validates_on_streams_that_run_behind_the_host() {
    let Some(dir) = sim_dir() else { return };
    let lag = [("GPUSIM_STREAM_LAG_US", "300")];
    let runs = [
        argv![
            "run --backend nccl -g 4 --ranks-per-node 2 --hierarchy flat,rs-ar-ag,reduce-bcast --collectives all -d float,half -b 64 -e 4K -f 8 -n 2 -w 1 --no-progress -I -R 1"
        ],
        argv!["run --backend nccl -g 3 --collectives all -d float -b 64 -e 4K -f 8 -n 2 -w 1 --no-progress -G 2 -m 2"],
        argv![
            "run --backend nccl -g 4 --ranks-per-node 2 --hierarchy rs-ar-ag --collectives all_reduce -b 64 -e 4K -f 8 -n 2 -w 1 --no-progress --phase-times"
        ],
    ];
    for args in runs {
        let n: usize = args[4].parse().unwrap();
        sim_rows(n, &args, |a| sim_run(&dir, 4, &lag, a));
    }
}

/// `mpirun -np N sh -c 'CUDA_VISIBLE_DEVICES=<f(local rank)> collbench ARGS'`
/// on the simulation's GPUs: each process sees the devices its shell line
/// gives it (`visible` is shell arithmetic on $OMPI_COMM_WORLD_LOCAL_RANK).
#[cfg(feature = "mpi")]
fn mpirun_visible(
    dir: &std::path::Path,
    np: usize,
    visible: &str,
    env: &[(&str, &str)],
    args: &[&str],
) -> std::process::Output {
    let mut cmd = std::process::Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", &np.to_string(), "sh", "-c"])
        .arg(format!("CUDA_VISIBLE_DEVICES={visible} exec \"$0\" \"$@\""))
        .arg(BIN)
        .args(args)
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("NCCL_HOME");
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    for (k, v) in crate::gpu_sim::sim_env(dir, 4) {
        cmd.env(k, v);
    }
    cmd.envs(env.iter().copied());
    output_of(cmd)
}

/// The `#  Rank R ... gpu NAME` lines of a run's header: each rank's GPU.
#[cfg(feature = "mpi")]
fn rank_gpus(out: &std::process::Output) -> Vec<String> {
    stdout(out)
        .lines()
        .filter(|l| l.starts_with("#  Rank"))
        .filter_map(|l| {
            l.split(" gpu ")
                .nth(1)
                .map(|g| g.split(" (").next().unwrap_or(g).to_string())
        })
        .collect()
}

/// One GPU per task (issue 37, item 4): each rank's process sees one GPU
/// (CUDA_VISIBLE_DEVICES set per rank, as Slurm's `--gpus-per-task=1`
/// does), its local rank maps to it. Before: "2 ranks share host ... but
/// only 1 GPU is visible", exit 1. Two ranks given one GPU are refused in
/// one line; NCCL_TESTS_DEVICE picks the first device of a process, as in
/// nccl-tests.
#[cfg(feature = "mpi")]
#[test]
fn one_gpu_per_task_and_nccl_tests_device_choose_each_rank_s_gpu() {
    let Some(dir) = sim_dir() else { return };
    let args = argv!["run --backend nccl -b 1K -e 4K -f 4 -n 2 --collectives all_reduce,sendrecv --no-progress"];
    // ranks 0 and 1 see physical GPUs 2 and 3 only
    let out = ok(mpirun_visible(
        &dir,
        2,
        "$((OMPI_COMM_WORLD_LOCAL_RANK + 2))",
        &[],
        &args,
    ));
    assert_eq!(
        rank_gpus(&out),
        ["GPUSIM simulated GPU 2", "GPUSIM simulated GPU 3"],
        "{}",
        stdout(&out)
    );
    // both see GPU 1: one line, before NCCL
    let out = exits(1, mpirun_visible(&dir, 2, "1", &[], &args));
    let line = one_line(&out);
    assert!(
        line.contains("ranks 0 and 1 on host") && line.contains("would share one GPU"),
        "{line}"
    );
    // every GPU visible, NCCL_TESTS_DEVICE=1: ranks of one process take 1 and 2
    let mut g = args.clone();
    g.extend(["-g", "2"]);
    let out = ok(sim_run(&dir, 4, &[("NCCL_TESTS_DEVICE", "1")], &g));
    assert_eq!(
        rank_gpus(&out),
        ["GPUSIM simulated GPU 1", "GPUSIM simulated GPU 2"],
        "{}",
        stdout(&out)
    );
    let out = exits(1, sim_run(&dir, 4, &[("NCCL_TESTS_DEVICE", "3")], &g));
    assert!(
        one_line(&out).contains("NCCL_TESTS_DEVICE=3: rank 1 of this process would take device 4"),
        "{}",
        stderr(&out)
    );
}

/// alltoallv with a traffic matrix reserves `-e` in each buffer, as
/// nccl-tests' AllocateBuffs does, and shifts each operation through it by
/// the busiest rank's bytes (startColl: `span * (iter % (maxbytes /
/// span))`; issue 37, item 2). A 2-rank matrix moves at most 992 bytes
/// (1000 and 100 rounded down to 16); at `-e 16K` that is 16 steps. Before:
/// the buffers were sized from the matrix, one step, every operation at 0.
#[test]
fn alltoallv_of_a_matrix_shifts_through_buffers_of_the_requested_size() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let matrix = tmp.path().join("m.txt");
    std::fs::write(&matrix, "0 1000\n100 0\n").unwrap();
    let trace = tmp.path().join("t.trace");
    let env = [("GPUSIM_NCCL_TRACE", path_str(&trace))];
    let args = argv![
        "run --backend nccl -g 2 --collectives alltoallv -b 16K -e 16K -w 3 -n 20 -c 1 --no-progress --alltoallv-matrix",
        path_str(&matrix)
    ];
    ok(sim_run(&dir, 2, &env, &args));
    let text = std::fs::read_to_string(&trace).unwrap();
    // rank 0's sends to rank 1, out of place then in place
    let offsets: Vec<i64> = text
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() == 6 && f[0] == "0" && f[1] == "ncclSend" && f[5] == "1")
        .map(|f| f[2].parse().unwrap())
        .collect();
    let (w, n, span, steps) = (3i64, 20i64, 992i64, 16384 / 992);
    let at = |i: i64| span * (i % steps);
    let one: Vec<i64> = (0..w).chain([0]).chain(w..w + n).map(at).collect();
    // (in place has no check launch: nccl-tests checks no in-place alltoallv)
    assert_eq!(offsets.len(), 2 * one.len() - 1, "{text}");
    assert_eq!(offsets[..one.len()], one[..], "{text}");
}

/// `collbench links` frees each bisection round's communicators before the
/// next round splits again (issue 37, item 5). A host that only
/// collectives see as slow (GPUSIM_DELAY_COLL_RANK) makes the finder
/// bisect the hosts in rounds of all-reduces, each on communicators split
/// for it; the simulation's trace records every communicator made and
/// freed. Before: none was freed until the end, so live ones grew by 8 a
/// round (24 after three); after: never more than one per rank.
#[test]
fn links_frees_each_bisection_round_s_communicators() {
    let Some(dir) = sim_dir() else { return };
    let (_tmp, trace) = temp_file("trace");
    let env = [
        ("GPUSIM_NCCL_TRACE", path_str(&trace)),
        ("GPUSIM_DELAY_COLL_RANK", "5:30000"),
    ];
    let args = argv!["links --backend nccl -g 8 --ranks-per-node 1 --find --size 1M -n 3 --samples 6"];
    let out = ok(sim_run(&dir, 8, &env, &args));
    assert!(
        stdout(&out).contains("SUSPECT collective: host vm-n5"),
        "{}",
        stdout(&out)
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    // sub-communicators (fewer than 8 ranks) made and freed, in order
    let (mut live, mut most, mut made) = (0i64, 0i64, 0);
    for f in text
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|f| f.len() == 3)
    {
        if f[2].parse::<usize>().unwrap() >= 8 {
            continue;
        }
        match f[1] {
            "ncclCommSplit" => {
                live += 1;
                made += 1;
            }
            "ncclCommDestroy" | "ncclCommAbort" => live -= 1,
            _ => {}
        }
        most = most.max(live);
    }
    assert!(
        made >= 16,
        "{made} sub-communicators: the bisection ran fewer rounds than this test needs"
    );
    assert!(most <= 8, "{most} sub-communicators alive at once:\n{text}");
}

/// The memory fit keeps room for the communicators NCCL makes after it
/// (issue 37, item 5). Where NCCL connects every channel as a communicator
/// is made (collbench's NCCL_RUNTIME_CONNECT=0 here), the simulated NCCL
/// takes NCCL_BUFFSIZE per connection (4 per communicator: 1 GiB at 256
/// MiB); the world's took it before the fit, and the hierarchical modes'
/// two will at the first hierarchical point. Before: the fit left 1 GiB
/// (the headroom) and the second of them ran out of memory mid-run (exit
/// 1). After: the fit counts them and refuses the run up front (exit 2);
/// with room for them the run goes on and the header says what was kept.
#[test]
fn the_memory_fit_keeps_room_for_the_communicators_nccl_connects_later() {
    let args = argv![
        "run --backend nccl -g 4 --ranks-per-node 2 --hierarchy flat,rs-ar-ag --collectives all_reduce -b 1M -e 16M -f 4 -n 1 -w 1 --no-progress"
    ];
    assert_fit_keeps(4, &args, 2, "for each of the 2 communicators made later");
}

/// `args` on `nranks` simulated GPUs at 1 GiB a communicator: refused (exit
/// 2) with memory for the world's, the 1 GiB headroom and 64 MiB of
/// buffers; with `later` GiB more it runs, and the header says `kept`.
fn assert_fit_keeps(nranks: usize, args: &[&str], later: u64, kept: &str) {
    let Some(dir) = sim_dir() else { return };
    let gib = 1u64 << 30;
    let tight = (2 * gib + (64 << 20)).to_string();
    let env = [("GPUSIM_MEM_BYTES", tight.as_str()), ("NCCL_BUFFSIZE", "268435456")];
    let out = exits(2, sim_run(&dir, nranks, &env, args));
    assert!(
        one_line(&out).contains("of GPU memory per rank, more than the"),
        "{}",
        stderr(&out)
    );
    let roomy = ((2 + later) * gib + (64 << 20)).to_string();
    let env = [("GPUSIM_MEM_BYTES", roomy.as_str()), ("NCCL_BUFFSIZE", "268435456")];
    let (out, _) = sim_rows(nranks, args, |a| sim_run(&dir, nranks, &env, a));
    assert!(
        stdout(&out).contains(&format!("the memory fit keeps 1.0 GiB {kept}")),
        "{}",
        stdout(&out)
    );
}

/// A pinned sweep (`--algo`) runs on a communicator of every rank made
/// under its pin, after the fit: counted as the hierarchical modes' are.
/// Before: the fit counted the headroom only (exit 0 below where 2 is
/// asserted), and the pinned communicator's connections took all of it.
#[test]
fn the_memory_fit_keeps_room_for_a_pinned_sweeps_communicator() {
    let args =
        argv!["run --backend nccl -g 2 --algo ring --collectives all_reduce -b 1M -e 16M -f 4 -n 1 -w 1 --no-progress"];
    assert_fit_keeps(2, &args, 1, "for the communicator made later");
}
