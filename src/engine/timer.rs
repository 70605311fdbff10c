//! How one point's iterations are timed: one at a time under
//! `--blocking`, back to back otherwise, with `-I` each iteration too, and
//! under `-G` as replays of a captured CUDA graph; the calibration of
//! `--min-time`, and the mean of `--phase-times` over the ranks.

use std::time::Duration;

use super::Engine;
use super::adaptive::Calibrator;
use crate::backend::{Call, Graphs, IterationMarks};
use crate::error::Error;
use crate::types::Placement;

impl Engine<'_> {
    /// One timed iteration: one operation, or with `-m N` N operations in
    /// one group. `iter` numbers operations, so it moves by N.
    pub(super) fn issue(&mut self, call: &Call, placement: Placement, iter: &mut u64) -> Result<(), Error> {
        let agg = self.cfg.agg_iters.max(1);
        self.backend.launch(call, placement, *iter, agg)?;
        *iter += u64::from(agg);
        Ok(())
    }

    /// The backend's CUDA graphs, which `-G` needs.
    pub(super) fn graphs(&mut self) -> Result<&mut dyn Graphs, Error> {
        let why = format!(
            "-G/--cuda-graph {}: the {} backend has no CUDA graphs; drop -G",
            self.cfg.cuda_graph, self.caps.backend
        );
        self.backend.graphs().ok_or_else(|| Error::usage(why))
    }

    /// The backend's device timing marks (only asked for where `time` saw
    /// that it has them).
    pub(super) fn marks(&mut self) -> Result<&mut dyn IterationMarks, Error> {
        let why = format!("-I: the {} backend has no device timing marks", self.caps.backend);
        self.backend.iteration_marks().ok_or_else(|| Error::usage(why))
    }

    /// Timed iterations for `--min-time` when `-n` is not given: batches of
    /// 1, 2, 4, ... operations until one takes a tenth of the budget; every
    /// rank decides on the slowest rank's batch time, so all agree.
    pub(super) fn calibrate(
        &mut self,
        call: &Call,
        placement: Placement,
        budget: Duration,
        iter: &mut u64,
    ) -> Result<u32, Error> {
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
    pub(super) fn time(
        &mut self,
        call: &Call,
        placement: Placement,
        iters: u32,
        iter: &mut u64,
    ) -> Result<Timed, Error> {
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
    pub(super) fn time_graph(
        &mut self,
        call: &Call,
        placement: Placement,
        iters: u32,
        iter: &mut u64,
    ) -> Result<Timed, Error> {
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
    pub(super) fn phase_times(
        &mut self,
        call: &Call,
        iters: u32,
        taken: Option<[f64; 3]>,
    ) -> Result<Option<[f64; 3]>, Error> {
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
pub(super) struct Timed {
    pub(super) per_op_s: f64,
    /// The timed region's length (with `--blocking`, the sum of the
    /// operations' times).
    pub(super) elapsed_s: f64,
    /// Each operation's time, with `-I`.
    pub(super) samples: Option<Vec<f64>>,
}
