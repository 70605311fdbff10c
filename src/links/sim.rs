//! A simulated cluster behind the `Measurer` trait, with a virtual clock:
//! what the finder is tested and benchmarked on (no data moves; every
//! report made on it says "simulation").
//!
//! The model (docs/links.md, "The simulation"): hosts of `ranks_per_node`
//! ranks, each rank with its own NIC, hosts under leaf switches of
//! `leaf_size` hosts (named `lLL-nNNN`, so the hostname pattern
//! `l{leaf}-n*` groups them). A pair's bandwidth is
//!
//! ```text
//! nominal x min(fault factors of its ends) x link fault factor
//!         x static spread of each end and of the pair (cables, ports)
//!         x the round's routing jitter (and, rarely, a hash collision that halves it)
//!         x the leaf uplinks' share when a round sends more flows across leaves
//!           than they carry (oversubscription)
//!         x per-sample noise with occasional preempted samples
//! ```
//!
//! Pairs on one host use the NVLink figures and no network factor.
//! Latency is the base latency times the ends' latency factors and noise,
//! with occasional slow samples. An all-reduce on a subset runs at the
//! slowest member's network bandwidth times its collective factor (a fault
//! that only collectives show) and the slowest ring link, times noise.
//! The clock advances by each round's slowest pair.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Endpoint;
use super::layout::{HostPattern, Topology};
use super::measure::{Measurer, PairSamples, Probe};
use super::metric::{Metric, Value};
use super::schedule::Pair;
use crate::clock::VirtualClock;
use crate::error::Error;

/// Noise of the model, as relative standard deviations and rates.
#[derive(Clone, Debug, PartialEq)]
pub struct Noise {
    /// Per sample (lognormal).
    pub sample_sd: f64,
    /// Share of samples hit by a preemption (0.5x to 0.9x the bandwidth,
    /// 1.2x to 3x the latency).
    pub outliers: f64,
    /// Fixed per rank (its NIC, its PCIe slot) and per pair (the path).
    pub static_rank_sd: f64,
    pub static_pair_sd: f64,
    /// Per pair and round (adaptive routing's imbalance).
    pub round_sd: f64,
    /// Per cross-leaf pair and round: the chance that two flows hash onto
    /// one uplink, halving the pair for that round.
    pub collisions: f64,
    /// Latency, per sample (lognormal).
    pub latency_sd: f64,
}

impl Noise {
    pub const DEFAULT: Noise = Noise {
        sample_sd: 0.02,
        outliers: 0.01,
        static_rank_sd: 0.01,
        static_pair_sd: 0.01,
        round_sd: 0.01,
        collisions: 0.0005,
        latency_sd: 0.03,
    };
}

/// The simulated cluster's shape and figures.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    pub nodes: usize,
    pub ranks_per_node: usize,
    /// Hosts per leaf switch.
    pub leaf_size: usize,
    /// Leaf uplinks' oversubscription: 1 is non-blocking, 2 carries half
    /// the leaf's NICs across leaves at full rate.
    pub oversubscription: f64,
    /// One NIC, one direction (400 Gb/s InfiniBand: about 48 GB/s).
    pub nic_gbps: f64,
    /// One GPU pair on one host, one direction (NVLink 4 through NVSwitch).
    pub intra_gbps: f64,
    pub latency_us: f64,
    pub intra_latency_us: f64,
    /// An all-reduce's bus bandwidth relative to the slowest NIC.
    pub allreduce_efficiency: f64,
    pub noise: Noise,
    pub seed: u64,
}

impl SimConfig {
    /// `nodes` hosts of `ranks_per_node` ranks under leaves of 16 hosts,
    /// non-blocking, with the default noise.
    pub fn nodes(nodes: usize, ranks_per_node: usize) -> SimConfig {
        SimConfig {
            nodes,
            ranks_per_node,
            leaf_size: 16,
            oversubscription: 1.0,
            nic_gbps: 48.0,
            intra_gbps: 360.0,
            latency_us: 3.0,
            intra_latency_us: 1.5,
            allreduce_efficiency: 0.9,
            noise: Noise::DEFAULT,
            seed: 1,
        }
    }
}

