//! A finder check on every rank (docs/check.md, "The finder"): `collbench
//! links --find` at node level, the same schedule, measurer
//! (`session::links::BackendMeasurer`, over this session's engine
//! context) and finder (`links::find`), each node named by its check
//! label. Every rank takes the same steps (the measurer gathers every
//! rank's samples to every rank); rank 0 turns the outcome into verdicts
//! (`check::finder`). A launch the finder cannot judge (fewer than
//! `FINDER_NODES` nodes, a backend without point-to-point operations, a
//! stop) does not run it, and says why.
//!
//! Must not: judge (`links` and `check::finder` do), time or validate
//! anything itself (the engine does).

use super::outputs::Setup;
use super::{CheckJob, Session, Unrun, node_label};
use crate::backend::{Backend, Identity};
use crate::check::profile::{CheckSpec, FINDER_NODES};
use crate::collective::Collective;
use crate::engine::watchdog::Watchdog;
use crate::error::say;
use crate::links::finder::{FinderConfig, Outcome};
use crate::links::output::RunMeta;
use crate::links::{self, Endpoint, Layout, Level, Probe};
use crate::plan::Reservation;
use crate::session::links::measurer::DTYPE;
use crate::session::links::{BackendMeasurer, endpoints};
use crate::topology::Hierarchy;
use crate::topology::Nodes;
use crate::world::World;

/// One finder check, as it ran.
pub(super) enum FinderRun {
    /// Measured: the finder's outcome, and what it could not do.
    Ran(Box<Outcome>, Vec<String>),
    /// Not run, and why.
    Unrun(Unrun),
}

/// The probe of a finder check: its size, samples, iterations and
/// warm-up; a ping-pong of 8 bytes, as `collbench links`.
pub(super) fn probe(spec: &CheckSpec) -> Probe {
    Probe {
        size_bytes: spec.max_size(),
        latency_bytes: Probe::DEFAULT.latency_bytes,
        samples: spec.samples,
        iters: spec.iters as usize,
        warmup: spec.warmup as usize,
    }
}

/// The buffers of each finder check's exchanges, as its measurer
/// reserves them (one sendrecv of its probe between two ranks).
pub(super) fn reservations(c: &CheckJob) -> Vec<Reservation> {
    c.checks
        .iter()
        .filter(|k| k.is_finder())
        .map(|k| {
            let p = probe(k);
            let count = (p.size_bytes.max(p.latency_bytes) / DTYPE.size_bytes() as u64) as usize;
            let shape = Collective::SendRecv.spec().shape(count, 2);
            Reservation::of([(Hierarchy::Flat, DTYPE, shape)], false)
        })
        .collect()
}

/// Every rank as the finder knows it, each host its node's check label.
fn labelled(world: &dyn World, nodes: &Nodes) -> Vec<Endpoint> {
    let mut e = endpoints(world, nodes);
    for x in &mut e {
        x.host = node_label(nodes, nodes.node_of_rank[x.rank]);
    }
    e
}

/// Why a finder check cannot run on this launch, if it cannot.
fn unrunnable(backend: &mut dyn Backend, nodes: &Nodes) -> Option<Unrun> {
    if nodes.nnodes() < FINDER_NODES {
        return Unrun::new(
            "under 4 nodes",
            format!(
                "the finder needs {FINDER_NODES} nodes or more (each node with {} partners or more, to tell a slow \
                 node from a slow link: docs/links.md); this launch has {}",
                FINDER_NODES - 1,
                nodes.nnodes()
            ),
        );
    }
    if backend.point_to_point().is_none() {
        return Unrun::new(
            "no point-to-point",
            format!(
                "the {} backend has no point-to-point operations: the finder needs nccl or mpi",
                backend.identity().kind.name()
            ),
        );
    }
    None
}

