//! Launches without MPI (docs/launch.md): ranks started by a plain loop
//! with the environment of each launcher (torchrun, Slurm, a Kubernetes
//! Indexed Job) meet at the TCP store on rank 0, and run the NCCL backend
//! on the host GPU simulation with the rows mpirun gives; across fake
//! nodes; a workload; every fault of the start and of a run (a rank that
//! never starts, dies, disagrees on the size; the store's port in use; a
//! hung or failing rank); the MPI pre-flight; and the build without MPI,
//! started where libmpi cannot be loaded.
#![cfg(feature = "nccl")]

use std::collections::BTreeSet;
use std::path::Path;
#[cfg(feature = "mpi")]
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use crate::common::*;
use crate::gpu_sim::{assert_sim_rows, sim_dir, sim_env};

/// The environments a launcher gives its ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Torchrun,
    Slurm,
    K8s,
}

impl Kind {
    #[cfg(feature = "mpi")]
    fn name(self) -> &'static str {
        match self {
            Kind::Torchrun => "torchrun",
            Kind::Slurm => "slurm",
            Kind::K8s => "k8s",
        }
    }

    /// Rank `rank` of `size`, rank 0 listening on `host:port`.
    fn env(self, rank: usize, size: usize, host: &str, port: u16) -> Vec<(String, String)> {
        let v = |pairs: &[(&str, String)]| pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
        match self {
            Kind::Torchrun => v(&[
                ("RANK", rank.to_string()),
                ("WORLD_SIZE", size.to_string()),
                ("LOCAL_RANK", rank.to_string()),
                ("LOCAL_WORLD_SIZE", size.to_string()),
                ("MASTER_ADDR", host.to_string()),
                ("MASTER_PORT", port.to_string()),
                ("TORCHELASTIC_RUN_ID", format!("test-{port}")),
            ]),
            Kind::Slurm => v(&[
                ("SLURM_JOB_ID", port.to_string()),
                ("SLURM_STEP_ID", "0".into()),
                ("SLURM_PROCID", rank.to_string()),
                ("SLURM_NTASKS", size.to_string()),
                ("SLURM_STEP_NUM_TASKS", size.to_string()),
                ("SLURM_LOCALID", rank.to_string()),
                ("SLURM_STEP_NODELIST", host.to_string()),
                ("SLURM_STEP_RESV_PORTS", port.to_string()),
            ]),
            Kind::K8s => v(&[
                ("JOB_COMPLETION_INDEX", rank.to_string()),
                ("WORLD_SIZE", size.to_string()),
                ("COLLBENCH_STORE", format!("{host}:{port}")),
            ]),
        }
    }
}

/// A port nothing listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("0.0.0.0:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One rank: `program args` (collbench by default) with the simulation
/// of `devices` GPUs and the launcher's environment, nothing of another
/// launcher inherited.
fn rank_command(program: Command, sim: &Path, devices: usize, env: Vec<(String, String)>) -> Command {
    let mut cmd = program;
    for var in argv![
        "OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE PMIX_RANK SLURM_JOB_ID SLURM_STEP_ID SLURM_PROCID RANK WORLD_SIZE MASTER_ADDR JOB_COMPLETION_INDEX NCCL_HOME"
    ] {
        cmd.env_remove(var);
    }
    cmd.env("NO_COLOR", "1");
    cmd.envs(sim_env(sim, devices)).envs(env);
    cmd
}

/// The ranks of the tests' launches.
const SIZE: usize = 4;

/// `ranks` of the `SIZE` ranks of a `kind` launch of `collbench ARGS`
/// (rank 0 on `host`), each as `place` starts it (a plain process, or a
/// process of a fake node), with `extra(rank)` added; run to their ends.
fn store_job(
    sim: &Path,
    kind: Kind,
    (ranks, host): (&[usize], &str),
    extra: &dyn Fn(usize) -> Vec<(String, String)>,
    place: &dyn Fn(usize, &[&str]) -> Command,
    args: &[&str],
) -> Vec<Output> {
    let port = free_port();
    let cmds = ranks
        .iter()
        .map(|&rank| {
            let mut env = kind.env(rank, SIZE, host, port);
            env.extend(extra(rank));
            rank_command(place(rank, args), sim, SIZE, env)
        })
        .collect();
    run_all(cmds)
}

