//! `collbench links` on every rank: the set-up the ranks take together
//! (digest, nodes, the schedule and the topology, backend, buffers, rank
//! 0's files), then the matrix, or the finder with `--find`, on a
//! `BackendMeasurer`, then rank 0's outputs (the pairs CSV round by round,
//! the matrix and the report on screen, the JSON and the heatmap) and the
//! verdict (docs/links.md).
//!
//! `config::LinksJob` is the command's options; `BackendMeasurer`
//! (`measurer`) is the `links::Measurer` of a real backend, for this
//! command and any other that measures pairs.
//!
//! Must not: print except through `report::print_out` and `error::say`;
//! format reports (`links::output`, `links::summary`) or judge (`links`).

pub mod measurer;

use std::path::PathBuf;

use super::Session;
use super::prepare::Prepared;
use crate::backend::Backend;
use crate::config::LinksJob;
use crate::doctor::kept::{self, KeptLogs};
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, exit, say};
use crate::links::finder::FinderConfig;
use crate::links::output::{self, PairRow, RunMeta};
use crate::links::rule::{Analysis, Rule, analyse};
use crate::links::summary::{self, Header};
use crate::links::{self, Endpoint, Layout, Matrix, PairResult, Probe, Report, Schedule, schedule};
use crate::plan::Reservation;
use crate::report::csv::CsvFile;
use crate::report::print_out;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{BackendKind, TimingMethod};
use crate::world::World;
pub use measurer::BackendMeasurer;

/// Every rank as the matrix knows it: its node's name (the host, or
/// `HOST-nN` for the N-th `--ranks-per-node` group) and its index there.
/// The backends do not report GPU bus ids or NICs: those stay empty.
pub fn endpoints(world: &dyn World, nodes: &Nodes) -> Vec<Endpoint> {
    (0..world.size())
        .map(|rank| {
            let node = nodes.node_of_rank[rank];
            let host = if nodes.is_virtual {
                format!("{}-n{node}", nodes.hosts[node])
            } else {
                world.ranks()[rank].host.clone()
            };
            Endpoint {
                rank,
                host,
                local: nodes.local_rank(rank),
                gpu: None,
                nic: None,
            }
        })
        .collect()
}

/// Rank 0's files, created before anything is measured.
struct Files {
    csv: CsvFile,
    csv_path: PathBuf,
    json: Option<PathBuf>,
    heatmap: Option<PathBuf>,
}

