//! Logs from the file system: a job's output, per-rank `NCCL_DEBUG_FILE`
//! files, a folder of them (read recursively, in name order), `-` for
//! standard input; each decoded by `decode` (gzip, UTF-16, BOMs, CRLF).

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// One log file's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogFile {
    /// The path as the user gave it (or found in a folder they gave), or
    /// `-` for standard input.
    pub name: String,
    pub text: String,
}

impl LogFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> LogFile {
        LogFile {
            name: name.into(),
            text: text.into(),
        }
    }

    /// Its lines, split (`nccl_log::lines`).
    pub fn lines(&self) -> impl Iterator<Item = super::Line<'_>> {
        super::lines(&self.text)
    }
}

/// One file's text, or one line saying why there is none (exit 2).
pub fn read_file(path: &Path) -> Result<String, Error> {
    let bytes = if path == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .map_err(|e| Error::usage(format!("cannot read standard input: {e}")))?;
        bytes
    } else {
        std::fs::read(path).map_err(|e| Error::usage(format!("cannot read {}: {e}", path.display())))?
    };
    super::decode(&bytes).map_err(|why| Error::usage(format!("{}: {why}", path.display())))
}

/// Every log the paths name: files as given (one that cannot be read is
/// an error), folders expanded to their files (one that is not a text log,
/// such as a core file, is skipped and named in the returned notes).
pub fn read_paths(paths: &[PathBuf]) -> Result<(Vec<LogFile>, Vec<String>), Error> {
    let mut logs = Vec::new();
    let mut notes = Vec::new();
    for path in paths {
        if path.is_dir() {
            let files = files_under(path)?;
            if files.is_empty() {
                return Err(Error::usage(format!("{}: the folder holds no files", path.display())));
            }
            for file in files {
                match read_file(&file) {
                    Ok(text) => logs.push(LogFile::new(file.display().to_string(), text)),
                    Err(e) => notes.push(format!("skipped {e}")),
                }
            }
        } else {
            let text = read_file(path)?;
            logs.push(LogFile::new(path.display().to_string(), text));
        }
    }
    Ok((logs, notes))
}

/// The files under a folder, recursively, in name order; hidden ones left out.
fn files_under(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let entries = std::fs::read_dir(&d).map_err(|e| Error::usage(format!("cannot read {}: {e}", d.display())))?;
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else if path.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    Ok(out)
}
