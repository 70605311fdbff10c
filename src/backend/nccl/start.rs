//! The NCCL backend's start, in steps every rank takes together over the
//! control plane: whether every rank could run it at all (`probe`, for
//! `--backend auto`), then `start`: every rank loads libnccl; the ranks
//! settle which optional calls they all have (ncclCommSplit for the
//! hierarchical modes, ncclCommRegister for `-R`); rank 0 makes the unique
//! id (and, for hierarchical modes without ncclCommSplit, one id per
//! sub-communicator) and broadcasts the bundle; every rank opens its GPU;
//! then the collective communicator initialisation.
//!
//! Errors: a failure before the last step is agreed on by every rank and
//! printed once (`World::agree`), and comes back as `Error::Reported`; a
//! failure inside the collective initialisation comes back as it is, and
//! the caller must end the whole job (peers may be waiting inside NCCL).
//! Nothing here prints.

use std::path::PathBuf;

use super::{
    DeviceError, LoadError, NcclBackend, NcclLibrary, Options, Placing, Registration, SubSource, UniqueId, device,
    id_count, sys,
};
use crate::error::Error;
use crate::topology::Nodes;
use crate::types::Register;
use crate::world::World;

/// What the start reads of a run's configuration.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StartOptions {
    /// `--nccl-lib`.
    pub nccl_lib: Option<PathBuf>,
    /// The run has a hierarchical all-reduce mode: its sub-communicators
    /// are settled at start-up.
    pub hierarchical: bool,
    /// Test hook: make the sub-communicators from unique ids even where
    /// ncclCommSplit exists.
    pub no_comm_split: bool,
    /// `-R`.
    pub register: Register,
    /// `--phase-times`.
    pub phase_times: bool,
    /// Test hook (`--trace-bootstrap DIR`): each rank writes the ids it
    /// received to `DIR/rank-R.id`.
    pub trace_bootstrap: Option<PathBuf>,
    /// `--algo-record`: the choice, NCCL's private log to read the TUNING
    /// lines from (or why the run has none) and NCCL_PROFILER_PLUGIN;
    /// `None` where the run records nothing.
    pub algo_log: Option<crate::types::AlgoSetup>,
}

/// Whether every rank could run nccl, agreed over all ranks: the loaded
/// library where every rank can, else why not (this rank's reason, or that
/// another rank cannot), for `auto`'s note. Prints nothing.
pub fn probe<W: World>(world: &W, opts: &StartOptions) -> Result<NcclLibrary, Error> {
    let local = local_probe(opts);
    let everyone = world.min_u64(u64::from(local.is_ok())) == 1;
    match local {
        Ok(library) if everyone => Ok(library),
        Ok(_) => Err(Error::runtime("another rank has no usable GPU or NCCL")),
        Err(why) => Err(Error::Runtime(why)),
    }
}

/// GPU first (cheap, and the common reason on a laptop), then NCCL.
fn local_probe(opts: &StartOptions) -> Result<NcclLibrary, String> {
    match device::probe() {
        Ok(_) => {}
        Err(DeviceError::Driver(_)) => return Err("no CUDA driver".into()),
        Err(DeviceError::NoGpu { .. }) => return Err("no GPU visible".into()),
        Err(e) => return Err(format!("no usable GPU ({e})")),
    }
    NcclLibrary::find(opts.nccl_lib.as_deref()).map_err(|e| match e {
        LoadError::NotFound { .. } => "a GPU but no NCCL library (see `collbench info`)".into(),
        other => format!("a GPU but {other}"),
    })
}

/// A step every rank takes: `Ok` everywhere only if it succeeded
/// everywhere; otherwise the failure was printed once.
fn agreed<W: World, T>(world: &W, local: Result<T, Error>) -> Result<T, Error> {
    world.agree(local).map_err(|d| Error::Reported(d.code))
}

fn nccl_error(e: &dyn std::fmt::Display) -> Error {
    Error::runtime(format!("--backend nccl: {e}"))
}

