//! Pinned sweeps on NCCL (`--algo`, `--proto`, docs/algorithms.md): a
//! pin's NCCL_ALGO and NCCL_PROTO in the syntax of the release found, and
//! a communicator of every rank made while they are set.
//!
//! NCCL reads both when a communicator is made, ncclCommSplit's included
//! (src/graph/tuning.cc). Up to 2.23 a value is a comma list that applies
//! to every function, and a name the release does not know is ignored
//! without a word; from 2.24.3 it is `Function:list;Function:list`, and
//! an unknown name is refused. So a pin names the functions it runs from
//! 2.24.3, and an algorithm is refused before the release that knows it
//! rather than silently not pinned; an algorithm whose kernels have the
//! Simple protocol only (NVLS, NVLS_TREE, CollNet, PAT) is refused with
//! another protocol, which NCCL would fail at the first collective.

use super::NcclBackend;
use super::sys::{NcclVersion, with_nccl_variables};
use crate::backend::{Pins, SubGroup, SubGroups};
use crate::collective::{Collective, algo_runs, nccl_tunes};
use crate::error::Error;
use crate::types::{Algo, AlgoPin, Proto};

/// The first release that reads `Function:list` (and refuses unknown
/// names).
const PER_FUNCTION_SINCE: NcclVersion = NcclVersion::new(2, 24, 3);

/// NCCL's name of an algorithm in NCCL_ALGO, and the first release that
/// knows it.
fn nccl_algo(a: Algo) -> (&'static str, NcclVersion) {
    match a {
        Algo::Tree => ("Tree", NcclVersion::new(2, 4, 0)),
        Algo::Ring => ("Ring", NcclVersion::new(2, 0, 0)),
        Algo::CollnetDirect => ("CollNetDirect", NcclVersion::new(2, 14, 3)),
        Algo::CollnetChain => ("CollNetChain", NcclVersion::new(2, 14, 3)),
        Algo::Nvls => ("NVLS", NcclVersion::new(2, 17, 1)),
        Algo::NvlsTree => ("NVLSTree", NcclVersion::new(2, 18, 1)),
        Algo::Pat => ("PAT", NcclVersion::new(2, 23, 4)),
    }
}

fn nccl_proto(p: Proto) -> &'static str {
    match p {
        Proto::Ll => "LL",
        Proto::Ll128 => "LL128",
        Proto::Simple => "Simple",
    }
}

/// NCCL's name of a function in a `Function:list` entry.
fn nccl_function(c: Collective) -> &'static str {
    match c {
        Collective::AllReduce => "AllReduce",
        Collective::AllGather => "AllGather",
        Collective::ReduceScatter => "ReduceScatter",
        Collective::Broadcast => "Broadcast",
        _ => "Reduce",
    }
}

/// The variables of `pin` on `collectives` (the plan's, in order) for
/// NCCL `version`: NCCL_ALGO for the functions the algorithm runs, and
/// NCCL_PROTO; or why not.
pub(super) fn pin_variables(
    pin: AlgoPin,
    collectives: &[Collective],
    version: NcclVersion,
) -> Result<Vec<(&'static str, String)>, String> {
    let mut vars = Vec::new();
    let tuned: Vec<Collective> = collectives.iter().copied().filter(|&c| nccl_tunes(c)).collect();
    if tuned.is_empty() {
        return Err(format!(
            "--algo/--proto {pin}: none of the collectives asked is one NCCL tunes (all_reduce, all_gather, \
             reduce_scatter, broadcast, reduce)"
        ));
    }
    if let Some(a) = pin.algo {
        let (name, since) = nccl_algo(a);
        if version < since {
            return Err(format!(
                "--algo {a}: NCCL {version} does not know {name} (NCCL {since} and later do) and would ignore the pin"
            ));
        }
        if let Some(p) = pin
            .proto
            .filter(|&p| p != Proto::Simple && !matches!(a, Algo::Ring | Algo::Tree))
        {
            return Err(format!(
                "--algo {a} --proto {p}: NCCL runs {name} with the Simple protocol only"
            ));
        }
        let runs: Vec<Collective> = tuned.iter().copied().filter(|&c| algo_runs(c, a)).collect();
        if runs.is_empty() {
            let names: Vec<&str> = tuned.iter().map(|c| c.name()).collect();
            return Err(format!("--algo {a}: NCCL has no {name} for {}", names.join(", ")));
        }
        let value = if version < PER_FUNCTION_SINCE {
            name.to_string()
        } else {
            let entries: Vec<String> = runs.iter().map(|&c| format!("{}:{name}", nccl_function(c))).collect();
            entries.join(";")
        };
        vars.push(("NCCL_ALGO", value));
    }
    if let Some(p) = pin.proto {
        vars.push(("NCCL_PROTO", nccl_proto(p).to_string()));
    }
    Ok(vars)
}

