//! Which pairs the matrix measures, and which of them run at once.
//!
//! The pairs of a level are scheduled in rounds of disjoint pairs by the
//! circle method (the round-robin tournament: fix one member, rotate the
//! others one step per round), so that a round runs all its pairs at once
//! and every pair is measured exactly once: n - 1 rounds of n / 2 pairs for
//! an even n, n rounds of (n - 1) / 2 pairs for an odd n (each member sits
//! out one round). `--isolated` runs one pair per round, the
//! contention-free reference. At `--level rail` the ranks with the same
//! local index on every node form one group per rail (nccl-tests' split
//! "MOD k"); the groups run side by side, round i of every rail at once.
//! Pure functions: nothing here measures.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::Endpoint;
use crate::error::Error;

crate::types::vocabulary! {
    /// Which ranks pair up.
    #[derive(Default, Hash)]
    pub enum Level: "level", AnyCase, pad {
        /// One rank per node (its lowest rank), every pair of nodes.
        #[default]
        Node = "node",
        /// Every pair of ranks, on one node or across nodes.
        Rank = "rank",
        /// Per rail: ranks with the same local index on different nodes.
        Rail = "rail",
    }
}

/// Two ranks, the lower first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
}

impl Pair {
    pub fn new(x: usize, y: usize) -> Pair {
        Pair {
            a: x.min(y),
            b: x.max(y),
        }
    }

    pub fn has(&self, rank: usize) -> bool {
        self.a == rank || self.b == rank
    }

    /// The other end, when `rank` is one.
    pub fn other(&self, rank: usize) -> Option<usize> {
        match rank {
            r if r == self.a => Some(self.b),
            r if r == self.b => Some(self.a),
            _ => None,
        }
    }
}

impl fmt::Display for Pair {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.a, self.b)
    }
}

/// The matrix's plan: its members and its rounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Schedule {
    pub level: Level,
    pub isolated: bool,
    /// The ranks that pair up: one group, or one per rail (by local index).
    pub groups: Vec<Vec<usize>>,
    /// Each round's pairs run at once; rounds run one after another.
    pub rounds: Vec<Vec<Pair>>,
}

impl Schedule {
    /// Every measured rank, in group order.
    pub fn units(&self) -> Vec<usize> {
        self.groups.iter().flatten().copied().collect()
    }

    pub fn pair_count(&self) -> usize {
        self.rounds.iter().map(Vec::len).sum()
    }

    /// The largest number of pairs in one round.
    pub fn widest_round(&self) -> usize {
        self.rounds.iter().map(Vec::len).max().unwrap_or(0)
    }
}

/// Rounds of disjoint pairs covering every pair of `members` once (the
/// circle method). Fewer than two members: no round.
pub fn circle(members: &[usize]) -> Vec<Vec<Pair>> {
    let n = members.len();
    if n < 2 {
        return Vec::new();
    }
    // An odd count gets a bye (None): whoever meets it sits the round out.
    let slots: Vec<Option<usize>> = members
        .iter()
        .copied()
        .map(Some)
        .chain((n % 2 == 1).then_some(None))
        .collect();
    let k = slots.len();
    let ring = k - 1;
    (0..ring)
        .map(|r| {
            let mut round = Vec::with_capacity(k / 2);
            let mut add = |x: usize, y: usize| {
                if let (Some(p), Some(q)) = (slots[x], slots[y]) {
                    round.push(Pair::new(p, q));
                }
            };
            add(k - 1, r);
            for i in 1..k / 2 {
                add((r + i) % ring, (r + ring - i) % ring);
            }
            round
        })
        .collect()
}

/// Round i of every group, at once (the groups share no member).
fn side_by_side(groups: &[Vec<usize>]) -> Vec<Vec<Pair>> {
    let each: Vec<Vec<Vec<Pair>>> = groups.iter().map(|g| circle(g)).collect();
    let rounds = each.iter().map(Vec::len).max().unwrap_or(0);
    (0..rounds)
        .map(|i| each.iter().filter_map(|g| g.get(i)).flatten().copied().collect())
        .collect()
}

