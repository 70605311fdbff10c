//! Everything a log's lines say, and who said it: the job's ranks as the
//! log shows them (`Slot`s), each rank's communicators (`Member`s, with
//! the identity that ties the members of one communicator together across
//! processes, `CommKey`), every call attributed to its rank and
//! communicator, and the lines that could not be read.
//!
//! A rank is a communicator's (process, rank) pair as its INIT line gives
//! it: the process (`host:pid`) and the CUDA device of the INIT line, so
//! that one process driving several GPUs (ncclCommInitAll, a framework's
//! threads) is several ranks even where every call prints the same device.
//! Without INIT lines a call's rank is its process and the device in
//! brackets; one process and device that issues the same calls on several
//! communicators of one size (RCCL's replayer prints `[7]` for all its 8
//! ranks; RCCL's `globalrank` names them) is read as that many ranks, and
//! the notes say so. A communicator's members are the INIT lines that share
//! its commId; a split's (2.23 and later print no commId for splits) are
//! the ranks that split the same parent communicator the same how-many-th
//! time with the same color.

use std::collections::{BTreeMap, HashMap};

use super::line::{self, CallLine, CutLine, InitLine, Line, Source};
use crate::error::Error;
use crate::nccl_log::{self, Origin};
use crate::types::NcclVersion;

mod loose;

/// One rank of the logged job, as the log shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slot {
    pub host: String,
    pub pid: u64,
    pub dev: Option<u32>,
    /// The communicator that tells this rank from the other ranks of its
    /// process and device (no INIT lines).
    pub by_comm: Option<u64>,
    /// The rank in the job, when the log tells it.
    pub rank: Option<usize>,
    /// The first line of this rank.
    pub line: usize,
}

impl Slot {
    /// `node0 pid 4101 device 0`, `a process without host and pid`.
    pub fn describe(&self) -> String {
        let dev = self.dev.map_or(String::new(), |d| format!(" device {d}"));
        let comm = self.by_comm.map_or(String::new(), |c| format!(" comm {c:#x}"));
        if self.host.is_empty() {
            format!(
                "a process without host and pid{}{dev}{comm}",
                if dev.is_empty() { "" } else { "," }
            )
        } else {
            format!("{} pid {}{dev}{comm}", self.host, self.pid)
        }
    }

    /// `rank 2` or the description.
    pub fn name(&self) -> String {
        match self.rank {
            Some(r) => format!("rank {r}"),
            None => self.describe(),
        }
    }
}

/// What ties a communicator's members together across processes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum CommKey {
    /// The commId of its INIT lines.
    Id(u64),
    /// The `seq`-th split of `parent` with `color`.
    Split { parent: Box<CommKey>, seq: u64, color: i64 },
    /// The one communicator over every rank that each rank shows (no INIT
    /// lines; each rank has one of that size).
    World,
    /// Unknown: this member alone.
    Alone(usize),
}

/// A communicator as one rank holds it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub slot: usize,
    pub ptr: u64,
    pub nranks: usize,
    /// The rank in the communicator (INIT, RCCL's globalrank).
    pub rank: Option<usize>,
    pub key: CommKey,
    /// Its INIT line.
    pub init: Option<usize>,
}

/// Where a call belongs: its rank (`Scan::slots`) and its communicator
/// as that rank holds it (`Scan::members`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub slot: usize,
    pub member: usize,
}

/// One call, attributed: the line's own `CallLine`.
pub type Call = CallLine<At>;

/// A call line that could not be read whole: cut short, or (`malformed`)
/// whole with a value that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    pub line: usize,
    pub slot: Option<usize>,
    pub name: String,
    pub missing: String,
    pub malformed: bool,
}

