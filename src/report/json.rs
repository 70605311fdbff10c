//! The JSON report: the run's configuration and environment, every record
//! and a summary, with a schema version. Records stream into a temporary
//! file as they are measured (memory stays flat however long the run); the
//! file is renamed into place when the run ends, so a reader never sees half
//! a document.
//!
//! Layout: `{"schema_version": 1, "run": {...}, "records": [...],
//! "points": [...], "summary": {...}}`. `points` gives, per measured point
//! (its case: collective, hierarchy, transport, dtype, op, root,
//! placement, size_bytes, nranks), the samples of `--repeat R` (one per
//! sweep) and their statistics: `n`, `measured`, `median_us`, `iqr_us`,
//! `mad_us` and `samples_us` (`report::samples`). `summary.slow_rank` is
//! `-I`'s slow-rank verdict (docs/csv.md).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::samples::SampleTally;
use super::{RunInfo, Sink};
use crate::engine::Summary;
use crate::engine::straggler::SlowRank;
use crate::error::Error;
use crate::record::Record;
use crate::record::SCHEMA_VERSION;

pub struct JsonSink {
    path: PathBuf,
    temp: PathBuf,
    /// `None` once finished or discarded.
    out: Option<BufWriter<File>>,
    records: usize,
    samples: SampleTally,
}

#[derive(Serialize)]
struct SummaryView {
    points: usize,
    checked_points: usize,
    failed_points: usize,
    wrong: u64,
    cycles: u64,
    /// False when the run stopped early.
    complete: bool,
    /// What stopped it: `SIGINT`, `SIGTERM`, `SIGHUP`, `timeout` (the
    /// `--timeout` watchdog) or `error` (rank 0 failed, its line says why).
    stopped_by: Option<String>,
    /// `-I`'s slow-rank verdict; `null` without `-I`.
    slow_rank: Option<SlowRankView>,
}

/// The footer's Stragglers line as fields (`engine::straggler::SlowRank`):
/// every key is present, `null` where the verdict has no such figure.
#[derive(Serialize)]
struct SlowRankView {
    /// What names a slow rank: always `arrival skew`.
    signal: &'static str,
    /// `named`, `none` (judged, no rank late significantly often) or
    /// `cannot_tell` (`reason` says why).
    verdict: &'static str,
    rank: Option<usize>,
    host: Option<String>,
    /// Its own work over the other ranks' median, as a factor (1.5: half
    /// as long again).
    work_factor: Option<f64>,
    /// The smallest size of the points tested.
    from_size_bytes: Option<u64>,
    /// The points where it arrived late, of `points` checked.
    late_points: Option<u64>,
    points: Option<u64>,
    /// The sign test's one-sided p-value, before the correction.
    p_value: Option<f64>,
    reason: Option<String>,
}

impl SlowRankView {
    /// The view of `verdict`; `host_of` gives a rank's host.
    fn of(verdict: &SlowRank, host_of: impl Fn(usize) -> Option<String>) -> SlowRankView {
        let mut view = SlowRankView {
            signal: "arrival skew",
            verdict: "cannot_tell",
            rank: None,
            host: None,
            work_factor: None,
            from_size_bytes: None,
            late_points: None,
            points: None,
            p_value: None,
            reason: None,
        };
        match verdict {
            SlowRank::NotJudged(why) => view.reason = Some(why.clone()),
            SlowRank::NoneFound { points } => {
                view.verdict = "none";
                view.points = Some(*points);
            }
            SlowRank::Named(s) => {
                view.verdict = "named";
                view.rank = Some(s.rank);
                view.host = host_of(s.rank);
                view.work_factor = Some(s.work_factor());
                view.from_size_bytes = Some(s.from_size);
                view.late_points = Some(s.late);
                view.points = Some(s.points);
                view.p_value = Some(s.p_value);
            }
        }
        view
    }
}

impl JsonSink {
    /// Checks now that the file can be written: refuses an existing file
    /// unless `overwrite`, and creates the temporary file beside it.
    pub fn create(path: &Path, overwrite: bool) -> Result<JsonSink, Error> {
        super::refuse_existing_json(path, overwrite)?;
        let temp = super::partial_path(path);
        let file = super::create_file(&temp, true, "JSON")?;
        Ok(JsonSink {
            path: path.to_path_buf(),
            temp,
            out: Some(BufWriter::new(file)),
            records: 0,
            samples: SampleTally::default(),
        })
    }

