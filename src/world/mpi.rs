//! The MPI control plane (rsmpi): initialisation, rank identities, and the
//! small reductions the engine needs, on a duplicate of MPI_COMM_WORLD so
//! that control messages never mix with measured traffic.

use mpi::collective::SystemOperation;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::*;

use super::{RankInfo, World};
use crate::error::Error;
use crate::topology::Nodes;

/// Longest hostname exchanged between ranks (POSIX HOST_NAME_MAX is 255).
const HOST_BYTES: usize = 256;
/// What each rank sends at start-up: its host name (NUL-padded), its pid
/// (u32) and its node's lowest world rank (u64), little-endian.
const RANK_BYTES: usize = HOST_BYTES + 4 + 8;

/// Every rank's identity and node key from the start-up exchange (rank
/// order, `RANK_BYTES` each).
fn decode_ranks(all: &[u8]) -> (Vec<RankInfo>, Vec<u64>) {
    all.chunks(RANK_BYTES)
        .enumerate()
        .map(|(rank, one)| {
            let name = &one[..HOST_BYTES];
            let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
            let mut pid = [0u8; 4];
            pid.copy_from_slice(&one[HOST_BYTES..HOST_BYTES + 4]);
            let mut leader = [0u8; 8];
            leader.copy_from_slice(&one[HOST_BYTES + 4..RANK_BYTES]);
            let info = RankInfo {
                rank,
                host: String::from_utf8_lossy(&name[..end]).into_owned(),
                pid: u32::from_le_bytes(pid),
            };
            (info, u64::from_le_bytes(leader))
        })
        .unzip()
}

pub struct MpiWorld {
    // Field order matters: the communicator is freed before MPI_Finalize,
    // which runs when the universe drops.
    comm: SimpleCommunicator,
    rank: usize,
    host: String,
    ranks: Vec<RankInfo>,
    nodes: Nodes,
    /// The launcher, for the header ("mpirun", "srun --mpi=pmix").
    launcher: Option<String>,
    _universe: mpi::environment::Universe,
}

impl MpiWorld {
    pub fn init() -> Result<MpiWorld, Error> {
        let universe = mpi::initialize().ok_or_else(|| Error::runtime("MPI was initialised twice in one process"))?;
        let comm = universe.world().duplicate();
        let rank = comm.rank() as usize;
        let size = comm.size() as usize;
        let host = super::hostname();

        // A node is a shared-memory domain (MPI_Comm_split_type), named by
        // its lowest world rank: the split orders a node's ranks by world
        // rank (the key), so that is its rank 0, translated locally.
        let shared = comm.split_shared(rank as i32);
        let leader = shared.group().translate_rank(0, &comm.group()).unwrap_or(rank as i32) as u64;
        drop(shared);

        // One exchange at start-up: each rank's host name, pid and node.
        let mut mine = [0u8; RANK_BYTES];
        let n = host.len().min(HOST_BYTES);
        mine[..n].copy_from_slice(&host.as_bytes()[..n]);
        mine[HOST_BYTES..HOST_BYTES + 4].copy_from_slice(&std::process::id().to_le_bytes());
        mine[HOST_BYTES + 4..].copy_from_slice(&leader.to_le_bytes());
        let mut all = vec![0u8; RANK_BYTES * size];
        comm.all_gather_into(&mine[..], &mut all[..]);

        let (ranks, leaders) = decode_ranks(&all);
        let hosts: Vec<String> = ranks.iter().map(|r| r.host.clone()).collect();
        let nodes = Nodes::from_keys(&leaders, &hosts);

        Ok(MpiWorld {
            comm,
            rank,
            host,
            ranks,
            nodes,
            launcher: None,
            _universe: universe,
        })
    }

    /// Names the launcher in `library_version` (the header's control plane).
    pub fn launched_by(mut self, how: &str) -> MpiWorld {
        self.launcher = Some(how.to_string());
        self
    }

    /// A fresh communicator over the same ranks, for a data plane.
    pub fn data_communicator(&self) -> SimpleCommunicator {
        self.comm.duplicate()
    }
}

