//! alltoallv: every rank sends a block of its own length to every rank
//! (itself included), as nccl-tests' alltoallv_perf (2.19, src/alltoallv.cu)
//! defines it: rank `i` sends `bytes(i, j)` to rank `j`; the blocks lie
//! back to back in the send buffer in peer order, and a rank receives the
//! blocks of ranks 0, 1, ... back to back in its receive buffer.
//!
//! The traffic (`Traffic`), per pair, in bytes, each rounded down to a
//! multiple of 16 bytes:
//! - generated (distance-weighted, the default): with `T = per-peer count *
//!   n * element size` the bytes one rank sends in all, `d = (j - i) mod n`
//!   and `S = n(n-1)/2`, `bytes = (1 - spread) * T/n + spread * d * T/S`:
//!   spread 0 sends `T/n` to every rank, spread 1 nothing to itself and
//!   more the farther the peer; every rank sends and receives the same
//!   total. The per-peer count is `(count / n)` rounded down to 16 bytes, as
//!   for alltoall;
//! - a matrix (`TrafficMatrix`): cell `[i][j]` of a file is what rank `i`
//!   sends rank `j`, times a scale; the sweep's size plays no part (the
//!   per-peer count, the `count` column, is 0).
//!
//! Size semantics (nccl-tests' `AlltoAllvGetCollByteCount` and `GetBw`):
//! the send buffer is the most any rank sends, the receive buffer the most
//! any rank receives, the reported size the larger of the two; busbw factor
//! `(n-1)/n`. With a matrix, buffers are reserved at the requested size
//! (`-e`, `Peers::reserved`), as nccl-tests allocates them, and operations
//! shift through them by the reported size. In place, the input and the output share the receive buffer
//! from its start: nccl-tests does not check that ("We don't support
//! in-place alltoallv"), and the backends that race on it do not either.

use std::path::Path;

use super::{CollectiveSpec, Layout, Pattern, Shape, spread_factor};

pub struct AllToAllV;

impl CollectiveSpec for AllToAllV {
    fn name(&self) -> &'static str {
        "alltoallv"
    }

    /// Without a traffic (`shape` below gives one): every block `count /
    /// n` elements, which is the generated traffic of spread 0.
    fn shape(&self, count: usize, nranks: usize) -> Shape {
        Shape::exchanged(count, nranks)
    }

    fn bus_factor(&self, nranks: usize) -> f64 {
        spread_factor(nranks)
    }

    fn input_len(&self, shape: &Shape, at: &Layout) -> usize {
        Peers::of(shape, at.nranks).sends(at.rank)
    }

    fn output_len(&self, shape: &Shape, at: &Layout) -> usize {
        Peers::of(shape, at.nranks).receives(at.rank)
    }

    fn expected(&self, pattern: &Pattern, shape: &Shape, at: &Layout, i: usize) -> u64 {
        let peers = Peers::of(shape, at.nranks);
        let mut start = 0;
        for from in 0..at.nranks {
            let len = peers.count(from, at.rank);
            if i < start + len {
                return pattern.input(from, peers.send_offset(from, at.rank) + i - start);
            }
            start += len;
        }
        0
    }

    /// The blocks' starts once, then a binary search per element: O(n)
    /// set-up and O(log n) per element instead of O(n) per element.
    fn expectation<'a>(
        &'a self,
        pattern: &'a Pattern,
        shape: &'a Shape,
        at: &'a Layout,
    ) -> Box<dyn Fn(usize) -> u64 + Sync + 'a> {
        let peers = Peers::of(shape, at.nranks);
        // (start in the output, the sender, where the block starts in its input)
        let mut blocks = Vec::with_capacity(at.nranks);
        let mut start = 0;
        for from in 0..at.nranks {
            let len = peers.count(from, at.rank);
            if len > 0 {
                blocks.push((start, from, peers.send_offset(from, at.rank)));
            }
            start += len;
        }
        Box::new(move |i| {
            let k = blocks.partition_point(|b| b.0 <= i);
            match k.checked_sub(1).map(|k| blocks[k]) {
                Some((start, from, offset)) => pattern.input(from, offset + i - start),
                None => 0,
            }
        })
    }
}

