//! Drawing the panels of `series` into an SVG or PNG file: a title that
//! always fits the picture, a grid of panels, per line its median points,
//! its samples' range (a shaded band and whiskers) and a legend entry.
//! Colours are Okabe and Ito's (2008) palette, in an order that keeps the
//! first lines far apart, one per series; the marker's shape tells a
//! series' lines apart (and series past the eighth), in the legend too.

use plotters::coord::Shift;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, ValueFormatter};
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
    let (x, y) = ranges(panel, metric);
    let y = YAxis {
        range: RangedCoordf64::from(y.0..y.1),
        ticks: y_ticks(metric, y, plot_height(area, panel)),
    };
    // The x axis carries log2(size): only whole exponents get a label,
    // written as the size they stand for.
    let whole = |v: f64| (v - v.round()).abs() < 1e-9;
    let x_fmt = |x: &f64| {
        if whole(*x) {
            human_size(2f64.powf(x.round()) as u64).replace(' ', "")
        } else {
            String::new()
        }
    };
    // the y labels' area: the widest label, its tick and the axis' title
    let label_font = TextStyle::from((FONT, LABEL_PX).into_font());
    let widest = y
        .ticks
        .iter()
        .filter_map(|(_, label)| area.estimate_text_size(label, &label_font).ok())
        .map(|(w, _)| w)
        .max()
        .unwrap_or(0);
    let mut chart = panel_chart(area, panel, x, y, widest)?;
    chart
        .configure_mesh()
        .x_desc("message size (bytes, log2 scale)")
        .y_desc(metric_label(metric))
        .x_labels(12)
        .x_label_formatter(&x_fmt)
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

/// A panel's margin, on every side but the right.
const MARGIN: u32 = 12;
/// The size labels' area under a panel's plotting area.
const X_LABELS_H: u32 = 42;
/// The panel's caption (its collective) in pixels.
const CAPTION_PX: u32 = 20;

/// A panel's chart, its caption drawn: the y labels' area as wide as
/// `widest` (the widest y label) needs.
fn panel_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    panel: &Panel,
    (x_min, x_max): (f64, f64),
    y: YAxis,
    widest: u32,
) -> Result<Chart<'a, DB>, DrawingAreaErrorKind<DB::ErrorType>> {
    ChartBuilder::on(area)
        .caption(&panel.collective, (FONT, CAPTION_PX))
        .margin(MARGIN)
        // room for half of the last size's label
        .margin_right(26)
        .x_label_area_size(X_LABELS_H)
        .y_label_area_size((widest + Y_TITLE_ROOM).max(62))
        .build_cartesian_2d(RangedCoordf64::from(x_min..x_max), y)
}

/// The height in pixels of the plotting area `panel_chart` leaves in
/// `area`: less the margins, the size labels and the caption's band, which
/// plotters makes the caption's height and twice half of it (at most 5).
fn plot_height<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel) -> f64 {
    let font = TextStyle::from((FONT, CAPTION_PX).into_font());
    let caption = area.estimate_text_size(&panel.collective, &font).map_or(0, |(_, h)| h);
    let band = caption + 2 * (caption / 2).min(5);
    let (_, h) = area.dim_in_pixel();
    f64::from(h.saturating_sub(2 * MARGIN + X_LABELS_H + band))
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, YAxis>>;

/// The y axis: its range, and its gridlines (`y_ticks`), each with its
/// label. (plotters' `with_key_points` places gridlines, but its axis has
/// no formatter for f64 values, so that the mesh cannot label them.)
struct YAxis {
    range: RangedCoordf64,
    ticks: Vec<Tick>,
}

impl Ranged for YAxis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.range.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, _: Hint) -> Vec<f64> {
        self.ticks.iter().map(|(v, _)| *v).collect()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.range.range()
    }
}

impl ValueFormatter<f64> for YAxis {
    fn format(value: &f64) -> String {
        value.to_string()
    }

    /// A gridline's label; plotters asks only for those of `key_points`.
    fn format_ext(&self, value: &f64) -> String {
        let tick = self.ticks.iter().find(|(v, _)| v == value);
        tick.map_or_else(|| Self::format(value), |(_, label)| label.clone())
    }
}

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

