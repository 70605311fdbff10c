//! Unit tests of `table`.

use std::sync::{Arc, Mutex};

use super::frame::{footer_average, launch_extras, out_of_bounds, slow_rank_text};
use super::*;
use crate::collective::Collective;
use crate::types::DType;

/// A `Write` whose bytes the test reads back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Where each field of `line` ends (its last character's column).
fn field_ends(line: &str) -> Vec<usize> {
    let c: Vec<char> = line.chars().collect();
    (0..c.len())
        .filter(|&i| c[i] != ' ' && c[i] != '#' && c.get(i + 1).is_none_or(|n| *n == ' '))
        .collect()
}

fn point(size: u64, placement: Placement, time_us: f64, algbw: f64, wrong: Option<u64>) -> Record {
    Record {
        collective: Collective::AllReduce,
        dtype: DType::Float,
        op: Some(crate::types::ReduceOp::Sum),
        placement,
        size_bytes: size,
        count: size / 4,
        nranks: 1,
        time_us,
        algbw_gbps: algbw,
        busbw_gbps: 0.0,
        wrong,
        ..Record::default()
    }
}

#[test]
fn values_too_wide_for_their_column_lose_decimals_then_take_an_exponent() {
    assert_eq!(fit("1380480.74".into(), 8), "1380481");
    assert_eq!(fit("123456.78".into(), 8), "123456.8");
    assert_eq!(fit("12.34".into(), 8), "12.34");
    assert_eq!(fit("123456789012.00".into(), 8), "1.235e11");
    assert_eq!(fit("1073741824".into(), 7), "1.074e9");
    assert_eq!(fit("N/A".into(), 2), "N/A");
}

#[test]
fn the_average_prints_as_c_printf_g_does() {
    for (v, want) in [
        (1.234, "1.234"),
        (2.06935, "2.06935"),
        (156.742, "156.742"),
        (20.26354, "20.2635"),
        (0.281242, "0.281242"),
        (0.0001234567, "0.000123457"),
        (0.0, "0"),
        (480.0, "480"),
        (1380480.74, "1.38048e+06"),
        (999999.6, "1e+06"),
        (0.00001, "1e-05"),
    ] {
        assert_eq!(g6(v), want, "{v}");
    }
}

#[test]
fn columns_stay_aligned_whatever_the_value() {
    let out = Shared::default();
    let mut table = TableSink::new(Box::new(out.clone()), None);
    let records = [
        // a 1-rank in-place all-reduce copies nothing: a huge algbw
        point(8, Placement::OutOfPlace, 1.5, 0.01, Some(0)),
        point(8, Placement::InPlace, 0.0000058, 1380480.74, Some(0)),
        point(1 << 33, Placement::OutOfPlace, 123456789.0, 69.58, Some(1_073_741_824)),
        point(1 << 33, Placement::InPlace, 12.25, 701_234_567_890.5, None),
    ];
    for r in &records {
        table.record(r).unwrap();
    }
    table.finish_text();
    table.printer.close(None);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let names = text
        .lines()
        .find(|l| l.contains("size") && l.contains("#wrong"))
        .expect("a column header");
    let want = field_ends(names);
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(rows.len(), 2, "{text}");
    for row in rows {
        assert_eq!(field_ends(row), want, "misaligned:\n{names}\n{row}");
    }
    assert!(text.contains("1380481"), "{text}");
}

#[test]
fn the_footer_line_is_nccl_tests_own_and_the_point_count_has_its_own() {
    let mut mean = Mean::default();
    for v in [1.0, 2.0, 0.702] {
        mean.add(v);
    }
    let footer = footer_average(&mean);
    let lines: Vec<&str> = footer.lines().collect();
    assert_eq!(lines[0], "# Avg bus bandwidth    : 1.234");
    assert_eq!(lines[0].split_whitespace().last(), Some("1.234"));
    assert_eq!(lines[1], "# Points averaged      : 3");
}