/// The shape of an alltoallv of `count` requested elements of `elem`
/// bytes at `nranks` ranks with `traffic` (nccl-tests'
/// `AlltoAllvGetCollByteCount`): the per-peer count of the generated
/// traffic, or 0 with a matrix; each buffer the most any rank needs.
pub fn shape(count: usize, nranks: usize, elem: usize, traffic: Traffic) -> Shape {
    let n = nranks.max(1);
    let elem = elem.clamp(1, 16);
    let per_peer = match traffic {
        Traffic::Weighted(_) => (count / n) / (16 / elem) * (16 / elem),
        Traffic::Matrix(_) => 0,
    };
    let peers = Peers {
        counts: Counts::Traffic {
            traffic,
            elem,
            total_bytes: (per_peer * n * elem) as u64,
            // a matrix's point holds `-e` in each buffer, as nccl-tests'
            // AllocateBuffs does (src/common.cu), however little its
            // busiest rank moves: its operations then shift through them
            // (startColl: `maxbytes / max(sendBytes, expectedBytes)` steps)
            reserve: match traffic {
                Traffic::Weighted(_) => 0,
                Traffic::Matrix(_) => count,
            },
        },
        nranks: n,
    };
    let (send, recv) = match traffic {
        // every rank sends and receives every distance once: rank 0 is all
        Traffic::Weighted(_) => (peers.sends(0), peers.receives(0)),
        Traffic::Matrix(_) => (0..n).fold((0, 0), |(s, r), rank| {
            (s.max(peers.sends(rank)), r.max(peers.receives(rank)))
        }),
    };
    Shape {
        send,
        recv,
        count: per_peer,
        peers: Some(peers),
    }
}

/// How much each rank sends each peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traffic {
    /// nccl-tests' generated traffic with this spread (0 uniform, 1 fully
    /// distance-weighted).
    Weighted(Spread),
    /// A per-pair byte matrix from a file. Read once per process and kept
    /// for its life, as the plan that refers to it.
    Matrix(&'static TrafficMatrix),
}

impl Default for Traffic {
    /// nccl-tests' default: spread 1.
    fn default() -> Self {
        Traffic::Weighted(Spread::FULL)
    }
}

impl Traffic {
    /// The CSV's `traffic` column: `describe`, but nothing for nccl-tests'
    /// default (spread 1), so that a default run's CSV keeps the default
    /// columns and compares with imported nccl-tests rows.
    pub fn column(&self) -> Option<String> {
        (*self != Traffic::default()).then(|| self.describe())
    }

    /// `spread=0.5`, or `matrix=FILE` with its scale where it is not 1.
    pub fn describe(&self) -> String {
        match self {
            Traffic::Weighted(s) => format!("spread={}", s.value()),
            Traffic::Matrix(m) if m.scale == 1.0 => format!("matrix={}", m.source),
            Traffic::Matrix(m) => format!("matrix={}*{}", m.source, m.scale),
        }
    }
}

/// nccl-tests' spread: 0 uniform .. 1 fully distance-weighted. A finite
/// number in [0, 1], so it compares as a value.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Spread(f64);

impl Eq for Spread {}

impl Spread {
    pub const FULL: Spread = Spread(1.0);

    pub fn new(value: f64) -> Result<Spread, String> {
        if (0.0..=1.0).contains(&value) {
            Ok(Spread(value))
        } else {
            Err(format!("'{value}' is not a spread between 0 and 1"))
        }
    }

    pub fn value(self) -> f64 {
        self.0
    }
}

impl std::str::FromStr for Spread {
    type Err = String;

    fn from_str(text: &str) -> Result<Spread, String> {
        match text.trim().parse::<f64>() {
            Ok(v) => Spread::new(v),
            Err(_) => Err(format!("'{}' is not a spread between 0 and 1", text.trim())),
        }
    }
}