/// An injected fault. Factors multiply bandwidth (below 1: slower) and
/// latency (above 1: slower).
#[derive(Clone, Debug, PartialEq)]
pub enum Fault {
    /// Every rank of a host, on the network (a throttled CPU, a bad PCIe
    /// switch, a host-wide NIC firmware problem).
    Node { node: usize, bw: f64, latency: f64 },
    /// One rank's GPU and NIC: everything it sends.
    Rank { rank: usize, bw: f64, latency: f64 },
    /// One pair of ranks (a cable, a port, a route).
    Link { a: usize, b: usize, bw: f64, latency: f64 },
    /// A host that only all-reduces show (pairs run at full speed).
    Collective { node: usize, bw: f64 },
}

impl Fault {
    /// A host `slowdown` times slower: bandwidth / slowdown, latency x slowdown.
    pub fn slow_node(node: usize, slowdown: f64) -> Fault {
        Fault::Node {
            node,
            bw: 1.0 / slowdown,
            latency: slowdown,
        }
    }

    pub fn slow_rank(rank: usize, slowdown: f64) -> Fault {
        Fault::Rank {
            rank,
            bw: 1.0 / slowdown,
            latency: slowdown,
        }
    }

    /// A pair with bandwidth / slowdown (a rate limit: latency unchanged).
    pub fn slow_link(a: usize, b: usize, slowdown: f64) -> Fault {
        Fault::Link {
            a,
            b,
            bw: 1.0 / slowdown,
            latency: 1.0,
        }
    }

    pub fn collective_only(node: usize, slowdown: f64) -> Fault {
        Fault::Collective {
            node,
            bw: 1.0 / slowdown,
        }
    }
}

/// SplitMix64: small, fast, and the same sequence on every platform.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.uniform() * n as f64) as usize % n.max(1)
    }

    /// Standard normal (Box-Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = self.uniform().max(1e-300);
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// exp(N(0, sd)).
    pub fn lognormal(&mut self, sd: f64) -> f64 {
        (sd * self.normal()).exp()
    }
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// PCI bus ids of the eight GPUs of a typical HGX board.
const BUS_IDS: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];

/// The simulated cluster.
#[derive(Debug)]
pub struct SimCluster {
    cfg: SimConfig,
    endpoints: Vec<Endpoint>,
    faults: Vec<Fault>,
    rng: Rng,
    clock: VirtualClock,
    /// Per rank: its static factor.
    static_rank: Vec<f64>,
}

impl SimCluster {
    pub fn new(cfg: SimConfig, faults: Vec<Fault>) -> SimCluster {
        let mut rng = Rng::new(cfg.seed);
        let n = cfg.nodes * cfg.ranks_per_node;
        let endpoints = (0..n)
            .map(|rank| {
                let node = rank / cfg.ranks_per_node.max(1);
                let local = rank % cfg.ranks_per_node.max(1);
                Endpoint {
                    rank,
                    host: host_name(node, cfg.leaf_size),
                    local,
                    gpu: Some(
                        BUS_IDS
                            .get(local)
                            .map_or_else(|| format!("0000:{:02x}:00.0", local), |s| s.to_string()),
                    ),
                    nic: Some(format!("mlx5_{local}")),
                }
            })
            .collect();
        let static_rank = (0..n).map(|_| rng.lognormal(cfg.noise.static_rank_sd)).collect();
        SimCluster {
            cfg,
            endpoints,
            faults,
            rng,
            clock: VirtualClock::new(),
            static_rank,
        }
    }

    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    pub fn faults(&self) -> &[Fault] {
        &self.faults
    }

    /// The leaves, from the hostname pattern, when there is more than one.
    pub fn topology(&self) -> Option<Topology> {
        if self.cfg.nodes <= self.cfg.leaf_size {
            return None;
        }
        let pattern = HostPattern::parse("l{leaf}-n*").ok()?;
        let hosts: Vec<String> = (0..self.cfg.nodes).map(|n| host_name(n, self.cfg.leaf_size)).collect();
        Topology::from_pattern(&pattern, &hosts).ok()
    }

    fn node(&self, rank: usize) -> usize {
        rank / self.cfg.ranks_per_node.max(1)
    }

    fn leaf(&self, rank: usize) -> usize {
        self.node(rank) / self.cfg.leaf_size.max(1)
    }

    /// A rank's bandwidth and latency factors from faults, on the network
    /// or on its host.
    fn rank_factors(&self, rank: usize, network: bool) -> (f64, f64) {
        let (mut bw, mut lat) = (1.0f64, 1.0f64);
        for f in &self.faults {
            match *f {
                Fault::Node { node, bw: b, latency } if network && node == self.node(rank) => {
                    bw *= b;
                    lat *= latency;
                }
                Fault::Rank {
                    rank: r,
                    bw: b,
                    latency,
                } if r == rank => {
                    bw *= b;
                    lat *= latency;
                }
                _ => {}
            }
        }
        (bw, lat)
    }

