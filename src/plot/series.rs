//! Which lines a plot has and what they are called: rows grouped into one
//! panel per collective and one line per series, a series being everything
//! that tells two rows apart but their size and their sample: the file and
//! the run, the backend, the transport, the hierarchy mode, the rank count,
//! and within a panel the type, operation and root. Samples of one point
//! (`--cycles`, `--repeat`) become one point of the line: their median,
//! with the fastest and slowest sample as its spread.
//!
//! Names say what differs between the series ("flat", "rs-ar-ag", "shm
//! np=2"), led by the run's name where one was given (`plot --label`, or
//! the `label` column that `run --label` writes) or where nothing else
//! tells two runs apart (the file's stem, or the run's start time when the
//! stem is only a run id). Nothing here draws.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::collective::Collective;
use crate::record::read::Row;
use crate::record::{op_column, root_column};
use crate::types::Metric;
use crate::types::Placement;

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
    /// The same series has the same colour in every panel.
    pub colour: usize,
    pub points: Vec<Point>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub collective: String,
    pub lines: Vec<Line>,
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
    run: usize,
    backend: String,
    transport: String,
    hierarchy: String,
    nranks: u64,
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
}

/// How a run can be named: what the user gave, else a fallback (the
/// file's stem, or the run's start time).
struct RunName {
    given: Option<String>,
    fallback: String,
    /// Its first row's timestamp.
    started: String,
    /// The fallback is the file's stem (a name someone chose), not a time.
    named_file: bool,
}

