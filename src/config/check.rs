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
