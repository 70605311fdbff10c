//! The NCCL data plane's start: library, unique id, GPU, communicator.
//!
//! Moved verbatim from `app.rs` (`mod session::nccl`), its configuration
//! type renamed from `RunConfig` to `NcclStart` (the fields it reads, under
//! the same names); it moves into the NCCL backend in phase 2 of issue 12.

use super::*;
use crate::backend::nccl::{
    DeviceError, LoadError, NcclBackend, NcclLibrary, Options, Placing, Registration, SubSource, UniqueId, device,
    id_count,
};

/// Whether this rank could run nccl, agreed over all ranks: `Ok`
/// with the loaded library where every rank can, else why not (this
/// rank's reason, or that another rank cannot).
pub fn probe<W: World>(world: &W, cfg: &NcclStart) -> Result<NcclLibrary, String> {
    let local = local_probe(cfg);
    let everyone = world.min_u64(u64::from(local.is_ok())) == 1;
    match local {
        Ok(library) if everyone => Ok(library),
        Ok(_) => Err("another rank has no usable GPU or NCCL".into()),
        Err(why) => Err(why),
    }
}

/// GPU first (cheap, and the common reason on a laptop), then NCCL.
fn local_probe(cfg: &NcclStart) -> Result<NcclLibrary, String> {
    match device::probe() {
        Ok(_) => {}
        Err(DeviceError::Driver(_)) => return Err("no CUDA driver".into()),
        Err(DeviceError::NoGpu { .. }) => return Err("no GPU visible".into()),
        Err(e) => return Err(format!("no usable GPU ({e})")),
    }
    NcclLibrary::find(cfg.nccl_lib.as_deref()).map_err(|e| match e {
        LoadError::NotFound { .. } => "a GPU but no NCCL library (see `collbench info`)".into(),
        other => format!("a GPU but {other}"),
    })
}

fn agreed<W: World, T>(world: &W, local: Result<T, Error>) -> Result<T, u8> {
    world.agree(local).map_err(|d| d.code)
}

/// Bootstrap, in steps every rank takes together: every rank loads
/// libnccl; the ranks settle which optional calls they all have
/// (ncclCommSplit for the hierarchical modes, ncclCommRegister for
/// `-R`); rank 0 makes the unique id (and, for hierarchical modes
/// without ncclCommSplit, one id per sub-communicator) and
/// broadcasts them over the control plane; every rank opens its
/// GPU; then the collective communicator initialisation. A failure
/// before the last step is agreed on and printed once; a failure
/// inside it takes the job down (peers may be waiting inside NCCL).
pub fn start<W: World>(world: &W, cfg: &NcclStart, layout: &Nodes, found: Option<NcclLibrary>) -> Result<Chosen, u8> {
    let nccl_error = |e: &dyn std::fmt::Display| Error::runtime(format!("--backend nccl: {e}"));
    let library = match found {
        Some(library) => Ok(library),
        None => NcclLibrary::find(cfg.nccl_lib.as_deref()).map_err(|e| nccl_error(&e)),
    };
    let library = agreed(world, library)?;
    let everyone = |has: bool| world.min_u64(u64::from(has)) == 1;

    // Only runs that ask for them take these collective steps; every
    // rank has the same configuration, so all take the same ones.
    let hierarchical = cfg.hierarchies.iter().any(|h| !h.is_flat());
    let split = hierarchical && !cfg.no_comm_split && everyone(library.optional().comm_split);
    let group_ids = if hierarchical && !split { id_count(layout) } else { 0 };
    let registration = match cfg.register {
        false => Registration::Off,
        true if everyone(library.optional().comm_register) => Registration::On,
        true => Registration::Unavailable,
    };

    let ids = if world.rank() == 0 {
        (0..1 + group_ids)
            .map(|_| library.unique_id().map(|id| id.0.to_vec()))
            .collect::<Result<Vec<Vec<u8>>, _>>()
            .map(|ids| ids.concat())
            .map_err(|e| nccl_error(&e))
    } else {
        Ok(Vec::new())
    };
    let ids = agreed(world, ids)?;
    let ids = UniqueId::split_bundle(&world.broadcast_bytes(&ids), 1 + group_ids);
    let ids = agreed(world, ids.and_then(|ids| trace(cfg, world.rank(), &ids).map(|()| ids)))?;
    let (id, group_ids) = (ids[0], ids[1..].to_vec());
    let sub_source = match (hierarchical, split) {
        (false, _) => None,
        (true, true) => Some(SubSource::Split),
        (true, false) => Some(SubSource::Ids(group_ids)),
    };

    let nodes = world.nodes();
    let rank = world.rank();
    let placing = Placing {
        nranks: world.size(),
        rank,
        local_rank: nodes.local_rank(rank),
        local_ranks: nodes.local_size(rank),
        host: world.host().to_string(),
    };
    let device = NcclBackend::open_device(&placing).map_err(|e| nccl_error(&e));
    let device = agreed(world, device)?;

    let options = Options {
        nodes: layout.clone(),
        sub_source,
        time_phases: cfg.phase_times,
        registration,
    };
    match NcclBackend::init(library, device, &id, &placing, options) {
        Ok(backend) => Ok(Chosen {
            backend: Box::new(backend),
            note: (cfg.backend == BackendChoice::Auto)
                .then(|| "auto: every rank has a GPU and NCCL, using nccl".to_string()),
        }),
        Err(e) => {
            eprintln!("{}", world.error_line(&e));
            world.abort(e.exit_code())
        }
    }
}

/// Test hook (`--trace-bootstrap DIR`): the ids this rank received,
/// one per line (the flat communicator's first).
fn trace(cfg: &NcclStart, rank: usize, ids: &[UniqueId]) -> Result<(), Error> {
    let Some(dir) = &cfg.trace_bootstrap else {
        return Ok(());
    };
    let path = dir.join(format!("rank-{rank}.id"));
    let text: String = ids.iter().map(|id| id.hex() + "\n").collect();
    std::fs::write(&path, text).map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))
}
