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

from ansible_collections.onprem.gpu.plugins.modules import nvme_cache_devices

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "blockdev"
LSBLK = ["/usr/bin/lsblk", "-J", "-b", "-O"]
NVME = ["/usr/sbin/nvme", "list", "-o", "json"]
ENVIRON = {"environ_update": {"LC_ALL": "C"}}
# The recorded lab container: its disks are loop0-3, which the container sees as /dev/nvme0n1-/dev/nvme3n1.
DEVNOS = {f"/dev/nvme{index}n1": f"7:{index}" for index in range(4)}
SWAPS_HEADER = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
MOUNTINFO_RAID = "23 1 0:21 / / rw - overlay overlay rw\n99 23 7:0 / /raid rw,noatime - xfs /dev/nvme0n1 rw\n"
MOUNTINFO_EMPTY = "23 1 0:21 / / rw - overlay overlay rw\n"


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


class FakeNode:
    """Answers the module's commands from recorded outputs; ``disks`` maps a path to its recorded state."""

    def __init__(self, disks, lsblk="lsblk_-J_-b_-O__lab_container_utillinux_2.38.1.json", nvme=None):
        self.disks = disks
        self.lsblk = lsblk
        self.nvme = nvme or (1, fixture("nvme_list_-o_json__no_nvme_controllers_nvmecli_2.3.txt"), "")
        self.calls = []

    def run_command(self, argv, environ_update=None):
        self.calls.append(argv)
        assert environ_update == {"LC_ALL": "C"}
        tool, args = Path(argv[0]).name, argv[1:]
        if tool == "lsblk":
            return 0, fixture(self.lsblk), ""
        if tool == "nvme":
            return self.nvme
        if tool == "mkfs.xfs":
            self.disks[args[-1]] = "xfs_nvme_cache_label"
            return 0, "", ""
        if tool in ("mount", "wipefs") and args[0] != "--no-act":
            return 0, "", ""
        if tool == "modprobe":
            return 1, "", "modprobe: FATAL: Module raid0 not found in directory /lib/modules/6.1.0-lab\n"
        state = self.disks[args[-1]]
        if tool == "wipefs":
            return 0, fixture(f"wipefs_--no-act_--json__{state}.json"), ""
        if tool == "blkid":
            output = fixture(f"blkid_-p_-o_export__{state}.txt")
            return (0 if output else 2), output, ""
        if tool == "mdadm":
            output = fixture(f"mdadm_--examine_--export__{state}.txt")
            return (0 if output.startswith("MD_") else 1), output if output.startswith("MD_") else "", "" if output.startswith("MD_") else output
        raise AssertionError(f"unexpected command {argv}")


BINS = ("lsblk", "wipefs", "blkid", "nvme", "mdadm", "mkfs.xfs", "mount", "modprobe")


def run_module(args, node, capsys, mountinfo=MOUNTINFO_EMPTY, busy=(), bins=BINS, entries=0, files=None):
    files = {"/proc/self/mountinfo": mountinfo, "/proc/swaps": SWAPS_HEADER} if files is None else files
    files.setdefault("/proc/self/mountinfo", mountinfo)
    files.setdefault("/proc/swaps", SWAPS_HEADER)

    def get_bin_path(name, required=False):
        if name in bins:
            return f"/usr/{'bin' if name == 'lsblk' else 'sbin'}/{name}"
        assert not required, name
        return None

    def resolve(path):
        devno = DEVNOS.get(path)
        return {"rdev": devno, "dev": "0:5"} if devno else None

    with patch_module_args(args), mock.patch.object(AnsibleModule, "run_command", side_effect=node.run_command), mock.patch.object(
        AnsibleModule, "get_bin_path", side_effect=get_bin_path
    ), mock.patch.object(nvme_cache_devices, "_read", side_effect=lambda path: files.get(path, "")), mock.patch.object(
        nvme_cache_devices.Node, "resolve", side_effect=resolve
    ), mock.patch.object(
        nvme_cache_devices.Node, "busy", side_effect=lambda node, path: path in busy, autospec=True
    ), mock.patch.object(
        nvme_cache_devices.os, "listdir", return_value=["x"] * entries
    ), mock.patch.object(
        nvme_cache_devices.os.path, "isdir", return_value=True
    ), mock.patch.object(
        nvme_cache_devices.Applier, "exists", side_effect=lambda path: path in files
    ), mock.patch.object(
        nvme_cache_devices.Applier, "makedirs", side_effect=lambda path: files.setdefault(path, "")
    ), mock.patch.object(
        nvme_cache_devices.Applier, "write", side_effect=lambda self, path, text, mode: files.__setitem__(path, text), autospec=True
    ), pytest.raises(
        SystemExit
    ):
        nvme_cache_devices.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_a_blank_disk_is_planned_and_nothing_is_written(check_mode, capsys):
    node = FakeNode({"/dev/nvme1n1": "blank"})
    result = run_module({"devices": ["/dev/nvme1n1"], "allow_loop": True, "host": "dc1-gpu1", "_ansible_check_mode": check_mode}, node, capsys)
    assert "failed" not in result
    assert result["changed"] is False
    assert result["msg"] == "Building the NVMe cache on dc1-gpu1: XFS on /dev/nvme1n1, 1.0 GiB."
    assert (result["plan"]["layout"], result["plan"]["action"], result["plan"]["target"]) == ("single", "create", "/dev/nvme1n1")
    # Read-only tools only, and mdadm only for RAID members.
    assert node.calls == [
        LSBLK,
        NVME,
        ["/usr/sbin/wipefs", "--no-act", "--json", "/dev/nvme1n1"],
        ["/usr/sbin/blkid", "-p", "-o", "export", "/dev/nvme1n1"],
    ]


