//! The single-process control plane (`-g N`): one thread per rank, all in
//! this process, as nccl-tests' `-g`/`-t` modes. No MPI is needed at run
//! time, so a single-node GPU user can run without a launcher, and a build
//! without the `mpi` feature can run at all.
//!
//! Every cross-rank operation is a rendezvous of all threads on a shared
//! slot table: each rank writes its slot, all wait, all read, all wait
//! again (so that nobody overwrites a slot another rank still reads).

use std::sync::{Arc, Barrier, Mutex, PoisonError};

use super::{RankInfo, World};
use crate::topology::Nodes;

struct Shared {
    barrier: Barrier,
    u64s: Mutex<Vec<u64>>,
    f64s: Mutex<Vec<f64>>,
    bytes: Mutex<Vec<u8>>,
    /// One byte string per rank, for the exchanges of any length.
    slots: Mutex<Vec<Vec<u8>>>,
    ranks: Vec<RankInfo>,
    /// One host: one node.
    nodes: Nodes,
}

/// One rank of a single-process world; each thread owns one.
pub struct ThreadWorld {
    rank: usize,
    shared: Arc<Shared>,
}

impl ThreadWorld {
    /// The `n` ranks of a new world, to be handed one to each thread.
    pub fn create(n: usize) -> Vec<ThreadWorld> {
        let n = n.max(1);
        let host = super::hostname();
        let pid = std::process::id();
        let shared = Arc::new(Shared {
            barrier: Barrier::new(n),
            u64s: Mutex::new(vec![0; n]),
            f64s: Mutex::new(vec![0.0; n]),
            bytes: Mutex::new(Vec::new()),
            slots: Mutex::new(vec![Vec::new(); n]),
            nodes: Nodes::from_keys(&vec![host.clone(); n], &vec![host.clone(); n]),
            ranks: (0..n)
                .map(|rank| RankInfo {
                    rank,
                    host: host.clone(),
                    pid,
                })
                .collect(),
        });
        (0..n)
            .map(|rank| ThreadWorld {
                rank,
                shared: Arc::clone(&shared),
            })
            .collect()
    }

    /// Every rank's bytes, in rank order, known to every rank.
    fn exchange(&self, mine: Vec<u8>) -> Vec<Vec<u8>> {
        self.shared.slots.lock().unwrap_or_else(PoisonError::into_inner)[self.rank] = mine;
        self.shared.barrier.wait();
        let all = self.shared.slots.lock().unwrap_or_else(PoisonError::into_inner).clone();
        self.shared.barrier.wait();
        all
    }

    /// Every rank's `value`, combined with `f`, known to every rank.
    fn all_reduce(&self, value: u64, f: impl Fn(u64, u64) -> u64) -> u64 {
        // A poisoned lock means another rank panicked, and the panic hook
        // ends the process; the data itself is still valid.
        self.shared.u64s.lock().unwrap_or_else(PoisonError::into_inner)[self.rank] = value;
        self.shared.barrier.wait();
        let result = {
            let slots = self.shared.u64s.lock().unwrap_or_else(PoisonError::into_inner);
            slots.iter().copied().reduce(&f).unwrap_or(value)
        };
        self.shared.barrier.wait();
        result
    }
}

