//! The measurement loop: for every case of the plan and both placements,
//! warm up, validate, time, reduce times across ranks, and hand one
//! `Record` to rank 0's callback.
//!
//! Timing (DESIGN.md, nccl-tests' method): barrier, host clock, `iters`
//! operations launched back to back, wait for completion, stop the clock;
//! per-operation time = elapsed / iters. With `--blocking`, each operation
//! is timed alone with a barrier before it (OSU's method). Nothing in the
//! timed region allocates, prints or checks.

pub mod plan;

use std::time::{Instant, SystemTime};

use crate::backend::{Backend, Call};
use crate::collective::{Layout, Pattern};
use crate::config::RunConfig;
use crate::error::Error;
use crate::report::record::{Record, bandwidth_gbps};
use crate::types::Placement;
use crate::world::World;
pub use plan::{Case, Plan};

/// "all_reduce float sum 1048576B in_place", "broadcast int8 root1 8B out_of_place".
pub fn point_label(case: &Case, placement: Placement) -> String {
    let mut label = format!("{} {}", case.collective.name(), case.dtype.name());
    if let Some(op) = case.op {
        label += &format!(" {op}");
    }
    if let Some(root) = case.root {
        label += &format!(" root{root}");
    }
    label + &format!(" {}B {placement}", case.size_bytes())
}

/// Run-wide values that every record carries.
#[derive(Clone, Debug)]
pub struct RunContext {
    pub run_id: String,
    pub host: String,
    pub backend: String,
    pub backend_version: String,
    pub transport: String,
    pub transport_observed: String,
    pub hierarchy: String,
    pub nnodes: usize,
    pub ranks_per_node: usize,
}

/// What a finished sweep found; the same on every rank.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub points: usize,
    pub checked_points: usize,
    pub failed_points: usize,
    pub wrong: u64,
}

pub struct Engine<'a> {
    world: &'a dyn World,
    backend: &'a mut dyn Backend,
    cfg: &'a RunConfig,
    ctx: &'a RunContext,
    /// Check iterations so far: varies the pattern between checks, the
    /// same sequence on every rank.
    rep: u64,
}

impl<'a> Engine<'a> {
    pub fn new(world: &'a dyn World, backend: &'a mut dyn Backend, cfg: &'a RunConfig, ctx: &'a RunContext) -> Self {
        Engine {
            world,
            backend,
            cfg,
            ctx,
            rep: 0,
        }
    }

    /// Measures every point of `plan`. On rank 0, `on_record` receives each
    /// record as soon as it is measured; an error from it, or from the
    /// backend on any rank, ends the sweep on that rank.
    pub fn run(
        &mut self,
        plan: &Plan,
        mut on_record: impl FnMut(&Record) -> Result<(), Error>,
    ) -> Result<Summary, Error> {
        let mut summary = Summary::default();
        for case in &plan.cases {
            let call = Call {
                collective: case.collective,
                dtype: case.dtype,
                op: case.op,
                shape: case.shape,
                at: Layout {
                    nranks: self.world.size(),
                    rank: self.world.rank(),
                    root: case.root.unwrap_or(0),
                },
            };
            self.backend.prepare(&call)?;
            for placement in Placement::BOTH {
                // For profilers' timelines (NVTX on the nccl backend).
                self.backend.point_begin(&point_label(case, placement));
                let measured = self.measure(&call, placement);
                self.backend.point_end();
                let (wrong, time_s) = measured?;
                let times = self.world.gather_f64(time_s);

                summary.points += 1;
                if let Some(w) = wrong {
                    summary.checked_points += 1;
                    summary.wrong += w;
                    summary.failed_points += usize::from(w > 0);
                }
                if let Some(times) = times {
                    on_record(&self.record(case, placement, &times, wrong))?;
                }
            }
        }
        Ok(summary)
    }

    /// Warm-up, check and timing of one point: (wrong elements, seconds per
    /// operation on this rank).
    fn measure(&mut self, call: &Call, placement: Placement) -> Result<(Option<u64>, f64), Error> {
        for _ in 0..self.cfg.warmup {
            self.backend.launch(call, placement)?;
        }
        self.backend.wait()?;
        let wrong = self.check(call, placement)?;
        let time_s = self.time(call, placement)?;
        Ok((wrong, time_s))
    }

