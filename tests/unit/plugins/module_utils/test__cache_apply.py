# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._cache_apply import (
    PENDING_UUID,
    ApplyError,
    Settings,
    apply,
    inspect,
    settings_problems,
    verification_problems,
    with_block,
    with_fstab_line,
)

UUID = "6b2d2f0e-3c39-4b8e-9d0c-5a8f1e7b2c41"
OPTIONS = "noatime,nofail,x-systemd.device-timeout=30s"
FSTAB = "# /etc/fstab: static file system information.\nLABEL=boot /boot ext4 defaults 0 2\n"
SETTINGS = Settings(host="dc1-gpu1")
# mdadm --detail --brief of the array as mdadm 4.2 prints it.
MDADM_BRIEF = "ARRAY /dev/md/nvme_cache metadata=1.2 name=dc1-gpu1:nvme_cache UUID=2c6e0f4a:8b1d4e37:9a5c7d3f:1b9e0a42\n"
XFS_EXPORT = f"UUID={UUID}\nBLOCK_SIZE=512\nTYPE=xfs\nLABEL=nvme_cache\n"


def plan(layout="single", action="create", devices=("/dev/nvme1n1",), wipe=(), target_devno="259:1", mounted=False, assemble=False):
    target = devices[0] if layout == "single" else "/dev/md/nvme_cache"
    return {
        "layout": layout,
        "action": action,
        "devices": list(devices),
        "wipe": list(wipe),
        "target": target,
        "target_devno": target_devno,
        "mounted": mounted,
        "size": 1 << 30,
        "array": None,
        "assemble": assemble,
    }


class FakeRunner:
    """A node: blkid answers from ``filesystems`` (device -> blkid export), which mkfs.xfs fills; every command is recorded."""

    def __init__(self, filesystems=None, files=None, paths=("/proc/mdstat", "/raid"), modprobe=(0, "", "")):
        self.filesystems = dict(filesystems or {})
        self.files = {"/etc/fstab": FSTAB} | dict(files or {})
        self.paths = set(paths)
        self.modprobe = modprobe
        self.commands = []
        self.writes = []
        self.made = []

    def run(self, argv, ok=(0,)):
        self.commands.append(argv)
        tool = argv[0]
        if tool == "blkid":
            found = self.filesystems.get(argv[-1], "")
            return (0 if found else 2), found, ""
        if tool == "mkfs.xfs":
            self.filesystems[argv[-1]] = XFS_EXPORT.replace("nvme_cache", argv[2])
            return 0, "", ""
        if tool == "modprobe":
            return self.modprobe
        if tool == "mdadm" and argv[1] == "--detail":
            return 0, MDADM_BRIEF, ""
        if tool in ("wipefs", "mdadm", "mount"):
            return 0, "", ""
        raise AssertionError(f"unexpected command {argv}")

    def read(self, path):
        return self.files.get(path, "")

    def write(self, path, text, mode):
        self.writes.append((path, mode))
        self.files[path] = text

    def exists(self, path):
        return path in self.paths

    def makedirs(self, path):
        self.made.append(path)
        self.paths.add(path)


def changing(commands):
    return [argv for argv in commands if argv[0] not in ("blkid", "modprobe") and argv[:2] != ["mdadm", "--detail"]]


def test_a_blank_disk_gets_xfs_an_fstab_line_by_uuid_and_is_mounted():
    runner = FakeRunner(paths=("/proc/mdstat",))
    outcome = apply(plan(), SETTINGS, runner)
    assert runner.commands == [
        ["blkid", "-p", "-o", "export", "/dev/nvme1n1"],
        ["mkfs.xfs", "-L", "nvme_cache", "/dev/nvme1n1"],
        ["blkid", "-p", "-o", "export", "/dev/nvme1n1"],
        ["mount", "-t", "xfs", "-o", OPTIONS, "/dev/nvme1n1", "/raid"],
    ]
    assert runner.files["/etc/fstab"] == FSTAB + f"UUID={UUID} /raid xfs {OPTIONS} 0 0\n"
    assert runner.writes == [("/etc/fstab", "0644")]
    assert runner.made == ["/raid"]
    assert outcome.changed
    assert outcome.actions == [
        "make the XFS filesystem on /dev/nvme1n1",
        "mount /raid by UUID in /etc/fstab",
        "mount /dev/nvme1n1 at /raid",
    ]
    assert outcome.cache == {
        "device": "/dev/nvme1n1",
        "exists": True,
        "fstype": "xfs",
        "label": "nvme_cache",
        "uuid": UUID,
        "mounted": True,
        "fstab": [f"UUID={UUID} /raid xfs {OPTIONS} 0 0"],
    }
    assert outcome.array_recorded is False


