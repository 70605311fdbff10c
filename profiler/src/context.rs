//! One communicator's context: its records in a ring of atomic words,
//! written by NCCL's thread that schedules the communicator's collectives
//! (one at a time: a communicator is not used by two threads at once) and
//! read by collbench (`query`); and the registry of live contexts, which
//! only `init`, `finalize` and the queries lock.

use std::ffi::c_int;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// Records a context holds before its reader takes them: a point of more
/// launches per rank than this loses the newest (counted as dropped).
pub const CAPACITY: usize = 1 << 16;
/// Atomic words per record.
const WORDS: usize = 5;

/// One collective event, as the plugin keeps it and collbench reads it
/// (`query`; collbench's src/backend/nccl/profiler.rs declares the same
/// layout, 40 bytes). The codes are NCCL's (`codes`), 255 for a name the
/// plugin does not know.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub comm_hash: u64,
    pub seq: u64,
    pub count: u64,
    pub rank: c_int,
    pub func: u8,
    pub datatype: u8,
    pub algo: u8,
    pub proto: u8,
    pub nchannels: u8,
    pub nwarps: u8,
    pub pad: [u8; 2],
}

impl Record {
    fn pack(&self) -> [u64; WORDS] {
        let small = u64::from(self.func)
            | u64::from(self.datatype) << 8
            | u64::from(self.algo) << 16
            | u64::from(self.proto) << 24
            | u64::from(self.nchannels) << 32
            | u64::from(self.nwarps) << 40;
        [self.comm_hash, self.seq, self.count, small, self.rank as u32 as u64]
    }

    fn unpack(w: [u64; WORDS]) -> Record {
        let byte = |shift: u32| (w[3] >> shift) as u8;
        Record {
            comm_hash: w[0],
            seq: w[1],
            count: w[2],
            rank: w[4] as u32 as c_int,
            func: byte(0),
            datatype: byte(8),
            algo: byte(16),
            proto: byte(24),
            nchannels: byte(32),
            nwarps: byte(40),
            pad: [0; 2],
        }
    }
}

/// A communicator's context (the `void*` NCCL hands back on each event).
pub struct Context {
    /// Its place in the order of `init`s (1 the first): collbench's key.
    pub id: u64,
    /// The thread that called `init` (the one that made the communicator:
    /// NCCL runs a blocking communicator's creation on its caller).
    pub thread: u64,
    /// The communicator's hash from `init` (v4 on), else 0.
    pub comm_hash: u64,
    /// Its rank: from `init` (v4 on), else from the first event; -1 before.
    pub rank: AtomicI64,
    slots: Box<[AtomicU64]>,
    /// Records written (the writer's), and taken (the reader's).
    head: AtomicU64,
    tail: AtomicU64,
    /// Records lost to a full ring since the last read.
    dropped: AtomicU64,
}

/// A pointer to a live context, kept by the registry.
struct Live(*mut Context);
// SAFETY: a context is shared by NCCL's thread and collbench's reader only
// through its atomics; the registry's lock orders its creation and freeing.
unsafe impl Send for Live {}

struct Registry {
    live: Vec<Live>,
    made: u64,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    live: Vec::new(),
    made: 0,
});

/// The registry, whatever a panic under its lock left (none is expected).
pub fn registry_len() -> u64 {
    lock().made
}

fn lock() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// This thread's key: the address of a thread-local, unique among the
/// threads alive at once.
pub fn thread_key() -> u64 {
    thread_local! { static KEY: u8 = const { 0 }; }
    KEY.with(|k| k as *const u8 as u64)
}

impl Context {
    /// A new context, registered; `None` where its ring cannot be
    /// allocated.
    pub fn register(comm_hash: u64, rank: c_int) -> Option<*mut Context> {
        let mut words = Vec::new();
        words.try_reserve_exact(CAPACITY * WORDS).ok()?;
        words.resize_with(CAPACITY * WORDS, || AtomicU64::new(0));
        let mut reg = lock();
        reg.made += 1;
        let ctx = Box::into_raw(Box::new(Context {
            id: reg.made,
            thread: thread_key(),
            comm_hash,
            rank: AtomicI64::new(i64::from(rank)),
            slots: words.into_boxed_slice(),
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        }));
        reg.live.push(Live(ctx));
        Some(ctx)
    }

    /// Frees `ctx` if it is a live context of this registry.
    pub fn unregister(ctx: *mut Context) {
        let mut reg = lock();
        if let Some(at) = reg.live.iter().position(|l| l.0 == ctx) {
            reg.live.swap_remove(at);
            // SAFETY: `ctx` came from Box::into_raw in `register` and was
            // still registered; removed under the lock, so no query holds
            // it, and NCCL sends no event after `finalize`.
            drop(unsafe { Box::from_raw(ctx) });
        }
    }

