//! The checks' samples, on every rank: each check validated once, warmed
//! up, then sampled (`engine::sampler`) until its sample count, the soak's
//! end or a stop signal, which the ranks agree on before every sample.
//! Rank 0 turns each sample's times into each group's value and writes it
//! to the samples file as it comes, so that a stopped run keeps every
//! sample.

use std::time::Instant;

use super::outputs::Setup;
use super::{CheckJob, Planned, Session, Soak, call};
use crate::backend::Backend;
use crate::check::samples::{Sample, SizeFigures};
use crate::check::{Group, Metric};
use crate::engine::sampler::{PLACEMENTS, Sampler, Sampling};
use crate::engine::watchdog::Watchdog;
use crate::error::Error;
use crate::record::bandwidth_gbps;
use crate::report::print_out;
use crate::world::World;

/// What one check gave, per group (rank 0's figures; other ranks hold
/// the same wrong counts and empty values).
#[derive(Clone, Debug, Default)]
pub(super) struct Sampled {
    /// Each group's samples: (seconds since the check's first sample, value).
    pub values: Vec<Vec<(f64, f64)>>,
    /// Each group's wrong elements; `None` when not checked.
    pub wrong: Vec<Option<u64>>,
    /// Whether the check ran (a stop signal ends the run before the rest).
    pub ran: bool,
}

pub(super) struct Measured {
    pub checks: Vec<Sampled>,
    /// Each finder check, as it ran (`finder`).
    pub finders: Vec<super::finder::FinderRun>,
    /// The signal that stopped sampling.
    pub stopped_by: Option<u64>,
}

/// A group's figures of one sample: per size, the mean over its ranks of
/// their time per operation (nccl-tests' default time reduction) in each
/// placement, and the check's value: the mean of its metric over sizes
/// and placements (nccl-tests' "Avg bus bandwidth" of a run of them).
pub(super) fn group_figures(p: &Planned, group: &Group, times: &[Vec<f64>]) -> (f64, Vec<SizeFigures>) {
    let spec = &p.spec;
    let n = group.ranks.len();
    let factor = spec.collective.spec().bus_factor(n);
    let mut all = Vec::new();
    let mut sizes = Vec::new();
    for (i, &size) in spec.sizes.value.iter().enumerate() {
        let bytes = call(spec, size, n, 0, None).shape.size_bytes(spec.dtype);
        let mut per = Vec::new();
        for p in 0..PLACEMENTS.len() {
            let col = i * PLACEMENTS.len() + p;
            let t = group.ranks.iter().map(|&r| times[r][col]).sum::<f64>() / n.max(1) as f64;
            let (alg, bus) = bandwidth_gbps(bytes, t, factor);
            let value = match spec.metric {
                Metric::Busbw => bus,
                Metric::Algbw => alg,
                Metric::TimeUs => t * 1e6,
            };
            all.push(value);
            per.push((t * 1e6, alg, bus));
        }
        let k = per.len() as f64;
        sizes.push(SizeFigures {
            size_bytes: bytes,
            time_us: per.iter().map(|x| x.0).sum::<f64>() / k,
            algbw_gbps: per.iter().map(|x| x.1).sum::<f64>() / k,
            busbw_gbps: per.iter().map(|x| x.2).sum::<f64>() / k,
        });
    }
    (all.iter().sum::<f64>() / all.len().max(1) as f64, sizes)
}

/// Why `p` runs on none of its groups, if it does not (every rank knows
/// the same groups: all skip it together).
fn nowhere(p: &Planned) -> Option<&'static str> {
    let mut why = p.groups.iter().map(|(_, w)| w.as_ref().map(|w| w.short));
    let first = why.next()??;
    why.all(|w| w.is_some()).then_some(first)
}

