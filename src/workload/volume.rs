//! Communication volume from first principles: the bytes each rank moves
//! per operation and per step, and the breakdown by collective and by
//! message-size class.
//!
//! The model is the ring (and, for rooted collectives, the pipelined chain)
//! that nccl-tests' bus bandwidth describes (docs/bandwidth.md): an
//! operation of `size_bytes` S (nccl-tests' size, the larger of one rank's
//! buffers) on a group of n ranks puts `bus_bytes = S x factor(n)` on each
//! rank's link, one direction:
//! - all_reduce = reduce-scatter + all-gather: each rank sends 2(n-1) of n
//!   chunks of S/n: 2(n-1)/n x S;
//! - all_gather (S = n x per-rank input) and reduce_scatter (S = n x
//!   per-rank output): each rank sends the n-1 blocks that are not its own:
//!   (n-1)/n x S; alltoall, gather and scatter likewise;
//! - broadcast and reduce (chain from the root) and sendrecv: every rank
//!   but the chain's end sends the whole buffer, every non-root rank
//!   receives it: S (factor 1). This is the busiest link's load, which is
//!   what busbw measures; the mean over ranks is (n-1)/n x S.
//!
//! The factors are `CollectiveSpec::bus_factor`, the same the CSV's busbw
//! uses, so a step's `sum(bus_bytes) / sum(time)` is the volume-weighted
//! harmonic mean of its operations' busbw: effective bus bandwidth and the
//! per-operation busbw agree by construction. A group of one rank moves 0
//! bytes.
//!
//! Size classes, by `size_bytes`: small < 64 KiB (latency-bound), medium
//! 64 KiB - 1 MiB, large 1 - 16 MiB, huge >= 16 MiB (bandwidth-bound).

use std::collections::BTreeMap;

use crate::collective::Collective;
use crate::error::Error;
use crate::types::DType;

use super::groups::GroupLayout;
use super::op::Schedule;

/// Elements of nccl-tests' size for a collective of `count` (the count
/// column) on `n` ranks: `n x count` where count is per rank (all_gather,
/// reduce_scatter, gather, scatter) or per peer (alltoall), else `count`.
pub fn size_elements(collective: Collective, count: u64, n: usize) -> u64 {
    use Collective::*;
    match collective {
        AllGather | ReduceScatter | Gather | Scatter | AllToAll | AllToAllV => count.saturating_mul(n as u64),
        AllReduce | Broadcast | Reduce | SendRecv => count,
    }
}

/// nccl-tests' `size_bytes` of one operation.
pub fn size_bytes(collective: Collective, count: u64, n: usize, dtype: DType) -> u64 {
    size_elements(collective, count, n).saturating_mul(dtype.size_bytes() as u64)
}

/// Bytes on each rank's link for one operation (see the module doc).
pub fn bus_bytes(collective: Collective, count: u64, n: usize, dtype: DType) -> f64 {
    size_bytes(collective, count, n, dtype) as f64 * collective.spec().bus_factor(n)
}

/// Effective bus bandwidth in GB/s (1e9 bytes) of `bus_bytes` in `time_us`.
pub fn effective_busbw_gbps(bus_bytes: f64, time_us: f64) -> f64 {
    if time_us > 0.0 { bus_bytes / time_us / 1e3 } else { 0.0 }
}

crate::types::vocabulary! {
    /// Message-size classes of the breakdown.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum SizeClass: "size class", Exact {
        Small = "<64KiB", Medium = "64KiB-1MiB", Large = "1MiB-16MiB", Huge = ">=16MiB",
    }
}

impl SizeClass {
    pub fn of(size_bytes: u64) -> SizeClass {
        match size_bytes {
            s if s < 64 << 10 => SizeClass::Small,
            s if s < 1 << 20 => SizeClass::Medium,
            s if s < 16 << 20 => SizeClass::Large,
            _ => SizeClass::Huge,
        }
    }
}

