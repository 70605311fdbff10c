//! What a workload or replay asks of a backend, worked out before it runs:
//! for one rank, the sub-communicators to split (each once, in one order
//! on every rank), each configuration's calls on them, the buffers the
//! largest call needs, and the header's notes. Pure: the configurations,
//! the backend's `Capabilities` and the rank in; the session makes the
//! splits and hands their groups back (`WorkloadPlan::calls`).
//!
//! A 16-bit floating type that the backend cannot run (MPI has none) runs
//! as float with half the count, rounded up: the same bytes on the wire,
//! and a note says so.

use std::collections::BTreeSet;

use crate::backend::{Call, SubGroup};
use crate::collective::Layout;
use crate::error::Error;
use crate::plan::{Capabilities, Reservation};
use crate::topology::Hierarchy;
use crate::types::DType;

use super::groups::{Group, GroupLayout};
use super::op::{Op, Schedule};
use super::schedule::Strategy;
use super::volume;

/// One measured configuration: a strategy at one bucket size, or the log.
#[derive(Clone, Debug)]
pub struct Config {
    /// `ddp bucket 25MiB`, `fsdp`, `replay`.
    pub name: String,
    pub strategy: Option<Strategy>,
    pub bucket_bytes: Option<u64>,
    pub layout: GroupLayout,
    pub schedule: Schedule,
    /// What was picked for it that the header must say (a degree of 1
    /// that leaves a strategy without its own calls), each a line.
    pub notes: Vec<String>,
}

/// One sub-communicator to make: every rank calls `SubGroups::split` with
/// its `color` and `key` together, in `WorkloadPlan::splits` order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    pub layout: GroupLayout,
    pub group: Group,
    /// This rank's group of that kind (its index in the partition).
    pub color: usize,
    /// This rank's place in it.
    pub key: usize,
}

/// A call, and the split it runs on (`None`: the world).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Planned {
    call: Call,
    split: Option<usize>,
}

/// One rank's plan of every configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadPlan {
    /// The groups to split before the first step (a group of the whole
    /// world needs none).
    pub splits: Vec<Split>,
    /// Each configuration's calls, in schedule order.
    configs: Vec<Vec<Planned>>,
    /// The configurations' notes and what the backend runs differently
    /// from the schedule, each once.
    pub notes: Vec<String>,
    /// The buffers of the largest call (no rotation: a step's operations
    /// each work at the start of their buffers).
    pub reservation: Reservation,
}

impl WorkloadPlan {
    /// The calls of `configs` on this `rank`, checked against what the
    /// backend can run (`caps`); every refusal is one line.
    pub fn new(configs: &[Config], caps: &Capabilities, rank: usize) -> Result<WorkloadPlan, Error> {
        let splits = splits(configs, rank)?;
        let mut notes = BTreeSet::new();
        let mut planned = Vec::with_capacity(configs.len());
        for c in configs {
            notes.extend(c.notes.iter().cloned());
            let mut calls = Vec::with_capacity(c.schedule.ops.len());
            for op in &c.schedule.ops {
                let call = call(op, &c.layout, caps, rank, &mut notes)?;
                let split = splits.iter().position(|s| (s.layout, s.group) == (c.layout, op.group));
                calls.push(Planned { call, split });
            }
            planned.push(calls);
        }
        let reservation = Reservation::of(
            planned
                .iter()
                .flatten()
                .map(|p| (p.call.hierarchy, p.call.dtype, p.call.shape)),
            false,
        );
        Ok(WorkloadPlan {
            splits,
            configs: planned,
            notes: notes.into_iter().collect(),
            reservation,
        })
    }

    /// Configuration `config`'s calls, naming `groups`: what
    /// `SubGroups::split` returned for each of `splits`, in order.
    pub fn calls(&self, config: usize, groups: &[SubGroup]) -> Vec<Call> {
        self.configs[config]
            .iter()
            .map(|p| Call {
                group: p.split.and_then(|s| groups.get(s).copied()),
                ..p.call
            })
            .collect()
    }
}

/// Every group any configuration uses, once, in one order on every rank
/// (a `BTreeSet`'s), checked against its layout; the world needs no split.
fn splits(configs: &[Config], rank: usize) -> Result<Vec<Split>, Error> {
    let mut groups = BTreeSet::new();
    for c in configs {
        for g in c.schedule.groups() {
            c.layout.check(g)?;
            groups.insert((c.layout, g));
        }
    }
    let mut splits = Vec::new();
    for (layout, group) in groups {
        let p = layout.partition(group);
        if p.size() == layout.world {
            continue;
        }
        let (color, members) = p.group_of(rank);
        let key = members.iter().position(|&r| r == rank).unwrap_or(0);
        splits.push(Split {
            layout,
            group,
            color,
            key,
        });
    }
    Ok(splits)
}

