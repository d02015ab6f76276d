# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._rdma import (
    RdmaParseError,
    common_gid_index,
    dcb_qos,
    interface_drivers,
    gid_ipv4,
    merge_ports,
    normalise_gid,
    parse_gid_lines,
    parse_ibdev2netdev,
    parse_dcb_app_dscp,
    parse_dcb_pfc,
    parse_ibv_devinfo,
    parse_mlnx_qos,
    parse_mlxconfig_query,
    parse_rdma_link,
    parse_show_gids,
    read_sysfs,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rdma"


def fixture(name):
    return (FIXTURES / name).read_text()


# ibv_devinfo

def test_ibv_devinfo_cx7_roce_twelve_hcas():
    hcas = parse_ibv_devinfo(fixture("ibv_devinfo__cx7_roce_12hca.txt"))
    assert [hca["hca_id"] for hca in hcas] == ["mlx5_%d" % index for index in range(12)]
    assert hcas[0]["fw_ver"] == "28.43.3608"
    assert hcas[0]["board_id"] == "MT_0000000838"
    assert hcas[0]["phys_port_cnt"] == 1
    assert hcas[0]["ports"][0] == {
        "port": 1, "state": "PORT_ACTIVE", "max_mtu": 4096, "active_mtu": 4096, "sm_lid": 0, "port_lid": 0,
        "port_lmc": "0x00", "link_layer": "Ethernet", "gids": [],
    }
    ports = [hca["ports"][0] for hca in hcas]
    # The four MT_0000000834 ports kept a 1500 netdev MTU: RoCE MTU 1024; two of the twelve are down.
    assert sorted(port["active_mtu"] for port in ports) == [1024] * 4 + [4096] * 8
    assert [port["state"] for port in ports].count("PORT_DOWN") == 2
    assert {port["link_layer"] for port in ports} == {"Ethernet"}


def test_ibv_devinfo_cx6_infiniband():
    (hca,) = parse_ibv_devinfo(fixture("ibv_devinfo__cx6_infiniband.txt"))
    assert hca["hca_id"] == "mlx5_0"
    assert hca["vendor_part_id"] == "4123"
    (port,) = hca["ports"]
    assert (port["state"], port["link_layer"], port["active_mtu"], port["sm_lid"], port["port_lid"]) == (
        "PORT_ACTIVE", "InfiniBand", 4096, 35, 35)


def test_ibv_devinfo_old_mlx4_format_with_device_ports_line():
    (hca,) = parse_ibv_devinfo(fixture("ibv_devinfo__mlx4_old_format_2port.txt"))
    assert hca["hca_id"] == "mlx4_1"
    assert hca["phys_port_cnt"] == 2
    assert [(port["port"], port["state"], port["sm_lid"]) for port in hca["ports"]] == [
        (1, "PORT_ACTIVE", 1), (2, "PORT_DOWN", 0)]
    assert "Device ports" not in hca


def test_ibv_devinfo_verbose_port_excerpt_keeps_the_gid_and_speed():
    # An excerpt starts inside an HCA: with no hca_id line it is refused rather than read wrongly.
    with pytest.raises(RdmaParseError):
        parse_ibv_devinfo(fixture("ibv_devinfo_-v__port_excerpt_ib.txt"))
    (hca,) = parse_ibv_devinfo("hca_id:\tmlx5_0\n" + fixture("ibv_devinfo_-v__port_excerpt_ib.txt"))
    (port,) = hca["ports"]
    assert port["active_speed"] == "50.0 Gbps (64)"
    assert port["phys_state"] == "LINK_UP"
    assert port["gid_tbl_len"] == 8
    assert port["gids"] == [{"index": 0, "gid": "fe80:0000:0000:0000:88e9:a4ff:ff25:a462", "type": None}]


def test_ibv_devinfo_without_devices():
    assert parse_ibv_devinfo("No IB devices found\n") == []
    assert parse_ibv_devinfo("") == []


