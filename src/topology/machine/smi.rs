//! The fallback when NVML cannot be loaded: `nvidia-smi topo -m` for the
//! link matrix and `nvidia-smi --query-gpu` for names and PCI ids.
//!
//! The parsers are pure and total (unknown text gives an empty result);
//! running the tool has a time limit, because a wedged driver can make
//! nvidia-smi hang.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Gpu;

/// Longest nvidia-smi may take before it is killed.
const SMI_LIMIT: Duration = Duration::from_secs(20);

/// Runs `nvidia-smi ARGS`; its standard output, or why not.
pub fn run(args: &[&str]) -> Result<String, String> {
    let mut child = Command::new("nvidia-smi")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("nvidia-smi not started ({e})"))?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() > SMI_LIMIT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("nvidia-smi did not answer within {} s", SMI_LIMIT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("nvidia-smi: {e}")),
        }
    }
    let out = child.wait_with_output().map_err(|e| format!("nvidia-smi: {e}"))?;
    if !out.status.success() {
        return Err(format!("nvidia-smi {} exited with {}", args.join(" "), out.status));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The arguments of the GPU listing parsed by `parse_gpus`.
pub const QUERY_GPUS: [&str; 2] = [
    "--query-gpu=index,name,pci.bus_id,uuid,memory.total",
    "--format=csv,noheader,nounits",
];

/// `0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, GPU-..., 81559` per line.
pub fn parse_gpus(text: &str) -> Vec<Gpu> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 3 {
                return None;
            }
            Some(Gpu {
                index: f[0].parse().ok()?,
                name: f[1].to_string(),
                pci_bus_id: super::sysfs::normalize_bus_id(f[2]).unwrap_or_else(|| f[2].to_string()),
                uuid: f.get(3).filter(|u| !u.is_empty()).map(|u| u.to_string()),
                memory_mib: f.get(4).and_then(|m| m.parse().ok()),
                numa_node: None,
            })
        })
        .collect()
}

/// The matrix of `nvidia-smi topo -m`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SmiTopo {
    /// Column and row names: `GPU0`.., `NIC0`.. (older drivers name NICs
    /// by their device, `mlx5_0`).
    pub devices: Vec<String>,
    /// `cells[i][j]`: `X`, `NV18`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`.
    pub cells: Vec<Vec<String>>,
    /// Per row: CPU affinity and NUMA affinity, where printed.
    pub cpu_affinity: Vec<Option<String>>,
    pub numa_affinity: Vec<Option<String>>,
    /// `NIC0` -> `mlx5_0`, from the NIC legend.
    pub nic_names: Vec<(String, String)>,
}

/// Removes terminal escape sequences (`ESC [ ... m`), which some drivers
/// print around the header.
fn strip_escapes(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Parses `nvidia-smi topo -m`. Columns are separated by tabs or spaces;
/// the device columns are the header's words before `CPU Affinity`.
pub fn parse_topo(text: &str) -> SmiTopo {
    let lines: Vec<String> = text.lines().map(strip_escapes).collect();
    let mut topo = SmiTopo::default();
    let Some(header_at) = lines.iter().position(|l| {
        let first = l.split_whitespace().next().unwrap_or("");
        first.starts_with("GPU") && first[3..].parse::<u32>().is_ok() && l.starts_with(char::is_whitespace)
    }) else {
        return topo;
    };
    topo.devices = lines[header_at]
        .split_whitespace()
        .take_while(|w| !["CPU", "NUMA"].contains(w))
        .map(String::from)
        .collect();
    let n = topo.devices.len();
    for line in &lines[header_at + 1..] {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(name) = words.first() else {
            continue;
        };
        if !topo.devices.iter().any(|d| d == name) || words.len() < n + 1 {
            if line.trim_start().starts_with("Legend") {
                break;
            }
            continue;
        }
        topo.cells.push(words[1..=n].iter().map(|w| w.to_string()).collect());
        topo.cpu_affinity.push(words.get(n + 1).map(|w| w.to_string()));
        topo.numa_affinity
            .push(words.get(n + 2).filter(|w| **w != "N/A").map(|w| w.to_string()));
    }
    let mut in_nic_legend = false;
    for line in &lines {
        let t = line.trim();
        if t.starts_with("NIC Legend") {
            in_nic_legend = true;
        } else if in_nic_legend && let Some((nic, dev)) = t.split_once(':') {
            topo.nic_names.push((nic.trim().to_string(), dev.trim().to_string()));
        }
    }
    topo
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!("{}/tests/fixtures/nvidia-smi/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn an_hgx_matrix_with_nics_parses() {
        let t = parse_topo(&fixture("topo-hgx-h100-4gpu-2nic.txt"));
        assert_eq!(t.devices, vec!["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"]);
        assert_eq!(t.cells.len(), 6);
        assert_eq!(t.cells[0], vec!["X", "NV18", "NV18", "NV18", "PXB", "SYS"]);
        assert_eq!(t.cells[4][2], "SYS");
        assert_eq!(t.cpu_affinity[2].as_deref(), Some("56-111,168-223"));
        assert_eq!(t.numa_affinity[2].as_deref(), Some("1"));
        assert_eq!(t.cpu_affinity[5], None);
        assert_eq!(
            t.nic_names,
            vec![
                ("NIC0".to_string(), "mlx5_0".to_string()),
                ("NIC1".into(), "mlx5_1".into())
            ]
        );
    }

    #[test]
    fn a_pcie_box_with_escapes_and_device_named_nics_parses() {
        let t = parse_topo(&fixture("topo-pcie-4gpu-old-driver.txt"));
        assert_eq!(t.devices, vec!["GPU0", "GPU1", "GPU2", "GPU3", "mlx5_0"]);
        assert_eq!(t.cells[0], vec!["X", "PIX", "PHB", "SYS", "PIX"]);
        assert_eq!(t.cells[3][2], "NODE");
        assert_eq!(t.numa_affinity[0].as_deref(), Some("0"));
        assert!(t.nic_names.is_empty());
    }

    #[test]
    fn gpu_listings_parse_and_bus_ids_are_normalised() {
        let g = parse_gpus(
            "0, NVIDIA H100 80GB HBM3, 00000000:18:00.0, GPU-5a1c, 81559\n\
             1, NVIDIA H100 80GB HBM3, 00000000:2A:00.0, GPU-77de, 81559\n\nbad line\n",
        );
        assert_eq!(g.len(), 2);
        assert_eq!(g[1].pci_bus_id, "0000:2a:00.0");
        assert_eq!(g[1].memory_mib, Some(81559));
        assert_eq!(g[0].uuid.as_deref(), Some("GPU-5a1c"));
    }

    #[test]
    fn text_without_a_matrix_gives_an_empty_one() {
        assert_eq!(parse_topo(""), SmiTopo::default());
        assert_eq!(parse_topo("No devices were found\n"), SmiTopo::default());
        let t = parse_topo("\tGPU0\tCPU Affinity\nGPU0\n");
        assert_eq!(t.devices, vec!["GPU0"]);
        assert!(t.cells.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn the_parsers_never_panic(text in "[\\PC\\t\\n\\u{1b}]{0,200}") {
            let _ = parse_topo(&text);
            let _ = parse_gpus(&text);
        }
    }
}
