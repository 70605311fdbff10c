//! Reports: during a run, on rank 0 only, the terminal table, the CSV, the
//! JSON file and the progress (`Reporter` holds them); after runs,
//! `compare` (verdicts between runs), `plot` (pictures) and `import` (other
//! tools' logs as CSV).
//! Reports format what the engine measured; they compute nothing but
//! display aggregates, verdicts, and (for imports) bandwidths through
//! `record::bandwidth_gbps`, the one place that formula lives.
//!
//! Each output format is one small `Sink` in its own file. The CSV is
//! written row by row and flushed, so an interrupted run keeps every
//! finished row; the JSON is written once at the end, through a temporary
//! file and a rename.

pub mod csv;
mod identity;
pub mod json;
mod printer;
pub mod progress;
mod reporter;
pub mod samples;
pub use identity::RunIdentity;
pub(crate) use reporter::StopWatcher;
pub use reporter::{Reporter, stop_line};
pub mod nccl_tests_json;
pub mod paths;
pub mod table;
pub mod workload;

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::engine::{Summary, Timing};
use crate::error::Error;
use crate::record::Record;
use crate::topology::profile::Profile;
use crate::types::{BackendKind, ProgressMode};
use crate::world::RankInfo;

/// Where rank 0's reports go.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputConfig {
    /// `None`: results/<run id>.csv.
    pub csv: Option<PathBuf>,
    pub json: Option<PathBuf>,
    /// `--output-format nccl-tests-json`: `json` in nccl-tests' `-J` schema.
    pub nccl_tests_json: bool,
    /// `-S`: a timestamp at the end of every table row.
    pub timestamps: bool,
    pub overwrite: bool,
    pub progress: ProgressMode,
    /// `--label`: the run's name in the header, the CSV and the JSON.
    pub label: Option<String>,
    /// `--timings`: rank 0 prints each phase's time at the end.
    pub timings: bool,
    /// `--config`: an input, which no output may replace.
    pub config: Option<PathBuf>,
    /// What the header notes about the run's set-up (an environment
    /// variable ignored).
    pub notes: Vec<String>,
}

/// What the reports say about the run as a whole: who ran it where, and
/// how every point was measured (`Timing`, under its own field names).
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    pub run_id: String,
    pub collbench_version: String,
    pub started: String,
    pub command_line: Vec<String>,
    pub backend: BackendKind,
    pub backend_version: String,
    /// Why this backend, when it was chosen automatically.
    pub backend_note: Option<String>,
    pub control_plane: String,
    pub nranks: usize,
    pub nnodes: usize,
    pub ranks_per_node: usize,
    /// The distinct hosts.
    pub hosts: Vec<String>,
    /// `nnodes` and `ranks_per_node` count `--ranks-per-node` groups.
    pub virtual_nodes: bool,
    pub ranks: Vec<RankSummary>,
    #[serde(flatten)]
    pub timing: Timing,
    /// The requested profile (`--transport`).
    pub transport: Profile,
    /// What the ranks observed, merged (the CSV's `transport_observed`).
    pub transport_observed: String,
    /// What the profile set, what the environment kept, what could not
    /// be observed: one line each.
    pub transport_notes: Vec<String>,
    /// The all-reduce modes, comma-separated.
    pub hierarchy: String,
    /// Points of one sweep.
    pub points: usize,
    /// The sizes swept.
    pub sweep: SweepInfo,
    pub csv: PathBuf,
    pub json: Option<PathBuf>,
    /// `--label`.
    pub label: Option<String>,
    /// alltoallv's traffic, where the run measures alltoallv.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
    /// `-S`: the table ends every row with its timestamp.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub timestamps: bool,
    /// The header's notes (`OutputConfig::notes`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// On the NCCL backend: the ranks' NCCL logs, kept, and what the
    /// doctor's rules found in them (the session's `doctor::kept::KeptLogs`
    /// as JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_log: Option<serde_json::Value>,
    /// Its lines under the table (`KeptLogs::footer`).
    #[serde(skip)]
    pub nccl_log_lines: Vec<String>,
}

/// The sizes a run sweeps, as asked for and as measured: after rounding to
/// whole elements, the step, and any lowering of the largest to fit GPU
/// memory.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SweepInfo {
    /// The smallest and largest size measured.
    pub min_bytes: u64,
    pub max_bytes: u64,
    /// `--minbytes` and `--maxbytes` as given, which the header prints as
    /// nccl-tests does: a step can pass the largest size by (`-e 64K -f 4`
    /// ends at 32 KiB), and the GPU memory can lower it (a note says so).
    pub requested_min_bytes: u64,
    pub requested_max_bytes: u64,
    #[serde(serialize_with = "step_text")]
    pub step: crate::plan::Step,
    /// Distinct sizes.
    pub sizes: usize,
}

/// nccl-tests' spelling of the step: `2(factor)`, `1024(bytes)`.
pub fn step_name(step: crate::plan::Step) -> String {
    match step {
        crate::plan::Step::Factor(f) => format!("{f}(factor)"),
        crate::plan::Step::Bytes(b) => format!("{b}(bytes)"),
    }
}

fn step_text<S: serde::Serializer>(step: &crate::plan::Step, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&step_name(*step))
}

