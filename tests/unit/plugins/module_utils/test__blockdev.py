# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._blockdev import (
    BlockdevError,
    Evidence,
    MountPointState,
    Request,
    describe_signatures,
    merge_signatures,
    fstab_claim,
    parse_blkid_export,
    parse_fstab,
    parse_lsblk,
    parse_mdadm_export,
    parse_mountinfo,
    parse_nvme_list,
    parse_proc_swaps,
    parse_size,
    parse_wipefs,
    plan_cache,
    protected_disks,
    protected_sources,
    refusal_message,
    select_candidates,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "blockdev"
HGX = "lsblk_-J_-b_-O__assembled_hgx_os_on_md_lvm.json"
LAB = "lsblk_-J_-b_-O__lab_container_utillinux_2.38.1.json"
OLD = "lsblk_-J__old_utillinux_strings.json"
NEW = "lsblk_-J__new_utillinux_bools_mountpoints.json"
HOST = "gpu-node-01"
PCIE = {f"nvme{index}n1": "pcie" for index in range(10)} | {"nvme8n1": "tcp"}
TIB = 1 << 40


def text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def tree_of(name):
    return parse_lsblk(text(name))


def evidence_of(state, busy=False):
    """Evidence as the module reads it from a disk in one of the recorded states (blank, ext4_label_scratch, ...)."""
    mdadm = FIXTURES / f"mdadm_--examine_--export__{state}.txt"
    return Evidence(
        signatures=merge_signatures(parse_wipefs(text(f"wipefs_--no-act_--json__{state}.json")), parse_blkid_export(text(f"blkid_-p_-o_export__{state}.txt"))),
        md=parse_mdadm_export(mdadm.read_text(encoding="utf-8")) if mdadm.exists() else {},
        busy=busy,
    )


def request(**overrides):
    values = dict(host=HOST, mount_point="/raid")
    values.update(overrides)
    if "entries" in values:
        values["entries"] = tuple(values["entries"])
    if "wipe_confirm" in values:
        values["wipe_confirm"] = tuple(values["wipe_confirm"])
    return Request(**values)


def lab_select(entries, **overrides):
    """Select on the recorded lab container, whose disks are loop0-3 seen as /dev/nvme0n1-/dev/nvme3n1."""
    tree = tree_of(LAB)
    overrides.setdefault("allow_loop", True)
    wanted = request(entries=entries, **overrides)
    devnos = {f"/dev/nvme{index}n1": f"7:{index}" for index in range(4)}
    candidates, refusals, excluded = select_candidates(wanted, tree, {entry: devnos.get(entry) for entry in entries}, {}, {})
    return wanted, tree, candidates, refusals, excluded


def lab_plan(entries, states, mounted=MountPointState(), busy=(), **overrides):
    wanted, tree, candidates, refusals, dummy = lab_select(entries, **overrides)
    assert refusals == []
    evidence = {candidate.device.kname: evidence_of(state, candidate.device.kname in busy) for candidate, state in zip(candidates, states)}
    return plan_cache(wanted, tree, candidates, evidence, mounted)


def messages(refusals):
    return [refusal.message for refusal in refusals]


# ---------------------------------------------------------------------------------------------------- parsers


@pytest.mark.parametrize(
    "value, size",
    [(1073741824, 1073741824), ("3840755982336", 3840755982336), ("238.5G", 256087425024), ("243M", 254803968), ("500G", 536870912000), (None, None)],
)
def test_sizes_in_bytes_or_human_units(value, size):
    assert parse_size(value) == size


def test_a_size_that_is_not_a_number_is_an_error():
    with pytest.raises(BlockdevError, match="lsblk printed a size that is not a number: 'lots'."):
        parse_size("lots")


def test_old_util_linux_strings_and_single_mountpoint():
    tree = tree_of(OLD)
    assert sorted(tree.devices) == ["nvme0n1", "nvme0n1p1", "nvme0n1p2", "nvme0n1p3", "nvme0n1p4"]
    disk = tree.devices["nvme0n1"]
    assert (disk.type, disk.read_only, disk.mountpoints, disk.path) == ("disk", False, (), "/dev/nvme0n1")
    assert tree.devices["nvme0n1p3"].mountpoints == ("[SWAP]",)
    assert tree.parents["nvme0n1p4"] == {"nvme0n1"}
    assert tree.partitions("nvme0n1") == ["nvme0n1p1", "nvme0n1p2", "nvme0n1p3", "nvme0n1p4"]


def test_new_util_linux_booleans_and_unmounted_mountpoints():
    disk = tree_of(NEW).devices["sda"]
    assert (disk.size, disk.read_only, disk.mountpoints) == (536870912000, False, ())


