//! `collbench workload` and `collbench replay`: each strategy's sequence
//! against one computed by hand for a small plain model (counts, order,
//! groups) at 1 and 3 ranks, the first-principles volume, validation of
//! every collective of a step, the side-by-side view and its ratios,
//! `compare` on two workload CSVs, replays of the real log excerpts in
//! tests/fixtures/nccl-coll-logs/ (their README cites each source), and
//! bad input (exit 2, one line, every rank ended). What is the sequence's
//! runs as threads on the memory backend (`-g N`); the groups made by
//! MPI_Comm_split, the replays of large buffers, a limit of MPI's and
//! SIGTERM run under the real mpirun.

use std::path::{Path, PathBuf};

use crate::common::*;

/// The small model of these tests: `--params 1M --layers 2 --hidden 128
/// --vocab 1000` in float. By docs/workload.md's plain form: a tied
/// embedding of 1000 x 128 = 128000, then (1000000 - 128000) / 2 = 436000
/// per layer: q, k, v, o of 128^2 = 16384 each, and two MLP matrices of
/// (436000 - 65536) / 2 = 185232 each.
const MODEL: &str = "--params 1M --layers 2 --hidden 128 --vocab 1000 --param-dtype float --steps 2";

const EMBEDDING: u64 = 128_000;
const LAYER: u64 = 436_000;

/// `collbench workload` of the small model at `np` ranks on the memory
/// backend (`-g N`), writing the CSV `name` in `dir`.
fn workload(np: usize, dir: &Path, name: &str, extra: &[&str]) -> (std::process::Output, PathBuf) {
    let csv = dir.join(name);
    let mut args = argv!["workload --warmup-steps 0 --csv", path_str(&csv)];
    args.extend(words(MODEL));
    args.extend(extra);
    (on_memory(np, &args), csv)
}

/// `workload` under mpirun on the mpi backend.
fn workload_mpi(np: usize, dir: &Path, name: &str, extra: &[&str]) -> (std::process::Output, PathBuf) {
    let csv = dir.join(name);
    let mut args = argv!["workload --backend mpi --warmup-steps 0 --csv", path_str(&csv)];
    args.extend(words(MODEL));
    args.extend(extra);
    (mpirun(np, &args), csv)
}

/// The op rows of one configuration: (collective, count, group, group ranks, phase).
fn ops(csv: &Csv, workload: &str) -> Vec<(String, u64, String, u64, String)> {
    csv.rows
        .iter()
        .filter(|r| csv.get(r, "kind") == "op" && csv.get(r, "workload") == workload)
        .map(|r| {
            (
                csv.get(r, "collective").to_string(),
                csv.num(r, "count") as u64,
                csv.get(r, "group").to_string(),
                csv.num(r, "group_ranks") as u64,
                csv.get(r, "phase").to_string(),
            )
        })
        .collect()
}

fn steps(csv: &Csv, workload: &str) -> Vec<Vec<String>> {
    csv.rows
        .iter()
        .filter(|r| csv.get(r, "kind") == "step" && csv.get(r, "workload") == workload)
        .cloned()
        .collect()
}

fn op(c: &str, count: u64, group: &str, ranks: u64, phase: &str) -> (String, u64, String, u64, String) {
    (c.into(), count, group.into(), ranks, phase.into())
}