    /// Whether pair `p` crosses the network, and the (bandwidth, latency)
    /// factors of its ends and its link.
    fn pair_factors(&self, p: Pair) -> (bool, [(f64, f64); 3]) {
        let network = self.node(p.a) != self.node(p.b);
        let ends = [self.rank_factors(p.a, network), self.rank_factors(p.b, network)];
        (network, [ends[0], ends[1], self.link_factors(p)])
    }

    fn link_factors(&self, p: Pair) -> (f64, f64) {
        let (mut bw, mut lat) = (1.0f64, 1.0f64);
        for f in &self.faults {
            if let Fault::Link { a, b, bw: x, latency } = *f
                && Pair::new(a, b) == p
            {
                bw *= x;
                lat *= latency;
            }
        }
        (bw, lat)
    }

    fn collective_factor(&self, rank: usize) -> f64 {
        self.faults
            .iter()
            .map(|f| match *f {
                Fault::Collective { node, bw } if node == self.node(rank) => bw,
                _ => 1.0,
            })
            .product()
    }

    /// The fixed spread of a pair's path: the same on every call.
    fn static_pair(&self, p: Pair) -> f64 {
        let h = mix(self.cfg.seed ^ mix((p.a as u64) << 32 | p.b as u64));
        let mut r = Rng::new(h);
        r.lognormal(self.cfg.noise.static_pair_sd)
    }

    /// Each pair's bandwidth before per-sample noise, for one round.
    fn round_bandwidths(&mut self, round: &[Pair]) -> Vec<f64> {
        // cross-leaf flows per leaf, against what its uplinks carry
        let mut flows: BTreeMap<usize, usize> = BTreeMap::new();
        for p in round {
            let (la, lb) = (self.leaf(p.a), self.leaf(p.b));
            if la != lb {
                *flows.entry(la).or_default() += 1;
                *flows.entry(lb).or_default() += 1;
            }
        }
        let capacity = (self.cfg.leaf_size * self.cfg.ranks_per_node) as f64 / self.cfg.oversubscription.max(1e-9);
        let share = |leaf: usize| flows.get(&leaf).map_or(1.0, |&f| (capacity / f as f64).min(1.0));
        round
            .iter()
            .map(|&p| {
                let (network, [(fa, _), (fb, _), (fl, _)]) = self.pair_factors(p);
                let base = if network {
                    self.cfg.nic_gbps
                } else {
                    self.cfg.intra_gbps
                };
                let mut bw = base * fa.min(fb) * fl * self.static_pair(p);
                if network {
                    bw *= self.static_rank[p.a].min(self.static_rank[p.b]);
                    bw *= self.rng.lognormal(self.cfg.noise.round_sd);
                    let (la, lb) = (self.leaf(p.a), self.leaf(p.b));
                    if la != lb {
                        bw *= share(la).min(share(lb));
                        if self.rng.uniform() < self.cfg.noise.collisions {
                            bw *= 0.5;
                        }
                    }
                }
                bw
            })
            .collect()
    }

    fn sample_bw(&mut self, bw: f64) -> f64 {
        let mut v = bw * self.rng.lognormal(self.cfg.noise.sample_sd);
        if self.rng.uniform() < self.cfg.noise.outliers {
            v *= 0.5 + 0.4 * self.rng.uniform();
        }
        v
    }

    fn sample_latency(&mut self, lat: f64) -> f64 {
        let mut v = lat * self.rng.lognormal(self.cfg.noise.latency_sd);
        if self.rng.uniform() < 2.0 * self.cfg.noise.outliers {
            v *= 1.2 + 1.8 * self.rng.uniform();
        }
        v
    }

    fn check(&self, ranks: impl IntoIterator<Item = usize>) -> Result<(), Error> {
        for r in ranks {
            if r >= self.endpoints.len() {
                return Err(Error::runtime(format!(
                    "simulation: rank {r} asked for, the cluster has {} ranks",
                    self.endpoints.len()
                )));
            }
        }
        Ok(())
    }
}

/// `lLL-nNNN`: leaf and host number.
fn host_name(node: usize, leaf_size: usize) -> String {
    format!("l{:02}-n{:03}", node / leaf_size.max(1), node)
}

