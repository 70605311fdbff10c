//! NCCL's INFO log, read back: which transport every channel connection
//! took, the network, the graphs' path types, NVLink SHARP and the
//! variables NCCL saw. (The algorithm and protocol NCCL chose per
//! collective and size, its TUNING lines, are `nccl_log::message::tuning`'s.)
//!
//! Lines are split by the one NCCL log reader (`nccl_log`), which also
//! parses the channel and environment lines (`nccl_log::message`). Line
//! formats, NCCL 2.18 to 2.30 (the message after NCCL's prefix):
//! - `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read` (also `P2P/IPC`,
//!   `P2P/direct pointer`, `P2P/MNNVL`, `P2P/indirect/2[2]`, `/CE`); the
//!   brackets hold the device index (2.19 and later) or the PCI bus id in
//!   hex (`0[1b000]`, 2.18 and earlier); SHM lines have no `/0` after the
//!   channel;
//! - `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct` (sender and
//!   receiver copy mode; older lines have one field);
//! - `Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA`, with
//!   `(PCI)` after GDRDMA, `/Shared`, and `NET/IB/0(1)` when rank 1 relays
//!   the traffic to its NIC (PXN);
//! - `Using network IB` / `Socket` / a plugin's name;
//! - `Pattern 4, crossNic 0, nChannels 16, bw 40.000000/40.000000, type
//!   NVL/PIX, sameChannels 1` (GRAPH: intra-node and inter-node path type);
//! - `NVLS multicast support is [not ]available on dev 0[ (NVLS_NCHANNELS
//!   16)|, transport enabled, ...]` and `... 16 nvls channels ...`;
//! - `NCCL_P2P_LEVEL set by environment to NVL` (ENV).
//!
//! Pure and total: any text parses (unknown lines are skipped), and
//! nothing here panics.

use crate::nccl_log::Level;
pub use crate::nccl_log::message::{Connection, Side, Via};
use crate::nccl_log::message::{connection, env_setting};
use crate::topology::profile::Profile;

/// One `Pattern ...` line: a graph NCCL searched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Graph {
    pub pattern: u32,
    pub channels: u32,
    /// Path type inside a node: `NVL`, `NVB`, `C2C`, `PIX`, `PXB`, `PXN`,
    /// `P2C`, `PHB`, `SYS`, `NET`, `LOC`.
    pub intra: String,
    pub inter: String,
}

/// Everything read from one rank's log.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NcclLog {
    pub version: Option<String>,
    pub network: Option<String>,
    pub connections: Vec<Connection>,
    pub graphs: Vec<Graph>,
    /// From the `NVLS multicast support` line.
    pub nvls_available: Option<bool>,
    pub nvls_channels: Option<u32>,
    /// Variables NCCL reported as set by the environment.
    pub env: Vec<(String, String)>,
    pub warnings: Vec<String>,
}

/// `Pattern 4, crossNic 0, nChannels 16, bw 40.0/40.0, type NVL/PIX, sameChannels 1`.
fn parse_graph(msg: &str) -> Option<Graph> {
    let rest = msg.strip_prefix("Pattern ")?;
    let mut pattern = None;
    let mut channels = None;
    let mut types = None;
    for (i, item) in rest.split(',').map(str::trim).enumerate() {
        if i == 0 {
            pattern = item.parse().ok();
        } else if let Some(n) = item.strip_prefix("nChannels ") {
            channels = n.trim().parse().ok();
        } else if let Some(t) = item.strip_prefix("type ") {
            types = t.trim().split_once('/');
        }
    }
    let (intra, inter) = types?;
    Some(Graph {
        pattern: pattern?,
        channels: channels?,
        intra: intra.to_string(),
        inter: inter.to_string(),
    })
}

/// `... 16 nvls channels ...`.
fn parse_nvls_channels(msg: &str) -> Option<u32> {
    let words: Vec<&str> = msg.split_whitespace().collect();
    words
        .windows(3)
        .find(|w| w[1] == "nvls" && w[2].trim_end_matches(',') == "channels")
        .and_then(|w| w[0].parse().ok())
}

