//! Reading run CSVs (`compare`, `plot`, a suite, the post-run views): a file or a folder of
//! files, checked against schema 1, with the optional per-iteration
//! statistic columns a row may carry. Every row is kept: rows of one case
//! (several `cycle`s of a launch, several launches in a folder) are the
//! samples of that case. A row whose measured values no measurement can
//! give (`unmeasurable`: not finite, negative, a time of 0, a bandwidth of
//! 0 where the formula cannot give 0) is refused with the file, the line
//! and the column, never read as data (docs/csv.md, "Values a reader
//! refuses").
//!
//! Only reading: no verdicts, no formatting.

use std::path::{Path, PathBuf};

use super::{COLUMNS, Record, check_column};
use crate::error::Error;

/// Per-iteration statistics of a row, present when the CSV has the
/// optional columns `time_p50_us`, `time_p99_us` (microseconds) and
/// `time_cv` (standard deviation / mean, a fraction): the spread `compare`
/// widens a row's by (tests set them apart from the record).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IterStats {
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    pub cv: Option<f64>,
}

/// One CSV row: the schema-1 record and its optional statistics.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub record: Record,
    pub stats: IterStats,
    /// The file the row came from.
    pub file: PathBuf,
}

/// Every row read from one argument (a file or a folder).
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The argument as the user gave it.
    pub label: String,
    pub rows: Vec<Row>,
    /// The files read, in name order.
    pub files: Vec<PathBuf>,
}

/// Reads a CSV file, or every `*.csv` file of a folder (in name order),
/// keeping every row: a folder of several launches' CSVs is how a
/// baseline of several launches is given.
pub fn load(path: &Path) -> Result<Loaded, Error> {
    let files = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Error::usage(format!("cannot read folder {}: {e}", path.display())))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "csv"))
            .collect();
        files.sort();
        if files.is_empty() {
            return Err(Error::usage(format!("folder {} holds no .csv files", path.display())));
        }
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut rows = Vec::new();
    for file in &files {
        rows.extend(read_file(file)?);
    }
    Ok(Loaded {
        label: path.display().to_string(),
        rows,
        files,
    })
}

/// Reads one CSV file; every schema-1 column must be present (more may
/// follow), or the file is refused with the missing names. Each value is
/// parsed into its column's type here, once; a bad one is one line naming
/// the file, the line and the column.
pub fn read_file(path: &Path) -> Result<Vec<Row>, Error> {
    let text = super::torn::whole_rows(path)?;
    let mut reader = csv::Reader::from_reader(text.as_slice());
    let headers = reader
        .headers()
        .map_err(|e| Error::usage(format!("CSV file {}: {e}", path.display())))?
        .clone();
    let missing: Vec<&str> = COLUMNS
        .iter()
        .copied()
        .filter(|c| !headers.iter().any(|h| h == *c))
        .collect();
    if !missing.is_empty() {
        let what = if headers.iter().all(|h| h.trim().is_empty()) {
            "it is empty".to_string()
        } else {
            format!("missing column{} {}", plural(missing.len()), missing.join(", "))
        };
        return Err(Error::usage(format!(
            "{} is not a collbench CSV (schema 1): {what}",
            path.display()
        )));
    }
    let mut rows = Vec::new();
    for (i, raw) in reader.records().enumerate() {
        // the file's own line (the reader skips blank lines), else the
        // record's count after the header
        let line_of = |p: Option<&csv::Position>| p.map_or(i + 2, |p| line_at(&text, p.byte()));
        let raw = raw.map_err(|e| {
            let line = line_of(e.position());
            Error::usage(format!("CSV file {} line {line}: {e}", path.display()))
        })?;
        let line = line_of(raw.position());
        let record: Record = raw
            .deserialize(Some(&headers))
            .map_err(|e| bad_row(path, &headers, &raw, line, &e))?;
        if let Some((column, why)) = unmeasurable(&record) {
            return Err(refused(path, line, column, &why));
        }
        let stats = IterStats {
            p50_us: record.time_p50_us,
            p99_us: record.time_p99_us,
            cv: record.time_cv,
        };
        rows.push(Row {
            record,
            stats,
            file: path.to_path_buf(),
        });
    }
    Ok(rows)
}

/// The line of `text` (from 1) where the record read from byte `at` on
/// starts: the blank lines the reader skipped before it counted.
fn line_at(text: &[u8], at: u64) -> usize {
    let at = usize::try_from(at).unwrap_or(usize::MAX).min(text.len());
    let before = text[..at].iter().filter(|&&b| b == b'\n').count();
    let blank = text[at..]
        .iter()
        .take_while(|&&b| b == b'\n' || b == b'\r')
        .filter(|&&b| b == b'\n')
        .count();
    1 + before + blank
}