def test_lab_recording_of_all_columns():
    tree = tree_of(LAB)
    assert [(kname, device.type, device.devno, device.mountpoints) for kname, device in tree.devices.items()] == [
        ("loop0", "loop", "7:0", ("/raid",)),
        ("loop1", "loop", "7:1", ()),
        ("loop2", "loop", "7:2", ()),
        ("loop3", "loop", "7:3", ()),
        ("zram0", "disk", "253:0", ()),
        ("vda", "disk", "254:0", ("/run/.containerenv", "/etc/resolv.conf", "/etc/hostname", "/etc/hosts")),
    ]
    assert tree.by_devno("7:2").kname == "loop2"


def test_an_array_under_two_partitions_has_both_as_parents():
    tree = tree_of(HGX)
    assert tree.parents["md0"] == {"nvme4n1p2", "nvme5n1p2"}
    assert tree.parents["dm-0"] == {"md0"}
    assert tree.devices["dm-0"].name == "vg0-root"
    assert tree.holders("nvme4n1p2") == ["md0"]


def test_list_output_links_parents_through_pkname():
    listing = {
        "blockdevices": [
            {"name": "nvme0n1", "kname": "nvme0n1", "pkname": None, "type": "disk", "size": 10, "mountpoints": [None]},
            {"name": "nvme0n1p1", "kname": "nvme0n1p1", "pkname": "nvme0n1", "type": "part", "size": 5, "mountpoints": ["/"]},
        ]
    }
    tree = parse_lsblk(json.dumps(listing))
    assert tree.parents["nvme0n1p1"] == {"nvme0n1"}
    assert protected_disks(tree, [])["nvme0n1"] == "it holds / through nvme0n1p1"


@pytest.mark.parametrize(
    "output, message",
    [
        ("lsblk: unknown column: MOUNTPOINTS", "lsblk did not print JSON: lsblk: unknown column: MOUNTPOINTS."),
        ('{"devices": []}', "lsblk printed JSON without a blockdevices list."),
        ('{"blockdevices": [{"type": "disk"}]}', "lsblk listed a device without a name: {'type': 'disk'}."),
    ],
)
def test_unreadable_lsblk_output(output, message):
    with pytest.raises(BlockdevError) as error:
        parse_lsblk(output)
    assert str(error.value) == message


@pytest.mark.parametrize(
    "name, expected",
    [
        ("nvme_list_-o_json__nvmecli_v1.json", [("/dev/nvme0n1", "SAMSUNG MZ1LB1T9HALS-000FB", "S41RNF0M207885", None, 1880375648256, None)]),
        ("nvme_list_-o_json__nvmecli_v1_with_namespace.json", [("/dev/nvme0n1", "KIOXIA KCM7DRJE1T92", "YCT0A08H03A1", 1, 62488576, None)]),
        ("nvme_list_-o_json__nvmecli_v2_nvmeof_device.json", [("/dev/nvme1n1", "VastData", "VastData", 2, 10737418240, "/dev/ng1n1")]),
        (
            "nvme_list_-o_json__old_nvmecli_MaximiumLBA_typo.json",
            [("/dev/nvme9n1", "Dell Express Flash NVMe P4510 4TB SFF", "PHLJ9135027L4P0DGN", None, 4000000000000, None)],
        ),
    ],
)
def test_nvme_list_formats(name, expected):
    found = [(ns.device_path, ns.model, ns.serial, ns.namespace, ns.physical_size, ns.generic_path) for ns in parse_nvme_list(text(name))]
    assert found == expected


def test_nvme_list_without_controllers_is_not_json():
    with pytest.raises(BlockdevError, match="nvme list did not print JSON: Failed to scan topology: No such file or directory."):
        parse_nvme_list(text("nvme_list_-o_json__no_nvme_controllers_nvmecli_2.3.txt"))


