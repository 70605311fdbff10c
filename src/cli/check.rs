//! `collbench check`'s options.

use std::path::PathBuf;

use clap::Args;

use super::RunArgs;

/// Options of `collbench check`: the profile, the verdicts' files and
/// hooks, then `run`'s options that apply (backend, launcher, transport,
/// timeout, nodes, `-N/--repeat` as the sample count).
#[derive(Clone, Debug, Args)]
pub struct CheckArgs {
    /// The profile: a shipped name (--list-profiles) or a TOML file
    #[arg(long, value_name = "NAME|FILE", required_unless_present_any = ["list_profiles", "show_profile"],
          help_heading = "Check")]
    pub profile: Option<String>,

    /// List the shipped profiles and exit
    #[arg(long, help_heading = "Check")]
    pub list_profiles: bool,

    /// Print a profile's checks, thresholds and their sources, and exit
    #[arg(long, value_name = "NAME|FILE", help_heading = "Check")]
    pub show_profile: Option<String>,

    /// Run only these checks of the profile (comma-separated names)
    #[arg(long, value_name = "LIST", value_delimiter = ',', help_heading = "Check")]
    pub only: Vec<String>,

    /// A warning fails the run too
    #[arg(long, help_heading = "Check")]
    pub strict: bool,

    /// A command run once per failing node by rank 0, {host}, {checks} and {reason} replaced (printed only, unless --execute)
    #[arg(long, value_name = "CMD", help_heading = "Check")]
    pub on_fail: Option<String>,

    /// Run the --on-fail command instead of printing it
    #[arg(long, requires = "on_fail", help_heading = "Check")]
    pub execute: bool,

    /// Soak: keep sampling one check this long (90s, 30m, 1h), then plot its stability (--repeat 0: until stopped)
    #[arg(long, value_name = "DURATION", value_parser = soak_duration, help_heading = "Check")]
    pub duration: Option<std::time::Duration>,

    /// A fleet baseline for the profile's baseline rules (--write-baseline makes one)
    #[arg(long, value_name = "FILE", help_heading = "Check")]
    pub baseline: Option<PathBuf>,

    /// Write each check's median over the groups as a fleet baseline
    #[arg(long, value_name = "FILE", help_heading = "Check")]
    pub write_baseline: Option<PathBuf>,

    /// The verdicts' folder: each node's first rank writes HOST.json and HOST.prom there, rank 0 samples.jsonl and check.json [default: results/check-<run id>]
    #[arg(long, value_name = "DIR", help_heading = "Check")]
    pub out: Option<PathBuf>,

    /// Also write each node's Prometheus file here (node_exporter's textfile directory); {host} is replaced
    #[arg(long, value_name = "PATH", help_heading = "Check")]
    pub prometheus: Option<String>,

    /// The soak's stability plot, .svg or .png [default: DIR/stability.svg]
    #[arg(long, value_name = "FILE", help_heading = "Check")]
    pub plot: Option<PathBuf>,

    #[command(flatten)]
    pub run: RunArgs,
}

/// A soak's length: `90s`, `30m`, `1h` (humantime's syntax).
fn soak_duration(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("'{}' is not a duration like 90s, 30m or 1h: {e}", text.trim()))
}
