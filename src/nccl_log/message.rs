//! What NCCL's messages say, where more than one reader needs it: a
//! channel connection's transport (the observation's labels, the doctor's
//! transport rules), a variable NCCL reports as set by the environment,
//! an interface list, the subsystem a message names itself by.
//!
//! Formats, NCCL 2.4 to 2.30 (docs/doctor-rules-research.md has each
//! string per release):
//! - `Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read` (also `P2P/IPC`,
//!   `P2P/direct pointer`, `P2P/MNNVL`, `P2P/indirect/2[2]`, `/CE`); the
//!   brackets hold the device index (2.18.3 and later) or the PCI bus id
//!   in hex (`0[1b000]`); SHM lines have no `/0` after the channel;
//!   `Ring 00 : 0[0] -> 1[1] via ...` up to 2.6.4; a quoted excerpt may
//!   keep only `0[0] -> 1[1] [send] via ...`;
//! - `Channel 00 : 0[0] -> 1[1] via SHM/direct/direct` (sender and
//!   receiver copy mode; `SHM/direct` from 2.30.7; `direct shared memory`
//!   up to 2.12);
//! - `Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA`, with
//!   `(PCI)` after GDRDMA, `/Shared`, and `NET/IB/0(1)` when rank 1 relays
//!   the traffic to its NIC (PXN);
//! - `NCCL_P2P_LEVEL set by environment to NVL` (`.` after an integer);
//! - `NET/Socket : Using [0]eth0:10.0.0.1<0> [1]ib0:...`, `Bootstrap :
//!   Using eth0:...`, `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE [RO];
//!   OOB eth0:...`.

/// Which end of a NET connection a line describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Send,
    Receive,
}

/// The transport of one connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Via {
    P2p {
        /// `CUMEM`, `IPC`, `MNNVL`, `direct` (same process) or `indirect`.
        mode: String,
        read: bool,
        /// Copy engine instead of SM loads and stores.
        copy_engine: bool,
        /// The GPU an indirect connection goes through.
        through: Option<usize>,
    },
    Shm {
        send: String,
        recv: Option<String>,
    },
    Net {
        /// `IB`, `Socket`, or a plugin's name (`AWS Libfabric`).
        name: String,
        device: Option<u32>,
        /// The rank whose NIC carries the traffic (PXN), when not this one.
        proxy: Option<usize>,
        gdr: bool,
        shared: bool,
    },
    /// A transport this parser does not know (the text after `via `).
    Other(String),
}

/// One `Channel ... via ...` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Connection {
    /// `None` on an excerpt that kept only the ends.
    pub channel: Option<u32>,
    pub from: usize,
    /// `None` for lines that name one rank only.
    pub to: Option<usize>,
    pub side: Option<Side>,
    pub via: Via,
}

/// `0[0]`, `12[1b000]`, `3`: the rank before the bracket.
fn rank_of(endpoint: &str) -> Option<usize> {
    let digits = endpoint.trim().split('[').next()?.trim();
    digits.parse().ok()
}

fn parse_via(text: &str) -> Via {
    let text = text.trim();
    if text == "direct shared memory" {
        return Via::Shm {
            send: "direct".into(),
            recv: None,
        };
    }
    let fields: Vec<&str> = text.split('/').map(str::trim).collect();
    match fields.first().copied() {
        Some("P2P") => {
            let mode = match fields.get(1).copied().unwrap_or("") {
                "direct pointer" => "direct".to_string(),
                m => m.to_string(),
            };
            let through = if mode == "indirect" {
                fields.get(2).and_then(|f| rank_of(f))
            } else {
                None
            };
            Via::P2p {
                read: fields.contains(&"read"),
                copy_engine: fields.contains(&"CE"),
                mode,
                through,
            }
        }
        Some("SHM") => Via::Shm {
            send: fields.get(1).unwrap_or(&"direct").to_string(),
            recv: fields.get(2).map(|s| s.to_string()),
        },
        Some("NET") if fields.len() >= 2 => {
            let (device, proxy) = match fields.get(2) {
                Some(dev) => match dev.split_once('(') {
                    Some((d, p)) => (d.trim().parse().ok(), p.trim_end_matches(')').trim().parse().ok()),
                    None => (dev.parse().ok(), None),
                },
                None => (None, None),
            };
            Via::Net {
                name: fields[1].to_string(),
                device,
                proxy,
                gdr: fields.iter().skip(3).any(|f| f.starts_with("GDRDMA")),
                shared: fields.iter().skip(3).any(|f| *f == "Shared"),
            }
        }
        _ => Via::Other(text.to_string()),
    }
}