def test_gid_lines_of_ibv_devinfo_vvv_find_index_3_as_the_rocev2_ipv4_gid():
    gids = parse_gid_lines(fixture("ibv_devinfo_-vvv_grep_GID__juniper_h100.txt"))
    assert [(gid["index"], gid["type"]) for gid in gids] == [
        (0, "RoCE v1"), (1, "RoCE v2"), (2, "RoCE v1"), (3, "RoCE v2"), (4, "RoCE v1"), (5, "RoCE v2")]
    # Compressed and full forms of the same GID compare equal once normalised.
    assert gids[2]["gid"] == gids[3]["gid"] == "0000:0000:0000:0000:0000:ffff:0ac8:010a"
    assert gid_ipv4(gids[3]["gid"]) == "10.200.1.10"
    port = merge_ports(devinfo=[{"hca_id": "mlx5_0", "ports": [{"port": 1, "link_layer": "Ethernet", "gids": gids}]}])[0]
    assert port["roce_v2_ipv4_gid"] == {"index": 3, "gid": gids[3]["gid"], "type": "RoCE v2", "ipv4": "10.200.1.10"}


# show_gids

def test_show_gids_single_roce_port():
    rows = parse_show_gids(fixture("show_gids__roce_single.txt"))
    assert [(row["index"], row["type"], row["ipv4"], row["netdev"]) for row in rows] == [
        (0, "RoCE v1", None, "rdma0"), (1, "RoCE v2", None, "rdma0"),
        (2, "RoCE v1", "192.168.211.242", "rdma0"), (3, "RoCE v2", "192.168.211.242", "rdma0")]
    (port,) = merge_ports(show_gids=rows, devinfo=[{"hca_id": "mlx5_0", "ports": [{"port": 1, "link_layer": "Ethernet", "gids": []}]}])
    assert port["netdev"] == "rdma0"
    assert port["roce_v2_ipv4_gid"]["index"] == 3
    assert port["roce_v2_ipv4_gid"]["ipv4"] == "192.168.211.242"


def test_show_gids_lag_bond_device():
    rows = parse_show_gids(fixture("show_gids__roce_lag_bond.txt"))
    assert {row["dev"] for row in rows} == {"mlx5_bond_0"}
    assert {row["netdev"] for row in rows} == {"bond0"}
    assert [row["ipv4"] for row in rows if row["ipv4"]] == ["10.96.83.26", "10.96.83.26"]


def test_show_gids_with_empty_ipv4_and_netdev_columns_separated_by_spaces():
    rows = parse_show_gids(fixture("show_gids__mixed_roce_no_ip_plus_ib_no_netdev__spaces.txt"))
    assert [(row["dev"], row["index"], row["ipv4"], row["type"], row["netdev"]) for row in rows] == [
        ("mlx5_0", 0, None, "RoCE v1", "ens11f0"), ("mlx5_0", 1, None, "RoCE v2", "ens11f0"),
        ("mlx5_1", 0, None, "RoCE v1", None)]
    # A RoCE port without an IPv4 address has no RoCEv2 IPv4 GID: NCCL would fall back to a link-local one.
    ports = merge_ports(show_gids=rows, devinfo=[{"hca_id": "mlx5_0", "ports": [{"port": 1, "link_layer": "Ethernet", "gids": []}]}])
    assert ports[0]["roce_v2_ipv4_gid"] is None
    assert common_gid_index(ports) is None


def test_show_gids_refuses_other_output():
    with pytest.raises(RdmaParseError):
        parse_show_gids("mlx5_0 port 1 ==> ib0 (Up)\n")


# ibdev2netdev

def test_ibdev2netdev_cx7_mixed_states():
    assert parse_ibdev2netdev(fixture("ibdev2netdev__cx7_mixed.txt")) == [
        {"ibdev": "mlx5_0", "port": 1, "netdev": "ens3np0", "up": False, "pci_address": None},
        {"ibdev": "mlx5_1", "port": 1, "netdev": "enp77s0np0", "up": False, "pci_address": None},
        {"ibdev": "mlx5_2", "port": 1, "netdev": "ens9f0np0", "up": True, "pci_address": None},
        {"ibdev": "mlx5_3", "port": 1, "netdev": "ens9f1np1", "up": True, "pci_address": None},
    ]


