//! Measurements between chosen ranks, for the links matrix and its finder
//! (docs/links.md, "How a pair is measured"): in a round, each rank in a
//! pair talks to its partner on the backend's own communicator with plain
//! sends and receives (`PointToPoint`); ranks in no pair only take part in
//! the barriers. Per pair: validated exchanges (both directions at once,
//! every received element compared with the partner's pattern:
//! `check::Validate::exchange`), then per exchange (one way, both ways, a
//! ping-pong) `warmup` untimed operations and `samples` samples, each a
//! `Context::batch` of `iters` operations. The rounds of one call are
//! interleaved: sample k of every round and exchange is taken before
//! sample k + 1 of any, so that a load that comes and goes touches every
//! pair alike. All-reduces of subsets run the same way on the calls'
//! sub-communicators (`sample_all_reduce`).
//!
//! Every rank calls every function together. Times are this rank's,
//! seconds per operation; the caller gathers them and turns them into
//! bandwidths (the collective's bus factor, `record::bandwidth_gbps`).
//! Must not: print, judge, gather, or know schedules.

use crate::backend::{Backend, Call, LaunchExtras, PeerOp};
use crate::error::Error;
use crate::types::Placement;

use super::Context;

/// This rank's partner in a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Partner {
    pub peer: usize,
    /// Whether this rank is the pair's lower rank (the one that sends
    /// first).
    pub lower: bool,
}

/// What a pair's sample times (links' metrics say which they take:
/// `links::metric`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// The lower rank sends, the other receives.
    OneWay,
    /// Both send and receive at once.
    BothWays,
    /// The lower rank sends, then receives the reply (a round trip).
    PingPong,
}

impl Exchange {
    /// This rank's groups of operations for one exchange with `p`, each
    /// group launched together, the groups in order.
    fn groups(self, p: Partner) -> Vec<Vec<PeerOp>> {
        let (send, recv) = (PeerOp::Send(p.peer), PeerOp::Recv(p.peer));
        match (self, p.lower) {
            (Exchange::OneWay, true) => vec![vec![send]],
            (Exchange::OneWay, false) => vec![vec![recv]],
            (Exchange::BothWays, _) => vec![vec![send, recv]],
            (Exchange::PingPong, true) => vec![vec![send], vec![recv]],
            (Exchange::PingPong, false) => vec![vec![recv], vec![send]],
        }
    }
}

/// How each pair (or subset) is sampled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PairSampling {
    pub samples: usize,
    /// Operations per sample, launched back to back.
    pub iters: usize,
    /// Untimed operations before the first sample of each exchange.
    pub warmup: usize,
    /// Validated operations first; 0 checks nothing.
    pub check: u32,
}

/// `groups` of point-to-point operations launched in order: one
/// operation of an exchange.
fn launch_groups(backend: &mut dyn Backend, call: &Call, groups: &[Vec<PeerOp>]) -> Result<(), Error> {
    let p2p = backend
        .point_to_point()
        .ok_or_else(|| Error::runtime("internal error: the backend has no point-to-point operations"))?;
    for ops in groups {
        p2p.launch_p2p(call, ops)?;
    }
    Ok(())
}

/// This rank's wrong elements received in `how.check` validated
/// exchanges (both ways at once) with its partner of each round; `None` in
/// a round without one, or when checking is off.
pub fn check_exchanges(
    cx: &mut Context<'_>,
    call: &Call,
    partners: &[Option<Partner>],
    how: &PairSampling,
) -> Result<Vec<Option<u64>>, Error> {
    if how.check == 0 {
        return Ok(vec![None; partners.len()]);
    }
    let caps = cx.backend.capabilities(&LaunchExtras::default());
    let validate = cx.validate(&caps, false);
    let mut wrong = Vec::with_capacity(partners.len());
    for partner in partners {
        let Some(p) = partner else {
            wrong.push(None);
            continue;
        };
        let mut w = 0;
        for seed in 0..u64::from(how.check) {
            w += validate.exchange(&mut *cx.backend, call, p.peer, seed, |backend| {
                launch_groups(backend, call, &Exchange::BothWays.groups(*p))
            })?;
        }
        wrong.push(Some(w));
    }
    Ok(wrong)
}

/// This rank's samples of a block of rounds, in seconds per operation:
/// `[round][probe * samples + sample]`, NaN in a round without a
/// partner. Each probe is an exchange and the call whose message it
/// carries, sampled in the order given.
pub fn sample_exchanges(
    cx: &mut Context<'_>,
    partners: &[Option<Partner>],
    probes: &[(Exchange, &Call)],
    how: &PairSampling,
) -> Result<Vec<Vec<f64>>, Error> {
    let k = how.samples;
    let iters = how.iters.max(1);
    let mut times = vec![vec![f64::NAN; probes.len() * k]; partners.len()];
    for sample in 0..k {
        for (round, partner) in partners.iter().enumerate() {
            for (e, &(exchange, call)) in probes.iter().enumerate() {
                let Some(p) = partner else {
                    // the same barrier as a rank in a pair
                    cx.world.barrier();
                    continue;
                };
                let groups = exchange.groups(*p);
                if sample == 0 {
                    for _ in 0..how.warmup {
                        launch_groups(&mut *cx.backend, call, &groups)?;
                    }
                    cx.backend.wait()?;
                }
                let took = cx.batch(iters as u32, |backend, _, _| launch_groups(backend, call, &groups))?;
                times[round][e * k + sample] = took / iters as f64;
            }
        }
    }
    Ok(times)
}

/// A subset's all-reduce as this rank runs it (`None`: in no subset, it
/// only keeps step): its wrong elements over `how.check` validations
/// (`None` unchecked or idle), then `how.warmup` untimed operations and
/// `how.samples` samples of `how.iters`, in seconds per operation (NaN
/// where idle).
pub fn sample_all_reduce(
    cx: &mut Context<'_>,
    call: Option<&Call>,
    how: &PairSampling,
) -> Result<(Vec<f64>, Option<u64>), Error> {
    let iters = how.iters.max(1);
    let mut wrong = None;
    if let Some(call) = call {
        cx.backend.prepare(call)?;
        if how.check > 0 {
            let caps = cx.backend.capabilities(&LaunchExtras::default());
            let validate = cx.validate(&caps, false);
            let mut w = 0;
            for seed in 0..u64::from(how.check) {
                w += validate
                    .local(&mut *cx.backend, call, Placement::OutOfPlace, seed)?
                    .unwrap_or(0);
            }
            wrong = Some(w);
        }
        for _ in 0..how.warmup {
            cx.backend.launch(call, Placement::OutOfPlace, 0, 1)?;
        }
        cx.backend.wait()?;
    }
    let mut times = Vec::with_capacity(how.samples);
    for _ in 0..how.samples {
        match call {
            Some(call) => {
                let took = cx.batch(iters as u32, |backend, _, _| {
                    backend.launch(call, Placement::OutOfPlace, 0, 1)
                })?;
                times.push(took / iters as f64);
            }
            None => {
                cx.world.barrier();
                times.push(f64::NAN);
            }
        }
    }
    Ok((times, wrong))
}
