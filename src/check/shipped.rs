//! The profiles shipped in configs/profiles/, compiled into the binary so
//! that `--profile NAME` works wherever collbench runs; `--profile FILE`
//! reads any other. A test holds this list to the folder.

use std::path::Path;

use super::profile::{Profile, parse};
use crate::error::Error;

macro_rules! shipped {
    ($($name:literal),* $(,)?) => {
        /// (name, TOML text) of every shipped profile, by name.
        pub const SHIPPED: &[(&str, &str)] = &[
            $(($name, include_str!(concat!("../../configs/profiles/", $name, ".toml"))),)*
        ];
    };
}

shipped!(
    "azure-nd-a100-v4",
    "azure-nd-a100-v4-ib-loopback",
    "azure-nd-h100-v5",
    "azure-nd-h200-v5",
    "azure-nd-v2",
    "gcp-a3-highgpu",
    "gcp-a3-megagpu",
    "gcp-a3-ultragpu",
    "gcp-a4-highgpu",
    "gcp-a4x-highgpu",
    "local-cpu",
    "nvidia-2node-4x200g",
    "nvidia-2node-8x400g",
    "nvidia-a800-nvlink",
    "nvidia-h100-nvlink",
    "nvidia-h100-nvls",
    "superbench-all-reduce-baseline",
);

/// How messages name a shipped profile's file.
pub fn origin(name: &str) -> String {
    format!("configs/profiles/{name}.toml")
}

/// Every shipped profile, parsed.
pub fn all() -> Result<Vec<Profile>, Error> {
    SHIPPED.iter().map(|(name, text)| parse(text, &origin(name))).collect()
}

/// `--profile NAME|FILE`: a shipped name, else a file (a path, or any
/// name ending in .toml).
pub fn load(what: &str) -> Result<Profile, Error> {
    load_with_text(what).map(|(profile, _)| profile)
}

/// `load`, with the profile's text (what the ranks compare).
pub fn load_with_text(what: &str) -> Result<(Profile, String), Error> {
    if let Some((name, text)) = SHIPPED.iter().find(|(n, _)| *n == what) {
        return Ok((parse(text, &origin(name))?, text.to_string()));
    }
    let path = Path::new(what);
    if path.exists() || what.ends_with(".toml") || what.contains('/') {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::usage(format!("--profile {what}: cannot read it: {e}")))?;
        return Ok((parse(&text, what)?, text));
    }
    let names: Vec<&str> = SHIPPED.iter().map(|(n, _)| *n).collect();
    Err(Error::usage(format!(
        "--profile {what}: no such profile or file (shipped: {}; --list-profiles describes them)",
        names.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::profile::Rule;

    #[test]
    fn the_shipped_list_is_the_profiles_folder() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/profiles");
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| {
                let p = e.unwrap().path();
                (p.extension()? == "toml").then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
            })
            .collect();
        files.sort();
        let names: Vec<String> = SHIPPED.iter().map(|(n, _)| n.to_string()).collect();
        assert_eq!(files, names);
    }

    #[test]
    fn every_shipped_profile_parses_names_itself_and_cites_each_number() {
        let all = all().unwrap();
        assert!(all.len() >= 9, "at least 8 hardware profiles and local-cpu");
        for p in &all {
            assert_eq!(origin(&p.name), p.origin, "{}: the name is the file's", p.name);
            for c in &p.checks {
                assert!(c.follows.is_some(), "{} {}: says what it follows", p.name, c.name);
                let sources: Vec<&str> = match &c.rule {
                    Rule::Fixed { fail, warn } => {
                        std::iter::once(fail).chain(warn).map(|t| t.source.as_str()).collect()
                    }
                    Rule::Baseline { fail_pct, warn_pct } => std::iter::once(fail_pct)
                        .chain(warn_pct)
                        .map(|t| t.source.as_str())
                        .collect(),
                    Rule::Finder { .. } => vec![c.fail_source()],
                };
                for s in sources {
                    assert!(s.len() > 20, "{} {}: a real source: {s}", p.name, c.name);
                    assert!(!s.contains("placeholder"), "{} {}: {s}", p.name, c.name);
                }
            }
        }
    }

    #[test]
    fn a_name_or_a_file_loads_and_anything_else_is_one_line() {
        assert_eq!(load("local-cpu").unwrap().name, "local-cpu");
        let e = load("no-such").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .starts_with("--profile no-such: no such profile or file (shipped: azure-nd-a100-v4")
        );
        let e = load("missing/p.toml").unwrap_err().to_string();
        assert!(e.starts_with("--profile missing/p.toml: cannot read it"), "{e}");
    }
}
