"""The RoCEv2 GID index that rdma_facts finds is the NCCL_IB_GID_INDEX of the network benchmark.

The module reads a sysfs tree laid out like a two-rail ConnectX-7 host (in a temporary directory, with the tools
pointed at paths that do not exist), and the network_benchmark role's settings (its defaults/main.yml and vars/main.yml)
turn the fact into the nccl_ib_gid_index that its tasks/run.yml passes to
onprem.gpu.nccl_allreduce. The whole benchmark runs on the lab (tests/e2e/network_benchmark_e2e.sh).
"""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")


def sysfs_rail(root, ibdev, netdev, ipv4_hex, extra_ipv6=False):
    port = root / "class" / "infiniband" / ibdev / "ports" / "1"
    for sub in ("gids", "gid_attrs/types", "gid_attrs/ndevs"):
        (port / sub).mkdir(parents=True)
    (port / "state").write_text("4: ACTIVE\n")
    (port / "phys_state").write_text("5: LinkUp\n")
    (port / "link_layer").write_text("Ethernet\n")
    gids = ["fe80:0000:0000:0000:1270:fdff:fe27:250b"] * 2
    if extra_ipv6:
        # A SLAAC address before the IPv4 one moves the RoCEv2 IPv4 GID to index 5.
        gids += ["2010:0200:0000:0002:1270:fdff:fe27:250b"] * 2
    gids += ["0000:0000:0000:0000:0000:ffff:" + ipv4_hex] * 2
    for index, gid in enumerate(gids):
        (port / "gids" / str(index)).write_text(gid + "\n")
        (port / "gid_attrs" / "types" / str(index)).write_text(("RoCE v2" if index % 2 else "IB/RoCE v1") + "\n")
        (port / "gid_attrs" / "ndevs" / str(index)).write_text(netdev + "\n")


def benchmark_gid_index(tmp_path, extra_vars=None):
    playbook = tmp_path / "gid.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "The GID index from rdma_facts to the benchmark's NCCL settings",
        "hosts": "all",
        "connection": "local",
        "gather_facts": False,
        "vars_files": [str(REPO / "roles" / "network_benchmark" / name / "main.yml") for name in ("defaults", "vars")],
        "tasks": [
            {"name": "Read the rails", "onprem.gpu.rdma_facts": {
                "sysfs_root": str(tmp_path / "sys"), "ibv_devinfo": "/nonexistent/ibv_devinfo",
                "ibdev2netdev": "/nonexistent/ibdev2netdev", "rdma": "/nonexistent/rdma"}},
            {"name": "Write what NCCL would get", "ansible.builtin.copy": {
                "content": "{{ {'gid_index': __network_benchmark_settings['nccl_ib_gid_index']} | to_json }}",
                "dest": str(tmp_path / "nccl.json"), "mode": "0644"}},
        ],
    }]))
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"gpu-test": {"ansible_python_interpreter": sys.executable}}}}))
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    argv = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook)]
    if extra_vars:
        argv += ["-e", json.dumps(extra_vars)]
    result = subprocess.run(argv, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads((tmp_path / "nccl.json").read_text())["gid_index"]


def test_the_index_rdma_facts_finds_is_the_benchmarks_nccl_ib_gid_index(tmp_path):
    sysfs_rail(tmp_path / "sys", "mlx5_0", "ens1np0", "0a63:000b")
    sysfs_rail(tmp_path / "sys", "mlx5_1", "ens2np0", "0a63:010b")
    assert benchmark_gid_index(tmp_path) == 3


def test_a_table_with_an_ipv6_address_moves_the_index(tmp_path):
    sysfs_rail(tmp_path / "sys", "mlx5_0", "ens1np0", "0a63:000b", extra_ipv6=True)
    assert benchmark_gid_index(tmp_path) == 5


@pytest.mark.parametrize("extra_vars, expected", [
    pytest.param({"network_benchmark_nccl_ib_gid_index": 7}, 7, id="operator-override-wins"),
    pytest.param(None, None, id="no-rails-no-index"),
])
def test_override_and_absence(tmp_path, extra_vars, expected):
    (tmp_path / "sys" / "class" / "infiniband").mkdir(parents=True)
    if extra_vars:
        sysfs_rail(tmp_path / "sys", "mlx5_0", "ens1np0", "0a63:000b")
    assert benchmark_gid_index(tmp_path, extra_vars) == expected