impl<W: World> Session<'_, W> {
    /// Every planned check in turn. A failure ends the job (the peers are
    /// inside the same collectives).
    pub(super) fn measure(
        &self,
        backend: &mut dyn Backend,
        c: &CheckJob,
        planned: &[Planned],
        setup: &Setup,
        watchdog: Option<&Watchdog>,
    ) -> Measured {
        let mut checks = Vec::new();
        let mut stopped_by = None;
        for (i, p) in planned.iter().enumerate() {
            if stopped_by.is_some() {
                checks.push(Sampled::default());
                continue;
            }
            if let Some(why) = nowhere(p) {
                if self.world.rank() == 0 {
                    print_out(&format!("# {:<28} not run: {why}\n", p.spec.name));
                }
                checks.push(Sampled {
                    values: vec![Vec::new(); p.groups.len()],
                    wrong: vec![None; p.groups.len()],
                    ran: true,
                });
                continue;
            }
            let mut sampler = Sampler {
                cx: self.context(&mut *backend, watchdog),
                idle: !p.active,
            };
            let (sampled, stop) = self.sample_check(&mut sampler, c, p, setup, 1 + 1000 * i as u64);
            checks.push(sampled);
            stopped_by = stop;
        }
        Measured {
            checks,
            finders: vec![],
            stopped_by,
        }
    }

    /// One check's samples (`Sampler::run`); rank 0 writes each as it comes.
    fn sample_check(
        &self,
        sampler: &mut Sampler<'_>,
        c: &CheckJob,
        p: &Planned,
        setup: &Setup,
        seed: u64,
    ) -> (Sampled, Option<u64>) {
        let first = self.world.rank() == 0;
        let how = Sampling {
            samples: p.spec.samples,
            iters: p.spec.iters,
            warmup: p.spec.warmup,
            check: self.cfg.timing.check > 0,
            seed,
            until: match c.soak {
                Some(Soak::For(d)) => Some(d),
                _ => None,
            },
        };
        let mut values = vec![Vec::new(); p.groups.len()];
        let mut reported = Instant::now();
        let ran = sampler.run(&p.calls, &how, |times, taken, elapsed| {
            if first {
                self.write_samples(p, setup, times, taken, elapsed, &mut values)?;
                if c.soak.is_some() && reported.elapsed().as_secs() >= 60 {
                    reported = Instant::now();
                    print_out(&format!(
                        "# soak {}: {} samples in {elapsed:.0} s\n",
                        p.spec.name,
                        taken + 1
                    ));
                }
            }
            Ok(())
        });
        let ran = ran.unwrap_or_else(|e| self.fail(&e));
        if first {
            print_out(&format!(
                "# {:<28} {} sample{} per group in {:.1} s\n",
                p.spec.name,
                ran.taken,
                if ran.taken == 1 { "" } else { "s" },
                ran.elapsed_s
            ));
        }
        let wrong = self.group_wrong(p, ran.wrong);
        (
            Sampled {
                values,
                wrong,
                ran: true,
            },
            ran.stopped_by,
        )
    }

    /// Each group's wrong elements from every rank's (`None` where any of
    /// its ranks did not check).
    fn group_wrong(&self, p: &Planned, mine: Option<u64>) -> Vec<Option<u64>> {
        let all = self.world.all_gather_u64s(&[mine.unwrap_or(u64::MAX)]);
        p.groups
            .iter()
            .map(|(g, _)| {
                let w: Vec<u64> = g.ranks.iter().map(|&r| all[r]).collect();
                (!w.contains(&u64::MAX)).then(|| w.iter().sum())
            })
            .collect()
    }

    /// Rank 0: one sample's value for each judged group, kept in `values`
    /// and written to the samples file.
    fn write_samples(
        &self,
        p: &Planned,
        setup: &Setup,
        times: &[Vec<f64>],
        taken: usize,
        elapsed: f64,
        values: &mut [Vec<(f64, f64)>],
    ) -> Result<(), Error> {
        for (k, (g, why)) in p.groups.iter().enumerate() {
            if why.is_some() {
                continue;
            }
            let (value, sizes) = group_figures(p, g, times);
            values[k].push((elapsed, value));
            let line = Sample {
                run_id: setup.run_id.clone(),
                check: p.spec.name.clone(),
                scope: p.spec.scope.name(),
                group: g.label.clone(),
                hosts: g.hosts.clone(),
                sample: taken,
                time: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
                elapsed_s: elapsed,
                value,
                metric: p.spec.metric.name(),
                unit: p.spec.metric.unit(),
                sizes,
            };
            setup.write_sample(&line)?;
        }
        Ok(())
    }
}
