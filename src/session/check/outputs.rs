//! A check run's outputs: before the first sample, the run's name, folder
//! and samples file (rank 0) and the header; at the end, the verdicts
//! (rank 0 judges), each node's files written by that node's first rank
//! on its own filesystem (`HOST.json`, `HOST.prom`, and `--prometheus`),
//! rank 0's launch file, the `--on-fail` commands, the baseline and the
//! soak's plot, and the exit code every rank returns.

use std::cell::RefCell;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::finder::FinderRun;
use super::measure::Measured;
use super::{CheckJob, Planned, Session, node_label};
use crate::check::hook::{self, Ran};
use crate::check::samples::{Sample, SamplesFile};
use crate::check::soak::{self, Frame, Series};
use crate::check::{
    Group, Host, Report, baseline, explain_by_nccl_log, json, prometheus, require_path, require_plugin, text, unrun,
    verdict, write_atomic,
};
use crate::doctor::kept::KeptLogs;
use crate::engine::stop::signal_name;
use crate::error::{Error, exit, say};
use crate::report::{RunIdentity, print_out};
use crate::topology::Nodes;
use crate::world::World;

/// What the ranks observed, from the shared set-up.
pub(super) struct Views {
    /// This rank's transport, as observed.
    pub observed: String,
    /// Each rank's transport, as observed.
    pub observed_all: Vec<String>,
    /// Each rank's GPU (empty on host backends).
    pub gpus: Vec<String>,
    /// Why each rank's figures cannot be judged against the profile's
    /// thresholds (`Profile::not_judged`; empty where they can).
    pub plugin_missing: Vec<String>,
    /// Rank 0, on NCCL: every rank's NCCL set-up lines (`doctor::kept`).
    pub nccl_logs: Option<Vec<String>>,
}

pub(super) struct Setup {
    pub run_id: String,
    pub started: String,
    pub out_dir: PathBuf,
    /// Rank 0's samples file.
    samples: Option<RefCell<SamplesFile>>,
    pub backend: String,
    pub observed: String,
    /// Each rank's transport, as observed.
    pub observed_all: Vec<String>,
    /// Each rank's GPU (empty on host backends).
    pub gpus: Vec<String>,
    /// Each rank's lack of the profile's plugin environment (`Views`).
    pub plugin_missing: Vec<String>,
    /// Rank 0, on NCCL: the ranks' NCCL logs kept in the run's folder, and
    /// what the doctor found in them.
    nccl_log: Option<KeptLogs>,
}

impl Setup {
    /// The run's folder (rank 0 creates it, with its samples file, before
    /// the first sample; every rank knows its name from the run's
    /// identity) and rank 0's header.
    pub fn new<W: World>(
        s: &Session<'_, W>,
        c: &CheckJob,
        nodes: &Nodes,
        identity: RunIdentity,
        views: Views,
    ) -> Result<Setup, Error> {
        let out_dir = c
            .out
            .clone()
            .unwrap_or_else(|| PathBuf::from("results").join(format!("check-{}", identity.run_id)));
        let first = s.world.rank() == 0;
        let samples = s.agreed(if first { open(c, &out_dir).map(Some) } else { Ok(None) })?;
        let nccl_log = views
            .nccl_logs
            .map(|texts| KeptLogs::keep(&texts, out_dir.join("nccl.log")));
        let setup = Setup {
            run_id: identity.run_id.clone(),
            started: identity.started.clone(),
            out_dir,
            samples: samples.map(RefCell::new),
            backend: identity.backend_line(),
            observed: views.observed,
            observed_all: views.observed_all,
            gpus: views.gpus,
            plugin_missing: views.plugin_missing,
            nccl_log,
        };
        if first {
            print_out(&setup.header(s, c, nodes, &identity));
        }
        Ok(setup)
    }

    pub fn write_sample(&self, sample: &Sample) -> Result<(), Error> {
        match &self.samples {
            Some(f) => f.borrow_mut().write(sample),
            None => Ok(()),
        }
    }

