#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: nvme_cache_devices
short_description: Choose the disks of a node's NVMe dataset cache, refusing any disk that is not safe to use
version_added: 0.1.0
description:
  - Reads the node's block devices and decides which disks the NVMe cache is built on, and how. One disk gets
    one XFS filesystem. Several disks get an mdadm RAID0 array with XFS on it. Disks that already carry the
    cache in that shape are adopted, not rebuilt.
  - The disks are named in O(devices) by path, serial, WWN/EUI or model. Without O(devices), O(discover=true)
    takes every local PCIe NVMe disk that is not the OS disk, not mounted, not in use, and at least O(min_size_gib) large.
  - The OS disk is never used, whatever the options say. That is every disk under V(/), V(/boot), V(/boot/efi),
    V(/usr), V(/var) and swap, through partitions, md arrays and LVM, whether mounted now or named by C(/etc/fstab).
  - A disk that carries a filesystem, a partition table, a RAID or LVM signature or an encrypted volume is
    refused unless O(wipe=true) and O(host) is listed in O(wipe_confirm); the plan then lists it under C(wipe).
    Mounted or held disks are refused in every case.
  - With O(state=planned) (the default) the module only reads. It never writes to a disk, and runs the same way in
    check mode. When it refuses, it fails with one sentence per disk and the evidence in RV(devices), RV(refusals)
    and RV(protected).
  - With O(state=present) it also applies the plan, after the same refusals and before anything else. It erases
    the disks listed under C(wipe) (C(wipefs --all)), creates the RAID0 (C(mdadm --create), never with C(--run) or
    C(--force)) or assembles the existing one, makes the XFS filesystem where the device is blank (striped like
    the array), records the array in O(mdadm_conf), writes one C(/etc/fstab) line by filesystem UUID with
    O(mount_options), and mounts it. A device that carries anything else than the cache's XFS is left untouched.
  - In check mode (and with O(state=planned)) nothing is changed; RV(actions) and RV(commands) say what the run
    would do, and the diff shows the fstab and mdadm.conf lines.
  - With O(verify=true) (and O(state=planned)) the module also judges, in the same task, the cache it read, and fails with
    one sentence when it is not what O(state=present) builds.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: In check mode, and with O(state=planned), the module only reads; RV(actions) lists what it would do.
  diff_mode:
    support: full
    details: The lines that O(state=present) writes to C(/etc/fstab) and O(mdadm_conf).
  platform:
    platforms: posix
options:
  devices:
    description:
      - The allow-list. Each entry is an absolute path (V(/dev/disk/by-id/nvme-eui.0025388b91b0a5c2), V(/dev/nvme3n1)),
        a serial number, a WWN/EUI (V(eui.0025388b91b0a5c2)) or a model (every disk of that model).
      - A path that does not exist, and an entry that matches no disk, are refused.
      - Stable C(/dev/disk/by-id) paths are safer than kernel names, which can change between boots.
    type: list
    elements: str
    default: []
  discover:
    description:
      - Without O(devices), take every local PCIe NVMe disk that is not the OS disk, not mounted, not in use, and
        at least O(min_size_gib) large. Disks left out by these rules are listed in RV(excluded).
      - A discovered disk that carries data is refused, not left out, so that the cache never silently shrinks.
    type: bool
    default: false
  min_size_gib:
    description: Smallest disk, in GiB, that discovery takes.
    type: int
    default: 0
  expected_count:
    description: Number of disks the selection must have; another number is refused. V(0) accepts any number.
    type: int
    default: 0
  array_name:
    description:
      - Name of the mdadm array (C(--name)); a RAID0 whose members carry this name, over exactly the selected
        disks, is the cache and is adopted.
    type: str
    default: nvme_cache
  label:
    description: XFS label of the cache; one disk holding only an XFS filesystem with this label is the cache and is adopted.
    type: str
    default: nvme_cache
  mount_point:
    description:
      - Where the cache is mounted. Something else mounted there is refused. An unmounted directory with entries
        in it is refused too, because the cache would hide them.
    type: path
    default: /raid
  wipe:
    description: Allow erasing disks that carry data, together with O(wipe_confirm). Mounted or held disks are never erased.
    type: bool
    default: false
  wipe_confirm:
    description: Hosts on which O(wipe=true) is honoured; the module compares O(host) with each entry.
    type: list
    elements: str
    default: []
  host:
    description: The name of this host as O(wipe_confirm) lists it and messages say it; defaults to the node's hostname.
    type: str
  allow_loop:
    description:
      - Accept loop devices named by path in O(devices), for the lab, whose disks are loop devices.
      - Loop devices are never discovered and never matched by serial or model.
    type: bool
    default: false
  state:
    description:
      - V(planned) only reads the node and returns the plan.
      - V(present) builds or adopts the cache according to the plan, and mounts it.
    type: str
    choices: [planned, present]
    default: planned
  chunk_kib:
    description:
      - RAID0 chunk in KiB, a power of two from 4 to 4096, for a new array (C(mdadm --create --chunk)); the new XFS
        filesystem gets the matching stripe unit and width.
    type: int
    default: 512
  mount_options:
    description:
      - Options of the cache's C(/etc/fstab) line and of its mount. They must contain V(nofail), so that a dead drive
        cannot stop the boot.
    type: list
    elements: str
    default: [noatime, nofail, x-systemd.device-timeout=30s]
  mdadm_conf:
    description:
      - Where a RAID0 is recorded (one managed block with C(mdadm --detail --brief)), so that it comes back under
        its name at boot. Regenerating the initramfs after a change is left to the caller (see RV(array_recorded)).
      - Defaults to C(/etc/mdadm/mdadm.conf) where C(/etc/mdadm) exists (Debian, Ubuntu), else C(/etc/mdadm.conf).
    type: path
  verify:
    description:
      - With O(state=planned), judge the cache read from the node and fail with one sentence when the disks do not carry
        the cache in the planned shape, it is not mounted at O(mount_point), it is not XFS labelled O(label), or
        C(/etc/fstab) has not exactly one line for O(mount_point), by that filesystem's UUID with O(mount_options).
      - In check mode only a cache that is already adopted and mounted is judged; one that the run would build or
        mount is not.
      - Not with O(state=present).
    type: bool
    default: false
