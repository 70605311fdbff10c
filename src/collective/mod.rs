//! Collectives as descriptions: buffer shapes, size semantics, bus factor and
//! expected output. One small file per collective; this file is the registry.
//!
//! Nothing here executes anything: backends map a `Collective` onto their
//! own calls, the engine measures, reports format. Size semantics and bus
//! factors follow nccl-tests (doc/PERFORMANCE.md and each test's
//! `GetCollByteCount`/`GetBw`): the user's size is a byte count, `count =
//! size / element size`, and the reported `size_bytes` is the larger of one
//! rank's send and receive buffers after rounding `count` down to what the
//! collective can split evenly over the ranks.

mod algo_bus;
mod all_gather;
mod all_reduce;
mod alltoall;
pub mod alltoallv;
mod broadcast;
mod gather;
pub mod pattern;
mod reduce;
mod reduce_scatter;
pub mod regions;
mod scatter;
mod sendrecv;

pub use algo_bus::{algo_bus_factor, algo_runs, nccl_tunes};
pub use alltoallv::{Peers, Spread, Traffic, TrafficMatrix};
pub use pattern::Pattern;
pub use regions::{Buf, Convention, Regions};

use crate::types::DType;

/// The ten collectives, in the order a sweep runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub enum Collective {
    #[default]
    AllReduce,
    AllGather,
    ReduceScatter,
    Broadcast,
    Reduce,
    AllToAll,
    AllToAllV,
    Gather,
    Scatter,
    SendRecv,
}

impl Collective {
    pub const ALL: [Collective; 10] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::AllToAll,
        Collective::AllToAllV,
        Collective::Gather,
        Collective::Scatter,
        Collective::SendRecv,
    ];

    /// The description of this collective.
    pub fn spec(self) -> &'static dyn CollectiveSpec {
        match self {
            Collective::AllReduce => &all_reduce::SPEC,
            Collective::AllGather => &all_gather::SPEC,
            Collective::ReduceScatter => &reduce_scatter::SPEC,
            Collective::Broadcast => &broadcast::SPEC,
            Collective::Reduce => &reduce::SPEC,
            Collective::AllToAll => &alltoall::SPEC,
            Collective::AllToAllV => &alltoallv::AllToAllV,
            Collective::Gather => &gather::SPEC,
            Collective::Scatter => &scatter::SPEC,
            Collective::SendRecv => &sendrecv::SPEC,
        }
    }

    pub fn name(self) -> &'static str {
        self.spec().name()
    }

    /// Accepts `all_reduce`, `allreduce`, `all-reduce`, `AllReduce`, ...
    pub fn parse(s: &str) -> Option<Collective> {
        let key = normalise(s);
        Collective::ALL
            .into_iter()
            .find(|c| normalise(c.name()) == key || c.spec().aliases().contains(&key.as_str()))
    }
}

impl Collective {
    /// `count` requested elements of `elem` bytes at `nranks` ranks, cut so
    /// that the per-rank (per-peer) count of all_gather, reduce_scatter,
    /// alltoall, gather and scatter is a multiple of 16 bytes, as nccl-tests
    /// does since late 2024 (`(count/nranks) & -(16/eltSize)` in each test's
    /// GetCollByteCount), so that the size rows match nccl-tests' at every
    /// rank count. The others take `count` as it is (alltoallv's per-peer
    /// count is cut the same way).
    pub fn aligned_count(self, count: usize, nranks: usize, elem: usize) -> usize {
        use Collective::*;
        match self {
            AllGather | ReduceScatter | AllToAll | AllToAllV | Gather | Scatter => {
                let n = nranks.max(1);
                let step = (16 / elem.clamp(1, 16)).max(1);
                (count / n) / step * step * n
            }
            AllReduce | Broadcast | Reduce | SendRecv => count,
        }
    }

