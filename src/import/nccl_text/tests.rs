//! The decisions of docs/import.md, each on a small log written the way
//! nccl-tests prints one (`Log` computes algbw and busbw as nccl-tests
//! does, so the busbw cross-check sees what a real log would show).

use super::ranks::half_unit;
use super::*;

/// A synthetic nccl-tests log.
struct Log {
    binary: &'static str,
    /// nccl-tests' bus factor for `nranks`, to print busbw with.
    factor: f64,
    ranks: Vec<u64>,
    sizes: Vec<u64>,
    /// 2.13+ columns (`redop root ... #wrong`), else the 2020 layout
    /// named in `old`.
    old: Option<&'static str>,
    prefix: &'static str,
}

impl Log {
    fn new(binary: &'static str, nranks: u64) -> Log {
        let n = nranks as f64;
        let factor = match binary {
            "all_reduce_perf" | "all_reduce_perf_mpi" => 2.0 * (n - 1.0) / n,
            "all_gather_perf" | "reduce_scatter_perf" | "alltoall_perf" => (n - 1.0) / n,
            _ => 1.0,
        };
        Log {
            binary,
            factor,
            ranks: (0..nranks).collect(),
            sizes: vec![1 << 20, 1 << 24, 1 << 28],
            old: None,
            prefix: "",
        }
    }

    fn time_us(size: u64) -> f64 {
        8.0 + size as f64 / 7.3e4
    }

    fn row(&self, size: u64) -> String {
        let t = Log::time_us(size);
        let mut alg = size as f64 / t / 1e3;
        let bus = alg * self.factor;
        if self.old == Some("plain") {
            // 2020 nccl-tests folded (n-1)/n into algbw too
            alg = bus;
        }
        let count = size / 4;
        match self.old {
            // 2020: no redop or root, maximum error column
            Some("plain") => format!(
                "{size:>12}  {count:>12}  {:>6}  {t:>7.2}  {alg:>6.2}  {bus:>6.2}  {:>5}  {t:>7.2}  {alg:>6.2}  {bus:>6.2}  {:>5}",
                "float", "2e-07", "2e-07"
            ),
            // old alltoall: the redop column printed empty
            Some("blank-redop") => format!(
                "{size:>12}  {count:>12}  {:>6}  {:>6}  {t:>7.2}  {alg:>6.2}  {bus:>6.2}  {:>5}  {t:>7.2}  {alg:>6.2}  {bus:>6.2}  {:>5}",
                "float", "", "0e+00", "0e+00"
            ),
            _ => format!(
                "{size:>12}  {count:>12}  {:>8}  {:>6}  {:>6}  {t:>7.2}  {alg:>6.2}  {bus:>6.2}  {:>6}  {t:>7.2}  {alg:>6.2}  {bus:>6.2}  {:>6}",
                "float", "sum", -1, 0, 0
            ),
        }
    }

    fn header(&self) -> &'static str {
        match self.old {
            Some("plain") => {
                "#       size         count    type     time   algbw   busbw  error     time   algbw   busbw  error"
            }
            Some(_) => {
                "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error"
            }
            None => {
                "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong"
            }
        }
    }

    fn lines(&self) -> Vec<String> {
        let mut out = vec![
            "# nccl-tests version 2.17.8 nccl-headers=22902 nccl-library=22902".to_string(),
            format!("# Collective test starting: {}", self.binary),
            "# nThread 1 nGpus 1 minBytes 8 maxBytes 268435456 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0".to_string(),
            "#".to_string(),
            "# Using devices".to_string(),
        ];
        for r in &self.ranks {
            // the Group column came with 2.13
            let group = if self.old.is_some() { "" } else { "Group  0 " };
            out.push(format!(
                "#  Rank {r:>2} {group}Pid {:>6} on node-{} device {:>2} [0000:1b:00] NVIDIA H100 80GB HBM3",
                1000 + r,
                r / 8,
                r % 8
            ));
        }
        out.push("#".to_string());
        out.push(self.header().to_string());
        out.push("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)".to_string());
        out.extend(self.sizes.iter().map(|&s| self.row(s)));
        out.push("# Out of bounds values : 0 OK".to_string());
        out.push("# Avg bus bandwidth    : 1.234".to_string());
        out.push("#".to_string());
        out
    }

    fn text(&self) -> String {
        self.lines().iter().map(|l| format!("{}{l}\n", self.prefix)).collect()
    }
}