notes:
  - O(state=present) runs C(wipefs), C(mdadm), C(mkfs.xfs) (xfsprogs) and C(mount); a RAID0 needs the kernel's md
    driver, which is checked (C(/proc/mdstat), C(modprobe --dry-run raid0)) before any disk is touched.
  - Commands run with C(LC_ALL=C). C(lsblk), C(wipefs) and C(blkid) come from util-linux.
    C(nvme) (nvme-cli) adds models and serials where lsblk lacks them.
    C(mdadm) reads RAID superblocks. Both are optional.
  - Signatures are read with C(wipefs) and C(blkid -p) from each disk itself, not from lsblk, which reports
    filesystems only where udev recorded them.
  - A disk that the kernel refuses to open exclusively is in use even when nothing in this mount namespace
    shows why. It may be mounted in a container, be active swap, or be held by a driver.
seealso:
  - name: The nvme_cache role
    description: Builds, mounts and verifies the cache on the disks this module selects.
    link: https://example.invalid/onprem-gpu/onprem.gpu/-/tree/main/roles/nvme_cache
"""

EXAMPLES = r"""
- name: Select the cache disks by stable path
  onprem.gpu.nvme_cache_devices:
    devices:
      - /dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S6CKNA0T100001
      - /dev/disk/by-id/nvme-SAMSUNG_MZWLR3T8HBLS-00007_S6CKNA0T100002
    host: "{{ inventory_hostname }}"
  register: cache_disks

- name: Discover eight 3.84 TB drives, erasing leftovers on this host only
  onprem.gpu.nvme_cache_devices:
    discover: true
    min_size_gib: 3000
    expected_count: 8
    wipe: true
    wipe_confirm: [gpu-node-17]
    host: "{{ inventory_hostname }}"

- name: Build or adopt the cache, and mount it by UUID with nofail
  onprem.gpu.nvme_cache_devices:
    state: present
    devices: [/dev/disk/by-id/nvme-eui.0025388b91b0a5c2, /dev/disk/by-id/nvme-eui.0025388b91b0a5c3]
    chunk_kib: 512
    mount_point: /raid
    host: "{{ inventory_hostname }}"
  register: cache

- name: Show the plan
  ansible.builtin.debug:
    msg: "{{ cache_disks.plan.layout }} over {{ cache_disks.plan.devices | join(', ') }} ({{ cache_disks.plan.action }})"

