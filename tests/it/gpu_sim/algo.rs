//! `--algo-record log` on the simulation: every row of a sweep says the
//! algorithm, protocol and channels NCCL's TUNING lines gave for its point,
//! in each release's format, with threads and under the real `mpirun`;
//! `unknown` where NCCL says nothing, and the header says why.
//!
//! The simulation's rule (tests/gpu-sim/nccl_sim.c, `tuning_line`), written
//! out here: all-reduce of 64 KiB or less runs Tree, anything else Ring;
//! LL up to 64 KiB, LL128 up to 1 MiB, Simple above; 1 channel up to
//! 64 KiB, else 2; the bytes are NCCL's count times the element size.

use super::*;

/// The simulation's choice for a row: (algo, proto, nchannels), or
/// nothing for what NCCL runs as sends and receives.
fn sim_choice(csv: &Csv, row: &[String], channels: bool) -> Option<(&'static str, &'static str, &'static str)> {
    let collective = csv.get(row, "collective");
    if !matches!(
        collective,
        "all_reduce" | "all_gather" | "reduce_scatter" | "broadcast" | "reduce"
    ) {
        return None;
    }
    // the CSV's count is NCCL's count argument (per rank for all_gather
    // and reduce_scatter); these runs are float
    let bytes = csv.num(row, "count") as u64 * 4;
    let small = bytes <= 65536;
    let algo = if collective == "all_reduce" && small {
        "tree"
    } else {
        "ring"
    };
    let proto = match bytes {
        0..=65536 => "ll",
        65537..=1048576 => "ll128",
        _ => "simple",
    };
    let nchannels = match (channels, small) {
        (false, _) => "",
        (true, true) => "1",
        (true, false) => "2",
    };
    Some((algo, proto, nchannels))
}

/// Every row as the simulation chose (`channels`: the release prints
/// them), the p2p collectives `unknown`; returns the choices seen.
fn assert_rows_say_the_choice(csv: &Csv, channels: bool) -> std::collections::BTreeSet<String> {
    assert_rows_say(csv, channels, "log")
}

/// Every row as the simulation chose, from `source`; the p2p collectives
/// `unknown`; returns the choices seen.
pub(super) fn assert_rows_say(csv: &Csv, channels: bool, source: &str) -> std::collections::BTreeSet<String> {
    let mut seen = std::collections::BTreeSet::new();
    for row in &csv.rows {
        let got = (
            csv.get(row, "algo"),
            csv.get(row, "proto"),
            csv.get(row, "nchannels"),
            csv.get(row, "algo_source"),
        );
        let busbw_algo = csv.get(row, "busbw_algo_gbps");
        match sim_choice(csv, row, channels) {
            Some((algo, proto, nch)) => {
                assert_eq!(got, (algo, proto, nch, source), "{row:?}");
                seen.insert(format!("{algo}/{proto}"));
                // Ring's factor is nccl-tests' (busbw); Tree's all-reduce 2
                let want = if algo == "ring" {
                    csv.num(row, "busbw_gbps")
                } else {
                    2.0 * csv.num(row, "algbw_gbps")
                };
                let have: f64 = busbw_algo
                    .parse()
                    .unwrap_or_else(|_| panic!("busbw_algo_gbps: {row:?}"));
                assert!(
                    (have - want).abs() <= 1e-9 * want.abs().max(1e-12),
                    "{have} != {want}: {row:?}"
                );
            }
            None => assert_eq!((got, busbw_algo), (("", "", "", "unknown"), ""), "{row:?}"),
        }
    }
    seen
}

/// The table's `algo` column says each row's choice, a change between
/// two sizes is noted under the section, and `collbench import` of the
/// table gives back the CSV's algo, proto and algo_source.
fn assert_table_says_what_the_csv_says(table: &str, csv: &Csv, tmp: &Path) {
    let all_reduce = table
        .lines()
        .find(|l| l.starts_with("# all_reduce flat") && l.contains("changes at"))
        .unwrap_or_else(|| panic!("no change noted under all_reduce:\n{table}"));
    assert!(
        all_reduce.ends_with("changes at 256.0 KiB (tree/ll -> ring/ll128), 4.0 MiB (ring/ll128 -> ring/simple)"),
        "{all_reduce}"
    );
    assert_import_gives_back(table, csv, tmp);
}

