//! The measurement loop: for every case of the plan and both placements,
//! warm up, validate, time, reduce times across ranks, and hand one
//! `Record` to rank 0's callback.
//!
//! Timing (docs/measurement.md, nccl-tests' method): barrier, host clock, `iters`
//! operations launched back to back, wait for completion, stop the clock;
//! per-operation time = elapsed / iters. With `--blocking`, each operation
//! is timed alone with a barrier before it (OSU's method). Nothing in the
//! timed region allocates, prints or checks.
//!
//! How many iterations a point gets is the run's policy (`policy`): `-n`,
//! `--min-time` (`adaptive`) or, by default, batches until the median is
//! precise enough (`precision`). With `-I`, every iteration is timed too
//! (`straggler`).
//!
//! nccl-tests' extras: with `-m N`, each timed iteration is N operations in
//! one group; with `-G N`, the timed iterations are captured once in a CUDA
//! graph, which is replayed N times inside the timed region, and each check
//! runs through a graph of its own (`check::Validate`), as nccl-tests
//! validates. Either way the time per operation is the elapsed time over
//! every operation run (`per_op_seconds`).
//!
//! Here: the loop over points, warm-up and check (`Engine::measure`); in
//! `timer`, how the iterations are timed; in `row`, each point's `Record`.

pub mod adaptive;
pub mod check;
pub mod context;
pub mod digest;
pub mod groups;
pub mod pairs;
pub mod policy;
pub mod precision;
mod row;
pub mod sampler;
pub mod steps;
pub mod stop;
pub mod straggler;
mod timer;
pub mod watchdog;

use std::time::Duration;

use serde::{Serialize, Serializer};

use crate::backend::{Call, LaunchExtras, SubGroup};
use crate::collective::Layout;
use crate::error::Error;
use crate::plan::{Capabilities, Case, Plan};
use crate::record::Record;
use crate::topology::profile::Profile;
use crate::types::{AlgoPin, AlgoRecording, Average, BackendKind, Placement, Register};
pub use context::Context;
use groups::Groups;
use policy::Iterations;
use row::{Scope, add_iteration_stats};
use timer::Timed;
pub use timer::{captured_iterations, per_op_seconds};

/// Every rank's size, count, wrong elements and registration of a point
/// (`--split`), in world rank order.
type PerRank<'a> = (&'a [f64], &'a [f64], &'a [f64], Option<&'a [Register]>);

/// "all_reduce (rs-ar-ag) float sum 1048576 B in_place", for messages.
pub fn describe(case: &Case, placement: Placement) -> String {
    let mut s = case.collective.name().to_string();
    if !case.hierarchy.is_flat() {
        s += &format!(" ({})", case.hierarchy);
    }
    s += &format!(" {}", case.dtype);
    if let Some(op) = case.op {
        s += &format!(" {op}");
    }
    if let Some(root) = case.root {
        s += &format!(" root {root}");
    }
    s + &format!(" {} B {}", case.size_bytes(), placement)
}

/// How every point is measured: the options the engine reads, and what
/// the reports say about the method (the JSON's `run` object carries these
/// fields under these names).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timing {
    /// How many timed iterations a point gets.
    #[serde(flatten)]
    pub iterations: Iterations,
    /// `-I`: time every iteration.
    pub per_iter: bool,
    /// A rank this many percent slower than the median is named.
    pub straggler_threshold_pct: f64,
    /// Operations shift through buffers of the largest size, one point
    /// further each (nccl-tests' method), instead of reusing one buffer
    /// (OSU's and IMB's): as asked, else the backend's reference method
    /// (`for_backend`).
    pub rotate: bool,
    /// `--rotate` (true) or `--no-rotate` (false); `None`: the backend's.
    #[serde(skip)]
    pub rotate_asked: Option<bool>,
    pub warmup: u32,
    pub check: u32,
    pub average: Average,
    pub blocking: bool,
    /// `-m`: operations per timed iteration, in one NCCL group.
    pub agg_iters: u32,
    /// `-G`: replays of the captured timed iterations; 0 = no graph.
    pub cuda_graph: u32,
    /// `-R`: buffer registration asked for (the header notes whether it
    /// happened).
    pub register: Register,
    /// `--phase-times`: the backend times each hierarchical phase.
    pub phase_times: bool,
    /// `--algo-record`: which algorithm NCCL ran, recorded per row.
    pub algo_record: AlgoRecording,
    /// `--algo`, `--proto`: one pinned sweep each (docs/algorithms.md);
    /// none: NCCL's own choice.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub algo_pins: Vec<AlgoPin>,
    /// Sweeps to run; 0 = until stopped.
    pub cycles: u64,
    /// Longest a point or the set-up may take; `None` = no watchdog.
    #[serde(rename = "timeout_s", serialize_with = "optional_seconds")]
    pub timeout: Option<Duration>,
}

