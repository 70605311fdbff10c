//! collbench's profiler plugin on the simulation (docs/algorithms.md):
//! the default `--algo-record auto` records every row from the plugin
//! where the release has a profiler interface (2.23 on), from rank 0's
//! TUNING lines before (2.20 to 2.22); the plugin and the lines agree on
//! the same sweep; the user's own NCCL_PROFILER_PLUGIN, and a plugin that
//! cannot load, give the TUNING lines, and the header says why.
//!
//! The simulation loads the plugin as each release does (its lookup order
//! and descriptors, tests/gpu-sim/profiler.c) and hands it the choice of
//! the rule the TUNING lines print (`algo::assert_rows_say`).

use super::algo::{assert_every_launch_counted, assert_rows_say};
use super::*;

/// The plugin, beside the binary under test (the workspace's build).
fn plugin() -> PathBuf {
    let path = Path::new(BIN).with_file_name("libcollbench_profiler.so");
    assert!(
        path.is_file(),
        "no {} beside the binary: build the workspace (cargo build), as scripts/test.sh does",
        path.display()
    );
    path
}

/// A default sweep (no `--algo-record`) of every collective NCCL tunes
/// and two it runs as sends and receives, at `version`, with `env`: its
/// output, CSV and JSON.
fn default_sweep(dir: &Path, tmp: &Path, name: &str, env: &[(&str, &str)], extra: &[&str]) -> (Output, Csv, String) {
    let csv_path = tmp.join(format!("{name}.csv"));
    let json_path = tmp.join(format!("{name}.json"));
    let mut args = argv![
        "run --backend nccl -g 2 --collectives all_reduce,all_gather,reduce_scatter,broadcast,reduce,sendrecv,alltoall -b 1K -e 4M -f 4 -n 2 -w 1 --no-progress --csv",
        path_str(&csv_path),
        "--json",
        path_str(&json_path)
    ];
    args.extend_from_slice(extra);
    let out = sim_run(dir, 2, env, &args);
    assert_eq!(code(&out), 0, "{name}: {}", stderr(&out));
    let json = std::fs::read_to_string(&json_path).unwrap();
    (out, Csv::read(&csv_path), json)
}

/// The `# backend` line of a table.
fn backend_line(out: &Output) -> String {
    let text = stdout(out);
    text.lines()
        .find(|l| l.starts_with("# backend"))
        .unwrap_or_else(|| panic!("no backend line:\n{text}"))
        .to_string()
}

/// 2.20 (the TUNING lines: no profiler interface), 2.23 (v1's numeric
/// codes), 2.24 (v2), 2.27 (v4, the communicator at init) and 2.30 (v6):
/// every row has its algorithm, protocol and source without asking, the
/// plugin's rows their channels too, and the header says which and why.
#[test]
fn a_default_sweep_records_every_row_from_the_plugin_where_the_release_has_one() {
    let Some(dir) = sim_dir() else { return };
    let plugin = plugin();
    let tmp = tempdir();
    for (version, source, channels, said) in [
        ("22003", "log", false, "NCCL 2.20.3 has no profiler plugin interface"),
        ("22304", "plugin", true, "from collbench's profiler plugin"),
        (
            "22403",
            "plugin",
            true,
            "NCCL: \"PROFILER/Plugin: loaded ncclProfiler_v2.\"",
        ),
        ("22703", "plugin", true, "NCCL: \"PROFILER/Plugin: loaded collbench\""),
        (
            "23007",
            "plugin",
            true,
            "NCCL: \"PROFILER/Plugin: Loaded collbench (v6)\"",
        ),
    ] {
        let (out, csv, json) = default_sweep(&dir, tmp.path(), version, &[("GPUSIM_NCCL_VERSION", version)], &[]);
        let header = backend_line(&out);
        assert!(header.contains(said), "{version}: {header}");
        if source == "plugin" {
            assert!(header.contains(path_str(&plugin)), "{version}: {header}");
        } else {
            assert!(header.contains("from rank 0's TUNING lines"), "{version}: {header}");
        }
        assert_sim_rows(&csv, 2);
        let seen = assert_rows_say(&csv, channels, source);
        let want = ["ring/ll", "ring/ll128", "ring/simple", "tree/ll"];
        assert_eq!(seen.into_iter().collect::<Vec<_>>(), want, "{version}");
        assert_every_launch_counted(&json, source);
    }
}

