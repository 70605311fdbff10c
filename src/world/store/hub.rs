//! Rank 0's side of the store: it listens, admits every rank of its job
//! (and turns away what is not), then answers each exchange once every
//! rank has sent its part. A thread per rank reads that rank's messages,
//! so that a rank that aborts or vanishes ends the job even while rank 0
//! itself waits inside NCCL.

use std::io::{self, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::tree;
use super::wire::{self, Hello, Msg, Peer};
use super::{Deadline, Reply, ranges};
use crate::error::{Error, exit, say};
use crate::world::RankInfo;
use crate::world::launch::{StoreLaunch, StoreLauncher};

/// How long rank 0, ending the job, gives its own reports to complete
/// (the stop signal it sends itself) before it exits.
const REPORT_GRACE: Duration = Duration::from_secs(2);

/// How long rank 0, giving up the start after the deadline, still tells
/// ranks that connect.
const STRAGGLER_WAIT: Duration = Duration::from_millis(300);

/// How long rank 0, refusing a rank of the job (a size or a rank the
/// others disagree with), waits for the ranks that have not connected yet,
/// to tell each to end: a rank that a loaded host starts late would else
/// find the store gone and say a second line.
const REFUSED_WAIT: Duration = Duration::from_secs(5);

/// How long rank 0, leaving in order, waits for every rank to leave too.
const LEAVE_WAIT: Duration = Duration::from_secs(30);

/// Connections the store's port holds before rank 0 accepts them: every
/// rank of a large job connects at once, and a connection the kernel's
/// queue drops is retried only a second later (the kernel caps it at
/// net.core.somaxconn).
const BACKLOG: i32 = 8192;

/// One rank's part of an exchange, from its reader thread.
struct Part {
    rank: usize,
    seq: u64,
    bytes: Vec<u8>,
}

/// What rank 0's threads share.
pub struct Shared {
    /// The write side of every rank's connection (none for rank 0).
    writers: Mutex<Vec<Option<TcpStream>>>,
    /// The job is ending (an abort) or finished: a connection that closes
    /// now is no news.
    ending: AtomicBool,
    /// Ranks that left (said goodbye, or closed after the end).
    left: Mutex<Vec<bool>>,
    left_changed: Condvar,
    ranks: Vec<RankInfo>,
}

impl Shared {
    fn lock_writers(&self) -> std::sync::MutexGuard<'_, Vec<Option<TcpStream>>> {
        self.writers.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends `msg` to every rank, ignoring ranks already gone.
    fn tell_all(&self, msg: &Msg) {
        self.tell(0..self.ranks.len(), msg);
    }

    /// Sends `msg` to `ranks`, ignoring ranks already gone.
    fn tell(&self, ranks: std::ops::Range<usize>, msg: &Msg) {
        let frame = wire::encode(msg);
        let seq = match msg {
            Msg::Data { seq, .. } => Some(*seq),
            _ => None,
        };
        let mut writers = self.lock_writers();
        for (rank, w) in writers.iter_mut().enumerate().skip(ranks.start).take(ranks.len()) {
            if let Some(w) = w {
                let _ = w.write_all(&frame);
            }
            if let Some(seq) = seq {
                super::probe::sent(rank, seq);
            }
        }
    }

    /// Tells every rank to end with `code` (the exit hook, `abort`).
    pub fn abort_all(&self, code: u8) {
        self.ending.store(true, Ordering::SeqCst);
        self.tell_all(&Msg::Abort { code });
    }

    /// Ends the job from a reader thread: says `line` (if any), tells
    /// every rank, then ends this process as a launcher would end it: a
    /// stop signal first, so that rank 0's reports complete, then the
    /// exit with `code`.
    fn end_job(&self, code: u8, line: Option<String>) -> ! {
        if self.ending.swap(true, Ordering::SeqCst) {
            // Another thread is ending the job already.
            loop {
                std::thread::park();
            }
        }
        if let Some(line) = line {
            say(&line);
        }
        self.tell_all(&Msg::Abort { code });
        crate::world::set_exit_hook(None);
        crate::world::mark_job_ending();
        let _ = rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::TERM);
        std::thread::sleep(REPORT_GRACE);
        std::process::exit(i32::from(code))
    }

    fn mark_left(&self, rank: usize) {
        let mut left = self.left.lock().unwrap_or_else(PoisonError::into_inner);
        left[rank] = true;
        self.left_changed.notify_all();
    }
}

