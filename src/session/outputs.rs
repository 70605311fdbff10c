//! The sweep's set-up after the shared one (`prepare`): the plan (fitted
//! to the GPU memory every rank has), host memory, the buffers, and rank
//! 0's reports (CSV, JSON, table, progress) with the `RunInfo` they
//! describe the run by (from the run's identity).

use std::path::PathBuf;

use super::Session;
use super::prepare::Prepared;
use crate::backend::Backend;
use crate::engine::groups::Groups;
use crate::error::Error;
use crate::plan::Plan;
use crate::plan::SizeSweep;
use crate::record::Extras;
use crate::report::csv::CsvSink;
use crate::report::json::JsonSink;
use crate::report::nccl_tests_json::NcclTestsJsonSink;
use crate::report::progress::Progress;
use crate::report::table::TableSink;
use crate::report::{RankSummary, Reporter, RunIdentity, RunInfo, Sink, SweepInfo};
use crate::topology::Nodes;
use crate::topology::machine::available_memory;
use crate::topology::observe;
use crate::types::human_bytes;
use crate::world::World;

impl<W: World> Session<'_, W> {
    /// Everything of the sweep that can fail before the first collective,
    /// after the shared set-up: the plan (at this rank's group's size
    /// with `--split`, fitted to the GPU memory every rank has free), host
    /// memory, the buffers, rank 0's reports.
    pub(super) fn plan_and_outputs(
        &self,
        prepared: &mut Prepared,
        device_free: u64,
        groups: Option<&Groups>,
    ) -> Result<(Plan, Option<(Reporter, RunInfo)>), Error> {
        let (world, cfg) = (self.world, self.cfg);
        let nodes = &prepared.nodes;
        let backend = prepared.backend.as_mut();
        let mut notes: Vec<String> = Vec::new();
        let caps = backend.capabilities(&cfg.timing.extras());
        // with --split, this rank's group's communicator
        let nranks = groups.map_or(nodes.nranks(), Groups::size);
        let mut plan = Plan::build_at(&cfg.plan, &caps, nodes, nranks)?;
        if let Some(groups) = groups {
            check_groups_in_step(&cfg.plan, &caps, nodes, groups, &plan)?;
            notes.push(format!("--split {}", groups.describe()));
        }
        if !cfg.timing.algo_pins.is_empty() {
            let (pinned, described) = self.pin_plans(backend, plan)?;
            plan = pinned;
            notes.extend(described);
        }
        // as asked, else the backend's reference tool's method
        let rotate = cfg.timing.for_backend(prepared.identity.backend).rotate;
        if device_free != u64::MAX {
            let (fitted, lowered) = self.fit_to_device(nodes, nranks, &*backend, &caps, plan, rotate, device_free)?;
            plan = fitted;
            notes.extend(lowered);
        }
        let reservation = self.reservation(&plan, rotate);
        if let Some(available) = available_memory() {
            let on_host = world.nodes().local_size(world.rank());
            reservation.check_host_memory(on_host, available, "lower --maxbytes")?;
        }
        backend.reserve(&reservation)?;
        // after `reserve`: what registration and NCCL's connections took
        // is known by then
        prepared.identity.backend_note =
            super::prepare::backend_note(prepared.auto_note.clone(), backend.identity().notes);
        let outputs = match world.rank() {
            0 => {
                // `--hierarchy all`: the modes this backend runs
                let modes = cfg.plan.hierarchies_on(&caps)?;
                Some(self.open_outputs(nodes, &prepared.identity, notes, &self.shown_plan(&plan), &modes)?)
            }
            _ => None,
        };
        Ok((plan, outputs))
    }

    /// Lowers the largest size until the plan's buffers (`rotate`: as they
    /// will be reserved) fit in the GPU memory every rank has free (as
    /// nccl-tests does), and says so.
    #[allow(clippy::too_many_arguments)]
    fn fit_to_device(
        &self,
        nodes: &Nodes,
        nranks: usize,
        backend: &dyn Backend,
        caps: &crate::plan::Capabilities,
        plan: Plan,
        rotate: bool,
        free: u64,
    ) -> Result<(Plan, Option<String>), Error> {
        let budget = free.saturating_sub(device_headroom(free));
        let need = |p: &Plan| {
            let r = self.reservation(p, rotate);
            r.peak_bytes()
                .saturating_add(backend.gpu().map_or(0, |g| g.scratch_bytes(&r)))
        };
        if need(&plan) <= budget {
            return Ok((plan, None));
        }
        let sweep = self.cfg.plan.sweep;
        for &max in sweep.sizes().iter().rev().skip(1) {
            let mut smaller = self.cfg.plan.clone();
            smaller.sweep = SizeSweep::new(sweep.min, max, sweep.step)?;
            let Ok(p) = Plan::build_at(&smaller, caps, nodes, nranks) else {
                continue;
            };
            let p = self.pinned_only(p);
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

    /// Rank 0's sinks and the `RunInfo` they describe the run by. The JSON
    /// check creates only a temporary file, removed if the CSV then fails;
    /// the CSV comes last so that no empty report is left.
    fn open_outputs(
        &self,
        nodes: &Nodes,
        identity: &RunIdentity,
        sweep_notes: Vec<String>,
        plan: &Plan,
        hierarchies: &[crate::topology::Hierarchy],
    ) -> Result<(Reporter, RunInfo), Error> {
        let (world, out, t) = (self.world, &self.cfg.outputs, &self.cfg.timing);
        let csv_path = match &out.csv {
            Some(p) => p.clone(),
            None => default_csv(&identity.run_id)?,
        };
        check_paths(out, &csv_path)?;
        let json: Option<Box<dyn Sink>> = match &out.json {
            Some(path) if out.nccl_tests_json => Some(Box::new(NcclTestsJsonSink::create(path, out.overwrite)?)),
            Some(path) => Some(Box::new(JsonSink::create(path, out.overwrite)?)),
            None => None,
        };
        let alltoallv = plan
            .cases
            .iter()
            .any(|c| c.collective == crate::collective::Collective::AllToAllV);
        let csv = CsvSink::create(&csv_path, out.overwrite, self.csv_extras(alltoallv, identity.backend))?;
        let total = (t.cycles != 0).then(|| plan.points() as u64 * t.cycles);
        let launched = crate::world::launcher_rank().is_some();
        let progress = Progress::new(out.progress, total, launched, "collbench");
        // Files first, the terminal last: a launcher that is ending the job
        // may stop reading a rank's standard output, and a blocked table
        // write must not keep a row or the JSON report from its file.
        let mut sinks: Vec<Box<dyn Sink>> = vec![Box::new(csv)];
        if let Some(json) = json {
            sinks.push(json);
        }
        sinks.push(Box::new(TableSink::new(Box::new(std::io::stdout()), progress.handle())));
        let notes: Vec<String> = identity.backend_note.iter().cloned().chain(sweep_notes).collect();
        let info = RunInfo {
            run_id: identity.run_id.clone(),
            collbench_version: env!("CARGO_PKG_VERSION").into(),
            started: identity.started.clone(),
            command_line: identity.command_line.clone(),
            backend: identity.backend,
            backend_version: identity.backend_version.clone(),
            backend_note: (!notes.is_empty()).then(|| notes.join("; ")),
            control_plane: identity.control_plane.clone(),
            nranks: world.size(),
            nnodes: nodes.nnodes(),
            ranks_per_node: nodes.ranks_per_node(),
            hosts: identity.hosts.clone(),
            virtual_nodes: nodes.is_virtual,
            ranks: world.ranks().iter().map(RankSummary::from).collect(),
            timing: t.for_backend(identity.backend),
            transport: self.cfg.start.transport,
            // Filled in once every rank has observed its transport.
            transport_observed: observe::UNKNOWN.into(),
            transport_notes: Vec::new(),
            hierarchy: hierarchies.iter().map(|h| h.name()).collect::<Vec<_>>().join(","),
            points: plan.points(),
            sweep: sweep_info(plan, self.cfg.plan.sweep),
            csv: csv_path,
            json: out.json.clone(),
            label: identity.label.clone(),
            traffic: alltoallv.then(|| traffic_text(self.cfg.plan.traffic, world.size())),
            timestamps: out.timestamps,
            notes: out.notes.clone(),
            // Filled in with what every rank's NCCL log holds.
            nccl_log: None,
            nccl_log_lines: Vec::new(),
        };
        Ok((Reporter::new(sinks, progress, total).stop_on(self.stop.clone()), info))
    }

    /// The CSV's optional columns (`alltoallv`: the plan has alltoallv
    /// points).
    fn csv_extras(&self, alltoallv: bool, backend: crate::types::BackendKind) -> Extras {
        let (out, t) = (&self.cfg.outputs, &self.cfg.timing);
        // nccl-tests' default traffic needs no column: absent means spread 1
        Extras {
            per_iter: t.per_iter,
            phases: t.phase_times,
            label: out.label.is_some(),
            traffic: alltoallv && self.cfg.plan.traffic.column().is_some(),
            group: self.cfg.plan.split.is_some(),
            algo: t.for_backend(backend).algo_columns(),
        }
    }
}

/// `--split`: every group must measure the same points in the same order,
/// since all run each point at once; groups of different sizes can round a
/// size to nothing or to the previous one differently. Every rank builds
/// every group's plan (pure), so every rank refuses alike.
fn check_groups_in_step(
    cfg: &crate::plan::PlanConfig,
    caps: &crate::plan::Capabilities,
    nodes: &Nodes,
    groups: &Groups,
    mine: &Plan,
) -> Result<(), Error> {
    let sizes: std::collections::BTreeSet<usize> = groups.members.iter().map(Vec::len).collect();
    for n in sizes {
        let other = Plan::build_at(cfg, caps, nodes, n)
            .map_err(|e| Error::usage(format!("--split {}: in a group of {n} rank(s), {e}", groups.rule)))?;
        if other.cases.len() != mine.cases.len() {
            return Err(Error::usage(format!(
                "--split {}: groups of {} and {n} ranks measure different sizes ({} against {} points: small sizes \
                 round differently); raise --minbytes or split into groups of one size",
                groups.rule,
                mine.nranks,
                mine.points(),
                other.points()
            )));
        }
    }
    Ok(())
}

/// alltoallv's traffic for the header: what it is and where it comes from.
pub(super) fn traffic_text(traffic: crate::collective::Traffic, nranks: usize) -> String {
    use crate::collective::Traffic;
    match traffic {
        Traffic::Weighted(s) => format!(
            "spread {} (nccl-tests' generated traffic: 0 the same to every peer, 1 weighted by distance)",
            s.value()
        ),
        Traffic::Matrix(m) => format!(
            "traffic matrix {} ({}x{} file, the top-left {nranks}x{nranks} used, scale {})",
            m.source,
            m.dim(),
            m.dim(),
            m.scale
        ),
    }
}

/// The sizes `plan` measures (every case's size, after rounding).
/// The sizes swept: the smallest and largest measured, and how many sizes
/// one case (a collective, mode, type, operation and root) steps through;
/// collectives that round a size differently (alltoallv's whole blocks)
/// measure the same step at another size, which is no extra size.
fn sweep_info(plan: &Plan, asked: SizeSweep) -> SweepInfo {
    use std::collections::{BTreeMap, BTreeSet};
    let sizes: BTreeSet<u64> = plan.cases.iter().map(|c| c.size_bytes()).collect();
    let mut per_case: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for c in &plan.cases {
        let key = format!(
            "{:?} {:?} {:?} {:?} {:?}",
            c.collective, c.hierarchy, c.dtype, c.op, c.root
        );
        per_case.entry(key).or_default().insert(c.size_bytes());
    }
    SweepInfo {
        min_bytes: sizes.first().copied().unwrap_or(0),
        max_bytes: sizes.last().copied().unwrap_or(0),
        requested_min_bytes: asked.min,
        requested_max_bytes: asked.max,
        step: asked.step,
        sizes: per_case.values().map(BTreeSet::len).max().unwrap_or(0),
    }
}

/// GPU memory a backend leaves aside for the library's own buffers (NCCL
/// connects peers lazily and allocates then): as nccl-tests, 1 GiB, or a
/// tenth of the free memory where that is more.
fn device_headroom(free: u64) -> u64 {
    (1u64 << 30).max(free / 10)
}

/// The run's files are distinct and none is its `--config` file.
fn check_paths(out: &crate::report::OutputConfig, csv: &std::path::Path) -> Result<(), Error> {
    let partial = out.json.as_deref().map(crate::report::partial_path);
    let mut outputs = vec![("--csv", csv)];
    if let (Some(json), Some(partial)) = (out.json.as_deref(), partial.as_deref()) {
        outputs.extend([("--json", json), ("the JSON's temporary file", partial)]);
    }
    let inputs: Vec<(&str, &std::path::Path)> = out.config.iter().map(|c| ("the --config file", c.as_path())).collect();
    crate::report::paths::check_distinct(&outputs, &inputs)
}

/// `results/<run id>.csv`, the folder created if need be.
fn default_csv(run_id: &str) -> Result<PathBuf, Error> {
    results_file(&format!("{run_id}.csv"))
}

/// `results/NAME`, the folder created if need be.
pub(super) fn results_file(name: &str) -> Result<PathBuf, Error> {
    let dir = PathBuf::from("results");
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::usage(format!("cannot create the results folder {}: {e}", dir.display())))?;
    Ok(dir.join(name))
}
