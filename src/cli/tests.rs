use super::*;
use crate::types::{Register, Size};
use crate::workload::{Count, PresetName, Strategy};

/// docs/options.md's `collbench run` table is generated from the
/// definitions; `COLLBENCH_BLESS=1` rewrites it.
#[test]
fn the_docs_options_table_is_the_one_the_definitions_give() {
    const BEGIN: &str = "<!-- run options: generated from cli::run_options_markdown -->\n";
    const END: &str = "<!-- end of run options -->";
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/options.md");
    let page = std::fs::read_to_string(&path).unwrap();
    let (before, rest) = page
        .split_once(BEGIN)
        .expect("docs/options.md has the run options marker");
    let (table, after) = rest.split_once(END).expect("docs/options.md has the end marker");
    let want = run_options_markdown();
    if table != want {
        if std::env::var_os("COLLBENCH_BLESS").is_some() {
            std::fs::write(&path, format!("{before}{BEGIN}{want}{END}{after}")).unwrap();
        } else {
            panic!(
                "docs/options.md's run option table differs from the clap definitions; \
                 run `COLLBENCH_BLESS=1 cargo test --lib options_table` to regenerate it"
            );
        }
    }
}

#[test]
fn the_command_line_definitions_are_consistent() {
    Cli::command().debug_assert();
    let d = RunArgs::defaults();
    assert_eq!((d.sizes.minbytes, d.sizes.maxbytes), (Size(8), Size(32 << 20)));
}

/// The long options a subcommand takes, hidden ones left out.
fn takes(sub: &str) -> Vec<String> {
    let mut cli = cli_command();
    cli.build();
    let c = cli.find_subcommand(sub).unwrap();
    c.get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| a.get_long().map(str::to_string))
        .collect()
}

#[test]
fn each_command_takes_the_groups_that_apply_and_no_other_run_option() {
    let all = takes("run");
    let launch = [
        "backend",
        "launcher",
        "ngpus",
        "nccl-lib",
        "transport",
        "ranks-per-node",
        "timeout",
    ];
    for sub in ["workload", "replay", "links", "check"] {
        let mine = takes(sub);
        for l in launch.iter().chain(&["check", "overwrite"]) {
            assert!(mine.iter().any(|m| m == l), "{sub} takes --{l}");
        }
        // what only a sweep means is not taken (nor shown, nor ignored)
        for l in [
            "minbytes",
            "maxbytes",
            "collectives",
            "dtype",
            "hierarchy",
            "average",
            "split",
            "alltoallv-spread",
            "timestamps",
            "output-format",
            "precision",
            "config",
        ] {
            assert!(!mine.iter().any(|m| m == l), "{sub} takes --{l}");
        }
        assert!(mine.iter().filter(|m| all.contains(m)).count() >= launch.len());
    }
    let steps = takes("workload");
    assert!(
        ["blocking", "register", "progress"]
            .iter()
            .all(|o| steps.iter().any(|m| m == o))
    );
    assert!(!steps.iter().any(|m| m == "label" || m == "json" || m == "iters"));
    let links = takes("links");
    assert!(links.iter().any(|m| m == "iters") && links.iter().any(|m| m == "label"));
    assert!(
        !links
            .iter()
            .any(|m| m == "register" || m == "blocking" || m == "progress")
    );
    let check = takes("check");
    assert!(check.iter().any(|m| m == "repeat") && check.iter().any(|m| m == "register"));
    assert!(
        !check
            .iter()
            .any(|m| m == "csv" || m == "json" || m == "label" || m == "iters")
    );
}

fn workload(args: &[&str]) -> Result<WorkloadArgs, clap::Error> {
    let argv = ["collbench", "workload"].iter().chain(args);
    match parse_cli(argv)?.command {
        Command::Workload(a) => Ok(*a),
        other => panic!("{other:?}"),
    }
}

#[test]
fn workload_values_are_typed_and_bad_ones_are_one_line_naming_the_option() {
    let a = workload(&[
        "--strategy",
        "FULL_SHARD,ddp,ddp",
        "--bucket",
        "1M,4M",
        "--model",
        "GPT-2",
    ])
    .unwrap();
    let fsdp = Strategy::Fsdp {
        reshard_after_forward: true,
    };
    assert_eq!(a.strategy.values(), [fsdp, Strategy::Ddp]);
    assert_eq!(a.bucket, [Size(1 << 20), Size(4 << 20)]);
    assert_eq!(a.model.map(PresetName::name), Some("gpt2"));
    let a = workload(&["--params", "7B", "--layers", "2", "--bucket", "1M", "--bucket", "2M"]).unwrap();
    assert_eq!((a.params, a.bucket), (Some(Count(7_000_000_000)), vec![Size(2 << 20)]));
    let line = |args: &[&str]| step_value_error(&workload(args).unwrap_err(), Some("workload")).unwrap();
    assert!(line(&["--bucket", "lots"]).starts_with("--bucket lots: "));
    assert_eq!(line(&["--bucket", "1M,0"]), "--bucket sizes must be at least 1 byte");
    assert!(line(&["--strategy", "pipelined"]).contains("unknown strategy 'pipelined'"));
    assert!(line(&["--model", "gpt-5"]).starts_with("--model gpt-5: unknown model 'gpt-5'"));
    assert!(line(&["--params", "many", "--layers", "1"]).starts_with("--params many: "));
    // other errors and other commands: clap's own, complete
    let e = workload(&["--strategy"]).unwrap_err();
    assert_eq!(step_value_error(&e, Some("workload")), None);
    let e = parse_run(["-a", "medain"]).unwrap_err();
    assert_eq!(step_value_error(&e, Some("run")), None);
}

