//! A rank's side of the store (every rank but 0): it connects to rank 0
//! (retrying until the deadline, since rank 0 may start later), announces
//! itself, and waits to be admitted; then it joins the release tree
//! (`tree`), and each exchange is one message to rank 0 and one answer,
//! which comes down the tree from its parent and goes on to its children.
//! A reader thread takes rank 0's messages, and ends this rank at once
//! when rank 0 says the job is over or rank 0 vanishes; where the parent
//! is not rank 0, another reads the answers from it.

use std::io::{self, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::tree::{self, Links};
use super::wire::{self, Hello, Msg, Peer};
use super::{Deadline, fail};
use crate::error::{Error, exit, say};
use crate::world::RankInfo;
use crate::world::launch::StoreLaunch;

/// Pause between connection attempts while rank 0 is not listening yet.
const RETRY: Duration = Duration::from_millis(200);

/// What the main thread and the reader share.
pub struct Shared {
    writer: Mutex<TcpStream>,
    /// This rank is leaving in order, or rank 0 said the job finished: a
    /// closed connection is no news.
    leaving: AtomicBool,
}

impl Shared {
    fn send(&self, msg: &Msg) {
        let mut w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let _ = wire::write(&mut *w, msg);
    }

    /// Tells rank 0 that this rank ends the job with `code` (the exit
    /// hook, `abort`): rank 0 ends every other rank.
    pub fn abort(&self, code: u8) {
        self.leaving.store(true, Ordering::SeqCst);
        self.send(&Msg::Abort { code });
    }
}

/// A rank's end of the store.
pub struct Spoke {
    pub shared: Arc<Shared>,
    answers: Receiver<(u64, Vec<u8>)>,
    seq: std::cell::Cell<u64>,
}

/// Connects, announces `me`, waits to be admitted, and joins the
/// `fanout`-ary release tree: every rank's identity. Failures are printed
/// here, with this rank's name.
pub fn join(
    launch: &StoreLaunch,
    me: &Hello,
    deadline: Deadline,
    fanout: usize,
) -> Result<(Vec<RankInfo>, Spoke), Error> {
    let who = format!("rank {} on {}", me.rank, me.host);
    let address = launch.address();
    let (relay, me) = relay_port(launch, me, fanout, &who)?;
    let mut stream = connect(launch, deadline).map_err(|last| {
        fail(
            exit::TIMEOUT,
            format!(
                "collbench: {who}: the launcher or control plane is broken: cannot reach the store at {address} \
                 (rank 0; {}) within {} s: {last}; is rank 0 running there?",
                launch.origin,
                deadline.seconds()
            ),
        )
    })?;
    let _ = stream.set_nodelay(true);
    let sent = stream
        .write_all(wire::MAGIC)
        .and_then(|()| wire::write(&mut stream, &Msg::Hello(me.clone())));
    if let Err(e) = sent {
        return Err(fail(
            exit::RUNTIME,
            format!("collbench: {who}: cannot talk to the store at {address}: {e}"),
        ));
    }
    let peers = admitted(&mut stream, launch.size, deadline).map_err(|failed| match failed {
        Failed::Silent(code) => Error::Reported(code),
        Failed::NoAnswer => fail(
            exit::TIMEOUT,
            format!(
                "collbench: {who}: no answer from the store at {address} within {} s: another program holds that \
                 port, or rank 0 is not a collbench of this job",
                deadline.seconds()
            ),
        ),
        Failed::Closed => fail(
            exit::RUNTIME,
            format!(
                "collbench: {who}: the store at {address} closed the connection during the start-up (rank 0 \
                 ended, or the port belongs to another program)"
            ),
        ),
    })?;
    let ranks: Vec<RankInfo> = peers
        .iter()
        .enumerate()
        .map(|(rank, p)| RankInfo {
            rank,
            host: p.host.clone(),
            pid: p.pid,
        })
        .collect();
    // Every rank sees rank 0 vanish; rank 1 alone says so.
    let lost_line = (me.rank == 1).then(|| {
        format!(
            "collbench: rank 0 on {} (the store) ended without finishing the run: it died, was killed, or the \
             connection to it broke; ending the job",
            ranks[0].host
        )
    });
    // Every rank is known and has its relay port open: the tree's links.
    let limit = deadline
        .remaining()
        .unwrap_or(Duration::from_secs(60))
        .max(Duration::from_secs(5));
    let links = tree::link(me.rank as usize, &peers, fanout, &me.token, relay.as_ref(), limit).map_err(|e| {
        fail(
            exit::RUNTIME,
            format!("collbench: {who}: cannot join the store's release tree: {e}"),
        )
    })?;
    Ok((ranks, Spoke::start(stream, lost_line, links)))
}

/// This rank's relay port (its children in the release tree connect
/// there), in the store's address family, and `me` announcing it; none
/// for a rank without children (most ranks: a port nobody of the job
/// connects to would only hold a stranger's connection unanswered).
fn relay_port(
    launch: &StoreLaunch,
    me: &Hello,
    fanout: usize,
    who: &str,
) -> Result<(Option<std::net::TcpListener>, Hello), Error> {
    if tree::children(me.rank as usize, fanout, launch.size).is_empty() {
        return Ok((None, me.clone()));
    }
    let v6 = (launch.host.as_str(), launch.port)
        .to_socket_addrs()
        .map(|mut a| a.next().is_some_and(|a| a.is_ipv6()))
        .unwrap_or(false);
    let relay = tree::listen(v6).map_err(|e| {
        fail(
            exit::RUNTIME,
            format!("collbench: {who}: cannot open a port for the store's release tree: {e}"),
        )
    })?;
    let me = Hello {
        relay_port: relay.local_addr().map_or(0, |a| a.port()),
        ..me.clone()
    };
    Ok((Some(relay), me))
}

/// Why a rank was not admitted.
enum Failed {
    /// Said already (by rank 0, or rank 0's words here); exit with this
    /// code.
    Silent(u8),
    /// Nothing answered before the deadline.
    NoAnswer,
    /// The connection closed, or something else answered.
    Closed,
}

/// Waits for rank 0's answers until the table of every rank arrives.
/// Until admitted, this rank's deadline holds (a program on the port that
/// is not our store never answers); then rank 0 keeps the time.
fn admitted(stream: &mut TcpStream, size: usize, deadline: Deadline) -> Result<Vec<Peer>, Failed> {
    let limit = deadline
        .remaining()
        .unwrap_or(Duration::from_secs(60))
        .max(Duration::from_secs(1));
    let _ = stream.set_read_timeout(Some(limit));
    let mut accepted = false;
    loop {
        match wire::read(stream) {
            Ok(Msg::Accepted) => {
                accepted = true;
                let _ = stream.set_read_timeout(None);
            }
            Ok(Msg::Welcome(table)) if table.len() == size => return Ok(table),
            Ok(Msg::Refuse {
                code,
                print: true,
                message,
            }) => {
                say(&message);
                return Err(Failed::Silent(code));
            }
            Ok(Msg::Refuse { code, .. }) | Ok(Msg::Abort { code }) => return Err(Failed::Silent(code)),
            Err(e) if !accepted && matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut) => {
                return Err(Failed::NoAnswer);
            }
            Ok(_) | Err(_) => return Err(Failed::Closed),
        }
    }
}

