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

pub mod adaptive;
pub mod check;
pub mod digest;
pub mod groups;
pub mod policy;
pub mod precision;
pub mod sampler;
pub mod steps;
pub mod stop;
pub mod straggler;
pub mod watchdog;

use std::time::{Duration, SystemTime};

use serde::{Serialize, Serializer};

use crate::backend::{Backend, Call, Graphs, IterationMarks, LaunchExtras};
use crate::clock::Clock;
use crate::collective::Layout;
use crate::error::Error;
use crate::plan::{Capabilities, Case, Plan};
use crate::record::{Record, bandwidth_gbps};
use crate::topology::profile::Profile;
use crate::types::{Average, BackendKind, Placement, Register, TimingMethod};
use crate::world::World;
use adaptive::Calibrator;
use groups::Groups;
use policy::Iterations;
use stop::StopRequest;
use watchdog::Watchdog;

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
    /// Sweeps to run; 0 = until stopped.
    pub cycles: u64,
    /// Longest a point or the set-up may take; `None` = no watchdog.
    #[serde(rename = "timeout_s", serialize_with = "optional_seconds")]
    pub timeout: Option<Duration>,
}

impl Timing {
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

pub struct Engine<'a> {
    world: &'a dyn World,
    backend: &'a mut dyn Backend,
    /// What the backend can run (which outputs it defines, its name).
    caps: Capabilities,
    cfg: &'a Timing,
    ctx: &'a RunContext,
    /// Where times are read: the host clock, or a test's virtual clock.
    clock: Clock,
    /// Test hook: corrupt a received element after each check.
    inject_error: bool,
    watchdog: Option<&'a Watchdog>,
    stop: StopRequest,
    /// Check iterations so far: varies the pattern between checks, the
    /// same sequence on every rank.
    rep: u64,
    /// Each rank's arrival at the checks' synchronisations (rank 0, `-I`).
    arrivals: straggler::Arrivals,
    /// `--split`: this rank's group runs each point on its own
    /// sub-communicator, and rank 0 reports every group (`groups`).
    groups: Option<&'a Groups>,
}

impl<'a> Engine<'a> {
    pub fn new(world: &'a dyn World, backend: &'a mut dyn Backend, timing: &'a Timing, ctx: &'a RunContext) -> Self {
        Engine {
            caps: backend.capabilities(&timing.extras()),
            world,
            backend,
            cfg: timing,
            ctx,
            clock: Clock::Host,
            inject_error: false,
            watchdog: None,
            stop: StopRequest::never(),
            rep: 0,
            arrivals: straggler::Arrivals::new(timing.straggler_threshold_pct / 100.0),
            groups: None,
        }
    }

    /// `--split`: every point runs in this rank's group (made by
    /// `Groups::split`), and each group gets its row beside the aggregate.
    pub fn with_groups(mut self, groups: Option<&'a Groups>) -> Self {
        self.groups = groups;
        self
    }

    /// Every point is watched by `watchdog`.
    pub fn with_watchdog(mut self, watchdog: Option<&'a Watchdog>) -> Self {
        self.watchdog = watchdog;
        self
    }

    /// Test hook: after each check, every rank with an output corrupts its
    /// first received element, so that validation must fail.
    pub fn with_injected_errors(mut self, inject: bool) -> Self {
        self.inject_error = inject;
        self
    }

    /// The sweep stops at the next point when `stop` fires on any rank.
    pub fn with_stop(mut self, stop: StopRequest) -> Self {
        self.stop = stop;
        self
    }