SIGNATURE_CASES = [
    ("blank", [], ""),
    ("xfs_nvme_cache_label", ["xfs"], "an xfs filesystem (label 'nvme_cache', UUID 3887f75d-c7e8-4673-818c-0efaa97dc2ab)"),
    ("ext4_label_scratch", ["ext4"], "an ext4 filesystem (label 'scratch', UUID 788b4c58-1965-4c44-b227-0058af952685)"),
    ("btrfs", ["btrfs"], "a btrfs filesystem (label 'data', UUID 291937a2-522d-4dca-8b49-64f1c4cd730f)"),
    ("gpt_two_partitions", ["gpt", "gpt", "PMBR"], "a gpt partition table"),
    ("dos_one_partition", ["dos"], "a dos partition table"),
    ("swap", ["swap"], "a swap area (swap, label 'oldswap', UUID 9fa488d8-9929-41d1-b70d-9bbb7fd2bb34)"),
    ("lvm2_member", ["LVM2_member"], "an LVM physical volume (LVM2_member, UUID LG0led-NaLN-FNaC-pyke-srwK-OkbY-zhELLQ)"),
    ("crypto_luks2", ["crypto_LUKS", "crypto_LUKS"], "an encrypted volume (crypto_LUKS, UUID c3e7a271-cfb4-4861-9a7e-12c1e422b53e)"),
    ("md_raid0_member_nvme_cache", ["linux_raid_member"], "an md RAID member (array 'dc1-gpu1:nvme_cache', raid0 of 2 devices)"),
    ("md_raid1_member_foreign", ["linux_raid_member"], "an md RAID member (array 'storage01:data', raid1 of 2 devices)"),
]


@pytest.mark.parametrize("state, types, description", SIGNATURE_CASES, ids=[case[0] for case in SIGNATURE_CASES])
def test_recorded_signatures(state, types, description):
    proof = evidence_of(state)
    assert [signature.type for signature in proof.signatures] == types
    assert describe_signatures(proof.signatures, proof.md) == description


def test_blkid_completes_what_wipefs_missed():
    signatures = merge_signatures([], parse_blkid_export(text("blkid_-p_-o_export__gpt_two_partitions.txt")))
    assert [(signature.type, signature.uuid) for signature in signatures] == [("gpt", "6f40875e-eec2-f54a-96a6-e96871afe54b")]


def test_blkid_values_are_unescaped():
    assert parse_blkid_export(text("blkid_-p_-o_export__lvm2_member.txt"))["VERSION"] == "LVM2 001"


def test_mdadm_export():
    assert parse_mdadm_export(text("mdadm_--examine_--export__md_raid0_member_nvme_cache.txt")) == {
        "MD_LEVEL": "raid0",
        "MD_DEVICES": "2",
        "MD_NAME": "dc1-gpu1:nvme_cache",
        "MD_UUID": "5b1e2f7a:0c3d4e8f:9a6b1d2c:3e4f5a6b",
        "MD_UPDATE_TIME": "1795982649",
        "MD_DEV_UUID": "cc9c7851:915b4708:a4adbbd2:b1ba2c17",
        "MD_EVENTS": "1",
    }
    assert parse_mdadm_export(text("mdadm_--examine_--export__blank.txt")) == {}


def test_wipefs_without_output_means_no_signature():
    assert parse_wipefs("") == []
    with pytest.raises(BlockdevError, match="wipefs did not print JSON: wipefs: error: /dev/x: probing initialization failed."):
        parse_wipefs("wipefs: error: /dev/x: probing initialization failed")


MOUNTINFO = """\
23 1 0:21 / / rw,relatime shared:1 - overlay overlay rw,lowerdir=/a,upperdir=/b,workdir=/c
24 23 259:2 / /boot rw,relatime shared:2 - ext4 /dev/nvme4n1p1 rw
25 23 0:35 /@home /home rw,relatime shared:3 - btrfs /dev/nvme9n1p2 rw,subvol=/@home
26 23 0:36 /@ /var rw,relatime shared:4 - btrfs /dev/nvme9n1p3 rw,subvol=/@
27 23 7:0 / /mnt/with\\040space rw - xfs /dev/nvme0n1 rw
"""


def test_mountinfo():
    mounts = parse_mountinfo(MOUNTINFO + "garbage line\n")
    assert [(mount.devno, mount.mountpoint, mount.fstype, mount.source) for mount in mounts] == [
        ("0:21", "/", "overlay", "overlay"),
        ("259:2", "/boot", "ext4", "/dev/nvme4n1p1"),
        ("0:35", "/home", "btrfs", "/dev/nvme9n1p2"),
        ("0:36", "/var", "btrfs", "/dev/nvme9n1p3"),
        ("7:0", "/mnt/with space", "xfs", "/dev/nvme0n1"),
    ]


def test_proc_swaps():
    swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/dev/dm-2 partition 67108860 0 -2\n/swap\\040file file 1048572 0 -3\n"
    assert parse_proc_swaps(swaps) == ["/dev/dm-2", "/swap file"]
    assert parse_proc_swaps("Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n") == []


# ------------------------------------------------------------------------------------------------ the OS disk