fn given(collective: Option<Collective>, nranks: Option<u64>) -> Given {
    Given { collective, nranks }
}

fn ok(text: &str) -> Parsed {
    parse(text, "log.txt", &Given::default()).unwrap_or_else(|e| panic!("refused: {e}"))
}

fn refused(text: &str, g: &Given) -> String {
    match parse(text, "log.txt", g) {
        Ok(p) => panic!("imported {} rows, warnings {:?}", p.records.len(), p.warnings),
        Err(e) => {
            assert_eq!(e.lines().count(), 1, "{e}");
            e
        }
    }
}

#[test]
fn a_plain_log_gives_both_placements_with_our_bandwidths_and_its_hosts() {
    let p = ok(&Log::new("all_reduce_perf", 16).text());
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.records.len(), 6);
    let r = &p.records[5];
    assert_eq!((r.collective.name(), r.placement.name()), ("all_reduce", "in_place"));
    assert_eq!(
        (r.nranks, r.nnodes, r.ranks_per_node, r.host.as_str()),
        (16, 2, 8, "node-0")
    );
    assert_eq!((r.iters, r.warmup, r.wrong), (20, 5, Some(0)));
    assert_eq!(r.backend_version, "nccl-tests 2.17.8, NCCL 2.29.2");
    // the time as printed (two decimals) is what the bandwidths come from
    let t: f64 = format!("{:.2}", Log::time_us(1 << 28)).parse().unwrap();
    assert_eq!(r.time_us, t);
    assert!((r.algbw_gbps - (1u64 << 28) as f64 / t / 1e3).abs() < 1e-9);
    assert!((r.busbw_gbps - r.algbw_gbps * 30.0 / 16.0).abs() < 1e-9);
}

#[test]
fn srun_label_and_tag_output_prefixes_with_any_wrapper_before_them_import_every_row() {
    for prefix in [" 0: ", "[1,0]<stdout>:", "node-0: [1,0]<stdout>:", "[0] "] {
        let mut log = Log::new("all_gather_perf", 8);
        log.prefix = prefix;
        let p = ok(&log.text());
        assert_eq!(p.records.len(), 6, "{prefix:?}");
        assert_eq!(p.records[0].nranks, 8, "{prefix:?}");
    }
}

#[test]
fn a_wrapper_that_prefixes_every_line_with_its_own_words_is_read_through_the_header() {
    // pdsh-like host and srun label, or a CI runner's timestamp, before every line
    for prefix in ["node-0:  0: ", "2025-06-01T10:00:00.123Z "] {
        let mut log = Log::new("broadcast_perf", 4);
        log.prefix = prefix;
        let p = ok(&log.text());
        assert_eq!(p.records.len(), 6, "{prefix:?}");
    }
}

#[test]
fn very_long_trailing_blanks_and_crlf_change_nothing() {
    let log = Log::new("all_reduce_perf", 8);
    let text: String = log
        .lines()
        .iter()
        .map(|l| format!("{l}{}\r\n", " ".repeat(300)))
        .collect();
    assert_eq!(ok(&text).records.len(), 6);
}

#[test]
fn the_2020_layout_without_group_redop_and_root_is_mapped_by_its_header() {
    let mut log = Log::new("all_gather_perf", 12);
    log.old = Some("plain");
    let p = ok(&log.text());
    assert_eq!(p.records.len(), 6);
    let r = &p.records[0];
    assert_eq!(
        (r.op.map_or("none", |o| o.name()), r.root, r.dtype.name()),
        ("none", None, "float")
    );
    assert_eq!((r.nranks, r.nnodes), (12, 2));
    assert_eq!(r.wrong, None, "the error column is a maximum error, not a count");
    // the log's algbw had (n-1)/n folded in; ours is size / time, busbw the log's
    let t: f64 = format!("{:.2}", Log::time_us(1 << 20)).parse().unwrap();
    assert!((r.algbw_gbps - (1u64 << 20) as f64 / t / 1e3).abs() < 1e-9);
    assert!((r.busbw_gbps - r.algbw_gbps * 11.0 / 12.0).abs() < 1e-9);
}