- name: Read the cache from its disks, and check that it is mounted, as the cache's XFS, by UUID in fstab
  onprem.gpu.nvme_cache_devices:
    devices: [/dev/disk/by-id/nvme-eui.0025388b91b0a5c2]
    mount_point: /raid
    mount_options: [noatime, nofail, x-systemd.device-timeout=30s]
    host: "{{ inventory_hostname }}"
    verify: true
"""

RETURN = r"""
msg:
  description: One sentence on the plan, or the refusal, one sentence per refused disk.
  returned: always
  type: str
  sample: "Building the NVMe cache on gpu-node-01: RAID0 of 2 disks (/dev/nvme0n1, /dev/nvme1n1), 7.0 TiB."
plan:
  description: What the cache is to be; V(null) when the module refuses.
  returned: always
  type: dict
  contains:
    layout:
      description: V(single) (XFS on the disk) or V(raid0) (XFS on an mdadm RAID0 array).
      type: str
      sample: raid0
    action:
      description: V(adopt) when the disks already carry the cache in this shape, V(create) when it is to be built.
      type: str
      sample: create
    devices:
      description: Paths of the selected disks, in the order the array is built.
      type: list
      elements: str
      sample: [/dev/nvme0n1, /dev/nvme1n1]
    wipe:
      description: Paths of disks to erase before building, only with O(wipe) and O(wipe_confirm).
      type: list
      elements: str
      sample: []
    target:
      description: The block device that carries the filesystem, the disk itself or C(/dev/md/<array_name>).
      type: str
      sample: /dev/md/nvme_cache
    target_devno:
      description: Major and minor number of RV(plan.target) when it exists, as V(major:minor).
      type: str
      sample: "9:127"
    mounted:
      description: Whether RV(plan.target) is mounted at O(mount_point).
      type: bool
      sample: false
    size:
      description: Sum of the selected disks' sizes, in bytes.
      type: int
      sample: 7681511964672
    array:
      description: For V(raid0), the array's name, UUID (when it exists) and assembled device (when active).
      type: dict
      sample: {"name": "nvme_cache", "uuid": null, "active_device": null}
    assemble:
      description: Whether an adopted array exists on its disks but is not assembled.
      type: bool
      sample: false
actions:
  description: What O(state=present) did, or in check mode would do, in words; empty when nothing changes.
  returned: always
  type: list
  elements: str
  sample: ["make the XFS filesystem on /dev/nvme0n1", "mount /raid by UUID in /etc/fstab", "mount /dev/nvme0n1 at /raid"]
commands:
  description: The command lines that O(state=present) ran, or in check mode would run, in order.
  returned: always
  type: list
  elements: list
  sample: [["mkfs.xfs", "-L", "nvme_cache", "/dev/nvme0n1"], ["mount", "-t", "xfs", "-o", "noatime,nofail", "/dev/nvme0n1", "/raid"]]
array_recorded:
  description: Whether O(state=present) changed (or would change) the array's block in O(mdadm_conf); the initramfs needs regenerating then.
  returned: always
  type: bool
  sample: false
cache:
  description:
    - The cache's device and filesystem as the node has them; after O(state=present), as they are once applied (in
      check mode, as they would be). With O(state=planned), read only for a cache to adopt, else empty.
    - What O(verify) judges.
  returned: always
  type: dict
  sample:
    device: /dev/nvme0n1
    exists: true
    fstype: xfs
    label: nvme_cache
    uuid: 2f0b7c36-5a43-4c33-9a0f-3b0c5f3f6d12
    mounted: true
    fstab: ["UUID=2f0b7c36-5a43-4c33-9a0f-3b0c5f3f6d12 /raid xfs noatime,nofail,x-systemd.device-timeout=30s 0 0"]
devices:
  description: The selected disks with what was read from them.
  returned: always
  type: list
  elements: dict
  sample:
    - path: /dev/nvme0n1
      kname: nvme0n1
      devno: "259:0"
      type: disk
      size: 3840755982336
      model: SAMSUNG MZWLR3T8HBLS-00007
      serial: S6CKNA0T100001
      wwn: eui.3634473052100001
      matched_by: path
      entry: /dev/nvme0n1
      signatures: []
      partitions: []
      state: blank
refusals:
  description: Why disks (or the request) were refused; each has C(device), C(reason) (a code) and C(message).
  returned: always
  type: list
  elements: dict
  sample:
    - device: /dev/nvme6n1
      reason: has_data
      message: "/dev/nvme6n1 holds an ext4 filesystem (label 'scratch'); it is erased only with wipe=true and gpu-node-01 listed in wipe_confirm."
