//! The finder's benchmark on the simulation: random injections of one
//! fault each (a slow node, a slow link, a fault only collectives show, or
//! none), and how often the finder names it (recall), how often what it
//! names is right (precision), and how many rounds it needs beyond the
//! matrix. Figures for a person to read (scripts/bench/links-finder.sh
//! prints them); nothing here asserts a target.

use std::fmt::Write;

use super::finder::{FinderConfig, FindingKind, Outcome, Rounds, find};
use super::layout::Layout;
use super::measure::Measurer;
use super::schedule::{self, Level};
use super::sim::{Fault, Noise, Rng, SimCluster, SimConfig};
use crate::error::Error;

crate::types::vocabulary! {
    /// What each trial injects, in the benchmark's order.
    pub enum Injection: "injection", Exact {
        /// One host `slowdown` times slower (bandwidth and latency).
        SlowNode = "slow node",
        /// One pair of measured ranks with bandwidth / `slowdown`.
        SlowLink = "slow link",
        /// One host that only all-reduces see.
        Collective = "collective-only",
        Healthy = "healthy",
    }
}

/// One benchmark cell.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// Ranks in all.
    pub ranks: usize,
    pub ranks_per_node: usize,
    pub level: Level,
    pub trials: usize,
    pub slowdown: f64,
    pub seed: u64,
    /// The simulated fabric: leaf uplinks' oversubscription (1: none), and
    /// a factor on every noise of the model (`sim::Noise`).
    pub oversubscription: f64,
    pub noise_scale: f64,
    pub finder: FinderConfig,
}

impl BenchConfig {
    /// The simulation of this cell with `seed`.
    pub fn sim(&self, seed: u64) -> SimConfig {
        let base = SimConfig::nodes(self.ranks / self.ranks_per_node.max(1), self.ranks_per_node);
        let k = self.noise_scale;
        SimConfig {
            seed,
            oversubscription: self.oversubscription,
            noise: Noise {
                sample_sd: base.noise.sample_sd * k,
                outliers: base.noise.outliers * k,
                static_rank_sd: base.noise.static_rank_sd * k,
                static_pair_sd: base.noise.static_pair_sd * k,
                round_sd: base.noise.round_sd * k,
                collisions: base.noise.collisions * k,
                latency_sd: base.noise.latency_sd * k,
            },
            ..base
        }
    }
}

/// What a cell's trials gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub trials: usize,
    /// Trials whose injected fault was named, with the right kind.
    pub found: usize,
    /// Findings in all trials, and how many of them were the injected fault.
    pub named: usize,
    pub correct: usize,
    /// Trials with any finding.
    pub with_findings: usize,
    pub matrix_rounds: usize,
    pub beyond_max: usize,
    pub beyond_sum: usize,
    pub bound: usize,
    /// One finder run's time on the simulation's clock (the first trial).
    pub finder_s: f64,
}

impl Tally {
    pub fn recall(&self) -> Option<f64> {
        (self.trials > 0).then(|| self.found as f64 / self.trials as f64)
    }

    pub fn precision(&self) -> Option<f64> {
        (self.named > 0).then(|| self.correct as f64 / self.named as f64)
    }

    pub fn beyond_mean(&self) -> f64 {
        self.beyond_sum as f64 / self.trials.max(1) as f64
    }
}

/// One trial: a fresh cluster (its own seed) with `fault`.
pub fn trial(cfg: &BenchConfig, seed: u64, faults: Vec<Fault>) -> Result<Outcome, Error> {
    let mut sim = SimCluster::new(cfg.sim(seed), faults);
    let s = schedule::build(sim.endpoints(), cfg.level, false)?;
    let layout = Layout::new(sim.endpoints(), &s.units(), sim.topology().as_ref());
    find(&mut sim, &s, &layout, &cfg.finder, &mut |_| {})
}

/// One cell's cluster with one slow node (the middle one), through the
/// finder; draws the heatmap of unidirectional bandwidth as `stem`.png and
/// `stem`.svg and returns the report as text.
pub fn heatmap_example(cfg: &BenchConfig, stem: &std::path::Path) -> Result<String, Error> {
    let nodes = cfg.ranks / cfg.ranks_per_node.max(1);
    let mut sim = SimCluster::new(cfg.sim(cfg.seed), vec![Fault::slow_node(nodes / 3, cfg.slowdown)]);
    let s = schedule::build(sim.endpoints(), cfg.level, false)?;
    let layout = Layout::new(sim.endpoints(), &s.units(), sim.topology().as_ref());
    let o = find(&mut sim, &s, &layout, &cfg.finder, &mut |_| {})?;
    for ext in ["png", "svg"] {
        let path = stem.with_extension(ext);
        super::heatmap::draw_file(
            &path,
            &o.matrix,
            &layout,
            &o.analysis,
            Some(&o.report),
            super::Metric::Uni,
        )?;
    }
    Ok(super::output::report_text(&o.report, &o.matrix, &o.analysis))
}

