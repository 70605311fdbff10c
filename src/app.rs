//! The application: parse, configure, start the control plane, agree on the
//! setup across ranks, sweep, report, and turn the outcome into one exit
//! code. `main.rs` only calls `app::main`.
//!
//! Error policy: a problem found before the sweep is agreed on by every
//! rank and printed once, and every rank exits with its code; a failure
//! during the sweep is printed by the failing rank, which then aborts the
//! whole job so that no peer is left waiting in a collective.

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, CompareArgs, ImportArgs, InfoArgs, PlotArgs, RunArgs, TopoArgs, TransportArg};
use crate::config::RunConfig;
use crate::engine::stop::StopRequest;
use crate::error::{Error, exit};
use crate::topology::profile::{self, EnvPlan, Prepared};
use crate::types::{BackendChoice, BackendKind};
use crate::world::{launcher_rank, launcher_size};

pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(clap_error(e)),
    };
    let code = match cli.command {
        Command::Run(args) => run_command(&args, &run_arguments()),
        Command::Compare(args) => report_command(|| compare_command(&args)),
        Command::Plot(args) => report_command(|| plot_command(&args)),
        Command::Import(args) => report_command(|| import_command(&args)),
        Command::Info(args) => info_command(&args),
        Command::Topo(args) => topo_command(&args),
        Command::Suite(args) => report_command(|| crate::suite::run(&args)),
        Command::Help(args) => help_command(&args),
    };
    ExitCode::from(code)
}

/// Help, version and usage errors print as clap formats them, complete
/// (the allowed values, "did you mean", the subcommand's usage), once: on
/// rank 0 under a launcher. Help and version exit 0, errors 2.
fn clap_error(e: clap::Error) -> u8 {
    if is_first_rank() {
        let _ = e.print();
    }
    let code = u8::try_from(e.exit_code()).unwrap_or(exit::USAGE);
    if code != exit::OK {
        wait_for_every_rank(code);
    }
    code
}

/// `collbench help [COMMAND]`: the help `collbench [COMMAND] --help`
/// prints, or clap's error for a subcommand that does not exist.
fn help_command(args: &crate::cli::HelpArgs) -> u8 {
    let mut argv = vec!["collbench".to_string()];
    argv.extend(args.command.clone());
    argv.push("--help".into());
    match Cli::try_parse_from(argv) {
        Err(e) => clap_error(e),
        Ok(_) => exit::OK,
    }
}

/// Under a launcher, waits until every rank has reached this point with
/// the same usage error before any exits: a rank that simply exited could
/// make the launcher kill rank 0 before it had printed the message.
fn wait_for_every_rank(code: u8) {
    #[cfg(feature = "mpi")]
    if launcher_rank().is_some()
        && let Ok(world) = crate::world::mpi::MpiWorld::init()
    {
        use crate::world::World;
        world.max_u64(u64::from(code));
    }
    #[cfg(not(feature = "mpi"))]
    let _ = code;
}

/// True unless a launcher says this process is not rank 0.
fn is_first_rank() -> bool {
    launcher_rank().is_none_or(|r| r == 0)
}

/// An error found before the control plane starts, on every rank alike.
/// Alone, the process prints it and exits. Under a launcher, the ranks
/// first agree over MPI, so that rank 0 prints it once and every rank
/// exits in order: a rank that simply exited could make the launcher kill
/// rank 0 before it had printed anything.
fn report_early_error(e: &Error) -> u8 {
    #[cfg(feature = "mpi")]
    if launcher_rank().is_some()
        && let Ok(world) = crate::world::mpi::MpiWorld::init()
    {
        use crate::world::World;
        let failed: Result<(), Error> = Err(Error::from_code(e.exit_code(), e.to_string()));
        return match world.agree(failed) {
            Err(agreed) => agreed.code,
            Ok(()) => e.exit_code(),
        };
    }
    crate::error::say(&format!("collbench: {e}"));
    e.exit_code()
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
        crate::error::say(&format!(
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
    // Without MPI the ranks are threads of this process (`-g`): ending it
    // is what keeps them from waiting for the one that panicked.
    std::process::exit(i32::from(exit::RUNTIME));
}

#[cfg(not(feature = "mpi"))]
fn abort_job_after_panic() {
    std::process::exit(i32::from(exit::RUNTIME));
}

/// `collbench info`: what this machine offers, one fact per line.
fn info_command(args: &InfoArgs) -> u8 {
    print!("{}", crate::info::report(args.nccl_lib.as_deref()));
    exit::OK
}

/// Runs a command that needs no MPI: its error is one line, its exit code
/// the error's, or what the command returned.
fn report_command(f: impl FnOnce() -> Result<u8, Error>) -> u8 {
    match f() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("collbench: {e}");
            e.exit_code()
        }
    }
}

