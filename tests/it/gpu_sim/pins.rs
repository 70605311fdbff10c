//! `--algo`/`--proto` on the simulation: one sweep per pin, each on a
//! communicator made with NCCL_ALGO/NCCL_PROTO in the release's syntax
//! (a global list before 2.24.3, `Function:list` from it), its rows
//! saying the pin and, where the TUNING lines recorded it, that NCCL ran
//! it; what a release would ignore or fail is refused before any point.
//!
//! The simulation keeps what a communicator was made with (NCCL reads
//! both variables when a communicator is made, not when it runs), so a
//! pin that did not reach the communicator would show as the size rule's
//! choice (algo.rs): Tree only up to 64 KiB, LL/LL128/Simple by size.

use super::algo::assert_import_gives_back;
use super::*;

/// `run --backend nccl` of `args` on the simulation at `version`, with a
/// CSV; its output and rows (exit 0 asserted).
fn pinned(dir: &Path, tmp: &Path, name: &str, version: &str, args: &str) -> (Output, Csv) {
    let csv_path = tmp.join(format!("{name}.csv"));
    let mut all = argv![
        "run --backend nccl -b 1K -e 4M -f 64 -n 2 -w 1 --no-progress --csv",
        path_str(&csv_path)
    ];
    all.extend(args.split_whitespace());
    let out = sim_run(dir, 2, &[("GPUSIM_NCCL_VERSION", version)], &all);
    assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
    (out, Csv::read(&csv_path))
}

/// (collective, algo, proto, algo_source, algo_pin) of every row.
fn cells(csv: &Csv) -> Vec<[String; 5]> {
    csv.rows
        .iter()
        .map(|r| ["collective", "algo", "proto", "algo_source", "algo_pin"].map(|k| csv.get(r, k).to_string()))
        .collect()
}

/// `--algo ring,tree` with the TUNING lines: a Ring sweep of the five
/// collectives NCCL tunes, then a Tree sweep of all_reduce (the only one
/// with a tree), every row recorded as pinned at every size (the size rule
/// would give Tree at 1 KiB and Ring at 4 MiB), Tree's bus bandwidth with
/// its factor; at 2.20 and 2.23 (a global NCCL_ALGO, numeric TUNING
/// lines), 2.24 and 2.30 (per function; 2.27 under mpirun below).
#[test]
fn each_pin_is_a_sweep_of_what_it_runs_and_nccl_ran_the_pin() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    for (version, algo_var) in [
        ("22003", "NCCL_ALGO=Tree"),
        ("22304", "NCCL_ALGO=Tree"),
        ("22403", "NCCL_ALGO=AllReduce:Tree"),
        ("23007", "NCCL_ALGO=AllReduce:Tree"),
    ] {
        let (out, csv) = pinned(
            &dir,
            tmp.path(),
            version,
            version,
            "-g 2 --algo ring,tree --algo-record log --collectives all_reduce,all_gather,broadcast,sendrecv",
        );
        let text = stdout(&out);
        assert!(
            text.contains(&format!("pinned sweep tree: all_reduce with {algo_var}")),
            "{text}"
        );
        assert!(
            text.contains("pinned sweep ring: all_reduce, all_gather, broadcast with NCCL_ALGO="),
            "{text}"
        );
        assert!(text.contains("# all_reduce (hierarchy flat) pinned tree\n"), "{text}");
        let rows = cells(&csv);
        // 3 sizes (1 KiB, 64 KiB, 4 MiB), 2 placements: 3 collectives
        // pinned to ring, 1 to tree
        assert_eq!(rows.len(), 24, "{version}: {rows:?}");
        let (ring, tree) = rows.split_at(18);
        for (i, c) in ["all_reduce", "all_gather", "broadcast"].iter().enumerate() {
            for row in &ring[6 * i..6 * i + 6] {
                assert_eq!(row[0], *c, "{version}: sweep order: {rows:?}");
                assert_eq!(
                    &row[1..],
                    ["ring", row[2].as_str(), "log", "ring"],
                    "{version}: {row:?}"
                );
            }
        }
        for row in tree {
            assert_eq!(
                row,
                &["all_reduce", "tree", row[2].as_str(), "log", "tree"].map(String::from),
                "{version}"
            );
        }
        for r in csv.rows.iter().filter(|r| csv.get(r, "algo_pin") == "tree") {
            let (algbw, have) = (csv.num(r, "algbw_gbps"), csv.num(r, "busbw_algo_gbps"));
            assert!((have - 2.0 * algbw).abs() <= 1e-9 * have, "{r:?}");
        }
    }
}

