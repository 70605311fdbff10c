//! What Linux says about the machine, read from /proc and /sys: CPUs, NUMA
//! nodes, network interfaces, RDMA devices, and the PCIe path class between
//! two PCI devices.
//!
//! Every reader takes the file-system root, so tests run on a fake tree;
//! a file that is missing or unreadable yields `None` or an empty list,
//! never an error: a report shows what can be seen.

use std::path::{Path, PathBuf};

use super::{Cpu, Nic, NumaNode, RdmaDevice, RdmaPort};

fn read(root: &Path, path: &str) -> Option<String> {
    std::fs::read_to_string(root.join(path.trim_start_matches('/')))
        .ok()
        .map(|s| s.trim().to_string())
}

fn entries(root: &Path, dir: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root.join(dir.trim_start_matches('/')))
        .map(|d| {
            d.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `0000:17:00.0`: a PCI address as sysfs writes it.
pub fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| [4, 7, 10].contains(&i) || c.is_ascii_hexdigit())
}

/// A PCI bus id as NVML or nvidia-smi print it (`00000000:17:00.0`) in
/// sysfs form (`0000:17:00.0`); `None` when it is not one.
pub fn normalize_bus_id(id: &str) -> Option<String> {
    let id = id.trim().to_ascii_lowercase();
    let (domain, rest) = id.split_once(':')?;
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let out = format!("{domain:04x}:{rest}");
    is_pci_address(&out).then_some(out)
}

/// The sysfs device path of PCI device `bdf`, relative to `/sys/devices`
/// (`pci0000:16/0000:16:02.0/.../0000:19:00.0`).
pub fn pci_path(root: &Path, bdf: &str) -> Option<String> {
    let link = root.join("sys/bus/pci/devices").join(bdf);
    let real = std::fs::canonicalize(link).ok()?;
    let devices = std::fs::canonicalize(root.join("sys/devices")).ok()?;
    real.strip_prefix(devices)
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// The NUMA node of PCI device `bdf` (`None`: unknown, or -1 in sysfs).
pub fn pci_numa_node(root: &Path, bdf: &str) -> Option<i64> {
    read(root, &format!("sys/bus/pci/devices/{bdf}/numa_node"))?
        .parse()
        .ok()
        .filter(|n: &i64| *n >= 0)
}

/// The PCIe path class between two devices, as nvidia-smi and NCCL name
/// it, from their sysfs paths (`pci0000:16/0000:16:02.0/...`) and NUMA
/// nodes: `PIX` through at most one PCIe switch, `PXB` through several,
/// `PHB` through the host bridge (the CPU), `NODE` between host bridges of
/// one NUMA node, `SYS` across NUMA nodes.
pub fn path_class(a: &str, b: &str, numa_a: Option<i64>, numa_b: Option<i64>) -> &'static str {
    let pa: Vec<&str> = a.split('/').filter(|s| !s.is_empty()).collect();
    let pb: Vec<&str> = b.split('/').filter(|s| !s.is_empty()).collect();
    let common = pa.iter().zip(&pb).take_while(|(x, y)| x == y).count();
    if common == 0 {
        return match (numa_a, numa_b) {
            (Some(x), Some(y)) if x == y => "NODE",
            (None, None) => "NODE",
            _ => "SYS",
        };
    }
    if common == 1 {
        return "PHB";
    }
    // Below the common bridge each side has a downstream port and the
    // device itself when one switch joins them; anything deeper crosses
    // another switch.
    let (ra, rb) = (pa.len() - common, pb.len() - common);
    if ra <= 2 && rb <= 2 { "PIX" } else { "PXB" }
}

/// The PCI device under a sysfs device path (the last PCI address in it):
/// a virtio NIC sits below its PCI function.
fn pci_of(path: &Path) -> Option<String> {
    path.components()
        .filter_map(|c| c.as_os_str().to_str())
        .rfind(|c| is_pci_address(c))
        .map(String::from)
}

pub fn cpu(root: &Path) -> Cpu {
    let text = read(root, "proc/cpuinfo").unwrap_or_default();
    let mut model = None;
    let mut threads = 0;
    let mut sockets: Vec<String> = Vec::new();
    let mut cores: Vec<(String, String)> = Vec::new();
    let mut socket = String::new();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim().to_string());
        match key {
            "processor" => threads += 1,
            "model name" if model.is_none() => model = Some(value),
            "physical id" => {
                if !sockets.contains(&value) {
                    sockets.push(value.clone());
                }
                socket = value;
            }
            "core id" => {
                let core = (socket.clone(), value);
                if !cores.contains(&core) {
                    cores.push(core);
                }
            }
            _ => {}
        }
    }
    if threads == 0 {
        threads = std::thread::available_parallelism().map_or(0, |n| n.get());
    }
    Cpu {
        model,
        sockets: sockets.len().max(1),
        cores: if cores.is_empty() { threads } else { cores.len() },
        threads,
    }
}