/// `op` as this rank issues it on its group of that kind.
fn call(
    op: &Op,
    layout: &GroupLayout,
    caps: &Capabilities,
    rank: usize,
    notes: &mut BTreeSet<String>,
) -> Result<Call, Error> {
    let p = layout.partition(op.group);
    let (_, members) = p.group_of(rank);
    let index = members.iter().position(|&r| r == rank).unwrap_or(0);
    let (dtype, count) = runnable(op, caps, notes)?;
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
    Ok(Call {
        collective: op.collective,
        hierarchy: Hierarchy::Flat,
        dtype,
        op: op.op,
        shape,
        at: Layout {
            nranks: n,
            rank: index,
            root: op.root.unwrap_or(0),
            // 0: a rank's exchange with itself (a local copy)
            shift: op.shift.unwrap_or(1),
        },
        group: None,
    })
}

/// The type and count an operation runs with on this backend: its own, or
/// for a 16-bit float the backend refuses, float with half the count.
fn runnable(op: &Op, caps: &Capabilities, notes: &mut BTreeSet<String>) -> Result<(DType, u64), Error> {
    let Err(why) = caps.check_dtype(op.dtype) else {
        return Ok((op.dtype, op.count));
    };
    if op.dtype.size_bytes() == 2 && caps.check_dtype(DType::Float).is_ok() {
        notes.insert(format!(
            "the {} backend has no {}: those operations run as float with half the count (the same bytes)",
            caps.backend, op.dtype
        ));
        return Ok((DType::Float, op.count.div_ceil(2)));
    }
    Err(Error::usage(format!("{} ({}): {why}", op.label, op.collective)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::workload::{Model, Options, schedule};

    fn config(strategy: Strategy, layout: GroupLayout) -> Config {
        let model = Model::preset("gpt2").unwrap();
        Config {
            name: strategy.name().into(),
            strategy: Some(strategy),
            bucket_bytes: None,
            layout,
            schedule: schedule(strategy, &model, &layout, &Options::default()).unwrap(),
            notes: Vec::new(),
        }
    }

    fn caps() -> Capabilities {
        Capabilities {
            backend: "test",
            max_elements: usize::MAX >> 8,
            ..Capabilities::default()
        }
    }

    #[test]
    fn each_group_is_split_once_and_every_call_names_its_own() {
        let hsdp = Strategy::Hsdp {
            reshard_after_forward: true,
        };
        let layout = GroupLayout::new(4, 2, 1).unwrap();
        let configs = [config(hsdp, layout), config(Strategy::Ddp, layout)];
        // rank 3: the second node's second rank
        let plan = WorkloadPlan::new(&configs, &caps(), 3).unwrap();
        let splits: Vec<(Group, usize, usize)> = plan.splits.iter().map(|s| (s.group, s.color, s.key)).collect();
        // DDP's world group needs no split
        assert_eq!(splits, [(Group::Node, 1, 1), (Group::CrossNode, 1, 1)]);
        let groups = [SubGroup(7), SubGroup(9)];
        let hsdp_calls = plan.calls(0, &groups);
        for (call, op) in hsdp_calls.iter().zip(&configs[0].schedule.ops) {
            let want = if op.group == Group::Node { groups[0] } else { groups[1] };
            assert_eq!(call.group, Some(want), "{}", op.label);
            assert_eq!((call.at.nranks, call.at.rank), (2, 1));
        }
        let ddp_calls = plan.calls(1, &groups);
        assert!(ddp_calls.iter().all(|c| c.group.is_none() && c.at.nranks == 4));
        // the largest call sizes the buffers
        let largest = hsdp_calls.iter().chain(&ddp_calls).map(|c| c.shape.size_bytes(c.dtype));
        assert_eq!(plan.reservation.recv_bytes, largest.max().unwrap());
        assert!(plan.notes.is_empty());
    }

    #[test]
    fn a_16_bit_float_the_backend_lacks_runs_as_float_with_half_the_count() {
        let no_16_bit = Capabilities {
            refused_dtypes: vec![(DType::Bfloat16, "no bfloat16".into()), (DType::Half, "no half".into())],
            ..caps()
        };
        let layout = GroupLayout::new(2, 2, 1).unwrap();
        let configs = [config(Strategy::Ddp, layout)];
        let plan = WorkloadPlan::new(&configs, &no_16_bit, 0).unwrap();
        let calls = plan.calls(0, &[]);
        for (call, op) in calls.iter().zip(&configs[0].schedule.ops) {
            assert_eq!(op.dtype, DType::Bfloat16);
            assert_eq!(
                (call.dtype, call.shape.count as u64),
                (DType::Float, op.count.div_ceil(2))
            );
        }
        assert_eq!(plan.notes.len(), 1, "{:?}", plan.notes);
        assert!(
            plan.notes[0].contains("the test backend has no bfloat16"),
            "{:?}",
            plan.notes
        );
        let tiny = Capabilities {
            max_elements: 1000,
            ..caps()
        };
        let e = WorkloadPlan::new(&configs, &tiny, 0).unwrap_err().to_string();
        assert!(e.contains("larger than the test backend's largest buffer"), "{e}");
        assert!(
            configs[0]
                .schedule
                .ops
                .iter()
                .all(|o| o.collective == Collective::AllReduce)
        );
    }
}
