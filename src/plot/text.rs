//! PNG text with glyphs where the font puts them.
//!
//! plotters 0.3.7 draws text through ab_glyph by placing each glyph's ink
//! box at the pen position, leaving out the glyph's left side bearing
//! (`style/font/ab_glyph.rs`, `draw`: `x as i32 + x_shift`, without
//! `px_bounds().min.x`). Narrow glyphs with a wide bearing, such as "1",
//! are then drawn too far left, which reads as a gap after every "1"; and
//! its baseline sits at half the font size, so a title at the top of the
//! picture loses the tops of its capitals. `GlyphText` wraps a backend and
//! draws text itself with the same font (DejaVu Sans, from the binary):
//! each glyph positioned at its pen position by ab_glyph, the baseline low
//! enough that capitals stay inside the text's box. Everything else goes
//! to the wrapped backend unchanged. The SVG backend writes text as text,
//! which the viewer lays out, so it needs none of this.

use std::sync::OnceLock;

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingBackend, DrawingErrorKind};

/// The font plotters measures text with (registered in `plot`).
fn font() -> Option<&'static FontRef<'static>> {
    static FONT: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT.get_or_init(|| FontRef::try_from_slice(dejavu::sans::regular()).ok())
        .as_ref()
}

/// The baseline below the top of a text's box, as a fraction of the font
/// size: plotters' box is `size / 1.24` high; capitals (0.63 of the size in
/// DejaVu Sans at ab_glyph's scale) are centred in it.
const BASELINE: f32 = 0.72;

pub struct GlyphText<B> {
    inner: B,
}

impl<B> GlyphText<B> {
    pub fn new(inner: B) -> GlyphText<B> {
        GlyphText { inner }
    }
}

/// A pixel of a glyph and how much of it the glyph covers (0 to 1).
type Coverage = (i32, i32, f32);

/// Each glyph's coverage pixels, relative to the start of the baseline,
/// and the text's advance width.
pub fn rasterize(text: &str, size: f32) -> Option<(Vec<Coverage>, f32)> {
    let font = font()?;
    let scaled = font.as_scaled(PxScale::from(size));
    let mut pixels = Vec::new();
    let mut pen = 0f32;
    let mut prev = None;
    for c in text.chars() {
        let id = scaled.glyph_id(c);
        if let Some(p) = prev {
            pen += scaled.kern(p, id);
        }
        prev = Some(id);
        let glyph = id.with_scale_and_position(PxScale::from(size), point(pen, 0.0));
        if let Some(outline) = font.outline_glyph(glyph) {
            let bounds = outline.px_bounds();
            outline.draw(|x, y, coverage| {
                pixels.push((bounds.min.x as i32 + x as i32, bounds.min.y as i32 + y as i32, coverage));
            });
        }
        pen += scaled.h_advance(id);
    }
    Some((pixels, pen))
}