#[derive(Clone, Debug, Serialize)]
pub struct RankSummary {
    pub rank: usize,
    pub host: String,
    pub pid: u32,
    /// The GPU model the rank runs on, or its host's GPUs' model when the
    /// backend uses none; absent without GPUs.
    pub gpu: Option<String>,
}

impl From<&RankInfo> for RankSummary {
    fn from(r: &RankInfo) -> Self {
        RankSummary {
            rank: r.rank,
            host: r.host.clone(),
            pid: r.pid,
            gpu: None,
        }
    }
}

/// One output format. `Send`: a stop signal completes the sinks from a
/// thread of their own (`reporter`).
pub trait Sink: Send {
    fn begin(&mut self, run: &RunInfo) -> io::Result<()>;
    fn record(&mut self, record: &Record) -> io::Result<()>;
    fn finish(&mut self, run: &RunInfo, summary: &Summary) -> io::Result<()>;
    /// What this sink writes to, for error messages.
    fn target(&self) -> String;
    /// The run will not start: remove what this sink created.
    fn discard(&mut self) {}
}

/// Writes a report to standard output; a closed pipe (`| head`) is not an
/// error worth a message. The one way text reaches stdout outside the
/// table's printer thread.
pub fn print_out(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|_| out.flush());
}

/// Whether a picture's `path` ends in .svg (`Some(true)`) or .png
/// (`Some(false)`), in any case; `None` for any other ending.
pub(crate) fn is_svg(path: &Path) -> Option<bool> {
    match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("svg") => Some(true),
        Some("png") => Some(false),
        _ => None,
    }
}

/// Refuses an existing JSON report at `path` unless `overwrite`, and a
/// folder even with it (the report is renamed onto `path` at the end):
/// checked when the sink is made, before the run.
fn refuse_existing_json(path: &Path, overwrite: bool) -> Result<(), Error> {
    refuse_existing(path, overwrite, "JSON")
}

/// Refuses an existing `what` file at `path` unless `overwrite`, and a
/// folder even with it (`refuse_folder`).
pub(crate) fn refuse_existing(path: &Path, overwrite: bool, what: &str) -> Result<(), Error> {
    refuse_folder(path, what)?;
    if path.exists() && !overwrite {
        return Err(already_exists(path, what));
    }
    Ok(())
}

/// Refuses a folder where a `what` file is to be written, with or without
/// `--overwrite` (which replaces a file, never a folder): one line, before
/// any measurement, rather than the system's "Is a directory" later.
pub(crate) fn refuse_folder(path: &Path, what: &str) -> Result<(), Error> {
    if path.is_dir() {
        return Err(Error::usage(format!(
            "{what} file {} is a folder: give a file's path",
            path.display()
        )));
    }
    Ok(())
}

fn already_exists(path: &Path, what: &str) -> Error {
    Error::usage(format!(
        "{what} file {} already exists; choose another path or pass --overwrite",
        path.display()
    ))
}

/// A file written whole or not at all (a plot): its bytes go to the
/// temporary file beside it (`partial_path`), which is synced and renamed
/// onto it; a write that fails, or a `WholeFile` dropped unwritten, leaves
/// no temporary file and `path` as it was.
pub(crate) struct WholeFile {
    path: PathBuf,
    temp: PathBuf,
    file: Option<File>,
    overwrite: bool,
}

impl WholeFile {
    /// Refuses an existing `path` unless `overwrite`, and creates the
    /// temporary file now, so that a folder that cannot take it is refused
    /// before any work. `what` names the file in messages.
    pub fn create(path: &Path, overwrite: bool, what: &str) -> Result<WholeFile, Error> {
        refuse_existing(path, overwrite, what)?;
        let temp = partial_path(path);
        // named as the user gave it (the temporary file is ours)
        let file = File::create(&temp)
            .map_err(|e| Error::usage(format!("cannot create {what} file {}: {e}", path.display())))?;
        Ok(WholeFile {
            path: path.to_path_buf(),
            temp,
            file: Some(file),
            overwrite,
        })
    }

    /// Writes `bytes` and renames the file into place.
    pub fn commit(mut self, bytes: &[u8]) -> io::Result<()> {
        use std::io::Write;
        let mut file = self.file.take().ok_or_else(|| io::Error::other("already written"))?;
        let written = file.write_all(bytes).and_then(|_| file.sync_all());
        drop(file);
        let renamed = written.and_then(|_| {
            if !self.overwrite && self.path.exists() {
                return Err(io::Error::other("the file appeared meanwhile"));
            }
            std::fs::rename(&self.temp, &self.path)
        });
        if renamed.is_err() {
            let _ = std::fs::remove_file(&self.temp);
        }
        renamed
    }
}

impl Drop for WholeFile {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

/// The temporary file beside `path` a JSON report is written to before it
/// is renamed to `path`: `NAME.partial`.
pub(crate) fn partial_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    path.with_file_name(name)
}

/// Creates `path` for writing; an existing file is an error unless
/// `overwrite`. `what` names the file in messages.
pub(crate) fn create_file(path: &Path, overwrite: bool, what: &str) -> Result<File, Error> {
    refuse_folder(path, what)?;
    let mut options = OpenOptions::new();
    options.write(true);
    if overwrite {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    options.open(path).map_err(|e| match e.kind() {
        io::ErrorKind::AlreadyExists => already_exists(path, what),
        _ => Error::usage(format!("cannot create {what} file {}: {e}", path.display())),
    })
}