fn plain(_rank: usize, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    cmd
}

fn none(_rank: usize) -> Vec<(String, String)> {
    Vec::new()
}

/// The four ranks of a plain loop on this host.
fn four(sim: &Path, kind: Kind, extra: &dyn Fn(usize) -> Vec<(String, String)>, args: &[&str]) -> Vec<Output> {
    store_job(sim, kind, (&[0, 1, 2, 3], "127.0.0.1"), extra, &plain, args)
}

fn codes(outs: &[Output]) -> Vec<i32> {
    outs.iter().map(code).collect()
}

/// Every rank's collbench lines, rank by rank.
fn all_lines(outs: &[Output]) -> Vec<String> {
    outs.iter().flat_map(our_lines).collect()
}

fn show(outs: &[Output]) -> String {
    outs.iter()
        .enumerate()
        .map(|(r, o)| format!("rank {r} exit {}:\n{}", code(o), stderr(o)))
        .collect()
}

/// What identifies a row: the same points measured means the same keys.
#[cfg(feature = "mpi")]
fn keys(csv: &Csv) -> BTreeSet<Vec<String>> {
    row_keys(
        csv,
        "collective dtype op root placement size_bytes count nranks hierarchy",
    )
}

const SWEEP: &str = "run --backend nccl --collectives all -e 4K -f 8 -n 2 -w 1 --no-progress";

fn with_csv<'a>(base: &[&'a str], csv: &'a Path) -> Vec<&'a str> {
    let mut args = base.to_vec();
    args.extend(["--csv", path_str(csv)]);
    args
}

#[cfg(feature = "mpi")]
#[test]
fn each_launchers_environment_runs_4_ranks_on_the_gpu_simulation_with_the_rows_of_mpirun() {
    let Some(sim) = sim_dir() else { return };
    let (tmp, mpirun_csv) = temp_file("mpirun.csv");
    let env = sim_env(&sim, 4);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ok(mpirun_env(4, &env, &with_csv(&words(SWEEP), &mpirun_csv)));
    let want = keys(&Csv::read(&mpirun_csv));
    for kind in [Kind::Torchrun, Kind::Slurm, Kind::K8s] {
        let csv_path = tmp.path().join(format!("{}.csv", kind.name()));
        // rank 3 sees another NCCL_IB_HCA: rank 0 warns
        let hca = |rank: usize| match rank {
            3 => vec![("NCCL_IB_HCA".to_string(), "mlx5_9".to_string())],
            _ => Vec::new(),
        };
        let outs = four(&sim, kind, &hca, &with_csv(&words(SWEEP), &csv_path));
        assert_eq!(codes(&outs), [0, 0, 0, 0], "{kind:?}: {}", show(&outs));
        let header = stdout(&outs[0]);
        assert!(header.contains(&format!("launcher {}", kind.name())), "{header}");
        assert!(header.contains("control plane: TCP store at 127.0.0.1:"), "{header}");
        assert!(outs[1..].iter().all(|o| stdout(o).is_empty()));
        assert_eq!(
            all_lines(&outs),
            [
                "collbench: warning: the ranks see different NCCL_* variables, so NCCL may behave differently on them: \
              NCCL_IB_HCA is unset on ranks 0-2 and 'mlx5_9' on rank 3"
            ],
            "{kind:?}"
        );
        let csv = Csv::read(&csv_path);
        assert_sim_rows(&csv, 4);
        assert_eq!(keys(&csv), want, "{kind:?}: not the rows of mpirun");
    }
}