/// Writes a report to standard output; a closed pipe (`| head`) is not an
/// error worth a message.
fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

fn compare_command(args: &CompareArgs) -> Result<u8, Error> {
    use crate::report::compare::{self, Format, by_mode};
    let (metric, format) = (args.metric, args.format);
    let threshold_pct = args.threshold.unwrap_or(compare::DEFAULT_THRESHOLD_PCT);
    if !threshold_pct.is_finite() || threshold_pct < 0.0 {
        return Err(Error::usage(format!(
            "--threshold {threshold_pct}: give a percentage of 0 or more"
        )));
    }
    if let Some(dimension) = args.by {
        let [file] = args.files.as_slice() else {
            return Err(Error::usage(format!(
                "--by {} compares the modes inside one CSV: give exactly one file",
                dimension.name()
            )));
        };
        let loaded = compare::load(file)?;
        let report = by_mode::compare_modes(
            &loaded.label,
            &loaded.rows,
            dimension,
            metric,
            args.reference.as_deref(),
        )?;
        print_out(&match format {
            Format::Table => compare::text::modes(&report),
            Format::Markdown => compare::markdown::modes(&report),
            Format::Json => compare::json::modes(&report),
        });
        return Ok(exit::OK);
    }
    let [base, new] = args.files.as_slice() else {
        return Err(Error::usage(
            "compare needs BASE and NEW (or --by hierarchy|transport with one CSV)",
        ));
    };
    let base = compare::load(base)?;
    let new = compare::load(new)?;
    let options = compare::CompareOptions {
        metric,
        threshold_pct,
        allow_different_ranks: args.allow_different_ranks,
    };
    let comparison = compare::compare(&base, &new, &options)?;
    print_out(&match format {
        Format::Table => compare::text::comparison(&comparison),
        Format::Markdown => compare::markdown::comparison(&comparison),
        Format::Json => compare::json::comparison(&comparison),
    });
    // The report is on stdout (perhaps redirected to a file); the verdict
    // also gets its one line on stderr, where a CI log shows it.
    match comparison.count(compare::Verdict::Regressed) {
        0 => Ok(exit::OK),
        rows => Err(Error::Regression {
            rows,
            compared: comparison.rows.len(),
            threshold_pct,
            metric: metric.name(),
        }),
    }
}

fn plot_command(args: &PlotArgs) -> Result<u8, Error> {
    use crate::report::plot::{self, PlotOptions};
    let options = PlotOptions {
        inputs: args.files.clone(),
        output: args.output.clone(),
        metric: args.metric,
        by: args.by,
        overwrite: args.overwrite,
    };
    let drawn = plot::plot(&options)?;
    eprintln!(
        "collbench: plotted {} series in {} panel{} to {}",
        drawn.series,
        drawn.panels,
        if drawn.panels == 1 { "" } else { "s" },
        args.output.display()
    );
    Ok(exit::OK)
}