    fn header<W: World>(&self, s: &Session<'_, W>, c: &CheckJob, nodes: &Nodes, identity: &RunIdentity) -> String {
        let p = &c.profile;
        let mut out = format!(
            "# collbench check {}  run {}\n# profile   : {} ({}): {}\n",
            env!("CARGO_PKG_VERSION"),
            self.run_id,
            p.name,
            p.origin,
            p.description
        );
        out += &format!("# backend   : {}\n", self.backend);
        out += &format!(
            "# ranks     : {} on {} node{} ({} per node), hosts: {}\n",
            nodes.nranks(),
            nodes.nnodes(),
            if nodes.nnodes() == 1 { "" } else { "s" },
            nodes.ranks_per_node(),
            (0..nodes.nnodes())
                .map(|n| node_label(nodes, n))
                .collect::<Vec<_>>()
                .join(", ")
        );
        out += &format!(
            "# transport : {}, observed {}   control plane: {}\n",
            s.cfg.start.transport.name(),
            self.observed,
            identity.control_plane
        );
        if let Some(t) = &c.transport_note {
            out += &format!("# note      : {t}\n");
        }
        for n in &p.notes {
            out += &format!("# note      : {n}\n");
        }
        for k in &c.checks {
            let samples = if k.samples == usize::MAX {
                "soak".to_string()
            } else {
                format!("{} samples", k.samples)
            };
            let optional = if k.optional { ", optional" } else { "" };
            out += &if k.is_finder() {
                format!(
                    "# check     : {} (pair scope{optional}, the links matrix and finder at node level: {} one way and \
                     both ways, 8 B ping-pong, {} x {} iterations per pair and metric)\n",
                    k.name,
                    crate::check::size_class(&k.sizes.value),
                    samples,
                    k.iters
                )
            } else {
                format!(
                    "# check     : {} ({} scope{optional}, {} {} {}, {} x {} iterations, out-of-place and in-place)\n",
                    k.name,
                    k.scope.name(),
                    k.collective,
                    crate::check::size_class(&k.sizes.value),
                    k.metric.name(),
                    samples,
                    k.iters
                )
            };
        }
        out += &format!("# files     : {}/\n#\n", self.out_dir.display());
        out
    }
}

/// Rank 0's folder of the run, and its samples file.
fn open(c: &CheckJob, out_dir: &Path) -> Result<SamplesFile, Error> {
    std::fs::create_dir_all(out_dir)
        .map_err(|e| Error::usage(format!("cannot create the folder {}: {e}", out_dir.display())))?;
    if out_dir.join("check.json").exists() && !c.overwrite {
        return Err(Error::usage(format!(
            "{} already holds a check run's files; choose another --out or pass --overwrite",
            out_dir.display()
        )));
    }
    SamplesFile::create(&out_dir.join("samples.jsonl"), true)
}

/// One node's files, as rank 0 made them.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct NodeFiles {
    label: String,
    json: String,
    prom: String,
}

