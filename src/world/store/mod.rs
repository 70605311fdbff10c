//! The MPI-free control plane: a small TCP store on rank 0 (docs/launch.md).
//! Ranks started by Slurm without MPI, torchrun or a Kubernetes Indexed
//! Job find rank 0 from their environment (`world::launch`), announce
//! themselves with the job's token, and every cross-rank operation of
//! `World` is one exchange through rank 0: each rank sends its part, rank 0
//! answers once every part is in (with every part, rank 0's, or nothing).
//!
//! The start has a deadline (`--timeout`) that names the ranks that never
//! came. Later, a rank that aborts (a failure it printed, its watchdog)
//! tells rank 0, which ends every rank with that code; a rank that
//! vanishes is named by rank 0 in one line, and the job ends; when rank 0
//! vanishes, rank 1 says so. Printing here is limited to those lines: what
//! fails is said once, by the rank that saw it.
//!
//! Carries no data-plane traffic: it exchanges NCCL's unique id, the
//! agreement steps, barriers, and the times and counts rank 0 gathers.

#[cfg(test)]
mod bench;
mod hub;
mod probe;
mod spoke;
mod tree;
mod wire;

use std::time::{Duration, Instant};

use super::launch::StoreLaunch;
use super::{RankInfo, World};
use crate::error::{Error, say};
use crate::topology::Nodes;

/// What the other ranks get back from an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reply {
    /// Every rank's part.
    All,
    /// Rank 0's part.
    Root,
    /// Nothing but the signal that every rank arrived (rank 0 has every
    /// part).
    Nothing,
}

/// When the start gives up; `None` waits for ever (`--timeout 0`).
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Option<Instant>,
    limit: Option<Duration>,
}

impl Deadline {
    pub fn after(limit: Option<Duration>) -> Deadline {
        Deadline {
            at: limit.map(|l| Instant::now() + l),
            limit,
        }
    }

    fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    fn remaining(&self) -> Option<Duration> {
        self.at.map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// The limit in seconds, for messages.
    fn seconds(&self) -> String {
        match self.limit {
            Some(l) => format!("{}", l.as_secs_f64()),
            None => "unlimited".into(),
        }
    }
}

/// Prints `line` and gives the exit code to return with.
fn fail(code: u8, line: String) -> Error {
    say(&line);
    Error::Reported(code)
}

/// "rank 3", "ranks 2-3, 7".
pub(crate) fn ranges(word: &str, ranks: &[usize]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < ranks.len() {
        let mut j = i;
        while j + 1 < ranks.len() && ranks[j + 1] == ranks[j] + 1 {
            j += 1;
        }
        parts.push(if i == j {
            ranks[i].to_string()
        } else {
            format!("{}-{}", ranks[i], ranks[j])
        });
        i = j + 1;
    }
    let plural = ranks.len() != 1;
    format!("{word}{} {}", if plural { "s" } else { "" }, parts.join(", "))
}

enum Link {
    /// One rank alone: nothing to exchange.
    Alone,
    Hub(hub::Hub),
    Spoke(spoke::Spoke),
}

/// One rank of a job whose control plane is the store.
pub struct StoreWorld {
    rank: usize,
    ranks: Vec<RankInfo>,
    nodes: Nodes,
    /// The store's address and the launcher, for the header.
    description: String,
    link: Link,
}

impl StoreWorld {
    /// Joins the job `launch` describes (rank 0 opens the store), waiting
    /// at most `timeout` for every rank. Every failure has been printed
    /// (`Error::Reported`, with its exit code: 5 when ranks never came, 2
    /// when they disagree on the job).
    pub fn start(launch: &StoreLaunch, timeout: Option<Duration>) -> Result<StoreWorld, Error> {
        StoreWorld::start_fanout(launch, timeout, tree::FANOUT)
    }

