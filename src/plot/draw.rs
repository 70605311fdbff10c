//! Drawing the panels of `series` into an SVG or PNG file: a title that
//! always fits the picture, a grid of panels, per line its median points,
//! its samples' range (a shaded band and whiskers) and a legend entry.
//! Colours are Okabe and Ito's (2008) palette, in an order that keeps the
//! first lines far apart, one per series; the marker's shape tells a
//! series' lines apart (and series past the eighth), in the legend too.

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::FONT;
use super::picture::Picture;
use super::series::{Line, Panel};
use crate::record::human_size;
use crate::types::Metric;

pub const PANEL_W: u32 = 560;
pub const PANEL_H: u32 = 380;
/// The title's band: the title, and the note on bands where there is one.
pub const TITLE_H: u32 = 44;
pub const TITLE_NOTE_H: u32 = 62;
const TITLE_PX: u32 = 24;

/// Okabe-Ito: blue, vermillion, bluish green, reddish purple, orange, sky
/// blue, black, yellow (last: the faintest on white).
const PALETTE: [RGBColor; 8] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
    RGBColor(0, 0, 0),
    RGBColor(240, 228, 66),
];

pub fn colour(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

pub fn metric_label(metric: Metric) -> String {
    match metric {
        Metric::Busbw => "bus bandwidth (GB/s)".into(),
        Metric::Algbw => "algorithm bandwidth (GB/s)".into(),
        Metric::Time => "time per operation (us, log scale)".into(),
    }
}

/// Columns of the panel grid.
pub fn grid_columns(panels: usize) -> usize {
    match panels {
        1 => 1,
        2..=4 => 2,
        _ => 3,
    }
}

/// The picture's size for `panels` panels, with or without the note.
pub fn picture_size(panels: usize, noted: bool) -> (u32, u32) {
    let cols = grid_columns(panels);
    let rows = panels.div_ceil(cols);
    let title = if noted { TITLE_NOTE_H } else { TITLE_H };
    (PANEL_W * cols as u32, PANEL_H * rows as u32 + title)
}

/// Whether some point has several samples (then a note explains bands).
fn sampled(panels: &[Panel]) -> bool {
    panels
        .iter()
        .flat_map(|p| &p.lines)
        .flat_map(|l| &l.points)
        .any(|p| p.samples > 1)
}

/// The plot as a `Picture`: its title and panels.
pub struct Plot<'a> {
    pub title: &'a str,
    pub panels: &'a [Panel],
    pub metric: Metric,
}

impl Picture for Plot<'_> {
    fn size(&self) -> (u32, u32) {
        picture_size(self.panels.len(), sampled(self.panels))
    }

    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        draw(root, self.title, self.panels, self.metric)
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel],
    metric: Metric,
) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let (head, body) = root.split_vertically(if sampled(panels) { TITLE_NOTE_H } else { TITLE_H });
    draw_title(&head, title, panels).map_err(err)?;
    let cols = grid_columns(panels.len());
    let areas = body.split_evenly((panels.len().div_ceil(cols), cols));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_panel(area, panel, metric).map_err(err)?;
    }
    Ok(())
}

/// The title, shrunk (and at worst shortened) until it fits the width; a
/// note on the bands when some point has several samples.
fn draw_title<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    title: &str,
    panels: &[Panel],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let (width, _) = area.dim_in_pixel();
    let room = width.saturating_sub(24);
    let fits = |text: &str, px: u32| {
        area.estimate_text_size(text, &TextStyle::from((FONT, px).into_font()))
            .is_ok_and(|(w, _)| w <= room)
    };
    let mut px = TITLE_PX;
    while px > 12 && !fits(title, px) {
        px -= 1;
    }
    let mut text: String = title.to_string();
    while !fits(&text, px) && text.chars().count() > 1 {
        text = text.chars().take(text.chars().count() - 2).collect::<String>() + "…";
    }
    let centre = (width / 2) as i32;
    let style = TextStyle::from((FONT, px).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    area.draw(&Text::new(text, (centre, 8), style))?;
    if sampled(panels) {
        let note = "each point: the median of its samples; shaded: fastest to slowest sample";
        let grey = BLACK.mix(0.7);
        let style = TextStyle::from((FONT, 13).into_font())
            .color(&grey)
            .pos(Pos::new(HPos::Center, VPos::Top));
        area.draw(&Text::new(note, (centre, 8 + px as i32 + 6), style))?;
    }
    Ok(())
}

