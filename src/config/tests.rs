use super::*;
use crate::collective::Collective;
use crate::topology::profile::Profile;
use crate::types::ProgressMode;
use crate::types::{Average, BackendKind, Choice, DType, ReduceOp, Register, RootChoice};
use proptest::prelude::*;

fn config(args: &[&str]) -> Result<RunConfig, Error> {
    RunConfig::from_command_line(args).map(|(_, c)| c)
}

fn usage(r: Result<RunConfig, Error>) -> String {
    match r {
        Err(Error::Usage(m)) => m,
        other => panic!("expected a usage error, got {other:?}"),
    }
}

/// A config file with `text`, then `args`.
fn with_file(text: &str, args: &[&str]) -> Result<RunConfig, Error> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.toml");
    std::fs::write(&path, text).unwrap();
    let mut all = vec!["--config", path.to_str().unwrap()];
    all.extend(args);
    config(&all)
}

#[test]
fn the_iteration_policy_is_n_then_min_time_then_precision() {
    let policy = |args: &[&str]| config(args).unwrap().timing.iterations;
    let ms = std::time::Duration::from_millis;
    assert_eq!(policy(&["-n", "7", "--min-time", "0.5"]), Iterations::Fixed(7));
    assert_eq!(policy(&["--min-time", "0.5"]), Iterations::MinTime(ms(500)));
    assert_eq!(
        policy(&["--precision", "0.5", "--max-time", "2"]),
        Iterations::Precision(PrecisionGoal {
            target_pct: 0.5,
            cap: ms(2000)
        })
    );
    // a graph needs its count before the timed region
    assert_eq!(policy(&["-G", "3"]), Iterations::MinTime(DEFAULT_MIN_TIME));
    assert_eq!(policy(&["-G", "3", "-n", "4"]), Iterations::Fixed(4));
    for (bad, option) in [("0", "--precision"), ("101", "--precision"), ("-1", "--max-time")] {
        let e = usage(config(&[option, bad]));
        assert!(e.contains(option), "{e}");
    }
}

/// nccl-tests shifts its buffers every iteration, OSU and IMB reuse
/// one: each backend's default is its reference tool's, and the last
/// of --rotate and --no-rotate wins on either.
#[test]
fn buffers_rotate_by_default_on_nccl_only_unless_asked() {
    use crate::types::BackendKind::{Memory, Mpi, Nccl};
    let rotates = |args: &[&str]| {
        let t = config(args).unwrap().timing;
        [Nccl, Mpi, Memory].map(|b| t.for_backend(b).rotate)
    };
    assert_eq!(rotates(&[]), [true, false, false]);
    assert_eq!(rotates(&["--rotate"]), [true; 3]);
    assert_eq!(rotates(&["--no-rotate"]), [false; 3]);
    assert_eq!(rotates(&["--rotate", "--no-rotate"]), [false; 3]);
    assert_eq!(rotates(&["--no-rotate", "--rotate"]), [true; 3]);
}

#[test]
fn defaults_are_a_float_sum_sweep_of_every_collective() {
    let c = config(&[]).unwrap();
    assert_eq!(
        c.plan.sweep,
        SizeSweep {
            min: 8,
            max: 32 << 20,
            step: Step::Factor(2)
        }
    );
    let t = &c.timing;
    assert_eq!((t.warmup, t.check), (5, 1));
    assert_eq!(t.iterations, Iterations::Precision(PrecisionGoal::default()));
    assert!(!t.rotate && !t.per_iter && !t.blocking);
    assert_eq!(t.straggler_threshold_pct, 10.0);
    assert_eq!(t.average, Average::Avg);
    assert_eq!(t.timeout, Some(std::time::Duration::from_secs(600)));
    assert_eq!(c.plan.collectives, Collective::ALL.to_vec());
    assert_eq!(c.plan.dtypes, Choice::List(vec![DType::Float]));
    assert_eq!(c.plan.ops, Choice::List(vec![ReduceOp::Sum]));
    assert_eq!(c.plan.roots, RootChoice::Rank(0));
    assert_eq!(c.plan.hierarchies_asked(), vec![Hierarchy::Flat]);
    assert_eq!(c.plan.ranks_per_node, None);
    assert_eq!(c.start.backend, BackendChoice::Auto);
    assert_eq!(c.start.transport, Profile::Auto);
    assert_eq!(c.outputs.progress, ProgressMode::Auto);
}

