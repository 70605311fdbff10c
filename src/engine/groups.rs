//! `--split`: parallel groups (docs/nccl-tests.md, "Parallel groups").
//! Every rank's colour comes from its process's index (`SplitRule`, as
//! nccl-tests colours MPI processes), so every rank knows every group
//! without exchanging anything; the backend's
//! sub-communicator (`SubGroups::split`, collective over the job) carries
//! this rank's group's calls, and every group runs each point at once.
//!
//! Rows: one per group (its own size, count, rank count, bus factor, and
//! the wrong elements of its ranks), then the aggregate nccl-tests prints:
//! the time reduced over every rank of every group (`--average`, as
//! nccl-tests' all-reduce over MPI_COMM_WORLD), with the size, count, rank
//! count and bus factor of rank 0's group, and the wrong elements of every
//! rank.

use crate::backend::{Backend, SubGroup};
use crate::error::Error;
use crate::types::SplitRule;

/// The value of the `group` column of the aggregate row.
pub const ALL: &str = "all";

/// The groups of a run, and this rank's place in them.
#[derive(Clone, Debug, PartialEq)]
pub struct Groups {
    pub rule: SplitRule,
    /// Each group's world ranks, ascending; groups by ascending colour.
    pub members: Vec<Vec<usize>>,
    /// This rank's group.
    pub mine: usize,
    /// This rank's index in its group.
    pub index: usize,
    /// The backend's sub-communicator of this rank's group (`None` before
    /// `split`).
    pub sub: Option<SubGroup>,
}

impl Groups {
    /// The groups of `rule` over the ranks whose processes are
    /// `process_of` (`process_indices`), seen from `rank`.
    pub fn of(rule: SplitRule, process_of: &[usize], rank: usize) -> Groups {
        let members = rule.groups(process_of);
        let mine = members.iter().position(|m| m.contains(&rank)).unwrap_or(0);
        let index = members[mine].iter().position(|&r| r == rank).unwrap_or(0);
        Groups {
            rule,
            members,
            mine,
            index,
            sub: None,
        }
    }

    /// Makes this rank's sub-communicator: collective, every rank calls it
    /// together (MPI_Comm_split / ncclCommSplit with the group as colour
    /// and the world rank as key).
    pub fn split(mut self, backend: &mut dyn Backend, rank: usize) -> Result<Groups, Error> {
        let kind = backend.identity().kind;
        let rule = self.rule;
        let sub = backend.sub_groups().ok_or_else(|| {
            Error::usage(format!(
                "--split {rule}: the {} backend has no sub-communicators (NCCL before 2.18 has no ncclCommSplit); use --backend mpi",
                kind.name()
            ))
        })?;
        self.sub = Some(sub.split(self.mine, rank)?);
        Ok(self)
    }

    /// Each world rank's process, numbered in order of first appearance
    /// (one rank per process under a launcher: the world rank; `-g`: 0).
    pub fn process_indices(ranks: &[crate::world::RankInfo]) -> Vec<usize> {
        let mut seen: Vec<(&str, u32)> = Vec::new();
        ranks
            .iter()
            .map(|r| match seen.iter().position(|&p| p == (r.host.as_str(), r.pid)) {
                Some(i) => i,
                None => {
                    seen.push((r.host.as_str(), r.pid));
                    seen.len() - 1
                }
            })
            .collect()
    }

    /// Ranks in this rank's group.
    pub fn size(&self) -> usize {
        self.members[self.mine].len()
    }

    /// The group of world rank `rank`.
    pub fn group_of(&self, rank: usize) -> usize {
        self.members.iter().position(|m| m.contains(&rank)).unwrap_or(0)
    }

    /// "2 groups (MOD 2): 0 = ranks 0,2; 1 = ranks 1,3", for the header.
    pub fn describe(&self) -> String {
        let groups: Vec<String> = self
            .members
            .iter()
            .enumerate()
            .map(|(g, m)| {
                let ranks: Vec<String> = m.iter().map(usize::to_string).collect();
                format!("{g} = rank{} {}", if m.len() == 1 { "" } else { "s" }, ranks.join(","))
            })
            .collect();
        format!(
            "{} group{} ({}): {}; row {ALL}: every rank's time, rank 0's group's size",
            self.members.len(),
            if self.members.len() == 1 { "" } else { "s" },
            self.rule,
            groups.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rank_finds_its_group_and_index() {
        let rule: SplitRule = "MOD 2".parse().unwrap();
        let g = Groups::of(rule, &[0, 1, 2], 2);
        assert_eq!(g.members, vec![vec![0, 2], vec![1]]);
        assert_eq!((g.mine, g.index, g.size()), (0, 1, 2));
        let g = Groups::of(rule, &[0, 1, 2], 1);
        assert_eq!((g.mine, g.index, g.size()), (1, 0, 1));
        assert_eq!(g.group_of(2), 0);
        assert_eq!(
            g.describe(),
            "2 groups (MOD 2): 0 = ranks 0,2; 1 = rank 1; row all: every rank's time, rank 0's group's size"
        );
    }
}