/// Rank 0's end of the store once every rank has arrived.
pub struct Hub {
    pub shared: Arc<Shared>,
    parts: Receiver<Part>,
    seq: std::cell::Cell<u64>,
    /// Children per rank of the release tree (`tree`).
    fanout: usize,
}

/// Binds the store's port: IPv6 where the store's host is an IPv6
/// address, else IPv4, on every interface (the other ranks reach rank 0
/// by the launcher's name for its host).
fn listen(launch: &StoreLaunch) -> Result<TcpListener, Error> {
    let v6 = (launch.host.as_str(), launch.port)
        .to_socket_addrs()
        .map(|mut a| a.next().is_some_and(|a| a.is_ipv6()))
        .unwrap_or(false);
    let any = if v6 {
        SocketAddr::from((Ipv6Addr::UNSPECIFIED, launch.port))
    } else {
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, launch.port))
    };
    let listener = TcpListener::bind(any).and_then(|l| {
        rustix::net::listen(&l, BACKLOG)?;
        Ok(l)
    });
    listener.map_err(|e| {
        let why = if e.kind() == io::ErrorKind::AddrInUse {
            "the port is in use (another job or program holds it)".to_string()
        } else {
            e.to_string()
        };
        let line = format!(
            "collbench: the control plane cannot start: rank 0 cannot listen on port {} for the store ({}): {why}; \
             set COLLBENCH_STORE=HOST:PORT to choose another port",
            launch.port, launch.origin
        );
        say(&line);
        Error::Reported(exit::RUNTIME)
    })
}

/// The variable that gives the job's size, for messages.
fn size_variable(launcher: StoreLauncher) -> &'static str {
    match launcher {
        StoreLauncher::Slurm => "SLURM_STEP_NUM_TASKS",
        StoreLauncher::Torchrun | StoreLauncher::K8s => "WORLD_SIZE",
    }
}

/// A greeting: the connection and what it announced.
type Greeting = (TcpStream, io::Result<Hello>);

/// Rank 0 admitting the other ranks.
struct Admission<'a> {
    launch: &'a StoreLaunch,
    me: &'a Hello,
    listener: TcpListener,
    greetings: (Sender<Greeting>, Receiver<Greeting>),
    admitted: Vec<Option<(TcpStream, Hello)>>,
    fanout: usize,
    /// Ranks told to end, once rank 0 gives up.
    told: usize,
}

/// What rank 0 makes of a greeting.
enum Judged {
    Admit,
    /// A rank of another job: turned away with this line, which it prints.
    Stranger(String),
    /// The job itself is wrong: this line, and every rank ends with 2.
    Wrong(String),
}

/// Admits the other `size - 1` ranks before `deadline`: returns every
/// rank's identity and the hub, whose answers go down a `fanout`-ary tree
/// (`tree`). On failure every admitted rank is told to end, and the line
/// is printed here.
pub fn rendezvous(
    launch: &StoreLaunch,
    me: &Hello,
    deadline: Deadline,
    fanout: usize,
) -> Result<(Vec<RankInfo>, Hub), Error> {
    let mut admission = Admission::open(launch, me, fanout)?;
    while admission.count() < launch.size {
        let Some((mut stream, hello)) = admission.next_greeting(deadline) else {
            if deadline.passed() {
                let line = admission.missing(deadline);
                return Err(admission.give_up(exit::TIMEOUT, line, STRAGGLER_WAIT));
            }
            continue;
        };
        match admission.judge(&hello) {
            Judged::Stranger(message) => {
                let refuse = Msg::Refuse {
                    code: exit::RUNTIME,
                    print: true,
                    message,
                };
                let _ = wire::write(&mut stream, &refuse);
            }
            Judged::Wrong(line) => {
                let refuse = Msg::Refuse {
                    code: exit::USAGE,
                    print: false,
                    message: String::new(),
                };
                let _ = wire::write(&mut stream, &refuse);
                // the refused rank is told; the others may be on their way
                admission.told += 1;
                return Err(admission.give_up(exit::USAGE, line, REFUSED_WAIT));
            }
            Judged::Admit => {
                // The rank now waits for the others without a deadline of
                // its own.
                let _ = wire::write(&mut stream, &Msg::Accepted);
                let rank = hello.rank as usize;
                admission.admitted[rank] = Some((stream, hello));
            }
        }
    }
    Ok(admission.welcome())
}

