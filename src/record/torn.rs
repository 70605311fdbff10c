//! A CSV file's whole rows: every writer of collbench ends each row with a
//! line end and writes it in one piece (`report::csv::CsvFile`), so a final
//! row without one, shorter than the header, was cut short (a full disk, a
//! writer killed mid-row, a copy cut off). Readers take the file up to its
//! last line end and say, in one warning, which row they left out, rather
//! than refusing the whole file. A final row as long as the header is kept:
//! a file written by hand often lacks its last line end.

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

/// Where a final row without a line end and with fewer fields than the
/// header starts, and its line number; `None` when the text ends with a
/// line end, is one line (a header), or its last row is as long as the
/// header.
fn torn_row(bytes: &[u8]) -> Option<(usize, usize)> {
    if bytes.is_empty() || bytes.ends_with(b"\n") {
        return None;
    }
    let end = bytes.iter().rposition(|&b| b == b'\n')?;
    let fields = |text: &[u8]| {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(text);
        reader.records().next().and_then(Result::ok).map_or(0, |r| r.len())
    };
    if fields(&bytes[end + 1..]) >= fields(bytes) {
        return None;
    }
    let line = bytes[..=end].iter().filter(|&&b| b == b'\n').count() + 1;
    Some((end + 1, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_row_cut_short_is_left_out_and_named_by_its_line() {
        assert_eq!(torn_row(b"a,b,c\n1,2,3\n4,5"), Some((12, 3)));
        assert_eq!(torn_row(b"a,b,c\n1,2,3\n4,\"x"), Some((12, 3)));
        assert_eq!(torn_row(b"a,b\n1,2\n"), None);
        assert_eq!(torn_row(b"a,b"), None);
        assert_eq!(torn_row(b""), None);
        // as long as the header: a file without its last line end
        assert_eq!(torn_row(b"a,b\n1,2\n3,4"), None);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.csv");
        std::fs::write(&path, "a,b,c\r\n1,2,3\r\n4,5").unwrap();
        assert_eq!(whole_rows(&path).unwrap(), b"a,b,c\r\n1,2,3\r\n");
    }
}
