//! collbench: a collective-communication benchmark in the tradition of
//! nccl-tests. See the README for usage, docs/ for contracts (formulas,
//! CSV columns, exit codes) and docs/ARCHITECTURE.md for how the code is
//! organised.
//!
//! Layers (docs/ARCHITECTURE.md, "Layers", which two tests here hold the
//! code to): `app` dispatches; `session` runs one task on every rank (the
//! sweep, a workload or replay, links, check) after one shared set-up;
//! `config` turns each command's options (`cli`, clap only, in option
//! groups) into a validated configuration and job; `check`, `links`,
//! `compare`, `plot` and `import` judge, find and format; `engine` does
//! every measurement (one `Context`, two timed loops, one validation path)
//! over a `world` (control plane) and a `backend` (data plane), with
//! `collective` descriptions, `record` rows and `report` sinks. `unsafe`
//! lives only in the FFI binding modules, which opt in: `backend::mpi::raw`
//! `backend::nccl::sys` and `backend::nccl::profiler`.
#![deny(unsafe_code)]

pub mod app;
pub mod backend;
pub mod buffer;
pub mod check;
pub mod cli;
pub mod clock;
pub mod collective;
pub mod compare;
pub mod config;
pub mod doctor;
pub mod engine;
pub mod error;
pub mod import;
pub mod info;
pub mod links;
pub mod nccl_log;
pub mod plan;
pub mod plot;
pub mod record;
pub mod report;
pub mod session;
pub mod stats;
pub mod suite;
pub mod topology;
pub mod types;
pub mod workload;
pub mod world;

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// Every `.rs` file under src/.
    fn rust_files() -> Vec<PathBuf> {
        let mut files = Vec::new();
        let mut stack = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    files.push(path);
                }
            }
        }
        files
    }

    /// Top-level module -> the top-level modules its code names through
    /// `crate::` paths (`use crate::engine::...`, `crate::error::say(..)`),
    /// comments left out. `main.rs` and `lib.rs` are not modules.
    fn module_graph() -> BTreeMap<String, BTreeSet<String>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for path in rust_files() {
            let rel = path.strip_prefix(&src).unwrap();
            let first = rel.components().next().unwrap().as_os_str().to_string_lossy();
            let module = first.trim_end_matches(".rs").to_string();
            if module == "main" || module == "lib" {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let uses = graph.entry(module.clone()).or_default();
            for line in text.lines() {
                let code = line.split("//").next().unwrap_or("");
                for (at, _) in code.match_indices("crate::") {
                    let rest = &code[at + 7..];
                    // `crate::{a, b::c}` names several
                    let names: Vec<&str> = match rest.strip_prefix('{') {
                        Some(group) => group.split([',', '}']).map(|n| n.trim()).collect(),
                        None => vec![rest],
                    };
                    for n in names {
                        let name: String = n
                            .chars()
                            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                            .collect();
                        if !name.is_empty() && name != module {
                            uses.insert(name);
                        }
                    }
                }
            }
        }
        graph
    }

    /// A cycle through `from`, as the modules along it.
    fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> Option<Vec<String>> {
        let mut path = vec![from.to_string()];
        fn walk(g: &BTreeMap<String, BTreeSet<String>>, path: &mut Vec<String>, seen: &mut BTreeSet<String>) -> bool {
            let last = path.last().cloned().unwrap_or_default();
            for next in g.get(&last).into_iter().flatten() {
                if *next == path[0] {
                    path.push(next.clone());
                    return true;
                }
                if seen.insert(next.clone()) {
                    path.push(next.clone());
                    if walk(g, path, seen) {
                        return true;
                    }
                    path.pop();
                }
            }
            false
        }
        walk(graph, &mut path, &mut BTreeSet::new()).then_some(path)
    }

    /// The layers docs/ARCHITECTURE.md draws: each line of its `Layers`
    /// block names modules (before the first run of two spaces, separated
    /// by commas), the top line first.
    fn documented_layers() -> BTreeMap<String, usize> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/ARCHITECTURE.md");
        let page = std::fs::read_to_string(path).unwrap();
        let (_, after) = page
            .split_once("## Layers")
            .expect("ARCHITECTURE.md has a Layers section");
        let block = after.split("```").nth(1).expect("the Layers section has a code block");
        let mut levels = BTreeMap::new();
        for (level, line) in block.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let names = line.split("  ").next().unwrap_or("");
            for name in names.split(',') {
                levels.insert(name.trim().to_string(), level);
            }
        }
        levels
    }

    #[test]
    fn every_import_points_down_the_layers() {
        let graph = module_graph();
        let levels = documented_layers();
        let mut wrong = Vec::new();
        for (module, uses) in &graph {
            let Some(&from) = levels.get(module) else {
                wrong.push(format!("{module} is not in ARCHITECTURE.md's layers"));
                continue;
            };
            for used in uses.iter().filter(|u| graph.contains_key(*u)) {
                match levels.get(used) {
                    Some(&to) if to > from => {}
                    Some(_) => wrong.push(format!("{module} uses {used}, which is not below it")),
                    None => wrong.push(format!("{used} is not in ARCHITECTURE.md's layers")),
                }
            }
        }
        wrong.dedup();
        assert!(wrong.is_empty(), "docs/ARCHITECTURE.md's layers:\n{}", wrong.join("\n"));
    }

    /// Every `.md` file a comment of src/ names (a line starting `//`),
    /// with the line it is on; a page of another project is named with
    /// the project first (`nccl-tests' doc/PERFORMANCE.md`) and left out.
    fn markdown_named_in_comments() -> Vec<(String, String)> {
        let mut named = Vec::new();
        for path in rust_files() {
            for (i, line) in std::fs::read_to_string(&path).unwrap().lines().enumerate() {
                let Some(comment) = line.trim_start().strip_prefix("//") else {
                    continue;
                };
                let words = comment.split(|c: char| !(c.is_ascii_alphanumeric() || "._-/".contains(c)));
                for word in words.filter(|w| w.ends_with(".md") && w.len() > 3) {
                    let before = &comment[..comment.find(word).unwrap_or(0)];
                    if !before.contains("nccl-tests") {
                        named.push((word.to_string(), format!("{}:{}", path.display(), i + 1)));
                    }
                }
            }
        }
        named
    }

    #[test]
    fn every_markdown_file_a_comment_names_exists() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let named = markdown_named_in_comments();
        assert!(named.iter().any(|(md, _)| md == "docs/ARCHITECTURE.md"), "{named:?}");
        let missing: Vec<String> = named
            .iter()
            .filter(|(md, _)| !root.join(md).is_file())
            .map(|(md, at)| format!("{at}: {md}"))
            .collect();
        assert!(
            missing.is_empty(),
            "comments name pages that do not exist:\n{}",
            missing.join("\n")
        );
    }

    #[test]
    fn no_module_cycles() {
        let graph = module_graph();
        assert!(
            graph.contains_key("engine") && graph.contains_key("report"),
            "{graph:?}"
        );
        let cycles: Vec<String> = graph
            .keys()
            .filter_map(|m| cycle_from(&graph, m))
            .map(|c| c.join(" -> "))
            .collect();
        assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
    }
}
