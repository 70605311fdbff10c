//! The suite file: which transport profiles and hierarchy settings to
//! launch, with how many ranks and which launcher, and the options every
//! run shares (a `[run]` table with the keys of `collbench run --config`).
//!
//! ```toml
//! name = "local-cpu"
//! ranks = 2
//! transports = ["shm", "tcp"]
//! hierarchies = ["flat"]            # each item is one --hierarchy value
//! launches = 3                      # every combination 3 times, round after round
//! mpirun-args = ["--bind-to", "core"]
//! [run]
//! collectives = "all_reduce,all_gather"
//! maxbytes = "1M"
//! ```
//!
//! Everything is validated before the first launch: every combination is
//! checked as the run itself would check it, so a typo costs no cluster
//! time.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::cli::{RunArgs, TransportArg};
use crate::config::RunConfig;
use crate::error::Error;
use crate::topology::Hierarchy;
use crate::topology::profile::Profile;
use crate::types::Choice;
use crate::world::Launcher;

/// `[run]` keys the suite sets itself, per launch.
const SET_BY_SUITE: [&str; 8] = [
    "transport",
    "hierarchy",
    "csv",
    "json",
    "overwrite",
    "progress",
    "no-progress",
    "config",
];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawSuite {
    name: Option<String>,
    description: Option<String>,
    ranks: Option<u64>,
    transports: Vec<String>,
    hierarchies: Option<Vec<String>>,
    launches: Option<u64>,
    launcher: Option<String>,
    mpirun_args: Option<Vec<String>>,
    srun_args: Option<Vec<String>>,
    output: Option<PathBuf>,
    run: Option<toml::Table>,
}

/// One launch: a profile and a hierarchy setting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub transport: Profile,
    /// The `--hierarchy` value (`flat`, `rs-ar-ag,reduce-bcast`, `all`).
    pub hierarchy: Choice<Hierarchy>,
}

impl Launch {
    /// `shm-flat`: a file-name-safe label.
    pub fn label(&self) -> String {
        let h: String = self
            .hierarchy
            .to_string()
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '+' })
            .collect();
        format!("{}-{h}", self.transport)
    }

    /// The suite's `[run]` options with this launch's own.
    pub fn args(&self, run: &RunArgs) -> RunArgs {
        let mut args = run.clone();
        args.common.launch.transport = TransportArg::Profile(self.transport);
        args.hierarchy.hierarchy = self.hierarchy.clone();
        args
    }
}

/// A validated suite.
#[derive(Clone, Debug)]
pub struct Suite {
    pub name: String,
    pub description: Option<String>,
    pub ranks: Option<u64>,
    /// Every combination, `rounds` times over (round after round), so
    /// that modes of separate launches can be told from launch noise.
    pub launches: Vec<Launch>,
    pub rounds: u64,
    pub launcher: Launcher,
    pub mpirun_args: Vec<String>,
    pub srun_args: Vec<String>,
    pub output: Option<PathBuf>,
    /// The `[run]` table as TOML text, for `collbench run --config`.
    pub run_toml: String,
    /// The `[run]` table's options.
    pub run: RunArgs,
    /// Sweeps every launch runs.
    pub cycles: u64,
}

/// The suite's `transports`, each profile once, in their order.
fn parse_transports(raw: &[String]) -> Result<Vec<Profile>, String> {
    if raw.is_empty() {
        return Err("`transports` is empty; list at least one profile (e.g. [\"auto\"])".into());
    }
    let mut transports = Vec::new();
    for t in raw {
        let p = Profile::parse(t)
            .ok_or_else(|| format!("transports: unknown profile '{t}' (expected {})", Profile::names()))?;
        if !transports.contains(&p) {
            transports.push(p);
        }
    }
    Ok(transports)
}

/// The suite's `hierarchies` (flat only when it leaves them out).
fn parse_hierarchies(raw: Option<Vec<String>>) -> Result<Vec<Choice<Hierarchy>>, String> {
    let hierarchies = raw.unwrap_or_else(|| vec!["flat".into()]);
    if hierarchies.is_empty() {
        return Err("`hierarchies` is empty; leave it out for flat only".into());
    }
    hierarchies
        .iter()
        .map(|h| {
            h.parse::<Choice<Hierarchy>>().map_err(|e| {
                format!(
                    "hierarchies: '{h}' is not a hierarchy setting ({e}; modes flat, rs-ar-ag, reduce-bcast, \
                     comma-separated, or all)"
                )
            })
        })
        .collect::<Result<Vec<_>, String>>()
}

