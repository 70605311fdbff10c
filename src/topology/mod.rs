//! Where ranks sit and how a hierarchical all-reduce splits work over them:
//! nodes (real hosts or virtual groups of consecutive ranks), the hierarchy
//! modes, and the slicing of a buffer over the ranks of a node. Beside them:
//! transport profiles (`profile`), the transport observed (`observe`) and
//! the machine report of `collbench topo` (`machine`).
//!
//! Pure data and arithmetic here; building communicators from it is each
//! backend's job.

pub mod machine;
pub mod observe;
pub mod profile;

use crate::error::Error;

/// This machine's host name.
pub fn hostname() -> String {
    hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// Which node every rank belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nodes {
    /// Node index of every rank; nodes are numbered in order of their
    /// lowest rank.
    pub node_of_rank: Vec<usize>,
    /// A name per node: the host of its lowest rank.
    pub hosts: Vec<String>,
    /// Nodes are `--ranks-per-node` groups, not hosts.
    pub is_virtual: bool,
}

impl Nodes {
    /// Nodes from any per-rank key (a host name, the lowest rank of a
    /// shared-memory group), numbered in order of their lowest rank.
    pub fn from_keys<K: PartialEq>(keys: &[K], host_of_rank: &[String]) -> Nodes {
        let mut firsts: Vec<usize> = Vec::new();
        let node_of_rank = keys
            .iter()
            .enumerate()
            .map(|(rank, k)| match firsts.iter().position(|&f| keys[f] == *k) {
                Some(i) => i,
                None => {
                    firsts.push(rank);
                    firsts.len() - 1
                }
            })
            .collect();
        let hosts = firsts
            .iter()
            .map(|&f| host_of_rank.get(f).cloned().unwrap_or_default())
            .collect();
        Nodes {
            node_of_rank,
            hosts,
            is_virtual: false,
        }
    }

    /// Virtual nodes of `per_node` consecutive ranks (`--ranks-per-node`),
    /// so that one machine can exercise multi-node paths.
    pub fn consecutive(per_node: usize, host_of_rank: &[String]) -> Result<Nodes, Error> {
        let nranks = host_of_rank.len();
        if per_node == 0 {
            return Err(Error::usage("--ranks-per-node must be at least 1"));
        }
        if !nranks.is_multiple_of(per_node) {
            return Err(Error::usage(format!(
                "--ranks-per-node {per_node} does not divide the {nranks} ranks of this job"
            )));
        }
        let keys: Vec<usize> = (0..nranks).map(|r| r / per_node).collect();
        let mut nodes = Nodes::from_keys(&keys, host_of_rank);
        nodes.is_virtual = true;
        Ok(nodes)
    }

    pub fn nranks(&self) -> usize {
        self.node_of_rank.len()
    }

    pub fn nnodes(&self) -> usize {
        self.hosts.len()
    }

    /// Ranks on `node`, in rank order.
    pub fn ranks_on(&self, node: usize) -> Vec<usize> {
        (0..self.nranks()).filter(|&r| self.node_of_rank[r] == node).collect()
    }

    /// Ranks of the most populated node (every node's, when uniform).
    pub fn ranks_per_node(&self) -> usize {
        (0..self.nnodes()).map(|n| self.ranks_on(n).len()).max().unwrap_or(0)
    }

    /// Every node has the same number of ranks.
    pub fn is_uniform(&self) -> bool {
        let per = self.ranks_per_node();
        (0..self.nnodes()).all(|n| self.ranks_on(n).len() == per)
    }

    /// Ranks that share `rank`'s node, `rank` included.
    pub fn local_size(&self, rank: usize) -> usize {
        self.ranks_on(self.node_of_rank[rank]).len()
    }

    /// `rank`'s index among the ranks of its node.
    pub fn local_rank(&self, rank: usize) -> usize {
        let node = self.node_of_rank[rank];
        self.node_of_rank[..rank].iter().filter(|&&n| n == node).count()
    }
}

