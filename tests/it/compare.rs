//! `collbench compare` as a user and a CI job meet it: golden output for
//! every format, exit 4 on a real regression and naming the row, exit 0 on
//! identical runs and on noise inside the recorded spread, one-sided rows
//! listed, incompatible inputs refused with one line and exit 2.
//!
//! Golden files live in tests/fixtures/compare/golden; after a deliberate
//! change of a format, regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --test it compare::` and review the diff.

use std::path::{Path, PathBuf};

use crate::common::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare")
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

#[test]
fn every_format_matches_its_golden_file() {
    golden(&["compare", "base.csv", "new.csv"], "table.txt", 4);
    golden(
        &["compare", "--format", "markdown", "base.csv", "new.csv"],
        "markdown.md",
        4,
    );
    golden(&["compare", "--format", "json", "base.csv", "new.csv"], "json.json", 4);
    golden(&["compare", "--by", "hierarchy", "modes.csv"], "modes-table.txt", 0);
    golden(
        &["compare", "--by", "hierarchy", "--format", "markdown", "modes.csv"],
        "modes-markdown.md",
        0,
    );
    golden(
        &[
            "compare",
            "--by",
            "hierarchy",
            "--format",
            "json",
            "--metric",
            "time",
            "modes.csv",
        ],
        "modes-json.json",
        0,
    );
}