/// One operation's volume.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpVolume {
    pub collective: Collective,
    /// Ranks in its group.
    pub ranks: usize,
    pub size_bytes: u64,
    pub bus_bytes: f64,
    pub class: SizeClass,
}

/// Totals over a set of operations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Tally {
    pub ops: usize,
    pub size_bytes: u64,
    pub bus_bytes: f64,
    /// Sum of the operations' times, when times were given.
    pub time_us: f64,
}

impl Tally {
    fn add(&mut self, v: &OpVolume, time_us: f64) {
        self.ops += 1;
        self.size_bytes += v.size_bytes;
        self.bus_bytes += v.bus_bytes;
        self.time_us += time_us;
    }

    pub fn busbw_gbps(&self) -> f64 {
        effective_busbw_gbps(self.bus_bytes, self.time_us)
    }
}

/// A step's totals and breakdowns.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub total: Tally,
    pub by_collective: BTreeMap<Collective, Tally>,
    /// Every class, empty ones included, in `SizeClass::ALL` order.
    pub by_class: Vec<(SizeClass, Tally)>,
}

/// Per-operation volumes of a schedule at a layout.
#[derive(Clone, Debug, PartialEq)]
pub struct StepVolume {
    pub per_op: Vec<OpVolume>,
}

impl StepVolume {
    /// Fails (one line) when an operation's group does not fit the layout.
    pub fn new(schedule: &Schedule, layout: &GroupLayout) -> Result<StepVolume, Error> {
        for group in schedule.groups() {
            layout.check(group)?;
        }
        let per_op = schedule
            .ops
            .iter()
            .map(|op| {
                let ranks = layout.size(op.group);
                let size = size_bytes(op.collective, op.count, ranks, op.dtype);
                // an exchange with the rank itself is a local copy
                let local = op.collective == Collective::SendRecv && op.shift == Some(0);
                OpVolume {
                    collective: op.collective,
                    ranks,
                    size_bytes: size,
                    bus_bytes: if local {
                        0.0
                    } else {
                        bus_bytes(op.collective, op.count, ranks, op.dtype)
                    },
                    class: SizeClass::of(size),
                }
            })
            .collect();
        Ok(StepVolume { per_op })
    }

    /// Bytes each rank moves in one step.
    pub fn bus_bytes(&self) -> f64 {
        self.per_op.iter().map(|v| v.bus_bytes).sum()
    }