    /// `start`, with answers down a `fanout`-ary release tree (`fanout` n -
    /// 1: rank 0 answers every rank itself).
    fn start_fanout(launch: &StoreLaunch, timeout: Option<Duration>, fanout: usize) -> Result<StoreWorld, Error> {
        let me = wire::Hello {
            token: launch.token.clone(),
            rank: launch.rank as u32,
            size: launch.size as u32,
            local_rank: launch.local_rank.map_or(u32::MAX, |l| l as u32),
            host: super::hostname(),
            pid: std::process::id(),
            relay_port: 0,
        };
        let deadline = Deadline::after(timeout);
        let (ranks, link) = if launch.size == 1 {
            let alone = vec![RankInfo {
                rank: 0,
                host: me.host.clone(),
                pid: me.pid,
            }];
            (alone, Link::Alone)
        } else if launch.rank == 0 {
            let (ranks, hub) = hub::rendezvous(launch, &me, deadline, fanout)?;
            let shared = std::sync::Arc::clone(&hub.shared);
            super::set_exit_hook(Some(Box::new(move |code| shared.abort_all(code))));
            (ranks, Link::Hub(hub))
        } else {
            let (ranks, spoke) = spoke::join(launch, &me, deadline, fanout)?;
            let shared = std::sync::Arc::clone(&spoke.shared);
            super::set_exit_hook(Some(Box::new(move |code| shared.abort(code))));
            (ranks, Link::Spoke(spoke))
        };
        let hosts: Vec<String> = ranks.iter().map(|r| r.host.clone()).collect();
        Ok(StoreWorld {
            rank: launch.rank,
            nodes: Nodes::from_keys(&hosts, &hosts),
            ranks,
            description: format!("TCP store at {}, launcher {}", launch.address(), launch.launcher.name()),
            link,
        })
    }

    /// One exchange: every rank's part on rank 0; on the others, what
    /// `reply` says (`All`: every part; `Root`: rank 0's first, the rest
    /// empty; `Nothing`: none).
    fn exchange(&self, mine: Vec<u8>, reply: Reply) -> Vec<Vec<u8>> {
        match &self.link {
            Link::Alone => vec![mine],
            Link::Hub(hub) => hub.exchange(mine, reply),
            Link::Spoke(spoke) => {
                let answer = spoke.exchange(mine);
                match reply {
                    Reply::All => wire::split(&answer).unwrap_or_default(),
                    Reply::Root => {
                        let mut parts = vec![Vec::new(); self.size()];
                        parts[0] = answer;
                        parts
                    }
                    Reply::Nothing => Vec::new(),
                }
            }
        }
    }

