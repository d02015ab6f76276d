"""The mig role's boot-time restore (roles/mig/files/onprem-mig-restore) against the lab's nvidia-smi double: after a
reboot the double lists no GPU instances and Hopper GPUs have MIG mode off (lab/doubles/nvidia_smi/README.md); the
restore creates the recorded instances again at the same placements, changes nothing where they are, and leaves a GPU
holding other instances alone. An Ampere GPU applies a pending MIG mode change at the reboot and keeps it: the restore
never changes it back, and the record the mig_config module writes holds the mode being applied.
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


@pytest.fixture()
def dc2_node():
    with tempfile.TemporaryDirectory(prefix="mig-restore-") as directory:
        yield Node(pathlib.Path(directory), "NVIDIA A100-SXM4-80GB", 8, "dc2-gpu1")


class Node:
    """GPUs behind the double (two H100 unless told); `nvidia-smi` in the node's directory is the double with its inputs."""

    def __init__(self, directory, model="NVIDIA H100 80GB HBM3", count=2, seed="dc1-gpu1"):
        self.directory = directory
        self.state = directory / "state.json"
        (directory / "hardware.json").write_text(json.dumps({"gpu_model": model, "gpu_count": count, "seed": seed}))
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

    def edit_state(self, change):
        self.call("--query-gpu=index", "--format=csv")  # the double's bookkeeping first, so that a new count is applied
        state = json.loads(self.state.read_text())
        change(state)
        self.state.write_text(json.dumps(state))

    def reboot(self):
        self.edit_state(lambda state: state.update(boots=state.get("boots", 0) + 1))

    def modes(self):
        return self.call("--query-gpu=mig.mode.current,mig.mode.pending", "--format=csv,noheader").splitlines()

    def apply(self, selected, mig_configs):
        """Run the mig_config module (as the mig role does, with GPU resets allowed) and write the record as the role does."""
        collections = self.directory / "collections"
        (collections / "ansible_collections" / "onprem").mkdir(parents=True, exist_ok=True)
        (collections / "ansible_collections" / "onprem" / "gpu").symlink_to(ROOT, target_is_directory=True)
        arguments = {"selected": selected, "mig_configs": mig_configs, "nvidia_smi": str(self.smi)}
        result = subprocess.run([sys.executable, "-m", "ansible_collections.onprem.gpu.plugins.modules.mig_config"],
                                input=json.dumps({"ANSIBLE_MODULE_ARGS": arguments}), capture_output=True, text=True, check=False,
                                timeout=120, env=dict(os.environ, PYTHONPATH=str(collections)))
        shutil.rmtree(collections)
        outcome = json.loads(result.stdout)
        assert "failed" not in outcome, outcome
        self.record.write_text(json.dumps({"layout": selected, "gpus": outcome["gpu_instances"]}))
        return outcome

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


DC2_LAYOUTS = {
    "all-3g.40gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}],
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
}


def test_an_ampere_gpu_taken_out_of_mig_through_a_reboot_stays_out_and_the_restore_succeeds(dc2_node):
    # dc2's A100s go to all-disabled while DCGM holds them: the disable waits for a reset, then the node reboots.
    dc2_node.apply("all-3g.40gb", DC2_LAYOUTS)
    dc2_node.edit_state(lambda state: state.update(holders=["nv-hostengine"]))
    outcome = dc2_node.apply("all-disabled", DC2_LAYOUTS)
    assert outcome["reboot_required"] is True
    assert dc2_node.modes() == ["Enabled, Disabled"] * 8
    dc2_node.reboot()
    assert dc2_node.modes() == ["Disabled, Disabled"] * 8

    restored = dc2_node.restore()
    # Success: kubelet, which requires the boot unit, starts.
    assert (restored.returncode, restored.stdout, restored.stderr) == (0, "", "")
    assert dc2_node.modes() == ["Disabled, Disabled"] * 8


def test_an_ampere_gpu_found_out_of_mig_at_boot_is_left_so_whatever_the_record_says(dc2_node):
    # A record listing the GPU in MIG mode, as one written before its disable (by hand, or by an older collection).
    dc2_node.apply("all-3g.40gb", DC2_LAYOUTS)
    dc2_node.call("mig", "-dci", "-i", "0")
    dc2_node.call("mig", "-dgi", "-i", "0")
    dc2_node.call("-i", "0", "-mig", "0")
    dc2_node.reboot()
    restored = dc2_node.restore()
    assert restored.returncode == 0, restored
    assert restored.stdout.splitlines()[0] == (
        "skipped: GPU 0 has MIG mode Disabled, which it keeps across reboots (Ampere), not Enabled as recorded: left as it is, "
        "without its 2 recorded GPU instances"
    )
    assert dc2_node.modes() == ["Disabled, Disabled"] + ["Enabled, Enabled"] * 7
    assert [row for row in dc2_node.placements() if row[0] == 1] == [(1, "3g.40gb", 0, 4), (1, "3g.40gb", 4, 4)]


def test_an_ampere_mig_enable_left_pending_comes_up_with_its_planned_instances_after_the_reboot(dc2_node):
    dc2_node.edit_state(lambda state: state.update(holders=["nv-hostengine"]))
    outcome = dc2_node.apply("all-3g.40gb", DC2_LAYOUTS)
    assert outcome["reboot_required"] is True and dc2_node.modes() == ["Disabled, Enabled"] * 8
    dc2_node.reboot()
    restored = dc2_node.restore()
    assert restored.returncode == 0, restored
    assert dc2_node.modes() == ["Enabled, Enabled"] * 8
    assert [row for row in dc2_node.placements() if row[0] == 7] == [(7, "3g.40gb", 0, 4), (7, "3g.40gb", 4, 4)]