#[test]
fn ranks_on_two_fake_nodes_meet_at_the_store_and_run_the_hierarchical_modes_across_them() {
    let Some(sim) = sim_dir() else { return };
    if !crate::fake_nodes::available() {
        return;
    }
    let (_tmp, csv_path) = temp_file("nodes.csv");
    let node =
        |rank: usize, args: &[&str]| crate::fake_nodes::on(if rank < 2 { "cbnode7" } else { "cbnode8" }, BIN, args);
    let mut args = with_csv(&words(SWEEP), &csv_path);
    args[4] = "all_reduce,all_gather";
    args.extend(["--hierarchy", "all"]);
    let outs = store_job(&sim, Kind::Torchrun, (&[0, 1, 2, 3], "cbnode7"), &none, &node, &args);
    assert_eq!(codes(&outs), [0, 0, 0, 0], "{}", show(&outs));
    let header = stdout(&outs[0]);
    assert!(
        header.contains("4 on 2 nodes (2 per node), hosts: cbnode7, cbnode8"),
        "{header}"
    );
    assert!(header.contains("TCP store at cbnode7:"), "{header}");
    let csv = Csv::read(&csv_path);
    assert_sim_rows(&csv, 4);
    assert!(csv.rows.iter().all(|r| csv.get(r, "nnodes") == "2"));
    let modes: BTreeSet<&str> = csv.rows.iter().map(|r| csv.get(r, "hierarchy")).collect();
    assert_eq!(modes.len(), 3, "{modes:?}");
}

#[test]
fn a_workload_runs_over_the_store_and_wrong_results_end_every_rank_with_exit_3() {
    let Some(sim) = sim_dir() else { return };
    let (_tmp, csv_path) = temp_file("w.csv");
    let args =
        argv!["workload --backend nccl --params 1M --layers 2 --hidden 128 --vocab 1000 --strategy ddp,fsdp --steps 2"];
    let outs = four(&sim, Kind::Torchrun, &none, &with_csv(&args, &csv_path));
    assert_eq!(codes(&outs), [0, 0, 0, 0], "{}", show(&outs));
    let csv = Csv::read(&csv_path);
    let steps: Vec<_> = csv.rows.iter().filter(|r| csv.get(r, "kind") == "step").collect();
    assert!(!steps.is_empty() && steps.iter().all(|r| csv.get(r, "wrong") == "0"));
    let mut wrong = args.to_vec();
    wrong.push("--inject-error");
    let outs = four(&sim, Kind::Slurm, &none, &wrong);
    assert_eq!(codes(&outs), [3, 3, 3, 3], "{}", show(&outs));
    assert_eq!(all_lines(&outs).len(), 1, "{}", show(&outs));
}

#[test]
fn a_rank_that_never_starts_is_named_and_every_started_rank_exits_5() {
    let Some(sim) = sim_dir() else { return };
    let mut args = words(SWEEP);
    args.extend(["--timeout", "3", "--csv", "/dev/null/never.csv"]);
    let outs = store_job(&sim, Kind::Torchrun, (&[0, 1, 2], "127.0.0.1"), &none, &plain, &args);
    assert_eq!(codes(&outs), [5, 5, 5], "{}", show(&outs));
    let lines = all_lines(&outs);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("the launcher or control plane is broken: rank 3 never reached the store at 127.0.0.1:")
            && lines[0].contains("within 3 s")
            && lines[0].contains("NCCL was not started"),
        "{lines:?}"
    );
}

#[test]
fn a_rank_killed_mid_run_ends_every_rank_with_one_line_naming_it_and_the_rows_so_far_kept() {
    let Some(sim) = sim_dir() else { return };
    let tmp = tempdir();
    let (csv_path, json_path) = (tmp.path().join("k.csv"), tmp.path().join("k.json"));
    let port = free_port();
    let _slot = permit();
    let mut args = argv!["run --backend nccl -e 64K --cycles 0 --no-progress"];
    args.extend(["--csv", path_str(&csv_path), "--json", path_str(&json_path)]);
    let mut children: Vec<std::process::Child> = (0..4)
        .map(|rank| {
            let mut cmd = rank_command(
                plain(rank, &args),
                &sim,
                4,
                Kind::Torchrun.env(rank, 4, "127.0.0.1", port),
            );
            cmd.stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            cmd.spawn().expect("a rank")
        })
        .collect();
    // rows are being written: the run is under way
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while std::fs::read_to_string(&csv_path).map_or(0, |t| t.lines().count()) < 3 {
        assert!(std::time::Instant::now() < deadline, "hung: no rows");
        std::thread::sleep(Duration::from_millis(50));
    }
    signal(children[2].id(), "KILL");
    let mut lines = Vec::new();
    for (rank, child) in children.iter_mut().enumerate() {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("hung: rank {rank} did not end");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        lines.extend(err.lines().filter(|l| l.starts_with("collbench:")).map(str::to_string));
        if rank != 2 {
            assert_eq!(status.code(), Some(1), "rank {rank}: {err}");
        }
    }
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("rank 2 on ") && lines[0].contains("ended without finishing the run"),
        "{lines:?}"
    );
    let text = std::fs::read_to_string(&csv_path).unwrap();
    assert!(text.ends_with('\n'), "a row was cut");
    let rows = Csv::read(&csv_path).rows.len();
    // rank 0's reports were completed as a launcher's stop signal does
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json_path).unwrap()).unwrap();
    assert_eq!(doc["records"].as_array().unwrap().len(), rows);
    assert_eq!(doc["summary"]["complete"], false);
}

