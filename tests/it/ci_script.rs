//! scripts/ci-regression.sh end to end with the test binary and real
//! `mpirun` at 2 ranks, in a fresh copy of the scripts (no results/, as in
//! a new clone): a missing baseline is an error unless --create-baseline
//! asks for one (several launches, exit 0); the next call compares
//! against it, prints the verdict once,
//! writes the markdown summary (and $GITHUB_STEP_SUMMARY) and passes
//! compare's exit code on; extra run arguments (`--overwrite`, `--csv`)
//! pass through; MPIRUN may carry launcher options.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common::*;

/// A fresh checkout as far as the script is concerned: the script and
/// the shell library it sources, nothing else.
fn fresh_copy() -> tempfile::TempDir {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempdir();
    std::fs::create_dir_all(dir.path().join("scripts/lib")).unwrap();
    for file in ["scripts/ci-regression.sh", "scripts/lib/setup.sh"] {
        std::fs::copy(root.join(file), dir.path().join(file)).unwrap();
    }
    dir
}

fn script(checkout: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("bash");
    cmd.arg(checkout.join("scripts/ci-regression.sh"))
        .args(args)
        .env("COLLBENCH", BIN)
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("GITHUB_STEP_SUMMARY")
        .env_remove("MPIRUN")
        .env_remove("NP")
        .envs(env.iter().copied());
    output_of(cmd)
}

/// A small sweep after the recipe's defaults: all_reduce at 1 and 2 KiB,
/// two samples, few iterations.
const SWEEP: &str = "-- --collectives all_reduce -f 2 -e 2K -N 2 -n 5";

fn with_sweep<'a>(args: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
    let mut all = args.to_vec();
    all.extend(words(SWEEP));
    all.extend(extra);
    all
}