fn import_command(args: &ImportArgs) -> Result<u8, Error> {
    use crate::report::import::{self, ImportOptions};
    let options = ImportOptions {
        source: args.from,
        files: args.files.clone(),
        output: args.output.clone(),
        collective: args.collective,
        nranks: args.nranks,
        overwrite: args.overwrite,
    };
    let rows = import::import(&options)?;
    eprintln!("collbench: imported {rows} rows into {}", args.output.display());
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

fn run_command(args: &RunArgs, argv: &[std::ffi::OsString]) -> u8 {
    if args.transport == TransportArg::Help {
        if is_first_rank() {
            print_out(&profile::help_text());
        }
        return exit::OK;
    }
    let cfg = match RunConfig::from_command_line(argv) {
        Ok((_, cfg)) => cfg,
        Err(e) => return report_early_error(&e),
    };
    let env_plan = match apply_transport(&cfg) {
        Ok(plan) => plan,
        Err(e) => return report_early_error(&e),
    };
    // One stop request for the process: with -g, every rank thread checks it.
    let stop = match StopRequest::install() {
        Ok(stop) => stop,
        Err(e) => return report_early_error(&e),
    };
    let code = run_with_control_plane(&cfg, &env_plan, &stop);
    if code == exit::OK {
        env_plan.remove_nccl_log();
    }
    code
}

/// Applies `--transport` before MPI starts: when the profile (or NCCL's
/// private log) needs variables the environment lacks, this process is
/// replaced by the same binary with them added, and does not return.
fn apply_transport(cfg: &RunConfig) -> Result<EnvPlan, Error> {
    let nccl_log = may_use_nccl(cfg)
        .then(|| profile::private_nccl_log(&std::env::temp_dir(), &crate::world::hostname(), std::process::id()));
    match profile::prepare(cfg.start.transport, nccl_log, &profile::process_env) {
        Prepared::Ready(plan) => Ok(plan),
        Prepared::Reexec(plan) => Err(profile::reexec(&plan)),
    }
}

/// Whether this run may end up on NCCL, whose INFO log collbench then
/// reads to observe the transport.
fn may_use_nccl(cfg: &RunConfig) -> bool {
    cfg!(feature = "nccl") && cfg.start.backend != BackendChoice::Only(BackendKind::Mpi)
}

/// Picks the control plane: one thread per rank with `-g N` (and always in
/// a build without MPI), else MPI.
fn run_with_control_plane(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest) -> u8 {
    if launcher_size().is_some_and(|n| n > 1) && (cfg.start.threads.is_some() || !cfg!(feature = "mpi")) {
        if is_first_rank() {
            let why = if cfg!(feature = "mpi") {
                "-g starts every rank as a thread of one process; do not combine it with a multi-process launch"
            } else {
                "this build has no MPI, so it cannot join a multi-process launch; run one process with -g N, \
                 or rebuild with the default `mpi` feature"
            };
            crate::error::say(&format!("collbench: {why}"));
        }
        return exit::USAGE;
    }
    match cfg.start.threads {
        Some(n) => run_threads(n, cfg, env_plan, stop),
        None => run_default(cfg, env_plan, stop),
    }
}

#[cfg(feature = "mpi")]
fn run_default(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest) -> u8 {
    use crate::backend::Backend;
    use crate::backend::mpi::MpiBackend;

    let world = match crate::world::mpi::MpiWorld::init() {
        Ok(w) => w,
        Err(e) => {
            crate::error::say(&format!("collbench: cannot start MPI: {e}"));
            return exit::RUNTIME;
        }
    };
    let mpi_backend = |nodes: &crate::topology::Nodes| {
        MpiBackend::new(&world, nodes.clone(), cfg.timing.phase_times).map(|b| Box::new(b) as Box<dyn Backend>)
    };
    session::run(&world, cfg, Some(&mpi_backend), env_plan, stop)
}

/// Without MPI, a run is the single-process world of one rank.
#[cfg(not(feature = "mpi"))]
fn run_default(cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest) -> u8 {
    run_threads(1, cfg, env_plan, stop)
}

/// `-g N`: N ranks, one thread each; the job's code is the worst rank's.
fn run_threads(n: usize, cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest) -> u8 {
    use crate::world::threads::ThreadWorld;

    let worlds = ThreadWorld::create(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = worlds
            .iter()
            .map(|world| scope.spawn(move || session::run(world, cfg, None, env_plan, stop)))
            .collect();
        // A rank that panicked has ended the process in the panic hook.
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(exit::RUNTIME))
            .max()
            .unwrap_or(exit::OK)
    })
}

mod session {
    use std::path::PathBuf;

    use super::*;
    use crate::backend::{Backend, TransportQuery};
    use crate::engine::digest::check_same_plan;
    use crate::engine::plan::available_memory;
    use crate::engine::stop::signal_name;
    use crate::engine::watchdog::Watchdog;
    use crate::engine::{Engine, Plan, RunContext};
    use crate::report::csv::CsvSink;
    use crate::report::json::JsonSink;
    use crate::report::progress::Progress;
    use crate::report::record::Extras;
    use crate::report::table::TableSink;
    use crate::report::{RankSummary, Reporter, RunInfo, Sink};
    use crate::topology::Nodes;
    use crate::topology::observe::{self, Observed};
    use crate::types::human_bytes;
    use crate::world::World;

    /// Makes the mpi backend over these nodes, where the control plane is
    /// MPI.
    pub type MakeMpi<'a> = &'a dyn Fn(&Nodes) -> Result<Box<dyn Backend>, Error>;

    /// Longest per-rank text exchanged for the transport observed.
    const OBSERVED_BYTES: usize = 512;
    /// Longest GPU model name exchanged.
    const GPU_MODEL_BYTES: usize = 128;

    struct Setup {
        backend: Box<dyn Backend>,
        plan: Plan,
        /// Real hosts, or `--ranks-per-node` groups.
        nodes: Nodes,
        /// This rank's view of the transport.
        observed: Observed,
        /// This rank's GPU model, where it has one.
        gpu: Option<String>,
        /// Rank 0 only.
        outputs: Option<(Reporter, RunInfo)>,
    }

    /// What the NCCL bootstrap reads of the configuration, under the names
    /// it reads them by (a build without NCCL reads none of it).
    #[cfg_attr(not(feature = "nccl"), allow(dead_code))]
    struct NcclStart {
        nccl_lib: Option<PathBuf>,
        hierarchies: Vec<crate::topology::Hierarchy>,
        no_comm_split: bool,
        register: bool,
        phase_times: bool,
        backend: BackendChoice,
        trace_bootstrap: Option<PathBuf>,
    }

