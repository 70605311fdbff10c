//! The matrix as a heatmap (PNG or SVG): one cell per pair, ranks in the
//! layout's order (rack, leaf, host, local index) with lines between
//! leaves and hosts, each cell coloured by the pair's value relative to
//! the median of comparable pairs (its class), on a fixed scale: white at
//! the median, blue above, orange to dark brown down to 50% and below.
//! A fixed scale, not one stretched to the data, so that a healthy fleet
//! looks white and one slow node is a dark full row and column at any
//! size; suspects the finder named are marked on both axes and named on
//! the right.
//!
//! Drawn with plotters and the font, PNG text and palette of `collbench
//! plot` (`crate::plot`).

use std::collections::BTreeMap;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::finder::{FindingKind, Report};
use super::layout::Layout;
use super::measure::{Matrix, Phase};
use super::output::short;
use super::rule::{Analysis, Metric};
use super::schedule::{Level, Pair};
use crate::error::Error;
use crate::plot::{FONT, colour, register_font};

/// The colour scale: relative performance (1 = the class median) to RGB.
/// Within 3% of the median is almost white (a healthy fabric's spread);
/// above it a pale blue, below it orange (Okabe-Ito's vermillion at 80%)
/// to dark brown.
const STOPS: [(f64, (u8, u8, u8)); 8] = [
    (0.50, (60, 20, 0)),
    (0.67, (160, 55, 0)),
    (0.80, (213, 94, 0)),
    (0.90, (240, 170, 110)),
    (0.97, (252, 244, 236)),
    (1.00, (255, 255, 255)),
    (1.03, (246, 250, 253)),
    (1.10, (170, 210, 238)),
];
/// The scale's ends, as drawn on the colour bar.
const SCALE: (f64, f64) = (0.5, 1.1);
const NOT_MEASURED: RGBColor = RGBColor(215, 215, 215);
const DIAGONAL: RGBColor = RGBColor(150, 150, 150);

/// The colour of relative performance `r` (quantised to 1%).
pub fn shade(r: f64) -> RGBColor {
    let r = ((r * 100.0).round() / 100.0).clamp(SCALE.0, SCALE.1);
    for w in STOPS.windows(2) {
        let ((x0, c0), (x1, c1)) = (w[0], w[1]);
        if r <= x1 {
            let t = ((r - x0) / (x1 - x0)).clamp(0.0, 1.0);
            let mix = |a: u8, b: u8| (f64::from(a) + t * (f64::from(b) - f64::from(a))).round() as u8;
            return RGBColor(mix(c0.0, c1.0), mix(c0.1, c1.1), mix(c0.2, c1.2));
        }
    }
    let last = STOPS[STOPS.len() - 1].1;
    RGBColor(last.0, last.1, last.2)
}

/// Geometry of the picture, in pixels.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Frame {
    n: usize,
    cell: u32,
    left: u32,
    top: u32,
    right: u32,
    bottom: u32,
}

impl Frame {
    fn new(n: usize) -> Frame {
        let cell = (800 / n.max(1) as u32).clamp(2, 36);
        Frame {
            n,
            cell,
            left: 150,
            top: 120,
            right: 330,
            bottom: 40,
        }
    }

    fn grid(&self) -> u32 {
        self.cell * self.n as u32
    }

    fn size(&self) -> (u32, u32) {
        let g = self.grid();
        // wide enough for the title and the colour line at any n
        (
            (self.left + g + self.right).max(800),
            (self.top + g + self.bottom).max(self.top + 420),
        )
    }

    /// Top-left pixel of position `i` along an axis, x or y.
    fn at(&self, i: usize, origin: u32) -> i32 {
        (origin + self.cell * i as u32) as i32
    }
}

/// Each pair's relative performance on `metric`: value over its class
/// median (bandwidth), or the inverse (latency).
fn ratios(matrix: &Matrix, analysis: &Analysis, metric: Metric) -> BTreeMap<Pair, f64> {
    matrix
        .pairs
        .iter()
        .filter(|p| p.phase == Phase::Matrix)
        .filter_map(|p| {
            let c = analysis.check(p.pair, metric)?;
            let r = if metric.spec().lower_is_better {
                c.reference / c.value
            } else {
                c.value / c.reference
            };
            r.is_finite().then_some((p.pair, r))
        })
        .collect()
}

