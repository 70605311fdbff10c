//! Unit tests of `profile`.

use std::collections::HashMap;

use super::*;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |k: &str| map.get(k).cloned()
}

#[test]
fn every_profile_parses_from_its_name_and_nothing_else_does() {
    for p in Profile::ALL {
        assert_eq!(Profile::parse(p.name()), Some(p));
        assert_eq!(Profile::parse(&p.name().to_uppercase()), Some(p));
    }
    assert_eq!(Profile::parse("nvl"), None);
    assert_eq!(Profile::parse("help"), None);
}

#[test]
fn the_help_lists_every_profile_with_every_variable() {
    let help = help_text();
    for p in Profile::ALL {
        assert!(help.contains(&format!("\n{:<7} [", p.name())), "{p}");
        for (name, value) in p.vars() {
            assert!(help.contains(&format!("{name}={value}\n")), "{p}: {name}");
        }
    }
    assert!(help.contains("MPIR_CVAR_CH4_NETMOD"));
}

#[test]
fn nccl_profiles_keep_traffic_off_the_paths_they_exclude() {
    let set = |p: Profile, name: &str| p.vars().iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
    assert_eq!(set(Profile::Nvlink, "NCCL_P2P_LEVEL"), Some("NVL"));
    assert_eq!(set(Profile::Nvlink, "NCCL_SHM_DISABLE"), Some("1"));
    assert_eq!(set(Profile::Pcie, "NCCL_P2P_DISABLE"), Some("1"));
    assert_eq!(set(Profile::Pcie, "NCCL_SHM_DISABLE"), None);
    for p in [Profile::Ib, Profile::Socket] {
        assert_eq!(set(p, "NCCL_P2P_DISABLE"), Some("1"));
        assert_eq!(set(p, "NCCL_SHM_DISABLE"), Some("1"));
        assert_eq!(set(p, "NCCL_NET_DISABLE_INTRA"), Some("0"));
    }
    assert_eq!(set(Profile::Ib, "NCCL_NET"), Some("IB"));
    assert_eq!(set(Profile::Socket, "NCCL_IB_DISABLE"), Some("1"));
    assert!(Profile::Auto.vars().is_empty());
}

#[test]
fn a_profile_must_match_the_backend() {
    assert!(Profile::Auto.check_backend(BackendKind::Mpi, "").is_ok());
    assert!(Profile::Auto.check_backend(BackendKind::Nccl, "").is_ok());
    assert!(Profile::Shm.check_backend(BackendKind::Mpi, "").is_ok());
    assert!(Profile::Nvlink.check_backend(BackendKind::Nccl, "").is_ok());
    let e = Profile::Nvlink
        .check_backend(BackendKind::Mpi, " (auto found no GPU backend)")
        .unwrap_err();
    assert_eq!(e.exit_code(), 2);
    let m = e.to_string();
    assert!(m.contains("--transport nvlink is an NCCL profile"), "{m}");
    assert!(m.contains("backend is mpi (auto found no GPU backend)"), "{m}");
    assert!(m.contains("shm, tcp, ucx"), "{m}");
    let m = Profile::Tcp
        .check_backend(BackendKind::Nccl, "")
        .unwrap_err()
        .to_string();
    assert!(m.contains("an MPI profile") && m.contains("nvlink"), "{m}");
}

#[test]
fn the_user_environment_wins_over_the_profile_and_is_reported() {
    let plan = EnvPlan::new(
        Profile::Tcp,
        None,
        &env(&[("OMPI_MCA_btl", "self,vader"), ("OMPI_MCA_pml", "ob1")]),
    );
    assert!(plan.added.is_empty(), "same value and user value both stay: {plan:?}");
    assert_eq!(
        plan.kept,
        vec![Kept {
            name: "OMPI_MCA_btl".into(),
            user_value: "self,vader".into(),
            profile_value: "self,tcp".into()
        }]
    );
    let lines = plan.describe(true);
    assert!(lines[0].contains("OMPI_MCA_btl=self,vader"), "{lines:?}");
    assert!(lines[0].contains("self,tcp was not applied"), "{lines:?}");
}

#[test]
fn nothing_to_add_means_no_restart_and_something_to_add_means_one() {
    assert!(matches!(
        prepare(Profile::Auto, None, &env(&[])),
        Prepared::Ready(p) if p.added.is_empty()
    ));
    let Prepared::Reexec(plan) = prepare(Profile::Shm, None, &env(&[])) else {
        panic!("shm adds variables")
    };
    assert_eq!(plan.marker(), "shm:OMPI_MCA_pml,OMPI_MCA_btl");
    // After the restart, the marker stops a second one.
    let after = env(&[
        (MARKER, "shm:OMPI_MCA_pml,OMPI_MCA_btl"),
        ("OMPI_MCA_pml", "ob1"),
        ("OMPI_MCA_btl", "self,vader"),
    ]);
    match prepare(Profile::Shm, None, &after) {
        Prepared::Ready(p) => assert_eq!(p, plan),
        other => panic!("{other:?}"),
    }
}