#[test]
fn transport_profiles_come_from_the_command_line_or_the_file_and_must_fit_the_backend() {
    assert_eq!(config(&["--transport", "TCP"]).unwrap().start.transport, Profile::Tcp);
    let c = with_file("transport = \"shm\"\nbackend = \"mpi\"\n", &[]).unwrap();
    assert_eq!(c.start.transport, Profile::Shm);
    assert!(c.digest.contains(&("--transport".to_string(), "shm".to_string())));
    let m = usage(config(&["--transport", "infiniband"]));
    assert!(
        m.contains("--transport") && m.contains("nvlink") && m.contains("help"),
        "{m}"
    );
    let m = usage(config(&["--transport", "nvlink", "--backend", "mpi"]));
    assert!(m.contains("NCCL profile") && m.contains("backend is mpi"), "{m}");
    // With auto the backend is not known yet: accepted here.
    assert_eq!(config(&["--transport", "ib"]).unwrap().start.transport, Profile::Ib);
}

#[test]
fn hierarchy_all_selects_every_mode() {
    let c = config(&["--hierarchy", "all", "--ranks-per-node", "2"]).unwrap();
    assert_eq!(c.plan.hierarchies_asked(), Hierarchy::ALL.to_vec());
    assert_eq!(c.plan.ranks_per_node, Some(2));
    let c = with_file(
        "hierarchy = [\"rs-ar-ag\"]\nranks-per-node = 3\nphase-times = true\n",
        &[],
    )
    .unwrap();
    assert_eq!(c.plan.hierarchies_asked(), vec![Hierarchy::RsArAg]);
    assert_eq!(c.plan.ranks_per_node, Some(3));
    assert!(c.timing.phase_times);
}

#[test]
fn launch_extras_default_to_one_operation_without_graph_or_registration() {
    let t = config(&[]).unwrap().timing;
    assert_eq!((t.agg_iters, t.cuda_graph, t.register), (1, 0, Register::Off));
    let c = config(&["-m", "4", "-G", "10", "-R", "1"]).unwrap();
    assert_eq!(
        (c.timing.agg_iters, c.timing.cuda_graph, c.timing.register),
        (4, 10, Register::Buffers)
    );
    assert_eq!(config(&["-R", "2"]).unwrap().timing.register, Register::Symmetric);
    for field in ["--agg-iters", "--cuda-graph", "--register"] {
        assert!(c.digest.iter().any(|(k, _)| k == field), "{field}");
    }
    let t = with_file("agg-iters = 2\ncuda-graph = 3\nregister = true\n", &[])
        .unwrap()
        .timing;
    assert_eq!((t.agg_iters, t.cuda_graph, t.register), (2, 3, Register::Buffers));
    assert!(!with_file("register = 0\n", &[]).unwrap().timing.register.on());
    assert_eq!(
        with_file("register = 2\n", &[]).unwrap().timing.register,
        Register::Symmetric
    );
    // -R 0 turns it off; the command line wins over the file
    assert!(!with_file("register = 1\n", &["-R", "0"]).unwrap().timing.register.on());
}

#[test]
fn launch_extras_refuse_what_cannot_be_measured_as_asked() {
    let refused = |args: &[&str], needles: &[&str]| {
        let m = usage(config(args));
        for n in needles {
            assert!(m.contains(n), "{n} not in {m}");
        }
        assert!(!m.contains('\n'), "{m}");
    };
    refused(&["-m", "0"], &["--agg-iters"]);
    refused(&["-R", "maybe"], &["--register", "not 0, 1 or 2"]);
    refused(&["-G", "5", "-z", "1"], &["-G/--cuda-graph 5", "--blocking"]);
    refused(&["-G", "1", "-I"], &["-G/--cuda-graph 1", "-I"]);
    refused(&["-G", "1", "--phase-times"], &["--phase-times"]);
    refused(
        &["-m", "2", "--hierarchy", "flat,reduce-bcast"],
        &["-m/--agg-iters 2", "reduce-bcast", "-m 1"],
    );
    // what does combine
    for args in [
        &["-m", "8", "-G", "4"][..],
        &["-m", "2", "-I", "-z", "1", "--hierarchy", "flat"],
        &["-G", "0", "-I", "--phase-times", "--hierarchy", "all"],
    ] {
        assert!(config(args).is_ok(), "{args:?}");
    }
}