    /// Appends `rec` (the writer's side); a full ring counts it dropped.
    pub fn push(&self, rec: &Record) {
        if self.rank.load(Ordering::Relaxed) < 0 {
            self.rank.store(i64::from(rec.rank), Ordering::Relaxed);
        }
        let head = self.head.load(Ordering::Relaxed);
        if head - self.tail.load(Ordering::Acquire) >= CAPACITY as u64 {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let at = (head as usize % CAPACITY) * WORDS;
        let mut w = rec.pack();
        if w[0] == 0 {
            w[0] = self.comm_hash;
        }
        for (slot, word) in self.slots[at..at + WORDS].iter().zip(w) {
            slot.store(word, Ordering::Relaxed);
        }
        self.head.store(head + 1, Ordering::Release);
    }

    /// Takes up to `out.len()` records (the reader's side): how many, and
    /// how many were dropped since the last take.
    fn take(&self, out: &mut [Record]) -> (usize, u64) {
        let head = self.head.load(Ordering::Acquire);
        let tail = self.tail.load(Ordering::Relaxed);
        let n = ((head - tail) as usize).min(out.len());
        for (i, rec) in out.iter_mut().take(n).enumerate() {
            let at = ((tail as usize + i) % CAPACITY) * WORDS;
            let mut w = [0u64; WORDS];
            for (word, slot) in w.iter_mut().zip(&self.slots[at..at + WORDS]) {
                *word = slot.load(Ordering::Relaxed);
            }
            *rec = Record::unpack(w);
        }
        self.tail.store(tail + n as u64, Ordering::Release);
        (n, self.dropped.swap(0, Ordering::Relaxed))
    }
}

/// The first live context made after the `since`th `init`, by this
/// thread: its id, or 0.
pub fn find(since: u64) -> u64 {
    let me = thread_key();
    let reg = lock();
    reg.live
        .iter()
        // SAFETY: registered contexts are live while the lock is held.
        .map(|l| unsafe { &*l.0 })
        .filter(|c| c.id > since && c.thread == me)
        .map(|c| c.id)
        .min()
        .unwrap_or(0)
}

/// Takes context `id`'s records into `out`: (records, dropped), or `None`
/// where no live context has that id.
pub fn take(id: u64, out: &mut [Record]) -> Option<(usize, u64)> {
    let reg = lock();
    reg.live
        .iter()
        // SAFETY: registered contexts are live while the lock is held.
        .map(|l| unsafe { &*l.0 })
        .find(|c| c.id == id)
        .map(|c| c.take(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(seq: u64) -> Record {
        Record {
            comm_hash: 0,
            seq,
            count: 1024,
            rank: 3,
            func: 4,
            datatype: 7,
            algo: 1,
            proto: 2,
            nchannels: 2,
            nwarps: 16,
            pad: [0; 2],
        }
    }

    /// Records come back in order, whole, once each; a full ring drops
    /// the newest and says how many; the context's hash fills a record's.
    #[test]
    fn the_ring_hands_each_record_once_and_counts_what_it_dropped() {
        let ctx = Context::register(0xabc, -1).unwrap();
        let id = find(0);
        assert!(id > 0);
        // SAFETY: registered above, unregistered at the end.
        let c = unsafe { &*ctx };
        assert_eq!(c.id, id);
        for s in 0..3 {
            c.push(&rec(s));
        }
        assert_eq!(c.rank.load(Ordering::Relaxed), 3);
        let mut out = vec![Record::default(); 2];
        assert_eq!(take(id, &mut out), Some((2, 0)));
        assert_eq!(
            out[1],
            Record {
                comm_hash: 0xabc,
                ..rec(1)
            }
        );
        assert_eq!(take(id, &mut out), Some((1, 0)));
        assert_eq!(out[0].seq, 2);
        for s in 0..CAPACITY as u64 + 5 {
            c.push(&rec(s));
        }
        let mut all = vec![Record::default(); CAPACITY + 10];
        assert_eq!(take(id, &mut all), Some((CAPACITY, 5)));
        assert_eq!(all[CAPACITY - 1].seq, CAPACITY as u64 - 1);
        Context::unregister(ctx);
        assert_eq!(take(id, &mut out), None);
        // another thread's context is not this thread's
        let before = registry_len();
        let other = std::thread::spawn(|| Context::register(1, 0).map(|p| p as usize))
            .join()
            .unwrap()
            .unwrap();
        assert_eq!(find(before), 0);
        Context::unregister(other as *mut Context);
    }
}
