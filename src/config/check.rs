//! What a `collbench check` launch judges, from its options, before any
//! rank starts (docs/check.md): the profile (shipped or a file), the checks
//! `--only` picks, the sample counts and the soak, the baseline, the
//! `--on-fail` command, the verdicts' files; and the run's configuration
//! with the profile's transport pinned.
//!
//! Must not: start MPI, touch a backend, or print.

use std::path::PathBuf;
use std::time::Duration;

use crate::check::baseline::Baseline;
use crate::check::hook::Template;
use crate::check::profile::{BackendNeed, CheckSpec, Profile};
use crate::check::shipped;
use crate::cli::CheckArgs;
use crate::error::Error;

use super::{RunConfig, Taken, fingerprint};

/// How long a soak samples: for a while, or until stopped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Soak {
    For(Duration),
    UntilStopped,
}

/// A check run, validated before any rank starts.
#[derive(Clone, Debug)]
pub struct CheckJob {
    pub profile: Profile,
    /// The profile's checks this run measures, in the order they run:
    /// node checks, then whole-job checks.
    pub checks: Vec<CheckSpec>,
    pub strict: bool,
    pub on_fail: Option<Template>,
    pub execute: bool,
    pub soak: Option<Soak>,
    pub baseline: Option<Baseline>,
    pub write_baseline: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub prometheus: Option<String>,
    pub plot: Option<PathBuf>,
    pub overwrite: bool,
    /// `--transport` given against the profile's pin.
    pub transport_note: Option<String>,
}

/// `collbench check --list-profiles` or `--show-profile`: the text, when
/// one of them was asked for.
pub fn listing(a: &CheckArgs) -> Result<Option<String>, Error> {
    if a.list_profiles {
        return Ok(Some(crate::check::text::list(&shipped::all()?)));
    }
    match &a.show_profile {
        Some(what) => Ok(Some(crate::check::text::show(&shipped::load(what)?))),
        None => Ok(None),
    }
}

impl CheckJob {
    /// `collbench check`: the job and the run's configuration (its digest
    /// of every check option and of the profile's text).
    pub fn from_args(a: &CheckArgs) -> Result<(CheckJob, RunConfig), Error> {
        let what = a
            .profile
            .as_deref()
            .ok_or_else(|| Error::usage("give a profile: --profile NAME|FILE (--list-profiles lists them)"))?;
        let (profile, text) = shipped::load_with_text(what)?;
        check_outputs(a, what)?;
        let taken = Taken {
            common: &a.common,
            blocking: None,
            register: Some(&a.register),
            repeat: Some(&a.repeat),
            label: None,
            progress: None,
            csv: None,
            json: None,
        };
        let contents = vec![("--profile contents".to_string(), fingerprint(text.as_bytes()))];
        let mut cfg = RunConfig::for_command("check", a, taken, contents)?;
        let job = CheckJob::of(a, profile, &mut cfg)?;
        Ok((job, cfg))
    }

