//! Unit tests of `nccl_log`: lines as real logs hold them.

use super::*;

fn nccl(raw: &str) -> Nccl<'_> {
    line(1, raw).nccl.unwrap_or_else(|| panic!("no NCCL part in {raw:?}"))
}

#[test]
fn an_info_line_splits_into_origin_and_message() {
    let n = nccl("node1:4101:4188 [3] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>");
    assert_eq!(n.level, Level::Info);
    assert_eq!(
        (n.origin.host.as_str(), n.origin.pid, n.origin.tid, n.origin.dev),
        ("node1", 4101, 4188, Some(3))
    );
    assert_eq!(n.message, "NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>");
    assert_eq!(n.subsystem(), Some("NET/IB"));
    assert_eq!((n.lead, n.source, n.interrupted), ("", None, None));
}

#[test]
fn warn_and_trace_lines_keep_their_source_location_and_timestamp_apart() {
    // 2.26.2 and later: a timestamp before the prefix (pytorch/ci-infra#490)
    let n = nccl(
        "[2026-04-22 21:34:20] mt-runner:202016:202235 [0] misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes",
    );
    assert_eq!((n.level, n.source), (Level::Warn, Some("misc/shmutils.cc:88")));
    assert_eq!((n.origin.host.as_str(), n.origin.dev), ("mt-runner", Some(0)));
    assert_eq!(n.lead, "[2026-04-22 21:34:20] ");
    assert!(n.message.starts_with("Error: failed to extend"));
    // a paste that lost the host (NVIDIA/nccl#444), and one that lost all but the location (#342)
    let n = nccl("`[0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]");
    assert_eq!(
        (n.origin.host.as_str(), n.origin.dev, n.source),
        ("", Some(0), Some("misc/ibvwrap.cc:63"))
    );
    assert_eq!(n.lead, "`");
    let n = nccl("include/shm.h:28 NCCL WARN Call to posix_fallocate failed: No space left on device");
    assert_eq!((n.source, n.origin.dev), (Some("include/shm.h:28"), None));
    let n = nccl("h:1:2 [1] 12.003456 transport/net.cc:500 NCCL TRACE connect");
    assert_eq!(
        (n.level, n.origin.dev, n.source),
        (Level::Trace, Some(1), Some("transport/net.cc:500"))
    );
    let n = nccl("h:1:2 NCCL CALL ncclAllReduce(1,2,3,0,0,0,0x5,0x6)");
    assert_eq!((n.level, n.origin.pid, n.origin.dev), (Level::Call, 1, None));
}

#[test]
fn launcher_and_paste_prefixes_are_the_lead_not_the_host() {
    let cases = [
        ("[rank3]:node-7:382:675 [0] NCCL INFO x", "node-7", Some(3)),
        ("[1,0]<stdout>:worker-0:25:25 [0] NCCL INFO x", "worker-0", None),
        (
            "10.10.23.10: so-ucloud-10:1307367:1307586 [0] NCCL INFO x",
            "so-ucloud-10",
            None,
        ),
        (
            "[trainer3]:twshared1016:1958:1958 [3] NCCL INFO x",
            "twshared1016",
            None,
        ),
        (" 0: ip-10-1-2-3:12:13 [0] NCCL INFO x", "ip-10-1-2-3", None),
        (
            "(RayTrainWorker pid=615, ip=10.72.7.6) w-1:615:700 [0] NCCL INFO x",
            "w-1",
            None,
        ),
        ("rocm-3:24888:25056 [1] 1558545003174220 NCCL INFO x", "rocm-3", None),
        // a line cut at its start keeps what is left of its host (NVIDIA/nccl#426)
        (
            "-worker-1:946:988 [0] transport/net_ib.cc:839 NCCL WARN x",
            "-worker-1",
            None,
        ),
    ];
    for (raw, host, rank) in cases {
        let n = nccl(raw);
        assert_eq!(
            (n.origin.host.as_str(), n.origin.rank_label, n.message),
            (host, rank, "x"),
            "{raw}"
        );
    }
    assert_eq!(nccl(cases[1].0).lead, "[1,0]<stdout>:");
    assert_eq!(nccl(cases[2].0).lead, "10.10.23.10: ");
}

#[test]
fn markdown_bold_and_a_device_after_the_mark_are_taken_off_the_message() {
    let n = nccl(
        "7635c25c81cd:41588:41837 [0] include/shm.h:28 **NCCL WARN Call to posix_fallocate failed : No space left on device**",
    );
    assert_eq!(n.message, "Call to posix_fallocate failed : No space left on device");
    assert_eq!(n.source, Some("include/shm.h:28"));
    let n = nccl("h:1:2 [0] NCCL INFO [2] AllReduce: opCount 0");
    assert_eq!((n.origin.dev, n.message), (Some(2), "AllReduce: opCount 0"));
}

