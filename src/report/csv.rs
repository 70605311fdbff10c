//! The CSV report: schema 1, one row per measured point, each row written
//! whole and flushed before the next point starts.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use super::{RunInfo, Sink};
use crate::engine::Summary;
use crate::error::Error;
use crate::record::Extras;
use crate::record::Record;

pub struct CsvSink {
    path: PathBuf,
    writer: csv::Writer<File>,
    extras: Extras,
}

impl CsvSink {
    /// Creates the file now, so a bad path is reported before any
    /// measurement. An existing file is refused unless `overwrite`.
    pub fn create(path: &Path, overwrite: bool, extras: Extras) -> Result<CsvSink, Error> {
        let file = super::create_file(path, overwrite, "CSV")?;
        let writer = csv::WriterBuilder::new().has_headers(false).from_writer(file);
        Ok(CsvSink {
            path: path.to_path_buf(),
            writer,
            extras,
        })
    }
}

impl CsvSink {
    fn write_header(&mut self) -> io::Result<()> {
        self.writer.write_record(self.extras.header())?;
        self.writer.flush()
    }
}

impl Sink for CsvSink {
    fn begin(&mut self, _run: &RunInfo) -> io::Result<()> {
        self.write_header()
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        self.writer.write_record(record.csv_fields(self.extras))?;
        self.writer.flush()
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> io::Result<()> {
        self.writer.flush()
    }

    fn target(&self) -> String {
        sink_target(&self.path)
    }

    fn discard(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `records` as a new CSV report at `path` (import).
pub fn write_records(path: &Path, overwrite: bool, records: &[Record]) -> Result<(), Error> {
    let mut sink = CsvSink::create(path, overwrite, Extras::default())?;
    let failed = |e: io::Error| Error::runtime(format!("cannot write {}: {e}", sink_target(path)));
    sink.write_header().map_err(failed)?;
    for r in records {
        sink.record(r).map_err(failed)?;
    }
    sink.writer.flush().map_err(failed)
}

fn sink_target(path: &Path) -> String {
    format!("CSV file {}", path.display())
}
