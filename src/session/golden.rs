//! Golden outputs: fixed runs on the in-memory backend, every rank on a
//! virtual clock (so every time is exact), whose CSV, JSON and terminal
//! text are compared byte for byte with tests/fixtures/golden/. They pin
//! what a run prints and writes, so that a change meant to move code
//! proves it changed no output. `COLLBENCH_BLESS=1` rewrites the files.
//!
//! The sweep goes through the engine and rank 0's `Reporter` with the CSV,
//! JSON and table sinks, as `Session::sweep` drives them; the workload and
//! replay go through the same steps as `Session::run_job` (configurations,
//! groups, calls, buffers, steps, figures, report, CSV). What a real launch
//! adds around them (hosts, pids, time stamps) is fixed or masked here.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::backend::memory::{Launched, MemoryBackend};
use crate::backend::{Backend, LaunchExtras};
use crate::clock::{Clock, VirtualClock};
use crate::collective::Collective;
use crate::engine::policy::Iterations;
use crate::engine::precision::PrecisionGoal;
use crate::engine::{Context, Engine, RunContext, Timing};
use crate::plan::{Plan, PlanConfig, SizeSweep, Step};
use crate::report::csv::CsvSink;
use crate::report::json::JsonSink;
use crate::report::progress::Progress;
use crate::report::table::TableSink;
use crate::report::{RankSummary, Reporter, RunInfo, Sink, SweepInfo};
use crate::topology::profile::Profile;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{Average, BackendKind, Choice, DType, ProgressMode, ReduceOp, RootChoice};
use crate::world::World;
use crate::world::threads::ThreadWorld;

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/golden")
}

/// `got` against the golden file `name`; `COLLBENCH_BLESS=1` writes it.
fn check_golden(name: &str, got: &str) {
    let path = golden_dir().join(name);
    if std::env::var_os("COLLBENCH_BLESS").is_some() {
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; COLLBENCH_BLESS=1 writes it", path.display()));
    if got != want {
        let diff = got
            .lines()
            .zip(want.lines())
            .enumerate()
            .find(|(_, (g, w))| g != w)
            .map(|(i, (g, w))| format!("line {}:\n  got  {g}\n  want {w}", i + 1))
            .unwrap_or_else(|| format!("{} lines against {}", got.lines().count(), want.lines().count()));
        panic!("{} differs from this run's output: {diff}", path.display());
    }
}

/// A `Write` whose bytes the test reads back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// What an operation takes on the virtual clock: its size, a jitter that
/// follows the operation's number, and a little more on the last rank.
fn delay(rank: usize, nranks: usize, op: &Launched) -> Duration {
    let bytes = (op.call.shape.send.max(op.call.shape.recv) * op.call.dtype.size_bytes()) as u64;
    let jitter = (op.seq * 7919) % 13;
    let slow = if rank + 1 == nranks { 2 } else { 0 };
    Duration::from_nanos(40_000 + bytes * 3 + jitter * 1_000 + slow * 1_000)
}

/// The CSV with its `timestamp` column (the only wall-clock value) masked.
fn masked_csv(text: &str) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut fields: Vec<&str> = line.split(',').collect();
        if i > 0 && fields.len() > 1 {
            fields[1] = "TIMESTAMP";
        }
        out += &fields.join(",");
        out.push('\n');
    }
    out
}

/// The JSON with every `"timestamp": "..."` masked.
fn masked_json(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find("\"timestamp\":") {
        let (head, tail) = rest.split_at(at + "\"timestamp\":".len());
        out += head;
        let value_start = tail.find('"').unwrap_or(0);
        let value_end = tail[value_start + 1..]
            .find('"')
            .map_or(tail.len(), |e| value_start + 2 + e);
        out += &tail[..value_start];
        out += "\"TIMESTAMP\"";
        rest = &tail[value_end..];
    }
    out + rest
}

/// The sweep's timing as `Session::sweep` settles it on the memory
/// backend: neither --rotate nor --no-rotate, so the backend's method.
fn sweep_timing() -> Timing {
    let asked = Timing {
        iterations: Iterations::Precision(PrecisionGoal {
            target_pct: 5.0,
            cap: Duration::from_millis(2),
        }),
        per_iter: true,
        straggler_threshold_pct: 10.0,
        rotate: false,
        rotate_asked: None,
        warmup: 2,
        check: 1,
        average: Average::Avg,
        blocking: false,
        agg_iters: 1,
        cuda_graph: 0,
        register: crate::types::Register::Off,
        phase_times: false,
        algo_record: Default::default(),
        algo_pins: Vec::new(),
        cycles: 2,
        timeout: None,
    };
    asked.for_backend(BackendKind::Memory)
}