/// `cfg.trials` trials of `injection`, each at a random place.
pub fn run(cfg: &BenchConfig, injection: Injection) -> Result<Tally, Error> {
    let nodes = cfg.ranks / cfg.ranks_per_node.max(1);
    let mut tally = Tally {
        trials: cfg.trials,
        bound: Rounds::bound(units(cfg)),
        ..Tally::default()
    };
    let mut rng = Rng::new(cfg.seed ^ (cfg.ranks as u64) << 20 ^ injection as u64);
    for _ in 0..cfg.trials {
        let seed = rng.next_u64();
        let node = rng.below(nodes);
        // a link between two measured ranks of different hosts
        let (a, b) = {
            let x = rng.below(nodes);
            let y = (x + 1 + rng.below(nodes - 1)) % nodes;
            let local = if cfg.level == Level::Node {
                0
            } else {
                rng.below(cfg.ranks_per_node)
            };
            let other = if cfg.level == Level::Rank {
                rng.below(cfg.ranks_per_node)
            } else {
                local
            };
            (x * cfg.ranks_per_node + local, y * cfg.ranks_per_node + other)
        };
        let faults = match injection {
            Injection::Healthy => vec![],
            Injection::SlowNode => vec![Fault::slow_node(node, cfg.slowdown)],
            Injection::SlowLink => vec![Fault::slow_link(a, b, cfg.slowdown)],
            Injection::Collective => vec![Fault::collective_only(node, cfg.slowdown)],
        };
        let o = trial(cfg, seed, faults)?;
        let host = o.matrix.endpoints[node * cfg.ranks_per_node].host.clone();
        let right = |f: &super::Finding| match injection {
            Injection::Healthy => false,
            Injection::SlowNode => f.kind == FindingKind::Node && f.hosts == [host.clone()],
            Injection::Collective => f.kind == FindingKind::Collective && f.hosts == [host.clone()],
            Injection::SlowLink => {
                let mut r = f.ranks();
                r.sort();
                f.kind == FindingKind::Link && r == [a.min(b), a.max(b)]
            }
        };
        let findings = &o.report.findings;
        let correct = findings.iter().filter(|f| right(f)).count();

        tally.found += usize::from(correct > 0);
        tally.correct += correct;
        tally.named += findings.len();
        tally.with_findings += usize::from(!findings.is_empty());
        tally.matrix_rounds = o.report.rounds.matrix;
        let beyond = o.report.rounds.beyond_matrix();
        tally.beyond_max = tally.beyond_max.max(beyond);
        tally.beyond_sum += beyond;
        if tally.finder_s == 0.0 {
            tally.finder_s = o.report.elapsed_s;
        }
    }
    Ok(tally)
}

/// The measured ranks of a cell.
fn units(cfg: &BenchConfig) -> usize {
    match cfg.level {
        Level::Node => cfg.ranks / cfg.ranks_per_node.max(1),
        _ => cfg.ranks,
    }
}