def test_the_mounted_cache_is_adopted(capsys):
    node = FakeNode({"/dev/nvme0n1": "xfs_nvme_cache_label"})
    result = run_module({"devices": ["/dev/nvme0n1"], "allow_loop": True, "host": "dc1-gpu1"}, node, capsys, mountinfo=MOUNTINFO_RAID, busy={"/dev/nvme0n1"})
    assert result["msg"] == "Adopting the NVMe cache on dc1-gpu1: XFS on /dev/nvme0n1, 1.0 GiB."
    assert (result["plan"]["mounted"], result["plan"]["target_devno"]) == (True, "7:0")
    assert result["devices"][0]["state"] == "cache"


def test_members_of_the_cache_array_are_read_with_mdadm(capsys):
    node = FakeNode({"/dev/nvme2n1": "md_raid0_member_nvme_cache", "/dev/nvme3n1": "md_raid0_member_nvme_cache"})
    result = run_module({"devices": ["/dev/nvme2n1", "/dev/nvme3n1"], "allow_loop": True, "host": "dc1-gpu1"}, node, capsys)
    assert ["/usr/sbin/mdadm", "--examine", "--export", "/dev/nvme3n1"] in node.calls
    assert (result["plan"]["layout"], result["plan"]["action"], result["plan"]["assemble"]) == ("raid0", "adopt", True)


def test_without_mdadm_an_array_member_cannot_be_adopted(capsys):
    node = FakeNode({"/dev/nvme2n1": "md_raid0_member_nvme_cache", "/dev/nvme3n1": "md_raid0_member_nvme_cache"})
    result = run_module({"devices": ["/dev/nvme2n1", "/dev/nvme3n1"], "allow_loop": True, "host": "dc1-gpu1"}, node, capsys, bins=("lsblk", "wipefs", "blkid"))
    assert result["failed"] is True
    assert [refusal["reason"] for refusal in result["refusals"]] == ["has_data", "has_data"]


def test_refusal_fails_with_one_sentence_per_disk_and_the_evidence(capsys):
    node = FakeNode({"/dev/nvme1n1": "ext4_label_scratch"})
    result = run_module({"devices": ["/dev/nvme1n1"], "allow_loop": True, "host": "dc1-gpu1", "wipe": True, "wipe_confirm": ["dc1-gpu2"]}, node, capsys)
    assert result["failed"] is True
    assert result["msg"] == (
        "Refusing to build the NVMe cache on dc1-gpu1: /dev/nvme1n1 (loop1) holds an ext4 filesystem "
        "(label 'scratch', UUID 788b4c58-1965-4c44-b227-0058af952685); wipe is true but dc1-gpu1 is not listed in wipe_confirm, so it is left untouched."
    )
    assert result["plan"] is None
    assert result["devices"][0]["signatures"] == [{"type": "ext4", "uuid": "788b4c58-1965-4c44-b227-0058af952685", "label": "scratch"}]


def test_a_missing_path_is_refused_before_any_disk_is_read(capsys):
    node = FakeNode({})
    result = run_module({"devices": ["/dev/nvme7n1"], "host": "dc1-gpu1"}, node, capsys)
    assert result["msg"] == "Refusing to build the NVMe cache on dc1-gpu1: /dev/nvme7n1 does not exist on dc1-gpu1."
    assert node.calls == [LSBLK, NVME]


