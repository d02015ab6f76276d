"""The mig role's boot-time restore (roles/mig/files/onprem-mig-restore) against the lab's nvidia-smi double: after a
reboot the double lists no GPU instances and Hopper GPUs have MIG mode off (lab/doubles/nvidia_smi/README.md); the
restore creates the recorded instances again at the same placements, changes nothing where they are, and leaves a GPU
holding other instances alone.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOUBLE = ROOT / "lab" / "doubles" / "nvidia_smi" / "nvidia-smi"
RESTORE = ROOT / "roles" / "mig" / "files" / "onprem-mig-restore"
PYTHON = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+\d+\s+(\d+):(\d+)\s*\|$")


@pytest.fixture()
def node():
    with tempfile.TemporaryDirectory(prefix="mig-restore-") as directory:
        yield Node(pathlib.Path(directory))


class Node:
    """Two H100 GPUs behind the double; `nvidia-smi` in the node's bin directory is the double with its inputs."""

    def __init__(self, directory):
        self.directory = directory
        self.state = directory / "state.json"
        (directory / "hardware.json").write_text(json.dumps({"gpu_model": "NVIDIA H100 80GB HBM3", "gpu_count": 2, "seed": "dc1-gpu1"}))
        (directory / "driver.json").write_text(json.dumps({"driver_version": "580.65.06", "cuda_version": "13.0"}))
        shutil.copyfile(DOUBLE, directory / "double")
        self.smi = directory / "nvidia-smi"
        self.smi.write_text("#!/bin/sh\nNVSMI_DOUBLE_HARDWARE=%s NVSMI_DOUBLE_STATE=%s NVSMI_DOUBLE_DRIVER=%s exec %s %s \"$@\"\n" % (
            directory / "hardware.json", self.state, directory / "driver.json", PYTHON, directory / "double"))
        self.smi.chmod(0o755)
        self.record = directory / "instances.json"

    def call(self, *arguments):
        result = subprocess.run([str(self.smi), *arguments], capture_output=True, text=True, check=False, timeout=30)
        assert result.returncode == 0, result
        return result.stdout

    def uuid(self, index):
        return self.call("--query-gpu=uuid", "--format=csv,noheader", "-i", str(index)).strip()

    def mode(self, index):
        return self.call("--query-gpu=mig.mode.current", "--format=csv,noheader", "-i", str(index)).strip()

    def placements(self):
        result = subprocess.run([str(self.smi), "mig", "-lgi"], capture_output=True, text=True, check=False, timeout=30)
        rows = [LGI_ROW.match(line.strip()) for line in result.stdout.splitlines()]
        return sorted((int(row.group(1)), row.group(2), int(row.group(4)), int(row.group(5))) for row in rows if row)

    def reboot(self):
        state = json.loads(self.state.read_text())
        state["boots"] = state.get("boots", 0) + 1
        self.state.write_text(json.dumps(state))

    def restore(self, *extra):
        return subprocess.run([PYTHON, str(RESTORE), "--config", str(self.record), "--nvidia-smi", str(self.smi), *extra],
                              capture_output=True, text=True, check=False, timeout=60)


def partition(node):
    """GPU 0 in MIG mode with 1g.10gb at 2 and 3 and 3g.40gb at 4 (each with its compute instance), GPU 1 whole;
    recorded as the mig role records a run (mig_config's gpu_instances)."""
    node.call("-i", "0", "-mig", "1")
    node.call("mig", "-cgi", "19:2,19:3,9:4", "-C", "-i", "0")
    node.record.write_text(json.dumps({"layout": "lab-inference", "gpus": [{"index": 0, "uuid": node.uuid(0), "gpu_instances": [
        {"profile": "1g.10gb", "profile_id": 19, "placement": {"start": 2, "size": 1}, "compute_instances": [{"profile": "1g.10gb", "profile_id": 0}]},
        {"profile": "1g.10gb", "profile_id": 19, "placement": {"start": 3, "size": 1}, "compute_instances": [{"profile": "1g.10gb", "profile_id": 0}]},
        {"profile": "3g.40gb", "profile_id": 9, "placement": {"start": 4, "size": 4}, "compute_instances": [{"profile": "3g.40gb", "profile_id": 2}]},
    ]}]}))


EXPECTED = [(0, "1g.10gb", 2, 1), (0, "1g.10gb", 3, 1), (0, "3g.40gb", 4, 4)]


def test_after_a_reboot_the_same_instances_come_back_at_the_same_placements(node):
    partition(node)
    assert node.placements() == EXPECTED
    node.reboot()
    assert (node.placements(), node.mode(0)) == ([], "Disabled")

    checked = node.restore("--check")
    assert checked.returncode == 0, checked
    assert "would change: GPU 0 MIG mode Disabled -> Enabled" in checked.stdout
    assert (node.placements(), node.mode(0)) == ([], "Disabled")

    restored = node.restore()
    assert restored.returncode == 0, restored
    assert restored.stdout.splitlines() == [
        "changed: GPU 0 MIG mode Disabled -> Enabled",
        "changed: GPU 0 create GPU instances 9:4, 19:2, 19:3 with their compute instances",
    ]
    assert node.placements() == EXPECTED
    assert "MIG 1g.10gb" in node.call("mig", "-lci", "-i", "0")

    again = node.restore()
    assert (again.returncode, again.stdout) == (0, "ok: GPU 0 holds its 3 recorded GPU instances\n")
    assert node.mode(1) == "Disabled"


def test_a_gpu_holding_other_instances_is_left_alone_and_reported(node):
    partition(node)
    node.call("mig", "-dci", "-i", "0")
    node.call("mig", "-dgi", "-i", "0")
    node.call("mig", "-cgi", "19:0", "-C", "-i", "0")
    result = node.restore()
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "failed: GPU 0 holds GPU instances 19:0, not the recorded 9:4, 19:2, 19:3: left alone; apply the layout with the mig "
        "role or mig_reconfigure.yml"]
    assert "was not restored on every GPU" in result.stderr
    assert node.placements() == [(0, "1g.10gb", 0, 1)]


def test_a_gpu_missing_from_the_node_or_a_bad_record_fails(node):
    partition(node)
    record = json.loads(node.record.read_text())
    record["gpus"][0]["uuid"] = "GPU-00000000-0000-0000-0000-000000000000"
    node.record.write_text(json.dumps(record))
    missing = node.restore()
    assert missing.returncode == 1
    assert missing.stdout.startswith("failed: GPU GPU-00000000-0000-0000-0000-000000000000 of the record is not on this node")
    node.record.write_text("{not json")
    bad = node.restore()
    assert bad.returncode == 2 and bad.stderr.startswith("error: cannot read the record")