/// Groups the rows of `inputs` into panels and lines (see the module doc).
pub fn panels(inputs: &[Input], metric: Metric) -> Vec<Panel> {
    let (samples, names) = collect(inputs, metric);
    let series: BTreeSet<&Series> = samples.keys().map(|k| &k.series).collect();
    let series_names = series_names(&series, &names);
    // colours follow the order of full labels over the whole plot
    let mut labelled: Vec<(LineKey, String)> = Vec::new();
    let mut by_collective: BTreeMap<Collective, Vec<&LineKey>> = BTreeMap::new();
    for key in samples.keys() {
        by_collective.entry(key.collective).or_default().push(key);
    }
    for keys in by_collective.values() {
        let suffix = panel_suffixes(keys);
        for (key, suffix) in keys.iter().zip(suffix) {
            let base = &series_names[&key.series];
            let label = [base.as_str(), suffix.as_str()]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(" ");
            labelled.push(((*key).clone(), label));
        }
    }
    let mut order: Vec<(&Series, &str)> = labelled.iter().map(|(k, l)| (&k.series, l.as_str())).collect();
    order.sort();
    order.dedup_by(|a, b| a.1 == b.1);
    let colour_of = |label: &str| order.iter().position(|(_, l)| *l == label).unwrap_or(0);
    let mut panels: Vec<Panel> = Vec::new();
    for (key, label) in &labelled {
        let points = aggregate(&samples[key], metric);
        if points.is_empty() {
            continue;
        }
        let line = Line {
            label: label.clone(),
            colour: colour_of(label),
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
        p.lines.sort_by_key(|l| l.colour);
    }
    panels
}

type Samples = BTreeMap<LineKey, BTreeMap<u64, Vec<f64>>>;

/// Every line's samples by size (out-of-place rows, or in-place ones for a
/// line that has no out-of-place row), and the name of every run.
fn collect(inputs: &[Input], metric: Metric) -> (Samples, BTreeMap<(usize, usize), RunName>) {
    let mut samples: Samples = BTreeMap::new();
    let mut names = BTreeMap::new();
    for (file, input) in inputs.iter().enumerate() {
        let mut runs: Vec<&str> = Vec::new();
        for row in input.rows {
            let r = &row.record;
            let run = match runs.iter().position(|id| *id == r.run_id) {
                Some(i) => i,
                None => {
                    runs.push(&r.run_id);
                    runs.len() - 1
                }
            };
            names.entry((file, run)).or_insert_with(|| RunName {
                given: input.name.map(str::to_string).or_else(|| r.label.clone()),
                fallback: String::new(),
                started: r.timestamp.clone(),
                named_file: false,
            });
            if r.size_bytes == 0 {
                continue;
            }
            let key = LineKey {
                collective: r.collective,
                series: Series {
                    file,
                    run,
                    backend: r.backend.to_string(),
                    transport: r.transport.to_string(),
                    hierarchy: r.hierarchy.to_string(),
                    nranks: r.nranks,
                },
                dtype: r.dtype.to_string(),
                op: op_column::text(r.op).to_string(),
                root: root_column::value(r.root),
                in_place: r.placement == Placement::InPlace,
            };
            samples
                .entry(key)
                .or_default()
                .entry(r.size_bytes)
                .or_default()
                .push(metric.value(r));
        }
        let stem = stem(input.path);
        for run in 0..runs.len() {
            if let Some(n) = names.get_mut(&(file, run)) {
                let at = format!("run at {}", n.started.replace('T', " ").trim_end_matches('Z'));
                // a run id says nothing a reader can use; several runs in
                // one file are told apart by their start
                n.named_file = !is_run_id(&stem);
                n.fallback = match (runs.len() > 1, is_run_id(&stem)) {
                    (_, true) => at,
                    (false, false) => stem.clone(),
                    (true, false) => format!("{stem} {at}"),
                };
            }
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
    (samples, names)
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
/// name where one was given or where it alone tells series apart.
fn series_names(series: &BTreeSet<&Series>, runs: &BTreeMap<(usize, usize), RunName>) -> BTreeMap<Series, String> {
    let varies = |f: &dyn Fn(&Series) -> String| series.iter().map(|s| f(s)).collect::<BTreeSet<_>>().len() > 1;
    let dims: Vec<&dyn Fn(&Series) -> String> = vec![
        &|s: &Series| s.backend.clone(),
        &|s: &Series| s.transport.clone(),
        &|s: &Series| s.hierarchy.clone(),
        &|s: &Series| format!("np={}", s.nranks),
    ];
    let shown: Vec<&&dyn Fn(&Series) -> String> = dims.iter().filter(|f| varies(**f)).collect();
    let describe = |s: &Series| shown.iter().map(|f| f(s)).collect::<Vec<_>>().join(" ");
    let described: Vec<String> = series.iter().map(|s| describe(s)).collect();
    let ambiguous = described.iter().collect::<BTreeSet<_>>().len() < series.len();
    let given = series
        .iter()
        .any(|s| runs.get(&(s.file, s.run)).is_some_and(|n| n.given.is_some()));
    let mut used: BTreeSet<String> = BTreeSet::new();
    series
        .iter()
        .zip(described)
        .map(|(s, dims)| {
            let run = runs.get(&(s.file, s.run));
            let name = match run {
                Some(RunName { given: Some(g), .. }) => g.clone(),
                Some(n) if ambiguous || (!given && dims.is_empty() && n.named_file) => n.fallback.clone(),
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
            // two runs that nothing tells apart, not even their start
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

fn placement_name(in_place: bool) -> String {
    if in_place {
        Placement::InPlace
    } else {
        Placement::OutOfPlace
    }
    .to_string()
}

/// Each size's samples as one point: median and range (log10 for time;
/// times of 0 and non-finite values are left out).
fn aggregate(sizes: &BTreeMap<u64, Vec<f64>>, metric: Metric) -> Vec<Point> {
    let mut points = Vec::new();
    for (&size, values) in sizes {
        let mut v: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && (metric != Metric::Time || *v > 0.0))
            .collect();
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
    use crate::record::Record;
    use crate::topology::Hierarchy;

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

    #[test]
    fn samples_of_a_point_become_their_median_and_range() {
        let rows: Vec<Row> = [1.0, 5.0, 2.0]
            .iter()
            .map(|&b| row("r", Hierarchy::Flat, 1024, b))
            .collect();
        let input = Input {
            path: Path::new("20261201T110033Z-vm-1.csv"),
            rows: &rows,
            name: None,
        };
        let panels = panels(&[input], Metric::Busbw);
        assert_eq!(panels.len(), 1);
        assert_eq!(panels[0].lines.len(), 1);
        let p = panels[0].lines[0].points[0];
        assert_eq!((p.x, p.y, p.lo, p.hi, p.samples), (10.0, 2.0, 1.0, 5.0, 3));
        // one series, nothing to tell apart, a run id for a name: what it is
        assert_eq!(panels[0].lines[0].label, "mpi flat np=2");
    }

    #[test]
    fn names_say_what_differs_and_never_a_run_id() {
        let rows = vec![
            row("a", Hierarchy::Flat, 8, 1.0),
            row("a", Hierarchy::RsArAg, 8, 1.0),
            row("b", Hierarchy::Flat, 8, 1.0),
        ];
        let input = Input {
            path: Path::new("20261201T110033Z-vm-1.csv"),
            rows: &rows,
            name: None,
        };
        let labels: Vec<String> = panels(&[input], Metric::Busbw)[0]
            .lines
            .iter()
            .map(|l| l.label.clone())
            .collect();
        // two runs of flat: only their start tells them apart
        assert_eq!(labels.len(), 3, "{labels:?}");
        assert!(labels.iter().all(|l| !l.contains("20261201T110033Z")), "{labels:?}");
        assert!(labels.iter().any(|l| l.ends_with("rs-ar-ag")), "{labels:?}");
    }
}
