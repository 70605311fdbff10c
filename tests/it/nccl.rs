//! The NCCL backend on a machine without a GPU: the library search through
//! each route (`collbench info` reports path, route and version), wrong and
//! missing libraries (one line, no panic), the real bootstrap under mpirun
//! (rank 0's unique id reaches every rank, then every rank fails at device
//! initialisation with exit 1 and one line), and `auto` falling back to mpi.
//!
//! The library comes from PyPI's nvidia-nccl-cu12 wheel, which
//! scripts/test.sh downloads and unpacks (COLLBENCH_TEST_NCCL_LIB). With
//! COLLBENCH_REQUIRE_NCCL=1 (as test.sh sets it) a missing library fails the
//! tests that need it; otherwise they are skipped with a note.
#![cfg(feature = "nccl")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

/// The unpacked libnccl.so.2, or `None` (test skipped) where it is absent
/// and not required.
fn nccl_lib() -> Option<PathBuf> {
    let from_env = std::env::var_os("COLLBENCH_TEST_NCCL_LIB").map(PathBuf::from);
    // What scripts/test.sh unpacked earlier: .cache/nccl/<wheel>/nvidia/...
    let cached = || {
        let cache = Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/nccl");
        let mut libs: Vec<PathBuf> = std::fs::read_dir(cache)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path().join("nvidia/nccl/lib/libnccl.so.2"))
            .filter(|p| p.is_file())
            .collect();
        libs.sort();
        libs.pop()
    };
    let found = from_env.filter(|p| p.is_file()).or_else(cached);
    if found.is_none() {
        if std::env::var("COLLBENCH_REQUIRE_NCCL").is_ok_and(|v| v == "1") {
            panic!(
                "COLLBENCH_REQUIRE_NCCL=1 but no libnccl.so.2: set COLLBENCH_TEST_NCCL_LIB or run scripts/test.sh, \
                 which downloads it"
            );
        }
        eprintln!("note: no libnccl.so.2 (run scripts/test.sh to fetch it); test skipped");
    }
    found
}

/// The binary with a clean NCCL environment: nothing from the caller's
/// environment can point the search elsewhere.
fn clean(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("COLLBENCH_NCCL_LIB")
        .env_remove("NCCL_HOME")
        .env_remove("LD_LIBRARY_PATH")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env("PYTHONNOUSERSITE", "1");
    cmd
}

fn output(cmd: Command) -> Output {
    output_of(cmd)
}

/// The `NCCL` line of `collbench info`.
fn nccl_line(out: &Output) -> String {
    assert_eq!(code(out), 0, "{}", stderr(out));
    stdout(out)
        .lines()
        .find(|l| l.starts_with("NCCL "))
        .unwrap_or_else(|| panic!("no NCCL line in:\n{}", stdout(out)))
        .to_string()
}

/// "2.21.5" from "NCCL        2.21.5 at /path (found via ROUTE; ...)".
fn version_of(line: &str) -> String {
    let v = line.split_whitespace().nth(1).unwrap_or("");
    let parts: Vec<&str> = v.split('.').collect();
    assert!(
        parts.len() == 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit())),
        "no version in {line:?}"
    );
    v.to_string()
}

/// NCCL_MAJOR.NCCL_MINOR.NCCL_PATCH of the nccl.h unpacked beside the
/// library, where it is there.
fn header_version(lib: &Path) -> Option<String> {
    let header = lib.parent()?.parent()?.join("include/nccl.h");
    let text = std::fs::read_to_string(header).ok()?;
    let get = |name: &str| -> Option<String> {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .map(|v| v.trim().to_string())
    };
    Some(format!(
        "{}.{}.{}",
        get("NCCL_MAJOR")?,
        get("NCCL_MINOR")?,
        get("NCCL_PATCH")?
    ))
}

#[cfg(unix)]
fn link(target: &Path, at: &Path) {
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(target, at).unwrap();
}

