//! The plan: every case a run measures, in order, built once from the
//! validated configuration, the rank count and what the backend supports.
//! A leaf of the crate: it knows the vocabulary, collectives and nodes, and
//! a backend only as a plain `Capabilities` value; engine and backends use
//! it, never the reverse.
//!
//! Order: collective, hierarchy mode (all_reduce only), type, operation,
//! root, size; each case is then
//! measured out-of-place and in-place. Sizes whose buffers round to zero
//! elements, or to the same buffers as the previous size, are skipped (at
//! 4 ranks a 8-byte float all_gather has no whole element per rank).

use crate::collective::{Collective, Shape, Traffic};
use crate::error::Error;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{AlgoPin, Choice, DType, Named, Placement, ReduceOp, RootChoice, SplitRule, human_bytes};

/// Most sizes one sweep may have; beyond it the step is surely a mistake.
pub const MAX_SIZES: usize = 4096;

/// What a run measures, as the user chose it (`config` validates it;
/// `Plan::build` turns it into cases once the ranks and the backend are
/// known).
#[derive(Clone, Debug, PartialEq)]
pub struct PlanConfig {
    pub sweep: SizeSweep,
    pub collectives: Vec<Collective>,
    pub dtypes: Choice<DType>,
    pub ops: Choice<ReduceOp>,
    pub roots: RootChoice,
    /// All-reduce modes to run (other collectives always run flat); `all`
    /// is every mode the backend runs (`hierarchies_on`).
    pub hierarchies: Choice<Hierarchy>,
    /// Virtual nodes of this many consecutive ranks, instead of hosts.
    pub ranks_per_node: Option<usize>,
    /// alltoallv's traffic: nccl-tests' generated pattern, or a matrix.
    pub traffic: Traffic,
    /// `--split`: parallel groups, each running the sweep on its own
    /// sub-communicator (`engine::groups`).
    pub split: Option<SplitRule>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Factor(u64),
    Bytes(u64),
}

/// Requested sizes, in bytes: `min`, then stepping while `<= max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SizeSweep {
    pub min: u64,
    pub max: u64,
    pub step: Step,
}

impl SizeSweep {
    pub fn new(min: u64, max: u64, step: Step) -> Result<SizeSweep, Error> {
        if min == 0 {
            return Err(Error::usage("--minbytes must be at least 1 byte"));
        }
        if min > max {
            return Err(Error::usage(format!(
                "--minbytes {min} is larger than --maxbytes {max}"
            )));
        }
        match step {
            Step::Factor(f) if f < 2 => {
                return Err(Error::usage("--stepfactor must be at least 2 to step by factor"));
            }
            Step::Bytes(0) => return Err(Error::usage("--stepbytes must be at least 1 byte")),
            _ => {}
        }
        let sweep = SizeSweep { min, max, step };
        let n = sweep.len();
        if n > MAX_SIZES {
            return Err(Error::usage(format!(
                "the sweep from {min} to {max} bytes has {n} sizes, more than {MAX_SIZES}; use a larger --stepfactor or --stepbytes"
            )));
        }
        Ok(sweep)
    }

    fn next(&self, size: u64) -> Option<u64> {
        let next = match self.step {
            Step::Factor(f) => size.checked_mul(f)?,
            Step::Bytes(b) => size.checked_add(b)?,
        };
        (next <= self.max).then_some(next)
    }

    /// Number of sizes, computed without listing them.
    fn len(&self) -> usize {
        match self.step {
            Step::Bytes(b) => usize::try_from((self.max - self.min) / b + 1).unwrap_or(usize::MAX),
            Step::Factor(_) => self.sizes().len(),
        }
    }

    pub fn sizes(&self) -> Vec<u64> {
        std::iter::successors(Some(self.min), |&s| self.next(s)).collect()
    }
}

/// One measured case (each runs in both placements).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Case {
    pub collective: Collective,
    pub hierarchy: Hierarchy,
    pub dtype: DType,
    pub op: Option<ReduceOp>,
    pub root: Option<usize>,
    pub shape: Shape,
}