/// The axes' ranges: log2 size; the metric from 0 (bandwidths) or whole
/// powers of ten (time, already log10).
fn ranges(panel: &Panel, metric: Metric) -> ((f64, f64), (f64, f64)) {
    let all = || panel.lines.iter().flat_map(|l| &l.points);
    let x_min = all().map(|p| p.x).fold(f64::INFINITY, f64::min).floor();
    let x_max = all()
        .map(|p| p.x)
        .fold(f64::NEG_INFINITY, f64::max)
        .ceil()
        .max(x_min + 1.0);
    let y_lo = all().map(|p| p.lo).fold(f64::INFINITY, f64::min);
    let y_hi = all().map(|p| p.hi).fold(f64::NEG_INFINITY, f64::max);
    let y = if metric == Metric::Time {
        (y_lo.floor(), y_hi.ceil().max(y_lo.floor() + 1.0))
    } else {
        (0.0, if y_hi > 0.0 { y_hi * 1.1 } else { 1.0 })
    };
    ((x_min, x_max), y)
}

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    metric: Metric,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let ((x_min, x_max), (y_min, y_max)) = ranges(panel, metric);
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
    let step = linear_step(y_min, y_max);
    let y_fmt = |y: &f64| match metric {
        Metric::Time if whole(*y) => tick_label(10f64.powf(y.round()), 1.0),
        Metric::Time => String::new(),
        _ => tick_label(*y, step),
    };
    // the y labels' area: the widest label, its tick and the axis' title
    let label_font = TextStyle::from((FONT, LABEL_PX).into_font());
    let widest = RangedCoordf64::from(y_min..y_max)
        .key_points(Y_LABELS)
        .iter()
        .filter_map(|y| area.estimate_text_size(&y_fmt(y), &label_font).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.collective, (FONT, 20))
        .margin(12)
        // room for half of the last size's label
        .margin_right(26)
        .x_label_area_size(42)
        .y_label_area_size((widest + Y_TITLE_ROOM).max(62))
        .build_cartesian_2d(x_min..x_max, y_min..y_max)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log2 scale)")
        .y_desc(metric_label(metric))
        .x_labels(12)
        .y_labels(Y_LABELS)
        .x_label_formatter(&x_fmt)
        .y_label_formatter(&y_fmt)
        .axis_desc_style((FONT, 15))
        .label_style(label_font.clone())
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()?;
    for line in &panel.lines {
        draw_line(&mut chart, line)?;
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

type Chart<'a, DB> =
    ChartContext<'a, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>>;

/// One line: its range (band and whiskers), the medians joined, a marker
/// per point, a legend entry.
fn draw_line<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    line: &Line,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    let c = colour(line.colour);
    let spread: Vec<_> = line.points.iter().filter(|p| p.samples > 1 && p.hi > p.lo).collect();
    if line.points.len() > 1 && !spread.is_empty() {
        let mut band: Vec<(f64, f64)> = line.points.iter().map(|p| (p.x, p.hi)).collect();
        band.extend(line.points.iter().rev().map(|p| (p.x, p.lo)));
        chart.draw_series(std::iter::once(Polygon::new(band, c.mix(0.18).filled())))?;
    }
    chart.draw_series(
        spread
            .iter()
            .map(|p| PathElement::new(vec![(p.x, p.lo), (p.x, p.hi)], c.mix(0.8).stroke_width(1))),
    )?;
    let medians: Vec<(f64, f64)> = line.points.iter().map(|p| (p.x, p.y)).collect();
    let shape = (line.colour / PALETTE.len() + line.marker) % 3;
    let drawn = chart
        .draw_series(LineSeries::new(medians.iter().copied(), c.stroke_width(2)))?
        .label(line.label.as_str());
    // the legend's sample: the line and its marker
    let sample =
        move |x: i32, y: i32| EmptyElement::at((x, y)) + PathElement::new(vec![(0, 0), (18, 0)], c.stroke_width(2));
    match shape {
        0 => {
            drawn.legend(move |(x, y)| sample(x, y) + Circle::new((9, 0), 3, c.filled()));
            chart.draw_series(medians.iter().map(|p| Circle::new(*p, 3, c.filled())))?;
        }
        1 => {
            drawn.legend(move |(x, y)| sample(x, y) + TriangleMarker::new((9, 0), 4, c.filled()));
            chart.draw_series(medians.iter().map(|p| TriangleMarker::new(*p, 4, c.filled())))?;
        }
        _ => {
            drawn.legend(move |(x, y)| sample(x, y) + Cross::new((9, 0), 4, c.stroke_width(2)));
            chart.draw_series(medians.iter().map(|p| Cross::new(*p, 4, c.stroke_width(2))))?;
        }
    }
    Ok(())
}

