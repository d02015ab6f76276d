"""rdma_facts reads the lab's NIC double (lab/doubles/mlnx_nic) as it reads real hosts: ports, netdevs, PCI addresses,
MTU, GIDs and QoS, through ansible-playbook and the module's real command lines.

This is the module/double contract the molecule scenario molecule/rdma relies on, checked without a container: the
double's netdevs are files under a fake /sys/class/net and ``ip`` is a stub printing the addresses.
"""
import json
import os
import pathlib
import sys

import subprocess
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
DOUBLE = REPO / "lab" / "doubles" / "mlnx_nic" / "mlnx-nic"
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable


def lab_node(tmp_path):
    bin_dir, net, run = tmp_path / "bin", tmp_path / "net", tmp_path / "run"
    for directory in (bin_dir, run):
        directory.mkdir()
    (run / "driver-loaded").write_text("mlx5_core\n")
    for name in ("ibv_devinfo", "show_gids", "ibdev2netdev", "mlnx_qos"):
        (bin_dir / name).symlink_to(DOUBLE)
    nics = []
    addresses = {}
    for index, (netdev, ipv4) in enumerate((("ens1np0", "10.99.0.11"), ("ens2np0", "10.99.1.11"))):
        nics.append({"ibdev": "mlx5_%d" % index, "netdev": netdev, "peer": "sw-" + netdev,
                     "pci": "0000:%s:00.0" % ["1a", "2a"][index], "mac": "10:70:fd:5c:af:%02x" % index})
        (net / netdev).mkdir(parents=True)
        (net / netdev / "operstate").write_text("up\n")
        (net / netdev / "mtu").write_text("9000\n")
        addresses[netdev] = [{"family": "inet", "local": ipv4, "prefixlen": 24, "scope": "global"}]
    (tmp_path / "hardware.json").write_text(json.dumps({"seed": "dc1-gpu1", "fabric": {
        "name": "dc1", "link_layer": "RoCE", "rdma": True, "rails": 2, "rail_gbps": 400, "down_rails": [],
        "degraded_rails": [], "degraded_rail_gbps": 100, "nics": nics}}))
    (tmp_path / "addresses.json").write_text(json.dumps(addresses))
    (bin_dir / "ip").write_text(
        "#!%s\nimport json, sys\ntable = json.load(open(%r))\nname = sys.argv[-1]\n"
        "print(json.dumps([{'ifname': name, 'addr_info': table.get(name, [])}]))\n" % (PYTHON, str(tmp_path / "addresses.json")))
    (bin_dir / "ip").chmod(0o755)
    return dict(os.environ, MLNX_NIC_DOUBLE_HARDWARE=str(tmp_path / "hardware.json"), MLNX_NIC_DOUBLE_RUN_DIR=str(run),
                MLNX_NIC_DOUBLE_SYS_NET=str(net), PATH="%s:%s" % (bin_dir, os.environ["PATH"]))


def test_rdma_facts_reads_the_double(tmp_path):
    environment = lab_node(tmp_path)
    (tmp_path / "sys").mkdir()
    playbook = tmp_path / "facts.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "rdma_facts on the NIC double", "hosts": "all", "connection": "local", "gather_facts": False,
        "tasks": [
            {"name": "Read", "onprem.gpu.rdma_facts": {"sysfs_root": str(tmp_path / "sys"), "rdma": "/nonexistent/rdma",
                                                       "qos_interfaces": ["ens1np0", "ens2np0"]}},
            {"name": "Keep", "ansible.builtin.copy": {"content": "{{ ansible_facts | to_json }}", "dest": str(tmp_path / "facts.json"),
                                                      "mode": "0644"}},
        ],
    }]))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu-test": {"ansible_python_interpreter": sys.executable}}}}))
    environment.update(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    result = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook)], cwd=REPO, env=environment,
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    facts = json.loads((tmp_path / "facts.json").read_text())
    assert facts["rdma_sources"] == ["ibv_devinfo", "show_gids", "ibdev2netdev"]
    ports = facts["rdma_ports"]
    assert [(port["ibdev"], port["netdev"], port["pci_address"], port["state"], port["link_layer"], port["active_mtu"])
            for port in ports] == [("mlx5_0", "ens1np0", "0000:1a:00.0", "ACTIVE", "Ethernet", 4096),
                                   ("mlx5_1", "ens2np0", "0000:2a:00.0", "ACTIVE", "Ethernet", 4096)]
    assert [port["roce_v2_ipv4_gid"]["ipv4"] for port in ports] == ["10.99.0.11", "10.99.1.11"]
    assert facts["rdma_gid_index"] == 3
    assert facts["rdma_qos"]["ens1np0"]["trust"] == "pcp"
    assert facts["rdma_qos"]["ens1np0"]["pfc_enabled"] == [0] * 8