/// The log, read.
#[derive(Clone, Debug, Default)]
pub struct Scan {
    pub version: Option<NcclVersion>,
    pub slots: Vec<Slot>,
    pub members: Vec<Member>,
    pub calls: Vec<Call>,
    pub cuts: Vec<Cut>,
    /// Call lines without a prefix: line and communicator.
    pub orphans: Vec<(usize, Option<u64>)>,
    /// NCCL 2.3.5 COLL lines (no operation name).
    pub unnamed: Vec<usize>,
    /// CALL trace lines whose communicator is elided (`0x...`).
    pub elided: Vec<usize>,
    /// INIT lines cut after their fields, read up to the cut.
    pub cut_inits: Vec<usize>,
    /// Ranks of the job: the largest communicator, or more ranks shown.
    pub world: usize,
    /// The first line showing that many.
    pub world_line: usize,
    pub notes: Vec<String>,
}

/// Where an INIT line's communicator lives: host, pid, comm pointer.
type Place = (String, u64, u64);

/// A process and device: host, pid, device.
type Proc = (String, u64, Option<u32>);

/// One communicator's pointer and its calls (line number, call).
type CommCalls = (u64, Vec<(usize, CallLine)>);

pub(super) fn at_line(line: usize, why: impl std::fmt::Display) -> Error {
    Error::usage(format!("line {line}: {why}"))
}

/// Reads every line.
pub fn scan(text: &str) -> Result<Scan, Error> {
    let mut s = Scan::default();
    let mut inits: Vec<(usize, InitLine)> = Vec::new();
    let mut calls: Vec<(usize, CallLine)> = Vec::new();
    let mut cuts: Vec<(usize, CutLine)> = Vec::new();
    let mut joined = 0usize;
    let mut joins: Vec<String> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let n = i + 1;
        let parsed = line::parse_line(&nccl_log::line(n, lines[i]));
        if let Some(cut) = parsed.interrupted {
            cuts.push((n, cut));
        }
        match parsed.line {
            Line::Version(v) => match s.version {
                None => s.version = Some(v),
                Some(first) if first != v => s.notes.push(format!(
                    "line {n} shows NCCL {v} after {first}; codes are read as {first}'s"
                )),
                Some(_) => {}
            },
            Line::Init(init) => {
                if init.cut {
                    s.cut_inits.push(n);
                }
                inits.push((n, init))
            }
            Line::Call(call) => calls.push((n, call)),
            Line::Cut(cut) => {
                let rest = lines
                    .get(i + 1)
                    .filter(|_| !cut.malformed)
                    .and_then(|next| line::join(n, lines[i], next));
                match rest {
                    Some(call) if cut.name != "INIT" => {
                        calls.push((n, call));
                        joined += 1;
                        if joins.len() < 5 {
                            joins.push(format!("{n} with {}", n + 1));
                        }
                        i += 2;
                        continue;
                    }
                    _ => cuts.push((n, cut)),
                }
            }
            Line::Orphan { comm } => s.orphans.push((n, comm)),
            Line::Unnamed => s.unnamed.push(n),
            Line::Other => {}
        }
        i += 1;
    }
    if joined > 0 {
        s.notes.push(format!(
            "{joined} call lines cut by a line break or by other output printed into them were joined with their rest on the next line (line {})",
            joins.join(", ")
        ));
    }
    s.build(inits, calls, cuts)?;
    Ok(s)
}

/// An INIT line's communicator, merged over its START, COMPLETE and CALL
/// lines.
struct Instance {
    init: InitLine,
    line: usize,
    slot: usize,
}

impl Scan {
    fn slot_of(&mut self, proc_: &Proc, by_comm: Option<u64>, line: usize) -> usize {
        let found = self
            .slots
            .iter()
            .position(|s| (&s.host, s.pid, s.dev, s.by_comm) == (&proc_.0, proc_.1, proc_.2, by_comm));
        found.unwrap_or_else(|| {
            self.slots.push(Slot {
                host: proc_.0.clone(),
                pid: proc_.1,
                dev: proc_.2,
                by_comm,
                rank: None,
                line,
            });
            self.slots.len() - 1
        })
    }

