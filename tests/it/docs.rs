//! The examples of README.md and docs/*.md, executed, so that the docs
//! cannot drift from the tool (issue 15). Every fenced block whose info
//! string is `sh runnable` runs with bash (`-e -o pipefail`: the block stops
//! at its first failing command) and must exit 0; `sh runnable exit=N`
//! expects the block to end with code N. The blocks of one file run in
//! order in one fresh folder (a later block may use an earlier block's
//! files) holding copies of the repository's `configs/`, `docs/data/`,
//! `tests/fixtures/import/` and `results/baselines/`, with the built binary
//! first on PATH as `collbench` and an `mpirun` wrapper that adds
//! `--oversubscribe` (and, only when running as root, Open MPI's root
//! permission), as a 2-core CI machine needs. Copies, not links: an example
//! that writes a file must never change the repository.
//!
//! Besides running them, the examples are checked for what running cannot
//! catch: a runnable example above two ranks must ask for oversubscription
//! itself (the wrapper would hide it), a config file must be of the kind
//! its command takes (a run config is never a suite), and the README shows
//! how to build collbench before its first `collbench` command.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;

/// The repository root.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// One fenced block of a markdown file.
#[derive(Debug, Clone)]
struct Block {
    /// The file, relative to the repository root.
    file: String,
    /// The line of the opening fence, from 1.
    line: usize,
    info: String,
    code: String,
}

/// What a block's info string asks for: run it, and with which exit codes.
#[derive(Debug, PartialEq)]
enum Kind {
    Plain,
    Runnable { exit: Vec<i32> },
}

impl Block {
    /// `sh runnable`, `sh runnable exit=N` or `sh runnable exit=N|M` (a
    /// verdict that the machine's noise decides, as compare's on identical
    /// runs: either code, never another); anything else that mentions
    /// `runnable` is a mistake in the docs, reported rather than skipped.
    fn kind(&self) -> Result<Kind, String> {
        let words: Vec<&str> = self.info.split_whitespace().collect();
        if !words.contains(&"runnable") {
            return Ok(Kind::Plain);
        }
        let bad = || format!("{}:{}: bad info string {:?}", self.file, self.line, self.info);
        match words.as_slice() {
            ["sh", "runnable"] => Ok(Kind::Runnable { exit: vec![0] }),
            ["sh", "runnable", exit] => exit
                .strip_prefix("exit=")
                .and_then(|codes| codes.split('|').map(|n| n.parse().ok()).collect::<Option<Vec<i32>>>())
                .map(|exit| Kind::Runnable { exit })
                .ok_or_else(bad),
            _ => Err(bad()),
        }
    }

    fn runnable(&self) -> Option<Vec<i32>> {
        match self.kind() {
            Ok(Kind::Runnable { exit }) => Some(exit),
            Ok(Kind::Plain) => None,
            Err(e) => panic!("{e}"),
        }
    }
}

/// Every fenced block of `text` (backtick fences, indented or not, as in
/// list items); the content loses the opening fence's indentation.
fn blocks(file: &str, text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<(usize, usize, String, Vec<String>)> = None;
    for (i, line) in text.lines().enumerate() {
        let indent = line.len() - line.trim_start().len();
        let trimmed = line.trim_start();
        match &mut open {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some((i + 1, indent, info.trim().to_string(), Vec::new()));
                }
            }
            Some((start, fence_indent, info, lines)) => {
                if trimmed.trim_end() == "```" {
                    out.push(Block {
                        file: file.to_string(),
                        line: *start,
                        info: std::mem::take(info),
                        code: lines.join("\n") + "\n",
                    });
                    open = None;
                } else {
                    let cut = indent.min(*fence_indent);
                    lines.push(line[cut..].to_string());
                }
            }
        }
    }
    assert!(open.is_none(), "{file}: a code fence is never closed");
    out
}

/// README.md, then docs/*.md in name order, as (relative path, text).
fn markdown_files() -> Vec<(String, String)> {
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo().join("docs"))
        .expect("docs/ folder")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    let mut files = vec![repo().join("README.md")];
    files.extend(docs);
    files
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(repo()).unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("reading {rel}: {e}"));
            (rel, text)
        })
        .collect()
}

