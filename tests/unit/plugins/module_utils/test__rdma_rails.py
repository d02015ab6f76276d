# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import copy

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._rdma_rails import (
    firmware_changes,
    found_rail_problems,
    management_interfaces,
    nccl_settings,
    openibd_action,
    preflight_problems,
    rail_problems,
    resolve_rails,
    role_files,
    verify_problems,
)

SETTINGS = {
    "host": "gpu2", "platform_known": True, "distribution": "Debian", "kernel": "6.1.0-26-amd64", "stack": "doca",
    "gpudirect": "dmabuf", "link_layer": "ethernet", "renderer": "networkd", "renderer_setting": "auto",
    "doca_repo_url": "http://mirror/doca/3.2.0/debian12/x86_64", "doca_repo_key_url": "http://mirror/doca.pub",
    "doca_repo_suites": ["./"], "doca_repo_components": [], "package_manager": "apt", "ethernet": True, "addressed": True,
    "rails": [{"name": "rail0", "pci": "0000:1a:00.0", "subnet": "10.99.0.0/24"},
              {"name": "rail1", "interface": "ens2np0", "subnet": "10.99.1.0/24", "gateway": "10.99.1.1"}],
    "address_hosts": ["gpu1", "gpu2"], "address_index": 1, "address_indexes": {"gpu1": None, "gpu2": None}, "address_first": 10,
    "interfaces": ["lo", "eth0", "ens1np0", "ens2np0"], "management": ["eth0"], "allow_management_change": False,
    "qos_manage": True, "qos": {"trust": "dscp", "pfc_priorities": [3], "ecn_priorities": [3], "roce_mode": 2, "tos": 106, "cable_len": 0},
    "mtu": 9000, "route_table_base": 100, "route_rule_priority_base": 1000,
}

PORTS = [
    {"ibdev": "mlx5_0", "port": 1, "netdev": "ens1np0", "pci_address": "0000:1a:00.0", "state": "ACTIVE", "link_layer": "Ethernet",
     "active_mtu": 4096, "roce_v2_ipv4_gid": {"index": 3, "ipv4": "10.99.0.11"}},
    {"ibdev": "mlx5_1", "port": 1, "netdev": "ens2np0", "pci_address": "0000:2a:00.0", "state": "ACTIVE", "link_layer": "Ethernet",
     "active_mtu": 4096, "roce_v2_ipv4_gid": {"index": 3, "ipv4": "10.99.1.11"}},
]


def settings(**changes):
    result = copy.deepcopy(SETTINGS)
    for key, value in changes.items():
        if key.startswith("qos_") and key != "qos_manage":
            result["qos"][key[4:]] = value
        else:
            result[key] = value
    return result


def test_good_settings_pass():
    assert preflight_problems(settings()) == []


