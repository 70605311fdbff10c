//! GPUs and their links through NVML (nvml-wrapper), loaded at run time:
//! a machine without the NVIDIA driver gets an error to report, never a
//! panic or a failure to start. Built only with the `nvml` feature; the
//! stub at the bottom says how to get it.

use super::Gpu;

/// GPUs, and the GPU-GPU cells of the link matrix (`X`, `NV#` for bonded
/// NVLinks, else the PCIe path class).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvmlView {
    pub driver: Option<String>,
    pub gpus: Vec<Gpu>,
    pub cells: Vec<Vec<String>>,
}

/// NVLink links per GPU (NVML_NVLINK_MAX_LINKS is 18 since Hopper).
#[cfg(feature = "nvml")]
const MAX_LINKS: u32 = 18;

/// The cell between GPUs `i` and `j`: direct NVLinks, plus the links both
/// have to NVSwitches (every GPU pair on an NVSwitch system reaches the
/// other through its switch links), else `pcie`.
pub fn link_cell(direct: u32, switch_i: u32, switch_j: u32, pcie: &str) -> String {
    let nvlinks = direct + switch_i.min(switch_j);
    if nvlinks > 0 {
        format!("NV{nvlinks}")
    } else {
        pcie.to_string()
    }
}

/// NVML, loaded now. Driver installs ship libnvidia-ml.so.1; the
/// unversioned name needs the development package.
#[cfg(feature = "nvml")]
fn init() -> Result<nvml_wrapper::Nvml, String> {
    use nvml_wrapper::Nvml;
    Nvml::builder()
        .lib_path(std::ffi::OsStr::new("libnvidia-ml.so.1"))
        .init()
        .or_else(|_| Nvml::init())
        .map_err(|e| format!("NVML unavailable ({e})"))
}

#[cfg(feature = "nvml")]
pub fn probe() -> Result<NvmlView, String> {
    use nvml_wrapper::enum_wrappers::device::TopologyLevel;

    let nvml = init()?;
    let count = nvml.device_count().map_err(|e| format!("NVML device count: {e}"))?;
    let mut devices = Vec::new();
    let mut gpus = Vec::new();
    for index in 0..count {
        let d = nvml
            .device_by_index(index)
            .map_err(|e| format!("NVML device {index}: {e}"))?;
        let bus = d
            .pci_info()
            .map(|p| super::sysfs::normalize_bus_id(&p.bus_id).unwrap_or(p.bus_id))
            .unwrap_or_default();
        gpus.push(Gpu {
            index,
            name: d.name().unwrap_or_else(|_| "unknown GPU".into()),
            numa_node: super::sysfs::pci_numa_node(std::path::Path::new("/"), &bus),
            pci_bus_id: bus,
            uuid: d.uuid().ok(),
            memory_mib: d.memory_info().ok().map(|m| m.total >> 20),
        });
        devices.push(d);
    }
    // NVLinks: to other GPUs (by the remote end's bus id) or to switches.
    let n = devices.len();
    let mut direct = vec![vec![0u32; n]; n];
    let mut to_switch = vec![0u32; n];
    for (i, d) in devices.iter().enumerate() {
        for link in 0..MAX_LINKS {
            let l = d.link_wrapper_for(link);
            if !matches!(l.is_active(), Ok(true)) {
                continue;
            }
            let Ok(remote) = l.remote_pci_info() else {
                continue;
            };
            let remote = super::sysfs::normalize_bus_id(&remote.bus_id).unwrap_or(remote.bus_id);
            match gpus.iter().position(|g| g.pci_bus_id == remote) {
                Some(j) if j != i => direct[i][j] += 1,
                Some(_) => {}
                None => to_switch[i] += 1,
            }
        }
    }
    let mut cells = vec![vec![String::new(); n]; n];
    for i in 0..n {
        for j in 0..n {
            cells[i][j] = if i == j {
                "X".into()
            } else {
                let other = nvml.device_by_index(j as u32);
                let pcie = match other.and_then(|o| devices[i].topology_common_ancestor(o)) {
                    Ok(TopologyLevel::Internal | TopologyLevel::Single) => "PIX",
                    Ok(TopologyLevel::Multiple) => "PXB",
                    Ok(TopologyLevel::HostBridge) => "PHB",
                    Ok(TopologyLevel::Node) => "NODE",
                    Ok(TopologyLevel::System) => "SYS",
                    Err(_) => "?",
                };
                link_cell(direct[i][j], to_switch[i], to_switch[j], pcie)
            };
        }
    }
    Ok(NvmlView {
        driver: nvml.sys_driver_version().ok(),
        gpus,
        cells,
    })
}

/// Just the GPUs' names, in NVML's order: what a run's header records.
#[cfg(feature = "nvml")]
pub fn gpu_names() -> Result<Vec<String>, String> {
    let nvml = init()?;
    let count = nvml.device_count().map_err(|e| format!("NVML device count: {e}"))?;
    Ok((0..count)
        .filter_map(|i| nvml.device_by_index(i).ok()?.name().ok())
        .collect())
}

#[cfg(not(feature = "nvml"))]
pub fn gpu_names() -> Result<Vec<String>, String> {
    probe().map(|v| v.gpus.into_iter().map(|g| g.name).collect())
}

#[cfg(not(feature = "nvml"))]
pub fn probe() -> Result<NvmlView, String> {
    Err("this build has no NVML support (rebuild with the default `nvml` feature)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvlink_counts_win_over_the_pcie_class() {
        assert_eq!(link_cell(4, 0, 0, "SYS"), "NV4");
        assert_eq!(link_cell(0, 18, 18, "SYS"), "NV18");
        assert_eq!(link_cell(0, 18, 0, "PXB"), "PXB");
        assert_eq!(link_cell(2, 6, 12, "PIX"), "NV8");
        assert_eq!(link_cell(0, 0, 0, "PHB"), "PHB");
    }

    #[test]
    fn probing_without_a_driver_is_an_error_not_a_panic() {
        // On a machine with a driver this lists its GPUs; either way it returns.
        match probe() {
            Ok(view) => assert_eq!(view.cells.len(), view.gpus.len()),
            Err(why) => assert!(!why.is_empty()),
        }
    }
}