def test_ibdev2netdev_infiniband_and_verbose_format():
    assert [(row["ibdev"], row["netdev"], row["up"]) for row in parse_ibdev2netdev(fixture("ibdev2netdev__ib.txt"))] == [
        ("mlx5_0", "ib0", True), ("mlx5_1", "ib1", True)]
    assert parse_ibdev2netdev(fixture("ibdev2netdev_-v__format_example.txt")) == [
        {"ibdev": "mlx5_0", "port": 1, "netdev": "ib0", "up": True, "pci_address": "0000:a3:00.0"}]


def test_ibdev2netdev_verbose_with_the_pci_address_first():
    line = "0000:1a:00.0 mlx5_0 (MT4129 - MCX75310AAS-NEAT) ConnectX-7 fw 28.43.3608 port 1 (ACTIVE) ==> ens1np0 (Up)\n"
    assert parse_ibdev2netdev(line) == [{"ibdev": "mlx5_0", "port": 1, "netdev": "ens1np0", "up": True, "pci_address": "0000:1a:00.0"}]


# rdma link

@pytest.mark.parametrize("name, expected", [
    ("rdma_link__new.txt", [("mlx5_0", 1, "ACTIVE", "LINK_UP", "ens6f0np0"), ("mlx5_1", 1, "ACTIVE", "LINK_UP", "ens6f1np1")]),
    ("rdma_link__inbox_naming_padded.txt", [
        ("rocep1s0f0", 1, "ACTIVE", "LINK_UP", "enp1s0f0np0"), ("rocep1s0f1", 1, "ACTIVE", "LINK_UP", "enp1s0f1np1"),
        ("roceP2p1s0f0", 1, "ACTIVE", "LINK_UP", "enP2p1s0f0np0"), ("roceP2p1s0f1", 1, "ACTIVE", "LINK_UP", "enP2p1s0f1np1")]),
    ("rdma_link__old_iproute2.txt", [
        ("i40iw0", 1, "DOWN", "NOP", None), ("i40iw1", 1, "ACTIVE", "NOP", None),
        ("mlx5_0", 1, "DOWN", "DISABLED", "ens803f0"), ("mlx5_1", 1, "ACTIVE", "LINK_UP", "ens803f1")]),
])
def test_rdma_link(name, expected):
    rows = parse_rdma_link(fixture(name))
    assert [(row["ibdev"], row["port"], row["state"], row["physical_state"], row["netdev"]) for row in rows] == expected


# mlnx_qos

def test_mlnx_qos_default_trust_pcp_pfc_off():
    qos = parse_mlnx_qos(fixture("mlnx_qos__default_pcp.txt"))
    assert qos["dcbx_mode"] == "OS controlled"
    assert qos["trust"] == "pcp"
    assert qos["cable_len"] == 7
    assert qos["pfc_enabled"] == [0] * 8
    assert qos["pfc_priorities"] == []


def test_mlnx_qos_trust_dscp_mapping_without_pfc_table():
    qos = parse_mlnx_qos(fixture("mlnx_qos__trust_dscp_head.txt"))
    assert qos["trust"] == "dscp"
    assert 26 in qos["dscp2prio"][3]
    assert qos["dscp2prio"][3] == list(range(24, 32))
    # The source elides the PFC table: unknown, not "off".
    assert qos["pfc_enabled"] is None


def test_mlnx_qos_pfc_row_is_read_by_the_header_not_by_the_word_priority_3():
    text = fixture("mlnx_qos__default_pcp.txt").replace(
        "enabled     0   0   0   0   0   0   0   0", "enabled     0   0   0   1   0   0   0   0")
    assert parse_mlnx_qos(text)["pfc_priorities"] == [3]


def test_mlnx_qos_refuses_an_error_message():
    with pytest.raises(RdmaParseError):
        parse_mlnx_qos("Netlink error: No such device\n")