fn sweep_config() -> PlanConfig {
    PlanConfig {
        sweep: SizeSweep::new(8, 4096, Step::Factor(8)).unwrap(),
        collectives: Collective::ALL.to_vec(),
        dtypes: Choice::List(vec![DType::Float, DType::Int32]),
        ops: Choice::List(vec![ReduceOp::Sum, ReduceOp::Max]),
        roots: RootChoice::Rank(1),
        hierarchies: crate::types::Choice::one(Hierarchy::Flat),
        ranks_per_node: None,
        split: None,
        traffic: Default::default(),
    }
}

fn run_info(plan: &Plan, timing: &Timing, nranks: usize) -> RunInfo {
    let sizes: std::collections::BTreeSet<u64> = plan.cases.iter().map(|c| c.size_bytes()).collect();
    RunInfo {
        run_id: "golden".into(),
        collbench_version: env!("CARGO_PKG_VERSION").into(),
        started: "2026-01-01T00:00:00Z".into(),
        command_line: vec!["collbench".into(), "run".into(), "--golden".into()],
        backend: BackendKind::Memory,
        backend_version: crate::backend::memory::in_one_process(nranks),
        backend_note: None,
        control_plane: "threads".into(),
        nranks,
        nnodes: 1,
        ranks_per_node: nranks,
        hosts: vec!["golden-host".into()],
        virtual_nodes: false,
        ranks: (0..nranks)
            .map(|rank| RankSummary {
                rank,
                host: "golden-host".into(),
                pid: 1,
                gpu: None,
            })
            .collect(),
        timing: timing.clone(),
        transport: Profile::Auto,
        transport_observed: "none".into(),
        transport_notes: Vec::new(),
        hierarchy: "flat".into(),
        points: plan.points(),
        sweep: SweepInfo {
            min_bytes: sizes.first().copied().unwrap_or(0),
            max_bytes: sizes.last().copied().unwrap_or(0),
            requested_min_bytes: 8,
            requested_max_bytes: 4096,
            step: Step::Factor(8),
            sizes: sizes.len(),
        },
        csv: PathBuf::from("golden.csv"),
        json: Some(PathBuf::from("golden.json")),
        label: Some("golden".into()),
        traffic: Some(super::outputs::traffic_text(Default::default(), nranks)),
        timestamps: false,
        notes: Vec::new(),
        nccl_log: None,
        nccl_log_lines: Vec::new(),
    }
}

/// A sweep of every collective on 3 ranks (float and int32, sum and max,
/// root 1, 8 B to 4 KiB by 8), two samples per point, per-iteration
/// statistics, the precision policy: its CSV, JSON and table.
#[test]
fn a_sweep_on_the_memory_backend_writes_the_golden_csv_json_and_table() {
    const N: usize = 3;
    let dir = tempfile::tempdir().unwrap();
    let (csv_path, json_path) = (dir.path().join("golden.csv"), dir.path().join("golden.json"));
    let timing = sweep_timing();
    let hosts = vec!["golden-host".to_string(); N];
    let nodes = Nodes::from_keys(&hosts, &hosts);
    let worlds = ThreadWorld::create(N);
    let backends = MemoryBackend::create(N).unwrap();
    let caps = backends[0].capabilities(&LaunchExtras::default());
    let plan = Plan::build(&sweep_config(), &caps, &nodes).unwrap();
    let info = run_info(&plan, &timing, N);
    let table = Shared::default();
    let ctx = RunContext {
        run_id: "golden".into(),
        host: "golden-host".into(),
        backend: BackendKind::Memory,
        backend_version: crate::backend::memory::in_one_process(N),
        transport: Profile::Auto,
        transport_observed: "none".into(),
        nnodes: 1,
        ranks_per_node: N,
        label: Some("golden".into()),
    };
    std::thread::scope(|s| {
        for (rank, (world, backend)) in worlds.iter().zip(backends).enumerate() {
            let (plan, timing, ctx, info, table) = (&plan, &timing, &ctx, &info, &table);
            let (csv_path, json_path) = (&csv_path, &json_path);
            s.spawn(move || {
                let clock = VirtualClock::new();
                let mut backend = backend
                    .with_clock(clock.clone())
                    .with_delay(move |op: &Launched| delay(rank, N, op));
                backend.reserve(&plan.reservation(timing.rotate)).unwrap();
                let mut reporter = (world.rank() == 0).then(|| {
                    let extras = crate::record::Extras {
                        per_iter: true,
                        phases: false,
                        label: true,
                        traffic: false,
                        group: false,
                        algo: false,
                    };
                    let sinks: Vec<Box<dyn Sink>> = vec![
                        Box::new(CsvSink::create(csv_path, false, extras).unwrap()),
                        Box::new(JsonSink::create(json_path, false).unwrap()),
                        Box::new(TableSink::new(Box::new(table.clone()), None)),
                    ];
                    let progress = Progress::new(ProgressMode::Never, None, false, "collbench");
                    Reporter::new(sinks, progress, None)
                });
                if let Some(rep) = reporter.as_mut() {
                    rep.begin(info).unwrap();
                }
                let cx = Context::new(world, &mut backend).with_clock(Clock::Virtual(clock));
                let summary = Engine::new(cx, timing, ctx)
                    .run(plan, |r| match reporter.as_mut() {
                        Some(rep) => rep.record(r),
                        None => Ok(()),
                    })
                    .unwrap();
                if let Some(rep) = reporter.as_mut() {
                    rep.finish(info, &summary).unwrap();
                }
            });
        }
    });
    check_golden("sweep.csv", &masked_csv(&std::fs::read_to_string(&csv_path).unwrap()));
    check_golden(
        "sweep.json",
        &masked_json(&std::fs::read_to_string(&json_path).unwrap()),
    );
    check_golden("sweep-table.txt", &table.text());
}

