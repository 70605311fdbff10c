//! The real-log corpus of issue 25 (tests/fixtures/corpus/): every entry
//! of MANIFEST.toml through the real binary, against the answer worked out
//! by hand from the log (its `check` keys).
//!
//! Replay: `collbench replay FILE --check-only` for each log (its exit
//! code, the rank kept, the kept sequence call by call, what it must say),
//! and, for the logs whose answer is a replay (`check.np`), the replay
//! itself under mpirun on the mpi backend: it must exit 0 with every
//! operation validated and 0 wrong elements. So no log of the corpus may
//! end in a false "validation failed", a silent merge of ranks or a guess
//! the output does not state. Import: every `[[import.check]]` command,
//! with its exit code, its rows, their rank count and samples, and what a
//! refusal must say.

use std::path::{Path, PathBuf};

use crate::common::*;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/corpus")
}

fn manifest() -> toml::Table {
    let text = std::fs::read_to_string(corpus().join("MANIFEST.toml")).unwrap();
    text.parse().unwrap()
}

fn entries<'a>(m: &'a toml::Table, kind: &str) -> Vec<&'a toml::Table> {
    m[kind]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_table().unwrap())
        .collect()
}

fn strings(v: Option<&toml::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

fn int(v: Option<&toml::Value>) -> Option<i64> {
    v.and_then(|v| v.as_integer())
}

/// Whitespace folded to single spaces.
fn fold(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The calls of the `kept:` block of a `--check-only` report.
fn kept_calls(text: &str) -> Vec<String> {
    text.lines()
        .skip_while(|l| !l.starts_with("kept: "))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(fold)
        .collect()
}

/// Every file in the corpus folders has an entry, and every entry a file.
#[test]
fn every_corpus_file_has_a_manifest_entry_with_an_answer_to_check() {
    let m = manifest();
    let mut listed: Vec<String> = Vec::new();
    for kind in ["replay", "import"] {
        for e in entries(&m, kind) {
            let file = e["file"].as_str().unwrap().to_string();
            assert!(corpus().join(&file).is_file(), "{file} is listed but missing");
            assert!(e.contains_key("check"), "{file} has no check");
            listed.push(file);
        }
    }
    for dir in ["replay", "import"] {
        for f in std::fs::read_dir(corpus().join(dir)).unwrap() {
            let name = f.unwrap().file_name().into_string().unwrap();
            if name.ends_with(".source.txt") {
                continue;
            }
            let path = format!("{dir}/{name}");
            assert!(listed.contains(&path), "{path} has no MANIFEST entry");
        }
    }
    assert_eq!(listed.len(), 36);
}

fn check_only(file: &Path, args: &[String]) -> std::process::Output {
    let mut argv = vec!["replay", path_str(file), "--check-only"];
    argv.extend(args.iter().map(String::as_str));
    collbench(&argv)
}

#[test]
fn every_replay_log_of_the_corpus_gives_its_hand_worked_answer() {
    let m = manifest();
    let dir = tempdir();
    let mut failures = Vec::new();
    for e in entries(&m, "replay") {
        let file = corpus().join(e["file"].as_str().unwrap());
        let name = e["file"].as_str().unwrap();
        let c = e["check"].as_table().unwrap();
        let args = strings(c.get("args"));
        let out = check_only(&file, &args);
        let text = format!("{}{}", stdout(&out), stderr(&out));
        let folded = fold(&text);
        let mut fail = |why: String| failures.push(format!("{name}: {why}\n{text}"));
        let want = int(c.get("exit")).unwrap() as i32;
        if code(&out) != want {
            fail(format!("--check-only exit {} instead of {want}", code(&out)));
        }
        if let Some(kept) = c.get("kept").and_then(|k| k.as_str())
            && !text.lines().any(|l| l.starts_with("kept: ") && l.contains(kept))
        {
            fail(format!("the kept rank is not {kept}"));
        }
        let sequence = strings(c.get("sequence"));
        if !sequence.is_empty() {
            let got = kept_calls(&text);
            let matches =
                got.len() == sequence.len() && got.iter().zip(&sequence).all(|(g, w)| g.starts_with(&fold(w)));
            if !matches {
                fail(format!("the kept sequence is {got:?}, not {sequence:?}"));
            }
        }
        for say in strings(c.get("says")) {
            if !folded.contains(&fold(&say)) {
                fail(format!("does not say {say:?}"));
            }
        }
        // never the COLL advice where the log has calls of some form
        if folded.contains("NCCL_DEBUG_SUBSYS including COLL") {
            fail("gives the NCCL_DEBUG_SUBSYS=COLL advice".into());
        }
        let also = strings(c.get("also_args"));
        if !also.is_empty() {
            let mut a = args.clone();
            a.extend(also);
            let out = check_only(&file, &a);
            let text = format!("{}{}", stdout(&out), stderr(&out));
            if code(&out) != int(c.get("also_exit")).unwrap() as i32 {
                failures.push(format!("{name} {a:?}: exit {}\n{text}", code(&out)));
            }
            for say in strings(c.get("also_says")) {
                if !fold(&text).contains(&fold(&say)) {
                    failures.push(format!("{name} {a:?}: does not say {say:?}\n{text}"));
                }
            }
        }
        // the replay itself: every operation validated, none wrong
        if let Some(np) = int(c.get("np")) {
            let csv = dir.path().join(format!("{}.csv", name.replace('/', "_")));
            let mut argv = argv![
                "replay",
                path_str(&file),
                "--backend mpi --steps 1 --warmup-steps 0 --csv",
                path_str(&csv)
            ];
            argv.extend(args.iter().map(String::as_str));
            let out = mpirun(np as usize, &argv);
            if code(&out) != 0 {
                failures.push(format!(
                    "{name}: the replay at {np} ranks exits {}\n{}{}",
                    code(&out),
                    stdout(&out),
                    stderr(&out)
                ));
                continue;
            }
            let rows = Csv::read(&csv);
            let ops = rows.rows.iter().filter(|r| rows.get(r, "kind") == "op").count();
            if ops != sequence.len() {
                failures.push(format!(
                    "{name}: the replay ran {ops} operations, not {}",
                    sequence.len()
                ));
            }
            for r in rows.rows.iter().filter(|r| rows.get(r, "kind") == "step") {
                if rows.get(r, "wrong") != "0" {
                    failures.push(format!(
                        "{name}: the replay's check found {} wrong elements",
                        rows.get(r, "wrong")
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn every_import_log_of_the_corpus_gives_its_hand_worked_answer() {
    let m = manifest();
    let dir = tempdir();
    let mut failures = Vec::new();
    for e in entries(&m, "import") {
        let name = e["file"].as_str().unwrap();
        let file = corpus().join(name);
        let from = if e["command"].as_str().unwrap().contains("--from osu") {
            "osu"
        } else {
            "nccl-tests"
        };
        for (i, c) in e["check"].as_array().unwrap().iter().enumerate() {
            let c = c.as_table().unwrap();
            let args = strings(c.get("args"));
            let csv = dir.path().join(format!("{}-{i}.csv", name.replace('/', "_")));
            let mut argv = vec!["import", "--from", from, path_str(&file), "-o", path_str(&csv)];
            argv.extend(args.iter().map(String::as_str));
            let out = collbench(&argv);
            let text = format!("{}{}", stdout(&out), stderr(&out));
            let what = format!("{name} {args:?}");
            let want = int(c.get("exit")).unwrap() as i32;
            if code(&out) != want {
                failures.push(format!("{what}: exit {} instead of {want}\n{text}", code(&out)));
                continue;
            }
            if let Some(say) = c.get("says").and_then(|s| s.as_str())
                && !text.contains(say)
            {
                failures.push(format!("{what}: does not say {say:?}\n{text}"));
            }
            if want != 0 {
                if csv.exists() {
                    failures.push(format!("{what}: refused, but wrote {}", csv.display()));
                }
                continue;
            }
            let rows = Csv::read(&csv);
            if let Some(n) = int(c.get("rows"))
                && rows.rows.len() != n as usize
            {
                failures.push(format!("{what}: {} rows instead of {n}", rows.rows.len()));
            }
            if let Some(n) = int(c.get("nranks"))
                && let Some(r) = rows.rows.iter().find(|r| rows.get(r, "nranks") != n.to_string())
            {
                failures.push(format!(
                    "{what}: a row of {} ranks instead of {n}",
                    rows.get(r, "nranks")
                ));
            }
            let samples = int(c.get("samples")).map_or(String::new(), |n| n.to_string());
            if let Some(r) = rows.rows.iter().find(|r| rows.get(r, "samples") != samples) {
                failures.push(format!(
                    "{what}: samples {:?} instead of {samples:?}",
                    rows.get(r, "samples")
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
