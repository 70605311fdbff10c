//! Transport profiles under the real `mpirun`: the MPI profiles run,
//! record the profile and what Open MPI used, and validate; a profile the
//! environment contradicts fails the run; profiles that do not fit the
//! backend are usage errors; the local suite runs end to end and merges;
//! `collbench topo` reports this machine.

use crate::common::*;

/// A small all_reduce + all_gather sweep at 2 ranks with `profile`.
fn small_run(profile: &str, csv: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    mpirun_env(
        2,
        env,
        &argv![
            "run --backend mpi --transport",
            profile,
            "--collectives all_reduce,all_gather -b 64 -e 64K -f 32 -n 3 -w 1 --csv",
            path_str(csv)
        ],
    )
}

#[test]
fn the_shm_and_tcp_profiles_run_record_what_open_mpi_used_and_validate() {
    let dir = tempdir();
    for (profile, observed) in [("shm", "ob1/vader"), ("tcp", "ob1/tcp")] {
        let csv_path = dir.path().join(format!("{profile}.csv"));
        let out = small_run(profile, &csv_path, &[]);
        assert_eq!(
            code(&out),
            0,
            "{profile}\nstdout:\n{}\nstderr:\n{}",
            stdout(&out),
            stderr(&out)
        );
        let text = stdout(&out);
        assert!(
            text.contains(&format!("# transport : {profile}, observed {observed}")),
            "{text}"
        );
        assert!(text.contains("set OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,"), "{text}");
        let csv = Csv::read(&csv_path);
        assert_eq!(csv.header, default_header());
        assert_rows_consistent(&csv, 2);
        for row in &csv.rows {
            assert_eq!(csv.get(row, "transport"), profile, "{row:?}");
            assert_eq!(csv.get(row, "transport_observed"), observed, "{row:?}");
        }
    }
}

#[test]
fn auto_sets_nothing_and_records_every_btl_open_mpi_kept() {
    let (_dir, csv_path) = temp_file("auto.csv");
    let out = ok(small_run("auto", &csv_path, &[]));
    assert!(!stdout(&out).contains("#             set "), "{}", stdout(&out));
    let csv = Csv::read(&csv_path);
    let observed = csv.get(&csv.rows[0], "transport_observed");
    assert!(observed.starts_with("ob1/") || observed == "ucx", "{observed}");
    assert_eq!(csv.get(&csv.rows[0], "transport"), "auto");
}