impl World for ThreadWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.ranks.len()
    }

    fn host(&self) -> &str {
        &self.shared.ranks[self.rank].host
    }

    fn ranks(&self) -> &[RankInfo] {
        &self.shared.ranks
    }

    fn library_version(&self) -> String {
        format!("threads ({} in one process)", self.size())
    }

    fn barrier(&self) {
        self.shared.barrier.wait();
    }

    fn sum_u64(&self, value: u64) -> u64 {
        self.all_reduce(value, u64::wrapping_add)
    }

    fn max_u64(&self, value: u64) -> u64 {
        self.all_reduce(value, u64::max)
    }

    fn min_u64(&self, value: u64) -> u64 {
        self.all_reduce(value, u64::min)
    }

    fn gather_f64(&self, value: f64) -> Option<Vec<f64>> {
        self.shared.f64s.lock().unwrap_or_else(PoisonError::into_inner)[self.rank] = value;
        self.shared.barrier.wait();
        let all = (self.rank == 0).then(|| self.shared.f64s.lock().unwrap_or_else(PoisonError::into_inner).clone());
        self.shared.barrier.wait();
        all
    }

    fn broadcast_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        if self.rank == 0 {
            *self.shared.bytes.lock().unwrap_or_else(PoisonError::into_inner) = bytes.to_vec();
        }
        self.shared.barrier.wait();
        let out = self.shared.bytes.lock().unwrap_or_else(PoisonError::into_inner).clone();
        self.shared.barrier.wait();
        out
    }

    fn all_gather_u64s(&self, values: &[u64]) -> Vec<u64> {
        let mine = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = self.exchange(mine);
        all.iter()
            .flat_map(|b| {
                b.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
            })
            .collect()
    }

    fn all_gather_text(&self, text: &str, max_bytes: usize) -> Vec<String> {
        let all = self.exchange(super::cut_text(text, max_bytes).as_bytes().to_vec());
        all.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect()
    }

    fn gather_text_to_root(&self, text: &str, max_bytes: usize) -> Option<Vec<String>> {
        // the threads share one memory: every rank's text is there already
        let all = self.all_gather_text(text, max_bytes);
        (self.rank == 0).then_some(all)
    }

    fn max_f64s_to_root(&self, values: &[f64]) -> Option<Vec<f64>> {
        let mine = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let all = self.exchange(mine);
        (self.rank == 0).then(|| {
            let decode = |b: &Vec<u8>| -> Vec<f64> {
                b.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                    .collect()
            };
            all.iter()
                .map(decode)
                .fold(vec![f64::NEG_INFINITY; values.len()], |acc, v| {
                    acc.iter().zip(v).map(|(a, b)| a.max(b)).collect()
                })
        })
    }

    fn nodes(&self) -> &Nodes {
        &self.shared.nodes
    }

    fn abort(&self, code: u8) -> ! {
        // Every rank is a thread of this process: ending it ends the job.
        std::process::exit(i32::from(code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_all<T: Send>(n: usize, f: impl Fn(&ThreadWorld) -> T + Sync) -> Vec<T> {
        let worlds = ThreadWorld::create(n);
        std::thread::scope(|s| {
            let handles: Vec<_> = worlds.iter().map(|w| s.spawn(|| f(w))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn reductions_gather_and_broadcast_reach_every_thread() {
        let n = 4;
        let out = on_all(n, |w| {
            let r = w.rank() as u64;
            let sum = w.sum_u64(r + 1);
            let max = w.max_u64(r * 10);
            let min = w.min_u64(r + 5);
            let gathered = w.gather_f64(r as f64 * 0.5);
            let bytes = w.broadcast_bytes(if w.rank() == 0 { b"id-from-rank-0" } else { b"" });
            (sum, max, min, gathered, bytes)
        });
        for (rank, (sum, max, min, gathered, bytes)) in out.into_iter().enumerate() {
            assert_eq!((sum, max, min), (10, 30, 5));
            assert_eq!(gathered, (rank == 0).then(|| vec![0.0, 0.5, 1.0, 1.5]));
            assert_eq!(bytes, b"id-from-rank-0");
        }
    }

    #[test]
    fn agreement_works_across_threads() {
        let out = on_all(3, |w| {
            let local: Result<usize, crate::error::Error> = if w.rank() == 2 {
                Err(crate::error::Error::runtime("rank 2 has no GPU"))
            } else {
                Ok(w.rank())
            };
            w.agree(local).map_err(|d| d.code)
        });
        assert!(out.iter().all(|r| *r == Err(1)), "{out:?}");
        let worlds = ThreadWorld::create(3);
        let nodes = worlds[0].nodes();
        assert_eq!((nodes.nnodes(), nodes.local_size(0)), (1, 3));
    }

    #[test]
    fn exchanges_of_any_length_reach_every_thread() {
        let out = on_all(3, |w| {
            let r = w.rank() as u64;
            let gathered = w.all_gather_u64s(&[r, r * 100]);
            let texts = w.all_gather_text(&format!("rank-{r}-é"), 7);
            let maxima = w.max_f64s_to_root(&[r as f64, -(r as f64)]);
            (gathered, texts, maxima)
        });
        for (rank, (gathered, texts, maxima)) in out.into_iter().enumerate() {
            assert_eq!(gathered, vec![0, 0, 1, 100, 2, 200]);
            assert_eq!(texts, vec!["rank-0-", "rank-1-", "rank-2-"]);
            assert_eq!(maxima, (rank == 0).then(|| vec![2.0, 0.0]));
        }
    }
}
