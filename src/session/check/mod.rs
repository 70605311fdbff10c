//! `collbench check` on every rank (docs/check.md): the profile and the
//! options, read once before any rank starts (`job`); then, agreed step by
//! step, what the launch must be for the profile (its environment, nodes,
//! ranks per node, backend, memory: a mismatch is one line naming the
//! profile's file and line, exit 2), the node sub-communicators, the
//! measurement of every check (`measure`: node checks on every node at
//! once, then the whole-job checks) and the verdicts and their files
//! (`outputs`).
//!
//! Must not: judge samples or format verdicts (`check` does), time
//! anything itself (`engine::sampler`).

mod finder;
mod launch;
mod measure;
mod outputs;

use super::Session;
use super::prepare::Prepared;
use crate::backend::{Backend, Call, SubGroup, SubGroups};
use crate::check::Group;
use crate::check::profile::{CheckSpec, Scope};
use crate::collective::Layout;
pub(super) use crate::config::{CheckJob, Soak};
use crate::engine::watchdog::Watchdog;
use crate::error::Error;
use crate::plan::Reservation;
use crate::topology::{Hierarchy, Nodes};
use crate::world::World;

/// Longest reason a rank sends for lacking the profile's plugin
/// environment (`Profile::not_judged`: the file, the plugin, its source
/// and what is missing).
const PLUGIN_REASON_BYTES: usize = 2048;

/// One check as this rank runs it: its calls (one per size, on this
/// rank's group) and every group it runs on.
pub(super) struct Planned {
    pub spec: CheckSpec,
    pub calls: Vec<Call>,
    /// Each group with its ranks' size, and why it cannot run there (a
    /// node of one rank has no node-local collective).
    pub groups: Vec<(Group, Option<Unrun>)>,
    /// Whether this rank is in one of the groups (a node out of a round of
    /// pairs only keeps step with the others).
    pub active: bool,
}

/// Why a check cannot run on a group: the table's few words and the
/// whole sentence.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Unrun {
    pub short: &'static str,
    pub reason: String,
}

impl Unrun {
    fn new(short: &'static str, reason: impl Into<String>) -> Option<Unrun> {
        Some(Unrun {
            short,
            reason: reason.into(),
        })
    }
}

/// The name of node `n` in files and labels: its host, or, for
/// `--ranks-per-node` groups, the host and the group's number.
pub(super) fn node_label(nodes: &Nodes, n: usize) -> String {
    if nodes.is_virtual {
        format!("{}-v{n}", nodes.hosts[n])
    } else {
        nodes.hosts[n].clone()
    }
}

fn call(spec: &CheckSpec, size: u64, n: usize, index: usize, group: Option<SubGroup>) -> Call {
    let e = spec.dtype.size_bytes();
    let count = usize::try_from(size / e as u64).unwrap_or(usize::MAX);
    let count = spec
        .collective
        .aligned_count(count, n, e)
        .max(if n == 1 { 1 } else { n });
    Call {
        collective: spec.collective,
        hierarchy: Hierarchy::Flat,
        dtype: spec.dtype,
        op: spec.op,
        shape: spec.collective.spec().shape(count, n),
        at: Layout::new(n, index, 0),
        group,
    }
}

/// The node pairs of pair checks, in rounds of disjoint pairs: each node
/// with the next (a ring, so that with 3 or more nodes every node is in
/// two pairs and a slow node fails both of its pairs where a slow link
/// fails one), packed greedily into rounds that run at once.
pub fn pair_rounds(nnodes: usize) -> Vec<Vec<(usize, usize)>> {
    let pairs: Vec<(usize, usize)> = match nnodes {
        0 | 1 => vec![],
        2 => vec![(0, 1)],
        n => (0..n).map(|i| (i, (i + 1) % n)).collect(),
    };
    let mut rounds: Vec<Vec<(usize, usize)>> = Vec::new();
    for pair in pairs {
        let free = |r: &Vec<(usize, usize)>| {
            r.iter()
                .all(|&(a, b)| a != pair.0 && a != pair.1 && b != pair.0 && b != pair.1)
        };
        match rounds.iter_mut().find(|r| free(r)) {
            Some(r) => r.push(pair),
            None => rounds.push(vec![pair]),
        }
    }
    rounds
}

