//! The paths of one command's files, checked before any measurement or
//! comparison: no output may be another output's file or one of the
//! command's inputs (`--csv x --json x` would leave one report where two
//! were asked for; `compare --export-json base.csv` would destroy the
//! baseline), and an output that cannot be created is refused at once,
//! exit 2, rather than after the work.

use std::fs::OpenOptions;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Refuses an output of `outputs` that is another's file or an input's.
/// Each entry names the file as the user gave it: the option (`--csv`),
/// or what it is (`BASE`, `the suite file`; empty: just an input).
pub fn check_distinct(outputs: &[(&str, &Path)], inputs: &[(&str, &Path)]) -> Result<(), Error> {
    for (i, (what, path)) in outputs.iter().enumerate() {
        if let Some((other, _)) = outputs[..i].iter().find(|(_, p)| same_file(path, p)) {
            return Err(Error::usage(format!(
                "{what} {} is also {other}'s file: each output needs a path of its own",
                path.display()
            )));
        }
        if let Some((input, _)) = inputs.iter().find(|(_, p)| same_file(path, p)) {
            let which = if input.is_empty() {
                String::new()
            } else {
                format!(" {input},")
            };
            return Err(Error::usage(format!(
                "{what} {} is{which} an input of this command: an output never replaces an input; choose another path",
                path.display()
            )));
        }
    }
    Ok(())
}

/// Refuses an output that cannot be created or written (a missing folder,
/// no permission), without changing a file that exists: one made here
/// to try is removed again.
pub fn check_writable(what: &str, path: &Path) -> Result<(), Error> {
    let existed = path.exists();
    super::refuse_folder(path, what)?;
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|e| Error::usage(format!("cannot create {what} file {}: {e}", path.display())))?;
    if !existed {
        let _ = std::fs::remove_file(path);
    }
    Ok(())
}

/// Whether `a` and `b` name one file: the same device and inode where both
/// exist (a link, `./x` and `x`), else the same absolute path once the
/// folders that exist are resolved.
pub fn same_file(a: &Path, b: &Path) -> bool {
    if let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) {
        return ma.dev() == mb.dev() && ma.ino() == mb.ino();
    }
    resolved(a) == resolved(b)
}

fn resolved(path: &Path) -> PathBuf {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (absolute.parent(), absolute.file_name()) {
        (Some(folder), Some(name)) => folder.canonicalize().map_or(absolute.clone(), |f| f.join(name)),
        _ => absolute,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_may_be_neither_another_output_nor_an_input_however_it_is_spelt() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("base.csv");
        std::fs::write(&input, "x\n").unwrap();
        let spelt_otherwise = dir.path().join("sub/../base.csv");
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        let e = check_distinct(&[("--export-json", &spelt_otherwise)], &[("BASE", &input)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("is BASE, an input of this command"), "{e}");
        let out = dir.path().join("same.out");
        let again = dir.path().join("./same.out");
        let e = check_distinct(&[("--csv", &out), ("--json", &again)], &[])
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "--json {} is also --csv's file: each output needs a path of its own",
                again.display()
            )
        );
        assert!(
            check_distinct(
                &[("--csv", &out), ("--json", &dir.path().join("o.json"))],
                &[("BASE", &input)]
            )
            .is_ok()
        );
    }

    #[test]
    fn an_output_in_a_missing_folder_is_refused_and_a_trial_file_is_not_left() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no/such/x.json");
        let e = check_writable("--export-json", &missing).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().starts_with("cannot create --export-json file "), "{e}");
        let fresh = dir.path().join("x.md");
        check_writable("--export-markdown", &fresh).unwrap();
        assert!(!fresh.exists());
        let kept = dir.path().join("kept.md");
        std::fs::write(&kept, "old").unwrap();
        check_writable("--export-markdown", &kept).unwrap();
        assert_eq!(std::fs::read_to_string(&kept).unwrap(), "old");
        assert!(check_writable("--export-markdown", dir.path()).is_err());
    }
}
