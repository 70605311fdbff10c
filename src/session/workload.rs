//! `collbench workload` and `collbench replay` on every rank: the set-up
//! steps the ranks take together (digest, nodes, backend, schedules, the
//! groups' sub-communicators, the CSV), then each configuration's steps
//! (`engine::steps`), then rank 0's report and the verdict.
//!
//! The groups every configuration needs are split once, before the first
//! step, in the same order on every rank. A 16-bit floating type that the
//! backend cannot run (MPI has none) runs as float with half the count,
//! rounded up: the same bytes on the wire, and the header says so.
//! Must not: print except through `report::print_out` and `error::say`.

use std::collections::BTreeMap;

use super::Session;
use super::backend_choice::MakeMpi;
use super::job::{Config, Job};
use crate::backend::{Backend, Call};
use crate::clock::Clock;
use crate::collective::Layout;
use crate::engine::stats::IterSummary;
use crate::engine::steps::{StepCall, StepRunner, Steps};
use crate::engine::watchdog::Watchdog;
use crate::error::{Error, exit, say};
use crate::plan::{Capabilities, Case, Plan};
use crate::report::print_out;
use crate::report::workload::{self as report, OpResult, Outcome, WorkloadCsv};
use crate::topology::{Hierarchy, Nodes};
use crate::types::{DType, human_bytes};
use crate::workload::{Group, GroupLayout, Op, StepVolume, volume};
use crate::world::World;

/// Each group's communicator handle (`None`: the world).
type Handles = BTreeMap<(GroupLayout, Group), Option<usize>>;

impl<W: World> Session<'_, W> {
    /// Sets up, runs every configuration, reports; this rank's exit code.
    pub(super) fn run_job(&self, mpi_backend: Option<MakeMpi<'_>>, job: &Job) -> u8 {
        let watchdog = self.watchdog("the set-up (schedules, communicators, output files)");
        match self.job_steps(mpi_backend, job, watchdog.as_ref()) {
            Ok(code) => code,
            Err(Error::Reported(code)) => code,
            Err(e) => {
                say(&self.world.error_line(&e));
                e.exit_code()
            }
        }
    }

    fn job_steps(&self, mpi_backend: Option<MakeMpi<'_>>, job: &Job, watchdog: Option<&Watchdog>) -> Result<u8, Error> {
        let world = self.world;
        self.agreed(crate::engine::digest::check_same_plan(world, &self.cfg.digest))?;
        self.warn_on_nccl_environment();
        let nodes = self.agreed(self.nodes())?;
        let mut chosen = self.choose_backend(&nodes, mpi_backend)?;
        let backend = chosen.backend.as_mut();
        let caps = backend.capabilities(&self.cfg.timing.extras());
        let configs = self.agreed(configs(job, &nodes))?;
        let handles = self.agreed(split_groups(backend, &configs, world.rank()))?;
        let mut prepared = Vec::with_capacity(configs.len());
        for c in &configs {
            prepared.push(self.agreed(step_calls(c, &handles, &caps, world.rank()))?);
        }
        // A device backend allocates its buffers once, for the largest call.
        let cases = prepared
            .iter()
            .flat_map(|(calls, _)| calls.iter().map(|c| case(&c.call)))
            .collect();
        let plan = Plan {
            nranks: world.size(),
            cases,
        };
        self.agreed(reserve(backend, &plan, world.nodes().local_size(world.rank())))?;
        let first = world.rank() == 0;
        let mut csv = self.agreed(match (first, &self.cfg.outputs.csv) {
            (true, Some(path)) => WorkloadCsv::create(path, self.cfg.outputs.overwrite).map(Some),
            _ => Ok(None),
        })?;
        let notes: Vec<String> = prepared.iter().flat_map(|(_, notes)| notes.iter().cloned()).collect();
        let header = header_lines(job, world, backend.identity().version, nodes.ranks_per_node(), notes);
        if first {
            print_out(&report::header(job.top().is_some(), &header));
        }
        let calls: Vec<&[StepCall]> = prepared.iter().map(|(c, _)| c.as_slice()).collect();
        let (outcomes, stopped_by) = self.run_configs(backend, &configs, &calls, job, csv.as_mut(), watchdog);
        if first && outcomes.len() > 1 {
            print_out(&report::side_by_side(&outcomes));
        }
        let code = self.job_verdict(&outcomes);
        Ok(match stopped_by {
            Some(signal) => {
                if first {
                    say(&format!(
                        "collbench: stopped by {} after {} configuration(s); the steps timed before are reported",
                        crate::engine::stop::signal_name(signal),
                        outcomes.len()
                    ));
                }
                code.max(128 + signal as u8)
            }
            None => code,
        })
    }

    /// Every configuration's steps; its figures and CSV rows on rank 0. A
    /// failure ends the job (peers would wait for this rank).
    fn run_configs(
        &self,
        backend: &mut dyn Backend,
        configs: &[Config],
        prepared: &[&[StepCall]],
        job: &Job,
        mut csv: Option<&mut WorkloadCsv>,
        watchdog: Option<&Watchdog>,
    ) -> (Vec<Outcome>, Option<u64>) {
        let world = self.world;
        let mut outcomes = Vec::new();
        for (config, &calls) in configs.iter().zip(prepared) {
            let mut runner = StepRunner {
                world,
                backend: &mut *backend,
                clock: Clock::Host,
                inject_error: self.cfg.hooks.inject_error,
                watchdog,
                stop: self.stop.clone(),
            };
            let (steps, stopped_by) = match runner.run(calls, &job.timing) {
                Ok(ran) => ran,
                Err(e) => self.fail(&e),
            };
            // Rank 0 alone from here: a failure must end the job, which
            // would otherwise wait for it in the next configuration.
            if let Some(steps) = steps.filter(|s| !s.step_us.is_empty()) {
                let outcome = outcome(config, calls, steps).unwrap_or_else(|e| self.fail(&e));
                print_out(&report::one(&outcome, job.top()));
                if let Some(w) = csv.as_mut()
                    && let Err(e) = w.write(&outcome, &backend.identity().version, job.rescaled())
                {
                    self.fail(&e);
                }
                outcomes.push(outcome);
            }
            if stopped_by.is_some() {
                return (outcomes, stopped_by);
            }
        }
        (outcomes, None)
    }

    /// 3 when any collective was wrong (rank 0 says so), else 0.
    fn job_verdict(&self, outcomes: &[Outcome]) -> u8 {
        let wrong = self.world.max_u64(outcomes.iter().filter_map(|o| o.wrong).sum());
        if wrong == 0 {
            return exit::OK;
        }
        let failed = outcomes.iter().map(|o| o.failed_ops).sum();
        let checked = outcomes.iter().map(|o| o.ops.len()).sum();
        let e = Error::Validation {
            wrong,
            points: failed,
            checked,
        };
        if self.world.rank() == 0 {
            say(&self.world.error_line(&e));
        }
        e.exit_code()
    }
}

