//! Which data plane a run gets: `--backend mpi`, `nccl`, `memory` (the
//! ranks of `-g N` as threads on host memory), or `auto` (nccl only when
//! every rank has a GPU and libnccl, so that all ranks pick the same). Every failure is agreed on and printed once, but one inside
//! NCCL's collective initialisation, which ends the whole job. The NCCL
//! bootstrap itself is the backend's (`backend::nccl::start`).

use super::Session;
use crate::backend::Backend;
use crate::config::RunConfig;
use crate::error::Error;
use crate::topology::Nodes;
use crate::types::{BackendChoice, BackendKind};
use crate::world::World;

/// Makes the mpi backend over these nodes, where the control plane is
/// MPI.
pub type MakeMpi<'a> = &'a dyn Fn(&Nodes) -> Result<Box<dyn Backend>, Error>;

/// The backend every rank agreed on, and what the header says about it.
pub struct Chosen {
    pub backend: Box<dyn Backend>,
    pub note: Option<String>,
}

impl<W: World> Session<'_, W> {
    /// Picks the data plane over `nodes`; `mpi_backend` makes the mpi one
    /// where the control plane is MPI.
    pub(super) fn choose_backend(&self, nodes: &Nodes, mpi_backend: Option<MakeMpi<'_>>) -> Result<Chosen, Error> {
        let (world, cfg) = (self.world, self.cfg);
        let agreed_mpi = |note: Option<String>, make: MakeMpi<'_>| -> Result<Chosen, Error> {
            let backend = self.agreed(make(nodes))?;
            Ok(Chosen { backend, note })
        };
        let start = |found| match nccl::start(world, cfg, nodes, found) {
            Ok(backend) => Ok(Chosen {
                backend,
                note: (cfg.start.backend == BackendChoice::Auto)
                    .then(|| "auto: every rank has a GPU and NCCL, using nccl".to_string()),
            }),
            Err(e @ Error::Reported(_)) => Err(e),
            // A failure inside the collective initialisation: peers may be
            // waiting inside NCCL, so the whole job ends.
            Err(e) => self.fail(&e),
        };
        match (cfg.start.backend, mpi_backend) {
            (BackendChoice::Only(BackendKind::Mpi), Some(make)) => agreed_mpi(None, make),
            (BackendChoice::Only(BackendKind::Mpi), None) => self.agreed(Err(Error::usage(
                "the mpi backend needs MPI for its collectives: launch with mpirun or srun --mpi=pmix, without -g (this \
                 launch has no MPI), or use --backend nccl",
            ))),
            (BackendChoice::Only(BackendKind::Nccl), _) => start(None),
            (BackendChoice::Only(BackendKind::Memory), _) => Ok(Chosen {
                backend: self.agreed(memory::join(world))?,
                note: Some("ranks are threads of this process, collectives are copies in host memory".into()),
            }),
            // Without MPI, auto can only be nccl: its own errors say best
            // what is missing.
            (BackendChoice::Auto, None) => start(None),
            // An MPI transport profile asks for the mpi backend.
            (BackendChoice::Auto, Some(make)) if cfg.start.transport.backend() == Some(BackendKind::Mpi) => {
                let why = format!(
                    "auto: --transport {} is an MPI profile, using mpi",
                    cfg.start.transport.name()
                );
                agreed_mpi(Some(why), make)
            }
            (BackendChoice::Auto, Some(make)) => match nccl::probe(world, cfg) {
                Ok(library) => start(Some(library)),
                Err(why) => agreed_mpi(Some(format!("auto: {why}, using mpi")), make),
            },
        }
    }
}

/// The NCCL backend's start (`backend::nccl::start`), given what it reads
/// of the configuration.
#[cfg(feature = "nccl")]
mod nccl {
    use super::*;
    use crate::backend::nccl::NcclLibrary;
    use crate::backend::nccl::start::{self, StartOptions};