#[test]
fn a_line_printed_into_another_names_the_other_and_its_fragment() {
    let n = nccl(
        "h:1:2 [0] NCCL INFO AllReduce: opCount 3 sendh:3:4 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct",
    );
    assert_eq!((n.origin.host.as_str(), n.origin.pid), ("sendh", 3));
    assert_eq!(n.message, "Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct");
    let i = n.interrupted.unwrap();
    assert_eq!((i.origin.host.as_str(), i.origin.pid, i.level), ("h", 1, Level::Info));
    assert_eq!(i.text, "AllReduce: opCount 3");
}

#[test]
fn lines_without_a_mark_keep_their_text_without_paste_and_launcher_prefixes() {
    let content = |raw| line(7, raw).content;
    assert_eq!(
        content("  Error while creating shared memory segment /dev/shm/nccl-1 (size 7)"),
        "Error while creating shared memory segment /dev/shm/nccl-1 (size 7)"
    );
    assert_eq!(
        content("[trainer0|0]:ncclSocketInit: connecting to address"),
        "ncclSocketInit: connecting to address"
    );
    assert_eq!(content("> **Last error:**"), "Last error:");
    assert_eq!(content("[1,0]<stdout>:# nThread 1"), "# nThread 1");
    assert_eq!(content("12: some text"), "some text");
    // an interface list a maintainer wrapped one per line (NVIDIA/nccl#697)
    assert_eq!(
        content("[3]br-dd40dc616638:172.30.0.1<0>  "),
        "[3]br-dd40dc616638:172.30.0.1<0>"
    );
    let l = line(7, "NCCL version 2.7.8+cuda10.2\r");
    assert_eq!(
        (l.number, l.text, l.level(), l.nccl),
        (7, "NCCL version 2.7.8+cuda10.2", None, None)
    );
}

#[test]
fn lines_number_from_one_and_keep_their_text() {
    let text = "a:1:2 [0] NCCL INFO one\n\nb:3:4 [1] x.cc:9 NCCL WARN two\n";
    let got: Vec<(usize, Option<Level>, &str)> = lines(text).map(|l| (l.number, l.level(), l.content)).collect();
    assert_eq!(
        got,
        [
            (1, Some(Level::Info), "one"),
            (2, None, ""),
            (3, Some(Level::Warn), "two")
        ]
    );
    assert_eq!(
        lines(text).nth(2).unwrap().origin().map(|o| o.describe()),
        Some("b pid 3 device 1".into())
    );
}

#[test]
fn files_folders_and_gzip_are_read_as_text() {
    use std::io::Write;
    let dir = std::env::temp_dir().join(format!("collbench-nccl-log-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("ranks")).unwrap();
    std::fs::write(dir.join("ranks/r1.log"), "h:1:1 [1] NCCL INFO b\n").unwrap();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(b"h:0:0 [0] NCCL INFO a\n").unwrap();
    std::fs::write(dir.join("ranks/r0.log.gz"), gz.finish().unwrap()).unwrap();
    std::fs::write(dir.join("ranks/core"), b"\x7fELF\x02\x01").unwrap();
    std::fs::write(dir.join("ranks/.hidden"), "x").unwrap();
    let (logs, notes) = read_paths(&[dir.join("ranks")]).unwrap();
    let names: Vec<&str> = logs.iter().map(|l| l.name.rsplit('/').next().unwrap()).collect();
    assert_eq!(names, ["r0.log.gz", "r1.log"]);
    assert_eq!(logs[0].lines().next().unwrap().content, "a");
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("core") && notes[0].contains("ELF"), "{notes:?}");
    // a file named on its own that is not a log is an error, in one line
    let e = read_paths(&[dir.join("ranks/core")]).unwrap_err();
    assert_eq!(e.exit_code(), crate::error::exit::USAGE);
    let e = read_paths(&[dir.join("missing.log")]).unwrap_err().to_string();
    assert!(e.contains("cannot read") && e.contains("missing.log"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_value_is_whole_only_where_something_follows_it_in_its_line() {
    let words: Vec<&str> = "comm 0x55 rank 1 nranks 16 cudaDev 0".split_whitespace().collect();
    assert_eq!(whole(&words, "nranks"), Some("16"));
    assert_eq!(whole(&words, "cudaDev"), None, "the last word may be cut");
    assert_eq!(whole(&words[..6], "nranks"), None);
    assert_eq!(whole(&words, "busId"), None);
    assert_eq!(whole_number("9637888)"), Some(9637888));
    assert_eq!(whole_number("12, opcode 1"), Some(12));
    assert_eq!(whole_number("9637"), None, "digits up to the line's end may be cut");
    assert_eq!(whole_number(""), None);
    assert_eq!(whole_number("x1)"), None);
    assert_eq!(whole_number("99999999999999999999999)"), None);
}