/// The plan a launch of `cfg` makes at `ranks` ranks, as each of its
/// ranks will check it (sizes, roots, the virtual nodes of
/// `ranks-per-node`, the hierarchical modes' node layout), and on the mpi
/// backend (named, or chosen by the transport profile) against what it
/// runs (types, operations): refused before any launch rather than by
/// every one. What depends on the hosts or on a backend that `auto`
/// picks is checked by the launch.
fn planned_at(cfg: &RunConfig, ranks: Option<u64>) -> Result<(), Error> {
    use crate::types::{BackendChoice, BackendKind};
    let Some(n) = ranks.and_then(|n| usize::try_from(n).ok()) else {
        return Ok(());
    };
    let hosts = vec![String::new(); n];
    let nodes = match cfg.plan.ranks_per_node {
        Some(k) => crate::topology::Nodes::consecutive(k, &hosts)?,
        None => crate::topology::Nodes::from_keys(&vec![0; n], &hosts),
    };
    let mpi = cfg.start.backend == BackendChoice::Only(BackendKind::Mpi)
        || (cfg.start.backend == BackendChoice::Auto && cfg.start.transport.backend() == Some(BackendKind::Mpi));
    let caps = match mpi {
        #[cfg(feature = "mpi")]
        true => crate::backend::mpi::capabilities(&cfg.timing.extras()),
        _ => crate::plan::Capabilities {
            max_elements: usize::MAX,
            ..Default::default()
        },
    };
    crate::plan::Plan::build_at(&cfg.plan, &caps, &nodes, n).map(|_| ())
}