/// What a workload or replay printed and wrote on rank 0.
struct JobOutput {
    text: String,
    csv: String,
}

/// Runs `argv` (a `collbench workload` or `replay` command line) on
/// `nranks` rank threads of `per_node` ranks per node, through the steps
/// `Session::run_job` takes, on memory backends with virtual clocks.
fn run_job_on_memory(argv: &[&str], nranks: usize, per_node: usize) -> JobOutput {
    use super::workload::{configs, split};
    use crate::cli::{Command, parse_cli};
    use crate::engine::steps::StepRunner;
    use crate::report::workload::{self as report, Outcome, WorkloadCsv};
    use crate::workload::plan::WorkloadPlan;

    let dir = tempfile::tempdir().unwrap();
    let csv_path = dir.path().join("job.csv");
    let mut args: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
    args.extend(["--csv".to_string(), csv_path.display().to_string()]);
    let (job, cfg) = match parse_cli(args).unwrap().command {
        Command::Workload(a) => super::Job::workload(&a).unwrap(),
        Command::Replay(a) => super::Job::replay(&a).unwrap(),
        _ => panic!("not a workload or replay command line"),
    };
    let hosts = vec!["golden-host".to_string(); nranks];
    let nodes = Nodes::consecutive(per_node, &hosts).unwrap();
    let worlds = ThreadWorld::create(nranks);
    let backends = MemoryBackend::create(nranks).unwrap();
    let text = Shared::default();
    std::thread::scope(|s| {
        for (rank, (world, backend)) in worlds.iter().zip(backends).enumerate() {
            let (job, cfg, nodes, text, csv_path) = (&job, &cfg, &nodes, &text, &csv_path);
            s.spawn(move || {
                let clock = VirtualClock::new();
                let mut backend = backend
                    .with_clock(clock.clone())
                    .with_delay(move |op: &Launched| delay(rank, nranks, op));
                let caps = backend.capabilities(&cfg.timing.extras());
                let configs = configs(job, nodes).unwrap();
                let plan = WorkloadPlan::new(&configs, &caps, rank).unwrap();
                let groups = split(&mut backend, &plan.splits).unwrap();
                backend.reserve(&plan.reservation).unwrap();
                let first = rank == 0;
                let version = backend.identity().version;
                let mut csv = first.then(|| WorkloadCsv::create(csv_path, false).unwrap());
                let mut out = String::new();
                if first {
                    let mut lines = job.header();
                    lines.push(format!("backend {version}, {nranks} ranks, {per_node} per node"));
                    lines.extend(plan.notes.iter().cloned());
                    lines.extend(configs.iter().filter_map(|c| report::volume_line(c).ok()));
                    out += &report::header(job.top().is_some(), &lines);
                }
                let mut outcomes = Vec::new();
                let calls: Vec<Vec<_>> = (0..configs.len()).map(|i| plan.calls(i, &groups)).collect();
                let mut runner = StepRunner {
                    cx: Context::new(world, &mut backend).with_clock(Clock::Virtual(clock.clone())),
                    timed: Default::default(),
                    progress: None,
                };
                let (all_steps, _) = runner.run_all(&calls, &job.timing).unwrap();
                for ((config, calls), steps) in configs.iter().zip(&calls).zip(all_steps) {
                    if let Some(steps) = steps {
                        let ran: Vec<_> = calls.iter().map(|c| (c.dtype, c.shape.count as u64)).collect();
                        let o = Outcome::of(config, &ran, steps).unwrap();
                        out += &report::one(&o, job.top());
                        if let Some(w) = csv.as_mut() {
                            w.write(&o, &version, job.rescaled()).unwrap();
                        }
                        outcomes.push(o);
                    }
                }
                if first {
                    if outcomes.len() > 1 {
                        out += &report::side_by_side(&outcomes);
                    }
                    text.0.lock().unwrap().extend_from_slice(out.as_bytes());
                }
            });
        }
    });
    JobOutput {
        text: text.text(),
        csv: std::fs::read_to_string(&csv_path).unwrap(),
    }
}