# Each refusal, with the sentence the role prints (the same as the asserts it replaces).
REFUSALS = [
    ({"platform_known": False, "distribution": "Gentoo"},
     "gpu2 runs Gentoo; the rdma role supports the Debian and Red Hat families (Debian 12, Ubuntu 22.04/24.04, RHEL/Rocky/AlmaLinux 9)."),
    ({"stack": "mofed"}, "rdma_driver_stack must be inbox or doca (got mofed), rdma_gpudirect dmabuf, peermem or none (got dmabuf), "
     "rdma_link_layer ethernet or infiniband (got ethernet), rdma_network_renderer netplan, networkmanager, networkd or auto (got auto), "
     "and the doca stack needs rdma_doca_repo_url and rdma_doca_repo_key_url (the site's mirror) on an APT-based host."),
    ({"doca_repo_url": ""}, "and the doca stack needs rdma_doca_repo_url"),
    ({"package_manager": "dnf", "doca_repo_components": ["main"], "doca_repo_suites": ["bookworm"]}, "on an APT-based host."),
    ({"renderer": "none", "renderer_setting": "auto"}, "rdma_network_renderer netplan, networkmanager, networkd or auto (got auto)"),
    ({"kernel": "5.4.0-150-generic"},
     "rdma_gpudirect dmabuf needs Linux 5.12 or later and gpu2 runs 5.4.0-150-generic: use peermem (with DOCA-OFED) or upgrade the kernel."),
    ({"rails": []}, "rdma_rails must list the rails, each with either interface (a netdev name) or pci (a PCI address such as 0000:1a:00.0, "
     "lower case) and, for RoCE, subnet as an IPv4 network in CIDR form (10.99.0.0/24)."),
    ({"rails": [{"interface": "ens1np0", "pci": "0000:1a:00.0", "subnet": "10.99.0.0/24"}]}, "rdma_rails must list the rails"),
    ({"rails": [{"pci": "0000:1A:00.0", "subnet": "10.99.0.0/24"}]}, "rdma_rails must list the rails"),
    ({"rails": [{"interface": "ens1np0"}]}, "rdma_rails must list the rails"),
    ({"rails": [{"interface": "ens1np0", "subnet": "10.99.0.1/24"}]}, "rdma_rails must list the rails"),
    ({"rails": [{"interface": "ib0"}], "ethernet": False, "addressed": True},
     "lower case) and, with IPoIB, subnet as an IPv4 network in CIDR form (10.99.0.0/24)."),
    ({"rails": [{"name": "a", "interface": "ens1np0", "subnet": "10.99.0.0/16"}, {"interface": "ens2np0", "subnet": "10.99.1.0/24"}]},
     "Rails a (10.99.0.0/16) and ens2np0 (10.99.1.0/24) are in the same subnet: each rail needs its own subnet, or the kernel answers "
     "ARP and routes on the wrong NIC and RDMA CM connections fail."),
    ({"address_hosts": ["gpu1"]}, "gpu2 is not in rdma_address_hosts, which orders the hosts that get rail addresses; add it (or give "
     "every rail an explicit address in host_vars)."),
    ({"address_index": -1}, "rdma_address_index of gpu2 must be 0 or more (got -1)."),
    ({"address_index": 0}, "gpu2 and gpu1 would get the same rail addresses (place 0 in the rails' subnets): give each host of "
     "rdma_address_hosts its own rdma_address_index."),
    ({"address_indexes": {"gpu1": 1, "gpu2": None}}, "gpu2 and gpu1 would get the same rail addresses (place 1"),
    ({"rails": [{"name": "r", "interface": "ens1np0", "subnet": "10.99.0.0/29"}], "address_hosts": ["gpu%d" % n for n in range(8)],
      "address_first": 2, "address_index": 2, "address_indexes": {}},
     "Subnet 10.99.0.0/29 of rail r has 5 usable addresses from rdma_address_first (2) on but the rack has 8 hosts (rdma_address_hosts): "
     "use a larger subnet or a lower rdma_address_first."),
    ({"rails": [{"name": "r", "interface": "ens1np0", "subnet": "10.99.0.0/28"}], "address_index": 9},
     "Subnet 10.99.0.0/28 of rail r has 5 usable addresses from rdma_address_first (10) on but gpu2 has rdma_address_index 9: "
     "use a larger subnet, a lower rdma_address_first or a lower index."),
    ({"interfaces": ["lo", "eth0"]}, "gpu2 has no interface ens2np0 (rdma_rails); its interfaces are eth0, lo."),
    ({"management": ["ens2np0"]}, "ens2np0 carries the Ansible connection to gpu2; reconfiguring it can cut this run off the host. Keep "
     "management off the RDMA rails, or set rdma_allow_management_change: true."),
    ({"qos_trust": "vlan"}, "rdma_qos_trust must be dscp or pcp, the PFC and ECN priorities 0-7, rdma_qos_roce_mode 1 or 2 and "
     "rdma_qos_tos 0-255 (got vlan, [3], [3], 2, 106)."),
    ({"qos_pfc_priorities": [8]}, "(got dscp, [8], [3], 2, 106)."),
    ({"qos_ecn_priorities": [-1]}, "(got dscp, [3], [-1], 2, 106)."),
    ({"qos_roce_mode": 3}, "(got dscp, [3], [3], 3, 106)."),
    ({"qos_tos": 256}, "(got dscp, [3], [3], 2, 256)."),
    ({"qos_tos": 160}, "rdma_qos_tos 160 marks DSCP 40, which trust dscp puts on priority 5 (DSCP / 8), but PFC is on priorities [3]: "
     "RoCE and NCCL traffic (NCCL_IB_TC 160) would not be lossless; choose a ToS whose DSCP maps to a PFC priority."),
    ({"doca_repo_suites": ["./"], "doca_repo_components": ["main"]},
     "rdma_doca_repo_suites ['./'] name a flat repository (as NVIDIA's DOCA repository is), which takes no rdma_doca_repo_components (got ['main'])."),
    ({"doca_repo_suites": [], "doca_repo_components": []}, "name a repository laid out by suite, which needs rdma_doca_repo_components"),
]