impl Case {
    pub fn size_bytes(&self) -> u64 {
        self.shape.size_bytes(self.dtype)
    }

    /// Whether a sweep pinned to `pin` measures this case: a flat
    /// collective NCCL tunes, of those the pinned algorithm runs.
    pub fn runs_pinned(&self, pin: AlgoPin) -> bool {
        self.hierarchy.is_flat()
            && crate::collective::nccl_tunes(self.collective)
            && pin
                .algo
                .is_none_or(|a| crate::collective::algo_runs(self.collective, a))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub nranks: usize,
    pub cases: Vec<Case>,
}

impl Plan {
    /// The cases of `cfg` at the ranks of `nodes`, in sweep order, each
    /// checked against what the backend can run (`caps`); every refusal is
    /// one line naming the option.
    pub fn build(cfg: &PlanConfig, caps: &Capabilities, nodes: &Nodes) -> Result<Plan, Error> {
        Plan::build_at(cfg, caps, nodes, nodes.nranks())
    }

    /// The cases of `cfg` on a communicator of `nranks` ranks (with
    /// `--split`, this rank's group; its collectives run flat).
    pub fn build_at(cfg: &PlanConfig, caps: &Capabilities, nodes: &Nodes, nranks: usize) -> Result<Plan, Error> {
        let dtypes = chosen(&cfg.dtypes, |t| caps.check_dtype(t))?;
        let ops = chosen(&cfg.ops, |op| caps.check_op(op))?;
        let roots = roots(cfg.roots, nranks)?;
        let modes = cfg.hierarchies_on(caps)?;
        check_node_layout(cfg, &modes, &ops, nodes)?;
        check_traffic(cfg, nranks)?;
        if let Some(why) = &caps.refused_extras {
            return Err(Error::usage(why.clone()));
        }
        let mut cases = Vec::new();
        for group in groups(cfg, &modes, &dtypes, &ops, &roots) {
            cases.extend(sized_cases(group, &cfg.sweep, cfg.traffic, caps, nranks)?);
        }
        if cases.is_empty() {
            return Err(Error::usage(format!(
                "nothing to measure: every size up to --maxbytes {} rounds to zero elements at {nranks} ranks",
                cfg.sweep.max
            )));
        }
        Ok(Plan { nranks, cases })
    }

    /// The cases a sweep pinned to `pin` measures (`--algo`, `--proto`):
    /// the flat collectives NCCL tunes, of those the pinned algorithm
    /// runs (`collective::algo_runs`).
    pub fn pinned(&self, pin: AlgoPin) -> Plan {
        Plan {
            nranks: self.nranks,
            cases: self.cases.iter().copied().filter(|c| c.runs_pinned(pin)).collect(),
        }
    }

    /// The collectives of the plan, each once, in sweep order.
    pub fn collectives(&self) -> Vec<Collective> {
        let mut seen = Vec::new();
        for c in &self.cases {
            if !seen.contains(&c.collective) {
                seen.push(c.collective);
            }
        }
        seen
    }

    /// Measured points: every case in both placements.
    pub fn points(&self) -> usize {
        self.cases.len() * 2
    }