#[test]
fn after_the_restart_user_values_are_still_told_apart_from_added_ones() {
    let after = env(&[
        (MARKER, "tcp:OMPI_MCA_pml"),
        ("OMPI_MCA_pml", "ob1"),
        ("OMPI_MCA_btl", "self,vader"),
    ]);
    let plan = EnvPlan::after_reexec(Profile::Tcp, "tcp:OMPI_MCA_pml", &after);
    assert_eq!(plan.added, vec![("OMPI_MCA_pml".to_string(), "ob1".to_string())]);
    assert_eq!(plan.kept.len(), 1);
    assert_eq!(plan.kept[0].user_value, "self,vader");
}

#[test]
fn nccl_logging_goes_to_a_private_file_unless_the_user_set_nccl_debug() {
    let path = private_nccl_log(std::path::Path::new("/tmp"), "node 1", 42);
    assert_eq!(path, PathBuf::from("/tmp/collbench-nccl-node_1-42.log"));
    let log = |tuning| {
        Some(LogRequest {
            path: path.clone(),
            tuning,
            profiler: None,
        })
    };
    let plan = EnvPlan::new(Profile::Nvlink, log(true), &env(&[("NCCL_DEBUG_SUBSYS", "ALL")]));
    assert_eq!(plan.nccl_log, NcclLogging::Private(path.clone()));
    let names: Vec<&str> = plan.added.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"NCCL_DEBUG") && names.contains(&"NCCL_DEBUG_FILE"));
    assert!(names.contains(&"NCCL_RUNTIME_CONNECT"));
    assert!(!names.contains(&"NCCL_DEBUG_SUBSYS"), "the user's subsystems win");
    let marker = plan.marker();
    let mut after: Vec<(&str, &str)> = vec![(MARKER, marker.as_str()), ("NCCL_DEBUG_SUBSYS", "ALL")];
    let values: Vec<(String, String)> = plan.added.clone();
    for (n, v) in &values {
        after.push((n, v));
    }
    assert_eq!(EnvPlan::after_reexec(Profile::Nvlink, &marker, &env(&after)), plan);

    // TUNING joins the subsystems only with --algo-record log
    for (tuning, subsys) in [(false, "INIT,ENV,GRAPH"), (true, "INIT,ENV,GRAPH,TUNING")] {
        let plan = EnvPlan::new(Profile::Auto, log(tuning), &env(&[]));
        let added = plan.added.iter().find(|(n, _)| n == "NCCL_DEBUG_SUBSYS");
        assert_eq!(added.map(|(_, v)| v.as_str()), Some(subsys));
    }

    let plan = EnvPlan::new(Profile::Auto, log(true), &env(&[("NCCL_DEBUG", "WARN")]));
    assert_eq!(plan.nccl_log, NcclLogging::UserOwned("NCCL_DEBUG=WARN".into()));
    assert!(plan.added.is_empty());
    assert!(plan.describe(true)[0].contains("NCCL_DEBUG=WARN was set before the run"));
}

/// NCCL_PROFILER_PLUGIN: collbench's plugin is added where the user set
/// none, and known as collbench's after the re-exec; the user's own wins
/// and is named so.
#[test]
fn the_profiler_plugin_is_set_unless_the_user_set_one() {
    let plugin = PathBuf::from("/opt/collbench/libcollbench_profiler.so");
    let log = || {
        Some(LogRequest {
            path: PathBuf::from("/tmp/l.log"),
            tuning: false,
            profiler: Some(plugin.clone()),
        })
    };
    let plan = EnvPlan::new(Profile::Nvlink, log(), &env(&[]));
    assert_eq!(plan.profiler, ProfilerEnv::Ours(plugin.clone()));
    assert!(
        plan.added
            .contains(&(PROFILER_VAR.into(), plugin.display().to_string()))
    );
    let marker = plan.marker();
    let value = plugin.display().to_string();
    let after = EnvPlan::after_reexec(
        Profile::Nvlink,
        &marker,
        &env(&[(MARKER, marker.as_str()), (PROFILER_VAR, value.as_str())]),
    );
    assert_eq!(after.profiler, ProfilerEnv::Ours(plugin.clone()));
    let user = EnvPlan::new(Profile::Nvlink, log(), &env(&[(PROFILER_VAR, "/x/libinspector.so")]));
    assert_eq!(user.profiler, ProfilerEnv::User("/x/libinspector.so".into()));
    assert!(!user.added.iter().any(|(n, _)| n == PROFILER_VAR));
    let after = EnvPlan::after_reexec(
        Profile::Nvlink,
        "nvlink:",
        &env(&[(PROFILER_VAR, "/x/libinspector.so")]),
    );
    assert_eq!(after.profiler, ProfilerEnv::User("/x/libinspector.so".into()));
}