    fn build(
        &mut self,
        inits: Vec<(usize, InitLine)>,
        calls: Vec<(usize, CallLine)>,
        cuts: Vec<(usize, CutLine)>,
    ) -> Result<(), Error> {
        let instances = self.instances(inits);
        let by_place: HashMap<Place, usize> = instances
            .iter()
            .enumerate()
            .map(|(i, inst)| ((inst.init.prefix.host.clone(), inst.init.prefix.pid, inst.init.comm), i))
            .collect();
        // the communicators of INIT lines
        let mut member_of_instance = vec![0usize; instances.len()];
        for (i, inst) in instances.iter().enumerate() {
            member_of_instance[i] = self.members.len();
            self.members.push(Member {
                slot: inst.slot,
                ptr: inst.init.comm,
                nranks: inst.init.nranks,
                rank: Some(inst.init.rank),
                key: CommKey::Alone(self.members.len()),
                init: Some(inst.line),
            });
        }
        self.keys(&instances, &by_place, &member_of_instance);
        self.attribute(calls, &by_place, &member_of_instance)?;
        self.world = self.members.iter().map(|m| m.nranks).max().unwrap_or(0);
        self.world_line = self
            .members
            .iter()
            .filter(|m| m.nranks == self.world)
            .map(|m| m.init.unwrap_or_else(|| self.first_line_of(m)))
            .min()
            .unwrap_or(0);
        self.ranks(&instances, &member_of_instance)?;
        let shown = self.slots.len();
        if shown > self.world {
            self.notes.push(format!(
                "the log shows {shown} ranks (processes and devices) but no communicator larger than {} ranks: the job is taken to have {shown}",
                self.world
            ));
            self.world = shown;
            self.world_line = self.slots.iter().map(|s| s.line).max().unwrap_or(0);
        }
        self.world_keys();
        self.cuts(cuts, &by_place);
        Ok(())
    }

    fn first_line_of(&self, m: &Member) -> usize {
        self.calls
            .iter()
            .find(|c| self.members[c.at.member].ptr == m.ptr && c.at.slot == m.slot)
            .map_or(0, |c| c.line)
    }

    /// INIT lines, one per communicator of a process, with their ranks.
    fn instances(&mut self, inits: Vec<(usize, InitLine)>) -> Vec<Instance> {
        let mut out: Vec<Instance> = Vec::new();
        let mut index: HashMap<Place, usize> = HashMap::new();
        for (n, init) in inits {
            let place = (init.prefix.host.clone(), init.prefix.pid, init.comm);
            if let Some(&i) = index.get(&place) {
                let known = &mut out[i].init;
                known.comm_id = known.comm_id.or(init.comm_id);
                known.cuda_dev = known.cuda_dev.or(init.cuda_dev);
                if known.split.is_none() || known.split.is_some_and(|s| s.count.is_none()) {
                    known.split = init.split.or(known.split);
                }
                continue;
            }
            // a split's CALL trace has no device: its parent's
            let dev = init.cuda_dev.or_else(|| {
                let parent = init.split?.parent;
                let p = index.get(&(init.prefix.host.clone(), init.prefix.pid, parent))?;
                self.slots[out[*p].slot].dev
            });
            let dev = dev.or(init.prefix.dev);
            let slot = self.slot_of(&(init.prefix.host.clone(), init.prefix.pid, dev), None, n);
            index.insert(place, out.len());
            out.push(Instance { init, line: n, slot });
        }
        out
    }