impl<'a> Admission<'a> {
    fn open(launch: &'a StoreLaunch, me: &'a Hello, fanout: usize) -> Result<Admission<'a>, Error> {
        let listener = listen(launch)?;
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::runtime(format!("the store's socket: {e}")))?;
        Ok(Admission {
            launch,
            me,
            listener,
            greetings: mpsc::channel(),
            admitted: (0..launch.size).map(|_| None).collect(),
            fanout,
            told: 0,
        })
    }

    /// Ranks admitted so far, rank 0 included.
    fn count(&self) -> usize {
        1 + self.admitted.iter().filter(|a| a.is_some()).count()
    }

    /// The next connection that announced itself, if one did in a moment.
    fn next_greeting(&self, deadline: Deadline) -> Option<(TcpStream, Hello)> {
        accept_waiting(&self.listener, &self.greetings.0, deadline);
        match self.greetings.1.recv_timeout(Duration::from_millis(10)) {
            Ok((stream, Ok(hello))) => Some((stream, hello)),
            // not a rank of ours, or nothing yet
            Ok((_, Err(_))) | Err(_) => None,
        }
    }

    fn judge(&self, hello: &Hello) -> Judged {
        let (launch, me, size) = (self.launch, self.me, self.launch.size);
        if hello.token != me.token {
            return Judged::Stranger(format!(
                "collbench: rank {} on {}: the store at {} belongs to another job ({}, this rank's is {}); set \
                 COLLBENCH_STORE=HOST:PORT to give the jobs different ports",
                hello.rank,
                hello.host,
                launch.address(),
                me.token,
                hello.token
            ));
        }
        let rank = hello.rank as usize;
        if hello.size as usize != size {
            return Judged::Wrong(format!(
                "collbench: ranks disagree on the size of the job: rank {rank} on {} says {} ranks, rank 0 on {} \
                 says {size} ({} differs between ranks)",
                hello.host,
                hello.size,
                me.host,
                size_variable(launch.launcher)
            ));
        }
        if rank >= size {
            return Judged::Wrong(format!(
                "collbench: rank {rank} on {} is not below the job's {size} ranks (the launcher's rank and size \
                 variables disagree)",
                hello.host
            ));
        }
        let first = match &self.admitted[rank] {
            _ if rank == 0 => format!("{} (pid {})", me.host, me.pid),
            Some((_, h)) => format!("{} (pid {})", h.host, h.pid),
            None => return Judged::Admit,
        };
        Judged::Wrong(format!(
            "collbench: two processes claim rank {rank}: on {first} and on {} (pid {}); the launcher gave them the \
             same rank",
            hello.host, hello.pid
        ))
    }

    /// The line naming the ranks that never came.
    fn missing(&self, deadline: Deadline) -> String {
        let missing: Vec<usize> = (1..self.launch.size).filter(|&r| self.admitted[r].is_none()).collect();
        let address = self.launch.address();
        format!(
            "collbench: the launcher or control plane is broken: {} never reached the store at {address} within {} s \
             (not started, or {address} is not reachable from {}); NCCL was not started",
            ranges("rank", &missing),
            deadline.seconds(),
            if missing.len() == 1 { "its host" } else { "their hosts" },
        )
    }

    /// Says `line`; every rank admitted, and every rank that connects
    /// within `wait` (stragglers) until each of the job's ranks was told,
    /// is told to end with `code`: the job ends with rank 0's line alone.
    fn give_up(mut self, code: u8, line: String, wait: Duration) -> Error {
        say(&line);
        let frame = wire::encode(&Msg::Abort { code });
        for (stream, _) in self.admitted.iter_mut().flatten() {
            let _ = stream.write_all(&frame);
            self.told += 1;
        }
        let until = Instant::now() + wait;
        while Instant::now() < until && self.told + 1 < self.launch.size {
            if let Some((mut stream, _)) = self.next_greeting(Deadline::after(Some(wait))) {
                let _ = stream.write_all(&frame);
                self.told += 1;
            }
        }
        Error::Reported(code)
    }

    /// Every rank has arrived: the port closes, each rank gets the table
    /// of every rank's host, pid and relay address (rank 0's view of its
    /// address, with the port it announced), and the hub starts.
    fn welcome(self) -> (Vec<RankInfo>, Hub) {
        let mut infos = vec![RankInfo {
            rank: 0,
            host: self.me.host.clone(),
            pid: self.me.pid,
        }];
        let mut peers = vec![Peer {
            host: self.me.host.clone(),
            pid: self.me.pid,
            relay: String::new(),
        }];
        let mut local_ranks = vec![self.me.local_rank];
        let mut streams: Vec<Option<TcpStream>> = vec![None];
        for (rank, (stream, hello)) in self
            .admitted
            .into_iter()
            .enumerate()
            .skip(1)
            .filter_map(|(r, a)| Some((r, a?)))
        {
            let relay = stream
                .peer_addr()
                .map(|a| std::net::SocketAddr::new(a.ip(), hello.relay_port).to_string())
                .unwrap_or_default();
            peers.push(Peer {
                host: hello.host.clone(),
                pid: hello.pid,
                relay,
            });
            infos.push(RankInfo {
                rank,
                host: hello.host,
                pid: hello.pid,
            });
            local_ranks.push(hello.local_rank);
            streams.push(Some(stream));
        }
        let welcome = wire::encode(&Msg::Welcome(peers));
        for stream in streams.iter_mut().flatten() {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_nodelay(true);
            let _ = stream.write_all(&welcome);
        }
        warn_on_local_ranks(self.launch.launcher, &infos, &local_ranks);
        (infos.clone(), Hub::start(streams, infos, self.fanout))
    }
}

