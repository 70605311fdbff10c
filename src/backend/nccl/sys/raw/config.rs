//! `ncclConfig_t`, as nccl-tests fills it for the loaded release, and its
//! field offsets for the ABI check (tests/it/gpu_sim.rs).

use std::ffi::{c_char, c_int};

use super::NcclVersion;

/// `ncclConfig_t` up to `graphStreamOrdering` (2.30.7's layout; nccl.h:
/// "a versioned, append-only struct", so every release's struct is a
/// prefix of this one, and 2.31's fields follow it). `size` and `version`
/// tell NCCL which fields the caller knows of; NCCL reads that many bytes
/// and keeps its own defaults for the rest. `RawConfig::for_version` fills
/// it as a program compiled against the loaded release's nccl.h would.
/// The ABI check compares every offset with nccl.h.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct RawConfig {
    size: usize,
    magic: u32,
    version: u32,
    blocking: c_int,
    cga_cluster_size: c_int,
    min_ctas: c_int,
    max_ctas: c_int,
    net_name: *const c_char,
    split_share: c_int,
    traffic_class: c_int,
    comm_name: *const c_char,
    collnet_enable: c_int,
    cta_policy: c_int,
    shrink_share: c_int,
    nvls_ctas: c_int,
    n_channels_per_net_peer: c_int,
    nvlink_centric_sched: c_int,
    graph_usage_mode: c_int,
    num_rma_ctx: c_int,
    max_p2p_peers: c_int,
    graph_stream_ordering: c_int,
}

/// `NCCL_API_MAGIC` and `NCCL_CONFIG_UNDEF_INT` (nccl.h).
const NCCL_API_MAGIC: u32 = 0xcafe_beef;
const CONFIG_UNDEF_INT: c_int = c_int::MIN;

/// `nvlinkCentricSched`, which nccl-tests sets from NCCL 2.28 on.
const NVLINK_CENTRIC_SINCE: NcclVersion = NcclVersion::new(2, 28, 0);
/// `maxP2pPeers`, which nccl-tests' sendrecv sets from NCCL 2.30 on.
pub const MAX_P2P_PEERS_SINCE: NcclVersion = NcclVersion::new(2, 30, 0);
/// The "undefined" blocking value is accepted from NCCL 2.17 on; 2.14 to
/// 2.16 accept 0 and 1 only ("Invalid config blocking attribute value",
/// their init.cc), and their NCCL_CONFIG_INITIALIZER gives 1.
const UNDEF_BLOCKING_SINCE: NcclVersion = NcclVersion::new(2, 17, 0);

impl RawConfig {
    /// What nccl-tests' initComms passes when compiled against `version`'s
    /// nccl.h and run on it: NCCL_CONFIG_INITIALIZER of that release (its
    /// struct size, its version code, `blocking = 1` before 2.17 and every
    /// attribute undefined from 2.17 on), with `nvlinkCentricSched = 1`
    /// from 2.28 on; and, for a communicator of sendrecv (nccl-tests'
    /// SendRecvInitCommConfig), `maxP2pPeers = p2p_peers` from 2.30 on.
    pub fn for_version(version: NcclVersion, p2p_peers: Option<c_int>) -> RawConfig {
        let undef = CONFIG_UNDEF_INT;
        let since = |v: NcclVersion| version >= v;
        RawConfig {
            size: config_bytes(version),
            magic: NCCL_API_MAGIC,
            version: version_code(version),
            blocking: if since(UNDEF_BLOCKING_SINCE) { undef } else { 1 },
            cga_cluster_size: undef,
            min_ctas: undef,
            max_ctas: undef,
            net_name: std::ptr::null(),
            split_share: undef,
            traffic_class: undef,
            comm_name: std::ptr::null(),
            collnet_enable: undef,
            cta_policy: undef,
            shrink_share: undef,
            nvls_ctas: undef,
            n_channels_per_net_peer: undef,
            nvlink_centric_sched: if since(NVLINK_CENTRIC_SINCE) { 1 } else { undef },
            graph_usage_mode: undef,
            num_rma_ctx: undef,
            max_p2p_peers: match p2p_peers {
                Some(peers) if since(MAX_P2P_PEERS_SINCE) => peers,
                _ => undef,
            },
            graph_stream_ordering: undef,
        }
    }

    /// (`size`, `version`, `blocking`, `nvlinkCentricSched`, `maxP2pPeers`).
    #[cfg(test)]
    fn key_fields(&self) -> KeyFields {
        (
            self.size,
            self.version,
            self.blocking,
            self.nvlink_centric_sched,
            self.max_p2p_peers,
        )
    }
}

#[cfg(test)]
type KeyFields = (usize, u32, c_int, c_int, c_int);

/// `NCCL_VERSION(X, Y, Z)` of nccl.h (2.9 and later).
fn version_code(v: NcclVersion) -> u32 {
    v.major * 10000 + v.minor * 100 + v.patch
}

