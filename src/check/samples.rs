//! One JSON line per sample (`samples.jsonl`), written by rank 0 as each
//! sample is taken and flushed at once, so that a soak stopped by Ctrl-C
//! keeps every sample. Fields in docs/check.md.

use std::io::Write;

use serde::Serialize;

use crate::error::Error;

/// One size's figures within a sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeFigures {
    pub size_bytes: u64,
    /// The group's ranks' mean time of one operation (nccl-tests' default
    /// time reduction), microseconds.
    pub time_us: f64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
}

/// One sample of one check on one group.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Sample {
    pub run_id: String,
    pub check: String,
    pub scope: &'static str,
    pub group: String,
    pub hosts: Vec<String>,
    /// From 0, per check and group.
    pub sample: usize,
    /// When the sample ended, RFC 3339 with milliseconds.
    pub time: String,
    /// Seconds since the check's first sample began.
    pub elapsed_s: f64,
    /// The check's metric over the sizes (their mean).
    pub value: f64,
    pub metric: &'static str,
    pub unit: &'static str,
    pub sizes: Vec<SizeFigures>,
}

/// The samples file: one line per sample, flushed as written.
pub struct SamplesFile {
    file: std::fs::File,
    path: std::path::PathBuf,
}

impl SamplesFile {
    pub fn create(path: &std::path::Path, overwrite: bool) -> Result<SamplesFile, Error> {
        let file = crate::report::create_file(path, overwrite, "samples")?;
        Ok(SamplesFile {
            file,
            path: path.to_path_buf(),
        })
    }

    pub fn write(&mut self, sample: &Sample) -> Result<(), Error> {
        let mut line =
            serde_json::to_string(sample).map_err(|e| Error::runtime(format!("cannot encode a sample: {e}")))?;
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .and_then(|_| self.file.flush())
            .map_err(|e| Error::runtime(format!("cannot write {}: {e}", self.path.display())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sample_is_one_line_of_json() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut f = SamplesFile::create(&path, false).unwrap();
        let s = Sample {
            run_id: "r".into(),
            check: "node-ar".into(),
            scope: "node",
            group: "a".into(),
            hosts: vec!["a".into()],
            sample: 0,
            time: "2026-12-02T00:00:00.000Z".into(),
            elapsed_s: 0.5,
            value: 1.25,
            metric: "busbw",
            unit: "GB/s",
            sizes: vec![SizeFigures {
                size_bytes: 4096,
                time_us: 3.2,
                algbw_gbps: 1.28,
                busbw_gbps: 1.28,
            }],
        };
        f.write(&s).unwrap();
        f.write(&Sample { sample: 1, ..s }).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["sample"], 1);
        assert_eq!(lines[0]["sizes"][0]["size_bytes"], 4096);
        assert!(
            SamplesFile::create(&path, false).is_err(),
            "an existing file is refused"
        );
    }
}
