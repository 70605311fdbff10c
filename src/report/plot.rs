//! `collbench plot`: a metric against message size, one panel per
//! collective, one line per run, hierarchy mode or transport, as SVG or
//! PNG (plotters). Text is drawn with DejaVu Sans compiled into the binary
//! (the `dejavu` crate through plotters' `ab_glyph` feature), so no system
//! font library is needed, on a CI machine or anywhere.
//!
//! What is drawn: out-of-place rows (in-place ones only for a series that
//! has no out-of-place row); size on a log-2 x axis; busbw and algbw on a
//! linear y axis from 0, time on a log-10 y axis. When a panel's rows vary
//! in dtype, op or root, each combination is its own line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::prelude::*;

use super::compare::Metric;
use super::compare::input::{Row, read_file};
use crate::collective::Collective;
use crate::error::Error;
use crate::record::{CaseKey, human_size, op_column, root_column};
use crate::types::Placement;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesBy {
    Run,
    Hierarchy,
    Transport,
}

impl SeriesBy {
    pub const ALL: [SeriesBy; 3] = [SeriesBy::Run, SeriesBy::Hierarchy, SeriesBy::Transport];

    pub fn name(self) -> &'static str {
        match self {
            SeriesBy::Run => "run",
            SeriesBy::Hierarchy => "hierarchy",
            SeriesBy::Transport => "transport",
        }
    }

    pub fn parse(s: &str) -> Option<SeriesBy> {
        match s.trim().to_ascii_lowercase().as_str() {
            "run" => Some(SeriesBy::Run),
            "hierarchy" => Some(SeriesBy::Hierarchy),
            "transport" => Some(SeriesBy::Transport),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub struct PlotOptions {
    pub inputs: Vec<PathBuf>,
    pub output: PathBuf,
    pub metric: Metric,
    pub by: SeriesBy,
    pub overwrite: bool,
}

/// What was drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub panels: usize,
    pub series: usize,
}

/// One panel: a collective and its lines, label -> (log2 size, value).
struct Panel {
    collective: String,
    lines: BTreeMap<String, Vec<(f64, f64)>>,
}

const PANEL_W: u32 = 560;
const PANEL_H: u32 = 380;
const TITLE_H: u32 = 44;
const FONT: &str = "sans-serif";

pub fn plot(opts: &PlotOptions) -> Result<Drawn, Error> {
    let ext = opts
        .output
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    let svg = match ext.as_deref() {
        Some("svg") => true,
        Some("png") => false,
        _ => {
            return Err(Error::usage(format!(
                "-o {}: the plot file must end in .svg or .png",
                opts.output.display()
            )));
        }
    };
    let mut files = Vec::new();
    for path in &opts.inputs {
        files.push((path.clone(), read_file(path)?));
    }
    let panels = panels(&files, opts.by, opts.metric);
    if panels.is_empty() {
        return Err(Error::usage(
            "nothing to plot: the CSV files have no rows with a size above 0",
        ));
    }
    // Refuses an existing file unless --overwrite, before drawing anything.
    drop(super::create_file(&opts.output, opts.overwrite, "plot")?);
    register_font()?;

    let cols = match panels.len() {
        1 => 1,
        2..=4 => 2,
        _ => 3,
    };
    let rows = panels.len().div_ceil(cols);
    let size = (PANEL_W * cols as u32, PANEL_H * rows as u32 + TITLE_H);
    let title = format!("collbench: {} against message size", metric_label(opts.metric));
    let result = if svg {
        let root = SVGBackend::new(&opts.output, size).into_drawing_area();
        draw(&root, &title, &panels, cols, opts.metric).and_then(|_| root.present().map_err(|e| e.to_string()))
    } else {
        let root = BitMapBackend::new(&opts.output, size).into_drawing_area();
        draw(&root, &title, &panels, cols, opts.metric).and_then(|_| root.present().map_err(|e| e.to_string()))
    };
    result.map_err(|e| Error::runtime(format!("cannot draw the plot {}: {e}", opts.output.display())))?;
    Ok(Drawn {
        panels: panels.len(),
        series: panels.iter().map(|p| p.lines.len()).sum(),
    })
}

/// plotters finds fonts by family name; ours comes from the binary.
fn register_font() -> Result<(), Error> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if ok {
        Ok(())
    } else {
        Err(Error::runtime("the built-in font could not be loaded"))
    }
}

fn metric_label(metric: Metric) -> String {
    match metric {
        Metric::Busbw => "bus bandwidth (GB/s)".into(),
        Metric::Algbw => "algorithm bandwidth (GB/s)".into(),
        Metric::Time => "time per operation (us, log scale)".into(),
    }
}

/// A line of a panel: its collective, its series, and the rest of its
/// case (type, operation, root, placement; no size, hierarchy, transport
/// or rank count).
type Key = (Collective, String, CaseKey);