def test_os_disks_found_through_partitions_md_and_lvm():
    protected = protected_disks(tree_of(HGX), [])
    assert protected["nvme4n1"] == "it holds / through vg0-root on md0 on nvme4n1p2"
    assert protected["nvme5n1"] == "it holds / through vg0-root on md0 on nvme5n1p2"
    assert protected["nvme4n1p1"] == "it holds /boot/efi"
    assert protected["dm-2"] == "it holds active swap"
    assert not {"nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "nvme6n1", "nvme7n1", "nvme8n1", "nvme9n1"} & set(protected)


def test_os_disk_is_not_assumed_to_be_nvme0n1():
    assert sorted(name for name in protected_disks(tree_of(HGX), []) if name.endswith("n1")) == ["nvme4n1", "nvme5n1"]
    assert protected_disks(tree_of(OLD), [])["nvme0n1"] == "it holds / through nvme0n1p4"


def test_sources_resolve_filesystems_without_a_device_number_and_swap_files():
    resolved = {
        "/dev/nvme9n1p3": {"rdev": "259:19", "dev": "0:5"},
        "/dev/dm-2": {"rdev": "253:2", "dev": "0:5"},
        "/swapfile": {"rdev": None, "dev": "0:36"},
    }
    sources = protected_sources(parse_mountinfo(MOUNTINFO), ["/dev/dm-2", "/swapfile", "/gone"], resolved.get)
    # overlay has no device; /home is not an OS mount point; the swap file lives on the btrfs at /var.
    assert sources == [("/boot", "259:2", "mounted"), ("/var", "259:19", "mounted"), ("swap", "253:2", "mounted"), ("swap", "259:19", "mounted")]


def test_sources_mark_the_disk_below():
    listing = {"blockdevices": [{"name": "nvme9n1", "maj:min": "259:16", "type": "disk", "size": 1, "children": [
        {"name": "nvme9n1p3", "maj:min": "259:19", "type": "part", "size": 1, "mountpoints": [None]}]}]}
    assert protected_disks(parse_lsblk(json.dumps(listing)), [("/var", "259:19", "mounted")]) == {
        "nvme9n1p3": "it holds /var",
        "nvme9n1": "it holds /var through nvme9n1p3",
    }


FSTAB = """\
# /etc/fstab: static file system information.
UUID=4f1c2a9e-6b3d-4e8a-9c71-2d5e8f0a1b3c  /          ext4  errors=remount-ro  0 1
PARTUUID=0b7a3c1e-01                        /boot      ext4  defaults           0 2
LABEL=ESP                                   /boot/efi  vfat  umask=0077         0 1
/dev/mapper/vg0-swap                        none       swap  sw                 0 0
UUID=9d1e3f5a-7b2c-4d6e-8f0a-1b3c5d7e9f2a  /data      xfs   noatime,nofail     0 0
/dev/sdz1 /srv/with\\040space ext4 defaults
incomplete-line
"""


def test_fstab():
    entries = parse_fstab(FSTAB)
    assert [(entry.spec, entry.mountpoint, entry.keeps, entry.tag) for entry in entries] == [
        ("UUID=4f1c2a9e-6b3d-4e8a-9c71-2d5e8f0a1b3c", "/", "/", ("UUID", "4f1c2a9e-6b3d-4e8a-9c71-2d5e8f0a1b3c")),
        ("PARTUUID=0b7a3c1e-01", "/boot", "/boot", ("PARTUUID", "0b7a3c1e-01")),
        ("LABEL=ESP", "/boot/efi", "/boot/efi", ("LABEL", "ESP")),
        ("/dev/mapper/vg0-swap", "none", "swap", None),
        ("UUID=9d1e3f5a-7b2c-4d6e-8f0a-1b3c5d7e9f2a", "/data", None, ("UUID", "9d1e3f5a-7b2c-4d6e-8f0a-1b3c5d7e9f2a")),
        ("/dev/sdz1", "/srv/with space", None, None),
    ]


def test_an_unmounted_os_disk_is_known_from_fstab():
    listing = {"blockdevices": [{"name": "sda", "maj:min": "8:0", "type": "disk", "size": 1, "children": [
        {"name": "sda1", "maj:min": "8:1", "type": "part", "size": 1, "partuuid": "0b7a3c1e-01", "mountpoints": [None]},
        {"name": "sda2", "maj:min": "8:2", "type": "part", "size": 1, "mountpoints": [None]}]}]}
    entries = parse_fstab(FSTAB)
    sources = protected_sources([], [], {"/dev/mapper/vg0-swap": {"rdev": "8:2", "dev": "0:5"}}.get, entries)
    assert sources == [("swap", "8:2", "fstab")]
    assert protected_disks(parse_lsblk(json.dumps(listing)), sources, entries) == {
        "sda1": "/etc/fstab mounts /boot from it",
        "sda": "/etc/fstab mounts /boot from it through sda1",
        "sda2": "/etc/fstab uses it as swap",
    }


def test_a_filesystem_that_fstab_mounts_for_the_os_is_claimed():
    entries = parse_fstab("UUID=788b4c58-1965-4c44-b227-0058af952685 /boot ext4 defaults 0 2\nLABEL=scratch /scratch ext4 defaults 0 2\n")
    assert fstab_claim(evidence_of("ext4_label_scratch").signatures, entries) == (
        "/etc/fstab mounts /boot from it by UUID=788b4c58-1965-4c44-b227-0058af952685"
    )
    assert fstab_claim(evidence_of("ext4_label_scratch").signatures, entries[1:]) is None


def test_an_unmounted_os_disk_is_refused_even_with_wipe():
    wanted, tree, candidates, refusals, dummy = lab_select(["/dev/nvme1n1"], wipe=True, wipe_confirm=[HOST])
    fstab = parse_fstab("LABEL=scratch /boot ext4 defaults 0 2\n")
    plan, dummy, refusals, dummy = plan_cache(wanted, tree, candidates, {"loop1": evidence_of("ext4_label_scratch")}, MountPointState(), fstab=fstab)
    assert plan is None
    assert messages(refusals) == [
        "/dev/nvme1n1 (loop1) is the OS disk (/etc/fstab mounts /boot from it by LABEL=scratch); it is never used for the cache, whatever the settings."
    ]


# -------------------------------------------------------------------------------------------------- selection


def hgx_select(entries=(), devnos=None, **overrides):
    tree = tree_of(HGX)
    wanted = request(entries=entries, **overrides)
    return select_candidates(wanted, tree, devnos or {}, protected_disks(tree, []), PCIE)


def test_allow_list_by_path_serial_wwn_and_model():
    candidates, refusals, excluded = hgx_select(
        ["/dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S6CKNA0T100001", "S6CKNA0T100002", "EUI.3634473052100003"],
        devnos={"/dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S6CKNA0T100001": "259:0"},
    )
    assert refusals == excluded == []
    assert [(c.path, c.device.kname, c.matched_by) for c in candidates] == [
        ("/dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S6CKNA0T100001", "nvme0n1", "path"),
        ("/dev/nvme1n1", "nvme1n1", "serial"),
        ("/dev/nvme2n1", "nvme2n1", "wwn"),
    ]
    assert candidates[0].label == "/dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S6CKNA0T100001 (nvme0n1)"


def test_a_model_matches_every_disk_of_that_model_and_duplicates_count_once():
    candidates, refusals, dummy = hgx_select(["samsung  MZWLR3T8HBLS-00007", "S6CKNA0T100001"])
    assert refusals == []
    assert [c.device.kname for c in candidates] == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "nvme6n1", "nvme7n1"]


