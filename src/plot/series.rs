//! Which lines a plot has and what they are called: rows grouped into one
//! panel per collective and one line per series, a series being everything
//! that tells two rows apart but their size and their sample: the file and
//! the run's name (`plot --label`, or the `label` column), the backend,
//! the transport, the hierarchy mode, the rank count, the pinned algorithm
//! or protocol, the `--split` group, and within a panel the type,
//! operation, root, placement and alltoallv's traffic: what `compare`'s
//! `CaseKey` keeps apart, and the file, name and backend besides. Rows of
//! one series in one file are the samples of its points, whichever run
//! they came from (`--cycles`, `--repeat`, the launches of one suite
//! profile, as `compare` reads them): a point is their median, with the
//! fastest and slowest sample as its range.
//!
//! Names say what differs between the series ("flat", "rs-ar-ag", "shm
//! np=2"), led by the run's name where one was given or where nothing else
//! tells two files apart (the file's stem, or the run's start time when the
//! stem is only a run id and a start is known). A series has one colour in
//! every panel; lines of one series in one panel (types, operations, roots)
//! differ by marker. A value that cannot be drawn (not finite, a time of 0
//! on the log axis, a size of 0) is left out with a warning. Nothing here
//! draws.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::collective::Collective;
use crate::record::read::Row;
use crate::record::{Record, op_column, root_column};
use crate::types::Placement;
use crate::types::{AlgoPin, Metric};

/// One point of a line: x is log2(size); y, lo and hi are the median,
/// fastest and slowest sample (log10 of them for time).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub lo: f64,
    pub hi: f64,
    pub samples: usize,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub label: String,
    /// The series' colour, the same in every panel.
    pub colour: usize,
    /// The marker's shape: the line's place among its series' lines (its
    /// type, operation, root), the same in every panel.
    pub marker: usize,
    pub points: Vec<Point>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub collective: String,
    pub lines: Vec<Line>,
}

/// The panels, and one warning per value left out.
#[derive(Clone, Debug, PartialEq)]
pub struct Plotted {
    pub panels: Vec<Panel>,
    pub warnings: Vec<String>,
}

/// One input file: its rows and, with `plot --label`, its name.
pub struct Input<'a> {
    pub path: &'a Path,
    pub rows: &'a [Row],
    pub name: Option<&'a str>,
}

/// What tells series apart across the whole plot.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Series {
    file: usize,
    /// The run's name: `plot --label`, else the `label` column.
    name: Option<String>,
    backend: String,
    transport: String,
    hierarchy: String,
    nranks: u64,
    /// `--algo`/`--proto`: each pinned sweep is a series of its own.
    algo_pin: Option<AlgoPin>,
    /// `--split`: each group, and the aggregate (`all`), is a series of
    /// its own; ordered by group number, the aggregate last.
    group: Option<(bool, u64, String)>,
}

/// A line of a panel: its series and the rest of its case.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct LineKey {
    collective: Collective,
    series: Series,
    dtype: String,
    op: String,
    root: i64,
    in_place: bool,
    /// alltoallv's traffic (`spread=0.5`, `matrix=FILE`); none for the
    /// default (spread 1).
    traffic: Option<String>,
}

/// What names a file's series where nothing else tells files apart: the
/// file's stem, or when that is only a run id, its first run's start.
struct FileName {
    fallback: String,
    /// The fallback is the file's stem (a name someone chose), not a time.
    named_file: bool,
}