impl Timing {
    /// Rows carry the algo columns: recorded (`--algo-record`) or pinned
    /// (`--algo`, `--proto`).
    pub fn algo_columns(&self) -> bool {
        self.algo_record != AlgoRecording::Off || !self.algo_pins.is_empty()
    }

    /// This timing on `backend`: buffers rotate where asked, else as the
    /// backend's reference tool does (docs/measurement.md, "One buffer, or
    /// rotation"): nccl-tests shifts its buffers every iteration; OSU and
    /// IMB, the references for host MPI, reuse one buffer.
    pub fn for_backend(&self, backend: BackendKind) -> Timing {
        let reference = match backend {
            BackendKind::Nccl => true,
            BackendKind::Mpi | BackendKind::Memory => false,
        };
        Timing {
            rotate: self.rotate_asked.unwrap_or(reference),
            algo_record: self.algo_record.on(backend),
            ..self.clone()
        }
    }

    /// nccl-tests' launch extras of this run, for the backend to accept.
    pub fn extras(&self) -> LaunchExtras {
        LaunchExtras {
            agg_iters: self.agg_iters,
            cuda_graph: self.cuda_graph,
            register: self.register,
        }
    }
}

fn optional_seconds<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_some(&d.as_secs_f64()),
        None => s.serialize_none(),
    }
}

/// Run-wide values that every record carries.
#[derive(Clone, Debug)]
pub struct RunContext {
    pub run_id: String,
    pub host: String,
    pub backend: BackendKind,
    pub backend_version: String,
    pub transport: Profile,
    pub transport_observed: String,
    pub nnodes: usize,
    pub ranks_per_node: usize,
    /// `--label`.
    pub label: Option<String>,
}

/// What a finished sweep found; the same on every rank, but `straggler`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    pub points: usize,
    pub checked_points: usize,
    pub failed_points: usize,
    pub wrong: u64,
    /// Sweeps completed.
    pub cycles: u64,
    /// The signal that stopped the run early (on any rank).
    pub stopped_by: Option<u64>,
    /// With `-I`, on rank 0: the slow-rank verdict (arrival skew).
    pub straggler: Option<straggler::SlowRank>,
}

impl Summary {
    /// Adds the summary of a later sweep of the same run (`--algo`'s
    /// pinned sweeps): its points and wrong elements; its stop signal and
    /// slow-rank verdict where it has them.
    pub fn add(&mut self, later: Summary) {
        self.points += later.points;
        self.checked_points += later.checked_points;
        self.failed_points += later.failed_points;
        self.wrong += later.wrong;
        self.cycles = self.cycles.max(later.cycles);
        self.stopped_by = self.stopped_by.or(later.stopped_by);
        self.straggler = later.straggler.or(self.straggler.take());
    }

    /// Counts one measured point and its check's wrong elements.
    fn tally(&mut self, wrong: Option<u64>) {
        self.points += 1;
        if let Some(w) = wrong {
            self.checked_points += 1;
            self.wrong += w;
            self.failed_points += usize::from(w > 0);
        }
    }
}

pub struct Engine<'a> {
    /// The world, backend, clock, watchdog, stop request and test hook.
    cx: Context<'a>,
    /// What the backend can run (which outputs it defines, its name).
    caps: Capabilities,
    cfg: &'a Timing,
    ctx: &'a RunContext,
    /// Check iterations so far: varies the pattern between checks, the
    /// same sequence on every rank.
    rep: u64,
    /// Each rank's arrival at the checks' synchronisations (rank 0, `-I`).
    arrivals: straggler::Arrivals,
    /// `--split`: this rank's group runs each point on its own
    /// sub-communicator, and rank 0 reports every group (`groups`).
    groups: Option<&'a Groups>,
    /// `--algo`/`--proto`: the pin of this sweep and the communicator of
    /// every rank made under it (`Pins::pinned_group`), which every call
    /// names.
    pin: Option<(AlgoPin, SubGroup)>,
}