/// The module comment's steps; `found` is the library `probe` loaded, if
/// it ran. `layout` is the run's nodes (hosts, or `--ranks-per-node`
/// groups).
pub fn start<W: World>(
    world: &W,
    opts: &StartOptions,
    layout: &Nodes,
    found: Option<NcclLibrary>,
) -> Result<NcclBackend, Error> {
    let library = match found {
        Some(library) => Ok(library),
        None => NcclLibrary::find(opts.nccl_lib.as_deref()).map_err(|e| nccl_error(&e)),
    };
    let library = agreed(world, library)?;
    let (id, sub_source, registration) = settle(world, opts, layout, &library)?;

    let nodes = world.nodes();
    let rank = world.rank();
    let ranks = world.ranks();
    // this process's ranks, and this rank's index among them
    let (process_ranks, process_index) = ranks.get(rank).map_or((1, 0), |me| {
        let mine = |r: &&crate::world::RankInfo| r.host == me.host && r.pid == me.pid;
        let before = ranks[..rank].iter().filter(mine).count();
        (ranks.iter().filter(mine).count(), before)
    });
    let placing = Placing {
        nranks: world.size(),
        rank,
        local_rank: nodes.local_rank(rank),
        local_ranks: nodes.local_size(rank),
        host: world.host().to_string(),
        process_ranks,
        process_index,
    };
    let chosen = std::env::var("NCCL_TESTS_DEVICE").ok();
    let device = NcclBackend::open_device(&placing, chosen.as_deref()).map_err(|e| nccl_error(&e));
    let device = agreed(world, device)?;
    agreed(world, one_rank_per_gpu(world, &device))?;
    let options = Options {
        nodes: layout.clone(),
        sub_source,
        time_phases: opts.phase_times,
        registration,
        algo_log: opts.algo_log.clone(),
    };
    // Collective, and not agreed: a rank that fails here must end the job.
    NcclBackend::init(library, device, &id, &placing, options)
}

/// The steps before the GPU opens, all agreed: which optional calls every
/// rank has, and the unique ids from rank 0. Only runs that ask for them
/// take the optional steps; every rank has the same configuration, so all
/// take the same ones.
fn settle<W: World>(
    world: &W,
    opts: &StartOptions,
    layout: &Nodes,
    library: &NcclLibrary,
) -> Result<(UniqueId, Option<SubSource>, Registration), Error> {
    let env = |name: &str| std::env::var(name).ok();
    agreed(
        world,
        blocking_communicators(library.version(), &library.describe(), &env),
    )?;
    let everyone = |has: bool| world.min_u64(u64::from(has)) == 1;
    let split = opts.hierarchical && !opts.no_comm_split && everyone(library.optional().comm_split);
    let group_ids = if opts.hierarchical && !split {
        id_count(layout)
    } else {
        0
    };
    let registration = match opts.register {
        Register::Off => Registration::Off,
        Register::Buffers if everyone(library.optional().comm_register) => Registration::On,
        Register::Buffers => Registration::Unavailable,
        Register::Symmetric => {
            agreed(world, symmetric_windows(library))?;
            Registration::Symmetric
        }
    };
    let made = if world.rank() == 0 {
        (0..1 + group_ids)
            .map(|_| library.unique_id().map(|id| id.0.to_vec()))
            .collect::<Result<Vec<Vec<u8>>, _>>()
            .map(|ids| ids.concat())
            .map_err(|e| nccl_error(&e))
    } else {
        Ok(Vec::new())
    };
    let made = agreed(world, made)?;
    let ids = UniqueId::split_bundle(&world.broadcast_bytes(&made), 1 + group_ids);
    let ids = agreed(world, ids.and_then(|ids| trace(opts, world.rank(), &ids).map(|()| ids)))?;
    let sub_source = match (opts.hierarchical, split) {
        (false, _) => None,
        (true, true) => Some(SubSource::Split),
        (true, false) => Some(SubSource::Ids(ids[1..].to_vec())),
    };
    Ok((ids[0], sub_source, registration))
}

/// Ranks of one host that opened the same GPU (the same PCI location: a
/// CUDA_VISIBLE_DEVICES or NCCL_TESTS_DEVICE that gives two ranks one
/// device) are refused before NCCL refuses them less clearly ("Duplicate
/// GPU detected"). Collective: every rank gathers every rank's location.
fn one_rank_per_gpu<W: World>(world: &W, device: &super::Device) -> Result<(), Error> {
    let mine = device.pci_location().map_err(|e| nccl_error(&e));
    // a rank that cannot read its location still takes part in the gather
    let all = world.all_gather_u64s(&[*mine.as_ref().unwrap_or(&u64::MAX)]);
    mine?;
    let ranks = world.ranks();
    let me = world.rank();
    let shared = (0..all.len())
        .find(|&r| r != me && all[r] == all[me] && ranks.get(r).map(|x| &x.host) == ranks.get(me).map(|x| &x.host));
    match shared {
        Some(other) => Err(nccl_error(&super::DeviceError::SharedGpu {
            host: world.host().to_string(),
            first: other.min(me),
            second: other.max(me),
            pci: format!(
                "{:04x}:{:02x}:{:02x}",
                all[me] >> 32,
                (all[me] >> 16) & 0xffff,
                all[me] & 0xffff
            ),
        })),
        None => Ok(()),
    }
}

