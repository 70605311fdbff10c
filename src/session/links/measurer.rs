//! The links matrix on a real data plane: `BackendMeasurer` implements
//! `links::Measurer` over the engine's point-to-point measurements
//! (`engine::pairs`: NCCL's grouped ncclSend/ncclRecv on GPUs, MPI's
//! nonblocking sends and receives on host memory; docs/links.md, "How a
//! pair is measured"), and turns their times into the matrix's figures.
//!
//! Every rank calls every method together. A pair's sample is its slower
//! end's; a subset's, its slowest member's. After each block every rank's
//! samples are gathered to every rank, so that every rank holds the same
//! matrix and the deterministic finder takes the same next step everywhere
//! without another message. Bandwidths come from the collective's bus
//! factor and `record::bandwidth_gbps`: a pair's exchanges are sendrecvs
//! (factor 1; both ways carry twice the bytes), a subset's all-reduce has
//! the all-reduce's factor at its size. All-reduces on subsets run on
//! sub-communicators (`SubGroups::split`), every subset at once.
//!
//! Other commands (an acceptance check) drive it the same way: make one
//! with `BackendMeasurer::new` once the backend is chosen, then hand it to
//! `links::measure_matrix` or `links::find`.
//!
//! Must not: print, judge, time or validate anything itself (the engine
//! does), or know the schedule beyond the rounds it is given.

use crate::backend::{Call, SubGroup};
use crate::collective::{Collective, Layout};
use crate::engine::Context;
use crate::engine::pairs::{self, PairSampling, Partner};
use crate::error::Error;
use crate::links::metric::{Message, Metric, PerMetric, Value};
use crate::links::{Endpoint, Measurer, Pair, PairSamples, Probe};
use crate::plan::Reservation;
use crate::record::bandwidth_gbps;
use crate::topology::Hierarchy;
use crate::types::{DType, ReduceOp};

/// Pairs and all-reduces move float elements (4 bytes): sizes are
/// multiples of 4.
pub const DTYPE: DType = DType::Float;

/// The `links::Measurer` of a backend with point-to-point operations.
pub struct BackendMeasurer<'a> {
    /// The world, backend, clock, watchdog (each round is one watched
    /// step), stop request (a signal ends the measurement at the next
    /// round) and test hook.
    cx: Context<'a>,
    endpoints: Vec<Endpoint>,
    /// Validated exchanges per pair, and validated all-reduces per subset;
    /// 0: nothing is checked.
    check: u32,
    describe: String,
    /// Seconds spent in rounds, on the context's clock.
    busy_s: f64,
    /// The probe the buffers were prepared for.
    prepared: Option<Probe>,
    rounds: usize,
    /// Mismatching received elements, summed over every rank (pairs and
    /// all-reduces alike), and the exchanges that were checked.
    wrong: u64,
    checked: u64,
    stopped_by: Option<u64>,
}

/// Where the measurement stopped on a signal.
pub const STOPPED: &str = "stopped";