/// The colour and key of `rank` in each round's split: its pair's index,
/// or, for a node out of the round, a group of its own that runs nothing.
pub(super) fn pair_colours(rounds: &[Vec<(usize, usize)>], nodes: &Nodes, rank: usize) -> Vec<(usize, usize, bool)> {
    let node = nodes.node_of_rank[rank];
    rounds
        .iter()
        .map(|round| match round.iter().position(|&(a, b)| a == node || b == node) {
            Some(i) => {
                let (a, _) = round[i];
                let key = if node == a {
                    nodes.local_rank(rank)
                } else {
                    nodes.ranks_on(a).len() + nodes.local_rank(rank)
                };
                (i, key, true)
            }
            None => (round.len() + node, nodes.local_rank(rank), false),
        })
        .collect()
}

/// Every check as `rank` runs it; a pair check is one `Planned` per round
/// of pairs (`pair_groups`: this rank's sub-communicator in each round).
/// Finder checks are not planned here (`finder`).
pub(super) fn plan(
    checks: &[CheckSpec],
    nodes: &Nodes,
    rank: usize,
    node_group: Option<SubGroup>,
    pair_groups: &[Option<SubGroup>],
) -> Vec<Planned> {
    let labels: Vec<String> = (0..nodes.nnodes()).map(|n| node_label(nodes, n)).collect();
    let mut out = Vec::new();
    for spec in checks.iter().filter(|c| !c.is_finder()) {
        match spec.scope {
            Scope::Node => out.push(plan_node(spec, nodes, rank, &labels, node_group)),
            Scope::Pair => out.extend(plan_pairs(spec, nodes, rank, &labels, pair_groups)),
            Scope::Job => out.push(plan_job(spec, nodes, rank, &labels)),
        }
    }
    out
}

/// The calls of `spec`, one a size, for a group of `n` ranks in which
/// this rank is `index`.
fn calls(spec: &CheckSpec, n: usize, index: usize, group: Option<SubGroup>) -> Vec<Call> {
    spec.sizes
        .value
        .iter()
        .map(|&s| call(spec, s, n, index, group))
        .collect()
}

/// A node check: one group a node, each node's ranks together.
fn plan_node(spec: &CheckSpec, nodes: &Nodes, rank: usize, labels: &[String], node_group: Option<SubGroup>) -> Planned {
    let groups = (0..nodes.nnodes())
        .map(|m| {
            let ranks = nodes.ranks_on(m);
            let why = if ranks.len() < 2 {
                Unrun::new("1 rank", "1 rank on the node: a node check needs 2 or more")
            } else {
                None
            };
            let g = Group {
                label: labels[m].clone(),
                hosts: vec![labels[m].clone()],
                ranks,
            };
            (g, why)
        })
        .collect();
    Planned {
        spec: spec.clone(),
        calls: calls(spec, nodes.local_size(rank), nodes.local_rank(rank), node_group),
        groups,
        active: true,
    }
}

