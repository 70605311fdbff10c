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
    let (dir, svg) = temp_file("runs.svg");
    let (base, new) = (fixture("base.csv"), fixture("new.csv"));
    ok(collbench(&[
        "plot",
        path_str(&base),
        path_str(&new),
        "-o",
        path_str(&svg),
    ]));
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
    let modes_csv = fixture("modes.csv");
    ok(collbench(&argv![
        "plot",
        path_str(&modes_csv),
        "--by hierarchy --metric time -o",
        path_str(&modes)
    ]));
    let text = std::fs::read_to_string(&modes).unwrap();
    for label in ["flat", "rs-ar-ag", "reduce-bcast", "time per operation (us, log scale)"] {
        assert!(text.contains(&format!("\n{label}\n")), "no {label:?}");
    }
}

#[test]
fn png_decodes_with_the_size_of_its_panel_grid() {
    let (_dir, png_path) = temp_file("busbw.png");
    ok(collbench(&[
        "plot",
        path_str(&fixture("base.csv")),
        "-o",
        path_str(&png_path),
    ]));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    // three collectives: a 2 x 2 grid of 560 x 380 panels under a title;
    // the fixture has 5 samples per point, so the title has its note line
    assert_eq!((info.width, info.height), (1120, 2 * 380 + 62));
    // not blank: some pixels are neither white nor transparent
    assert!(pixels.chunks(3).filter(|p| p.iter().any(|&c| c < 200)).count() > 1000);
}

#[test]
fn what_cannot_be_plotted_is_one_line_and_exit_2() {
    let (dir, existing) = temp_file("exists.svg");
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

/// A plot that cannot be written whole (the disk fills: here the file
/// size limit, `ulimit -f`, which needs no root) leaves nothing behind, not
/// half a picture nor an empty one, and an earlier plot stays as it was;
/// the error is one line naming the file and the system's reason, exit 1.
#[test]
fn a_plot_that_cannot_be_written_whole_leaves_nothing_behind() {
    let dir = tempdir();
    let base = fixture("base.csv");
    for name in ["x.svg", "x.png", "old.svg"] {
        let out = dir.path().join(name);
        let mut args = vec![path_str(&base), "-o", path_str(&out)];
        if name == "old.svg" {
            std::fs::write(&out, "an earlier plot").unwrap();
            args.push("--overwrite");
        }
        // 4 blocks of 512 bytes; SIGXFSZ ignored, so the write fails with EFBIG
        let run = std::process::Command::new("sh")
            .args(["-c", "trap '' XFSZ; ulimit -f 4; exec \"$0\" plot \"$@\"", BIN])
            .args(&args)
            .output()
            .unwrap();
        let err = stderr(&run);
        assert_eq!(code(&run), 1, "{name}: {err}");
        assert_eq!(
            err,
            format!(
                "collbench: cannot write plot {}: File too large (os error 27)\n",
                out.display()
            )
        );
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let want: Vec<String> = if name == "old.svg" { vec![name.into()] } else { vec![] };
        assert_eq!(left, want, "{name}: no partial file, no half plot");
    }
    assert_eq!(
        std::fs::read_to_string(dir.path().join("old.svg")).unwrap(),
        "an earlier plot"
    );
}

/// The text elements of an SVG, trimmed.
fn svg_texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| t.split_once('>').and_then(|(_, rest)| rest.split_once("</text>")))
        .map(|(inner, _)| inner.trim().to_string())
        .collect()
}

/// The data lines of an SVG plot (2 px wide polylines, legend samples
/// included): per stroke colour, the point count of each polyline.
fn svg_lines(svg: &str) -> std::collections::BTreeMap<String, Vec<usize>> {
    let mut lines: std::collections::BTreeMap<String, Vec<usize>> = Default::default();
    for element in svg.split("<polyline").skip(1) {
        let element = element.split('>').next().unwrap();
        if !element.contains("stroke-width=\"2\"") {
            continue;
        }
        let attr = |name: &str| {
            element
                .split(&format!("{name}=\""))
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap_or("")
                .to_string()
        };
        lines
            .entry(attr("stroke"))
            .or_default()
            .push(attr("points").split_whitespace().count());
    }
    lines
}

/// `collbench plot CSV -o DIR/NAME` and the SVG's text.
fn plot_svg(dir: &Path, name: &str, args: &[&str]) -> (String, String) {
    let svg = dir.join(name);
    let mut full = vec!["plot"];
    full.extend(args);
    full.extend(["-o", path_str(&svg)]);
    let out = ok(collbench(&full));
    (std::fs::read_to_string(&svg).unwrap(), stderr(&out))
}