impl<W: World> Session<'_, W> {
    /// Judges (rank 0), writes every file, runs the hooks; the exit code
    /// every rank returns.
    pub(super) fn conclude(&self, c: &CheckJob, nodes: &Nodes, planned: &[Planned], setup: Setup, m: Measured) -> u8 {
        let world = self.world;
        let first = world.rank() == 0;
        let report = first.then(|| self.report(c, nodes, planned, &setup, &m));
        let files: Vec<NodeFiles> = report.as_ref().map(node_files).unwrap_or_default();
        let bytes = world.broadcast_bytes(&serde_json::to_vec(&files).unwrap_or_default());
        let files: Vec<NodeFiles> = serde_json::from_slice(&bytes).unwrap_or_default();
        let mine = (0..nodes.nnodes()).find(|&n| nodes.ranks_on(n).first() == Some(&world.rank()));
        let written = match mine {
            Some(n) => write_node(c, &setup.out_dir, &node_label(nodes, n), &files),
            None => Ok(()),
        };
        let mut code = match world.agree(written) {
            Ok(()) => exit::OK,
            Err(d) => d.code,
        };
        if let Some(r) = &report {
            code = code.max(self.finish(c, r, &setup, &m));
        }
        let code = world.max_u64(u64::from(code));
        let stopped = m.stopped_by.map_or(0, |s| 128 + s);
        u8::try_from(code.max(stopped)).unwrap_or(exit::RUNTIME)
    }

    fn report(&self, c: &CheckJob, nodes: &Nodes, planned: &[Planned], setup: &Setup, m: &Measured) -> Report {
        let mut verdicts = Vec::new();
        for (p, sampled) in planned.iter().zip(&m.checks) {
            let thresholds = baseline::thresholds(&p.spec, c.baseline.as_ref(), &c.profile.origin);
            for (k, (g, why)) in p.groups.iter().enumerate() {
                let v = match (&thresholds, why, sampled.ran) {
                    (_, _, false) => unrun(&p.spec, g, "stopped", "not run: the run was stopped before it"),
                    (_, Some(why), _) => unrun(&p.spec, g, why.short, &why.reason),
                    (Err(e), _, _) => unrun(&p.spec, g, "no threshold", &e.to_string()),
                    (Ok(t), None, true) => {
                        let values: Vec<f64> = sampled.values[k].iter().map(|v| v.1).collect();
                        let mut v = verdict(&p.spec, g, &values, t, sampled.wrong[k]);
                        if let Some(path) = &p.spec.path {
                            let observed: Vec<&str> = g
                                .ranks
                                .iter()
                                .filter_map(|&r| setup.observed_all.get(r))
                                .map(String::as_str)
                                .collect();
                            require_path(&mut v, &path.value, &observed);
                        }
                        require_plugin(&mut v, &p.spec, &setup.plugin_missing);
                        v
                    }
                };
                verdicts.push(v);
            }
        }
        let mut notes = self.finder_verdicts(c, nodes, m, &mut verdicts);
        if let Some(k) = &setup.nccl_log {
            for v in &mut verdicts {
                explain_by_nccl_log(v, &|host| k.serious(Some(host)));
            }
            notes.extend(k.sentences().iter().map(|l| format!("NCCL log: {l}")));
        }
        let hosts = (0..nodes.nnodes())
            .map(|n| {
                let ranks = nodes.ranks_on(n);
                Host {
                    host: node_label(nodes, n),
                    gpus: ranks
                        .iter()
                        .filter_map(|&r| setup.gpus.get(r).filter(|g| !g.is_empty()).cloned())
                        .collect(),
                    ranks,
                }
            })
            .collect();
        Report {
            run_id: setup.run_id.clone(),
            started: setup.started.clone(),
            finished: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            profile: c.profile.name.clone(),
            profile_file: c.profile.origin.clone(),
            backend: setup.backend.clone(),
            transport: format!("{} (observed {})", self.cfg.start.transport.name(), setup.observed),
            strict: c.strict,
            hosts,
            verdicts,
            stopped_by: m.stopped_by.map(signal_name),
            notes,
        }
    }

    /// The finder checks' verdicts (every node's, every named link's),
    /// placed after the other pair checks' (verdicts go in scope order);
    /// the finder's notes.
    fn finder_verdicts(
        &self,
        c: &CheckJob,
        nodes: &Nodes,
        m: &Measured,
        verdicts: &mut Vec<crate::check::Verdict>,
    ) -> Vec<String> {
        let groups: Vec<Group> = (0..nodes.nnodes())
            .map(|n| Group {
                label: node_label(nodes, n),
                hosts: vec![node_label(nodes, n)],
                ranks: nodes.ranks_on(n),
            })
            .collect();
        let mut notes = Vec::new();
        let specs = c.checks.iter().filter(|k| k.is_finder());
        for (spec, run) in specs.zip(&m.finders) {
            let mut found = match run {
                FinderRun::Ran(o, more) => {
                    let (v, n) = crate::check::finder::verdicts(spec, &groups, o);
                    notes.extend(n);
                    notes.extend(more.iter().cloned());
                    v
                }
                FinderRun::Unrun(why) => {
                    let job = Group {
                        label: match groups.as_slice() {
                            [one] => one.label.clone(),
                            all => format!("{} nodes", all.len()),
                        },
                        hosts: groups.iter().map(|g| g.label.clone()).collect(),
                        ranks: (0..nodes.nranks()).collect(),
                    };
                    vec![unrun(spec, &job, why.short, &why.reason)]
                }
            };
            let at = verdicts
                .iter()
                .rposition(|v| v.scope == "node" || v.scope == "pair")
                .map_or(0, |i| i + 1);
            verdicts.splice(at..at, found.drain(..));
        }
        notes
    }

    /// Rank 0's end: the summary, the launch file, the hooks, the
    /// baseline, the plot; its exit code.
    fn finish(&self, c: &CheckJob, r: &Report, setup: &Setup, m: &Measured) -> u8 {
        let mut code = r.exit_code();
        let launch = setup.out_dir.join("check.json");
        if let Err(e) = write_atomic(&launch, &json::text(&json::launch(r))) {
            say(&format!("collbench: {e}"));
            code = code.max(exit::RUNTIME);
        }
        print_out(&text::summary(r, &format!("{}/", setup.out_dir.display())));
        if let Some(t) = &c.on_fail {
            run_hooks(t, c.execute, r);
        }
        if let Some(path) = &c.write_baseline {
            let written = crate::report::create_file(path, c.overwrite, "baseline")
                .and_then(|_| write_atomic(path, &baseline::from_report(r)));
            match written {
                Ok(()) => say(&format!("collbench: wrote the fleet baseline {}", path.display())),
                // checked before measuring (config::check): what fails now
                // is the run's (exit 1)
                Err(e) => {
                    say(&format!("collbench: {e}"));
                    code = code.max(exit::RUNTIME);
                }
            }
        }
        if c.soak.is_some() {
            code = code.max(self.soak_plot(c, r, setup, m));
        }
        code
    }

    fn soak_plot(&self, c: &CheckJob, r: &Report, setup: &Setup, m: &Measured) -> u8 {
        let (Some(spec), Some(sampled)) = (c.checks.first(), m.checks.first()) else {
            return exit::OK;
        };
        let path = c.plot.clone().unwrap_or_else(|| setup.out_dir.join("stability.svg"));
        let series: Vec<Series> = r
            .verdicts
            .iter()
            .zip(&sampled.values)
            .filter(|(_, v)| !v.is_empty())
            .map(|(v, points)| Series {
                label: v.group.clone(),
                points: points.clone(),
            })
            .collect();
        let total: usize = series.iter().map(|s| s.points.len()).sum();
        let v = r.verdicts.first();
        let frame = Frame {
            title: format!(
                "{}: {} {} of {} ({} samples), {}",
                c.profile.name,
                spec.collective,
                crate::check::size_class(&spec.sizes.value),
                spec.name,
                total,
                setup.run_id
            ),
            y_label: format!("{} ({})", spec.metric.name(), spec.metric.unit()),
            fail: v.and_then(|v| v.threshold),
            warn: v.and_then(|v| v.warn),
        };
        match soak::draw(&path, &frame, &series) {
            Ok(()) => {
                say(&format!(
                    "collbench: the stability plot of {} is {}",
                    spec.name,
                    path.display()
                ));
                exit::OK
            }
            Err(e) => {
                say(&format!("collbench: {e}"));
                e.exit_code()
            }
        }
    }
}