impl serde::Serialize for Spread {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

/// A square matrix of bytes, cell `[i][j]` what rank `i` sends rank `j`
/// (nccl-tests' `NCCL_TESTS_ALLTOALLV_MATRIX_FILE`): whitespace-separated
/// non-negative numbers, one row per line, times the scale, each rounded
/// down to a whole byte and then to a multiple of 16 bytes. A matrix larger
/// than the job is read from its top-left corner.
#[derive(Clone, Debug, PartialEq)]
pub struct TrafficMatrix {
    dim: usize,
    bytes: Vec<u64>,
    /// Where it came from, for messages and reports.
    pub source: String,
    pub scale: f64,
}

impl Eq for TrafficMatrix {}

impl TrafficMatrix {
    /// Reads `path` (scaled by `scale`) and keeps it for the life of the
    /// process (see `Traffic::Matrix`).
    pub fn read(path: &Path, scale: f64) -> Result<&'static TrafficMatrix, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let matrix = TrafficMatrix::parse(&text, scale, &path.display().to_string())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Box::leak(Box::new(matrix)))
    }

    /// The matrix of `text`; `source` names it. Errors name the row and
    /// column (from 1).
    pub fn parse(text: &str, scale: f64, source: &str) -> Result<TrafficMatrix, String> {
        if !(scale.is_finite() && scale >= 0.0) {
            return Err(format!("the scale {scale} is not a number of at least 0"));
        }
        let mut rows: Vec<Vec<u64>> = Vec::new();
        for line in text.lines() {
            let cells: Vec<&str> = line.split_whitespace().collect();
            if cells.is_empty() {
                continue;
            }
            let (row, width) = (rows.len() + 1, rows.first().map(Vec::len));
            if let Some(width) = width
                && cells.len() != width
            {
                return Err(format!("row {row} has {} values where row 1 has {width}", cells.len()));
            }
            let values = cells
                .iter()
                .enumerate()
                .map(|(c, cell)| cell_bytes(cell, scale).map_err(|why| format!("row {row} column {}: {why}", c + 1)))
                .collect::<Result<Vec<u64>, String>>()?;
            rows.push(values);
        }
        let dim = rows.len();
        if dim == 0 {
            return Err("no values: the file is empty".into());
        }
        if rows[0].len() != dim {
            return Err(format!(
                "the matrix must be square, but it has {dim} rows of {} values",
                rows[0].len()
            ));
        }
        Ok(TrafficMatrix {
            dim,
            bytes: rows.concat(),
            source: source.to_string(),
            scale,
        })
    }

    /// Rows (and columns).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Every cell, as text: what ranks compare to be sure they read the
    /// same matrix (`engine::digest` hashes it).
    pub fn fingerprint(&self) -> String {
        let cells: Vec<String> = self.bytes.iter().map(u64::to_string).collect();
        format!("{0}x{0}: {1}", self.dim, cells.join(" "))
    }

    /// What rank `from` sends rank `to`, in bytes (a multiple of 16).
    pub fn bytes(&self, from: usize, to: usize) -> u64 {
        self.bytes.get(from * self.dim + to).copied().unwrap_or(0)
    }
}

/// One cell: a non-negative number times `scale`, rounded down to a byte,
/// then to 16 bytes.
fn cell_bytes(cell: &str, scale: f64) -> Result<u64, String> {
    let value: f64 = cell.parse().map_err(|_| format!("'{cell}' is not a number"))?;
    if !value.is_finite() || value < 0.0 {
        return Err(format!("'{cell}' is not a byte count of at least 0"));
    }
    let scaled = value * scale;
    if scaled >= u64::MAX as f64 {
        return Err(format!("{cell} times the scale {scale} is too large"));
    }
    Ok((scaled as u64) & !15)
}

