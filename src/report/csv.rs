//! CSV files as reports write them (`CsvFile`: created through
//! `create_file`, each row written whole and flushed before the next, so
//! an interrupted run keeps every finished row, and a row that cannot be
//! written whole (a full disk) is cut back out, so that the file always
//! ends with a whole row), and the run's CSV sink: schema 1, one row per
//! measured point.

use std::fs::File;
use std::io::{self, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::{RunInfo, Sink};
use crate::engine::Summary;
use crate::error::Error;
use crate::record::{Extras, Record};

/// A CSV file being written: the run's (`CsvSink`), the workload's
/// (`report::workload::WorkloadCsv`) and an import's.
pub struct CsvFile {
    path: PathBuf,
    file: File,
    /// Bytes of the whole rows written so far.
    whole: u64,
}

impl CsvFile {
    /// Creates the file now, so a bad path is reported before any
    /// measurement. An existing file is refused unless `overwrite`.
    pub fn create(path: &Path, overwrite: bool) -> Result<CsvFile, Error> {
        let file = super::create_file(path, overwrite, "CSV")?;
        Ok(CsvFile {
            path: path.to_path_buf(),
            file,
            whole: 0,
        })
    }

    /// Writes `fields` as one row and flushes it.
    pub fn fields<I, T>(&mut self, fields: I) -> io::Result<()>
    where
        I: IntoIterator<Item = T>,
        T: AsRef<[u8]>,
    {
        self.whole_row(|w| w.write_record(fields))
    }

    /// Writes `row` (its serde fields, in order) as one row and flushes it.
    pub fn row<R: Serialize>(&mut self, row: &R) -> io::Result<()> {
        self.whole_row(|w| w.serialize(row))
    }

    /// Formats one row with `format`, then writes it in one piece; when
    /// that fails, the file is cut back to its last whole row.
    fn whole_row(&mut self, format: impl FnOnce(&mut csv::Writer<Vec<u8>>) -> csv::Result<()>) -> io::Result<()> {
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        format(&mut w)?;
        let bytes = w.into_inner().map_err(|e| io::Error::other(e.to_string()))?;
        match self.file.write_all(&bytes).and_then(|_| self.file.flush()) {
            Ok(()) => {
                self.whole += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                let _ = self.file.set_len(self.whole);
                let _ = self.file.seek(SeekFrom::Start(self.whole));
                Err(e)
            }
        }
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }

    /// What this file is, for error messages.
    pub fn target(&self) -> String {
        format!("CSV file {}", self.path.display())
    }

    /// Removes the file (a run that will not start).
    pub fn discard(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The run's CSV: its header at `begin`, a row per record.
pub struct CsvSink {
    file: CsvFile,
    extras: Extras,
}

impl CsvSink {
    /// Creates the file now (`CsvFile::create`).
    pub fn create(path: &Path, overwrite: bool, extras: Extras) -> Result<CsvSink, Error> {
        Ok(CsvSink {
            file: CsvFile::create(path, overwrite)?,
            extras,
        })
    }
}

impl Sink for CsvSink {
    fn begin(&mut self, _run: &RunInfo) -> io::Result<()> {
        self.file.fields(self.extras.header())
    }

    fn record(&mut self, record: &Record) -> io::Result<()> {
        self.file.fields(record.csv_fields(self.extras))
    }

    fn finish(&mut self, _run: &RunInfo, _summary: &Summary) -> io::Result<()> {
        self.file.flush()
    }

    fn target(&self) -> String {
        self.file.target()
    }

    fn discard(&mut self) {
        self.file.discard();
    }
}

/// Writes `records` as a new CSV report at `path` (import), whole or not
/// at all (`report::WholeFile`): an existing `path` is refused unless
/// `overwrite` (and kept until the new file is complete), and a write that
/// fails (a full disk) leaves nothing behind.
pub fn write_records(path: &Path, overwrite: bool, records: &[Record]) -> Result<(), Error> {
    let file = super::WholeFile::create(path, overwrite, "CSV")?;
    let failed = |e: io::Error| Error::runtime(format!("cannot write CSV file {}: {e}", path.display()));
    file.commit(&csv_bytes(records).map_err(failed)?).map_err(failed)
}

/// The header and a row per record, with the optional columns any record
/// has a value for (our own table's).
fn csv_bytes(records: &[Record]) -> io::Result<Vec<u8>> {
    let any = |has: fn(&Record) -> bool| records.iter().any(has);
    let extras = Extras {
        per_iter: any(|r| r.time_p50_us.is_some() || r.time_cv.is_some() || r.time_iter_min_us.is_some()),
        phases: any(|r| r.phase_inter_us.is_some()),
        label: any(|r| r.label.is_some()),
        traffic: any(|r| r.traffic.is_some()),
        group: any(|r| r.group.is_some()),
        algo: any(|r| r.algo_source.is_some()),
    };
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(extras.header())?;
    for r in records {
        w.write_record(r.csv_fields(extras))?;
    }
    w.into_inner().map_err(|e| e.into_error())
}
