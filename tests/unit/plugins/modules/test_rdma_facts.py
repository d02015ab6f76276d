# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import rdma_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rdma"


def fixture(name):
    return (FIXTURES / name).read_text()


def run_module(args, tools, outputs, capsys):
    """Run rdma_facts with the tools in ``tools`` installed (name -> path) and ``outputs`` keyed by argv tuple."""
    calls = []

    def run_command(argv, **kwargs):
        calls.append(argv)
        return outputs[tuple(argv)]

    with patch_module_args(args), mock.patch.object(AnsibleModule, "get_bin_path", side_effect=tools.get), mock.patch.object(
        AnsibleModule, "run_command", side_effect=run_command
    ), pytest.raises(SystemExit):
        rdma_facts.main()
    return json.loads(capsys.readouterr().out), calls


def test_tools_without_sysfs_give_ports_gids_and_qos(tmp_path, capsys):
    show_gids = fixture("show_gids__roce_single.txt")
    devinfo = fixture("ibv_devinfo__cx7_roce_12hca.txt").split("\n\n")[0] + "\n"
    tools = {name: "/usr/bin/" + name for name in ("ibv_devinfo", "show_gids", "ibdev2netdev", "mlnx_qos")}
    outputs = {
        ("/usr/bin/ibv_devinfo", "-v"): (0, devinfo, ""),
        ("/usr/bin/show_gids",): (0, show_gids, ""),
        ("/usr/bin/ibdev2netdev", "-v"): (0, "0000:1a:00.0 mlx5_0 (MT4129 - NA) fw 28.43.3608 port 1 (ACTIVE) ==> rdma0 (Up)\n", ""),
        ("/usr/bin/mlnx_qos", "-i", "rdma0"): (0, fixture("mlnx_qos__default_pcp.txt"), ""),
    }
    result, calls = run_module({"sysfs_root": str(tmp_path), "qos_interfaces": ["rdma0"], "_ansible_check_mode": True}, tools, outputs, capsys)
    facts = result["ansible_facts"]
    assert result["changed"] is False
    assert facts["rdma_sources"] == ["ibv_devinfo", "show_gids", "ibdev2netdev"]
    (port,) = facts["rdma_ports"]
    assert (port["ibdev"], port["netdev"], port["pci_address"], port["state"], port["active_mtu"]) == (
        "mlx5_0", "rdma0", "0000:1a:00.0", "ACTIVE", 4096)
    assert port["roce_v2_ipv4_gid"]["index"] == 3
    assert facts["rdma_gid_index"] == 3
    assert facts["rdma_qos"]["rdma0"]["trust"] == "pcp"
    assert ["/usr/bin/rdma", "link", "show"] not in calls


def test_no_rdma_stack_is_not_an_error(tmp_path, capsys):
    result, calls = run_module({"sysfs_root": str(tmp_path)}, {}, {}, capsys)
    assert result["ansible_facts"]["rdma_ports"] == []
    assert result["ansible_facts"]["rdma_gid_index"] is None
    assert calls == []


def test_rdma_link_is_the_fallback_for_netdevs(tmp_path, capsys):
    tools = {"rdma": "/sbin/rdma"}
    outputs = {("/sbin/rdma", "link", "show"): (0, fixture("rdma_link__new.txt"), "")}
    result, dummy = run_module({"sysfs_root": str(tmp_path)}, tools, outputs, capsys)
    assert [(port["ibdev"], port["netdev"], port["state"]) for port in result["ansible_facts"]["rdma_ports"]] == [
        ("mlx5_0", "ens6f0np0", "ACTIVE"), ("mlx5_1", "ens6f1np1", "ACTIVE")]


def test_a_failing_mlnx_qos_fails_with_the_command_and_its_message(tmp_path, capsys):
    tools = {"mlnx_qos": "/usr/sbin/mlnx_qos"}
    outputs = {("/usr/sbin/mlnx_qos", "-i", "ens9"): (1, "", "Netlink error: No such device\n")}
    result, dummy = run_module({"sysfs_root": str(tmp_path), "qos_interfaces": ["ens9"]}, tools, outputs, capsys)
    assert result["failed"] is True
    assert result["msg"] == "/usr/sbin/mlnx_qos -i ens9 failed with exit code 1: Netlink error: No such device"