/// Parses a whole log. Lines that are not NCCL's, or not understood, are
/// skipped.
pub fn parse(text: &str) -> NcclLog {
    let mut log = NcclLog::default();
    for line in crate::nccl_log::lines(text) {
        let Some(nccl) = &line.nccl else {
            continue;
        };
        let msg = nccl.message.trim();
        match nccl.level {
            Level::Warn => log.warnings.push(msg.to_string()),
            Level::Info => read_info(&mut log, msg),
            Level::Trace | Level::Call => {}
        }
    }
    log
}

fn read_info(log: &mut NcclLog, msg: &str) {
    if let Some(version) = msg.strip_prefix("NCCL version ") {
        log.version = version.split_whitespace().next().map(String::from);
    } else if let Some(net) = msg.strip_prefix("Using network ") {
        log.network = Some(net.trim().to_string());
    } else if msg.starts_with("Channel ") {
        if let Some(c) = connection(msg) {
            log.connections.push(c);
        }
    } else if msg.starts_with("Pattern ") {
        if let Some(g) = parse_graph(msg) {
            log.graphs.push(g);
        }
    } else if let Some(rest) = msg.strip_prefix("NVLS multicast support is ") {
        log.nvls_available = Some(!rest.starts_with("not") && !rest.contains("transport disabled"));
    } else if let Some(env) = env_setting(msg) {
        log.env.push(env);
    } else if let Some(n) = parse_nvls_channels(msg) {
        log.nvls_channels = Some(n);
    }
}

/// Ring graphs are pattern 4; the first graph of that pattern.
const PATTERN_RING: u32 = 4;

impl NcclLog {
    /// The intra-node path type of the ring graph (`NVL`, `PIX`, ...),
    /// else of the first graph.
    pub fn intra_path(&self) -> Option<&str> {
        self.graphs
            .iter()
            .find(|g| g.pattern == PATTERN_RING)
            .or_else(|| self.graphs.first())
            .map(|g| g.intra.as_str())
    }

    /// NVLink SHARP is in use: NVLS channels, or NCCL said it is available.
    pub fn uses_nvls(&self) -> bool {
        match self.nvls_channels {
            Some(n) => n > 0,
            None => self.nvls_available == Some(true),
        }
    }

    /// The transports used, each once: P2P, SHM, NET, others, NVLS, each
    /// kind in the order first seen. `P2P/CUMEM(NVL)`, `SHM`, `SHM/CE`,
    /// `NET/IB/GDRDMA`, `NET/IB/GDRDMA/PXN`, `NET/Socket`, `NVLS`. The P2P
    /// label carries the ring graph's intra-node path type when the log has
    /// graph lines.
    pub fn labels(&self) -> Vec<String> {
        let mut found: Vec<(u8, String)> = Vec::new();
        let path = self.intra_path().map(|p| format!("({p})")).unwrap_or_default();
        let net_has = |name: &str, f: &dyn Fn(&Via) -> bool| {
            self.connections
                .iter()
                .any(|x| matches!(&x.via, Via::Net { name: n, .. } if n == name) && f(&x.via))
        };
        for c in &self.connections {
            let (kind, label) = match &c.via {
                Via::P2p { mode, .. } => (0, format!("P2P/{mode}{path}")),
                Via::Shm { send, recv } => {
                    let ce = send == "CE" || recv.as_deref() == Some("CE");
                    (1, if ce { "SHM/CE".into() } else { "SHM".into() })
                }
                Via::Net { name, .. } => {
                    let gdr = net_has(name, &|v| matches!(v, Via::Net { gdr: true, .. }));
                    let pxn = net_has(name, &|v| matches!(v, Via::Net { proxy: Some(_), .. }));
                    let label = format!(
                        "NET/{name}{}{}",
                        if gdr { "/GDRDMA" } else { "" },
                        if pxn { "/PXN" } else { "" }
                    );
                    (2, label)
                }
                Via::Other(text) => (3, text.split('/').next().unwrap_or(text).to_string()),
            };
            if !found.iter().any(|(_, l)| *l == label) {
                found.push((kind, label));
            }
        }
        if self.uses_nvls() {
            found.push((4, "NVLS".into()));
        }
        found.sort_by_key(|(kind, _)| *kind);
        found.into_iter().map(|(_, l)| l).collect()
    }