#[test]
fn the_search_finds_nccl_through_every_route_and_reports_its_version() {
    let Some(lib) = nccl_lib() else { return };
    let dir = tempdir();
    let lib_dir = lib.parent().unwrap();
    let lib_s = path_str(&lib);

    // route -> (command, expected path in the line)
    let mut cases: Vec<(&str, Command, PathBuf)> = Vec::new();
    cases.push(("--nccl-lib", clean(&["info", "--nccl-lib", lib_s]), lib.clone()));
    cases.push((
        "--nccl-lib",
        clean(&["info", "--nccl-lib", path_str(lib_dir)]),
        lib_dir.join("libnccl.so.2"),
    ));
    let mut c = clean(&["info"]);
    c.env("COLLBENCH_NCCL_LIB", lib_s);
    cases.push(("COLLBENCH_NCCL_LIB", c, lib.clone()));

    let home = dir.path().join("nccl-home");
    link(&lib, &home.join("lib/libnccl.so.2"));
    let mut c = clean(&["info"]);
    c.env("NCCL_HOME", &home);
    cases.push(("NCCL_HOME", c, home.join("lib/libnccl.so.2")));

    let mut c = clean(&["info"]);
    c.env("LD_LIBRARY_PATH", lib_dir);
    cases.push(("dynamic loader", c, lib.clone()));

    // A virtual environment's site-packages, found without asking python3.
    let venv = dir.path().join("venv");
    let venv_lib = venv.join("lib/python3.99/site-packages/nvidia/nccl/lib/libnccl.so.2");
    link(&lib, &venv_lib);
    let mut c = clean(&["info"]);
    c.env("VIRTUAL_ENV", &venv);
    cases.push(("Python site-packages", c, venv_lib));

    // The user site-packages python3 itself reports (where python3 exists).
    let userbase = dir.path().join("userbase");
    let user_site = Command::new("python3")
        .args(["-c", "import site; print(site.getusersitepackages())"])
        .env("PYTHONUSERBASE", &userbase)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    if let Some(site) = user_site {
        let user_lib = site.join("nvidia/nccl/lib/libnccl.so.2");
        link(&lib, &user_lib);
        let mut c = clean(&["info"]);
        c.env("PYTHONUSERBASE", &userbase).env_remove("PYTHONNOUSERSITE");
        cases.push(("Python site-packages", c, user_lib));
    } else {
        eprintln!("note: no python3; the user site-packages route is not tested");
    }

    let mut versions = Vec::new();
    for (route, cmd, path) in cases {
        let out = output(cmd);
        let line = nccl_line(&out);
        assert!(
            line.contains(&format!("at {} (found via {route}", path.display())),
            "{route}: expected {} in {line}",
            path.display()
        );
        versions.push(version_of(&line));
    }
    versions.dedup();
    assert_eq!(versions.len(), 1, "{versions:?}");
    if let Some(v) = header_version(&lib) {
        assert_eq!(versions[0], v, "ncclGetVersion disagrees with nccl.h");
    }
    eprintln!("loader reported NCCL {}", versions[0]);
}

/// This process's libc, which has none of NCCL's symbols.
fn libc_path() -> PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("libc.so"))
        })
        .map(PathBuf::from)
        .expect("libc in /proc/self/maps")
}

#[test]
fn missing_and_wrong_libraries_are_one_line_errors_without_a_panic() {
    let (dir, not_elf) = temp_file("libnccl.so.2");
    std::fs::write(&not_elf, "this is not a shared library\n").unwrap();
    let libc = libc_path();
    let cases: Vec<(PathBuf, &str)> = vec![
        (dir.path().join("absent/libnccl.so.2"), "no such file"),
        (not_elf.clone(), "not a usable NCCL library"),
        (libc, "lacks ncclGetVersion"),
    ];
    for (path, needle) in &cases {
        let out = output(clean(&["info", "--nccl-lib", path_str(path)]));
        let line = nccl_line(&out);
        assert!(line.contains(needle) && line.contains(path_str(path)), "{line}");
        assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    }
    // Nothing anywhere: every place tried is listed.
    let out = output(clean(&["info"]));
    let line = nccl_line(&out);
    if line.contains("not usable") {
        assert!(line.contains("libnccl.so.2 (dynamic loader)"), "{line}");
    }

    // The same through `run`, which must stop with one line and exit 1.
    #[cfg(feature = "mpi")]
    for (path, needle) in &cases {
        let out = output(clean(&argv!["run --backend nccl --nccl-lib", path_str(path), "-e 64"]));
        let err = stderr(&out);
        assert_eq!(code(&out), 1, "{err}");
        assert_eq!(our_lines(&out).len(), 1, "{err}");
        assert!(err.contains(needle) && !err.contains("panicked"), "{err}");
    }
}

