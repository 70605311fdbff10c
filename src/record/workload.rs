//! The workload CSV (docs/workload.md "CSV (workload schema)"): one typed
//! row per timed step (`kind` `step`: the samples `compare` judges) and per
//! operation of the step (`kind` `op`). `report::workload` writes them and
//! `compare::workload` reads them back, both through serde, so a column is
//! one field here (its name is the header's). The `kind` column also tells
//! the file from a run CSV, which has none (`is_workload_csv`).
//!
//! Times and bandwidths are written with the decimals the report shows
//! (`time_us` in thousandths of a microsecond, `busbw_gbps` to four
//! places, `bus_bytes` whole); a run CSV keeps every digit instead.

use std::borrow::Cow;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::collective::Collective;
use crate::error::Error;
use crate::types::{DType, ReduceOp};

/// What a row is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// One timed step of a configuration.
    #[default]
    Step,
    /// One operation of the step, over the timed steps.
    Op,
}

/// One row; fields in column order. What a step row leaves empty is `None`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkloadRow {
    pub kind: RowKind,
    /// The configuration (`ddp bucket 4.0 MiB`, `fsdp`, `replay`).
    pub workload: String,
    /// The strategy, `replay` for a log.
    pub strategy: String,
    pub bucket_bytes: Option<u64>,
    pub nranks: u64,
    pub ranks_per_node: u64,
    pub tp: u64,
    /// Step rows: 1..N.
    pub step: Option<u64>,
    /// Op rows, from here to `root`: position in the step (from 1).
    pub op_index: Option<u64>,
    /// forward, backward, optimizer or log.
    pub phase: Option<String>,
    /// The group kind, or a log's partition.
    pub group: Option<String>,
    pub group_ranks: Option<u64>,
    /// What the framework calls the operation.
    pub label: Option<String>,
    pub collective: Option<Collective>,
    /// The modelled type, and what ran.
    pub dtype: Option<DType>,
    pub run_dtype: Option<DType>,
    /// `none` for collectives that do not reduce.
    #[serde(with = "op_cell")]
    pub op: Option<Option<ReduceOp>>,
    /// -1 where there is none.
    pub root: Option<i64>,
    /// Step rows: operations per step; op rows: the `count` column.
    pub count: u64,
    pub size_bytes: u64,
    /// Bytes each rank sends, from first principles.
    #[serde(serialize_with = "whole")]
    pub bus_bytes: f64,
    /// Step rows: the step's time; op rows: the median over the steps.
    #[serde(serialize_with = "thousandths")]
    pub time_us: f64,
    #[serde(serialize_with = "thousandths_or_empty")]
    pub time_p99_us: Option<f64>,
    #[serde(serialize_with = "four_places")]
    pub busbw_gbps: f64,
    /// Step rows: wrong elements of the check (empty when off).
    pub wrong: Option<u64>,
    pub backend_version: String,
    /// A replay with `--rescale`.
    pub rescaled: bool,
}

impl WorkloadRow {
    /// The header: the fields' names, in order.
    pub fn columns() -> Vec<String> {
        let mut w = csv::WriterBuilder::new().from_writer(Vec::new());
        let header = w
            .serialize(WorkloadRow::default())
            .ok()
            .and_then(|()| w.into_inner().ok())
            .unwrap_or_default();
        let mut r = csv::Reader::from_reader(header.as_slice());
        r.headers()
            .map(|h| h.iter().map(String::from).collect())
            .unwrap_or_default()
    }
}

fn whole<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:.0}"))
}

fn thousandths<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:.3}"))
}

fn thousandths_or_empty<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => thousandths(v, s),
        None => s.serialize_none(),
    }
}

fn four_places<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_args!("{v:.4}"))
}

/// `op`: empty on a step row, else an operation's name or `none`.
mod op_cell {
    use super::*;
    use crate::record::op_column;

