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
//! `mad_us` and `samples_us` (`report::samples`).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::samples::SampleTally;
use super::{RunInfo, Sink};
use crate::engine::Summary;
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
    /// False when a signal stopped the run early.
    complete: bool,
    stopped_by: Option<String>,
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

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()> {
        let view = SummaryView {
            points: summary.points,
            checked_points: summary.checked_points,
            failed_points: summary.failed_points,
            wrong: summary.wrong,
            cycles: summary.cycles,
            complete: summary.stopped_by.is_none() && summary.points >= run.points,
            stopped_by: summary.stopped_by.map(crate::engine::stop::signal_name),
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

    fn target(&self) -> String {
        format!("JSON file {}", self.path.display())
    }

    fn discard(&mut self) {
        self.out = None;
        let _ = std::fs::remove_file(&self.temp);
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