pub fn numa_nodes(root: &Path) -> Vec<NumaNode> {
    let mut nodes: Vec<NumaNode> = entries(root, "sys/devices/system/node")
        .into_iter()
        .filter_map(|name| {
            let id: u32 = name.strip_prefix("node")?.parse().ok()?;
            let dir = format!("sys/devices/system/node/{name}");
            let memory_mib = read(root, &format!("{dir}/meminfo")).and_then(|m| {
                m.lines()
                    .find(|l| l.contains("MemTotal:"))
                    .and_then(|l| l.split_whitespace().rev().nth(1)?.parse::<u64>().ok())
                    .map(|kib| kib / 1024)
            });
            Some(NumaNode {
                id,
                cpus: read(root, &format!("{dir}/cpulist")).unwrap_or_default(),
                memory_mib,
            })
        })
        .collect();
    nodes.sort_by_key(|n| n.id);
    nodes
}

pub fn nics(root: &Path) -> Vec<Nic> {
    entries(root, "sys/class/net")
        .into_iter()
        .map(|name| {
            let dir = format!("sys/class/net/{name}");
            let kind = match read(root, &format!("{dir}/type")).as_deref() {
                Some("1") => "ethernet",
                Some("32") => "infiniband",
                Some("772") => "loopback",
                _ => "other",
            };
            let device = std::fs::canonicalize(root.join(&dir).join("device")).ok();
            let pci_bus_id = device.as_deref().and_then(pci_of);
            Nic {
                kind: kind.into(),
                state: read(root, &format!("{dir}/operstate")),
                speed_mbps: read(root, &format!("{dir}/speed"))
                    .and_then(|s| s.parse::<i64>().ok())
                    .filter(|s| *s > 0)
                    .map(|s| s as u64),
                mtu: read(root, &format!("{dir}/mtu")).and_then(|s| s.parse().ok()),
                numa_node: pci_bus_id.as_deref().and_then(|b| pci_numa_node(root, b)),
                is_virtual: device.is_none(),
                pci_bus_id,
                rdma: None,
                name,
            }
        })
        .collect()
}