/// Draws the heatmap of `metric` into `path` (.png or .svg), whole or not
/// at all. The caller creates (and checks) the file; this replaces it.
pub fn draw_file(
    path: &Path,
    matrix: &Matrix,
    layout: &Layout,
    analysis: &Analysis,
    report: Option<&Report>,
    metric: Metric,
) -> Result<(), Error> {
    let Some(svg) = crate::report::is_svg(path) else {
        return Err(Error::usage(format!(
            "{}: the heatmap file must end in .svg or .png",
            path.display()
        )));
    };
    if layout.order.len() < 2 {
        return Err(Error::usage("a heatmap needs at least 2 measured ranks"));
    }
    register_font()?;
    let frame = Frame::new(layout.order.len());
    let picture = Picture {
        matrix,
        layout,
        analysis,
        report,
        metric,
        frame,
        ratios: ratios(matrix, analysis, metric),
    };
    crate::plot::picture::write(&picture, path, svg, "heatmap")
}

impl crate::plot::picture::Picture for Picture<'_> {
    fn size(&self) -> (u32, u32) {
        self.frame.size()
    }

    fn draw_on<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), String> {
        self.draw(root)
    }
}

struct Picture<'a> {
    matrix: &'a Matrix,
    layout: &'a Layout,
    analysis: &'a Analysis,
    report: Option<&'a Report>,
    metric: Metric,
    frame: Frame,
    ratios: BTreeMap<Pair, f64>,
}

type Area<DB> = DrawingArea<DB, Shift>;

fn text_style(px: u32, colour: &RGBColor, h: HPos, v: VPos) -> TextStyle<'_> {
    TextStyle::from((FONT, px).into_font())
        .color(colour)
        .pos(Pos::new(h, v))
}

/// Draws `text` with its top left corner at `at`, `px` high, in `colour`.
fn write<DB: DrawingBackend, T: std::borrow::Borrow<str>>(
    root: &Area<DB>,
    text: T,
    at: (i32, i32),
    px: u32,
    colour: &RGBColor,
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.draw(&Text::new(text, at, text_style(px, colour, HPos::Left, VPos::Top)))
}