    /// Each INIT communicator's identity across processes.
    fn keys(&mut self, instances: &[Instance], by_place: &HashMap<Place, usize>, member_of: &[usize]) {
        // the how-many-th split of a parent each split is, per process
        let mut seq: HashMap<Place, u64> = HashMap::new();
        let mut split_seq: Vec<Option<u64>> = vec![None; instances.len()];
        for (i, inst) in instances.iter().enumerate() {
            if let Some(s) = inst.init.split {
                let place = (inst.init.prefix.host.clone(), inst.init.prefix.pid, s.parent);
                let n = seq.entry(place).or_insert(0);
                *n += 1;
                split_seq[i] = Some(s.count.unwrap_or(*n));
            }
        }
        fn key_of(
            i: usize,
            instances: &[Instance],
            by_place: &HashMap<Place, usize>,
            split_seq: &[Option<u64>],
            depth: usize,
        ) -> Option<CommKey> {
            let inst = &instances[i];
            if let Some(id) = inst.init.comm_id {
                return Some(CommKey::Id(id));
            }
            let s = inst.init.split?;
            if depth > 16 {
                return None;
            }
            let parent = by_place.get(&(inst.init.prefix.host.clone(), inst.init.prefix.pid, s.parent))?;
            let parent = key_of(*parent, instances, by_place, split_seq, depth + 1)?;
            Some(CommKey::Split {
                parent: Box::new(parent),
                seq: split_seq[i]?,
                color: s.color,
            })
        }
        for (i, &member) in member_of.iter().enumerate().take(instances.len()) {
            if let Some(k) = key_of(i, instances, by_place, &split_seq, 0) {
                self.members[member].key = k;
            }
        }
    }

    /// Each call to its rank and communicator.
    fn attribute(
        &mut self,
        calls: Vec<(usize, CallLine)>,
        by_place: &HashMap<Place, usize>,
        member_of: &[usize],
    ) -> Result<(), Error> {
        let has_coll = calls.iter().any(|(_, c)| c.source == Source::Coll);
        let mut traces_dropped = 0;
        // calls of processes without INIT lines: by process and device,
        // then by communicator
        let mut loose: BTreeMap<(Proc, u64), Vec<(usize, CallLine)>> = BTreeMap::new();
        for (n, call) in calls {
            if call.source == Source::Trace && has_coll {
                traces_dropped += 1;
                continue;
            }
            let Some(ptr) = call.comm else {
                self.elided.push(n);
                continue;
            };
            let place = (call.prefix.host.clone(), call.prefix.pid, ptr);
            if let Some(&i) = by_place.get(&place) {
                let member = member_of[i];
                self.check_size(n, &call, member)?;
                let slot = self.members[member].slot;
                self.calls.push(call.attributed(At { slot, member }));
                continue;
            }
            if call.nranks.is_none() {
                return Err(at_line(
                    n,
                    format!(
                        "an NCCL CALL trace line on comm {ptr:#x}, whose ncclCommInitRank (or ncclCommSplit) line is not in the log: its size and this rank's place in it are unknown"
                    ),
                ));
            }
            let key = (place_proc(&call.prefix), ptr);
            loose.entry(key).or_default().push((n, call));
        }
        if traces_dropped > 0 {
            self.notes.push(format!(
                "{traces_dropped} NCCL CALL trace lines repeat calls the COLL lines show and were not read"
            ));
        }
        self.loose(loose)?;
        // keep the log's order
        self.calls.sort_by_key(|c| c.line);
        Ok(())
    }