    /// The requested sizes a row of `size_bytes` at `nranks` ranks can
    /// have come from, `lo..hi` in bytes: `aligned_count` cuts each rank's
    /// share to a multiple of 16 bytes (whatever the type), so the request
    /// was up to 16 bytes a rank larger; the others take the request as
    /// it is. Two rows at different rank counts measured the same request
    /// only where their windows meet (`compare --allow-different-ranks`).
    pub fn requested_window(self, size_bytes: u64, nranks: u64) -> std::ops::Range<u64> {
        use Collective::*;
        match self {
            AllGather | ReduceScatter | AllToAll | AllToAllV | Gather | Scatter => {
                size_bytes..size_bytes + 16 * nranks.max(1)
            }
            AllReduce | Broadcast | Reduce | SendRecv => size_bytes..size_bytes + 1,
        }
    }

    /// The shape of a point of `size_bytes` requested bytes of `elem`-byte
    /// elements at `nranks` ranks: the count cut as `aligned_count` says,
    /// and for alltoallv the blocks of `traffic` (`alltoallv::shape`).
    pub fn sized(self, size_bytes: u64, nranks: usize, elem: usize, traffic: Traffic) -> Shape {
        let count = usize::try_from(size_bytes / elem.max(1) as u64).unwrap_or(usize::MAX);
        match self {
            Collective::AllToAllV => alltoallv::shape(count, nranks, elem, traffic),
            _ => self.spec().shape(self.aligned_count(count, nranks, elem), nranks),
        }
    }
}

fn normalise(s: &str) -> String {
    s.trim()
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect()
}

crate::types::display_by_name!(Collective);

impl std::str::FromStr for Collective {
    type Err = String;

    fn from_str(text: &str) -> Result<Collective, String> {
        Collective::parse(text).ok_or_else(|| {
            format!(
                "unknown collective '{}' (expected {})",
                text.trim(),
                crate::types::known::<Collective>()
            )
        })
    }
}

crate::types::named!(Collective, "collective", ALL);

/// Per-rank buffer shape of one measured point, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Elements of one rank's send buffer (alltoallv: the most any rank
    /// sends).
    pub send: usize,
    /// Elements of one rank's receive buffer (alltoallv: the most any rank
    /// receives).
    pub recv: usize,
    /// The `count` column: the count argument of the call (per rank for
    /// all_gather, reduce_scatter, gather, scatter; per peer for alltoall
    /// and alltoallv's generated traffic, 0 with a matrix).
    pub count: usize,
    /// alltoallv: what each rank sends each peer (`None` elsewhere, and
    /// for an alltoallv of `count` elements to every peer).
    pub peers: Option<Peers>,
}

impl Shape {
    /// One buffer of `count` elements in and out, whatever the rank count
    /// (all_reduce, broadcast, reduce, sendrecv).
    pub fn whole(count: usize, _nranks: usize) -> Shape {
        Shape {
            send: count,
            recv: count,
            count,
            peers: None,
        }
    }

    /// `count / n` elements per rank (`count` its count): one block in, the
    /// n ranks' blocks out (all_gather, gather).
    pub fn gathered(count: usize, nranks: usize) -> Shape {
        let per_rank = count / nranks.max(1);
        Shape {
            send: per_rank,
            recv: per_rank * nranks,
            count: per_rank,
            peers: None,
        }
    }

    /// `count / n` elements per rank (`count` its count): n blocks in, one
    /// block out (reduce_scatter, scatter).
    pub fn scattered(count: usize, nranks: usize) -> Shape {
        let per_rank = count / nranks.max(1);
        Shape {
            send: per_rank * nranks,
            recv: per_rank,
            count: per_rank,
            peers: None,
        }
    }

    /// `count / n` elements per peer (`count` its count): n blocks in and
    /// n out (alltoall, and alltoallv without a traffic).
    pub fn exchanged(count: usize, nranks: usize) -> Shape {
        let per_peer = count / nranks.max(1);
        Shape {
            send: per_peer * nranks,
            recv: per_peer * nranks,
            count: per_peer,
            peers: None,
        }
    }

