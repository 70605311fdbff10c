//! The links matrix on a real data plane: `BackendMeasurer` implements
//! `links::Measurer` over a control plane (`World`) and a backend with
//! `PointToPoint` (NCCL's grouped ncclSend/ncclRecv on GPUs, MPI's
//! nonblocking sends and receives on host memory; docs/links.md, "How a
//! pair is measured").
//!
//! Every rank calls every method together. In a round, each rank in a pair
//! talks to its partner on the backend's own communicator (no
//! communicator per pair); ranks in no pair only take part in the
//! barriers. Per pair: `check` validated exchanges (both directions at
//! once, every received element compared with the partner's pattern),
//! then per metric `warmup` untimed operations and `samples` samples, each
//! after a barrier of every rank (so the pairs of a round run at once)
//! and timed on the host clock around `iters` operations launched back to
//! back and waited for: unidirectional (the lower rank sends), both
//! directions at once, and a ping-pong of `latency_bytes`. A pair's sample
//! is its slower end's. The rounds of one `measure` call (a block,
//! `links::measure::BLOCK_ROUNDS`) are interleaved: sample k of every
//! round and metric is taken before sample k + 1 of any, so that a load
//! that comes and goes touches every pair of the block alike. After each
//! block every rank's samples are gathered to every rank, so that every
//! rank holds the same matrix and the deterministic finder takes the same
//! next step everywhere without another message. All-reduces on subsets
//! run on sub-communicators (`SubGroups::split`), every subset at once.
//!
//! Other commands (an acceptance check) drive it the same way: make one
//! with `BackendMeasurer::new` once the backend is chosen, then hand it to
//! `links::measure_matrix` or `links::find`.
//!
//! Must not: print, judge, or know the schedule beyond the rounds it is
//! given.

use crate::backend::{Backend, Call, PeerOp, SubGroup};
use crate::clock::Clock;
use crate::collective::{Collective, Layout, Pattern};
use crate::engine::stop::StopRequest;
use crate::engine::watchdog::Watchdog;
use crate::error::Error;
use crate::links::{Endpoint, Measurer, Pair, PairSamples, Probe};
use crate::plan::Reservation;
use crate::topology::Hierarchy;
use crate::types::{DType, Placement, ReduceOp};
use crate::world::World;

/// Pairs and all-reduces move float elements (4 bytes): sizes are
/// multiples of 4.
pub const DTYPE: DType = DType::Float;

/// How the measurer checks, stops and is watched.
pub struct MeasureOptions<'a> {
    /// Validated exchanges per pair, and validated all-reduces per subset;
    /// 0: nothing is checked.
    pub check: u32,
    /// Test hook: every checked receive has its first element corrupted.
    pub inject_error: bool,
    /// The clock samples are timed on (`Clock::Host`, or a test's virtual
    /// clock shared with the memory backend).
    pub clock: Clock,
    /// A stop signal ends the measurement at the next round.
    pub stop: StopRequest,
    /// Each round is one watched step (`--timeout`).
    pub watchdog: Option<&'a Watchdog>,
}