@pytest.mark.parametrize(
    "entries, devnos, reason, message",
    [
        (["/dev/nvme12n1"], {"/dev/nvme12n1": None}, "missing", "/dev/nvme12n1 does not exist on gpu-node-01."),
        (["/dev/null"], {"/dev/null": False}, "not_block_device", "/dev/null is not a block device."),
        (["/dev/sdq"], {"/dev/sdq": "65:0"}, "not_listed", "/dev/sdq is block device 65:0, which lsblk does not list on gpu-node-01."),
        (["S9ZZZZ0000000"], {}, "no_match", "S9ZZZZ0000000 matches no disk on gpu-node-01 by serial, WWN or model."),
        (
            ["/dev/nvme4n1"],
            {"/dev/nvme4n1": "259:4"},
            "os_disk",
            "/dev/nvme4n1 is the OS disk (it holds / through vg0-root on md0 on nvme4n1p2); it is never used for the cache, whatever the settings.",
        ),
        (
            ["S6B0NU0W300002"],
            {},
            "os_disk",
            "/dev/nvme5n1 is the OS disk (it holds / through vg0-root on md0 on nvme5n1p2); it is never used for the cache, whatever the settings.",
        ),
        (["/dev/nvme7n1p1"], {"/dev/nvme7n1p1": "259:14"}, "partition", "/dev/nvme7n1p1 is a partition of nvme7n1; name the whole disk."),
        (
            ["/dev/md0"],
            {"/dev/md0": "9:0"},
            "os_disk",
            "/dev/md0 is the OS disk (it holds / through vg0-root); it is never used for the cache, whatever the settings.",
        ),
        (["VastData"], {}, "fabric", "/dev/nvme8n1 is an NVMe over Fabrics namespace (transport tcp), not a local drive."),
    ],
)
def test_allow_list_refusals(entries, devnos, reason, message):
    candidates, refusals, dummy = hgx_select(entries, devnos=devnos, wipe=True, wipe_confirm=[HOST])
    assert candidates == []
    assert [(refusal.reason, refusal.message) for refusal in refusals] == [(reason, message)]