def test_check_mode_reports_the_same_steps_and_changes_nothing():
    runner = FakeRunner()
    outcome = apply(plan(wipe=["/dev/nvme1n1"]), SETTINGS, runner, check_mode=True)
    assert outcome.commands == [
        ["wipefs", "--all", "/dev/nvme1n1"],
        ["mkfs.xfs", "-L", "nvme_cache", "/dev/nvme1n1"],
        ["mount", "-t", "xfs", "-o", OPTIONS, "/dev/nvme1n1", "/raid"],
    ]
    # Nothing ran but the read-only probes; the disk to erase is not even read, since it will be blank.
    assert runner.commands == []
    assert runner.writes == [] and runner.made == []
    assert outcome.diff == [
        {"before_header": "/etc/fstab", "after_header": "/etc/fstab", "before": FSTAB, "after": FSTAB + f"UUID={PENDING_UUID} /raid xfs {OPTIONS} 0 0\n"}
    ]
    assert outcome.cache["mounted"] is False


def test_an_erased_disk_is_wiped_before_mkfs():
    runner = FakeRunner(filesystems={})
    apply(plan(wipe=["/dev/nvme1n1"]), SETTINGS, runner)
    assert changing(runner.commands) == [
        ["wipefs", "--all", "/dev/nvme1n1"],
        ["mkfs.xfs", "-L", "nvme_cache", "/dev/nvme1n1"],
        ["mount", "-t", "xfs", "-o", OPTIONS, "/dev/nvme1n1", "/raid"],
    ]


def test_the_mounted_cache_with_its_fstab_line_changes_nothing():
    fstab = FSTAB + f"UUID={UUID} /raid xfs {OPTIONS} 0 0\n"
    runner = FakeRunner(filesystems={"/dev/nvme1n1": XFS_EXPORT}, files={"/etc/fstab": fstab})
    for check_mode in (False, True):
        outcome = apply(plan(action="adopt", mounted=True), SETTINGS, runner, check_mode=check_mode)
        assert (outcome.changed, outcome.actions, outcome.diff) == (False, [], [])
        assert outcome.cache["mounted"] is True
    assert changing(runner.commands) == []
    assert runner.writes == []


def test_an_unmounted_cache_is_mounted_again_and_its_stale_fstab_line_replaced():
    fstab = FSTAB + "/dev/nvme1n1 /raid xfs defaults 0 0\n/dev/sdz /raid ext4 defaults 0 0\n"
    runner = FakeRunner(filesystems={"/dev/nvme1n1": XFS_EXPORT}, files={"/etc/fstab": fstab})
    outcome = apply(plan(action="adopt"), SETTINGS, runner)
    assert changing(runner.commands) == [["mount", "-t", "xfs", "-o", OPTIONS, "/dev/nvme1n1", "/raid"]]
    assert runner.files["/etc/fstab"] == FSTAB + f"UUID={UUID} /raid xfs {OPTIONS} 0 0\n"
    assert runner.made == []


def test_two_disks_make_a_raid0_striped_xfs_and_an_mdadm_conf_block():
    runner = FakeRunner(files={"/etc/mdadm/mdadm.conf": "HOMEHOST <system>\n"})
    settings = Settings(host="dc1-gpu1", chunk_kib=256)
    outcome = apply(plan("raid0", devices=("/dev/nvme2n1", "/dev/nvme3n1"), target_devno=None), settings, runner)
    assert changing(runner.commands) == [
        [
            "mdadm",
            "--create",
            "/dev/md/nvme_cache",
            "--level=0",
            "--raid-devices=2",
            "--chunk=256K",
            "--metadata=1.2",
            "--name=nvme_cache",
            "/dev/nvme2n1",
            "/dev/nvme3n1",
        ],
        ["mkfs.xfs", "-L", "nvme_cache", "-d", "su=256k,sw=2", "/dev/md/nvme_cache"],
        ["mount", "-t", "xfs", "-o", OPTIONS, "/dev/md/nvme_cache", "/raid"],
    ]
    assert ["mdadm", "--detail", "--brief", "/dev/md/nvme_cache"] in runner.commands
    assert runner.files["/etc/mdadm/mdadm.conf"] == (
        "HOMEHOST <system>\n# BEGIN onprem.gpu nvme_cache array nvme_cache\n" + MDADM_BRIEF + "# END onprem.gpu nvme_cache array nvme_cache\n"
    )
    assert outcome.array_recorded is True
    assert runner.files["/etc/fstab"].endswith(f"UUID={UUID} /raid xfs {OPTIONS} 0 0\n")