    /// nccl-tests' reported size: the larger of one rank's two buffers.
    pub fn size_bytes(&self, dtype: DType) -> u64 {
        (self.send.max(self.recv) * dtype.size_bytes()) as u64
    }
}

/// Where a point stands: rank count, this rank, the root (0 where unused),
/// and how far a sendrecv reaches (1 where unused).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub nranks: usize,
    pub rank: usize,
    pub root: usize,
    /// sendrecv: every rank sends to the rank `shift` places after it and
    /// receives from the one `shift` places before (1 is the ring).
    pub shift: usize,
}

impl Layout {
    /// `rank` of `nranks` with `root`, a sendrecv reaching the next rank
    /// (the ring).
    pub fn new(nranks: usize, rank: usize, root: usize) -> Layout {
        Layout {
            nranks,
            rank,
            root,
            shift: 1,
        }
    }
}

/// What every collective knows about itself.
pub trait CollectiveSpec: Sync {
    fn name(&self) -> &'static str;

    /// Other accepted spellings, already normalised (lower case, no `_`/`-`).
    fn aliases(&self) -> &'static [&'static str] {
        &[]
    }

    /// Takes a reduction operation.
    fn is_reduction(&self) -> bool {
        false
    }

    /// Has a root rank.
    fn has_root(&self) -> bool {
        false
    }

    /// Every rank plays the same part, so ranks' times compare (for the
    /// straggler view); rooted collectives are not.
    fn is_symmetric(&self) -> bool {
        !self.has_root()
    }

    /// Buffer shape for `count` requested elements at `nranks` ranks.
    fn shape(&self, count: usize, nranks: usize) -> Shape;

    /// busbw / algbw at `nranks` ranks (nccl-tests doc/PERFORMANCE.md).
    fn bus_factor(&self, nranks: usize) -> f64;

    /// Elements of this rank's input that the collective reads (0 where the
    /// send buffer is not significant, such as non-roots of broadcast).
    fn input_len(&self, shape: &Shape, _at: &Layout) -> usize {
        shape.send
    }

    /// Elements of the output this rank must check (0 where the collective
    /// defines no output on this rank, such as non-roots of reduce).
    fn output_len(&self, shape: &Shape, at: &Layout) -> usize;

    /// Expected value of output element `i` on `at.rank`, given that every
    /// rank `r` filled its send buffer with `pattern.input(r, ..)`.
    fn expected(&self, pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64;

    /// `expected` of one point as one function, for checking every element
    /// of an output: a collective whose element lookup has a set-up cost
    /// (alltoallv's block boundaries) pays it once here.
    fn expectation<'a>(
        &'a self,
        pattern: &'a Pattern,
        shape: &'a Shape,
        at: &'a Layout,
    ) -> Box<dyn Fn(usize) -> u64 + Sync + 'a> {
        Box::new(move |i| self.expected(pattern, shape, at, i))
    }
}

/// A collective described by values (every one but alltoallv, whose
/// lengths and expected values come from its per-pair blocks): its file
/// names its name, shape, bus factor and expected output, and where a part
/// differs from a collective of equal ranks, that part.
pub(crate) struct Described {
    pub name: &'static str,
    /// Other accepted spellings (`CollectiveSpec::aliases`).
    pub aliases: &'static [&'static str],
    /// Takes a reduction operation.
    pub reduction: bool,
    /// Has a root rank.
    pub root: bool,
    /// Buffer shape for `count` requested elements at `nranks` ranks.
    pub shape: fn(usize, usize) -> Shape,
    /// busbw / algbw at `nranks` ranks.
    pub bus_factor: fn(usize) -> f64,
    /// Only the root's input is read (broadcast, scatter).
    pub input_at_root: bool,
    /// Only the root has an output (reduce, gather).
    pub output_at_root: bool,
    /// `CollectiveSpec::expected`.
    pub expected: fn(&Pattern, &Shape, &Layout, usize) -> u64,
}

