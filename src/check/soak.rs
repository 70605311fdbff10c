//! The stability plot of a soak (`--duration`, or `--repeat 0`): one
//! check's samples against the time they were taken, one line per group
//! (node or job), with the fail and warn thresholds across it, as SVG or
//! PNG. Drawn with plotters and `collbench plot`'s font, PNG text and
//! palette (`crate::plot`).

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::error::Error;
use crate::plot::{FONT, colour, register_font};

/// One group's samples: (seconds since the first sample, value).
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// What the plot shows besides the series.
#[derive(Clone, Debug, PartialEq)]
pub struct Frame {
    pub title: String,
    /// The y axis: metric and unit.
    pub y_label: String,
    pub fail: Option<f64>,
    pub warn: Option<f64>,
}

const SIZE: (u32, u32) = (960, 540);
const FAIL: RGBColor = RGBColor(213, 94, 0);
const WARN: RGBColor = RGBColor(230, 159, 0);

/// Draws `series` into `path` (.svg or .png), whole or not at all.
pub fn draw(path: &Path, frame: &Frame, series: &[Series]) -> Result<(), Error> {
    let Some(svg) = crate::report::is_svg(path) else {
        return Err(Error::usage(format!(
            "--plot {}: the plot file must end in .svg or .png",
            path.display()
        )));
    };
    register_font()?;
    crate::plot::picture::write(&Stability { frame, series }, path, svg, "stability plot")
}

/// The soak's picture.
struct Stability<'a> {
    frame: &'a Frame,
    series: &'a [Series],
}

impl crate::plot::picture::Picture for Stability<'_> {
    fn size(&self) -> (u32, u32) {
        SIZE
    }

    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
        chart(root, self.frame, self.series)
    }
}

/// Seconds, or minutes or hours for long soaks: the axis' unit and scale.
fn time_axis(span_s: f64) -> (&'static str, f64) {
    if span_s > 2.0 * 3600.0 {
        ("hours", 3600.0)
    } else if span_s > 600.0 {
        ("minutes", 60.0)
    } else {
        ("seconds", 1.0)
    }
}

fn chart<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, frame: &Frame, series: &[Series]) -> Result<(), String> {
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let all = series.iter().flat_map(|s| s.points.iter());
    let span = all.clone().map(|p| p.0).fold(0.0f64, f64::max);
    let top = all
        .map(|p| p.1)
        .chain(frame.fail)
        .chain(frame.warn)
        .fold(0.0f64, f64::max);
    let (unit, scale) = time_axis(span);
    let x_max = (span / scale).max(1e-9) * 1.02;
    let y_max = if top > 0.0 { top * 1.12 } else { 1.0 };
    let mut chart = ChartBuilder::on(root)
        .caption(&frame.title, (FONT, 20))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(format!("time since the first sample ({unit})"))
        .y_desc(&frame.y_label)
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 15))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(err)?;
    for (value, colour, name) in [
        (frame.fail, FAIL, "fail threshold"),
        (frame.warn, WARN, "warn threshold"),
    ] {
        if let Some(v) = value {
            chart
                .draw_series(DashedLineSeries::new(
                    vec![(0.0, v), (x_max, v)],
                    8,
                    5,
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(format!("{name} {v}"))
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2)));
        }
    }
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        let pts: Vec<(f64, f64)> = s.points.iter().map(|&(t, v)| (t / scale, v)).collect();
        chart
            .draw_series(LineSeries::new(pts.clone(), c.stroke_width(1)))
            .map_err(err)?
            .label(&s.label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 2, c.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .label_font((FONT, 13))
        .position(SeriesLabelPosition::LowerRight)
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Frame {
        Frame {
            title: "node-all-reduce-4k: 12 samples".into(),
            y_label: "busbw (GB/s)".into(),
            fail: Some(0.3),
            warn: None,
        }
    }

    #[test]
    fn a_soak_draws_as_svg_and_png_and_refuses_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let s = vec![
            Series {
                label: "node a".into(),
                points: (0..12)
                    .map(|i| (f64::from(i) * 0.5, 1.0 + 0.01 * f64::from(i)))
                    .collect(),
            },
            Series {
                label: "node b".into(),
                points: (0..12).map(|i| (f64::from(i) * 0.5, 0.9)).collect(),
            },
        ];
        let svg = dir.path().join("s.svg");
        draw(&svg, &frame(), &s).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(text.contains("node b") && text.contains("fail threshold 0.3"), "legend");
        let png = dir.path().join("s.png");
        draw(&png, &frame(), &s).unwrap();
        assert!(std::fs::metadata(&png).unwrap().len() > 1000);
        let e = draw(&dir.path().join("s.pdf"), &frame(), &s).unwrap_err();
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn long_soaks_are_drawn_in_minutes_or_hours() {
        assert_eq!(time_axis(30.0), ("seconds", 1.0));
        assert_eq!(time_axis(3600.0), ("minutes", 60.0));
        assert_eq!(time_axis(8.0 * 3600.0), ("hours", 3600.0));
    }
}