impl Files {
    /// Removes what was created (a launch that will not measure).
    fn discard(mut self) {
        self.csv.discard();
        for p in self.json.iter().chain(&self.heatmap) {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Everything set up on every rank.
struct Ready {
    schedule: Schedule,
    layout: Layout,
    probe: Probe,
    /// The all-reduce bisection can run (the backend has sub-communicators).
    collectives: bool,
    endpoints: Vec<Endpoint>,
    meta: RunMeta,
    header: Header,
    /// Rank 0, on NCCL: the ranks' NCCL logs, kept beside the CSV, and
    /// what the doctor found in them.
    nccl_log: Option<KeptLogs>,
}

/// The rows' shared columns, before any pair is measured.
fn skeleton(ready: &Ready) -> Matrix {
    Matrix {
        level: ready.schedule.level,
        isolated: ready.schedule.isolated,
        endpoints: ready.endpoints.clone(),
        units: ready.schedule.units(),
        rounds: ready.schedule.rounds.len(),
        probe: ready.probe,
        pairs: Vec::new(),
    }
}

/// The matrix and its analysis; with `--find`, the finder's, and its
/// report.
fn measure_or_find(
    measurer: &mut dyn links::Measurer,
    job: &LinksJob,
    ready: &Ready,
    seen: &mut dyn FnMut(&[PairResult]),
) -> Result<(Matrix, Analysis, Option<Report>), Error> {
    if job.find {
        let cfg = FinderConfig {
            probe: ready.probe,
            collectives: ready.collectives,
            ..FinderConfig::DEFAULT
        };
        links::find(measurer, &ready.schedule, &ready.layout, &cfg, seen).map(|o| {
            let mut report = o.report;
            if !ready.collectives {
                report.notes.push(format!(
                    "no bisection for faults only collectives show: the {} backend has no sub-communicators here",
                    ready.meta.backend
                ));
            }
            (o.matrix, o.analysis, Some(report))
        })
    } else {
        links::measure_matrix(measurer, &ready.schedule, &ready.probe, seen).map(|m| {
            let analysis = analyse(&m, &ready.layout, &Rule::DEFAULT);
            (m, analysis, None)
        })
    }
}

impl<W: World> Session<'_, W> {
    /// The links' own set-up (the schedule and topology, what the backend
    /// must offer, rank 0's files), then the matrix or the finder, the
    /// outputs; this rank's exit code.
    pub(super) fn links_steps(
        &self,
        job: &LinksJob,
        mut prepared: Prepared,
        watchdog: Option<&Watchdog>,
    ) -> Result<u8, Error> {
        let world = self.world;
        let (nodes, identity) = (&prepared.nodes, &prepared.identity);
        let endpoints = endpoints(world, nodes);
        let schedule = self.agreed(schedule::build(&endpoints, job.level, job.isolated))?;
        let hosts: Vec<String> = schedule::hosts(&endpoints).into_iter().map(|(h, _)| h).collect();
        let topology = self.agreed(job.places.as_ref().map(|p| p.topology(&hosts)).transpose())?;
        let layout = Layout::new(&endpoints, &schedule.units(), topology.as_ref());
        let probe = job.probe(identity.backend);
        let backend = prepared.backend.as_mut();
        let collectives = backend.sub_groups().is_some();
        self.agreed(check_backend(backend, &probe, world.nodes().local_size(world.rank())))?;
        let files = match world.agree(self.create_files(job, &identity.run_id)) {
            Ok(files) => files,
            Err(failed) => {
                if let Some(Some(files)) = failed.local {
                    files.discard();
                }
                return Err(Error::Reported(failed.code));
            }
        };
        let meta = RunMeta {
            run_id: identity.run_id.clone(),
            timestamp: identity.started.clone(),
            collbench_version: env!("CARGO_PKG_VERSION").into(),
            backend: identity.backend.name().into(),
            backend_version: identity.backend_version.clone(),
            timing: Some(TimingMethod::Batched),
            label: identity.label.clone(),
        };
        let header = Header {
            run_id: identity.run_id.clone(),
            command: identity.command_line.join(" "),
            backend: identity.backend_line(),
            control_plane: identity.control_plane.clone(),
            ranks: world.size(),
            hosts,
            virtual_nodes: nodes.is_virtual,
            check: job.check,
            topology: job.places.as_ref().map(|p| p.describe()),
            csv: files.as_ref().map(|f| f.csv_path.display().to_string()),
            json: files
                .as_ref()
                .and_then(|f| f.json.as_ref())
                .map(|p| p.display().to_string()),
            heatmap: files
                .as_ref()
                .and_then(|f| f.heatmap.as_ref())
                .map(|p| p.display().to_string()),
            label: identity.label.clone(),
        };
        let nccl_log = match (prepared.nccl_logs.take(), files.as_ref()) {
            (Some(texts), Some(f)) => Some(KeptLogs::keep(&texts, kept::beside(&f.csv_path))),
            _ => None,
        };
        let ready = Ready {
            schedule,
            layout,
            probe,
            collectives,
            endpoints,
            meta,
            header,
            nccl_log,
        };
        Ok(self.measure_links(backend, job, ready, files, watchdog))
    }

    /// Rank 0's files, each refused before anything runs when it exists
    /// (without `--overwrite`) or cannot be created.
    fn create_files(&self, job: &LinksJob, run_id: &str) -> Result<Option<Files>, Error> {
        if self.world.rank() != 0 {
            return Ok(None);
        }
        let out = &self.cfg.outputs;
        let csv_path = match &out.csv {
            Some(p) => p.clone(),
            None => super::outputs::results_file(&format!("links-{run_id}.csv"))?,
        };
        let mut created: Vec<PathBuf> = Vec::new();
        let made = (|| {
            for (path, what) in [(&out.json, "JSON"), (&job.heatmap, "heatmap")] {
                if let Some(p) = path {
                    crate::report::create_file(p, out.overwrite, what)?;
                    created.push(p.clone());
                }
            }
            let mut csv = CsvFile::create(&csv_path, out.overwrite)?;
            csv.fields(output::columns())
                .map_err(|e| Error::runtime(format!("cannot write {}: {e}", csv.target())))?;
            Ok(csv)
        })();
        match made {
            Ok(csv) => Ok(Some(Files {
                csv,
                csv_path,
                json: out.json.clone(),
                heatmap: job.heatmap.clone(),
            })),
            Err(e) => {
                for p in &created {
                    let _ = std::fs::remove_file(p);
                }
                Err(e)
            }
        }
    }

    /// The matrix (and the finder), rank 0's outputs, the exit code.
    fn measure_links(
        &self,
        backend: &mut dyn Backend,
        job: &LinksJob,
        ready: Ready,
        mut files: Option<Files>,
        watchdog: Option<&Watchdog>,
    ) -> u8 {
        let world = self.world;
        let first = world.rank() == 0;
        if first {
            print_out(&summary::header_text(&ready.header, &ready.schedule, &ready.probe));
        }
        let cx = self.context(backend, watchdog);
        let mut measurer = match BackendMeasurer::new(cx, ready.endpoints.clone(), job.check) {
            Ok(m) => m,
            Err(e) => self.fail(&e),
        };
        let skeleton = skeleton(&ready);
        let mut seen = |round: &[PairResult]| {
            if let Some(f) = files.as_mut() {
                for r in round {
                    let row = PairRow::of(r, &skeleton, &ready.layout, round.len(), &ready.meta);
                    if let Err(e) = f.csv.row(&row.record()) {
                        self.fail(&Error::runtime(format!("cannot write {}: {e}", f.csv.target())));
                    }
                }
            }
        };
        let measured = measure_or_find(&mut measurer, job, &ready, &mut seen);
        if let Some(w) = watchdog {
            w.idle();
        }
        let (matrix, analysis, report) = match measured {
            Ok(m) => m,
            Err(_) if measurer.stopped_by().is_some() => {
                let signal = measurer.stopped_by().unwrap_or(0);
                if first {
                    say(&format!(
                        "collbench: {} after {} round(s); every pair measured before is in the CSV",
                        crate::error::stopped_by(&crate::engine::stop::signal_name(signal)),
                        measurer.rounds().saturating_sub(1)
                    ));
                }
                return 128 + signal as u8;
            }
            Err(e) => self.fail(&e),
        };
        let (wrong, checked) = (measurer.wrong(), measurer.checked());
        let mut code = exit::OK;
        if let Some(f) = files
            && let Err(e) = self.write_links(f, job, &ready, &matrix, &analysis, report.as_ref())
        {
            say(&world.error_line(&e));
            code = e.exit_code();
        }
        if wrong > 0 {
            let bad = matrix.pairs.iter().filter(|p| p.wrong.is_some_and(|w| w > 0)).count();
            let e = Error::Validation {
                wrong,
                points: bad,
                checked: checked as usize,
            };
            if first {
                say(&world.error_line(&e));
            }
            code = code.max(e.exit_code());
        }
        code
    }

    /// Rank 0: the matrix and the report on screen, the JSON, the heatmap.
    fn write_links(
        &self,
        files: Files,
        job: &LinksJob,
        ready: &Ready,
        matrix: &Matrix,
        analysis: &Analysis,
        report: Option<&Report>,
    ) -> Result<(), Error> {
        let mut text = String::new();
        if let Some(m) = output::matrix_text(matrix, &ready.layout, analysis, job.metric) {
            text.push_str(&m);
            text.push('\n');
        }
        match report {
            Some(r) => text.push_str(&output::report_text(r, matrix, analysis)),
            None => text.push_str(&summary::flagged_text(matrix, analysis)),
        }
        for line in ready.nccl_log.iter().flat_map(KeptLogs::footer) {
            text += &line;
            text.push('\n');
        }
        print_out(&text);
        if let Some(path) = &files.json {
            let mut doc = output::json(&ready.meta, matrix, &ready.layout, analysis, report);
            if let Some(k) = &ready.nccl_log {
                doc["nccl_log"] = serde_json::json!(k);
            }
            let body = serde_json::to_string_pretty(&doc)
                .map_err(|e| Error::runtime(format!("cannot write the JSON report {}: {e}", path.display())))?;
            std::fs::write(path, body + "\n")
                .map_err(|e| Error::runtime(format!("cannot write the JSON report {}: {e}", path.display())))?;
        }
        if let Some(path) = &files.heatmap {
            links::heatmap::draw_file(path, matrix, &ready.layout, analysis, report, job.metric)?;
        }
        Ok(())
    }
}

/// What the backend must offer, and the host memory its buffers need.
fn check_backend(backend: &mut dyn Backend, probe: &Probe, ranks_on_host: usize) -> Result<(), Error> {
    let kind = backend.identity().kind;
    if backend.point_to_point().is_none() {
        return Err(Error::usage(format!(
            "the {} backend has no point-to-point operations: links needs nccl or mpi",
            kind.name()
        )));
    }
    if kind == BackendKind::Mpi && probe.size_bytes / 4 > i32::MAX as u64 {
        return Err(Error::usage(format!(
            "--size {}: MPI counts are C ints; give at most 8 GiB",
            probe.size_bytes
        )));
    }
    let count = (probe.size_bytes.max(probe.latency_bytes) / 4) as usize;
    let shape = crate::collective::Collective::SendRecv.spec().shape(count, 2);
    let reservation = Reservation::of([(Hierarchy::Flat, measurer::DTYPE, shape)], false);
    if backend.gpu().is_none()
        && let Some(available) = crate::topology::machine::available_memory()
    {
        reservation.check_host_memory(ranks_on_host, available, "give a smaller --size")?;
    }
    Ok(())
}
