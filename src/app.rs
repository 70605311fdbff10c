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

use crate::cli::{Cli, Command, CompareArgs, ImportArgs, PlotArgs, RunArgs, TopoArgs};
use crate::config::RunConfig;
use crate::error::{Error, exit};
use crate::topology::profile::{self, EnvPlan, Prepared};
use crate::world::launcher_rank;

pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(clap_error(e)),
    };
    let code = match cli.command {
        Command::Run(args) => run_command(&args),
        Command::Compare(args) => report_command(|| compare_command(&args)),
        Command::Plot(args) => report_command(|| plot_command(&args)),
        Command::Import(args) => report_command(|| import_command(&args)),
        Command::Topo(args) => topo_command(&args),
        Command::Suite(args) => report_command(|| crate::suite::run(&args)),
    };
    ExitCode::from(code)
}

/// Help and version print as clap formats them (once, on rank 0); errors
/// become one line.
fn clap_error(e: clap::Error) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            if is_first_rank() {
                let _ = e.print();
            }
            if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                exit::USAGE
            } else {
                exit::OK
            }
        }
        _ => {
            let text = e.render().to_string();
            let first = text.lines().next().unwrap_or("invalid arguments");
            let msg = first.strip_prefix("error: ").unwrap_or(first);
            report_early_error(&Error::usage(format!(
                "{msg} (see 'collbench {} --help')",
                subcommand_name()
            )))
        }
    }
}

/// The subcommand the user typed, for pointing at the right help.
fn subcommand_name() -> &'static str {
    let typed = std::env::args().nth(1).unwrap_or_default();
    ["compare", "plot", "import", "topo", "suite"]
        .into_iter()
        .find(|c| *c == typed)
        .unwrap_or("run")
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
}

