//! What a `collbench links` launch measures, from its options, before any
//! rank starts: the level, the probe's sizes and counts, where racks and
//! leaves come from, the outputs. Every rank reads the topology file
//! itself (its contents are in the digest).
//!
//! Must not: start MPI, touch a backend, or print.

use std::path::{Path, PathBuf};

use super::{RunConfig, Taken, fingerprint};
use crate::cli::LinksArgs;
use crate::error::Error;
use crate::links::layout::HostPattern;
use crate::links::{Level, Metric, Probe, Topology};
use crate::types::BackendKind;

/// Default bandwidth message on GPUs: 64 MiB, past where NCCL's
/// point-to-point bandwidth levels off.
pub const GPU_SIZE_BYTES: u64 = 64 << 20;
/// Default bandwidth message on host memory: 4 MiB, past where MPI's
/// rendezvous protocol levels off, small enough for many ranks per host.
pub const HOST_SIZE_BYTES: u64 = 4 << 20;

/// Where hosts sit.
#[derive(Clone, Debug)]
pub enum Places {
    /// `--topology FILE`, read and parsed.
    File { path: PathBuf, map: Topology },
    /// `--host-pattern`.
    Pattern(HostPattern),
}

impl Places {
    /// What the header says.
    pub fn describe(&self) -> String {
        match self {
            Places::File { path, .. } => format!("--topology {}", path.display()),
            Places::Pattern(p) => format!("--host-pattern {p}"),
        }
    }

    /// The placement of `hosts`: the file must place every host and no
    /// other, the pattern must match every host.
    pub fn topology(&self, hosts: &[String]) -> Result<Topology, Error> {
        match self {
            Places::File { path, map } => {
                map.check(hosts, &format!("--topology {}", path.display()))?;
                Ok(map.clone())
            }
            Places::Pattern(p) => Topology::from_pattern(p, hosts),
        }
    }
}

/// A links launch, validated.
#[derive(Clone, Debug)]
pub struct LinksJob {
    pub level: Level,
    pub isolated: bool,
    pub find: bool,
    /// `--size`; `None`: the backend's default.
    pub size_bytes: Option<u64>,
    pub latency_bytes: u64,
    pub samples: usize,
    pub iters: usize,
    pub warmup: usize,
    pub check: u32,
    pub places: Option<Places>,
    pub metric: Metric,
    pub heatmap: Option<PathBuf>,
}

impl LinksJob {
    /// `collbench links`: the job and the run's configuration (its digest
    /// of every links option and of the topology file, so that every rank
    /// measures the same schedule).
    pub fn from_args(a: &LinksArgs) -> Result<(LinksJob, RunConfig), Error> {
        let size_bytes = a.size.map(|s| s.bytes());
        if let Some(s) = size_bytes {
            check_size("--size", s)?;
        }
        let latency_bytes = a.latency_size.bytes();
        check_size("--latency-size", latency_bytes)?;
        if let Some(path) = &a.files.heatmap {
            check_picture(path)?;
        }
        // each output a file of its own, none the --topology file
        let outputs: Vec<(&str, &std::path::Path)> = [
            ("--csv", &a.files.csv),
            ("--json", &a.files.json),
            ("--heatmap", &a.files.heatmap),
        ]
        .into_iter()
        .filter_map(|(what, p)| p.as_deref().map(|p| (what, p)))
        .collect();
        let inputs: Vec<(&str, &std::path::Path)> = a
            .topology
            .iter()
            .map(|t| ("the --topology file", t.as_path()))
            .collect();
        crate::report::paths::check_distinct(&outputs, &inputs)?;
        let mut contents = Vec::new();
        let places = match (&a.topology, &a.host_pattern) {
            (Some(path), _) => {
                let text = read(path)?;
                contents.push(("--topology contents".to_string(), fingerprint(text.as_bytes())));
                Some(Places::File {
                    map: Topology::parse(&text)
                        .map_err(|e| Error::usage(format!("--topology {}: {e}", path.display())))?,
                    path: path.clone(),
                })
            }
            (None, Some(p)) => Some(Places::Pattern(HostPattern::parse(p)?)),
            (None, None) => None,
        };
        let taken = Taken {
            common: &a.common,
            blocking: None,
            register: None,
            repeat: None,
            label: Some(&a.label),
            progress: None,
            csv: a.files.csv.clone(),
            json: a.files.json.clone(),
        };
        let cfg = RunConfig::for_command("links", a, taken, contents)?;
        let job = LinksJob {
            level: a.level,
            isolated: a.isolated,
            find: a.find,
            size_bytes,
            latency_bytes,
            samples: a.samples as usize,
            iters: usize::try_from(a.iters).map_err(|_| Error::usage("-n/--iters is too large"))?,
            warmup: usize::try_from(a.warmup).map_err(|_| Error::usage("-w/--warmup is too large"))?,
            check: a.common.checking.check,
            places,
            metric: a.metric,
            heatmap: a.files.heatmap.clone(),
        };
        Ok((job, cfg))
    }