    impl NcclStart {
        fn of(cfg: &RunConfig) -> NcclStart {
            NcclStart {
                nccl_lib: cfg.start.nccl_lib.clone(),
                hierarchies: cfg.plan.hierarchies.clone(),
                no_comm_split: cfg.hooks.no_comm_split,
                register: cfg.timing.register,
                phase_times: cfg.timing.phase_times,
                backend: cfg.start.backend,
                trace_bootstrap: cfg.hooks.trace_bootstrap.clone(),
            }
        }
    }

    /// The backend every rank agreed on, and what the header says about it.
    struct Chosen {
        backend: Box<dyn Backend>,
        note: Option<String>,
    }

    pub fn run<W: World>(
        world: &W,
        cfg: &RunConfig,
        mpi_backend: Option<MakeMpi<'_>>,
        env_plan: &EnvPlan,
        stop: &StopRequest,
    ) -> u8 {
        let watchdog = cfg
            .timing
            .timeout
            .map(|t| Watchdog::start(t, format!("rank {} on {}", world.rank(), world.host())));
        if let Some(w) = &watchdog {
            w.watch("the set-up (plan check, communicators, output files)");
        }
        if let Err(failed) = world.agree(check_same_plan(world, &cfg.digest)) {
            return failed.code;
        }
        let nodes = match world.agree(nodes_of(world, cfg)) {
            Ok(nodes) => nodes,
            Err(failed) => return failed.code,
        };
        let chosen = match choose_backend(world, cfg, &nodes, mpi_backend) {
            Ok(c) => c,
            Err(code) => return code,
        };
        // Every rank gets here (a failed choice ended every rank above), so
        // this collective cannot hang.
        let device_free = world.min_u64(chosen.backend.device_free_bytes().unwrap_or(u64::MAX));
        let setup = prepare(world, cfg, chosen, device_free, nodes, env_plan, stop);
        let Setup {
            mut backend,
            plan,
            nodes,
            observed,
            gpu,
            outputs,
        } = match world.agree(setup) {
            Ok(s) => s,
            Err(failed) => {
                // Another rank failed: remove the files this one created.
                if let Some(Setup {
                    outputs: Some((mut reporter, _)),
                    ..
                }) = failed.local
                {
                    reporter.discard();
                }
                return failed.code;
            }
        };
        // Every rank set up: exchanging views cannot hang now.
        let transport_observed = observe::merge(&world.all_gather_text(&observed.text, OBSERVED_BYTES));
        let gpus = world.all_gather_text(gpu.as_deref().unwrap_or(""), GPU_MODEL_BYTES);
        let (mut reporter, mut info) = match outputs {
            Some((reporter, info)) => (Some(reporter), Some(info)),
            None => (None, None),
        };
        if let Some(info) = info.as_mut() {
            info.transport_observed = transport_observed.clone();
            info.transport_notes = env_plan.describe(backend.name() == BackendKind::Nccl.name());
            info.transport_notes.extend(observed.note.clone());
            for (rank, model) in info.ranks.iter_mut().zip(gpus) {
                rank.gpu = (!model.is_empty()).then_some(model);
            }
        }
        let ctx = context(world, &nodes, &*backend, cfg, &transport_observed, info.as_ref());
        if let (Some(rep), Some(info)) = (reporter.as_mut(), info.as_ref())
            && let Err(e) = rep.begin(info)
        {
            fail(world, &e);
        }

        let sweep = Engine::new(world, backend.as_mut(), &cfg.timing, &ctx)
            .with_injected_errors(cfg.hooks.inject_error)
            .with_watchdog(watchdog.as_ref())
            .with_stop(stop.clone())
            .run(&plan, |record| match reporter.as_mut() {
                Some(rep) => rep.record(record),
                None => Ok(()),
            });
        let summary = match sweep {
            Ok(summary) => summary,
            Err(e) => fail(world, &e),
        };

        let mut code = exit::OK;
        if let (Some(rep), Some(info)) = (reporter.as_mut(), info.as_ref())
            && let Err(e) = rep.finish(info, &summary)
        {
            crate::error::say(&world.error_line(&e));
            code = e.exit_code();
        }
        if summary.wrong > 0 {
            let e = Error::Validation {
                wrong: summary.wrong,
                points: summary.failed_points,
                checked: summary.checked_points,
            };
            if world.rank() == 0 {
                crate::error::say(&world.error_line(&e));
            }
            code = code.max(e.exit_code());
        }
        if world.rank() == 0
            && cfg.plan.hierarchies.len() > 1
            && summary.stopped_by.is_none()
            && let Some(info) = &info
        {
            print_mode_comparison(&info.csv);
        }
        if let Some(signal) = summary.stopped_by {
            if world.rank() == 0 {
                let cycles = cfg.timing.cycles;
                let planned = if cycles == 0 {
                    String::new()
                } else {
                    format!(" of {}", plan.points() as u64 * cycles)
                };
                crate::error::say(&format!(
                    "collbench: stopped by {} after {}{planned} points; the run is incomplete, every finished point is in the CSV",
                    signal_name(signal),
                    summary.points,
                ));
            }
            code = 128 + signal as u8;
        }
        code
    }