    /// What the backend allocates for every case (`Backend::reserve`),
    /// rotating through buffers of the largest span with `rotate`.
    pub fn reservation(&self, rotate: bool) -> Reservation {
        let mut r = Reservation::of(self.cases.iter().map(|c| (c.hierarchy, c.dtype, c.shape)), rotate);
        r.sendrecv = self.cases.iter().any(|c| c.collective == Collective::SendRecv);
        r
    }
}

/// What a backend allocates before its first call (`Backend::reserve`),
/// computed once by the plan that runs (`Plan::reservation`,
/// `workload::plan`): the largest bytes of each buffer over every call,
/// each hierarchical all-reduce (whose scratch a backend sizes by its own
/// node layout), and whether operations rotate through the buffers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reservation {
    /// The largest send buffer: `shape.send` elements.
    pub send_bytes: u64,
    /// The largest receive buffer, `max(shape.send, shape.recv)` elements
    /// (it holds in-place inputs too): the largest span of any call, a
    /// case's size.
    pub recv_bytes: u64,
    /// Each hierarchical all-reduce once: mode, type, count.
    pub hierarchical: Vec<(Hierarchy, DType, usize)>,
    /// Operations rotate through buffers of the largest span (see
    /// `backend::rotation_offset`); otherwise each works at the start.
    pub rotate: bool,
    /// The plan has sendrecv points (a backend may give them a
    /// communicator of their own).
    pub sendrecv: bool,
    /// The plan runs as pinned sweeps (`--algo`, `--proto`), each on a
    /// communicator of every rank made under its pin and freed after it:
    /// one more communicator at a time.
    pub pinned: bool,
}

impl Reservation {
    /// The reservation of calls of these all-reduce organisations, types
    /// and shapes.
    pub fn of(calls: impl IntoIterator<Item = (Hierarchy, DType, Shape)>, rotate: bool) -> Reservation {
        let mut r = Reservation {
            rotate,
            ..Reservation::default()
        };
        for (hierarchy, dtype, shape) in calls {
            let e = dtype.size_bytes() as u64;
            // an alltoallv of a traffic matrix reserves its requested size
            let floor = shape.peers.map_or(0, |p| p.reserved());
            r.send_bytes = r.send_bytes.max(shape.send.max(floor) as u64 * e);
            r.recv_bytes = r.recv_bytes.max(shape.send.max(shape.recv).max(floor) as u64 * e);
            let hierarchical = (hierarchy, dtype, shape.count);
            if !hierarchy.is_flat() && !r.hierarchical.contains(&hierarchical) {
                r.hierarchical.push(hierarchical);
            }
        }
        r
    }

    /// The most host memory one rank holds at once: two buffers of the
    /// largest span (host backends size both alike).
    pub fn peak_bytes(&self) -> u64 {
        self.recv_bytes.saturating_mul(2)
    }

    /// Refuses buffers that, times the ranks sharing this host, exceed the
    /// memory available on it (memory is per host, whatever
    /// --ranks-per-node says); `remedy` says what to lower.
    pub fn check_host_memory(&self, ranks_on_host: usize, available_bytes: u64, remedy: &str) -> Result<(), Error> {
        let need = self.peak_bytes().saturating_mul(ranks_on_host as u64);
        if need > available_bytes {
            return Err(Error::usage(format!(
                "the largest call needs {} per rank, {} for the {ranks_on_host} ranks on this host, \
                 but only {} of memory is available; {remedy}",
                human_bytes(self.peak_bytes()),
                human_bytes(need),
                human_bytes(available_bytes)
            )));
        }
        Ok(())
    }
}

/// What a backend can run, as the plan and the engine need to know it: a
/// plain value each backend fills in (`Backend::capabilities`), so that the
/// plan knows nothing of the `Backend` trait.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Capabilities {
    /// The backend's name, for messages.
    pub backend: &'static str,
    /// Largest element count of one buffer in one call.
    pub max_elements: usize,
    /// Each type this backend cannot run, and why.
    pub refused_dtypes: Vec<(DType, String)>,
    /// Each operation this backend cannot run, and why.
    pub refused_ops: Vec<(ReduceOp, String)>,
    /// Each all-reduce organisation this backend cannot run, and why.
    pub refused_hierarchies: Vec<(Hierarchy, String)>,
    /// Why the run's launch extras (`-m`, `-G`, `-R`) cannot run here.
    pub refused_extras: Option<String>,
    /// Collective and placement whose output this backend leaves undefined,
    /// so that it is not checked (nccl's in-place alltoall and sendrecv:
    /// their rows have an empty `wrong`, as nccl-tests reports none).
    pub unchecked: Vec<(Collective, Placement)>,
}

