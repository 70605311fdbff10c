//! A real Slurm (scripts/local-slurm.sh: munged, slurmctld and slurmd of
//! Debian 12's Slurm 22.05 on this host, stopped when this test process
//! ends): `srun --mpi=pmix` over MPI, `srun --mpi=none` with the TCP store
//! on the GPU simulation (the rows of mpirun), a rank that fails under
//! srun, and an `sbatch` of scripts/slurm-suite.sbatch.
//!
//! Needs root and Slurm's packages: elsewhere skipped with a note, unless
//! COLLBENCH_REQUIRE_SLURM=1 (scripts/test.sh as root), where it fails.
#![cfg(all(feature = "mpi", feature = "nccl"))]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::common::*;
use crate::gpu_sim::{assert_sim_rows, sim_dir, sim_env};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/local-slurm.sh");
const STATE: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/local-slurm");

/// The local Slurm's configuration, started once for this test process,
/// in a folder of its own (`STATE/PID`): under cargo-nextest every test is
/// a process, and one process's Slurm is stopped when it ends while the
/// next may be starting its own.
fn slurm() -> Option<PathBuf> {
    static CONF: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let conf = CONF.get_or_init(|| {
        if !is_root() {
            return Err("not root".into());
        }
        let pid = std::process::id().to_string();
        let state = Path::new(STATE).join(&pid);
        let mut start = Command::new(SCRIPT);
        start.arg("start").arg(&state).args(["--owner", &pid]);
        let out = output_of(start);
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(state.join("slurm.conf"))
    });
    match conf {
        Ok(conf) => Some(conf.clone()),
        Err(why) if std::env::var("COLLBENCH_REQUIRE_SLURM").is_ok_and(|v| v == "1") => {
            panic!("COLLBENCH_REQUIRE_SLURM=1 but the local Slurm did not start: {why}")
        }
        Err(why) => {
            eprintln!("note: no local Slurm ({why}); test skipped");
            None
        }
    }
}

/// `program args` against the local Slurm, with the simulation of 4 GPUs
/// and `env`; Open MPI told that ranks outnumber cores.
fn slurm_command(conf: &Path, program: &str, args: &[&str], sim: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env("SLURM_CONF", conf)
        .env("OMPI_MCA_mpi_yield_when_idle", "1")
        .env("NO_COLOR", "1")
        .env_remove("SLURM_JOB_ID")
        .env_remove("OMPI_COMM_WORLD_RANK")
        .env_remove("NCCL_HOME")
        .envs(sim_env(sim, 4))
        .envs(env.iter().copied());
    cmd
}

/// `srun -n 4 --mpi=MPI collbench ARGS`.
fn srun(conf: &Path, sim: &Path, env: &[(&str, &str)], mpi: &str, args: &[&str]) -> Output {
    let mut all = vec!["-n", "4", mpi, BIN];
    all.extend(args);
    output_of(slurm_command(conf, "srun", &all, sim, env))
}

fn keys(csv: &Csv) -> BTreeSet<Vec<String>> {
    row_keys(csv, "collective dtype op root placement size_bytes count nranks")
}

const SWEEP: &str =
    "run --collectives all_reduce,all_gather,alltoall,broadcast -e 4K -f 8 -n 2 -w 1 --no-progress --timeout 120";

#[test]
fn srun_with_pmix_runs_4_ranks_over_mpi() {
    let (Some(sim), Some(conf)) = (sim_dir(), slurm()) else {
        return;
    };
    let list = output_of(slurm_command(&conf, "srun", &["--mpi=list"], &sim, &[]));
    assert!(stdout(&list).contains("pmix"), "{}{}", stdout(&list), stderr(&list));
    let (_tmp, csv_path) = temp_file("pmix.csv");
    let mut args = words(SWEEP);
    args.extend(["--backend", "mpi", "--csv", path_str(&csv_path)]);
    let out = ok(srun(&conf, &sim, &[], "--mpi=pmix", &args));
    let text = stdout(&out);
    assert!(text.contains("control plane: Open MPI"), "{text}");
    assert!(text.contains("launcher srun --mpi=pmix"), "{text}");
    assert!(text.contains("# ranks     : 4 on 1 node"), "{text}");
    assert_rows_consistent(&Csv::read(&csv_path), 4);
}

