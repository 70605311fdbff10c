//! What a pair is measured on (docs/links.md, "How a pair is measured"):
//! each metric declared once, with everything that tells one from
//! another (`Metric::spec`: its words and unit, which way is better, the
//! exchange it times and the message size, how a time becomes its value),
//! and `PerMetric`, one value per metric, which the samples, estimates and
//! the pairs CSV's columns are kept in. Every other part of links (the
//! rule, the finder, the outputs) and the session's measurer iterate
//! `Metric::ALL` and read the spec: a new metric is one line of the
//! vocabulary below and one arm of `spec` (with its exchange in
//! `engine::pairs` when none of the existing ones times it).
//!
//! Pure: declarations, no measurement.

use serde::ser::{Serialize, SerializeMap, Serializer};

use super::measure::Probe;
use crate::engine::pairs::Exchange;

crate::types::vocabulary! {
    /// What a pair's samples measure.
    #[derive(PartialOrd, Ord, Hash)]
    pub enum Metric: "metric", AnyCase, pad {
        /// Unidirectional bandwidth, GB/s.
        Uni = "uni",
        /// Bidirectional bandwidth (both directions at once, summed), GB/s.
        Bidi = "bidi",
        /// Half the round trip of a small ping-pong, microseconds.
        Latency = "latency",
    }
}

/// The probe's message a metric's exchange carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Message {
    /// `Probe::size_bytes` (`--size`).
    Bandwidth,
    /// `Probe::latency_bytes` (`--latency-size`).
    Latency,
}

impl Message {
    /// Its size in `probe`.
    pub fn bytes(self, probe: &Probe) -> u64 {
        match self {
            Message::Bandwidth => probe.size_bytes,
            Message::Latency => probe.latency_bytes,
        }
    }
}

/// How a sample's seconds per operation become the metric's value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Value {
    /// GB/s of `directions` x the message per operation (a sendrecv's
    /// bus factor, `record::bandwidth_gbps`).
    Bandwidth { directions: u64 },
    /// Half the operation's time (a round trip), in microseconds.
    HalfRoundTripUs,
}

/// Everything that differs between metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MetricSpec {
    /// In words, for reports ("unidirectional bandwidth").
    pub label: &'static str,
    /// Its unit on screen ("GB/s", "us").
    pub unit: &'static str,
    /// Its unit in the pairs CSV's column names (`uni_gbps`, `latency_us`).
    pub column_unit: &'static str,
    /// Lower values are better (a latency): its goodness is minus the log.
    pub lower_is_better: bool,
    /// What a sample times.
    pub exchange: Exchange,
    pub message: Message,
    pub value: Value,
}

impl MetricSpec {
    /// A bandwidth: GB/s of `directions` x the probe's large message,
    /// higher is better.
    const fn bandwidth(label: &'static str, exchange: Exchange, directions: u64) -> MetricSpec {
        MetricSpec {
            label,
            unit: "GB/s",
            column_unit: "gbps",
            lower_is_better: false,
            exchange,
            message: Message::Bandwidth,
            value: Value::Bandwidth { directions },
        }
    }
}

impl Metric {
    /// The one declaration of each metric.
    pub const fn spec(self) -> MetricSpec {
        match self {
            Metric::Uni => MetricSpec::bandwidth("unidirectional bandwidth", Exchange::OneWay, 1),
            Metric::Bidi => MetricSpec::bandwidth("bidirectional bandwidth", Exchange::BothWays, 2),
            Metric::Latency => MetricSpec {
                label: "latency",
                unit: "us",
                column_unit: "us",
                lower_is_better: true,
                exchange: Exchange::PingPong,
                message: Message::Latency,
                value: Value::HalfRoundTripUs,
            },
        }
    }

    pub fn label(self) -> &'static str {
        self.spec().label
    }

    pub fn unit(self) -> &'static str {
        self.spec().unit
    }

    /// Goodness of a value: larger is better.
    pub fn goodness(self, value: f64) -> f64 {
        if self.spec().lower_is_better {
            -value.ln()
        } else {
            value.ln()
        }
    }

    /// The value of a goodness (`goodness`'s inverse).
    pub fn from_goodness(self, g: f64) -> f64 {
        if self.spec().lower_is_better {
            (-g).exp()
        } else {
            g.exp()
        }
    }

    /// The end of an interval that is best for the pair.
    pub fn best_end(self, lo: Option<f64>, hi: Option<f64>) -> Option<f64> {
        if self.spec().lower_is_better { lo } else { hi }
    }

    /// Its four columns of the pairs CSV: median, 95% interval, MAD
    /// (`uni_gbps`, `uni_lo_gbps`, `uni_hi_gbps`, `uni_mad_gbps`).
    pub fn columns(self) -> [String; 4] {
        let (name, unit) = (self.name(), self.spec().column_unit);
        ["", "_lo", "_hi", "_mad"].map(|part| format!("{name}{part}_{unit}"))
    }

    /// Its place in `Metric::ALL`.
    pub fn index(self) -> usize {
        self as usize
    }
}

/// One `T` per metric, in `Metric::ALL`'s order; serialized as a map from
/// each metric's name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PerMetric<T>([T; Metric::ALL.len()]);

impl<T> PerMetric<T> {
    /// Each metric's value from `f`.
    pub fn from_fn(f: impl FnMut(Metric) -> T) -> PerMetric<T> {
        PerMetric(Metric::ALL.map(f))
    }

    /// From the values in `Metric::ALL`'s order.
    pub fn from_array(values: [T; Metric::ALL.len()]) -> PerMetric<T> {
        PerMetric(values)
    }

    pub fn get(&self, metric: Metric) -> &T {
        &self.0[metric.index()]
    }

    pub fn get_mut(&mut self, metric: Metric) -> &mut T {
        &mut self.0[metric.index()]
    }

    /// The values in `Metric::ALL`'s order.
    pub fn values(&self) -> &[T] {
        &self.0
    }

    pub fn iter(&self) -> impl Iterator<Item = (Metric, &T)> {
        Metric::ALL.into_iter().zip(&self.0)
    }
}

impl<T: Serialize> Serialize for PerMetric<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (metric, value) in self.iter() {
            map.serialize_entry(metric.name(), value)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_sits_at_its_place_in_all() {
        for (i, m) in Metric::ALL.into_iter().enumerate() {
            assert_eq!(m.index(), i);
        }
    }

    #[test]
    fn the_csv_columns_are_named_from_the_metric_and_its_unit() {
        assert_eq!(
            Metric::Uni.columns(),
            ["uni_gbps", "uni_lo_gbps", "uni_hi_gbps", "uni_mad_gbps"]
        );
        assert_eq!(
            Metric::Latency.columns(),
            ["latency_us", "latency_lo_us", "latency_hi_us", "latency_mad_us"]
        );
    }

    #[test]
    fn goodness_is_larger_for_better_values_and_inverts() {
        assert!(Metric::Uni.goodness(2.0) > Metric::Uni.goodness(1.0));
        assert!(Metric::Latency.goodness(2.0) < Metric::Latency.goodness(1.0));
        for m in Metric::ALL {
            assert!((m.from_goodness(m.goodness(3.5)) - 3.5).abs() < 1e-12);
        }
    }
}