#[test]
fn the_golden_pair_shows_each_verdict_for_the_right_reason() {
    let out = collbench_in(&fixtures(), &["compare", "--format", "json", "base.csv", "new.csv"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let verdict = |size: u64, placement: &str, collective: &str| {
        doc["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["size_bytes"] == size && r["placement"] == placement && r["collective"] == collective)
            .map(|r| r["verdict"].as_str().unwrap().to_string())
            .unwrap()
    };
    // busbw down 20% with a tight spread on both sides
    assert_eq!(verdict(1 << 20, "out_of_place", "all_reduce"), "regressed");
    // the same 20%, but the base's slowest rank was 30% slower than its mean
    assert_eq!(verdict(1 << 20, "in_place", "all_reduce"), "within_noise");
    // 11.5% slower, inside the new row's p50..p99 spread (optional columns)
    assert_eq!(verdict(65536, "out_of_place", "all_gather"), "within_noise");
    assert_eq!(verdict(65536, "out_of_place", "all_reduce"), "improved");
    // 2% is under the threshold
    assert_eq!(verdict(1024, "out_of_place", "all_gather"), "within_noise");
    assert_eq!(doc["only_in_base"][0]["collective"], "broadcast");
    assert_eq!(doc["only_in_new"][0]["collective"], "sendrecv");
    assert_eq!(doc["exit_code"], 4);
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// `base.csv` with every all_reduce busbw (and algbw) of one row scaled.
fn scaled(row_size: &str, time_factor: f64, spread_factor: f64) -> String {
    let text = std::fs::read_to_string(fixtures().join("base.csv")).unwrap();
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut cells: Vec<String> = line.split(',').map(str::to_string).collect();
        if i > 0 && cells[8] == "all_reduce" && cells[13] == row_size && cells[12] == "out_of_place" {
            let t: f64 = cells[20].parse().unwrap();
            let t2 = t * time_factor;
            cells[20] = t2.to_string();
            cells[21] = (t2 * (1.0 - spread_factor)).to_string();
            cells[22] = (t2 * (1.0 + spread_factor)).to_string();
            for c in [23, 24] {
                let v: f64 = cells[c].parse().unwrap();
                cells[c] = (v / time_factor).to_string();
            }
        }
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[test]
fn a_20_percent_busbw_drop_exits_4_and_names_the_row() {
    let dir = tempdir();
    // time x 1.25 = busbw x 0.8
    let new = write(dir.path(), "new.csv", &scaled("65536", 1.25, 0.01));
    let base = fixtures().join("base.csv");
    let out = collbench(&["compare", path_str(&base), path_str(&new)]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    let text = stdout(&out);
    let line = text
        .lines()
        .find(|l| l.contains("regressed") && l.contains("64 KiB"))
        .unwrap_or_else(|| panic!("no regressed 64 KiB row:\n{text}"));
    assert!(
        line.contains("all_reduce") && line.contains("out_of_place") && line.contains("-20.0%"),
        "{line}"
    );
    assert_eq!(text.lines().filter(|l| l.ends_with("regressed")).count(), 1, "{text}");
    assert!(text.contains("REGRESSION: 1 of 7 rows"), "{text}");
    // and one line on stderr, where a CI log shows it whatever the format
    assert_eq!(
        stderr(&out),
        "collbench: regression: 1 of 7 rows lost more than 5% busbw\n"
    );
    // the markdown names it too, in the regressions table
    let out = collbench(&["compare", "--format", "markdown", path_str(&base), path_str(&new)]);
    assert_eq!(code(&out), 4);
    assert!(
        stdout(&out).contains("| all_reduce float sum out_of_place 64 KiB 4 ranks |"),
        "{}",
        stdout(&out)
    );
    // a threshold above the drop lets it pass
    let out = collbench(&["compare", "--threshold", "25", path_str(&base), path_str(&new)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

#[test]
fn identical_files_exit_0_for_every_metric() {
    let base = fixtures().join("base.csv");
    for metric in ["busbw", "algbw", "time"] {
        let out = collbench(&["compare", "--metric", metric, path_str(&base), path_str(&base)]);
        assert_eq!(code(&out), 0, "{metric}: {}", stdout(&out));
        assert!(stdout(&out).contains("0 regressed, 7 within noise"), "{}", stdout(&out));
    }
}

#[test]
fn a_drop_inside_the_recorded_spread_is_not_a_regression() {
    let dir = tempdir();
    // 20% slower, but the new row's ranks spread from -25% to +25%
    let new = write(dir.path(), "new.csv", &scaled("65536", 1.25, 0.25));
    let base = fixtures().join("base.csv");
    let out = collbench(&["compare", path_str(&base), path_str(&new)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert!(stdout(&out).contains("-20.0%  within noise"), "{}", stdout(&out));
}

#[test]
fn rows_on_one_side_are_listed_never_dropped() {
    let dir = tempdir();
    let base_text = std::fs::read_to_string(fixtures().join("base.csv")).unwrap();
    let mut lines: Vec<&str> = base_text.lines().collect();
    let removed = lines.remove(3); // all_reduce 1 MiB out_of_place
    assert!(removed.contains(",1048576,"), "{removed}");
    let new = write(dir.path(), "fewer.csv", &(lines.join("\n") + "\n"));
    let base = fixtures().join("base.csv");
    let out = collbench(&["compare", path_str(&base), path_str(&new)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let text = stdout(&out);
    assert!(
        text.contains("Only in base (1):\n  all_reduce float sum out_of_place 1 MiB 4 ranks"),
        "{text}"
    );
    assert!(text.contains("1 only in base, 0 only in new"), "{text}");
    let out = collbench(&["compare", path_str(&new), path_str(&base)]);
    assert!(stdout(&out).contains("Only in new (1):"), "{}", stdout(&out));
}

#[test]
fn a_baseline_folder_merges_its_files() {
    let dir = tempdir();
    let text = std::fs::read_to_string(fixtures().join("base.csv")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let folder = dir.path().join("baselines");
    std::fs::create_dir(&folder).unwrap();
    // the first three rows in one file, the rest in another, one row twice
    write(&folder, "a.csv", &(lines[..4].join("\n") + "\n"));
    write(
        &folder,
        "b.csv",
        &([&lines[..1], &lines[3..]].concat().join("\n") + "\n"),
    );
    let base = fixtures().join("base.csv");
    let out = collbench(&["compare", path_str(&folder), path_str(&base)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("7 within noise)"), "{text}");
    assert!(text.contains("1 duplicate row replaced"), "{text}");
}

#[test]
fn incompatible_inputs_get_one_line_and_exit_2() {
    let dir = tempdir();
    let base = fixtures().join("base.csv");
    let base_text = std::fs::read_to_string(&base).unwrap();
    let other_schema = write(dir.path(), "other.csv", "size,time\n8,1.0\n");
    let garbled = write(
        dir.path(),
        "garbled.csv",
        &base_text.replacen(",65536,", ",sixty-four,", 1),
    );
    let eight_ranks = write(dir.path(), "eight.csv", &base_text.replace(",4,1,4,20,", ",8,1,8,20,"));
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
        (vec![path_str(&base)], "compare needs BASE and NEW"),
        (
            vec!["--by", "hierarchy", path_str(&base)],
            "needs a CSV that measured several",
        ),
        (
            vec!["--threshold", "-1", path_str(&base), path_str(&base)],
            "--threshold",
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
    let out = collbench(&[
        "compare",
        "--allow-different-ranks",
        path_str(&base),
        path_str(&eight_ranks),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("4->8"), "{}", stdout(&out));
}