fn all_blocks() -> Vec<Block> {
    markdown_files().iter().flat_map(|(f, t)| blocks(f, t)).collect()
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

/// A folder to run one file's blocks in: `bin/` (collbench, the mpirun
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
        "{}:{}: the block exited {got}, expected {want:?}\n--- block ({})\n{}--- stdout (end)\n{}\n--- stderr (end)\n{}\n",
        block.file,
        block.line,
        block.info,
        block.code,
        tail(&stdout(&out), 4000),
        tail(&stderr(&out), 4000),
    ))
}

/// Runs every runnable block of each file, in order, one sandbox per file;
/// fails with every failing block's report.
fn run_files(files: &[(String, String)]) -> usize {
    let mut failures = Vec::new();
    let mut ran = 0;
    for (file, text) in files {
        let runnable: Vec<(Block, Vec<i32>)> = blocks(file, text)
            .into_iter()
            .filter_map(|b| b.runnable().map(|exit| (b, exit)))
            .collect();
        if runnable.is_empty() {
            continue;
        }
        let sandbox = sandbox();
        for (block, exit) in &runnable {
            ran += 1;
            if let Err(report) = run_block(&sandbox, block, exit) {
                failures.push(report);
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {ran} runnable examples failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    ran
}

/// The README's examples need at least this many runnable blocks, so that
/// a broken parser or a renamed info string cannot find none and pass.
const README_RUNNABLE_AT_LEAST: usize = 12;

#[test]
fn every_runnable_example_of_the_readme_runs_with_its_exit_code() {
    let files: Vec<_> = markdown_files().into_iter().filter(|(f, _)| f == "README.md").collect();
    let ran = run_files(&files);
    assert!(ran >= README_RUNNABLE_AT_LEAST, "only {ran} runnable README examples");
}

#[test]
fn every_runnable_example_of_the_docs_pages_runs_with_its_exit_code() {
    let files: Vec<_> = markdown_files().into_iter().filter(|(f, _)| f != "README.md").collect();
    let ran = run_files(&files);
    assert!(ran >= 10, "only {ran} runnable examples in docs/");
}

#[test]
fn the_readme_has_enough_runnable_examples_to_mean_something() {
    let (_, readme) = &markdown_files()[0];
    let n = blocks("README.md", readme)
        .iter()
        .filter(|b| b.runnable().is_some())
        .count();
    assert!(n >= README_RUNNABLE_AT_LEAST, "{n} runnable blocks in the README");
}

/// The rank count of an `mpirun` command line: the value after -np, -n or
/// --np.
fn ranks_of(words: &[&str]) -> Option<usize> {
    words
        .windows(2)
        .find(|w| matches!(w[0], "-np" | "-n" | "--np"))
        .and_then(|w| w[1].parse().ok())
}

#[test]
fn runnable_examples_above_two_ranks_ask_for_oversubscription_themselves() {
    let mut bad = Vec::new();
    for b in all_blocks().iter().filter(|b| b.runnable().is_some()) {
        for (i, line) in b.code.lines().enumerate() {
            let words: Vec<&str> = line.split_whitespace().collect();
            let Some(at) = words.iter().position(|w| *w == "mpirun") else {
                continue;
            };
            let launch = &words[at..];
            if ranks_of(launch).is_some_and(|n| n > 2) && !launch.contains(&"--oversubscribe") {
                bad.push(format!("{}:{}: {line}", b.file, b.line + 1 + i));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "more than two ranks without --oversubscribe fail on a 2-core machine:\n{}",
        bad.join("\n")
    );
}

/// Whether a TOML file is a suite (it lists transports) or a run config.
fn is_suite(path: &Path) -> bool {
    let text = std::fs::read_to_string(path).unwrap();
    let table: toml::Table = text.parse().unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    table.contains_key("transports")
}

#[test]
fn every_config_file_an_example_names_exists_and_is_of_the_kind_its_command_takes() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for b in all_blocks() {
        for (i, line) in b.code.lines().enumerate() {
            let at = format!("{}:{}", b.file, b.line + 1 + i);
            let words: Vec<&str> = line.split_whitespace().collect();
            for (j, w) in words.iter().enumerate() {
                let Some(name) = w.strip_prefix("configs/").filter(|n| n.ends_with(".toml")) else {
                    continue;
                };
                let path = repo().join("configs").join(name);
                if !path.is_file() {
                    bad.push(format!("{at}: no such file configs/{name}"));
                    continue;
                }
                let previous = if j > 0 { words[j - 1] } else { "" };
                let wants_suite = match previous {
                    "suite" | "--suite" => true,
                    "--config" => false,
                    _ => continue,
                };
                checked += 1;
                if is_suite(&path) != wants_suite {
                    let kind = if wants_suite { "a suite" } else { "a run config" };
                    bad.push(format!("{at}: configs/{name} is passed as {kind} but is not one"));
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(checked >= 4, "only {checked} config files checked");
}

/// Whether a line of a block runs collbench as a command (not a path to
/// it, not a word in a comment).
fn runs_collbench(line: &str) -> bool {
    let code = line.split(" #").next().unwrap_or("");
    code.split_whitespace().any(|w| w == "collbench")
}

#[test]
fn the_readme_builds_collbench_before_its_first_collbench_command() {
    let (_, readme) = &markdown_files()[0];
    let blocks = blocks("README.md", readme);
    // Commands to type are `sh` blocks; a transcript of output (the table
    // at the top, with its `$` line) is not one.
    let first_use = blocks
        .iter()
        .position(|b| b.info.split_whitespace().next() == Some("sh") && b.code.lines().any(runs_collbench))
        .expect("the README runs collbench somewhere");
    let build = blocks
        .iter()
        .position(|b| b.code.contains("cargo build") || b.code.contains("cargo install"))
        .expect("the README shows how to build collbench");
    assert!(
        build <= first_use,
        "README.md:{}: `collbench` is used before the build step (README.md:{})",
        blocks[first_use].line,
        blocks[build].line
    );
}

#[test]
fn the_block_reader_keeps_order_lines_indentation_and_exit_codes() {
    let text = "intro\n```sh runnable\necho a\n```\n\n1. item\n\n   ```sh runnable exit=4\n   false\n     indented\n   ```\n```toml\nx = 1\n```\n";
    let b = blocks("t.md", text);
    assert_eq!(b.len(), 3);
    assert_eq!((b[0].line, b[0].code.as_str()), (2, "echo a\n"));
    assert_eq!(b[0].kind(), Ok(Kind::Runnable { exit: vec![0] }));
    assert_eq!((b[1].line, b[1].code.as_str()), (8, "false\n  indented\n"));
    assert_eq!(b[1].kind(), Ok(Kind::Runnable { exit: vec![4] }));
    let either = Block {
        info: "sh runnable exit=0|4".into(),
        ..b[0].clone()
    };
    assert_eq!(either.kind(), Ok(Kind::Runnable { exit: vec![0, 4] }));
    assert_eq!(b[2].kind(), Ok(Kind::Plain));
    let typo = Block {
        info: "sh runnable exit=four".into(),
        ..b[0].clone()
    };
    assert!(typo.kind().is_err());
    assert!(runs_collbench("mpirun -np 2 collbench run -e 1K"));
    assert!(!runs_collbench("target/release/collbench run  # collbench"));
}

/// GitHub's anchor for a heading: lower case, punctuation dropped but `-`
/// and `_`, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a markdown text's headings (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_points_to_a_file_and_heading_that_exist() {
    let files = markdown_files();
    let mut bad = Vec::new();
    let mut checked = 0;
    for (file, text) in &files {
        let dir = repo().join(file).parent().unwrap().to_path_buf();
        for (n, line) in text.lines().enumerate() {
            for piece in line.split("](").skip(1) {
                let Some(target) = piece.split(')').next() else {
                    continue;
                };
                if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                    continue;
                }
                let (path, fragment) = target.split_once('#').unwrap_or((target, ""));
                let resolved = if path.is_empty() {
                    repo().join(file)
                } else {
                    dir.join(path)
                };
                checked += 1;
                if !resolved.exists() {
                    bad.push(format!("{file}:{}: {target}: no such file", n + 1));
                    continue;
                }
                if !fragment.is_empty() && resolved.extension().is_some_and(|x| x == "md") {
                    let page = std::fs::read_to_string(&resolved).unwrap();
                    if !anchors(&page).iter().any(|a| a == fragment) {
                        bad.push(format!("{file}:{}: {target}: no such heading", n + 1));
                    }
                }
            }
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(checked >= 30, "only {checked} links checked");
    assert_eq!(
        anchor("nccl-tests' launch options: `-m`, `-G`, `-R`"),
        "nccl-tests-launch-options--m--g--r"
    );
}