    fn options(cfg: &RunConfig) -> StartOptions {
        StartOptions {
            nccl_lib: cfg.start.nccl_lib.clone(),
            hierarchical: cfg.plan.hierarchies.iter().any(|h| !h.is_flat()),
            no_comm_split: cfg.hooks.no_comm_split,
            register: cfg.timing.register,
            phase_times: cfg.timing.phase_times,
            trace_bootstrap: cfg.hooks.trace_bootstrap.clone(),
        }
    }

    pub fn probe<W: World>(world: &W, cfg: &RunConfig) -> Result<NcclLibrary, Error> {
        start::probe(world, &options(cfg))
    }

    pub fn start<W: World>(
        world: &W,
        cfg: &RunConfig,
        nodes: &Nodes,
        found: Option<NcclLibrary>,
    ) -> Result<Box<dyn Backend>, Error> {
        start::start(world, &options(cfg), nodes, found).map(|b| Box::new(b) as Box<dyn Backend>)
    }
}

/// Without the nccl feature: `--backend nccl` is refused, `auto` is mpi.
#[cfg(not(feature = "nccl"))]
mod nccl {
    use super::*;

    pub fn probe<W: World>(_world: &W, _cfg: &RunConfig) -> Result<std::convert::Infallible, Error> {
        Err(Error::runtime("this build has no nccl backend"))
    }

    pub fn start<W: World>(
        world: &W,
        _cfg: &RunConfig,
        _nodes: &Nodes,
        _found: Option<std::convert::Infallible>,
    ) -> Result<Box<dyn Backend>, Error> {
        let refused = Err(Error::usage(
            "--backend nccl: this build has no nccl backend; rebuild with the `nccl` feature (on by default)",
        ));
        world.agree(refused).map_err(|d| Error::Reported(d.code))
    }
}

/// `--backend memory`: one in-memory communicator over the ranks, which
/// must all be threads of this process (`-g N`, or one rank alone).
mod memory {
    use std::collections::BTreeMap;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Mutex, PoisonError};

    use crate::backend::Backend;
    use crate::backend::memory::MemoryBackend;
    use crate::error::Error;
    use crate::world::World;

    /// The communicators rank 0 made, each rank's backend until it takes
    /// it, by the key rank 0 broadcast.
    static MADE: Mutex<BTreeMap<u64, Vec<Option<MemoryBackend>>>> = Mutex::new(BTreeMap::new());
    static NEXT_KEY: AtomicU64 = AtomicU64::new(1);

    /// This rank's backend of a communicator rank 0 makes; every rank
    /// calls it (the check of the ranks is the same on each, so that all
    /// or none reach the broadcast).
    pub fn join<W: World>(world: &W) -> Result<Box<dyn Backend>, Error> {
        let me = std::process::id();
        if world.ranks().iter().any(|r| r.pid != me || r.host != world.host()) {
            return Err(Error::usage(
                "--backend memory runs the ranks as threads of one process: use -g N without a launcher \
                 (mpirun, srun), or --backend mpi",
            ));
        }
        let made = if world.rank() == 0 {
            let key = NEXT_KEY.fetch_add(1, Ordering::Relaxed);
            let backends = MemoryBackend::create(world.size()).map(|b| b.into_iter().map(Some).collect());
            backends.map(|b| {
                MADE.lock().unwrap_or_else(PoisonError::into_inner).insert(key, b);
                key
            })
        } else {
            Ok(0)
        };
        let key_bytes = world.broadcast_bytes(&made.as_ref().map(|k| k.to_le_bytes()).unwrap_or([0; 8]));
        let key = u64::from_le_bytes(key_bytes.try_into().unwrap_or([0; 8]));
        made?;
        let mut table = MADE.lock().unwrap_or_else(PoisonError::into_inner);
        let backend = table
            .get_mut(&key)
            .and_then(|ranks| ranks.get_mut(world.rank()))
            .and_then(Option::take)
            .ok_or_else(|| Error::runtime("rank 0 could not make the in-memory communicator"))?;
        if table.get(&key).is_some_and(|ranks| ranks.iter().all(Option::is_none)) {
            table.remove(&key);
        }
        Ok(Box::new(backend))
    }
}