/// The first measured column of `r` whose value no measurement can give,
/// and why: a time or bandwidth that is not finite or is negative, a time
/// of 0, an algbw of 0 at a size above 0, a busbw of 0 at a size above 0
/// where the collective's bus factor at that rank count is above 0 (busbw
/// is 0 by definition at one rank, and both bandwidths at a size of 0).
pub(super) fn unmeasurable(r: &Record) -> Option<(&'static str, String)> {
    let factor = r
        .collective
        .spec()
        .bus_factor(usize::try_from(r.nranks).unwrap_or(usize::MAX));
    let sized = r.size_bytes > 0;
    let bandwidth_zero = || {
        format!(
            "0 at {} bytes on {} rank{} is not a measured value",
            r.size_bytes,
            r.nranks,
            plural(usize::try_from(r.nranks).unwrap_or(usize::MAX))
        )
    };
    let columns = [
        ("time_us", r.time_us, Some(TIME_ZERO.to_string())),
        ("time_min_us", r.time_min_us, Some(TIME_ZERO.to_string())),
        ("time_max_us", r.time_max_us, Some(TIME_ZERO.to_string())),
        ("algbw_gbps", r.algbw_gbps, sized.then(bandwidth_zero)),
        ("busbw_gbps", r.busbw_gbps, (sized && factor > 0.0).then(bandwidth_zero)),
    ];
    columns
        .into_iter()
        .find_map(|(column, value, zero)| not_measured(value, zero).map(|why| (column, why)))
}

/// Why a time's refusal at 0.
pub(super) const TIME_ZERO: &str = "a time of 0 is not a measured value";

/// Why `value` of a measured column cannot be a measurement: not finite,
/// negative, or 0 where `zero` (the reason) says 0 cannot be measured.
pub(super) fn not_measured(value: f64, zero: Option<String>) -> Option<String> {
    if !value.is_finite() {
        Some(format!("{value} is not a measured value"))
    } else if value < 0.0 {
        Some(format!("{value} is negative"))
    } else if value == 0.0 {
        zero
    } else {
        None
    }
}

/// The refusal of a row by `not_measured`: the file, the line, the column.
pub(super) fn refused(path: &Path, line: usize, column: &str, why: &str) -> Error {
    Error::usage(format!(
        "CSV file {} line {line} column `{column}`: {why}; the row cannot be read as a measurement",
        path.display()
    ))
}