    /// Times are read from `clock` (a test's virtual clock) instead of the
    /// host's.
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
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
                let signal = self.world.max_u64(self.stop.signal());
                if signal != 0 {
                    summary.stopped_by = Some(signal);
                    break 'cycles;
                }
                self.measure_case(case, cycle, &mut summary, &mut on_record)?;
            }
            summary.cycles = cycle;
        }
        if let Some(w) = self.watchdog {
            w.idle();
        }
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
        let call = Call {
            collective: case.collective,
            hierarchy: case.hierarchy,
            dtype: case.dtype,
            op: case.op,
            shape: case.shape,
            at: Layout {
                nranks: self.groups.map_or(self.world.size(), Groups::size),
                rank: self.groups.map_or(self.world.rank(), |g| g.index),
                root: case.root.unwrap_or(0),
                shift: 1,
            },
            group: self.groups.and_then(|g| g.sub),
        };
        // With --split, a point's rows go out once both placements are
        // measured, each group's out-of-place and in-place rows together.
        let mut held: Vec<Vec<Record>> = Vec::new();
        for placement in Placement::BOTH {
            let what = describe(case, placement);
            if let Some(w) = self.watchdog {
                w.watch(what.as_str());
            }
            if placement == Placement::OutOfPlace {
                self.backend.prepare(&call)?;
            }
            // For profilers' timelines (NVTX on the nccl backend).
            if let Some(profiler) = self.backend.profiler() {
                profiler.range_push(&what);
            }
            let measured = self.measure(&call, placement);
            if let Some(profiler) = self.backend.profiler() {
                profiler.range_pop();
            }
            let Measured {
                checked,
                iters,
                timed,
                precision,
                phase_sums,
            } = measured?;
            let wrong = checked.and_then(|c| c.wrong);
            let times = self.world.gather_f64(timed.per_op_s);
            // Arrival skew: each rank's own part of the check, where every
            // rank does the same (every rank takes part, or none).
            if self.cfg.per_iter
                && case.collective.spec().is_symmetric()
                && let Some(c) = checked.filter(|c| c.wrong.is_some())
                && let Some(work) = self.world.gather_f64(c.work_s)
            {
                self.arrivals.add(case.size_bytes(), &work);
            }
            // every rank's size, count and wrong elements (their group's)
            let wrong_local = checked.and_then(|c| c.local);
            let split = self.groups.map(|_| {
                let g = |v: u64| self.world.gather_f64(v as f64);
                (
                    g(case.size_bytes()),
                    g(case.shape.count as u64),
                    g(wrong_local.unwrap_or(0)),
                )
            });
            let per_iter = match timed.samples {
                Some(samples) => Some(self.world.max_f64s_to_root(&samples)),
                None => None,
            };
            let phases = self.phase_times(&call, iters, phase_sums)?;

            summary.points += 1;
            if let Some(w) = wrong {
                summary.checked_points += 1;
                summary.wrong += w;
                summary.failed_points += usize::from(w > 0);
            }
            if let Some(times) = times {
                let scope = Scope {
                    size_bytes: case.size_bytes(),
                    count: case.shape.count as u64,
                    nranks: call.at.nranks,
                    group: self.groups.map(|_| groups::ALL.to_string()),
                };
                let mut record = self.record(case, placement, iters, &times, wrong, phases, scope);
                record.precision_pct = precision.map(|p| p * 100.0);
                record.cycle = Some(cycle);
                record.samples = Some(self.cfg.cycles);
                if let Some(samples) = per_iter.flatten() {
                    add_iteration_stats(&mut record, &samples, &times);
                }
                match (self.groups, split) {
                    (Some(groups), Some((Some(sizes), Some(counts), Some(wrongs)))) => {
                        let mut rows =
                            self.group_records(groups, case, placement, iters, &times, wrong, &sizes, &counts, &wrongs);
                        for row in &mut rows {
                            row.precision_pct = record.precision_pct;
                            row.cycle = record.cycle;
                            row.samples = record.samples;
                        }
                        rows.push(record);
                        held.push(rows);
                    }
                    _ => on_record(&record)?,
                }
            }
        }
        // out-of-place and in-place of group 0, of group 1, ..., of all
        if let [oop, ip] = held.as_slice() {
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

    /// Each group's row of a point (rank 0, `--split`): its ranks' times
    /// reduced as `--average` says, its size, count and rank count, its bus
    /// factor, its ranks' wrong elements (every rank's gathered value in
    /// world rank order).
    #[allow(clippy::too_many_arguments)]
    fn group_records(
        &self,
        groups: &Groups,
        case: &Case,
        placement: Placement,
        iters: u32,
        times: &[f64],
        wrong: Option<u64>,
        sizes: &[f64],
        counts: &[f64],
        wrongs: &[f64],
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
            self.backend.launch(call, placement, iter, 1)?;
            iter += 1;
        }
        self.backend.wait()?;
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
        if let Some(phases) = self.backend.phase_times() {
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

    /// One timed iteration: one operation, or with `-m N` N operations in
    /// one group. `iter` numbers operations, so it moves by N.
    fn issue(&mut self, call: &Call, placement: Placement, iter: &mut u64) -> Result<(), Error> {
        let agg = self.cfg.agg_iters.max(1);
        self.backend.launch(call, placement, *iter, agg)?;
        *iter += u64::from(agg);
        Ok(())
    }

    /// The backend's CUDA graphs, which `-G` needs.
    fn graphs(&mut self) -> Result<&mut dyn Graphs, Error> {
        let why = format!(
            "-G/--cuda-graph {}: the {} backend has no CUDA graphs; drop -G",
            self.cfg.cuda_graph, self.caps.backend
        );
        self.backend.graphs().ok_or_else(|| Error::usage(why))
    }

    /// The backend's device timing marks (only asked for where `time` saw
    /// that it has them).
    fn marks(&mut self) -> Result<&mut dyn IterationMarks, Error> {
        let why = format!("-I: the {} backend has no device timing marks", self.caps.backend);
        self.backend.iteration_marks().ok_or_else(|| Error::usage(why))
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
        let validate = check::Validate {
            world: self.world,
            caps: &self.caps,
            through_graph: self.cfg.cuda_graph > 0,
            inject_error: self.inject_error,
            clock: self.clock.clone(),
        };
        let mut work_s = 0.0;
        for _ in 0..self.cfg.check {
            self.rep += 1;
            let c = validate.timed(&mut *self.backend, call, placement, self.rep)?;
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

    /// Timed iterations for `--min-time` when `-n` is not given: batches of
    /// 1, 2, 4, ... operations until one takes a tenth of the budget; every
    /// rank decides on the slowest rank's batch time, so all agree.
    fn calibrate(&mut self, call: &Call, placement: Placement, budget: Duration, iter: &mut u64) -> Result<u32, Error> {
        let mut calibrator = Calibrator::new(budget);
        while let Some(batch) = calibrator.next_batch() {
            let mut elapsed = 0.0;
            if self.cfg.blocking {
                for _ in 0..batch {
                    self.world.barrier();
                    let start = self.clock.now();
                    self.issue(call, placement, iter)?;
                    self.backend.wait()?;
                    elapsed += self.clock.seconds_since(start);
                }
            } else {
                self.world.barrier();
                let start = self.clock.now();
                for _ in 0..batch {
                    self.issue(call, placement, iter)?;
                }
                self.backend.wait()?;
                elapsed = self.clock.seconds_since(start);
            }
            // microseconds as an integer: the max reduction needs no float
            let slowest_us = self.world.max_u64((elapsed * 1e6).ceil() as u64);
            calibrator.observe(slowest_us as f64 * 1e-6);
        }
        Ok(calibrator.iterations())
    }

    /// This rank's time per operation over `iters` timed iterations, and
    /// with `-I` each operation's time (an iteration's time over its `-m`
    /// operations).
    fn time(&mut self, call: &Call, placement: Placement, iters: u32, iter: &mut u64) -> Result<Timed, Error> {
        let per_iter = self.cfg.per_iter;
        let agg = self.cfg.agg_iters;
        let per_op = |iteration_s: f64| per_op_seconds(iteration_s, 1, agg, 0);
        let mut samples = per_iter.then(|| Vec::with_capacity(iters as usize));
        let device_marks = per_iter && self.backend.iteration_marks().is_some();
        if self.cfg.blocking {
            let mut total = 0.0;
            for _ in 0..iters {
                self.world.barrier();
                let start = self.clock.now();
                self.issue(call, placement, iter)?;
                self.backend.wait()?;
                let took = self.clock.seconds_since(start);
                total += took;
                if let Some(s) = samples.as_mut() {
                    s.push(per_op(took));
                }
            }
            return Ok(Timed {
                per_op_s: per_op_seconds(total, iters, agg, 0),
                elapsed_s: total,
                samples,
            });
        }
        if device_marks {
            // The timing events are made here, before the barrier; the first
            // is recorded after it (nccl-tests starts timing after its
            // barrier), so that iteration 0 holds no wait for other ranks.
            self.marks()?.start_marks(iters)?;
        }
        self.world.barrier();
        let start = self.clock.now();
        let mut last = start;
        for i in 0..iters {
            if device_marks && i == 0 {
                self.marks()?.mark_iteration(0)?;
            }
            self.issue(call, placement, iter)?;
            if device_marks {
                self.marks()?.mark_iteration(i + 1)?;
            } else if let Some(s) = samples.as_mut() {
                // a synchronous library: the launch returned when it was done
                let now = self.clock.now();
                s.push(per_op(now.saturating_sub(last).as_secs_f64()));
                last = now;
            }
        }
        self.backend.wait()?;
        let elapsed_s = self.clock.seconds_since(start);
        let per_op_s = per_op_seconds(elapsed_s, iters, agg, 0);
        if device_marks {
            let marked = self.marks()?.marked_times()?;
            samples = Some(marked.into_iter().map(per_op).collect());
        }
        Ok(Timed {
            per_op_s,
            elapsed_s,
            samples,
        })
    }

    /// `-G N`: the timed iterations are captured once in a CUDA graph
    /// (nothing runs while capturing), then the graph is replayed N times
    /// between the barrier and the stop of the clock, as nccl-tests does.
    fn time_graph(&mut self, call: &Call, placement: Placement, iters: u32, iter: &mut u64) -> Result<Timed, Error> {
        let (agg, launches) = (self.cfg.agg_iters, self.cfg.cuda_graph);
        self.graphs()?.begin_capture()?;
        let mut captured = Ok(());
        for _ in 0..iters {
            captured = self.issue(call, placement, iter);
            if captured.is_err() {
                break;
            }
        }
        // The capture always ends, so the stream is usable whatever failed.
        let ended = self.graphs()?.end_capture();
        captured?;
        ended?;
        self.world.barrier();
        let start = self.clock.now();
        self.graphs()?.replay(launches)?;
        self.backend.wait()?;
        let elapsed_s = self.clock.seconds_since(start);
        Ok(Timed {
            per_op_s: per_op_seconds(elapsed_s, iters, agg, launches),
            elapsed_s,
            samples: None,
        })
    }

    /// Mean over ranks of each phase's time per operation, on rank 0, for
    /// hierarchical points when `--phase-times` is on. Every rank takes
    /// part in the reduction whenever the backend timed phases.
    /// `taken`: the sums of the precision policy's batches, which took
    /// them batch by batch.
    fn phase_times(&mut self, call: &Call, iters: u32, taken: Option<[f64; 3]>) -> Result<Option<[f64; 3]>, Error> {
        let Some(phases) = self.backend.phase_times() else {
            return Ok(None);
        };
        let sums = match taken {
            Some(sums) => sums,
            None => phases.take_phase_times()?,
        };
        if call.hierarchy.is_flat() {
            return Ok(None);
        }
        let per_op = sums.map(|s| s / f64::from(iters));
        let mut mean = [0.0; 3];
        for (phase, value) in per_op.into_iter().enumerate() {
            if let Some(all) = self.world.gather_f64(value) {
                mean[phase] = all.iter().sum::<f64>() / all.len() as f64;
            }
        }
        Ok((self.world.rank() == 0).then_some(mean))
    }

    /// The slow-rank verdict of the run (rank 0, with `-I`).
    pub fn straggler(&self) -> Option<straggler::SlowRank> {
        (self.cfg.per_iter && self.world.rank() == 0).then(|| self.arrivals.verdict(self.world.size()))
    }

    #[allow(clippy::too_many_arguments)]
    fn record(
        &self,
        case: &Case,
        placement: Placement,
        iters: u32,
        times: &[f64],
        wrong: Option<u64>,
        phases: Option<[f64; 3]>,
        scope: Scope,
    ) -> Record {
        let time_s = self.cfg.average.reduce(times);
        let min_s = times.iter().copied().fold(f64::INFINITY, f64::min);
        let max_s = times.iter().copied().fold(0.0, f64::max);
        let size_bytes = scope.size_bytes;
        let factor = case.collective.spec().bus_factor(scope.nranks);
        let (algbw, busbw) = bandwidth_gbps(size_bytes, time_s, factor);
        let ctx = self.ctx;
        Record {
            run_id: ctx.run_id.clone(),
            timestamp: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            host: ctx.host.clone(),
            backend: ctx.backend,
            backend_version: ctx.backend_version.clone(),
            transport: ctx.transport,
            transport_observed: ctx.transport_observed.clone(),
            hierarchy: case.hierarchy,
            collective: case.collective,
            dtype: case.dtype,
            op: case.op,
            root: case.root,
            placement,
            size_bytes,
            count: scope.count,
            nranks: scope.nranks as u64,
            nnodes: ctx.nnodes as u64,
            ranks_per_node: ctx.ranks_per_node as u64,
            iters: u64::from(iters),
            warmup: u64::from(self.cfg.warmup),
            time_us: time_s * 1e6,
            time_min_us: min_s * 1e6,
            time_max_us: max_s * 1e6,
            algbw_gbps: algbw,
            busbw_gbps: busbw,
            wrong,
            collbench_version: Some(env!("CARGO_PKG_VERSION").into()),
            timing: Some(if self.cfg.blocking {
                TimingMethod::Blocking
            } else {
                TimingMethod::Batched
            }),
            average: Some(self.cfg.average),
            iter_policy: Some(self.cfg.iterations.policy()),
            precision_target_pct: self.cfg.iterations.target_pct(),
            agg_iters: Some(self.cfg.agg_iters),
            cuda_graph: Some(self.cfg.cuda_graph),
            register: Some(self.cfg.register),
            rotate: Some(self.cfg.rotate),
            phase_intra1_us: phases.map(|p| p[0] * 1e6),
            phase_inter_us: phases.map(|p| p[1] * 1e6),
            phase_intra2_us: phases.map(|p| p[2] * 1e6),
            label: ctx.label.clone(),
            traffic: case.shape.peers.and_then(|p| p.traffic()).and_then(|t| t.column()),
            group: scope.group,
            ..Record::default()
        }
    }
}

/// Seconds per operation: `elapsed_s` over every operation the timed
/// region ran, `iters` iterations of `agg_iters` operations each (`-m`),
/// replayed `graph_launches` times (`-G`; 0 is no graph, one pass).
pub fn per_op_seconds(elapsed_s: f64, iters: u32, agg_iters: u32, graph_launches: u32) -> f64 {
    let ops = f64::from(iters.max(1)) * f64::from(agg_iters.max(1)) * f64::from(graph_launches.max(1));
    elapsed_s / ops
}

/// Iterations to capture with `-G N` when the count adapts to `--min-time`:
/// the calibrated count fills the budget once, and the graph runs N times,
/// so it holds a N-th of it (at least one iteration).
pub fn captured_iterations(calibrated: u32, graph_launches: u32) -> u32 {
    if graph_launches <= 1 {
        calibrated
    } else {
        calibrated.div_ceil(graph_launches).max(1)
    }
}

/// What the timed iterations of one rank gave.
struct Timed {
    per_op_s: f64,
    /// The timed region's length (with `--blocking`, the sum of the
    /// operations' times).
    elapsed_s: f64,
    /// Each operation's time, with `-I`.
    samples: Option<Vec<f64>>,
}

/// This row's extent (`Engine::record`): the point as this rank's
/// communicator ran it, or as a group's ranks did (`--split`).
struct Scope {
    size_bytes: u64,
    count: u64,
    /// The ranks of the communicator: the bus factor's `n`.
    nranks: usize,
    /// The `group` column (`--split`).
    group: Option<String>,
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

/// `-I` columns: the distribution of per-iteration times (each iteration
/// taken at its slowest rank) and the slowest rank against the median.
fn add_iteration_stats(record: &mut Record, samples: &[f64], times: &[f64]) {
    let (Some(s), Some((rank, excess))) = (straggler::IterSummary::of(samples), straggler::slowest_rank(times)) else {
        return;
    };
    record.time_iter_min_us = Some(s.min * 1e6);
    record.time_p50_us = Some(s.p50 * 1e6);
    record.time_p99_us = Some(s.p99 * 1e6);
    record.time_iter_max_us = Some(s.max * 1e6);
    record.time_cv = Some(s.cv);
    record.iter_times_us = Some(samples.iter().map(|t| t * 1e6).collect());
    record.slowest_rank = Some(rank as u64);
    record.slowest_excess_pct = Some(excess * 100.0);
}

#[cfg(test)]
mod tests;