/// A labelled gridline on the y axis: where it sits (on the time axis, the
/// log10 of the time) and its label.
type Tick = (f64, String);

/// The y axis' labelled gridlines, on an axis from `lo` to `hi` drawn
/// `height` pixels high: plotters' own on a linear axis, `log_ticks` on
/// the time axis.
fn y_ticks(metric: Metric, (lo, hi): (f64, f64), height: f64) -> Vec<Tick> {
    if metric == Metric::Time {
        return log_ticks(lo.round() as i32, hi.round() as i32, height);
    }
    let step = linear_step(lo, hi);
    let ticks = RangedCoordf64::from(lo..hi).key_points(Y_LABELS);
    ticks.into_iter().map(|v| (v, tick_label(v, step))).collect()
}

/// The multiples of each power of ten that a time axis labels, richest
/// first: as on log paper, 1-2-3-5 and 1-2-5, then 1-3 (near half a
/// decade apart), then whole powers only.
const DECADE_MARKS: [&[f64]; 4] = [&[1.0, 2.0, 3.0, 5.0], &[1.0, 2.0, 5.0], &[1.0, 3.0], &[1.0]];
/// The least distance in pixels between two labels of a log axis: a
/// label's height and more than as much again.
const LOG_GAP_PX: f64 = 30.0;

