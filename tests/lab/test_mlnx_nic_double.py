"""Tests of the NIC tools double (lab/doubles/mlnx_nic/README.md): ibv_devinfo, show_gids, ibdev2netdev,
mlnx_qos, cma_roce_mode/cma_roce_tos and openibd, each run as a subprocess under its tool's name, against the
recorded real outputs in tests/unit/fixtures/rdma (published outputs of the real tools; their README names each one).

The netdevs are files under a fake /sys/class/net and ``ip`` is a stub printing the addresses, so no network
namespace is needed.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "lab" / "doubles" / "mlnx_nic" / "mlnx-nic"
FIXTURES = ROOT / "tests" / "unit" / "fixtures" / "rdma"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
TOOLS = ["ibv_devinfo", "show_gids", "ibdev2netdev", "mlnx_qos", "cma_roce_mode", "cma_roce_tos", "openibd", "rdma"]


@pytest.fixture()
def node(tmp_path):
    """A two-rail RoCE node whose driver is loaded, rail 0 up with MTU 9000 and 10.99.0.11, rail 1 down."""

    class Node:
        root = tmp_path
        bin = tmp_path / "bin"
        run = tmp_path / "run"
        net = tmp_path / "net"
        addresses = tmp_path / "addresses.json"
        env = dict(os.environ, MLNX_NIC_DOUBLE_HARDWARE=str(tmp_path / "hardware.json"), MLNX_NIC_DOUBLE_RUN_DIR=str(tmp_path / "run"),
                   MLNX_NIC_DOUBLE_SYS_NET=str(tmp_path / "net"), PATH="%s:%s" % (tmp_path / "bin", os.environ["PATH"]))

        def hardware(self, link_layer="RoCE", rails=2, **fabric):
            netdevs = [("ib%d" % index) if link_layer == "IB" else "ens%dnp0" % (index + 1) for index in range(rails)]
            nics = [{"ibdev": "mlx5_%d" % index, "netdev": netdev, "peer": "sw-" + netdev, "pci": "0000:%s:00.0" % ["1a", "2a"][index],
                     "mac": "10:70:fd:5c:af:%02x" % index} for index, netdev in enumerate(netdevs)]
            (self.root / "hardware.json").write_text(json.dumps({
                "gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 8, "seed": "dc1-gpu1",
                "fabric": dict({"name": "dc1", "link_layer": link_layer, "rdma": True, "rails": rails, "rail_gbps": 400,
                                "down_rails": [], "degraded_rails": [], "degraded_rail_gbps": 100, "nics": nics}, **fabric)}))

        def netdev(self, name, operstate="up", mtu=9000, ipv4=()):
            (self.net / name).mkdir(parents=True, exist_ok=True)
            (self.net / name / "operstate").write_text(operstate + "\n")
            (self.net / name / "mtu").write_text("%d\n" % mtu)
            table = json.loads(self.addresses.read_text()) if self.addresses.exists() else {}
            table[name] = [{"family": "inet", "local": address, "prefixlen": 31, "scope": "global"} for address in ipv4]
            self.addresses.write_text(json.dumps(table))

        def tool(self, name, *args):
            return subprocess.run([str(self.bin / name)] + list(args), env=self.env, capture_output=True, text=True, check=False)

    lab = Node()
    lab.bin.mkdir()
    for name in TOOLS:
        (lab.bin / name).write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (PYTHON, DOUBLE))
        # argv[0] decides the tool: run the double through a same-named link instead of a wrapper.
        (lab.bin / name).unlink()
        (lab.bin / name).symlink_to(DOUBLE)
    # ip -j addr show dev <netdev>: the addresses this test configured.
    (lab.bin / "ip").write_text(
        "#!%s\nimport json, sys\ntable = json.load(open(%r))\nname = sys.argv[-1]\n"
        "print(json.dumps([{'ifname': name, 'addr_info': table.get(name, [])}]))\n" % (PYTHON, str(lab.addresses)))
    (lab.bin / "ip").chmod(0o755)
    lab.hardware()
    lab.run.mkdir()
    (lab.run / "driver-loaded").write_text("mlx5_core\n")
    lab.netdev("ens1np0", ipv4=["10.99.0.11"])
    lab.netdev("ens2np0", operstate="down", mtu=1500)
    return lab


def test_ibv_devinfo_lists_one_hca_per_rail_in_the_real_layout(node):
    result = node.tool("ibv_devinfo")
    assert result.returncode == 0
    blocks = result.stdout.strip("\n").split("\n\n")
    assert len(blocks) == 2
    recorded = (FIXTURES / "ibv_devinfo__cx7_roce_12hca.txt").read_text().split("\n\n")[0].splitlines()
    produced = blocks[0].splitlines()
    # Same keys, tabs and order as a recorded ConnectX-7 RoCE HCA; only identities differ.
    assert [line.split(":")[0] for line in produced] == [line.split(":")[0] for line in recorded]
    assert produced[0] == "hca_id:\tmlx5_0"
    assert "\t\t\tstate:\t\t\tPORT_ACTIVE (4)" in produced
    assert "\t\t\tactive_mtu:\t\t4096 (5)" in produced
    assert "\t\t\tlink_layer:\t\tEthernet" in produced
    second = blocks[1].splitlines()
    assert "\t\t\tstate:\t\t\tPORT_DOWN (1)" in second
    assert "\t\t\tactive_mtu:\t\t1024 (3)" in second


def test_verbose_gid_table_puts_the_rocev2_ipv4_gid_at_index_3(node):
    lines = [line.strip() for line in node.tool("ibv_devinfo", "-v", "-d", "mlx5_0").stdout.splitlines() if "GID[" in line]
    assert len(lines) == 4
    assert lines[3] == "GID[  3]:\t\t0000:0000:0000:0000:0000:ffff:0a63:000b, RoCE v2"
    assert lines[0].endswith(", RoCE v1") and lines[0].split("\t")[-1].startswith("fe80:0000:0000:0000:")


def test_show_gids_matches_the_recorded_layout(node):
    produced = node.tool("show_gids").stdout.splitlines()
    recorded = (FIXTURES / "show_gids__roce_single.txt").read_text().splitlines()
    assert produced[:2] == recorded[:2]
    assert produced[-1] == "n_gids_found=6"
    # The row shapes (tabs included) of the recorded link-local and IPv4 rows.
    link_local = produced[3].split("\t")
    assert link_local[:3] == ["mlx5_0", "1", "1"]
    assert link_local[3].startswith("fe80:") and link_local[4:] == ["", "", "v2", "ens1np0"]
    assert produced[5].split("\t")[4:] == ["10.99.0.11  ", "v2", "ens1np0"]
    assert recorded[5].split("\t")[4:] == ["192.168.211.242  ", "v2", "rdma0"]


def test_ibdev2netdev_plain_and_verbose(node):
    assert node.tool("ibdev2netdev").stdout == "mlx5_0 port 1 ==> ens1np0 (Up)\nmlx5_1 port 1 ==> ens2np0 (Down)\n"
    verbose = node.tool("ibdev2netdev", "-v").stdout.splitlines()
    assert verbose[0].startswith("0000:1a:00.0 mlx5_0 (MT4129 - ")
    assert verbose[0].endswith("port 1 (ACTIVE) ==> ens1np0 (Up)")


def test_mlnx_qos_defaults_reproduce_the_recorded_output_then_keep_settings(node):
    recorded = (FIXTURES / "mlnx_qos__default_pcp.txt").read_text().splitlines()[:-1]
    assert node.tool("mlnx_qos", "-i", "ens1np0").stdout.splitlines()[:len(recorded)] == recorded
    changed = node.tool("mlnx_qos", "-i", "ens1np0", "--trust", "dscp", "--pfc", "0,0,0,1,0,0,0,0")
    assert changed.returncode == 0
    head = (FIXTURES / "mlnx_qos__trust_dscp_head.txt").read_text().splitlines()[:-1]
    again = node.tool("mlnx_qos", "-i", "ens1np0").stdout.splitlines()
    assert again[:len(head)] == head
    assert "        enabled     0   0   0   1   0   0   0   0   " in again
    # Another rail is untouched; a reboot (the run directory emptied) forgets everything.
    assert "Priority trust state: pcp" in node.tool("mlnx_qos", "-i", "ens2np0").stdout
    for path in (node.run / "qos").iterdir():
        path.unlink()
    assert "Priority trust state: pcp" in node.tool("mlnx_qos", "-i", "ens1np0").stdout


@pytest.mark.parametrize("args, rc, message", [
    (["-i", "eth9"], 1, "Netlink error: No such device"),
    (["-i", "ens1np0", "--trust", "vlan"], 2, "invalid choice"),
    (["-i", "ens1np0", "--pfc", "0,0,0,1"], 1, "eight"),
    ([], 2, "Interface name is required"),
])
def test_mlnx_qos_refusals(node, args, rc, message):
    result = node.tool("mlnx_qos", *args)
    assert (result.returncode, message in result.stderr) == (rc, True)


def test_cma_roce_mode_and_tos_keep_their_values(node):
    assert node.tool("cma_roce_mode", "-d", "mlx5_0", "-p", "1").stdout == "IB/RoCE v1\n"
    assert node.tool("cma_roce_mode", "-d", "mlx5_0", "-p", "1", "-m", "2").stdout == "RoCE v2\n"
    assert node.tool("cma_roce_mode", "-d", "mlx5_0", "-p", "1").stdout == "RoCE v2\n"
    assert node.tool("cma_roce_tos", "-d", "mlx5_0", "-p", "1", "-t", "106").stdout == "106\n"
    assert node.tool("cma_roce_tos", "-d", "mlx5_1", "-p", "1").stdout == "0\n"
    assert node.tool("cma_roce_mode", "-d", "mlx5_9", "-p", "1").returncode == 1


def test_no_devices_until_the_driver_is_loaded_or_with_a_broken_stack(node):
    (node.run / "driver-loaded").unlink()
    assert node.tool("ibv_devinfo").stdout == "No IB devices found\n"
    assert node.tool("ibdev2netdev").stdout == ""
    (node.run / "driver-loaded").write_text("mlx5_core\n")
    node.hardware(rdma=False)
    assert node.tool("ibv_devinfo").stdout == "No IB devices found\n"


def test_infiniband_rails(node):
    node.hardware(link_layer="IB", rails=2, down_rails=[1], rail_gbps=200)
    node.netdev("ib0")
    node.netdev("ib1")
    output = node.tool("ibv_devinfo", "-v").stdout
    assert output.count("link_layer:\t\tInfiniBand") == 2
    assert output.count("PORT_ACTIVE (4)") == 1 and output.count("PORT_DOWN (1)") == 1
    assert "active_speed:\t\t50.0 Gbps (64)" in output
    assert "fw_ver:\t\t\t\t20.41.1000" in output
    assert node.tool("ibdev2netdev").stdout == "mlx5_0 port 1 ==> ib0 (Up)\nmlx5_1 port 1 ==> ib1 (Up)\n"
    assert "Operation not supported" in node.tool("mlnx_qos", "-i", "ib0").stderr


def test_openibd_loads_and_unloads_the_driver(node):
    (node.run / "driver-loaded").unlink()
    assert node.tool("openibd", "start", "bootid=1").returncode == 0
    assert node.tool("ibv_devinfo").stdout.startswith("hca_id:\tmlx5_0\n")
    assert node.tool("openibd", "stop").returncode == 0
    assert node.tool("openibd", "status").returncode == 3


def test_rdma_link_prints_the_real_layout(node):
    recorded = (FIXTURES / "rdma_link__new.txt").read_text().splitlines()
    shape = re.compile(r"^link \S+/1 state (ACTIVE|DOWN) physical_state (LINK_UP|DISABLED) netdev \S+$")
    assert all(shape.match(line.rstrip()) for line in recorded)
    result = node.tool("rdma", "link", "show")
    assert result.returncode == 0
    assert [line.rstrip() for line in result.stdout.splitlines()] == [
        "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev ens1np0",
        "link mlx5_1/1 state DOWN physical_state DISABLED netdev ens2np0",
    ]
    assert node.tool("rdma", "link").stdout == result.stdout
    assert node.tool("rdma", "link", "show", "mlx5_1/1").stdout.startswith("link mlx5_1/1 state DOWN")
    assert node.tool("rdma", "link", "show", "mlx5_7").returncode == 1
    assert node.tool("rdma", "dev").returncode == 255


def test_rdma_link_of_infiniband_ports_carries_the_subnet_and_lids(node):
    node.hardware(link_layer="IB", rails=1)
    node.netdev("ib0")
    assert node.tool("rdma", "link").stdout.rstrip() == (
        "link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 100 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP netdev ib0")


def test_the_inbox_driver_is_loaded_at_boot_without_openibd(node):
    (node.run / "driver-loaded").unlink()
    assert node.tool("rdma", "link").stdout == ""
    node.hardware(kernel_driver="inbox")
    assert node.tool("ibv_devinfo").stdout.startswith("hca_id:\tmlx5_0\n")
    assert node.tool("rdma", "link").stdout.count("\n") == 2
    node.hardware(kernel_driver="inbox", rdma=False)
    assert node.tool("ibv_devinfo").stdout == "No IB devices found\n"


def test_a_double_under_an_unknown_name_is_a_lab_error(tmp_path):
    link = tmp_path / "mlnx-nic"
    link.symlink_to(DOUBLE)
    assert subprocess.run([str(link)], capture_output=True, check=False).returncode == 255


# The rdma role's boot script (roles/rdma/files/onprem-rdma-apply) against the double: what the molecule scenario
# runs in a container, here without one.
APPLY = ROOT / "roles" / "rdma" / "files" / "onprem-rdma-apply"


def apply(node, *extra, qos=True, numvfs=None):
    config = node.root / "rails.json"
    config.write_text(json.dumps({
        "qos": qos, "trust": "dscp", "pfc_priorities": [3], "ecn_priorities": [3], "roce_mode": 2, "tos": 106, "cable_len": 0,
        "rails": [{"name": "rail0", "netdev": "ens1np0", "ibdev": "mlx5_0", "numvfs": numvfs}]}))
    return subprocess.run([PYTHON, str(APPLY), "--config", str(config)] + list(extra), env=node.env, capture_output=True, text=True, check=False)


def test_boot_script_applies_reads_back_and_reapplies_after_a_reboot(node):
    check = apply(node, "--check")
    assert check.returncode == 0, check.stderr
    assert "would change: ens1np0 trust pcp -> dscp" in check.stdout
    assert "Priority trust state: pcp" in node.tool("mlnx_qos", "-i", "ens1np0").stdout
    first = apply(node)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        "changed: ens1np0 trust pcp -> dscp",
        "changed: ens1np0 pfc 0,0,0,0,0,0,0,0 -> 0,0,0,1,0,0,0,0",
        "ok: ens1np0 ecn has no sysfs controls with this driver (the firmware default applies)",
        "changed: ens1np0 rdma_cm mode IB/RoCE v1 -> RoCE v2",
        "changed: ens1np0 rdma_cm tos 0 -> 106",
    ]
    second = apply(node)
    assert "changed:" not in second.stdout and second.returncode == 0
    assert "would change" not in apply(node, "--check").stdout
    for state in ("qos", "rdma_cm"):
        for path in (node.run / state).iterdir():
            path.unlink()
    assert "changed: ens1np0 trust pcp -> dscp" in apply(node).stdout
    assert node.tool("cma_roce_mode", "-d", "mlx5_0", "-p", "1").stdout == "RoCE v2\n"


def test_boot_script_reports_what_it_cannot_do(node):
    result = apply(node, qos=False, numvfs=4)
    assert result.returncode == 1
    assert "error: ens1np0 has no SR-IOV" in result.stderr
    apply(node, "--check")  # rewrites the configuration with QoS on
    without_tools = subprocess.run([PYTHON, str(APPLY), "--config", str(node.root / "rails.json")],
                                   env=dict(node.env, PATH="/nonexistent"), capture_output=True, text=True, check=False)
    assert without_tools.returncode == 1
    assert "error: mlnx_qos is not installed (mlnx-tools): the trust state and PFC of ens1np0 cannot be set" in without_tools.stderr
    (node.root / "rails.json").write_text("{")
    broken = subprocess.run([PYTHON, str(APPLY), "--config", str(node.root / "rails.json")], env=node.env, capture_output=True, text=True, check=False)
    assert broken.returncode == 2 and "cannot read the configuration" in broken.stderr