/// Accepts what is waiting on the listener; each connection's greeting is
/// read on a thread of its own, so that a silent one holds nobody up.
fn accept_waiting(listener: &TcpListener, hellos: &Sender<Greeting>, deadline: Deadline) {
    while let Ok((stream, _)) = listener.accept() {
        let tx = hellos.clone();
        let greeting_limit = deadline
            .remaining()
            .unwrap_or(Duration::from_secs(60))
            .max(Duration::from_secs(1));
        std::thread::spawn(move || {
            let mut stream = stream;
            let hello = read_hello(&mut stream, greeting_limit);
            let _ = tx.send((stream, hello));
        });
    }
}

fn read_hello(stream: &mut TcpStream, limit: Duration) -> io::Result<Hello> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(limit))?;
    wire::read_magic(stream)?;
    let hello = match wire::read(stream)? {
        Msg::Hello(h) => h,
        _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "no greeting")),
    };
    stream.set_read_timeout(None)?;
    Ok(hello)
}

/// Rank 0 warns when the launcher's local ranks do not follow the hosts
/// (containers that share one host name, say): GPUs are chosen by host.
fn warn_on_local_ranks(launcher: StoreLauncher, infos: &[RankInfo], local_ranks: &[u32]) {
    let hosts: Vec<String> = infos.iter().map(|r| r.host.clone()).collect();
    let nodes = crate::topology::Nodes::from_keys(&hosts, &hosts);
    let differs: Vec<usize> = (0..infos.len())
        .filter(|&r| local_ranks[r] != u32::MAX && local_ranks[r] as usize != nodes.local_rank(r))
        .collect();
    if let Some(&r) = differs.first() {
        say(&format!(
            "collbench: warning: the {} launcher's local ranks do not follow the host names ({}: rank {r} is local \
             rank {} to the launcher but {} on {}); GPUs are chosen by host name",
            launcher.name(),
            ranges("rank", &differs),
            local_ranks[r],
            nodes.local_rank(r),
            infos[r].host
        ));
    }
}