#[test]
fn a_world_size_that_differs_on_one_rank_is_refused_with_exit_2_and_one_line() {
    let Some(sim) = sim_dir() else { return };
    for (size, said) in [("5", "says 5 ranks"), ("3", "says 3 ranks")] {
        let other = |rank: usize| match rank {
            2 => vec![("WORLD_SIZE".to_string(), size.to_string())],
            _ => Vec::new(),
        };
        let mut args = words(SWEEP);
        args.extend(["--timeout", "30", "--csv", "/dev/null/never.csv"]);
        let outs = four(&sim, Kind::Torchrun, &other, &args);
        assert_eq!(codes(&outs), [2, 2, 2, 2], "{}", show(&outs));
        let lines = all_lines(&outs);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(
            lines[0].contains("ranks disagree on the size of the job: rank 2 on ")
                && lines[0].contains(said)
                && lines[0].contains("WORLD_SIZE differs between ranks"),
            "{lines:?}"
        );
    }
}

#[test]
fn a_store_port_in_use_stops_rank_0_with_one_line_and_no_rank_mistakes_the_holder_for_the_store() {
    let Some(sim) = sim_dir() else { return };
    let holder = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = holder.local_addr().unwrap().port();
    let mut args = words(SWEEP);
    args.extend(["--timeout", "3", "--csv", "/dev/null/never.csv"]);
    let cmds = (0..4)
        .map(|rank| rank_command(plain(rank, &args), &sim, 4, Kind::K8s.env(rank, 4, "127.0.0.1", port)))
        .collect();
    let outs = run_all(cmds);
    drop(holder);
    assert_eq!(codes(&outs), [1, 5, 5, 5], "{}", show(&outs));
    let zero = our_lines(&outs[0]);
    assert_eq!(zero.len(), 1, "{zero:?}");
    assert!(
        zero[0].contains(&format!("cannot listen on port {port}")) && zero[0].contains("the port is in use"),
        "{zero:?}"
    );
    for out in &outs[1..] {
        assert!(
            our_lines(out).iter().all(|l| l.contains("no answer from the store")),
            "{}",
            stderr(out)
        );
    }
}

#[test]
fn a_hung_rank_trips_the_watchdog_and_a_failed_call_ends_every_rank_with_its_line() {
    let Some(sim) = sim_dir() else { return };
    let (_tmp, csv_path) = temp_file("faults.csv");
    let base = argv![
        "run --backend nccl --collectives all_reduce -e 1K -n 2 --no-progress --overwrite --csv",
        path_str(&csv_path)
    ];
    let on_rank = |rank: usize, var: &str, value: &str| -> Vec<(String, String)> {
        if rank == 3 {
            vec![(var.to_string(), value.to_string())]
        } else {
            Vec::new()
        }
    };
    let hang = |rank: usize| on_rank(rank, "GPUSIM_NCCL_HANG", "3:3");
    let mut args = base.to_vec();
    args.extend(["--timeout", "2"]);
    let outs = four(&sim, Kind::Slurm, &hang, &args);
    assert_eq!(codes(&outs), [5, 5, 5, 5], "{}", show(&outs));
    let lines = all_lines(&outs);
    assert!(
        !lines.is_empty() && lines.iter().all(|l| l.contains("timeout")),
        "{lines:?}"
    );
    let fail = |rank: usize| on_rank(rank, "GPUSIM_NCCL_FAIL", "ncclAllReduce:3:2:3");
    let outs = four(&sim, Kind::Slurm, &fail, &base);
    assert_eq!(codes(&outs), [1, 1, 1, 1], "{}", show(&outs));
    let lines = all_lines(&outs);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("rank 3 on ") && lines[0].contains("ncclAllReduce failed"),
        "{lines:?}"
    );
}