#[test]
fn the_out_of_bounds_line_is_nccl_tests_own_and_counts_failed_points() {
    let mut summary = Summary::default();
    assert_eq!(out_of_bounds(&summary), "# Out of bounds values : 0 OK\n");
    summary.failed_points = 3;
    summary.wrong = 1000;
    assert_eq!(out_of_bounds(&summary), "# Out of bounds values : 3 FAILED\n");
}

#[test]
fn the_header_says_what_each_time_is_divided_by_under_m_and_g() {
    assert_eq!(launch_extras(1, 0), None);
    assert_eq!(
        launch_extras(4, 0).unwrap(),
        "4 operations per iteration in one NCCL group (-m); time per op = elapsed / (iters x 4)"
    );
    assert_eq!(
        launch_extras(1, 1).unwrap(),
        "iterations captured in a CUDA graph, replayed 1 time (-G); time per op = elapsed / (iters x 1)"
    );
    let both = launch_extras(2, 10).unwrap();
    assert!(both.ends_with("elapsed / (iters x 2 x 10)"), "{both}");
    assert!(both.contains("replayed 10 times"), "{both}");
}

#[test]
fn the_slow_rank_line_names_its_signal_and_says_when_it_cannot_tell() {
    use crate::engine::straggler::{SlowRank, Straggler};
    let host = |rank: usize| format!("node-{rank}");
    let named = SlowRank::Named(Straggler {
        rank: 1,
        excess: 2.1,
        from_size: 1 << 20,
        every_size: false,
        late: 23,
        points: 24,
        p_value: 1.49e-6,
    });
    assert_eq!(
        slow_rank_text(Some(&named), 10.0, host),
        "rank 1 on node-1 arrived late at 23 of 24 checked points at sizes >= 1.0 MiB (sign test p = 1.5e-6), \
         its own work 3.1x the other ranks' median: the others waited for it (arrival skew)"
    );
    let none = slow_rank_text(Some(&SlowRank::NoneFound { points: 40 }), 25.0, host);
    assert!(
        none.starts_with("none (arrival skew): ")
            && none.contains("over 25% behind")
            && none.ends_with("at 40 checked points"),
        "{none}"
    );
    let why = SlowRank::NotJudged("6 checked points of symmetric collectives".into());
    assert_eq!(
        slow_rank_text(Some(&why), 10.0, host),
        "cannot tell (arrival skew): 6 checked points of symmetric collectives"
    );
    assert!(slow_rank_text(None, 10.0, host).starts_with("cannot tell (arrival skew)"));
}

#[test]
fn the_algo_column_follows_both_blocks_and_changes_are_noted_under_the_section() {
    use crate::types::{Algo, AlgoSource, Chosen, Proto};
    let out = Shared::default();
    let mut table = TableSink::new(Box::new(out.clone()), None);
    table.algo = true;
    let with = |r: Record, algo: Option<(Algo, Proto)>| Record {
        algo: algo.map(|(a, _)| Chosen::One(a)),
        proto: algo.map(|(_, p)| Chosen::One(p)),
        algo_source: Some(if algo.is_some() {
            AlgoSource::Log
        } else {
            AlgoSource::Unknown
        }),
        ..r
    };
    let tree_ll = Some((Algo::Tree, Proto::Ll));
    let ring_ll128 = Some((Algo::Ring, Proto::Ll128));
    let records = [
        with(point(8, Placement::OutOfPlace, 1.5, 0.01, Some(0)), tree_ll),
        with(point(8, Placement::InPlace, 1.5, 0.01, Some(0)), tree_ll),
        with(point(1 << 20, Placement::OutOfPlace, 9.5, 10.0, Some(0)), ring_ll128),
        with(point(1 << 20, Placement::InPlace, 9.5, 10.0, Some(0)), None),
        with(point(1 << 21, Placement::OutOfPlace, 9.5, 10.0, Some(0)), ring_ll128),
        with(point(1 << 21, Placement::InPlace, 9.5, 10.0, Some(0)), ring_ll128),
    ];
    for r in &records {
        table.record(r).unwrap();
    }
    table.finish_text();
    table.printer.close(None);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let names = text.lines().find(|l| l.contains("#wrong")).expect("a column header");
    assert!(names.trim_end().ends_with("algo"), "{names}");
    let want = field_ends(names);
    let rows: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
    let cells: Vec<&str> = rows.iter().map(|r| r.split_whitespace().last().unwrap()).collect();
    assert_eq!(cells, ["tree/ll", "ring/ll128|unknown", "ring/ll128"], "{text}");
    for row in &rows[..1] {
        assert_eq!(field_ends(row), want, "misaligned:\n{names}\n{row}");
    }
    // the out-of-place choice changed once, at 1 MiB
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("changes at")).collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert!(
        notes[0].ends_with("changes at 1.0 MiB (tree/ll -> ring/ll128)"),
        "{text}"
    );
    // tree at one size: busbw there is Ring's figure
    let off: Vec<&str> = text.lines().filter(|l| l.contains("NCCL ran ")).collect();
    assert_eq!(off.len(), 1, "{text}");
    assert!(
        off[0].contains(": NCCL ran tree at 8 B (1 size): busbw there is nccl-tests' Ring figure")
            && off[0].ends_with("; --algo ring measures the links")
            && !off[0].contains("nodes"),
        "{text}"
    );
}

