//! `collbench topo`: what this machine has to communicate with. GPUs with
//! their PCI ids and NUMA nodes, the GPU-GPU and GPU-NIC link matrix
//! (NVLink count or PCIe path class), network interfaces and RDMA devices,
//! CPUs and NUMA nodes; as a table for people or JSON for programs.
//!
//! GPUs come from NVML (`nvml`, loaded at run time), else from
//! `nvidia-smi` (`smi`), else there are none and the report says why.
//! Everything else comes from /proc and /sys (`sysfs`). Nothing here fails:
//! what cannot be read is left out and named in `notes`.

pub mod nvml;
pub mod smi;
pub mod sysfs;

use std::path::Path;

use serde::Serialize;

/// Version of the JSON document.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cpu {
    pub model: Option<String>,
    pub sockets: usize,
    pub cores: usize,
    pub threads: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NumaNode {
    pub id: u32,
    /// As sysfs lists them: `0-27,56-83`.
    pub cpus: String,
    pub memory_mib: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Gpu {
    pub index: u32,
    pub name: String,
    /// `0000:18:00.0`.
    pub pci_bus_id: String,
    pub numa_node: Option<i64>,
    pub uuid: Option<String>,
    pub memory_mib: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Nic {
    pub name: String,
    /// `ethernet`, `infiniband`, `loopback` or `other`.
    pub kind: String,
    pub state: Option<String>,
    pub speed_mbps: Option<u64>,
    pub mtu: Option<u32>,
    pub pci_bus_id: Option<String>,
    pub numa_node: Option<i64>,
    /// No device behind it (bridges, veth, tunnels, loopback).
    pub is_virtual: bool,
    /// The RDMA device that owns this interface (`mlx5_0`).
    pub rdma: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdmaPort {
    pub port: u32,
    pub state: String,
    pub rate: String,
    /// `InfiniBand` or `Ethernet` (RoCE).
    pub link_layer: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RdmaDevice {
    pub name: String,
    pub pci_bus_id: Option<String>,
    pub numa_node: Option<i64>,
    pub netdevs: Vec<String>,
    pub ports: Vec<RdmaPort>,
}

/// The link matrix over GPUs and NICs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Links {
    /// Row and column names: `GPU0`.., then `NIC0`.. (named in `nics`).
    pub devices: Vec<String>,
    /// `cells[i][j]`: `X`, `NV#`, `PIX`, `PXB`, `PHB`, `NODE`, `SYS`.
    pub cells: Vec<Vec<String>>,
    /// `NIC0` -> `mlx5_0`.
    pub nics: Vec<(String, String)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MachineReport {
    pub schema_version: u32,
    pub host: String,
    pub cpu: Cpu,
    pub numa_nodes: Vec<NumaNode>,
    /// Where the GPU facts came from: `nvml`, `nvidia-smi` or `none`.
    pub gpu_source: String,
    pub driver: Option<String>,
    pub gpus: Vec<Gpu>,
    pub links: Option<Links>,
    pub nics: Vec<Nic>,
    pub rdma_devices: Vec<RdmaDevice>,
    /// What could not be read, and why.
    pub notes: Vec<String>,
}

/// The NICs of the link matrix: RDMA devices (what NCCL uses), else the
/// physical network interfaces.
fn matrix_nics(rdma: &[RdmaDevice], nics: &[Nic]) -> Vec<(String, Option<String>, Option<i64>)> {
    if !rdma.is_empty() {
        return rdma
            .iter()
            .map(|d| (d.name.clone(), d.pci_bus_id.clone(), d.numa_node))
            .collect();
    }
    nics.iter()
        .filter(|n| !n.is_virtual && n.kind != "loopback")
        .map(|n| (n.name.clone(), n.pci_bus_id.clone(), n.numa_node))
        .collect()
}

/// GPU-NIC and NIC-NIC cells from the sysfs PCI tree, around the GPU-GPU
/// cells NVML gave.
fn links_from_nvml(
    root: &Path,
    gpus: &[Gpu],
    gpu_cells: Vec<Vec<String>>,
    nics: &[(String, Option<String>, Option<i64>)],
) -> Links {
    let mut devices: Vec<String> = gpus.iter().map(|g| format!("GPU{}", g.index)).collect();
    let mut ends: Vec<(Option<String>, Option<i64>)> = gpus
        .iter()
        .map(|g| (sysfs::pci_path(root, &g.pci_bus_id), g.numa_node))
        .collect();
    let mut names = Vec::new();
    for (i, (name, pci, numa)) in nics.iter().enumerate() {
        devices.push(format!("NIC{i}"));
        names.push((format!("NIC{i}"), name.clone()));
        ends.push((pci.as_deref().and_then(|b| sysfs::pci_path(root, b)), *numa));
    }
    let n = devices.len();
    let ng = gpus.len();
    let mut cells = vec![vec![String::new(); n]; n];
    for i in 0..n {
        for j in 0..n {
            cells[i][j] = if i == j {
                "X".into()
            } else if i < ng && j < ng {
                gpu_cells
                    .get(i)
                    .and_then(|r| r.get(j))
                    .cloned()
                    .unwrap_or_else(|| "?".into())
            } else {
                match (&ends[i], &ends[j]) {
                    ((Some(a), na), (Some(b), nb)) => sysfs::path_class(a, b, *na, *nb).to_string(),
                    _ => "?".into(),
                }
            };
        }
    }
    Links {
        devices,
        cells,
        nics: names,
    }
}

/// Looks at the machine (`root` is `/` except in tests).
pub fn probe(root: &Path) -> MachineReport {
    let mut notes = Vec::new();
    let mut nics = sysfs::nics(root);
    let rdma_devices = sysfs::rdma_devices(root);
    for nic in &mut nics {
        nic.rdma = rdma_devices
            .iter()
            .find(|d| d.netdevs.contains(&nic.name))
            .map(|d| d.name.clone());
    }
    let (gpu_source, driver, gpus, links) = match nvml::probe() {
        Ok(view) => {
            let links = (!view.gpus.is_empty())
                .then(|| links_from_nvml(root, &view.gpus, view.cells, &matrix_nics(&rdma_devices, &nics)));
            ("nvml", view.driver, view.gpus, links)
        }
        Err(nvml_why) => match from_nvidia_smi(root) {
            Ok((gpus, links)) => {
                notes.push(format!("{nvml_why}; used nvidia-smi"));
                ("nvidia-smi", None, gpus, links)
            }
            Err(smi_why) => {
                notes.push(format!("no NVIDIA GPU found: {nvml_why}, and {smi_why}"));
                ("none", None, Vec::new(), None)
            }
        },
    };
    if rdma_devices.is_empty() {
        notes.push("no RDMA devices (/sys/class/infiniband is empty or absent): no InfiniBand or RoCE".into());
    }
    let numa_nodes = sysfs::numa_nodes(root);
    if numa_nodes.is_empty() {
        notes.push("no NUMA information in /sys/devices/system/node".into());
    }
    MachineReport {
        schema_version: SCHEMA_VERSION,
        host: super::hostname(),
        cpu: sysfs::cpu(root),
        numa_nodes,
        gpu_source: gpu_source.into(),
        driver,
        gpus,
        links,
        nics,
        rdma_devices,
        notes,
    }
}

fn from_nvidia_smi(root: &Path) -> Result<(Vec<Gpu>, Option<Links>), String> {
    let mut gpus = smi::parse_gpus(&smi::run(&smi::QUERY_GPUS)?);
    if gpus.is_empty() {
        return Err("nvidia-smi lists no GPUs".into());
    }
    for g in &mut gpus {
        g.numa_node = sysfs::pci_numa_node(root, &g.pci_bus_id);
    }
    let links = smi::run(&["topo", "-m"])
        .ok()
        .map(|text| smi::parse_topo(&text))
        .and_then(|t| {
            (!t.cells.is_empty()).then_some(Links {
                devices: t.devices,
                cells: t.cells,
                nics: t.nic_names,
            })
        });
    Ok((gpus, links))
}

/// The model of the GPUs on this host, for the run header: one name when
/// they are all alike, else every distinct name; `None` without GPUs.
/// Uses NVML, else nvidia-smi when it is installed.
pub fn host_gpu_model() -> Option<String> {
    let names: Vec<String> = match nvml::gpu_names() {
        Ok(names) => names,
        Err(_) => smi::run(&smi::QUERY_GPUS)
            .map(|t| smi::parse_gpus(&t).into_iter().map(|g| g.name).collect())
            .unwrap_or_default(),
    };
    let mut distinct: Vec<String> = Vec::new();
    for n in names {
        if !distinct.contains(&n) {
            distinct.push(n);
        }
    }
    (!distinct.is_empty()).then(|| distinct.join(", "))
}

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".into(), |x| x.to_string())
}

/// The human report.
pub fn table(r: &MachineReport) -> String {
    let mut s = format!("# collbench topo: {}\n", r.host);
    s += &cpu_lines(r);
    s += &gpu_lines(r);
    if let Some(l) = &r.links {
        s += &link_lines(l);
    }
    s += &nic_lines(r);
    if !r.notes.is_empty() {
        s += "\n";
        for n in &r.notes {
            s += &format!("note: {n}\n");
        }
    }
    s
}

fn cpu_lines(r: &MachineReport) -> String {
    let mut s = format!(
        "CPU   : {}, {} socket{}, {} cores, {} threads\n",
        r.cpu.model.as_deref().unwrap_or("unknown model"),
        r.cpu.sockets,
        if r.cpu.sockets == 1 { "" } else { "s" },
        r.cpu.cores,
        r.cpu.threads
    );
    for n in &r.numa_nodes {
        s += &format!(
            "NUMA  : node {}  cpus {}  memory {}\n",
            n.id,
            n.cpus,
            n.memory_mib
                .map_or_else(|| "-".into(), |m| format!("{:.1} GiB", m as f64 / 1024.0))
        );
    }
    s
}

fn gpu_lines(r: &MachineReport) -> String {
    let mut s = format!("\nGPUs ({})", r.gpu_source);
    if let Some(d) = &r.driver {
        s += &format!(", driver {d}");
    }
    s += "\n";
    if r.gpus.is_empty() {
        s += "  none\n";
    }
    for g in &r.gpus {
        s += &format!(
            "  GPU{:<3} {:<28} {}  NUMA {}  {}\n",
            g.index,
            g.name,
            g.pci_bus_id,
            or_dash(g.numa_node),
            g.memory_mib.map_or_else(String::new, |m| format!("{} MiB", m))
        );
    }
    s
}

/// The GPU-GPU and GPU-NIC link matrix.
fn link_lines(l: &Links) -> String {
    let mut s = String::new();
    s += "\nLinks\n";
    let width = l.devices.iter().map(String::len).max().unwrap_or(4).max(5) + 1;
    s += &format!("  {:width$}", "");
    for d in &l.devices {
        s += &format!("{d:>width$}");
    }
    s += "\n";
    for (d, row) in l.devices.iter().zip(&l.cells) {
        s += &format!("  {d:width$}");
        for c in row {
            s += &format!("{c:>width$}");
        }
        s += "\n";
    }
    for (nic, dev) in &l.nics {
        s += &format!("  {nic}: {dev}\n");
    }
    s += "  X self, NV# bonded NVLinks, PIX at most one PCIe switch, PXB several PCIe switches,\n  \
          PHB through a PCIe host bridge (the CPU), NODE between host bridges of one NUMA node,\n  \
          SYS across NUMA nodes (QPI/UPI/Infinity Fabric)\n";
    s
}

/// Network interfaces and RDMA devices.
fn nic_lines(r: &MachineReport) -> String {
    let mut s = String::new();
    s += "\nNetwork interfaces\n";
    s += &format!(
        "  {:<16} {:<10} {:<8} {:>12} {:>6}  {:<12} {:>4}  {}\n",
        "NAME", "KIND", "STATE", "SPEED", "MTU", "PCI", "NUMA", "RDMA"
    );
    for n in &r.nics {
        s += &format!(
            "  {:<16} {:<10} {:<8} {:>12} {:>6}  {:<12} {:>4}  {}{}\n",
            n.name,
            n.kind,
            n.state.as_deref().unwrap_or("-"),
            n.speed_mbps.map_or_else(|| "-".into(), |m| format!("{m} Mb/s")),
            or_dash(n.mtu),
            n.pci_bus_id.as_deref().unwrap_or("-"),
            or_dash(n.numa_node),
            n.rdma.as_deref().unwrap_or("-"),
            if n.is_virtual && n.kind != "loopback" {
                "  (virtual)"
            } else {
                ""
            }
        );
    }
    if !r.rdma_devices.is_empty() {
        s += "\nRDMA devices\n";
        for d in &r.rdma_devices {
            for p in &d.ports {
                s += &format!(
                    "  {} port {}: {}, {}, {}, PCI {}, NUMA {}, netdev {}\n",
                    d.name,
                    p.port,
                    p.state,
                    p.rate,
                    p.link_layer,
                    d.pci_bus_id.as_deref().unwrap_or("-"),
                    or_dash(d.numa_node),
                    if d.netdevs.is_empty() {
                        "-".into()
                    } else {
                        d.netdevs.join(",")
                    }
                );
            }
        }
    }
    s
}

/// The JSON document (`schema_version` 1).
pub fn json(r: &MachineReport) -> String {
    // Serialising plain strings and numbers cannot fail.
    serde_json::to_string_pretty(r).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}")) + "\n"
}

/// `MemAvailable` of /proc/meminfo, where there is one.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(index: u32, bus: &str, numa: i64) -> Gpu {
        Gpu {
            index,
            name: "NVIDIA H100 80GB HBM3".into(),
            pci_bus_id: bus.into(),
            numa_node: Some(numa),
            uuid: None,
            memory_mib: Some(81559),
        }
    }

    #[test]
    fn gpu_nic_cells_come_from_the_pci_tree_around_nvml_cells() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (bdf, path) in [
            (
                "0000:19:00.0",
                "pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:00.0/0000:19:00.0",
            ),
            (
                "0000:1a:00.0",
                "pci0000:16/0000:16:02.0/0000:17:00.0/0000:18:01.0/0000:1a:00.0",
            ),
            ("0000:b9:00.0", "pci0000:b0/0000:b0:02.0/0000:b9:00.0"),
        ] {
            std::fs::create_dir_all(root.join("sys/devices").join(path)).unwrap();
            std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
            std::os::unix::fs::symlink(
                root.join("sys/devices").join(path),
                root.join("sys/bus/pci/devices").join(bdf),
            )
            .unwrap();
        }
        let gpus = vec![gpu(0, "0000:19:00.0", 0), gpu(1, "0000:b9:00.0", 1)];
        let cells = vec![vec!["X".into(), "NV18".into()], vec!["NV18".into(), "X".into()]];
        let nics = vec![("mlx5_0".to_string(), Some("0000:1a:00.0".to_string()), Some(0))];
        let l = links_from_nvml(root, &gpus, cells, &nics);
        assert_eq!(l.devices, vec!["GPU0", "GPU1", "NIC0"]);
        assert_eq!(l.cells[0], vec!["X", "NV18", "PIX"]);
        assert_eq!(l.cells[1], vec!["NV18", "X", "SYS"]);
        assert_eq!(l.cells[2], vec!["PIX", "SYS", "X"]);
        assert_eq!(l.nics, vec![("NIC0".to_string(), "mlx5_0".to_string())]);
    }

    #[test]
    fn this_machine_gives_a_report_and_valid_json() {
        let r = probe(Path::new("/"));
        assert!(r.cpu.threads > 0);
        let text = table(&r);
        assert!(text.contains("CPU   :"), "{text}");
        assert!(text.contains("Network interfaces"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&json(&r)).unwrap();
        assert_eq!(v["schema_version"], 1);
        assert_eq!(v["gpus"].as_array().map(Vec::len), Some(r.gpus.len()));
    }
}