impl<'a> Engine<'a> {
    /// The sweep of `cx`'s backend, measured as `timing` says, every record
    /// carrying `ctx`.
    pub fn new(cx: Context<'a>, timing: &'a Timing, ctx: &'a RunContext) -> Self {
        Engine {
            caps: cx.backend.capabilities(&timing.extras()),
            cx,
            cfg: timing,
            ctx,
            rep: 0,
            arrivals: straggler::Arrivals::new(timing.straggler_threshold_pct / 100.0),
            groups: None,
            pin: None,
        }
    }

    /// A pinned sweep: every call runs on `sub`, a communicator of every
    /// rank in rank order made under `pin`, and every row says the pin.
    pub fn with_pin(mut self, pin: Option<(AlgoPin, SubGroup)>) -> Self {
        self.pin = pin;
        self
    }

    /// `--split`: every point runs in this rank's group (made by
    /// `Groups::split`), and each group gets its row beside the aggregate.
    pub fn with_groups(mut self, groups: Option<&'a Groups>) -> Self {
        self.groups = groups;
        self
    }

    /// Measures every point of `plan`, `--cycles` times. On rank 0,
    /// `on_record` receives each record as soon as it is measured; an error
    /// from it, or from the backend on any rank, ends the sweep on that rank.
    pub fn run(
        &mut self,
        plan: &Plan,
        mut on_record: impl FnMut(&Record) -> Result<(), Error>,
    ) -> Result<Summary, Error> {
        // -G needs the backend's graphs: refused before any point, on
        // every rank alike (the plan's capabilities normally refuse first).
        if self.cfg.cuda_graph > 0 {
            self.graphs()?;
        }
        let mut summary = Summary::default();
        let forever = self.cfg.cycles == 0;
        'cycles: for cycle in 1.. {
            if !forever && cycle > self.cfg.cycles {
                break;
            }
            for case in &plan.cases {
                // Ranks stop together, between points, when any got a signal.
                let signal = self.cx.stop_signal();
                if signal != 0 {
                    summary.stopped_by = Some(signal);
                    break 'cycles;
                }
                self.measure_case(case, cycle, &mut summary, &mut on_record)?;
            }
            summary.cycles = cycle;
        }
        self.cx.idle();
        summary.straggler = self.straggler();
        Ok(summary)
    }

    fn measure_case(
        &mut self,
        case: &Case,
        cycle: u64,
        summary: &mut Summary,
        on_record: &mut impl FnMut(&Record) -> Result<(), Error>,
    ) -> Result<(), Error> {
        let call = self.case_call(case);
        // With --split, a point's rows go out once both placements are
        // measured, each group's out-of-place and in-place rows together.
        let mut held: Vec<Vec<Record>> = Vec::new();
        for placement in Placement::BOTH {
            let Measured {
                checked,
                iters,
                timed,
                precision,
                phase_sums,
            } = self.measure_watched(case, &call, placement)?;
            let algo = self.algorithms(&call);
            let wrong = checked.and_then(|c| c.wrong);
            let times = self.cx.world.gather_f64(timed.per_op_s);
            // Arrival skew: each rank's own part of the check, where every
            // rank does the same (every rank takes part, or none).
            if self.cfg.per_iter
                && case.collective.spec().is_symmetric()
                && let Some(c) = checked.filter(|c| c.wrong.is_some())
                && let Some(work) = self.cx.world.gather_f64(c.work_s)
            {
                self.arrivals.add(case.size_bytes(), &work);
            }
            // every rank's size, count and wrong elements (their group's)
            let wrong_local = checked.and_then(|c| c.local);
            let split = self.groups.map(|_| {
                let g = |v: u64| self.cx.world.gather_f64(v as f64);
                (
                    g(case.size_bytes()),
                    g(case.shape.count as u64),
                    g(wrong_local.unwrap_or(0)),
                )
            });
            let per_iter = timed.samples.map(|samples| self.cx.world.max_f64s_to_root(&samples));
            let phases = self.phase_times(&call, iters, phase_sums)?;
            // -R as each rank's communicators took it (a window may be declined)
            let registered = self.registered(&call);

            summary.tally(wrong);
            if let Some(times) = times {
                let scope = Scope {
                    size_bytes: case.size_bytes(),
                    count: case.shape.count as u64,
                    nranks: call.at.nranks,
                    group: self.groups.map(|_| groups::ALL.to_string()),
                    register: registered.as_deref().map(|r| row::weakest(r.iter().copied())),
                };
                let mut record = self.record(case, placement, iters, &times, wrong, phases, scope);
                record.precision_pct = precision.map(|p| p * 100.0);
                record.cycle = Some(cycle);
                record.samples = Some(self.cfg.cycles);
                if let Some(algo) = algo {
                    row::add_algorithm(&mut record, algo, self.pin.map(|(pin, _)| pin));
                }
                if let Some(samples) = per_iter.flatten() {
                    add_iteration_stats(&mut record, &samples, &times);
                }
                match (self.groups, split) {
                    (Some(groups), Some((Some(sizes), Some(counts), Some(wrongs)))) => {
                        let per_rank = (&sizes[..], &counts[..], &wrongs[..], registered.as_deref());
                        let mut rows = self.group_records(groups, case, placement, iters, &times, wrong, per_rank);
                        copy_point_fields(&mut rows, &record);
                        rows.push(record);
                        held.push(rows);
                    }
                    _ => on_record(&record)?,
                }
            }
        }
        emit_held(&held, on_record)
    }

    /// The call of one point: this rank's place in the world, or in its
    /// group with `--split`.
    fn case_call(&self, case: &Case) -> Call {
        Call {
            collective: case.collective,
            hierarchy: case.hierarchy,
            dtype: case.dtype,
            op: case.op,
            shape: case.shape,
            at: Layout::new(
                self.groups.map_or(self.cx.world.size(), Groups::size),
                self.groups.map_or(self.cx.world.rank(), |g| g.index),
                case.root.unwrap_or(0),
            ),
            group: self.pin.map(|(_, sub)| sub).or(self.groups.and_then(|g| g.sub)),
        }
    }

    /// `measure` of one placement under the watchdog, the backend prepared
    /// before the out-of-place run, inside a profiler range.
    fn measure_watched(&mut self, case: &Case, call: &Call, placement: Placement) -> Result<Measured, Error> {
        let what = describe(case, placement);
        self.cx.watch(|| what.clone());
        if placement == Placement::OutOfPlace {
            self.cx.backend.prepare(call)?;
        }
        // For profilers' timelines (NVTX on the nccl backend).
        if let Some(profiler) = self.cx.backend.profiler() {
            profiler.range_push(&what);
        }
        let measured = self.measure(call, placement);
        if let Some(profiler) = self.cx.backend.profiler() {
            profiler.range_pop();
        }
        measured
    }

    /// Each group's row of a point (rank 0, `--split`): its ranks' times
    /// reduced as `--average` says, its size, count and rank count, its bus
    /// factor, its ranks' wrong elements and registration (every rank's
    /// gathered value in world rank order).
    #[allow(clippy::too_many_arguments)]
    fn group_records(
        &self,
        groups: &Groups,
        case: &Case,
        placement: Placement,
        iters: u32,
        times: &[f64],
        wrong: Option<u64>,
        (sizes, counts, wrongs, registered): PerRank<'_>,
    ) -> Vec<Record> {
        let mut rows = Vec::with_capacity(groups.members.len());
        for (g, members) in groups.members.iter().enumerate() {
            let first = members[0];
            let group_times: Vec<f64> = members.iter().map(|&r| times[r]).collect();
            let group_wrong = wrong.map(|_| members.iter().map(|&r| wrongs[r] as u64).sum());
            let scope = Scope {
                size_bytes: sizes[first] as u64,
                count: counts[first] as u64,
                nranks: members.len(),
                group: Some(g.to_string()),
                register: registered.map(|r| row::weakest(members.iter().map(|&m| r[m]))),
            };
            rows.push(self.record(case, placement, iters, &group_times, group_wrong, None, scope));
        }
        rows
    }

    /// Warm-up, check and timing of one point: wrong elements, the timed
    /// iteration count, this rank's times and, under the precision policy,
    /// the precision reached (the same on every rank).
    fn measure(&mut self, call: &Call, placement: Placement) -> Result<Measured, Error> {
        // Operations are numbered through warm-up, calibration and timing,
        // so buffer rotation keeps moving.
        let mut iter = 0u64;
        for _ in 0..self.cfg.warmup {
            self.cx.backend.launch(call, placement, iter, 1)?;
            iter += 1;
        }
        self.cx.backend.wait()?;
        let checked = self.check(call, placement)?;
        let iters = match self.cfg.iterations {
            Iterations::Fixed(n) => n,
            Iterations::MinTime(budget) => {
                captured_iterations(self.calibrate(call, placement, budget, &mut iter)?, self.cfg.cuda_graph)
            }
            Iterations::Precision(goal) => {
                let batched = self.time_precisely(call, placement, goal, &mut iter)?;
                return Ok(Measured {
                    checked,
                    iters: batched.iters,
                    timed: batched.timed,
                    precision: batched.precision,
                    phase_sums: batched.phase_sums,
                });
            }
        };
        // Phases of the warm-up, check and calibration are not reported.
        if let Some(phases) = self.cx.backend.phase_times() {
            phases.begin_phases(u64::from(iters) * u64::from(self.cfg.agg_iters))?;
        }
        let timed = if self.cfg.cuda_graph > 0 {
            self.time_graph(call, placement, iters, &mut iter)?
        } else {
            self.time(call, placement, iters, &mut iter)?
        };
        Ok(Measured {
            checked,
            iters,
            timed,
            precision: None,
            phase_sums: None,
        })
    }

    /// Up to `--check` validation iterations; the first that finds wrong
    /// elements ends the check with that count, summed over ranks (as
    /// nccl-tests does), with this rank's own count (for its group's row,
    /// `--split`) and this rank's seconds of its own work in them. `None`
    /// when checking is off or the backend leaves this output undefined.
    fn check(&mut self, call: &Call, placement: Placement) -> Result<Option<check::Checked>, Error> {
        // before any pattern is used up, so that the seeds stay in step
        if self.cfg.check == 0 || !self.caps.validates(call.collective, placement) {
            return Ok(None);
        }
        let validate = self.cx.validate(&self.caps, self.cfg.cuda_graph > 0);
        let mut work_s = 0.0;
        for _ in 0..self.cfg.check {
            self.rep += 1;
            let c = validate.timed(&mut *self.cx.backend, call, placement, self.rep)?;
            work_s += c.work_s;
            if c.wrong != Some(0) {
                return Ok(Some(check::Checked { work_s, ..c }));
            }
        }
        Ok(Some(check::Checked {
            wrong: Some(0),
            local: Some(0),
            work_s,
        }))
    }

    /// The slow-rank verdict of the run (rank 0, with `-I`).
    pub fn straggler(&self) -> Option<straggler::SlowRank> {
        (self.cfg.per_iter && self.cx.world.rank() == 0).then(|| self.arrivals.verdict(self.cx.world.size()))
    }
}

/// What `measure` found for one point on this rank.
struct Measured {
    /// The check's wrong elements and this rank's own work in it.
    checked: Option<check::Checked>,
    /// Timed iterations.
    iters: u32,
    timed: Timed,
    /// The precision policy's achieved relative half-width (the same on
    /// every rank).
    precision: Option<f64>,
    /// Phase sums the precision policy took batch by batch.
    phase_sums: Option<[f64; 3]>,
}

/// Each group's row of a point takes the aggregate row's precision, cycle
/// and sample count.
fn copy_point_fields(rows: &mut [Record], record: &Record) {
    for row in rows {
        row.precision_pct = record.precision_pct;
        row.cycle = record.cycle;
        row.samples = record.samples;
        row.algo_source = record.algo_source;
    }
}

/// A point's held `--split` rows: out-of-place and in-place of group 0, of
/// group 1, ..., of all.
fn emit_held(held: &[Vec<Record>], on_record: &mut impl FnMut(&Record) -> Result<(), Error>) -> Result<(), Error> {
    if let [oop, ip] = held {
        for (a, b) in oop.iter().zip(ip) {
            on_record(a)?;
            on_record(b)?;
        }
    } else {
        for r in held.iter().flatten() {
            on_record(r)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
