//! Option and profile errors in this process, through the library's own
//! parsing: clap's definitions (`cli::parse_cli`), the run configuration
//! (`RunConfig::from_command_line`), the job building of `workload`
//! (`config::Job`), check profiles (`check::shipped::load`) and the
//! hierarchy's node values (`topology::Nodes::consecutive`). No rank
//! starts for any of them: each was an mpirun launch per case before
//! (issue 34). That a usage error is printed once and every rank exits 2
//! under mpirun is tests/it/cli.rs's; each message is the line the binary
//! prints after `collbench: `.

use collbench::cli::{Command, parse_cli, run_option_tip, step_value_error};
use collbench::config::Job;
use collbench::config::RunConfig;
use collbench::error::Error;
use collbench::topology::Nodes;

/// The error of `collbench ARGS` that parsing or building the job finds
/// before any rank starts, at `world` ranks on one host: its exit code
/// and the line the binary prints (clap's own message, whole, where clap
/// refuses it).
fn refusal(args: &str, world: usize) -> (u8, String) {
    refusal_of(&args.split_whitespace().collect::<Vec<_>>(), world)
}

/// `refusal` of an argument vector (for values with spaces).
fn refusal_of(args: &[&str], world: usize) -> (u8, String) {
    let argv: Vec<&str> = ["collbench"].into_iter().chain(args.iter().copied()).collect();
    let subcommand = argv.get(1).copied();
    let cli = match parse_cli(&argv) {
        Ok(cli) => cli,
        Err(e) => {
            // clap's message, and its line saying an option is run's
            let tip = run_option_tip(&e, subcommand).unwrap_or_default();
            let line = step_value_error(&e, subcommand).unwrap_or_else(|| format!("{e}{tip}"));
            return (u8::try_from(e.exit_code()).unwrap_or(2), line);
        }
    };
    let built = match cli.command {
        Command::Run(_) => RunConfig::from_command_line(&argv[2..]).map(drop),
        Command::Workload(a) => Job::workload(&a).and_then(|(job, _)| job.configs(world, world).map(drop)),
        _ => panic!("{args:?}: not a command these tests build"),
    };
    match built {
        Ok(()) => panic!("{args:?}: accepted at {world} ranks"),
        Err(e) => (e.exit_code(), e.to_string()),
    }
}

/// Asserts `args` is refused with exit 2 and a message holding `needle`.
#[track_caller]
fn refused(args: &str, world: usize, needle: &str) {
    let (code, line) = refusal(args, world);
    assert_eq!(code, 2, "{args}: {line}");
    assert!(line.contains(needle), "{args}: expected {needle:?} in {line}");
    assert!(!line.contains("panicked"), "{args}: {line}");
}

const WORKLOAD: &str = "workload --backend mpi --params 1M --layers 2 --hidden 128 --vocab 1000 --param-dtype float";

/// Moved from tests/it/workload.rs, where each case was a launch of 2 ranks.
#[test]
fn bad_workload_options_are_refused_naming_what_is_wrong() {
    let cases = [
        ("--strategy pipelined", "unknown strategy 'pipelined'"),
        (
            "--strategy ddp,zero3",
            "strategy 'zero3': DeepSpeed ZeRO-3 is not modelled",
        ),
        ("--strategy moe", "the moe strategy needs a mixture-of-experts model"),
        ("--strategy pp --pp 4", "does not divide the world of 2 ranks"),
        ("--strategy ddp --tp 2", "--tp 2 only applies to the tp strategy"),
        (
            "--strategy pp --micro-batches 0",
            "--micro-batches 0: '0' is not a whole number of 1 or more",
        ),
        (
            "--strategy ddp --micro-batches 4",
            "--micro-batches 4 only applies to the pp strategy; add pp to --strategy",
        ),
        (
            "--strategy ddp,fsdp --moe-imbalance 1.5",
            "--moe-imbalance 1.5 only applies to the moe strategy; add moe to --strategy",
        ),
        ("--strategy tp --tp 3", "does not divide the world of 2 ranks"),
        ("--bucket 0", "--bucket sizes must be at least 1 byte"),
        ("--bucket lots", "--bucket lots"),
        ("-e 1M", "-e/--maxbytes is an option of `collbench run`"),
        ("--param-dtype int8", "parameter"),
    ];
    for (extra, needle) in cases {
        refused(&format!("{WORKLOAD} {extra}"), 2, needle);
    }
    // the reviewer's factor: 100x the mean of 4 ranks holding 1 expert each
    refused(
        "workload --backend memory --params 1M --layers 1 --experts 4 --strategy moe --seq-len 64 --moe-imbalance 100",
        4,
        "--moe-imbalance 100 is more than routing can give: the busiest of 4 expert-parallel ranks receives at most \
         2x the mean",
    );
    refused("workload --backend mpi --model gpt-5", 2, "unknown model 'gpt-5'");
    refused("workload --backend mpi --params many --layers 2", 2, "--params many");
    // a bad value is one line naming the option, as the other refusals
    let (_, line) = refusal(&format!("{WORKLOAD} --bucket lots"), 2);
    assert_eq!(line.lines().count(), 1, "{line}");
}

