//! Which ranks talk to which: the sub-communicators a training step runs
//! on (world, node, cross-node, tensor-parallel, data-parallel) and the
//! rank lists of each, for a given world size, ranks per node and
//! tensor-parallel degree.
//!
//! Every group kind is one `Partition` of the ranks: consecutive blocks of
//! `block` ranks, each split into `stride` interleaved groups. That one
//! shape covers Megatron's layout (tensor-parallel groups are consecutive
//! ranks, data-parallel groups take every T-th rank: `initialize_model_parallel`
//! in megatron/core/parallel_state.py), nodes of consecutive ranks, the
//! groups of equal local rank across nodes (HSDP's replicate group, the
//! `rs-ar-ag` hierarchy's second step), and the communicators of a replayed
//! log. Pure arithmetic; building the communicators is the backend's job.

use std::fmt;

use crate::error::Error;

/// A sub-communicator a schedule's operation runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Group {
    /// Every rank.
    World,
    /// The ranks of one node (`ranks_per_node` consecutive ranks).
    Node,
    /// The ranks with the same local rank on every node.
    CrossNode,
    /// A tensor-parallel group: `tp` consecutive ranks.
    Tp,
    /// A data-parallel group: the ranks with the same tensor-parallel rank.
    Dp,
    /// An expert-parallel group: `ep` consecutive ranks (Megatron's order
    /// tp-cp-ep-dp-pp, with tp = cp = 1).
    Ep,
    /// The ranks holding the same experts: every `ep`-th rank.
    ExpertDp,
    /// A pipeline: one rank of each of the `pp` stages, every
    /// `world / pp`-th rank (pipeline parallelism is Megatron's outermost).
    Pp,
    /// The data-parallel group of one pipeline stage: its `world / pp`
    /// consecutive ranks.
    StageDp,
    /// Any other partition (a replayed log's communicators).
    Partition(Partition),
}

impl Group {
    pub fn name(&self) -> String {
        match self {
            Group::World => "world".into(),
            Group::Node => "node".into(),
            Group::CrossNode => "cross-node".into(),
            Group::Tp => "tp".into(),
            Group::Dp => "dp".into(),
            Group::Ep => "ep".into(),
            Group::ExpertDp => "expert-dp".into(),
            Group::Pp => "pp".into(),
            Group::StageDp => "stage-dp".into(),
            Group::Partition(p) => p.to_string(),
        }
    }
}

impl fmt::Display for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Ranks split into consecutive blocks of `block` ranks; inside a block,
/// group `i` holds the ranks at offsets `i, i + stride, i + 2 stride, ...`.
/// Each group has `block / stride` ranks and there are `world / block *
/// stride` groups. `{block: k, stride: 1}` is k consecutive ranks;
/// `{block: world, stride: s}` takes every s-th rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Partition {
    pub block: usize,
    pub stride: usize,
}

impl Partition {
    /// Ranks per group.
    pub fn size(&self) -> usize {
        self.block / self.stride.max(1)
    }

    /// Checks the partition against a world size, one line on failure.
    pub fn check(&self, world: usize) -> Result<(), String> {
        if self.block == 0 || self.stride == 0 {
            return Err("a group partition needs a block and a stride of at least 1".into());
        }
        if !world.is_multiple_of(self.block) {
            return Err(format!("blocks of {} ranks do not divide {world} ranks", self.block));
        }
        if !self.block.is_multiple_of(self.stride) {
            return Err(format!(
                "a stride of {} does not divide blocks of {} ranks",
                self.stride, self.block
            ));
        }
        Ok(())
    }

    /// The rank lists of every group, each in rank order, groups ordered by
    /// their lowest rank. Assumes `check(world)` passed.
    pub fn groups(&self, world: usize) -> Vec<Vec<usize>> {
        let size = self.size();
        let mut out = Vec::new();
        for base in (0..world).step_by(self.block.max(1)) {
            for i in 0..self.stride {
                out.push((0..size).map(|j| base + i + j * self.stride).collect());
            }
        }
        out
    }

    /// The group holding `rank`: its index in `groups` and its members.
    pub fn group_of(&self, rank: usize) -> (usize, Vec<usize>) {
        let base = rank / self.block * self.block;
        let i = (rank - base) % self.stride;
        let index = rank / self.block * self.stride + i;
        let members = (0..self.size()).map(|j| base + i + j * self.stride).collect();
        (index, members)
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.stride == 1 {
            write!(f, "blocks of {}", self.block)
        } else {
            write!(
                f,
                "every {} rank in blocks of {}",
                crate::types::ordinal(self.stride),
                self.block
            )
        }
    }
}

