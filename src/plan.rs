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

use crate::collective::{Collective, Shape};
use crate::error::Error;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{Choice, DType, Named, Placement, ReduceOp, RootChoice, human_bytes};

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
    /// All-reduce modes to run (other collectives always run flat).
    pub hierarchies: Vec<Hierarchy>,
    /// Virtual nodes of this many consecutive ranks, instead of hosts.
    pub ranks_per_node: Option<usize>,
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
        let nranks = nodes.nranks();
        let dtypes = chosen(&cfg.dtypes, |t| caps.check_dtype(t))?;
        let ops = chosen(&cfg.ops, |op| caps.check_op(op))?;
        let roots = roots(cfg.roots, nranks)?;
        for &mode in &cfg.hierarchies {
            caps.check_hierarchy(mode).map_err(Error::Usage)?;
        }
        check_node_layout(cfg, &ops, nodes)?;
        if let Some(why) = &caps.refused_extras {
            return Err(Error::usage(why.clone()));
        }
        let mut cases = Vec::new();
        for group in groups(cfg, &dtypes, &ops, &roots) {
            cases.extend(sized_cases(group, &cfg.sweep, caps, nranks)?);
        }
        if cases.is_empty() {
            return Err(Error::usage(format!(
                "nothing to measure: every size up to --maxbytes {} rounds to zero elements at {nranks} ranks",
                cfg.sweep.max
            )));
        }
        Ok(Plan { nranks, cases })
    }

    /// Measured points: every case in both placements.
    pub fn points(&self) -> usize {
        self.cases.len() * 2
    }

    /// What the backend allocates for every case (`Backend::reserve`),
    /// rotating through buffers of the largest span with `rotate`.
    pub fn reservation(&self, rotate: bool) -> Reservation {
        Reservation::of(self.cases.iter().map(|c| (c.hierarchy, c.dtype, c.shape)), rotate)
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
            r.send_bytes = r.send_bytes.max(shape.send as u64 * e);
            r.recv_bytes = r.recv_bytes.max(shape.send.max(shape.recv) as u64 * e);
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
fn check_node_layout(cfg: &PlanConfig, ops: &[ReduceOp], nodes: &Nodes) -> Result<(), Error> {
    if nodes.is_uniform() {
        return Ok(());
    }
    let spread = format!(
        "the {} nodes have between {} and {}",
        nodes.nnodes(),
        (0..nodes.nnodes()).map(|n| nodes.ranks_on(n).len()).min().unwrap_or(0),
        nodes.ranks_per_node()
    );
    if cfg.hierarchies.contains(&Hierarchy::RsArAg) {
        return Err(Error::usage(format!(
            "--hierarchy rs-ar-ag needs the same number of ranks on every node, but {spread}; \
             use reduce-bcast or --ranks-per-node"
        )));
    }
    if cfg.hierarchies.contains(&Hierarchy::ReduceBcast)
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

/// A case without its size: collective, hierarchy, type, operation, root.
type Group = (Collective, Hierarchy, DType, Option<ReduceOp>, Option<usize>);

/// Everything but the size, in sweep order: hierarchy modes for all_reduce
/// only, operations for reductions only, roots for rooted collectives only.
fn groups(cfg: &PlanConfig, dtypes: &[DType], ops: &[ReduceOp], roots: &[usize]) -> Vec<Group> {
    let mut groups = Vec::new();
    for &collective in &cfg.collectives {
        let spec = collective.spec();
        let modes = match collective {
            Collective::AllReduce => cfg.hierarchies.clone(),
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
fn sized_cases(group: Group, sweep: &SizeSweep, caps: &Capabilities, nranks: usize) -> Result<Vec<Case>, Error> {
    let (collective, hierarchy, dtype, op, root) = group;
    let mut cases = Vec::new();
    let mut previous: Option<Shape> = None;
    for size in sweep.sizes() {
        let count = usize::try_from(size / dtype.size_bytes() as u64).unwrap_or(usize::MAX);
        let count = collective.aligned_count(count, nranks, dtype.size_bytes());
        let shape = collective.spec().shape(count, nranks);
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
mod tests {
    use super::*;

    /// A backend that can do everything but avg and half, for plan tests.
    fn caps() -> Capabilities {
        Capabilities {
            backend: "caps",
            max_elements: 1 << 20,
            refused_dtypes: vec![(DType::Half, "no half here".into())],
            refused_ops: vec![(ReduceOp::Avg, "no avg here".into())],
            ..Capabilities::default()
        }
    }

    /// `caps` with avg: for the checks that only matter where avg runs.
    fn with_avg() -> Capabilities {
        Capabilities {
            refused_ops: Vec::new(),
            ..caps()
        }
    }

    fn one_node(n: usize) -> Nodes {
        let hosts = vec!["h".to_string(); n];
        Nodes::from_keys(&hosts, &hosts)
    }

    /// The defaults of `collbench run`, then `set`: (option, value) pairs
    /// parsed as the command line parses them.
    fn config(set: &[(&str, &str)]) -> PlanConfig {
        let mut c = PlanConfig {
            sweep: SizeSweep::new(8, 32 << 20, Step::Factor(2)).unwrap(),
            collectives: Collective::ALL.to_vec(),
            dtypes: Choice::one(DType::Float),
            ops: Choice::one(ReduceOp::Sum),
            roots: RootChoice::Rank(0),
            hierarchies: vec![Hierarchy::Flat],
            ranks_per_node: None,
        };
        let size = |v: &str| v.parse::<crate::types::Size>().unwrap().bytes();
        let (mut min, mut max, mut step) = (8, 32 << 20, Step::Factor(2));
        for &(option, value) in set {
            match option {
                "collectives" => c.collectives = value.parse::<Choice<Collective>>().unwrap().values(),
                "dtype" => c.dtypes = value.parse().unwrap(),
                "op" => c.ops = value.parse().unwrap(),
                "root" => c.roots = value.parse().unwrap(),
                "hierarchy" => c.hierarchies = value.parse::<Choice<Hierarchy>>().unwrap().values(),
                "minbytes" => min = size(value),
                "maxbytes" => max = size(value),
                "stepbytes" => step = Step::Bytes(size(value)),
                other => panic!("no such test option {other}"),
            }
        }
        c.sweep = SizeSweep::new(min, max, step).unwrap();
        c
    }

    fn build(cfg: &PlanConfig, nodes: &Nodes, caps: &Capabilities) -> Result<Plan, Error> {
        Plan::build(cfg, caps, nodes)
    }

    #[test]
    fn plan_orders_collective_type_op_root_size() {
        let cfg = config(&[
            ("collectives", "reduce"),
            ("dtype", "float,int8"),
            ("op", "sum,max"),
            ("root", "all"),
            ("minbytes", "64"),
            ("maxbytes", "128"),
        ]);
        let plan = build(&cfg, &one_node(2), &caps()).unwrap();
        let keys: Vec<_> = plan
            .cases
            .iter()
            .map(|c| (c.dtype, c.op.unwrap(), c.root.unwrap(), c.size_bytes()))
            .collect();
        assert_eq!(keys.len(), 2 * 2 * 2 * 2);
        assert_eq!(keys[0], (DType::Float, ReduceOp::Sum, 0, 64));
        assert_eq!(keys[1], (DType::Float, ReduceOp::Sum, 0, 128));
        assert_eq!(keys[2], (DType::Float, ReduceOp::Sum, 1, 64));
        assert_eq!(keys[4], (DType::Float, ReduceOp::Max, 0, 64));
        assert_eq!(keys[8], (DType::Int8, ReduceOp::Sum, 0, 64));
        assert_eq!(plan.points(), 32);
    }

    #[test]
    fn non_reductions_have_no_op_and_unrooted_ones_no_root() {
        let cfg = config(&[
            ("collectives", "all_gather,broadcast"),
            ("op", "all"),
            ("minbytes", "32"),
            ("maxbytes", "32"),
        ]);
        let plan = build(&cfg, &one_node(2), &caps()).unwrap();
        assert_eq!(plan.cases.len(), 2);
        assert_eq!((plan.cases[0].op, plan.cases[0].root), (None, None));
        assert_eq!((plan.cases[1].op, plan.cases[1].root), (None, Some(0)));
    }

    #[test]
    fn sizes_that_round_to_nothing_or_repeat_are_skipped() {
        // alltoall of floats at 3 ranks, per-peer counts cut to 16 bytes
        // (4 floats): 8, 16, 32 B -> 0, 1, 2 per peer -> 0; 64 B -> 16 -> 5
        // -> 4 per peer (48 B); 128 B -> 32 -> 10 -> 8 per peer (96 B)
        let cfg = config(&[("collectives", "alltoall"), ("maxbytes", "128")]);
        let plan = build(&cfg, &one_node(3), &caps()).unwrap();
        let sizes: Vec<u64> = plan.cases.iter().map(Case::size_bytes).collect();
        assert_eq!(sizes, vec![48, 96]);
        // 64 to 68 bytes of int8 at 4 ranks all give 16 per rank
        let cfg = config(&[
            ("collectives", "all_gather"),
            ("dtype", "int8"),
            ("minbytes", "60"),
            ("maxbytes", "68"),
            ("stepbytes", "1"),
        ]);
        let sizes: Vec<u64> = build(&cfg, &one_node(4), &caps())
            .unwrap()
            .cases
            .iter()
            .map(Case::size_bytes)
            .collect();
        assert_eq!(sizes, vec![64]);
    }

    #[test]
    fn all_expands_to_what_the_backend_supports() {
        let cfg = config(&[
            ("collectives", "all_reduce"),
            ("dtype", "all"),
            ("op", "all"),
            ("maxbytes", "8"),
        ]);
        let plan = build(&cfg, &one_node(1), &caps()).unwrap();
        assert!(
            plan.cases
                .iter()
                .all(|c| c.dtype != DType::Half && c.op != Some(ReduceOp::Avg))
        );
        assert_eq!(plan.cases.len(), 9 * 4);
    }

    #[test]
    fn unsupported_choices_and_bad_roots_are_usage_errors() {
        let bad = |set: &[(&str, &str)], n: usize| match build(&config(set), &one_node(n), &caps()) {
            Err(Error::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(bad(&[("dtype", "half")], 2).contains("half"));
        assert!(bad(&[("op", "avg")], 2).contains("avg"));
        assert!(bad(&[("root", "2")], 2).contains("--root 2 is out of range"));
        assert!(bad(&[("maxbytes", "1G")], 2).contains("limit"));
        assert!(bad(&[("collectives", "alltoall"), ("maxbytes", "8")], 4).contains("nothing to measure"));
    }

    #[test]
    fn hierarchy_modes_apply_to_all_reduce_only() {
        let cfg = config(&[
            ("collectives", "all_reduce,all_gather"),
            ("hierarchy", "all"),
            ("minbytes", "64"),
            ("maxbytes", "64"),
        ]);
        let plan = build(
            &cfg,
            &Nodes::consecutive(2, &vec!["h".to_string(); 4]).unwrap(),
            &caps(),
        )
        .unwrap();
        let got: Vec<_> = plan.cases.iter().map(|c| (c.collective, c.hierarchy)).collect();
        assert_eq!(
            got,
            vec![
                (Collective::AllReduce, Hierarchy::Flat),
                (Collective::AllReduce, Hierarchy::RsArAg),
                (Collective::AllReduce, Hierarchy::ReduceBcast),
                (Collective::AllGather, Hierarchy::Flat),
            ]
        );
        // a backend sizes its scratch by the hierarchical all-reduces alone
        let r = plan.reservation(true);
        let count = plan.cases[0].shape.count;
        assert_eq!(
            r.hierarchical,
            vec![
                (Hierarchy::RsArAg, DType::Float, count),
                (Hierarchy::ReduceBcast, DType::Float, count)
            ]
        );
        assert!(r.rotate);
    }

    #[test]
    fn rs_ar_ag_needs_uniform_nodes() {
        let cfg = config(&[("hierarchy", "rs-ar-ag")]);
        let hosts: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
        let uneven = Nodes::from_keys(&hosts, &hosts);
        match build(&cfg, &uneven, &caps()) {
            Err(Error::Usage(m)) => assert!(m.contains("same number of ranks"), "{m}"),
            other => panic!("{other:?}"),
        }
        let cfg = config(&[("hierarchy", "reduce-bcast"), ("maxbytes", "64")]);
        assert!(build(&cfg, &uneven, &caps()).is_ok());
    }

    #[test]
    fn reduce_bcast_averages_only_over_nodes_of_one_size() {
        let hosts: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
        let uneven = Nodes::from_keys(&hosts, &hosts);
        let cfg = config(&[
            ("collectives", "all_reduce"),
            ("hierarchy", "reduce-bcast"),
            ("op", "sum,avg"),
            ("maxbytes", "64"),
        ]);
        match build(&cfg, &uneven, &with_avg()) {
            Err(Error::Usage(m)) => assert!(m.contains("--op avg") && m.contains("between 1 and 2"), "{m}"),
            other => panic!("{other:?}"),
        }
        let even = Nodes::consecutive(2, &vec!["h".to_string(); 4]).unwrap();
        assert!(build(&cfg, &even, &with_avg()).is_ok());
        let sum_only = config(&[("hierarchy", "reduce-bcast"), ("maxbytes", "64")]);
        assert!(build(&sum_only, &uneven, &with_avg()).is_ok());
    }

    #[test]
    fn launch_extras_the_backend_refuses_refuse_the_plan() {
        let refusing = Capabilities {
            refused_extras: Some("-m/--agg-iters 2: it needs the nccl backend".into()),
            ..caps()
        };
        match build(&config(&[("maxbytes", "64")]), &one_node(2), &refusing) {
            Err(Error::Usage(m)) => assert!(m.starts_with("-m/--agg-iters 2"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(build(&config(&[("maxbytes", "64")]), &one_node(2), &caps()).is_ok());
    }

    #[test]
    fn memory_check_counts_every_rank_on_the_node() {
        let cfg = config(&[
            ("collectives", "all_gather"),
            ("dtype", "int8"),
            ("minbytes", "1M"),
            ("maxbytes", "1M"),
        ]);
        let plan = build(&cfg, &one_node(4), &caps()).unwrap();
        // two buffers of the 1 MiB output
        let r = plan.reservation(false);
        assert_eq!(
            (r.send_bytes, r.recv_bytes, r.peak_bytes()),
            (256 << 10, 1 << 20, 2 << 20)
        );
        assert!(r.check_host_memory(4, 8 << 20, "lower --maxbytes").is_ok());
        let e = r
            .check_host_memory(4, (8 << 20) - 1, "lower --maxbytes")
            .unwrap_err()
            .to_string();
        assert!(e.ends_with("; lower --maxbytes") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn factor_sweeps_double_up_to_the_maximum() {
        let s = SizeSweep::new(8, 64, Step::Factor(2)).unwrap();
        assert_eq!(s.sizes(), vec![8, 16, 32, 64]);
        let s = SizeSweep::new(8, 100, Step::Factor(3)).unwrap();
        assert_eq!(s.sizes(), vec![8, 24, 72]);
        let s = SizeSweep::new(5, 5, Step::Factor(2)).unwrap();
        assert_eq!(s.sizes(), vec![5]);
    }

    #[test]
    fn byte_sweeps_add_the_step() {
        let s = SizeSweep::new(1 << 20, 4 << 20, Step::Bytes(1 << 20)).unwrap();
        assert_eq!(s.sizes(), vec![1 << 20, 2 << 20, 3 << 20, 4 << 20]);
        assert_eq!(s.len(), 4);
    }

    #[test]
    fn sweeps_near_u64_max_stop_instead_of_overflowing() {
        let s = SizeSweep::new(u64::MAX / 2, u64::MAX, Step::Factor(4)).unwrap();
        assert_eq!(s.sizes(), vec![u64::MAX / 2]);
    }

    #[test]
    fn sweeps_refuse_zero_inverted_and_oversized_ranges() {
        assert!(SizeSweep::new(0, 8, Step::Factor(2)).is_err());
        assert!(SizeSweep::new(16, 8, Step::Factor(2)).is_err());
        assert!(SizeSweep::new(1, 1 << 30, Step::Bytes(1)).is_err());
        assert!(SizeSweep::new(1, 8, Step::Factor(1)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn sweeps_are_increasing_and_bounded(min in 1u64..1_000_000, span in 0u64..1_000_000_000, f in 2u64..9) {
            if let Ok(s) = SizeSweep::new(min, min + span, Step::Factor(f)) {
                let sizes = s.sizes();
                proptest::prop_assert_eq!(sizes[0], min);
                proptest::prop_assert!(sizes.windows(2).all(|w| w[1] == w[0] * f));
                proptest::prop_assert!(*sizes.last().unwrap() <= min + span);
                proptest::prop_assert!(sizes.last().unwrap() * f > min + span);
            }
        }
    }
}
