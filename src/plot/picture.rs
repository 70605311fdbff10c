//! A picture drawn in memory, as SVG text or PNG bytes, for a `WholeFile`
//! (`report`) to write whole or not at all: plotters' file backends write
//! as they go, leaving half a picture when the disk fills, and report a
//! PNG's write error as Rust debug text.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::text::GlyphText;

/// What can be drawn on any plotters backend.
pub(crate) trait Picture {
    /// Width and height in pixels.
    fn size(&self) -> (u32, u32);
    fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String>;
}

/// The picture's bytes: SVG text, or a PNG (8-bit RGB).
pub(crate) fn render(picture: &impl Picture, svg: bool) -> Result<Vec<u8>, String> {
    let (w, h) = picture.size();
    if svg {
        let mut text = String::new();
        {
            let root = SVGBackend::with_string(&mut text, (w, h)).into_drawing_area();
            picture.draw_on(&root)?;
            root.present().map_err(|e| e.to_string())?;
        }
        return Ok(text.into_bytes());
    }
    let mut rgb = vec![255u8; w as usize * h as usize * 3];
    {
        let root = GlyphText::new(BitMapBackend::with_buffer(&mut rgb, (w, h))).into_drawing_area();
        picture.draw_on(&root)?;
        root.present().map_err(|e| e.to_string())?;
    }
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, w, h);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder
        .write_header()
        .and_then(|mut writer| writer.write_image_data(&rgb))
        .map_err(|e| e.to_string())?;
    Ok(png)
}

/// Draws `picture` into `path` (.svg, else .png) whole or not at all,
/// over the empty file the caller made (`links --heatmap`, `check --plot`,
/// whose commands claim the name up front), which a failure removes:
/// `what` names it in errors.
pub(crate) fn write(
    picture: &impl Picture,
    path: &std::path::Path,
    svg: bool,
    what: &str,
) -> Result<(), crate::error::Error> {
    use crate::error::Error;
    let written = render(picture, svg)
        .map_err(|e| Error::runtime(format!("cannot draw the {what} {}: {e}", path.display())))
        .and_then(|bytes| {
            // after the measurement, a file that cannot be made is the
            // run's failure (exit 1), not a usage error
            crate::report::WholeFile::create(path, true, what)
                .map_err(|e| Error::runtime(e.to_string()))?
                .commit(&bytes)
                .map_err(|e| Error::runtime(format!("cannot write the {what} {}: {e}", path.display())))
        });
    if written.is_err() {
        let _ = std::fs::remove_file(path);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rectangle: the least picture.
    struct Blank;

    impl Picture for Blank {
        fn size(&self) -> (u32, u32) {
            (20, 10)
        }

        fn draw_on<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), String> {
            root.fill(&plotters::style::WHITE).map_err(|e| e.to_string())
        }
    }

    #[test]
    fn a_picture_that_cannot_be_written_at_the_end_is_a_runtime_failure() {
        let dir = tempfile::tempdir().unwrap();
        // the folder went away during the run
        let path = dir.path().join("gone").join("heatmap.svg");
        let e = write(&Blank, &path, true, "heatmap").unwrap_err();
        assert_eq!(e.exit_code(), crate::error::exit::RUNTIME, "{e}");
        assert!(e.to_string().contains("heatmap.svg"), "{e}");
        let ok = dir.path().join("heatmap.png");
        write(&Blank, &ok, false, "heatmap").unwrap();
        assert!(std::fs::read(&ok).unwrap().starts_with(b"\x89PNG"));
    }
}