#[test]
fn the_mpi_backend_without_mpi_is_refused_with_one_line() {
    let Some(sim) = sim_dir() else { return };
    let args = argv!["run --backend mpi -e 1K --no-progress --csv /dev/null/never.csv"];
    let outs = four(&sim, Kind::Torchrun, &none, &args);
    assert_eq!(codes(&outs), [2, 2, 2, 2], "{}", show(&outs));
    let lines = all_lines(&outs);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("the mpi backend needs MPI for its collectives"),
        "{lines:?}"
    );
}

/// The memory backend's ranks are threads of one process (`-g N`): ranks
/// of several processes, met at the store, are refused on every rank with
/// one line, and nothing is written.
#[test]
fn the_memory_backend_across_processes_is_refused_with_one_line() {
    let Some(sim) = sim_dir() else { return };
    let (_dir, csv) = temp_file("never.csv");
    let args = argv!["run --backend memory -e 1K --no-progress --csv", path_str(&csv)];
    let outs = four(&sim, Kind::Torchrun, &none, &args);
    assert_eq!(codes(&outs), [2, 2, 2, 2], "{}", show(&outs));
    let lines = all_lines(&outs);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("--backend memory runs the ranks as threads of one process"),
        "{lines:?}"
    );
    assert!(!csv.exists(), "a refused run wrote its CSV");
}

/// An MPMD launch where one "rank" never calls MPI_Init: the others wait
/// in it, and the pre-flight says the launcher or control plane is broken.
#[cfg(feature = "mpi")]
#[test]
fn an_mpi_start_that_never_completes_is_told_apart_from_nccl() {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "-np", "2", BIN, "run", "--timeout", "3", "-e", "1K"]);
    cmd.args(["--csv", "/dev/null/never.csv", ":", "-np", "1", "sleep", "120"]);
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    let out = exits(5, output_of(cmd));
    let lines = our_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0]
            .contains("the launcher or control plane is broken: MPI did not start on every rank within --timeout 3 s")
            && lines[0].contains("launched by mpirun"),
        "{lines:?}"
    );
}

/// An MPMD line whose ranks get different options: a rank whose options
/// do not parse says so itself and every rank ends at once with 2 (no rank
/// waits for it until --timeout); ranks that run different commands are
/// told apart at the first agreement, with one line, exit 2.
#[cfg(feature = "mpi")]
#[test]
fn an_mpmd_line_with_one_bad_rank_or_two_commands_ends_at_once_with_one_line() {
    let mpmd = |first: &[&str], second: &[&str]| {
        let mut cmd = Command::new("mpirun");
        cmd.args(["--oversubscribe", "-np", "1", BIN]).args(first);
        cmd.args([":", "-np", "1", BIN]).args(second);
        if is_root() {
            cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        }
        let started = std::time::Instant::now();
        let out = output_of(cmd);
        (out, started.elapsed())
    };
    let run = [
        "run",
        "--backend",
        "mpi",
        "-e",
        "1K",
        "--timeout",
        "120",
        "--csv",
        "/dev/null/never.csv",
    ];
    // rank 1's options do not parse: its own message, every rank ends now
    let bad = [&run[..], &["--bogus-option"]].concat();
    let (out, took) = mpmd(&run, &bad);
    let out = exits(2, out);
    let lines = our_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("collbench: rank 1: unexpected argument '--bogus-option'"),
        "{lines:?}"
    );
    assert!(
        took < Duration::from_secs(60),
        "waited {took:?}: a rank waited for the one that failed"
    );
    // two commands: the first agreement names them
    let links = [
        "links",
        "--backend",
        "mpi",
        "--size",
        "4K",
        "--timeout",
        "120",
        "--csv",
        "/dev/null/never.csv",
    ];
    let (out, took) = mpmd(&run, &links);
    let out = exits(2, out);
    let lines = our_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("command is run on rank 0 but links on rank 1"),
        "{lines:?}"
    );
    assert!(took < Duration::from_secs(60), "waited {took:?}");
}