    /// Flat against hierarchical, per size, from the CSV just written: the
    /// same view as `collbench compare --by hierarchy FILE`, after the
    /// table.
    fn print_mode_comparison(csv: &std::path::Path) {
        use crate::report::compare::{Metric, by_mode, input, text};
        let report = input::read_file(csv).and_then(|rows| {
            let all_reduce: Vec<_> = rows
                .into_iter()
                .filter(|r| r.record.collective == "all_reduce")
                .collect();
            by_mode::compare_modes(
                "this run",
                &all_reduce,
                by_mode::Dimension::Hierarchy,
                Metric::Busbw,
                None,
            )
        });
        match report {
            // '#' keeps the table's rule: lines without it are data rows.
            Ok(report) => {
                for line in text::modes(&report).lines() {
                    println!("# {line}");
                }
            }
            Err(e) => crate::error::say(&format!("collbench: warning: no hierarchy comparison: {e}")),
        }
    }

    /// Prints this rank's failure and takes the whole job down.
    fn fail<W: World>(world: &W, e: &Error) -> ! {
        crate::error::say(&world.error_line(e));
        world.abort(e.exit_code())
    }

    /// Real hosts, or `--ranks-per-node` groups of consecutive ranks.
    fn nodes_of<W: World>(world: &W, cfg: &RunConfig) -> Result<Nodes, Error> {
        match cfg.plan.ranks_per_node {
            Some(k) => {
                let hosts: Vec<String> = world.ranks().iter().map(|r| r.host.clone()).collect();
                Nodes::consecutive(k, &hosts)
            }
            None => Ok(world.nodes().clone()),
        }
    }