impl Pins for NcclBackend {
    fn pin_variables(&self, pin: AlgoPin, collectives: &[Collective]) -> Result<Vec<(&'static str, String)>, String> {
        pin_variables(pin, collectives, self.library.version())
    }

    fn pinned_group(
        &mut self,
        vars: &[(&'static str, String)],
        set_here: bool,
        barrier: &dyn Fn(),
    ) -> Result<SubGroup, Error> {
        let rank = match self.comm()?.user_rank() {
            Ok(r) => usize::try_from(r).unwrap_or(0),
            Err(e) => return self.fail(e),
        };
        with_nccl_variables(vars, set_here, barrier, || self.split(0, rank))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pin: &str, collectives: &[Collective], version: (u32, u32, u32)) -> Result<Vec<String>, String> {
        let v = NcclVersion::new(version.0, version.1, version.2);
        pin_variables(AlgoPin::parse(pin).unwrap(), collectives, v)
            .map(|vars| vars.into_iter().map(|(k, v)| format!("{k}={v}")).collect())
    }

    const FIVE: [Collective; 6] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::SendRecv,
    ];

    /// Per function from 2.24.3, naming only what the algorithm runs; a
    /// global list before; the protocol global in both.
    #[test]
    fn each_release_gets_its_own_syntax() {
        assert_eq!(
            vars("ring", &FIVE, (2, 24, 3)).unwrap(),
            ["NCCL_ALGO=AllReduce:Ring;AllGather:Ring;ReduceScatter:Ring;Broadcast:Ring;Reduce:Ring"]
        );
        assert_eq!(
            vars("tree/ll", &FIVE, (2, 30, 7)).unwrap(),
            ["NCCL_ALGO=AllReduce:Tree", "NCCL_PROTO=LL"]
        );
        assert_eq!(
            vars("tree/ll", &FIVE, (2, 23, 4)).unwrap(),
            ["NCCL_ALGO=Tree", "NCCL_PROTO=LL"]
        );
        assert_eq!(vars("ll128", &FIVE, (2, 20, 3)).unwrap(), ["NCCL_PROTO=LL128"]);
        assert_eq!(
            vars("pat", &FIVE, (2, 27, 3)).unwrap(),
            ["NCCL_ALGO=AllGather:PAT;ReduceScatter:PAT"]
        );
    }

    /// A name the release would ignore, a protocol the algorithm lacks,
    /// collectives the algorithm does not run: refused, naming why.
    #[test]
    fn what_nccl_would_ignore_or_fail_is_refused() {
        let e = vars("pat", &FIVE, (2, 22, 3)).unwrap_err();
        assert!(
            e.contains("NCCL 2.22.3 does not know PAT (NCCL 2.23.4 and later do)"),
            "{e}"
        );
        let e = vars("nvls/ll", &FIVE, (2, 27, 3)).unwrap_err();
        assert!(e.contains("NVLS with the Simple protocol only"), "{e}");
        let e = vars("tree", &[Collective::AllGather, Collective::Broadcast], (2, 27, 3)).unwrap_err();
        assert!(e.contains("NCCL has no Tree for all_gather, broadcast"), "{e}");
        let e = vars("ring", &[Collective::SendRecv, Collective::AllToAll], (2, 27, 3)).unwrap_err();
        assert!(e.contains("none of the collectives asked is one NCCL tunes"), "{e}");
        assert!(vars("nvls/simple", &FIVE, (2, 27, 3)).is_ok());
    }
}