def test_qos_without_mlnx_qos_says_which_tool_is_missing(tmp_path, capsys):
    result, dummy = run_module({"sysfs_root": str(tmp_path), "qos_interfaces": ["ens9"]}, {}, {}, capsys)
    assert result["failed"] is True
    assert "mlnx_qos is needed to read the RoCE QoS state" in result["msg"]


def test_firmware_settings_are_read_per_device(tmp_path, capsys):
    tools = {"mlxconfig": "/usr/bin/mlxconfig"}
    argv = ("/usr/bin/mlxconfig", "-d", "0000:1a:00.0", "-e", "query", "SRIOV_EN", "NUM_OF_VFS")
    outputs = {argv: (0, fixture("mlxconfig_-e_q__constructed.txt"), "")}
    result, dummy = run_module({"sysfs_root": str(tmp_path), "firmware_devices": ["0000:1a:00.0"],
                                "firmware_params": ["SRIOV_EN", "NUM_OF_VFS"]}, tools, outputs, capsys)
    assert result["ansible_facts"]["rdma_firmware"]["0000:1a:00.0"]["NUM_OF_VFS"]["next_boot"] == "8"


IBDEV2NETDEV = "0000:1a:00.0 mlx5_0 (MT4129 - NA) fw 28.43.3608 port 1 (ACTIVE) ==> ens1np0 (Up)\n"


def test_inbox_qos_is_read_with_dcb_for_rails_given_by_pci_address(tmp_path, capsys):
    tools = {"ibdev2netdev": "/usr/sbin/ibdev2netdev", "dcb": "/usr/sbin/dcb"}
    outputs = {
        ("/usr/sbin/ibdev2netdev", "-v"): (0, IBDEV2NETDEV, ""),
        ("/usr/sbin/dcb", "-N", "app", "show", "dev", "ens1np0", "dscp-prio"): (0, "dscp-prio 24:3 26:3\n", ""),
        ("/usr/sbin/dcb", "pfc", "show", "dev", "ens1np0", "prio-pfc"): (0, "prio-pfc 0:off 1:off 2:off 3:on 4:off 5:off 6:off 7:off\n", ""),
    }
    result, calls = run_module({"sysfs_root": str(tmp_path), "qos_tool": "dcb", "qos_interfaces": ["0000:1a:00.0", "0000:9c:00.0"]},
                               tools, outputs, capsys)
    assert result["ansible_facts"]["rdma_qos"] == {"ens1np0": {
        "trust": "dscp", "pfc_enabled": [0, 0, 0, 1, 0, 0, 0, 0], "pfc_priorities": [3], "dscp2prio": {"3": [24, 26]}, "dcbx_mode": None,
        "cable_len": None}}
    assert not any("mlnx_qos" in " ".join(call) for call in calls)


def test_qos_without_dcb_says_which_tool_is_missing(tmp_path, capsys):
    result, dummy = run_module({"sysfs_root": str(tmp_path), "qos_tool": "dcb", "qos_interfaces": ["ens9"]}, {}, {}, capsys)
    assert result["failed"] is True
    assert result["msg"] == "dcb is needed to read the RoCE QoS state but is not installed (option dcb)."


