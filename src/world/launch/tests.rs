use super::*;

fn env_of(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn detect_in(vars: &[(&str, &str)], mpi_built: bool) -> Result<Launch, Error> {
    detect(LauncherChoice::Auto, &env_of(vars), mpi_built)
}

fn store_of(launch: Result<Launch, Error>) -> StoreLaunch {
    match launch {
        Ok(Launch::Store(s)) => s,
        other => panic!("not a store launch: {other:?}"),
    }
}

const SRUN: [(&str, &str); 7] = [
    ("SLURM_JOB_ID", "1234"),
    ("SLURM_STEP_ID", "2"),
    ("SLURM_PROCID", "3"),
    ("SLURM_NTASKS", "8"),
    ("SLURM_STEP_NUM_TASKS", "4"),
    ("SLURM_LOCALID", "1"),
    ("SLURM_STEP_NODELIST", "gpu[07-08,11],login1"),
];

#[test]
fn srun_without_mpi_meets_at_the_first_host_of_the_step_on_a_port_of_the_job_and_step() {
    let s = store_of(detect_in(&SRUN, true));
    assert_eq!(
        (s.launcher, s.rank, s.size, s.local_rank),
        (StoreLauncher::Slurm, 3, 4, Some(1))
    );
    assert_eq!(s.host, "gpu07");
    assert_eq!(s.port, 20000 + ((16 * 1234 + 2) % 9000) as u16);
    assert_eq!(s.token, "slurm:1234.2");
    let mut reserved = SRUN.to_vec();
    reserved.push(("SLURM_STEP_RESV_PORTS", "12000-12003"));
    assert_eq!(store_of(detect_in(&reserved, true)).port, 12000);
}

#[test]
fn srun_with_pmix_is_mpi_where_mpi_is_built_and_the_store_where_it_is_not() {
    let mut pmix = SRUN.to_vec();
    pmix.push(("PMIX_RANK", "3"));
    assert_eq!(
        detect_in(&pmix, true).unwrap(),
        Launch::Mpi {
            how: "srun --mpi=pmix".into()
        }
    );
    assert_eq!(store_of(detect_in(&pmix, false)).rank, 3);
}

#[test]
fn a_batch_script_is_not_a_launch_of_its_tasks() {
    // sbatch -n 4 runs the script once: SLURM_PROCID=0 and
    // SLURM_NTASKS=4, but no step.
    let batch = [("SLURM_JOB_ID", "7"), ("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")];
    assert_eq!(detect_in(&batch, true).unwrap(), Launch::Alone);
    assert_eq!(detect_in(&[], true).unwrap(), Launch::Alone);
}

#[test]
fn mpirun_is_mpi_and_refused_by_a_build_without_mpi() {
    let mpirun = [("OMPI_COMM_WORLD_SIZE", "4"), ("OMPI_COMM_WORLD_RANK", "2")];
    let launch = detect_in(&mpirun, true).unwrap();
    assert_eq!(launch, Launch::Mpi { how: "mpirun".into() });
    assert_eq!(launch.rank_and_size(&env_of(&mpirun)), Some((2, 4)));
    let refused = detect_in(&mpirun, false).unwrap_err();
    assert_eq!(refused.exit_code(), 2);
    assert!(refused.to_string().contains("srun --mpi=none"), "{refused}");
}

const TORCHRUN: [(&str, &str); 8] = [
    ("RANK", "5"),
    ("WORLD_SIZE", "8"),
    ("LOCAL_RANK", "1"),
    ("LOCAL_WORLD_SIZE", "4"),
    ("MASTER_ADDR", "trainer-0"),
    ("MASTER_PORT", "29400"),
    ("TORCHELASTIC_RUN_ID", "abc"),
    ("TORCHELASTIC_RESTART_COUNT", "1"),
];

#[test]
fn torchrun_meets_at_master_addr_and_leaves_master_port_to_the_agent_store() {
    let s = store_of(detect_in(&TORCHRUN, true));
    assert_eq!((s.rank, s.size, s.local_rank), (5, 8, Some(1)));
    assert_eq!(s.address(), "trainer-0:29400");
    assert_eq!(s.token, "torchrun:abc:1");
    let mut agent = TORCHRUN.to_vec();
    agent.push(("TORCHELASTIC_USE_AGENT_STORE", "True"));
    assert_eq!(store_of(detect_in(&agent, true)).port, 29401);
    // torchrun inside a Slurm step: torchrun's ranks, not the step's
    let mut in_slurm = TORCHRUN.to_vec();
    in_slurm.extend(SRUN);
    assert_eq!(store_of(detect_in(&in_slurm, true)).launcher, StoreLauncher::Torchrun);
}

#[test]
fn an_indexed_job_finds_the_pod_of_index_0_through_its_service() {
    let pod = [
        ("JOB_COMPLETION_INDEX", "2"),
        ("WORLD_SIZE", "4"),
        ("COLLBENCH_SERVICE", "collbench"),
        ("HOSTNAME", "collbench-2"),
    ];
    let s = store_of(detect_in(&pod, true));
    assert_eq!((s.launcher, s.rank, s.size), (StoreLauncher::K8s, 2, 4));
    assert_eq!(s.address(), "collbench-0.collbench:29500");
    let mut badly_named = pod.to_vec();
    badly_named[3] = ("HOSTNAME", "collbench-2-x7k2p");
    let e = detect_in(&badly_named, true).unwrap_err();
    assert!(e.to_string().contains("subdomain: collbench"), "{e}");
    let no_address = &pod[..2];
    assert!(
        detect_in(no_address, true)
            .unwrap_err()
            .to_string()
            .contains("COLLBENCH_SERVICE")
    );
}

#[test]
fn collbench_store_overrides_any_launchers_address() {
    let mut vars = TORCHRUN.to_vec();
    vars.push(("COLLBENCH_STORE", "[fd00::5]:7000"));
    assert_eq!(store_of(detect_in(&vars, true)).address(), "[fd00::5]:7000");
    vars.pop();
    vars.push(("COLLBENCH_STORE", "10.0.0.1"));
    assert_eq!(store_of(detect_in(&vars, true)).address(), "10.0.0.1:29400");
    vars.pop();
    vars.push(("COLLBENCH_STORE", "a:b:c"));
    assert_eq!(detect_in(&vars, true).unwrap_err().exit_code(), 2);
}

#[test]
fn a_launcher_asked_for_but_absent_or_inconsistent_is_a_usage_error_naming_the_variable() {
    let e = detect(LauncherChoice::Slurm, &env_of(&[]), true).unwrap_err();
    assert_eq!((e.exit_code(), e.to_string().contains("SLURM_PROCID")), (2, true));
    let e = detect(
        LauncherChoice::Torchrun,
        &env_of(&[("RANK", "0"), ("WORLD_SIZE", "0"), ("MASTER_ADDR", "h")]),
        true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("the job has 0 ranks"), "{e}");
    let e = detect(
        LauncherChoice::Torchrun,
        &env_of(&[("RANK", "x"), ("WORLD_SIZE", "4")]),
        true,
    )
    .unwrap_err();
    assert!(e.to_string().contains("RANK is 'x'"), "{e}");
    let e = detect(LauncherChoice::Mpi, &env_of(&[]), false).unwrap_err();
    assert!(e.to_string().contains("no MPI"), "{e}");
}

#[test]
fn slurm_host_lists_give_their_first_host() {
    assert_eq!(first_host("node[01-04,07],gpu-a").as_deref(), Some("node01"));
    assert_eq!(first_host("vm").as_deref(), Some("vm"));
    assert_eq!(first_host("a,b").as_deref(), Some("a"));
    assert_eq!(first_host("rack[2-3]-n[5,9]-ib").as_deref(), Some("rack2-n5-ib"));
    assert_eq!(first_host("bad[1-2"), None);
    assert_eq!(first_host(""), None);
}

#[test]
fn launcher_names_round_trip() {
    crate::types::assert_names_round_trip(&LauncherChoice::ALL, LauncherChoice::name, LauncherChoice::parse);
    assert_eq!(LauncherChoice::parse("K8S"), Some(LauncherChoice::K8s));
    assert_eq!(LauncherChoice::parse("pbs"), None);
}