/// Groups the rows of `inputs` into panels and lines (see the module doc).
pub fn panels(inputs: &[Input], metric: Metric) -> Plotted {
    let (samples, names, mut warnings) = collect(inputs, metric);
    let series: BTreeSet<&Series> = samples.keys().map(|k| &k.series).collect();
    let series_names = series_names(&series, &names);
    let colour_of = |s: &Series| series.iter().position(|x| *x == s).unwrap_or(0);
    let mut by_collective: BTreeMap<Collective, Vec<&LineKey>> = BTreeMap::new();
    for key in samples.keys() {
        by_collective.entry(key.collective).or_default().push(key);
    }
    let mut labelled: Vec<(&LineKey, String, String)> = Vec::new();
    for keys in by_collective.values() {
        for (key, suffix) in keys.iter().zip(panel_suffixes(keys)) {
            let base = &series_names[&key.series];
            let label = [base.as_str(), suffix.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            labelled.push((key, label, suffix));
        }
    }
    let suffixes: BTreeSet<&str> = labelled
        .iter()
        .map(|(_, _, s)| s.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    let mut panels: Vec<Panel> = Vec::new();
    for (key, label, suffix) in &labelled {
        let points = aggregate(&samples[*key], metric, &mut |size, value| {
            warnings.push(format!(
                "{}: {} {} B: {} {value} cannot be drawn; left out",
                label_or_collective(label, key),
                key.collective.name(),
                size,
                metric_name(metric),
            ))
        });
        if points.is_empty() {
            continue;
        }
        let line = Line {
            label: label.clone(),
            colour: colour_of(&key.series),
            marker: suffixes.iter().position(|s| s == suffix).unwrap_or(0),
            points,
        };
        match panels.last_mut() {
            Some(p) if p.collective == key.collective.name() => p.lines.push(line),
            _ => panels.push(Panel {
                collective: key.collective.name().to_string(),
                lines: vec![line],
            }),
        }
    }
    for p in &mut panels {
        p.lines.sort_by_key(|l| (l.colour, l.marker));
    }
    Plotted { panels, warnings }
}

fn label_or_collective(label: &str, key: &LineKey) -> String {
    if label.is_empty() {
        key.collective.name().to_string()
    } else {
        format!("line \"{label}\"")
    }
}

fn metric_name(metric: Metric) -> &'static str {
    match metric {
        Metric::Busbw => "busbw",
        Metric::Algbw => "algbw",
        Metric::Time => "time",
    }
}

type Samples = BTreeMap<LineKey, BTreeMap<u64, Vec<f64>>>;

/// Every line's samples by size (out-of-place rows, or in-place ones for a
/// line that has no out-of-place row), what names each file, and a warning
/// for each row of size 0 (no place on the log axis).
fn collect(inputs: &[Input], metric: Metric) -> (Samples, BTreeMap<usize, FileName>, Vec<String>) {
    let mut samples: Samples = BTreeMap::new();
    let mut names = BTreeMap::new();
    let mut warnings = Vec::new();
    for (file, input) in inputs.iter().enumerate() {
        let stem = stem(input.path);
        let started = input.rows.first().map(|r| r.record.timestamp.trim()).unwrap_or("");
        let fallback = match (is_run_id(&stem), started.is_empty()) {
            (true, false) => format!("run at {}", started.replace('T', " ").trim_end_matches('Z')),
            _ => stem.clone(),
        };
        names.insert(
            file,
            FileName {
                fallback,
                named_file: !is_run_id(&stem),
            },
        );
        for row in input.rows {
            let r = &row.record;
            if r.size_bytes == 0 {
                warnings.push(format!(
                    "{}: {} at size 0 B has no place on the log2 size axis; left out",
                    input.path.display(),
                    r.collective.name()
                ));
                continue;
            }
            let key = line_key(file, input, r);
            samples
                .entry(key)
                .or_default()
                .entry(r.size_bytes)
                .or_default()
                .push(metric.value(r));
        }
    }
    let with_out_of_place: BTreeSet<LineKey> = samples
        .keys()
        .filter(|k| !k.in_place)
        .map(|k| LineKey {
            in_place: true,
            ..k.clone()
        })
        .collect();
    samples.retain(|k, _| !k.in_place || !with_out_of_place.contains(k));
    (samples, names, warnings)
}

/// The line of row `r` of input number `file`: everything but its size
/// and its sample.
fn line_key(file: usize, input: &Input, r: &Record) -> LineKey {
    LineKey {
        collective: r.collective,
        series: Series {
            file,
            name: input.name.map(str::to_string).or_else(|| r.label.clone()),
            backend: r.backend.to_string(),
            transport: r.transport.to_string(),
            hierarchy: r.hierarchy.to_string(),
            nranks: r.nranks,
            algo_pin: r.algo_pin,
            group: r.group.as_ref().map(|g| {
                let g = g.trim();
                (g == "all", g.parse().unwrap_or(u64::MAX), g.to_string())
            }),
        },
        dtype: r.dtype.to_string(),
        op: op_column::text(r.op).to_string(),
        root: root_column::value(r.root),
        in_place: r.placement == Placement::InPlace,
        traffic: r.traffic.clone().filter(|t| !t.trim().is_empty()),
    }
}

/// A collbench run id: `20261201T110805Z-host-1234`.
fn is_run_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 17
        && b[..8].iter().all(u8::is_ascii_digit)
        && b[8] == b'T'
        && b[9..15].iter().all(u8::is_ascii_digit)
        && b[15] == b'Z'
        && b[16] == b'-'
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// Each series' name: what differs between the series, led by the run's
/// name where one was given, or the file's where it alone tells series
/// apart.
fn series_names(series: &BTreeSet<&Series>, files: &BTreeMap<usize, FileName>) -> BTreeMap<Series, String> {
    let varies = |f: &dyn Fn(&Series) -> String| series.iter().map(|s| f(s)).collect::<BTreeSet<_>>().len() > 1;
    let dims: Vec<&dyn Fn(&Series) -> String> = vec![
        &|s: &Series| s.backend.clone(),
        &|s: &Series| s.transport.clone(),
        &|s: &Series| s.hierarchy.clone(),
        &|s: &Series| format!("np={}", s.nranks),
        &|s: &Series| match s.algo_pin {
            Some(pin) => format!("pinned {pin}"),
            None => "unpinned".to_string(),
        },
        &|s: &Series| match &s.group {
            Some((true, _, _)) => "all groups".to_string(),
            Some((false, _, g)) => format!("group {g}"),
            None => String::new(),
        },
    ];
    let shown: Vec<&&dyn Fn(&Series) -> String> = dims.iter().filter(|f| varies(**f)).collect();
    let describe = |s: &Series| {
        let parts: Vec<String> = shown.iter().map(|f| f(s)).filter(|p| !p.is_empty()).collect();
        parts.join(" ")
    };
    let described: Vec<String> = series.iter().map(|s| describe(s)).collect();
    let ambiguous = described.iter().collect::<BTreeSet<_>>().len() < series.len();
    let given = series.iter().any(|s| s.name.is_some());
    let mut used: BTreeSet<String> = BTreeSet::new();
    series
        .iter()
        .zip(described)
        .map(|(s, dims)| {
            let file = files.get(&s.file);
            let name = match (&s.name, file) {
                (Some(g), _) => g.clone(),
                (None, Some(f)) if ambiguous || (!given && dims.is_empty() && f.named_file) => f.fallback.clone(),
                _ => String::new(),
            };
            let mut label = [name.as_str(), dims.as_str()]
                .iter()
                .filter(|p| !p.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            if label.is_empty() {
                label = format!("{} {} np={}", s.backend, s.hierarchy, s.nranks);
            }
            // two series that nothing tells apart, not even their files
            let base = label.clone();
            for n in 2.. {
                if used.insert(label.clone()) {
                    break;
                }
                label = format!("{base} ({n})");
            }
            ((*s).clone(), label)
        })
        .collect()
}

/// Within a panel, what tells lines of one series apart: type, operation,
/// root, placement, where they vary.
fn panel_suffixes(keys: &[&LineKey]) -> Vec<String> {
    let varies = |f: &dyn Fn(&LineKey) -> String| keys.iter().map(|k| f(k)).collect::<BTreeSet<_>>().len() > 1;
    type Part<'a> = (bool, &'a dyn Fn(&LineKey) -> String);
    let parts: Vec<Part> = vec![
        (varies(&|k| k.dtype.clone()), &|k: &LineKey| k.dtype.clone()),
        (varies(&|k| k.op.clone()), &|k: &LineKey| k.op.clone()),
        (varies(&|k| k.root.to_string()), &|k: &LineKey| {
            format!("root {}", k.root)
        }),
        (varies(&|k| k.in_place.to_string()), &|k: &LineKey| {
            placement_name(k.in_place)
        }),
        (varies(&|k| traffic_name(k)), &traffic_name),
    ];
    keys.iter()
        .map(|k| {
            parts
                .iter()
                .filter(|(shown, _)| *shown)
                .map(|(_, f)| f(k))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// alltoallv's traffic as its column says it; none is nccl-tests' default.
fn traffic_name(k: &LineKey) -> String {
    k.traffic.clone().unwrap_or_else(|| "spread=1".to_string())
}

fn placement_name(in_place: bool) -> String {
    if in_place {
        Placement::InPlace
    } else {
        Placement::OutOfPlace
    }
    .to_string()
}

/// Each size's samples as one point: median and range (log10 for time).
/// A value that cannot be drawn (not finite; a time of 0 or less on the
/// log axis) is left out, and `dropped` told its size and value.
fn aggregate(sizes: &BTreeMap<u64, Vec<f64>>, metric: Metric, dropped: &mut dyn FnMut(u64, f64)) -> Vec<Point> {
    let mut points = Vec::new();
    for (&size, values) in sizes {
        let drawable = |v: &f64| v.is_finite() && (metric != Metric::Time || *v > 0.0);
        for v in values.iter().filter(|v| !drawable(v)) {
            dropped(size, *v);
        }
        let mut v: Vec<f64> = values.iter().copied().filter(drawable).collect();
        if v.is_empty() {
            continue;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        let scale = |y: f64| if metric == Metric::Time { y.log10() } else { y };
        points.push(Point {
            x: (size as f64).log2(),
            y: scale(median),
            lo: scale(v[0]),
            hi: scale(v[n - 1]),
            samples: n,
        });
    }
    points
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::Hierarchy;
    use crate::topology::profile::Profile::{Shm, Tcp};
    use crate::types::DType;

    fn row(run: &str, hierarchy: Hierarchy, size: u64, busbw: f64) -> Row {
        Row {
            record: Record {
                run_id: run.into(),
                timestamp: "2026-12-01T11:00:33Z".into(),
                collective: Collective::AllReduce,
                hierarchy,
                size_bytes: size,
                nranks: 2,
                busbw_gbps: busbw,
                placement: Placement::OutOfPlace,
                ..Record::default()
            },
            stats: Default::default(),
            file: "x.csv".into(),
        }
    }

    fn input<'a>(path: &'a str, rows: &'a [Row]) -> Input<'a> {
        Input {
            path: Path::new(path),
            rows,
            name: None,
        }
    }

    fn labels(plotted: &Plotted) -> Vec<Vec<(String, usize, usize)>> {
        plotted
            .panels
            .iter()
            .map(|p| p.lines.iter().map(|l| (l.label.clone(), l.colour, l.marker)).collect())
            .collect()
    }

    #[test]
    fn samples_of_a_point_become_their_median_and_range() {
        let rows: Vec<Row> = [1.0, 5.0, 2.0]
            .iter()
            .map(|&b| row("r", Hierarchy::Flat, 1024, b))
            .collect();
        let plotted = panels(&[input("20261201T110033Z-vm-1.csv", &rows)], Metric::Busbw);
        let panels = plotted.panels;
        assert_eq!(panels.len(), 1);
        assert_eq!(panels[0].lines.len(), 1);
        let p = panels[0].lines[0].points[0];
        assert_eq!((p.x, p.y, p.lo, p.hi, p.samples), (10.0, 2.0, 1.0, 5.0, 3));
        // one series, nothing to tell apart, a run id for a name: what it is
        assert_eq!(panels[0].lines[0].label, "mpi flat np=2");
        assert!(plotted.warnings.is_empty());
    }

    #[test]
    fn names_say_what_differs_and_never_a_run_id() {
        let rows = vec![
            row("a", Hierarchy::Flat, 8, 1.0),
            row("a", Hierarchy::RsArAg, 8, 1.0),
            row("b", Hierarchy::Flat, 8, 3.0),
        ];
        let plotted = panels(&[input("20261201T110033Z-vm-1.csv", &rows)], Metric::Busbw);
        let lines = &plotted.panels[0].lines;
        // the two runs of flat are two samples of one line
        let got: Vec<(&str, usize)> = lines.iter().map(|l| (l.label.as_str(), l.points[0].samples)).collect();
        assert_eq!(got, [("flat", 2), ("rs-ar-ag", 1)]);
        assert_eq!((lines[0].points[0].lo, lines[0].points[0].hi), (1.0, 3.0));
    }

    /// A suite's merged CSV: three launches of shm and three of tcp, each
    /// a run of its own, are two series, each with its launches' range.
    #[test]
    fn the_launches_of_one_suite_profile_are_one_series_with_their_range() {
        let mut rows = Vec::new();
        for (i, transport) in [Shm, Tcp, Shm, Tcp, Shm, Tcp].into_iter().enumerate() {
            let mut r = row(&format!("run{i}"), Hierarchy::Flat, 1024, 1.0 + i as f64);
            r.record.transport = transport;
            r.record.timestamp = format!("2026-12-06T03:31:2{i}Z");
            rows.push(r);
        }
        let plotted = panels(&[input("local.csv", &rows)], Metric::Busbw);
        let lines = &plotted.panels[0].lines;
        let got: Vec<(&str, usize, f64, f64)> = lines
            .iter()
            .map(|l| (l.label.as_str(), l.points[0].samples, l.points[0].lo, l.points[0].hi))
            .collect();
        assert_eq!(got, [("shm", 3, 1.0, 5.0), ("tcp", 3, 2.0, 6.0)]);
    }

    /// Imported logs have no start time: two files that nothing else tells
    /// apart are named by their stems, even when the stems look like run
    /// ids; with a start, a run id's stem gives way to it.
    #[test]
    fn files_are_named_by_their_stem_where_no_start_time_is_known() {
        let mut untimed = vec![row("x", Hierarchy::Flat, 8, 1.0)];
        untimed[0].record.timestamp = String::new();
        let timed = vec![row("y", Hierarchy::Flat, 8, 1.0)];
        let plotted = panels(
            &[
                input("nccl.csv", &untimed),
                input("20261201T110033Z-vm-1.csv", &untimed),
                input("20261201T110033Z-vm-2.csv", &timed),
            ],
            Metric::Busbw,
        );
        let names: Vec<String> = plotted.panels[0].lines.iter().map(|l| l.label.clone()).collect();
        assert_eq!(names, ["nccl", "20261201T110033Z-vm-1", "run at 2026-12-01 11:00:33"]);
    }

    /// A series keeps its colour in every panel, whatever other lines a
    /// panel has; its lines of other types differ by marker, the same one
    /// in every panel.
    #[test]
    fn a_series_has_one_colour_in_every_panel_and_its_types_differ_by_marker() {
        let mut rows = Vec::new();
        for (collective, dtype, transport) in [
            (Collective::AllReduce, DType::Float, Tcp),
            (Collective::AllReduce, DType::Int32, Tcp),
            (Collective::Broadcast, DType::Float, Shm),
            (Collective::Broadcast, DType::Float, Tcp),
        ] {
            let mut r = row("r", Hierarchy::Flat, 8, 1.0);
            r.record.collective = collective;
            r.record.dtype = dtype;
            r.record.transport = transport;
            rows.push(r);
        }
        let got = labels(&panels(&[input("a.csv", &rows)], Metric::Busbw));
        assert_eq!(
            got,
            [
                vec![("tcp float".to_string(), 1, 0), ("tcp int32".to_string(), 1, 1)],
                vec![("shm".to_string(), 0, 0), ("tcp".to_string(), 1, 0)],
            ]
        );
    }

    /// What compare keeps apart as cases, plot keeps apart as lines: a
    /// `--split` run's groups and its aggregate, each pinned sweep, and
    /// alltoallv's traffics are lines of their own, never samples of one.
    #[test]
    fn groups_pins_and_traffics_are_lines_of_their_own() {
        let one_line_each = |rows: &[Row]| {
            let plotted = panels(&[input("a.csv", rows)], Metric::Busbw);
            let got: Vec<(String, usize, usize)> = plotted.panels[0]
                .lines
                .iter()
                .map(|l| (l.label.clone(), l.colour, l.points[0].samples))
                .collect();
            got
        };
        let split: Vec<Row> = ["all", "1", "0", "10", "2"]
            .iter()
            .map(|g| {
                let mut r = row("r", Hierarchy::Flat, 8, 1.0);
                r.record.group = Some(g.to_string());
                r
            })
            .collect();
        let want = ["group 0", "group 1", "group 2", "group 10", "all groups"];
        let got = one_line_each(&split);
        assert_eq!(got.iter().map(|l| l.0.as_str()).collect::<Vec<_>>(), want);
        assert!(got.iter().all(|l| l.2 == 1), "{got:?}");
        let colours: BTreeSet<usize> = got.iter().map(|l| l.1).collect();
        assert_eq!(colours.len(), 5, "a colour per group: {got:?}");

        let pinned: Vec<Row> = ["ring", "tree", ""]
            .iter()
            .map(|pin| {
                let mut r = row("r", Hierarchy::Flat, 8, 1.0);
                r.record.algo_pin = AlgoPin::parse(pin).filter(|_| !pin.is_empty());
                r
            })
            .collect();
        let got = one_line_each(&pinned);
        let names: Vec<&str> = got.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, ["unpinned", "pinned ring", "pinned tree"]);

        let traffics: Vec<Row> = [None, Some("spread=0.5"), Some("matrix=m.txt")]
            .iter()
            .map(|t| {
                let mut r = row("r", Hierarchy::Flat, 8, 1.0);
                r.record.collective = Collective::AllToAllV;
                r.record.traffic = t.map(str::to_string);
                r
            })
            .collect();
        let got = labels(&panels(&[input("a.csv", &traffics)], Metric::Busbw));
        assert_eq!(
            got,
            [vec![
                ("a matrix=m.txt".to_string(), 0, 0),
                ("a spread=0.5".to_string(), 0, 1),
                ("a spread=1".to_string(), 0, 2),
            ]]
        );
    }

    #[test]
    fn every_value_that_cannot_be_drawn_is_left_out_with_a_warning() {
        let mut rows = vec![
            row("r", Hierarchy::Flat, 8, 1.0),
            row("r", Hierarchy::Flat, 16, f64::NAN),
            row("r", Hierarchy::Flat, 0, 1.0),
        ];
        rows[0].record.time_us = 0.0;
        let plotted = panels(&[input("a.csv", &rows)], Metric::Busbw);
        assert_eq!(plotted.panels[0].lines[0].points.len(), 1);
        assert_eq!(
            plotted.warnings,
            [
                "a.csv: all_reduce at size 0 B has no place on the log2 size axis; left out",
                "line \"a\": all_reduce 16 B: busbw NaN cannot be drawn; left out"
            ]
        );
        let timed = panels(&[input("a.csv", &rows[..1])], Metric::Time);
        assert!(timed.panels.is_empty());
        assert_eq!(
            timed.warnings,
            ["line \"a\": all_reduce 8 B: time 0 cannot be drawn; left out"]
        );
    }
}
