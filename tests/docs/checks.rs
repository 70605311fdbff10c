//! What running the examples cannot catch: a runnable example above two
//! ranks must ask for oversubscription itself (the wrapper of main.rs
//! would hide it), a config file must be of the kind its command takes (a
//! run config is never a suite), the README shows how to build collbench
//! before its first `collbench` command and has enough runnable examples
//! to mean something, every relative link points to a file and heading
//! that exist, the workload page's output sample counts what its command
//! prints, and the block reader itself.

use std::path::Path;

use crate::blocks::*;
use crate::harness::Test;

/// The checks, as tests.
pub fn tests() -> Vec<Test> {
    vec![
        Test::new(
            "check::the_readme_has_enough_runnable_examples_to_mean_something",
            enough_runnable_examples,
        ),
        Test::new(
            "check::runnable_examples_above_two_ranks_ask_for_oversubscription_themselves",
            runnable_examples_above_two_ranks_ask_for_oversubscription_themselves,
        ),
        Test::new(
            "check::every_config_file_an_example_names_exists_and_is_of_the_kind_its_command_takes",
            every_config_file_an_example_names_exists_and_is_of_the_kind_its_command_takes,
        ),
        Test::new(
            "check::the_readme_builds_collbench_before_its_first_collbench_command",
            the_readme_builds_collbench_before_its_first_collbench_command,
        ),
        Test::new(
            "check::the_block_reader_keeps_order_lines_indentation_exit_codes_and_groups",
            the_block_reader_keeps_order_lines_indentation_exit_codes_and_groups,
        ),
        Test::new(
            "check::every_relative_link_points_to_a_file_and_heading_that_exist",
            every_relative_link_points_to_a_file_and_heading_that_exist,
        ),
        Test::new(
            "check::the_workload_output_sample_shows_what_its_command_prints",
            the_workload_output_sample_shows_what_its_command_prints,
        ),
    ]
}

/// docs/workload.md's "Reading the output" is the output of the command
/// its "Running it" example runs: each line of the sample that counts a
/// step's operations or its volume (first principles, the same on any
/// machine and backend) is one the binary prints for that command, run
/// here as threads on the memory backend with one step. (The sample once
/// said 5 operations and 40.00 MB where the command printed 2 and 20.00.)
fn the_workload_output_sample_shows_what_its_command_prints() {
    let file = "docs/workload.md";
    let text = std::fs::read_to_string(repo().join(file)).unwrap();
    let heading = text
        .lines()
        .position(|l| l == "### Reading the output")
        .expect("the heading")
        + 1;
    let page = blocks(file, &text);
    let command = page
        .iter()
        .filter(|b| b.line < heading && b.runnable().is_some())
        .find_map(|b| b.code.lines().find_map(|l| l.split_once("collbench workload ")))
        .expect("a runnable `collbench workload` example before the sample")
        .1;
    let sample = &page.iter().find(|b| b.line > heading).expect("the sample").code;
    let mut args: Vec<&str> = vec!["workload"];
    args.extend(command.split(" #").next().unwrap().split_whitespace());
    assert!(args.windows(2).any(|w| w == ["--backend", "mpi"]), "{command}");
    args.extend(["-g", "2", "--backend", "memory", "--steps", "1", "--warmup-steps", "0"]);
    let out = crate::common::collbench(&args);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counted: Vec<&str> = sample
        .lines()
        .filter(|l| l.contains("operations per step") || l.contains("sent by each rank per step"))
        .collect();
    assert!(counted.len() >= 4, "{file}:{heading}: {counted:?}");
    for line in counted {
        assert!(
            printed.lines().any(|p| p == line),
            "{file}: the sample's line\n{line}\nis not printed by collbench {}:\n{printed}",
            args.join(" ")
        );
    }
}

/// The README needs at least this many runnable blocks and the docs pages
/// this many, so that a broken reader or a renamed info string cannot find
/// none and pass.
const README_RUNNABLE_AT_LEAST: usize = 12;
const PAGES_RUNNABLE_AT_LEAST: usize = 10;

fn enough_runnable_examples() {
    let files = markdown_files();
    let count = |readme: bool| {
        files
            .iter()
            .filter(|(f, _)| (f == "README.md") == readme)
            .flat_map(|(f, t)| blocks(f, t))
            .filter(|b| b.runnable().is_some())
            .count()
    };
    let (readme, pages) = (count(true), count(false));
    assert!(
        readme >= README_RUNNABLE_AT_LEAST,
        "{readme} runnable blocks in the README"
    );
    assert!(pages >= PAGES_RUNNABLE_AT_LEAST, "{pages} runnable blocks in docs/");
}

/// The rank count of an `mpirun` command line: the value after -np, -n or
/// --np.
fn ranks_of(words: &[&str]) -> Option<usize> {
    words
        .windows(2)
        .find(|w| matches!(w[0], "-np" | "-n" | "--np"))
        .and_then(|w| w[1].parse().ok())
}

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

fn the_block_reader_keeps_order_lines_indentation_exit_codes_and_groups() {
    let text = "intro\n```sh runnable\necho a\n```\n\n1. item\n\n   ```sh runnable exit=4 id=x\n   false\n     indented\n   ```\n```toml\nx = 1\n```\n```sh runnable after=x\necho b\n```\n";
    let b = blocks("t.md", text);
    assert_eq!(b.len(), 4);
    assert_eq!((b[0].line, b[0].code.as_str()), (2, "echo a\n"));
    let runnable = |exit: Vec<i32>, id: Option<&str>, after: Option<&str>| Runnable {
        exit,
        id: id.map(str::to_string),
        after: after.map(str::to_string),
    };
    assert_eq!(b[0].kind(), Ok(Some(runnable(vec![0], None, None))));
    assert_eq!((b[1].line, b[1].code.as_str()), (8, "false\n  indented\n"));
    assert_eq!(b[1].kind(), Ok(Some(runnable(vec![4], Some("x"), None))));
    let either = Block {
        info: "sh runnable exit=0|4".into(),
        ..b[0].clone()
    };
    assert_eq!(either.kind(), Ok(Some(runnable(vec![0, 4], None, None))));
    assert_eq!(b[2].kind(), Ok(None));
    for typo in [
        "sh runnable exit=four",
        "sh runnable after=",
        "sh runnable later",
        "bash runnable",
    ] {
        let bad = Block {
            info: typo.into(),
            ..b[0].clone()
        };
        assert!(bad.kind().is_err(), "{typo}");
    }
    // the block after=x runs in x's test, after it
    let g = groups("t.md", text).unwrap();
    let lines: Vec<Vec<usize>> = g.iter().map(|g| g.iter().map(|(b, _)| b.line).collect()).collect();
    assert_eq!(lines, [vec![2], vec![8, 15]]);
    assert!(groups("t.md", "```sh runnable after=y\ntrue\n```\n").is_err());
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
