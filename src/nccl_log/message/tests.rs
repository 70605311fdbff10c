//! Unit tests of `nccl_log::message`.

use super::*;

#[test]
fn channel_lines_of_every_format_give_their_connection() {
    let c = connection("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read").unwrap();
    assert_eq!((c.channel, c.from, c.to, c.side), (Some(0), 0, Some(1), None));
    let c = connection("Ring 03 : 2[3d000] -> 3[3e000] via direct shared memory").unwrap();
    assert_eq!((c.channel, c.to), (Some(3), Some(3)));
    assert!(matches!(c.via, Via::Shm { .. }));
    // an excerpt that kept the ends alone (NVIDIA/nccl#897)
    let c = connection("9[1a000] -> 2[6b000] [receive] via NET/IB/1").unwrap();
    assert_eq!((c.channel, c.from, c.side), (None, 9, Some(Side::Receive)));
    assert!(matches!(
        c.via,
        Via::Net {
            gdr: false,
            device: Some(1),
            ..
        }
    ));
    let c = connection("Channel 01/0 : 5[5] -> 12[4] [send] via NET/AWS Libfabric/1/GDRDMA/Shared").unwrap();
    assert!(matches!(&c.via, Via::Net { name, gdr: true, shared: true, .. } if name == "AWS Libfabric"));
    assert_eq!(connection("Connected all rings"), None);
}

#[test]
fn settings_subsystems_interfaces_and_hcas_read_as_printed() {
    assert_eq!(
        env_setting("NCCL_IB_DISABLE set by environment to 1."),
        Some(("NCCL_IB_DISABLE".into(), "1".into()))
    );
    assert_eq!(subsystem("NET/IB : Using [0]mlx5_0:1/IB"), Some("NET/IB"));
    assert_eq!(subsystem("NET/Plugin: Could not find: ofi"), Some("NET/Plugin"));
    assert_eq!(subsystem("Bootstrap: Using eth0:10.0.0.1<0>"), Some("Bootstrap"));
    assert_eq!(subsystem("AllReduce: opCount 0"), None);
    assert_eq!(subsystem("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"), None);
    let names: Vec<String> = interfaces(" [0]ibs85f0:192.168.1.14<0> [1]ib0:192.168.1.15<0>")
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["ibs85f0", "ib0"]);
    assert_eq!(interfaces(" eth0:10.0.92.140<0>")[0].address, "10.0.92.140");
    let h = hcas("NET/IB : Using [0]mlx5_3:1/RoCE ; OOB eth1:9.73.133.81<0>");
    assert_eq!(
        h,
        [Hca {
            port: "mlx5_3:1".into(),
            link: "RoCE".into()
        }]
    );
    assert_eq!(
        hcas("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB ib0:10.0.0.1<0>").len(),
        2
    );
}

#[test]
fn p2p_lines_of_every_form_parse() {
    let c = connection("Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read").unwrap();
    assert_eq!((c.channel, c.from, c.to, c.side), (Some(0), 0, Some(1), None));
    assert_eq!(
        c.via,
        Via::P2p {
            mode: "CUMEM".into(),
            read: true,
            copy_engine: false,
            through: None
        }
    );
    let c = connection("Channel 13/1 : 3[1c000] -> 2[1b000] via P2P/IPC/CE").unwrap();
    assert_eq!((c.channel, c.from, c.to), (Some(13), 3, Some(2)));
    assert!(matches!(c.via, Via::P2p { ref mode, copy_engine: true, read: false, .. } if mode == "IPC"));
    let c = connection("Channel 02/0 : 0[0] -> 1[1] via P2P/direct pointer/read").unwrap();
    assert!(matches!(c.via, Via::P2p { ref mode, read: true, .. } if mode == "direct"));
    let c = connection("Channel 05/0 : 0[0] -> 3[3] via P2P/indirect/1[1]/read").unwrap();
    assert!(matches!(c.via, Via::P2p { ref mode, through: Some(1), .. } if mode == "indirect"));
    let c = connection("Channel 00/0 : 0[0] -> 4[0] via P2P/MNNVL").unwrap();
    assert!(matches!(c.via, Via::P2p { ref mode, .. } if mode == "MNNVL"));
}

#[test]
fn shm_lines_parse_with_and_without_their_second_field() {
    let c = connection("Channel 00 : 0[0] -> 1[1] via SHM/direct/direct").unwrap();
    assert_eq!(
        c.via,
        Via::Shm {
            send: "direct".into(),
            recv: Some("direct".into())
        }
    );
    let c = connection("Channel 01 : 1[3d000] -> 0[1a000] via SHM/direct").unwrap();
    assert_eq!((c.from, c.to), (1, Some(0)));
    assert_eq!(
        c.via,
        Via::Shm {
            send: "direct".into(),
            recv: None
        }
    );
    let c = connection("Channel 00 : 0[0] -> 1[1] via SHM/CE/direct").unwrap();
    assert!(matches!(c.via, Via::Shm { ref send, .. } if send == "CE"));
}

#[test]
fn net_lines_carry_gdrdma_pxn_and_shared() {
    let c = connection("Channel 00/0 : 3[3] -> 4[0] [send] via NET/IB/0/GDRDMA").unwrap();
    assert_eq!(c.side, Some(Side::Send));
    assert_eq!(
        c.via,
        Via::Net {
            name: "IB".into(),
            device: Some(0),
            proxy: None,
            gdr: true,
            shared: false
        }
    );
    let c = connection("Channel 01/0 : 7[7] -> 0[0] [receive] via NET/IB/3(1)/GDRDMA(PCI)/Shared").unwrap();
    assert_eq!((c.from, c.to, c.side), (7, Some(0), Some(Side::Receive)));
    assert_eq!(
        c.via,
        Via::Net {
            name: "IB".into(),
            device: Some(3),
            proxy: Some(1),
            gdr: true,
            shared: true
        }
    );
    let c = connection("Channel 00 : 1[1b000] -> 2[1b000] [send] via NET/Socket/0").unwrap();
    assert!(matches!(c.via, Via::Net { ref name, gdr: false, proxy: None, .. } if name == "Socket"));
    // One-rank lines (CollNet/NVLS heads) have no arrow.
    let c = connection("Channel 00/0 : 0[0] via NET/IBext_v8/0/GDRDMA").unwrap();
    assert_eq!((c.from, c.to), (0, None));
}

#[test]
fn ring_listings_and_garbage_are_not_connections() {
    assert_eq!(connection("Channel 00/24 :    0   1   2   3   4   5   6   7"), None);
    assert_eq!(connection("Channel 00 : 0 1"), None);
    assert_eq!(connection("Channel x/0 : 0[0] -> 1[1] via P2P/IPC"), None);
    assert_eq!(connection("Channel 00/0 : a[0] -> 1[1] via P2P/IPC"), None);
    let c = connection("Channel 00/0 : 0[0] -> 1[1] via COLLNET/SHARP").unwrap();
    assert_eq!(c.via, Via::Other("COLLNET/SHARP".into()));
}