impl<'a> BackendMeasurer<'a> {
    /// A measurer over `cx`'s backend (which must offer `point_to_point`),
    /// with `endpoints` indexed by rank, `check` validated operations per
    /// pair and subset. Nothing is allocated until the first round.
    pub fn new(cx: Context<'a>, endpoints: Vec<Endpoint>, check: u32) -> Result<BackendMeasurer<'a>, Error> {
        if endpoints.len() != cx.world.size() {
            return Err(Error::runtime(format!(
                "internal error: {} endpoints for {} ranks",
                endpoints.len(),
                cx.world.size()
            )));
        }
        let identity = cx.backend.identity();
        if cx.backend.point_to_point().is_none() {
            return Err(Error::usage(format!(
                "the {} backend has no point-to-point operations for links",
                identity.kind.name()
            )));
        }
        Ok(BackendMeasurer {
            cx,
            endpoints,
            check,
            describe: format!("{} ({})", identity.kind.name(), identity.version),
            busy_s: 0.0,
            prepared: None,
            rounds: 0,
            wrong: 0,
            checked: 0,
            stopped_by: None,
        })
    }

    /// Mismatching received elements so far, over every rank.
    pub fn wrong(&self) -> u64 {
        self.wrong
    }

    /// Checked exchanges and all-reduces so far, over every rank.
    pub fn checked(&self) -> u64 {
        self.checked
    }

    /// The signal that stopped the measurement, if one did.
    pub fn stopped_by(&self) -> Option<u64> {
        self.stopped_by
    }

    /// Rounds measured (pairs and all-reduces).
    pub fn rounds(&self) -> usize {
        self.rounds
    }

    /// The pair call of `bytes` on the backend's own communicator.
    fn pair_call(&self, bytes: u64) -> Call {
        let count = (bytes / DTYPE.size_bytes() as u64) as usize;
        let n = self.cx.world.size();
        Call {
            collective: Collective::SendRecv,
            hierarchy: Hierarchy::Flat,
            dtype: DTYPE,
            op: None,
            shape: Collective::SendRecv.spec().shape(count, n),
            at: Layout::new(n, self.cx.world.rank(), 0),
            group: None,
        }
    }

    /// Buffers for `probe`'s pair call (the latency call fits in them).
    fn prepare(&mut self, probe: &Probe) -> Result<(), Error> {
        if self.prepared == Some(*probe) {
            return Ok(());
        }
        let call = self.pair_call(probe.size_bytes.max(probe.latency_bytes));
        if self.prepared.is_none() {
            let reservation = Reservation::of([(Hierarchy::Flat, DTYPE, call.shape)], false);
            self.cx.backend.reserve(&reservation)?;
        }
        self.cx.backend.prepare(&call)?;
        self.prepared = Some(*probe);
        Ok(())
    }

    /// Every rank agrees whether to go on; a stop signal on any rank ends
    /// the measurement on all of them.
    fn stop_requested(&mut self) -> Result<(), Error> {
        let signal = self.cx.stop_signal();
        if signal == 0 {
            return Ok(());
        }
        self.stopped_by = Some(signal);
        Err(Error::runtime(format!(
            "{STOPPED} by {}",
            crate::engine::stop::signal_name(signal)
        )))
    }

    /// How each pair or subset of `probe` is sampled.
    fn sampling(&self, probe: &Probe) -> PairSampling {
        PairSampling {
            samples: probe.samples,
            iters: probe.iters,
            warmup: probe.warmup,
            check: self.check,
        }
    }

    /// A block of rounds, every pair of a round at once, the rounds' samples
    /// interleaved (`engine::pairs`); each pair's samples, as every rank
    /// sees them.
    fn block(&mut self, rounds: &[Vec<Pair>], probe: &Probe) -> Result<Vec<Vec<PairSamples>>, Error> {
        self.stop_requested()?;
        let first = self.rounds + 1;
        self.rounds += rounds.len();
        let last = self.rounds;
        self.cx.watch(|| {
            format!(
                "links rounds {first}-{last} ({} pair(s))",
                rounds.iter().map(Vec::len).sum::<usize>()
            )
        });
        self.prepare(probe)?;
        let started = self.cx.clock.now();
        let me = self.cx.world.rank();
        let (big, small) = (self.pair_call(probe.size_bytes), self.pair_call(probe.latency_bytes));
        let partners: Vec<Option<Partner>> = rounds
            .iter()
            .map(|r| {
                r.iter().find(|p| p.has(me)).map(|p| Partner {
                    peer: p.other(me).unwrap_or(me),
                    lower: me == p.a,
                })
            })
            .collect();
        let how = self.sampling(probe);
        let wrong = pairs::check_exchanges(&mut self.cx, &big, &partners, &how)?;
        // each metric's exchange, with the message it carries
        let probes = Metric::ALL.map(|m| {
            let spec = m.spec();
            let call = match spec.message {
                Message::Bandwidth => &big,
                Message::Latency => &small,
            };
            (spec.exchange, call)
        });
        let times = pairs::sample_exchanges(&mut self.cx, &partners, &probes, &how)?;
        let out = self.gather_pairs(rounds, probe, &times, &wrong);
        self.busy_s += self.cx.clock.seconds_since(started);
        Ok(out)
    }

    /// Every rank's times and wrong counts of a block, gathered: each
    /// pair's samples (its slower end's) and wrong count, the measurer's
    /// totals counted.
    fn gather_pairs(
        &mut self,
        rounds: &[Vec<Pair>],
        probe: &Probe,
        times: &[Vec<f64>],
        wrong: &[Option<u64>],
    ) -> Vec<Vec<PairSamples>> {
        let k = probe.samples;
        // every rank's times and wrong counts (u64::MAX: none), gathered
        let width = Metric::ALL.len() * k + 1;
        let mut mine: Vec<u64> = Vec::with_capacity(rounds.len() * width);
        for (t, w) in times.iter().zip(wrong) {
            mine.extend(t.iter().map(|x| x.to_bits()));
            mine.push(w.unwrap_or(u64::MAX));
        }
        let all = self.cx.world.all_gather_u64s(&mine);
        let stride = rounds.len() * width;
        let at = |rank: usize, round: usize, j: usize| f64::from_bits(all[rank * stride + round * width + j]);
        let wrong_of =
            |rank: usize, round: usize| Some(all[rank * stride + round * width + width - 1]).filter(|&w| w != u64::MAX);
        // a sendrecv's bus factor is 1 whatever the ranks; both ways carry
        // the message in each direction at once
        let factor = Collective::SendRecv.spec().bus_factor(2);
        let value = |m: Metric, t: f64| match m.spec().value {
            Value::Bandwidth { directions } => bandwidth_gbps(directions * m.spec().message.bytes(probe), t, factor).1,
            Value::HalfRoundTripUs => t / 2.0 * 1e6,
        };
        let mut out = Vec::with_capacity(rounds.len());
        for (r, round) in rounds.iter().enumerate() {
            let mut pairs = Vec::with_capacity(round.len());
            for &pair in round {
                // a pair's sample is its slower end's
                let time = |j: usize| at(pair.a, r, j).max(at(pair.b, r, j));
                let wrong = match (wrong_of(pair.a, r), wrong_of(pair.b, r)) {
                    (Some(a), Some(b)) => Some(a + b),
                    _ => None,
                };
                if let Some(w) = wrong {
                    self.wrong += w;
                    self.checked += u64::from(self.check);
                }
                pairs.push(PairSamples {
                    pair,
                    samples: PerMetric::from_fn(|m| (0..k).map(|j| value(m, time(m.index() * k + j))).collect()),
                    wrong,
                });
            }
            out.push(pairs);
        }
        out
    }

    /// The sub-communicator of each rank: its subset's, or one of the
    /// ranks in no subset.
    fn split(&mut self, subsets: &[Vec<usize>]) -> Result<(SubGroup, Option<(usize, usize)>), Error> {
        let me = self.cx.world.rank();
        let mine = subsets.iter().enumerate().find_map(|(s, members)| {
            let mut sorted = members.clone();
            sorted.sort_unstable();
            sorted.iter().position(|&r| r == me).map(|i| (s, i))
        });
        let color = mine.map_or(subsets.len(), |(s, _)| s);
        let kind = self.cx.backend.identity().kind;
        let groups = self.cx.backend.sub_groups().ok_or_else(|| {
            Error::usage(format!(
                "the {} backend has no sub-communicators for the all-reduce bisection (NCCL before 2.18 has no ncclCommSplit)",
                kind.name()
            ))
        })?;
        Ok((groups.split(color, me)?, mine))
    }

    /// Each subset's bus bandwidth samples (GB/s, its slowest member's
    /// time: the all-reduce's bus factor at the subset's size), from every
    /// rank's gathered times (`width` a rank, its wrong count last); the
    /// measurer's totals counted.
    fn subset_busbw(&mut self, subsets: &[Vec<usize>], probe: &Probe, all: &[u64], width: usize) -> Vec<Vec<f64>> {
        let mut out = Vec::with_capacity(subsets.len());
        for members in subsets {
            let factor = Collective::AllReduce.spec().bus_factor(members.len());
            let samples = (0..probe.samples)
                .map(|i| {
                    let t = members
                        .iter()
                        .map(|&r| f64::from_bits(all[r * width + i]))
                        .fold(0.0, f64::max);
                    bandwidth_gbps(probe.size_bytes, t, factor).1
                })
                .collect();
            for &r in members {
                let w = all[r * width + width - 1];
                if w != u64::MAX {
                    self.wrong += w;
                }
            }
            self.checked += u64::from(self.check);
            out.push(samples);
        }
        out
    }
}

/// The all-reduce of one subset of `k` ranks, as its member `index` calls
/// it on `group`.
fn subset_call(probe: &Probe, k: usize, index: usize, group: SubGroup) -> Call {
    let count = (probe.size_bytes / DTYPE.size_bytes() as u64) as usize;
    Call {
        collective: Collective::AllReduce,
        hierarchy: Hierarchy::Flat,
        dtype: DTYPE,
        op: Some(ReduceOp::Sum),
        shape: Collective::AllReduce.spec().shape(count, k),
        at: Layout::new(k, index, 0),
        group: Some(group),
    }
}

impl Measurer for BackendMeasurer<'_> {
    fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    fn measure(&mut self, rounds: &[Vec<Pair>], probe: &Probe) -> Result<Vec<Vec<PairSamples>>, Error> {
        check_probe(probe)?;
        self.block(rounds, probe)
    }