/// `-R 2` on this rank's library: symmetric windows need
/// ncclCommWindowRegister (NCCL 2.27 and later) and buffers from
/// ncclMemAlloc; else a usage error, in one line. nccl-tests falls back to
/// `-R 1` there; collbench refuses, so that a run never measures something
/// else than it was asked to.
fn symmetric_windows(library: &NcclLibrary) -> Result<(), Error> {
    let opt = library.optional();
    let lacks = if library.version() < sys::WINDOW_SINCE {
        Some(format!("needs NCCL {} or later", sys::WINDOW_SINCE))
    } else if !opt.comm_window_register {
        Some("needs ncclCommWindowRegister and ncclCommWindowDeregister, which it lacks".into())
    } else if !opt.mem_alloc {
        Some("needs buffers from ncclMemAlloc, which it lacks".into())
    } else {
        None
    };
    match lacks {
        Some(why) => Err(Error::usage(format!(
            "-R 2 (symmetric registration, ncclCommWindowRegister) {why}: this rank's library is {}; use -R 1 or -R 0",
            library.describe()
        ))),
        None => Ok(()),
    }
}

/// NCCL_COMM_BLOCKING=0 makes every communicator non-blocking from NCCL
/// 2.17 on, whatever the configuration asks (v2.18.3-1 src/init.cc:1406-1408,
/// v2.30.7-1 src/init.cc:1998-1999): its creation returns ncclInProgress
/// and every call may, which collbench does not drive; refused in one line
/// before any communicator exists. NCCL reads the value with strtoll (base
/// 0: `00`, `0x0` and text without digits are 0 too); other values than 0
/// and 1 are ignored, as by NCCL.
fn blocking_communicators(
    version: sys::NcclVersion,
    library: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), Error> {
    let Some(text) = env("NCCL_COMM_BLOCKING") else {
        return Ok(());
    };
    // strtoll: no digits read as 0 too (v2.30.7-1 src/misc/param.cc:93-95)
    let value = crate::types::read_c_integer(&text).map_or(0, |(v, _)| v);
    if value == 0 && version >= sys::NcclVersion::new(2, 17, 0) {
        return Err(Error::usage(format!(
            "NCCL_COMM_BLOCKING={text} makes {library}'s communicators non-blocking, which collbench does not drive; \
             unset it (or set it to 1)"
        )));
    }
    Ok(())
}

/// Test hook (`--trace-bootstrap DIR`): the ids this rank received, one
/// per line (the flat communicator's first).
fn trace(opts: &StartOptions, rank: usize, ids: &[UniqueId]) -> Result<(), Error> {
    let Some(dir) = &opts.trace_bootstrap else {
        return Ok(());
    };
    let path = dir.join(format!("rank-{rank}.id"));
    let text: String = ids.iter().map(|id| id.hex() + "\n").collect();
    std::fs::write(&path, text).map_err(|e| Error::runtime(format!("cannot write {}: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nccl_comm_blocking_0_is_refused_from_2_17_in_every_spelling_nccl_reads_as_0() {
        let check = |v: (u32, u32, u32), env: &dyn Fn(&str) -> Option<String>| {
            blocking_communicators(sys::NcclVersion::new(v.0, v.1, v.2), "NCCL x", env)
        };
        for text in ["0", "00", "0x0", "off"] {
            let env = |_: &str| Some(text.to_string());
            let e = check((2, 17, 1), &env).unwrap_err().to_string();
            assert!(
                e.contains(&format!("NCCL_COMM_BLOCKING={text}")) && e.contains("non-blocking"),
                "{e}"
            );
            assert!(check((2, 16, 5), &env).is_ok());
        }
        for text in ["1", "2", "-1"] {
            let env = |_: &str| Some(text.to_string());
            assert!(check((2, 30, 7), &env).is_ok(), "{text}");
        }
        assert!(check((2, 30, 7), &|_| None).is_ok());
    }
}