excluded:
  description: Disks that discovery left out, each with C(device), C(reason) and C(message).
  returned: always
  type: list
  elements: dict
  sample: []
protected:
  description: The devices the OS lives on, each with C(device) (kernel name), C(path) and C(reason).
  returned: always
  type: list
  elements: dict
  sample:
    - device: nvme4n1
      path: /dev/nvme4n1
      reason: it holds / through vg0-root on md0 on nvme4n1p2
problems:
  description: What O(verify) found wrong with the cache, one sentence; the module failed on it.
  returned: failed, when O(verify) found the cache is not what the role builds
  type: list
  elements: str
  sample:
    - >-
      gpu-node-01: the cache is not what the role builds (Adopting the NVMe cache on gpu-node-01: XFS on /dev/nvme0n1, 3.5 TiB;
      mounted at /raid: False; {...}).
"""

import errno
import glob
import os
import socket
import stat

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._cache_apply import (
    ApplyError,
    Settings,
    apply,
    inspect,
    settings_problems,
    verification_problems,
)
from ansible_collections.onprem.gpu.plugins.module_utils._blockdev import (
    MD_MEMBER_TYPE,
    BlockdevError,
    Evidence,
    MountPointState,
    Request,
    format_size,
    merge_signatures,
    parse_blkid_export,
    parse_lsblk,
    parse_mdadm_export,
    parse_mountinfo,
    parse_fstab,
    parse_nvme_list,
    parse_proc_swaps,
    parse_wipefs,
    plan_cache,
    protected_disks,
    protected_sources,
    refusal_message,
    select_candidates,
)

SYS_BLOCK = "/sys/block"
ENVIRONMENT = {"LC_ALL": "C"}


class Node:
    """Reads the node: commands through the module, files from /proc and /sys."""

    def __init__(self, module):
        self.module = module

    def run(self, argv, ok=(0,)):
        rc, stdout, stderr = self.module.run_command(argv, environ_update=ENVIRONMENT)
        if rc not in ok:
            message = f"{os.path.basename(argv[0])} failed with exit code {rc}: {_first_line(stderr or stdout)}"
            self.module.fail_json(msg=message, cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
        return rc, stdout

    def parsed(self, parser, argv, stdout):
        try:
            return parser(stdout)
        except BlockdevError as error:
            self.module.fail_json(msg=str(error), cmd=argv, stdout=stdout)

    def block_tree(self):
        argv = [self.module.get_bin_path("lsblk", required=True), "-J", "-b", "-O"]
        dummy, stdout = self.run(argv)
        return self.parsed(parse_lsblk, argv, stdout)

    def nvme_namespaces(self):
        nvme = self.module.get_bin_path("nvme")
        if nvme is None:
            return []
        argv = [nvme, "list", "-o", "json"]
        rc, stdout, dummy = self.module.run_command(argv, environ_update=ENVIRONMENT)
        # nvme-cli fails when the node has no NVMe controller ("Failed to scan topology"): nothing to add then.
        if rc != 0:
            return []
        try:
            return parse_nvme_list(stdout)
        except BlockdevError as error:
            self.module.warn(f"{error} Models and serials come from lsblk alone.")
            return []

    def signatures(self, path):
        wipefs_argv = [self.module.get_bin_path("wipefs", required=True), "--no-act", "--json", path]
        dummy, wipefs_out = self.run(wipefs_argv)
        blkid_argv = [self.module.get_bin_path("blkid", required=True), "-p", "-o", "export", path]
        # blkid exits with 2 when it finds nothing on the device.
        dummy, blkid_out = self.run(blkid_argv, ok=(0, 2))
        return merge_signatures(self.parsed(parse_wipefs, wipefs_argv, wipefs_out), parse_blkid_export(blkid_out))

    def md_superblock(self, path):
        mdadm = self.module.get_bin_path("mdadm")
        if mdadm is None:
            return {}
        # mdadm exits with 1 when the device has no md superblock.
        dummy, stdout = self.run([mdadm, "--examine", "--export", path], ok=(0, 1))
        return parse_mdadm_export(stdout)

    def busy(self, path):
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_EXCL)
        except OSError as error:
            if error.errno == errno.EBUSY:
                return True
            self.module.fail_json(msg=f"{path} cannot be opened to check whether it is in use: {error.strerror}.")
        os.close(descriptor)
        return False

    def evidence(self, candidate):
        signatures = self.signatures(candidate.path)
        md = self.md_superblock(candidate.path) if any(signature.type == MD_MEMBER_TYPE for signature in signatures) else {}
        return Evidence(signatures=signatures, md=md, busy=self.busy(candidate.path))

    @staticmethod
    def resolve(path):
        """Return {"rdev": devno of a block device or None, "dev": devno of the filesystem holding the file}, or None."""
        try:
            status = os.stat(path)
        except OSError:
            return None
        rdev = f"{os.major(status.st_rdev)}:{os.minor(status.st_rdev)}" if stat.S_ISBLK(status.st_mode) else None
        return {"rdev": rdev, "dev": f"{os.major(status.st_dev)}:{os.minor(status.st_dev)}"}

    def path_devno(self, path):
        found = self.resolve(path)
        if found is None:
            return None
        return found["rdev"] or False

    @staticmethod
    def transports(tree):
        transports = {}
        for kname, device in tree.devices.items():
            if not (device.is_nvme and device.type == "disk"):
                continue
            # Native NVMe multipath puts the controllers one level further down, under the subsystem.
            paths = [os.path.join(SYS_BLOCK, kname, "device", "transport")] + sorted(glob.glob(os.path.join(SYS_BLOCK, kname, "device", "nvme*", "transport")))
            transports[kname] = next((_read(path).strip() for path in paths if os.path.exists(path)), None)
        return transports

    def mount_point_state(self, mounts, mount_point):
        here = [mount for mount in mounts if mount.mountpoint == mount_point]
        if here:
            mount = here[-1]
            devno = mount.devno
            if devno.startswith("0:") and mount.source.startswith("/"):
                devno = (self.resolve(mount.source) or {}).get("rdev") or devno
            return MountPointState(devno=devno, source=mount.source)
        entries = len(os.listdir(mount_point)) if os.path.isdir(mount_point) else 0
        return MountPointState(entries=entries)


class Applier:
    """The node as _cache_apply sees it: commands by bare name, files read and written atomically."""

    OPTIONAL = ("modprobe",)

    def __init__(self, module):
        self.module = module

    def run(self, argv, ok=(0,)):
        tool = self.module.get_bin_path(argv[0], required=argv[0] not in self.OPTIONAL)
        if tool is None:
            return 127, "", f"{argv[0]} is not installed"
        command = [tool] + list(argv[1:])
        rc, stdout, stderr = self.module.run_command(command, environ_update=ENVIRONMENT)
        if ok is not None and rc not in ok:
            raise ApplyError(f"{argv[0]} failed with exit code {rc}: {_first_line(stderr or stdout)}", cmd=command, rc=rc, stdout=stdout, stderr=stderr)
        return rc, stdout, stderr

    @staticmethod
    def read(path):
        return _read(path)

    @staticmethod
    def exists(path):
        return os.path.exists(path)

    @staticmethod
    def makedirs(path):
        os.makedirs(path, mode=0o755, exist_ok=True)

    def write(self, path, text, mode):
        directory = os.path.dirname(path)
        os.makedirs(directory, mode=0o755, exist_ok=True)
        temporary = os.path.join(directory, f".{os.path.basename(path)}.ansible-tmp")
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(temporary, int(mode, 8))
        self.module.atomic_move(temporary, path)


def build_settings(module, request):
    params = module.params
    mdadm_conf = params["mdadm_conf"] or ("/etc/mdadm/mdadm.conf" if os.path.isdir("/etc/mdadm") else "/etc/mdadm.conf")
    return Settings(
        host=request.host,
        mount_point=request.mount_point,
        array_name=request.array_name,
        label=request.label,
        chunk_kib=params["chunk_kib"],
        mount_options=tuple(params["mount_options"]),
        mdadm_conf=mdadm_conf,
    )


def build_request(module):
    params = module.params
    return Request(
        entries=tuple(params["devices"]),
        discover=params["discover"],
        min_size=params["min_size_gib"] << 30,
        expected_count=params["expected_count"],
        array_name=params["array_name"],
        label=params["label"],
        mount_point=os.path.normpath(params["mount_point"]),
        wipe=params["wipe"],
        wipe_confirm=tuple(params["wipe_confirm"]),
        host=params["host"] or socket.gethostname(),
        allow_loop=params["allow_loop"],
    )


def summary(request, plan):
    disks = ", ".join(plan["devices"])
    shape = f"XFS on {disks}" if plan["layout"] == "single" else f"RAID0 of {len(plan['devices'])} disks ({disks})"
    verb = "Adopting" if plan["action"] == "adopt" else "Building"
    wipe = f", after erasing {', '.join(plan['wipe'])}" if plan["wipe"] else ""
    return f"{verb} the NVMe cache on {request.host}: {shape}, {format_size(plan['size'])}{wipe}."


def main():
    module = AnsibleModule(
        argument_spec=dict(
            devices=dict(type="list", elements="str", default=[]),
            discover=dict(type="bool", default=False),
            min_size_gib=dict(type="int", default=0),
            expected_count=dict(type="int", default=0),
            array_name=dict(type="str", default="nvme_cache"),
            label=dict(type="str", default="nvme_cache"),
            mount_point=dict(type="path", default="/raid"),
            wipe=dict(type="bool", default=False),
            wipe_confirm=dict(type="list", elements="str", default=[]),
            host=dict(type="str"),
            allow_loop=dict(type="bool", default=False),
            state=dict(type="str", choices=["planned", "present"], default="planned"),
            chunk_kib=dict(type="int", default=512),
            mount_options=dict(type="list", elements="str", default=["noatime", "nofail", "x-systemd.device-timeout=30s"]),
            mdadm_conf=dict(type="path"),
            verify=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    request = build_request(module)
    settings = build_settings(module, request)
    applying = module.params["state"] == "present"
    if applying and module.params["verify"]:
        module.fail_json(msg="verify judges the cache as the node has it, with state=planned; state=present reports what it changed.")
    problems = settings_problems(settings) if applying else []
    if problems:
        module.fail_json(msg=f"Refusing to build the NVMe cache on {request.host}: " + " ".join(problems))
    node = Node(module)
    tree = node.block_tree()
    tree.enrich(node.nvme_namespaces())
    mounts = parse_mountinfo(_read("/proc/self/mountinfo"))
    fstab = parse_fstab(_read("/etc/fstab"))
    protected = protected_disks(tree, protected_sources(mounts, parse_proc_swaps(_read("/proc/swaps")), node.resolve, fstab), fstab)
    path_devnos = {entry: node.path_devno(entry) for entry in request.entries if entry.startswith("/")}
    candidates, refusals, excluded = select_candidates(request, tree, path_devnos, protected, node.transports(tree))
    plan, devices = None, []
    if not refusals:
        evidence = {candidate.device.kname: node.evidence(candidate) for candidate in candidates}
        plan, devices, refusals, found_in_use = plan_cache(
            request, tree, candidates, evidence, node.mount_point_state(mounts, request.mount_point), discovered=not request.entries, fstab=fstab
        )
        excluded = excluded + found_in_use
    result = dict(
        changed=False,
        actions=[],
        commands=[],
        array_recorded=False,
        cache={},
        plan=plan,
        devices=devices,
        refusals=[refusal.as_dict() for refusal in refusals],
        excluded=excluded,
        protected=[{"device": kname, "path": tree.devices[kname].path, "reason": reason} for kname, reason in protected.items()],
    )
    if refusals:
        module.fail_json(msg=refusal_message(request, refusals), **result)
    applier = Applier(module)
    try:
        if applying:
            outcome = apply(plan, settings, applier, check_mode=module.check_mode)
            result.update(
                changed=outcome.changed, actions=outcome.actions, commands=outcome.commands, array_recorded=outcome.array_recorded, cache=outcome.cache
            )
            if module._diff and outcome.diff:
                result["diff"] = outcome.diff
        elif plan["action"] == "adopt":
            result["cache"] = inspect(plan, settings, applier)
    except ApplyError as error:
        module.fail_json(msg=str(error), **error.details, **result)
    if module.params["verify"]:
        # Judged here, not by an assert after the task: a no-op run pays for one task.
        problems = verification_problems(plan, result["cache"], settings, summary(request, plan), check_mode=module.check_mode)
        if problems:
            module.fail_json(msg=" ".join(problems), problems=problems, **result)
    module.exit_json(msg=summary(request, plan), **result)


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _first_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


if __name__ == "__main__":
    main()