impl<W: World> Session<'_, W> {
    /// Every finder check of the job, in turn (a stop ends the rest).
    pub(super) fn find(
        &self,
        backend: &mut dyn Backend,
        c: &CheckJob,
        nodes: &Nodes,
        setup: &Setup,
        watchdog: Option<&Watchdog>,
        stopped_by: &mut Option<u64>,
    ) -> Vec<FinderRun> {
        let mut out = Vec::new();
        for spec in c.checks.iter().filter(|k| k.is_finder()) {
            let why = match stopped_by {
                Some(_) => Unrun::new("stopped", "not run: the run was stopped before it"),
                None => unrunnable(backend, nodes),
            };
            if let Some(why) = why {
                out.push(FinderRun::Unrun(why));
                continue;
            }
            out.push(self.find_one(backend, spec, nodes, setup, watchdog, stopped_by));
            if let Some(w) = watchdog {
                w.idle();
            }
        }
        out
    }

    /// One finder check: the matrix, re-tests and bisection of `links
    /// --find` at node level; rank 0 writes the finder's JSON report
    /// (`DIR/NAME.links.json`, as `collbench links --json` writes it).
    fn find_one(
        &self,
        backend: &mut dyn Backend,
        spec: &CheckSpec,
        nodes: &Nodes,
        setup: &Setup,
        watchdog: Option<&Watchdog>,
        stopped_by: &mut Option<u64>,
    ) -> FinderRun {
        let first = self.world.rank() == 0;
        let started = std::time::Instant::now();
        let endpoints = labelled(self.world, nodes);
        let schedule = match links::schedule::build(&endpoints, Level::Node, false) {
            Ok(s) => s,
            Err(e) => self.fail(&e),
        };
        let layout = Layout::new(&endpoints, &schedule.units(), None);
        let collectives = backend.sub_groups().is_some();
        let identity = backend.identity();
        let cfg = FinderConfig {
            rule: spec.finder_rule(),
            probe: probe(spec),
            collectives,
            ..FinderConfig::DEFAULT
        };
        let cx = self.context(backend, watchdog);
        let mut measurer = match BackendMeasurer::new(cx, endpoints, self.cfg.timing.check) {
            Ok(m) => m,
            Err(e) => self.fail(&e),
        };
        let found = links::find(&mut measurer, &schedule, &layout, &cfg, &mut |_| {});
        let rounds = measurer.rounds();
        let outcome = match found {
            Ok(o) => o,
            Err(_) if measurer.stopped_by().is_some() => {
                *stopped_by = measurer.stopped_by();
                return FinderRun::Unrun(Unrun {
                    short: "stopped",
                    reason: format!("stopped after {rounds} round(s) of the finder: not judged"),
                });
            }
            Err(e) => self.fail(&e),
        };
        if first {
            crate::report::print_out(&format!(
                "# {:<28} {rounds} rounds of pairs in {:.1} s; the finder's report: {}\n",
                spec.name,
                started.elapsed().as_secs_f64(),
                setup.out_dir.join(format!("{}.links.json", spec.name)).display()
            ));
        }
        let mut notes = Vec::new();
        if !collectives {
            notes.push(format!(
                "{}: no bisection for hosts that only collectives show: the {} backend has no sub-communicators here",
                spec.name,
                identity.kind.name()
            ));
        }
        if first {
            write_report(spec, setup, &identity, &layout, &outcome);
        }
        FinderRun::Ran(Box::new(outcome), notes)
    }
}

/// Rank 0: the finder's whole report beside the verdicts
/// (`DIR/NAME.links.json`, as `collbench links --json` writes it); a file
/// that cannot be written is a warning (the verdicts carry the findings).
fn write_report(spec: &CheckSpec, setup: &Setup, identity: &Identity, layout: &Layout, outcome: &Outcome) {
    let meta = RunMeta {
        run_id: setup.run_id.clone(),
        timestamp: setup.started.clone(),
        collbench_version: env!("CARGO_PKG_VERSION").into(),
        backend: identity.kind.name().into(),
        backend_version: identity.version.clone(),
        timing: Some(crate::types::TimingMethod::Batched),
        label: None,
    };
    let doc = links::output::json(&meta, &outcome.matrix, layout, &outcome.analysis, Some(&outcome.report));
    let path = setup.out_dir.join(format!("{}.links.json", spec.name));
    let text = serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n";
    if let Err(e) = crate::check::write_atomic(&path, &text) {
        say(&format!("collbench: warning: the finder's report: {e}"));
    }
}