impl Described {
    /// A collective without an operation or a root, whose every rank reads
    /// its whole input and has its whole output.
    pub(crate) const fn new(
        name: &'static str,
        shape: fn(usize, usize) -> Shape,
        bus_factor: fn(usize) -> f64,
        expected: fn(&Pattern, &Shape, &Layout, usize) -> u64,
    ) -> Described {
        Described {
            name,
            aliases: &[],
            reduction: false,
            root: false,
            shape,
            bus_factor,
            input_at_root: false,
            output_at_root: false,
            expected,
        }
    }
}

/// `len`, or where only the root holds the buffer, `len` on the root and 0
/// elsewhere.
fn held(root_only: bool, len: usize, at: &Layout) -> usize {
    if root_only && at.rank != at.root { 0 } else { len }
}

impl CollectiveSpec for Described {
    fn name(&self) -> &'static str {
        self.name
    }

    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }

    fn is_reduction(&self) -> bool {
        self.reduction
    }

    fn has_root(&self) -> bool {
        self.root
    }

    fn shape(&self, count: usize, nranks: usize) -> Shape {
        (self.shape)(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        (self.bus_factor)(nranks)
    }

    fn input_len(&self, shape: &Shape, at: &Layout) -> usize {
        held(self.input_at_root, shape.send, at)
    }

    fn output_len(&self, shape: &Shape, at: &Layout) -> usize {
        held(self.output_at_root, shape.recv, at)
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
        (self.expected)(pattern, shape, at, i)
    }
}