def test_firmware_of_a_rail_given_by_netdev_and_drivers_of_interfaces(tmp_path, capsys):
    tools = {"ibdev2netdev": "/usr/sbin/ibdev2netdev", "mlxconfig": "/usr/bin/mlxconfig"}
    argv = ("/usr/bin/mlxconfig", "-d", "0000:1a:00.0", "-e", "query", "SRIOV_EN", "NUM_OF_VFS")
    outputs = {("/usr/sbin/ibdev2netdev", "-v"): (0, IBDEV2NETDEV, ""), argv: (0, fixture("mlxconfig_-e_q__constructed.txt"), "")}
    (tmp_path / "class" / "net" / "eth0").mkdir(parents=True)
    result, dummy = run_module({"sysfs_root": str(tmp_path), "firmware_devices": ["ens1np0", "ens7np0"], "driver_interfaces": ["eth0"],
                                "firmware_params": ["SRIOV_EN", "NUM_OF_VFS"]}, tools, outputs, capsys)
    assert list(result["ansible_facts"]["rdma_firmware"]) == ["0000:1a:00.0"]
    assert result["ansible_facts"]["rdma_interface_drivers"] == {"eth0": []}


RAIL_SETTINGS = {"host": "gpu2", "rails": [{"name": "rail0", "pci": "0000:1a:00.0", "subnet": "10.99.0.0/24"},
                                           {"name": "rail1", "interface": "ens2np0", "subnet": "10.99.1.0/24"}],
                 "address_first": 10, "address_index": 1, "mtu": 9000, "route_table_base": 100, "route_rule_priority_base": 1000,
                 "management": ["eth0"], "allow_management_change": False}
TWO_PORTS = IBDEV2NETDEV + "0000:2a:00.0 mlx5_1 (MT4129 - NA) fw 28.43.3608 port 1 (ACTIVE) ==> ens2np0 (Up)\n"


def run_rail_check(tmp_path, capsys, listed, **changes):
    tools = {"ibdev2netdev": "/usr/sbin/ibdev2netdev"}
    outputs = {("/usr/sbin/ibdev2netdev", "-v"): (0, listed, "")}
    return run_module({"sysfs_root": str(tmp_path), "check": "rails", "settings": dict(RAIL_SETTINGS, **changes)}, tools, outputs, capsys)[0]


def test_the_rail_check_passes_when_every_rail_is_found_and_none_carries_the_connection(tmp_path, capsys):
    result = run_rail_check(tmp_path, capsys, TWO_PORTS)
    assert "failed" not in result
    assert [port["netdev"] for port in result["ansible_facts"]["rdma_ports"]] == ["ens1np0", "ens2np0"]


def test_the_rail_check_fails_with_the_sentence_of_a_rail_the_driver_does_not_list(tmp_path, capsys):
    result = run_rail_check(tmp_path, capsys, IBDEV2NETDEV)
    assert result["failed"] is True
    assert result["msg"] == "gpu2 has no RDMA port for rail rail1 (rdma_rails): it lists mlx5_0 ens1np0 0000:1a:00.0."
    assert result["problems"] == [result["msg"]]


def test_the_rail_check_joins_its_sentences_and_honours_the_consent(tmp_path, capsys):
    result = run_rail_check(tmp_path, capsys, IBDEV2NETDEV, management=["ens1np0"])
    assert result["msg"] == (
        "gpu2 has no RDMA port for rail rail1 (rdma_rails): it lists mlx5_0 ens1np0 0000:1a:00.0. ens1np0 carries the Ansible connection "
        "to gpu2; reconfiguring it can cut this run off the host. Keep management off the RDMA rails, or set rdma_allow_management_change: true.")
    assert "failed" not in run_rail_check(tmp_path, capsys, TWO_PORTS, management=["ens1np0"], allow_management_change=True)


def test_without_check_nothing_is_judged_and_the_rail_check_needs_the_settings(tmp_path, capsys):
    tools = {"ibdev2netdev": "/usr/sbin/ibdev2netdev"}
    outputs = {("/usr/sbin/ibdev2netdev", "-v"): (0, IBDEV2NETDEV, "")}
    assert "failed" not in run_module({"sysfs_root": str(tmp_path), "settings": RAIL_SETTINGS}, tools, outputs, capsys)[0]
    result = run_module({"sysfs_root": str(tmp_path), "check": "rails"}, tools, outputs, capsys)[0]
    assert result["failed"] is True and "settings" in result["msg"]
