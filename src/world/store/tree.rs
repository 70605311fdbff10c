//! The release tree of the store (docs/launch.md, "The store at scale"):
//! rank 0's answer to an exchange (a barrier's release, a broadcast, every
//! part of an all-gather) goes down a `FANOUT`-ary tree of the ranks
//! instead of from rank 0 to every rank in turn. Rank 0 writes to its
//! `FANOUT` children (on their store connections); every other rank with
//! children forwards the frame to them as soon as it reads it, on a relay
//! connection each child opened to it at the start. With n ranks a
//! release takes `depth(n)` hops of at most `FANOUT` writes each, where
//! rank 0 alone used to write n - 1 frames one after another, so that the
//! first ranks released started timing milliseconds before the last.
//!
//! What ends a job (an abort, rank 0's finish) still goes from rank 0 to
//! every rank on its own connection: a relay that dies is seen by rank 0,
//! which ends the job for its subtree too.

use std::io::{self, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::ops::Range;
use std::time::{Duration, Instant};

use super::wire::{self, Msg, Peer};

/// Children per rank in the release tree.
pub const FANOUT: usize = 16;

/// The parent of `rank` (`None` for rank 0) in the `k`-ary tree.
pub fn parent(rank: usize, k: usize) -> Option<usize> {
    (rank > 0).then(|| (rank - 1) / k.max(1))
}

/// The children of `rank` among `n` ranks in the `k`-ary tree.
pub fn children(rank: usize, k: usize, n: usize) -> Range<usize> {
    let k = k.max(1);
    let first = rank.saturating_mul(k).saturating_add(1).min(n);
    first..first.saturating_add(k).min(n)
}

/// Hops from rank 0 to the farthest of `n` ranks.
#[cfg(test)]
pub fn depth(n: usize, k: usize) -> usize {
    (1..n).map(|r| hops(r, k)).max().unwrap_or(0)
}

#[cfg(test)]
fn hops(mut rank: usize, k: usize) -> usize {
    let mut h = 0;
    while let Some(p) = parent(rank, k) {
        rank = p;
        h += 1;
    }
    h
}

/// This rank's relay listener, bound before it announces itself (its
/// children connect once every rank is known), on every interface of the
/// store's address family.
pub fn listen(v6: bool) -> io::Result<TcpListener> {
    let any = if v6 { "[::]:0" } else { "0.0.0.0:0" };
    TcpListener::bind(any)
}

/// A rank's links in the tree: from its parent (`None`: rank 0, on the
/// store connection) and to its children, ranks `first_child` on.
pub struct Links {
    pub parent: Option<TcpStream>,
    pub children: Vec<TcpStream>,
    pub first_child: usize,
}

/// Opens this rank's links once every rank is known: a relay connection to
/// its parent (unless that is rank 0), then one from each child (accepted
/// on `listener`, which a rank with children has), each child naming the
/// job's `token` and its rank.
pub fn link(
    rank: usize,
    peers: &[Peer],
    k: usize,
    token: &str,
    listener: Option<&TcpListener>,
    limit: Duration,
) -> io::Result<Links> {
    let n = peers.len();
    let parent = match parent(rank, k) {
        Some(p) if p > 0 => {
            let mut s = connect(&peers[p].relay, limit)?;
            s.set_nodelay(true)?;
            s.write_all(wire::MAGIC)?;
            wire::write(
                &mut s,
                &Msg::Join {
                    token: token.to_string(),
                    rank: rank as u32,
                },
            )?;
            Some(s)
        }
        _ => None,
    };
    let mine = children(rank, k, n);
    let mut children: Vec<Option<TcpStream>> = mine.clone().map(|_| None).collect();
    let until = Instant::now() + limit;
    let listener = match listener {
        Some(l) => l,
        None if mine.is_empty() => {
            return Ok(Links {
                parent,
                children: Vec::new(),
                first_child: mine.start,
            });
        }
        None => return Err(io::Error::other("no relay port for this rank's children")),
    };
    listener.set_nonblocking(true)?;
    while children.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((mut s, _)) => {
                s.set_nonblocking(false)?;
                s.set_read_timeout(Some(limit))?;
                let joined = wire::read_magic(&mut s).and_then(|()| wire::read(&mut s));
                match joined {
                    Ok(Msg::Join { token: t, rank: r }) if t == token && mine.contains(&(r as usize)) => {
                        s.set_read_timeout(None)?;
                        s.set_nodelay(true)?;
                        children[r as usize - mine.start] = Some(s);
                    }
                    // not a child of this job: dropped
                    _ => {}
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if Instant::now() >= until {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "a child never joined"));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(Links {
        parent,
        children: children.into_iter().flatten().collect(),
        first_child: mine.start,
    })
}

fn connect(address: &str, limit: Duration) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, format!("no address in {address}"));
    for addr in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Writes answer `seq`'s `frame` to every child (ranks `first`, `first +
/// 1`, ...); a child that is gone is left out (rank 0 sees it gone and
/// ends the job).
pub fn forward(children: &mut [TcpStream], first: usize, seq: u64, frame: &[u8]) {
    for (i, c) in children.iter_mut().enumerate() {
        let _ = c.write_all(frame);
        super::probe::sent(first + i, seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rank_has_one_parent_and_the_tree_is_shallow() {
        for (n, k) in [(2, 16), (17, 16), (18, 16), (1024, 16), (7, 2), (1024, 1023)] {
            let mut seen = vec![0; n];
            for r in 0..n {
                for c in children(r, k, n) {
                    assert_eq!(parent(c, k), Some(r), "n {n} k {k}");
                    seen[c] += 1;
                }
            }
            assert_eq!(seen[0], 0);
            assert!(seen[1..].iter().all(|&s| s == 1), "n {n} k {k}");
        }
        // rank 0 writes 16 frames; three hops reach 1,024 ranks
        assert_eq!(children(0, 16, 1024), 1..17);
        assert_eq!(depth(1024, 16), 3);
        assert_eq!(depth(17, 16), 1);
        // a star (k = n - 1): one hop, rank 0 writes to everyone
        assert_eq!(depth(1024, 1023), 1);
        assert_eq!(depth(1, 16), 0);
    }
}
