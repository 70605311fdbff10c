//! The output of a strategy: the ordered operations of one training step
//! (or of a replayed log), each a collective with its `count` column, type,
//! reduction, group, phase and label.
//!
//! `count` means what the CSV's `count` column means for that collective
//! (docs/bandwidth.md): elements of the buffer for all_reduce, broadcast,
//! reduce and sendrecv; elements per rank for all_gather and
//! reduce_scatter. Nothing here measures or executes; the engine runs the
//! operations in order.

use crate::collective::Collective;
use crate::types::{DType, ReduceOp};

use super::groups::Group;

crate::types::vocabulary! {
    /// When an operation runs in the step.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum Phase: "phase", Exact {
        Forward = "forward", Backward = "backward", Optimizer = "optimizer",
        /// A replayed log's call (the log does not say).
        Log = "log",
    }
}

/// One collective call of the step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub collective: Collective,
    /// The `count` column (see the module doc).
    pub count: u64,
    pub dtype: DType,
    /// The reduction, for all_reduce, reduce_scatter and reduce.
    pub op: Option<ReduceOp>,
    /// The root's index inside the group, for broadcast and reduce.
    pub root: Option<usize>,
    /// For sendrecv: every rank sends to the rank `shift` places after it in
    /// its group and receives from the one `shift` places before (1 is the
    /// engine's ring).
    pub shift: Option<usize>,
    pub group: Group,
    pub phase: Phase,
    pub label: String,
    /// Where a replayed log printed it (`None` for a strategy's).
    pub logged: Option<Logged>,
}

/// The log line and communicator a replayed operation comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Logged {
    /// 1-based line of the log.
    pub line: usize,
    /// The communicator's pointer, as NCCL printed it.
    pub comm: u64,
}

impl Op {
    /// A reduction (all_reduce, reduce_scatter) with `sum`.
    pub fn reduce(collective: Collective, count: u64, dtype: DType, group: Group, phase: Phase, label: String) -> Op {
        Op::plain(collective, count, dtype, group, phase, label).with_op(ReduceOp::Sum)
    }

    /// An all_gather.
    pub fn gather(count: u64, dtype: DType, group: Group, phase: Phase, label: String) -> Op {
        Op::plain(Collective::AllGather, count, dtype, group, phase, label)
    }

    /// A strategy's operation without a reduction, root or shift.
    fn plain(collective: Collective, count: u64, dtype: DType, group: Group, phase: Phase, label: String) -> Op {
        Op {
            collective,
            count,
            dtype,
            op: None,
            root: None,
            shift: None,
            group,
            phase,
            label,
            logged: None,
        }
    }

    /// The same operation with another reduction.
    pub fn with_op(mut self, op: ReduceOp) -> Op {
        self.op = Some(op);
        self
    }
}

/// The operations of one step, in the order the framework issues them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    /// What produced it: a strategy name, or the replayed log.
    pub name: String,
    pub ops: Vec<Op>,
}

impl Schedule {
    /// Every group the schedule uses, each once, in order of first use:
    /// the sub-communicators to build before the first step.
    pub fn groups(&self) -> Vec<Group> {
        let mut out: Vec<Group> = Vec::new();
        for op in &self.ops {
            if !out.contains(&op.group) {
                out.push(op.group);
            }
        }
        out
    }
}