    /// The job of `a` with `profile`, its transport pinned in `cfg`.
    fn of(a: &CheckArgs, profile: Profile, cfg: &mut RunConfig) -> Result<CheckJob, Error> {
        let transport_note = pin_transport(&profile, cfg)?;
        let checks = select(&profile, &a.only)?;
        let soak = match (a.duration, a.repeat.cycles) {
            (Some(d), _) if d.is_zero() => return Err(Error::usage("--duration must be above 0")),
            (Some(d), _) => Some(Soak::For(d)),
            (None, 0) => Some(Soak::UntilStopped),
            (None, _) => None,
        };
        if soak.is_some() && checks.len() != 1 {
            let names: Vec<&str> = checks.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::usage(format!(
                "a soak samples one check: choose it with --only NAME ({})",
                names.join(", ")
            )));
        }
        if let Some(f) = checks.iter().find(|c| soak.is_some() && c.is_finder()) {
            return Err(Error::usage(format!(
                "--only {}: a finder check is not sampled over time; a soak takes a collective check",
                f.name
            )));
        }
        let checks = with_samples(checks, a.repeat.cycles, a.duration.is_some());
        if a.plot.is_some() && soak.is_none() {
            return Err(Error::usage(
                "--plot draws a soak's samples: add --duration or --repeat 0",
            ));
        }
        let baseline = a.baseline.as_deref().map(Baseline::read).transpose()?;
        for c in checks.iter().filter(|c| !c.is_finder()) {
            crate::check::baseline::thresholds(c, baseline.as_ref(), &profile.origin)?;
        }
        let on_fail = a.on_fail.as_deref().map(Template::parse).transpose()?;
        let job = CheckJob {
            checks,
            strict: a.strict,
            on_fail,
            execute: a.execute,
            soak,
            baseline,
            write_baseline: a.write_baseline.clone(),
            out: a.out.clone(),
            prometheus: a.prometheus.clone(),
            plot: a.plot.clone(),
            overwrite: a.common.overwrite.overwrite,
            transport_note,
            profile,
        };
        Ok(job)
    }
}

/// `--write-baseline` and `--plot`, before anything is measured: neither
/// on an input (`--profile`'s file, `--baseline`) nor on another output
/// (each other, `--out`'s check.json and samples.jsonl), a picture ending
/// in .svg or .png, each in a folder that exists, and an existing baseline
/// replaced only with `--overwrite`.
fn check_outputs(a: &CheckArgs, profile: &str) -> Result<(), Error> {
    use std::path::Path;
    if let Some(p) = &a.plot
        && crate::report::is_svg(p).is_none()
    {
        return Err(Error::usage(format!(
            "--plot {}: the plot file must end in .svg or .png",
            p.display()
        )));
    }
    let verdicts: Vec<PathBuf> = a
        .out
        .iter()
        .flat_map(|d| [d.join("check.json"), d.join("samples.jsonl")])
        .collect();
    let mut outputs: Vec<(&str, &Path)> = verdicts.iter().map(|p| ("--out", p.as_path())).collect();
    outputs.extend(a.write_baseline.as_deref().map(|p| ("--write-baseline", p)));
    outputs.extend(a.plot.as_deref().map(|p| ("--plot", p)));
    let mut inputs: Vec<(&str, &Path)> = Vec::new();
    if Path::new(profile).is_file() {
        inputs.push(("--profile", Path::new(profile)));
    }
    inputs.extend(a.baseline.as_deref().map(|p| ("--baseline", p)));
    crate::report::paths::check_distinct(&outputs, &inputs)?;
    for (what, path) in [("--write-baseline", &a.write_baseline), ("--plot", &a.plot)] {
        let Some(path) = path else { continue };
        let folder = match path.parent() {
            Some(f) if !f.as_os_str().is_empty() => f,
            _ => Path::new("."),
        };
        if !folder.is_dir() {
            return Err(Error::usage(format!(
                "{what} {}: the folder {} does not exist",
                path.display(),
                folder.display()
            )));
        }
        crate::report::refuse_folder(path, what)?;
    }
    if let Some(p) = &a.write_baseline
        && p.exists()
        && !a.common.overwrite.overwrite
    {
        return Err(Error::usage(format!(
            "baseline file {} already exists; choose another path or pass --overwrite",
            p.display()
        )));
    }
    Ok(())
}

/// The profile's transport, unless `--transport` names another (which
/// wins, and the header says so: the thresholds are for the profile's).
fn pin_transport(profile: &Profile, cfg: &mut RunConfig) -> Result<Option<String>, Error> {
    use crate::topology::profile::Profile as Transport;
    let pin = profile.transport.value;
    let asked = cfg.start.transport;
    if asked == Transport::Auto || asked == pin {
        cfg.start.transport = pin;
        return Ok(None);
    }
    if let BackendNeed::Only(need) = profile.backend.value
        && asked.backend().is_some_and(|b| b != need)
    {
        return Err(profile.error_at(
            profile.backend.line,
            format!(
                "the profile is for the {} backend; --transport {} steers {}",
                need.name(),
                asked.name(),
                asked.backend().map_or("nothing", |b| b.name())
            ),
        ));
    }
    Ok(Some(format!(
        "--transport {} replaces the profile's transport {}: its thresholds were set for {}",
        asked.name(),
        pin.name(),
        pin.name()
    )))
}