    /// Totals and breakdowns; `times_us` (one per operation, as measured)
    /// fills the time fields, without it they stay 0.
    pub fn summary(&self, times_us: Option<&[f64]>) -> Result<Summary, Error> {
        if let Some(t) = times_us
            && t.len() != self.per_op.len()
        {
            return Err(Error::runtime(format!(
                "{} times for a step of {} operations",
                t.len(),
                self.per_op.len()
            )));
        }
        let mut total = Tally::default();
        let mut by_collective: BTreeMap<Collective, Tally> = BTreeMap::new();
        let mut by_class: Vec<(SizeClass, Tally)> = SizeClass::ALL.iter().map(|&c| (c, Tally::default())).collect();
        for (i, v) in self.per_op.iter().enumerate() {
            let t = times_us.map_or(0.0, |t| t[i]);
            total.add(v, t);
            by_class[v.class as usize].1.add(v, t);
            by_collective.entry(v.collective).or_default().add(v, t);
        }
        Ok(Summary {
            total,
            by_collective,
            by_class,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::groups::Group;
    use super::super::model::Model;
    use super::super::op::{Op, Phase};
    use super::super::options::Options;
    use super::super::schedule::{Strategy, schedule};
    use super::*;

    #[test]
    fn size_follows_the_collectives_own_shapes_for_every_collective() {
        // the count column and size of `CollectiveSpec::shape` at the
        // requested elements `size_elements` gives back the same count
        for c in Collective::ALL {
            for n in 1..=8 {
                for count in [0_u64, 1, 7, 1000] {
                    let req = size_elements(c, count, n) as usize;
                    let shape = c.spec().shape(req, n);
                    assert_eq!(shape.count as u64, count, "{c} n={n}");
                    assert_eq!(
                        shape.size_bytes(DType::Half),
                        size_bytes(c, count, n, DType::Half),
                        "{c} n={n}"
                    );
                }
            }
        }
    }

    #[test]
    fn ring_volumes_per_rank_match_the_textbook_formulas() {
        let mib = 1u64 << 20;
        // all_reduce of 1 MiB of floats on 4 ranks: 2 x 3/4 x 4 MiB
        let c = mib;
        assert_eq!(bus_bytes(Collective::AllReduce, c, 4, DType::Float), 6.0 * mib as f64);
        // all_gather of 1 Mi floats per rank on 4 ranks: S = 16 MiB, 3/4 of it
        assert_eq!(bus_bytes(Collective::AllGather, c, 4, DType::Float), 12.0 * mib as f64);
        assert_eq!(
            bus_bytes(Collective::ReduceScatter, c, 4, DType::Float),
            12.0 * mib as f64
        );
        // broadcast: the whole buffer on the busiest link
        assert_eq!(bus_bytes(Collective::Broadcast, c, 4, DType::Float), 4.0 * mib as f64);
        assert_eq!(bus_bytes(Collective::Reduce, c, 3, DType::Float), 4.0 * mib as f64);
        // a group of one moves nothing
        assert_eq!(bus_bytes(Collective::AllReduce, c, 1, DType::Float), 0.0);
        assert_eq!(bus_bytes(Collective::AllGather, c, 1, DType::Float), 0.0);
        // three ranks, a non-power of two: all_reduce 2 x 2/3 x 3 bytes x 3
        assert!((bus_bytes(Collective::AllReduce, 3, 3, DType::Int8) - 4.0).abs() < 1e-12);
    }

    #[test]
    fn fsdp_moves_about_one_and_a_half_times_ddps_all_reduce_volume_not_half() {
        let m = Model::preset("llama-2-7b").unwrap();
        let l = GroupLayout::new(8, 8, 1).unwrap();
        let vol = |s| {
            let sched = schedule(s, &m, &l, &Options::default()).unwrap();
            StepVolume::new(&sched, &l).unwrap().bus_bytes()
        };
        let ddp = vol(Strategy::Ddp);
        let fsdp = vol(Strategy::Fsdp {
            reshard_after_forward: true,
        });
        // DDP: 2 x 7/8 x P x 2 bytes
        let p = m.params() as f64;
        assert!((ddp - 2.0 * 7.0 / 8.0 * p * 2.0).abs() < 1.0, "{ddp}");
        // FSDP: layers gathered twice and reduce-scattered once (3 x 7/8),
        // the root (embedding, head) once each way (2 x 7/8)
        let root = (m.pre_params() + m.post_params()) as f64;
        let want = (3.0 * (p - root) + 2.0 * root) * 7.0 / 8.0 * 2.0;
        assert!((fsdp - want).abs() / want < 1e-6, "{fsdp} vs {want}");
        let ratio = fsdp / ddp;
        assert!(ratio > 1.45 && ratio <= 1.5, "ratio {ratio}");
        // keeping parameters after forward: one gather, one reduce-scatter
        let grad_op = vol(Strategy::Fsdp {
            reshard_after_forward: false,
        });
        assert!((grad_op / ddp - 1.0).abs() < 1e-5, "{}", grad_op / ddp);
        // DeepSpeed ZeRO-2 by default: all_reduce + all_gather
        let zero2 = vol(Strategy::Zero2) / ddp;
        assert!((zero2 - 1.5).abs() < 1e-6, "{zero2}");
    }

    #[test]
    fn size_classes_have_documented_boundaries() {
        assert_eq!(SizeClass::of(0), SizeClass::Small);
        assert_eq!(SizeClass::of(65535), SizeClass::Small);
        assert_eq!(SizeClass::of(65536), SizeClass::Medium);
        assert_eq!(SizeClass::of((1 << 20) - 1), SizeClass::Medium);
        assert_eq!(SizeClass::of(1 << 20), SizeClass::Large);
        assert_eq!(SizeClass::of((16 << 20) - 1), SizeClass::Large);
        assert_eq!(SizeClass::of(16 << 20), SizeClass::Huge);
        let names: Vec<&str> = SizeClass::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names, ["<64KiB", "64KiB-1MiB", "1MiB-16MiB", ">=16MiB"]);
    }

    fn op(collective: Collective, count: u64, group: Group) -> Op {
        Op {
            collective,
            count,
            dtype: DType::Float,
            op: None,
            root: None,
            shift: None,
            group,
            phase: Phase::Backward,
            label: String::new(),
            logged: None,
        }
    }

    #[test]
    fn a_summary_adds_volumes_and_times_by_collective_and_size_class() {
        let s = Schedule {
            name: "t".into(),
            ops: vec![
                op(Collective::AllReduce, 1 << 20, Group::World),
                op(Collective::AllGather, 16, Group::Node),
                op(Collective::AllReduce, 8, Group::World),
            ],
        };
        let l = GroupLayout::new(4, 2, 1).unwrap();
        let v = StepVolume::new(&s, &l).unwrap();
        // 4 MiB all_reduce on 4 ranks: 6 MiB; all_gather 16 floats x 2 ranks = 128 B, half
        // of it; 32 B all_reduce: 48 B
        assert_eq!(v.per_op[0].bus_bytes, 6.0 * (1 << 20) as f64);
        assert_eq!(v.per_op[1].ranks, 2);
        assert_eq!(v.per_op[1].bus_bytes, 64.0);
        assert_eq!(v.per_op[2].bus_bytes, 48.0);
        let sum = v.summary(Some(&[100.0, 2.0, 3.0])).unwrap();
        assert_eq!(sum.total.ops, 3);
        assert_eq!(sum.total.time_us, 105.0);
        assert_eq!(sum.total.bus_bytes, v.bus_bytes());
        let ar = sum.by_collective[&Collective::AllReduce];
        assert_eq!(
            (ar.ops, ar.time_us, ar.bus_bytes),
            (2, 103.0, 6.0 * (1 << 20) as f64 + 48.0)
        );
        assert_eq!(sum.by_class[0].1.ops, 2, "two small operations");
        assert_eq!(sum.by_class[2].1.ops, 1, "the 4 MiB one is large");
        assert_eq!(sum.by_class[3].1.ops, 0);
        // 6 MiB in 100 us on that operation alone: 62.9 GB/s
        let bw = effective_busbw_gbps(v.per_op[0].bus_bytes, 100.0);
        assert!((bw - 62.914_56).abs() < 1e-9, "{bw}");
        assert!(v.summary(Some(&[1.0])).is_err());
        assert_eq!(v.summary(None).unwrap().total.time_us, 0.0);
    }

    #[test]
    fn the_effective_bandwidth_of_a_step_is_its_volume_over_its_time() {
        // two ops with busbw 10 and 40 GB/s moving 1 GB each: 2 GB in 125 ms
        let bw = effective_busbw_gbps(2e9, 125_000.0);
        assert!((bw - 16.0).abs() < 1e-12);
        assert_eq!(effective_busbw_gbps(1.0, 0.0), 0.0);
    }

    #[test]
    fn a_group_that_does_not_fit_the_layout_is_refused() {
        use super::super::groups::Partition;
        let s = Schedule {
            name: "t".into(),
            ops: vec![op(
                Collective::AllReduce,
                8,
                Group::Partition(Partition { block: 3, stride: 1 }),
            )],
        };
        let l = GroupLayout::new(4, 4, 1).unwrap();
        assert!(StepVolume::new(&s, &l).is_err());
    }
}