pub fn rdma_devices(root: &Path) -> Vec<RdmaDevice> {
    entries(root, "sys/class/infiniband")
        .into_iter()
        .map(|name| {
            let dir = format!("sys/class/infiniband/{name}");
            let ports = entries(root, &format!("{dir}/ports"))
                .into_iter()
                .filter_map(|p| {
                    let port: u32 = p.parse().ok()?;
                    let pdir = format!("{dir}/ports/{p}");
                    // "4: ACTIVE" -> "ACTIVE"
                    let state = read(root, &format!("{pdir}/state"))
                        .map(|s| s.split_once(':').map_or(s.clone(), |(_, v)| v.trim().to_string()));
                    Some(RdmaPort {
                        port,
                        state: state.unwrap_or_default(),
                        rate: read(root, &format!("{pdir}/rate")).unwrap_or_default(),
                        link_layer: read(root, &format!("{pdir}/link_layer")).unwrap_or_default(),
                    })
                })
                .collect();
            let device: Option<PathBuf> = std::fs::canonicalize(root.join(&dir).join("device")).ok();
            let pci_bus_id = device.as_deref().and_then(pci_of);
            RdmaDevice {
                netdevs: entries(root, &format!("{dir}/device/net")),
                numa_node: pci_bus_id.as_deref().and_then(|b| pci_numa_node(root, b)),
                pci_bus_id,
                ports,
                name,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(root: &Path, path: &str, text: &str) {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    fn link(root: &Path, target: &str, at: &str) {
        let at = root.join(at);
        std::fs::create_dir_all(at.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(root.join(target), at).unwrap();
    }

    #[test]
    fn bus_ids_of_nvml_and_nvidia_smi_become_sysfs_addresses() {
        assert_eq!(normalize_bus_id("00000000:17:00.0").as_deref(), Some("0000:17:00.0"));
        assert_eq!(normalize_bus_id("0000:1B:00.0").as_deref(), Some("0000:1b:00.0"));
        assert_eq!(normalize_bus_id("00000001:C8:00.0").as_deref(), Some("0001:c8:00.0"));
        assert_eq!(normalize_bus_id("GPU-1234"), None);
        assert_eq!(normalize_bus_id(""), None);
        assert!(is_pci_address("0000:00:03.0"));
        assert!(!is_pci_address("virtio2"));
    }

    #[test]
    fn path_classes_follow_the_pcie_tree() {
        let sw = "pci0000:16/0000:16:02.0/0000:17:00.0";
        let gpu0 = format!("{sw}/0000:18:00.0/0000:19:00.0");
        let nic0 = format!("{sw}/0000:18:01.0/0000:1a:00.0");
        assert_eq!(path_class(&gpu0, &nic0, Some(0), Some(0)), "PIX");
        let deep = format!("{sw}/0000:18:02.0/0000:1b:00.0/0000:1c:00.0/0000:1d:00.0");
        assert_eq!(path_class(&gpu0, &deep, Some(0), Some(0)), "PXB");
        let other_port = "pci0000:16/0000:16:03.0/0000:30:00.0";
        assert_eq!(path_class(&gpu0, other_port, Some(0), Some(0)), "PHB");
        let other_root = "pci0000:3a/0000:3a:02.0/0000:3b:00.0";
        assert_eq!(path_class(&gpu0, other_root, Some(0), Some(0)), "NODE");
        assert_eq!(path_class(&gpu0, other_root, Some(0), Some(1)), "SYS");
    }

    #[test]
    fn a_fake_machine_reads_back_cpus_numa_nics_and_rdma() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        write(
            root,
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: Test CPU\nphysical id\t: 0\ncore id\t: 0\n\n\
             processor\t: 1\nmodel name\t: Test CPU\nphysical id\t: 0\ncore id\t: 0\n\n\
             processor\t: 2\nmodel name\t: Test CPU\nphysical id\t: 1\ncore id\t: 0\n",
        );
        write(root, "sys/devices/system/node/node0/cpulist", "0-1\n");
        write(
            root,
            "sys/devices/system/node/node0/meminfo",
            "Node 0 MemTotal:  2097152 kB\n",
        );
        write(root, "sys/devices/system/node/node1/cpulist", "2\n");
        write(root, "sys/devices/system/node/online", "0-1\n");
        write(root, "sys/devices/pci0000:00/0000:00:03.0/virtio2/x", "");
        write(root, "sys/devices/pci0000:00/0000:00:03.0/numa_node", "1\n");
        link(
            root,
            "sys/devices/pci0000:00/0000:00:03.0",
            "sys/bus/pci/devices/0000:00:03.0",
        );
        write(root, "sys/class/net/eth0/type", "1\n");
        write(root, "sys/class/net/eth0/operstate", "up\n");
        write(root, "sys/class/net/eth0/speed", "25000\n");
        write(root, "sys/class/net/eth0/mtu", "9000\n");
        link(
            root,
            "sys/devices/pci0000:00/0000:00:03.0/virtio2",
            "sys/class/net/eth0/device",
        );
        write(root, "sys/class/net/lo/type", "772\n");
        write(root, "sys/class/net/lo/speed", "-1\n");
        write(root, "sys/devices/pci0000:00/0000:00:04.0/net/ib0/x", "");
        write(root, "sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
        write(
            root,
            "sys/class/infiniband/mlx5_0/ports/1/rate",
            "400 Gb/sec (4X NDR)\n",
        );
        write(root, "sys/class/infiniband/mlx5_0/ports/1/link_layer", "InfiniBand\n");
        link(
            root,
            "sys/devices/pci0000:00/0000:00:04.0",
            "sys/class/infiniband/mlx5_0/device",
        );

        let c = cpu(root);
        assert_eq!(
            (c.model.as_deref(), c.sockets, c.cores, c.threads),
            (Some("Test CPU"), 2, 2, 3)
        );
        let n = numa_nodes(root);
        assert_eq!(n.len(), 2);
        assert_eq!((n[0].id, n[0].cpus.as_str(), n[0].memory_mib), (0, "0-1", Some(2048)));
        assert_eq!(n[1].memory_mib, None);
        let nics = nics(root);
        assert_eq!(nics.len(), 2);
        let eth = &nics[0];
        assert_eq!(eth.name, "eth0");
        assert_eq!(eth.kind, "ethernet");
        assert_eq!(eth.pci_bus_id.as_deref(), Some("0000:00:03.0"));
        assert_eq!(
            (eth.speed_mbps, eth.mtu, eth.numa_node),
            (Some(25000), Some(9000), Some(1))
        );
        assert!(!eth.is_virtual);
        assert_eq!(
            (nics[1].kind.as_str(), nics[1].speed_mbps, nics[1].is_virtual),
            ("loopback", None, true)
        );
        let rdma = rdma_devices(root);
        assert_eq!(rdma.len(), 1);
        assert_eq!(rdma[0].pci_bus_id.as_deref(), Some("0000:00:04.0"));
        assert_eq!(rdma[0].netdevs, vec!["ib0"]);
        assert_eq!(rdma[0].ports[0].state, "ACTIVE");
        assert_eq!(rdma[0].ports[0].link_layer, "InfiniBand");
        assert_eq!(
            pci_path(root, "0000:00:03.0").as_deref(),
            Some("pci0000:00/0000:00:03.0")
        );
    }

    #[test]
    fn an_empty_root_gives_an_empty_report_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        assert!(numa_nodes(dir.path()).is_empty());
        assert!(nics(dir.path()).is_empty());
        assert!(rdma_devices(dir.path()).is_empty());
        assert!(cpu(dir.path()).threads > 0);
    }
}