/// The hosts in order of their lowest rank, each with its ranks in order.
pub fn hosts(endpoints: &[Endpoint]) -> Vec<(String, Vec<usize>)> {
    let mut by_rank: Vec<&Endpoint> = endpoints.iter().collect();
    by_rank.sort_by_key(|e| e.rank);
    let mut order: Vec<(String, Vec<usize>)> = Vec::new();
    let mut index: BTreeMap<&str, usize> = BTreeMap::new();
    for e in by_rank {
        match index.get(e.host.as_str()) {
            Some(&i) => order[i].1.push(e.rank),
            None => {
                index.insert(&e.host, order.len());
                order.push((e.host.clone(), vec![e.rank]));
            }
        }
    }
    order
}

/// The schedule of `level` over `endpoints`; a level this launch cannot
/// serve is a usage error that says why.
pub fn build(endpoints: &[Endpoint], level: Level, isolated: bool) -> Result<Schedule, Error> {
    if endpoints.len() < 2 {
        return Err(Error::usage(format!(
            "links measures pairs of ranks, and this launch has {}: launch 2 ranks or more",
            endpoints.len()
        )));
    }
    let hosts = hosts(endpoints);
    let groups: Vec<Vec<usize>> = match level {
        Level::Rank => vec![hosts.iter().flat_map(|(_, r)| r.iter().copied()).collect()],
        Level::Node | Level::Rail if hosts.len() < 2 => {
            return Err(Error::usage(format!(
                "--level {level} pairs ranks on different nodes, and this launch has one node ({}): use --level rank, or launch on 2 nodes or more",
                hosts[0].0
            )));
        }
        Level::Node => vec![hosts.iter().map(|(_, r)| r[0]).collect()],
        Level::Rail => {
            let per = hosts[0].1.len();
            if let Some((h, r)) = hosts.iter().find(|(_, r)| r.len() != per) {
                return Err(Error::usage(format!(
                    "--level rail needs the same number of ranks on every node: {} has {per}, {h} has {}",
                    hosts[0].0,
                    r.len()
                )));
            }
            (0..per).map(|k| hosts.iter().map(|(_, r)| r[k]).collect()).collect()
        }
    };
    let rounds = side_by_side(&groups);
    let rounds = if isolated {
        rounds.into_iter().flatten().map(|p| vec![p]).collect()
    } else {
        rounds
    };
    Ok(Schedule {
        level,
        isolated,
        groups,
        rounds,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// Every pair of `members` exactly once, and no member twice in a round.
    fn check_round_robin(members: &[usize], rounds: &[Vec<Pair>]) {
        let mut seen = BTreeSet::new();
        for round in rounds {
            let mut busy = BTreeSet::new();
            for p in round {
                assert!(p.a < p.b, "{p}");
                assert!(busy.insert(p.a) && busy.insert(p.b), "{p} shares a member in {round:?}");
                assert!(seen.insert(*p), "{p} measured twice");
            }
        }
        let n = members.len();
        assert_eq!(seen.len(), n * (n - 1) / 2);
        for (i, &x) in members.iter().enumerate() {
            for &y in &members[i + 1..] {
                assert!(seen.contains(&Pair::new(x, y)), "{x}-{y} never measured");
            }
        }
    }

    #[test]
    fn the_circle_method_measures_every_pair_once_in_disjoint_rounds() {
        for n in 2..=33 {
            let members: Vec<usize> = (0..n).map(|i| 3 * i + 1).collect();
            let rounds = circle(&members);
            check_round_robin(&members, &rounds);
            if n % 2 == 0 {
                assert_eq!(rounds.len(), n - 1, "n = {n}");
                assert!(rounds.iter().all(|r| r.len() == n / 2), "n = {n}");
            } else {
                assert_eq!(rounds.len(), n, "n = {n}");
                assert!(rounds.iter().all(|r| r.len() == (n - 1) / 2), "n = {n}");
            }
        }
        assert!(circle(&[4]).is_empty());
        assert!(circle(&[]).is_empty());
    }

    fn cluster(nodes: usize, per: usize) -> Vec<Endpoint> {
        let mut e = Vec::new();
        for rank in 0..nodes * per {
            e.push(Endpoint {
                rank,
                host: format!("n{}", rank / per),
                local: rank % per,
                ..Endpoint::default()
            });
        }
        e
    }

    #[test]
    fn node_level_pairs_the_lowest_rank_of_each_node() {
        let s = build(&cluster(5, 4), Level::Node, false).unwrap();
        assert_eq!(s.groups, vec![vec![0, 4, 8, 12, 16]]);
        assert_eq!((s.rounds.len(), s.pair_count(), s.widest_round()), (5, 10, 2));
        check_round_robin(&s.groups[0], &s.rounds);
    }

    #[test]
    fn rank_level_pairs_every_rank_including_those_on_one_node() {
        let s = build(&cluster(3, 2), Level::Rank, false).unwrap();
        assert_eq!(s.rounds.len(), 5);
        check_round_robin(&[0, 1, 2, 3, 4, 5], &s.rounds);
        assert!(s.rounds.iter().flatten().any(|p| *p == Pair::new(0, 1)));
    }

    #[test]
    fn rails_are_groups_by_local_index_run_side_by_side() {
        let s = build(&cluster(4, 3), Level::Rail, false).unwrap();
        assert_eq!(s.groups, vec![vec![0, 3, 6, 9], vec![1, 4, 7, 10], vec![2, 5, 8, 11]]);
        // 3 rounds, each with 2 pairs of every rail at once
        assert_eq!((s.rounds.len(), s.widest_round()), (3, 6));
        for g in &s.groups {
            let only: Vec<Vec<Pair>> = s
                .rounds
                .iter()
                .map(|r| r.iter().filter(|p| g.contains(&p.a)).copied().collect())
                .collect();
            check_round_robin(g, &only);
        }
        // no pair leaves its rail, none stays on one node
        for p in s.rounds.iter().flatten() {
            assert_eq!(p.a % 3, p.b % 3);
            assert_ne!(p.a / 3, p.b / 3);
        }
        check_disjoint(&s.rounds);
    }

    fn check_disjoint(rounds: &[Vec<Pair>]) {
        for r in rounds {
            let mut busy = BTreeSet::new();
            for p in r {
                assert!(busy.insert(p.a) && busy.insert(p.b));
            }
        }
    }

    #[test]
    fn isolated_runs_one_pair_per_round() {
        let s = build(&cluster(6, 1), Level::Node, true).unwrap();
        assert_eq!((s.rounds.len(), s.widest_round(), s.pair_count()), (15, 1, 15));
        check_round_robin(&s.groups[0], &s.rounds);
    }

    #[test]
    fn levels_a_launch_cannot_serve_are_one_line_usage_errors() {
        let e = build(&cluster(1, 1), Level::Rank, false).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("this launch has 1"), "{e}");
        let e = build(&cluster(1, 4), Level::Node, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--level node pairs ranks on different nodes, and this launch has one node (n0): use --level rank, or launch on 2 nodes or more"
        );
        assert!(build(&cluster(1, 4), Level::Rank, false).is_ok());
        let mut uneven = cluster(2, 2);
        uneven.push(Endpoint {
            rank: 4,
            host: "n1".into(),
            local: 2,
            ..Endpoint::default()
        });
        let e = build(&uneven, Level::Rail, false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--level rail needs the same number of ranks on every node: n0 has 2, n1 has 3"
        );
        // an odd count is fine: n rounds, one member out each round
        let s = build(&cluster(7, 1), Level::Node, false).unwrap();
        assert_eq!(s.rounds.len(), 7);
    }

    #[test]
    fn levels_read_their_names() {
        for l in Level::ALL {
            assert_eq!(Level::parse(l.name()), Some(l));
        }
        assert_eq!(Level::parse(" Rail "), Some(Level::Rail));
        assert_eq!(Level::parse("gpu"), None);
    }
}
