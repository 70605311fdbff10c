//! `collbench check`'s options.

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use super::groups::{CommonArgs, RegisterArgs, RepeatArgs};

/// Options of `collbench check`: the profile, the verdicts' files and
/// hooks, the sample count, then the groups that apply (launch,
/// validation, registration, overwriting).
#[derive(Clone, Debug, Args, Serialize)]
#[command(next_help_heading = "Check")]
pub struct CheckArgs {
    /// The profile: a shipped name (--list-profiles) or a TOML file
    #[arg(long, value_name = "NAME|FILE", required_unless_present_any = ["list_profiles", "show_profile"])]
    pub profile: Option<String>,

    /// List the shipped profiles and exit
    #[arg(long)]
    pub list_profiles: bool,

    /// Print a profile's checks, thresholds and their sources, and exit
    #[arg(long, value_name = "NAME|FILE")]
    pub show_profile: Option<String>,

    /// Run only these checks of the profile (comma-separated names)
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub only: Vec<String>,

    /// A warning fails the run too
    #[arg(long)]
    pub strict: bool,

    /// A command run once per failing node by rank 0, {host}, {checks} and {reason} replaced (printed only, unless --execute)
    #[arg(long, value_name = "CMD")]
    pub on_fail: Option<String>,

    /// Run the --on-fail command instead of printing it
    #[arg(long, requires = "on_fail")]
    pub execute: bool,

    /// Soak: keep sampling one check this long (90s, 30m, 1h), then plot its stability (--repeat 0: until stopped)
    #[arg(long, value_name = "DURATION", value_parser = soak_duration)]
    pub duration: Option<std::time::Duration>,

    /// A fleet baseline for the profile's baseline rules (--write-baseline makes one)
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,

    /// Write each check's median over the groups as a fleet baseline
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,

    /// The verdicts' folder: each node's first rank writes HOST.json and HOST.prom there, rank 0 samples.jsonl and check.json [default: results/check-<run id>]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,

    /// Also write each node's Prometheus file here: a directory (node_exporter's textfile directory: HOST.prom inside) or a .prom file ({host} is replaced); checked before anything is measured
    #[arg(long, value_name = "PATH")]
    pub prometheus: Option<String>,

    /// The soak's stability plot, .svg or .png [default: DIR/stability.svg]
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

    #[command(flatten)]
    #[serde(flatten)]
    pub common: CommonArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub repeat: RepeatArgs,

    #[command(flatten)]
    #[serde(flatten)]
    pub register: RegisterArgs,
}

/// A soak's length: `90s`, `30m`, `1h` (humantime's syntax).
fn soak_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("'{}' is not a duration like 90s, 30m or 1h: {e}", text.trim()))
}
