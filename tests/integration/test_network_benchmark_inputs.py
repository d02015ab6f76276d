"""Bad fabric descriptions stop playbooks/network_benchmark.yml before anything runs, with one clear sentence.

These run the real playbook with ansible-playbook against copies of the lab inventory; no container is
needed because every case must stop in the first play, which only reads the inventory. The benchmark
itself runs on the lab in tests/e2e/network_benchmark_e2e.sh.
"""
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from local_play import copy_inventory

REPO = pathlib.Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")


def lab_inventory_copy(tmp_path, overrides):
    """A copy of the lab inventory with {group or host: {variable: value}} applied (host_vars when the file exists).

    Its hosts point at containers that do not exist: a case that wrongly passes the first play fails to
    connect instead of benchmarking a running lab.
    """
    inventory = tmp_path / "inventory"
    copy_inventory("lab", inventory)
    overrides = dict(overrides, all=dict(overrides.get("all", {}), ansible_host="onprem-gpu-lab-absent-{{ inventory_hostname }}"))
    for name, values in overrides.items():
        path = inventory / "host_vars" / f"{name}.yml"
        if not path.exists():
            path = inventory / "group_vars" / f"{name}.yml"
        variables = yaml.safe_load(path.read_text()) if path.exists() else {}
        variables.update(values)
        path.write_text(yaml.safe_dump(variables))
    return inventory


def run_benchmark(inventory, *extra):
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(REPO / "playbooks" / "network_benchmark.yml"), *extra],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )


def one_line(text):
    return " ".join(text.split())


@pytest.mark.parametrize(("overrides", "message"), [
    pytest.param({"dc1_gpu_workers": {"node_rdma_link_layer": "Ethernet"}}, "node_rdma_link_layer (IB or RoCE, got Ethernet)", id="link-layer"),
    pytest.param({"dc1_gpu_workers": {"node_rdma_rails": "eight"}}, "node_rdma_rails (NICs NCCL uses, got eight)", id="rails-not-a-number"),
    pytest.param({"dc2_gpu_workers": {"node_rdma_rail_gbps": 0}}, "node_rdma_rail_gbps (link speed, got 0)", id="no-link-speed"),
    pytest.param({"dc2-gpu1": {"node_gpu_model": "NVIDIA B300"}}, "node_gpu_model (a known model, got 'NVIDIA B300')", id="unknown-gpu"),
])
def test_bad_fabric_description_stops_before_any_run(tmp_path, overrides, message):
    result = run_benchmark(lab_inventory_copy(tmp_path, overrides))
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0
    assert message in output, output[-2000:]
    assert "PLAY [Install nccl-tests and OpenMPI" not in result.stdout


def test_a_threshold_override_that_is_not_a_number_is_refused_by_name(tmp_path):
    # Overrides are merged over the GPU catalogue's thresholds: one for Hopper leaves the A100 nodes the catalogue's.
    overrides = '{"network_benchmark_nvlink_busbw": {"Hopper/NVSwitch": 480}, "network_benchmark_nvlink_ring_busbw": {"Ampere/NVSwitch": "fast"}}'
    result = run_benchmark(lab_inventory_copy(tmp_path, {}), "-e", overrides)
    output = one_line(result.stdout + result.stderr)
    assert result.returncode != 0
    assert "network_benchmark_nvlink_ring_busbw['Ampere/NVSwitch'] must be a number of GB/s above 0, not 'fast'." in output, output[-2000:]
    assert "PLAY [Install nccl-tests and OpenMPI" not in result.stdout


def test_syntax():
    result = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "--syntax-check", "-i", str(REPO / "inventories" / "lab"), str(REPO / "playbooks" / "network_benchmark.yml")],
        cwd=REPO, env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")), capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