/// A connection to rank 0, retried until the deadline; the last error
/// when none succeeds.
fn connect(launch: &StoreLaunch, deadline: Deadline) -> Result<TcpStream, String> {
    let mut last = String::from("no attempt");
    loop {
        match (launch.host.as_str(), launch.port).to_socket_addrs() {
            Err(e) => last = format!("cannot resolve {}: {e}", launch.host),
            Ok(addrs) => {
                for addr in addrs {
                    let limit = deadline
                        .remaining()
                        .unwrap_or(Duration::from_secs(2))
                        .clamp(Duration::from_millis(100), Duration::from_secs(2));
                    match TcpStream::connect_timeout(&addr, limit) {
                        Ok(s) => return Ok(s),
                        Err(e) => last = e.to_string(),
                    }
                }
            }
        }
        if deadline.passed() {
            return Err(last);
        }
        std::thread::sleep(RETRY);
    }
}

impl Spoke {
    /// `lost_line`: what this rank says when rank 0 vanishes (rank 1
    /// alone says it, so that the job ends with one line). The answers come
    /// from rank 0's connection, or from the parent's relay connection
    /// (`links`), and go on to the children.
    fn start(stream: TcpStream, lost_line: Option<String>, links: Links) -> Spoke {
        let reader = stream.try_clone();
        let shared = Arc::new(Shared {
            writer: Mutex::new(stream),
            leaving: AtomicBool::new(false),
        });
        let (tx, answers) = mpsc::channel();
        let Links {
            parent,
            children,
            first_child,
        } = links;
        // the children go with the reader of the answers
        let (star_children, relay) = match parent {
            None => ((first_child, children), None),
            Some(p) => ((first_child, Vec::new()), Some((p, (first_child, children)))),
        };
        if let Some((from, children)) = relay {
            let tx = tx.clone();
            std::thread::spawn(move || read_parent(from, children, &tx));
        }
        match reader {
            Ok(reader) => {
                let shared = Arc::clone(&shared);
                std::thread::spawn(move || read_rank0(reader, star_children, &shared, &tx, lost_line));
            }
            Err(e) => say(&format!("collbench: warning: the store's connection: {e}")),
        }
        Spoke {
            shared,
            answers,
            seq: std::cell::Cell::new(0),
        }
    }