def test_an_existing_array_is_assembled_not_created_and_its_filesystem_kept():
    runner = FakeRunner(filesystems={"/dev/md/nvme_cache": XFS_EXPORT})
    outcome = apply(plan("raid0", "adopt", devices=("/dev/nvme2n1", "/dev/nvme3n1"), target_devno=None, assemble=True), SETTINGS, runner)
    assert changing(runner.commands) == [
        ["mdadm", "--assemble", "/dev/md/nvme_cache", "/dev/nvme2n1", "/dev/nvme3n1"],
        ["mount", "-t", "xfs", "-o", OPTIONS, "/dev/md/nvme_cache", "/raid"],
    ]
    assert outcome.cache["uuid"] == UUID


def test_check_mode_on_an_array_to_assemble_reads_nothing_on_it():
    runner = FakeRunner()
    outcome = apply(plan("raid0", "adopt", devices=("/dev/nvme2n1", "/dev/nvme3n1"), target_devno=None, assemble=True), SETTINGS, runner, check_mode=True)
    assert runner.commands == [] and runner.writes == []
    assert outcome.actions == [
        "assemble the RAID0 array /dev/md/nvme_cache",
        "read the filesystem of /dev/md/nvme_cache once it is assembled",
        "record the array in /etc/mdadm/mdadm.conf",
        "mount /raid by UUID in /etc/fstab",
        "mount /dev/md/nvme_cache at /raid",
    ]


def test_the_mdadm_conf_block_is_replaced_in_place():
    text = "DEVICE partitions\n# BEGIN onprem.gpu nvme_cache array nvme_cache\nARRAY old\n# END onprem.gpu nvme_cache array nvme_cache\nMAILADDR root\n"
    assert with_block(text, "nvme_cache", "ARRAY new") == (
        "DEVICE partitions\n# BEGIN onprem.gpu nvme_cache array nvme_cache\nARRAY new\n# END onprem.gpu nvme_cache array nvme_cache\nMAILADDR root\n"
    )


def test_fstab_keeps_other_lines_and_comments():
    text = "# comment\nUUID=a / ext4 defaults 0 1\nUUID=b /raid2 xfs defaults 0 0\n"
    assert with_fstab_line(text, "UUID=c /raid xfs nofail 0 0", "/raid") == text + "UUID=c /raid xfs nofail 0 0\n"


def test_a_kernel_without_md_is_refused_before_any_disk_is_touched():
    runner = FakeRunner(paths=(), modprobe=(1, "", "modprobe: FATAL: Module raid0 not found in directory /lib/modules/6.8.0\n"))
    with pytest.raises(ApplyError) as refused:
        apply(plan("raid0", devices=("/dev/nvme2n1", "/dev/nvme3n1"), wipe=["/dev/nvme2n1"], target_devno=None), SETTINGS, runner)
    assert str(refused.value) == (
        "dc1-gpu1 cannot build the RAID0 over /dev/nvme2n1, /dev/nvme3n1: the running kernel has no md driver (/proc/mdstat is missing "
        "and modprobe finds no raid0 module: modprobe: FATAL: Module raid0 not found in directory /lib/modules/6.8.0). The disks were left "
        "untouched; boot a kernel with md RAID0 support, or list a single disk in nvme_cache_devices."
    )
    assert runner.commands == [["modprobe", "--dry-run", "raid0"]]


def test_a_loadable_raid0_module_is_enough():
    runner = FakeRunner(paths=())
    apply(plan("raid0", devices=("/dev/nvme2n1", "/dev/nvme3n1"), target_devno=None), SETTINGS, runner, check_mode=True)
    assert runner.commands == [["modprobe", "--dry-run", "raid0"]]


def test_an_adopted_array_carrying_something_else_is_left_untouched():
    runner = FakeRunner(filesystems={"/dev/md/nvme_cache": "UUID=x\nTYPE=ext4\nLABEL=scratch\n"})
    with pytest.raises(ApplyError) as refused:
        apply(plan("raid0", "adopt", devices=("/dev/nvme2n1", "/dev/nvme3n1"), target_devno="9:127"), SETTINGS, runner)
    assert str(refused.value) == (
        "/dev/md/nvme_cache on dc1-gpu1 carries ext4 (label 'scratch'), not the cache's XFS labelled nvme_cache; it is left untouched. "
        "Erase it by hand if it is disposable, then run the role again."
    )
    assert changing(runner.commands) == [] and runner.writes == []