fn launches(folder: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(folder)
        .unwrap_or_else(|e| panic!("{}: {e}", folder.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

#[test]
fn on_a_fresh_clone_the_first_call_makes_the_baseline_and_the_next_compares() {
    let checkout = fresh_copy();
    let root = checkout.path();
    // a name with no baseline behind it (a typo, a new machine class) is
    // an error naming the path and the flag, never a baseline made quietly
    let out = script(root, &with_sweep(&["ci"], &[]), &[]);
    assert_eq!(code(&out), 2, "{}\n{}", stdout(&out), stderr(&out));
    assert_eq!(
        stderr(&out).trim(),
        "ci-regression: no baseline at results/baselines/ci/ (or ci.csv there); \
         to measure one, run this again with --create-baseline"
    );
    assert!(!root.join("results/baselines/ci").exists());
    let out = script(
        root,
        &with_sweep(&["ci", "--create-baseline", "--launches", "2"], &[]),
        &[],
    );
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert_stdout_has(
        &out,
        "ci-regression: baseline created: results/baselines/ci (2 launches; nothing compared)",
    );
    let files = launches(&root.join("results/baselines/ci"));
    assert_eq!(files.len(), 2, "{files:?}");
    let first = Csv::read(&files[0]);
    assert_eq!(first.rows.len(), 8, "2 sizes x 2 placements x 2 samples");
    assert_ne!(
        first.get(&first.rows[0], "run_id"),
        Csv::read(&files[1]).get(&Csv::read(&files[1]).rows[0], "run_id")
    );

    // now the baseline exists: the same call compares. Timing noise on a
    // shared CI machine is far above any sane threshold at these sizes;
    // an unreachable one checks the plumbing, not the speed.
    let step = root.join("step-summary.md");
    let out = script(
        root,
        &with_sweep(&["ci", "--threshold", "1000000"], &[]),
        &[("GITHUB_STEP_SUMMARY", step.to_str().unwrap())],
    );
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    let text = stdout(&out);
    assert_eq!(
        text.matches("OK: no row lost more than 1000000% busbw").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("base: results/baselines/ci (2 launches, 16 samples)"),
        "{text}"
    );
    // the script judges every row of the job at alpha 0.01
    assert!(text.contains("threshold 1000000%, alpha 0.01"), "{text}");
    let md = std::fs::read_to_string(root.join("results/ci-summary.md")).unwrap();
    assert!(md.starts_with("## collbench compare: busbw\n\n**OK**"), "{md}");
    assert_eq!(std::fs::read_to_string(&step).unwrap(), md);
    // the baseline is left as it was
    assert_eq!(launches(&root.join("results/baselines/ci")), files);
    // and creating it again is refused: replacing it is --update-baseline
    let out = exits(2, script(root, &with_sweep(&["ci", "--create-baseline"], &[]), &[]));
    assert_stderr_has(&out, "--update-baseline measures it anew");

    // a run that measures fewer cases than the baseline: exit 4, listed
    let out = script(root, &with_sweep(&["ci", "--threshold", "1000000"], &["-e", "1K"]), &[]);
    assert_eq!(code(&out), 4, "{}\n{}", stdout(&out), stderr(&out));
    assert_stdout_has(&out, "Only in base, missing from the new run (2):");
    assert_eq!(
        stderr(&out)
            .lines()
            .filter(|l| l.starts_with("collbench: regression:"))
            .count(),
        1,
        "{}",
        stderr(&out)
    );
    let out = script(
        root,
        &with_sweep(&["ci", "--threshold", "1000000", "--allow-missing"], &["-e", "1K"]),
        &[],
    );
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));

    // --update-baseline measures it anew
    ok(script(
        root,
        &with_sweep(&["ci", "--update-baseline", "--launches", "3"], &[]),
        &[],
    ));
    assert_eq!(launches(&root.join("results/baselines/ci")).len(), 3);
}

#[test]
fn extra_run_arguments_pass_through_and_csv_names_the_new_run() {
    let checkout = fresh_copy();
    let root = checkout.path();
    let base = root.join("base.csv");
    // a baseline given as a path that does not exist yet: one merged CSV
    ok(script(
        root,
        &with_sweep(&[path_str(&base), "--create-baseline", "--launches", "2"], &[]),
        &[],
    ));
    let merged = Csv::read(&base);
    assert_eq!(merged.rows.len(), 16, "2 launches x 2 sizes x 2 placements x 2 samples");

    let new = root.join("mine/new.csv");
    let summary = root.join("sum.md");
    let out = script(
        root,
        &with_sweep(
            &[
                path_str(&base),
                "--threshold",
                "1000000",
                "--summary",
                path_str(&summary),
            ],
            &["--overwrite", "--csv", path_str(&new)],
        ),
        &[],
    );
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert_eq!(Csv::read(&new).rows.len(), 8);
    assert!(
        stdout(&out).contains(&format!("new:  {}", new.display())),
        "{}",
        stdout(&out)
    );
    assert!(summary.exists());
    // --csv=PATH as well, and a second time over the same file
    ok(script(
        root,
        &with_sweep(
            &[path_str(&base), "--threshold", "1000000"],
            &[&format!("--csv={}", new.display())],
        ),
        &[],
    ));
    // a launcher command with options of its own
    let out = script(
        root,
        &with_sweep(
            &[path_str(&base), "--threshold", "1000000", "--csv", path_str(&new)],
            &[],
        ),
        &[("MPIRUN", "mpirun --bind-to none")],
    );
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert_stdout_has(&out, "== run: mpirun --bind-to none -np 2");
}

#[test]
fn a_suite_makes_its_baseline_and_compares_the_same_way() {
    let checkout = fresh_copy();
    let root = checkout.path();
    let suite = root.join("tiny-suite.toml");
    std::fs::write(
        &suite,
        "name = \"tiny\"\nranks = 2\ntransports = [\"auto\"]\nmpirun-args = [\"--oversubscribe\"]\n\
         [run]\nbackend = \"mpi\"\ncollectives = \"all_reduce\"\nmaxbytes = \"1K\"\nminbytes = \"1K\"\n\
         iters = 5\ncycles = 2\n",
    )
    .unwrap();
    let args = argv!["tiny --suite", path_str(&suite), "--create-baseline --launches 2"];
    let out = script(root, &args, &[]);
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert_stdout_has(&out, "(2 runs of the suite; nothing compared)");
    // only the runs' CSVs are kept, not each launch's folder
    let files = launches(&root.join("results/baselines/tiny"));
    assert_eq!(files.len(), 2, "{files:?}");
    let out = script(
        root,
        &["tiny", "--suite", path_str(&suite), "--threshold", "1000000"],
        &[],
    );
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert_stdout_has(&out, "OK: no row lost more than 1000000% busbw");
    // run options belong in the suite file
    let out = script(root, &["tiny", "--suite", path_str(&suite), "--", "-e", "4K"], &[]);
    assert_eq!(code(&out), 2);
    assert_stderr_has(&out, "[run] table");
}

#[test]
fn bad_input_and_failed_runs_pass_their_exit_codes_on() {
    let checkout = fresh_copy();
    let root = checkout.path();
    let out = script(root, &["--help"], &[]);
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("scripts/ci-regression.sh BASELINE [options] [-- RUN-ARGS...]"));
    let out = script(root, &["x", "--frobnicate"], &[]);
    assert_eq!(code(&out), 2);
    assert_stderr_has(&out, "unknown option '--frobnicate'");
    // a 4-rank baseline against a 2-rank run: compare's exit code 2
    let four = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare/base.csv");
    let out = exits(2, script(root, &with_sweep(&[path_str(&four)], &[]), &[]));
    assert_stderr_has(&out, "--allow-different-ranks");
    // a run that cannot start: its own exit code, nothing compared, and
    // no baseline half written
    let out = exits(
        2,
        script(
            root,
            &["ci", "--create-baseline", "--", "--collectives", "all_reducer"],
            &[],
        ),
    );
    assert_stderr_has(&out, "launch 1 of the baseline failed with exit code 2");
    assert!(!root.join("results/baselines/ci").exists());
}

