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

use crate::cli::{Cli, Command, InfoArgs, RunArgs};
use crate::config::RunConfig;
use crate::error::exit;
use crate::world::{launcher_rank, launcher_size};

pub fn main() -> ExitCode {
    install_panic_hook();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return ExitCode::from(clap_error(e)),
    };
    let code = match cli.command {
        Command::Run(args) => run_command(&args),
        Command::Info(args) => info_command(&args),
    };
    ExitCode::from(code)
}

/// Help and version print as clap formats them; errors become one line.
fn clap_error(e: clap::Error) -> u8 {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            exit::OK
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            exit::USAGE
        }
        _ => {
            if is_first_rank() {
                let text = e.render().to_string();
                let first = text.lines().next().unwrap_or("invalid arguments");
                let msg = first.strip_prefix("error: ").unwrap_or(first);
                eprintln!("collbench: {msg} (see 'collbench run --help')");
            }
            exit::USAGE
        }
    }
}

/// True unless a launcher says this process is not rank 0: errors found
/// before MPI starts are printed once, not once per rank.
fn is_first_rank() -> bool {
    launcher_rank().is_none_or(|r| r == 0)
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
        eprintln!("collbench: {rank}internal error: {payload}{place}; please report it");
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

fn run_command(args: &RunArgs) -> u8 {
    let cfg = match RunConfig::load(args) {
        Ok(cfg) => cfg,
        Err(e) => {
            if is_first_rank() {
                eprintln!("collbench: {e}");
            }
            return e.exit_code();
        }
    };
    run_with_control_plane(&cfg)
}

/// Picks the control plane: one thread per rank with `-g N` (and always in
/// a build without MPI), else MPI.
fn run_with_control_plane(cfg: &RunConfig) -> u8 {
    if launcher_size().is_some_and(|n| n > 1) && (cfg.threads.is_some() || !cfg!(feature = "mpi")) {
        if is_first_rank() {
            let why = if cfg!(feature = "mpi") {
                "-g starts every rank as a thread of one process; do not combine it with a multi-process launch"
            } else {
                "this build has no MPI, so it cannot join a multi-process launch; run one process with -g N, \
                 or rebuild with the default `mpi` feature"
            };
            eprintln!("collbench: {why}");
        }
        return exit::USAGE;
    }
    match cfg.threads {
        Some(n) => run_threads(n, cfg),
        None => run_default(cfg),
    }
}

#[cfg(feature = "mpi")]
fn run_default(cfg: &RunConfig) -> u8 {
    use crate::backend::Backend;
    use crate::backend::mpi::MpiBackend;

    let world = match crate::world::mpi::MpiWorld::init() {
        Ok(w) => w,
        Err(e) => {
            eprintln!("collbench: cannot start MPI: {e}");
            return exit::RUNTIME;
        }
    };
    let mpi_backend = || MpiBackend::new(&world).map(|b| Box::new(b) as Box<dyn Backend>);
    session::run(&world, cfg, Some(&mpi_backend))
}

/// Without MPI, a run is the single-process world of one rank.
#[cfg(not(feature = "mpi"))]
fn run_default(cfg: &RunConfig) -> u8 {
    run_threads(1, cfg)
}

/// `-g N`: N ranks, one thread each; the job's code is the worst rank's.
fn run_threads(n: usize, cfg: &RunConfig) -> u8 {
    use crate::world::threads::ThreadWorld;

    let worlds = ThreadWorld::create(n);
    std::thread::scope(|scope| {
        let handles: Vec<_> = worlds
            .iter()
            .map(|world| scope.spawn(move || session::run(world, cfg, None)))
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
    use crate::backend::Backend;
    use crate::config::BackendChoice;
    use crate::engine::plan::{available_memory, human_bytes};
    use crate::engine::{Engine, Plan, RunContext};
    use crate::error::Error;
    use crate::report::csv::CsvSink;
    use crate::report::json::JsonSink;
    use crate::report::progress::Progress;
    use crate::report::table::TableSink;
    use crate::report::{RankSummary, Reporter, RunInfo, Sink};
    use crate::world::World;

    /// Makes the mpi backend, where the control plane is MPI.
    pub type MakeMpi<'a> = &'a dyn Fn() -> Result<Box<dyn Backend>, Error>;

    struct Setup {
        backend: Box<dyn Backend>,
        plan: Plan,
        /// Rank 0 only.
        outputs: Option<(Reporter, RunInfo)>,
    }

    /// The backend every rank agreed on, and what the header says about it.
    struct Chosen {
        backend: Box<dyn Backend>,
        note: Option<String>,
    }

    pub fn run<W: World>(world: &W, cfg: &RunConfig, mpi_backend: Option<MakeMpi<'_>>) -> u8 {
        let chosen = match choose_backend(world, cfg, mpi_backend) {
            Ok(c) => c,
            Err(code) => return code,
        };
        // Every rank gets here (a failed choice ended every rank above), so
        // this collective cannot hang.
        let device_free = world.min_u64(chosen.backend.device_free_bytes().unwrap_or(u64::MAX));
        let setup = prepare(world, cfg, chosen, device_free);
        let Setup {
            mut backend,
            plan,
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
        let (mut reporter, info) = match outputs {
            Some((reporter, info)) => (Some(reporter), Some(info)),
            None => (None, None),
        };
        let ctx = context(world, &*backend, info.as_ref());
        if let (Some(rep), Some(info)) = (reporter.as_mut(), info.as_ref())
            && let Err(e) = rep.begin(info)
        {
            fail(world, &e);
        }

        let sweep = Engine::new(world, backend.as_mut(), cfg, &ctx).run(&plan, |record| match reporter.as_mut() {
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
            eprintln!("{}", world.error_line(&e));
            code = e.exit_code();
        }
        if summary.wrong > 0 {
            let e = Error::Validation {
                wrong: summary.wrong,
                points: summary.failed_points,
                checked: summary.checked_points,
            };
            if world.rank() == 0 {
                eprintln!("{}", world.error_line(&e));
            }
            code = code.max(e.exit_code());
        }
        code
    }

    /// Prints this rank's failure and takes the whole job down.
    fn fail<W: World>(world: &W, e: &Error) -> ! {
        eprintln!("{}", world.error_line(e));
        world.abort(e.exit_code())
    }

    /// Picks the data plane. `auto` takes nccl only when every rank has a
    /// GPU and libnccl, so that all ranks pick the same. A failure is agreed
    /// on (printed once) and returned as the exit code.
    fn choose_backend<W: World>(world: &W, cfg: &RunConfig, mpi_backend: Option<MakeMpi<'_>>) -> Result<Chosen, u8> {
        let agreed_mpi = |note: Option<String>, make: MakeMpi<'_>| -> Result<Chosen, u8> {
            let backend = world.agree(make()).map_err(|d| d.code)?;
            Ok(Chosen { backend, note })
        };
        match (cfg.backend, mpi_backend) {
            (BackendChoice::Mpi, Some(make)) => agreed_mpi(None, make),
            (BackendChoice::Mpi, None) => {
                let e: Result<Chosen, Error> = Err(Error::usage(
                    "the mpi backend needs the MPI control plane: launch with mpirun and without -g, or use --backend nccl",
                ));
                world.agree(e).map_err(|d| d.code)
            }
            (BackendChoice::Nccl, _) => nccl::start(world, cfg, None),
            // Without MPI, auto can only be nccl: its own errors say best
            // what is missing.
            (BackendChoice::Auto, None) => nccl::start(world, cfg, None),
            (BackendChoice::Auto, Some(make)) => match nccl::probe(world, cfg) {
                Ok(library) => nccl::start(world, cfg, Some(library)),
                Err(why) => agreed_mpi(Some(format!("auto: {why}, using mpi")), make),
            },
        }
    }

    /// Everything that can fail before the first collective, after the
    /// backend: plan, memory, output files (rank 0).
    fn prepare<W: World>(world: &W, cfg: &RunConfig, chosen: Chosen, device_free: u64) -> Result<Setup, Error> {
        let Chosen { mut backend, note } = chosen;
        let mut notes: Vec<String> = note.into_iter().collect();
        let mut plan = Plan::build(cfg, world.size(), backend.as_ref())?;
        if device_free != u64::MAX {
            let (fitted, lowered) = fit_to_device(cfg, world.size(), backend.as_ref(), plan, device_free)?;
            plan = fitted;
            notes.extend(lowered);
        }
        if let Some(available) = available_memory() {
            plan.check_memory(world.nodes().local_ranks(world.rank()), available)?;
        }
        backend.reserve(&plan)?;
        let backend_note = (!notes.is_empty()).then(|| notes.join("; "));
        let outputs = if world.rank() == 0 {
            Some(open_outputs(world, cfg, backend.as_ref(), backend_note, &plan)?)
        } else {
            None
        };
        Ok(Setup { backend, plan, outputs })
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
        nranks: usize,
        backend: &dyn Backend,
        plan: Plan,
        free: u64,
    ) -> Result<(Plan, Option<String>), Error> {
        let budget = free.saturating_sub(device_headroom(free));
        let need = |p: &Plan| p.peak_buffer_bytes();
        if need(&plan) <= budget {
            return Ok((plan, None));
        }
        let sizes = cfg.sweep.sizes();
        for &max in sizes.iter().rev().skip(1) {
            let mut smaller = cfg.clone();
            smaller.sweep = crate::config::SizeSweep::new(cfg.sweep.min, max, cfg.sweep.step)?;
            let Ok(p) = Plan::build(&smaller, nranks, backend) else {
                continue;
            };
            if need(&p) <= budget {
                let note = format!(
                    "--maxbytes lowered from {} to {} to fit GPU memory ({} free)",
                    human_bytes(cfg.sweep.max),
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
        backend: &dyn Backend,
        backend_note: Option<String>,
        plan: &Plan,
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
        let csv = CsvSink::create(&csv_path, cfg.overwrite)?;
        let progress = Progress::new(cfg.progress, plan.points());
        let mut sinks: Vec<Box<dyn Sink>> = vec![
            Box::new(TableSink::new(Box::new(std::io::stdout()), Some(progress.handle()))),
            Box::new(csv),
        ];
        if let Some(json) = json {
            sinks.push(Box::new(json));
        }
        let nodes = world.nodes();
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
            hosts: nodes.hosts.clone(),
            ranks: world.ranks().iter().map(RankSummary::from).collect(),
            iters: cfg.iters,
            warmup: cfg.warmup,
            check: cfg.check,
            average: cfg.average.name().into(),
            blocking: cfg.blocking,
            transport: "auto".into(),
            hierarchy: "flat".into(),
            points: plan.points(),
            csv: csv_path,
            json: cfg.json.clone(),
        };
        Ok((Reporter::new(sinks, progress), info))
    }

    fn context<W: World>(world: &W, backend: &dyn Backend, info: Option<&RunInfo>) -> RunContext {
        let nodes = world.nodes();
        RunContext {
            run_id: info.map(|i| i.run_id.clone()).unwrap_or_default(),
            host: world.host().into(),
            backend: backend.name().into(),
            backend_version: backend.version(),
            transport: "auto".into(),
            transport_observed: "unknown".into(),
            hierarchy: "flat".into(),
            nnodes: nodes.nnodes(),
            ranks_per_node: nodes.ranks_per_node(),
        }
    }

    /// The NCCL data plane's start: library, unique id, GPU, communicator.
    #[cfg(feature = "nccl")]
    mod nccl {
        use super::*;
        use crate::backend::nccl::{DeviceError, LoadError, NcclBackend, NcclLibrary, Placing, UniqueId, device};

        /// Whether this rank could run nccl, agreed over all ranks: `Ok`
        /// with the loaded library where every rank can, else why not (this
        /// rank's reason, or that another rank cannot).
        pub fn probe<W: World>(world: &W, cfg: &RunConfig) -> Result<NcclLibrary, String> {
            let local = local_probe(cfg);
            let everyone = world.min_u64(u64::from(local.is_ok())) == 1;
            match local {
                Ok(library) if everyone => Ok(library),
                Ok(_) => Err("another rank has no usable GPU or NCCL".into()),
                Err(why) => Err(why),
            }
        }

        /// GPU first (cheap, and the common reason on a laptop), then NCCL.
        fn local_probe(cfg: &RunConfig) -> Result<NcclLibrary, String> {
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
        /// libnccl; rank 0 makes the unique id and broadcasts it over MPI;
        /// every rank opens its GPU; then the collective communicator
        /// initialisation. A failure before the last step is agreed on and
        /// printed once; a failure inside it takes the job down (peers may
        /// be waiting inside NCCL).
        pub fn start<W: World>(world: &W, cfg: &RunConfig, found: Option<NcclLibrary>) -> Result<Chosen, u8> {
            let nccl_error = |e: &dyn std::fmt::Display| Error::runtime(format!("--backend nccl: {e}"));
            let library = match found {
                Some(library) => Ok(library),
                None => NcclLibrary::find(cfg.nccl_lib.as_deref()).map_err(|e| nccl_error(&e)),
            };
            let library = agreed(world, library)?;

            let id = if world.rank() == 0 {
                library.unique_id().map(|id| id.0.to_vec()).map_err(|e| nccl_error(&e))
            } else {
                Ok(Vec::new())
            };
            let id = agreed(world, id)?;
            let id = UniqueId::from_bytes(&world.broadcast_bytes(&id));
            let id = agreed(world, id.and_then(|id| trace(cfg, world.rank(), &id).map(|()| id)))?;

            let nodes = world.nodes();
            let rank = world.rank();
            let node = nodes.node_of_rank[rank];
            let placing = Placing {
                nranks: world.size(),
                rank,
                local_rank: nodes.node_of_rank[..rank].iter().filter(|&&n| n == node).count(),
                local_ranks: nodes.local_ranks(rank),
                host: world.host().to_string(),
            };
            let device = NcclBackend::open_device(&placing).map_err(|e| nccl_error(&e));
            let device = agreed(world, device)?;

            match NcclBackend::init(library, device, &id, &placing) {
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

        /// Test hook (`--trace-bootstrap DIR`): the id this rank received.
        fn trace(cfg: &RunConfig, rank: usize, id: &UniqueId) -> Result<(), Error> {
            let Some(dir) = &cfg.trace_bootstrap else {
                return Ok(());
            };
            let path = dir.join(format!("rank-{rank}.id"));
            std::fs::write(&path, id.hex() + "\n")
                .map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))
        }
    }

    /// Without the nccl feature: `--backend nccl` is refused, `auto` is mpi.
    #[cfg(not(feature = "nccl"))]
    mod nccl {
        use super::*;

        pub fn probe<W: World>(_world: &W, _cfg: &RunConfig) -> Result<std::convert::Infallible, String> {
            Err("this build has no nccl backend".into())
        }

        pub fn start<W: World>(
            world: &W,
            _cfg: &RunConfig,
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