    fn u64s(&self, value: u64) -> Vec<u64> {
        self.exchange(value.to_le_bytes().to_vec(), Reply::All)
            .iter()
            .map(|b| decode_u64s(b).first().copied().unwrap_or(value))
            .collect()
    }
}

fn decode_u64s(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

fn decode_f64s(bytes: &[u8]) -> Vec<f64> {
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
        .collect()
}

fn encode_f64s(values: &[f64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

impl World for StoreWorld {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.ranks.len()
    }

    fn host(&self) -> &str {
        &self.ranks[self.rank].host
    }

    fn ranks(&self) -> &[RankInfo] {
        &self.ranks
    }

    fn library_version(&self) -> String {
        self.description.clone()
    }

    fn barrier(&self) {
        self.exchange(Vec::new(), Reply::Nothing);
    }

    fn sum_u64(&self, value: u64) -> u64 {
        self.u64s(value).into_iter().fold(0, u64::wrapping_add)
    }

    fn max_u64(&self, value: u64) -> u64 {
        self.u64s(value).into_iter().max().unwrap_or(value)
    }

    fn min_u64(&self, value: u64) -> u64 {
        self.u64s(value).into_iter().min().unwrap_or(value)
    }

    fn gather_f64(&self, value: f64) -> Option<Vec<f64>> {
        let parts = self.exchange(value.to_le_bytes().to_vec(), Reply::Nothing);
        (self.rank == 0).then(|| {
            parts
                .iter()
                .map(|b| decode_f64s(b).first().copied().unwrap_or(f64::NAN))
                .collect()
        })
    }

    fn max_f64s_to_root(&self, values: &[f64]) -> Option<Vec<f64>> {
        let parts = self.exchange(encode_f64s(values), Reply::Nothing);
        (self.rank == 0).then(|| {
            parts
                .iter()
                .map(|b| decode_f64s(b))
                .fold(vec![f64::NEG_INFINITY; values.len()], |acc, v| {
                    acc.iter().zip(v).map(|(a, b)| a.max(b)).collect()
                })
        })
    }

    fn broadcast_bytes(&self, bytes: &[u8]) -> Vec<u8> {
        let mine = if self.rank == 0 { bytes.to_vec() } else { Vec::new() };
        self.exchange(mine, Reply::Root).into_iter().next().unwrap_or_default()
    }

    fn all_gather_u64s(&self, values: &[u64]) -> Vec<u64> {
        let mine = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.exchange(mine, Reply::All)
            .iter()
            .flat_map(|b| decode_u64s(b))
            .collect()
    }

    fn all_gather_text(&self, text: &str, max_bytes: usize) -> Vec<String> {
        let bytes = crate::world::cut_text(text, max_bytes).as_bytes().to_vec();
        self.exchange(bytes, Reply::All)
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect()
    }

    fn gather_text_to_root(&self, text: &str, max_bytes: usize) -> Option<Vec<String>> {
        let bytes = crate::world::cut_text(text, max_bytes).as_bytes().to_vec();
        let parts = self.exchange(bytes, Reply::Nothing);
        (self.rank == 0).then(|| parts.iter().map(|b| String::from_utf8_lossy(b).into_owned()).collect())
    }

    fn abort(&self, code: u8) -> ! {
        match &self.link {
            Link::Alone => {}
            Link::Hub(hub) => hub.shared.abort_all(code),
            Link::Spoke(spoke) => spoke.shared.abort(code),
        }
        super::set_exit_hook(None);
        std::process::exit(i32::from(code))
    }

    fn nodes(&self) -> &Nodes {
        &self.nodes
    }
}

impl Drop for StoreWorld {
    /// Leaves in order: rank 0 waits until every rank has left.
    fn drop(&mut self) {
        super::set_exit_hook(None);
        match &self.link {
            Link::Alone => {}
            Link::Hub(hub) => hub.finish(),
            Link::Spoke(spoke) => spoke.finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::launch::StoreLauncher;

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .unwrap()
    }

    /// Rank `rank` of `size` of a job whose store is on this host at `port`.
    pub(super) fn launch(rank: usize, size: usize, port: u16, token: &str) -> StoreLaunch {
        StoreLaunch {
            launcher: StoreLauncher::Torchrun,
            rank,
            size,
            local_rank: None,
            host: "127.0.0.1".into(),
            port,
            token: token.into(),
            origin: "the test".into(),
        }
    }

    /// `f` on every rank of a store world of `n` ranks, each a thread.
    fn on_all<T: Send>(n: usize, f: impl Fn(&StoreWorld) -> T + Sync) -> Vec<T> {
        on_tree(n, tree::FANOUT, f)
    }

    /// `on_all`, the answers down a `k`-ary release tree.
    fn on_tree<T: Send>(n: usize, k: usize, f: impl Fn(&StoreWorld) -> T + Sync) -> Vec<T> {
        let port = free_port();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .map(|rank| {
                    let f = &f;
                    s.spawn(move || {
                        let limit = Some(Duration::from_secs(30));
                        let world = StoreWorld::start_fanout(&launch(rank, n, port, "t"), limit, k)
                            .unwrap_or_else(|e| panic!("rank {rank}: {e}"));
                        f(&world)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    #[test]
    fn reductions_gathers_and_broadcasts_reach_every_rank_through_rank_0() {
        let n = 4;
        let out = on_all(n, |w| {
            let r = w.rank() as u64;
            w.barrier();
            let sums = (w.sum_u64(r + 1), w.max_u64(r * 10), w.min_u64(r + 5));
            let gathered = w.gather_f64(r as f64 * 0.5);
            let bytes = w.broadcast_bytes(if r == 0 { b"id-from-rank-0" } else { b"" });
            let all = w.all_gather_u64s(&[r, r * 100]);
            let texts = w.all_gather_text(&format!("rank-{r}-é"), 7);
            let maxima = w.max_f64s_to_root(&[r as f64, -(r as f64)]);
            let hosts: Vec<usize> = w.ranks().iter().map(|i| i.rank).collect();
            (sums, gathered, bytes, all, texts, maxima, hosts, w.nodes().nnodes())
        });
        for (rank, (sums, gathered, bytes, all, texts, maxima, hosts, nnodes)) in out.into_iter().enumerate() {
            assert_eq!(sums, (10, 30, 5));
            assert_eq!(gathered, (rank == 0).then(|| vec![0.0, 0.5, 1.0, 1.5]));
            assert_eq!(bytes, b"id-from-rank-0");
            assert_eq!(all, vec![0, 0, 1, 100, 2, 200, 3, 300]);
            assert_eq!(texts, vec!["rank-0-", "rank-1-", "rank-2-", "rank-3-"]);
            assert_eq!(maxima, (rank == 0).then(|| vec![3.0, 0.0]));
            assert_eq!(hosts, vec![0, 1, 2, 3]);
            assert_eq!(nnodes, 1);
        }
    }

    /// Answers go down the release tree: with two children per rank, 11
    /// ranks are three hops deep, and every exchange reaches every rank
    /// through its relays (ranks 3 to 10 get theirs from a rank that is
    /// not 0), in order, many times over.
    #[test]
    fn answers_reach_every_rank_down_a_tree_of_relays() {
        let n = 11;
        let out = on_tree(n, 2, |w| {
            let r = w.rank() as u64;
            let mut got = Vec::new();
            for round in 0..20u64 {
                w.barrier();
                got.push(w.sum_u64(r + round));
                got.extend(w.all_gather_u64s(&[r * round]));
                let b = w.broadcast_bytes(&round.to_le_bytes());
                got.push(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
            }
            got
        });
        let sum = |round: u64| (0..n as u64).map(|r| r + round).sum::<u64>();
        for got in &out {
            let mut want = Vec::new();
            for round in 0..20u64 {
                want.push(sum(round));
                want.extend((0..n as u64).map(|r| r * round));
                want.push(round);
            }
            assert_eq!(got, &want);
        }
    }

    #[test]
    fn agreement_works_over_the_store() {
        let out = on_all(3, |w| {
            let local: Result<usize, Error> = if w.rank() == 2 {
                Err(Error::usage("rank 2 disagrees"))
            } else {
                Ok(w.rank())
            };
            w.agree(local).map_err(|d| d.code)
        });
        assert!(out.iter().all(|r| *r == Err(2)), "{out:?}");
    }

    #[test]
    fn a_rank_that_never_comes_is_named_and_the_start_ends_with_exit_5() {
        let port = free_port();
        let limit = Some(Duration::from_millis(600));
        let (zero, one) = std::thread::scope(|s| {
            let zero = s.spawn(|| StoreWorld::start(&launch(0, 3, port, "t"), limit).map(|_| ()));
            let one = s.spawn(|| StoreWorld::start(&launch(1, 3, port, "t"), limit).map(|_| ()));
            (zero.join().unwrap(), one.join().unwrap())
        });
        assert_eq!(zero.unwrap_err().exit_code(), 5);
        // rank 1 was admitted, and is told to end with rank 0's code
        assert_eq!(one.unwrap_err().exit_code(), 5);
    }

    #[test]
    fn a_rank_of_another_job_is_turned_away_and_ranks_that_disagree_on_the_size_end_with_exit_2() {
        let port = free_port();
        let limit = Some(Duration::from_secs(20));
        let (zero, stranger, wrong_size) = std::thread::scope(|s| {
            let zero = s.spawn(|| StoreWorld::start(&launch(0, 2, port, "job-a"), limit).map(|_| ()));
            let stranger = s.spawn(|| StoreWorld::start(&launch(1, 2, port, "job-b"), limit).map(|_| ()));
            let stranger = stranger.join().unwrap();
            let wrong = s.spawn(|| StoreWorld::start(&launch(1, 3, port, "job-a"), limit).map(|_| ()));
            (zero.join().unwrap(), stranger, wrong.join().unwrap())
        });
        assert_eq!(stranger.unwrap_err().exit_code(), 1);
        assert_eq!(zero.unwrap_err().exit_code(), 2);
        assert_eq!(wrong_size.unwrap_err().exit_code(), 2);
    }

    #[test]
    fn a_store_that_is_not_there_is_named_within_the_deadline() {
        let port = free_port();
        let e = StoreWorld::start(&launch(2, 3, port, "t"), Some(Duration::from_millis(400))).err();
        assert_eq!(e.map(|e| e.exit_code()), Some(5));
    }

    #[test]
    fn a_program_that_holds_the_port_stops_rank_0_and_is_not_mistaken_for_a_store() {
        let holder = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
        let port = holder.local_addr().unwrap().port();
        let limit = Some(Duration::from_millis(500));
        assert_eq!(
            StoreWorld::start(&launch(0, 2, port, "t"), limit)
                .err()
                .map(|e| e.exit_code()),
            Some(1)
        );
        // it accepts, but never answers
        assert_eq!(
            StoreWorld::start(&launch(1, 2, port, "t"), limit)
                .err()
                .map(|e| e.exit_code()),
            Some(5)
        );
    }

    #[test]
    fn rank_lists_are_compressed() {
        assert_eq!(ranges("rank", &[3]), "rank 3");
        assert_eq!(ranges("rank", &[1, 2, 3, 7, 9, 10]), "ranks 1-3, 7, 9-10");
    }
}