def test_files_under_the_mount_point_are_refused(capsys):
    node = FakeNode({"/dev/nvme1n1": "blank"})
    result = run_module({"devices": ["/dev/nvme1n1"], "allow_loop": True, "host": "dc1-gpu1", "mount_point": "/raid/"}, node, capsys, entries=2)
    assert result["msg"] == (
        "Refusing to build the NVMe cache on dc1-gpu1: /raid is not mounted but holds 2 entries on the disk below it; "
        "move them away so that the cache does not hide them."
    )


def test_nvme_list_adds_serials(capsys):
    node = FakeNode({"/dev/nvme0n1": "blank"}, lsblk="lsblk_-J__old_utillinux_strings.json", nvme=(0, fixture("nvme_list_-o_json__nvmecli_v1.json"), ""))
    result = run_module({"devices": ["S41RNF0M207885"], "host": "gpu-node-07", "wipe": True, "wipe_confirm": ["gpu-node-07"]}, node, capsys)
    assert result["msg"] == (
        "Refusing to build the NVMe cache on gpu-node-07: /dev/nvme0n1 is the OS disk (it holds / through nvme0n1p4); "
        "it is never used for the cache, whatever the settings."
    )
    assert {entry["device"]: entry["reason"] for entry in result["protected"]}["nvme0n1"] == "it holds / through nvme0n1p4"


def test_unreadable_nvme_list_is_a_warning(capsys):
    node = FakeNode({"/dev/nvme1n1": "blank"}, nvme=(0, "garbage", ""))
    with mock.patch.object(AnsibleModule, "warn") as warn:
        result = run_module({"devices": ["/dev/nvme1n1"], "allow_loop": True, "host": "dc1-gpu1"}, node, capsys)
    warn.assert_called_once_with("nvme list did not print JSON: garbage. Models and serials come from lsblk alone.")
    assert result["plan"]["action"] == "create"


def test_lsblk_failure_fails_with_the_command(capsys):
    node = FakeNode({})
    with mock.patch.object(node, "run_command", return_value=(32, "", "lsblk: unknown column: MOUNTPOINTS")):
        result = run_module({"discover": True, "host": "h"}, node, capsys)
    assert {key: result[key] for key in ("failed", "msg", "cmd", "rc", "stderr")} == {
        "failed": True,
        "msg": "lsblk failed with exit code 32: lsblk: unknown column: MOUNTPOINTS",
        "cmd": LSBLK,
        "rc": 32,
        "stderr": "lsblk: unknown column: MOUNTPOINTS",
    }


def test_the_hostname_is_the_default_host(capsys):
    node = FakeNode({})
    with mock.patch.object(nvme_cache_devices.socket, "gethostname", return_value="node-x"):
        result = run_module({}, node, capsys)
    assert result["msg"] == "Refusing to build the NVMe cache on node-x: No cache device is selected on node-x: list the drives in devices or enable discover."


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_state_present_builds_a_blank_disk_and_check_mode_only_says_so(check_mode, capsys):
    node = FakeNode({"/dev/nvme1n1": "blank"})
    files = {"/etc/fstab": "LABEL=boot /boot ext4 defaults 0 2\n"}
    args = {"state": "present", "devices": ["/dev/nvme1n1"], "allow_loop": True, "host": "dc1-gpu1", "_ansible_check_mode": check_mode, "_ansible_diff": True}
    result = run_module(args, node, capsys, files=files)
    line = "UUID=3887f75d-c7e8-4673-818c-0efaa97dc2ab /raid xfs noatime,nofail,x-systemd.device-timeout=30s 0 0"
    built = [
        ["/usr/sbin/mkfs.xfs", "-L", "nvme_cache", "/dev/nvme1n1"],
        ["/usr/sbin/mount", "-t", "xfs", "-o", "noatime,nofail,x-systemd.device-timeout=30s", "/dev/nvme1n1", "/raid"],
    ]
    assert result["changed"] is True
    assert result["actions"] == ["make the XFS filesystem on /dev/nvme1n1", "mount /raid by UUID in /etc/fstab", "mount /dev/nvme1n1 at /raid"]
    assert result["diff"][0]["before_header"] == "/etc/fstab"
    if check_mode:
        assert not any(argv in node.calls for argv in built)
        assert files["/etc/fstab"] == "LABEL=boot /boot ext4 defaults 0 2\n"
        assert result["cache"]["mounted"] is False
    else:
        assert [argv for argv in node.calls if argv in built] == built
        assert files["/etc/fstab"] == "LABEL=boot /boot ext4 defaults 0 2\n" + line + "\n"
        assert result["cache"]["fstab"] == [line]
        assert "/raid" in files