/// With `--algo-record off` the rows say the pin as `pinned`, by default
/// (the profiler plugin) what NCCL ran; `--proto`
/// alone pins the protocol of every collective NCCL tunes, and with
/// `--algo` each pair is a sweep; under the real `mpirun` each process
/// sets its own variables.
#[test]
fn unrecorded_rows_say_the_pin_and_protocols_pin_alone_or_in_pairs() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let (out, csv) = pinned(
        &dir,
        tmp.path(),
        "pairs",
        "23007",
        "-g 2 --algo tree --proto ll,simple --algo-record off --collectives all_reduce",
    );
    let rows = cells(&csv);
    assert_eq!(rows.len(), 12);
    for (i, proto) in ["ll", "simple"].iter().enumerate() {
        for row in &rows[6 * i..6 * i + 6] {
            let pin = format!("tree/{proto}");
            assert_eq!(
                row,
                &["all_reduce", "tree", proto, "pinned", pin.as_str()].map(String::from)
            );
        }
    }
    // the table's cells do not say the source; import reads it back
    assert_import_gives_back(&stdout(&out), &csv, tmp.path());
    // by default the plugin records what ran, on each pinned communicator
    let (out, csv) = pinned(
        &dir,
        tmp.path(),
        "plugin",
        "23007",
        "-g 2 --algo tree --collectives all_reduce",
    );
    for row in cells(&csv) {
        assert_eq!(
            row,
            ["all_reduce", "tree", row[2].as_str(), "plugin", "tree"].map(String::from)
        );
    }
    assert_import_gives_back(&stdout(&out), &csv, tmp.path());
    let (out, csv) = pinned(
        &dir,
        tmp.path(),
        "proto",
        "23007",
        "-g 2 --proto ll128 --algo-record log --collectives all_reduce,reduce",
    );
    for row in cells(&csv) {
        // NCCL's own algorithm (the size rule), the pinned protocol
        assert_eq!(
            (row[2].as_str(), row[3].as_str(), row[4].as_str()),
            ("ll128", "log", "ll128"),
            "{row:?}"
        );
    }
    assert_import_gives_back(&stdout(&out), &csv, tmp.path());
}

/// One process per rank at 3 ranks: each process sets its own variables.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_every_process_pins_its_own_communicator() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let csv_path = tmp.path().join("mpirun.csv");
    let args = argv![
        "run --backend nccl --collectives all_reduce,reduce_scatter -b 1K -e 4M -f 64 -n 2 -w 1 --no-progress --algo tree,ring --algo-record log --csv",
        path_str(&csv_path)
    ];
    let out = sim_mpirun(&dir, 3, &[("GPUSIM_NCCL_VERSION", "22703")], &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let csv = Csv::read(&csv_path);
    let pins: Vec<String> = cells(&csv)
        .iter()
        .map(|r| format!("{}:{}:{}", r[0], r[1], r[4]))
        .collect();
    let want: Vec<String> = ["all_reduce:tree:tree"; 6]
        .into_iter()
        .chain(["all_reduce:ring:ring"; 6])
        .chain(["reduce_scatter:ring:ring"; 6])
        .map(String::from)
        .collect();
    assert_eq!(pins, want);
    assert_sim_rows(&csv, 3);
}

/// Refused before any point, one line, exit 2: a pin of collectives the
/// algorithm does not run, a name the release would ignore, a protocol the
/// algorithm has not, NCCL_ALGO already set, another backend, a
/// hierarchical mode; no CSV is left.
#[test]
fn what_nccl_would_ignore_or_refuse_is_refused_first() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    type Case<'a> = (&'a str, &'a [(&'a str, &'a str)], &'a str, &'a str);
    let cases: [Case; 6] = [
        (
            "no-tree",
            &[],
            "--algo tree --collectives all_gather",
            "--algo tree: NCCL has no Tree for all_gather",
        ),
        (
            "old-pat",
            &[("GPUSIM_NCCL_VERSION", "22203")],
            "--algo pat",
            "--algo pat: NCCL 2.22.3 does not know PAT (NCCL 2.23.4 and later do) and would ignore the pin",
        ),
        (
            "nvls-ll",
            &[],
            "--algo nvls --proto ll",
            "NCCL runs NVLS with the Simple protocol only",
        ),
        (
            "env",
            &[("NCCL_PROTO", "LL")],
            "--algo ring --proto simple",
            "NCCL_PROTO is set in the environment (to 'LL') and would pin every communicator",
        ),
        (
            "mpi",
            &[],
            "--backend mpi --algo ring",
            "the mpi backend has none (use --backend nccl)",
        ),
        (
            "hierarchy",
            &[],
            "--algo ring --hierarchy flat,rs-ar-ag --ranks-per-node 1",
            "a pinned sweep runs flat collectives on one communicator",
        ),
    ];
    for (name, env, args, want) in cases {
        let csv_path = tmp.path().join(format!("{name}.csv"));
        let mut all = argv!["run -g 2 -b 1K -e 1K --no-progress --csv", path_str(&csv_path)];
        all.extend(args.split_whitespace());
        let out = sim_run(&dir, 2, env, &all);
        assert_eq!(code(&out), 2, "{name}: {}", stderr(&out));
        let ours = our_lines(&out);
        assert_eq!(ours.len(), 1, "{name}: {}", stderr(&out));
        assert!(ours[0].contains(want), "{name}: {}", ours[0]);
        assert!(!csv_path.exists(), "{name}: a refused run left its CSV");
    }
}