# mlxconfig

def test_mlxconfig_query_next_boot_column():
    params = parse_mlxconfig_query(fixture("mlxconfig_-e_q__constructed.txt"))
    assert params["LINK_TYPE_P1"] == {"default": "1", "current": "2", "next_boot": "2"}
    assert params["SRIOV_EN"]["next_boot"] == "1"
    assert params["NUM_OF_VFS"] == {"default": "0", "current": "0", "next_boot": "8"}
    assert params["ATS_ENABLED"]["next_boot"] == "0"
    assert set(params) == {"LINK_TYPE_P1", "SRIOV_EN", "NUM_OF_VFS", "ATS_ENABLED", "ADVANCED_PCI_SETTINGS"}


# GIDs and sysfs

def test_normalise_gid_and_ipv4_mapping():
    assert normalise_gid("::ffff:10.200.1.10") == "0000:0000:0000:0000:0000:ffff:0ac8:010a"
    assert gid_ipv4("fe80:0000:0000:0000:0ac0:ebff:fe21:03da") is None
    with pytest.raises(RdmaParseError):
        normalise_gid("not-a-gid")


def _sysfs_port(root, ibdev, pci, netdev, link_layer, gids):
    pci_dir = root / "devices" / "pci0000:00" / pci
    (pci_dir / "net" / netdev).mkdir(parents=True)
    device = root / "class" / "infiniband" / ibdev
    port = device / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True)
    (device / "device").symlink_to(pci_dir)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    (port / "link_layer").write_text(link_layer + "\n")
    (port / "rate").write_text("400 Gb/sec (4X NDR)\n")
    for index in range(8):
        gid, gid_type = gids[index] if index < len(gids) else ("0000:0000:0000:0000:0000:0000:0000:0000", "")
        (port / "gids" / str(index)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(index)).write_text(gid_type + "\n")
        (port / "gid_attrs" / "ndevs" / str(index)).write_text((netdev if gid_type else "") + "\n")


