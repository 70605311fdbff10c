//! A CSV file's whole rows: every writer of collbench ends each row with a
//! line end and writes it in one piece (`report::csv::CsvFile`), so a final
//! row without one was cut short (a full disk, a writer killed mid-row, a
//! copy cut off). Readers take the file up to its last line end and say,
//! in one warning, which row they left out, rather than refusing the file
//! or reading a value cut in half.

use std::path::Path;

use crate::error::{Error, say};

/// The bytes of the CSV file at `path` up to its last line end; a final
/// row after it is left out with a warning naming the file and its line.
pub fn whole_rows(path: &Path) -> Result<Vec<u8>, Error> {
    let mut bytes =
        std::fs::read(path).map_err(|e| Error::usage(format!("cannot read CSV file {}: {e}", path.display())))?;
    if let Some((keep, line)) = torn_row(&bytes) {
        say(&format!(
            "collbench: warning: CSV file {}: line {line}, its last row, has no line end (cut short by a full disk or a \
             killed run?); it is left out",
            path.display()
        ));
        bytes.truncate(keep);
    }
    Ok(bytes)
}

/// Where a final row without a line end starts, and its line number;
/// `None` when the text ends with a line end, or is one line (a header).
fn torn_row(bytes: &[u8]) -> Option<(usize, usize)> {
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return None;
    }
    let end = bytes.iter().rposition(|&b| b == b'\n')?;
    let line = bytes[..=end].iter().filter(|&&b| b == b'\n').count() + 1;
    Some((end + 1, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_row_without_a_line_end_is_left_out_and_named_by_its_line() {
        assert_eq!(torn_row(b"a,b\n1,2\n3,"), Some((8, 3)));
        assert_eq!(torn_row(b"a,b\n1,2\n"), None);
        assert_eq!(torn_row(b"a,b"), None);
        assert_eq!(torn_row(b""), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, "a,b\r\n1,2\r\n3,4").unwrap();
        assert_eq!(whole_rows(&path).unwrap(), b"a,b\r\n1,2\r\n");
    }
}