/// What each rank sends each peer at one point, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Peers {
    counts: Counts,
    nranks: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counts {
    /// Every block this many elements (a shape made without a traffic).
    Uniform(usize),
    /// `traffic`'s bytes in elements of `elem` bytes; the generated
    /// traffic of `total_bytes` per rank; buffers of at least `reserve`
    /// elements.
    Traffic {
        traffic: Traffic,
        elem: usize,
        total_bytes: u64,
        reserve: usize,
    },
}

impl Peers {
    /// The blocks of `shape` at `nranks` ranks.
    pub fn of(shape: &Shape, nranks: usize) -> Peers {
        shape.peers.unwrap_or(Peers {
            counts: Counts::Uniform(shape.count),
            nranks: nranks.max(1),
        })
    }

    /// Bytes rank `from` sends rank `to`, of elements of `elem` bytes.
    fn bytes(&self, from: usize, to: usize, traffic: Traffic, total_bytes: u64) -> u64 {
        match traffic {
            Traffic::Matrix(m) => m.bytes(from, to),
            Traffic::Weighted(spread) => weighted_bytes(from, to, self.nranks, total_bytes, spread.value()),
        }
    }

    /// Elements each buffer holds at least, beyond what the blocks need
    /// (a traffic matrix's point: its requested size, `-e`).
    pub fn reserved(&self) -> usize {
        match self.counts {
            Counts::Traffic { reserve, .. } => reserve,
            Counts::Uniform(_) => 0,
        }
    }

    /// The traffic these blocks come from (`None`: `count` to every peer).
    pub fn traffic(&self) -> Option<Traffic> {
        match self.counts {
            Counts::Uniform(_) => None,
            Counts::Traffic { traffic, .. } => Some(traffic),
        }
    }

    /// Elements rank `from` sends rank `to`.
    pub fn count(&self, from: usize, to: usize) -> usize {
        match self.counts {
            Counts::Uniform(c) => c,
            Counts::Traffic {
                traffic,
                elem,
                total_bytes,
                ..
            } => (self.bytes(from, to, traffic, total_bytes) / elem as u64) as usize,
        }
    }

    /// Elements `rank` sends in all.
    pub fn sends(&self, rank: usize) -> usize {
        (0..self.nranks).map(|to| self.count(rank, to)).sum()
    }

    /// Elements `rank` receives in all.
    pub fn receives(&self, rank: usize) -> usize {
        (0..self.nranks).map(|from| self.count(from, rank)).sum()
    }

    /// Where `from`'s block for `to` starts in `from`'s input.
    pub fn send_offset(&self, from: usize, to: usize) -> usize {
        (0..to).map(|k| self.count(from, k)).sum()
    }

    /// Where the block from `from` starts in `to`'s output.
    pub fn recv_offset(&self, to: usize, from: usize) -> usize {
        (0..from).map(|k| self.count(k, to)).sum()
    }
}