    /// Sends this rank's part of one exchange; rank 0's answer.
    pub fn exchange(&self, mine: Vec<u8>) -> Vec<u8> {
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        self.shared.send(&Msg::Data { seq, bytes: mine });
        match self.answers.recv() {
            Ok((got, bytes)) if got == seq => bytes,
            Ok((got, _)) => {
                say(&format!(
                    "collbench: rank 0 answered exchange {got} where this rank waits for {seq}: the ranks run \
                     different programs"
                ));
                self.shared.abort(exit::RUNTIME);
                std::process::exit(i32::from(exit::RUNTIME))
            }
            // The reader ended: rank 0 finished, so no exchange can
            // follow; the job is ending.
            Err(_) => loop {
                std::thread::park();
            },
        }
    }

    /// Leaves in order.
    pub fn finish(&self) {
        self.shared.leaving.store(true, Ordering::SeqCst);
        self.shared.send(&Msg::Bye);
    }
}

/// Reads rank 0's messages: answers go on to `children` and to the main
/// thread; an abort ends this rank with rank 0's code (the failing rank
/// printed why); a connection that closes before the end means rank 0 is
/// gone.
fn read_rank0(
    mut stream: TcpStream,
    mut children: Children,
    shared: &Shared,
    answers: &Sender<(u64, Vec<u8>)>,
    lost_line: Option<String>,
) {
    loop {
        match wire::read(&mut stream) {
            Ok(Msg::Data { seq, bytes }) => {
                pass_on(&mut children, seq, &bytes);
                if answers.send((seq, bytes)).is_err() {
                    return;
                }
            }
            Ok(Msg::Abort { code }) => std::process::exit(i32::from(code)),
            Ok(Msg::Finish) => shared.leaving.store(true, Ordering::SeqCst),
            Ok(_) | Err(_) if shared.leaving.load(Ordering::SeqCst) => return,
            Ok(_) | Err(_) => {
                if let Some(line) = &lost_line {
                    say(line);
                }
                std::process::exit(i32::from(exit::RUNTIME))
            }
        }
    }
}

/// A rank's children in the release tree: the first one's rank, and a
/// connection to each.
type Children = (usize, Vec<TcpStream>);

/// Forwards an answer to the children before this rank takes it.
fn pass_on((first, children): &mut Children, seq: u64, bytes: &[u8]) {
    if !children.is_empty() {
        let frame = wire::encode(&Msg::Data {
            seq,
            bytes: bytes.to_vec(),
        });
        tree::forward(children, *first, seq, &frame);
    }
}

/// Reads the answers the parent passes on (it is not rank 0): each goes on
/// to `children` and to the main thread. A link that breaks is left alone:
/// a parent that died is seen by rank 0, which ends the job on every
/// rank's own connection.
fn read_parent(mut from: TcpStream, mut children: Children, answers: &Sender<(u64, Vec<u8>)>) {
    loop {
        match wire::read(&mut from) {
            Ok(Msg::Data { seq, bytes }) => {
                pass_on(&mut children, seq, &bytes);
                if answers.send((seq, bytes)).is_err() {
                    return;
                }
            }
            Ok(_) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::world::store::tests::launch;

    /// Only a rank with children in the release tree opens a relay port: a
    /// leaf's would hold a stranger's connection (another job's rank that
    /// took the port for its store) unanswered until the deadline.
    #[test]
    fn only_ranks_with_children_open_a_relay_port() {
        let hello = |rank: u32| Hello {
            token: "t".into(),
            rank,
            size: 40,
            local_rank: u32::MAX,
            host: "h".into(),
            pid: 1,
            relay_port: 0,
        };
        for (rank, size, has) in [
            (1, 4, false),
            (3, 4, false),
            (1, 40, true),
            (2, 40, true),
            (3, 40, false),
        ] {
            let (relay, me) = relay_port(&launch(rank, size, 1, "t"), &hello(rank as u32), 16, "x").unwrap();
            assert_eq!(relay.is_some(), has, "rank {rank} of {size}");
            assert_eq!(me.relay_port != 0, has, "rank {rank} of {size}");
        }
    }
}
