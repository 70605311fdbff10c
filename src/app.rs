//! The application: parse the command line, run one subcommand, print its
//! error once, exit with its code. `main.rs` only calls `app::main`; a run
//! is `session`'s, the other subcommands each call their module.
//!
//! Must not: measure, validate options beyond clap, or format reports.

use std::process::ExitCode;

use crate::cli::{Command, CompareArgs, ImportArgs, InfoArgs, PlotArgs, TopoArgs};
use crate::error::{Error, exit, say};
use crate::report::print_out;
use crate::session::is_first_rank;
use crate::world::launcher_rank;

pub fn main() -> ExitCode {
    // how this process was started, read before anything starts MPI
    let _ = launcher_rank();
    install_panic_hook();
    let cli = match crate::cli::parse_cli(std::env::args_os()) {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(clap_error(e)),
    };
    let code = match cli.command {
        Command::Run(args) => crate::session::run(&args, &run_arguments()),
        Command::Compare(args) => report_command(|| compare_command(&args)),
        Command::Plot(args) => report_command(|| plot_command(&args)),
        Command::Import(args) => report_command(|| import_command(&args)),
        Command::Info(args) => info_command(&args),
        Command::Topo(args) => topo_command(&args),
        Command::Suite(args) => report_command(|| crate::suite::run(&args)),
        Command::Workload(args) => crate::session::run_job(crate::config::Job::workload(&args)),
        Command::Replay(args) if args.check_only => crate::session::check_replay(&args),
        Command::Replay(args) => crate::session::run_job(crate::config::Job::replay(&args)),
        Command::Check(args) => check_command(&args),
        Command::Links(args) => crate::session::run_links(crate::config::LinksJob::from_args(&args)),
        Command::Doctor(args) => report_command(|| crate::doctor::command(&args.logs, args.json)),
        Command::Help(args) => help_command(&args),
    };
    ExitCode::from(code)
}

/// Help, version and usage errors print as clap formats them, complete
/// (the allowed values, "did you mean", the subcommand's usage), once: on
/// rank 0 under a launcher, or, when some ranks' options parse and
/// another's do not (an MPMD line), by the lowest failing rank
/// (`session::report_failed_start`); a bad value of `workload` or
/// `replay` is one line, as their other refusals are. Help and version
/// exit 0, errors 2.
fn clap_error(e: clap::Error) -> u8 {
    let code = u8::try_from(e.exit_code()).unwrap_or(exit::USAGE);
    let subcommand = std::env::args().nth(1);
    let say_why = |rank: Option<usize>| match (crate::cli::step_value_error(&e, subcommand.as_deref()), rank) {
        (Some(line), _) => say(&format!("collbench: {line}")),
        (None, Some(r)) if r != 0 => say(&format!("collbench: rank {r}: {}", crate::cli::one_line(&e))),
        (None, _) => {
            let _ = e.print();
            if let Some(tip) = crate::cli::run_option_tip(&e, subcommand.as_deref()) {
                say(&tip);
            }
        }
    };
    if code == exit::OK {
        if is_first_rank() {
            say_why(None);
        }
        return code;
    }
    crate::session::report_failed_start(code, say_why)
}

/// `collbench help [COMMAND]`: the help `collbench [COMMAND] --help`
/// prints, or clap's error for a subcommand that does not exist.
fn help_command(args: &crate::cli::HelpArgs) -> u8 {
    let mut argv = vec!["collbench".to_string()];
    argv.extend(args.command.clone());
    argv.push("--help".into());
    match crate::cli::parse_cli(argv) {
        Err(e) => clap_error(e),
        Ok(_) => exit::OK,
    }
}

fn install_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let rank = launcher_rank().map(|r| format!("rank {r}: ")).unwrap_or_default();
        let place = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        let payload = info
            .payload()
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| info.payload().downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "panic".into());
        say(&format!(
            "collbench: {rank}internal error: {payload}{place}; please report it"
        ));
        abort_job_after_panic();
    }));
}