/// The header: the job's lines, the backend and ranks, each rank's host
/// and pid, and the notes of the calls (each once).
fn header_lines(job: &Job, world: &dyn World, version: String, per_node: usize, notes: Vec<String>) -> Vec<String> {
    let mut header = job.header();
    header.push(format!(
        "backend {version}, {} ranks, {per_node} per node",
        world.size()
    ));
    header.extend(
        world
            .ranks()
            .iter()
            .enumerate()
            .map(|(r, info)| format!("Rank {r:4} on {} pid {}", info.host, info.pid)),
    );
    header.extend(notes.into_iter().collect::<std::collections::BTreeSet<_>>());
    header
}

/// The configurations at this launch's size and nodes.
fn configs(job: &Job, nodes: &Nodes) -> Result<Vec<Config>, Error> {
    if !nodes.is_uniform() {
        return Err(Error::usage(format!(
            "a workload needs the same number of ranks on every node, but the {} nodes differ; use --ranks-per-node",
            nodes.nnodes()
        )));
    }
    job.configs(nodes.nranks(), nodes.ranks_per_node())
}

/// Splits every group any configuration uses, once, in one order on
/// every rank (a `BTreeMap`'s). The world needs no split.
fn split_groups(backend: &mut dyn Backend, configs: &[Config], rank: usize) -> Result<Handles, Error> {
    let mut handles = Handles::new();
    for c in configs {
        for g in c.schedule.groups() {
            c.layout.check(g)?;
            handles.insert((c.layout, g), None);
        }
    }
    for ((layout, group), handle) in handles.iter_mut() {
        let p = layout.partition(*group);
        if p.size() == layout.world {
            continue;
        }
        let (color, members) = p.group_of(rank);
        let key = members.iter().position(|&r| r == rank).unwrap_or(0);
        let kind = backend.identity().kind;
        let sub = backend.sub_groups().ok_or_else(|| {
            Error::usage(format!(
                "the {} backend has no sub-communicators for group {group} (NCCL before 2.18 has no ncclCommSplit); use --backend mpi",
                kind.name()
            ))
        })?;
        *handle = Some(sub.split(color, key)?);
    }
    Ok(handles)
}