    pub fn serialize<S: Serializer>(op: &Option<Option<ReduceOp>>, s: S) -> Result<S::Ok, S::Error> {
        match op {
            Some(op) => s.serialize_str(op_column::text(*op)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<ReduceOp>>, D::Error> {
        match Option::<Cow<str>>::deserialize(d)? {
            None => Ok(None),
            Some(text) if text.is_empty() => Ok(None),
            Some(text) => op_column::parse(&text).map(Some).map_err(serde::de::Error::custom),
        }
    }
}

/// Whether the CSV at `path` is a workload CSV: its columns include
/// `kind`, which says of each row whether it is a step or an operation (a
/// run CSV has no such column).
pub fn is_workload_csv(path: &Path) -> bool {
    csv::Reader::from_path(path)
        .ok()
        .and_then(|mut r| r.headers().ok().map(|h| h.iter().any(|c| c == "kind")))
        .unwrap_or(false)
}

/// Every row of the workload CSV at `path`; a value that does not parse,
/// or a time or bandwidth no measurement gives (not finite, negative, a
/// step's time of 0), is one line naming the file, the line and the
/// column.
pub fn read(path: &Path) -> Result<Vec<WorkloadRow>, Error> {
    let shown = path.display();
    let text = super::torn::whole_rows(path)?;
    let mut reader = csv::Reader::from_reader(text.as_slice());
    let headers = reader
        .headers()
        .map_err(|e| Error::usage(format!("CSV file {shown}: {e}")))?
        .clone();
    let mut rows = Vec::new();
    for (i, raw) in reader.records().enumerate() {
        let line = i + 2;
        let raw = raw.map_err(|e| Error::usage(format!("CSV file {shown} line {line}: {e}")))?;
        let row: WorkloadRow = raw
            .deserialize(Some(&headers))
            .map_err(|e| super::read::bad_row(path, &headers, &raw, line, &e))?;
        let step = row.kind == RowKind::Step;
        let time_zero = step.then(|| super::read::TIME_ZERO.to_string());
        for (column, value, zero) in [
            ("time_us", row.time_us, time_zero),
            ("busbw_gbps", row.busbw_gbps, None),
        ] {
            if let Some(why) = super::read::not_measured(value, zero) {
                return Err(super::read::refused(path, line, column, &why));
            }
        }
        rows.push(row);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_write_their_columns_in_order_and_read_back() {
        let columns = WorkloadRow::columns();
        assert_eq!(columns.len(), 27);
        assert_eq!(columns[..3], ["kind", "workload", "strategy"]);
        assert_eq!(columns[26], "rescaled");
        let op = WorkloadRow {
            kind: RowKind::Op,
            workload: "ddp, bucket 1 MiB".into(),
            strategy: "ddp".into(),
            op_index: Some(1),
            collective: Some(Collective::AllGather),
            dtype: Some(DType::Bfloat16),
            run_dtype: Some(DType::Float),
            op: Some(None),
            root: Some(-1),
            bus_bytes: 1536.4,
            time_us: 12.34567,
            time_p99_us: Some(13.0),
            busbw_gbps: 0.123456,
            ..WorkloadRow::default()
        };
        let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
        w.serialize(&op).unwrap();
        let step = WorkloadRow {
            time_us: 1.5,
            ..WorkloadRow::default()
        };
        w.serialize(&step).unwrap();
        let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "op,\"ddp, bucket 1 MiB\",ddp,,0,0,0,,1,,,,,all_gather,bfloat16,float,none,-1,0,0,1536,12.346,13.000,0.1235,,,false"
        );
        assert_eq!(lines[1], "step,,,,0,0,0,,,,,,,,,,,,0,0,0,1.500,,0.0000,,,false");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.csv");
        std::fs::write(&path, format!("{}\n{text}", columns.join(","))).unwrap();
        assert!(is_workload_csv(&path));
        let back = read(&path).unwrap();
        assert_eq!(back[0].op, Some(None));
        assert_eq!((back[0].time_us, back[0].busbw_gbps), (12.346, 0.1235));
        assert_eq!(back[1], step);
        std::fs::write(
            &path,
            format!("{}\n{}", columns.join(","), lines[0].replace("12.346", "soon")),
        )
        .unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("w.csv line 2 column `time_us`"), "{e}");
    }

    #[test]
    fn a_step_time_no_measurement_gives_is_refused_naming_the_file_line_and_column() {
        let columns = WorkloadRow::columns().join(",");
        let row = |kind: RowKind, time_us: f64, busbw_gbps: f64| {
            let mut w = csv::WriterBuilder::new().has_headers(false).from_writer(Vec::new());
            w.serialize(WorkloadRow {
                kind,
                time_us,
                busbw_gbps,
                ..WorkloadRow::default()
            })
            .unwrap();
            String::from_utf8(w.into_inner().unwrap()).unwrap()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.csv");
        let good = row(RowKind::Step, 10.0, 1.0);
        for (bad, column, why) in [
            (
                row(RowKind::Step, f64::NAN, 1.0),
                "time_us",
                "NaN is not a measured value",
            ),
            (
                row(RowKind::Step, 0.0, 1.0),
                "time_us",
                "a time of 0 is not a measured value",
            ),
            (row(RowKind::Op, -1.0, 1.0), "time_us", "-1 is negative"),
            (
                row(RowKind::Step, 10.0, f64::INFINITY),
                "busbw_gbps",
                "inf is not a measured value",
            ),
        ] {
            std::fs::write(&path, format!("{columns}\n{good}{bad}")).unwrap();
            let e = read(&path).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert_eq!(
                e.to_string(),
                format!(
                    "CSV file {} line 3 column `{column}`: {why}; the row cannot be read as a measurement",
                    path.display()
                )
            );
        }
        // an operation's row may read 0 (its median below the thousandth
        // the file keeps); a step's bandwidth of 0 is a step of one rank
        std::fs::write(
            &path,
            format!(
                "{columns}\n{good}{}{}",
                row(RowKind::Op, 0.0, 0.0),
                row(RowKind::Step, 10.0, 0.0)
            ),
        )
        .unwrap();
        assert_eq!(read(&path).unwrap().len(), 3);
    }
}