/// Every strategy of a small plain model on 4 ranks, 2 per node, tp 2,
/// two DDP bucket sizes.
#[test]
fn a_workload_on_the_memory_backend_prints_and_writes_the_golden_report() {
    let out = run_job_on_memory(
        &[
            "collbench",
            "workload",
            "--params",
            "100K",
            "--layers",
            "2",
            "--hidden",
            "32",
            "--vocab",
            "128",
            "--strategy",
            "all",
            "--tp",
            "2",
            "--bucket",
            "16K,64K",
            "--steps",
            "6",
            "--ranks-per-node",
            "2",
        ],
        4,
        2,
    );
    check_golden("workload.txt", &out.text);
    check_golden("workload.csv", &out.csv);
    // every block's breakdown adds up: the collectives' shares make 100%,
    // and the collectives' time and the overhead make the mean step
    // the first time on a line (`1.54 ms`), in microseconds
    let time_of = |l: &str| -> f64 {
        let words: Vec<&str> = l.split_whitespace().collect();
        (0..words.len() - 1)
            .find_map(|i| {
                let scale = match words[i + 1] {
                    "us" => 1.0,
                    "ms" => 1e3,
                    "s" => 1e6,
                    _ => return None,
                };
                words[i].parse::<f64>().ok().map(|v| v * scale)
            })
            .unwrap()
    };
    let mut blocks = 0;
    for block in out.text.split("\n\n").filter(|b| b.contains("step overhead")) {
        let line = |name: &str| {
            block
                .lines()
                .find(|l| l.trim_start().starts_with(name))
                .unwrap()
                .to_string()
        };
        let (ops, overhead, step) = (line("collectives"), line("step overhead"), line("step (mean)"));
        assert!(
            (time_of(&ops) + time_of(&overhead) - time_of(&step)).abs() <= 0.06 * time_of(&step),
            "{block}"
        );
        let by_collective = block
            .split("by collective")
            .nth(1)
            .unwrap()
            .split("by message size")
            .next()
            .unwrap();
        let shares: f64 = by_collective
            .lines()
            .skip(1)
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                l.split_whitespace()
                    .nth(6)
                    .unwrap()
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .unwrap()
            })
            .sum();
        assert!((shares - 100.0).abs() <= 1.5, "{shares}: {block}");
        blocks += 1;
    }
    // every configuration's block has its breakdown
    assert_eq!(blocks, out.text.matches("operations per step on").count());
    assert!(blocks >= 12, "{blocks}");
    // x best: 6 steps a side give one pair an interval, not 91 pairs
    // together (report::workload's tests hold the verdicts themselves)
    let view = out.text.split("side by side").nth(1).unwrap();
    assert_eq!(view.matches("too few steps").count(), 13 + 1, "{view}");
    assert!(view.contains("(8 a side at the least for 14 configurations)"), "{view}");
}

/// A logged job of tensor- and data-parallel groups (tests/fixtures'
/// 2.23 log with smaller counts) and a send two ranks ahead, replayed at
/// its own size.
#[test]
fn a_replay_on_the_memory_backend_prints_and_writes_the_golden_report() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nccl-coll-logs/own-2.23-tp2-dp2-4ranks.log");
    let mut log = std::fs::read_to_string(fixture)
        .unwrap()
        .replace("count 2097152 ", "count 2048 ")
        .replace("count 13107200 ", "count 12800 ");
    log += "[rank0]:gpu-a:5200:5200 [0] NCCL INFO Send: opCount 4 sendbuff 0x7f0004000000 recvbuff (nil) count 256 datatype 7 op 0 root 2 comm 0x5600aa000000 [nranks=4] stream 0x5600ff000000\n\
[rank0]:gpu-a:5200:5200 [0] NCCL INFO Recv: opCount 4 sendbuff (nil) recvbuff 0x7f0005000000 count 256 datatype 7 op 0 root 2 comm 0x5600aa000000 [nranks=4] stream 0x5600ff000000\n";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tp2-dp2-p2p.log");
    std::fs::write(&path, log).unwrap();
    let shown = path.display().to_string();
    let out = run_job_on_memory(&["collbench", "replay", &shown, "--steps", "2", "--top", "5"], 4, 2);
    check_golden("replay.txt", &out.text.replace(&shown, "tp2-dp2-p2p.log"));
    check_golden("replay.csv", &out.csv);
}