/// This rank's calls of one configuration, and the header's notes.
fn step_calls(
    c: &Config,
    handles: &Handles,
    caps: &Capabilities,
    rank: usize,
) -> Result<(Vec<StepCall>, Vec<String>), Error> {
    let mut notes = Vec::new();
    let mut calls = Vec::with_capacity(c.schedule.ops.len());
    for op in &c.schedule.ops {
        let p = c.layout.partition(op.group);
        let (_, members) = p.group_of(rank);
        let index = members.iter().position(|&r| r == rank).unwrap_or(0);
        let (dtype, count) = runnable(op, caps, &mut notes)?;
        let n = p.size();
        let shape = op
            .collective
            .spec()
            .shape(volume::size_elements(op.collective, count, n) as usize, n);
        if shape.send.max(shape.recv) > caps.max_elements {
            return Err(Error::usage(format!(
                "{} of {count} elements ({}) is larger than the {} backend's largest buffer",
                op.collective, op.label, caps.backend
            )));
        }
        let call = Call {
            collective: op.collective,
            hierarchy: Hierarchy::Flat,
            dtype,
            op: op.op,
            shape,
            at: Layout {
                nranks: n,
                rank: index,
                root: op.root.unwrap_or(0),
            },
        };
        let handle = handles.get(&(c.layout, op.group)).copied().flatten();
        calls.push(StepCall {
            call,
            handle,
            shift: op.shift.unwrap_or(1),
        });
    }
    Ok((calls, notes))
}

/// The type and count an operation runs with on this backend: its own, or
/// for a 16-bit float the backend refuses, float with half the count.
fn runnable(op: &Op, caps: &Capabilities, notes: &mut Vec<String>) -> Result<(DType, u64), Error> {
    let Err(why) = caps.check_dtype(op.dtype) else {
        return Ok((op.dtype, op.count));
    };
    if op.dtype.size_bytes() == 2 && caps.check_dtype(DType::Float).is_ok() {
        notes.push(format!(
            "the {} backend has no {}: those operations run as float with half the count (the same bytes)",
            caps.backend, op.dtype
        ));
        return Ok((DType::Float, op.count.div_ceil(2)));
    }
    Err(Error::usage(format!("{} ({}): {why}", op.label, op.collective)))
}

/// Buffers for the plan's largest call, refused (one line) when the
/// host's ranks would need more memory than it has (memory is per host,
/// whatever --ranks-per-node says).
fn reserve(backend: &mut dyn Backend, plan: &Plan, ranks_on_host: usize) -> Result<(), Error> {
    if backend.gpu().is_none()
        && let Some(available) = crate::topology::machine::available_memory()
    {
        let need = plan.peak_buffer_bytes().saturating_mul(ranks_on_host as u64);
        if need > available {
            return Err(Error::usage(format!(
                "the largest operation needs {} per rank, {} for the {ranks_on_host} ranks on this host, \
                 but only {} of memory is available; use fewer ranks per host or a smaller model",
                human_bytes(plan.peak_buffer_bytes()),
                human_bytes(need),
                human_bytes(available)
            )));
        }
    }
    backend.reserve(plan, false)
}

/// The plan's case of one call (what `Backend::reserve` sizes buffers by).
fn case(call: &Call) -> Case {
    Case {
        collective: call.collective,
        hierarchy: call.hierarchy,
        dtype: call.dtype,
        op: call.op,
        root: Some(call.at.root),
        shape: call.shape,
    }
}

/// Rank 0's figures of one configuration.
fn outcome(c: &Config, calls: &[StepCall], steps: Steps) -> Result<Outcome, Error> {
    let volume = StepVolume::new(&c.schedule, &c.layout)?;
    let per_op: Vec<Option<IterSummary>> = (0..calls.len())
        .map(|i| IterSummary::of(&steps.op_us.iter().map(|s| s[i]).collect::<Vec<f64>>()))
        .collect();
    let medians: Vec<f64> = per_op.iter().map(|s| s.map_or(0.0, |s| s.p50)).collect();
    let summary = volume.summary(Some(&medians))?;
    let ops = c
        .schedule
        .ops
        .iter()
        .zip(calls)
        .zip(&volume.per_op)
        .zip(&per_op)
        .map(|(((op, call), v), t)| OpResult {
            op: op.clone(),
            run_dtype: call.call.dtype,
            run_count: call.call.shape.count as u64,
            ranks: v.ranks,
            size_bytes: v.size_bytes,
            bus_bytes: v.bus_bytes,
            median_us: t.map_or(0.0, |t| t.p50),
            p99_us: t.map_or(0.0, |t| t.p99),
        })
        .collect();
    let step = IterSummary::of(&steps.step_us);
    Ok(Outcome {
        name: c.name.clone(),
        strategy: c.strategy.map(|s| s.name().to_string()),
        bucket_bytes: c.bucket_bytes,
        layout: c.layout,
        ops,
        step_us: steps.step_us,
        step_median_us: step.map_or(0.0, |s| s.p50),
        step_p99_us: step.map_or(0.0, |s| s.p99),
        summary,
        wrong: steps.wrong,
        failed_ops: steps.failed_ops,
    })
}
