//! The exchange the ranks of one in-memory communicator meet at, and the
//! sub-communicators splits make of it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use crate::buffer::HostBuffer;
use crate::error::Error;
use crate::types::DType;

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a rank thread panicked; the data is still
    // valid and the test reports the panic.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The exchange every rank of one communicator meets at, once per
/// operation: each publishes its input, all compute their outputs from
/// every input, all wait until everyone has read.
pub(super) struct Fabric {
    pub(super) nranks: usize,
    pub(super) state: Mutex<Rendezvous>,
    pub(super) turn: Condvar,
}

pub(super) struct Rendezvous {
    /// Each rank's input of the current operation.
    pub(super) inputs: Vec<HostBuffer>,
    pub(super) arrived: usize,
    /// Barriers completed; a waiting rank leaves when it moves.
    pub(super) generation: u64,
    /// Set when a rank failed or left: every later wait ends with it.
    pub(super) broken: Option<String>,
    /// Each rank's (colour, key) of the split in progress (`SubGroups`).
    pub(super) colors: Vec<(usize, usize)>,
    /// The fabrics splits made, by (split number, colour).
    pub(super) subs: Vec<((u64, usize), Arc<Fabric>)>,
    /// Point-to-point messages in flight, by (from, to), oldest first.
    pub(super) mail: BTreeMap<(usize, usize), VecDeque<Vec<u8>>>,
}

impl Fabric {
    pub(super) fn new(nranks: usize) -> Result<Fabric, Error> {
        let inputs = (0..nranks)
            .map(|_| HostBuffer::new(DType::Float, 0))
            .collect::<Result<_, _>>()?;
        Ok(Fabric {
            nranks,
            state: Mutex::new(Rendezvous {
                inputs,
                arrived: 0,
                generation: 0,
                broken: None,
                colors: vec![(0, 0); nranks],
                subs: Vec::new(),
                mail: BTreeMap::new(),
            }),
            turn: Condvar::new(),
        })
    }

    /// Waits until every rank has arrived (holding `state`), or the fabric
    /// broke.
    pub(super) fn barrier<'a>(
        &'a self,
        mut state: MutexGuard<'a, Rendezvous>,
    ) -> Result<MutexGuard<'a, Rendezvous>, Error> {
        if let Some(why) = &state.broken {
            return Err(Error::runtime(why.clone()));
        }
        let generation = state.generation;
        state.arrived += 1;
        if state.arrived == self.nranks {
            state.arrived = 0;
            state.generation += 1;
            self.turn.notify_all();
            return Ok(state);
        }
        loop {
            state = self.turn.wait(state).unwrap_or_else(PoisonError::into_inner);
            if state.generation != generation {
                return Ok(state);
            }
            if let Some(why) = &state.broken {
                return Err(Error::runtime(why.clone()));
            }
        }
    }

    /// Queues a message from `from` to `to` (an eager send).
    pub(super) fn post(&self, from: usize, to: usize, message: Vec<u8>) -> Result<(), Error> {
        if to >= self.nranks {
            return Err(Error::runtime(format!(
                "a send to rank {to} of a memory communicator of {}",
                self.nranks
            )));
        }
        let mut state = lock(&self.state);
        if let Some(why) = &state.broken {
            return Err(Error::runtime(why.clone()));
        }
        state.mail.entry((from, to)).or_default().push_back(message);
        self.turn.notify_all();
        Ok(())
    }

    /// The oldest message from `from` to `to`, waiting for one to arrive
    /// (or for the fabric to break).
    pub(super) fn take(&self, from: usize, to: usize) -> Result<Vec<u8>, Error> {
        if from >= self.nranks {
            return Err(Error::runtime(format!(
                "a receive from rank {from} of a memory communicator of {}",
                self.nranks
            )));
        }
        let mut state = lock(&self.state);
        loop {
            if let Some(m) = state.mail.get_mut(&(from, to)).and_then(VecDeque::pop_front) {
                return Ok(m);
            }
            if let Some(why) = &state.broken {
                return Err(Error::runtime(why.clone()));
            }
            state = self.turn.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    pub(super) fn break_with(&self, why: String) {
        let mut state = lock(&self.state);
        if state.broken.is_none() {
            state.broken = Some(why);
        }
        self.turn.notify_all();
    }
}
