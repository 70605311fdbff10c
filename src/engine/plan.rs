//! The plan: every case a run measures, in order, built once from the
//! validated configuration, the rank count and what the backend supports.
//!
//! Order: collective, hierarchy mode (all_reduce only), type, operation,
//! root, size; each case is then
//! measured out-of-place and in-place. Sizes whose buffers round to zero
//! elements, or to the same buffers as the previous size, are skipped (at
//! 4 ranks a 8-byte float all_gather has no whole element per rank).

use crate::backend::{Backend, LaunchExtras};
use crate::collective::{Collective, Shape};
use crate::error::Error;
use crate::topology::{Hierarchy, Nodes};
use crate::types::{Choice, DType, ReduceOp, RootChoice, human_bytes};

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
    pub fn build(cfg: &PlanConfig, extras: &LaunchExtras, nodes: &Nodes, backend: &dyn Backend) -> Result<Plan, Error> {
        let nranks = nodes.nranks();
        let dtypes = match &cfg.dtypes {
            Choice::All => backend.dtypes(),
            Choice::List(list) => {
                for &t in list {
                    backend.check_dtype(t).map_err(Error::Usage)?;
                }
                list.clone()
            }
        };
        let ops = match &cfg.ops {
            Choice::All => backend.ops(),
            Choice::List(list) => {
                for &op in list {
                    backend.check_op(op).map_err(Error::Usage)?;
                }
                list.clone()
            }
        };
        let roots: Vec<usize> = match cfg.roots {
            RootChoice::All => (0..nranks).collect(),
            RootChoice::Rank(r) if r < nranks => vec![r],
            RootChoice::Rank(r) => {
                return Err(Error::usage(format!(
                    "--root {r} is out of range: the job has {nranks} rank{} (0..={})",
                    if nranks == 1 { "" } else { "s" },
                    nranks - 1
                )));
            }
        };
        let sizes = cfg.sweep.sizes();

        let hierarchies = &cfg.hierarchies;
        for &mode in hierarchies {
            backend.check_hierarchy(mode).map_err(Error::Usage)?;
        }
        if hierarchies.contains(&Hierarchy::RsArAg) && !nodes.is_uniform() {
            return Err(Error::usage(format!(
                "--hierarchy rs-ar-ag needs the same number of ranks on every node, but the {} nodes have between {} and {}; \
                 use reduce-bcast or --ranks-per-node",
                nodes.nnodes(),
                (0..nodes.nnodes()).map(|n| nodes.ranks_on(n).len()).min().unwrap_or(0),
                nodes.ranks_per_node()
            )));
        }

        if hierarchies.contains(&Hierarchy::ReduceBcast)
            && cfg.collectives.contains(&Collective::AllReduce)
            && ops.contains(&ReduceOp::Avg)
            && !nodes.is_uniform()
        {
            return Err(Error::usage(format!(
                "--op avg with --hierarchy reduce-bcast needs the same number of ranks on every node (each leader \
                 averages its own node first), but the {} nodes have between {} and {}; use another --op or \
                 --ranks-per-node",
                nodes.nnodes(),
                (0..nodes.nnodes()).map(|n| nodes.ranks_on(n).len()).min().unwrap_or(0),
                nodes.ranks_per_node()
            )));
        }
        backend.check_extras(extras).map_err(Error::Usage)?;

        // Everything but the size, in sweep order.
        let mut groups = Vec::new();
        for &collective in &cfg.collectives {
            let spec = collective.spec();
            let modes = if collective == Collective::AllReduce {
                hierarchies.clone()
            } else {
                vec![Hierarchy::Flat]
            };
            let case_ops: Vec<Option<ReduceOp>> = if spec.is_reduction() {
                ops.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            let case_roots: Vec<Option<usize>> = if spec.has_root() {
                roots.iter().copied().map(Some).collect()
            } else {
                vec![None]
            };
            for &hierarchy in &modes {
                for &dtype in &dtypes {
                    for &op in &case_ops {
                        for &root in &case_roots {
                            groups.push((collective, hierarchy, dtype, op, root));
                        }
                    }
                }
            }
        }

        let mut cases = Vec::new();
        for (collective, hierarchy, dtype, op, root) in groups {
            let mut previous: Option<Shape> = None;
            for &size in &sizes {
                let count = usize::try_from(size / dtype.size_bytes() as u64).unwrap_or(usize::MAX);
                let shape = collective.spec().shape(count, nranks);
                if shape.send.max(shape.recv) == 0 || previous == Some(shape) {
                    continue;
                }
                previous = Some(shape);
                let largest = shape.send.max(shape.recv);
                if largest > backend.max_elements() {
                    return Err(Error::usage(format!(
                        "--maxbytes {}: {collective} with {dtype} at {nranks} ranks needs a buffer of {largest} elements, \
                         beyond the {} backend's limit of {} elements per call",
                        cfg.sweep.max,
                        backend.name(),
                        backend.max_elements()
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

    /// The largest span of any case: with rotation, every point's buffers
    /// are this large.
    pub fn peak_span_bytes(&self) -> u64 {
        // a case's size is its larger buffer, which both buffers span
        self.cases.iter().map(Case::size_bytes).max().unwrap_or(0)
    }

    /// The most host memory one rank needs at once: two buffers of the
    /// largest span.
    pub fn peak_buffer_bytes(&self) -> u64 {
        self.peak_span_bytes().saturating_mul(2)
    }

    /// Refuses a plan whose buffers, times the ranks sharing this node,
    /// exceed the memory available on it.
    pub fn check_memory(&self, ranks_on_node: usize, available_bytes: u64) -> Result<(), Error> {
        let need = self.peak_buffer_bytes().saturating_mul(ranks_on_node as u64);
        if need > available_bytes {
            return Err(Error::usage(format!(
                "the largest size needs {} per rank, {} for the {ranks_on_node} ranks on this node, \
                 but only {} of memory is available; lower --maxbytes",
                human_bytes(self.peak_buffer_bytes()),
                human_bytes(need),
                human_bytes(available_bytes)
            )));
        }
        Ok(())
    }
}

/// `MemAvailable` of /proc/meminfo, where there is one.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Call;
    use crate::buffer::HostBuffer;
    use crate::types::Placement;

    /// A backend that can do everything but avg and half, for plan tests.
    struct Caps;

    impl Backend for Caps {
        fn name(&self) -> &'static str {
            "caps"
        }
        fn version(&self) -> String {
            String::new()
        }
        fn check_dtype(&self, dtype: DType) -> Result<(), String> {
            if dtype == DType::Half {
                Err("no half here".into())
            } else {
                Ok(())
            }
        }
        fn check_op(&self, op: ReduceOp) -> Result<(), String> {
            if op == ReduceOp::Avg {
                Err("no avg here".into())
            } else {
                Ok(())
            }
        }
        fn max_elements(&self) -> usize {
            1 << 20
        }
        fn prepare(&mut self, _: &Call) -> Result<(), Error> {
            unreachable!()
        }
        fn load_input(&mut self, _: &Call, _: Placement, _: &(dyn Fn(usize) -> u64 + Sync)) -> Result<(), Error> {
            unreachable!()
        }
        fn reserve(&mut self, _: &Plan, _: bool) -> Result<(), Error> {
            unreachable!()
        }
        fn launch(&mut self, _: &Call, _: Placement, _: u64) -> Result<(), Error> {
            unreachable!()
        }
        fn wait(&mut self) -> Result<(), Error> {
            unreachable!()
        }
        fn output(&mut self, _: &Call, _: Placement) -> Result<(&mut HostBuffer, std::ops::Range<usize>), Error> {
            unreachable!()
        }
    }

    fn one_node(n: usize) -> Nodes {
        let hosts = vec!["h".to_string(); n];
        Nodes::from_keys(&hosts, &hosts)
    }

    /// The plan part of `collbench run ARGS`, with its launch extras.
    fn config(args: &[&str]) -> (PlanConfig, LaunchExtras) {
        let (_, cfg) = crate::config::RunConfig::from_command_line(args).unwrap();
        (cfg.plan, cfg.timing.extras())
    }

    fn build(cfg: &(PlanConfig, LaunchExtras), nodes: &Nodes, backend: &dyn Backend) -> Result<Plan, Error> {
        Plan::build(&cfg.0, &cfg.1, nodes, backend)
    }

    #[test]
    fn plan_orders_collective_type_op_root_size() {
        let cfg = config(&[
            "--collectives",
            "reduce",
            "-d",
            "float,int8",
            "-o",
            "sum,max",
            "-r",
            "all",
            "-b",
            "64",
            "-e",
            "128",
        ]);
        let plan = build(&cfg, &one_node(2), &Caps).unwrap();
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
        let cfg = config(&["--collectives", "all_gather,broadcast", "-o", "all", "-e", "8"]);
        let plan = build(&cfg, &one_node(2), &Caps).unwrap();
        assert_eq!(plan.cases.len(), 2);
        assert_eq!((plan.cases[0].op, plan.cases[0].root), (None, None));
        assert_eq!((plan.cases[1].op, plan.cases[1].root), (None, Some(0)));
    }

    #[test]
    fn sizes_that_round_to_nothing_or_repeat_are_skipped() {
        // alltoall of floats at 3 ranks: 8 B -> 2 floats -> 0 per peer;
        // 16 B -> 4 -> 1 per peer (12 B); 32 B -> 8 -> 2 per peer (24 B)
        let cfg = config(&["--collectives", "alltoall", "-e", "32"]);
        let plan = build(&cfg, &one_node(3), &Caps).unwrap();
        let sizes: Vec<u64> = plan.cases.iter().map(Case::size_bytes).collect();
        assert_eq!(sizes, vec![12, 24]);
        // 9 and 10 bytes of int8 at 4 ranks both give 2 per rank
        let cfg = config(&[
            "--collectives",
            "all_gather",
            "-d",
            "int8",
            "-b",
            "8",
            "-e",
            "12",
            "-i",
            "1",
        ]);
        let sizes: Vec<u64> = build(&cfg, &one_node(4), &Caps)
            .unwrap()
            .cases
            .iter()
            .map(Case::size_bytes)
            .collect();
        assert_eq!(sizes, vec![8, 12]);
    }

    #[test]
    fn all_expands_to_what_the_backend_supports() {
        let cfg = config(&["--collectives", "all_reduce", "-d", "all", "-o", "all", "-e", "8"]);
        let plan = build(&cfg, &one_node(1), &Caps).unwrap();
        assert!(
            plan.cases
                .iter()
                .all(|c| c.dtype != DType::Half && c.op != Some(ReduceOp::Avg))
        );
        assert_eq!(plan.cases.len(), 9 * 4);
    }

    #[test]
    fn unsupported_choices_and_bad_roots_are_usage_errors() {
        let bad = |args: &[&str], n: usize| match build(&config(args), &one_node(n), &Caps) {
            Err(Error::Usage(m)) => m,
            other => panic!("{other:?}"),
        };
        assert!(bad(&["-d", "half"], 2).contains("half"));
        assert!(bad(&["-o", "avg"], 2).contains("avg"));
        assert!(bad(&["-r", "2"], 2).contains("--root 2 is out of range"));
        assert!(bad(&["-e", "1G"], 2).contains("limit"));
        assert!(bad(&["--collectives", "alltoall", "-e", "8"], 4).contains("nothing to measure"));
    }

    #[test]
    fn hierarchy_modes_apply_to_all_reduce_only() {
        let cfg = config(&[
            "--collectives",
            "all_reduce,all_gather",
            "--hierarchy",
            "all",
            "-b",
            "16",
            "-e",
            "16",
        ]);
        let plan = build(&cfg, &Nodes::consecutive(2, &vec!["h".to_string(); 4]).unwrap(), &Caps).unwrap();
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
    }

    #[test]
    fn rs_ar_ag_needs_uniform_nodes() {
        let cfg = config(&["--hierarchy", "rs-ar-ag"]);
        let hosts: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
        let uneven = Nodes::from_keys(&hosts, &hosts);
        match build(&cfg, &uneven, &Caps) {
            Err(Error::Usage(m)) => assert!(m.contains("same number of ranks"), "{m}"),
            other => panic!("{other:?}"),
        }
        let cfg = config(&["--hierarchy", "reduce-bcast", "-e", "64"]);
        assert!(build(&cfg, &uneven, &Caps).is_ok());
    }

    /// `Caps` with avg: for the checks that only matter where avg runs.
    struct WithAvg;

    impl Backend for WithAvg {
        fn name(&self) -> &'static str {
            "with-avg"
        }
        fn version(&self) -> String {
            String::new()
        }
        fn check_dtype(&self, dtype: DType) -> Result<(), String> {
            Caps.check_dtype(dtype)
        }
        fn check_op(&self, _: ReduceOp) -> Result<(), String> {
            Ok(())
        }
        fn max_elements(&self) -> usize {
            Caps.max_elements()
        }
        fn prepare(&mut self, c: &Call) -> Result<(), Error> {
            Caps.prepare(c)
        }
        fn load_input(&mut self, c: &Call, p: Placement, v: &(dyn Fn(usize) -> u64 + Sync)) -> Result<(), Error> {
            Caps.load_input(c, p, v)
        }
        fn reserve(&mut self, p: &Plan, r: bool) -> Result<(), Error> {
            Caps.reserve(p, r)
        }
        fn launch(&mut self, c: &Call, p: Placement, i: u64) -> Result<(), Error> {
            Caps.launch(c, p, i)
        }
        fn wait(&mut self) -> Result<(), Error> {
            Caps.wait()
        }
        fn output(&mut self, _: &Call, _: Placement) -> Result<(&mut HostBuffer, std::ops::Range<usize>), Error> {
            unreachable!()
        }
    }

    #[test]
    fn reduce_bcast_averages_only_over_nodes_of_one_size() {
        let hosts: Vec<String> = ["a", "a", "b"].iter().map(|s| s.to_string()).collect();
        let uneven = Nodes::from_keys(&hosts, &hosts);
        let cfg = config(&[
            "--collectives",
            "all_reduce",
            "--hierarchy",
            "reduce-bcast",
            "-o",
            "sum,avg",
            "-e",
            "64",
        ]);
        match build(&cfg, &uneven, &WithAvg) {
            Err(Error::Usage(m)) => assert!(m.contains("--op avg") && m.contains("between 1 and 2"), "{m}"),
            other => panic!("{other:?}"),
        }
        let even = Nodes::consecutive(2, &vec!["h".to_string(); 4]).unwrap();
        assert!(build(&cfg, &even, &WithAvg).is_ok());
        let sum_only = config(&["--hierarchy", "reduce-bcast", "-e", "64"]);
        assert!(build(&sum_only, &uneven, &WithAvg).is_ok());
    }

    #[test]
    fn launch_extras_go_through_the_backend() {
        for set in [&["-m", "2"][..], &["-G", "1"], &["-R", "1"]] {
            let mut args = vec!["-e", "64"];
            args.extend(set);
            match build(&config(&args), &one_node(2), &Caps) {
                Err(Error::Usage(m)) => assert!(m.contains("backend is caps"), "{m}"),
                other => panic!("{other:?}"),
            }
        }
        let defaults = config(&["-e", "64", "--agg-iters", "1", "--cuda-graph", "0", "-R", "0"]);
        assert!(build(&defaults, &one_node(2), &Caps).is_ok());
    }

    #[test]
    fn memory_check_counts_every_rank_on_the_node() {
        let cfg = config(&["--collectives", "all_gather", "-d", "int8", "-b", "1M", "-e", "1M"]);
        let plan = build(&cfg, &one_node(4), &Caps).unwrap();
        // two buffers of the 1 MiB output
        assert_eq!(plan.peak_buffer_bytes(), 2 << 20);
        assert!(plan.check_memory(4, 8 << 20).is_ok());
        assert!(plan.check_memory(4, (8 << 20) - 1).is_err());
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