/// Moved from tests/it/split.rs (three launches of 2 ranks).
#[test]
fn bad_split_rules_are_refused_by_the_parser_or_the_configuration() {
    let (code, text) = refusal_of(&["run", "--backend", "mpi", "--split", "XOR 1"], 2);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("is not a split rule") && text.contains("For more information"),
        "{text}"
    );
    let (code, text) = refusal_of(&["run", "--backend", "mpi", "--split", "MOD 0"], 2);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("MOD by 0 has no groups"), "{text}");
    let (code, text) = refusal_of(
        &[
            "run",
            "--backend",
            "mpi",
            "--split",
            "MOD 2",
            "--hierarchy",
            "rs-ar-ag",
            "--ranks-per-node",
            "1",
        ],
        2,
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("each group runs flat collectives"), "{text}");
}

/// Moved from tests/it/transports.rs (a launch of 2 ranks; `auto`, which
/// chooses at run time, stays there).
/// A folder given as a report file is refused when the options are read,
/// with `--overwrite` too (which replaces files): not "exists; use
/// --overwrite", then "Is a directory" once the run had started.
#[test]
fn a_folder_as_a_report_file_is_refused_with_or_without_overwrite() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap();
    for overwrite in ["", " --overwrite"] {
        for (command, what) in [
            (format!("run --csv {folder}"), "CSV"),
            (format!("run --json {folder}"), "JSON"),
            (format!("{WORKLOAD} --csv {folder}"), "CSV"),
        ] {
            let args = format!("{command}{overwrite}");
            refused(
                &args,
                2,
                &format!("{what} file {folder} is a folder: give a file's path"),
            );
        }
    }
}

#[test]
fn an_nccl_transport_profile_on_the_mpi_backend_is_a_usage_error() {
    refused(
        "run --backend mpi --transport nvlink -e 1K",
        2,
        "is an NCCL profile, but the backend is mpi",
    );
}

/// Moved from tests/it/hierarchy.rs (five launches of 2 and 4 ranks).
#[test]
fn bad_ranks_per_node_values_are_refused() {
    let hosts = vec!["vm".to_string(); 4];
    for bad in [3, 8] {
        let e = Nodes::consecutive(bad, &hosts).expect_err("accepted");
        assert!(matches!(e, Error::Usage(_)), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("--ranks-per-node {bad} does not divide the 4 ranks of this job")
        );
    }
    assert!(Nodes::consecutive(2, &hosts).is_ok());
    for bad in ["0", "-1", "two"] {
        let (code, text) = refusal(&format!("run --ranks-per-node {bad} -e 64"), 2);
        assert_eq!(code, 2, "{text}");
        assert_eq!(text.matches("for '--ranks-per-node <K>'").count(), 1, "{text}");
        assert!(text.contains("For more information, try '--help'."), "{text}");
    }
}

/// Moved from tests/it/check.rs (two of its four launches of 2 ranks;
/// a size no buffer holds and a GPU profile without GPUs are found at the
/// run, and stay there): each bad profile is refused naming its file and
/// line.
#[test]
fn bad_check_profiles_name_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = "name = \"t\"\ndescription = \"t\"\nbackend = \"mpi\"\n\n[[check]]\nname = \"c\"\nscope = \"job\"\ncollective = \"all_reduce\"\n";
    let source = "source = \"a long enough source\"";
    let cases = [
        (
            "unknown-key",
            format!("{good}size = \"4K\"\ncolour = \"red\"\nfail_below = {{ value = 1.0, {source} }}\n"),
            ":10:",
            "colour",
        ),
        (
            "no-source",
            format!("{good}size = \"4K\"\nfail_below = {{ value = 1.0 }}\n"),
            ":10:",
            "source",
        ),
    ];
    for (name, text, line, needle) in cases {
        let path = dir.path().join(format!("{name}.toml"));
        std::fs::write(&path, text).unwrap();
        let what = path.to_str().unwrap();
        let e = collbench::check::shipped::load(what).expect_err(name);
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 2, "{name}: {msg}");
        assert!(msg.contains(&format!("{what}{line}")), "{name}: {msg}");
        assert!(msg.contains(needle), "{name}: {msg}");
        assert_eq!(msg.lines().count(), 1, "{name}: {msg}");
    }
    let e = collbench::check::shipped::load("no-such-profile").expect_err("no such profile");
    assert!(e.to_string().contains("no such profile or file"), "{e}");
}
