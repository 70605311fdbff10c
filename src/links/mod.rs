//! Which node, which link: the pairwise link matrix and the finder that
//! names a bad node, GPU or link (docs/links.md).
//!
//! The core is pure and knows no backend: `schedule` says which pairs run
//! together (rounds of disjoint pairs by the circle method), `finder`
//! drives a `Measurer` (the one trait a data plane implements: "measure
//! these rounds of pairs", "all-reduce on these node subsets") through the
//! matrix, the fleet-relative rule of `rule`, the re-tests against
//! known-good partners and the bisection by sub-communicator all-reduces,
//! and returns a `Report` that names host, rank, GPU and NIC with the
//! evidence. `sim` is a simulated cluster behind the same trait, with a
//! virtual clock; `bench` measures the finder on it (recall, precision,
//! rounds). `output` writes the pairs CSV, the JSON, the matrix and the
//! report as text; `summary` the header and the rule's verdict on the
//! matrix alone; `heatmap` draws the matrix; `layout` orders and groups
//! the endpoints by rack, leaf and host.
//!
//! Must not: print (callers print what `output` formats), read or create
//! files other than the one it is handed, or know clap.

#[cfg(test)]
pub mod bench;
mod bisect;
mod confirm;
pub mod finder;
pub mod heatmap;
pub mod layout;
pub mod measure;
pub mod metric;
pub mod output;
pub mod rule;
pub mod schedule;
#[cfg(test)]
pub mod sim;
pub mod summary;

use serde::{Deserialize, Serialize};

pub use finder::{Finding, FindingKind, Report, find};
pub use layout::{Layout, Topology};
pub use measure::{Estimate, Matrix, Measurer, PairResult, PairSamples, Phase, Probe, measure_matrix};
pub use rule::{Metric, Rule};
pub use schedule::{Level, Pair, Schedule};

/// One rank as the matrix knows it: who it is, where it runs, which GPU
/// and NIC it uses where the backend can tell.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub rank: usize,
    pub host: String,
    /// Its index among the ranks of its host, from 0 (by rank).
    pub local: usize,
    /// The GPU's PCI bus id (`0000:1b:00.0`).
    pub gpu: Option<String>,
    /// The NIC it sends through (`mlx5_0`).
    pub nic: Option<String>,
}

impl Endpoint {
    /// `host`, or `host rank R (local L, GPU g, NIC n)` where more than
    /// the host is worth saying.
    pub fn name(&self) -> String {
        let mut parts = vec![format!("rank {}", self.rank), format!("local {}", self.local)];
        if let Some(g) = &self.gpu {
            parts.push(format!("GPU {g}"));
        }
        if let Some(n) = &self.nic {
            parts.push(format!("NIC {n}"));
        }
        format!("{} ({})", self.host, parts.join(", "))
    }
}

/// Fills in `local` from the order of ranks on each host.
pub fn number_locals(endpoints: &mut [Endpoint]) {
    let mut seen: std::collections::BTreeMap<String, usize> = Default::default();
    let mut order: Vec<usize> = (0..endpoints.len()).collect();
    order.sort_by_key(|&i| endpoints[i].rank);
    for i in order {
        let next = seen.entry(endpoints[i].host.clone()).or_default();
        endpoints[i].local = *next;
        *next += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locals_count_ranks_on_each_host_in_rank_order() {
        let mut e: Vec<Endpoint> = ["a", "b", "a", "b", "a"]
            .iter()
            .enumerate()
            .map(|(rank, h)| Endpoint {
                rank,
                host: h.to_string(),
                ..Endpoint::default()
            })
            .collect();
        number_locals(&mut e);
        let locals: Vec<usize> = e.iter().map(|e| e.local).collect();
        assert_eq!(locals, [0, 0, 1, 1, 2]);
        e[0].gpu = Some("0000:1b:00.0".into());
        assert_eq!(e[0].name(), "a (rank 0, local 0, GPU 0000:1b:00.0)");
    }
}
