//! Ranks and communicators of a log without INIT lines: one rank per
//! process and device, unless one process and device holds several
//! communicators of one size with the same calls (or RCCL's globalrank
//! tells them apart), and the communicators over every rank.

use std::collections::{BTreeMap, HashMap};

use super::{At, CommCalls, CommKey, Member, Proc, Scan, Slot, at_line};
use crate::error::Error;
use crate::workload::replay::line::CallLine;

impl Scan {
    /// Calls of communicators without INIT lines: one rank per process
    /// and device, unless it holds several communicators of one size with
    /// the same calls (or RCCL's globalrank tells them apart).
    pub(super) fn loose(&mut self, loose: BTreeMap<(Proc, u64), Vec<(usize, CallLine)>>) -> Result<(), Error> {
        let mut by_proc: BTreeMap<Proc, Vec<CommCalls>> = BTreeMap::new();
        for ((proc_, ptr), calls) in loose {
            by_proc.entry(proc_).or_default().push((ptr, calls));
        }
        for (proc_, comms) in by_proc {
            let split = several_ranks(&comms);
            if split {
                let size = comms[0].1[0].1.nranks.unwrap_or(0);
                let told = if comms.iter().all(|(_, c)| c[0].1.global_rank.is_some()) {
                    "RCCL's globalrank"
                } else {
                    "their communicators"
                };
                self.notes.push(format!(
                    "{} issues the same calls on {} communicators of {size} ranks: read as {} ranks of one process, told apart by {told} (no INIT lines)",
                    Slot { host: proc_.0.clone(), pid: proc_.1, dev: proc_.2, by_comm: None, rank: None, line: 0 }.describe(),
                    comms.len(),
                    comms.len()
                ));
            }
            for (ptr, calls) in comms {
                let first = calls[0].0;
                let slot = self.slot_of(&proc_, split.then_some(ptr), first);
                let (size, global_rank) = (calls[0].1.nranks, calls[0].1.global_rank);
                let member = self.members.len();
                self.members.push(Member {
                    slot,
                    ptr,
                    nranks: size.unwrap_or(1),
                    rank: global_rank,
                    key: CommKey::Alone(member),
                    init: None,
                });
                for (n, call) in calls {
                    if call.nranks != size {
                        return Err(at_line(
                            n,
                            format!(
                                "comm {ptr:#x} shows [nranks={}] here and [nranks={}] at line {first}",
                                call.nranks.unwrap_or(0),
                                size.unwrap_or(0)
                            ),
                        ));
                    }
                    self.calls.push(call.attributed(At { slot, member }));
                }
            }
        }
        Ok(())
    }

    /// Communicators over every rank without INIT lines: one per rank.
    pub(super) fn world_keys(&mut self) {
        let world = self.world;
        let mut per_slot: HashMap<usize, usize> = HashMap::new();
        for m in self.members.iter().filter(|m| m.init.is_none() && m.nranks == world) {
            *per_slot.entry(m.slot).or_default() += 1;
        }
        for m in &mut self.members {
            if m.init.is_none() && m.nranks == world && per_slot.get(&m.slot) == Some(&1) {
                m.key = CommKey::World;
            }
        }
        // old INIT lines without commId: a communicator over every rank,
        // one per rank, is the world too
        let mut per_slot: HashMap<usize, usize> = HashMap::new();
        for m in self
            .members
            .iter()
            .filter(|m| matches!(m.key, CommKey::Alone(_)) && m.nranks == world)
        {
            *per_slot.entry(m.slot).or_default() += 1;
        }
        for m in &mut self.members {
            if matches!(m.key, CommKey::Alone(_)) && m.nranks == world && per_slot.get(&m.slot) == Some(&1) {
                m.key = CommKey::World;
            }
        }
    }
}

/// Whether one process and device's communicators (pointer, calls) are
/// several ranks: at least two of one size, as many as that size at most,
/// each with the same calls (or each with its own RCCL globalrank).
fn several_ranks(comms: &[CommCalls]) -> bool {
    if comms.len() < 2 {
        return false;
    }
    let size = comms[0].1[0].1.nranks;
    if comms.iter().any(|(_, c)| c[0].1.nranks != size) || comms.len() > size.unwrap_or(0) {
        return false;
    }
    let globals: Vec<Option<usize>> = comms.iter().map(|(_, c)| c[0].1.global_rank).collect();
    if globals.iter().all(Option::is_some) {
        let mut g: Vec<usize> = globals.into_iter().flatten().collect();
        g.sort();
        g.dedup();
        return g.len() == comms.len();
    }
    let shape = |c: &CallLine| (c.name.clone(), c.count, c.datatype, c.op, c.root);
    let first: Vec<_> = comms[0].1.iter().map(|(_, c)| shape(c)).collect();
    comms
        .iter()
        .all(|(_, calls)| calls.iter().map(|(_, c)| shape(c)).collect::<Vec<_>>() == first)
}
