//! Merging the launches' CSV reports into one: every row of every file,
//! under one header. The files of one suite share their options, so their
//! headers are normally equal; when one has extra columns (`cycle`,
//! `phase_*`), the merged header gets them too and other rows leave them
//! empty.

use std::path::Path;

use crate::error::Error;

/// Rows written, per input file.
pub fn merge(inputs: &[&Path], output: &Path, overwrite: bool) -> Result<Vec<usize>, Error> {
    let mut header: Vec<String> = Vec::new();
    let mut tables: Vec<(Vec<String>, Vec<csv::StringRecord>)> = Vec::new();
    for path in inputs {
        let text = crate::record::torn::whole_rows(path).map_err(|e| Error::runtime(e.to_string()))?;
        let mut reader = csv::Reader::from_reader(text.as_slice());
        let cols: Vec<String> = reader
            .headers()
            .map_err(|e| Error::runtime(format!("cannot read {}: {e}", path.display())))?
            .iter()
            .map(String::from)
            .collect();
        // A row cut short by a killed run is dropped, not fatal.
        let rows: Vec<csv::StringRecord> = reader
            .records()
            .filter_map(Result::ok)
            .filter(|r| r.len() == cols.len())
            .collect();
        for c in &cols {
            if !header.contains(c) {
                header.push(c.clone());
            }
        }
        tables.push((cols, rows));
    }
    let file = crate::report::create_file(output, overwrite, "CSV")?;
    let failed = |e: csv::Error| Error::runtime(format!("cannot write {}: {e}", output.display()));
    let mut w = csv::Writer::from_writer(file);
    w.write_record(&header).map_err(failed)?;
    let mut counts = Vec::new();
    for (cols, rows) in &tables {
        let at: Vec<Option<usize>> = header.iter().map(|h| cols.iter().position(|c| c == h)).collect();
        for row in rows {
            w.write_record(at.iter().map(|i| i.and_then(|i| row.get(i)).unwrap_or("")))
                .map_err(failed)?;
        }
        counts.push(rows.len());
    }
    w.flush()
        .map_err(|e| Error::runtime(format!("cannot write {}: {e}", output.display())))?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_merge_under_the_union_of_their_headers() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.csv");
        let b = dir.path().join("b.csv");
        let c = dir.path().join("c.csv");
        std::fs::write(&a, "transport,time_us\nshm,1.5\nshm,2\n").unwrap();
        std::fs::write(&b, "transport,time_us,cycle\ntcp,3,1\ntcp,4\n").unwrap();
        std::fs::write(&c, "transport,time_us\n").unwrap();
        let out = dir.path().join("all.csv");
        let counts = merge(&[&a, &b, &c], &out, false).unwrap();
        assert_eq!(counts, vec![2, 1, 0], "the short row of b is dropped");
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            "transport,time_us,cycle\nshm,1.5,\nshm,2,\ntcp,3,1\n"
        );
        let e = merge(&[&a], &out, false).unwrap_err();
        assert!(e.to_string().contains("--overwrite"), "{e}");
        assert!(merge(&[&a], &out, true).is_ok());
    }
}