/// `Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/0` (or `Ring 00 : ...`,
/// or the ends alone).
pub fn connection(msg: &str) -> Option<Connection> {
    let (channel, rest) = match msg.strip_prefix("Channel ").or_else(|| msg.strip_prefix("Ring ")) {
        Some(rest) => {
            let (channel, rest) = rest.split_once(" : ")?;
            (Some(channel.split('/').next()?.trim().parse().ok()?), rest)
        }
        None => (None, msg),
    };
    let (ends, via) = rest.split_once(" via ")?;
    let ends = ends.trim_end();
    let (ends, side) = if let Some(e) = ends.strip_suffix("[send]") {
        (e, Some(Side::Send))
    } else if let Some(e) = ends.strip_suffix("[receive]") {
        (e, Some(Side::Receive))
    } else {
        (ends, None)
    };
    let (from, to) = match ends.split_once("->") {
        Some((a, b)) => (rank_of(a)?, Some(rank_of(b)?)),
        None => (rank_of(ends)?, None),
    };
    Some(Connection {
        channel,
        from,
        to,
        side,
        via: parse_via(via),
    })
}

/// `NCCL_P2P_LEVEL set by environment to NVL` (integers end with `.`).
pub fn env_setting(msg: &str) -> Option<(String, String)> {
    let (name, value) = msg.split_once(" set by environment to ")?;
    let name = name.trim();
    if !name.starts_with("NCCL_") || name.contains(' ') {
        return None;
    }
    let value = value.trim();
    let value = value.strip_suffix('.').unwrap_or(value);
    Some((name.to_string(), value.to_string()))
}

/// The subsystem a message names itself by: `NET/IB` in `NET/IB : Using`,
/// `NET/Plugin` in `NET/Plugin: Could not find ...`, `Bootstrap`, `RAS`.
pub fn subsystem(msg: &str) -> Option<&str> {
    let end = msg.find([' ', ':'])?;
    let tag = &msg[..end];
    let after = msg[end..].trim_start_matches(' ');
    let named = tag.contains('/') || tag == "Bootstrap" || tag == "RAS";
    let tag_chars = tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '/' || c == '_');
    (named && tag_chars && !tag.is_empty() && after.starts_with(':')).then_some(tag)
}

/// One interface of a `Using` list: `[0]eth0:10.0.0.1<0>` or `eth0:10.0.0.1<0>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interface {
    pub name: String,
    /// The address as printed (may be empty).
    pub address: String,
}

/// The interfaces of `NET/Socket : Using ...`, `Bootstrap : Using ...` or
/// the OOB part of `NET/IB : Using ...`: every `name:address<port>` word.
pub fn interfaces(list: &str) -> Vec<Interface> {
    list.split_whitespace()
        .filter_map(|w| {
            let w = w.trim_end_matches(';');
            let w = match w.strip_prefix('[') {
                Some(rest) => rest.split_once(']')?.1,
                None => w,
            };
            let (name, rest) = w.split_once(':')?;
            if name.is_empty() || !w.ends_with('>') {
                return None;
            }
            let address = rest.rsplit_once('<').map_or(rest, |(a, _)| a);
            Some(Interface {
                name: name.to_string(),
                address: address.to_string(),
            })
        })
        .collect()
}

/// One HCA port of `NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hca {
    /// `mlx5_0:1`: device and port.
    pub port: String,
    /// `IB`, `RoCE`.
    pub link: String,
}

/// The HCA ports of a `NET/IB : Using` message (before `; OOB`).
pub fn hcas(msg: &str) -> Vec<Hca> {
    let list = msg.split_once("Using").map_or("", |(_, l)| l);
    let list = list.split(';').next().unwrap_or("");
    list.split_whitespace()
        .filter_map(|w| {
            let rest = w.strip_prefix('[')?.split_once(']')?.1;
            let (port, link) = rest.split_once('/')?;
            Some(Hca {
                port: port.to_string(),
                link: link.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