/// The plugin and the TUNING lines give the same choices on the same
/// sweep (2.27, where both say the channels): run once with each, compare
/// every row's algorithm, protocol and channels.
#[test]
fn the_tuning_lines_give_the_plugins_choices() {
    let Some(dir) = sim_dir() else { return };
    plugin();
    let tmp = tempdir();
    let env = [("GPUSIM_NCCL_VERSION", "22703")];
    let (_, by_plugin, _) = default_sweep(&dir, tmp.path(), "plugin", &env, &["--algo-record", "plugin"]);
    let (_, by_log, _) = default_sweep(&dir, tmp.path(), "log", &env, &["--algo-record", "log"]);
    let choices = |csv: &Csv, source: &str| -> Vec<[String; 6]> {
        csv.rows
            .iter()
            .map(|r| {
                let s = csv.get(r, "algo_source");
                assert!(s == source || s == "unknown", "{r:?}");
                ["collective", "size_bytes", "placement", "algo", "proto", "nchannels"]
                    .map(|k| csv.get(r, k).to_string())
            })
            .collect()
    };
    let (p, l) = (choices(&by_plugin, "plugin"), choices(&by_log, "log"));
    assert_eq!(p.len(), by_plugin.rows.len());
    assert!(p.iter().filter(|c| !c[3].is_empty()).count() >= 20, "{p:?}");
    assert_eq!(p, l);
}

/// The user's own plugin (NCCL Inspector, CoMMA: NCCL loads one) and a
/// plugin collbench cannot load give the TUNING lines, and the header
/// says why and how to get the plugin; `--algo-record plugin` there
/// records nothing and says so.
#[test]
fn the_users_own_plugin_or_one_that_cannot_load_gives_the_tuning_lines() {
    let Some(dir) = sim_dir() else { return };
    plugin();
    let tmp = tempdir();
    let broken = tmp.path().join("libbroken.so");
    std::fs::write(&broken, "not a library").unwrap();
    let inspector = tmp.path().join("libnccl-profiler-inspector.so");
    std::fs::write(&inspector, "").unwrap();
    let v = ("GPUSIM_NCCL_VERSION", "23007");
    let cases = [
        (
            "user",
            [v, ("NCCL_PROFILER_PLUGIN", path_str(&inspector))],
            format!(
                "NCCL_PROFILER_PLUGIN={} was set before the run: NCCL loads one profiler plugin",
                path_str(&inspector)
            ),
        ),
        (
            "broken",
            [v, ("COLLBENCH_PROFILER_PLUGIN", path_str(&broken))],
            format!("cannot load the profiler plugin {}", path_str(&broken)),
        ),
    ];
    for (name, env, why) in &cases {
        let (out, csv, _) = default_sweep(&dir, tmp.path(), name, env, &[]);
        let header = backend_line(&out);
        assert!(header.contains(why.as_str()), "{name}: {header}");
        assert!(header.contains("from rank 0's TUNING lines"), "{name}: {header}");
        assert_rows_say(&csv, true, "log");
        // asked for the plugin alone: nothing recorded, said so
        let (out, csv, _) = default_sweep(
            &dir,
            tmp.path(),
            &format!("{name}-only"),
            env,
            &["--algo-record", "plugin"],
        );
        let header = backend_line(&out);
        assert!(
            header.contains(why.as_str()) && header.contains("algorithm not recorded"),
            "{name}: {header}"
        );
        assert!(csv.rows.iter().all(|r| csv.get(r, "algo_source") == "unknown"));
    }
}