#[test]
fn a_hierarchy_all_run_plots_one_line_per_mode_named_by_its_mode() {
    let (dir, csv) = temp_file("modes.csv");
    ok(mpirun(
        4,
        &argv![
            "run --collectives all_reduce --hierarchy all --ranks-per-node 2 -b 1K -e 16K -n 5 --csv",
            path_str(&csv),
            "--no-progress"
        ],
    ));
    let (svg, said) = plot_svg(dir.path(), "modes.svg", &[path_str(&csv)]);
    assert!(said.contains("plotted 3 series in 1 panel"), "{said}");
    let texts = svg_texts(&svg);
    for label in ["flat", "rs-ar-ag", "reduce-bcast"] {
        assert_eq!(
            texts.iter().filter(|t| *t == label).count(),
            1,
            "{label:?} in {texts:?}"
        );
    }
    // no legend entry is a run id or a file name
    assert!(
        !texts.iter().any(|t| t.contains("modes") || t.contains("Z-")),
        "{texts:?}"
    );
    let lines = svg_lines(&svg);
    assert_eq!(lines.len(), 3, "three colours: {lines:?}");
    for counts in lines.values() {
        // the line (5 sizes, 1K to 16K) and its legend sample
        assert_eq!(counts.iter().copied().max(), Some(5), "{lines:?}");
    }
}

/// A `--split` run's groups and its aggregate are lines of their own (as
/// compare keeps them apart as cases), not samples of one line.
#[test]
fn a_split_runs_groups_and_aggregate_are_lines_of_their_own() {
    let (dir, csv) = temp_file("split.csv");
    let rule = "MOD 2";
    ok(mpirun(
        4,
        &argv![
            "run --collectives all_reduce --split",
            rule,
            "-b 1K -e 4K -n 5 --csv",
            path_str(&csv),
            "--no-progress"
        ],
    ));
    let (svg, said) = plot_svg(dir.path(), "split.svg", &[path_str(&csv)]);
    assert!(said.contains("plotted 3 series in 1 panel"), "{said}");
    let texts = svg_texts(&svg);
    for label in ["group 0", "group 1", "all groups"] {
        assert_eq!(
            texts.iter().filter(|t| *t == label).count(),
            1,
            "{label:?} in {texts:?}"
        );
    }
    let lines = svg_lines(&svg);
    assert_eq!(lines.len(), 3, "a colour per group: {lines:?}");
    assert_eq!(svg.matches("<polygon").count(), 0, "one sample per point: no band");
}

#[test]
fn the_cycles_of_a_run_are_one_line_of_medians_with_a_band() {
    let (dir, csv) = temp_file("cycles.csv");
    ok(mpirun(
        2,
        &[
            "run",
            "--collectives",
            "all_reduce",
            "-b",
            "1K",
            "-e",
            "8K",
            "-n",
            "5",
            "-N",
            "3",
            "--label",
            "three cycles",
            "--csv",
            path_str(&csv),
            "--no-progress",
        ],
    ));
    assert_eq!(Csv::read(&csv).rows.len(), 4 * 2 * 3);
    let (svg, said) = plot_svg(dir.path(), "cycles.svg", &[path_str(&csv)]);
    assert!(said.contains("plotted 1 series in 1 panel"), "{said}");
    let texts = svg_texts(&svg);
    assert_eq!(texts.iter().filter(|t| *t == "three cycles").count(), 1, "{texts:?}");
    assert!(
        texts
            .iter()
            .any(|t| t.starts_with("each point: the median of its samples")),
        "{texts:?}"
    );
    let lines = svg_lines(&svg);
    assert_eq!(lines.len(), 1, "{lines:?}");
    // one point per size, not one line per cycle
    assert_eq!(lines.values().next().unwrap().iter().max(), Some(&4), "{lines:?}");
    assert_eq!(svg.matches("<polygon").count(), 1, "one band");
}

#[test]
fn a_suites_transports_are_separate_lines_and_files_take_the_given_labels() {
    let (dir, suite) = temp_file("two.toml");
    // two launches of each profile: each profile one line, with the
    // launches' range (README's picture recipe)
    std::fs::write(
        &suite,
        "name = \"two\"\nranks = 2\nlaunches = 2\ntransports = [\"shm\", \"tcp\"]\n[run]\nbackend = \"mpi\"\n\
         collectives = \"all_reduce,broadcast\"\nminbytes = \"1K\"\nmaxbytes = \"8K\"\niters = 5\nwarmup = 1\n",
    )
    .unwrap();
    let merged = dir.path().join("suite.csv");
    ok(collbench_launching(
        &argv!["suite", path_str(&suite), "--launcher mpirun -o", path_str(&merged)],
        &[],
    ));
    let (svg, said) = plot_svg(dir.path(), "suite.svg", &[path_str(&merged)]);
    assert!(said.contains("plotted 2 series in 2 panels"), "{said}");
    let texts = svg_texts(&svg);
    for label in ["shm", "tcp"] {
        // one legend entry per panel
        assert_eq!(
            texts.iter().filter(|t| *t == label).count(),
            2,
            "{label:?} in {texts:?}"
        );
    }
    assert_eq!(
        svg_lines(&svg).len(),
        2,
        "the same colour for a transport in both panels"
    );
    assert_eq!(
        svg.matches("<polygon").count(),
        4,
        "a band per line: the launches' range"
    );
    assert!(!texts.iter().any(|t| t.contains("run at")), "{texts:?}");

    // two files of the same kind, named with --label, titled with --title
    let (svg, said) = plot_svg(
        dir.path(),
        "labelled.svg",
        &[
            path_str(&merged),
            path_str(&merged),
            "--label",
            "before",
            "--label",
            "after",
            "--title",
            "My title",
        ],
    );
    assert!(said.contains("plotted 4 series in 2 panels"), "{said}");
    let texts = svg_texts(&svg);
    for label in ["before shm", "before tcp", "after shm", "after tcp", "My title"] {
        assert!(texts.iter().any(|t| t == label), "{label:?} in {texts:?}");
    }
}

