//! `collbench compare` as a user and a CI job meet it: golden output for
//! every format; each verdict for its planted reason (fixtures written by
//! tests/fixtures/compare/make.py, see its README); a baseline of several
//! launches judged against their spread; rows missing from the new run
//! exit 4 unless `--allow-missing`; a method change refused (exit 2) or
//! warned; old CSVs without method columns warned once; incompatible
//! inputs refused with one line; two single launches of a real run with
//! half its busbw fail by the launch bound; rows no measurement gives
//! refused naming the file and the line.
//!
//! Golden files live in tests/fixtures/compare/golden; after a deliberate
//! change of a format, regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --test it compare::` and review the diff.

use std::path::{Path, PathBuf};

use crate::common::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare")
}

fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// Runs compare in the fixtures folder (so paths in the output are short
/// and stable) and checks stdout against the golden file.
fn golden(args: &[&str], file: &str, want_code: i32) {
    let out = collbench_in(&fixtures(), args);
    assert_eq!(code(&out), want_code, "{args:?}: {}", stderr(&out));
    let got = stdout(&out);
    let path = fixtures().join("golden").join(file);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        got, want,
        "{args:?} differs from {file}; UPDATE_GOLDEN=1 regenerates it"
    );
}

fn json(args: &[&str]) -> (i32, serde_json::Value) {
    let mut full = vec!["compare", "--format", "json"];
    full.extend(args);
    let out = collbench(&full);
    let doc = serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&out)));
    (code(&out), doc)
}