/// The checks `--only` names (all when empty), node checks first.
fn select(profile: &Profile, only: &[String]) -> Result<Vec<CheckSpec>, Error> {
    for name in only {
        if !profile.checks.iter().any(|c| &c.name == name) {
            let names: Vec<&str> = profile.checks.iter().map(|c| c.name.as_str()).collect();
            return Err(Error::usage(format!(
                "--only {name}: profile {} has no such check ({})",
                profile.name,
                names.join(", ")
            )));
        }
    }
    let mut checks: Vec<CheckSpec> = profile
        .checks
        .iter()
        .filter(|c| only.is_empty() || only.contains(&c.name))
        .cloned()
        .collect();
    checks.sort_by_key(|c| c.scope);
    Ok(checks)
}

/// `--repeat N` (N > 0) replaces each check's sample count; a soak takes
/// samples until it ends.
fn with_samples(mut checks: Vec<CheckSpec>, repeat: u64, timed: bool) -> Vec<CheckSpec> {
    for c in &mut checks {
        if repeat == 0 || timed {
            c.samples = usize::MAX;
        } else if repeat != 1 {
            c.samples = usize::try_from(repeat).unwrap_or(usize::MAX);
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn job(args: &[&str]) -> Result<(CheckJob, RunConfig), Error> {
        let argv = ["collbench", "check"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).map_err(|e| e.to_string()).unwrap().command {
            Command::Check(a) => CheckJob::from_args(&a),
            _ => unreachable!(),
        }
    }

    /// `--write-baseline` and `--plot` are refused before anything runs:
    /// on the profile's file, on `--out`'s verdicts, in a missing folder,
    /// an existing baseline without `--overwrite`, a plot that is no
    /// picture (each was found after every check had run, or replaced an
    /// input).
    #[test]
    fn the_baseline_and_plot_paths_are_checked_before_measuring() {
        let dir = tempfile::tempdir().unwrap();
        let d = |name: &str| dir.path().join(name).display().to_string();
        let profile = d("p.toml");
        std::fs::write(&profile, crate::check::shipped::load_with_text("local-cpu").unwrap().1).unwrap();
        let old = d("old.toml");
        std::fs::write(&old, "x").unwrap();
        let out = d("out");
        let verdicts = format!("{out}/check.json");
        let cases: [(Vec<&str>, String); 5] = [
            (
                vec!["--write-baseline", &profile, "--overwrite"],
                format!("--write-baseline {profile} is --profile, an input"),
            ),
            (
                vec!["--out", &out, "--write-baseline", &verdicts, "--overwrite"],
                format!("--write-baseline {verdicts} is also --out's file"),
            ),
            (
                vec!["--write-baseline", "/no/such/folder/b.toml"],
                "the folder /no/such/folder does not exist".to_string(),
            ),
            (vec!["--write-baseline", &old], "already exists".to_string()),
            (
                vec!["--only", "node-all-reduce-4k", "--duration", "1s", "--plot", "s.txt"],
                "--plot s.txt: the plot file must end in .svg or .png".to_string(),
            ),
        ];
        for (args, needle) in cases {
            let all: Vec<&str> = ["--profile", profile.as_str()].into_iter().chain(args).collect();
            let e = job(&all).expect_err("refused").to_string();
            assert!(e.contains(&needle), "{all:?}: {e}");
        }
        assert!(job(&["--profile", &profile, "--write-baseline", &d("new.toml")]).is_ok());
    }
}