impl Measurer for SimCluster {
    fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }

    fn measure(&mut self, rounds: &[Vec<Pair>], probe: &Probe) -> Result<Vec<Vec<PairSamples>>, Error> {
        let mut out = Vec::with_capacity(rounds.len());
        for round in rounds {
            self.check(round.iter().flat_map(|p| [p.a, p.b]))?;
            let bandwidths = self.round_bandwidths(round);
            let mut longest = 0f64;
            let mut results = Vec::with_capacity(round.len());
            for (&p, &bw) in round.iter().zip(&bandwidths) {
                let (network, [(_, la), (_, lb), (_, ll)]) = self.pair_factors(p);
                let base = if network {
                    self.cfg.latency_us
                } else {
                    self.cfg.intra_latency_us
                };
                let latency = base * la.max(lb) * ll;
                let mut s = PairSamples {
                    pair: p,
                    wrong: None,
                    ..PairSamples::default()
                };
                for _ in 0..probe.samples {
                    for m in Metric::ALL {
                        let v = match m.spec().value {
                            Value::Bandwidth { directions: 1 } => self.sample_bw(bw),
                            // several directions at once: a little under
                            // that many times one
                            Value::Bandwidth { directions } => directions as f64 * self.sample_bw(0.95 * bw),
                            Value::HalfRoundTripUs => self.sample_latency(latency),
                        };
                        s.samples.get_mut(m).push(v);
                    }
                }
                let bytes = probe.size_bytes as f64;
                let per_sample_s =
                    probe.iters as f64 * (bytes / (bw * 1e9) + 2.0 * bytes / (2.0 * bw * 1e9) + 2.0 * latency * 1e-6);
                longest = longest.max(per_sample_s * (probe.samples + probe.warmup) as f64);
                results.push(s);
            }
            self.clock.advance(Duration::from_secs_f64(longest));
            out.push(results);
        }
        Ok(out)
    }

    fn all_reduce(&mut self, subsets: &[Vec<usize>], probe: &Probe) -> Result<Vec<Vec<f64>>, Error> {
        let mut out = Vec::with_capacity(subsets.len());
        let mut longest = 0f64;
        for subset in subsets {
            self.check(subset.iter().copied())?;
            if subset.is_empty() {
                return Err(Error::runtime("simulation: an all-reduce on no rank"));
            }
            let hosts: std::collections::BTreeSet<usize> = subset.iter().map(|&r| self.node(r)).collect();
            let network = hosts.len() > 1;
            let base = if network {
                self.cfg.nic_gbps
            } else {
                self.cfg.intra_gbps
            };
            let mut bw = f64::INFINITY;
            for &r in subset {
                let (f, _) = self.rank_factors(r, network);
                let s = if network { self.static_rank[r] } else { 1.0 };
                bw = bw.min(base * f * s * self.collective_factor(r));
            }
            // the ring: each rank sends to the next
            let mut ring = 1.0f64;
            for (i, &r) in subset.iter().enumerate() {
                let next = subset[(i + 1) % subset.len()];
                if next != r {
                    ring = ring.min(self.link_factors(Pair::new(r, next)).0);
                }
            }
            bw *= ring;
            bw *= self.cfg.allreduce_efficiency * self.rng.lognormal(self.cfg.noise.round_sd);
            let samples: Vec<f64> = (0..probe.samples).map(|_| self.sample_bw(bw)).collect();
            let factor = crate::collective::Collective::AllReduce.spec().bus_factor(subset.len());
            let bytes = probe.size_bytes as f64;
            // busbw = algbw x the all-reduce's factor, so the time is factor x bytes / busbw
            let per_op_s = factor * bytes / (bw * 1e9);
            longest = longest.max(per_op_s * (probe.iters * (probe.samples + probe.warmup)) as f64);
            out.push(samples);
        }
        self.clock.advance(Duration::from_secs_f64(longest));
        Ok(out)
    }

    fn describe(&self) -> String {
        format!(
            "simulation (links::sim, no data moves): {} hosts x {} ranks, leaves of {}, {:.0} GB/s NICs{}",
            self.cfg.nodes,
            self.cfg.ranks_per_node,
            self.cfg.leaf_size,
            self.cfg.nic_gbps,
            if self.cfg.oversubscription > 1.0 {
                format!(", uplinks oversubscribed {}:1", self.cfg.oversubscription)
            } else {
                String::new()
            }
        )
    }

    fn elapsed_s(&self) -> f64 {
        self.clock.now().as_secs_f64()
    }
}

#[cfg(test)]
mod tests;