#[test]
fn a_reduction_without_a_redop_or_type_column_takes_the_command_line_or_nccl_tests_defaults() {
    let mut log = Log::new("reduce_scatter_perf", 4);
    log.old = Some("plain");
    let p = ok(&log.text().replace("    type", "        ").replace(" float ", " "));
    assert_eq!(
        (p.records[0].op.map_or("none", |o| o.name()), p.records[0].dtype.name()),
        ("sum", "float")
    );
    let text = format!("./build/reduce_scatter_perf -g 4 -o max\n{}", log.text());
    assert_eq!(ok(&text).records[0].op.map_or("none", |o| o.name()), "max");
}

#[test]
fn an_old_alltoall_row_with_an_empty_redop_is_read() {
    let mut log = Log::new("alltoall_perf", 4);
    log.old = Some("blank-redop");
    let p = ok(&log.text());
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
    assert_eq!(p.records.len(), 6);
    assert_eq!(p.records[0].op.map_or("none", |o| o.name()), "none");
}

#[test]
fn perf_mpi_binaries_and_echoed_command_lines_name_the_collective() {
    let log = Log::new("all_reduce_perf_mpi", 2);
    assert_eq!(ok(&log.text()).records[0].collective.name(), "all_reduce");
    // no "Collective test starting" line, only the command
    let text: String = log
        .lines()
        .iter()
        .filter(|l| !l.contains("starting"))
        .map(|l| format!("{l}\n"))
        .collect();
    let text = format!("$ mpirun -np 2 /opt/nccl_tests/build/all_reduce_perf_mpi -b 1M -e 256M\n{text}");
    assert_eq!(ok(&text).records[0].collective.name(), "all_reduce");
}

#[test]
fn the_rank_count_is_the_highest_rank_plus_one_not_the_number_of_rank_lines() {
    // rank 2's line lost: 3 lines, 4 ranks; all_reduce's busbw confirms 4
    let mut log = Log::new("all_reduce_perf", 4);
    log.ranks = vec![0, 1, 3];
    let p = ok(&log.text());
    assert_eq!(p.records[0].nranks, 4);
    assert_eq!(p.records[0].nnodes, 0, "hosts are unknown when a rank line is missing");
}

#[test]
fn elided_rank_lines_that_busbw_cannot_confirm_are_refused_until_nranks_is_given() {
    let mut log = Log::new("sendrecv_perf", 80);
    log.ranks = vec![0, 1, 2, 77, 78, 79];
    let e = refused(&log.text(), &Given::default());
    assert!(e.contains("at least 80 but not known"), "{e}");
    assert!(e.contains("--nranks"), "{e}");
    let p = parse(&log.text(), "x", &given(None, Some(80))).unwrap();
    assert_eq!(p.records[0].nranks, 80);
    assert_eq!(
        p.records[0].op.map_or("none", |o| o.name()),
        "none",
        "sendrecv is no reduction, whatever nccl-tests prints"
    );
}

#[test]
fn a_rank_count_that_contradicts_the_logs_own_busbw_is_refused() {
    let log = Log::new("all_reduce_perf", 16);
    let e = refused(&log.text(), &given(None, Some(8)));
    assert!(
        e.contains("8 ranks (--nranks), but the '#  Rank' lines list ranks 0 to 15"),
        "{e}"
    );
    // no Rank lines: only the busbw column can tell
    let mut log = Log::new("all_reduce_perf", 16);
    log.ranks.clear();
    let e = refused(&log.text(), &given(None, Some(8)));
    assert!(e.contains("is not what all_reduce gives with 8 ranks"), "{e}");
    assert!(e.starts_with("line 11:"), "the largest busbw is the telling one: {e}");
    assert_eq!(
        parse(&log.text(), "x", &given(None, Some(16))).unwrap().records.len(),
        6
    );
    let e = refused(&log.text(), &Given::default());
    assert!(e.contains("no '#  Rank N' device lines"), "{e}");
}

#[test]
fn the_nthread_line_and_the_command_line_must_agree_with_the_rank_lines() {
    let text = Log::new("all_reduce_perf", 6).text().replace("nGpus 1", "nGpus 4");
    let e = refused(&text, &Given::default());
    assert!(e.contains("nThread 1 x nGpus 4 = 4 ranks"), "{e}");
    let text = format!(
        "./build/all_reduce_perf -b 1M -g 4\n{}",
        Log::new("all_reduce_perf", 6).text()
    );
    let e = refused(&text, &Given::default());
    assert!(e.contains("the command line at line 1 starts 4"), "{e}");
}