#[test]
fn stepbytes_alone_steps_by_bytes_and_stepfactor_wins_when_both_are_given() {
    assert_eq!(config(&["-i", "1M"]).unwrap().plan.sweep.step, Step::Bytes(1 << 20));
    assert_eq!(
        config(&["-i", "1M", "-f", "4"]).unwrap().plan.sweep.step,
        Step::Factor(4)
    );
    assert_eq!(
        config(&["-f", "1", "-b", "1M"]).unwrap().plan.sweep.step,
        Step::Bytes(1 << 20)
    );
}

#[test]
fn bad_values_name_the_option() {
    for (args, option) in [
        (&["-d", "float,bogus"][..], "--dtype"),
        (&["-d", ""], "--dtype"),
        (&["-o", "sum,,max"], "--op"),
        (&["-o", "all,sum"], "--op"),
        (&["--collectives", "allreduce,barrier"], "--collectives"),
        (&["-r", "-1"], "--root"),
        (&["-a", "4"], "--average"),
        (&["-z", "2"], "--blocking"),
        (&["--backend", "gloo"], "--backend"),
        (&["-n", "0"], "--iters"),
        (&["-n", "1099511627776"], "--iters"),
        (&["-b", "0"], "--minbytes"),
        (&["-b", "1G", "-e", "1M"], "--minbytes"),
        (&["-f", "0"], "--stepfactor"),
        (&["-i", "0"], "--stepbytes"),
    ] {
        let m = usage(config(args));
        assert!(m.contains(option), "{option}: {m}");
        assert!(!m.contains('\n'), "{m}");
    }
}

#[test]
fn toml_files_use_the_long_option_names_and_the_command_line_wins() {
    let c = with_file(
        "minbytes = 1024\nmaxbytes = \"1M\"\ndtype = [\"int8\", \"double\"]\nop = \"min,max\"\nroot = \"all\"\n\
         blocking = true\nno-progress = true\ncollectives = \"all_reduce\"\naverage = 3\n",
        &["-e", "4K", "--progress"],
    )
    .unwrap();
    assert_eq!((c.plan.sweep.min, c.plan.sweep.max), (1024, 4096));
    assert_eq!(c.plan.dtypes, Choice::List(vec![DType::Int8, DType::Double]));
    assert_eq!(c.plan.ops, Choice::List(vec![ReduceOp::Min, ReduceOp::Max]));
    assert_eq!(c.plan.roots, RootChoice::All);
    assert!(c.timing.blocking);
    assert_eq!(
        c.outputs.progress,
        ProgressMode::Always,
        "the command line's --progress wins"
    );
    assert_eq!(c.plan.collectives, vec![Collective::AllReduce]);
    assert_eq!(c.timing.average, Average::Max);
    assert_eq!(
        with_file("backend = \"nccl\"\n", &[]).unwrap().start.backend,
        BackendChoice::Only(BackendKind::Nccl)
    );
}

#[test]
fn toml_errors_are_one_line_with_the_line_number() {
    for (text, line) in [
        ("iters = 5\nbogus = 1\n", 2),
        ("iters = 5\niters = 6\n", 2),
        ("iters = -5\n", 1),
        ("\n\nminbytes = [\n", 3),
        ("dtype = 5\n", 1),
        ("warmup = 2\nper-iter = 1\n", 2),
        ("inject-error = true\n", 1),
        ("config = \"other.toml\"\n", 1),
        ("maxbytes = \"1M\"\n[table]\nx = 1\n", 2),
    ] {
        let m = text_args(text).unwrap_err();
        assert!(m.starts_with(&format!("line {line}:")), "{text:?}: {m}");
        assert!(!m.contains('\n'), "{m}");
    }
}

#[test]
fn every_shipped_run_config_is_valid() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    let mut found = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".toml") && !name.starts_with("suite-") {
            config(&["--config", path.to_str().unwrap()]).unwrap_or_else(|e| panic!("{name}: {e}"));
            found += 1;
        }
    }
    assert!(found >= 2, "expected quick.toml and validate-all.toml, found {found}");
}

proptest! {
    #[test]
    fn config_loader_never_panics_on_arbitrary_toml(s in "[a-z\\-]{1,12} = (\"[a-zA-Z0-9,]{0,8}\"|-?[0-9]{1,22}|true|\\[\\])\n") {
        if let Ok(args) = text_args(&s) {
            let _ = cli::parse_run(&args).map(|a| RunConfig::from_args(&a));
        }
    }
}
