//! The rules, one table entry each: the symptom's lines as NCCL prints
//! them per release (from NCCL's format strings, docs/doctor-rules-research.md),
//! what they mean, the fix as NVIDIA's documentation or an NCCL maintainer
//! states it (cited), the usual severity, and the function that judges the
//! lines. docs/doctor.md's rule list is generated from this table
//! (`rules_markdown`, checked by a test).

use super::facts::{Facts, Seen};
use super::judge;
use super::{Finding, Severity};

/// One symptom line: NCCL's format, the releases that print it, and the
/// text the doctor looks for in a line (empty: judged by the rule's code
/// from the format, not by a plain match).
pub struct Symptom {
    pub format: &'static str,
    pub releases: &'static str,
    pub find: &'static str,
}

const fn y(format: &'static str, releases: &'static str, find: &'static str) -> Symptom {
    Symptom { format, releases, find }
}

pub struct Rule {
    pub id: &'static str,
    pub title: &'static str,
    /// The severity of a finding; a rule's code may lower it where a line
    /// is normal (each rule's `meaning` says when).
    pub severity: Severity,
    pub symptoms: &'static [Symptom],
    pub meaning: &'static str,
    pub fix: &'static str,
    /// Where the fix is stated.
    pub cited: &'static str,
    pub judge: fn(&Facts, &Rule) -> Vec<Finding>,
}

impl Rule {
    /// A finding of this rule, resting on `lines`.
    pub fn finding(&self, facts: &Facts, severity: Severity, detail: String, lines: &[&Seen]) -> Finding {
        let mut hosts: Vec<String> = lines.iter().filter_map(|s| s.host().map(String::from)).collect();
        hosts.sort();
        hosts.dedup();
        let mut processes: Vec<String> = lines.iter().map(|s| facts.describe(s)).collect();
        processes.sort();
        processes.dedup();
        let mut evidence: Vec<_> = lines.iter().map(|s| facts.evidence(s)).collect();
        evidence.sort_by(|a, b| (&a.file, a.line).cmp(&(&b.file, b.line)));
        evidence.dedup();
        Finding {
            rule: self.id,
            severity,
            title: self.title,
            detail,
            hosts,
            processes,
            evidence,
            meaning: self.meaning,
            fix: self.fix,
            cited: self.cited,
        }
    }
}