@pytest.mark.parametrize("changes, sentence", REFUSALS, ids=[str(index) for index in range(len(REFUSALS))])
def test_each_refusal_says_what_to_fix(changes, sentence):
    problems = preflight_problems(settings(**changes))
    assert any(sentence in problem for problem in problems), problems


def test_refusals_that_do_not_apply():
    # A management rail with consent, QoS unmanaged, PCP trust (the DSCP does not choose the priority), the inbox stack.
    assert preflight_problems(settings(management=["ens2np0"], allow_management_change=True)) == []
    assert preflight_problems(settings(qos_manage=False, qos_tos=999)) == []
    assert preflight_problems(settings(qos_trust="pcp", qos_tos=160)) == []
    assert preflight_problems(settings(stack="inbox", doca_repo_url="", doca_repo_suites=[], doca_repo_key_url="")) == []
    # Explicit addresses need no place in the subnets; InfiniBand without IPoIB needs no subnet.
    explicit = [{"interface": "ens1np0", "subnet": "10.99.0.0/24", "address": "10.99.0.5/24"}]
    assert preflight_problems(settings(rails=explicit, address_hosts=["gpu1"])) == []
    assert preflight_problems(settings(rails=[{"interface": "ens1np0"}], ethernet=False, addressed=False)) == []


def test_every_problem_is_reported_at_once():
    problems = preflight_problems(settings(kernel="5.4.0", interfaces=["lo"], qos_trust="vlan"))
    assert len(problems) == 3


def test_rails_resolve_to_ports_and_addresses():
    rails = resolve_rails(settings(), PORTS)
    assert rails[0] == {"name": "rail0", "netdev": "ens1np0", "ibdev": "mlx5_0", "pci": "0000:1a:00.0", "address": "10.99.0.11/24",
                        "ip": "10.99.0.11", "subnet": "10.99.0.0/24", "gateway": None, "mtu": 9000, "numvfs": None, "table": 100,
                        "priority": 1000}
    assert (rails[1]["netdev"], rails[1]["pci"], rails[1]["gateway"], rails[1]["table"]) == ("ens2np0", "0000:2a:00.0", "10.99.1.1", 101)
    given = resolve_rails(settings(rails=[{"interface": "ens1np0", "address": "10.98.0.7/23", "mtu": 4200, "numvfs": 4}]), PORTS)[0]
    assert (given["address"], given["subnet"], given["mtu"], given["numvfs"]) == ("10.98.0.7/23", "10.98.0.0/23", 4200, 4)
    infiniband = resolve_rails(settings(rails=[{"interface": "ib0"}]), [{"ibdev": "mlx5_0", "netdev": "ib0", "pci_address": "0000:1a:00.0"}])
    assert (infiniband[0]["address"], infiniband[0]["ip"]) == (None, None)


def test_rail_problems_name_the_missing_rails_and_what_the_driver_lists():
    rails = resolve_rails(settings(), PORTS[1:])
    assert rail_problems(rails, PORTS[1:], "gpu2", ["eth0"], False) == [
        "gpu2 has no RDMA port for rail rail0 (rdma_rails): it lists mlx5_1 ens2np0 0000:2a:00.0."]
    assert rail_problems(resolve_rails(settings(), []), [], "gpu2", [], False) == [
        "gpu2 has no RDMA port for rail rail0, rail1 (rdma_rails): the RDMA driver lists none at all."]
    rails = resolve_rails(settings(), PORTS)
    assert rail_problems(rails, PORTS, "gpu2", ["ens1np0"], False) == [
        "ens1np0 carries the Ansible connection to gpu2; reconfiguring it can cut this run off the host. Keep management off the RDMA "
        "rails, or set rdma_allow_management_change: true."]
    assert rail_problems(rails, PORTS, "gpu2", ["ens1np0"], True) == []


@pytest.mark.parametrize("changes, ports", [({}, PORTS), ({}, PORTS[1:]), ({}, []), ({"management": ["ens1np0"]}, PORTS),
                                            ({"management": ["ens1np0"], "allow_management_change": True}, PORTS)],
                         ids=["found", "one-missing", "none-listed", "rail-carries-the-connection", "with-consent"])