/// `collbench import` of a run's table gives back the CSV's algo, proto
/// and algo_source (the source from the header's backend note, or the pin).
pub(super) fn assert_import_gives_back(table: &str, csv: &Csv, tmp: &Path) {
    let table_path = tmp.join("table.txt");
    std::fs::write(&table_path, table).unwrap();
    let imported = tmp.join("imported.csv");
    let out = collbench(&argv![
        "import --from collbench --overwrite -o",
        path_str(&imported),
        path_str(&table_path)
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let back = Csv::read(&imported);
    let key = |c: &Csv, r: &[String]| {
        ["collective", "size_bytes", "placement", "algo", "proto", "algo_source"].map(|k| c.get(r, k).to_string())
    };
    let want: Vec<_> = csv.rows.iter().map(|r| key(csv, r)).collect();
    let got: Vec<_> = back.rows.iter().map(|r| key(&back, r)).collect();
    assert_eq!(got, want);
}

/// 2.20-2.22 (numeric codes), 2.23 (the function first), 2.24 and 2.30
/// (names and channels): the same choices, each row its own point's (a
/// line read into the next point would make it `mixed` where the
/// protocol changes between sizes).
#[test]
fn every_release_format_gives_each_row_its_own_points_choice() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    for (version, channels) in [("22003", false), ("22304", false), ("22403", true), ("23007", true)] {
        let csv_path = tmp.path().join(format!("{version}.csv"));
        let json_path = tmp.path().join(format!("{version}.json"));
        let args = argv![
            "run --backend nccl -g 2 --collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce,sendrecv,alltoall -b 1K -e 4M -f 4 -n 2 -w 1 --no-progress --algo-record log --csv",
            path_str(&csv_path),
            "--json",
            path_str(&json_path)
        ];
        let out = sim_run(&dir, 2, &[("GPUSIM_NCCL_VERSION", version)], &args);
        assert_eq!(code(&out), 0, "{version}: {}", stderr(&out));
        assert!(stdout(&out).contains("from rank 0's TUNING lines"), "{}", stdout(&out));
        let csv = Csv::read(&csv_path);
        assert_table_says_what_the_csv_says(&stdout(&out), &csv, tmp.path());
        assert_sim_rows(&csv, 2);
        let seen = assert_rows_say_the_choice(&csv, channels);
        let want = ["ring/ll", "ring/ll128", "ring/simple", "tree/ll"];
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), want, "{version}");
        let json = std::fs::read_to_string(&json_path).unwrap();
        let records: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(records["records"].as_array().unwrap().len(), csv.rows.len());
        assert_every_launch_counted(&json, "log");
    }
}

/// Every launch of a recorded point counted once: 1 warm-up, 1 check and
/// 2 timed launches.
pub(super) fn assert_every_launch_counted(json: &str, source: &str) {
    let json: serde_json::Value = serde_json::from_str(json).unwrap();
    let mut seen = 0;
    for r in json["records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["algo_source"] == source)
    {
        let calls: u64 = r["algo_choices"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["calls"].as_u64().unwrap())
            .sum();
        assert_eq!(calls, 4, "{r}");
        seen += 1;
    }
    assert!(seen > 0, "no record from {source}");
}

/// One process per rank, at 3 ranks: rank 0's own log; a CUDA graph's
/// launches are told once, at capture, and still give the choice.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_rank_0s_log_gives_every_row_the_choice() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    for graph in ["0", "2"] {
        let csv_path = tmp.path().join(format!("g{graph}.csv"));
        let args = argv![
            "run --backend nccl --collectives all_reduce,all_gather,sendrecv -b 16K -e 2M -f 8 -n 2 -w 1 --no-progress --algo-record log -G",
            graph,
            "--csv",
            path_str(&csv_path)
        ];
        let out = sim_mpirun(&dir, 3, &[("GPUSIM_NCCL_VERSION", "22703")], &args);
        assert_eq!(code(&out), 0, "-G {graph}: {}", stderr(&out));
        let csv = Csv::read(&csv_path);
        assert_sim_rows(&csv, 3);
        assert_rows_say_the_choice(&csv, true);
    }
}