/// The build without MPI (`--no-default-features --features nccl,nvml`,
/// built by scripts/test.sh into COLLBENCH_MPI_FREE_BIN).
#[cfg(feature = "mpi")]
fn mpi_free_bin() -> Option<PathBuf> {
    match std::env::var_os("COLLBENCH_MPI_FREE_BIN").map(PathBuf::from) {
        Some(p) if p.is_file() => Some(p),
        _ if std::env::var("COLLBENCH_REQUIRE_NCCL").is_ok_and(|v| v == "1") => {
            panic!("COLLBENCH_MPI_FREE_BIN does not name the build without MPI (scripts/test.sh builds it)")
        }
        _ => {
            eprintln!("note: no COLLBENCH_MPI_FREE_BIN (scripts/test.sh builds it); test skipped");
            None
        }
    }
}

/// The libmpi this system's default build loads.
#[cfg(feature = "mpi")]
fn libmpi() -> String {
    let out = Command::new("ldd").arg(BIN).output().expect("ldd");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.trim_start().starts_with("libmpi.so"))
        .and_then(|l| l.split("=>").nth(1))
        .and_then(|p| p.split_whitespace().next())
        .map(str::to_string)
        .expect("the default build loads libmpi")
}

/// `program args` in a mount namespace where `libmpi` reads as an empty
/// file: libmpi cannot be loaded there.
#[cfg(feature = "mpi")]
fn without_libmpi(libmpi: &str, program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args([
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        "mount --bind /dev/null \"$0\" && exec \"$@\"",
    ])
    .arg(libmpi)
    .arg(program)
    .args(args);
    cmd
}