def test_sysfs_is_read_and_unset_gids_are_skipped(tmp_path):
    assert read_sysfs(str(tmp_path)) is None
    _sysfs_port(tmp_path, "mlx5_0", "0000:1a:00.0", "ens1np0", "Ethernet", [
        ("fe80:0000:0000:0000:1270:fdff:fe27:250b", "IB/RoCE v1"), ("fe80:0000:0000:0000:1270:fdff:fe27:250b", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:0a63:0001", "IB/RoCE v1"), ("0000:0000:0000:0000:0000:ffff:0a63:0001", "RoCE v2")])
    _sysfs_port(tmp_path, "mlx5_1", "0000:1b:00.0", "ens2np0", "Ethernet", [
        ("fe80:0000:0000:0000:1270:fdff:fe27:2560", "IB/RoCE v1"), ("fe80:0000:0000:0000:1270:fdff:fe27:2560", "RoCE v2"),
        ("0000:0000:0000:0000:0000:ffff:0a63:0101", "IB/RoCE v1"), ("0000:0000:0000:0000:0000:ffff:0a63:0101", "RoCE v2")])
    sysfs = read_sysfs(str(tmp_path))
    assert [(port["ibdev"], port["netdev"], port["pci_address"], port["state"], port["phys_state"]) for port in sysfs] == [
        ("mlx5_0", "ens1np0", "0000:1a:00.0", "ACTIVE", "LinkUp"), ("mlx5_1", "ens2np0", "0000:1b:00.0", "ACTIVE", "LinkUp")]
    assert len(sysfs[0]["gids"]) == 4
    ports = merge_ports(sysfs=sysfs, devinfo=parse_ibv_devinfo(fixture("ibv_devinfo__cx7_roce_12hca.txt")))
    # sysfs wins; ibv_devinfo adds the active MTU sysfs lacks, and its other HCAs are listed too.
    assert ports[0]["active_mtu"] == 4096
    assert ports[0]["roce_v2_ipv4_gid"] == {
        "index": 3, "gid": "0000:0000:0000:0000:0000:ffff:0a63:0001", "type": "RoCE v2", "netdev": "ens1np0", "ipv4": "10.99.0.1"}
    assert ports[1]["roce_v2_ipv4_gid"]["ipv4"] == "10.99.1.1"
    assert len(ports) == 12
    assert common_gid_index(ports) == 3


def test_infiniband_ports_have_no_roce_gid():
    ports = merge_ports(devinfo=parse_ibv_devinfo(fixture("ibv_devinfo__cx6_infiniband.txt")),
                        ibdev2netdev=parse_ibdev2netdev(fixture("ibdev2netdev__ib.txt")))
    assert [(port["ibdev"], port["netdev"], port["link_layer"], port["state"]) for port in ports] == [
        ("mlx5_0", "ib0", "InfiniBand", "ACTIVE"), ("mlx5_1", "ib1", None, None)]
    assert ports[0]["roce_v2_ipv4_gid"] is None
    assert common_gid_index(ports) is None


def test_rails_with_different_gid_indexes_have_no_common_index():
    ports = [
        {"roce_v2_ipv4_gid": {"index": 3}}, {"roce_v2_ipv4_gid": {"index": 5}}, {"roce_v2_ipv4_gid": None}]
    assert common_gid_index(ports) is None
    assert common_gid_index(ports[:1] + ports[2:]) == 3


# dcb (outputs as the iproute2 dcb-pfc(8) and dcb-app(8) man pages show them)

DCB_PFC_SHOW = "pfc-cap 8 macsec-bypass off delay 4096\nprio-pfc 0:off 1:off 2:off 3:off 4:off 5:off 6:on 7:on\n"
DCB_APP_SHOW = "dscp-prio 0:0 24:2 24:3 48:6\n"


def test_dcb_pfc_and_app_tables():
    assert parse_dcb_pfc(DCB_PFC_SHOW) == {"pfc_enabled": [0, 0, 0, 0, 0, 0, 1, 1], "pfc_priorities": [6, 7]}
    assert parse_dcb_app_dscp(DCB_APP_SHOW) == {0: [0], 2: [24], 3: [24], 6: [48]}
    assert parse_dcb_app_dscp("") == {}
    with pytest.raises(RdmaParseError):
        parse_dcb_pfc("pfc-cap 8 macsec-bypass off delay 0\n")
    with pytest.raises(RdmaParseError, match="-N"):
        parse_dcb_app_dscp("dscp-prio 0:0 CS3:2\n")


def test_dcb_trust_follows_the_app_table():
    assert dcb_qos(DCB_APP_SHOW, DCB_PFC_SHOW)["trust"] == "dscp"
    state = dcb_qos("", "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n")
    assert state == {"pfc_enabled": [0, 0, 0, 1, 0, 0, 0, 0], "pfc_priorities": [3], "dcbx_mode": None, "trust": "pcp", "dscp2prio": {},
                     "cable_len": None}


def test_interface_drivers_follow_the_lower_devices(tmp_path):
    net = tmp_path / "class" / "net"
    drivers = tmp_path / "bus" / "pci" / "drivers"
    for name, driver in (("ens1f0np0", "mlx5_core"), ("eno1", "igb")):
        (drivers / driver).mkdir(parents=True, exist_ok=True)
        (net / name / "device").mkdir(parents=True)
        (net / name / "device" / "driver").symlink_to(drivers / driver)
    (net / "bond0").mkdir()
    (net / "bond0" / "lower_ens1f0np0").symlink_to(net / "ens1f0np0")
    (net / "bond0.100").mkdir()
    (net / "bond0.100" / "lower_bond0").symlink_to(net / "bond0")
    (net / "veth1").mkdir()
    assert interface_drivers("bond0.100", str(tmp_path)) == ["mlx5_core"]
    assert interface_drivers("eno1", str(tmp_path)) == ["igb"]
    assert interface_drivers("veth1", str(tmp_path)) == []
    assert interface_drivers("missing", str(tmp_path)) == []