    /// Picks the data plane. `auto` takes nccl only when every rank has a
    /// GPU and libnccl, so that all ranks pick the same. A failure is agreed
    /// on (printed once) and returned as the exit code.
    fn choose_backend<W: World>(
        world: &W,
        cfg: &RunConfig,
        nodes: &Nodes,
        mpi_backend: Option<MakeMpi<'_>>,
    ) -> Result<Chosen, u8> {
        let agreed_mpi = |note: Option<String>, make: MakeMpi<'_>| -> Result<Chosen, u8> {
            let backend = world.agree(make(nodes)).map_err(|d| d.code)?;
            Ok(Chosen { backend, note })
        };
        let nccl_cfg = NcclStart::of(cfg);
        let mpi = BackendChoice::Only(BackendKind::Mpi);
        match (cfg.start.backend, mpi_backend) {
            (choice, Some(make)) if choice == mpi => agreed_mpi(None, make),
            (choice, None) if choice == mpi => {
                let e: Result<Chosen, Error> = Err(Error::usage(
                    "the mpi backend needs the MPI control plane: launch with mpirun and without -g, or use --backend nccl",
                ));
                world.agree(e).map_err(|d| d.code)
            }
            (BackendChoice::Only(_), _) => nccl::start(world, &nccl_cfg, nodes, None),
            // Without MPI, auto can only be nccl: its own errors say best
            // what is missing.
            (BackendChoice::Auto, None) => nccl::start(world, &nccl_cfg, nodes, None),
            // An MPI transport profile asks for the mpi backend.
            (BackendChoice::Auto, Some(make)) if cfg.start.transport.backend() == Some(BackendKind::Mpi) => agreed_mpi(
                Some(format!(
                    "auto: --transport {} is an MPI profile, using mpi",
                    cfg.start.transport.name()
                )),
                make,
            ),
            (BackendChoice::Auto, Some(make)) => match nccl::probe(world, &nccl_cfg) {
                Ok(library) => nccl::start(world, &nccl_cfg, nodes, Some(library)),
                Err(why) => agreed_mpi(Some(format!("auto: {why}, using mpi")), make),
            },
        }
    }

    /// Everything that can fail before the first collective, after the
    /// backend: plan, memory, output files (rank 0).
    fn prepare<W: World>(
        world: &W,
        cfg: &RunConfig,
        chosen: Chosen,
        device_free: u64,
        nodes: Nodes,
        env_plan: &EnvPlan,
        stop: &StopRequest,
    ) -> Result<Setup, Error> {
        let Chosen { mut backend, note } = chosen;
        let mut notes: Vec<String> = note.into_iter().collect();
        notes.extend(backend.notes());
        if cfg.start.backend == BackendChoice::Auto {
            let chosen = BackendKind::parse(backend.name())
                .ok_or_else(|| Error::runtime(format!("internal error: unknown backend {}", backend.name())))?;
            cfg.start.transport.check_backend(chosen, " (the backend auto chose)")?;
        }
        let observed = backend.observe_transport(&TransportQuery {
            profile: cfg.start.transport,
            nccl_log: &env_plan.nccl_log,
            hosts: world.nodes(),
        });
        observed.check(env_plan)?;
        let gpu = backend.gpu_model().or_else(crate::topology::machine::host_gpu_model);
        let extras = cfg.timing.extras();
        let mut plan = Plan::build(&cfg.plan, &extras, &nodes, backend.as_ref())?;
        if device_free != u64::MAX {
            let (fitted, lowered) = fit_to_device(cfg, &nodes, backend.as_ref(), plan, device_free)?;
            plan = fitted;
            notes.extend(lowered);
        }
        if let Some(available) = available_memory() {
            // memory is per host, whatever --ranks-per-node says
            plan.check_memory(world.nodes().local_size(world.rank()), available)?;
        }
        backend.reserve(&plan, cfg.timing.rotate)?;
        let backend_note = (!notes.is_empty()).then(|| notes.join("; "));
        let outputs = if world.rank() == 0 {
            Some(open_outputs(
                world,
                cfg,
                &nodes,
                backend.as_ref(),
                backend_note,
                &plan,
                stop,
            )?)
        } else {
            None
        };
        Ok(Setup {
            backend,
            plan,
            nodes,
            observed,
            gpu,
            outputs,
        })
    }

    /// GPU memory a backend leaves aside for the library's own buffers (NCCL
    /// connects peers lazily and allocates then): as nccl-tests, 1 GiB, or
    /// a tenth of the free memory where that is more.
    fn device_headroom(free: u64) -> u64 {
        (1u64 << 30).max(free / 10)
    }

    /// Lowers the largest size until the plan's buffers fit in the GPU
    /// memory every rank has free (as nccl-tests does), and says so.
    fn fit_to_device(
        cfg: &RunConfig,
        nodes: &Nodes,
        backend: &dyn Backend,
        plan: Plan,
        free: u64,
    ) -> Result<(Plan, Option<String>), Error> {
        let budget = free.saturating_sub(device_headroom(free));
        let need = |p: &Plan| p.peak_buffer_bytes().saturating_add(backend.scratch_bytes(p));
        if need(&plan) <= budget {
            return Ok((plan, None));
        }
        let sweep = cfg.plan.sweep;
        let extras = cfg.timing.extras();
        for &max in sweep.sizes().iter().rev().skip(1) {
            let mut smaller = cfg.plan.clone();
            smaller.sweep = crate::engine::plan::SizeSweep::new(sweep.min, max, sweep.step)?;
            let Ok(p) = Plan::build(&smaller, &extras, nodes, backend) else {
                continue;
            };
            if need(&p) <= budget {
                let note = format!(
                    "--maxbytes lowered from {} to {} to fit GPU memory ({} free)",
                    human_bytes(sweep.max),
                    human_bytes(max),
                    human_bytes(free)
                );
                return Ok((p, Some(note)));
            }
        }
        Err(Error::usage(format!(
            "even the smallest size needs {} of GPU memory per rank, more than the {} free; lower --minbytes",
            human_bytes(need(&plan)),
            human_bytes(free)
        )))
    }

    fn open_outputs<W: World>(
        world: &W,
        cfg: &RunConfig,
        nodes: &Nodes,
        backend: &dyn Backend,
        backend_note: Option<String>,
        plan: &Plan,
        stop: &StopRequest,
    ) -> Result<(Reporter, RunInfo), Error> {
        let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let run_id = run_id(&started, world.host());
        let out = &cfg.outputs;
        let csv_path = match &out.csv {
            Some(p) => p.clone(),
            None => {
                let dir = PathBuf::from("results");
                std::fs::create_dir_all(&dir)
                    .map_err(|e| Error::usage(format!("cannot create the results folder {}: {e}", dir.display())))?;
                dir.join(format!("{run_id}.csv"))
            }
        };
        // The JSON check creates only a temporary file, removed if the CSV
        // then fails; the CSV comes last so that no empty report is left.
        let json = match &out.json {
            Some(path) => Some(JsonSink::create(path, out.overwrite)?),
            None => None,
        };
        let t = &cfg.timing;
        let extras = Extras {
            per_iter: t.per_iter,
            phases: t.phase_times,
            cycle: t.cycles != 1,
            label: out.label.is_some(),
        };
        let csv = CsvSink::create(&csv_path, out.overwrite, extras)?;
        let total = (t.cycles != 0).then(|| plan.points() as u64 * t.cycles);
        let progress = Progress::new(out.progress, total);
        // Files first, the terminal last: a launcher that is ending the job
        // may stop reading a rank's standard output, and a blocked table
        // write must not keep a row or the JSON report from its file.
        let mut sinks: Vec<Box<dyn Sink>> = vec![Box::new(csv)];
        if let Some(json) = json {
            sinks.push(Box::new(json));
        }
        sinks.push(Box::new(
            TableSink::new(Box::new(std::io::stdout()), Some(progress.handle())).mute_on(stop.clone()),
        ));
        let info = RunInfo {
            run_id,
            collbench_version: env!("CARGO_PKG_VERSION").into(),
            started,
            command_line: std::env::args().collect(),
            backend: backend.name().into(),
            backend_version: backend.version(),
            backend_note,
            control_plane: world.library_version(),
            nranks: world.size(),
            nnodes: nodes.nnodes(),
            ranks_per_node: nodes.ranks_per_node(),
            hosts: world.nodes().hosts.clone(),
            virtual_nodes: nodes.is_virtual,
            ranks: world.ranks().iter().map(RankSummary::from).collect(),
            timing: cfg.timing.clone(),
            transport: cfg.start.transport.name().into(),
            // Filled in once every rank has observed its transport.
            transport_observed: observe::UNKNOWN.into(),
            transport_notes: Vec::new(),
            hierarchy: cfg
                .plan
                .hierarchies
                .iter()
                .map(|h| h.name())
                .collect::<Vec<_>>()
                .join(","),
            points: plan.points(),
            csv: csv_path,
            json: out.json.clone(),
            label: out.label.clone(),
        };
        Ok((Reporter::new(sinks, progress), info))
    }

    fn context<W: World>(
        world: &W,
        nodes: &Nodes,
        backend: &dyn Backend,
        cfg: &RunConfig,
        transport_observed: &str,
        info: Option<&RunInfo>,
    ) -> RunContext {
        RunContext {
            run_id: info.map(|i| i.run_id.clone()).unwrap_or_default(),
            host: world.host().into(),
            backend: backend.name().into(),
            backend_version: backend.version(),
            transport: cfg.start.transport.name().into(),
            transport_observed: transport_observed.into(),
            nnodes: nodes.nnodes(),
            ranks_per_node: nodes.ranks_per_node(),
            label: cfg.outputs.label.clone(),
        }
    }

    /// The NCCL data plane's start: library, unique id, GPU, communicator.
    #[cfg(feature = "nccl")]
    mod nccl {
        use super::*;
        use crate::backend::nccl::{
            DeviceError, LoadError, NcclBackend, NcclLibrary, Options, Placing, Registration, SubSource, UniqueId,
            device, id_count,
        };

        /// Whether this rank could run nccl, agreed over all ranks: `Ok`
        /// with the loaded library where every rank can, else why not (this
        /// rank's reason, or that another rank cannot).
        pub fn probe<W: World>(world: &W, cfg: &NcclStart) -> Result<NcclLibrary, String> {
            let local = local_probe(cfg);
            let everyone = world.min_u64(u64::from(local.is_ok())) == 1;
            match local {
                Ok(library) if everyone => Ok(library),
                Ok(_) => Err("another rank has no usable GPU or NCCL".into()),
                Err(why) => Err(why),
            }
        }

        /// GPU first (cheap, and the common reason on a laptop), then NCCL.
        fn local_probe(cfg: &NcclStart) -> Result<NcclLibrary, String> {
            match device::probe() {
                Ok(_) => {}
                Err(DeviceError::Driver(_)) => return Err("no CUDA driver".into()),
                Err(DeviceError::NoGpu { .. }) => return Err("no GPU visible".into()),
                Err(e) => return Err(format!("no usable GPU ({e})")),
            }
            NcclLibrary::find(cfg.nccl_lib.as_deref()).map_err(|e| match e {
                LoadError::NotFound { .. } => "a GPU but no NCCL library (see `collbench info`)".into(),
                other => format!("a GPU but {other}"),
            })
        }

        fn agreed<W: World, T>(world: &W, local: Result<T, Error>) -> Result<T, u8> {
            world.agree(local).map_err(|d| d.code)
        }

        /// Bootstrap, in steps every rank takes together: every rank loads
        /// libnccl; the ranks settle which optional calls they all have
        /// (ncclCommSplit for the hierarchical modes, ncclCommRegister for
        /// `-R`); rank 0 makes the unique id (and, for hierarchical modes
        /// without ncclCommSplit, one id per sub-communicator) and
        /// broadcasts them over the control plane; every rank opens its
        /// GPU; then the collective communicator initialisation. A failure
        /// before the last step is agreed on and printed once; a failure
        /// inside it takes the job down (peers may be waiting inside NCCL).
        pub fn start<W: World>(
            world: &W,
            cfg: &NcclStart,
            layout: &Nodes,
            found: Option<NcclLibrary>,
        ) -> Result<Chosen, u8> {
            let nccl_error = |e: &dyn std::fmt::Display| Error::runtime(format!("--backend nccl: {e}"));
            let library = match found {
                Some(library) => Ok(library),
                None => NcclLibrary::find(cfg.nccl_lib.as_deref()).map_err(|e| nccl_error(&e)),
            };
            let library = agreed(world, library)?;
            let everyone = |has: bool| world.min_u64(u64::from(has)) == 1;

            // Only runs that ask for them take these collective steps; every
            // rank has the same configuration, so all take the same ones.
            let hierarchical = cfg.hierarchies.iter().any(|h| !h.is_flat());
            let split = hierarchical && !cfg.no_comm_split && everyone(library.optional().comm_split);
            let group_ids = if hierarchical && !split { id_count(layout) } else { 0 };
            let registration = match cfg.register {
                false => Registration::Off,
                true if everyone(library.optional().comm_register) => Registration::On,
                true => Registration::Unavailable,
            };

            let ids = if world.rank() == 0 {
                (0..1 + group_ids)
                    .map(|_| library.unique_id().map(|id| id.0.to_vec()))
                    .collect::<Result<Vec<Vec<u8>>, _>>()
                    .map(|ids| ids.concat())
                    .map_err(|e| nccl_error(&e))
            } else {
                Ok(Vec::new())
            };
            let ids = agreed(world, ids)?;
            let ids = UniqueId::split_bundle(&world.broadcast_bytes(&ids), 1 + group_ids);
            let ids = agreed(world, ids.and_then(|ids| trace(cfg, world.rank(), &ids).map(|()| ids)))?;
            let (id, group_ids) = (ids[0], ids[1..].to_vec());
            let sub_source = match (hierarchical, split) {
                (false, _) => None,
                (true, true) => Some(SubSource::Split),
                (true, false) => Some(SubSource::Ids(group_ids)),
            };

            let nodes = world.nodes();
            let rank = world.rank();
            let placing = Placing {
                nranks: world.size(),
                rank,
                local_rank: nodes.local_rank(rank),
                local_ranks: nodes.local_size(rank),
                host: world.host().to_string(),
            };
            let device = NcclBackend::open_device(&placing).map_err(|e| nccl_error(&e));
            let device = agreed(world, device)?;

            let options = Options {
                nodes: layout.clone(),
                sub_source,
                time_phases: cfg.phase_times,
                registration,
            };
            match NcclBackend::init(library, device, &id, &placing, options) {
                Ok(backend) => Ok(Chosen {
                    backend: Box::new(backend),
                    note: (cfg.backend == BackendChoice::Auto)
                        .then(|| "auto: every rank has a GPU and NCCL, using nccl".to_string()),
                }),
                Err(e) => {
                    eprintln!("{}", world.error_line(&e));
                    world.abort(e.exit_code())
                }
            }
        }

        /// Test hook (`--trace-bootstrap DIR`): the ids this rank received,
        /// one per line (the flat communicator's first).
        fn trace(cfg: &NcclStart, rank: usize, ids: &[UniqueId]) -> Result<(), Error> {
            let Some(dir) = &cfg.trace_bootstrap else {
                return Ok(());
            };
            let path = dir.join(format!("rank-{rank}.id"));
            let text: String = ids.iter().map(|id| id.hex() + "\n").collect();
            std::fs::write(&path, text).map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))
        }
    }

    /// Without the nccl feature: `--backend nccl` is refused, `auto` is mpi.
    #[cfg(not(feature = "nccl"))]
    mod nccl {
        use super::*;

        pub fn probe<W: World>(_world: &W, _cfg: &NcclStart) -> Result<std::convert::Infallible, String> {
            Err("this build has no nccl backend".into())
        }

        pub fn start<W: World>(
            world: &W,
            _cfg: &NcclStart,
            _layout: &Nodes,
            _found: Option<std::convert::Infallible>,
        ) -> Result<Chosen, u8> {
            let e: Result<(), Error> = Err(Error::usage(
                "--backend nccl: this build has no nccl backend; rebuild with the `nccl` feature (on by default)",
            ));
            match world.agree(e) {
                Ok(()) => Err(exit::USAGE),
                Err(d) => Err(d.code),
            }
        }
    }

    /// `20261129T084645Z-host-1234`: sortable, unique per launch, safe in
    /// file names.
    fn run_id(started: &str, host: &str) -> String {
        let stamp: String = started.chars().filter(|c| *c != '-' && *c != ':').collect();
        let host: String = host
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' })
            .take(32)
            .collect();
        format!("{stamp}-{host}-{}", std::process::id())
    }
}