/// `(n - 1) / n`, the factor shared by the collectives whose every rank
/// receives `(n - 1) / n` of the reported size; 0 at one rank.
pub(crate) fn spread_factor(nranks: usize) -> f64 {
    let n = nranks.max(1) as f64;
    (n - 1.0) / n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_collective_parses_from_its_name_and_common_spellings() {
        for c in Collective::ALL {
            assert_eq!(Collective::parse(c.name()), Some(c));
            assert_eq!(Collective::parse(&c.name().to_uppercase()), Some(c));
        }
        assert_eq!(Collective::parse("allreduce"), Some(Collective::AllReduce));
        assert_eq!(Collective::parse("all-gather"), Some(Collective::AllGather));
        assert_eq!(Collective::parse("all_to_all"), Some(Collective::AllToAll));
        assert_eq!(Collective::parse("AlltoAll"), Some(Collective::AllToAll));
        assert_eq!(Collective::parse("AlltoAllv"), Some(Collective::AllToAllV));
        assert_eq!(Collective::parse("all_to_all_v"), Some(Collective::AllToAllV));
        assert_eq!(Collective::parse("bcast"), Some(Collective::Broadcast));
        assert_eq!(Collective::parse("send_recv"), Some(Collective::SendRecv));
        assert_eq!(Collective::parse("allreduce2"), None);
    }

    #[test]
    fn bus_factors_match_nccl_tests_at_1_2_3_8_ranks() {
        use Collective::*;
        let expect = |c: Collective, n: usize| -> f64 {
            let n = n as f64;
            match c {
                AllReduce => 2.0 * (n - 1.0) / n,
                AllGather | ReduceScatter | AllToAll | AllToAllV | Gather | Scatter => (n - 1.0) / n,
                Broadcast | Reduce | SendRecv => 1.0,
            }
        };
        for c in Collective::ALL {
            for n in [1, 2, 3, 8] {
                let got = c.spec().bus_factor(n);
                assert!((got - expect(c, n)).abs() < 1e-15, "{c} n={n}: {got}");
            }
        }
        // spelled out, so a wrong shared formula cannot hide
        assert_eq!(AllReduce.spec().bus_factor(1), 0.0);
        assert_eq!(AllReduce.spec().bus_factor(2), 1.0);
        assert!((AllReduce.spec().bus_factor(3) - 4.0 / 3.0).abs() < 1e-15);
        assert_eq!(AllReduce.spec().bus_factor(8), 1.75);
        assert_eq!(AllGather.spec().bus_factor(8), 0.875);
        assert_eq!(AllToAll.spec().bus_factor(2), 0.5);
        assert_eq!(Gather.spec().bus_factor(1), 0.0);
        assert_eq!(SendRecv.spec().bus_factor(8), 1.0);
    }

    /// (collective, count requested, n, (send, recv, count column))
    type ShapeCase = (Collective, usize, usize, (usize, usize, usize));

    #[test]
    fn shapes_follow_nccl_tests_size_semantics() {
        use Collective::*;
        let cases: &[ShapeCase] = &[
            (AllReduce, 10, 3, (10, 10, 10)),
            (Broadcast, 10, 3, (10, 10, 10)),
            (Reduce, 10, 3, (10, 10, 10)),
            (SendRecv, 10, 3, (10, 10, 10)),
            // per-rank input 10/3 = 3; full output 9
            (AllGather, 10, 3, (3, 9, 3)),
            (ReduceScatter, 10, 3, (9, 3, 3)),
            (AllToAll, 10, 3, (9, 9, 3)),
            (Gather, 10, 3, (3, 9, 3)),
            (Scatter, 10, 3, (9, 3, 3)),
            (AllGather, 8, 4, (2, 8, 2)),
            (AllToAll, 2, 4, (0, 0, 0)),
            (AllReduce, 7, 1, (7, 7, 7)),
            (AllGather, 7, 1, (7, 7, 7)),
        ];
        for &(c, count, n, (send, recv, col)) in cases {
            let s = c.spec().shape(count, n);
            assert_eq!((s.send, s.recv, s.count), (send, recv, col), "{c} count={count} n={n}");
        }
    }

    #[test]
    fn per_rank_counts_round_down_to_16_bytes_as_nccl_tests_does() {
        use Collective::*;
        // 64 B of float at 3 ranks: 16 elements, 5 per rank -> 4 (16 B)
        assert_eq!(AllGather.aligned_count(16, 3, 4), 12);
        assert_eq!(AllGather.spec().shape(AllGather.aligned_count(16, 3, 4), 3).count, 4);
        // int8: multiples of 16 elements; double: of 2
        assert_eq!(AllToAll.aligned_count(100, 3, 1), 3 * 32);
        assert_eq!(Scatter.aligned_count(100, 3, 8), 3 * 32);
        assert_eq!(Gather.aligned_count(7, 4, 4), 0);
        // already aligned, and the collectives without a per-rank count
        assert_eq!(ReduceScatter.aligned_count(1 << 20, 4, 4), 1 << 20);
        for c in [AllReduce, Broadcast, Reduce, SendRecv] {
            assert_eq!(c.aligned_count(13, 3, 4), 13);
        }
    }

    /// Every request of a 2-rank and a 3-rank sweep falls in the window of
    /// the row it gives, and no other row's.
    #[test]
    fn a_rows_requested_window_holds_exactly_the_requests_that_give_it() {
        use Collective::*;
        for c in [
            AllGather,
            ReduceScatter,
            AllToAll,
            AllToAllV,
            Gather,
            Scatter,
            AllReduce,
            Broadcast,
        ] {
            for n in [2u64, 3, 5] {
                for dtype in DType::ALL {
                    let elem = dtype.size_bytes();
                    for request in (0..4096u64).step_by(elem) {
                        let traffic = Traffic::Weighted(alltoallv::Spread::new(0.0).unwrap());
                        let size = c.sized(request, n as usize, elem, traffic).size_bytes(dtype);
                        let w = c.requested_window(size, n);
                        assert!(
                            w.contains(&request),
                            "{c} n={n} {dtype}: {request} not in {w:?} of {size}"
                        );
                    }
                }
            }
        }
        assert_eq!(AllGather.requested_window(1008, 3), 1008..1056);
        assert!(AllGather.requested_window(1024, 2).contains(&1024));
        assert_eq!(AllReduce.requested_window(1024, 3), 1024..1025);
    }

    #[test]
    fn size_bytes_is_the_larger_buffer() {
        let s = Collective::AllGather.spec().shape(1000, 4);
        assert_eq!(s.size_bytes(DType::Float), 4000);
        let s = Collective::ReduceScatter.spec().shape(1001, 4);
        assert_eq!(s.size_bytes(DType::Double), 8000);
        let s = Collective::Gather.spec().shape(12, 3);
        assert_eq!(s.size_bytes(DType::Int8), 12);
    }

    #[test]
    fn only_reductions_take_an_op_and_only_rooted_ones_a_root() {
        use Collective::*;
        for c in Collective::ALL {
            let spec = c.spec();
            assert_eq!(
                spec.is_reduction(),
                matches!(c, AllReduce | ReduceScatter | Reduce),
                "{c}"
            );
            assert_eq!(
                spec.has_root(),
                matches!(c, Broadcast | Reduce | Gather | Scatter),
                "{c}"
            );
        }
    }

    #[test]
    fn output_lengths_per_rank() {
        use Collective::*;
        let at = |rank| Layout::new(3, rank, 1);
        let len = |c: Collective, rank| {
            let spec = c.spec();
            spec.output_len(&spec.shape(10, 3), &at(rank))
        };
        assert_eq!(len(AllReduce, 0), 10);
        assert_eq!(len(AllGather, 0), 9);
        assert_eq!(len(ReduceScatter, 2), 3);
        assert_eq!(len(Broadcast, 0), 10);
        assert_eq!(len(Reduce, 1), 10);
        assert_eq!(len(Reduce, 0), 0);
        assert_eq!(len(AllToAll, 2), 9);
        assert_eq!(len(Gather, 1), 9);
        assert_eq!(len(Gather, 2), 0);
        assert_eq!(len(Scatter, 0), 3);
        assert_eq!(len(SendRecv, 2), 10);
    }

    /// Simulates every collective over host vectors with its textbook
    /// definition and checks `expected` against it, element by element.
    #[test]
    fn expected_outputs_match_a_direct_simulation() {
        use crate::types::ReduceOp;
        use Collective::*;
        for n in 1..=5 {
            for c in Collective::ALL {
                let spec = c.spec();
                let shape = spec.shape(23, n);
                let op = spec.is_reduction().then_some(ReduceOp::Sum);
                let p = Pattern::new(DType::Int32, op, n, 3);
                let input = |r: usize| -> Vec<u64> { (0..shape.send).map(|i| p.input(r, i)).collect() };
                let per = shape.count;
                for root in 0..n {
                    for rank in 0..n {
                        let at = Layout::new(n, rank, root);
                        let want: Vec<u64> = match c {
                            AllReduce => (0..shape.send).map(|i| (0..n).map(|r| input(r)[i]).sum()).collect(),
                            Reduce if rank == root => {
                                (0..shape.send).map(|i| (0..n).map(|r| input(r)[i]).sum()).collect()
                            }
                            Reduce => vec![],
                            ReduceScatter => (0..per)
                                .map(|j| (0..n).map(|r| input(r)[rank * per + j]).sum())
                                .collect(),
                            AllGather => (0..n).flat_map(&input).collect(),
                            Gather if rank == root => (0..n).flat_map(&input).collect(),
                            Gather => vec![],
                            Broadcast => input(root),
                            Scatter => input(root)[rank * per..(rank + 1) * per].to_vec(),
                            AllToAll | AllToAllV => (0..n)
                                .flat_map(|r| input(r)[rank * per..(rank + 1) * per].to_vec())
                                .collect(),
                            SendRecv => input((rank + n - 1) % n),
                        };
                        let got: Vec<u64> = (0..spec.output_len(&shape, &at))
                            .map(|i| spec.expected(&p, &shape, &at, i))
                            .collect();
                        assert_eq!(got, want, "{c} n={n} rank={rank} root={root}");
                    }
                }
            }
        }
    }
}
