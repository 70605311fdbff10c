//! The verdict of one check on one group (a node, or the job) from its
//! repeated samples: never retried until it passes.
//!
//! The samples give a median and the distribution-free 95% interval of
//! that median (`stats::median_interval_rank`; below 6 samples the range
//! of all samples stands in for it). Against the fail threshold, on the
//! metric's side (below for bandwidths, above for times):
//!
//! - **fail**: the whole interval is past the threshold;
//! - **flaky**: the interval holds the threshold: samples on both sides,
//!   and the median cannot be told from it;
//! - **warn**: clear of the fail threshold, but the median is past the
//!   warn threshold;
//! - **pass**: otherwise.
//!
//! Must not: know files, ranks or how the samples were taken.

use super::profile::Metric;
use crate::stats::{median_interval_rank, quantile, sorted};

crate::types::vocabulary! {
    /// A check's verdict. `NotJudged`: a required check that could not
    /// run, or ran and cannot tell (neither pass nor fail: exit code 9);
    /// `Skipped`: an optional check that could not run (it stands apart:
    /// nothing was judged, and nothing was required).
    pub enum Status: "status", Exact {
        Pass = "pass",
        Warn = "warn",
        Flaky = "flaky",
        Fail = "fail",
        NotJudged = "not_judged",
        Skipped = "skipped"
    }
}

impl Status {
    /// The Prometheus gauge's value (docs/check.md); `None` for skipped.
    pub fn code(self) -> Option<u8> {
        match self {
            Status::Pass => Some(0),
            Status::Warn => Some(1),
            Status::Flaky => Some(2),
            Status::Fail => Some(3),
            Status::NotJudged => Some(4),
            Status::Skipped => None,
        }
    }

    /// How bad a verdict is, for the worst of several: pass, warn, not
    /// judged, flaky, fail (a failure found says more than a check that
    /// could not tell); `None` for skipped.
    pub fn severity(self) -> Option<u8> {
        match self {
            Status::Pass => Some(0),
            Status::Warn => Some(1),
            Status::NotJudged => Some(2),
            Status::Flaky => Some(3),
            Status::Fail => Some(4),
            Status::Skipped => None,
        }
    }

    /// Whether samples judged it: pass, warn, flaky or fail.
    pub fn judged(self) -> bool {
        !matches!(self, Status::NotJudged | Status::Skipped)
    }

    /// Whether this verdict fails the run (`strict`: warnings too).
    pub fn fails(self, strict: bool) -> bool {
        match self {
            Status::Fail | Status::Flaky => true,
            Status::Warn => strict,
            Status::Pass | Status::NotJudged | Status::Skipped => false,
        }
    }

    /// The worse of two verdicts (by `severity`); skipped yields to any
    /// other.
    pub fn worst(self, other: Status) -> Status {
        match (self.severity(), other.severity()) {
            (None, _) => other,
            (_, None) => self,
            (Some(a), Some(b)) => {
                if b > a {
                    other
                } else {
                    self
                }
            }
        }
    }

    /// The short word of the table: `pass`, or the status in capitals
    /// (`NOT JUDGED`).
    pub fn word(self) -> String {
        match self {
            Status::Pass => "pass".into(),
            other => other.name().replace('_', " ").to_uppercase(),
        }
    }
}

/// What the samples say against the thresholds.
#[derive(Clone, Debug, PartialEq)]
pub struct Judged {
    pub status: Status,
    /// The median sample.
    pub value: f64,
    /// The 95% interval of the median (the samples' range below 6).
    pub lo: f64,
    pub hi: f64,
    pub samples: usize,
    /// Samples past the fail threshold.
    pub beyond: usize,
    /// How far the median is from the fail threshold, in percent of it:
    /// positive on the good side, negative past it.
    pub margin_pct: f64,
}