    fn out(&mut self) -> io::Result<&mut BufWriter<File>> {
        self.out
            .as_mut()
            .ok_or_else(|| io::Error::other("the JSON report is already closed"))
    }
}

impl Sink for JsonSink {
    fn begin(&mut self, run: &RunInfo) -> io::Result<()> {
        let out = self.out()?;
        write!(out, "{{\n\"schema_version\": {SCHEMA_VERSION},\n\"run\": ")?;
        serde_json::to_writer_pretty(&mut *out, run).map_err(io::Error::other)?;
        write!(out, ",\n\"records\": [")
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        let first = self.records == 0;
        let out = self.out()?;
        out.write_all(if first { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut *out, record).map_err(io::Error::other)?;
        self.records += 1;
        self.samples.add(record);
        Ok(())
    }

    /// Completes the document and renames it into place; one that cannot
    /// be completed is removed (the report is whole or absent).
    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()> {
        let finished = self.complete(run, summary);
        if finished.is_err() {
            self.discard();
        }
        finished
    }

    fn target(&self) -> String {
        format!("JSON file {}", self.path.display())
    }

    fn discard(&mut self) {
        self.out = None;
        let _ = std::fs::remove_file(&self.temp);
    }
}

impl JsonSink {
    fn complete(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()> {
        let view = SummaryView {
            points: summary.points,
            checked_points: summary.checked_points,
            failed_points: summary.failed_points,
            wrong: summary.wrong,
            cycles: summary.cycles,
            complete: summary.stopped_by.is_none() && summary.points >= run.points,
            stopped_by: summary.stopped_by.map(crate::engine::stop::signal_name),
            slow_rank: summary
                .straggler
                .as_ref()
                .map(|v| SlowRankView::of(v, |rank| run.ranks.get(rank).map(|r| r.host.clone()))),
        };
        let points = self.samples.points();
        let out = self.out()?;
        write!(out, "\n],\n\"points\": [")?;
        for (i, point) in points.iter().enumerate() {
            out.write_all(if i == 0 { b"\n" } else { b",\n" })?;
            serde_json::to_writer(&mut *out, point).map_err(io::Error::other)?;
        }
        write!(out, "\n],\n\"summary\": ")?;
        serde_json::to_writer_pretty(&mut *out, &view).map_err(io::Error::other)?;
        out.write_all(b"\n}\n")?;
        let file = self
            .out
            .take()
            .ok_or_else(|| io::Error::other("the JSON report is already closed"))?
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.sync_all()?;
        std::fs::rename(&self.temp, &self.path)
    }
}

impl Drop for JsonSink {
    /// A run that ends before `finish` leaves no temporary file behind.
    fn drop(&mut self) {
        if self.out.is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::straggler::Straggler;

    fn view(verdict: &SlowRank) -> serde_json::Value {
        let hosts = ["node-a", "node-b"];
        serde_json::to_value(SlowRankView::of(verdict, |r| hosts.get(r).map(|h| h.to_string()))).unwrap()
    }

    #[test]
    fn the_slow_rank_verdict_has_the_same_keys_whatever_it_found() {
        let named = view(&SlowRank::Named(Straggler {
            rank: 1,
            excess: 0.5,
            from_size: 1 << 20,
            every_size: false,
            late: 23,
            points: 24,
            p_value: 1.5e-6,
        }));
        assert_eq!(named["signal"], "arrival skew");
        assert_eq!(named["verdict"], "named");
        assert_eq!(named["rank"], 1);
        assert_eq!(named["host"], "node-b");
        assert_eq!(named["work_factor"], 1.5);
        assert_eq!(named["from_size_bytes"], 1 << 20);
        assert_eq!(
            (named["late_points"].as_u64(), named["points"].as_u64()),
            (Some(23), Some(24))
        );
        assert_eq!(named["p_value"], 1.5e-6);
        assert!(named["reason"].is_null());

        let none = view(&SlowRank::NoneFound { points: 216 });
        assert_eq!(
            (none["verdict"].as_str(), none["points"].as_u64()),
            (Some("none"), Some(216))
        );
        assert!(none["rank"].is_null() && none["host"].is_null() && none["reason"].is_null());

        let cannot = view(&SlowRank::NotJudged("too few points".into()));
        assert_eq!(cannot["verdict"], "cannot_tell");
        assert_eq!(cannot["reason"], "too few points");
        assert!(cannot["rank"].is_null() && cannot["points"].is_null());

        let keys = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&named), keys(&none));
        assert_eq!(keys(&named), keys(&cannot));
    }
}