/// The `links::Measurer` of a backend with point-to-point operations.
pub struct BackendMeasurer<'a> {
    world: &'a dyn World,
    backend: &'a mut dyn Backend,
    endpoints: Vec<Endpoint>,
    opts: MeasureOptions<'a>,
    describe: String,
    /// Seconds spent in rounds, on `opts.clock`.
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
    /// A measurer over `backend` (which must offer `point_to_point`), with
    /// `endpoints` indexed by rank. Nothing is allocated until the first
    /// round.
    pub fn new(
        world: &'a dyn World,
        backend: &'a mut dyn Backend,
        endpoints: Vec<Endpoint>,
        opts: MeasureOptions<'a>,
    ) -> Result<BackendMeasurer<'a>, Error> {
        if endpoints.len() != world.size() {
            return Err(Error::runtime(format!(
                "internal error: {} endpoints for {} ranks",
                endpoints.len(),
                world.size()
            )));
        }
        let identity = backend.identity();
        if backend.point_to_point().is_none() {
            return Err(Error::usage(format!(
                "the {} backend has no point-to-point operations for links",
                identity.kind.name()
            )));
        }
        Ok(BackendMeasurer {
            world,
            backend,
            endpoints,
            describe: format!("{} ({})", identity.kind.name(), identity.version),
            opts,
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
        let n = self.world.size();
        Call {
            collective: Collective::SendRecv,
            hierarchy: Hierarchy::Flat,
            dtype: DTYPE,
            op: None,
            shape: Collective::SendRecv.spec().shape(count, n),
            at: Layout::new(n, self.world.rank(), 0),
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
            self.backend.reserve(&reservation)?;
        }
        self.backend.prepare(&call)?;
        self.prepared = Some(*probe);
        Ok(())
    }

    /// Every rank agrees whether to go on; a stop signal on any rank ends
    /// the measurement on all of them.
    fn stop_requested(&mut self) -> Result<(), Error> {
        let signal = self.world.max_u64(self.opts.stop.signal());
        if signal == 0 {
            return Ok(());
        }
        self.stopped_by = Some(signal);
        Err(Error::runtime(format!(
            "{STOPPED} by {}",
            crate::engine::stop::signal_name(signal)
        )))
    }

    fn watch(&self, what: String) {
        if let Some(w) = self.opts.watchdog {
            w.watch(what);
        }
    }

    /// `ops` launched `times` times back to back, then waited for.
    fn run_ops(&mut self, call: &Call, groups: &[&[PeerOp]], times: usize) -> Result<(), Error> {
        let p2p = self
            .backend
            .point_to_point()
            .ok_or_else(|| Error::runtime("internal error: the backend lost its point-to-point operations"))?;
        for _ in 0..times {
            for ops in groups {
                p2p.launch_p2p(call, ops)?;
            }
        }
        self.backend.wait()
    }

    /// `check` exchanges of `call` with `peer`, both directions at once:
    /// the elements received that differ from the partner's pattern.
    fn check_exchange(&mut self, call: &Call, peer: usize) -> Result<u64, Error> {
        let mut wrong = 0;
        let me = self.world.rank();
        for seed in 0..u64::from(self.opts.check) {
            let pattern = Pattern::new(DTYPE, None, self.world.size(), seed);
            self.backend
                .load_input(call, Placement::OutOfPlace, &|i| pattern.input(me, i))?;
            self.run_ops(call, &[&[PeerOp::Send(peer), PeerOp::Recv(peer)]], 1)?;
            let (out, range) = self.backend.output(call, Placement::OutOfPlace)?;
            if self.opts.inject_error && !range.is_empty() {
                let at = range.start * DTYPE.size_bytes();
                out.bytes_mut()[at] ^= 0x5a;
            }
            wrong += out.count_mismatches(range, |i| pattern.input(peer, i));
        }
        Ok(wrong)
    }

    /// A block of rounds, every pair of a round at once, the rounds' samples
    /// interleaved (sample k of every round and metric before sample k + 1
    /// of any); each pair's samples, as every rank sees them.
    fn block(&mut self, rounds: &[Vec<Pair>], probe: &Probe) -> Result<Vec<Vec<PairSamples>>, Error> {
        self.stop_requested()?;
        let first = self.rounds + 1;
        self.rounds += rounds.len();
        self.watch(format!(
            "links rounds {first}-{} ({} pair(s))",
            self.rounds,
            rounds.iter().map(Vec::len).sum::<usize>()
        ));
        self.prepare(probe)?;
        let clock = self.opts.clock.clone();
        let started = clock.now();
        let me = self.world.rank();
        let (big, small) = (self.pair_call(probe.size_bytes), self.pair_call(probe.latency_bytes));
        // this rank's partner in each round, and whether it is the lower rank
        let partners: Vec<Option<(usize, bool)>> = rounds
            .iter()
            .map(|r| {
                r.iter()
                    .find(|p| p.has(me))
                    .map(|p| (p.other(me).unwrap_or(me), me == p.a))
            })
            .collect();
        let mut wrong: Vec<Option<u64>> = vec![None; rounds.len()];
        if self.opts.check > 0 {
            for (i, partner) in partners.iter().enumerate() {
                if let Some((peer, _)) = *partner {
                    wrong[i] = Some(self.check_exchange(&big, peer)?);
                }
            }
        }
        let times = self.sample_rounds(&partners, probe, &clock, big, small)?;
        let out = self.gather_pairs(rounds, probe, &times, &wrong);
        self.busy_s += clock.seconds_since(started);
        Ok(out)
    }

    /// This rank's samples of a block, in seconds per operation:
    /// [round][metric * samples + sample]; NaN in no pair. `partners`:
    /// this rank's partner in each round, and whether it is the lower rank.
    fn sample_rounds(
        &mut self,
        partners: &[Option<(usize, bool)>],
        probe: &Probe,
        clock: &Clock,
        big: Call,
        small: Call,
    ) -> Result<Vec<Vec<f64>>, Error> {
        let k = probe.samples;
        let iters = probe.iters.max(1);
        let mut times = vec![vec![f64::NAN; 3 * k]; partners.len()];
        for sample in 0..k {
            for (i, partner) in partners.iter().enumerate() {
                for metric in 0..3 {
                    let ops = partner.map(|(peer, lower)| {
                        let (send, recv) = (PeerOp::Send(peer), PeerOp::Recv(peer));
                        match (metric, lower) {
                            (0, true) => vec![vec![send]],
                            (0, false) => vec![vec![recv]],
                            (1, _) => vec![vec![send, recv]],
                            (_, true) => vec![vec![send], vec![recv]],
                            (_, false) => vec![vec![recv], vec![send]],
                        }
                    });
                    let call = if metric == 2 { small } else { big };
                    let groups: Option<Vec<&[PeerOp]>> = ops.as_ref().map(|o| o.iter().map(Vec::as_slice).collect());
                    if sample == 0
                        && let Some(g) = &groups
                    {
                        self.run_ops(&call, g, probe.warmup)?;
                    }
                    self.world.barrier();
                    let t0 = clock.now();
                    if let Some(g) = &groups {
                        self.run_ops(&call, g, iters)?;
                        times[i][metric * k + sample] = clock.seconds_since(t0) / iters as f64;
                    }
                }
            }
        }
        Ok(times)
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
        let width = 3 * k + 1;
        let mut mine: Vec<u64> = Vec::with_capacity(rounds.len() * width);
        for (t, w) in times.iter().zip(wrong) {
            mine.extend(t.iter().map(|x| x.to_bits()));
            mine.push(w.unwrap_or(u64::MAX));
        }
        let all = self.world.all_gather_u64s(&mine);
        let stride = rounds.len() * width;
        let at = |rank: usize, round: usize, j: usize| f64::from_bits(all[rank * stride + round * width + j]);
        let wrong_of =
            |rank: usize, round: usize| Some(all[rank * stride + round * width + width - 1]).filter(|&w| w != u64::MAX);
        let size = probe.size_bytes as f64;
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
                    self.checked += u64::from(self.opts.check);
                }
                pairs.push(PairSamples {
                    pair,
                    uni_gbps: (0..k).map(|j| size / time(j) / 1e9).collect(),
                    bidi_gbps: (0..k).map(|j| 2.0 * size / time(k + j) / 1e9).collect(),
                    latency_us: (0..k).map(|j| time(2 * k + j) / 2.0 * 1e6).collect(),
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
        let me = self.world.rank();
        let mine = subsets.iter().enumerate().find_map(|(s, members)| {
            let mut sorted = members.clone();
            sorted.sort_unstable();
            sorted.iter().position(|&r| r == me).map(|i| (s, i))
        });
        let color = mine.map_or(subsets.len(), |(s, _)| s);
        let kind = self.backend.identity().kind;
        let groups = self.backend.sub_groups().ok_or_else(|| {
            Error::usage(format!(
                "the {} backend has no sub-communicators for the all-reduce bisection (NCCL before 2.18 has no ncclCommSplit)",
                kind.name()
            ))
        })?;
        Ok((groups.split(color, me)?, mine))
    }

    /// The validated all-reduces of `call` (one per seed); the elements
    /// found wrong.
    fn check_all_reduce(&mut self, call: &Call) -> Result<u64, Error> {
        let mut w = 0;
        for seed in 0..u64::from(self.opts.check) {
            let pattern = Pattern::new(DTYPE, call.op, call.at.nranks, seed);
            let rank = call.at.rank;
            self.backend
                .load_input(call, Placement::OutOfPlace, &|i| pattern.input(rank, i))?;
            self.backend.launch(call, Placement::OutOfPlace, 0, 1)?;
            self.backend.wait()?;
            let (out, range) = self.backend.output(call, Placement::OutOfPlace)?;
            if self.opts.inject_error && !range.is_empty() {
                let at = range.start * DTYPE.size_bytes();
                out.bytes_mut()[at] ^= 0x5a;
            }
            let spec = call.collective.spec();
            w += out.count_mismatches(range, |i| spec.expected(&pattern, &call.shape, &call.at, i));
        }
        Ok(w)
    }

    /// Each subset's bus bandwidth samples (GB/s, its slowest member's
    /// time), from every rank's gathered times (`width` a rank, its wrong
    /// count last); the measurer's totals counted.
    fn subset_busbw(&mut self, subsets: &[Vec<usize>], probe: &Probe, all: &[u64], width: usize) -> Vec<Vec<f64>> {
        let mut out = Vec::with_capacity(subsets.len());
        for members in subsets {
            let k = members.len() as f64;
            let factor = if k > 1.0 { 2.0 * (k - 1.0) / k } else { 1.0 };
            let samples = (0..probe.samples)
                .map(|i| {
                    let t = members
                        .iter()
                        .map(|&r| f64::from_bits(all[r * width + i]))
                        .fold(0.0, f64::max);
                    probe.size_bytes as f64 / t / 1e9 * factor
                })
                .collect();
            for &r in members {
                let w = all[r * width + width - 1];
                if w != u64::MAX {
                    self.wrong += w;
                }
            }
            self.checked += u64::from(self.opts.check);
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
        self.watch(format!(
            "links round {}: all-reduces on {} subset(s) at once",
            self.rounds,
            subsets.len()
        ));
        let started = self.opts.clock.now();
        let (group, mine) = self.split(subsets)?;
        let call = mine.map(|(s, index)| subset_call(probe, subsets[s].len(), index, group));
        let clock = self.opts.clock.clone();
        let mut wrong = None;
        if let Some(call) = &call {
            self.backend.prepare(call)?;
            // the pairs' buffers are prepared again before the next round
            self.prepared = None;
            let w = self.check_all_reduce(call)?;
            wrong = (self.opts.check > 0).then_some(w);
            for _ in 0..probe.warmup {
                self.backend.launch(call, Placement::OutOfPlace, 0, 1)?;
            }
            self.backend.wait()?;
        }
        let mut times = Vec::with_capacity(probe.samples + 1);
        for _ in 0..probe.samples {
            self.world.barrier();
            let t0 = clock.now();
            match &call {
                Some(call) => {
                    for _ in 0..probe.iters.max(1) {
                        self.backend.launch(call, Placement::OutOfPlace, 0, 1)?;
                    }
                    self.backend.wait()?;
                    times.push((clock.seconds_since(t0) / probe.iters.max(1) as f64).to_bits());
                }
                None => times.push(f64::NAN.to_bits()),
            }
        }
        times.push(wrong.unwrap_or(u64::MAX));
        let width = times.len();
        let all = self.world.all_gather_u64s(&times);
        // the round's communicators are done with: every rank frees its own
        if let Some(groups) = self.backend.sub_groups() {
            groups.free(group)?;
        }
        let out = self.subset_busbw(subsets, probe, &all, width);
        self.busy_s += clock.seconds_since(started);
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