#[cfg(feature = "mpi")]
#[test]
fn the_build_without_mpi_starts_where_libmpi_cannot_be_loaded_and_runs_4_ranks() {
    let Some(sim) = sim_dir() else { return };
    let Some(free) = mpi_free_bin() else { return };
    if !is_root() {
        eprintln!("note: hiding libmpi needs root (a mount namespace); test skipped");
        return;
    }
    let needed = Command::new("readelf")
        .args(["-d"])
        .arg(&free)
        .output()
        .expect("readelf");
    let needed = String::from_utf8_lossy(&needed.stdout);
    assert!(needed.contains("NEEDED") && !needed.contains("libmpi"), "{needed}");
    let lib = libmpi();
    // where libmpi is hidden the default build cannot even start ...
    let out = output_of(without_libmpi(&lib, Path::new(BIN), &["--version"]));
    assert_ne!(code(&out), 0);
    assert_stderr_has(&out, "libmpi");
    // ... and the build without MPI can
    ok(output_of(without_libmpi(&lib, &free, &["--version"])));
    let (_tmp, csv_path) = temp_file("free.csv");
    let mut args = with_csv(&words(SWEEP), &csv_path);
    args[4] = "all_reduce,alltoall";
    let hidden = |_: usize, a: &[&str]| without_libmpi(&lib, &free, a);
    let outs = store_job(
        &sim,
        Kind::Torchrun,
        (&[0, 1, 2, 3], "127.0.0.1"),
        &none,
        &hidden,
        &args,
    );
    assert_eq!(codes(&outs), [0, 0, 0, 0], "{}", show(&outs));
    assert!(stdout(&outs[0]).contains("launcher torchrun"), "{}", stdout(&outs[0]));
    assert_sim_rows(&Csv::read(&csv_path), 4);
    // an MPI launch is refused by it, in one line
    let env = sim_env(&sim, 2);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let free_str = free.to_str().unwrap();
    let mut cmd = Command::new("mpirun");
    cmd.args(argv!["--oversubscribe -np 2", free_str, "run --csv /dev/null/x.csv"]);
    cmd.envs(env.iter().copied());
    if is_root() {
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    let out = exits(2, output_of(cmd));
    assert_eq!(our_lines(&out).len(), 1, "{}", stderr(&out));
    assert_stderr_has(&out, "this build has no MPI");
}

/// docs/launch.md's Kubernetes manifest: its YAML documents.
fn k8s_manifest() -> Vec<yaml_rust2::Yaml> {
    let page = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/launch.md")).unwrap();
    let block = page
        .split("```yaml\n")
        .nth(1)
        .and_then(|rest| rest.split("\n```").next())
        .expect("a yaml block in docs/launch.md");
    yaml_rust2::YamlLoader::load_from_str(block).expect("the manifest is YAML")
}

/// The manifest's Service and Indexed Job agree (names, counts, the
/// variables collbench reads), and its pods, each with its hostname and
/// rank 0 found by the Service's name (a private /etc/hosts), run the
/// manifest's command (with small sizes) at 4 ranks on the simulation.
#[test]
fn the_kubernetes_manifest_of_the_docs_is_an_indexed_job_whose_pods_meet_at_the_store() {
    let docs = k8s_manifest();
    let service = docs
        .iter()
        .find(|d| d["kind"].as_str() == Some("Service"))
        .expect("a Service");
    let job = docs.iter().find(|d| d["kind"].as_str() == Some("Job")).expect("a Job");
    let service_name = service["metadata"]["name"].as_str().unwrap();
    assert_eq!(service["spec"]["clusterIP"].as_str(), Some("None"), "headless");
    assert_eq!(service["spec"]["publishNotReadyAddresses"].as_bool(), Some(true));
    let job_name = job["metadata"]["name"].as_str().unwrap();
    assert_eq!(service["spec"]["selector"]["job-name"].as_str(), Some(job_name));
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"].as_str(), Some("Indexed"));
    let completions = spec["completions"].as_i64().unwrap();
    assert_eq!(spec["parallelism"].as_i64(), Some(completions), "every rank at once");
    let pod = &spec["template"]["spec"];
    assert_eq!(pod["subdomain"].as_str(), Some(service_name));
    assert_eq!(pod["restartPolicy"].as_str(), Some("Never"));
    let container = &pod["containers"][0];
    let env: Vec<(String, String)> = container["env"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                e["value"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let var = |name: &str| env.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
    assert_eq!(var("WORLD_SIZE"), Some(completions.to_string()));
    assert_eq!(var("COLLBENCH_SERVICE").as_deref(), Some(service_name));
    let port = service["spec"]["ports"][0]["port"].as_i64().unwrap().to_string();
    assert_eq!(var("MASTER_PORT"), Some(port));
    let command: Vec<&str> = container["command"]
        .as_vec()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(&command[..4], ["collbench", "run", "--launcher", "k8s"]);
    // the pods, on this machine
    let Some(sim) = sim_dir() else { return };
    if !is_root() {
        eprintln!("note: the pods' hostnames need root (unshare); the run is skipped");
        return;
    }
    assert_eq!(completions, 4);
    let hosts = std::fs::read_to_string("/etc/hosts").unwrap();
    let (tmp, pod_hosts) = temp_file("hosts");
    std::fs::write(&pod_hosts, format!("{hosts}\n127.0.0.1 {job_name}-0.{service_name}\n")).unwrap();
    let sizes = command.iter().position(|w| *w == "-b").unwrap_or(command.len());
    let csv_path = tmp.path().join("k8s.csv");
    let mut args: Vec<&str> = command[1..sizes].to_vec();
    args.extend(argv!["-e 4K -f 8 -n 2 -w 1 --no-progress --csv", path_str(&csv_path)]);
    let cmds = (0..4)
        .map(|index| {
            let hostname = format!("{job_name}-{index}");
            let mut cmd = Command::new("unshare");
            cmd.args(["--mount", "--uts", "--propagation", "private", "sh", "-c"])
                .arg("mount --bind \"$0\" /etc/hosts && hostname \"$1\" && shift && exec \"$@\"")
                .arg(&pod_hosts)
                .arg(&hostname)
                .arg(BIN)
                .args(&args);
            let mut pod_env = env.clone();
            pod_env.push(("JOB_COMPLETION_INDEX".into(), index.to_string()));
            pod_env.push(("HOSTNAME".into(), hostname));
            rank_command(cmd, &sim, 4, pod_env)
        })
        .collect();
    let outs = run_all(cmds);
    assert_eq!(codes(&outs), [0, 0, 0, 0], "{}", show(&outs));
    let header = stdout(&outs[0]);
    assert!(
        header.contains(&format!("TCP store at {job_name}-0.{service_name}:29500, launcher k8s")),
        "{header}"
    );
    assert!(header.contains("4 on 4 nodes"), "{header}");
    assert_sim_rows(&Csv::read(&csv_path), 4);
}