/// The examples of `--help`, each run as written in a copy of the
/// checkout with its committed baselines and configs. Against a baseline
/// measured on another machine the verdict may be a regression (exit 4),
/// never a case missing without --allow-missing, a refused method or an
/// unusable input.
#[test]
fn every_example_of_the_help_runs_as_written() {
    let checkout = fresh_copy();
    let root = checkout.path();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    for dir in ["results/baselines/local-2ranks", "results/baselines/ci-suite"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        for file in launches(&repo.join(dir)) {
            std::fs::copy(&file, root.join(dir).join(file.file_name().unwrap())).unwrap();
        }
    }
    std::fs::create_dir_all(root.join("configs")).unwrap();
    std::fs::copy(repo.join("configs/suite-ci.toml"), root.join("configs/suite-ci.toml")).unwrap();

    let help = stdout(&script(root, &["--help"], &[]));
    let (_, after) = help.split_once("\nExamples").expect("an Examples section");
    let examples: Vec<Vec<String>> = after
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("scripts/ci-regression.sh "))
        .map(|l| l.split_whitespace().skip(1).map(String::from).collect())
        .collect();
    assert_eq!(examples.len(), 6, "{help}");
    // the one that replaces a committed baseline runs last
    let (mut examples, update): (Vec<_>, Vec<_>) = examples
        .into_iter()
        .partition(|a| !a.iter().any(|w| w == "--update-baseline"));
    examples.extend(update);
    for args in &examples {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = script(root, &args, &[]);
        let (text, err) = (stdout(&out), stderr(&out));
        let creates = args.contains(&"--create-baseline") || args.contains(&"--update-baseline");
        match code(&out) {
            0 => {}
            4 if !creates => assert!(
                !err.contains("missing from the new run") && err.contains("rows lost more than"),
                "{args:?}: exit 4 for a reason other than a regression\n{text}\n{err}"
            ),
            other => panic!("{args:?}: exit {other}\n{text}\n{err}"),
        }
        if creates {
            let name = if args.contains(&"--update-baseline") {
                "local-2ranks (5 launches"
            } else {
                "my-machine (3 launches"
            };
            assert!(
                text.contains(&format!("ci-regression: baseline created: results/baselines/{name}")),
                "{text}"
            );
        } else {
            assert!(text.contains("== compare results/baselines/"), "{args:?}\n{text}");
        }
    }
}