/// `CSV file F line L column `collective`: unknown collective 'x'`: the
/// column the reader names, else the first typed column whose value does
/// not parse.
pub(super) fn bad_row(
    path: &Path,
    headers: &csv::StringRecord,
    raw: &csv::StringRecord,
    line: usize,
    e: &csv::Error,
) -> Error {
    let at = format!("CSV file {} line {line}", path.display());
    let csv::ErrorKind::Deserialize { err, .. } = e.kind() else {
        return Error::usage(format!("{at}: {e}"));
    };
    if let Some(name) = err.field().and_then(|f| headers.get(f as usize)) {
        return Error::usage(format!("{at} column `{name}`: {}", err.kind()));
    }
    let typed = headers
        .iter()
        .zip(raw.iter())
        .find_map(|(name, text)| check_column(name, text).err().map(|why| (name, why)));
    match typed {
        Some((name, why)) => Error::usage(format!("{at} column `{name}`: {why}")),
        None => Error::usage(format!("{at}: {}", err.kind())),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "run_id,timestamp,host,backend,backend_version,transport,transport_observed,hierarchy,\
collective,dtype,op,root,placement,size_bytes,count,nranks,nnodes,ranks_per_node,iters,warmup,time_us,\
time_min_us,time_max_us,algbw_gbps,busbw_gbps,wrong";

    fn line(ts: &str, size: u64, time: f64) -> String {
        format!(
            "r,{ts},h,mpi,v,auto,unknown,flat,all_reduce,float,sum,-1,out_of_place,{size},2,2,1,2,20,5,{time},{time},{time},1,1,0"
        )
    }

    #[test]
    fn extra_columns_are_read_and_missing_ones_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.csv");
        let text = format!(
            "{HEADER},time_p50_us,time_p99_us,note\n{},9.5,12,x\n",
            line("t", 8, 10.0)
        );
        std::fs::write(&path, text).unwrap();
        let rows = read_file(&path).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].stats.p50_us, Some(9.5));
        assert_eq!(rows[0].stats.p99_us, Some(12.0));
        assert_eq!(rows[0].stats.cv, None);

        std::fs::write(&path, "run_id,size_bytes\nx,8\n").unwrap();
        let err = read_file(&path).unwrap_err().to_string();
        assert!(
            err.contains("not a collbench CSV") && err.contains("busbw_gbps"),
            "{err}"
        );
    }

    #[test]
    fn a_folder_keeps_every_row_of_every_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("a.csv"),
            format!("{HEADER}\n{}\n{}\n", line("2024", 8, 1.0), line("2024", 16, 2.0)),
        )
        .unwrap();
        std::fs::write(
            dir.path().join("b.csv"),
            format!("{HEADER}\n{}\n", line("2023", 8, 3.0)),
        )
        .unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let loaded = load(dir.path()).unwrap();
        assert_eq!(loaded.files.len(), 2);
        let times: Vec<f64> = loaded.rows.iter().map(|r| r.record.time_us).collect();
        assert_eq!(times, [1.0, 2.0, 3.0]);
    }

    #[test]
    fn unparseable_rows_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.csv");
        std::fs::write(
            &path,
            format!(
                "{HEADER}\n{}\n{}\n",
                line("t", 8, 1.0),
                line("t", 8, 1.0).replace(",8,", ",eight,")
            ),
        )
        .unwrap();
        let err = read_file(&path).unwrap_err().to_string();
        assert!(err.contains("bad.csv line 3 column `size_bytes`: "), "{err}");
        assert!(!err.contains('\n'));
        // the file's line, blank lines counted (the reader skips them)
        let text = format!(
            "{HEADER}\n\n{}\n\n{}\n",
            line("t", 8, 1.0),
            line("t", 8, 1.0).replace(",8,", ",eight,")
        );
        std::fs::write(&path, text).unwrap();
        let err = read_file(&path).unwrap_err().to_string();
        assert!(err.contains("bad.csv line 5 column `size_bytes`: "), "{err}");
        // a value of a typed column: its name and the value
        let text = format!("{HEADER}\n{}\n", line("t", 8, 1.0).replace("all_reduce", "all_redux"));
        std::fs::write(&path, text).unwrap();
        let err = read_file(&path).unwrap_err().to_string();
        assert!(
            err.ends_with("bad.csv line 2 column `collective`: unknown collective 'all_redux'"),
            "{err}"
        );
        for (from, to, column) in [
            (",sum,", ",add,", "op"),
            (",-1,", ",-2,", "root"),
            ("out_of_place", "sideways", "placement"),
        ] {
            std::fs::write(
                &path,
                format!("{HEADER}\n{}\n", line("t", 8, 1.0).replacen(from, to, 1)),
            )
            .unwrap();
            let err = read_file(&path).unwrap_err().to_string();
            assert!(err.contains(&format!("line 2 column `{column}`: ")), "{err}");
        }
    }

    /// A row of all_reduce (or `collective`) at `size` bytes and `ranks`
    /// ranks with the measured columns given as text.
    fn measured(collective: &str, size: u64, ranks: u64, [t, tmin, tmax, alg, bus]: [&str; 5]) -> String {
        format!(
            "r,t,h,mpi,v,auto,unknown,flat,{collective},float,{},-1,out_of_place,{size},2,{ranks},1,{ranks},20,5,{t},{tmin},{tmax},{alg},{bus},0",
            if collective == "all_reduce" { "sum" } else { "none" }
        )
    }

    #[test]
    fn values_no_measurement_gives_are_refused_naming_the_file_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.csv");
        let good = ["10", "9", "11", "0.8", "0.8"];
        for (at, value, column, why) in [
            (4, "NaN", "busbw_gbps", "NaN is not a measured value"),
            (4, "inf", "busbw_gbps", "inf is not a measured value"),
            (3, "-inf", "algbw_gbps", "-inf is not a measured value"),
            (0, "-3", "time_us", "-3 is negative"),
            (4, "-0.5", "busbw_gbps", "-0.5 is negative"),
            (0, "0", "time_us", "a time of 0 is not a measured value"),
            (1, "0", "time_min_us", "a time of 0 is not a measured value"),
            (2, "nan", "time_max_us", "NaN is not a measured value"),
            (3, "0", "algbw_gbps", "0 at 8 bytes on 2 ranks is not a measured value"),
            (4, "0", "busbw_gbps", "0 at 8 bytes on 2 ranks is not a measured value"),
        ] {
            let mut values = good;
            values[at] = value;
            std::fs::write(
                &path,
                format!(
                    "{HEADER}\n{}\n{}\n",
                    measured("all_reduce", 8, 2, good),
                    measured("all_reduce", 8, 2, values)
                ),
            )
            .unwrap();
            let e = read_file(&path).unwrap_err();
            assert_eq!(e.exit_code(), 2);
            assert_eq!(
                e.to_string(),
                format!(
                    "CSV file {} line 3 column `{column}`: {why}; the row cannot be read as a measurement",
                    path.display()
                )
            );
        }
    }

    #[test]
    fn a_bandwidth_of_0_is_read_where_the_formula_gives_0() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("z.csv");
        let text = format!(
            "{HEADER}\n{}\n{}\n{}\n",
            // busbw at one rank: factor 2(n-1)/n = 0
            measured("all_reduce", 8, 1, ["10", "10", "10", "0.0008", "0"]),
            // nothing moves at a size of 0
            measured("all_gather", 0, 2, ["57.3", "57", "58", "0", "0"]),
            // broadcast's factor is 1 at any rank count: busbw = algbw
            measured("broadcast", 8, 1, ["10", "10", "10", "0.0008", "0.0008"]),
        );
        std::fs::write(&path, text).unwrap();
        let rows = read_file(&path).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].record.busbw_gbps, 0.0);
        // ... but not where it cannot: broadcast at one rank moves the buffer
        std::fs::write(
            &path,
            format!(
                "{HEADER}\n{}\n",
                measured("broadcast", 8, 1, ["10", "10", "10", "0.0008", "0"])
            ),
        )
        .unwrap();
        let e = read_file(&path).unwrap_err().to_string();
        assert!(
            e.contains("line 2 column `busbw_gbps`: 0 at 8 bytes on 1 rank is not"),
            "{e}"
        );
    }
}