/// Judges `samples` of `metric` against `fail` (and `warn`); `None`
/// without a finite sample.
pub fn judge(samples: &[f64], metric: Metric, fail: f64, warn: Option<f64>) -> Option<Judged> {
    let s = sorted(samples)?;
    let n = s.len();
    let value = quantile(&s, 0.5);
    let (lo, hi) = match median_interval_rank(n) {
        Some(l) => (s[l - 1], s[n - l]),
        None => (s[0], s[n - 1]),
    };
    let higher = metric.higher_is_better();
    // "past" = on the failing side of a threshold
    let past = |v: f64, t: f64| if higher { v < t } else { v > t };
    let beyond = s.iter().filter(|&&v| past(v, fail)).count();
    let (near, far) = if higher { (hi, lo) } else { (lo, hi) };
    let status = if past(near, fail) {
        Status::Fail
    } else if past(far, fail) {
        Status::Flaky
    } else if warn.is_some_and(|w| past(value, w)) {
        Status::Warn
    } else {
        Status::Pass
    };
    let margin_pct = if higher {
        (value - fail) / fail * 100.0
    } else {
        (fail - value) / fail * 100.0
    };
    Some(Judged {
        status,
        value,
        lo,
        hi,
        samples: n,
        beyond,
        margin_pct,
    })
}

/// A figure with 3 significant digits (at least 2 decimals below 10;
/// below 1, no more decimals than the digits need: 0.0125, 0.05, 0.30).
pub fn figure(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 || a == 0.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        // 3 decimals in [0.1, 1), 4 in [0.01, 0.1); trailing zeros past 2 go
        let decimals = if a >= 0.1 { 3 } else { 4 };
        let mut text = format!("{v:.decimals$}");
        while text.ends_with('0') && text.split_once('.').is_some_and(|(_, d)| d.len() > 2) {
            text.pop();
        }
        text
    } else {
        format!("{v:.2e}")
    }
}

impl Judged {
    /// One line for people and hooks (no quotes, no newline): the value,
    /// its interval and the threshold it was judged against.
    pub fn reason(&self, metric: Metric, fail: f64, warn: Option<f64>) -> String {
        let unit = metric.unit();
        let (m, v, t) = (metric.name(), figure(self.value), figure(fail));
        let interval = format!(
            "95% interval {}-{} over {} samples",
            figure(self.lo),
            figure(self.hi),
            self.samples
        );
        let side = if metric.higher_is_better() { "below" } else { "above" };
        match self.status {
            Status::Fail => format!(
                "{m} {v} {unit} is {} {side} the fail threshold {t} {unit} ({interval})",
                pct(self.margin_pct)
            ),
            Status::Flaky => format!(
                "{m} samples on both sides of {t} {unit}: {} of {} {side}, median {v} {unit} ({interval})",
                self.beyond, self.samples
            ),
            Status::Warn => format!(
                "{m} {v} {unit} is {side} the warn threshold {} {unit}, {} clear of the fail threshold {t} {unit} ({interval})",
                figure(warn.unwrap_or(fail)),
                pct(self.margin_pct)
            ),
            Status::Pass | Status::NotJudged | Status::Skipped => format!(
                "{m} {v} {unit}, {} clear of the fail threshold {t} {unit} ({interval})",
                pct(self.margin_pct)
            ),
        }
    }
}