#[test]
fn srun_without_mpi_runs_4_ranks_on_the_gpu_simulation_with_the_rows_of_mpirun() {
    let (Some(sim), Some(conf)) = (sim_dir(), slurm()) else {
        return;
    };
    let tmp = tempdir();
    let (srun_csv, mpirun_csv) = (tmp.path().join("none.csv"), tmp.path().join("mpirun.csv"));
    let mut args = words(SWEEP);
    args.extend(["--backend", "nccl", "--csv", path_str(&srun_csv)]);
    let out = ok(srun(&conf, &sim, &[], "--mpi=none", &args));
    let text = stdout(&out);
    assert!(text.contains("control plane: TCP store at "), "{text}");
    assert!(text.contains("launcher slurm"), "{text}");
    assert!(our_lines(&out).is_empty(), "{}", stderr(&out));
    let env = sim_env(&sim, 4);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut args = words(SWEEP);
    args.extend(["--backend", "nccl", "--csv", path_str(&mpirun_csv)]);
    ok(mpirun_env(4, &env, &args));
    let csv = Csv::read(&srun_csv);
    assert_sim_rows(&csv, 4);
    assert_eq!(keys(&csv), keys(&Csv::read(&mpirun_csv)));
}

#[test]
fn a_rank_that_fails_under_srun_ends_the_step_with_one_line() {
    let (Some(sim), Some(conf)) = (sim_dir(), slurm()) else {
        return;
    };
    let fail = [("GPUSIM_NCCL_FAIL", "ncclAllReduce:3:2:2")];
    let (_tmp, csv_path) = temp_file("fail.csv");
    for mpi in ["--mpi=none", "--mpi=pmix"] {
        let args = argv![
            "run --backend nccl --collectives all_reduce -e 1K -n 2 --no-progress --overwrite --csv",
            path_str(&csv_path)
        ];
        let out = srun(&conf, &sim, &fail, mpi, &args);
        assert_ne!(code(&out), 0, "{mpi}: {}", stderr(&out));
        let lines = our_lines(&out);
        assert_eq!(lines.len(), 1, "{mpi}: {}", stderr(&out));
        assert!(
            lines[0].contains("rank 2 on ") && lines[0].contains("ncclAllReduce failed"),
            "{mpi}: {lines:?}"
        );
    }
}

#[test]
fn an_sbatch_of_the_example_batch_script_runs_a_suite_whose_launches_are_srun_steps() {
    let (Some(sim), Some(conf)) = (sim_dir(), slurm()) else {
        return;
    };
    let tmp = tempdir();
    std::fs::create_dir(tmp.path().join("results")).unwrap();
    let suite = tmp.path().join("tiny.toml");
    std::fs::write(
        &suite,
        "name = \"tiny\"\nranks = 4\ntransports = [\"tcp\"]\nhierarchies = [\"flat\", \"rs-ar-ag\"]\n\
         srun-args = [\"--mpi=pmix\"]\n\n[run]\nbackend = \"mpi\"\ncollectives = \"all_reduce\"\n\
         maxbytes = \"4K\"\nstepfactor = 8\niters = 3\nranks-per-node = 2\n",
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/slurm-suite.sbatch");
    let mut cmd = slurm_command(
        &conf,
        "sbatch",
        &["--wait", "-n", "4", script, path_str(&suite), "--no-progress"],
        &sim,
        &[("COLLBENCH", BIN)],
    );
    cmd.current_dir(tmp.path());
    let out = output_of(cmd);
    let job = stdout(&out).split_whitespace().last().unwrap_or_default().to_string();
    let log = std::fs::read_to_string(tmp.path().join(format!("results/slurm-collbench-suite-{job}.out")))
        .unwrap_or_else(|e| format!("(no batch output: {e})"));
    assert_eq!(code(&out), 0, "{}\n{log}", stderr(&out));
    assert!(log.contains("srun"), "{log}");
    let merged = Csv::read(&tmp.path().join(format!("results/tiny-{job}.csv")));
    assert_rows_consistent(&merged, 4);
    let modes: BTreeSet<&str> = merged.rows.iter().map(|r| merged.get(r, "hierarchy")).collect();
    assert_eq!(modes.len(), 2, "{modes:?}");
    assert!(tmp.path().join(format!("results/tiny-{job}-topo.txt")).is_file());
}
