//! Which data plane a run gets: `--backend mpi`, `nccl`, or `auto` (nccl
//! only when every rank has a GPU and libnccl, so that all ranks pick the
//! same). Every failure is agreed on and printed once.

use std::path::PathBuf;

use super::Session;
use crate::backend::Backend;
use crate::config::RunConfig;
use crate::error::Error;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{BackendChoice, BackendKind};
use crate::world::World;

#[cfg(feature = "nccl")]
use super::nccl_start as nccl;

/// Makes the mpi backend over these nodes, where the control plane is
/// MPI.
pub type MakeMpi<'a> = &'a dyn Fn(&Nodes) -> Result<Box<dyn Backend>, Error>;

/// The backend every rank agreed on, and what the header says about it.
pub struct Chosen {
    pub backend: Box<dyn Backend>,
    pub note: Option<String>,
}

/// What the NCCL bootstrap reads of the configuration, under the names
/// it reads them by (a build without NCCL reads none of it).
#[cfg_attr(not(feature = "nccl"), allow(dead_code))]
pub struct NcclStart {
    pub nccl_lib: Option<PathBuf>,
    pub hierarchies: Vec<Hierarchy>,
    pub no_comm_split: bool,
    pub register: bool,
    pub phase_times: bool,
    pub backend: BackendChoice,
    pub trace_bootstrap: Option<PathBuf>,
}

impl NcclStart {
    fn of(cfg: &RunConfig) -> NcclStart {
        NcclStart {
            nccl_lib: cfg.start.nccl_lib.clone(),
            hierarchies: cfg.plan.hierarchies.clone(),
            no_comm_split: cfg.hooks.no_comm_split,
            register: cfg.timing.register,
            phase_times: cfg.timing.phase_times,
            backend: cfg.start.backend,
            trace_bootstrap: cfg.hooks.trace_bootstrap.clone(),
        }
    }
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
        let nccl_cfg = NcclStart::of(cfg);
        let start = |found| nccl::start(world, &nccl_cfg, nodes, found).map_err(Error::Reported);
        match (cfg.start.backend, mpi_backend) {
            (BackendChoice::Only(BackendKind::Mpi), Some(make)) => agreed_mpi(None, make),
            (BackendChoice::Only(BackendKind::Mpi), None) => self.agreed(Err(Error::usage(
                "the mpi backend needs the MPI control plane: launch with mpirun and without -g, or use --backend nccl",
            ))),
            (BackendChoice::Only(BackendKind::Nccl), _) => start(None),
            // No `--backend` value names it; only tests make one.
            (BackendChoice::Only(BackendKind::Memory), _) => self.agreed(Err(Error::usage(
                "the memory backend is the engine's test backend, not one to run: use --backend mpi, nccl or auto",
            ))),
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
            (BackendChoice::Auto, Some(make)) => match nccl::probe(world, &nccl_cfg) {
                Ok(library) => start(Some(library)),
                Err(why) => agreed_mpi(Some(format!("auto: {why}, using mpi")), make),
            },
        }
    }
}

/// Without the nccl feature: `--backend nccl` is refused, `auto` is mpi.
#[cfg(not(feature = "nccl"))]
mod nccl {
    use super::*;
    use crate::error::exit;

    pub fn probe<W: World>(_world: &W, _cfg: &NcclStart) -> Result<std::convert::Infallible, String> {
        Err("this build has no nccl backend".into())
    }

    pub fn start<W: World>(
        world: &W,
        _cfg: &NcclStart,
        _layout: &Nodes,
        _found: Option<std::convert::Infallible>,
    ) -> Result<Chosen, u8> {
        let e: Result<(), Error> = Err(Error::usage(
            "--backend nccl: this build has no nccl backend; rebuild with the `nccl` feature (on by default)",
        ));
        match world.agree(e) {
            Ok(()) => Err(exit::USAGE),
            Err(d) => Err(d.code),
        }
    }
}