/// Under the real `mpirun`, one process per rank at 3 ranks: each rank's
/// own plugin records its rows.
#[cfg(feature = "mpi")]
#[test]
fn under_mpirun_every_rank_records_with_its_own_plugin() {
    let Some(dir) = sim_dir() else { return };
    plugin();
    let tmp = tempdir();
    let csv_path = tmp.path().join("mpi.csv");
    let args = argv![
        "run --backend nccl --collectives all_reduce,all_gather,sendrecv -b 16K -e 2M -f 8 -n 2 -w 1 --no-progress --csv",
        path_str(&csv_path)
    ];
    let out = sim_mpirun(&dir, 3, &[("GPUSIM_NCCL_VERSION", "22803")], &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stdout(&out).contains("PROFILER/Plugin: Loaded collbench (v5)"),
        "{}",
        stdout(&out)
    );
    let csv = Csv::read(&csv_path);
    assert_sim_rows(&csv, 3);
    assert_rows_say(&csv, true, "plugin");
}

/// scripts/gpu-smoke.sh with two simulated GPUs: the two-size sweep with
/// the plugin and with the TUNING lines, both printed side by side in
/// SUMMARY.txt, the same choice on every line; the pinned sweeps' step
/// with what NCCL ran under each pin.
#[test]
fn the_gpu_smoke_script_prints_the_plugins_and_the_tuning_lines_choices() {
    let Some(dir) = sim_dir() else { return };
    let (bin, _) = smoke_binary();
    assert!(
        Path::new(&bin).with_file_name("libcollbench_profiler.so").is_file(),
        "no plugin beside {bin}"
    );
    let tmp = tempdir();
    let env = [("GPUSIM_DEVICES", "2"), ("SMOKE_MAXBYTES", "64K"), ("SMOKE_ITERS", "2")];
    let (rc, text, summary, _) = smoke(&dir, &tmp.path().join("out"), &env);
    assert_eq!(rc, 0, "{text}");
    let lines: Vec<&str> = summary
        .lines()
        .skip_while(|l| !l.starts_with("NCCL's algorithm/protocol/channels by size"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    assert_eq!(lines.len(), 10, "5 collectives at 2 sizes:\n{summary}");
    for l in &lines {
        assert!(
            l.contains("(plugin)") && l.contains("(log)") && l.ends_with("same"),
            "{l}\n{summary}"
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("all_reduce") && l.contains("tree/ll/1ch (plugin)")),
        "{summary}"
    );
    // the pinned step: each pin, and NCCL ran it (the plugin says)
    let pinned: Vec<&str> = summary
        .lines()
        .skip_while(|l| !l.starts_with("pinned sweeps (step algo-pinned)"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    // ring: all_reduce and all_gather, tree: all_reduce; 2 sizes each
    assert_eq!(pinned.len(), 6, "{summary}");
    for l in &pinned {
        let pin = l.split_whitespace().next().unwrap();
        assert!(
            l.contains(&format!(" {pin}/")) && l.ends_with("(plugin)"),
            "{l}\n{summary}"
        );
    }
}

/// The hierarchical modes make sub-communicators on every rank (each a
/// context of the plugin's, made by the rank's thread): their rows are
/// `unknown` (several communicators), the flat rows of the same run keep
/// the plugin's choice.
#[test]
fn flat_rows_keep_the_plugins_choice_beside_sub_communicators() {
    let Some(dir) = sim_dir() else { return };
    plugin();
    let tmp = tempdir();
    let csv_path = tmp.path().join("hier.csv");
    let args = argv![
        "run --backend nccl -g 4 --ranks-per-node 2 --hierarchy all --collectives all_reduce -b 8 -e 256K -f 64 -n 2 -w 1 --no-progress --csv",
        path_str(&csv_path)
    ];
    let out = sim_run(&dir, 4, &[], &args);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let csv = Csv::read(&csv_path);
    let flat: Vec<Vec<String>> = csv
        .rows
        .iter()
        .filter(|r| csv.get(r, "hierarchy") == "flat")
        .cloned()
        .collect();
    assert!(flat.len() < csv.rows.len() && !flat.is_empty());
    for row in csv.rows.iter().filter(|r| csv.get(r, "hierarchy") != "flat") {
        assert_eq!(csv.get(row, "algo_source"), "unknown", "{row:?}");
    }
    assert_rows_say(
        &Csv {
            header: csv.header.clone(),
            rows: flat,
        },
        true,
        "plugin",
    );
}