/// nccl-tests' generated traffic (`AlltoAllvGetPeerBytesDistanceWeighted`),
/// with its arithmetic in double precision in its order, so that every
/// block rounds as there.
fn weighted_bytes(from: usize, to: usize, nranks: usize, total_bytes: u64, spread: f64) -> u64 {
    if nranks <= 1 {
        return total_bytes & !15;
    }
    let distance = (to + nranks - from % nranks) % nranks;
    let sum_distances = (nranks * (nranks - 1) / 2) as f64;
    let uniform = total_bytes as f64 / nranks as f64;
    let dist = distance as f64 * total_bytes as f64 / sum_distances;
    let bytes = (1.0 - spread) * uniform + spread * dist;
    (bytes as u64) & !15
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::Collective;
    use crate::types::DType;

    fn matrix(text: &str, scale: f64) -> &'static TrafficMatrix {
        Box::leak(Box::new(TrafficMatrix::parse(text, scale, "m.txt").unwrap()))
    }

    fn weighted(spread: f64) -> Traffic {
        Traffic::Weighted(Spread::new(spread).unwrap())
    }

    /// Per-pair bytes, rank-major, of `shape` at `n` ranks and `elem`.
    fn pair_bytes(shape: &Shape, n: usize, elem: usize) -> Vec<Vec<usize>> {
        let p = Peers::of(shape, n);
        (0..n).map(|i| (0..n).map(|j| p.count(i, j) * elem).collect()).collect()
    }

    /// nccl-tests' rule worked by hand: 1 MiB of float at 4 ranks is
    /// 262144 elements, 65536 per peer (already a multiple of 16 bytes),
    /// so T = 1048576 bytes and S = 6. Spread 1: distance d gets d*T/6
    /// (0, 174762.67, 349525.33, 524288) rounded down to 16 bytes: 0,
    /// 174752, 349520, 524288, 1048560 in all. Spread 0.5: T/8 + d*T/12
    /// (131072, 218453.33, 305834.67, 393216): 131072, 218448, 305824,
    /// 393216, again 1048560. Spread 0: T/4 = 262144 to every rank.
    #[test]
    fn generated_blocks_follow_nccl_tests_rule_worked_by_hand() {
        let count = (1 << 20) / 4;
        let by_distance = |spread: f64| -> Vec<usize> {
            let s = shape(count, 4, 4, weighted(spread));
            let bytes = pair_bytes(&s, 4, 4);
            // rank 2 sends to (2 + d) mod 4: the same by distance on every rank
            for i in 0..4 {
                for d in 0..4 {
                    assert_eq!(bytes[i][(i + d) % 4], bytes[0][d], "spread {spread} rank {i} d {d}");
                }
            }
            assert_eq!(s.count, 65536);
            assert_eq!(s.send, s.recv);
            assert_eq!(s.send * 4, bytes[0].iter().sum::<usize>());
            bytes[0].clone()
        };
        assert_eq!(by_distance(1.0), vec![0, 174752, 349520, 524288]);
        assert_eq!(by_distance(0.5), vec![131072, 218448, 305824, 393216]);
        assert_eq!(by_distance(0.0), vec![262144; 4]);
        let size = |spread| shape(count, 4, 4, weighted(spread)).size_bytes(DType::Float);
        assert_eq!((size(1.0), size(0.5), size(0.0)), (1048560, 1048560, 1048576));
    }

    /// 3 ranks, 3000 B of int8: 1000 per peer, rounded down to 992 (16 B);
    /// T = 2976, S = 3: spread 1 gives d * 992 (0, 992, 1984); spread 0.5
    /// gives 496 + d * 496 (496, 992, 1488), all multiples of 16 already.
    /// At 2 ranks and spread 1, S = 1: rank 0 sends all of T to rank 1.
    #[test]
    fn generated_blocks_at_2_and_3_ranks() {
        let s = shape(3000, 3, 1, weighted(1.0));
        assert_eq!(s.count, 992);
        assert_eq!(pair_bytes(&s, 3, 1)[0], vec![0, 992, 1984]);
        assert_eq!(pair_bytes(&s, 3, 1)[2], vec![992, 1984, 0]);
        let s = shape(3000, 3, 1, weighted(0.5));
        assert_eq!(pair_bytes(&s, 3, 1)[1], vec![1488, 496, 992]);
        let s = shape(256, 2, 4, weighted(1.0));
        // 256 floats, 128 per peer, T = 1024
        assert_eq!(pair_bytes(&s, 2, 4), vec![vec![0, 1024], vec![1024, 0]]);
        assert_eq!((s.send, s.recv, s.count), (256, 256, 128));
        // one rank sends everything to itself: 25 floats, 24 in 16 B steps
        let s = shape(25, 1, 4, weighted(1.0));
        assert_eq!(pair_bytes(&s, 1, 4), vec![vec![96]]);
    }

    #[test]
    fn a_matrix_gives_each_pair_its_cell_rounded_down_to_16_bytes() {
        let m = matrix("100 200 150\n50  100 75\n\n300 150 200\n", 1.0);
        assert_eq!(m.dim(), 3);
        let s = shape(999_999, 3, 4, Traffic::Matrix(m));
        // 96 192 144 / 48 96 64 / 288 144 192
        assert_eq!(
            pair_bytes(&s, 3, 4),
            vec![vec![96, 192, 144], vec![48, 96, 64], vec![288, 144, 192]]
        );
        // sends 432, 208, 624; receives 432, 432, 400: the size is the most
        assert_eq!((s.send * 4, s.recv * 4, s.count), (624, 432, 0));
        // a larger matrix is read from its top-left corner
        let s = shape(1, 2, 4, Traffic::Matrix(m));
        assert_eq!(pair_bytes(&s, 2, 4), vec![vec![96, 192], vec![48, 96]]);
        // the scale multiplies before rounding: 100 * 0.5 = 50 -> 48
        let half = matrix("100 200\n50 100", 0.5);
        assert_eq!(half.bytes(0, 0), 48);
        assert_eq!(half.bytes(1, 0), 16);
    }

    #[test]
    fn bad_matrices_are_refused_naming_the_row_and_column() {
        let err = |text: &str| TrafficMatrix::parse(text, 1.0, "m").unwrap_err();
        assert_eq!(err(""), "no values: the file is empty");
        assert_eq!(err("1 2\n3"), "row 2 has 1 values where row 1 has 2");
        assert_eq!(err("1 2\n3 x"), "row 2 column 2: 'x' is not a number");
        assert_eq!(
            err("1 -2\n3 4"),
            "row 1 column 2: '-2' is not a byte count of at least 0"
        );
        assert_eq!(
            err("1 2 3\n4 5 6"),
            "the matrix must be square, but it has 2 rows of 3 values"
        );
        assert_eq!(err("inf"), "row 1 column 1: 'inf' is not a byte count of at least 0");
        assert!(TrafficMatrix::parse("1", -1.0, "m").is_err());
        // CRLF and tabs are whitespace
        assert_eq!(
            TrafficMatrix::parse("16\t32\r\n48 64\r\n", 1.0, "m")
                .unwrap()
                .bytes(1, 1),
            64
        );
    }

    #[test]
    fn offsets_lay_blocks_back_to_back_in_peer_order() {
        let m = matrix("16 32 48\n64 80 96\n112 128 144", 1.0);
        let s = shape(0, 3, 4, Traffic::Matrix(m));
        let p = Peers::of(&s, 3);
        // rank 1 sends 16, 20, 24 elements: to rank 2 after 16 + 20
        assert_eq!(p.send_offset(1, 2), 36);
        // rank 2 receives 12, 24, 36: the block from rank 2 after 12 + 24
        assert_eq!(p.recv_offset(2, 2), 36);
        assert_eq!((p.sends(1), p.receives(2)), (60, 72));
    }

    #[test]
    fn every_expected_element_is_the_senders_matching_input() {
        for traffic in [
            weighted(1.0),
            weighted(0.3),
            Traffic::Matrix(matrix("0 48\n32 16", 1.0)),
        ] {
            for n in 1..=2 {
                let s = shape(96, n, 4, traffic);
                let p = Peers::of(&s, n);
                let pattern = Pattern::new(DType::Int32, None, n, 7);
                for rank in 0..n {
                    let at = Layout::new(n, rank, 0);
                    let spec = Collective::AllToAllV.spec();
                    let mut want = Vec::new();
                    for from in 0..n {
                        let start = p.send_offset(from, rank);
                        want.extend((start..start + p.count(from, rank)).map(|i| pattern.input(from, i)));
                    }
                    let len = spec.output_len(&s, &at);
                    assert_eq!(len, want.len());
                    let fast = spec.expectation(&pattern, &s, &at);
                    let got: Vec<u64> = (0..len).map(|i| spec.expected(&pattern, &s, &at, i)).collect();
                    let got_fast: Vec<u64> = (0..len).map(&fast).collect();
                    assert_eq!(got, want, "{traffic:?} n={n} rank={rank}");
                    assert_eq!(got_fast, want);
                }
            }
        }
    }
}
