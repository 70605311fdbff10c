//! The examples of README.md and docs/*.md, executed, so that the docs
//! cannot drift from the tool (issue 15): one test per runnable block, so
//! that the job slots run them side by side (issue 34). Every fenced block
//! whose info string is `sh runnable` runs with bash (`-e -o pipefail`: the
//! block stops at its first failing command) and must exit 0; `exit=N`
//! expects code N, `exit=N|M` either (a verdict that the machine's noise
//! decides: those tests are named `verdict::...`, the others
//! `example::...`, and the verdicts run in the cluster tier,
//! .config/nextest.toml). Each test runs in a fresh folder holding copies
//! of the repository's `configs/`, `docs/data/`, `tests/fixtures/import/`
//! and `results/baselines/`, with the built binary first on PATH as
//! `collbench` and an `mpirun` wrapper that adds `--oversubscribe` (and,
//! only when running as root, Open MPI's root permission), as a 2-core CI
//! machine needs. Copies, not links: an example that writes a file must
//! never change the repository. A block that reads what an earlier block of
//! its page wrote says `after=NAME`, and the earlier one `id=NAME`: they
//! run in one test, in page order, in one folder.
//!
//! The tests are known only once the pages are read, so this target has a
//! harness of its own (`harness = false` in Cargo.toml; harness.rs). The
//! checks that running cannot make are checks.rs.

// The integration tests' helpers: the real binary, job slots, hang guard.
#[allow(unused_imports)]
#[path = "../it/common/mod.rs"]
mod common;

mod blocks;
mod checks;
mod harness;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use blocks::{Block, Runnable, groups, markdown_files, repo};
use common::*;
use harness::Test;

fn main() -> ExitCode {
    let mut tests = checks::tests();
    tests.extend(example_tests());
    harness::main(tests)
}

/// One test per group of runnable blocks (`blocks::groups`), named after
/// its first block; a page whose blocks cannot be grouped is one failing
/// test saying why.
fn example_tests() -> Vec<Test> {
    let mut tests = Vec::new();
    for (file, text) in markdown_files() {
        match groups(&file, &text) {
            Ok(groups) => {
                for group in groups {
                    let verdict = group.iter().any(|(_, r)| r.exit.len() > 1);
                    let kind = if verdict { "verdict" } else { "example" };
                    let name = format!("{kind}::{}", group[0].0.at());
                    tests.push(Test::new(name, move || run_group(&group)));
                }
            }
            Err(e) => tests.push(Test::new(format!("example::{file}"), move || panic!("{e}"))),
        }
    }
    tests
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("reading {}: {e}", from.display())) {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The first `name` on PATH.
fn on_path(name: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("no {name} on PATH"))
}

/// A folder to run one test's blocks in: `bin/` (collbench, the mpirun
/// wrapper) and `work/` (the working folder, with copies of what the
/// examples read).
struct Sandbox {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    work: PathBuf,
}

fn sandbox() -> Sandbox {
    let dir = tempdir();
    let (bin, work) = (dir.path().join("bin"), dir.path().join("work"));
    std::fs::create_dir_all(&bin).unwrap();
    for sub in ["configs", "docs/data", "tests/fixtures/import", "results/baselines"] {
        copy_tree(&repo().join(sub), &work.join(sub));
    }
    std::os::unix::fs::symlink(BIN, bin.join("collbench")).unwrap();
    let root = if is_root() {
        "export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1\n"
    } else {
        ""
    };
    let wrapper = format!(
        "#!/bin/sh\n# the docs test's mpirun: oversubscription for a small CI machine\n{root}exec '{}' --oversubscribe \"$@\"\n",
        on_path("mpirun").display()
    );
    let mpirun = bin.join("mpirun");
    std::fs::write(&mpirun, wrapper).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&mpirun, std::fs::Permissions::from_mode(0o755)).unwrap();
    Sandbox { _dir: dir, bin, work }
}

/// The last `n` characters of `s`.
fn tail(s: &str, n: usize) -> &str {
    let start = s.char_indices().rev().nth(n).map(|(i, _)| i).unwrap_or(0);
    &s[start..]
}

/// Runs one block in the sandbox; a failure as a report.
fn run_block(sandbox: &Sandbox, block: &Block, want: &[i32]) -> Result<(), String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![sandbox.bin.clone()];
    dirs.extend(std::env::split_paths(&path));
    let mut cmd = Command::new("bash");
    cmd.args(["-e", "-o", "pipefail", "-c", &block.code])
        .current_dir(&sandbox.work)
        .env("PATH", std::env::join_paths(dirs).unwrap())
        .env("NO_COLOR", "1")
        // CPU examples: the mpi backend even where a GPU is visible.
        .env("CUDA_VISIBLE_DEVICES", "");
    for var in argv!["OMPI_COMM_WORLD_RANK SLURM_JOB_ID COLLBENCH_NCCL_LIB NCCL_HOME COLLBENCH_TRANSPORT_APPLIED"] {
        cmd.env_remove(var);
    }
    let out = output_of(cmd);
    let got = code(&out);
    if want.contains(&got) {
        return Ok(());
    }
    Err(format!(
        "{}: the block exited {got}, expected {want:?}\n--- block ({})\n{}--- stdout (end)\n{}\n--- stderr (end)\n{}\n",
        block.at(),
        block.info,
        block.code,
        tail(&stdout(&out), 4000),
        tail(&stderr(&out), 4000),
    ))
}

/// Runs a group's blocks in order in one sandbox; fails at the first block
/// that ends with a code it does not allow (the later ones read its files).
fn run_group(group: &[(Block, Runnable)]) {
    let sandbox = sandbox();
    for (block, r) in group {
        if let Err(report) = run_block(&sandbox, block, &r.exit) {
            panic!("{report}");
        }
    }
}
