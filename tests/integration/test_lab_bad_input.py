"""Bad input to the lab and site playbooks fails before anything is created, with one clear sentence.

These run the real playbooks with ansible-playbook against copies of the lab inventory; no container
is started because every case must stop in a check that runs first.
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


def lab_inventory_copy(tmp_path, host_overrides):
    inventory = tmp_path / "inventory"
    copy_inventory("lab", inventory)
    for host, overrides in host_overrides.items():
        host_file = inventory / "host_vars" / f"{host}.yml"
        host_vars = yaml.safe_load(host_file.read_text())
        host_vars.update(overrides)
        host_file.write_text(yaml.safe_dump({k: v for k, v in host_vars.items() if v is not None}))
    return inventory


def run_playbook(playbook, inventory, path=None):
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    if path is not None:
        environment["PATH"] = path
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(REPO / "playbooks" / playbook)],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )


def one_line(text):
    return " ".join(text.split())


BAD_INVENTORIES = [
    pytest.param(
        {"dc1-gpu2": {"node_gpu_model": "NVIDIA H100X"}},
        "dc1-gpu2: node_gpu_model 'NVIDIA H100X' is not a GPU model this collection knows; set it to the name nvidia-smi prints, one of:",
        id="unknown-gpu-model",
    ),
    pytest.param(
        {"dc2-gpu1": {"node_gpu_model": None}},
        "dc2-gpu1: node_gpu_model '' is not a GPU model this collection knows",
        id="missing-gpu-model",
    ),
    pytest.param(
        {"dc1-gpu1": {"node_gpu_count": "eight"}},
        "dc1-gpu1: node_gpu_count must be a whole number from 1 to 16, not 'eight'.",
        id="gpu-count-not-a-number",
    ),
    pytest.param(
        {"dc1-gpu1": {"node_gpu_count": 64}},
        "dc1-gpu1: node_gpu_count must be a whole number from 1 to 16, not 64.",
        id="gpu-count-too-large",
    ),
]


@pytest.mark.parametrize("playbook", ["lab.yml", "site.yml"])
@pytest.mark.parametrize(("host_overrides", "message"), BAD_INVENTORIES)
def test_bad_inventory_fails_before_any_change(tmp_path, playbook, host_overrides, message):
    result = run_playbook(playbook, lab_inventory_copy(tmp_path, host_overrides))
    assert result.returncode != 0
    assert message in one_line(result.stdout + result.stderr)
    if message.endswith("one of:"):
        assert "NVIDIA H100 80GB HBM3" in result.stdout
    # The lab stops in its first play: the one that would create containers never starts.
    assert "PLAY [Create or remove the lab containers]" not in result.stdout
    assert "PLAY [Read the GPUs of the GPU nodes]" not in result.stdout
    assert "changed=" in result.stdout and "changed=1" not in result.stdout


@pytest.mark.parametrize(("playbook", "message"), [
    pytest.param(
        "lab.yml",
        "dc1-gpu1: datacenter (set in the group_vars of its datacenter group) must be a DNS label (lower-case letters, digits and '-',"
        " starting and ending with a letter or digit, at most 63 characters, e.g. dc1), not 'DC_1'."
        " dc1-gpu1: node_gpu_count must be a whole number from 1 to 16, not 0.",
        id="lab-both-problems-in-one-message",
    ),
    # site.yml checks each node's cluster settings first, and that check names the datacenter without a control plane.
    pytest.param(
        "site.yml",
        "dc1-gpu1: datacenter DC_1 has no host in the control_plane group, so there is no control plane for it to join;"
        " add its control-plane host there.",
        id="site-no-cluster-for-that-datacenter",
    ),
])
def test_bad_datacenter_fails_before_any_change(tmp_path, playbook, message):
    result = run_playbook(playbook, lab_inventory_copy(tmp_path, {"dc1-gpu1": {"datacenter": "DC_1", "node_gpu_count": 0}}))
    assert result.returncode != 0
    assert message in one_line(result.stdout)
    assert "changed=" in result.stdout and "changed=1" not in result.stdout


def test_datacenter_without_control_plane(tmp_path):
    inventory = lab_inventory_copy(tmp_path, {})
    hosts = yaml.safe_load((inventory / "hosts.yml").read_text())
    del hosts["all"]["children"]["dc2"]["children"]["dc2_control_plane"]
    del hosts["all"]["children"]["control_plane"]["children"]["dc2_control_plane"]
    (inventory / "hosts.yml").write_text(yaml.safe_dump(hosts))
    result = run_playbook("lab.yml", inventory)
    assert result.returncode != 0
    assert "Datacenter dc2 has no host in the control_plane group; add its control-plane host there." in one_line(result.stdout)


def path_without(command, tmp_path):
    """A PATH holding every command of this one except `command`, as on a machine without it."""
    shadow = tmp_path / "bin"
    shadow.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        if not os.path.isdir(directory):
            continue
        for entry in os.scandir(directory):
            if entry.name != command and not (shadow / entry.name).exists():
                (shadow / entry.name).symlink_to(entry.path)
    return str(shadow)


def test_lab_without_podman_says_what_to_install(tmp_path):
    result = run_playbook("lab.yml", lab_inventory_copy(tmp_path, {}), path=path_without("podman", tmp_path))
    assert result.returncode != 0
    output = one_line(result.stdout)
    assert "podman is not usable on this machine" in output
    assert "install it as root with `apt-get install podman runc` (or run `make deps`), then run `make lab` again." in output
    assert "PLAY [Prepare the lab nodes like freshly racked servers]" not in result.stdout