def test_loop_devices_only_by_path_and_only_with_allow_loop():
    dummy, dummy, candidates, refusals, dummy = lab_select(["/dev/nvme1n1"], allow_loop=False)
    assert candidates == []
    assert messages(refusals) == [
        "/dev/nvme1n1 (loop1) is a loop device (a file on another filesystem), not a drive; loop devices are accepted only in the lab (allow_loop)."
    ]
    dummy, dummy, candidates, refusals, dummy = lab_select(["/dev/nvme1n1"])
    assert (refusals, [c.device.kname for c in candidates]) == ([], ["loop1"])


def test_nothing_selected():
    candidates, refusals, dummy = hgx_select()
    assert messages(refusals) == ["No cache device is selected on gpu-node-01: list the drives in devices or enable discover."]


def test_discovery_takes_local_nvme_data_disks_only():
    candidates, refusals, excluded = hgx_select(discover=True, min_size=1000 << 30)
    assert refusals == []
    assert [c.device.kname for c in candidates] == ["nvme0n1", "nvme1n1", "nvme2n1", "nvme3n1", "nvme6n1"]
    assert [entry["message"] for entry in excluded] == [
        "/dev/nvme4n1 is the OS disk (it holds / through vg0-root on md0 on nvme4n1p2).",
        "/dev/nvme5n1 is the OS disk (it holds / through vg0-root on md0 on nvme5n1p2).",
        "/dev/nvme7n1 is mounted at /data.",
        "/dev/nvme8n1 is not a local PCIe drive (transport tcp).",
        "/dev/nvme9n1 is smaller (894.3 GiB) than the minimum of 1000.0 GiB.",
    ]


def test_discovery_that_finds_nothing_refuses():
    candidates, refusals, dummy = hgx_select(discover=True, min_size=8 * TIB)
    assert candidates == []
    assert messages(refusals) == [
        "Discovery found no local NVMe disk of at least 8.0 TiB on gpu-node-01 that is not the OS disk, mounted or in use."
    ]


def test_nvme_list_fills_serials_that_lsblk_lacks():
    tree = tree_of(OLD)
    tree.enrich(parse_nvme_list(text("nvme_list_-o_json__nvmecli_v1.json")))
    candidates, refusals, dummy = select_candidates(request(entries=("S41RNF0M207885",)), tree, {}, protected_disks(tree, []), {})
    assert messages(refusals) == ["/dev/nvme0n1 is the OS disk (it holds / through nvme0n1p4); it is never used for the cache, whatever the settings."]


# ------------------------------------------------------------------------------------------------------ plans


def test_one_blank_disk_gets_xfs():
    plan, devices, refusals, excluded = lab_plan(["/dev/nvme1n1"], ["blank"])
    assert refusals == excluded == []
    assert plan == {
        "layout": "single",
        "action": "create",
        "devices": ["/dev/nvme1n1"],
        "wipe": [],
        "target": "/dev/nvme1n1",
        "target_devno": "7:1",
        "mounted": False,
        "size": 1073741824,
        "array": None,
        "assemble": False,
    }
    assert [(device["path"], device["kname"], device["state"]) for device in devices] == [("/dev/nvme1n1", "loop1", "blank")]


def test_the_mounted_cache_is_adopted():
    plan, devices, refusals, dummy = lab_plan(["/dev/nvme0n1"], ["xfs_nvme_cache_label"], MountPointState(devno="7:0", source="/dev/nvme0n1"), busy={"loop0"})
    assert refusals == []
    assert (plan["action"], plan["mounted"], plan["wipe"]) == ("adopt", True, [])
    assert devices[0]["state"] == "cache"


def test_the_unmounted_cache_is_adopted_after_a_reboot():
    plan, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], ["xfs_nvme_cache_label"])
    assert (refusals, plan["action"], plan["mounted"]) == ([], "adopt", False)


def test_an_xfs_with_another_label_is_data():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], ["xfs_nvme_cache_label"], label="scratch")
    assert [refusal.reason for refusal in refusals] == ["has_data"]