/// `sizeof(ncclConfig_t)` in `version`'s nccl.h (NCCL's git history), or
/// this struct's size for the releases whose struct is longer: each is the
/// end of its last field, rounded up to the struct's 8-byte alignment.
fn config_bytes(version: NcclVersion) -> usize {
    use std::mem::offset_of;
    let end = |offset: usize| (offset + size_of::<c_int>()).next_multiple_of(align_of::<RawConfig>());
    let v = |minor| NcclVersion::new(2, minor, 0);
    if version < v(17) {
        end(offset_of!(RawConfig, blocking)) // ncclConfig_v21400
    } else if version < v(18) {
        offset_of!(RawConfig, split_share) // ncclConfig_v21700, up to netName
    } else if version < v(27) {
        end(offset_of!(RawConfig, traffic_class)) // + splitShare (2.18), trafficClass (2.26)
    } else if version < v(28) {
        end(offset_of!(RawConfig, nvls_ctas)) // ncclConfig_v22700
    } else if version < v(29) {
        end(offset_of!(RawConfig, nvlink_centric_sched)) // ncclConfig_v22800
    } else if version < v(30) {
        end(offset_of!(RawConfig, num_rma_ctx)) // + graphUsageMode, numRmaCtx
    } else {
        size_of::<RawConfig>() // + maxP2pPeers (2.30), graphStreamOrdering (2.30.5)
    }
}

/// Field offsets of `RawConfig`, for the ABI check against nccl.h.
pub fn config_offsets() -> Vec<(&'static str, usize)> {
    use std::mem::offset_of;
    vec![
        ("size", offset_of!(RawConfig, size)),
        ("magic", offset_of!(RawConfig, magic)),
        ("version", offset_of!(RawConfig, version)),
        ("blocking", offset_of!(RawConfig, blocking)),
        ("cgaClusterSize", offset_of!(RawConfig, cga_cluster_size)),
        ("minCTAs", offset_of!(RawConfig, min_ctas)),
        ("maxCTAs", offset_of!(RawConfig, max_ctas)),
        ("netName", offset_of!(RawConfig, net_name)),
        ("splitShare", offset_of!(RawConfig, split_share)),
        ("trafficClass", offset_of!(RawConfig, traffic_class)),
        ("commName", offset_of!(RawConfig, comm_name)),
        ("collnetEnable", offset_of!(RawConfig, collnet_enable)),
        ("CTAPolicy", offset_of!(RawConfig, cta_policy)),
        ("shrinkShare", offset_of!(RawConfig, shrink_share)),
        ("nvlsCTAs", offset_of!(RawConfig, nvls_ctas)),
        ("nChannelsPerNetPeer", offset_of!(RawConfig, n_channels_per_net_peer)),
        ("nvlinkCentricSched", offset_of!(RawConfig, nvlink_centric_sched)),
        ("graphUsageMode", offset_of!(RawConfig, graph_usage_mode)),
        ("numRmaCtx", offset_of!(RawConfig, num_rma_ctx)),
        ("maxP2pPeers", offset_of!(RawConfig, max_p2p_peers)),
        ("graphStreamOrdering", offset_of!(RawConfig, graph_stream_ordering)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sizeof(ncclConfig_t) of each release's nccl.h (NCCL's git tags
    /// v2.14.3 to v2.30.7), its version code and NCCL_CONFIG_INITIALIZER's
    /// blocking, plus nccl-tests' nvlinkCentricSched and sendrecv's
    /// maxP2pPeers.
    #[test]
    fn the_config_is_the_loaded_release_s_initializer_with_nccl_tests_settings() {
        let u = CONFIG_UNDEF_INT;
        let cases: [(NcclVersion, Option<c_int>, KeyFields); 11] = [
            // 2.14-2.16 refuse the undefined blocking value
            (NcclVersion::new(2, 14, 3), Some(2), (24, 21403, 1, u, u)),
            (NcclVersion::new(2, 16, 5), None, (24, 21605, 1, u, u)),
            (NcclVersion::new(2, 17, 1), None, (40, 21701, u, u, u)),
            (NcclVersion::new(2, 19, 3), Some(2), (48, 21903, u, u, u)),
            (NcclVersion::new(2, 26, 2), None, (48, 22602, u, u, u)),
            (NcclVersion::new(2, 27, 3), None, (72, 22703, u, u, u)),
            (NcclVersion::new(2, 28, 3), Some(2), (80, 22803, u, 1, u)),
            (NcclVersion::new(2, 29, 2), Some(2), (88, 22902, u, 1, u)),
            (NcclVersion::new(2, 30, 3), Some(2), (96, 23003, u, 1, 2)),
            (NcclVersion::new(2, 30, 7), None, (96, 23007, u, 1, u)),
            // a newer release reads the fields this struct has
            (NcclVersion::new(2, 32, 3), Some(2), (96, 23203, u, 1, 2)),
        ];
        for (version, peers, want) in cases {
            assert_eq!(RawConfig::for_version(version, peers).key_fields(), want, "{version}");
        }
        assert_eq!(size_of::<RawConfig>(), 96);
    }
}