/// A pair check: one `Planned` a round of node pairs, or a single inactive
/// one when the launch has one node.
fn plan_pairs(
    spec: &CheckSpec,
    nodes: &Nodes,
    rank: usize,
    labels: &[String],
    pair_groups: &[Option<SubGroup>],
) -> Vec<Planned> {
    let rounds = pair_rounds(nodes.nnodes());
    if rounds.is_empty() {
        let g = Group {
            label: labels.first().cloned().unwrap_or_default(),
            hosts: labels.to_vec(),
            ranks: (0..nodes.nranks()).collect(),
        };
        return vec![Planned {
            spec: spec.clone(),
            calls: calls(spec, 2, 0, None),
            groups: vec![(
                g,
                Unrun::new("1 node", "1 node in the launch: a pair check needs 2 or more"),
            )],
            active: false,
        }];
    }
    let colours = pair_colours(&rounds, nodes, rank);
    let mut out = Vec::new();
    for (r, round) in rounds.iter().enumerate() {
        let groups = round
            .iter()
            .map(|&(a, b)| {
                let mut ranks = nodes.ranks_on(a);
                ranks.extend(nodes.ranks_on(b));
                let g = Group {
                    label: format!("{}+{}", labels[a], labels[b]),
                    hosts: vec![labels[a].clone(), labels[b].clone()],
                    ranks,
                };
                (g, None)
            })
            .collect();
        let (i, key, active) = colours[r];
        let n = if active {
            let (a, b) = round[i];
            nodes.ranks_on(a).len() + nodes.ranks_on(b).len()
        } else {
            2
        };
        let group = pair_groups.get(r).copied().flatten();
        out.push(Planned {
            spec: spec.clone(),
            calls: calls(spec, n, if active { key } else { 0 }, group),
            groups,
            active,
        });
    }
    out
}

/// A job check: one group of every rank.
fn plan_job(spec: &CheckSpec, nodes: &Nodes, rank: usize, labels: &[String]) -> Planned {
    let g = Group {
        label: "job".into(),
        hosts: labels.to_vec(),
        ranks: (0..nodes.nranks()).collect(),
    };
    let why = if nodes.nranks() < 2 {
        Unrun::new("1 rank", "1 rank in the job: a collective needs 2 or more")
    } else {
        None
    };
    Planned {
        spec: spec.clone(),
        calls: calls(spec, nodes.nranks(), rank, None),
        groups: vec![(g, why)],
        active: true,
    }
}

impl<W: World> Session<'_, W> {
    /// The check's own set-up (its groups, buffers, files), then every
    /// check measured, judged and written; this rank's exit code.
    pub(super) fn check_steps(
        &self,
        c: &CheckJob,
        prepared: Prepared,
        watchdog: Option<&Watchdog>,
    ) -> Result<u8, Error> {
        let world = self.world;
        let Prepared {
            nodes,
            mut backend,
            observed,
            observed_all,
            gpus,
            mut identity,
            auto_note,
            nccl_logs,
            ..
        } = prepared;
        let backend = backend.as_mut();
        let node_group = self.agreed(node_group(backend, c, &nodes, world.rank()))?;
        let pair_groups = self.agreed(pair_groups(backend, c, &nodes, world.rank()))?;
        let planned = plan(&c.checks, &nodes, world.rank(), node_group, &pair_groups);
        let reservation = Reservation::of(
            planned
                .iter()
                .filter(|p| p.active)
                .flat_map(|p| p.calls.iter().map(|k| (k.hierarchy, k.dtype, k.shape))),
            false,
        );
        let free = backend.gpu().and_then(|g| g.free_bytes());
        let ranks_on_host = world.nodes().local_size(world.rank());
        // the finder's buffers come after the checks' (its measurer
        // reserves its own): each must fit
        for r in std::iter::once(&reservation).chain(&finder::reservations(c)) {
            self.agreed(c.check_memory(r, ranks_on_host, free))?;
        }
        self.agreed(backend.reserve(&reservation))?;
        // the header's backend note once registration is done (a window
        // NCCL declined is known by then)
        identity.backend_note = super::prepare::backend_note(auto_note, backend.identity().notes);
        // every rank's own environment against the profile's plugin's
        let lacks = c.profile.not_judged(&|name| std::env::var(name).ok());
        let views = outputs::Views {
            observed: observed.text,
            observed_all,
            gpus,
            plugin_missing: world.all_gather_text(lacks.as_deref().unwrap_or(""), PLUGIN_REASON_BYTES),
            nccl_logs,
        };
        self.agreed(outputs::check_prometheus(c, &nodes, world.rank()))?;
        let setup = outputs::Setup::new(self, c, &nodes, identity, views)?;
        let mut measured = self.measure(backend, c, &planned, &setup, watchdog);
        // last: the finder's measurer prepares buffers of its own
        measured.finders = self.find(backend, c, &nodes, &setup, watchdog, &mut measured.stopped_by);
        Ok(self.conclude(c, &nodes, &planned, setup, measured))
    }
}