/// The labelled gridlines of a log10 axis from 10^`lo` to 10^`hi` drawn
/// `height` pixels high: each decade's richest marks (`DECADE_MARKS`)
/// that keep `LOG_GAP_PX` apart, and where even whole powers would crowd,
/// every second (third, ...) power. A tick sits at its value's log10 and
/// is labelled with its value, with the decimals its decade needs (0.2,
/// 0.3, 0.5, 1, 2, ...).
fn log_ticks(lo: i32, hi: i32, height: f64) -> Vec<Tick> {
    let decade_px = height / f64::from((hi - lo).max(1));
    // a set's narrowest gap, in decades: between its marks, and from its
    // last mark to the next decade's 1
    let narrowest = |marks: &[f64]| {
        let at: Vec<f64> = marks.iter().map(|m| m.log10()).chain([1.0]).collect();
        at.windows(2).map(|w| w[1] - w[0]).fold(1.0, f64::min)
    };
    let marks = DECADE_MARKS
        .into_iter()
        .find(|m| narrowest(m) * decade_px >= LOG_GAP_PX)
        .unwrap_or(&[1.0]);
    let stride = (LOG_GAP_PX / decade_px).ceil().max(1.0) as i32;
    let powers = (lo..=hi).filter(|k| marks.len() > 1 || k.rem_euclid(stride) == 0);
    powers
        .flat_map(|k| marks.iter().map(move |&m| (k, m)))
        .filter(|&(k, m)| k < hi || m == 1.0)
        .map(|(k, m)| {
            let unit = 10f64.powi(k);
            (f64::from(k) + m.log10(), tick_label(m * unit, unit))
        })
        .collect()
}

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
        let times: Vec<f64> = (0..10).map(|i| 10f64.powf(3.35 + 0.3 * f64::from(i))).collect();
        let (rgb, w, h) = time_plot(time_panel(&times));
        let dark = |x: usize, y: usize| rgb[(y * w + x) * 3] < 160;
        // the plot's rows, below the caption and above the size labels
        let rows = TITLE_H as usize..h - 50;
        let ink: Vec<usize> = (0..w).map(|x| rows.clone().filter(|&y| dark(x, y)).count()).collect();
        let axis = (0..w / 2).max_by_key(|&x| ink[x]).unwrap();
        let runs = runs((0..axis).filter(|&x| ink[x] > 0));
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

    /// One panel of one line, a point per time (us) at sizes 2^25, 2^26, ...
    fn time_panel(times_us: &[f64]) -> Panel {
        use super::super::series::{Line, Point};
        let points = times_us
            .iter()
            .enumerate()
            .map(|(i, t)| Point {
                x: 25.0 + i as f64,
                y: t.log10(),
                lo: t.log10(),
                hi: t.log10(),
                samples: 1,
            })
            .collect();
        Panel {
            collective: "sendrecv".into(),
            lines: vec![Line {
                label: "a".into(),
                colour: 0,
                marker: 0,
                points,
            }],
        }
    }

    /// The height of a panel's plotting area, as `plot_height` reckons it
    /// and as plotters lays the chart out: the same.
    fn panel_plot_height() -> f64 {
        crate::plot::register_font().unwrap();
        let mut rgb = vec![255; 3 * (PANEL_W * PANEL_H) as usize];
        let area = BitMapBackend::with_buffer(&mut rgb, (PANEL_W, PANEL_H)).into_drawing_area();
        let panel = time_panel(&[12.0, 80.0]);
        let reckoned = plot_height(&area, &panel);
        let y = YAxis {
            range: RangedCoordf64::from(1.0..2.0),
            ticks: Vec::new(),
        };
        let chart = panel_chart(&area, &panel, (25.0, 26.0), y, 30).unwrap();
        let (_, laid_out) = chart.plotting_area().dim_in_pixel();
        assert_eq!(reckoned, f64::from(laid_out));
        reckoned
    }

    fn labels(ticks: &[Tick]) -> Vec<&str> {
        ticks.iter().map(|(_, label)| label.as_str()).collect()
    }

    /// Each tick sits at the log10 of the value its label says.
    fn assert_at_their_values(ticks: &[Tick]) {
        for (at, label) in ticks {
            let value: f64 = label.parse().unwrap();
            assert!((value.log10() - at).abs() < 1e-12, "{label} at {at}");
        }
    }

    /// A panel's time axis spanning one decade (12 to 80 us: 10 to 100)
    /// labels 1, 2, 3 and 5 times the power of ten; two decades 1, 2 and
    /// 5 times each; six decades whole powers only.
    #[test]
    fn a_time_axis_labels_as_many_values_as_its_decades_leave_room_for() {
        let h = panel_plot_height();
        let one = log_ticks(1, 2, h);
        assert_eq!(labels(&one), ["10", "20", "30", "50", "100"]);
        let at: Vec<f64> = one.iter().map(|(at, _)| *at).collect();
        assert_eq!(
            at,
            [1.0, 1.0 + 2f64.log10(), 1.0 + 3f64.log10(), 1.0 + 5f64.log10(), 2.0]
        );
        let two = log_ticks(-1, 1, h);
        assert_eq!(labels(&two), ["0.1", "0.2", "0.5", "1", "2", "5", "10"]);
        let six = log_ticks(0, 6, h);
        assert_eq!(labels(&six), ["1", "10", "100", "1000", "10000", "100000", "1000000"]);
        let at: Vec<f64> = six.iter().map(|(at, _)| *at).collect();
        assert_eq!(at, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        for ticks in [one, two, six] {
            assert_at_their_values(&ticks);
        }
        // between: 1 and 3 times each power up to four decades, whole
        // powers from five, and every second power from ten (docs/plot.md)
        assert_eq!(
            labels(&log_ticks(1, 4, h)),
            ["10", "30", "100", "300", "1000", "3000", "10000"]
        );
        assert_eq!(log_ticks(0, 4, h).len(), 9);
        assert_eq!(
            labels(&log_ticks(0, 5, h)),
            ["1", "10", "100", "1000", "10000", "100000"]
        );
        assert_eq!(log_ticks(0, 9, h).len(), 10);
        let ten: Vec<f64> = log_ticks(0, 10, h).iter().map(|(at, _)| *at).collect();
        assert_eq!(ten, [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        let many = log_ticks(-6, 8, h);
        assert_eq!(labels(&many)[..3], ["0.000001", "0.0001", "0.01"]);
        assert_at_their_values(&many);
    }

    /// On any time axis, the labels are distinct, say their values, and
    /// keep at least twice a label's height apart at the panel's size.
    #[test]
    fn time_labels_never_crowd() {
        let h = panel_plot_height();
        let area = BitMapBackend::new("/dev/null", (10, 10)).into_drawing_area();
        let font = TextStyle::from((FONT, LABEL_PX).into_font());
        for lo in -4..=4 {
            for span in 1..=40 {
                let ticks = log_ticks(lo, lo + span, h);
                assert!(ticks.len() >= 2, "{lo}+{span}: {ticks:?}");
                assert_at_their_values(&ticks);
                let distinct: BTreeSet<&str> = labels(&ticks).into_iter().collect();
                assert_eq!(distinct.len(), ticks.len(), "{lo}+{span}: {ticks:?}");
                for pair in ticks.windows(2) {
                    let gap = (pair[1].0 - pair[0].0) * h / f64::from(span);
                    let (_, tall) = area.estimate_text_size(&pair[1].1, &font).unwrap();
                    assert!(gap >= 2.0 * f64::from(tall), "{lo}+{span}: {pair:?} {gap} px apart");
                }
            }
        }
    }

    /// Rendered, a one-decade time panel (12 to 80 us) has its gridlines
    /// where its labels are, and only there: 10, 20, 30, 50, 100.
    #[test]
    fn time_gridlines_sit_at_the_labels() {
        let (rgb, w, h) = time_plot(time_panel(&[12.0, 30.0, 80.0]));
        let grey = |x: usize, y: usize| rgb[(y * w + x) * 3] < 250;
        let dark = |x: usize, y: usize| rgb[(y * w + x) * 3] < 160;
        let rows = TITLE_H as usize..h;
        let axis = (0..w / 2)
            .max_by_key(|&x| rows.clone().filter(|&y| dark(x, y)).count())
            .unwrap();
        // rows drawn across the plotting area (the line crosses some)
        let across = (axis + 2..w - 30).collect::<Vec<_>>();
        let lines = centres(
            rows.clone()
                .filter(|&y| across.iter().filter(|&&x| grey(x, y)).count() * 10 > across.len() * 9),
        );
        // the lowest is the size axis itself, the highest the area's top
        assert_eq!(lines.len(), 5, "10, 20, 30, 50, 100: gridlines at rows {lines:?}");
        // the labels: ink between the axis' title and the ticks, down to
        // the size axis' (the size labels below it are not the time's)
        let bottom = lines[4] + 8;
        let labels = centres(rows.filter(|&y| y < bottom && (axis - 40..axis - 8).any(|x| dark(x, y))));
        assert_eq!(labels.len(), 5, "10, 20, 30, 50, 100: label rows {labels:?}");
        for (line, label) in lines.iter().zip(&labels) {
            assert!(
                line.abs_diff(*label) <= 2,
                "gridlines at {lines:?}, labels at {labels:?}"
            );
        }
    }

    /// Runs of consecutive numbers: their first and last.
    fn runs(numbers: impl Iterator<Item = usize>) -> Vec<(usize, usize)> {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for n in numbers {
            match runs.last_mut() {
                Some(run) if run.1 + 1 == n => run.1 = n,
                _ => runs.push((n, n)),
            }
        }
        runs
    }

    /// The middles of runs of consecutive numbers.
    fn centres(numbers: impl Iterator<Item = usize>) -> Vec<usize> {
        runs(numbers).iter().map(|(a, b)| (a + b) / 2).collect()
    }

    /// `panel` drawn as a time plot: the PNG's RGB pixels, its width and height.
    fn time_plot(panel: Panel) -> (Vec<u8>, usize, usize) {
        crate::plot::register_font().unwrap();
        let panels = [panel];
        let plot = Plot {
            title: "t",
            panels: &panels,
            metric: Metric::Time,
        };
        let png = crate::plot::picture::render(&plot, false).unwrap();
        let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().unwrap();
        let mut rgb = vec![0; reader.output_buffer_size()];
        let info = reader.next_frame(&mut rgb).unwrap();
        (rgb, info.width as usize, info.height as usize)
    }

    #[test]
    fn the_palette_starts_with_okabe_ito_blue_vermillion_green() {
        assert_eq!(colour(0), RGBColor(0, 114, 178));
        assert_eq!(colour(1), RGBColor(213, 94, 0));
        assert_eq!(colour(2), RGBColor(0, 158, 115));
        assert_eq!(colour(8), colour(0));
    }
}