/// Whether this machine has a CUDA driver (then the no-GPU tests do not
/// apply).
fn has_cuda_driver() -> bool {
    let out = output(clean(&["info"]));
    stdout(&out)
        .lines()
        .any(|l| l.starts_with("CUDA driver") && !l.contains("absent"))
}

/// The NCCL library for the tests, where this machine has no CUDA driver
/// (else the no-GPU `test` does not apply: skipped with a note).
fn nccl_lib_without_gpu(test: &str) -> Option<PathBuf> {
    let lib = nccl_lib()?;
    if has_cuda_driver() {
        eprintln!("note: this machine has a CUDA driver; the {test} does not apply");
        return None;
    }
    Some(lib)
}

/// A run that stopped at device initialisation without a GPU: exit 1 and
/// one line saying so, no panic (`what` starts the failure messages).
#[cfg(feature = "mpi")]
#[track_caller]
fn assert_no_cuda_driver(out: &Output, what: &str) {
    let err = stderr(out);
    assert_eq!(code(out), 1, "{what}{err}");
    let lines = our_lines(out);
    assert_eq!(lines.len(), 1, "{what}{err}");
    assert!(
        lines[0].starts_with("collbench: --backend nccl: no CUDA driver"),
        "{}",
        lines[0]
    );
    assert!(!err.contains("panicked"), "{err}");
}

/// What the no-GPU bootstrap tests start from (None: skipped, see
/// `nccl_lib_without_gpu`): the NCCL library, a temporary folder holding an
/// empty `trace` folder (for --trace-bootstrap), and the path of its
/// `never.csv`: the report a failed start must not leave.
#[cfg(feature = "mpi")]
fn bootstrap() -> Option<(PathBuf, tempfile::TempDir, PathBuf, PathBuf)> {
    let lib = nccl_lib_without_gpu("no-GPU bootstrap test")?;
    let (dir, trace) = temp_file("trace");
    std::fs::create_dir(&trace).unwrap();
    let never = dir.path().join("never.csv");
    Some((lib, dir, trace, never))
}

#[cfg(feature = "mpi")]
#[test]
fn two_ranks_exchange_a_unique_id_then_fail_cleanly_at_device_initialisation() {
    let Some((lib, dir, trace, never)) = bootstrap() else {
        return;
    };
    let out = mpirun_env(
        2,
        &[("COLLBENCH_NCCL_LIB", path_str(&lib))],
        &argv![
            "run --backend nccl -e 1K --trace-bootstrap",
            path_str(&trace),
            "--csv",
            path_str(&never)
        ],
    );
    assert_no_cuda_driver(&out, "");
    // Both ranks got the same 128-byte id, through the real MPI broadcast.
    let id0 = std::fs::read_to_string(trace.join("rank-0.id")).expect("rank 0 traced its id");
    let id1 = std::fs::read_to_string(trace.join("rank-1.id")).expect("rank 1 received an id");
    assert_eq!(id0, id1);
    assert_eq!(id0.trim().len(), 256, "{id0}");
    assert!(id0.trim().chars().any(|c| c != '0'), "an all-zero id: {id0}");
    assert!(!dir.path().join("never.csv").exists(), "no report for a failed start");
}

