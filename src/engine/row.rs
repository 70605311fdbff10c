//! One point's row: the `Record` of this rank's communicator or of a
//! `--split` group, and the `-I` columns.

use std::time::SystemTime;

use super::{Engine, straggler};
use crate::backend::Call;
use crate::plan::Case;
use crate::record::{Record, bandwidth_gbps};
use crate::types::{AlgoPin, AlgoRecord, AlgoRecording, AlgoSource, Chosen, Placement, Register, TimingMethod};

impl Engine<'_> {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record(
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
            register: Some(scope.register.unwrap_or(self.cfg.register)),
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

/// This row's extent (`Engine::record`): the point as this rank's
/// communicator ran it, or as a group's ranks did (`--split`).
pub(super) struct Scope {
    pub(super) size_bytes: u64,
    pub(super) count: u64,
    /// The ranks of the communicator: the bus factor's `n`.
    pub(super) nranks: usize,
    /// The `group` column (`--split`).
    pub(super) group: Option<String>,
    /// The `register` column where the backend says what its ranks'
    /// communicators took (`Backend::registrations`), else `-R` as asked.
    pub(super) register: Option<Register>,
}

impl Engine<'_> {
    /// Every rank's registration of `call`'s buffers (rank 0: in world
    /// rank order; others: an empty list), where the backend says; every
    /// rank calls it (the gather is collective).
    pub(super) fn registered(&mut self, call: &crate::backend::Call) -> Option<Vec<Register>> {
        let mine = self.cx.backend.registrations()?.registered(call);
        let all = self.cx.world.gather_f64(f64::from(mine.level())).unwrap_or_default();
        let of = |v: f64| Register::ALL.get(v as usize).copied().unwrap_or_default();
        Some(all.into_iter().map(of).collect())
    }
}

/// The weakest of several ranks' registrations (none: `Off`).
pub(super) fn weakest(all: impl Iterator<Item = Register>) -> Register {
    all.min().unwrap_or_default()
}

/// `-I` columns: the distribution of per-iteration times (each iteration
/// taken at its slowest rank) and the slowest rank against the median.
pub(super) fn add_iteration_stats(record: &mut Record, samples: &[f64], times: &[f64]) {
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

impl Engine<'_> {
    /// With `--algo-record`: what the backend recorded of the point's
    /// launches on this rank (read after every point, so that a point
    /// never sees another's), kept where one communicator ran them all: a
    /// flat call outside `--split` groups; `unknown` elsewhere (a
    /// hierarchical all-reduce runs on several, a group row on its own).
    /// `None` without the option, or on a backend without algorithms (mpi).
    pub(super) fn algorithms(&mut self, call: &Call) -> Option<AlgoRecord> {
        // a pinned sweep's rows carry the columns, recorded or not
        let unrecorded = self.pin.is_some().then(AlgoRecord::unknown);
        if self.cfg.algo_record == AlgoRecording::Off {
            return unrecorded;
        }
        let Some(algorithms) = self.cx.backend.algorithms() else {
            return unrecorded;
        };
        let recorded = algorithms.take_choices(call);
        let whole = call.hierarchy.is_flat() && self.groups.is_none();
        Some(if whole { recorded } else { AlgoRecord::unknown() })
    }
}

/// The algorithm columns of a row (docs/algorithms.md): the choice, or
/// `mixed`, and where it came from; in a pinned sweep the pin, and where
/// nothing recorded what ran, the pin's values as `pinned`.
pub(super) fn add_algorithm(record: &mut Record, recorded: AlgoRecord, pin: Option<AlgoPin>) {
    record.algo_source = Some(recorded.source);
    record.algo = recorded.algo();
    record.proto = recorded.proto();
    record.algo_pin = pin;
    if let Some(pin) = pin.filter(|_| recorded.source == AlgoSource::Unknown) {
        record.algo_source = Some(AlgoSource::Pinned);
        record.algo = pin.algo.map(Chosen::One);
        record.proto = pin.proto.map(Chosen::One);
    }
    record.nchannels = recorded.nchannels();
    record.algo_choices = (!recorded.choices.is_empty()).then_some(recorded.choices);
    record.busbw_algo_gbps = record.busbw_of_algorithm();
}