    fn all_reduce(&mut self, subsets: &[Vec<usize>], probe: &Probe) -> Result<Vec<Vec<f64>>, Error> {
        check_probe(probe)?;
        self.stop_requested()?;
        self.rounds += 1;
        let round = self.rounds;
        self.cx.watch(|| {
            format!(
                "links round {round}: all-reduces on {} subset(s) at once",
                subsets.len()
            )
        });
        let started = self.cx.clock.now();
        let (group, mine) = self.split(subsets)?;
        let call = mine.map(|(s, index)| subset_call(probe, subsets[s].len(), index, group));
        if call.is_some() {
            // the pairs' buffers are prepared again before the next round
            self.prepared = None;
        }
        let how = self.sampling(probe);
        let (times, wrong) = pairs::sample_all_reduce(&mut self.cx, call.as_ref(), &how)?;
        let mut mine: Vec<u64> = times.iter().map(|t| t.to_bits()).collect();
        mine.push(wrong.unwrap_or(u64::MAX));
        let width = mine.len();
        let all = self.cx.world.all_gather_u64s(&mine);
        // the round's communicators are done with: every rank frees its own
        if let Some(groups) = self.cx.backend.sub_groups() {
            groups.free(group)?;
        }
        let out = self.subset_busbw(subsets, probe, &all, width);
        self.busy_s += self.cx.clock.seconds_since(started);
        Ok(out)
    }

    fn describe(&self) -> String {
        self.describe.clone()
    }

    fn elapsed_s(&self) -> f64 {
        self.busy_s
    }
}

/// The sizes a probe may have here: whole float elements, at least one.
fn check_probe(probe: &Probe) -> Result<(), Error> {
    let e = DTYPE.size_bytes() as u64;
    for (what, bytes) in [("--size", probe.size_bytes), ("--latency-size", probe.latency_bytes)] {
        if bytes == 0 || bytes % e != 0 {
            return Err(Error::usage(format!(
                "{what} {bytes}: links moves 4-byte elements; give a positive multiple of 4 bytes"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