    fn check_size(&self, n: usize, call: &CallLine, member: usize) -> Result<(), Error> {
        let m = &self.members[member];
        match call.nranks {
            Some(k) if k != m.nranks => Err(at_line(
                n,
                format!(
                    "comm {:#x} has {} ranks in its INIT line (line {}) but [nranks={k}] here",
                    m.ptr,
                    m.nranks,
                    m.init.unwrap_or(0)
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Every rank's rank in the job: its rank in the first communicator
    /// over all ranks that has INIT lines, else in any of that size, else
    /// a torchrun `[rankN]:` label or RCCL's globalrank.
    fn ranks(&mut self, instances: &[Instance], member_of: &[usize]) -> Result<(), Error> {
        let world = self.world;
        let world_key = instances
            .iter()
            .enumerate()
            .find(|(_, i)| i.init.nranks == world)
            .map(|(i, _)| self.members[member_of[i]].key.clone());
        let mut claimed: HashMap<usize, (usize, usize)> = HashMap::new();
        let assign = |slots: &mut Vec<Slot>,
                      claimed: &mut HashMap<usize, (usize, usize)>,
                      slot: usize,
                      rank: usize,
                      line: usize|
         -> Result<(), Error> {
            if slots[slot].rank.is_some() {
                return Ok(());
            }
            if let Some(&(other, first)) = claimed.get(&rank)
                && other != slot
            {
                return Err(at_line(
                    line,
                    format!(
                        "a second process claims rank {rank} of {world} (first at line {first}): the log mixes two jobs"
                    ),
                ));
            }
            claimed.insert(rank, (slot, line));
            slots[slot].rank = Some(rank);
            Ok(())
        };
        // the first communicator over every rank first, then any other
        // of that size (two processes claiming one rank: two jobs)
        let mut found: Vec<(bool, usize, usize, usize)> = Vec::new();
        for (i, inst) in instances.iter().enumerate() {
            let m = &self.members[member_of[i]];
            if m.nranks == world {
                let other = world_key.as_ref().is_some_and(|k| *k != m.key);
                found.push((other, inst.line, inst.slot, inst.init.rank));
            }
        }
        for m in &self.members {
            if m.nranks == world
                && m.init.is_none()
                && let Some(r) = m.rank
            {
                found.push((true, self.first_line_of(m), m.slot, r));
            }
        }
        found.sort();
        for (_, line, slot, rank) in found {
            assign(&mut self.slots, &mut claimed, slot, rank, line)?;
        }
        // torchrun labels, for ranks no INIT line names
        let labels: Vec<(usize, usize, usize)> = self
            .calls
            .iter()
            .filter_map(|c| Some((c.at.slot, c.prefix.rank_label?, c.line)))
            .collect();
        for (slot, label, line) in labels {
            if self.slots[slot].rank.is_none() && !claimed.contains_key(&label) {
                assign(&mut self.slots, &mut claimed, slot, label, line)?;
            }
        }
        Ok(())
    }

    /// Each cut line to its rank, where its prefix (and communicator) say.
    fn cuts(&mut self, cuts: Vec<(usize, CutLine)>, by_place: &HashMap<Place, usize>) {
        for (n, cut) in cuts {
            let by_ptr = cut.comm.and_then(|ptr| {
                let place = (cut.prefix.host.clone(), cut.prefix.pid, ptr);
                by_place.get(&place).map(|_| place).and_then(|p| {
                    self.members
                        .iter()
                        .find(|m| m.ptr == p.2 && self.slots[m.slot].host == p.0 && self.slots[m.slot].pid == p.1)
                        .map(|m| m.slot)
                })
            });
            let slot = by_ptr.or_else(|| {
                let matching: Vec<usize> = (0..self.slots.len())
                    .filter(|&i| {
                        let s = &self.slots[i];
                        s.host == cut.prefix.host
                            && s.pid == cut.prefix.pid
                            && (cut.prefix.dev.is_none() || s.dev.is_none() || s.dev == cut.prefix.dev)
                            && (s.by_comm.is_none() || s.by_comm == cut.comm)
                    })
                    .collect();
                (matching.len() == 1).then(|| matching[0])
            });
            self.cuts.push(Cut {
                line: n,
                slot,
                name: cut.name,
                missing: cut.missing,
                malformed: cut.malformed,
            });
        }
    }

    /// The ranks the log names, lowest first.
    pub fn known_ranks(&self) -> Vec<usize> {
        let mut r: Vec<usize> = self.slots.iter().filter_map(|s| s.rank).collect();
        r.sort();
        r
    }

    /// The members of a communicator key, each once per rank, in the
    /// order of their ranks in it (else of the log).
    pub fn members_of(&self, key: &CommKey) -> Vec<usize> {
        let mut out: Vec<usize> = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            if m.key == *key && !out.iter().any(|&o| self.members[o].slot == m.slot) {
                out.push(i);
            }
        }
        out.sort_by_key(|&i| {
            let m = &self.members[i];
            (
                m.rank.or(self.slots[m.slot].rank).unwrap_or(usize::MAX),
                self.slots[m.slot].line,
            )
        });
        out
    }
}

fn place_proc(p: &Origin) -> Proc {
    (p.host.clone(), p.pid, p.dev)
}