/// The hierarchical modes on nccl go through the real bootstrap: without
/// ncclCommSplit (forced by a test hook), rank 0's bundle of unique ids
/// (the flat communicator's, one per virtual node, one per local rank)
/// reaches every rank over MPI; then, with no GPU, every rank stops at
/// device initialisation with exit 1 and one line, before any plan check.
#[cfg(feature = "mpi")]
#[test]
fn hierarchical_modes_bootstrap_their_sub_communicator_ids_then_fail_cleanly_without_a_gpu() {
    let Some((lib, _dir, trace, never)) = bootstrap() else {
        return;
    };
    let common = argv![
        "run --backend nccl --collectives all_reduce --ranks-per-node 2 -e 1K --trace-bootstrap",
        path_str(&trace),
        "--csv",
        path_str(&never)
    ];
    for extra in [
        &["--hierarchy", "all", "--phase-times", "-R", "--no-comm-split"][..],
        &["--hierarchy", "rs-ar-ag"][..],
    ] {
        let mut args = common.to_vec();
        args.extend(extra);
        let out = mpirun_env(4, &[("COLLBENCH_NCCL_LIB", path_str(&lib))], &args);
        assert_no_cuda_driver(&out, &format!("{extra:?}: "));
        let ids: Vec<String> = (0..4)
            .map(|r| std::fs::read_to_string(trace.join(format!("rank-{r}.id"))).unwrap())
            .collect();
        assert!(
            ids.iter().all(|t| *t == ids[0]),
            "every rank got rank 0's bundle: {ids:?}"
        );
        let lines: Vec<&str> = ids[0].lines().collect();
        if extra.contains(&"--no-comm-split") {
            // the flat id, 2 virtual nodes, 2 local ranks
            assert_eq!(lines.len(), 1 + 2 + 2, "{ids:?}");
            let distinct: std::collections::BTreeSet<&str> = lines.iter().copied().collect();
            assert_eq!(distinct.len(), lines.len(), "every group has its own id");
        } else {
            // this library has ncclCommSplit: nothing but the flat id
            assert_eq!(lines.len(), 1, "{ids:?}");
        }
        assert!(lines.iter().all(|l| l.len() == 256), "{lines:?}");
    }
    assert!(!never.exists(), "no report for a failed start");
}

/// `collbench ARGS` in one process on the NCCL library `lib`, asserting it
/// stops without a GPU: exit 1 and one line of stderr, saying so.
#[track_caller]
fn one_process_stops_without_a_gpu(lib: &Path, args: &[&str]) {
    let mut cmd = clean(args);
    cmd.env("COLLBENCH_NCCL_LIB", lib);
    let out = output(cmd);
    let err = stderr(&out);
    assert_eq!(code(&out), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("collbench: --backend nccl: no CUDA driver"), "{err}");
}

/// `-m`, `-G` and `-R` are accepted on the nccl backend and change nothing
/// before the GPU: without one, the run stops at device initialisation.
#[test]
fn nccl_extras_pass_the_checks_and_fail_cleanly_without_a_gpu() {
    let Some(lib) = nccl_lib_without_gpu("no-GPU test") else {
        return;
    };
    one_process_stops_without_a_gpu(&lib, &argv!["run -g 2 --backend nccl -m 4 -G 2 -R -e 1K"]);
}

#[test]
fn threads_of_one_process_share_the_id_then_fail_cleanly_without_a_gpu() {
    let Some(lib) = nccl_lib_without_gpu("no-GPU test") else {
        return;
    };
    let dir = tempdir();
    one_process_stops_without_a_gpu(
        &lib,
        &["run", "-g", "3", "-e", "1K", "--trace-bootstrap", path_str(dir.path())],
    );
    let ids: Vec<String> = (0..3)
        .map(|r| std::fs::read_to_string(dir.path().join(format!("rank-{r}.id"))).unwrap())
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0] && id.trim().len() == 256), "{ids:?}");
}

#[cfg(feature = "mpi")]
#[test]
fn auto_falls_back_to_mpi_without_a_gpu_and_says_why() {
    if has_cuda_driver() {
        eprintln!("note: this machine has a CUDA driver; the fallback test does not apply");
        return;
    }
    let (_dir, csv_path) = temp_file("auto.csv");
    let lib = nccl_lib();
    let env: Vec<(&str, &str)> = lib
        .as_deref()
        .map(|l| vec![("COLLBENCH_NCCL_LIB", path_str(l))])
        .unwrap_or_default();
    let out = ok(mpirun_env(
        2,
        &env,
        &argv!["run --collectives all_reduce -e 64 --csv", path_str(&csv_path)],
    ));
    let text = stdout(&out);
    assert!(
        text.contains("# backend   : mpi") && text.contains("[auto: no CUDA driver, using mpi]"),
        "{text}"
    );
    let csv = Csv::read(&csv_path);
    assert!(csv.rows.iter().all(|r| csv.get(r, "backend") == "mpi"));
    assert_rows_consistent(&csv, 2);
}
