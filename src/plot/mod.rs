//! `collbench plot`: a metric against message size, one panel per
//! collective, one line per series (`series`: every run, backend,
//! transport, hierarchy mode, rank count, pin and group apart, and within a
//! panel type, operation, root, placement and traffic; samples of one point as
//! their median with their range as a band), as SVG or PNG (plotters,
//! drawn in `draw`).
//!
//! Text is drawn with DejaVu Sans compiled into the binary (the `dejavu`
//! crate), so no system font library is needed, on a CI machine or
//! anywhere; PNG text goes through `text`, which places glyphs as the font
//! says (plotters' own drawing leaves a gap after every "1").
//!
//! What is drawn: out-of-place rows (in-place ones only for a line that
//! has no out-of-place row); size on a log-2 x axis; busbw and algbw on a
//! linear y axis from 0, time on a log-10 y axis; colours from Okabe and
//! Ito's palette, which readers with any common colour-vision deficiency
//! tell apart.

mod draw;
pub(crate) mod picture;
pub mod series;
mod text;
/// The links heatmap (`links::heatmap`) draws with the same font, PNG text
/// and palette.
pub(crate) use draw::colour;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::style::FontStyle;

use crate::error::Error;
use crate::record::read::read_file;
use crate::types::Metric;

#[derive(Clone, Debug)]
pub struct PlotOptions {
    pub inputs: Vec<PathBuf>,
    pub output: PathBuf,
    pub metric: Metric,
    /// `--label`: the legend name of each input, in order (none, or one
    /// per input).
    pub labels: Vec<String>,
    /// `--title`, else a title naming the metric.
    pub title: Option<String>,
    pub overwrite: bool,
}

/// What was drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Drawn {
    pub panels: usize,
    /// Distinct series (legend entries) over all panels.
    pub series: usize,
}

pub(crate) const FONT: &str = "sans-serif";

pub fn plot(opts: &PlotOptions) -> Result<Drawn, Error> {
    if let Some(w) = opts.inputs.iter().find(|p| crate::record::workload::is_workload_csv(p)) {
        return Err(Error::usage(format!(
            "{} is a workload CSV: plot draws the size sweeps of `collbench run`; compare workload CSVs with `collbench compare`",
            w.display()
        )));
    }
    let Some(svg) = crate::report::is_svg(&opts.output) else {
        return Err(Error::usage(format!(
            "-o {}: the plot file must end in .svg or .png",
            opts.output.display()
        )));
    };
    if !opts.labels.is_empty() && opts.labels.len() != opts.inputs.len() {
        return Err(Error::usage(format!(
            "--label given {} time{} for {} CSV file{}: give one per file, in the files' order",
            opts.labels.len(),
            if opts.labels.len() == 1 { "" } else { "s" },
            opts.inputs.len(),
            if opts.inputs.len() == 1 { "" } else { "s" },
        )));
    }
    let inputs: Vec<(&str, &Path)> = opts.inputs.iter().map(|p| ("", p.as_path())).collect();
    crate::report::paths::check_distinct(&[("-o", &opts.output)], &inputs)?;
    let mut files = Vec::new();
    for path in &opts.inputs {
        files.push(read_file(path)?);
    }
    let inputs: Vec<series::Input> = opts
        .inputs
        .iter()
        .zip(&files)
        .enumerate()
        .map(|(i, (path, rows))| series::Input {
            path,
            rows,
            name: opts.labels.get(i).map(String::as_str),
        })
        .collect();
    let series::Plotted { panels, warnings } = series::panels(&inputs, opts.metric);
    for w in &warnings {
        crate::error::say(&format!("collbench: warning: {w}"));
    }
    if panels.is_empty() {
        return Err(Error::usage(
            "nothing to plot: the CSV files have no rows with a size above 0",
        ));
    }
    // Refuses an existing file unless --overwrite, and a folder that cannot
    // take the file, before drawing anything.
    let out = crate::report::WholeFile::create(&opts.output, opts.overwrite, "plot")?;
    register_font()?;
    let title = opts
        .title
        .clone()
        .unwrap_or_else(|| format!("collbench: {} against message size", draw::metric_label(opts.metric)));
    let plot = draw::Plot {
        title: &title,
        panels: &panels,
        metric: opts.metric,
    };
    let bytes = picture::render(&plot, svg)
        .map_err(|e| Error::runtime(format!("cannot draw the plot {}: {e}", opts.output.display())))?;
    out.commit(&bytes)
        .map_err(|e| Error::runtime(format!("cannot write plot {}: {e}", opts.output.display())))?;
    let labels: std::collections::BTreeSet<&str> = panels
        .iter()
        .flat_map(|p| p.lines.iter().map(|l| l.label.as_str()))
        .collect();
    Ok(Drawn {
        panels: panels.len(),
        series: labels.len(),
    })
}

/// plotters finds fonts by family name; ours comes from the binary.
pub(crate) fn register_font() -> Result<(), Error> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED
        .get_or_init(|| plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok());
    if ok {
        Ok(())
    } else {
        Err(Error::runtime("the built-in font could not be loaded"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(output: &str) -> PlotOptions {
        PlotOptions {
            inputs: vec![],
            output: PathBuf::from(output),
            metric: Metric::Busbw,
            labels: vec![],
            title: None,
            overwrite: false,
        }
    }

    #[test]
    fn the_output_extension_picks_the_format_and_others_are_refused() {
        let e = plot(&options("plot.pdf")).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains(".svg or .png"), "{e}");
    }

    #[test]
    fn labels_come_one_per_file() {
        let mut opts = options("plot.svg");
        opts.inputs = vec![PathBuf::from("a.csv"), PathBuf::from("b.csv")];
        opts.labels = vec!["A".into()];
        let e = plot(&opts).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert_eq!(
            e.to_string(),
            "--label given 1 time for 2 CSV files: give one per file, in the files' order"
        );
    }
}
