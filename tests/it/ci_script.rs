//! scripts/ci-regression.sh end to end with the test binary: a real run
//! under mpirun, compared with a baseline, a markdown summary written to
//! its file and to $GITHUB_STEP_SUMMARY, and compare's exit code passed on.

use std::path::Path;
use std::process::{Command, Output};

use crate::common::*;

fn script(args: &[&str], step_summary: &Path) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut cmd = Command::new("bash");
    cmd.arg(root.join("scripts/ci-regression.sh"))
        .args(args)
        .env("COLLBENCH", BIN)
        .env("GITHUB_STEP_SUMMARY", step_summary)
        .env_remove("OMPI_COMM_WORLD_RANK");
    output_of(cmd)
}

#[test]
fn the_script_runs_compares_summarises_and_passes_the_exit_code_on() {
    let dir = tempdir();
    let baseline = dir.path().join("baseline.csv");
    let sweep = ["--collectives", "all_reduce", "-e", "1K", "-n", "5", "-w", "1"];
    let mut run = vec!["run", "--csv", path_str(&baseline)];
    run.extend(sweep);
    let out = mpirun(2, &run);
    assert_eq!(code(&out), 0, "{}", stderr(&out));

    let (new, summary, gh) = (
        dir.path().join("new.csv"),
        dir.path().join("summary.md"),
        dir.path().join("step-summary.md"),
    );
    // Timing noise on a shared CI machine is far above any sane threshold
    // at these sizes; an unreachable one checks the plumbing, not the speed.
    let mut args = vec![
        path_str(&baseline),
        "--np",
        "2",
        "--threshold",
        "1000000",
        "--csv",
        path_str(&new),
        "--summary",
        path_str(&summary),
        "--",
    ];
    args.extend(sweep);
    let out = script(&args, &gh);
    assert_eq!(code(&out), 0, "{}\n{}", stdout(&out), stderr(&out));
    assert!(
        stdout(&out).contains("OK: no row lost more than 1000000% busbw"),
        "{}",
        stdout(&out)
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(md.starts_with("## collbench compare: busbw\n\n**OK**"), "{md}");
    assert_eq!(std::fs::read_to_string(&gh).unwrap(), md);
    assert_eq!(Csv::read(&new).rows.len(), Csv::read(&baseline).rows.len());

    // a 4-rank baseline against a 2-rank run: compare's exit code 2
    let four = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare/base.csv");
    let mut args = vec![
        path_str(&four),
        "--csv",
        path_str(&new),
        "--summary",
        path_str(&summary),
        "--",
    ];
    args.extend(sweep);
    let out = script(&args, &gh);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("--allow-different-ranks"), "{}", stderr(&out));

    // an unknown baseline name: exit 2 before running anything
    let out = script(&["no-such-baseline"], &gh);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("no baseline 'no-such-baseline'"),
        "{}",
        stderr(&out)
    );
}