#[cfg(feature = "mpi")]
fn abort_job_after_panic() {
    // A panicking rank must not leave its peers waiting in a collective.
    if mpi::environment::is_initialized() && !mpi::environment::is_finalized() {
        use mpi::traits::Communicator;
        mpi::topology::SimpleCommunicator::world().abort(i32::from(exit::RUNTIME));
    }
    // With the store, rank 0 ends the other ranks; with `-g` the ranks are
    // threads of this process: ending it is what keeps them from waiting
    // for the one that panicked.
    crate::world::announce_exit(exit::RUNTIME);
    std::process::exit(i32::from(exit::RUNTIME));
}

#[cfg(not(feature = "mpi"))]
fn abort_job_after_panic() {
    crate::world::announce_exit(exit::RUNTIME);
    std::process::exit(i32::from(exit::RUNTIME));
}

/// `collbench check`: a listing (`--list-profiles`, `--show-profile`),
/// printed once, or a run.
fn check_command(args: &crate::cli::CheckArgs) -> u8 {
    match crate::config::listing(args) {
        Ok(Some(text)) => {
            if is_first_rank() {
                print_out(&text);
            }
            exit::OK
        }
        Ok(None) => crate::session::run_check(crate::config::CheckJob::from_args(args)),
        Err(e) => crate::session::report_early_error(&e),
    }
}

/// `collbench info`: what this machine offers, one fact per line.
fn info_command(args: &InfoArgs) -> u8 {
    print_out(&crate::info::report(args.nccl_lib.as_deref()));
    exit::OK
}

/// Runs a command that needs no MPI: its error is one line, its exit code
/// the error's, or what the command returned.
fn report_command(f: impl FnOnce() -> Result<u8, Error>) -> u8 {
    match f() {
        Ok(code) => code,
        Err(e) => {
            say(&format!("collbench: {e}"));
            e.exit_code()
        }
    }
}

fn compare_command(args: &CompareArgs) -> Result<u8, Error> {
    use crate::compare::{self, CompareCommand, CompareOptions};
    compare::command(&CompareCommand {
        files: args.files.clone(),
        options: CompareOptions {
            metric: args.metric,
            threshold_pct: args.threshold.unwrap_or(compare::DEFAULT_THRESHOLD_PCT),
            alpha: args.alpha.unwrap_or(compare::DEFAULT_ALPHA),
            allow_different_ranks: args.allow_different_ranks,
            allow_method_change: args.allow_method_change,
            allow_algo_change: args.allow_algo_change,
            allow_missing: args.allow_missing,
            within_launch: args.within_launch,
        },
        format: args.format,
        by: args.by,
        reference: args.reference.clone(),
        export_markdown: args.export_markdown.clone(),
        export_json: args.export_json.clone(),
    })
}

fn plot_command(args: &PlotArgs) -> Result<u8, Error> {
    use crate::plot::{self, PlotOptions};
    let options = PlotOptions {
        inputs: args.files.clone(),
        output: args.output.clone(),
        metric: args.metric,
        labels: args.label.clone(),
        title: args.title.clone(),
        overwrite: args.overwrite,
    };
    let drawn = plot::plot(&options)?;
    say(&format!(
        "collbench: plotted {} series in {} panel{} to {}",
        drawn.series,
        drawn.panels,
        if drawn.panels == 1 { "" } else { "s" },
        args.output.display()
    ));
    Ok(exit::OK)
}

fn import_command(args: &ImportArgs) -> Result<u8, Error> {
    use crate::import::{self, ImportOptions};
    let options = ImportOptions {
        source: args.from,
        files: args.files.clone(),
        output: args.output.clone(),
        collective: args.collective,
        nranks: args.nranks,
        overwrite: args.overwrite,
    };
    let rows = import::import(&options)?;
    say(&format!(
        "collbench: imported {rows} rows into {}",
        args.output.display()
    ));
    Ok(exit::OK)
}

/// `collbench topo [--json]`: this machine's GPUs, links, NICs, CPUs.
fn topo_command(args: &TopoArgs) -> u8 {
    let report = crate::topology::machine::probe(std::path::Path::new("/"));
    print_out(&if args.json {
        crate::topology::machine::json(&report)
    } else {
        crate::topology::machine::table(&report)
    });
    exit::OK
}

/// The arguments after `run` on this process's command line.
fn run_arguments() -> Vec<std::ffi::OsString> {
    std::env::args_os().skip(1).skip_while(|a| a != "run").skip(1).collect()
}