impl World for MpiWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.ranks.len()
    }

    fn host(&self) -> &str {
        &self.host
    }

    fn ranks(&self) -> &[RankInfo] {
        &self.ranks
    }

    fn library_version(&self) -> String {
        match &self.launcher {
            Some(how) => format!("{}, launcher {how}", mpi_library_version()),
            None => mpi_library_version(),
        }
    }

    fn barrier(&self) {
        self.comm.barrier();
    }

    fn sum_u64(&self, value: u64) -> u64 {
        let mut out = 0u64;
        self.comm.all_reduce_into(&value, &mut out, SystemOperation::sum());
        out
    }

    fn max_u64(&self, value: u64) -> u64 {
        let mut out = 0u64;
        self.comm.all_reduce_into(&value, &mut out, SystemOperation::max());
        out
    }

    fn min_u64(&self, value: u64) -> u64 {
        let mut out = 0u64;
        self.comm.all_reduce_into(&value, &mut out, SystemOperation::min());
        out
    }

    fn gather_f64(&self, value: f64) -> Option<Vec<f64>> {
        let root = self.comm.process_at_rank(0);
        if self.rank == 0 {
            let mut all = vec![0f64; self.size()];
            root.gather_into_root(&value, &mut all[..]);
            Some(all)
        } else {
            root.gather_into(&value);
            None
        }
    }

    fn max_f64s_to_root(&self, values: &[f64]) -> Option<Vec<f64>> {
        let root = self.comm.process_at_rank(0);
        if self.rank == 0 {
            let mut out = vec![0f64; values.len()];
            root.reduce_into_root(values, &mut out[..], SystemOperation::max());
            Some(out)
        } else {
            root.reduce_into(values, SystemOperation::max());
            None
        }
    }

    fn broadcast_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let root = self.comm.process_at_rank(0);
        let mut len = bytes.len() as u64;
        root.broadcast_into(&mut len);
        let mut buf = if self.rank == 0 {
            bytes.to_vec()
        } else {
            vec![0u8; len as usize]
        };
        root.broadcast_into(&mut buf[..]);
        buf
    }

    fn nodes(&self) -> &Nodes {
        &self.nodes
    }

    fn all_gather_u64s(&self, values: &[u64]) -> Vec<u64> {
        let mut all = vec![0u64; values.len() * self.size()];
        self.comm.all_gather_into(values, &mut all[..]);
        all
    }

    fn all_gather_text(&self, text: &str, max_bytes: usize) -> Vec<String> {
        let mut mine = vec![0u8; max_bytes];
        let n = text.len().min(max_bytes);
        mine[..n].copy_from_slice(&text.as_bytes()[..n]);
        let mut all = vec![0u8; max_bytes * self.size()];
        self.comm.all_gather_into(&mine[..], &mut all[..]);
        all.chunks(max_bytes.max(1))
            .map(|c| {
                let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                String::from_utf8_lossy(&c[..end]).into_owned()
            })
            .collect()
    }

    fn gather_text_to_root(&self, text: &str, max_bytes: usize) -> Option<Vec<String>> {
        let mine = super::cut_text(text, max_bytes).as_bytes();
        let len = mine.len() as u64;
        let root = self.comm.process_at_rank(0);
        if self.rank != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(mine);
            return None;
        }
        let mut lens = vec![0u64; self.size()];
        root.gather_into_root(&len, &mut lens[..]);
        // MPI counts are C ints: each part is at most `max_bytes`
        let counts: Vec<i32> = lens.iter().map(|&n| i32::try_from(n).unwrap_or(i32::MAX)).collect();
        let displs: Vec<i32> = counts
            .iter()
            .scan(0i32, |at, &n| {
                let here = *at;
                *at = at.saturating_add(n);
                Some(here)
            })
            .collect();
        let total = counts.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        let mut parts = mpi::datatype::PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
        root.gather_varcount_into_root(mine, &mut parts);
        let texts = counts
            .iter()
            .zip(&displs)
            .map(|(&n, &at)| String::from_utf8_lossy(&all[at as usize..(at + n) as usize]).into_owned())
            .collect();
        Some(texts)
    }

    fn abort(&self, code: u8) -> ! {
        self.comm.abort(i32::from(code))
    }
}

/// "Open MPI v4.1.4", "MPICH Version: 4.1", ...: the first clause of
/// MPI_Get_library_version, whitespace collapsed.
pub fn mpi_library_version() -> String {
    let full = mpi::environment::library_version().unwrap_or_default();
    let first = full.split([',', '\n']).next().unwrap_or("").trim();
    let text = first.split_whitespace().collect::<Vec<_>>().join(" ");
    if text.is_empty() {
        let (major, minor) = mpi::environment::version();
        format!("MPI {major}.{minor}")
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_start_up_exchange_gives_each_ranks_host_pid_and_node() {
        let mut all = vec![0u8; 2 * RANK_BYTES];
        for (rank, (host, pid, leader)) in [("node-a", 41u32, 0u64), ("node-b", 7, 1)].iter().enumerate() {
            let one = &mut all[rank * RANK_BYTES..(rank + 1) * RANK_BYTES];
            one[..host.len()].copy_from_slice(host.as_bytes());
            one[HOST_BYTES..HOST_BYTES + 4].copy_from_slice(&pid.to_le_bytes());
            one[HOST_BYTES + 4..].copy_from_slice(&leader.to_le_bytes());
        }
        let (ranks, leaders) = decode_ranks(&all);
        assert_eq!(leaders, [0, 1]);
        assert_eq!((ranks[1].rank, ranks[1].host.as_str(), ranks[1].pid), (1, "node-b", 7));
        assert_eq!((ranks[0].host.as_str(), ranks[0].pid), ("node-a", 41));
    }
}