impl Suite {
    pub fn load(path: &Path) -> Result<Suite, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::usage(format!("cannot read suite file {}: {e}", path.display())))?;
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "suite".into());
        Suite::parse(&text, &stem).map_err(|e| Error::usage(format!("suite file {}: {e}", path.display())))
    }

    /// Parses and validates a suite; `default_name` names it when the file
    /// does not.
    pub fn parse(text: &str, default_name: &str) -> Result<Suite, String> {
        let raw = crate::config::parse_toml::<RawSuite>(text)?;
        let transports = parse_transports(&raw.transports)?;
        let hierarchies = parse_hierarchies(raw.hierarchies)?;
        if raw.ranks == Some(0) {
            return Err("ranks must be at least 1".into());
        }
        let rounds = raw.launches.unwrap_or(1);
        if rounds == 0 {
            return Err("launches must be at least 1 (launches of every combination)".into());
        }
        let launcher = match &raw.launcher {
            None => Launcher::Auto,
            Some(l) => Launcher::parse(l).ok_or_else(|| format!("launcher: '{l}' is not auto, mpirun or srun"))?,
        };
        let run = raw.run.unwrap_or_default();
        if let Some(key) = run.keys().find(|k| SET_BY_SUITE.contains(&k.as_str())) {
            return Err(format!(
                "[run] sets `{key}`, which the suite sets per launch (use `transports`, `hierarchies`, `output`)"
            ));
        }
        let run_toml = toml::to_string(&run).map_err(|e| format!("[run]: {e}"))?;
        let (run_args, base) = RunConfig::from_table(&run).map_err(|e| format!("[run]: {e}"))?;
        if base.timing.cycles == 0 {
            return Err("[run] has cycles = 0 (until stopped): a suite needs runs that end".into());
        }
        let combinations: Vec<Launch> = transports
            .iter()
            .flat_map(|&transport| {
                hierarchies.iter().map(move |h| Launch {
                    transport,
                    hierarchy: h.clone(),
                })
            })
            .collect();
        // Every combination as the run will see it (profile against
        // backend, hierarchy against the other options), and its plan at
        // the suite's rank count.
        for l in &combinations {
            RunConfig::from_args(&l.args(&run_args))
                .and_then(|cfg| planned_at(&cfg, raw.ranks))
                .map_err(|e| format!("{} with {}: {e}", l.transport, l.hierarchy))?;
        }
        // round after round, so that a slow drift spreads over every mode
        let launches = (0..rounds).flat_map(|_| combinations.iter().cloned()).collect();
        Ok(Suite {
            name: raw.name.unwrap_or_else(|| default_name.to_string()),
            description: raw.description,
            ranks: raw.ranks,
            launches,
            rounds,
            launcher,
            mpirun_args: raw.mpirun_args.unwrap_or_default(),
            srun_args: raw.srun_args.unwrap_or_default(),
            output: raw.output,
            run_toml,
            run: run_args,
            cycles: base.timing.cycles,
        })
    }

    /// The launcher's part of a launch's command line: program and
    /// arguments before the collbench binary.
    pub fn launcher_args(&self, launcher: Launcher) -> Vec<String> {
        let mut args = vec![launcher.program().to_string()];
        match launcher {
            Launcher::Srun => {
                if let Some(n) = self.ranks {
                    args.extend(["-n".to_string(), n.to_string()]);
                }
                args.extend(self.srun_args.iter().cloned());
            }
            _ => {
                if let Some(n) = self.ranks {
                    args.extend(["-np".to_string(), n.to_string()]);
                }
                args.extend(self.mpirun_args.iter().cloned());
            }
        }
        args
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL: &str = "name = \"local\"\nranks = 2\ntransports = [\"shm\", \"tcp\"]\n\
                         hierarchies = [\"flat\", \"rs-ar-ag,reduce-bcast\"]\nmpirun-args = [\"--oversubscribe\"]\n\
                         [run]\ncollectives = \"all_reduce\"\nmaxbytes = \"64K\"\nbackend = \"mpi\"\nranks-per-node = 1\n";

    #[test]
    fn a_suite_is_every_profile_times_every_hierarchy_setting() {
        let s = Suite::parse(LOCAL, "x").unwrap();
        assert_eq!(s.name, "local");
        let labels: Vec<String> = s.launches.iter().map(Launch::label).collect();
        assert_eq!(
            labels,
            vec![
                "shm-flat",
                "shm-rs-ar-ag+reduce-bcast",
                "tcp-flat",
                "tcp-rs-ar-ag+reduce-bcast"
            ]
        );
        assert!(s.run_toml.contains("maxbytes = \"64K\""));
        assert_eq!(
            s.launcher_args(Launcher::Mpirun),
            vec!["mpirun", "-np", "2", "--oversubscribe"]
        );
        assert_eq!(s.launcher_args(Launcher::Srun), vec!["srun", "-n", "2"]);
        // launches = 2: every combination twice, round after round
        let s = Suite::parse(&LOCAL.replace("ranks = 2\n", "ranks = 2\nlaunches = 2\n"), "x").unwrap();
        let labels: Vec<String> = s.launches.iter().map(Launch::label).collect();
        assert_eq!((s.rounds, labels.len()), (2, 8));
        assert_eq!((labels[0].as_str(), labels[4].as_str()), ("shm-flat", "shm-flat"));
    }

    #[test]
    fn bad_suites_are_refused_before_any_launch() {
        for (text, want) in [
            ("transports = []\n", "empty"),
            ("transports = [\"infiniband\"]\n", "unknown profile"),
            (
                "transports = [\"auto\"]\nhierarchies = [\"tree\"]\n",
                "hierarchy setting",
            ),
            (
                "transports = [\"auto\"]\n[run]\ntransport = \"tcp\"\n",
                "sets `transport`",
            ),
            ("transports = [\"auto\"]\n[run]\ncsv = \"x.csv\"\n", "sets `csv`"),
            ("transports = [\"auto\"]\n[run]\nbogus = 1\n", "[run]"),
            ("transports = [\"auto\"]\n[run]\ncycles = 0\n", "cycles = 0"),
            ("transports = [\"nvlink\"]\n[run]\nbackend = \"mpi\"\n", "NCCL profile"),
            ("transports = [\"auto\"]\nranks = 0\n", "ranks"),
            ("transports = [\"auto\"]\nlaunches = 0\n", "launches must be at least 1"),
            ("transports = [\"auto\"]\nlauncher = \"aprun\"\n", "launcher"),
            ("transport = [\"auto\"]\n", "line 1"),
            // the plan at the suite's ranks, before any launch
            (
                "ranks = 3\ntransports = [\"shm\"]\n[run]\ndtype = \"half\"\n",
                "shm with flat: the mpi backend cannot run dtype half",
            ),
            (
                "ranks = 3\ntransports = [\"auto\"]\n[run]\nranks-per-node = 2\n",
                "--ranks-per-node 2 does not divide the 3 ranks",
            ),
            ("ranks = 2\ntransports = [\"auto\"]\n[run]\nroot = 2\n", "--root 2"),
        ] {
            let e = Suite::parse(text, "x").unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
    }

    #[test]
    fn every_shipped_suite_file_is_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
        let mut found = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("suite-") && name.ends_with(".toml") {
                Suite::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
                found += 1;
            }
        }
        assert!(found >= 4, "expected the four shipped suites, found {found}");
    }
}