#[cfg(not(feature = "mpi"))]
fn abort_job_after_panic() {}

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
    use crate::report::compare::{self, Format, Metric, by_mode};
    let metric = Metric::parse(&args.metric).unwrap_or(Metric::Busbw);
    let format = Format::parse(&args.format).unwrap_or(Format::Table);
    let threshold_pct = args.threshold.unwrap_or(compare::DEFAULT_THRESHOLD_PCT);
    if !threshold_pct.is_finite() || threshold_pct < 0.0 {
        return Err(Error::usage(format!(
            "--threshold {threshold_pct}: give a percentage of 0 or more"
        )));
    }
    if let Some(by) = &args.by {
        let dimension = by_mode::Dimension::parse(by).unwrap_or(by_mode::Dimension::Hierarchy);
        let [file] = args.files.as_slice() else {
            return Err(Error::usage(format!(
                "--by {by} compares the modes inside one CSV: give exactly one file"
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
    use crate::report::compare::Metric;
    use crate::report::plot::{self, PlotOptions, SeriesBy};
    let options = PlotOptions {
        inputs: args.files.clone(),
        output: args.output.clone(),
        metric: Metric::parse(&args.metric).unwrap_or(Metric::Busbw),
        by: SeriesBy::parse(&args.by).unwrap_or(SeriesBy::Run),
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
    use crate::collective::Collective;
    use crate::report::import::{self, ImportOptions, Source};
    let collective = match &args.collective {
        Some(name) => Some(
            Collective::parse(name)
                .ok_or_else(|| Error::usage(format!("--collective: unknown collective '{name}'")))?,
        ),
        None => None,
    };
    if args.nranks == Some(0) {
        return Err(Error::usage("--nranks must be at least 1"));
    }
    let options = ImportOptions {
        source: Source::parse(&args.from).unwrap_or(Source::NcclTests),
        files: args.files.clone(),
        output: args.output.clone(),
        collective,
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

fn run_command(args: &RunArgs) -> u8 {
    if args
        .transport
        .as_deref()
        .is_some_and(|t| t.trim().eq_ignore_ascii_case("help"))
    {
        if is_first_rank() {
            print_out(&profile::help_text());
        }
        return exit::OK;
    }
    let cfg = match RunConfig::load(args) {
        Ok(cfg) => cfg,
        Err(e) => return report_early_error(&e),
    };
    let env_plan = match apply_transport(&cfg) {
        Ok(plan) => plan,
        Err(e) => return report_early_error(&e),
    };
    run_with_control_plane(&cfg, &env_plan)
}

/// Applies `--transport` before MPI starts: when the profile (or NCCL's
/// private log) needs variables the environment lacks, this process is
/// replaced by the same binary with them added, and does not return.
fn apply_transport(cfg: &RunConfig) -> Result<EnvPlan, Error> {
    let nccl_log = may_use_nccl(cfg)
        .then(|| profile::private_nccl_log(&std::env::temp_dir(), &crate::world::hostname(), std::process::id()));
    match profile::prepare(cfg.transport, nccl_log, &profile::process_env) {
        Prepared::Ready(plan) => Ok(plan),
        Prepared::Reexec(plan) => Err(profile::reexec(&plan)),
    }
}

/// Whether this run may end up on NCCL, whose INFO log collbench then
/// reads to observe the transport. This build has no NCCL backend; with
/// one, it is `cfg.backend != BackendChoice::Mpi`.
fn may_use_nccl(_cfg: &RunConfig) -> bool {
    false
}

#[cfg(feature = "mpi")]
fn run_with_control_plane(cfg: &RunConfig, env_plan: &EnvPlan) -> u8 {
    let world = match crate::world::mpi::MpiWorld::init() {
        Ok(w) => w,
        Err(e) => {
            crate::error::say(&format!("collbench: cannot start MPI: {e}"));
            return exit::RUNTIME;
        }
    };
    session::run(&world, cfg, env_plan)
}

#[cfg(not(feature = "mpi"))]
fn run_with_control_plane(_cfg: &RunConfig, _env_plan: &EnvPlan) -> u8 {
    crate::error::say("collbench: this build has no control plane: rebuild with the default `mpi` feature");
    exit::USAGE
}

#[cfg(feature = "mpi")]
mod session {
    use std::path::PathBuf;

    use super::*;
    use crate::backend::mpi::MpiBackend;
    use crate::backend::{Backend, TransportQuery};
    use crate::config::BackendChoice;
    use crate::engine::digest::check_same_plan;
    use crate::engine::plan::available_memory;
    use crate::engine::stop::{StopRequest, signal_name};
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
    use crate::world::World;
    use crate::world::mpi::MpiWorld;

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

    pub fn run(world: &MpiWorld, cfg: &RunConfig, env_plan: &EnvPlan) -> u8 {
        let watchdog = cfg
            .timeout
            .map(|t| Watchdog::start(t, format!("rank {} on {}", world.rank(), world.host())));
        if let Some(w) = &watchdog {
            w.watch("the set-up (plan check, communicators, output files)");
        }
        let stop = match StopRequest::install() {
            Ok(stop) => stop,
            Err(e) => {
                crate::error::say(&world.error_line(&e));
                return e.exit_code();
            }
        };
        if let Err(failed) = world.agree(check_same_plan(world, &cfg.digest_fields())) {
            return failed.code;
        }
        let setup = prepare(world, cfg, env_plan, &stop);
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
            info.transport_notes = env_plan.describe();
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

        let sweep = Engine::new(world, backend.as_mut(), cfg, &ctx)
            .with_watchdog(watchdog.as_ref())
            .with_stop(stop)
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
            && cfg.hierarchies.len() > 1
            && summary.stopped_by.is_none()
            && let Some(info) = &info
        {
            print_mode_comparison(&info.csv);
        }
        if let Some(signal) = summary.stopped_by {
            if world.rank() == 0 {
                let planned = if cfg.cycles == 0 {
                    String::new()
                } else {
                    format!(" of {}", plan.points() as u64 * cfg.cycles)
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
    fn fail(world: &MpiWorld, e: &Error) -> ! {
        crate::error::say(&world.error_line(e));
        world.abort(e.exit_code())
    }

    /// Everything that can fail before the first collective: backend, the
    /// transport it uses, plan, memory, output files (rank 0).
    fn prepare(world: &MpiWorld, cfg: &RunConfig, env_plan: &EnvPlan, stop: &StopRequest) -> Result<Setup, Error> {
        let nodes = match cfg.ranks_per_node {
            Some(k) => {
                let hosts: Vec<String> = world.ranks().iter().map(|r| r.host.clone()).collect();
                Nodes::consecutive(k, &hosts)?
            }
            None => world.nodes().clone(),
        };
        let mpi = || MpiBackend::new(world, nodes.clone(), cfg.phase_times);
        let (backend, backend_note): (Box<dyn Backend>, Option<String>) = match cfg.backend {
            BackendChoice::Mpi => (Box::new(mpi()?), None),
            BackendChoice::Auto => (
                Box::new(mpi()?),
                Some("auto: no GPU backend in this build, using mpi".into()),
            ),
        };
        if cfg.backend == BackendChoice::Auto {
            cfg.transport
                .check_backend(backend.name(), " (auto found no GPU backend in this build)")?;
        }
        let observed = backend.observe_transport(&TransportQuery {
            profile: cfg.transport,
            nccl_log: &env_plan.nccl_log,
            hosts: world.nodes(),
        });
        observed.check(env_plan)?;
        let gpu = backend.gpu_model().or_else(crate::topology::machine::host_gpu_model);
        let plan = Plan::build(cfg, &nodes, backend.as_ref())?;
        if let Some(available) = available_memory() {
            // memory is per host, whatever --ranks-per-node says
            plan.check_memory(world.nodes().local_size(world.rank()), available)?;
        }
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

    fn open_outputs(
        world: &MpiWorld,
        cfg: &RunConfig,
        nodes: &Nodes,
        backend: &dyn Backend,
        backend_note: Option<String>,
        plan: &Plan,
        stop: &StopRequest,
    ) -> Result<(Reporter, RunInfo), Error> {
        let started = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        let run_id = run_id(&started, world.host());
        let csv_path = match &cfg.csv {
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
        let json = match &cfg.json {
            Some(path) => Some(JsonSink::create(path, cfg.overwrite)?),
            None => None,
        };
        let extras = Extras {
            phases: cfg.phase_times,
            cycle: cfg.cycles != 1,
        };
        let csv = CsvSink::create(&csv_path, cfg.overwrite, extras)?;
        let total = (cfg.cycles != 0).then(|| plan.points() as u64 * cfg.cycles);
        let progress = Progress::new(cfg.progress, total);
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
            iters: cfg.iters,
            warmup: cfg.warmup,
            check: cfg.check,
            average: cfg.average.name().into(),
            blocking: cfg.blocking,
            transport: cfg.transport.name().into(),
            // Filled in once every rank has observed its transport.
            transport_observed: observe::UNKNOWN.into(),
            transport_notes: Vec::new(),
            hierarchy: cfg.hierarchies.iter().map(|h| h.name()).collect::<Vec<_>>().join(","),
            points: plan.points(),
            cycles: cfg.cycles,
            csv: csv_path,
            json: cfg.json.clone(),
        };
        Ok((Reporter::new(sinks, progress), info))
    }

    fn context(
        world: &MpiWorld,
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
            transport: cfg.transport.name().into(),
            transport_observed: transport_observed.into(),
            nnodes: nodes.nnodes(),
            ranks_per_node: nodes.ranks_per_node(),
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