/// Every node's JSON and Prometheus text.
fn node_files(r: &Report) -> Vec<NodeFiles> {
    let finished = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64().floor())
        .unwrap_or(0.0);
    r.hosts
        .iter()
        .map(|h| NodeFiles {
            label: h.host.clone(),
            json: json::text(&json::node(r, &h.host)),
            prom: prometheus::node(r, &h.host, finished),
        })
        .collect()
}

/// A node's files, by its first rank: `DIR/HOST.json`, `DIR/HOST.prom` and
/// `--prometheus` (`prometheus_path`), each written whole or not at all.
fn write_node(c: &CheckJob, dir: &Path, label: &str, files: &[NodeFiles]) -> Result<(), Error> {
    let Some(f) = files.iter().find(|f| f.label == label) else {
        return Err(Error::runtime(format!("internal error: no verdict files for {label}")));
    };
    std::fs::create_dir_all(dir).map_err(|e| Error::runtime(format!("cannot create {}: {e}", dir.display())))?;
    write_atomic(&dir.join(format!("{label}.json")), &f.json)?;
    write_atomic(&dir.join(format!("{label}.prom")), &f.prom)?;
    if let Some(p) = &c.prometheus {
        write_atomic(&prometheus_path(p, label)?, &f.prom)?;
    }
    Ok(())
}

/// Where `--prometheus SPEC` puts node `label`'s file: in a directory
/// (`SPEC` names one, or ends in `/`: node_exporter's textfile directory),
/// `HOST.prom` inside it; else `SPEC` itself, `{host}` replaced, a name
/// ending in `.prom` (the textfile collector reads those only, so a typo
/// in a directory's name is refused rather than written as a file it
/// never reads). The directory must exist and take a new file (a usage
/// error naming it, exit 2): checked on every node before anything is
/// measured.
pub(super) fn prometheus_path(spec: &str, label: &str) -> Result<PathBuf, Error> {
    let named = PathBuf::from(spec.replace("{host}", label));
    let (dir, path) = if spec.ends_with('/') || named.is_dir() {
        (named.clone(), named.join(format!("{label}.prom")))
    } else {
        let parent = named
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        (parent, named)
    };
    let refused = |why: String| {
        Error::usage(format!(
            "--prometheus {spec}: {why} on {label} (a directory that exists, such as node_exporter's textfile \
             directory, or a .prom file in one)"
        ))
    };
    if !dir.is_dir() {
        return Err(refused(format!("{} is not a directory", dir.display())));
    }
    if path.extension().is_none_or(|e| e != "prom") {
        return Err(refused(format!(
            "{} is neither a directory nor a .prom file (node_exporter reads *.prom only)",
            path.display()
        )));
    }
    let probe = dir.join(format!(".collbench-probe.{}.tmp", std::process::id()));
    std::fs::write(&probe, b"")
        .and_then(|_| std::fs::remove_file(&probe))
        .map_err(|e| refused(format!("cannot write in {}: {e}", dir.display())))?;
    Ok(path)
}

