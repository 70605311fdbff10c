//! `collbench plot`: a real SVG with every series label and panel, a real
//! PNG of the announced size, and refusals for what cannot be drawn.

use std::path::{Path, PathBuf};

use crate::common::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compare")
        .join(name)
}

#[test]
fn svg_has_one_panel_per_collective_and_each_series_label() {
    let dir = tempdir();
    let svg = dir.path().join("runs.svg");
    let (base, new) = (fixture("base.csv"), fixture("new.csv"));
    let out = collbench(&["plot", path_str(&base), path_str(&new), "-o", path_str(&svg)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg") && text.trim_end().ends_with("</svg>"));
    let texts: Vec<String> = text
        .split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').and_then(|(_, rest)| rest.split_once("</text>")))
        .map(|(inner, _)| inner.trim().to_string())
        .collect();
    for label in [
        "base",
        "new",
        "all_reduce",
        "all_gather",
        "broadcast",
        "sendrecv",
        "bus bandwidth (GB/s)",
        "message size (bytes, log2 scale)",
    ] {
        assert!(texts.iter().any(|t| t == label), "no text {label:?} in {texts:?}");
    }
    // each series is a polyline
    assert!(
        text.matches("<polyline").count() >= 6,
        "expected a line per series and panel"
    );

    let modes = dir.path().join("modes.svg");
    let out = collbench(&[
        "plot",
        path_str(&fixture("modes.csv")),
        "--by",
        "hierarchy",
        "--metric",
        "time",
        "-o",
        path_str(&modes),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = std::fs::read_to_string(&modes).unwrap();
    for label in ["flat", "rs-ar-ag", "reduce-bcast", "time per operation (us, log scale)"] {
        assert!(text.contains(&format!("\n{label}\n")), "no {label:?}");
    }
}

#[test]
fn png_decodes_with_the_size_of_its_panel_grid() {
    let dir = tempdir();
    let png_path = dir.path().join("busbw.png");
    let out = collbench(&["plot", path_str(&fixture("base.csv")), "-o", path_str(&png_path)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    // three collectives: a 2 x 2 grid of 560 x 380 panels under a title
    assert_eq!((info.width, info.height), (1120, 2 * 380 + 44));
    // not blank: some pixels are neither white nor transparent
    assert!(pixels.chunks(3).filter(|p| p.iter().any(|&c| c < 200)).count() > 1000);
}

#[test]
fn what_cannot_be_plotted_is_one_line_and_exit_2() {
    let dir = tempdir();
    let existing = dir.path().join("exists.svg");
    std::fs::write(&existing, "x").unwrap();
    let base = fixture("base.csv");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec![path_str(&base), "-o", "plot.pdf"], ".svg or .png"),
        (vec![path_str(&base), "-o", path_str(&existing)], "already exists"),
        (vec!["/nonexistent.csv", "-o", "x.svg"], "cannot read CSV file"),
    ];
    for (args, needle) in cases {
        let mut full = vec!["plot"];
        full.extend(&args);
        let out = collbench_in(dir.path(), &full);
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: want {needle:?} in {err}");
    }
    let out = collbench_in(dir.path(), &["plot", path_str(&base), "-o", "x.svg", "--by", "color"]);
    assert_parser_error(&out, "[possible values: run, hierarchy, transport]");
    assert_eq!(std::fs::read_to_string(&existing).unwrap(), "x");
}