def test_state_present_refuses_a_raid0_without_md_before_touching_a_disk(capsys):
    node = FakeNode({"/dev/nvme2n1": "blank", "/dev/nvme3n1": "blank"})
    result = run_module({"state": "present", "devices": ["/dev/nvme2n1", "/dev/nvme3n1"], "allow_loop": True, "host": "dc1-gpu1"}, node, capsys, files={})
    assert result["failed"] is True
    assert result["msg"].startswith(
        "dc1-gpu1 cannot build the RAID0 over /dev/nvme2n1, /dev/nvme3n1: the running kernel has no md driver (/proc/mdstat is missing"
    )
    assert result["plan"]["action"] == "create"
    assert [argv[0] for argv in node.calls if Path(argv[0]).name in ("mdadm", "mkfs.xfs", "mount")] == []


def test_state_present_refuses_bad_settings_before_reading_anything(capsys):
    node = FakeNode({})
    result = run_module({"state": "present", "devices": ["/dev/nvme1n1"], "host": "dc1-gpu1", "mount_options": ["noatime"]}, node, capsys)
    assert result["msg"].startswith("Refusing to build the NVMe cache on dc1-gpu1: mount_options must contain nofail")
    assert node.calls == []


def test_state_present_refusals_are_the_planning_ones(capsys):
    node = FakeNode({"/dev/nvme1n1": "ext4_label_scratch"})
    result = run_module({"state": "present", "devices": ["/dev/nvme1n1"], "allow_loop": True, "host": "dc1-gpu1"}, node, capsys)
    assert result["msg"].startswith("Refusing to build the NVMe cache on dc1-gpu1: /dev/nvme1n1 (loop1) holds an ext4 filesystem")
    assert result["commands"] == []
    assert all(Path(argv[0]).name not in ("mkfs.xfs", "mount") and argv[1:2] != ["--all"] for argv in node.calls)


CACHE_LINE = "UUID=3887f75d-c7e8-4673-818c-0efaa97dc2ab /raid xfs noatime,nofail,x-systemd.device-timeout=30s 0 0"
VERIFY = {"devices": ["/dev/nvme0n1"], "allow_loop": True, "host": "dc1-gpu1", "verify": True}


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_verify_passes_the_mounted_cache_with_its_fstab_line(check_mode, capsys):
    node = FakeNode({"/dev/nvme0n1": "xfs_nvme_cache_label"})
    files = {"/etc/fstab": "LABEL=boot /boot ext4 defaults 0 2\n" + CACHE_LINE + "\n"}
    result = run_module(dict(VERIFY, _ansible_check_mode=check_mode), node, capsys, mountinfo=MOUNTINFO_RAID, busy={"/dev/nvme0n1"}, files=files)
    assert "failed" not in result and "problems" not in result
    assert result["msg"] == "Adopting the NVMe cache on dc1-gpu1: XFS on /dev/nvme0n1, 1.0 GiB."
    assert result["cache"]["fstab"] == [CACHE_LINE]


def test_verify_fails_with_one_sentence_on_a_cache_without_its_fstab_line(capsys):
    node = FakeNode({"/dev/nvme0n1": "xfs_nvme_cache_label"})
    result = run_module(VERIFY, node, capsys, mountinfo=MOUNTINFO_RAID, busy={"/dev/nvme0n1"}, files={"/etc/fstab": ""})
    assert result["failed"] is True
    assert result["msg"].startswith(
        "dc1-gpu1: the cache is not what the role builds (Adopting the NVMe cache on dc1-gpu1: XFS on /dev/nvme0n1, 1.0 GiB.; mounted at /raid: True; {"
    )
    assert result["problems"] == [result["msg"]]
    assert result["cache"]["fstab"] == []


def test_verify_fails_on_a_cache_that_is_not_built_and_check_mode_does_not_judge_it(capsys):
    node = FakeNode({"/dev/nvme1n1": "blank"})
    args = dict(VERIFY, devices=["/dev/nvme1n1"])
    result = run_module(args, node, capsys)
    assert result["msg"] == (
        "dc1-gpu1: the cache is not what the role builds (Building the NVMe cache on dc1-gpu1: XFS on /dev/nvme1n1, 1.0 GiB.; mounted at /raid: False; {})."
    )
    assert "failed" not in run_module(dict(args, _ansible_check_mode=True), FakeNode({"/dev/nvme1n1": "blank"}), capsys)


def test_verify_is_refused_with_state_present_before_reading_anything(capsys):
    node = FakeNode({})
    result = run_module(dict(VERIFY, state="present"), node, capsys)
    assert result["failed"] is True and result["msg"].startswith("verify judges the cache as the node has it, with state=planned")
    assert node.calls == []