    /// Up to `--check` validation iterations; the first that finds wrong
    /// elements ends the check with that count, summed over ranks (as
    /// nccl-tests does). `None` when checking is off.
    fn check(&mut self, call: &Call, placement: Placement) -> Result<Option<u64>, Error> {
        if self.cfg.check == 0 {
            return Ok(None);
        }
        let spec = call.collective.spec();
        for _ in 0..self.cfg.check {
            self.rep += 1;
            let pattern = Pattern::new(call.dtype, call.op, call.at.nranks, self.rep);
            let rank = call.at.rank;
            self.backend.load_input(call, placement, &|i| pattern.input(rank, i))?;
            self.backend.launch(call, placement)?;
            self.backend.wait()?;
            let (out, range) = self.backend.output(call, placement)?;
            if self.cfg.inject_error && !range.is_empty() {
                // Test hook: flip bits of the first received element.
                let at = range.start * call.dtype.size_bytes();
                out.bytes_mut()[at] ^= 0x5a;
            }
            let local = out.count_mismatches(range, |i| spec.expected(&pattern, &call.shape, &call.at, i));
            let total = self.world.sum_u64(local);
            if total > 0 {
                return Ok(Some(total));
            }
        }
        Ok(Some(0))
    }

    /// This rank's time per operation, in seconds.
    fn time(&mut self, call: &Call, placement: Placement) -> Result<f64, Error> {
        let iters = self.cfg.iters;
        if self.cfg.blocking {
            let mut total = 0.0;
            for _ in 0..iters {
                self.world.barrier();
                let start = Instant::now();
                self.backend.launch(call, placement)?;
                self.backend.wait()?;
                total += start.elapsed().as_secs_f64();
            }
            return Ok(total / f64::from(iters));
        }
        self.world.barrier();
        let start = Instant::now();
        for _ in 0..iters {
            self.backend.launch(call, placement)?;
        }
        self.backend.wait()?;
        Ok(start.elapsed().as_secs_f64() / f64::from(iters))
    }

    fn record(&self, case: &Case, placement: Placement, times: &[f64], wrong: Option<u64>) -> Record {
        let time_s = self.cfg.average.reduce(times);
        let min_s = times.iter().copied().fold(f64::INFINITY, f64::min);
        let max_s = times.iter().copied().fold(0.0, f64::max);
        let size_bytes = case.size_bytes();
        let factor = case.collective.spec().bus_factor(self.world.size());
        let (algbw, busbw) = bandwidth_gbps(size_bytes, time_s, factor);
        let ctx = self.ctx;
        Record {
            run_id: ctx.run_id.clone(),
            timestamp: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            host: ctx.host.clone(),
            backend: ctx.backend.clone(),
            backend_version: ctx.backend_version.clone(),
            transport: ctx.transport.clone(),
            transport_observed: ctx.transport_observed.clone(),
            hierarchy: ctx.hierarchy.clone(),
            collective: case.collective.name().into(),
            dtype: case.dtype.name().into(),
            op: case.op.map_or("none", |o| o.name()).into(),
            root: case.root.map_or(-1, |r| r as i64),
            placement: placement.name().into(),
            size_bytes,
            count: case.shape.count as u64,
            nranks: self.world.size() as u64,
            nnodes: ctx.nnodes as u64,
            ranks_per_node: ctx.ranks_per_node as u64,
            iters: u64::from(self.cfg.iters),
            warmup: u64::from(self.cfg.warmup),
            time_us: time_s * 1e6,
            time_min_us: min_s * 1e6,
            time_max_us: max_s * 1e6,
            algbw_gbps: algbw,
            busbw_gbps: busbw,
            wrong,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::types::{DType, ReduceOp};

    #[test]
    fn point_labels_name_what_a_profiler_timeline_shows() {
        let case = |c: Collective, op, root| Case {
            collective: c,
            dtype: DType::Float,
            op,
            root,
            shape: c.spec().shape(256, 2),
        };
        assert_eq!(
            point_label(
                &case(Collective::AllReduce, Some(ReduceOp::Sum), None),
                Placement::InPlace
            ),
            "all_reduce float sum 1024B in_place"
        );
        assert_eq!(
            point_label(&case(Collective::Broadcast, None, Some(1)), Placement::OutOfPlace),
            "broadcast float root1 1024B out_of_place"
        );
    }
}