fn fmt_ratio(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

/// The table of several cells: one line per (cell, injection).
pub fn table(rows: &[(BenchConfig, Injection, Tally)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:>6} {:>5} {:>6} {:<16} {:>6} {:>7} {:>9} {:>8} {:>6} {:>13} {:>5} {:>9}",
        "ranks",
        "level",
        "rounds",
        "injection",
        "trials",
        "recall",
        "precision",
        "flagged",
        "named",
        "beyond: mean",
        "max",
        "bound"
    );
    for (cfg, inj, t) in rows {
        let _ = writeln!(
            s,
            "{:>6} {:>5} {:>6} {:<16} {:>6} {:>7} {:>9} {:>8} {:>6} {:>13.2} {:>5} {:>9}",
            cfg.ranks,
            cfg.level.name(),
            t.matrix_rounds,
            inj.name(),
            t.trials,
            if *inj == Injection::Healthy {
                "-".into()
            } else {
                fmt_ratio(t.recall())
            },
            if *inj == Injection::Healthy {
                "-".into()
            } else {
                fmt_ratio(t.precision())
            },
            t.with_findings,
            t.named,
            t.beyond_mean(),
            t.beyond_max,
            t.bound
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(ranks: usize, per: usize, level: Level, trials: usize) -> BenchConfig {
        BenchConfig {
            ranks,
            ranks_per_node: per,
            level,
            trials,
            slowdown: 1.5,
            seed: 1,
            oversubscription: 1.0,
            noise_scale: 1.0,
            finder: FinderConfig::DEFAULT,
        }
    }

    #[test]
    fn a_small_cell_finds_its_injections_and_counts_them() {
        let cfg = cell(16, 1, Level::Node, 4);
        let node = run(&cfg, Injection::SlowNode).unwrap();
        assert_eq!((node.trials, node.found, node.named, node.correct), (4, 4, 4, 4));
        assert_eq!((node.recall(), node.precision()), (Some(1.0), Some(1.0)));
        assert_eq!(node.matrix_rounds, 15);
        assert!(node.beyond_max <= node.bound && node.bound == 6);
        let healthy = run(&cfg, Injection::Healthy).unwrap();
        assert_eq!((healthy.with_findings, healthy.precision()), (0, None));
        let t = table(&[(cfg, Injection::SlowNode, node)]);
        assert!(t.lines().nth(1).unwrap().contains("slow node"), "{t}");
    }

    /// The benchmark itself (scripts/bench/links-finder.sh): figures to
    /// read, not a test. Environment: LINKS_BENCH_RANKS (16,64,256),
    /// LINKS_BENCH_TRIALS (100), LINKS_BENCH_SLOWDOWN (1.5),
    /// LINKS_BENCH_PER_NODE (1), LINKS_BENCH_LEVEL (node), LINKS_BENCH_SEED (1),
    /// LINKS_BENCH_OVERSUBSCRIPTION (1), LINKS_BENCH_NOISE (1, a factor);
    /// LINKS_BENCH_HEATMAP=STEM also draws STEM.png and STEM.svg: the largest
    /// cell with one slow node.
    #[test]
    #[ignore]
    fn benchmark() {
        let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
        let ranks: Vec<usize> = env("LINKS_BENCH_RANKS", "16,64,256")
            .split(',')
            .map(|v| v.trim().parse().expect("LINKS_BENCH_RANKS: numbers"))
            .collect();
        let trials: usize = env("LINKS_BENCH_TRIALS", "100").parse().expect("LINKS_BENCH_TRIALS");
        let slowdown: f64 = env("LINKS_BENCH_SLOWDOWN", "1.5")
            .parse()
            .expect("LINKS_BENCH_SLOWDOWN");
        let per: usize = env("LINKS_BENCH_PER_NODE", "1").parse().expect("LINKS_BENCH_PER_NODE");
        let level = Level::parse(&env("LINKS_BENCH_LEVEL", "node")).expect("LINKS_BENCH_LEVEL");
        let seed: u64 = env("LINKS_BENCH_SEED", "1").parse().expect("LINKS_BENCH_SEED");
        let oversubscription: f64 = env("LINKS_BENCH_OVERSUBSCRIPTION", "1")
            .parse()
            .expect("LINKS_BENCH_OVERSUBSCRIPTION");
        let noise_scale: f64 = env("LINKS_BENCH_NOISE", "1").parse().expect("LINKS_BENCH_NOISE");
        let mut rows = Vec::new();
        for &n in &ranks {
            for inj in Injection::ALL {
                let cfg = BenchConfig {
                    ranks: n,
                    ranks_per_node: per,
                    level,
                    trials,
                    slowdown,
                    seed,
                    oversubscription,
                    noise_scale,
                    finder: FinderConfig::DEFAULT,
                };
                let start = std::time::Instant::now();
                let t = run(&cfg, inj).expect("a benchmark trial failed");
                eprintln!(
                    "# {n} ranks, {}: {:.1} s (simulated time of one finder run: {:.1} s)",
                    inj.name(),
                    start.elapsed().as_secs_f64(),
                    t.finder_s
                );
                rows.push((cfg, inj, t));
            }
        }
        println!("{}", table(&rows));
        if let (Ok(stem), Some((cfg, _, _))) = (std::env::var("LINKS_BENCH_HEATMAP"), rows.last()) {
            let text = heatmap_example(cfg, std::path::Path::new(&stem)).expect("the heatmap example failed");
            println!(
                "# heatmap: {stem}.png and {stem}.svg, {} ranks, one slow node; its report:\n{text}",
                cfg.ranks
            );
        }
    }
}