crate::types::vocabulary! {
    /// How an all-reduce is organised over the nodes (docs/hierarchy.md).
    /// Read in either case, with `_` for `-`.
    #[derive(Hash, PartialOrd, Ord, Default)]
    pub enum Hierarchy: "hierarchy mode", AnyCaseDash {
        /// One communicator over all ranks.
        #[default]
        Flat = "flat",
        /// Reduce-scatter inside the node, all-reduce of each slice among the
        /// ranks with the same local rank, all-gather inside the node.
        RsArAg = "rs-ar-ag",
        /// Reduce to the node leader, all-reduce among leaders, broadcast inside
        /// the node.
        ReduceBcast = "reduce-bcast",
    }
}

impl Hierarchy {
    pub fn is_flat(self) -> bool {
        self == Hierarchy::Flat
    }
}

/// Splits `count` elements into `parts` contiguous slices whose lengths
/// differ by at most one (the first `count % parts` get the extra element),
/// so no tail element is dropped when `parts` does not divide `count`.
/// Returns (offset, length) per slice.
pub fn slices(count: usize, parts: usize) -> Vec<(usize, usize)> {
    let parts = parts.max(1);
    let (base, extra) = (count / parts, count % parts);
    let mut offset = 0;
    (0..parts)
        .map(|i| {
            let len = base + usize::from(i < extra);
            let s = (offset, len);
            offset += len;
            s
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn nodes_group_ranks_by_key_in_rank_order() {
        let h = hosts(&["b", "b", "a", "a", "b", "c"]);
        let n = Nodes::from_keys(&h, &h);
        assert_eq!(n.hosts, vec!["b", "a", "c"]);
        assert_eq!(n.node_of_rank, vec![0, 0, 1, 1, 0, 2]);
        assert_eq!(n.nnodes(), 3);
        assert_eq!(n.ranks_per_node(), 3);
        assert!(!n.is_uniform());
        assert_eq!(n.local_size(2), 2);
        assert_eq!(n.local_size(5), 1);
        assert_eq!(n.local_rank(4), 2);
        assert_eq!(n.local_rank(3), 1);
        assert_eq!(n.ranks_on(0), vec![0, 1, 4]);
    }

    #[test]
    fn virtual_nodes_are_consecutive_ranks() {
        let h = vec!["x".to_string(); 6];
        let n = Nodes::consecutive(3, &h).unwrap();
        assert_eq!(n.node_of_rank, vec![0, 0, 0, 1, 1, 1]);
        assert_eq!((n.nnodes(), n.ranks_per_node()), (2, 3));
        assert!(n.is_uniform() && n.is_virtual);
        assert_eq!(n.local_rank(4), 1);
        let n = Nodes::consecutive(1, &h).unwrap();
        assert_eq!((n.nnodes(), n.ranks_per_node()), (6, 1));
        let n = Nodes::consecutive(6, &h).unwrap();
        assert_eq!((n.nnodes(), n.ranks_per_node()), (1, 6));
    }

    #[test]
    fn ranks_per_node_must_divide_the_job() {
        let h = vec!["x".to_string(); 6];
        for bad in [0, 4, 5, 7, 12] {
            match Nodes::consecutive(bad, &h) {
                Err(Error::Usage(m)) => assert!(m.contains("--ranks-per-node"), "{m}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn hierarchy_names_round_trip() {
        crate::types::assert_names_round_trip(&Hierarchy::ALL, Hierarchy::name, Hierarchy::parse);
        assert_eq!(Hierarchy::parse("RS_AR_AG"), Some(Hierarchy::RsArAg));
        assert_eq!(Hierarchy::parse("tree"), None);
    }

    #[test]
    fn slices_cover_every_element_once() {
        assert_eq!(slices(10, 3), vec![(0, 4), (4, 3), (7, 3)]);
        assert_eq!(slices(2, 4), vec![(0, 1), (1, 1), (2, 0), (2, 0)]);
        assert_eq!(slices(8, 2), vec![(0, 4), (4, 4)]);
        assert_eq!(slices(0, 3), vec![(0, 0), (0, 0), (0, 0)]);
        for count in 0..40 {
            for parts in 1..9 {
                let s = slices(count, parts);
                assert_eq!(s.len(), parts);
                assert_eq!(s.iter().map(|x| x.1).sum::<usize>(), count);
                assert!(s.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
                let (min, max) = (
                    s.iter().map(|x| x.1).min().unwrap(),
                    s.iter().map(|x| x.1).max().unwrap(),
                );
                assert!(max - min <= 1);
            }
        }
    }
}
