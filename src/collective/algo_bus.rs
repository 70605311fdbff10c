//! The bus factor of the algorithm NCCL ran (`busbw_algo_gbps`,
//! docs/bandwidth.md "Bus bandwidth against the algorithm"): the bytes
//! each GPU moves per byte of the collective under that algorithm, where
//! a factor is established; `None` elsewhere, never a guess.
//!
//! - Ring: nccl-tests' factors (its doc/PERFORMANCE.md), which are Ring's:
//!   2(n-1)/n for all_reduce, (n-1)/n for all_gather and reduce_scatter,
//!   1 for broadcast and reduce.
//! - Tree all_reduce: 2, the ratio of NCCL's own model (src/graph/tuning.cc
//!   converts a tree's bus bandwidth to algorithm bandwidth by 0.5; NVIDIA
//!   confirms busBw = 2 x algBw for tree in nccl-tests issue #274).
//! - NVLS all_reduce: (n+1)/n (NCCL's author, nccl-tests pull request
//!   #239: algbw = busbw x n/(n+1)).
//!
//! NVLS_TREE, CollNet and PAT have no published per-GPU factor (NCCL's
//! model for them carries efficiencies, not traffic), nor do the other
//! collectives under Tree or NVLS.
//!
//! Also which collectives an algorithm runs at all (`algo_runs`, what a
//! pinned sweep measures, docs/algorithms.md).

use super::Collective;
use crate::types::Algo;

/// Bytes moved per GPU per byte of `collective` on `nranks` ranks when
/// NCCL ran `algo`; `None` where no factor is established (and with one
/// rank, where NCCL copies).
pub fn algo_bus_factor(collective: Collective, algo: Algo, nranks: usize) -> Option<f64> {
    if nranks < 2 {
        return None;
    }
    let n = nranks as f64;
    match (algo, collective) {
        (
            Algo::Ring,
            Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::Reduce,
        ) => Some(collective.spec().bus_factor(nranks)),
        (Algo::Tree, Collective::AllReduce) => Some(2.0),
        (Algo::Nvls, Collective::AllReduce) => Some((n + 1.0) / n),
        _ => None,
    }
}

/// Whether NCCL has `algo` for `collective` (the functions NCCL tunes;
/// sendrecv, alltoall, alltoallv, gather and scatter are sends and
/// receives, under no algorithm): broadcast and reduce run Ring only;
/// all_gather and reduce_scatter Ring, NVLS, CollNet Direct and PAT;
/// all_reduce every algorithm but PAT (NCCL's src/graph/tuning.cc, the
/// loop of `ncclTopoTuneModel` over functions and algorithms, 2.23 on).
pub fn algo_runs(collective: Collective, algo: Algo) -> bool {
    match collective {
        Collective::Broadcast | Collective::Reduce => algo == Algo::Ring,
        Collective::AllGather | Collective::ReduceScatter => {
            matches!(algo, Algo::Ring | Algo::Nvls | Algo::CollnetDirect | Algo::Pat)
        }
        Collective::AllReduce => algo != Algo::Pat,
        _ => false,
    }
}

/// Whether NCCL tunes `collective` (chooses an algorithm and protocol for
/// it): the five functions NCCL_ALGO and NCCL_PROTO name.
pub fn nccl_tunes(collective: Collective) -> bool {
    matches!(
        collective,
        Collective::AllReduce
            | Collective::AllGather
            | Collective::ReduceScatter
            | Collective::Broadcast
            | Collective::Reduce
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The factors, written out by hand from their sources (not from the
    /// function under test).
    #[test]
    fn each_established_factor_and_none_elsewhere() {
        let cases = [
            (Collective::AllReduce, Algo::Ring, 8, Some(14.0 / 8.0)),
            (Collective::AllReduce, Algo::Ring, 3, Some(4.0 / 3.0)),
            (Collective::AllGather, Algo::Ring, 4, Some(0.75)),
            (Collective::ReduceScatter, Algo::Ring, 3, Some(2.0 / 3.0)),
            (Collective::Broadcast, Algo::Ring, 5, Some(1.0)),
            (Collective::Reduce, Algo::Ring, 2, Some(1.0)),
            (Collective::AllReduce, Algo::Tree, 16, Some(2.0)),
            (Collective::AllReduce, Algo::Tree, 3, Some(2.0)),
            (Collective::AllReduce, Algo::Nvls, 8, Some(9.0 / 8.0)),
            (Collective::AllReduce, Algo::Nvls, 3, Some(4.0 / 3.0)),
            (Collective::AllGather, Algo::Nvls, 8, None),
            (Collective::AllGather, Algo::Tree, 8, None),
            (Collective::AllReduce, Algo::NvlsTree, 16, None),
            (Collective::AllReduce, Algo::CollnetDirect, 16, None),
            (Collective::AllReduce, Algo::CollnetChain, 16, None),
            (Collective::ReduceScatter, Algo::Pat, 4, None),
            (Collective::AllToAll, Algo::Ring, 4, None),
            (Collective::AllReduce, Algo::Ring, 1, None),
        ];
        for (c, a, n, want) in cases {
            let got = algo_bus_factor(c, a, n);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-12, "{c} {a} {n}: {g} != {w}"),
                _ => assert_eq!(got, want, "{c} {a} {n}"),
            }
        }
    }

    #[test]
    fn which_collectives_each_algorithm_runs() {
        let runs = |a: Algo| -> Vec<&str> {
            Collective::ALL
                .iter()
                .filter(|&&c| algo_runs(c, a))
                .map(|c| c.name())
                .collect()
        };
        assert_eq!(
            runs(Algo::Ring),
            ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce"]
        );
        assert_eq!(runs(Algo::Tree), ["all_reduce"]);
        assert_eq!(runs(Algo::NvlsTree), ["all_reduce"]);
        assert_eq!(runs(Algo::CollnetChain), ["all_reduce"]);
        assert_eq!(runs(Algo::Nvls), ["all_reduce", "all_gather", "reduce_scatter"]);
        assert_eq!(runs(Algo::Pat), ["all_gather", "reduce_scatter"]);
        let tuned: Vec<&str> = Collective::ALL
            .iter()
            .filter(|&&c| nccl_tunes(c))
            .map(|c| c.name())
            .collect();
        assert_eq!(tuned, runs(Algo::Ring));
    }

    /// On 8 GPUs with NVLS, nccl-tests' Ring factor overstates what each
    /// GPU moved by 2(n-1)/(n+1) = 14/9: the "480 GB/s on a 450 GB/s
    /// NVLink" of nccl-tests issues #212 and #312.
    #[test]
    fn nvls_on_eight_gpus_is_ring_busbw_times_nine_fourteenths() {
        let ring = Collective::AllReduce.spec().bus_factor(8);
        let nvls = algo_bus_factor(Collective::AllReduce, Algo::Nvls, 8).unwrap();
        assert!((ring / nvls - 14.0 / 9.0).abs() < 1e-12);
        assert!((480.0 * nvls / ring - 308.57).abs() < 0.01);
    }
}
