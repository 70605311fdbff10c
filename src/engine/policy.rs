//! How many timed iterations a point gets (the row's `iter_policy`), and
//! the engine's loop for the precision-driven policy.
//!
//! - `Fixed` (`-n N`): exactly N, as nccl-tests.
//! - `MinTime` (`--min-time SECS`): as many as fill SECS (`adaptive`).
//! - `Precision` (the default): batches until the median batch time is
//!   known to within the target, or the cap (`precision`); this rank's
//!   time is the median of its own batch times, and every rank stops on
//!   the slowest rank's times, so all run the same batches.
//!
//! `-G` needs one captured iteration count before the timed region, so a
//! graph run without `-n` takes the min-time policy (config decides).

use std::time::Duration;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::precision::{Precision, PrecisionGoal};
use super::{Engine, Timed};
use crate::backend::Call;
use crate::error::Error;
use crate::types::{IterPolicy, Placement};

/// The `--min-time` of a `-G` run without `-n` or `--min-time`.
pub const DEFAULT_MIN_TIME: Duration = Duration::from_millis(100);

/// The iteration policy of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Iterations {
    Fixed(u32),
    MinTime(Duration),
    Precision(PrecisionGoal),
}

impl Iterations {
    /// The CSV's `iter_policy`.
    pub fn policy(&self) -> IterPolicy {
        match self {
            Iterations::Fixed(_) => IterPolicy::Fixed,
            Iterations::MinTime(_) => IterPolicy::MinTime,
            Iterations::Precision(_) => IterPolicy::Precision,
        }
    }

    /// The precision target in percent (the CSV's `precision_target_pct`).
    pub fn target_pct(&self) -> Option<f64> {
        match self {
            Iterations::Precision(goal) => Some(goal.target_pct),
            _ => None,
        }
    }

    /// For the table's header: "iters 20", "iters adaptive (--min-time
    /// 0.1 s)", "iters until the median is within +-5% (95% CI) or 0.1 s".
    pub fn describe(&self) -> String {
        match self {
            Iterations::Fixed(n) => format!("iters {n}"),
            Iterations::MinTime(d) => format!("iters adaptive (--min-time {} s)", d.as_secs_f64()),
            Iterations::Precision(goal) => format!(
                "iters until the median is within +-{}% (95% CI) or {} s",
                goal.target_pct,
                goal.cap.as_secs_f64()
            ),
        }
    }
}

/// The JSON's `run` object carries the policy as flat fields:
/// `iter_policy`, `iters`, `min_time_s`, `precision_target_pct`,
/// `max_time_s` (null where the policy has none).
impl Serialize for Iterations {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (iters, min_time, goal) = match self {
            Iterations::Fixed(n) => (Some(*n), None, None),
            Iterations::MinTime(d) => (None, Some(d.as_secs_f64()), None),
            Iterations::Precision(g) => (None, None, Some(g)),
        };
        let mut st = s.serialize_struct("Iterations", 5)?;
        st.serialize_field("iter_policy", self.policy().name())?;
        st.serialize_field("iters", &iters)?;
        st.serialize_field("min_time_s", &min_time)?;
        st.serialize_field("precision_target_pct", &goal.map(|g| g.target_pct))?;
        st.serialize_field("max_time_s", &goal.map(|g| g.cap.as_secs_f64()))?;
        st.end()
    }
}

/// What the precision policy's timed batches gave this rank.
pub(super) struct Batched {
    pub timed: Timed,
    /// Timed iterations over all batches.
    pub iters: u32,
    /// The achieved relative half-width of the 95% interval (a fraction).
    pub precision: Option<f64>,
    /// Each phase's seconds summed over the timed batches (`--phase-times`).
    pub phase_sums: Option<[f64; 3]>,
}

impl Engine<'_> {
    /// The precision policy for one point: calibration batches (extra
    /// warm-up), then timed batches until `goal` or its cap. Each batch is
    /// one call of `time` (barrier, clock, operations, wait; per
    /// operation with `--blocking`).
    pub(super) fn time_precisely(
        &mut self,
        call: &Call,
        placement: Placement,
        goal: PrecisionGoal,
        iter: &mut u64,
    ) -> Result<Batched, Error> {
        let mut policy = Precision::new(goal);
        let mut mine = Vec::new();
        let mut samples: Option<Vec<f64>> = self.cfg.per_iter.then(Vec::new);
        let mut iters = 0u32;
        let mut phase_sums: Option<[f64; 3]> = None;
        while let Some(batch) = policy.next_batch() {
            // Each timed batch's phases are taken after it (calibration's
            // are dropped): begin_phases forgets what came before.
            let phases = self.cx.backend.phase_times().filter(|_| batch.timed);
            if let Some(phases) = phases {
                phases.begin_phases(u64::from(batch.ops) * u64::from(self.cfg.agg_iters))?;
            }
            let timed = self.time(call, placement, batch.ops, iter)?;
            if let Some(phases) = self.cx.backend.phase_times().filter(|_| batch.timed) {
                let these = phases.take_phase_times()?;
                let sums = phase_sums.get_or_insert([0.0; 3]);
                for (sum, t) in sums.iter_mut().zip(these) {
                    *sum += t;
                }
            }
            // nanoseconds as an integer: the max reduction needs no float
            let slowest_ns = self.cx.world.max_u64((timed.elapsed_s * 1e9).ceil() as u64);
            policy.observe(slowest_ns as f64 * 1e-9);
            if batch.timed {
                mine.push(timed.per_op_s);
                iters = iters.saturating_add(batch.ops);
                if let (Some(all), Some(these)) = (samples.as_mut(), timed.samples) {
                    all.extend(these);
                }
            }
        }
        Ok(Batched {
            timed: Timed {
                per_op_s: crate::stats::median(&mine).unwrap_or(0.0),
                elapsed_s: 0.0,
                samples,
            },
            iters,
            precision: policy.precision(),
            phase_sums,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_names_itself_and_its_target() {
        let goal = PrecisionGoal {
            target_pct: 2.0,
            cap: Duration::from_millis(200),
        };
        assert_eq!(Iterations::Fixed(20).policy(), IterPolicy::Fixed);
        assert_eq!(Iterations::MinTime(DEFAULT_MIN_TIME).policy(), IterPolicy::MinTime);
        assert_eq!(Iterations::Precision(goal).policy(), IterPolicy::Precision);
        assert_eq!(Iterations::Precision(goal).target_pct(), Some(2.0));
        assert_eq!(Iterations::Fixed(20).target_pct(), None);
        assert_eq!(Iterations::Fixed(20).describe(), "iters 20");
        assert_eq!(
            Iterations::Precision(goal).describe(),
            "iters until the median is within +-2% (95% CI) or 0.2 s"
        );
    }

    #[test]
    fn the_json_run_object_carries_the_policy_as_flat_fields() {
        let goal = PrecisionGoal {
            target_pct: 5.0,
            cap: Duration::from_millis(500),
        };
        let json = serde_json::to_value(Iterations::Precision(goal)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"iter_policy": "precision", "iters": null, "min_time_s": null,
                "precision_target_pct": 5.0, "max_time_s": 0.5})
        );
        let json = serde_json::to_value(Iterations::Fixed(7)).unwrap();
        assert_eq!(
            (json["iter_policy"].as_str(), json["iters"].as_u64()),
            (Some("fixed"), Some(7))
        );
        let json = serde_json::to_value(Iterations::MinTime(DEFAULT_MIN_TIME)).unwrap();
        assert_eq!(json["min_time_s"].as_f64(), Some(0.1));
    }
}