    /// The probe on `backend`: `--size`, or its default there.
    pub fn probe(&self, backend: BackendKind) -> Probe {
        let default = match backend {
            BackendKind::Nccl => GPU_SIZE_BYTES,
            _ => HOST_SIZE_BYTES,
        };
        Probe {
            size_bytes: self.size_bytes.unwrap_or(default),
            latency_bytes: self.latency_bytes,
            samples: self.samples,
            iters: self.iters,
            warmup: self.warmup,
        }
    }
}

/// A probe size: positive whole 4-byte elements.
fn check_size(option: &str, bytes: u64) -> Result<(), Error> {
    if bytes == 0 || !bytes.is_multiple_of(4) {
        return Err(Error::usage(format!(
            "{option} {bytes}: links moves 4-byte elements; give a positive multiple of 4 bytes"
        )));
    }
    Ok(())
}

/// The heatmap's file must be a PNG or an SVG.
fn check_picture(path: &Path) -> Result<(), Error> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("png" | "svg") => Ok(()),
        _ => Err(Error::usage(format!(
            "--heatmap {}: the heatmap file must end in .svg or .png",
            path.display()
        ))),
    }
}

fn read(path: &Path) -> Result<String, Error> {
    std::fs::read_to_string(path)
        .map_err(|e| Error::usage(format!("--topology {}: cannot read it: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn job(args: &[&str]) -> Result<(LinksJob, RunConfig), Error> {
        let argv = ["collbench", "links"].iter().chain(args).copied();
        match Cli::try_parse_from(argv).map_err(|e| e.to_string()).unwrap().command {
            Command::Links(a) => LinksJob::from_args(&a),
            _ => unreachable!(),
        }
    }

    #[test]
    fn the_probe_takes_the_options_and_the_backends_default_size() {
        let (j, cfg) = job(&["-n", "7", "-w", "2", "--samples", "12", "--latency-size", "16"]).unwrap();
        let p = j.probe(BackendKind::Mpi);
        assert_eq!(
            (p.size_bytes, p.latency_bytes, p.samples, p.iters, p.warmup),
            (4 << 20, 16, 12, 7, 2)
        );
        assert_eq!(j.probe(BackendKind::Nccl).size_bytes, 64 << 20);
        assert!(cfg.digest.iter().any(|(k, v)| k == "--samples" && v == "12"));
        assert!(cfg.digest.iter().any(|(k, v)| k == "command" && v == "links"));
        let (j, _) = job(&["--size", "1M"]).unwrap();
        assert_eq!(j.probe(BackendKind::Nccl).size_bytes, 1 << 20);
        assert_eq!(j.probe(BackendKind::Nccl).iters, 20);
    }

    #[test]
    fn bad_sizes_and_files_are_one_line_usage_errors() {
        let cases: [(&[&str], &str); 4] = [
            (&["--size", "1001"], "--size 1001: links moves 4-byte elements"),
            (&["--latency-size", "0"], "--latency-size 0"),
            (
                &["--heatmap", "m.jpg"],
                "--heatmap m.jpg: the heatmap file must end in .svg or .png",
            ),
            (
                &["--topology", "/nonexistent/topo"],
                "--topology /nonexistent/topo: cannot read it",
            ),
        ];
        for (args, want) in cases {
            let e = job(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
            let m = e.to_string();
            assert!(m.starts_with(want), "{args:?}: {m}");
            assert!(!m.contains('\n'), "{m}");
        }
    }

    #[test]
    fn a_topology_file_must_place_every_host_and_no_other() {
        let dir = std::env::temp_dir().join(format!("collbench-links-topo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("topo");
        std::fs::write(&file, "a leaf1\nb leaf1\nzz leaf2 rack9\n").unwrap();
        let (j, _) = job(&["--topology", file.to_str().unwrap()]).unwrap();
        let places = j.places.unwrap();
        let hosts = ["a".to_string(), "b".to_string()];
        let e = places.topology(&hosts).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        assert!(
            e.to_string().contains("names 1 host this launch does not have: zz"),
            "{e}"
        );
        std::fs::write(&file, "a leaf1 x y\n").unwrap();
        let e = job(&["--topology", file.to_str().unwrap()]).unwrap_err();
        assert!(e.to_string().contains("line 1: expected `host leaf [rack]`"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
