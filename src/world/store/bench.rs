//! The store's benchmark (scripts/bench/store-barrier.sh): `n` store
//! clients as threads of this process, each a rank of one job, their
//! start-up and the skew of their barrier releases. Measures and prints;
//! judges nothing.

use std::time::{Duration, Instant};

use super::StoreWorld;
use crate::world::World;

/// Figures of one run.
pub struct Figures {
    pub clients: usize,
    /// Children per rank of the release tree (`clients - 1`: the star).
    pub fanout: usize,
    /// From the threads' start until the last rank joined.
    pub startup: Duration,
    /// Per barrier: the last rank's release less the first's.
    pub skews: Vec<Duration>,
    /// Per barrier: the last rank's release less rank 0's entering it.
    pub spans: Vec<Duration>,
    /// Per barrier: when the last rank's release frame was written less
    /// when the first was (by rank 0, or by a relay): the release's own
    /// spread, without the receivers' wait for a core.
    pub sent_skews: Vec<Duration>,
}

/// `barriers` barriers among `clients` ranks (threads), after `warmup`
/// untimed ones, the answers down a `fanout`-ary tree.
pub fn run(clients: usize, fanout: usize, barriers: usize, warmup: usize) -> Figures {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(29_500);
    let base = Instant::now();
    let since = move || base.elapsed();
    super::probe::start();
    let per_rank: Vec<(Duration, Vec<Duration>, Vec<Duration>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|rank| {
                std::thread::Builder::new()
                    .stack_size(256 << 10)
                    .spawn_scoped(s, move || {
                        let limit = Some(Duration::from_secs(120));
                        let world = StoreWorld::start_fanout(
                            &super::tests::launch(rank, clients, port, "bench"),
                            limit,
                            fanout,
                        )
                        .unwrap_or_else(|e| panic!("rank {rank}: {e}"));
                        let joined = since();
                        for _ in 0..warmup {
                            world.barrier();
                        }
                        let (mut entered, mut released) = (Vec::new(), Vec::new());
                        for _ in 0..barriers {
                            entered.push(since());
                            world.barrier();
                            released.push(since());
                        }
                        // leave together: nobody's goodbye lands inside a timed barrier
                        world.barrier();
                        (joined, entered, released)
                    })
                    .unwrap_or_else(|e| panic!("thread of rank {rank}: {e}"))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let sent = super::probe::stop();
    let startup = per_rank.iter().map(|r| r.0).max().unwrap_or_default();
    // the timed barriers are exchanges warmup + 1 ..= warmup + barriers
    let sent_skews = (0..barriers as u64)
        .map(|b| {
            let seq = warmup as u64 + 1 + b;
            let times: Vec<Instant> = sent.iter().filter(|s| s.1 == seq).map(|s| s.2).collect();
            match (times.iter().min(), times.iter().max()) {
                (Some(first), Some(last)) => *last - *first,
                _ => Duration::ZERO,
            }
        })
        .collect();
    let (mut skews, mut spans) = (Vec::new(), Vec::new());
    for b in 0..barriers {
        let first = per_rank.iter().map(|r| r.2[b]).min().unwrap_or_default();
        let last = per_rank.iter().map(|r| r.2[b]).max().unwrap_or_default();
        // rank 0 enters last of all (it answers once every part is in)
        let rank0_in = per_rank[0].1[b];
        skews.push(last - first);
        spans.push(last.saturating_sub(rank0_in));
    }
    Figures {
        clients,
        fanout,
        startup,
        skews,
        spans,
        sent_skews,
    }
}

fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// One line per run.
pub fn line(f: &Figures) -> String {
    let mut skews = f.skews.clone();
    skews.sort();
    let mut spans = f.spans.clone();
    spans.sort();
    let mut sent = f.sent_skews.clone();
    sent.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let shape = if f.fanout + 1 >= f.clients {
        "star (rank 0 answers all)".to_string()
    } else {
        format!("tree of {}, {} hops", f.fanout, super::tree::depth(f.clients, f.fanout))
    };
    format!(
        "{:>6} clients  {shape:<26}  start-up {:8.1} ms  release skew median {:8.1} us  p90 {:8.1} us  \
         max {:8.1} us  | frames sent: skew median {:8.1} us  max {:8.1} us  | last release after rank 0 \
         enters: median {:8.1} us",
        f.clients,
        f.startup.as_secs_f64() * 1e3,
        us(quantile(&skews, 0.5)),
        us(quantile(&skews, 0.9)),
        us(quantile(&skews, 1.0)),
        us(quantile(&sent, 0.5)),
        us(quantile(&sent, 1.0)),
        us(quantile(&spans, 0.5)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str, default: usize) -> usize {
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    /// The benchmark (scripts/bench/store-barrier.sh): STORE_BENCH_CLIENTS
    /// (a comma list, default 64,256,1024), STORE_BENCH_BARRIERS (50),
    /// STORE_BENCH_STAR=1 (each size with rank 0 answering every rank
    /// too, as before the tree).
    #[test]
    #[ignore = "a benchmark: scripts/bench/store-barrier.sh runs it"]
    fn benchmark() {
        let clients = std::env::var("STORE_BENCH_CLIENTS").unwrap_or_else(|_| "64,256,1024".into());
        let barriers = env("STORE_BENCH_BARRIERS", 50);
        let star = std::env::var("STORE_BENCH_STAR").is_ok_and(|v| v == "1");
        for n in clients.split(',').filter_map(|c| c.trim().parse::<usize>().ok()) {
            if star {
                println!("{}", line(&run(n, n.saturating_sub(1).max(1), barriers, 5)));
            }
            println!("{}", line(&run(n, super::super::tree::FANOUT, barriers, 5)));
        }
    }

    #[test]
    fn a_small_run_measures_every_barrier() {
        let f = run(6, 2, 3, 1);
        assert_eq!(
            (f.clients, f.skews.len(), f.spans.len(), f.sent_skews.len()),
            (6, 3, 3, 3)
        );
        assert!(f.startup > Duration::ZERO);
        assert!(line(&f).contains("6 clients  tree of 2, 2 hops"), "{}", line(&f));
        assert!(line(&run(3, 2, 1, 0)).contains("star"));
    }
}