def test_found_rail_problems_are_those_of_the_filter_on_the_rails_resolved_through_the_same_ports(changes, ports):
    # What rdma_facts judges (check=rails) is what the role's assert judged: rdma_rail_problems of rdma_rails.
    given = settings(**changes)
    assert found_rail_problems(given, ports) == rail_problems(resolve_rails(given, ports), ports, "gpu2", given["management"],
                                                              given["allow_management_change"])
    assert (found_rail_problems(given, ports) == []) == (ports == PORTS and not (changes.get("management") and not changes.get("allow_management_change")))


VERIFY = {"host": "gpu2", "ethernet": True, "addressed": True, "link_layer_name": "Ethernet", "expected_active_mtu": 4096,
          "qos_manage": True, "trust": "dscp", "pfc_priorities": [3], "unit": "onprem-rdma.service"}
QOS = {"ens1np0": {"trust": "dscp", "pfc_priorities": [3]}, "ens2np0": {"trust": "dscp", "pfc_priorities": [3]}}


def test_verify_passes_on_ready_rails():
    rails = resolve_rails(settings(), PORTS)
    assert verify_problems(rails, PORTS, QOS, VERIFY, {"UnitFileState": "enabled", "ActiveState": "active"}) == []


def test_verify_says_what_is_not_ready():
    rails = resolve_rails(settings(), PORTS)
    ports = copy.deepcopy(PORTS)
    ports[0].update(state="DOWN", active_mtu=1024, roce_v2_ipv4_gid=None)
    qos = dict(QOS, ens2np0={"trust": "pcp", "pfc_priorities": []})
    problems = verify_problems(rails, ports, qos, VERIFY, {"UnitFileState": "disabled", "ActiveState": "inactive"})
    assert problems == [
        "Rail rail0 (ens1np0, mlx5_0) of gpu2 is not ready: port DOWN, link layer Ethernet (want Ethernet), RDMA MTU 1024 (want 4096), "
        "RoCEv2 IPv4 GID none (want 10.99.0.11), trust dscp and PFC on [3] (want dscp and [3]).",
        "Rail rail1 (ens2np0, mlx5_1) of gpu2 is not ready: port ACTIVE, link layer Ethernet (want Ethernet), RDMA MTU 4096 (want 4096), "
        "RoCEv2 IPv4 GID 10.99.1.11 (want 10.99.1.11), trust pcp and PFC on [] (want dscp and [3]).",
        "onprem-rdma.service on gpu2 is disabled and inactive: the QoS would be lost at the next reboot (journalctl -u onprem-rdma.service).",
    ]


def test_verify_refuses_rails_whose_gids_are_at_different_indexes():
    rails = resolve_rails(settings(), PORTS)
    ports = copy.deepcopy(PORTS)
    ports[1]["roce_v2_ipv4_gid"]["index"] = 5
    assert verify_problems(rails, ports, QOS, VERIFY) == [
        "The RoCEv2 IPv4 GIDs of gpu2's rails are at different indexes (3, 5); NCCL_IB_GID_INDEX cannot name them all: remove extra "
        "addresses from the rails or leave the index to NCCL 2.21+."]


def test_verify_on_infiniband_wants_no_gid_or_qos():
    ib_ports = [{"ibdev": "mlx5_0", "netdev": "ib0", "pci_address": "0000:1a:00.0", "state": "ACTIVE", "link_layer": "InfiniBand",
                 "active_mtu": 4096, "roce_v2_ipv4_gid": None}]
    rails = resolve_rails(settings(rails=[{"interface": "ib0"}]), ib_ports)
    ib = dict(VERIFY, ethernet=False, addressed=False, link_layer_name="InfiniBand")
    assert verify_problems(rails, ib_ports, {}, ib) == []


def test_nccl_settings():
    rails = resolve_rails(settings(), PORTS)
    assert nccl_settings(rails, PORTS, True, 106) == {"ib_gid_index": 3, "ib_tc": 104, "ib_hca": ["mlx5_0", "mlx5_1"]}
    ports = copy.deepcopy(PORTS)
    ports[1]["roce_v2_ipv4_gid"]["index"] = 5
    assert nccl_settings(rails, ports, True, 96)["ib_gid_index"] is None
    assert nccl_settings(rails, ports, True, 96)["ib_tc"] == 96
    assert nccl_settings(rails, PORTS, False, 106) == {"ib_gid_index": None, "ib_tc": None, "ib_hca": ["mlx5_0", "mlx5_1"]}