impl Hub {
    /// Starts a reader thread per rank.
    fn start(streams: Vec<Option<TcpStream>>, ranks: Vec<RankInfo>, fanout: usize) -> Hub {
        let size = streams.len();
        let readers: Vec<Option<TcpStream>> = streams
            .iter()
            .map(|s| s.as_ref().and_then(|s| s.try_clone().ok()))
            .collect();
        let shared = Arc::new(Shared {
            writers: Mutex::new(streams),
            ending: AtomicBool::new(false),
            left: Mutex::new((0..size).map(|r| r == 0).collect()),
            left_changed: Condvar::new(),
            ranks,
        });
        let (tx, parts) = mpsc::channel();
        for (rank, reader) in readers.into_iter().enumerate() {
            let Some(reader) = reader else {
                if rank != 0 {
                    shared.mark_left(rank);
                }
                continue;
            };
            let (shared, tx) = (Arc::clone(&shared), tx.clone());
            std::thread::spawn(move || read_rank(rank, reader, &shared, &tx));
        }
        Hub {
            shared,
            parts,
            seq: std::cell::Cell::new(0),
            fanout,
        }
    }

    /// One exchange: every rank's part, in rank order; each other rank
    /// gets what `reply` says, down the release tree (rank 0 writes to its
    /// children only).
    pub fn exchange(&self, mine: Vec<u8>, reply: Reply) -> Vec<Vec<u8>> {
        let seq = self.seq.get() + 1;
        self.seq.set(seq);
        let size = self.shared.ranks.len();
        let mut parts: Vec<Option<Vec<u8>>> = (0..size).map(|_| None).collect();
        parts[0] = Some(mine);
        let mut missing = size - 1;
        while missing > 0 {
            let Ok(part) = self.parts.recv() else {
                // Every reader ended: the job is ending on another thread.
                loop {
                    std::thread::park();
                }
            };
            if part.seq != seq {
                let info = &self.shared.ranks[part.rank];
                self.shared.end_job(
                    exit::RUNTIME,
                    Some(format!(
                        "collbench: rank {} on {} is out of step with rank 0 (exchange {} against {seq}): the \
                         ranks run different programs; ending the job",
                        part.rank, info.host, part.seq
                    )),
                );
            }
            if parts[part.rank].is_none() {
                missing -= 1;
            }
            parts[part.rank] = Some(part.bytes);
        }
        let parts: Vec<Vec<u8>> = parts.into_iter().map(Option::unwrap_or_default).collect();
        let answer = match reply {
            Reply::All => wire::join(&parts),
            Reply::Root => parts[0].clone(),
            Reply::Nothing => Vec::new(),
        };
        let children = tree::children(0, self.fanout, size);
        self.shared.tell(children, &Msg::Data { seq, bytes: answer });
        parts
    }

    /// Leaves in order: tells every rank, then waits (a while) until each
    /// has left, so that nobody mistakes this exit for a death.
    pub fn finish(&self) {
        self.shared.ending.store(true, Ordering::SeqCst);
        self.shared.tell_all(&Msg::Finish);
        let until = Instant::now() + LEAVE_WAIT;
        let mut left = self.shared.left.lock().unwrap_or_else(PoisonError::into_inner);
        while !left.iter().all(|&l| l) {
            let now = Instant::now();
            if now >= until {
                break;
            }
            left = self
                .shared
                .left_changed
                .wait_timeout(left, until - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Reads one rank's messages until it leaves; ends the job when it
/// aborts or vanishes.
fn read_rank(rank: usize, mut stream: TcpStream, shared: &Shared, parts: &Sender<Part>) {
    loop {
        match wire::read(&mut stream) {
            Ok(Msg::Data { seq, bytes }) => {
                if parts.send(Part { rank, seq, bytes }).is_err() {
                    break;
                }
            }
            // That rank printed why.
            Ok(Msg::Abort { code }) => shared.end_job(code, None),
            Ok(Msg::Bye) => break,
            Ok(_) | Err(_) if shared.ending.load(Ordering::SeqCst) => break,
            Ok(other) => {
                let info = &shared.ranks[rank];
                shared.end_job(
                    exit::RUNTIME,
                    Some(format!(
                        "collbench: rank {rank} on {} sent rank 0 an unexpected message ({other:?}); ending the job",
                        info.host
                    )),
                )
            }
            Err(_) => {
                let info = &shared.ranks[rank];
                shared.end_job(
                    exit::RUNTIME,
                    Some(format!(
                        "collbench: rank {rank} on {} (pid {}) ended without finishing the run: it died, was \
                         killed, or lost its connection to rank 0; ending the job",
                        info.host, info.pid
                    )),
                )
            }
        }
    }
    shared.mark_left(rank);
}