impl Picture<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), String> {
        let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
        root.fill(&WHITE).map_err(err)?;
        self.draw_cells(root).map_err(err)?;
        self.draw_groups(root).map_err(err)?;
        self.draw_title(root).map_err(err)?;
        self.draw_scale(root).map_err(err)?;
        self.draw_suspects(root).map_err(err)?;
        Ok(())
    }

    /// Cells row by row, runs of one colour as one rectangle.
    fn draw_cells<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let f = self.frame;
        let order = &self.layout.order;
        for (i, &x) in order.iter().enumerate() {
            let colours: Vec<RGBColor> = order
                .iter()
                .map(|&y| {
                    if x == y {
                        DIAGONAL
                    } else {
                        self.ratios.get(&Pair::new(x, y)).map_or(NOT_MEASURED, |r| shade(*r))
                    }
                })
                .collect();
            let y0 = f.at(i, f.top);
            let mut j = 0;
            while j < colours.len() {
                let mut k = j;
                while k + 1 < colours.len() && colours[k + 1] == colours[j] {
                    k += 1;
                }
                let (x0, x1) = (f.at(j, f.left), f.at(k + 1, f.left));
                root.draw(&Rectangle::new(
                    [(x0, y0), (x1, y0 + f.cell as i32)],
                    colours[j].filled(),
                ))?;
                j = k + 1;
            }
        }
        Ok(())
    }

    /// Lines between racks, leaves and hosts; the groups' names.
    fn draw_groups<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let f = self.frame;
        let g = f.grid() as i32;
        let (gx, gy) = (f.left as i32, f.top as i32);
        let line = |pos: usize, style: ShapeStyle| -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
            let x = f.at(pos, f.left);
            let y = f.at(pos, f.top);
            root.draw(&PathElement::new(vec![(x, gy), (x, gy + g)], style))?;
            root.draw(&PathElement::new(vec![(gx, y), (gx + g, y)], style))
        };
        let several_per_host = self.layout.hosts.len() < self.layout.order.len();
        if several_per_host && f.cell >= 3 {
            for s in self.layout.hosts.iter().skip(1) {
                line(s.start, BLACK.mix(0.25).stroke_width(1))?;
            }
        }
        for s in self.layout.leaves.iter().skip(1) {
            line(s.start, BLACK.mix(0.6).stroke_width(1))?;
        }
        for s in self.layout.racks.iter().skip(1) {
            line(s.start, BLACK.stroke_width(2))?;
        }
        root.draw(&Rectangle::new(
            [(gx, gy), (gx + g, gy + g)],
            BLACK.mix(0.8).stroke_width(1),
        ))?;
        // names: every rank when they fit, else hosts, else leaves
        let (spans, what) = self.label_spans();
        let px = 11;
        let grey = RGBColor(60, 60, 60);
        for (name, start, end) in &spans {
            let len = (end - start) as u32 * f.cell;
            if len < px {
                continue;
            }
            let mid_y = f.at(*start, f.top) + (len / 2) as i32;
            root.draw(&Text::new(
                name.clone(),
                (gx - 14, mid_y),
                text_style(px, &grey, HPos::Right, VPos::Center),
            ))?;
            let mid_x = f.at(*start, f.left) + (len / 2) as i32;
            let fits = root
                .estimate_text_size(name, &TextStyle::from((FONT, px).into_font()))
                .is_ok_and(|(w, _)| w + 4 <= len);
            if fits {
                root.draw(&Text::new(
                    name.clone(),
                    (mid_x, gy - 14),
                    text_style(px, &grey, HPos::Center, VPos::Bottom),
                ))?;
            }
        }
        if !what.is_empty() {
            root.draw(&Text::new(
                what.to_string(),
                (gx - 14, gy - 14),
                text_style(px, &grey, HPos::Right, VPos::Bottom),
            ))?;
        }
        Ok(())
    }

    /// What the axes are labelled with: (name, start, end) in display
    /// positions, and the axis caption.
    fn label_spans(&self) -> (Vec<(String, usize, usize)>, &'static str) {
        let f = self.frame;
        let per_rank = self.layout.hosts.len() < self.layout.order.len();
        if f.cell >= 12 {
            let spans = self
                .layout
                .order
                .iter()
                .enumerate()
                .map(|(i, &r)| {
                    let e = &self.matrix.endpoints[r];
                    let name = if per_rank {
                        format!("{}:{}", e.host, e.local)
                    } else {
                        e.host.clone()
                    };
                    (name, i, i + 1)
                })
                .collect();
            return (spans, "");
        }
        if self.layout.hosts.len() * 12 <= f.grid() as usize && per_rank {
            let spans = self
                .layout
                .hosts
                .iter()
                .map(|s| (s.name.clone(), s.start, s.end))
                .collect();
            return (spans, "hosts");
        }
        if !self.layout.leaves.is_empty() {
            let spans = self
                .layout
                .leaves
                .iter()
                .map(|s| (format!("leaf {}", s.name), s.start, s.end))
                .collect();
            return (spans, "");
        }
        // a label every so many ranks
        let every = (16 / f.cell.max(1) as usize).max(1) * 4;
        let spans = self
            .layout
            .order
            .iter()
            .enumerate()
            .filter(|(i, _)| i % every == 0)
            .map(|(i, &r)| (self.matrix.endpoints[r].host.clone(), i, i + 1))
            .collect();
        (spans, "")
    }

    fn draw_title<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let hosts = self.layout.hosts.len();
        let n = self.layout.order.len();
        let title = format!(
            "collbench links: {}, {} {} (level {})",
            self.metric.label(),
            if self.matrix.level == Level::Node { hosts } else { n },
            if self.matrix.level == Level::Node {
                "hosts"
            } else {
                "ranks"
            },
            self.matrix.level
        );
        write(root, title, (16, 14), 20, &BLACK)?;
        let refs: Vec<String> = self
            .analysis
            .references
            .iter()
            .filter(|r| r.metric == self.metric)
            .map(|r| format!("{} {:.1} {}", r.class.name(), r.median, self.metric.unit()))
            .collect();
        let line1 = format!(
            "colour: {} relative to the median of comparable pairs ({}); grey: not measured",
            if self.metric.spec().lower_is_better {
                format!("inverse {}", self.metric.label())
            } else {
                "each pair's bandwidth".to_string()
            },
            refs.join(", ")
        );
        let grey = RGBColor(70, 70, 70);
        write(root, line1, (16, 44), 13, &grey)?;
        if let Some(report) = self.report {
            let line2 = format!("measured by: {}", report.measurer);
            write(root, line2, (16, 64), 13, &grey)?;
        }
        Ok(())
    }

    /// The colour bar, from the top of the scale down.
    fn draw_scale<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let f = self.frame;
        let x0 = (f.left + f.grid() + 40) as i32;
        let y0 = f.top as i32;
        let height = 240i32;
        let (lo, hi) = SCALE;
        for k in 0..height {
            let r = hi - (hi - lo) * f64::from(k) / f64::from(height - 1);
            root.draw(&Rectangle::new(
                [(x0, y0 + k), (x0 + 18, y0 + k + 1)],
                shade(r).filled(),
            ))?;
        }
        root.draw(&Rectangle::new(
            [(x0, y0), (x0 + 18, y0 + height)],
            BLACK.mix(0.6).stroke_width(1),
        ))?;
        for pct in (50..=110).step_by(10) {
            let r = f64::from(pct) / 100.0;
            let y = y0 + ((hi - r) / (hi - lo) * f64::from(height - 1)).round() as i32;
            root.draw(&PathElement::new(
                vec![(x0 + 18, y), (x0 + 23, y)],
                BLACK.stroke_width(1),
            ))?;
            root.draw(&Text::new(
                format!("{pct}%{}", if pct == 50 { " or less" } else { "" }),
                (x0 + 27, y),
                text_style(12, &BLACK, HPos::Left, VPos::Center),
            ))?;
        }
        write(root, "of the median", (x0, y0 + height + 10), 12, &RGBColor(70, 70, 70))?;
        Ok(())
    }

    /// The finder's suspects: a mark on both axes at their rows, and their
    /// names on the right.
    fn draw_suspects<DB: DrawingBackend>(&self, root: &Area<DB>) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
        let Some(report) = self.report else { return Ok(()) };
        let f = self.frame;
        let positions = self.layout.positions();
        let mark = colour(1);
        let x_names = (f.left + f.grid() + 40) as i32;
        let mut y_names = (f.top + 290) as i32;
        let heading = if report.findings.is_empty() {
            "no suspect".to_string()
        } else {
            "suspects named by the finder:".to_string()
        };
        write(root, heading, (x_names, y_names), 13, &BLACK)?;
        y_names += 20;
        let half = (f.cell as i32 / 2).max(1);
        for finding in &report.findings {
            let ranks = finding.ranks();
            // a collective finding names a host: mark its measured ranks
            let marked: Vec<usize> = ranks.iter().filter_map(|r| positions.get(r).copied()).collect();
            for &i in &marked {
                let y = f.at(i, f.top) + half;
                let x = f.at(i, f.left) + half;
                let (gx, gy) = (f.left as i32, f.top as i32);
                root.draw(&Polygon::new(
                    vec![(gx - 10, y - 5), (gx - 10, y + 5), (gx - 2, y)],
                    mark.filled(),
                ))?;
                root.draw(&Polygon::new(
                    vec![(x - 5, gy - 10), (x + 5, gy - 10), (x, gy - 2)],
                    mark.filled(),
                ))?;
            }
            let mut lines: Vec<String> = match finding.kind {
                FindingKind::Link => vec![
                    format!("link {} -", short(self.matrix, ranks[0])),
                    format!("  {}", short(self.matrix, ranks[1])),
                ],
                FindingKind::Gpu => vec![format!("GPU or NIC of {}", short(self.matrix, ranks[0]))],
                kind => vec![format!("{kind} {}", finding.hosts.join(", "))],
            };
            if let Some(e) = finding.evidence.iter().find(|e| e.measured.metric == self.metric) {
                lines.push(format!("  {:.0}% below the median", e.measured.deficit_pct));
            }
            for line in lines {
                write(root, line, (x_names, y_names), 13, &mark)?;
                y_names += 17;
            }
            y_names += 4;
        }
        if !report.dismissed.is_empty() {
            let grey = RGBColor(70, 70, 70);
            y_names += 10;
            for line in [
                format!(
                    "{} more suspect{} of the matrix",
                    report.dismissed.len(),
                    if report.dismissed.len() == 1 { "" } else { "s" }
                ),
                "were not slow when re-tested".to_string(),
                "(dismissed: lone dark cells)".to_string(),
            ] {
                write(root, line, (x_names, y_names), 12, &grey)?;
                y_names += 16;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