/// Tree on two nodes over several sizes: the note names the range, the
/// algorithms and the nodes; a section where NCCL ran Ring only has none.
#[test]
fn a_section_off_ring_on_two_nodes_says_busbw_can_exceed_the_network() {
    use crate::types::{Algo, AlgoSource, Chosen};
    let out = Shared::default();
    let mut table = TableSink::new(Box::new(out.clone()), None);
    table.algo = true;
    let with = |r: Record, a: Algo| Record {
        algo: Some(Chosen::One(a)),
        algo_source: Some(AlgoSource::Log),
        nnodes: 2,
        ..r
    };
    for (size, a) in [(8, Algo::Tree), (64, Algo::Nvls), (1 << 20, Algo::Ring)] {
        for p in Placement::BOTH {
            table.record(&with(point(size, p, 1.5, 0.01, Some(0)), a)).unwrap();
        }
    }
    let ring_only = Record {
        collective: crate::collective::Collective::AllGather,
        ..with(point(8, Placement::OutOfPlace, 1.5, 0.01, Some(0)), Algo::Ring)
    };
    table.record(&ring_only).unwrap();
    table.finish_text();
    table.printer.close(None);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let off: Vec<&str> = text.lines().filter(|l| l.contains("NCCL ran ")).collect();
    assert_eq!(off.len(), 1, "{text}");
    assert!(
        off[0].contains("NCCL ran tree, nvls at 8 B-64 B (2 sizes)")
            && off[0].contains("on 2 nodes it keeps part of the traffic inside a node"),
        "{text}"
    );
}

/// A pinned section where NCCL ran something else at some sizes says so
/// under the section, and its heading names the pin; a pinned section
/// off Ring gets no advice to pin Ring.
#[test]
fn a_pin_nccl_did_not_honour_is_said_under_its_section() {
    use crate::types::{Algo, AlgoPin, AlgoSource, Chosen};
    let out = Shared::default();
    let mut table = TableSink::new(Box::new(out.clone()), None);
    table.algo = true;
    let tree = AlgoPin::parse("tree");
    let ran = |r: Record, a: Algo| Record {
        algo: Some(Chosen::One(a)),
        algo_source: Some(AlgoSource::Log),
        algo_pin: tree,
        ..r
    };
    for (size, a) in [(8, Algo::Tree), (64, Algo::Ring), (1 << 20, Algo::Ring)] {
        for p in Placement::BOTH {
            table.record(&ran(point(size, p, 1.5, 0.01, Some(0)), a)).unwrap();
        }
    }
    table.finish_text();
    table.printer.close(None);
    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("\n# all_reduce (hierarchy flat) pinned tree\n"), "{text}");
    let notes: Vec<&str> = text.lines().filter(|l| l.contains("did not run the pin")).collect();
    assert_eq!(notes.len(), 1, "{text}");
    assert!(
        notes[0].ends_with("NCCL did not run the pin at 2 sizes (64 B-1.0 MiB): it ran ring"),
        "{text}"
    );
    assert!(!text.contains("--algo ring measures"), "{text}");
}