@pytest.mark.parametrize("state", [case[0] for case in SIGNATURE_CASES if case[0] not in ("blank", "xfs_nvme_cache_label")])
def test_any_signature_is_refused_without_wipe(state):
    plan, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], [state])
    assert plan is None
    assert messages(refusals) == [
        f"/dev/nvme1n1 (loop1) holds {describe_signatures(evidence_of(state).signatures, evidence_of(state).md)}; "
        "it is erased only with wipe=true and gpu-node-01 listed in wipe_confirm."
    ]


def test_wipe_without_this_host_confirmed_is_refused():
    plan, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], ["ext4_label_scratch"], wipe=True, wipe_confirm=["gpu-node-02"])
    assert plan is None
    assert messages(refusals) == [
        "/dev/nvme1n1 (loop1) holds an ext4 filesystem (label 'scratch', UUID 788b4c58-1965-4c44-b227-0058af952685); "
        "wipe is true but gpu-node-01 is not listed in wipe_confirm, so it is left untouched."
    ]


def test_wipe_confirmed_for_this_host_plans_the_erasure():
    plan, devices, refusals, dummy = lab_plan(["/dev/nvme1n1", "/dev/nvme2n1"], ["ext4_label_scratch", "blank"], wipe=True, wipe_confirm=[HOST])
    assert refusals == []
    assert (plan["layout"], plan["action"], plan["wipe"]) == ("raid0", "create", ["/dev/nvme1n1"])
    assert [device["state"] for device in devices] == ["wipe", "blank"]


def test_several_blank_disks_get_a_raid0():
    plan, dummy, refusals, dummy = lab_plan(["/dev/nvme2n1", "/dev/nvme3n1"], ["blank", "blank"])
    assert refusals == []
    assert {key: plan[key] for key in ("layout", "action", "target", "target_devno", "assemble", "array", "size")} == {
        "layout": "raid0",
        "action": "create",
        "target": "/dev/md/nvme_cache",
        "target_devno": None,
        "assemble": False,
        "array": {"name": "nvme_cache", "uuid": None, "active_device": None},
        "size": 2147483648,
    }


def test_members_of_the_cache_array_are_adopted_and_assembled():
    plan, devices, refusals, dummy = lab_plan(["/dev/nvme2n1", "/dev/nvme3n1"], ["md_raid0_member_nvme_cache"] * 2)
    assert refusals == []
    assert (plan["action"], plan["assemble"], plan["array"]["uuid"]) == ("adopt", True, "5b1e2f7a-0c3d-4e8f-9a6b-1d2c3e4f5a6b")
    assert [device["state"] for device in devices] == ["cache", "cache"]


def test_the_cache_array_over_other_disks_is_not_the_wanted_shape():
    plan, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1", "/dev/nvme2n1", "/dev/nvme3n1"], ["blank"] + ["md_raid0_member_nvme_cache"] * 2)
    assert plan is None
    assert [refusal.device for refusal in refusals] == ["/dev/nvme2n1", "/dev/nvme3n1"]
    assert "an md RAID member (array 'dc1-gpu1:nvme_cache', raid0 of 2 devices)" in refusals[0].message


def test_a_foreign_array_member_is_data():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme2n1", "/dev/nvme3n1"], ["md_raid1_member_foreign", "blank"])
    assert [refusal.reason for refusal in refusals] == ["has_data"]


def test_a_busy_disk_is_in_use_even_with_wipe():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], ["ext4_label_scratch"], busy={"loop1"}, wipe=True, wipe_confirm=[HOST])
    assert messages(refusals) == [
        "/dev/nvme1n1 (loop1) is in use: the kernel refuses exclusive access to it "
        "(mounted in another mount namespace, active swap, or held by a driver)."
    ]


def test_a_disk_mounted_elsewhere_is_in_use():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme0n1"], ["xfs_nvme_cache_label"], mount_point="/scratch")
    assert messages(refusals) == ["/dev/nvme0n1 (loop0) is in use: mounted at /raid."]


def test_the_mount_point_taken_by_another_device_is_refused():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], ["blank"], MountPointState(devno="254:0", source="/dev/vda"))
    assert messages(refusals) == ["/raid is already a mount of /dev/vda, not of the cache device /dev/nvme1n1."]


def test_a_mount_point_with_files_below_is_refused():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1"], ["blank"], MountPointState(entries=3))
    assert messages(refusals) == ["/raid is not mounted but holds 3 entries on the disk below it; move them away so that the cache does not hide them."]