impl Capabilities {
    fn refusal<T: PartialEq>(list: &[(T, String)], value: T) -> Result<(), String> {
        match list.iter().find(|(v, _)| *v == value) {
            Some((_, why)) => Err(why.clone()),
            None => Ok(()),
        }
    }

    pub fn check_dtype(&self, dtype: DType) -> Result<(), String> {
        Capabilities::refusal(&self.refused_dtypes, dtype)
    }

    pub fn check_op(&self, op: ReduceOp) -> Result<(), String> {
        Capabilities::refusal(&self.refused_ops, op)
    }

    pub fn check_hierarchy(&self, mode: Hierarchy) -> Result<(), String> {
        Capabilities::refusal(&self.refused_hierarchies, mode)
    }

    /// Whether the output of `collective` in `placement` is defined, so
    /// checked.
    pub fn validates(&self, collective: Collective, placement: Placement) -> bool {
        !self.unchecked.contains(&(collective, placement))
    }
}

impl PlanConfig {
    /// The all-reduce modes asked for, `all` as every mode: for what is
    /// checked before the backend is known (`-m` with hierarchical modes).
    pub fn hierarchies_asked(&self) -> Vec<Hierarchy> {
        self.hierarchies.values()
    }

    /// The modes a backend of `caps` runs: `all` as the modes it runs (the
    /// memory backend's: flat), a mode named that it refuses an error.
    pub fn hierarchies_on(&self, caps: &Capabilities) -> Result<Vec<Hierarchy>, Error> {
        chosen(&self.hierarchies, |mode| caps.check_hierarchy(mode))
    }
}

/// The values of a list, `all` being every value the backend accepts; a
/// value it refuses is a usage error.
fn chosen<T: Named>(choice: &Choice<T>, check: impl Fn(T) -> Result<(), String>) -> Result<Vec<T>, Error> {
    match choice {
        Choice::All => Ok(T::all().iter().copied().filter(|&v| check(v).is_ok()).collect()),
        Choice::List(list) => {
            for &v in list {
                check(v).map_err(Error::Usage)?;
            }
            Ok(list.clone())
        }
    }
}

fn roots(choice: RootChoice, nranks: usize) -> Result<Vec<usize>, Error> {
    match choice {
        RootChoice::All => Ok((0..nranks).collect()),
        RootChoice::Rank(r) if r < nranks => Ok(vec![r]),
        RootChoice::Rank(r) => Err(Error::usage(format!(
            "--root {r} is out of range: the job has {nranks} rank{} (0..={})",
            if nranks == 1 { "" } else { "s" },
            nranks - 1
        ))),
    }
}

/// The hierarchical modes that need the same number of ranks on every
/// node: rs-ar-ag always, reduce-bcast when it averages.
fn check_node_layout(cfg: &PlanConfig, modes: &[Hierarchy], ops: &[ReduceOp], nodes: &Nodes) -> Result<(), Error> {
    if nodes.is_uniform() {
        return Ok(());
    }
    let spread = format!(
        "the {} nodes have between {} and {}",
        nodes.nnodes(),
        (0..nodes.nnodes()).map(|n| nodes.ranks_on(n).len()).min().unwrap_or(0),
        nodes.ranks_per_node()
    );
    if modes.contains(&Hierarchy::RsArAg) {
        return Err(Error::usage(format!(
            "--hierarchy rs-ar-ag needs the same number of ranks on every node, but {spread}; \
             use reduce-bcast or --ranks-per-node"
        )));
    }
    if modes.contains(&Hierarchy::ReduceBcast)
        && cfg.collectives.contains(&Collective::AllReduce)
        && ops.contains(&ReduceOp::Avg)
    {
        return Err(Error::usage(format!(
            "--op avg with --hierarchy reduce-bcast needs the same number of ranks on every node (each leader \
             averages its own node first), but {spread}; use another --op or --ranks-per-node"
        )));
    }
    Ok(())
}