/// `--prometheus` checked on this rank where it writes its node's files
/// (each node's first rank), before anything is measured.
pub(super) fn check_prometheus(c: &CheckJob, nodes: &Nodes, rank: usize) -> Result<(), Error> {
    let (Some(spec), Some(n)) = (
        &c.prometheus,
        (0..nodes.nnodes()).find(|&n| nodes.ranks_on(n).first() == Some(&rank)),
    ) else {
        return Ok(());
    };
    prometheus_path(spec, &node_label(nodes, n)).map(|_| ())
}

/// The `--on-fail` command of each failing node, printed, or run.
fn run_hooks(t: &hook::Template, execute: bool, r: &Report) {
    for (host, failing) in r.failing_nodes() {
        let mut checks: Vec<&str> = failing.iter().map(|v| v.check.as_str()).collect();
        checks.dedup();
        let reason: Vec<String> = failing
            .iter()
            .map(|v| format!("{} {}: {}", v.check, v.status.name(), v.reason))
            .collect();
        let args = t.expand(host, &checks.join(","), &reason.join("; "));
        let line = hook::shell_line(&args);
        if !execute {
            print_out(&format!("# on-fail (not run; --execute runs it): {line}\n"));
            continue;
        }
        print_out(&format!("# on-fail: {line}\n"));
        match hook::run(&args, std::time::Duration::from_secs(60)) {
            Ran::Exited(0) => {}
            Ran::Exited(code) => say(&format!(
                "collbench: warning: the on-fail command for {host} exited with {code}"
            )),
            Ran::Signalled => say(&format!(
                "collbench: warning: the on-fail command for {host} was killed by a signal"
            )),
            Ran::TimedOut => say(&format!(
                "collbench: warning: the on-fail command for {host} ran over 60 s and was killed"
            )),
            Ran::NotStarted(e) => say(&format!(
                "collbench: warning: the on-fail command for {host} did not start: {e}"
            )),
        }
    }
    // a run that failed nothing (not judged: exit 9) names no failure
    if r.failing_nodes().is_empty() && r.exit_code() == crate::check::EXIT_FAILED {
        print_out("# on-fail: no node to name (the whole-job check failed); nothing run\n");
    }
}

#[cfg(test)]
mod tests {
    use super::prometheus_path;

    #[test]
    fn prometheus_takes_a_directory_or_a_file_in_one_and_refuses_the_rest() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        // a directory: HOST.prom inside, with or without the slash
        assert_eq!(prometheus_path(&d, "n1").unwrap(), dir.path().join("n1.prom"));
        assert_eq!(
            prometheus_path(&format!("{d}/"), "n1").unwrap(),
            dir.path().join("n1.prom")
        );
        // a file in a directory that exists, {host} replaced
        assert_eq!(
            prometheus_path(&format!("{d}/cb-{{host}}.prom"), "n1").unwrap(),
            dir.path().join("cb-n1.prom")
        );
        // a directory that does not exist, a file's parent that is a file
        let e = prometheus_path(&format!("{d}/missing/"), "n1").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().starts_with(&format!(
                "--prometheus {d}/missing/: {d}/missing/ is not a directory on n1"
            )),
            "{e}"
        );
        std::fs::write(dir.path().join("plain"), "x").unwrap();
        let e = prometheus_path(&format!("{d}/plain/x.prom"), "n1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("plain is not a directory on n1"), "{e}");
        assert!(!e.contains('\n'));
        // a directory's name mistyped: not written as a file the
        // collector never reads
        let e = prometheus_path(&format!("{d}/textfil"), "n1").unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string()
                .contains(&format!("{d}/textfil is neither a directory nor a .prom file")),
            "{e}"
        );
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            1,
            "the probe file is gone"
        );
    }
}