/// Groups rows into panels and lines (see the module doc).
fn panels(files: &[(PathBuf, Vec<Row>)], by: SeriesBy, metric: Metric) -> Vec<Panel> {
    let points = lines_of(files, by, metric);
    // collective -> its lines
    type Line = (Key, BTreeMap<u64, f64>);
    let mut by_collective: BTreeMap<Collective, Vec<Line>> = BTreeMap::new();
    for (key, sizes) in points {
        by_collective.entry(key.0).or_default().push((key, sizes));
    }
    let mut panels = Vec::new();
    for (collective, entries) in by_collective {
        let varies =
            |f: &dyn Fn(&CaseKey) -> String| entries.iter().map(|(k, _)| f(&k.2)).collect::<BTreeSet<_>>().len() > 1;
        let (dtype, op, root, placement) = (
            varies(&|k| k.dtype.to_string()),
            varies(&|k| op_column::text(k.op).to_string()),
            varies(&|k| root_column::value(k.root).to_string()),
            varies(&|k| k.placement.to_string()),
        );
        let mut lines = BTreeMap::new();
        for ((_, series, k), sizes) in entries {
            let mut label = series;
            if dtype {
                label.push_str(&format!(" {}", k.dtype));
            }
            if op {
                label.push_str(&format!(" {}", op_column::text(k.op)));
            }
            if root {
                label.push_str(&format!(" root {}", root_column::value(k.root)));
            }
            if placement {
                label.push_str(&format!(" {}", k.placement));
            }
            let pts: Vec<(f64, f64)> = sizes
                .into_iter()
                .filter(|(_, v)| v.is_finite() && (metric != Metric::Time || *v > 0.0))
                .map(|(s, v)| ((s as f64).log2(), if metric == Metric::Time { v.log10() } else { v }))
                .collect();
            if !pts.is_empty() {
                lines.insert(label, pts);
            }
        }
        if !lines.is_empty() {
            panels.push(Panel {
                collective: collective.name().to_string(),
                lines,
            });
        }
    }
    panels
}

/// Every line's points, size -> value: out-of-place rows, or in-place
/// ones for a series that has no out-of-place row.
fn lines_of(files: &[(PathBuf, Vec<Row>)], by: SeriesBy, metric: Metric) -> BTreeMap<Key, BTreeMap<u64, f64>> {
    let several_files = files.len() > 1;
    let mut points: BTreeMap<Key, BTreeMap<u64, f64>> = BTreeMap::new();
    let mut has_out_of_place: BTreeSet<(Collective, String)> = BTreeSet::new();
    for (path, rows) in files {
        let stem = stem(path);
        let runs: BTreeSet<&str> = rows.iter().map(|r| r.record.run_id.as_str()).collect();
        for row in rows {
            let r = &row.record;
            if r.size_bytes == 0 {
                continue;
            }
            let series = match by {
                SeriesBy::Run if runs.len() > 1 => format!("{stem} {}", r.run_id),
                SeriesBy::Run => stem.clone(),
                SeriesBy::Hierarchy if several_files => format!("{stem}: {}", r.hierarchy),
                SeriesBy::Hierarchy => r.hierarchy.to_string(),
                SeriesBy::Transport if several_files => format!("{stem}: {}", r.transport),
                SeriesBy::Transport => r.transport.to_string(),
            };
            if r.placement == Placement::OutOfPlace {
                has_out_of_place.insert((r.collective, series.clone()));
            }
            let mut rest = CaseKey::of(r, false).any_size();
            (rest.hierarchy, rest.transport) = Default::default();
            points
                .entry((r.collective, series, rest))
                .or_default()
                .insert(r.size_bytes, metric.value(r));
        }
    }
    points.retain(|(collective, series, rest), _| {
        rest.placement == Placement::OutOfPlace || !has_out_of_place.contains(&(*collective, series.clone()))
    });
    points
}

fn stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    panels: &[Panel],
    cols: usize,
    metric: Metric,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let body = root.titled(title, (FONT, 24)).map_err(err)?;
    let rows = panels.len().div_ceil(cols);
    let areas = body.split_evenly((rows, cols));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_panel(area, panel, metric).map_err(err)?;
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &Panel,
    metric: Metric,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let all = || panel.lines.values().flatten();
    let x_min = all().map(|p| p.0).fold(f64::INFINITY, f64::min).floor();
    let x_max = all()
        .map(|p| p.0)
        .fold(f64::NEG_INFINITY, f64::max)
        .ceil()
        .max(x_min + 1.0);
    let y_lo = all().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let y_hi = all().map(|p| p.1).fold(f64::NEG_INFINITY, f64::max);
    let (y_min, y_max) = if metric == Metric::Time {
        (y_lo.floor(), y_hi.ceil().max(y_lo.floor() + 1.0))
    } else {
        (0.0, if y_hi > 0.0 { y_hi * 1.1 } else { 1.0 })
    };
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.collective, (FONT, 20))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(62)
        .build_cartesian_2d(x_min..x_max, y_min..y_max)?;
    // Axes carry log2(size) and, for time, log10(time): only whole
    // exponents get a label, written as the size or time they stand for.
    let whole = |v: f64| (v - v.round()).abs() < 1e-9;
    let x_fmt = |x: &f64| {
        if whole(*x) {
            human_size(2f64.powf(x.round()) as u64).replace(' ', "")
        } else {
            String::new()
        }
    };
    let y_fmt = |y: &f64| match metric {
        Metric::Time if whole(*y) => trim(10f64.powf(y.round())),
        Metric::Time => String::new(),
        _ => trim(*y),
    };
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log2 scale)")
        .y_desc(metric_label(metric))
        .x_labels(12)
        .y_labels(8)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .axis_desc_style((FONT, 15))
        .label_style((FONT, 13))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()?;
    for (i, (label, points)) in panel.lines.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(points.iter().copied(), color.stroke_width(2)))?
            .label(label.as_str())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart.draw_series(points.iter().map(|p| Circle::new(*p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font((FONT, 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()?;
    Ok(())
}

fn trim(v: f64) -> String {
    if v.abs() >= 100.0 || v == v.round() {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_labels_read_as_numbers() {
        assert_eq!(trim(20.0), "20");
        assert_eq!(trim(2.5), "2.5");
        assert_eq!(trim(0.25), "0.25");
    }

    #[test]
    fn the_output_extension_picks_the_format_and_others_are_refused() {
        let opts = PlotOptions {
            inputs: vec![],
            output: PathBuf::from("plot.pdf"),
            metric: Metric::Busbw,
            by: SeriesBy::Run,
            overwrite: false,
        };
        let e = plot(&opts).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(".svg or .png"), "{e}");
    }
}
