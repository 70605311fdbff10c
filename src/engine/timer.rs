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
    /// The backend's CUDA graphs, which `-G` needs.
    pub(super) fn graphs(&mut self) -> Result<&mut dyn Graphs, Error> {
        let why = format!(
            "-G/--cuda-graph {}: the {} backend has no CUDA graphs; drop -G",
            self.cfg.cuda_graph, self.caps.backend
        );
        self.cx.backend.graphs().ok_or_else(|| Error::usage(why))
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
            let elapsed = if self.cfg.blocking {
                self.one_at_a_time(call, placement, batch, iter, |_| {})?
            } else {
                self.back_to_back(call, placement, batch, iter, None)?
            };
            // microseconds as an integer: the max reduction needs no float
            let slowest_us = self.cx.world.max_u64((elapsed * 1e6).ceil() as u64);
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
        let agg = self.cfg.agg_iters;
        let per_op = |iteration_s: f64| per_op_seconds(iteration_s, 1, agg, 0);
        let mut samples = self.cfg.per_iter.then(|| Vec::with_capacity(iters as usize));
        let device_marks = self.cfg.per_iter && self.cx.backend.iteration_marks().is_some();
        let elapsed_s = if self.cfg.blocking {
            self.one_at_a_time(call, placement, iters, iter, |took| {
                if let Some(s) = samples.as_mut() {
                    s.push(per_op(took));
                }
            })?
        } else if device_marks {
            // The timing events are made here, before the barrier; the first
            // is recorded after it (nccl-tests starts timing after its
            // barrier), so that iteration 0 holds no wait for other ranks.
            marks(self.cx.backend, self.caps.backend)?.start_marks(iters)?;
            let elapsed_s = self.back_to_back(call, placement, iters, iter, Some(Marks::Device))?;
            let marked = marks(self.cx.backend, self.caps.backend)?.marked_times()?;
            samples = Some(marked.into_iter().map(per_op).collect());
            elapsed_s
        } else {
            // a synchronous library: each launch returned when it was done
            let host = samples.as_mut().map(Marks::Host);
            self.back_to_back(call, placement, iters, iter, host)?
        };
        Ok(Timed {
            per_op_s: per_op_seconds(elapsed_s, iters, agg, 0),
            elapsed_s,
            samples,
        })
    }

    /// `n` timed iterations back to back (`Context::batch`), numbered from
    /// `iter` on (each moves it by its `-m` operations): the batch's
    /// seconds. With `marks`, each iteration is marked too.
    fn back_to_back(
        &mut self,
        call: &Call,
        placement: Placement,
        n: u32,
        iter: &mut u64,
        mut marks_to: Option<Marks<'_>>,
    ) -> Result<f64, Error> {
        let (ops, first, kind, clock) = (
            self.cfg.agg_iters.max(1),
            *iter,
            self.caps.backend,
            self.cx.clock.clone(),
        );
        let per_op = |iteration_s: f64| per_op_seconds(iteration_s, 1, ops, 0);
        let mut last = None;
        let elapsed = self.cx.batch(n, |backend, i, start| {
            if matches!(marks_to, Some(Marks::Device)) && i == 0 {
                marks(backend, kind)?.mark_iteration(0)?;
            }
            backend.launch(call, placement, first + u64::from(i) * u64::from(ops), ops)?;
            match marks_to.as_mut() {
                Some(Marks::Device) => marks(backend, kind)?.mark_iteration(i + 1)?,
                Some(Marks::Host(s)) => {
                    let now = clock.now();
                    s.push(per_op(now.saturating_sub(last.unwrap_or(start)).as_secs_f64()));
                    last = Some(now);
                }
                None => {}
            }
            Ok(())
        })?;
        *iter += u64::from(n) * u64::from(ops);
        Ok(elapsed)
    }

    /// `n` timed iterations one at a time, a barrier before each
    /// (`--blocking`, `Context::one_by_one`): their seconds summed, each
    /// given to `took`.
    fn one_at_a_time(
        &mut self,
        call: &Call,
        placement: Placement,
        n: u32,
        iter: &mut u64,
        mut took: impl FnMut(f64),
    ) -> Result<f64, Error> {
        let (ops, first) = (self.cfg.agg_iters.max(1), *iter);
        let mut total = 0.0;
        let launch = |backend: &mut dyn crate::backend::Backend, i: usize| {
            backend.launch(call, placement, first + i as u64 * u64::from(ops), ops)
        };
        self.cx.one_by_one(
            n as usize,
            true,
            |_, _| Ok(()),
            launch,
            |_, t| {
                total += t;
                took(t);
            },
        )?;
        *iter += u64::from(n) * u64::from(ops);
        Ok(total)
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
        let ops = agg.max(1);
        self.graphs()?.begin_capture()?;
        let mut captured = Ok(());
        for _ in 0..iters {
            captured = self.cx.backend.launch(call, placement, *iter, ops);
            *iter += u64::from(ops);
            if captured.is_err() {
                break;
            }
        }
        // The capture always ends, so the stream is usable whatever failed.
        let ended = self.graphs()?.end_capture();
        captured?;
        ended?;
        let kind = self.caps.backend;
        let elapsed_s = self.cx.batch(1, |backend, _, _| {
            let graphs = backend
                .graphs()
                .ok_or_else(|| Error::usage(format!("-G: the {kind} backend has no CUDA graphs; drop -G")))?;
            graphs.replay(launches)
        })?;
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
        let Some(phases) = self.cx.backend.phase_times() else {
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
            if let Some(all) = self.cx.world.gather_f64(value) {
                mean[phase] = all.iter().sum::<f64>() / all.len() as f64;
            }
        }
        Ok((self.cx.world.rank() == 0).then_some(mean))
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

/// How each iteration of a back-to-back batch is timed with `-I`: by the
/// backend's device marks, or on the host clock into these samples.
enum Marks<'a> {
    Device,
    Host(&'a mut Vec<f64>),
}

/// The backend's device timing marks (only asked for where `time` saw
/// that it has them).
fn marks<'b>(backend: &'b mut dyn crate::backend::Backend, kind: &str) -> Result<&'b mut dyn IterationMarks, Error> {
    backend
        .iteration_marks()
        .ok_or_else(|| Error::usage(format!("-I: the {kind} backend has no device timing marks")))
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