#[test]
fn ddp_and_fsdp_issue_the_hand_computed_sequence_at_one_and_three_ranks() {
    for np in [1u64, 3] {
        let dir = tempdir();
        let (out, path) = workload(np as usize, dir.path(), "w.csv", &["--strategy", "ddp,fsdp"]);
        assert_eq!(code(&out), 0, "np={np}: {}", stderr(&out));
        let csv = Csv::read(&path);
        // DDP: reverse parameter order; the first bucket closes once it
        // reaches 1 MiB (262144 floats): both MLP matrices of layer 1
        // (370464); everything else fits the 25 MiB cap (629536).
        let w = "world";
        assert_eq!(
            ops(&csv, "ddp"),
            vec![
                op("all_reduce", 370_464, w, np, "backward"),
                op("all_reduce", 629_536, w, np, "backward")
            ],
            "np={np}"
        );
        // FSDP FULL_SHARD: root, layer 0, layer 1 gathered in forward;
        // backward (BACKWARD_PRE): AG(1) AG(0) RS(1) RS(0) RS(root); each
        // per-rank count is the unit padded to a multiple of the ranks.
        let (root, layer) = (EMBEDDING.div_ceil(np), LAYER.div_ceil(np));
        assert_eq!(
            ops(&csv, "fsdp"),
            vec![
                op("all_gather", root, w, np, "forward"),
                op("all_gather", layer, w, np, "forward"),
                op("all_gather", layer, w, np, "forward"),
                op("all_gather", layer, w, np, "backward"),
                op("all_gather", layer, w, np, "backward"),
                op("reduce_scatter", layer, w, np, "backward"),
                op("reduce_scatter", layer, w, np, "backward"),
                op("reduce_scatter", root, w, np, "backward"),
            ],
            "np={np}"
        );
        // volumes: all_reduce 2(n-1)/n x 4 MB; all_gather and
        // reduce_scatter (n-1)/n x n x count x 4 bytes each
        let n = np as f64;
        let ddp = 2.0 * (n - 1.0) / n * 4_000_000.0;
        let fsdp = (n - 1.0) * 4.0 * (2.0 * root as f64 + 6.0 * layer as f64);
        for (name, want) in [("ddp", ddp), ("fsdp", fsdp)] {
            let rows = steps(&csv, name);
            assert_eq!(rows.len(), 2, "np={np} {name}");
            for r in &rows {
                assert!((csv.num(r, "bus_bytes") - want).abs() < 1.0, "np={np} {name}: {r:?}");
                assert_eq!(csv.get(r, "wrong"), "0", "np={np} {name}");
                assert!(csv.num(r, "time_us") > 0.0);
            }
        }
    }
}

#[test]
fn zero_hsdp_and_tp_run_on_the_groups_they_need() {
    // MPI_Comm_split's groups, 2 x 2
    let dir = tempdir();
    let extra = argv!["--strategy zero2,hsdp,tp --tp 2 --ranks-per-node 2 --seq-len 16"];
    let (out, path) = workload_mpi(4, dir.path(), "w.csv", &extra);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let csv = Csv::read(&path);
    // ZeRO-2: one bucket (5e8 elements) all-reduced, then the updated
    // partitions gathered: ceil(1e6 / (2 x 4)) x 2 per rank
    assert_eq!(
        ops(&csv, "zero2"),
        vec![
            op("all_reduce", 1_000_000, "world", 4, "backward"),
            op("all_gather", 250_000, "world", 4, "optimizer")
        ]
    );
    // HSDP: FULL_SHARD inside the node (2 ranks), each reduce_scatter
    // followed by the all_reduce of its shard across nodes
    let hsdp = ops(&csv, "hsdp");
    let (root, layer) = (EMBEDDING / 2, LAYER / 2);
    assert_eq!(hsdp.len(), 11);
    assert_eq!(
        &hsdp[..3],
        &[
            op("all_gather", root, "node", 2, "forward"),
            op("all_gather", layer, "node", 2, "forward"),
            op("all_gather", layer, "node", 2, "forward")
        ]
    );
    assert_eq!(
        &hsdp[5..],
        &[
            op("reduce_scatter", layer, "node", 2, "backward"),
            op("all_reduce", layer, "cross-node", 2, "backward"),
            op("reduce_scatter", layer, "node", 2, "backward"),
            op("all_reduce", layer, "cross-node", 2, "backward"),
            op("reduce_scatter", root, "node", 2, "backward"),
            op("all_reduce", root, "cross-node", 2, "backward"),
        ]
    );
    // tp 2: activations of 1 x 16 x 128 on the tp group: the embedding's,
    // 2 per layer forward, 2 per layer backward, the output layer's input
    // gradient, and the loss's three of 16 floats; then the data-parallel
    // gradient buckets over the 2 ranks of equal tp rank
    let tp = ops(&csv, "tp");
    let on_tp: Vec<_> = tp.iter().filter(|o| o.2 == "tp").collect();
    assert_eq!(on_tp.len(), 1 + 4 + 4 + 1 + 3, "{tp:?}");
    assert!(on_tp.iter().all(|o| o.0 == "all_reduce" && o.3 == 2));
    assert_eq!(on_tp.iter().filter(|o| o.1 == 16 * 128).count(), 10, "{tp:?}");
    assert_eq!(on_tp.iter().filter(|o| o.1 == 16).count(), 3, "{tp:?}");
    let on_dp: Vec<_> = tp.iter().filter(|o| o.2 == "dp").collect();
    assert!(!on_dp.is_empty() && on_dp.iter().all(|o| o.0 == "all_reduce" && o.3 == 2));
    assert!(tp.iter().all(|o| o.2 == "tp" || o.2 == "dp"));
    for name in ["zero2", "hsdp", "tp"] {
        assert!(steps(&csv, name).iter().all(|r| csv.get(r, "wrong") == "0"), "{name}");
    }
}