/// The launch's shape: world size, ranks per node, tensor-parallel,
/// expert-parallel and pipeline-parallel degrees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupLayout {
    pub world: usize,
    pub ranks_per_node: usize,
    pub tp: usize,
    pub ep: usize,
    pub pp: usize,
}

impl GroupLayout {
    /// Validates the sizes; each failure is one line.
    pub fn new(world: usize, ranks_per_node: usize, tp: usize) -> Result<GroupLayout, Error> {
        if world == 0 {
            return Err(Error::usage("a workload needs at least 1 rank"));
        }
        if ranks_per_node == 0 {
            return Err(Error::usage("ranks per node must be at least 1"));
        }
        if tp == 0 {
            return Err(Error::usage("the tensor-parallel degree must be at least 1"));
        }
        if !world.is_multiple_of(ranks_per_node) {
            return Err(Error::usage(format!(
                "{ranks_per_node} ranks per node do not divide the world of {world} ranks"
            )));
        }
        if !world.is_multiple_of(tp) {
            return Err(Error::usage(format!(
                "the tensor-parallel degree {tp} does not divide the world of {world} ranks"
            )));
        }
        Ok(GroupLayout {
            world,
            ranks_per_node,
            tp,
            ep: 1,
            pp: 1,
        })
    }

    /// The same layout with an expert-parallel degree, which must divide
    /// the world.
    pub fn with_ep(self, ep: usize) -> Result<GroupLayout, Error> {
        self.check_divides(ep, "expert-parallel")?;
        Ok(GroupLayout { ep, ..self })
    }

    /// The same layout with a pipeline-parallel degree (stages), which
    /// must divide the world.
    pub fn with_pp(self, pp: usize) -> Result<GroupLayout, Error> {
        self.check_divides(pp, "pipeline-parallel")?;
        Ok(GroupLayout { pp, ..self })
    }

    /// Refuses a `what` degree that does not divide the world.
    fn check_divides(self, degree: usize, what: &str) -> Result<(), Error> {
        if degree == 0 || !self.world.is_multiple_of(degree) {
            return Err(Error::usage(format!(
                "the {what} degree {degree} does not divide the world of {} ranks",
                self.world
            )));
        }
        Ok(())
    }

    pub fn nodes(&self) -> usize {
        self.world / self.ranks_per_node
    }

    /// The partition a group kind stands for at this layout.
    pub fn partition(&self, group: Group) -> Partition {
        let (block, stride) = match group {
            Group::World => (self.world, 1),
            Group::Node => (self.ranks_per_node, 1),
            Group::CrossNode => (self.world, self.ranks_per_node),
            Group::Tp => (self.tp, 1),
            Group::Dp => (self.world, self.tp),
            Group::Ep => (self.ep, 1),
            Group::ExpertDp => (self.world, self.ep),
            Group::Pp => (self.world, self.world / self.pp.max(1)),
            Group::StageDp => (self.world / self.pp.max(1), 1),
            Group::Partition(p) => (p.block, p.stride),
        };
        Partition { block, stride }
    }

    /// Ranks per group of this kind.
    pub fn size(&self, group: Group) -> usize {
        self.partition(group).size()
    }

    /// Checks that a group kind fits this layout (always true for the named
    /// kinds, which `new` validated; a replayed partition may not fit).
    pub fn check(&self, group: Group) -> Result<(), Error> {
        self.partition(group)
            .check(self.world)
            .map_err(|why| Error::usage(format!("group {group} does not fit {} ranks: {why}", self.world)))
    }