def test_expected_count():
    dummy, dummy, refusals, dummy = lab_plan(["/dev/nvme1n1", "/dev/nvme2n1"], ["blank", "blank"], expected_count=4)
    assert messages(refusals) == ["The selection on gpu-node-01 has 2 disk(s) (/dev/nvme1n1, /dev/nvme2n1) where expected_count is 4."]


ACTIVE_ARRAY = {
    "blockdevices": [
        {
            "name": name,
            "maj:min": devno,
            "type": "disk",
            "size": 3840755982336,
            "serial": serial,
            "children": [{"name": "md127", "maj:min": "9:127", "type": "raid0", "size": 7681243545600, "mountpoints": ["/raid"]}],
        }
        for name, devno, serial in (("nvme0n1", "259:0", "A1"), ("nvme1n1", "259:1", "A2"))
    ]
    + [
        {
            "name": "nvme2n1",
            "maj:min": "259:2",
            "type": "disk",
            "size": 3840755982336,
            "children": [{"name": "md1", "maj:min": "9:1", "type": "raid1", "size": 3840622813184, "mountpoints": ["/backup"]}],
        }
    ]
}


def test_an_assembled_and_mounted_cache_array_is_adopted():
    tree = parse_lsblk(json.dumps(ACTIVE_ARRAY))
    wanted = request(entries=("A1", "A2"))
    candidates, refusals, dummy = select_candidates(wanted, tree, {}, {}, {"nvme0n1": "pcie", "nvme1n1": "pcie"})
    evidence = {c.device.kname: evidence_of("md_raid0_member_nvme_cache", busy=True) for c in candidates}
    plan, dummy, refusals, dummy = plan_cache(wanted, tree, candidates, evidence, MountPointState(devno="9:127", source="/dev/md127"))
    assert refusals == []
    assert {key: plan[key] for key in ("action", "assemble", "target", "target_devno", "mounted")} == {
        "action": "adopt",
        "assemble": False,
        "target": "/dev/md/nvme_cache",
        "target_devno": "9:127",
        "mounted": True,
    }
    assert plan["array"]["active_device"] == "/dev/md127"


def test_a_disk_held_by_another_array_is_in_use():
    tree = parse_lsblk(json.dumps(ACTIVE_ARRAY))
    wanted = request(entries=("/dev/nvme2n1",), wipe=True, wipe_confirm=(HOST,))
    candidates, refusals, dummy = select_candidates(wanted, tree, {"/dev/nvme2n1": "259:2"}, {}, {})
    dummy, dummy, refusals, dummy = plan_cache(wanted, tree, candidates, {"nvme2n1": evidence_of("md_raid1_member_foreign", busy=True)}, MountPointState())
    assert messages(refusals) == ["/dev/nvme2n1 is in use: mounted at /backup (md1)."]


def test_discovery_skips_busy_disks_and_plans_on_the_rest():
    tree = tree_of(HGX)
    wanted = request(discover=True, min_size=1000 << 30)
    candidates, dummy, dummy = select_candidates(wanted, tree, {}, protected_disks(tree, []), PCIE)
    evidence = {c.device.kname: evidence_of("blank", busy=c.device.kname in ("nvme3n1", "nvme6n1")) for c in candidates}
    plan, devices, refusals, excluded = plan_cache(wanted, tree, candidates, evidence, MountPointState(), discovered=True)
    assert refusals == []
    assert plan["devices"] == ["/dev/nvme0n1", "/dev/nvme1n1", "/dev/nvme2n1"]
    assert [entry["device"] for entry in excluded] == ["/dev/nvme3n1", "/dev/nvme6n1"]


def test_discovery_refuses_a_disk_with_data_rather_than_shrinking_the_cache():
    tree = tree_of(HGX)
    wanted = request(discover=True, min_size=1000 << 30)
    candidates, dummy, dummy = select_candidates(wanted, tree, {}, protected_disks(tree, []), PCIE)
    evidence = {c.device.kname: evidence_of("ext4_label_scratch" if c.device.kname == "nvme6n1" else "blank") for c in candidates}
    plan, dummy, refusals, dummy = plan_cache(wanted, tree, candidates, evidence, MountPointState(), discovered=True)
    assert plan is None
    assert [refusal.device for refusal in refusals] == ["/dev/nvme6n1"]


def test_the_failure_message_has_one_sentence_per_refusal():
    dummy, dummy, dummy, refusals, dummy = lab_select(["/dev/nvme9n1", "S1"])
    assert refusal_message(request(), refusals) == (
        "Refusing to build the NVMe cache on gpu-node-01: /dev/nvme9n1 does not exist on gpu-node-01. "
        "S1 matches no disk on gpu-node-01 by serial, WWN or model."
    )
