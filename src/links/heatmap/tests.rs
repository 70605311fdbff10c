use super::super::finder::{FinderConfig, find};
use super::super::sim::{Fault, SimCluster, SimConfig};
use super::super::{Measurer, schedule};
use super::*;

#[test]
fn the_scale_is_white_at_the_median_and_darkens_below() {
    assert_eq!(shade(1.0), RGBColor(255, 255, 255));
    assert_eq!(shade(0.3), shade(0.5));
    assert_eq!(shade(0.8), RGBColor(213, 94, 0));
    let lum = |c: RGBColor| 0.2126 * f64::from(c.0) + 0.7152 * f64::from(c.1) + 0.0722 * f64::from(c.2);
    let mut last = f64::INFINITY;
    for pct in (50..=100).rev() {
        let l = lum(shade(f64::from(pct) / 100.0));
        assert!(l <= last + 1e-9, "{pct}%");
        last = l;
    }
    // a healthy spread of 2% stays pale; a node 1.5x slower is dark
    assert!(lum(shade(0.98)) > 235.0 && lum(shade(0.67)) < 100.0);
}

/// Pixels of `path` (RGB).
fn pixels(path: &Path) -> (usize, usize, Vec<u8>) {
    let decoder = png::Decoder::new(std::fs::File::open(path).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).unwrap();
    buf.truncate(info.buffer_size());
    let step = info.color_type.samples();
    let rgb: Vec<u8> = buf.chunks(step).flat_map(|p| [p[0], p[1], p[2]]).collect();
    (info.width as usize, info.height as usize, rgb)
}

#[test]
fn a_slow_node_is_a_dark_full_row_and_column() {
    let mut sim = SimCluster::new(SimConfig::nodes(40, 1), vec![Fault::slow_node(21, 1.5)]);
    let s = schedule::build(sim.endpoints(), Level::Node, false).unwrap();
    let layout = Layout::new(sim.endpoints(), &s.units(), sim.topology().as_ref());
    let o = find(&mut sim, &s, &layout, &FinderConfig::DEFAULT, &mut |_| {}).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("m.png");
    draw_file(&png, &o.matrix, &layout, &o.analysis, Some(&o.report), Metric::Uni).unwrap();
    let (w, _, rgb) = pixels(&png);
    let f = Frame::new(40);
    let pos = layout.positions()[&21];
    let px = |x: i32, y: i32| {
        let i = (y as usize * w + x as usize) * 3;
        (rgb[i], rgb[i + 1], rgb[i + 2])
    };
    let centre = |i: usize, origin: u32| f.at(i, origin) + f.cell as i32 / 2;
    let dark = |c: (u8, u8, u8)| c.1 < 120;
    for j in 0..40 {
        if j == pos {
            continue;
        }
        assert!(dark(px(centre(j, f.left), centre(pos, f.top))), "row, column {j}");
        assert!(dark(px(centre(pos, f.left), centre(j, f.top))), "column, row {j}");
    }
    // elsewhere pale
    let pale = (0..40)
        .flat_map(|i| (0..40).map(move |j| (i, j)))
        .filter(|&(i, j)| i != j && i != pos && j != pos)
        .filter(|&(i, j)| px(centre(j, f.left), centre(i, f.top)).1 > 200)
        .count();
    assert_eq!(pale, 39 * 38);
    let svg = dir.path().join("m.svg");
    draw_file(&svg, &o.matrix, &layout, &o.analysis, Some(&o.report), Metric::Latency).unwrap();
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("collbench links: latency"), "{}", &text[..200]);
    let e = draw_file(
        &dir.path().join("m.pdf"),
        &o.matrix,
        &layout,
        &o.analysis,
        None,
        Metric::Uni,
    )
    .unwrap_err();
    assert_eq!(e.exit_code(), 2);
}