def test_firmware_changes_only_where_the_next_boot_value_differs():
    firmware = {"0000:2a:00.0": {"SRIOV_EN": {"next_boot": "1"}, "NUM_OF_VFS": {"next_boot": "8"}},
                "0000:1a:00.0": {"SRIOV_EN": {"next_boot": "0"}, "NUM_OF_VFS": {"next_boot": "8"}}}
    assert firmware_changes(firmware, {"SRIOV_EN": 1, "NUM_OF_VFS": 8}) == {"0000:1a:00.0": ["SRIOV_EN=1"]}
    assert firmware_changes(firmware, {"ATS_ENABLED": 0}) == {"0000:1a:00.0": ["ATS_ENABLED=0"], "0000:2a:00.0": ["ATS_ENABLED=0"]}


def test_management_interfaces():
    facts = {"default_ipv4": {"interface": "eno1"}, "interfaces": ["lo", "eno1", "bond-mgmt"],
             "bond_mgmt": {"ipv4": {"address": "192.0.2.5"}}, "eno1": {"ipv4_secondaries": [{"address": "192.0.2.9"}]}}
    assert management_interfaces(facts, "192.0.2.5") == ["eno1", "bond-mgmt"]
    assert management_interfaces(facts, "192.0.2.9") == ["eno1"]
    assert management_interfaces({"interfaces": ["lo"]}) == []


# openibd restart takes every mlx5 netdev down: the decision (issue #17, point 14).
@pytest.mark.parametrize("drivers, allow_reboot, action", [
    ({"eno1": ["igb"]}, False, "restart"),
    ({"eth0": []}, False, "restart"),  # a container's veth: no hardware below it
    ({"bond0": ["mlx5_core"]}, False, "pending"),
    ({"bond0": ["mlx5_core"]}, True, "reboot"),
    ({"eno1": ["igb"], "ib0": ["ib_ipoib", "mlx5_core"]}, False, "pending"),
    ({}, False, "pending"),
    ({}, True, "reboot"),
])
def test_openibd_is_restarted_only_when_the_connection_is_not_on_the_rdma_stack(drivers, allow_reboot, action):
    decision = openibd_action(drivers, allow_reboot)
    assert decision["action"] == action
    assert decision["reason"]


def test_openibd_reason_names_the_interface():
    assert openibd_action({"bond0": ["mlx5_core"]}, False)["reason"] == (
        "bond0 (mlx5_core) carries the Ansible connection on the RDMA stack, which openibd restart takes down")


FILES = {"addressed": True, "renderer": "networkd", "config_dir": "/etc/onprem-gpu/rdma", "apply_script": "/usr/local/sbin/onprem-rdma-apply",
         "script_src": "/role/files/onprem-rdma-apply", "unit": "onprem-rdma.service"}


def test_role_files_per_renderer():
    rails = resolve_rails(settings(), PORTS)
    networkd = role_files(rails, FILES)
    assert [(item["kind"], item["dest"], item["mode"]) for item in networkd] == [
        ("network", "/etc/systemd/network/60-onprem-rdma-ens1np0.network", "0644"),
        ("network", "/etc/systemd/network/60-onprem-rdma-ens2np0.network", "0644"),
        ("peermem", "/etc/modules-load.d/nvidia-peermem.conf", "0644"),
        ("boot", "/etc/onprem-gpu/rdma/rails.json", "0644"),
        ("boot", "/usr/local/sbin/onprem-rdma-apply", "0755"),
        ("unit", "/etc/systemd/system/onprem-rdma.service", "0644"),
    ]
    assert networkd[1]["rail"]["netdev"] == "ens2np0" and networkd[4]["src"] == "/role/files/onprem-rdma-apply"
    netplan = role_files(rails, dict(FILES, renderer="netplan"))
    assert [(item["dest"], item["mode"]) for item in netplan if item["kind"] == "network"] == [("/etc/netplan/60-onprem-rdma.yaml", "0600")]
    manager = role_files(rails, dict(FILES, renderer="networkmanager"))
    assert [item["dest"] for item in manager if item["kind"] == "network"] == [
        "/etc/NetworkManager/system-connections/onprem-rdma-ens1np0.nmconnection",
        "/etc/NetworkManager/system-connections/onprem-rdma-ens2np0.nmconnection"]
    assert all(item["kind"] != "network" for item in role_files(rails, dict(FILES, addressed=False)))