/// The backend's sub-communicators, which `scope` checks (`node`, `pair`)
/// need: a usage error naming the backend where it has none.
fn sub_groups<'b>(backend: &'b mut dyn Backend, scope: &str) -> Result<&'b mut dyn SubGroups, Error> {
    let kind = backend.identity().kind;
    backend.sub_groups().ok_or_else(|| {
        Error::usage(format!(
            "the {} backend has no sub-communicators for {scope} checks (NCCL before 2.18 has no ncclCommSplit); \
             use --only with the whole-job checks, or a newer NCCL",
            kind.name()
        ))
    })
}

/// Each node's ranks on their own sub-communicator, when a node check
/// runs (every rank splits, in the same order).
fn node_group(backend: &mut dyn Backend, c: &CheckJob, nodes: &Nodes, rank: usize) -> Result<Option<SubGroup>, Error> {
    if !c.checks.iter().any(|k| k.scope == Scope::Node) {
        return Ok(None);
    }
    let sub = sub_groups(backend, "node")?;
    sub.split(nodes.node_of_rank[rank], nodes.local_rank(rank)).map(Some)
}

/// Each round of pairs' sub-communicators, when a pair check runs (every
/// rank splits once per round, in the same order; a rank out of a round
/// gets `None`).
fn pair_groups(
    backend: &mut dyn Backend,
    c: &CheckJob,
    nodes: &Nodes,
    rank: usize,
) -> Result<Vec<Option<SubGroup>>, Error> {
    if !c.checks.iter().any(|k| k.scope == Scope::Pair && !k.is_finder()) {
        return Ok(vec![]);
    }
    let rounds = pair_rounds(nodes.nnodes());
    if rounds.is_empty() {
        return Ok(vec![]);
    }
    let sub = sub_groups(backend, "pair")?;
    pair_colours(&rounds, nodes, rank)
        .into_iter()
        .map(|(colour, key, active)| sub.split(colour, key).map(|g| active.then_some(g)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::pair_rounds;

    #[test]
    fn pairs_are_a_ring_in_rounds_of_disjoint_pairs() {
        assert!(pair_rounds(1).is_empty());
        assert_eq!(pair_rounds(2), vec![vec![(0, 1)]]);
        assert_eq!(pair_rounds(3), vec![vec![(0, 1)], vec![(1, 2)], vec![(2, 0)]]);
        assert_eq!(pair_rounds(4), vec![vec![(0, 1), (2, 3)], vec![(1, 2), (3, 0)]]);
        for n in 2..12 {
            let rounds = pair_rounds(n);
            let pairs: Vec<_> = rounds.iter().flatten().collect();
            assert_eq!(pairs.len(), if n == 2 { 1 } else { n });
            for node in 0..n {
                let mine = pairs.iter().filter(|(a, b)| *a == node || *b == node).count();
                assert_eq!(mine, if n == 2 { 1 } else { 2 }, "{n} nodes: node {node} in two pairs");
            }
            for r in &rounds {
                let mut seen: Vec<usize> = r.iter().flat_map(|&(a, b)| [a, b]).collect();
                seen.sort_unstable();
                seen.dedup();
                assert_eq!(seen.len(), 2 * r.len(), "a round's pairs are disjoint");
            }
            assert!(rounds.len() <= 3);
        }
    }
}