/// Labelled gridlines on a y axis, at most.
const Y_LABELS: usize = 8;
/// Tick labels' font size.
const LABEL_PX: u32 = 13;
/// Beside the widest y label, the room for its tick and the axis' title.
const Y_TITLE_ROOM: u32 = 32;

/// The step between the labelled gridlines plotters draws on a linear axis
/// from `lo` to `hi` (1, 2 or 5 times a power of ten), or 1 with fewer than
/// two of them.
fn linear_step(lo: f64, hi: f64) -> f64 {
    let ticks = plotters::coord::types::RangedCoordf64::from(lo..hi).key_points(Y_LABELS);
    match ticks.as_slice() {
        [a, b, ..] if b > a => b - a,
        _ => 1.0,
    }
}

/// A tick's label: as many decimals as the step between ticks needs (0.0005
/// needs 4), trailing zeros dropped, so that labels of different ticks
/// differ and each says its value.
fn tick_label(v: f64, step: f64) -> String {
    let decimals = (-step.log10() - 1e-9).ceil().clamp(0.0, 17.0) as usize;
    let text = format!("{v:.decimals$}");
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.')
    } else {
        &text
    };
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::super::text::GlyphText;
    use super::*;

    #[test]
    fn tick_labels_read_as_numbers() {
        assert_eq!(tick_label(20.0, 5.0), "20");
        assert_eq!(tick_label(2.5, 0.5), "2.5");
        assert_eq!(tick_label(0.25, 0.05), "0.25");
        assert_eq!(tick_label(1e7, 1.0), "10000000");
    }

    /// Every labelled gridline's label differs from the others and reads
    /// back as its value, whatever the axis' scale (a busbw of 0.004 GB/s
    /// had 0.0005 and 0.001 both labelled 0.001).
    #[test]
    fn tick_labels_are_distinct_and_say_their_value() {
        let labels = |hi: f64| {
            let step = linear_step(0.0, hi);
            let ticks = RangedCoordf64::from(0.0..hi).key_points(Y_LABELS);
            (
                ticks.iter().map(|&v| tick_label(v, step)).collect::<Vec<_>>(),
                ticks,
                step,
            )
        };
        assert_eq!(
            labels(0.0038).0,
            ["0", "0.0005", "0.001", "0.0015", "0.002", "0.0025", "0.003", "0.0035"]
        );
        for hi in [
            4.5e-7, 3.7e-4, 0.0038, 0.0045, 0.012, 0.38, 1.7, 4.4, 13.0, 250.0, 1234.5, 98765.0,
        ] {
            let (got, ticks, step) = labels(hi);
            assert!(ticks.len() >= 2, "{hi}: {ticks:?}");
            let distinct: BTreeSet<&String> = got.iter().collect();
            assert_eq!(distinct.len(), got.len(), "{hi}: {got:?}");
            for (label, v) in got.iter().zip(&ticks) {
                let read: f64 = label.parse().unwrap();
                assert!((read - v).abs() < step * 1e-6, "{hi}: {label} for {v}");
            }
        }
    }

    /// On a time axis up to 10^7 us, the y labels (`10000000`) neither
    /// run into the axis' title nor are cut: left of the axis line, the
    /// columns with ink are the title's, then white, then the labels'
    /// (then white, then the ticks), none at the picture's edge.
    #[test]
    fn the_widest_y_label_keeps_clear_of_the_axis_title() {
        use super::super::series::{Line, Point};
        let points = (0..10)
            .map(|i| {
                let y = 3.35 + 0.3 * i as f64;
                Point {
                    x: 25.0 + i as f64,
                    y,
                    lo: y,
                    hi: y,
                    samples: 1,
                }
            })
            .collect();
        let panels = [Panel {
            collective: "sendrecv".into(),
            lines: vec![Line {
                label: "a".into(),
                colour: 0,
                marker: 0,
                points,
            }],
        }];
        crate::plot::register_font().unwrap();
        let plot = Plot {
            title: "t",
            panels: &panels,
            metric: Metric::Time,
        };
        let png = crate::plot::picture::render(&plot, false).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        let (w, h) = (info.width as usize, info.height as usize);
        let dark = |x: usize, y: usize| rgb[(y * w + x) * 3] < 160;
        // the plot's rows, below the caption and above the size labels
        let rows = TITLE_H as usize..h - 50;
        let ink: Vec<usize> = (0..w).map(|x| rows.clone().filter(|&y| dark(x, y)).count()).collect();
        let axis = (0..w / 2).max_by_key(|&x| ink[x]).unwrap();
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for x in (0..axis).filter(|&x| ink[x] > 0) {
            match runs.last_mut() {
                Some(run) if run.1 + 1 == x => run.1 = x,
                _ => runs.push((x, x)),
            }
        }
        // the title (15 px high), the labels' digits, the ticks
        assert!(
            runs.len() >= 3,
            "title, labels, ticks: ink at columns {runs:?}, axis at {axis}"
        );
        assert!(runs[0].0 > 0, "nothing at the picture's edge: {runs:?}");
        assert!(runs[0].1 - runs[0].0 < 20, "the title alone: {runs:?}");
        assert!(runs[1].0 >= runs[0].1 + 6, "a gap between title and labels: {runs:?}");
        // the labels' ink as wide as "10000000" drawn alone: not cut
        let mut alone = vec![255; 3 * 120 * 30];
        {
            let scratch = GlyphText::new(BitMapBackend::with_buffer(&mut alone, (120, 30))).into_drawing_area();
            let style = TextStyle::from((FONT, LABEL_PX).into_font());
            scratch.draw(&Text::new("10000000", (10, 5), style)).unwrap();
            scratch.present().unwrap();
        }
        let inked: Vec<usize> = (0..120)
            .filter(|&x| (0..30).any(|y| alone[(y * 120 + x) * 3] < 160))
            .collect();
        let want = inked.last().unwrap() + 1 - inked[0];
        let labels = runs[runs.len() - 2].1 + 1 - runs[1].0;
        // (antialiasing at another subpixel offset: a column either way)
        assert!(
            labels.abs_diff(want) <= 1,
            "the widest label whole ({want} px): {runs:?}"
        );
    }

    #[test]
    fn the_palette_starts_with_okabe_ito_blue_vermillion_green() {
        assert_eq!(colour(0), RGBColor(0, 114, 178));
        assert_eq!(colour(1), RGBColor(213, 94, 0));
        assert_eq!(colour(2), RGBColor(0, 158, 115));
        assert_eq!(colour(8), colour(0));
    }
}