fn pct(margin: f64) -> String {
    format!("{:.1}%", margin.abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three significant digits: 0.0125 beside a threshold of 0.01 must
    /// not read 0.01 (it did, margin +25%); no zeros added past 2 decimals.
    #[test]
    fn a_figure_has_three_significant_digits() {
        let got: Vec<String> = [0.0125, 0.01, 0.05, 0.3, 0.125, 0.9999, 2.5, 0.0, 12.34, 0.00125, 460.0]
            .map(figure)
            .to_vec();
        assert_eq!(
            got,
            [
                "0.0125", "0.01", "0.05", "0.30", "0.125", "1.00", "2.50", "0.00", "12.3", "1.25e-3", "460"
            ]
        );
    }

    fn status(samples: &[f64], fail: f64, warn: Option<f64>) -> Status {
        judge(samples, Metric::Busbw, fail, warn).unwrap().status
    }

    #[test]
    fn ten_samples_are_judged_by_the_interval_of_their_median() {
        // sorted 1..10: median 5.5, interval [x(2), x(9)] = [2, 9]
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        let j = judge(&s, Metric::Busbw, 1.5, None).unwrap();
        assert_eq!((j.value, j.lo, j.hi, j.samples, j.beyond), (5.5, 2.0, 9.0, 10, 1));
        assert_eq!(j.status, Status::Pass, "one sample below, the interval clear of it");
        assert_eq!(status(&s, 9.5, None), Status::Fail, "the whole interval below");
        assert_eq!(
            status(&s, 5.0, None),
            Status::Flaky,
            "the threshold inside the interval"
        );
        assert_eq!(status(&s, 1.0, Some(6.0)), Status::Warn);
        assert_eq!(status(&s, 1.0, Some(5.0)), Status::Pass);
        assert!((j.margin_pct - (5.5 - 1.5) / 1.5 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn few_samples_are_flaky_when_any_lies_on_each_side() {
        assert_eq!(status(&[3.0, 4.0, 5.0], 3.5, None), Status::Flaky);
        assert_eq!(status(&[3.0, 4.0, 5.0], 2.9, None), Status::Pass);
        assert_eq!(status(&[3.0, 4.0, 5.0], 5.1, None), Status::Fail);
        assert!(judge(&[], Metric::Busbw, 1.0, None).is_none());
        assert!(judge(&[f64::NAN], Metric::Busbw, 1.0, None).is_none());
    }

    #[test]
    fn times_fail_above_their_threshold() {
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        let j = judge(&s, Metric::TimeUs, 1.5, Some(1.0)).unwrap();
        assert_eq!((j.status, j.beyond), (Status::Fail, 9));
        assert!(j.margin_pct < 0.0);
        assert_eq!(judge(&s, Metric::TimeUs, 9.5, Some(5.0)).unwrap().status, Status::Warn);
        assert_eq!(judge(&s, Metric::TimeUs, 5.0, None).unwrap().status, Status::Flaky);
        assert_eq!(judge(&s, Metric::TimeUs, 20.0, None).unwrap().status, Status::Pass);
    }

    #[test]
    fn verdicts_order_and_fail_the_run() {
        assert_eq!(Status::Pass.worst(Status::Flaky), Status::Flaky);
        assert_eq!(Status::Skipped.worst(Status::Pass), Status::Pass);
        assert_eq!(Status::Fail.worst(Status::Skipped), Status::Fail);
        assert!(Status::Flaky.fails(false) && Status::Fail.fails(false));
        assert!(!Status::Warn.fails(false) && Status::Warn.fails(true));
        assert!(!Status::Skipped.fails(true));
        assert_eq!(Status::Fail.code(), Some(3));
        // not judged: its own gauge value, worse than a warning, better
        // than a failure found, never a failure itself
        assert_eq!(Status::NotJudged.code(), Some(4));
        assert_eq!(Status::NotJudged.name(), "not_judged");
        assert_eq!(Status::NotJudged.word(), "NOT JUDGED");
        assert_eq!(Status::Pass.worst(Status::NotJudged), Status::NotJudged);
        assert_eq!(Status::Warn.worst(Status::NotJudged), Status::NotJudged);
        assert_eq!(Status::NotJudged.worst(Status::Flaky), Status::Flaky);
        assert_eq!(Status::Fail.worst(Status::NotJudged), Status::Fail);
        assert_eq!(Status::Skipped.worst(Status::NotJudged), Status::NotJudged);
        assert!(!Status::NotJudged.fails(true) && !Status::NotJudged.judged());
        assert!(Status::Flaky.judged() && !Status::Skipped.judged());
    }

    #[test]
    fn reasons_are_one_line_with_the_figures() {
        let s: Vec<f64> = vec![0.1; 10];
        let j = judge(&s, Metric::Busbw, 0.3, Some(0.5)).unwrap();
        let r = j.reason(Metric::Busbw, 0.3, Some(0.5));
        assert_eq!(
            r,
            "busbw 0.10 GB/s is 66.7% below the fail threshold 0.30 GB/s (95% interval 0.10-0.10 over 10 samples)"
        );
        assert!(!r.contains('"') && !r.contains('\n'));
        assert_eq!(figure(460.4), "460");
        assert_eq!(figure(47.25), "47.2");
        assert_eq!(figure(0.001234), "1.23e-3");
    }
}