impl<B: DrawingBackend> DrawingBackend for GlyphText<B> {
    type ErrorType = B::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.inner.get_size()
    }

    fn ensure_prepared(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.ensure_prepared()
    }

    fn present(&mut self) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.present()
    }

    fn draw_pixel(
        &mut self,
        point: BackendCoord,
        color: BackendColor,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_pixel(point, color)
    }

    fn draw_line<S: BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_line(from, to, style)
    }

    fn draw_rect<S: BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_path(path, style)
    }

    fn draw_circle<S: BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.fill_polygon(vert, style)
    }

    fn blit_bitmap(
        &mut self,
        pos: BackendCoord,
        size: (u32, u32),
        src: &[u8],
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        self.inner.blit_bitmap(pos, size, src)
    }

    /// As plotters' own `draw_text` (anchor, rotation), with each glyph
    /// where ab_glyph positions it.
    fn draw_text<S: BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> Result<(), DrawingErrorKind<Self::ErrorType>> {
        let color = style.color();
        if color.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let Some((pixels, width)) = rasterize(text, size) else {
            // no font: plotters' own drawing
            return self.inner.draw_text(text, style, pos);
        };
        let (width, height) = (width.round() as i32, (size / 1.24) as i32);
        let dx = match style.anchor().h_pos {
            HPos::Left => 0,
            HPos::Right => -width,
            HPos::Center => -width / 2,
        };
        let dy = match style.anchor().v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let baseline = (size * BASELINE).round() as i32;
        let transform = style.transform();
        let (w, h) = self.get_size();
        for (x, y, coverage) in pixels {
            let (x, y) = transform.transform(x + dx, y + dy + baseline);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if x >= 0 && y >= 0 && (x as u32) < w && (y as u32) < h {
                let alpha = color.alpha * f64::from(coverage.clamp(0.0, 1.0));
                self.inner.draw_pixel((x, y), BackendColor { alpha, rgb: color.rgb })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The columns holding ink of `text` drawn at `size`.
    fn ink_columns(text: &str, size: f32) -> std::collections::BTreeSet<i32> {
        let (pixels, _) = rasterize(text, size).unwrap();
        pixels.iter().filter(|p| p.2 > 0.5).map(|p| p.0).collect()
    }

    #[test]
    fn a_one_is_drawn_where_the_font_puts_it_with_no_gap_after_it() {
        // "11" and "44" take the same advance (tabular digits); the ink of
        // each "1" starts past its left side bearing, so the blank columns
        // between the two ones are as wide as between the two fours, give
        // or take the glyphs' own shapes: never a whole gap
        let gap = |t: &str| {
            let cols: Vec<i32> = ink_columns(t, 40.0).into_iter().collect();
            cols.windows(2).map(|w| w[1] - w[0] - 1).max().unwrap_or(0)
        };
        let (ones, fours) = (gap("11"), gap("44"));
        assert!(ones > 0, "the two ones touch");
        let (first, _) = rasterize("1", 40.0).unwrap();
        let leftmost = first.iter().filter(|p| p.2 > 0.5).map(|p| p.0).min().unwrap();
        assert!(
            leftmost >= 3,
            "a 1's ink starts after its side bearing, not at the pen: {leftmost}"
        );
        assert!(
            ones <= fours + 12,
            "gap between ones {ones} px, between fours {fours} px"
        );
    }

    /// The leftmost column with ink after drawing "1" at x = 10 through
    /// `glyphs` (this module) or plotters' own text drawing.
    fn ink_start_of_a_one(glyphs: bool) -> usize {
        use plotters::prelude::*;
        super::super::register_font().unwrap();
        let (w, h) = (80usize, 80usize);
        let mut buf = vec![255u8; w * h * 3];
        {
            let bitmap = BitMapBackend::with_buffer(&mut buf, (w as u32, h as u32));
            let text = Text::new("1", (10, 10), (super::super::FONT, 40).into_font());
            if glyphs {
                let root = GlyphText::new(bitmap).into_drawing_area();
                root.draw(&text).unwrap();
                root.present().unwrap();
            } else {
                let root = bitmap.into_drawing_area();
                root.draw(&text).unwrap();
                root.present().unwrap();
            }
        }
        (0..w)
            .find(|&x| (0..h).any(|y| buf[(y * w + x) * 3] < 128))
            .expect("ink")
    }

    #[test]
    fn a_png_one_starts_past_its_side_bearing_where_plotters_draws_it_at_the_pen() {
        // DejaVu Sans' "1" has a left side bearing of about 0.11 em
        assert!(ink_start_of_a_one(true) >= 13, "{}", ink_start_of_a_one(true));
        // plotters 0.3.7's own drawing: the quirk this module works around
        // (when this fails, plotters was fixed and `GlyphText` can go)
        assert!(ink_start_of_a_one(false) <= 11, "{}", ink_start_of_a_one(false));
    }

    #[test]
    fn capitals_stay_inside_the_top_of_their_box() {
        let (pixels, _) = rasterize("T", 24.0).unwrap();
        let top = pixels.iter().filter(|p| p.2 > 0.1).map(|p| p.1).min().unwrap();
        // drawn at baseline BASELINE * size below the box's top
        assert!(
            top + (24.0 * BASELINE).round() as i32 >= 0,
            "the T starts {top} px above its baseline"
        );
    }
}
