//! The JSON report: the run's configuration and environment, the summary
//! and every record, with a schema version. Written once at the end through
//! a temporary file renamed into place, so a reader never sees half a file.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::record::SCHEMA_VERSION;
use super::{Record, RunInfo, Sink};
use crate::engine::Summary;
use crate::error::Error;

pub struct JsonSink {
    path: PathBuf,
    temp: PathBuf,
    file: Option<File>,
    records: Vec<Record>,
}

#[derive(Serialize)]
struct Document<'a> {
    schema_version: u32,
    run: &'a RunInfo,
    summary: SummaryView,
    records: &'a [Record],
}

#[derive(Serialize)]
struct SummaryView {
    points: usize,
    checked_points: usize,
    failed_points: usize,
    wrong: u64,
    complete: bool,
}

impl JsonSink {
    /// Checks now that the file can be written: refuses an existing file
    /// unless `overwrite`, and creates the temporary file beside it.
    pub fn create(path: &Path, overwrite: bool) -> Result<JsonSink, Error> {
        if path.exists() && !overwrite {
            return Err(Error::usage(format!(
                "JSON file {} already exists; choose another path or pass --overwrite",
                path.display()
            )));
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".partial");
        let temp = path.with_file_name(name);
        let file = super::create_file(&temp, true, "JSON")?;
        Ok(JsonSink {
            path: path.to_path_buf(),
            temp,
            file: Some(file),
            records: Vec::new(),
        })
    }
}

impl Sink for JsonSink {
    fn begin(&mut self, _run: &RunInfo) -> io::Result<()> {
        Ok(())
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        self.records.push(record.clone());
        Ok(())
    }

    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()> {
        let Some(mut file) = self.file.take() else {
            return Ok(());
        };
        let doc = Document {
            schema_version: SCHEMA_VERSION,
            run,
            summary: SummaryView {
                points: summary.points,
                checked_points: summary.checked_points,
                failed_points: summary.failed_points,
                wrong: summary.wrong,
                complete: summary.points == run.points,
            },
            records: &self.records,
        };
        serde_json::to_writer_pretty(&mut file, &doc).map_err(io::Error::other)?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&self.temp, &self.path)
    }

    fn target(&self) -> String {
        format!("JSON file {}", self.path.display())
    }

    fn discard(&mut self) {
        self.file = None;
        let _ = std::fs::remove_file(&self.temp);
    }
}

impl Drop for JsonSink {
    /// A run that ends before `finish` leaves no temporary file behind.
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}