    /// Why this log contradicts `profile`, if it does. `same_node(a, b)`
    /// tells whether two ranks share a node (the log's ranks are the
    /// communicator's, which are the world's).
    pub fn contradiction(&self, profile: Profile, same_node: &dyn Fn(usize, usize) -> bool) -> Option<String> {
        let intra = |c: &Connection| c.to.is_none_or(|to| same_node(c.from, to));
        let count = |f: &dyn Fn(&Connection) -> bool| self.connections.iter().filter(|c| f(c)).count();
        let p2p = count(&|c| matches!(c.via, Via::P2p { .. }));
        let shm = count(&|c| matches!(c.via, Via::Shm { .. }));
        let net_intra = count(&|c| matches!(c.via, Via::Net { .. }) && intra(c));
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        match profile {
            Profile::Auto => None,
            Profile::Nvlink => {
                if shm > 0 {
                    Some(format!(
                        "{shm} connection{} went through host memory (SHM)",
                        plural(shm)
                    ))
                } else if net_intra > 0 {
                    Some(format!(
                        "{net_intra} connection{} inside a node went through the network",
                        plural(net_intra)
                    ))
                } else if let Some(path) = self
                    .intra_path()
                    .filter(|p| p2p > 0 && !["NVL", "NVB", "C2C"].contains(p))
                {
                    Some(format!("GPU peer-to-peer runs over {path}, not NVLink"))
                } else if self.uses_nvls() {
                    Some("NVLink SHARP (NVLS) is in use".into())
                } else {
                    None
                }
            }
            Profile::Nvls => (!self.uses_nvls()).then(|| match self.nvls_available {
                Some(false) => "NCCL reports NVLS multicast support as not available".into(),
                _ => "NCCL set up no NVLS channels".into(),
            }),
            Profile::Pcie => {
                if p2p > 0 {
                    Some(format!("{p2p} connection{} used GPU peer-to-peer (P2P)", plural(p2p)))
                } else if net_intra > 0 {
                    Some(format!(
                        "{net_intra} connection{} inside a node went through the network",
                        plural(net_intra)
                    ))
                } else {
                    None
                }
            }
            Profile::Ib | Profile::Socket => {
                let want = if profile == Profile::Ib { "IB" } else { "Socket" };
                let fits = |name: &str| {
                    if want == "IB" {
                        name.to_ascii_uppercase().starts_with("IB")
                    } else {
                        name.eq_ignore_ascii_case("Socket")
                    }
                };
                let other = self.connections.iter().find(|c| match &c.via {
                    Via::Net { name, .. } => !fits(name),
                    _ => true,
                });
                if let Some(c) = other {
                    let via = match &c.via {
                        Via::P2p { .. } => "P2P".to_string(),
                        Via::Shm { .. } => "SHM".to_string(),
                        Via::Net { name, .. } => format!("NET/{name}"),
                        Via::Other(t) => t.clone(),
                    };
                    Some(format!("a connection went through {via}, not NET/{want}"))
                } else {
                    match &self.network {
                        Some(n) if !fits(n) => Some(format!("NCCL uses network {n}, not {want}")),
                        _ => None,
                    }
                }
            }
            // MPI profiles never run with NCCL (checked before the run).
            Profile::Shm | Profile::Tcp | Profile::Ucx => None,
        }
    }
}

#[cfg(test)]
mod tests;