#[test]
fn a_single_panel_png_has_its_announced_size_and_its_whole_title() {
    let (dir, png_path) = temp_file("one.png");
    // one collective only: the single-panel layout
    let csv = dir.path().join("one.csv");
    let text = std::fs::read_to_string(fixture("base.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let at = header.split(',').position(|c| c == "collective").unwrap();
    let kept: Vec<&str> = lines.filter(|l| l.split(',').nth(at) == Some("all_reduce")).collect();
    std::fs::write(&csv, format!("{header}\n{}\n", kept.join("\n"))).unwrap();
    ok(collbench(&[
        "plot",
        path_str(&csv),
        "-o",
        path_str(&png_path),
        "--metric",
        "time",
    ]));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&png_path).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut pixels = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut pixels).unwrap();
    // the title and its note line (the fixture has 5 samples per point)
    assert_eq!((info.width, info.height), (560, 380 + 62));
    // the title's ink lies inside the picture with a margin on every side
    let w = info.width as usize;
    let dark: Vec<(usize, usize)> = (0..40)
        .flat_map(|y| (0..w).map(move |x| (x, y)))
        .filter(|&(x, y)| pixels[(y * w + x) * 3] < 128)
        .collect();
    assert!(dark.len() > 200, "no title");
    let (min_x, max_x) = (
        dark.iter().map(|p| p.0).min().unwrap(),
        dark.iter().map(|p| p.0).max().unwrap(),
    );
    let min_y = dark.iter().map(|p| p.1).min().unwrap();
    assert!(
        min_x >= 4 && max_x <= w - 5,
        "the title is cut at the sides: x {min_x}..{max_x} of {w}"
    );
    assert!(min_y >= 2, "the title is cut at the top: its ink starts at y {min_y}");
}

#[test]
fn rows_no_measurement_gives_are_refused_naming_the_file_and_the_line() {
    let dir = tempdir();
    let text = std::fs::read_to_string(fixture("base.csv")).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    for (column, value, why) in [
        ("busbw_gbps", "NaN", "NaN is not a measured value"),
        ("busbw_gbps", "-2.5", "-2.5 is negative"),
        (
            "busbw_gbps",
            "0",
            "0 at 1048576 bytes on 4 ranks is not a measured value",
        ),
        ("time_us", "inf", "inf is not a measured value"),
    ] {
        // the fourth line: all_reduce in-place 1 MiB
        let at = header.iter().position(|h| *h == column).unwrap();
        let edited: Vec<String> = text
            .lines()
            .enumerate()
            .map(|(i, line)| {
                let mut cells: Vec<&str> = line.split(',').collect();
                if i == 3 {
                    cells[at] = value;
                }
                cells.join(",")
            })
            .collect();
        let bad = dir.path().join("bad.csv");
        std::fs::write(&bad, edited.join("\n") + "\n").unwrap();
        let svg = dir.path().join("bad.svg");
        let out = exits(
            2,
            collbench(&[
                "plot",
                path_str(&fixture("new.csv")),
                path_str(&bad),
                "-o",
                path_str(&svg),
            ]),
        );
        assert_eq!(
            stderr(&out),
            format!(
                "collbench: CSV file {} line 4 column `{column}`: {why}; the row cannot be read as a measurement\n",
                bad.display()
            )
        );
        assert!(!svg.exists(), "nothing is drawn from a refused file");
    }
    // a busbw of 0 where the formula gives 0 (one rank) is data: drawn
    let (one_dir, one) = temp_file("one.csv");
    ok(mpirun(
        1,
        &argv![
            "run --collectives all_reduce -e 1K -f 4 -n 5 -N 1 --csv",
            path_str(&one)
        ],
    ));
    let svg = one_dir.path().join("one.svg");
    ok(collbench(&["plot", path_str(&one), "-o", path_str(&svg)]));
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<polyline"));
}