    /// Every group's rank list.
    pub fn groups(&self, group: Group) -> Vec<Vec<usize>> {
        self.partition(group).groups(self.world)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eight_ranks_on_two_nodes_with_tp_two_list_every_group() {
        let l = GroupLayout::new(8, 4, 2).unwrap();
        assert_eq!(l.groups(Group::World), vec![vec![0, 1, 2, 3, 4, 5, 6, 7]]);
        assert_eq!(
            l.groups(Group::Tp),
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(l.groups(Group::Dp), vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        assert_eq!(l.groups(Group::Node), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(
            l.groups(Group::CrossNode),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        assert_eq!(l.size(Group::Dp), 4);
        assert_eq!(l.nodes(), 2);
    }

    #[test]
    fn expert_and_pipeline_groups_follow_megatrons_rank_order() {
        let l = GroupLayout::new(8, 8, 1).unwrap().with_ep(4).unwrap();
        assert_eq!(l.groups(Group::Ep), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        assert_eq!(
            l.groups(Group::ExpertDp),
            vec![vec![0, 4], vec![1, 5], vec![2, 6], vec![3, 7]]
        );
        let l = GroupLayout::new(8, 8, 1).unwrap().with_pp(4).unwrap();
        assert_eq!(l.groups(Group::Pp), vec![vec![0, 2, 4, 6], vec![1, 3, 5, 7]]);
        assert_eq!(
            l.groups(Group::StageDp),
            vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]
        );
        assert_eq!(
            GroupLayout::new(6, 6, 1).unwrap().with_ep(4).unwrap_err().to_string(),
            "the expert-parallel degree 4 does not divide the world of 6 ranks"
        );
        assert!(GroupLayout::new(6, 6, 1).unwrap().with_pp(4).is_err());
    }

    #[test]
    fn a_non_power_of_two_world_splits_into_three_nodes() {
        let l = GroupLayout::new(6, 2, 3).unwrap();
        assert_eq!(l.groups(Group::Node), vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
        assert_eq!(l.groups(Group::CrossNode), vec![vec![0, 2, 4], vec![1, 3, 5]]);
        assert_eq!(l.groups(Group::Tp), vec![vec![0, 1, 2], vec![3, 4, 5]]);
        assert_eq!(l.groups(Group::Dp), vec![vec![0, 3], vec![1, 4], vec![2, 5]]);
    }

    #[test]
    fn every_rank_is_in_exactly_one_group_of_each_kind() {
        let l = GroupLayout::new(12, 4, 2).unwrap();
        for g in [Group::World, Group::Node, Group::CrossNode, Group::Tp, Group::Dp] {
            let groups = l.groups(g);
            let mut seen: Vec<usize> = groups.iter().flatten().copied().collect();
            seen.sort();
            assert_eq!(seen, (0..12).collect::<Vec<_>>(), "{g}");
            for (index, members) in groups.iter().enumerate() {
                for &r in members {
                    assert_eq!(l.partition(g).group_of(r), (index, members.clone()), "{g} rank {r}");
                }
            }
        }
    }

    #[test]
    fn sizes_that_do_not_divide_are_one_line_errors() {
        let err = GroupLayout::new(8, 3, 1).unwrap_err().to_string();
        assert_eq!(err, "3 ranks per node do not divide the world of 8 ranks");
        let err = GroupLayout::new(6, 2, 4).unwrap_err().to_string();
        assert_eq!(err, "the tensor-parallel degree 4 does not divide the world of 6 ranks");
        assert!(GroupLayout::new(0, 1, 1).is_err());
        assert!(GroupLayout::new(4, 0, 1).is_err());
        assert!(GroupLayout::new(4, 1, 0).is_err());
        for e in [
            GroupLayout::new(8, 3, 1).unwrap_err(),
            GroupLayout::new(4, 1, 0).unwrap_err(),
        ] {
            assert_eq!(e.exit_code(), 2);
            assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn a_partition_that_does_not_fit_the_layout_is_refused() {
        let l = GroupLayout::new(6, 6, 1).unwrap();
        let g = Group::Partition(Partition { block: 4, stride: 1 });
        assert_eq!(
            l.check(g).unwrap_err().to_string(),
            "group blocks of 4 does not fit 6 ranks: blocks of 4 ranks do not divide 6 ranks"
        );
        let g = Group::Partition(Partition { block: 6, stride: 4 });
        assert!(l.check(g).is_err());
        assert!(l.check(Group::Partition(Partition { block: 6, stride: 3 })).is_ok());
    }

    #[test]
    fn a_strided_partition_inside_blocks_lists_its_groups() {
        // data-parallel groups inside two pipeline stages of four ranks
        let p = Partition { block: 4, stride: 2 };
        assert_eq!(p.groups(8), vec![vec![0, 2], vec![1, 3], vec![4, 6], vec![5, 7]]);
        assert_eq!(p.size(), 2);
    }
}