#[test]
fn a_run_option_given_to_another_command_is_refused_by_clap_with_a_line_saying_whose_it_is() {
    let tip = |args: &[&str]| {
        let e = workload(args).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::UnknownArgument, "{args:?}");
        run_option_tip(&e, Some("workload"))
    };
    let line = tip(&["-e", "1M"]).unwrap();
    assert!(line.contains("-e/--maxbytes is an option of `collbench run`"), "{line}");
    assert!(tip(&["--phase-times"]).unwrap().contains("--phase-times is an option"));
    assert!(tip(&["--iters=5"]).unwrap().contains("-n/--iters"));
    // a typo is clap's alone
    assert_eq!(tip(&["--stepz", "5"]), None);
    // run's own errors get no tip
    let e = parse_run(["--nope"]).unwrap_err();
    assert_eq!(run_option_tip(&e, Some("run")), None);
}

#[test]
fn repeating_an_option_keeps_the_last_one() {
    let a = parse_run(["-e", "1K", "-e", "1M", "-z", "-z", "0", "--progress", "--no-progress"]).unwrap();
    assert_eq!(a.sizes.maxbytes, Size(1 << 20));
    assert!(!a.blocking.blocking.on());
    assert!(a.output.progress.no_progress && !a.output.progress.progress);
}

#[test]
fn to_args_gives_back_the_same_options() {
    let a = parse_run([
        "-e",
        "64K",
        "-d",
        "float,int8",
        "-z",
        "--hierarchy",
        "rs-ar-ag",
        "--per-iter",
        "--csv=-x.csv",
        "--transport",
        "shm",
    ])
    .unwrap();
    let args = a.to_args().unwrap();
    assert_eq!(
        args,
        [
            "--maxbytes=65536",
            "--dtype=float,int8",
            "--hierarchy=rs-ar-ag",
            "--per-iter",
            "--blocking=1",
            "--transport=shm",
            "--csv=-x.csv"
        ]
    );
    let back = parse_run(&args).unwrap();
    assert_eq!(back.options().unwrap(), a.options().unwrap());
    assert!(RunArgs::defaults().to_args().unwrap().is_empty());
}

#[test]
fn the_digest_covers_every_option_but_the_outputs() {
    let fields = digest_of("run", &RunArgs::defaults()).unwrap();
    assert_eq!(fields[0].0, "collbench version");
    assert_eq!(fields[1], ("command".to_string(), "run".to_string()));
    let names: Vec<&str> = fields.iter().map(|(n, _)| n.as_str()).collect();
    for kept in [
        "--maxbytes",
        "--transport",
        "--register",
        "--inject-error",
        "--no-comm-split",
    ] {
        assert!(names.contains(&kept), "{kept} missing from {names:?}");
    }
    for left_out in [
        "--csv",
        "--json",
        "--overwrite",
        "--progress",
        "--no-progress",
        "--config",
    ] {
        assert!(!names.contains(&left_out), "{left_out} in {names:?}");
    }
    assert!(fields.contains(&("--maxbytes".to_string(), "33554432".to_string())));
}

#[test]
fn values_are_typed_and_bad_ones_get_clap_s_message() {
    let a = parse_run(["-a", "3", "--backend", "NCCL", "-R"]).unwrap();
    assert_eq!(a.timing.average, Average::Max);
    assert_eq!(
        a.common.launch.backend,
        BackendChoice::Only(crate::types::BackendKind::Nccl)
    );
    assert!(a.register.register.on());
    let e = parse_run(["-a", "medain"]).unwrap_err().to_string();
    assert!(e.contains("possible values: rank0, avg, min, max"), "{e}");
    let e = parse_run(["--backend", "ncl"]).unwrap_err().to_string();
    assert!(e.contains("nccl"), "{e}");
    assert_eq!(parse_run(["-R", "2"]).unwrap().register.register, Register::Symmetric);
    let e = parse_run(["-R", "3"]).unwrap_err().to_string();
    assert!(e.contains("not 0, 1 or 2"), "{e}");
}

#[test]
fn every_help_ends_with_the_exit_codes_of_its_command_from_the_one_table() {
    let flat = |s: String| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut cmd = cli_command();
    let top = flat(cmd.render_long_help().to_string());
    assert!(top.ends_with(&crate::error::exit_codes_line(None)), "{top}");
    let names: Vec<String> = cmd.get_subcommands().map(|c| c.get_name().to_string()).collect();
    assert!(names.len() >= 11, "{names:?}");
    for name in names.iter().filter(|n| *n != "help") {
        let help = flat(cmd.find_subcommand_mut(name).unwrap().render_long_help().to_string());
        let line = crate::error::exit_codes_line(Some(name));
        assert!(
            help.ends_with(&line),
            "`collbench {name} --help` does not end with {line:?}:\n{help}"
        );
        assert_eq!(help.matches("Exit codes:").count(), 1, "{name}");
    }
}