#[test]
fn a_single_process_command_line_counts_the_ranks_when_there_are_no_rank_lines() {
    let mut log = Log::new("sendrecv_perf", 8);
    log.ranks.clear();
    let text = format!("./build/sendrecv_perf -b 128M -e 1G -f 2 -g 8\n{}", log.text());
    assert_eq!(ok(&text).records[0].nranks, 8);
    let text = format!("mpirun --hostfile h ./build/sendrecv_perf -g 8\n{}", log.text());
    let e = refused(&text, &Given::default());
    assert!(e.contains("--nranks"), "{e}");
}

#[test]
fn one_rank_listed_by_two_processes_is_refused() {
    let text = Log::new("all_reduce_perf", 2)
        .text()
        .replace("#  Rank  1 Group  0 Pid   1001", "#  Rank  0 Group  0 Pid   1001");
    let e = refused(&text, &Given::default());
    assert!(e.contains("rank 0 is listed twice by different processes"), "{e}");
}

#[test]
fn a_row_split_by_an_interleaved_line_is_joined_and_said_so() {
    let log = Log::new("all_reduce_perf", 8);
    let row = log.row(1 << 24);
    for at in [row.find("     sum").unwrap() + 8, row.find(".").unwrap()] {
        let (a, b) = row.split_at(at);
        let text = log.text().replace(
            &row,
            &format!("{a}\nnode-0:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 8 - Init COMPLETE\n{b}"),
        );
        let p = ok(&text);
        assert_eq!(p.records.len(), 6, "split at {at}");
        assert_eq!(p.records[2].size_bytes, 1 << 24);
        assert_eq!(
            p.warnings,
            ["line 18: a result row split by interleaved output (line 19) was joined with its rest on line 20"]
        );
    }
}