/// `collbench run --backend nccl -g DEVICES --algo-record log` with
/// `extra` arguments and `env` on the simulation; its output and CSV.
fn recorded(dir: &Path, tmp: &Path, name: &str, devices: usize, env: &[(&str, &str)], extra: &[&str]) -> (Output, Csv) {
    let csv_path = tmp.join(format!("{name}.csv"));
    let g = devices.to_string();
    let mut args = argv![
        "run --backend nccl -g",
        &g,
        "--collectives all_reduce -n 2 -w 1 --no-progress --algo-record log --csv",
        path_str(&csv_path)
    ];
    args.extend_from_slice(extra);
    let out = sim_run(dir, devices, env, &args);
    assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
    (out, Csv::read(&csv_path))
}

/// Where NCCL says nothing: a release before 2.20, the user's own
/// NCCL_DEBUG_SUBSYS without TUNING, the user's own NCCL log, one rank,
/// and the rows of `--split` groups (each on its own communicator). Every
/// row says `unknown`, with empty cells, and the header says why where
/// the whole run cannot record.
#[test]
fn rows_say_unknown_where_nccl_did_not_say_and_the_header_says_why() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    type Case<'a> = (&'a str, usize, &'a [(&'a str, &'a str)], &'a [&'a str], &'a str);
    let cases: [Case; 5] = [
        (
            "old",
            2,
            &[("GPUSIM_NCCL_VERSION", "21903")],
            &[],
            "NCCL 2.19.3 prints no TUNING line",
        ),
        (
            "subsys",
            2,
            &[("NCCL_DEBUG_SUBSYS", "INIT,ENV")],
            &[],
            "NCCL_DEBUG_SUBSYS=INIT,ENV was set before the run",
        ),
        (
            "user",
            2,
            &[("NCCL_DEBUG", "WARN")],
            &[],
            "NCCL_DEBUG=WARN was set before the run",
        ),
        // one rank: NCCL copies, chooses nothing, prints nothing
        ("one", 1, &[], &[], "from rank 0's TUNING lines"),
        ("split", 4, &[], &["--split", "MOD 2"], "from rank 0's TUNING lines"),
    ];
    for (name, devices, env, extra, why) in cases {
        let mut args = vec!["-b", "8", "-e", "1M", "-f", "32"];
        args.extend_from_slice(extra);
        let (out, csv) = recorded(&dir, tmp.path(), name, devices, env, &args);
        assert!(stdout(&out).contains(why), "{name}: {}", stdout(&out));
        assert!(!csv.rows.is_empty(), "{name}");
        for row in &csv.rows {
            let cells = ["algo", "proto", "nchannels", "algo_source"].map(|c| csv.get(row, c));
            assert_eq!(cells, ["", "", "", "unknown"], "{name}: {row:?}");
        }
    }
}

/// A hierarchical all-reduce runs on several communicators: its rows are
/// `unknown`, the flat rows of the same run keep their choice. Without
/// recording (`--algo-record off`) there are no algorithm columns and no
/// note at all.
#[test]
fn hierarchical_rows_are_unknown_and_with_recording_off_nothing_is_written() {
    let Some(dir) = sim_dir() else { return };
    let tmp = tempdir();
    let args = argv!["--ranks-per-node 2 --hierarchy all -b 8 -e 256K -f 64"];
    let (_, csv) = recorded(&dir, tmp.path(), "hier", 4, &[], &args);
    for row in &csv.rows {
        let flat = csv.get(row, "hierarchy") == "flat";
        let source = csv.get(row, "algo_source");
        assert_eq!(source, if flat { "log" } else { "unknown" }, "{row:?}");
    }
    let flat: Vec<Vec<String>> = csv
        .rows
        .iter()
        .filter(|r| csv.get(r, "hierarchy") == "flat")
        .cloned()
        .collect();
    assert_rows_say_the_choice(
        &Csv {
            header: csv.header.clone(),
            rows: flat,
        },
        true,
    );

    let csv_path = tmp.path().join("off.csv");
    let args = argv![
        "run --backend nccl -g 2 --collectives all_reduce -b 8 -e 64 -n 2 -w 1 --no-progress --algo-record off --csv",
        path_str(&csv_path)
    ];
    let out = sim_run(&dir, 2, &[], &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let csv = Csv::read(&csv_path);
    assert!(!csv.header.iter().any(|h| h.starts_with("algo")), "{:?}", csv.header);
    assert!(!stdout(&out).contains("TUNING"), "{}", stdout(&out));
}