#[test]
fn an_injected_error_fails_every_collective_of_the_step_with_exit_3() {
    let dir = tempdir();
    let extra = ["--strategy", "hsdp", "--ranks-per-node", "2", "--inject-error"];
    let (out, _) = workload(4, dir.path(), "w.csv", &extra);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let lines = our_lines(&out);
    // 11 operations, each corrupted on every rank and each found wrong
    assert_eq!(
        lines,
        vec!["collbench: validation failed: 44 wrong elements in 11 of 11 checked points"],
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_side_by_side_view_gives_each_configuration_its_ratio_to_the_best() {
    let dir = tempdir();
    let extra = ["--strategy", "ddp,fsdp", "--bucket", "1M,25M"];
    let (out, path) = workload(2, dir.path(), "w.csv", &extra);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("not modelled: operations run one after another"),
        "{text}"
    );
    let csv = Csv::read(&path);
    let names = ["ddp bucket 1.0 MiB", "ddp bucket 25.0 MiB", "fsdp"];
    let median = |name: &str| {
        let mut t: Vec<f64> = steps(&csv, name).iter().map(|r| csv.num(r, "time_us")).collect();
        t.sort_by(f64::total_cmp);
        (t[0] + t[1]) / 2.0
    };
    let best = names.iter().map(|n| median(n)).fold(f64::INFINITY, f64::min);
    let view: Vec<&str> = text.lines().skip_while(|l| !l.starts_with("side by side")).collect();
    // three configurations: each interval at 98.3%, so that the three
    // pairs' verdicts hold together at 95%; two steps are too few for the
    // rank test (five a side reach 98.3%), and the view says so
    assert_eq!(view.len(), 2 + names.len() + 2, "{text}");
    assert!(view[0].contains("with its 98.3% interval"), "{text}");
    assert!(
        view[view.len() - 2].contains("Bonferroni over the 3 pairs of its 3 configurations"),
        "{text}"
    );
    assert!(
        view[view.len() - 1].contains("too few steps") && view[view.len() - 1].contains("(5 a side at the least"),
        "{text}"
    );
    for name in names {
        let line = view.iter().find(|l| l.trim_start().starts_with(name)).expect(name);
        let cols: Vec<&str> = line.split_whitespace().collect();
        // name, ops, volume (2), median (2), p99 (2), busbw, x best
        let ratio: f64 = cols[name.split_whitespace().count() + 8].parse().unwrap();
        assert!((ratio - median(name) / best).abs() < 0.006, "{name}: {line}");
        assert!(line.contains("fastest") || line.contains("too few steps"), "{line}");
    }
    // a 1 MiB cap makes more buckets than 25 MiB, the same volume
    assert!(ops(&csv, names[0]).len() > ops(&csv, names[1]).len());
}

/// A copy of a workload CSV whose step times are 1000 + (step number)
/// microseconds times `factor`: the verdicts then do not depend on this
/// machine's noise.
fn scaled(from: &Path, to: &Path, factor: f64) {
    let csv = Csv::read(&from.to_path_buf());
    let mut w = csv::Writer::from_path(to).unwrap();
    w.write_record(&csv.header).unwrap();
    let t = csv.header.iter().position(|h| h == "time_us").unwrap();
    for r in &csv.rows {
        let mut r = r.clone();
        if r[0] == "step" {
            let step: f64 = csv.num(&r, "step");
            r[t] = format!("{:.3}", (1000.0 + step) * factor);
        }
        w.write_record(&r).unwrap();
    }
    w.flush().unwrap();
}

#[test]
fn compare_judges_two_workload_csvs_and_plot_refuses_them() {
    let dir = tempdir();
    let (out, base) = workload(2, dir.path(), "base.csv", &["--strategy", "ddp", "--steps", "6"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (measured, base) = (base, dir.path().join("steady.csv"));
    scaled(&measured, &base, 1.0);
    let slow = dir.path().join("slow.csv");
    scaled(&measured, &slow, 2.0);
    ok(collbench(&["compare", path_str(&base), path_str(&base)]));
    // one launch a side: twice as slow is unproven (launch noise could do
    // that), unless the steps of the launch are to judge
    let out = collbench(&["compare", path_str(&base), path_str(&slow)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    assert_stdout_has(&out, "unproven");
    assert_stdout_has(&out, "note: 1 configuration unproven");
    let out = collbench(&["compare", "--within-launch", path_str(&base), path_str(&slow)]);
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    assert_stdout_has(&out, "regressed");
    let out = collbench(&["compare", "--within-launch", path_str(&slow), path_str(&base)]);
    assert_eq!(code(&out), 0);
    assert_stdout_has(&out, "improved");
    // a folder of launches: the launch t-test judges the new launch
    let launches = dir.path().join("launches");
    std::fs::create_dir(&launches).unwrap();
    for (i, factor) in [1.0, 1.03, 0.98].into_iter().enumerate() {
        scaled(&measured, &launches.join(format!("launch-{i}.csv")), factor);
    }
    let out = collbench(&["compare", path_str(&launches), path_str(&slow)]);
    assert_eq!(code(&out), 4, "{}", stdout(&out));
    assert_stdout_has(&out, "(base, 3 launches)");
    assert_stdout_has(&out, "regressed");
    let out = collbench(&["compare", path_str(&launches), path_str(&base)]);
    assert_eq!(code(&out), 0, "{}", stdout(&out));
    let out = collbench(&["plot", path_str(&base), "-o", path_str(&dir.path().join("p.svg"))]);
    assert_eq!(code(&out), 2);
    assert_eq!(our_lines(&out).len(), 1, "{}", stderr(&out));
    assert!(our_lines(&out)[0].contains("is a workload CSV"));
}

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/nccl-coll-logs/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// `collbench replay LOG` under mpirun on the mpi backend: for the logs
/// of large buffers (hundreds of MiB), which MPI moves faster than the
/// memory backend computes them.
fn replay(np: usize, log: &str, csv: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = argv![
        "replay",
        log,
        "--backend mpi --steps 2 --warmup-steps 0 --csv",
        path_str(csv)
    ];
    args.extend(extra);
    mpirun(np, &args)
}

/// `replay` as threads on the memory backend (`-g N`): small buffers, and
/// the refusals a launch of N ranks finds.
fn replay_threads(np: usize, log: &str, csv: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = argv!["replay", log, "--steps 2 --warmup-steps 0 --csv", path_str(csv)];
    args.extend(extra);
    on_memory(np, &args)
}

#[test]
fn a_ddp_log_of_two_ranks_replays_call_by_call_at_two_ranks() {
    // own-2.21-ddp-gpt2-2ranks.log (written for the tests, see the
    // fixtures' README): rank 0's broadcast of GPT-2's parameters, then
    // its 7 bfloat16 gradient all-reduces
    let (_dir, path) = temp_file("r.csv");
    // one step, unchecked: the sequence is this test's; the check of a
    // replay is tests/it/corpus.rs's
    let out = ok(replay(
        2,
        &fixture("own-2.21-ddp-gpt2-2ranks.log"),
        &path,
        &["--steps", "1", "-c", "0"],
    ));
    let csv = Csv::read(&path);
    let mut want = vec![op("broadcast", 124_439_808, "world", 2, "log")];
    want.push(op("all_reduce", 2_361_600, "world", 2, "log"));
    want.extend((0..5).map(|_| op("all_reduce", 14_175_744, "world", 2, "log")));
    want.push(op("all_reduce", 51_199_488, "world", 2, "log"));
    assert_eq!(ops(&csv, "replay"), want);
    assert!(csv.rows.iter().all(|r| csv.get(r, "rescaled") == "false"));
    let text = stdout(&out);
    assert!(text.contains("top 8 operations by time"), "{text}");
    assert!(text.contains("NCCL 2.21.5"), "{text}");
}

#[test]
fn a_tensor_and_data_parallel_log_replays_on_its_own_groups_at_four_ranks() {
    // own-2.23-tp2-dp2-4ranks.log: rank 0 all-reduces twice on its tp
    // communicator {0,1}, once on its dp communicator {0,2}, once on all
    let (_dir, path) = temp_file("r.csv");
    ok(replay(4, &fixture("own-2.23-tp2-dp2-4ranks.log"), &path, &[]));
    let csv = Csv::read(&path);
    let (tp, dp) = ("blocks of 2", "every 2nd rank in blocks of 4");
    assert_eq!(
        ops(&csv, "replay"),
        vec![
            op("all_reduce", 2_097_152, tp, 2, "log"),
            op("all_reduce", 2_097_152, tp, 2, "log"),
            op("all_reduce", 13_107_200, dp, 2, "log"),
            op("all_reduce", 1, "world", 4, "log"),
        ]
    );
}

#[test]
fn a_larger_job_replays_rescaled_and_says_so() {
    // nccl-1193-ray-128ranks.log: NVIDIA/nccl#1193, a 128-rank job
    let (_dir, path) = temp_file("r.csv");
    let out = ok(replay(2, &fixture("nccl-1193-ray-128ranks.log"), &path, &["--rescale"]));
    assert_stdout_has(&out, "# rescaled: ");
    // its one call, in the singular, here and in --check-only
    assert_stdout_has(&out, ": 1 call of ");
    let check = collbench(&["replay", &fixture("nccl-1193-ray-128ranks.log"), "--check-only"]);
    assert_eq!(code(&check), 0, "{}", stderr(&check));
    assert!(stdout(&check).contains("device 2): 1 call\n"), "{}", stdout(&check));
    let csv = Csv::read(&path);
    assert!(!csv.rows.is_empty());
    assert!(csv.rows.iter().all(|r| csv.get(r, "rescaled") == "true"));
    // torchtitan-1369-tp2.log (pytorch/torchtitan#1369): no INIT lines,
    // the first process kept: reduce_scatter and all_gather of fp32
    ok(replay(2, &fixture("torchtitan-1369-tp2.log"), &path, &["--overwrite"]));
    let kinds: Vec<String> = ops(&Csv::read(&path), "replay").into_iter().map(|o| o.0).collect();
    assert_eq!(kinds, ["reduce_scatter", "all_gather", "reduce_scatter", "all_gather"]);
}

#[test]
fn a_gzip_log_replays_as_its_text_and_a_last_line_cut_short_replays_the_calls_before_it() {
    use std::io::Write;
    let dir = tempdir();
    let text = std::fs::read_to_string(fixture("own-2.21-ddp-gpt2-2ranks.log")).unwrap();
    let gz = dir.path().join("ddp.log.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(text.as_bytes()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    let csv = dir.path().join("gz.csv");
    ok(replay(2, path_str(&gz), &csv, &[]));
    let whole = ops(&Csv::read(&csv), "replay");
    assert_eq!(whole.len(), 8);
    // the job killed while rank 0 wrote its last line (line 20): the
    // seven calls before it replay, and the header names the line
    let lines: Vec<&str> = text.lines().collect();
    let cut = format!("{}\n{}", lines[..19].join("\n"), &lines[19][..120]);
    let log = dir.path().join("cut.log");
    std::fs::write(&log, cut).unwrap();
    let csv = dir.path().join("cut.csv");
    let out = ok(replay(2, path_str(&log), &csv, &[]));
    assert_stdout_has(&out, "line 20, rank 0's last call line, is cut short");
    assert_eq!(ops(&Csv::read(&csv), "replay"), whole[..7]);
}

/// One line on stderr from collbench, exit 2, and nothing hung.
fn refused(out: &std::process::Output, needle: &str) {
    assert_eq!(code(out), 2, "{needle}: {}", stderr(out));
    let lines = our_lines(out);
    assert_eq!(lines.len(), 1, "{needle}: {}", stderr(out));
    assert!(lines[0].contains(needle), "{needle}: {}", lines[0]);
    assert!(!stderr(out).contains("panicked"));
}

#[test]
fn logs_this_launch_cannot_replay_get_one_line_and_exit_2() {
    let (dir, csv) = temp_file("r.csv");
    let out = replay_threads(2, &fixture("own-2.23-tp2-dp2-4ranks.log"), &csv, &[]);
    refused(&out, "the logged job has 4 ranks and this launch 2");
    let out = replay_threads(2, &fixture("cupy-9090-init-2.15.log"), &csv, &[]);
    refused(&out, "the log has no collective calls");
    // rank 0's tp communicator without its INIT line
    let text = std::fs::read_to_string(fixture("own-2.23-tp2-dp2-4ranks.log")).unwrap();
    let cut: String = text
        .lines()
        .filter(|l| !l.contains("comm 0x5600aa000100 rank 0 nranks 2"))
        .map(|l| format!("{l}\n"))
        .collect();
    let log = dir.path().join("cut.log");
    std::fs::write(&log, cut).unwrap();
    let out = replay_threads(4, path_str(&log), &csv, &[]);
    refused(&out, "0x5600aa000100");
    // datatype 12 does not exist in NCCL 2.21
    let text = std::fs::read_to_string(fixture("own-2.21-ddp-gpt2-2ranks.log")).unwrap();
    let log = dir.path().join("dtype.log");
    std::fs::write(
        &log,
        text.replace("count 2361600 datatype 9", "count 2361600 datatype 12"),
    )
    .unwrap();
    let out = replay_threads(2, path_str(&log), &csv, &[]);
    refused(&out, "unknown datatype 12");
    let out = replay_threads(2, path_str(&dir.path().join("missing.log")), &csv, &[]);
    refused(&out, "cannot read");
}

/// Megatron's MoE and 1F1B pipeline at 3 ranks (not a power of two) on a
/// plain model of 3 layers, hidden 16, 3 experts, top-2, 6 tokens
/// (`--seq-len 6`): by docs/workload.md each layer is 100000 parameters,
/// q, k, v, o of 16^2 and a router of 3 x 16 dense (1072), the rest experts.
#[test]
fn moe_and_pp_issue_the_hand_computed_sequence_at_three_ranks() {
    let (_dir, csv) = temp_file("m.csv");
    let args = argv![
        "workload --params 300K --layers 3 --hidden 16 --experts 3 --seq-len 6 --micro-batches 3 --strategy moe,pp --steps 1 --warmup-steps 0 --csv",
        path_str(&csv)
    ];
    let out = on_memory(3, &args);
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    assert_stdout_has(&out, "moe: 22 operations per step on 3 ranks, ep 3");
    assert!(stdout(&out).contains("pp: 6 operations per step on 3 ranks, 3 pipeline stages"));
    let csv = Csv::read(&csv);
    // ep = 3 (the default: 3 ranks, 3 experts): 6 tokens x top-2 / 3 = 4
    // rows to each peer, x hidden 16 = 64 elements
    let (f, b) = ("forward", "backward");
    let mut want = Vec::new();
    for _ in 0..3 {
        want.push(op("all_gather", 3, "ep", 3, f));
        want.extend([
            op("alltoall", 64, "ep", 3, f),
            op("alltoall", 4, "ep", 3, f),
            op("alltoall", 64, "ep", 3, f),
        ]);
    }
    for _ in 0..3 {
        want.extend([
            op("alltoall", 64, "ep", 3, b),
            op("alltoall", 4, "ep", 3, b),
            op("alltoall", 64, "ep", 3, b),
        ]);
    }
    // the dense gradients, 3 x 1072 floats (Megatron: fp32 for bf16), one
    // bucket; each expert on one rank: no expert-dp reduction
    want.push(op("all_reduce", 3216, "world", 3, b));
    assert_eq!(ops(&csv, "moe"), want);
    let dtypes: Vec<&str> = csv
        .rows
        .iter()
        .filter(|r| csv.get(r, "kind") == "op" && csv.get(r, "workload") == "moe")
        .map(|r| csv.get(r, "dtype"))
        .collect();
    // token counts in int64, tokens and probabilities in bf16, gradients
    // in float
    let gather = |i: usize| i < 12 && i.is_multiple_of(4);
    for (i, t) in dtypes.iter().enumerate() {
        let want = match i {
            21 => "float",
            i if gather(i) => "int64",
            _ => "bfloat16",
        };
        assert_eq!(*t, want, "op {}: {dtypes:?}", i + 1);
    }
    // 3 stages, 3 micro-batches of 6 x 16 = 96 activations: 1F1B at the
    // stage boundaries F1 F2 F3 B1 B2 B3; one rank per stage, no gradients
    let sr = |p| op("sendrecv", 96, "pp", 3, p);
    assert_eq!(ops(&csv, "pp"), vec![sr(f), sr(f), sr(f), sr(b), sr(b), sr(b)]);
    for name in ["moe", "pp"] {
        for r in steps(&csv, name) {
            assert_eq!(csv.get(&r, "wrong"), "0", "{name}");
        }
    }
}

/// What the launch decides: the nodes, the largest buffer of MPI, an
/// output file that exists. (What the command line alone decides is
/// tests/it/option_errors.rs's, in this process.)
#[test]
fn bad_workload_options_get_one_line_and_exit_2_on_every_rank() {
    let dir = tempdir();
    let (out, _) = workload(2, dir.path(), "w.csv", &["--ranks-per-node", "3"]);
    refused(&out, "--ranks-per-node 3 does not divide the 2 ranks");
    // a weight matrix of 4e10 elements: beyond MPI's int counts, on every rank
    let out = mpirun(2, &["workload", "--backend", "mpi", "--params", "1T", "--layers", "2"]);
    refused(&out, "larger than the mpi backend's largest buffer");
    let (out, path) = workload(1, dir.path(), "exists.csv", &[]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let (out, _) = workload(2, dir.path(), "exists.csv", &[]);
    refused(&out, &format!("{} exists", path.display()));
}

#[test]
fn a_send_two_ranks_ahead_replays_as_a_shifted_exchange_at_four_ranks() {
    // Written for this test in the format of own-2.26-fp8-premul-p2p-rank0.log
    // (NCCL 2.26's Send/Recv lines, `root` is the peer): rank 0 of 4 sends
    // to rank 2 and receives from it, one exchange shifted by 2, validated
    // on every rank (rank r receives what rank r-2 sent)
    let log = "gpu-b:7300:7300 [0] NCCL INFO NCCL version 2.26.2+cuda12.8\n\
gpu-b:7300:7345 [0] NCCL INFO ncclCommInitRankConfig comm 0x55e0c0de0000 rank 0 nranks 4 cudaDev 0 nvmlDev 0 busId 4000 commId 0x7a8b - Init COMPLETE\n\
gpu-b:7300:7300 [0] NCCL INFO Send: opCount 2 sendbuff 0x7f1040000000 recvbuff (nil) count 65536 datatype 7 op 0 root 2 comm 0x55e0c0de0000 [nranks=4] stream 0x55e0c1000000\n\
gpu-b:7300:7300 [0] NCCL INFO Recv: opCount 2 sendbuff (nil) recvbuff 0x7f1050000000 count 65536 datatype 7 op 0 root 2 comm 0x55e0c0de0000 [nranks=4] stream 0x55e0c1000000\n";
    let (dir, path) = temp_file("p2p.log");
    std::fs::write(&path, log).unwrap();
    let csv = dir.path().join("r.csv");
    ok(replay_threads(4, path_str(&path), &csv, &[]));
    let csv = Csv::read(&csv);
    assert_eq!(ops(&csv, "replay"), vec![op("sendrecv", 65_536, "world", 4, "log")]);
    assert!(steps(&csv, "replay").iter().all(|r| csv.get(r, "wrong") == "0"));
    // and a corrupted element of it is found
    exits(
        3,
        replay_threads(4, path_str(&path), &dir.path().join("bad.csv"), &["--inject-error"]),
    );
}

#[test]
fn sigterm_stops_a_workload_between_steps_keeping_what_was_timed() {
    let (_dir, csv_path) = temp_file("term.csv");
    let mut args = vec!["workload", "--backend", "mpi", "--csv", path_str(&csv_path)];
    args.extend(&words(MODEL)[..10]);
    args.extend(["--strategy", "ddp,fsdp", "--steps", "100000", "--warmup-steps", "0"]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, std::time::Duration::from_secs(120));
    // the configurations' steps run in turn, and take far longer than
    // this: let some of them be timed (a delay, not a timing assertion)
    std::thread::sleep(std::time::Duration::from_secs(5));
    for pid in &pids {
        signal(*pid, "TERM");
    }
    let (code, lines) = job.finish(std::time::Duration::from_secs(120));
    assert_eq!(code, 143, "{lines:?}");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("stopped by SIGTERM"), "{lines:?}");
    assert!(lines[0].contains("timed step(s) of every configuration"), "{lines:?}");
    // what was timed is kept: the same number of steps of each
    let csv = Csv::read(&csv_path);
    let (ddp, fsdp) = (steps(&csv, "ddp").len(), steps(&csv, "fsdp").len());
    assert!(ddp > 0 && ddp < 100_000, "{ddp}");
    assert_eq!(ddp, fsdp);
}

/// A peer that stops answering trips rank 0's watchdog (exit 5): the
/// steps timed before it are reported, whole rounds of each configuration,
/// although the step in flight never ends (docs/exit-codes.md).
#[test]
fn a_stopped_peer_times_out_and_rank_0_reports_the_steps_timed_before() {
    let (_dir, csv_path) = temp_file("hang.csv");
    let mut args = vec![
        "workload",
        "--backend",
        "mpi",
        "--csv",
        path_str(&csv_path),
        "--timeout",
        "3",
    ];
    args.extend(&words(MODEL)[..10]);
    args.extend(["--strategy", "ddp,fsdp", "--steps", "100000", "--warmup-steps", "0"]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, std::time::Duration::from_secs(120));
    // let some steps be timed (a delay, not a timing assertion)
    std::thread::sleep(std::time::Duration::from_secs(5));
    signal(pids[1], "STOP");
    let (code, lines) = job.finish(std::time::Duration::from_secs(120));
    let _ = std::process::Command::new("kill")
        .args(["-CONT", &pids[1].to_string()])
        .status();
    assert_eq!(code, 5, "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("timeout")), "{lines:?}");
    let csv = Csv::read(&csv_path);
    let (ddp, fsdp) = (steps(&csv, "ddp").len(), steps(&csv, "fsdp").len());
    assert!(ddp > 0 && ddp < 100_000, "{ddp}");
    assert_eq!(ddp, fsdp);
}

/// A signal during the warm-up stops the ranks before the next warm-up
/// step, not after the last: nothing was timed, and that is said.
#[test]
fn a_signal_during_the_warm_up_stops_the_workload_at_once() {
    let (_dir, csv_path) = temp_file("warm.csv");
    // steps of 200 MB: a thousand warm-ups take minutes
    let mut args = vec!["workload", "--backend", "mpi", "--csv", path_str(&csv_path)];
    args.extend(["--params", "50M", "--layers", "2", "--param-dtype", "float"]);
    args.extend(["--strategy", "ddp", "--steps", "10", "--warmup-steps", "1000"]);
    let job = spawn_mpirun(2, &args);
    let pids = job.rank_pids(2, std::time::Duration::from_secs(120));
    std::thread::sleep(std::time::Duration::from_secs(3));
    for pid in &pids {
        signal(*pid, "INT");
    }
    let (code, lines) = job.finish(std::time::Duration::from_secs(60));
    assert_eq!(code, 130, "{lines:?}");
    assert_eq!(
        lines,
        ["collbench: stopped by SIGINT before any step was timed; there is nothing to report"]
    );
    assert!(steps(&Csv::read(&csv_path), "ddp").is_empty());
}

/// Before measuring, the header says what each configuration's step
/// moves (the same figure as its block's volume); with --progress under a
/// launcher, plain lines count the configurations checked and the warm-up
/// and timed steps, and say what is left.
#[test]
fn the_header_gives_each_step_s_volume_and_progress_counts_the_steps() {
    let dir = tempdir();
    let (out, _) = workload(2, dir.path(), "progress.csv", &argv!["--strategy ddp,fsdp --progress"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let text = stdout(&out);
    for name in ["ddp", "fsdp"] {
        let said = text
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("# {name}: ")))
            .find_map(|l| l.strip_suffix(" sent by each rank per step (first principles)"))
            .and_then(|l| l.split(", ").nth(1))
            .unwrap_or_else(|| panic!("no volume line for {name}:\n{text}"));
        let block = text
            .lines()
            .skip_while(|l| !l.starts_with(&format!("{name}: ")))
            .find_map(|l| l.trim_start().strip_prefix("volume"))
            .unwrap_or_else(|| panic!("no block volume for {name}:\n{text}"));
        assert!(
            block.trim_start().starts_with(&format!("{said} sent by each rank")),
            "{said} vs {block}"
        );
    }
    let progress: Vec<String> = stderr(&out)
        .lines()
        .filter(|l| l.starts_with("collbench workload: progress "))
        .map(str::to_string)
        .collect();
    // 2 configurations x (1 check + no warm-up + 2 steps)
    assert!(
        progress
            .last()
            .is_some_and(|l| l.starts_with("collbench workload: progress 6/6 steps (100%)")),
        "{progress:?}"
    );
    assert!(
        progress
            .iter()
            .any(|l| l.contains("; last checked the operations of configuration 1")),
        "{progress:?}"
    );
}