/// Every rule, in the order the report lists findings of one severity.
pub const RULES: &[Rule] = &[
    Rule {
        id: "shm-too-small",
        title: "/dev/shm is too small for NCCL's shared-memory segments",
        severity: Severity::Error,
        symptoms: &[
            y(
                "Call to posix_fallocate failed : %s",
                "2.4.2-2.11.4 (include/shm.h)",
                "Call to posix_fallocate failed",
            ),
            y(
                "Error: failed to extend %s to %d bytes",
                "2.12.7-2.15.5; %ld 2.16.2-2.21.5; `, error: %s (%d)` 2.22.3+ (misc/shmutils.cc, os/linux.cc)",
                "failed to extend /dev/shm",
            ),
            y(
                "Error while %s shared memory segment %s (size %d)",
                "2.4.2-2.21.5; `, error: %s (%d)` 2.22.3+",
                "shared memory segment",
            ),
        ],
        meaning: "NCCL's SHM transport and proxy place their buffers in /dev/shm; a container's default (Docker 64 MB, Kubernetes 64 Mi) is too small, and initialisation fails.",
        fix: "Give the container a larger /dev/shm: `docker run --shm-size=1g --ulimit memlock=-1`, or in Kubernetes an emptyDir volume with `medium: Memory` mounted at /dev/shm.",
        cited: "NCCL troubleshooting, \"Shared memory\" (docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html); pytorch/ci-infra#490 for Kubernetes",
        judge: judge::node::shm,
    },
    Rule {
        id: "socket-where-ib",
        title: "traffic between processes goes over NCCL's socket transport (slow where InfiniBand/RoCE exists)",
        severity: Severity::Warn,
        symptoms: &[
            y("Using network Socket", "2.6.4+ (INIT)", ""),
            y(
                "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/Socket/%d",
                "every release (INIT|NET; `Ring` up to 2.6.4)",
                "",
            ),
            y(
                "NET/Socket : Using [0]ib0:...",
                "every release (INIT|NET): an IPoIB interface carries the sockets",
                "",
            ),
            y(
                "NCCL_IB_DISABLE set by environment to 1.",
                "every release (ENV from 2.16.5)",
                "",
            ),
            y(
                "NET/IB : No device found.",
                "2.4.2+ (INIT|NET), on a host whose peers list IB devices",
                "",
            ),
        ],
        meaning: "NCCL chose its TCP transport between nodes; on an InfiniBand or RoCE fabric this is typically 4 to 10 times slower. Sockets without any sign of InfiniBand in the log (an Ethernet cluster, or NCCL_IB_DISABLE/NCCL_NET asked for them) are an info.",
        fix: "Make InfiniBand work on every node (ibv_devinfo shows an active port, /dev/infiniband and libibverbs in the container) and unset NCCL_IB_DISABLE; \"Look like you want to use Infiniband, then make sure your Infiniband setup is working on both nodes. Otherwise you could set NCCL_IB_DISABLE=1 to use sockets but it will be much slower.\"",
        cited: "sjeaugey, NVIDIA/nccl-tests#188; sjeaugey, NVIDIA/nccl#958 (\"NET/IB: No device found.\" means the OS found no usable RoCE NIC: run ibv_devinfo)",
        judge: judge::net::socket_where_ib,
    },
    Rule {
        id: "bad-socket-ifname",
        title: "the bootstrap or socket interface is missing, loopback, virtual or unreachable",
        severity: Severity::Error,
        symptoms: &[
            y(
                "%s set by environment to %s (NCCL_SOCKET_IFNAME)",
                "every release (ENV)",
                "",
            ),
            y("NCCL_SOCKET_IFNAME set to %s", "2.6.4+ (NET)", ""),
            y(
                "ncclSocketInit: connecting to address %s with family %d is neither AF_INET(%d) nor AF_INET6(%d)",
                "2.16.2+ (`Net :` 2.10.3-2.15.5, `Error :` 2.8.x)",
                "is neither AF_INET",
            ),
            y(
                "Bootstrap : no socket interface found",
                "2.4.8+",
                "no socket interface found",
            ),
            y(
                "NET/Socket : no interface found",
                "2.4.2+",
                "NET/Socket : no interface found",
            ),
            y(
                "Bootstrap : Using%s / Bootstrap: Using%s / NET/Socket : Using%s",
                "2.4.8-2.23.4 / 2.24.3+ / every release",
                "",
            ),
            y(
                "%s:%d -> %d (misc/socket.cc, then bootstrap.cc, in one process)",
                "every release (the INFO trace of a returned error; `include/socket.h` and `.cu` files before 2.5)",
                "",
            ),
        ],
        meaning: "NCCL bootstraps or moves data over an interface the peers cannot reach: a name in NCCL_SOCKET_IFNAME that this host does not have (NCCL then connects to an empty address), loopback between nodes, Docker bridges and veth pairs next to the real interface, or an interface the bootstrap's connections fail on (an error returned from NCCL's socket code, then from bootstrap.cc: the bootstrap uses TCP sockets only, so only NCCL_SOCKET_IFNAME matters, e.g. IP over InfiniBand inside containers).",
        fix: "Set NCCL_SOCKET_IFNAME to the interface the nodes reach each other on (`=eth0` for exactly that name, `^docker,lo` to exclude); one name for every host (\"different NCCL_SOCKET_IFNAME names are not supported\": list them all, or set it per node in /etc/nccl.conf).",
        cited: "NVIDIA NCCL environment variables, NCCL_SOCKET_IFNAME (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html); sjeaugey, NVIDIA/nccl#697 (\"Could you try again setting NCCL_SOCKET_IFNAME=bond0?\"); AddyLaddy, NVIDIA/nccl-tests#219; sjeaugey, NVIDIA/nccl#1000 (\"Everything is only using TCP/IP sockets, so only NCCL_SOCKET_IFNAME matters\")",
        judge: judge::net::bad_ifname,
    },
    Rule {
        id: "gdr-off",
        title: "GPUDirect RDMA is off on an InfiniBand path",
        severity: Severity::Warn,
        symptoms: &[
            y(
                "Channel %02d/%d : %d[%d] -> %d[%d] [receive] via NET/%s/%d (without /GDRDMA)",
                "every release (INIT|NET); `/GDRDMA` when the connection uses GPUDirect RDMA",
                "",
            ),
            y(
                "NET/%s : GPU Direct RDMA Disabled for HCA %d '%s'",
                "2.13.4+ (NET; `(no module)` 2.5.6-2.12.12)",
                "GPU Direct RDMA Disabled",
            ),
            y(
                "GPU Direct RDMA Disabled for GPU %d / HCA %lx (distance %d > %d)",
                "2.6.4-2.29.7 (NET; TRACE from 2.30.3)",
                "",
            ),
        ],
        meaning: "Data between the NIC and the GPU is staged through host memory. NCCL uses GPUDirect RDMA when the peer-memory module (nvidia-peermem) is loaded or the driver and kernel offer DMA-BUF, and the GPU-NIC distance is within NCCL_NET_GDR_LEVEL. Only receive lines are judged: NCCL reads sends through GDR only under conditions. Where no channel line is in the log, `GPU Direct RDMA Disabled for HCA` says it alone: neither the module nor DMA-BUF is usable with that HCA (graph/topo.cc). NCCL 2.22.3 and earlier look for the module only as nv_peer_mem (/sys/kernel/mm/memory_peers), so a node with nvidia-peermem alone gets no GPUDirect RDMA from them (2.23.4 also checks /sys/module/nvidia_peermem).",
        fix: "Load the peer-memory module on every node (`sudo modprobe nvidia-peermem`, at every boot) or use a DMA-BUF capable driver and kernel; with NCCL 2.22.3 or earlier and nvidia-peermem, use NCCL 2.23.4 or later; check that ACS is off outside VMs.",
        cited: "NCCL troubleshooting, \"GPU Direct RDMA\"; AddyLaddy, NVIDIA/nccl#1412; sjeaugey, NVIDIA/nccl#897; xman1979, NVIDIA/nccl#1676 (the nvidia-peermem check of 2.23.4)",
        judge: judge::net::gdr_off,
    },
    Rule {
        id: "p2p-degraded",
        title: "GPUs of one node exchange data through host memory",
        severity: Severity::Warn,
        symptoms: &[
            y(
                "P2P is disabled between NVLINK connected GPUs %d and %d. This should not be the case given their connectivity, ...",
                "2.12.7+ (WARN, graph/paths.cc)",
                "P2P is disabled between NVLINK connected GPUs",
            ),
            y(
                "P2P is disabled between connected GPUs %d and %d. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.",
                "2.12.7+ (INIT)",
                "P2P is disabled between connected GPUs",
            ),
            y(
                "Channel %02d : %d[%d] -> %d[%d] via SHM/direct/direct",
                "2.13.4-2.30.4 (`SHM/direct` 2.30.7, `direct shared memory` up to 2.12)",
                "",
            ),
            y("NCCL_P2P_DISABLE set by environment to 1.", "every release", ""),
            y(
                "Pattern %d, crossNic %d, nChannels %d, bw %f/%f, type NVL/%s",
                "GRAPH",
                "",
            ),
        ],
        meaning: "Intra-node connections go through shared host memory instead of NVLink or PCIe peer-to-peer: P2P disabled by a variable, or refused by the hardware (ACS or an IOMMU redirecting PCIe peer traffic). SHM is normal between GPUs without P2P support (GeForce cards) or on different CPU sockets, and what the user asked for with NCCL_P2P_DISABLE=1 (then an info).",
        fix: "\"P2P not being functional is usually tied to ACS being enabled on the system. Disabling VT-d in the BIOS, passing iommu=pt to the linux kernel command line, or disabling ACS in the PCI switches usually help.\" Unset NCCL_P2P_DISABLE unless it is meant.",
        cited: "sjeaugey, NVIDIA/nccl#631; NCCL troubleshooting, \"PCI Access Control Services (ACS)\"",
        judge: judge::node::p2p,
    },
    Rule {
        id: "hca-missing",
        title: "an HCA is missing, cannot be opened or used, or one host has fewer",
        severity: Severity::Error,
        symptoms: &[
            y("NET/IB : Unable to open device %s", "2.4.2+", "Unable to open device"),
            y(
                "Call to ibv_open_device failed",
                "every release",
                "Call to ibv_open_device failed",
            ),
            y(
                "Call to ibv_modify_qp failed with error No such device",
                "every release (misc/ibvwrap.cc)",
                "ibv_modify_qp failed with error No such device",
            ),
            y(
                "NET/IB : Got async event : %s",
                "2.4.2-2.19.4; `NET/IB : %s:%d Got async event` 2.20.3-2.22.3",
                "Got async event",
            ),
            y(
                "NET/IB : Using%s ; OOB %s:%s (fewer ports than on the other hosts)",
                "2.4.2-2.11.4; `Using%s %s; OOB` 2.12.7+ (INIT|NET)",
                "",
            ),
            y("NET/IB : No device found.", "2.4.2+ (INIT|NET)", ""),
        ],
        meaning: "An HCA NCCL listed cannot be used (a container whose MOFED differs from the host's, a device not passed through), or a host lists fewer HCA ports than the others: NCCL skips a port that is not active without a word, so that host's rails are missing.",
        fix: "Check `ibv_devinfo` on the host named: every port the others have, state PORT_ACTIVE; exclude an unusable device with NCCL_IB_HCA (`^mlx5_3`); \"Sometimes those IB errors are caused by a mismatch between the MOFED version in the container and on the host OS.\"",
        cited: "AddyLaddy, NVIDIA/nccl#799; sjeaugey, NVIDIA/nccl#958; NVIDIA NCCL environment variables, NCCL_IB_HCA",
        judge: judge::net::hca,
    },
    Rule {
        id: "roce-gid-or-completion-error",
        title: "InfiniBand/RoCE completion or queue-pair errors",
        severity: Severity::Error,
        symptoms: &[
            y(
                "NET/IB : Got completion with error %d, opcode %d, len %d, vendor err %d",
                "2.4.2-2.9.9 (`from peer %s` 2.10.3-2.19.4, `status=%d` 2.20.3+)",
                "Got completion",
            ),
            y(
                "Call to ibv_modify_qp failed with error %s",
                "every release; `on dev %s:%d, ... local GID index %d, local GID %s, remote GID %s` 2.24.3+",
                "ibv_modify_qp failed",
            ),
            y("NCCL_IB_GID_INDEX set by environment to %d", "every release", ""),
        ],
        meaning: "Status 12 (transport retry exceeded) is a timeout: \"When it happens right away, it usually means the NICs can't talk to each other using RoCE\"; across routed RoCE v2 subnets the default GID (link-local) cannot reach the peer. Status 5 is a flushed request after an earlier error, 4 a local protection error (ACS and GPUDirect RDMA).",
        fix: "Set NCCL_IB_GID_INDEX to the RoCE v2 GID of the interface's IP (index 3 in the usual ConnectX table; `show_gids` lists it), run the OFED perftests between the hosts in the same conditions (GID index, traffic class), and fix the routing between the addresses the log names; on a rail-optimized fabric where NIC n reaches only NIC n of the other nodes, set NCCL_CROSS_NIC=0.",
        cited: "sjeaugey and the reporters, NVIDIA/nccl#426 (\"NCCL_IB_GID_INDEX=3 solved my issue\"); sjeaugey, NVIDIA/nccl#1170; stephenmsachs and a commenter, NVIDIA/nccl#2013 (\"Setting NCCL_CROSS_NIC=0 worked for me\")",
        judge: judge::net::completion,
    },
    Rule {
        id: "nvls-unavailable",
        title: "NVLink SHARP (NVLS) multicast is unavailable or failing",
        severity: Severity::Error,
        symptoms: &[
            y(
                "Failed to bind NVLink SHARP (NVLS) Multicast memory of size %ld : CUDA error %d '%s'. This is usually caused by a system or configuration error in the Fabric Manager or NVSwitches.",
                "2.27.3+ (WARN; 2.27.3-2.28.9 only with NCCL_NVLS_ENABLE=1, else an INFO `Proceeding without NVLS support.`)",
                "Failed to bind NVLink SHARP",
            ),
            y(
                "NVLS multicast support is not available on dev %d",
                "2.17.1+ (INIT)",
                "NVLS multicast support is not available",
            ),
            y("Cuda failure %d '%s' (transport/nvls.cc)", "2.17.1+", ""),
        ],
        meaning: "NVLS needs NVSwitch systems with the fabric manager running and the GPUs registered with it; without them NCCL runs without NVLS (2.27.3-2.28.9) or fails (2.29.2 and later). On GPUs without NVSwitch (PCIe cards, T4) \"not available\" is normal (an info).",
        fix: "Check the fabric manager and the GPUs' fabric state (`nvidia-smi -q | grep -A2 Fabric`: \"In Progress\" means not registered); test multicast with nvbandwidth or nvloom; NCCL_NVLS_ENABLE=0 runs without NVLS.",
        cited: "NCCL's own WARN text; AddyLaddy, NVIDIA/nccl#1672; the Fabric Manager user guide as quoted in siderolabs/extensions#717",
        judge: judge::node::nvls,
    },
    Rule {
        id: "collnet-unavailable",
        title: "CollNet (SHARP) was requested and is unavailable",
        severity: Severity::Warn,
        symptoms: &[
            y(
                "Cannot initialize CollNet, using point-to-point network instead",
                "2.9.6+ (`using %s instead` 2.6.4-2.8.4)",
                "Cannot initialize CollNet",
            ),
            y(
                "CollNet is not supported or fails to initialize, ignoring NCCL_ALGO=COLLNET",
                "2.8.3-2.19.4",
                "CollNet is not supported",
            ),
            y(
                "CollNet currently only supports up to %d GPUs per node, disabling CollNet",
                "2.9.6-2.22.3",
                "CollNet currently only supports",
            ),
            y(
                "Detected mixed local CollNet device counts across ranks (min %d, max %d). Set NCCL_IGNORE_COLLNET_MISMATCH=1 to continue.",
                "2.30.3+",
                "mixed local CollNet device counts",
            ),
        ],
        meaning: "CollNet needs a collnet plugin (NVIDIA's RDMA-SHARP plugin) and a SHARP-capable fabric; without them NCCL falls back to its point-to-point network.",
        fix: "Install and enable the SHARP plugin on every node, or leave NCCL_COLLNET_ENABLE unset.",
        cited: "NVIDIA NCCL environment variables, NCCL_COLLNET_ENABLE",
        judge: judge::by_symptoms,
    },
    Rule {
        id: "few-channels",
        title: "fewer channels than the topology gives, limited by a variable",
        severity: Severity::Warn,
        symptoms: &[
            y(
                "%d coll channels, %d collnet channels, %d nvls channels, %d p2p channels, %d p2p channels per peer",
                "2.20.3+ (INIT; two fields fewer 2.7.3-2.19.4)",
                "",
            ),
            y(
                "NCCL_MAX_NCHANNELS / NCCL_MAX_CTAS / NCCL_MIN_NCHANNELS set by environment to %d",
                "every release",
                "",
            ),
        ],
        meaning: "Few channels cap the bandwidth one communicator reaches (2 channels on an 8-NIC node use 2 NICs). A limit set by a variable is the usual cause; what the topology alone would give is in the GRAPH lines.",
        fix: "Remove the variables that limit channels: NVIDIA's environment page says the variables of its \"Debugging\" section \"should not be used in production nor retained in scripts, or only as workaround\".",
        cited: "NVIDIA NCCL environment variables (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html)",
        judge: judge::node::channels,
    },
    Rule {
        id: "env-or-version-mismatch",
        title: "NCCL settings or versions differ between ranks",
        severity: Severity::Error,
        symptoms: &[
            y(
                "NET/IB : req %d/%d tag %x peer %s collective mismatch error, local size %d remote size %d",
                "2.12.10-2.19.4 (other wordings every release)",
                "collective mismatch error",
            ),
            y(
                "NET/Socket : peer %s message truncated : receiving %d bytes instead of %d",
                "2.10.3+ (without peer 2.4.2-2.9.9)",
                "message truncated : receiving",
            ),
            y(
                "Mismatched NCCL version detected : rank %d version %d rank %d version %d",
                "2.23.4+",
                "Mismatched NCCL version detected",
            ),
            y(
                "NCCL version mismatch with remote peer %s (local: %d, remote %d)",
                "2.24.3+ (RAS)",
                "NCCL version mismatch with remote peer",
            ),
            y(
                "%s set by environment to %s (compared across processes) / NCCL version %s (compared across processes)",
                "every release",
                "",
            ),
        ],
        meaning: "Ranks disagree on protocol or buffer settings (NCCL_PROTO, NCCL_ALGO, NCCL_BUFFSIZE ...) or run different NCCL libraries, so they exchange buffers of different sizes and the job fails or hangs.",
        fix: "\"Looks like a version or configuration mismatch between two ranks ... check the log for environment variables set on one rank but not the other.\" Use one NCCL library and one set of NCCL_* variables on every rank (NCCL_SOCKET_IFNAME may differ per host).",
        cited: "sjeaugey, NVIDIA/nccl#1328; sjeaugey, NVIDIA/nccl#286",
        judge: judge::job::mismatch,
    },
    Rule {
        id: "net-plugin-failed",
        title: "a network plugin failed to load",
        severity: Severity::Warn,
        symptoms: &[
            y(
                "NET/Plugin : Plugin load (%s) returned %d : %s",
                "2.17.1-2.18.6 (`Plugin load returned %d : %s.` 2.4.2-2.16.5, 2.19.1-2.20.5)",
                "",
            ),
            y(
                "NET/Plugin: Could not find: %s. Using internal network plugin.",
                "2.22.3-2.25.1 (`%s/Plugin: Could not find:%s%s%s` 2.26.2+)",
                "",
            ),
            y("NET/Plugin: %s: %s (the loader's error)", "2.28.3+", ""),
            y(
                "NET/Plugin: Failed to find ncclNetPlugin symbol (>= v5). ncclNetPlugin symbols v4 and lower are not supported.",
                "2.19.1-2.25.1",
                "ncclNetPlugin symbols v4 and lower are not supported",
            ),
            y(
                "Failed to initialize any NET plugin",
                "2.27.3+ (WARN)",
                "Failed to initialize any NET plugin",
            ),
            y(
                "NET/OFI Could not find any optimal provider",
                "aws-ofi-nccl's WARN (get_ofi_provider, 2019 releases) when libfabric offers it no usable provider",
                "NET/OFI Could not find any optimal provider",
            ),
        ],
        meaning: "NCCL did not load the network plugin the platform needs (aws-ofi-nccl for EFA, the RDMA-SHARP plugin), or loaded it and the plugin could not start (\"This means the OFI plugin didn't initialize correctly. Since NCCL cannot use that plugin, it tries to use the next choices\"), and fell back to its own transports, usually sockets: a library path, ABI or provider problem. Not a finding: NCCL's default name (libnccl-net.so) not found on a system that needs no plugin, and the CollNet symbol lines.",
        fix: "Put the plugin's folder on LD_LIBRARY_PATH or name it with NCCL_NET_PLUGIN, and fix the libraries its loader error names; a plugin older than the v5 API is refused from 2.19.1.",
        cited: "NVIDIA NCCL environment variables, NCCL_NET_PLUGIN; NVIDIA-NeMo/RL#1973 and its fix #2410; sjeaugey, NVIDIA/nccl#229 (the OFI provider WARN)",
        judge: judge::net::plugin,
    },
    Rule {
        id: "warn-before-hang",
        title: "NCCL warned before the job failed or hung",
        severity: Severity::Error,
        symptoms: &[
            y(
                "socketProgress: Connection closed by remote peer %s",
                "2.16.2+ (`Net : Connection closed by remote peer` before)",
                "",
            ),
            y(
                "Bootstrap Root : rank %d of %d ranks has already checked in",
                "every release",
                "",
            ),
            y(
                "Bootstrap Root : mismatch in rank count from procs %d : %d",
                "2.4.2-2.22.3 (`mismatch in info from procs` 2.23.4+)",
                "",
            ),
            y("Socket recv failed while polling for opId=%p", "2.17.1+ (proxy.cc)", ""),
            y(
                "%s: Connect to %s failed : %s / socketPollConnect to %s failed with error %s",
                "2.20.3+",
                "",
            ),
            y("Cuda failure '%s' / Cuda failure %d '%s'", "every release", ""),
            y("any other WARN", "every release", ""),
        ],
        meaning: "Each WARN names the side that stopped; the first one per host is usually the cause and the later ones its echo. The doctor explains the ones it knows (listed in docs/doctor.md) and quotes the others.",
        fix: "Read the first WARN of each host: a peer that closed its connection died first (look at its host's log); two ranks checking in with one rank number is a launcher mapping error; `invalid device function` means the NCCL build lacks the GPU's architecture (\"It would look like NCCL was not compiled for your GPU architecture\").",
        cited: "sjeaugey, NVIDIA/nccl#444; NCCL's own WARN texts (src/misc/socket.cc, src/bootstrap.cc, src/proxy.cc)",
        judge: judge::job::warns,
    },
    Rule {
        id: "nccl-ras",
        title: "NCCL's RAS report shows ranks that disagree or are gone",
        severity: Severity::Error,
        symptoms: &[
            y(
                "Communicator ranks have different %s operation counts",
                "2.24.3+ (the ncclras report)",
                "Communicator ranks have different",
            ),
            y(
                "%d job process%s considered dead (unreachable via the RAS network)",
                "2.24.3+ (the ncclras report)",
                "considered dead (unreachable via the RAS network)",
            ),
            y(
                "Warning: missing data from %d process%s",
                "2.24.3+ (the ncclras report)",
                "Warning: missing data from",
            ),
        ],
        meaning: "NCCL's RAS client (`ncclras`, 2.24.3 and later) asked every process of a running job: ranks of one communicator at different operation counts are where a hang sits (the ranks behind are the ones to look at), and dead or silent processes are gone. Its report is passed through as it is.",
        fix: "Look at the ranks the report names first: the ones behind in operation count, or the dead processes' hosts; the report's own sections list them.",
        cited: "NCCL's RAS (src/ras/client_support.cc); an example report in NVIDIA/nccl#1911",
        judge: judge::by_symptoms,
    },
    Rule {
        id: "nccl-hint",
        title: "NCCL's own hint",
        severity: Severity::Info,
        symptoms: &[y("HINT: %s", "2.30.7+ (NET or GRAPH)", "HINT: ")],
        meaning: "NCCL 2.30.7 explains some failures itself, in the lines after the WARN they belong to (ibv_modify_qp errors, completion statuses, a topology file); they are passed through as NCCL printed them.",
        fix: "What the hint says.",
        cited: "NCCL 2.30.7 (misc/ibvwrap.cc, transport/net_ib/common.h, graph/xml.h)",
        judge: judge::by_symptoms,
    },
];

/// docs/doctor.md's rule list: every rule with its symptom lines per
/// release, what it means, the fix and where it is stated.
pub fn rules_markdown() -> String {
    let mut out = String::new();
    for r in RULES {
        out += &format!("### {}: {}\n\n", r.id, r.title);
        out += &format!("Severity: {}.\n\n", r.severity.name());
        out += "| symptom (NCCL's format) | releases |\n|---|---|\n";
        for s in r.symptoms {
            out += &format!(
                "| `{}` | {} |\n",
                s.format.replace('|', "\\|"),
                s.releases.replace('|', "\\|")
            );
        }
        out += &format!("\n{}\n\nFix: {}\n\nSource: {}.\n\n", r.meaning, r.fix, r.cited);
    }
    out
}