/// alltoallv with a traffic matrix: nccl-tests' rules (src/alltoallv.cu):
/// one size (`-b` equal to `-e`: the blocks come from the matrix), a
/// matrix at least as large as the job, and `-e` at least the most one
/// rank sends or receives.
fn check_traffic(cfg: &PlanConfig, nranks: usize) -> Result<(), Error> {
    let Traffic::Matrix(m) = cfg.traffic else {
        return Ok(());
    };
    if !cfg.collectives.contains(&Collective::AllToAllV) {
        return Ok(());
    }
    let file = &m.source;
    if cfg.sweep.min != cfg.sweep.max {
        return Err(Error::usage(format!(
            "alltoallv with the traffic matrix {file} measures one size: give -b equal to -e (e.g. -b 32M -e 32M), \
             the blocks come from the matrix"
        )));
    }
    if m.dim() < nranks {
        return Err(Error::usage(format!(
            "the traffic matrix {file} is {0}x{0}, smaller than the job's {nranks} ranks",
            m.dim()
        )));
    }
    let shape = crate::collective::alltoallv::shape(0, nranks, 1, cfg.traffic);
    let need = shape.send.max(shape.recv) as u64;
    if cfg.sweep.max < need {
        return Err(Error::usage(format!(
            "-e {} is less than {need} bytes, the most one rank sends or receives in the traffic matrix {file}: \
             raise -e (and -b) to at least {need}",
            cfg.sweep.max
        )));
    }
    Ok(())
}

/// A case without its size: collective, hierarchy, type, operation, root.
type Group = (Collective, Hierarchy, DType, Option<ReduceOp>, Option<usize>);

/// Everything but the size, in sweep order: hierarchy modes for all_reduce
/// only, operations for reductions only, roots for rooted collectives only.
fn groups(cfg: &PlanConfig, modes: &[Hierarchy], dtypes: &[DType], ops: &[ReduceOp], roots: &[usize]) -> Vec<Group> {
    let mut groups = Vec::new();
    for &collective in &cfg.collectives {
        let spec = collective.spec();
        let modes = match collective {
            Collective::AllReduce => modes.to_vec(),
            _ => vec![Hierarchy::Flat],
        };
        let case_ops: Vec<Option<ReduceOp>> = match spec.is_reduction() {
            true => ops.iter().copied().map(Some).collect(),
            false => vec![None],
        };
        let case_roots: Vec<Option<usize>> = match spec.has_root() {
            true => roots.iter().copied().map(Some).collect(),
            false => vec![None],
        };
        for &hierarchy in &modes {
            for &dtype in dtypes {
                for &op in &case_ops {
                    for &root in &case_roots {
                        groups.push((collective, hierarchy, dtype, op, root));
                    }
                }
            }
        }
    }
    groups
}

/// One group at every size of the sweep, skipping sizes whose buffers
/// round to nothing or to the previous size's.
fn sized_cases(
    group: Group,
    sweep: &SizeSweep,
    traffic: Traffic,
    caps: &Capabilities,
    nranks: usize,
) -> Result<Vec<Case>, Error> {
    let (collective, hierarchy, dtype, op, root) = group;
    let mut cases = Vec::new();
    let mut previous: Option<Shape> = None;
    for size in sweep.sizes() {
        let shape = collective.sized(size, nranks, dtype.size_bytes(), traffic);
        if shape.send.max(shape.recv) == 0 || previous == Some(shape) {
            continue;
        }
        previous = Some(shape);
        let largest = shape.send.max(shape.recv);
        if largest > caps.max_elements {
            return Err(Error::usage(format!(
                "--maxbytes {}: {collective} with {dtype} at {nranks} ranks needs a buffer of {largest} elements, \
                 beyond the {} backend's limit of {} elements per call",
                sweep.max, caps.backend, caps.max_elements
            )));
        }
        cases.push(Case {
            collective,
            hierarchy,
            dtype,
            op,
            root,
            shape,
        });
    }
    Ok(cases)
}

#[cfg(test)]
mod tests;