#[test]
fn a_profile_the_environment_contradicts_fails_with_one_line_naming_both() {
    let (_dir, csv_path) = temp_file("tcp.csv");
    // The user's own btl list wins over the profile's, as documented; then
    // Open MPI keeps shared memory only, which is not the tcp profile.
    let out = small_run("tcp", &csv_path, &[("OMPI_MCA_btl", "self,vader")]);
    assert_eq!(code(&out), 1, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let line = only_line(&out);
    assert!(
        line.contains("transport tcp was requested but ob1/vader was observed"),
        "{}",
        line
    );
    assert!(
        line.contains("OMPI_MCA_btl=self,vader was set before the run"),
        "{}",
        line
    );
    assert!(!csv_path.exists(), "nothing was measured, so no report is left");
}

#[test]
fn profiles_that_do_not_fit_the_backend_are_usage_errors() {
    // `auto` becomes mpi once the ranks find no GPU: refused then, by
    // every rank (an explicit --backend mpi is refused before any rank
    // starts: tests/it/option_errors.rs)
    let out = mpirun(2, &["run", "--transport", "ib", "-e", "1K"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let line = only_line(&out);
    assert!(line.contains("is an NCCL profile, but the backend is mpi"), "{}", line);
    let out = collbench(&["run", "--transport", "infiniband"]);
    assert_parser_error(&out, "unknown profile 'infiniband'");
}

#[test]
fn transport_help_lists_every_profile_with_its_variables() {
    let out = ok(collbench(&["run", "--transport", "help"]));
    let text = stdout(&out);
    for profile in ["auto", "nvlink", "nvls", "pcie", "ib", "socket", "shm", "tcp", "ucx"] {
        assert!(text.lines().any(|l| l.starts_with(profile)), "{profile}: {text}");
    }
    for var in argv![
        "NCCL_P2P_LEVEL=NVL NCCL_NVLS_ENABLE=1 NCCL_P2P_DISABLE=1 NCCL_NET=IB NCCL_NET=Socket OMPI_MCA_btl=self,vader OMPI_MCA_btl=self,tcp OMPI_MCA_pml=ucx UCX_TLS=^tcp"
    ] {
        assert!(text.contains(var), "{var}: {text}");
    }
}

/// The shipped local suite (its six launches, the merge, the view), with
/// smaller sizes: the README's and docs/transports.md's examples run it
/// whole.
#[test]
fn the_local_suite_runs_every_launch_and_merges_one_csv() {
    let (dir, merged) = temp_file("local.csv");
    let shipped = format!("{}/configs/suite-local-cpu.toml", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&shipped).unwrap();
    assert!(
        text.contains("maxbytes = \"1M\"\n"),
        "the shipped suite changed: {text}"
    );
    let config = dir.path().join("suite-local-cpu.toml");
    std::fs::write(&config, text.replace("maxbytes = \"1M\"\n", "maxbytes = \"16K\"\n")).unwrap();
    let out = collbench_launching(
        &[
            "suite",
            path_str(&config),
            "--launcher",
            "mpirun",
            "--output",
            path_str(&merged),
        ],
        &[],
    );
    assert_eq!(code(&out), 0, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("# suite local-cpu: 6 launches, 6 ok, 0 failed"), "{text}");
    assert!(text.contains("compare --by transport"), "{text}");
    // three launches of each profile: the view may judge them
    assert!(!text.contains("separate launches, one launch of each"), "{text}");
    // the launches' summary: every value starts under its column's heading
    let lines: Vec<&str> = text.lines().collect();
    let head = lines
        .iter()
        .position(|l| l.contains(" profile ") && l.contains(" result "))
        .expect("summary heading");
    let column = |line: &str, word: &str| line.find(word);
    let result_at = column(lines[head], "result");
    for line in &lines[head + 1..head + 3] {
        assert_eq!(
            column(line, " ok ").map(|i| i + 1),
            result_at,
            "{}\n{line}",
            lines[head]
        );
    }
    let csv = Csv::read(&merged);
    assert_eq!(csv.header, default_header());
    assert_rows_consistent(&csv, 2);
    let per_transport = |t: &str| csv.rows.iter().filter(|r| csv.get(r, "transport") == t).count();
    assert_eq!(per_transport("shm"), per_transport("tcp"));
    assert_eq!(per_transport("shm") * 2, csv.rows.len());
    for row in &csv.rows {
        let want = if csv.get(row, "transport") == "shm" {
            "ob1/vader"
        } else {
            "ob1/tcp"
        };
        assert_eq!(csv.get(row, "transport_observed"), want);
    }
    let launches = dir.path().join("local-launches");
    for file in argv!["run.toml 01-shm-flat.csv 01-shm-flat.log 02-tcp-flat.csv 06-tcp-flat.csv"] {
        assert!(launches.join(file).exists(), "{file}");
    }
}

#[test]
fn a_failed_launch_is_reported_the_rest_go_on_and_the_exit_code_says_so() {
    let (dir, suite) = temp_file("two.toml");
    std::fs::write(
        &suite,
        "ranks = 2\ntransports = [\"tcp\", \"shm\"]\n[run]\nbackend = \"mpi\"\ncollectives = \"all_reduce\"\n\
         maxbytes = \"1K\"\nstepfactor = 16\niters = 2\nwarmup = 1\n",
    )
    .unwrap();
    let merged = dir.path().join("two.csv");
    // tcp is contradicted by the caller's environment; shm is not.
    let out = collbench_launching(
        &argv!["suite", path_str(&suite), "--launcher mpirun -o", path_str(&merged)],
        &[("OMPI_MCA_btl", "self,vader")],
    );
    assert_eq!(code(&out), 1, "stdout:\n{}\nstderr:\n{}", stdout(&out), stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("[1/2] tcp flat: FAILED with exit code 1"), "{err}");
    assert!(
        err.contains("transport tcp was requested but ob1/vader was observed"),
        "{err}"
    );
    assert!(err.contains("[2/2] shm flat: ok"), "{err}");
    assert_stdout_has(&out, "1 ok, 1 failed");
    let csv = Csv::read(&merged);
    assert!(!csv.rows.is_empty());
    assert!(csv.rows.iter().all(|r| csv.get(r, "transport") == "shm"));
    // An existing merged CSV is refused before anything runs, and a
    // folder even with --overwrite.
    exits(
        2,
        collbench_launching(&["suite", path_str(&suite), "-o", path_str(&merged)], &[]),
    );
    for overwrite in [None, Some("--overwrite")] {
        let mut args = vec!["suite", path_str(&suite), "-o", path_str(dir.path())];
        args.extend(overwrite);
        let out = exits(2, collbench_launching(&args, &[]));
        assert_eq!(
            stderr(&out),
            format!(
                "collbench: CSV file {} is a folder: give a file's path\n",
                dir.path().display()
            )
        );
    }
}

/// A suite file of two quick launches (tcp, then shm) at 2 ranks.
fn two_launches(dir: &std::path::Path) -> std::path::PathBuf {
    let suite = dir.join("two.toml");
    std::fs::write(
        &suite,
        "ranks = 2\ntransports = [\"tcp\", \"shm\"]\n[run]\nbackend = \"mpi\"\ncollectives = \"all_reduce\"\n\
         maxbytes = \"1K\"\nstepfactor = 16\niters = 2\nwarmup = 1\n",
    )
    .unwrap();
    suite
}

#[test]
fn a_binary_that_is_no_executable_file_is_refused_before_any_launch() {
    let dir = tempdir();
    let suite = two_launches(dir.path());
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a program\n").unwrap();
    let merged = dir.path().join("two.csv");
    for (binary, why) in [
        (
            "/nonexistent/collbench",
            "/nonexistent/collbench cannot be read (No such file or directory",
        ),
        (path_str(&text), "notes.txt is not executable"),
        (path_str(dir.path()), " is a folder"),
        (
            "no-such-collbench",
            "no-such-collbench is no executable file in a folder of PATH",
        ),
    ] {
        let out = collbench_launching(
            &["suite", path_str(&suite), "-o", path_str(&merged), "--binary", binary],
            &[],
        );
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{binary}: {err}");
        assert_eq!(err.lines().count(), 1, "{binary}: {err}");
        assert!(err.starts_with("collbench: --binary "), "{binary}: {err}");
        assert!(err.contains(why), "{binary}: want {why:?} in {err}");
        assert!(
            !dir.path().join("two-launches").exists(),
            "{binary}: a launch folder was made"
        );
    }
}

/// Launches that collbench never spoke in: the launcher's message says
/// why, and each counts as exit 1 (docs/transports.md), never as the
/// launcher's own code (Open MPI's 131 for a program it cannot start).
#[test]
fn a_launch_the_launcher_could_not_start_fails_with_exit_1_and_its_message() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempdir();
    let suite = two_launches(dir.path());
    let merged = dir.path().join("two.csv");
    // executable, so the suite accepts it; execve fails on every rank
    let broken = dir.path().join("broken-collbench");
    std::fs::write(&broken, "#!/nonexistent/interpreter\n").unwrap();
    std::fs::set_permissions(&broken, std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = collbench_launching(
        &[
            "suite",
            path_str(&suite),
            "-o",
            path_str(&merged),
            "--binary",
            path_str(&broken),
        ],
        &[],
    );
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("[1/2] tcp flat: FAILED with exit code 1 after ")
            && err.contains(": mpirun's own exit code 131: mpirun was unable to start the specified application"),
        "{err}"
    );
    assert_stdout_has(&out, "0 ok, 2 failed");
    assert!(
        stdout(&out).contains("exit 1 ") && !stdout(&out).contains("exit 131"),
        "{}",
        stdout(&out)
    );
    // too few slots: mpirun's message, where collbench printed nothing
    let text = std::fs::read_to_string(&suite).unwrap().replace(
        "ranks = 2\n",
        "ranks = 4096\nmpirun-args = [\"--mca\", \"rmaps_base_oversubscribe\", \"0\"]\n",
    );
    std::fs::write(&suite, text).unwrap();
    let out = collbench_launching(&["suite", path_str(&suite), "-o", path_str(&merged)], &[]);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert!(
        err.contains("[1/2] tcp flat: FAILED with exit code 1 after ")
            && err.contains(
                ": There are not enough slots available in the system to satisfy the 4096 slots that were requested by \
             the application (log: "
            ),
        "{err}"
    );
}

/// A launch that ends 0 without a row measured nothing: it failed.
#[test]
fn a_launch_that_ends_0_without_writing_a_row_failed() {
    let dir = tempdir();
    let suite = two_launches(dir.path());
    let merged = dir.path().join("two.csv");
    // `true` from PATH: every rank ends at once with 0
    let out = collbench_launching(
        &["suite", path_str(&suite), "-o", path_str(&merged), "--binary", "true"],
        &[],
    );
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    for launch in ["[1/2] tcp flat", "[2/2] shm flat"] {
        assert!(
            err.contains(&format!(
                "{launch}: FAILED with exit code 1 after "
            )) && err.contains(
                "ended with exit code 0 without writing a row (its log holds no run header: is the program launched \
                 collbench (--binary)?)"
            ),
            "{err}"
        );
    }
    assert_stdout_has(&out, "# suite two: 2 launches, 0 ok, 2 failed; no rows to merge");
    assert!(!merged.exists());
}

#[test]
fn topo_reports_this_gpu_less_machine_as_a_table_and_as_json() {
    let out = ok(collbench(&["topo"]));
    let text = stdout(&out);
    for want in [
        "# collbench topo:",
        "CPU   :",
        "NUMA  :",
        "GPUs (",
        "Network interfaces",
        "lo ",
    ] {
        assert!(text.contains(want), "{want}: {text}");
    }
    let out = ok(collbench(&["topo", "--json"]));
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("valid JSON");
    assert_eq!(v["schema_version"], 1);
    assert!(v["cpu"]["threads"].as_u64().unwrap_or(0) >= 1);
    assert!(
        v["nics"]
            .as_array()
            .is_some_and(|n| n.iter().any(|i| i["name"] == "lo"))
    );
    if v["gpus"].as_array().is_some_and(|g| g.is_empty()) {
        assert_eq!(v["gpu_source"], "none");
        assert!(v["notes"].as_array().is_some_and(|n| !n.is_empty()));
    }
}