def test_inspect_reads_the_cache_and_its_fstab_lines():
    fstab = FSTAB + f"UUID={UUID} /raid xfs {OPTIONS} 0 0\n"
    runner = FakeRunner(filesystems={"/dev/nvme1n1": XFS_EXPORT}, files={"/etc/fstab": fstab})
    assert inspect(plan(action="adopt", mounted=True), SETTINGS, runner) == {
        "device": "/dev/nvme1n1",
        "exists": True,
        "fstype": "xfs",
        "label": "nvme_cache",
        "uuid": UUID,
        "mounted": True,
        "fstab": [f"UUID={UUID} /raid xfs {OPTIONS} 0 0"],
    }


SUMMARY = "Adopting the NVMe cache on dc1-gpu1: XFS on /dev/nvme1n1, 1.0 GiB."


def cache(**changes):
    found = {
        "device": "/dev/nvme1n1",
        "exists": True,
        "fstype": "xfs",
        "label": "nvme_cache",
        "uuid": UUID,
        "mounted": True,
        "fstab": [f"UUID={UUID} /raid xfs {OPTIONS} 0 0"],
    }
    return found | changes


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_the_mounted_cache_with_its_fstab_line_passes_the_verification(check_mode):
    assert verification_problems(plan(action="adopt", mounted=True), cache(), SETTINGS, SUMMARY, check_mode=check_mode) == []


@pytest.mark.parametrize(
    "adopted, found",
    [
        (plan(action="adopt", mounted=False), cache(mounted=False)),
        (plan(action="create", mounted=False), {}),
        (plan(action="adopt", mounted=True), cache(label="scratch")),
        (plan(action="adopt", mounted=True), cache(fstype="ext4")),
        (plan(action="adopt", mounted=True), cache(fstab=[])),
        (plan(action="adopt", mounted=True), cache(fstab=[f"UUID={UUID} /raid xfs noatime,nofail 0 0"])),
        (plan(action="adopt", mounted=True), cache(fstab=[f"UUID={UUID} /raid xfs {OPTIONS} 0 0", f"/dev/nvme1n1 /raid xfs {OPTIONS} 0 0"])),
    ],
    ids=["not-mounted", "not-built", "other-label", "not-xfs", "no-fstab-line", "other-options", "two-fstab-lines"],
)
def test_a_cache_that_is_not_what_the_role_builds_fails_the_verification_with_one_sentence(adopted, found):
    # The sentence of the assert it replaces in roles/nvme_cache/tasks/verify.yml, word for word.
    assert verification_problems(adopted, found, SETTINGS, SUMMARY) == [
        f"dc1-gpu1: the cache is not what the role builds ({SUMMARY}; mounted at /raid: {adopted['mounted']}; {found})."
    ]


@pytest.mark.parametrize(
    "adopted, found",
    [(plan(action="adopt", mounted=False), cache(mounted=False)), (plan(action="create", mounted=False), {})],
    ids=["to-mount", "to-build"],
)
def test_check_mode_verifies_only_a_cache_already_adopted_and_mounted(adopted, found):
    assert verification_problems(adopted, found, SETTINGS, SUMMARY, check_mode=True) == []
    assert verification_problems(plan(action="adopt", mounted=True), cache(label="scratch"), SETTINGS, SUMMARY, check_mode=True) != []


def test_the_verification_compares_the_fstab_line_with_the_settings_options():
    settings = Settings(host="dc1-gpu1", mount_options=("noatime", "nofail"))
    found = cache(fstab=[f"UUID={UUID} /raid xfs noatime,nofail 0 0"])
    assert verification_problems(plan(action="adopt", mounted=True), found, settings, SUMMARY) == []


@pytest.mark.parametrize(
    "changes, problem",
    [
        ({"mount_options": ("noatime",)}, "mount_options must contain nofail"),
        ({"chunk_kib": 100}, "chunk_kib must be a power of two from 4 to 4096 KiB (got 100)"),
        ({"label": "a-label-too-long"}, "label 1 to 12 letters"),
        ({"mount_point": "/var"}, "mount_point must be an absolute path outside the OS directories (got /var)."),
        ({"mount_options": ("nofail", "noatime,discard")}, "mount_options are single options"),
    ],
)
def test_bad_settings_are_refused(changes, problem):
    values = {"host": "h"} | changes
    problems = settings_problems(Settings(**values))
    assert len(problems) == 1 and problem in problems[0]


def test_the_defaults_are_fine():
    assert settings_problems(SETTINGS) == []