/// The row of `doc` for a case.
fn row<'a>(doc: &'a serde_json::Value, collective: &str, placement: &str, size: u64) -> &'a serde_json::Value {
    doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["size_bytes"] == size && r["placement"] == placement && r["collective"] == collective)
        .unwrap_or_else(|| panic!("no {collective} {placement} {size} row"))
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `file` with every row of one case rewritten by `edit` (the cells of
/// the row, by header name).
fn edited(file: &Path, case: (&str, &str, &str), edit: impl Fn(&mut Vec<String>, &dyn Fn(&str) -> usize)) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(str::to_string).collect();
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut out = header.join(",") + "\n";
    for line in lines {
        let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
        if (
            cells[at("collective")].as_str(),
            cells[at("placement")].as_str(),
            cells[at("size_bytes")].as_str(),
        ) == case
        {
            edit(&mut cells, &at);
        }
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// `file` with the times of one case multiplied by `factor` (and its
/// bandwidths divided by it).
fn slowed(file: &Path, case: (&str, &str, &str), factor: f64) -> String {
    edited(file, case, |cells, at| {
        for c in ["time_us", "time_min_us", "time_max_us"] {
            let v: f64 = cells[at(c)].parse().unwrap();
            cells[at(c)] = (v * factor).to_string();
        }
        for c in ["algbw_gbps", "busbw_gbps"] {
            let v: f64 = cells[at(c)].parse().unwrap();
            cells[at(c)] = (v / factor).to_string();
        }
    })
}

/// `file` with every time multiplied by `factor` and every bandwidth
/// divided by it.
fn all_slowed(file: &Path, factor: f64) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
        for (at, name) in header.iter().enumerate().filter(|_| i > 0) {
            let by = match *name {
                "time_us" | "time_min_us" | "time_max_us" => factor,
                "algbw_gbps" | "busbw_gbps" => 1.0 / factor,
                _ => continue,
            };
            cells[at] = (cells[at].parse::<f64>().unwrap() * by).to_string();
        }
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// `file` with `column` of data line `line` (the header is line 1) set to
/// `value`.
fn with_cell(file: &Path, line: usize, column: &str, value: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let at = text
        .lines()
        .next()
        .unwrap()
        .split(',')
        .position(|h| h == column)
        .unwrap();
    let mut out = String::new();
    for (i, l) in text.lines().enumerate() {
        let mut cells: Vec<&str> = l.split(',').collect();
        if i + 1 == line {
            cells[at] = value;
        }
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

/// Every row of `file` with `column` set to `value`.
fn with_column(file: &Path, column: &str, value: &str) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let at = header.split(',').position(|h| h == column).unwrap();
    let mut out = format!("{header}\n");
    for line in lines {
        let mut cells: Vec<&str> = line.split(',').collect();
        cells[at] = value;
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[test]
fn every_format_matches_its_golden_file() {
    // one launch a side: what moved is unproven (exit 4: broadcast is missing)
    golden(&["compare", "base.csv", "new.csv"], "one-launch-table.txt", 4);
    // judged inside the launches, each verdict shows
    golden(&["compare", "--within-launch", "base.csv", "new.csv"], "table.txt", 4);
    golden(
        &argv!["compare --within-launch --format markdown base.csv new.csv"],
        "markdown.md",
        4,
    );
    golden(
        &["compare", "--within-launch", "--format", "json", "base.csv", "new.csv"],
        "json.json",
        4,
    );
    golden(&["compare", "launches", "new-launch.csv"], "launches-table.txt", 4);
    // one sample per point: the values, no claim, and what would make one
    golden(&["compare", "--by", "hierarchy", "modes.csv"], "modes-table.txt", 0);
    // five samples: speedups with intervals, the winner, the crossover
    golden(
        &["compare", "--by", "hierarchy", "modes-repeated.csv"],
        "modes-repeated-table.txt",
        0,
    );
    golden(
        &argv!["compare --by hierarchy --format markdown modes-repeated.csv"],
        "modes-markdown.md",
        0,
    );
    golden(
        &argv!["compare --by hierarchy --format json --metric time modes-repeated.csv"],
        "modes-json.json",
        0,
    );
}

#[test]
fn the_golden_pair_shows_each_verdict_for_the_right_reason() {
    // one launch a side: the changes beyond the threshold are unproven
    let (code, doc) = json(&[path_str(&fixture("base.csv")), path_str(&fixture("new.csv"))]);
    assert_eq!(
        (code, doc["unproven"].as_u64(), doc["regressed"].as_u64()),
        (4, Some(3), Some(0))
    );
    for (c, p, s) in [
        ("all_reduce", "out_of_place", 1 << 20),
        ("all_reduce", "out_of_place", 65536),
        ("all_gather", "out_of_place", 65536),
    ] {
        assert_eq!(row(&doc, c, p, s)["verdict"], "unproven", "{c} {p} {s}");
    }
    // judged inside the launches (--within-launch)
    let (code, doc) = json(&[
        "--within-launch",
        path_str(&fixture("base.csv")),
        path_str(&fixture("new.csv")),
    ]);
    assert_eq!(code, 4);
    let verdict = |c: &str, p: &str, s: u64| row(&doc, c, p, s)["verdict"].as_str().unwrap().to_string();
    // busbw down 20% in 5 tight samples a side: the rank test is clear
    assert_eq!(verdict("all_reduce", "out_of_place", 1 << 20), "regressed");
    let r = row(&doc, "all_reduce", "out_of_place", 1 << 20);
    assert_eq!(
        (r["test"].as_str(), r["p_value"].as_f64()),
        (Some("mann_whitney"), Some(2.0 / 252.0))
    );
    assert_eq!(
        (r["base_stats"]["n"].as_u64(), r["new_stats"]["n"].as_u64()),
        (Some(5), Some(5))
    );
    assert_eq!(r["base_stats"]["samples"].as_array().unwrap().len(), 5);
    // up 18%: improved; the same distribution: within noise
    assert_eq!(verdict("all_reduce", "out_of_place", 65536), "improved");
    assert_eq!(verdict("all_reduce", "in_place", 65536), "within_noise");
    // 40% noise on both sides: too noisy to judge at 5%
    assert_eq!(verdict("all_reduce", "in_place", 1 << 20), "too_noisy");
    assert!(
        row(&doc, "all_reduce", "in_place", 1 << 20)["noise_pct"]
            .as_f64()
            .unwrap()
            > 5.0
    );
    // 2% slower, clearly (p = 2/252), but under the threshold
    assert_eq!(verdict("all_gather", "out_of_place", 1024), "within_noise");
    // one sample a side: the threshold alone, and the output says so
    let one = row(&doc, "all_gather", "out_of_place", 65536);
    assert_eq!(one["verdict"], "regressed");
    assert_eq!(
        (one["test"].as_str(), one["fallback"].as_str()),
        (Some("threshold_only"), Some("one_sample"))
    );
    assert!(one["p_value"].is_null() && one["interval_pct"].is_null());
    // broadcast only in base: missing, a failure; sendrecv only in new: listed
    assert_eq!(doc["only_in_base"][0]["collective"], "broadcast");
    assert_eq!(doc["only_in_new"][0]["collective"], "sendrecv");
    assert_eq!(doc["missing_fails"], true);
    assert_eq!(doc["overall"]["compared"], 6);
    assert!(doc["overall"]["geomean_change_pct"].is_number());
}

#[test]
fn a_planted_slowdown_exits_4_names_the_row_and_says_so_once_on_stderr() {
    let dir = tempdir();
    // the base itself, with one case 25% slower: busbw x 0.8
    let base = fixture("base.csv");
    let new = write(
        dir.path(),
        "new.csv",
        &slowed(&base, ("all_reduce", "out_of_place", "65536"), 1.25),
    );
    // one launch a side: unproven, exit 0, and the output says why
    let out = ok(collbench(&["compare", path_str(&base), path_str(&new)]));
    let text = stdout(&out);
    assert_eq!(text.lines().filter(|l| l.ends_with("unproven")).count(), 1, "{text}");
    assert!(
        text.contains("NO VERDICT: 1 of 7 rows changed busbw by more than 5%, but one launch per side"),
        "{text}"
    );
    assert!(text.contains("note: 1 row unproven:"), "{text}");
    // judged inside the launches: the regression, named once
    let out = exits(
        4,
        collbench(&["compare", "--within-launch", path_str(&base), path_str(&new)]),
    );
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.ends_with("regressed"))
        .unwrap_or_else(|| panic!("no regressed row:\n{text}"));
    assert!(
        line.contains("all_reduce")
            && line.contains("out_of_place")
            && line.contains("64 KiB")
            && line.contains("-20.0%"),
        "{line}"
    );
    assert_eq!(text.lines().filter(|l| l.ends_with("regressed")).count(), 1, "{text}");
    assert!(text.contains("REGRESSION: 1 of 7 rows"), "{text}");
    assert_eq!(
        stderr(&out),
        "collbench: regression: 1 of 7 rows lost more than 5% busbw (1 judged within one launch per side \
         (--within-launch))\n"
    );
    // the markdown names it too, with its statistics
    let out = collbench(&argv![
        "compare --within-launch --format markdown",
        path_str(&base),
        path_str(&new)
    ]);
    assert_stdout_has(
        &out,
        "| all_reduce float sum out_of_place 64 KiB 4 ranks | 2.45 | 1.96 | -20.0% |",
    );
    // a threshold above the drop lets it pass
    let out = collbench(&argv![
        "compare --within-launch --threshold 25",
        path_str(&base),
        path_str(&new)
    ]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    // an alpha the 5-sample rank test cannot reach (its smallest p is
    // 2/252): the rows fall back to the threshold, and the output says so
    let out = collbench(&argv![
        "compare --within-launch --alpha 0.005",
        path_str(&base),
        path_str(&new)
    ]);
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    assert_stderr_has(
        &out,
        "(1 judged within one launch per side (--within-launch), 1 of them by the threshold alone)",
    );
    assert_stdout_has(
        &out,
        "note: 6 rows judged by the threshold alone: too few samples for the rank test",
    );
}

#[test]
fn identical_files_have_no_regression_for_every_metric() {
    let base = fixture("base.csv");
    for metric in ["busbw", "algbw", "time"] {
        let out = collbench(&["compare", "--metric", metric, path_str(&base), path_str(&base)]);
        assert_eq!(code(&out), 0, "{metric}: {}", stdout(&out));
        // the 40%-noise case is too noisy to judge even against itself
        assert_stdout_has(&out, "(0 improved, 0 regressed, 6 within noise, 1 too noisy)");
    }
}

#[test]
fn rows_missing_from_the_new_run_exit_4_unless_allowed() {
    let dir = tempdir();
    let base = fixture("base.csv");
    // the base without its broadcast rows
    let base_text = std::fs::read_to_string(&base).unwrap();
    let without: Vec<&str> = base_text.lines().filter(|l| !l.contains(",broadcast,")).collect();
    let fewer = write(dir.path(), "fewer.csv", &(without.join("\n") + "\n"));
    let out = collbench(&["compare", path_str(&base), path_str(&fewer)]);
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains(
            "Only in base, missing from the new run (1):\n  broadcast float root 0 out_of_place 8 KiB 4 ranks"
        ),
        "{text}"
    );
    assert!(text.contains("MISSING: 1 row of the base not in the new run"), "{text}");
    assert_eq!(
        stderr(&out),
        "collbench: regression: 1 row of the base missing from the new run (--allow-missing accepts that)\n"
    );
    let out = collbench(&["compare", "--allow-missing", path_str(&base), path_str(&fewer)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_stdout_has(&out, "Only in base (1):");
    // the other way round, the broadcast rows are only in new: listed, exit 0
    let out = collbench(&["compare", path_str(&fewer), path_str(&base)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_stdout_has(&out, "Only in new (1):");
    // no case in common: nothing judged, never an OK (exit 2 with the
    // option, 4 without: every base case is missing)
    let only: Vec<&str> = base_text
        .lines()
        .enumerate()
        .filter(|(i, l)| *i == 0 || l.contains(",broadcast,"))
        .map(|(_, l)| l)
        .collect();
    let broadcast = write(dir.path(), "broadcast.csv", &(only.join("\n") + "\n"));
    let out = collbench(&["compare", "--allow-missing", path_str(&fewer), path_str(&broadcast)]);
    assert_eq!(code(&out), 2, "{}", stdout(&out));
    assert!(only_line(&out).contains("nothing to compare"), "{}", stderr(&out));
    let out = collbench(&["compare", path_str(&fewer), path_str(&broadcast)]);
    assert_eq!(code(&out), 4, "{}", stdout(&out));
}

#[test]
fn a_baseline_of_several_launches_is_judged_by_its_launch_to_launch_spread() {
    let (code, doc) = json(&[path_str(&fixture("launches")), path_str(&fixture("new-launch.csv"))]);
    assert_eq!(code, 4);
    assert_eq!(
        (doc["base_launches"].as_u64(), doc["new_launches"].as_u64()),
        (Some(4), Some(1))
    );
    // launches 12% apart: a 1% change cannot be judged at 5%
    let r = row(&doc, "all_reduce", "out_of_place", 65536);
    assert_eq!(
        (r["test"].as_str(), r["verdict"].as_str()),
        (Some("launch_t"), Some("too_noisy"))
    );
    assert_eq!(
        (r["base_stats"]["n"].as_u64(), r["base_stats"]["launches"].as_u64()),
        (Some(12), Some(4))
    );
    // 40x slower is a regression whatever that spread
    let r = row(&doc, "all_reduce", "out_of_place", 1 << 20);
    assert_eq!(r["verdict"], "regressed");
    assert!(r["p_value"].as_f64().unwrap() < 1e-4);
    // at a threshold that absorbs the launch noise, 64 KiB is within noise
    let (code, doc) = json(&[
        "--threshold",
        "30",
        path_str(&fixture("launches")),
        path_str(&fixture("new-launch.csv")),
    ]);
    assert_eq!(code, 4);
    assert_eq!(
        row(&doc, "all_reduce", "out_of_place", 65536)["verdict"],
        "within_noise"
    );
    // the base folder split another way keeps every sample
    let (_dir, folder) = temp_file("base");
    std::fs::create_dir(&folder).unwrap();
    let text = std::fs::read_to_string(fixture("base.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    write(&folder, "a.csv", &(lines[..10].join("\n") + "\n"));
    write(
        &folder,
        "b.csv",
        &([&lines[..1], &lines[10..]].concat().join("\n") + "\n"),
    );
    let (code, doc) = json(&[path_str(&folder), path_str(&fixture("base.csv"))]);
    assert_eq!(code, 0);
    assert_eq!(row(&doc, "all_reduce", "out_of_place", 65536)["base_stats"]["n"], 5);
    assert_eq!(doc["base_launches"], 1);
}

#[test]
fn a_method_change_is_refused_naming_the_column_and_both_values() {
    let dir = tempdir();
    let base = fixture("base.csv");
    let blocking = write(dir.path(), "blocking.csv", &with_column(&base, "timing", "blocking"));
    let out = exits(2, collbench(&["compare", path_str(&base), path_str(&blocking)]));
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("measured differently: timing (base batched, new blocking)")
            && stderr(&out).contains("--allow-method-change"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty());
    // every method column is checked; each names its values
    for (column, value, shown) in [
        ("average", "max", "average (base avg, new max)"),
        ("iter_policy", "fixed", "iter_policy (base min-time, new fixed)"),
        ("agg_iters", "4", "agg_iters (base 1, new 4)"),
        ("cuda_graph", "10", "cuda_graph (base 0, new 10)"),
        ("register", "true", "register (base false, new true)"),
        ("rotate", "true", "rotate (base false, new true)"),
        ("backend", "nccl", "backend (base mpi, new nccl)"),
    ] {
        let other = write(dir.path(), "other.csv", &with_column(&base, column, value));
        let out = collbench(&["compare", path_str(&base), path_str(&other)]);
        assert_eq!(code(&out), 2, "{column}: {}", stderr(&out));
        assert!(stderr(&out).contains(shown), "{column}: {}", stderr(&out));
    }
    // allowed: one warning per column, then the verdicts as usual
    let out = ok(collbench(&[
        "compare",
        "--allow-method-change",
        path_str(&base),
        path_str(&blocking),
    ]));
    assert_eq!(
        stderr(&out),
        "collbench: warning: measured differently: timing (base batched, new blocking); \
         compared anyway (--allow-method-change)\n"
    );
}

#[test]
fn identity_columns_and_imported_tools_only_warn() {
    let dir = tempdir();
    let base = fixture("base.csv");
    let newer = write(
        dir.path(),
        "newer.csv",
        &with_column(&base, "collbench_version", "0.2.0"),
    );
    let out = ok(collbench(&["compare", path_str(&base), path_str(&newer)]));
    assert_eq!(
        stderr(&out),
        "collbench: warning: collbench_version (base 0.1.0, new 0.2.0) differs\n"
    );
    let imported = write(
        dir.path(),
        "imported.csv",
        &with_column(&base, "collbench_version", "nccl-tests 2.17.8"),
    );
    let out = ok(collbench(&["compare", path_str(&base), path_str(&imported)]));
    assert!(
        stderr(&out)
            .starts_with("collbench: warning: base rows come from collbench and new rows from nccl-tests 2.17.8"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_csv_without_method_columns_warns_once_and_compares() {
    let old = fixture("old-format.csv");
    let base = fixture("base.csv");
    let out = collbench(&["compare", "--allow-missing", path_str(&old), path_str(&base)]);
    let err = stderr(&out);
    assert_eq!(err.lines().filter(|l| l.contains("warning")).count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "warning: base {} has no method columns (an older collbench, or an import): its method is unknown",
            old.display()
        )),
        "{err}"
    );
    assert_stdout_has(&out, "threshold alone: one sample on a side");
    // a folder of several such files: still one line for the side
    let dir = tempdir();
    for name in ["a.csv", "b.csv"] {
        std::fs::copy(&old, dir.path().join(name)).unwrap();
    }
    let out = collbench(&["compare", "--allow-missing", path_str(dir.path()), path_str(&base)]);
    let err = stderr(&out);
    let warnings: Vec<&str> = err.lines().filter(|l| l.contains("no method columns")).collect();
    assert_eq!(warnings.len(), 1, "{err}");
    assert!(warnings[0].contains("base: 2 of 2 files"), "{}", warnings[0]);
}

#[test]
fn export_files_hold_the_other_formats_of_the_same_comparison() {
    let dir = tempdir();
    let (md, js) = (dir.path().join("summary.md"), dir.path().join("report.json"));
    let out = collbench_in(
        &fixtures(),
        &argv![
            "compare --within-launch --export-markdown",
            path_str(&md),
            "--export-json",
            path_str(&js),
            "base.csv new.csv"
        ],
    );
    assert_eq!(code(&out), 4);
    // the verdict once on stderr, the table on stdout
    assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        std::fs::read_to_string(fixtures().join("golden/table.txt")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&md).unwrap(),
        std::fs::read_to_string(fixtures().join("golden/markdown.md")).unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(&js).unwrap(),
        std::fs::read_to_string(fixtures().join("golden/json.json")).unwrap()
    );
}

/// An export onto an input, onto the other export, or into a missing
/// folder is refused before anything is read: one line, exit 2 (not the
/// exit 4 of the regression the inputs hold, nor a failure after it), and
/// the inputs are untouched.
#[test]
fn an_export_onto_an_input_or_into_a_missing_folder_is_refused_before_comparing() {
    let dir = tempdir();
    let base = write(
        dir.path(),
        "base.csv",
        &std::fs::read_to_string(fixture("base.csv")).unwrap(),
    );
    let new = write(
        dir.path(),
        "new.csv",
        &std::fs::read_to_string(fixture("new.csv")).unwrap(),
    );
    let before = std::fs::read_to_string(&new).unwrap();
    let same_new = dir.path().join("./new.csv");
    let missing = dir.path().join("no/such/folder/r.json");
    let md = dir.path().join("r.md");
    let cases: Vec<(Vec<&str>, String)> = vec![
        (
            argv!["--export-json", path_str(&same_new)],
            format!("--export-json {} is NEW, an input of this command", same_new.display()),
        ),
        (
            argv!["--export-markdown", path_str(&base)],
            format!("--export-markdown {} is BASE, an input", base.display()),
        ),
        (
            argv!["--export-json", path_str(&missing)],
            format!(
                "cannot create --export-json file {}: No such file or directory",
                missing.display()
            ),
        ),
        (
            argv!["--export-markdown", path_str(&md), "--export-json", path_str(&md)],
            format!("--export-json {} is also --export-markdown's file", md.display()),
        ),
    ];
    for (args, needle) in cases {
        let mut full = argv!["compare --within-launch", path_str(&base), path_str(&new)];
        full.extend(args);
        let out = exits(2, collbench(&full));
        let line = only_line(&out);
        assert!(line.starts_with(&format!("collbench: {needle}")), "{line}");
        assert!(stdout(&out).is_empty(), "nothing compared: {}", stdout(&out));
    }
    assert_eq!(std::fs::read_to_string(&new).unwrap(), before);
    assert!(!md.exists(), "no export left behind");
    // a folder's launches: an export onto one of them, or a new .csv that
    // the next compare of the folder would read as a launch
    let folder = dir.path().join("launches");
    std::fs::create_dir(&folder).unwrap();
    let launch = write(
        &folder,
        "l1.csv",
        &std::fs::read_to_string(fixture("base.csv")).unwrap(),
    );
    let kept = std::fs::read_to_string(&launch).unwrap();
    for (option, name) in [("--export-json", "l1.csv"), ("--export-markdown", "notes.csv")] {
        let export = folder.join(name);
        let out = exits(
            2,
            collbench(&argv![
                "compare --within-launch",
                path_str(&folder),
                path_str(&new),
                option,
                path_str(&export)
            ]),
        );
        let line = only_line(&out);
        assert!(
            line.contains(&format!(
                "{option} {}: a .csv file in the BASE folder {} is read as one of its launches",
                export.display(),
                folder.display()
            )),
            "{line}"
        );
    }
    assert_eq!(std::fs::read_to_string(&launch).unwrap(), kept);
    assert!(!folder.join("notes.csv").exists());
}

#[test]
fn incompatible_inputs_get_one_line_and_exit_2() {
    let dir = tempdir();
    let base = fixture("base.csv");
    let base_text = std::fs::read_to_string(&base).unwrap();
    let other_schema = write(dir.path(), "other.csv", "size,time\n8,1.0\n");
    let garbled = write(
        dir.path(),
        "garbled.csv",
        &base_text.replacen(",65536,", ",sixty-four,", 1),
    );
    let eight_ranks = write(dir.path(), "eight.csv", &base_text.replace(",4,1,4,20,", ",8,1,8,20,"));
    let header_only = write(
        dir.path(),
        "header-only.csv",
        &format!("{}\n", base_text.lines().next().unwrap()),
    );
    let empty_dir = dir.path().join("empty");
    std::fs::create_dir(&empty_dir).unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![path_str(&base), path_str(&other_schema)],
            "not a collbench CSV (schema 1)",
        ),
        (vec![path_str(&base), path_str(&garbled)], "garbled.csv line 2"),
        (vec![path_str(&base), path_str(&eight_ranks)], "--allow-different-ranks"),
        (vec![path_str(&base), "/nonexistent/new.csv"], "cannot read CSV file"),
        (vec![path_str(&empty_dir), path_str(&base)], "holds no .csv files"),
        // an empty baseline passes nothing
        (
            vec![path_str(&header_only), path_str(&base)],
            "header-only.csv holds no measured row: nothing to compare",
        ),
        (vec![path_str(&base)], "compare needs BASE and NEW"),
        (
            vec!["--by", "hierarchy", path_str(&base)],
            "needs a CSV that measured several",
        ),
        (
            vec!["--threshold", "-1", path_str(&base), path_str(&base)],
            "--threshold",
        ),
        (
            vec!["--alpha", "1.5", path_str(&base), path_str(&base)],
            "--alpha 1.5: give a significance level between 0 and 1",
        ),
    ];
    for (args, needle) in cases {
        let mut full = vec!["compare"];
        full.extend(&args);
        let out = collbench(&full);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("collbench: ") && err.contains(needle),
            "{args:?}: want {needle:?} in {err}"
        );
        assert!(stdout(&out).is_empty(), "{args:?}");
    }
    let out = collbench(&["compare", "--metric", "speed", path_str(&base), path_str(&base)]);
    assert_parser_error(&out, "[possible values: busbw, algbw, time]");
    // with the flag, the rank counts compare
    let out = ok(collbench(&[
        "compare",
        "--allow-different-ranks",
        path_str(&base),
        path_str(&eight_ranks),
    ]));
    assert_stdout_has(&out, "4->8");
}

#[test]
fn two_single_launches_of_a_real_run_at_half_the_busbw_exit_4_judged_by_the_launch_bound() {
    // one real launch, one sample per point, and the same launch with
    // every time doubled: each row's two values a factor 2 apart, beyond
    // the launch bound (1.5)
    let (dir, base) = temp_file("base.csv");
    ok(mpirun(
        2,
        &argv![
            "run --collectives all_reduce,all_gather -e 64K -f 4 -n 20 -N 1 --csv",
            path_str(&base)
        ],
    ));
    let rows = std::fs::read_to_string(&base).unwrap().lines().count() - 1;
    let half = write(dir.path(), "half.csv", &all_slowed(&base, 2.0));
    let out = exits(4, collbench(&["compare", path_str(&base), path_str(&half)]));
    assert_eq!(
        stderr(&out),
        format!(
            "collbench: regression: {rows} of {rows} rows lost more than 5% busbw ({rows} judged from one launch \
             per side, beyond the launch-to-launch bound)\n"
        )
    );
    assert_eq!(
        stdout(&out)
            .lines()
            .filter(|l| l.ends_with("  bound  1/1  0.0%/0.0%  regressed"))
            .count(),
        rows
    );
    assert_stdout_has(
        &out,
        &format!("note: {rows} rows judged from one launch per side by the launch bound"),
    );
    // the same in time: it took longer
    let out = exits(
        4,
        collbench(&["compare", "--metric", "time", path_str(&base), path_str(&half)]),
    );
    assert_stderr_has(
        &out,
        &format!("regression: {rows} of {rows} rows took more than 5% longer ("),
    );
    // the other way round: improved, nothing fails
    let out = ok(collbench(&["compare", path_str(&half), path_str(&base)]));
    assert_stdout_has(&out, &format!("({rows} improved, 0 regressed"));
    // 20% down is inside the bound: not judged from one launch, exit 0
    let slower = write(dir.path(), "slower.csv", &all_slowed(&base, 1.25));
    let out = ok(collbench(&["compare", path_str(&base), path_str(&slower)]));
    assert_stdout_has(
        &out,
        &format!("NO VERDICT: {rows} of {rows} rows changed busbw by more than 5%"),
    );
}

#[test]
fn the_golden_pair_at_half_the_busbw_regresses_where_the_ranges_lie_apart() {
    let dir = tempdir();
    let base = fixture("base.csv");
    let half = write(dir.path(), "half.csv", &all_slowed(&base, 2.0));
    let (code, doc) = json(&["--allow-missing", path_str(&base), path_str(&half)]);
    assert_eq!(code, 4);
    // five tight samples a side, and one sample a side: judged by the bound
    for (c, p, s) in [
        ("all_reduce", "out_of_place", 65536),
        ("all_reduce", "out_of_place", 1 << 20),
        ("all_gather", "out_of_place", 65536),
    ] {
        let r = row(&doc, c, p, s);
        assert_eq!(
            (r["test"].as_str(), r["verdict"].as_str()),
            (Some("launch_bound"), Some("regressed"))
        );
    }
    // 40% noise: the ranges overlap, so one launch a side cannot judge it
    let noisy = row(&doc, "all_reduce", "in_place", 1 << 20);
    assert_eq!(noisy["verdict"], "unproven");
    assert_eq!(noisy["test"], "mann_whitney");
    assert!(noisy["p_adjusted"].as_f64().unwrap() >= noisy["p_value"].as_f64().unwrap());
}

#[test]
fn rows_no_measurement_gives_are_refused_naming_the_file_and_the_line() {
    let dir = tempdir();
    let base = fixture("base.csv");
    for (line, column, value, why) in [
        (3, "busbw_gbps", "NaN", "NaN is not a measured value"),
        (4, "busbw_gbps", "inf", "inf is not a measured value"),
        (5, "time_us", "-12.5", "-12.5 is negative"),
        (
            6,
            "algbw_gbps",
            "0",
            "0 at 1024 bytes on 4 ranks is not a measured value",
        ),
        (7, "time_us", "0", "a time of 0 is not a measured value"),
    ] {
        let bad = write(dir.path(), "bad.csv", &with_cell(&base, line, column, value));
        for args in [[path_str(&base), path_str(&bad)], [path_str(&bad), path_str(&base)]] {
            let out = exits(2, collbench(&[&["compare"], &args[..]].concat()));
            assert_eq!(
                stderr(&out),
                format!(
                    "collbench: CSV file {} line {line} column `{column}`: {why}; the row cannot be read as a \
                     measurement\n",
                    bad.display()
                )
            );
            assert!(stdout(&out).is_empty());
        }
    }
    // in a baseline folder too: the file in the folder, and its line
    let folder = dir.path().join("launches");
    std::fs::create_dir(&folder).unwrap();
    std::fs::copy(&base, folder.join("a.csv")).unwrap();
    write(&folder, "b.csv", &with_cell(&base, 9, "busbw_gbps", "-1"));
    let out = exits(2, collbench(&["compare", path_str(&folder), path_str(&base)]));
    assert_stderr_has(
        &out,
        &format!(
            "{} line 9 column `busbw_gbps`: -1 is negative",
            folder.join("b.csv").display()
        ),
    );
}

#[test]
fn a_one_rank_run_has_a_busbw_of_0_by_definition_and_compares() {
    // all_reduce at one rank: bus factor 2(n-1)/n = 0, so busbw is 0 in
    // every row, and that is data, not a broken row
    let (dir, one) = temp_file("one.csv");
    ok(mpirun(
        1,
        &argv![
            "run --collectives all_reduce -e 1K -f 4 -n 5 -N 2 --csv",
            path_str(&one)
        ],
    ));
    let out = ok(collbench(&["compare", path_str(&one), path_str(&one)]));
    assert_stdout_has(&out, "judged by the threshold alone: the metric is 0 by definition");
    let out = ok(collbench(&[
        "compare",
        "--metric",
        "algbw",
        path_str(&one),
        path_str(&one),
    ]));
    assert_stdout_has(&out, "OK: no row lost more than 5% algbw");
    // ... but a busbw of 0 at two ranks is not
    let two = write(dir.path(), "two.csv", &with_column(&one, "nranks", "2"));
    let out = exits(2, collbench(&["compare", path_str(&two), path_str(&two)]));
    assert_stderr_has(
        &out,
        "line 2 column `busbw_gbps`: 0 at 8 bytes on 2 ranks is not a measured value",
    );
}