#[test]
fn a_row_cut_by_truncation_or_left_incomplete_is_reported_with_its_line() {
    let log = Log::new("all_reduce_perf", 8);
    let text = log.text();
    let last = log.row(1 << 28);
    let cut = &text[..text.find(&last).unwrap() + 40];
    let p = ok(cut);
    assert_eq!(p.records.len(), 4);
    assert_eq!(p.warnings.len(), 1, "{:?}", p.warnings);
    assert!(
        p.warnings[0].starts_with("line 19: the file ends inside this result row (3 of 13 values)"),
        "{:?}",
        p.warnings
    );
    // the last token cut short: `N/A` -> `N/`
    let na = text.replace(&last, &format!("{}N/", &last[..last.len() - 1]));
    let cut = &na[..na.find("N/").unwrap() + 2];
    let p = ok(cut);
    assert!(
        p.warnings[0].contains("'N/' is not a valid #wrong value"),
        "{:?}",
        p.warnings
    );
    // in the middle of the file: a row with no rest
    let middle = text.replace(&log.row(1 << 24), &log.row(1 << 24)[..30]);
    let p = ok(&middle);
    assert_eq!(p.records.len(), 4);
    assert!(
        p.warnings[0].starts_with("line 18: an incomplete result row (2 of 13 values)"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn a_header_whose_every_row_is_rejected_says_so_with_the_first_reason() {
    let log = Log::new("all_reduce_perf", 8);
    let text = log.text().replace("   float", "   float   extra");
    let e = refused(&text, &Given::default());
    assert!(
        e.starts_with(
            "the nccl-tests column header (line 15) was found, but none of the 3 rows under it could be read"
        ),
        "{e}"
    );
    assert!(
        e.contains("line 17: not a result row ('sum' is not a valid root value)"),
        "{e}"
    );
    let e = refused("hello\nworld\n", &Given::default());
    assert!(e.contains("no nccl-tests result rows found"), "{e}");
}

#[test]
fn failed_checks_of_an_old_log_leave_wrong_empty_and_are_reported() {
    let mut log = Log::new("all_gather_perf", 12);
    log.old = Some("plain");
    let text = log.text().replace("values : 0 OK", "values : 4 FAILED");
    let p = ok(&text);
    assert!(p.records.iter().all(|r| r.wrong.is_none()));
    assert_eq!(p.warnings.len(), 1);
    assert!(
        p.warnings[0].contains("4 FAILED checks; its 'error' column is a maximum error"),
        "{:?}",
        p.warnings
    );
}

#[test]
fn sections_back_to_back_each_get_their_collective_and_rank_count() {
    let text = format!(
        "{}\n{}",
        Log::new("all_reduce_perf", 8).text(),
        Log::new("alltoall_perf", 2).text()
    );
    let p = ok(&text);
    assert_eq!(p.records.len(), 12);
    assert_eq!((p.records[0].collective.name(), p.records[0].nranks), ("all_reduce", 8));
    assert_eq!((p.records[11].collective.name(), p.records[11].nranks), ("alltoall", 2));
    let print = crate::engine::digest::fnv1a(text.as_bytes()) >> 32;
    assert_eq!(p.records[0].run_id, format!("nccl-tests-log-{print:08x}-1"));
    assert_eq!(p.records[11].run_id, format!("nccl-tests-log-{print:08x}-2"));
}

#[test]
fn without_a_collective_name_the_user_is_asked_for_what_is_missing() {
    let text = Log::new("all_reduce_perf", 4)
        .text()
        .replace("all_reduce_perf", "a.out");
    let e = refused(&text, &Given::default());
    assert!(e.contains("pass --collective NAME"), "{e}");
    assert!(!e.contains("--nranks"), "{e}");
    let text: String = text
        .lines()
        .filter(|l| !l.contains("Rank"))
        .map(|l| format!("{l}\n"))
        .collect();
    let e = refused(&text, &Given::default());
    assert!(e.contains("pass --collective NAME and --nranks N"), "{e}");
    let p = parse(&text, "x", &given(Some(Collective::AllReduce), Some(4))).unwrap();
    assert_eq!(p.records.len(), 6);
}

#[test]
fn half_units_follow_what_printf_printed() {
    assert_eq!(half_unit("12.5"), 0.05);
    assert_eq!(half_unit("105854"), 0.5);
    assert_eq!(half_unit("1e+06"), 5e5);
    assert!((half_unit("2.50e-03") - 5e-6).abs() < 1e-18);
}

#[test]
fn timestamps_are_one_column() {
    let text = "\
[1,0]<stdout>:# Collective test starting: broadcast_perf
[1,0]<stdout>:#  Rank  0 Group  0 Pid  1 on h device  0 [0000:07:00] NVIDIA H100
[1,0]<stdout>:#  Rank  1 Group  0 Pid  2 on h device  1 [0000:0b:00] NVIDIA H100
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong           timestamp
[1,0]<stdout>:          64            16     float    none       0    10.00    0.01    0.01      0     9.00    0.01    0.01      0 2025-10-14 12:00:01
";
    let p = ok(text);
    assert_eq!(p.records.len(), 2);
    assert_eq!(
        p.records[0].timestamp, "2025-10-14T12:00:01Z",
        "RFC 3339, the zone assumed UTC"
    );
    assert_eq!((p.records[0].root, p.records[1].time_us), (Some(0), 9.0));
}

#[test]
fn huge_numbers_anywhere_are_refused_or_skipped_never_a_panic() {
    let max = u64::MAX;
    let log = Log::new("all_reduce_perf", 2).text();
    let texts = [
        log.replace("#  Rank  1 Group", &format!("#  Rank {max} Group")),
        log.replace("nThread 1 nGpus 1", &format!("nThread {max} nGpus {max}")),
        format!("mpirun -np {max} ./all_reduce_perf -t {max} -g {max}\n{log}"),
        log.replace("  0.00  ", "  1.5e-2147483648  "),
        log.replace("    float", &format!("    float {max}")),
    ];
    for text in &texts {
        let _ = parse(text, "x", &Given::default());
        let _ = parse(text, "x", &given(None, Some(max)));
    }
    assert_eq!(half_unit("1.5e-2147483648"), 0.0);
}

#[test]
fn log_lines_of_others_do_not_pose_as_rank_or_header_lines_and_stray_rows_are_reported() {
    let log = Log::new("all_reduce_perf", 4);
    let noise = "node-0:1:2 [0] NCCL INFO Rank 7 Pid 99 on x device 0 size count time";
    let text = log
        .text()
        .replace("# Using devices", &format!("# Using devices\n{noise}"));
    let p = ok(&text);
    assert_eq!((p.records.len(), p.records[0].nranks), (6, 4));
    // a row after the footer belongs to no table: reported, not imported
    let text = log.text().replace(
        "# Avg bus bandwidth    : 1.234",
        &format!("# Avg bus bandwidth    : 1.234\n{}", log.row(1 << 22)),
    );
    let p = ok(&text);
    assert_eq!(p.records.len(), 6);
    assert_eq!(
        p.warnings,
        ["line 18: a result row outside any table (after its run's footer, or where a new run began): not imported"]
    );
}
