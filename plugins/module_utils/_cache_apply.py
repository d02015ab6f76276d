# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Apply the NVMe cache's plan (from _blockdev.plan_cache) to the node.

Erase the disks the plan lists under ``wipe``, create or assemble the RAID0 (mdadm), make the XFS filesystem
(striped like the array), record the array in mdadm.conf, write one fstab line by filesystem UUID and mount it.
Every step is decided from what the node has; in check mode the changing commands are listed and not run, so
check mode and diff come from the same code as the real run.

Commands are argv lists with bare tool names; the caller's runner resolves them. Plain Python without Ansible
imports, unit-tested with a fake runner that records each command line.

Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
Do not use this from other collections or standalone plugins/modules!
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CHUNK_KIB = (4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,16}$")
# An XFS label holds 12 characters.
_LABEL = re.compile(r"^[A-Za-z0-9_-]{1,12}$")
MDSTAT = "/proc/mdstat"
FSTAB = "/etc/fstab"
# What the fstab line says in check mode, before mkfs.xfs has given the filesystem its UUID.
PENDING_UUID = "<UUID of the new filesystem>"


class ApplyError(Exception):
    """A step cannot be taken; the message is one sentence, ``details`` what the caller reports with it."""

    def __init__(self, message, **details):
        super().__init__(message)
        self.details = details


@dataclass(frozen=True)
class Settings:
    """How the cache is built; see the module's options."""

    host: str
    mount_point: str = "/raid"
    array_name: str = "nvme_cache"
    label: str = "nvme_cache"
    chunk_kib: int = 512
    mount_options: tuple = ("noatime", "nofail", "x-systemd.device-timeout=30s")
    mdadm_conf: str = "/etc/mdadm/mdadm.conf"


@dataclass
class Outcome:
    """What apply did (or, in check mode, would do)."""

    actions: list = field(default_factory=list)
    commands: list = field(default_factory=list)
    diff: list = field(default_factory=list)
    cache: dict = field(default_factory=dict)
    array_recorded: bool = False

    @property
    def changed(self):
        return bool(self.actions)


def settings_problems(settings):
    """Return one sentence per setting that cannot build a cache (empty when all are fine)."""
    problems = []
    if not _NAME.fullmatch(settings.array_name) or not _LABEL.fullmatch(settings.label):
        problems.append(
            f"array_name needs 1 to 16 and label 1 to 12 letters, digits, '-' or '_' (an XFS label holds 12 characters); "
            f"got '{settings.array_name}' and '{settings.label}'."
        )
    if settings.chunk_kib not in CHUNK_KIB:
        problems.append(f"chunk_kib must be a power of two from 4 to 4096 KiB (got {settings.chunk_kib}); 512 is mdadm's default.")
    if "nofail" not in settings.mount_options:
        problems.append(
            "mount_options must contain nofail: without it a RAID0 with a dead drive sends the server to emergency mode at boot."
        )
    if any(not option or "," in option or " " in option for option in settings.mount_options):
        problems.append(f"mount_options are single options without ',' or blanks (got {list(settings.mount_options)}).")
    if not settings.mount_point.startswith("/") or settings.mount_point in ("/", "/boot", "/usr", "/var", "/etc"):
        problems.append(f"mount_point must be an absolute path outside the OS directories (got {settings.mount_point}).")
    return problems


def md_driver_missing(plan, settings, runner):
    """Return why this kernel cannot run the plan's new or inactive array, or None (read-only: mdstat, modprobe -n)."""
    if plan["layout"] != "raid0" or plan["target_devno"] or runner.exists(MDSTAT):
        return None
    rc, dummy, stderr = runner.run(["modprobe", "--dry-run", "raid0"], ok=None)
    if rc == 0:
        return None
    return (
        f"{settings.host} cannot build the RAID0 over {', '.join(plan['devices'])}: the running kernel has no md driver "
        f"({MDSTAT} is missing and modprobe finds no raid0 module: {stderr.strip() or 'no answer'}). The disks were left "
        f"untouched; boot a kernel with md RAID0 support, or list a single disk in nvme_cache_devices."
    )


def mdadm_create_argv(plan, settings):
    # No --run and no --force: mdadm then stops and asks if it finds anything on a disk, and without a terminal
    # the question aborts the creation.
    return [
        "mdadm",
        "--create",
        plan["target"],
        "--level=0",
        f"--raid-devices={len(plan['devices'])}",
        f"--chunk={settings.chunk_kib}K",
        "--metadata=1.2",
        f"--name={settings.array_name}",
    ] + list(plan["devices"])


def mkfs_argv(plan, settings):
    # On RAID0 XFS stripes like the array: stripe unit = chunk, width = number of disks.
    stripe = ["-d", f"su={settings.chunk_kib}k,sw={len(plan['devices'])}"] if plan["layout"] == "raid0" else []
    return ["mkfs.xfs", "-L", settings.label] + stripe + [plan["target"]]


def mount_argv(plan, settings):
    return ["mount", "-t", "xfs", "-o", ",".join(settings.mount_options), plan["target"], settings.mount_point]


def fstab_line(uuid, settings):
    return f"UUID={uuid} {_escape(settings.mount_point)} xfs {','.join(settings.mount_options)} 0 0"


def with_fstab_line(text, line, mount_point):
    """Return fstab ``text`` with ``line`` as the only entry for ``mount_point`` (in place of the first, else appended)."""
    lines, placed = [], False
    for current in text.splitlines():
        fields = current.split("#", 1)[0].split()
        if len(fields) >= 2 and _unescape(fields[1]) == mount_point:
            if not placed:
                lines.append(line)
                placed = True
            continue
        lines.append(current)
    if not placed:
        lines.append(line)
    return "\n".join(lines) + "\n"


def fstab_entries(text, mount_point):
    """Return the fstab lines (as field lists) that mount something at ``mount_point``."""
    found = []
    for current in text.splitlines():
        fields = current.split("#", 1)[0].split()
        if len(fields) >= 2 and _unescape(fields[1]) == mount_point:
            found.append(fields)
    return found


def with_block(text, name, body):
    """Return ``text`` with the managed block for the array ``name`` holding ``body`` (as blockinfile writes it)."""
    begin, end = f"# BEGIN onprem.gpu nvme_cache array {name}", f"# END onprem.gpu nvme_cache array {name}"
    lines = text.splitlines()
    block = [begin] + body.splitlines() + [end]
    if begin in lines and end in lines and lines.index(begin) < lines.index(end):
        lines[lines.index(begin) : lines.index(end) + 1] = block
    else:
        lines.extend(block)
    return "\n".join(lines) + "\n"


def read_filesystem(device, runner):
    """Return {"type", "label", "uuid"} of what ``blkid -p`` finds on ``device`` (empty strings when blank)."""
    # blkid exits with 2 when it finds nothing on the device.
    dummy, stdout, dummy = runner.run(["blkid", "-p", "-o", "export", device], ok=(0, 2))
    values = {}
    for line in stdout.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            values[key] = value
    return {"type": values.get("TYPE") or values.get("PTTYPE") or "", "label": values.get("LABEL", ""), "uuid": values.get("UUID", "")}


def inspect(plan, settings, runner):
    """Return what the node has now for the plan's cache: its device, filesystem, mount and fstab lines (read-only)."""
    exists = bool(plan["target_devno"])
    filesystem = read_filesystem(plan["target"], runner) if exists else {"type": "", "label": "", "uuid": ""}
    return {
        "device": plan["target"],
        "exists": exists,
        "fstype": filesystem["type"],
        "label": filesystem["label"],
        "uuid": filesystem["uuid"],
        "mounted": plan["mounted"],
        "fstab": [" ".join(fields) for fields in fstab_entries(runner.read(FSTAB), settings.mount_point)],
    }


def verification_problems(plan, cache, settings, plan_summary, check_mode=False):
    """Return the sentence saying that the cache is not what the role builds, or nothing when it is.

    ``cache`` is what inspect read, ``plan_summary`` the module's sentence on the plan. The cache must be adopted and
    mounted at the mount point, carry the cache's XFS with its label, and have exactly one fstab line, by that
    filesystem's UUID with the settings' options. In check mode a cache that is not yet adopted and mounted is not
    judged: the run that builds or mounts it was only reported.
    """
    adopted = plan["action"] == "adopt" and plan["mounted"]
    if check_mode and not adopted:
        return []
    if adopted and cache["fstype"] == "xfs" and cache["label"] == settings.label and cache["fstab"] == [fstab_line(cache["uuid"], settings)]:
        return []
    return [
        f"{settings.host}: the cache is not what the role builds ({plan_summary}; mounted at {settings.mount_point}: {plan['mounted']}; {cache})."
    ]


def apply(plan, settings, runner, check_mode=False):
    """Bring the node to the plan; return the Outcome. Raises ApplyError before a step that must not be taken."""
    outcome = Outcome()
    steps = _Steps(runner, check_mode, outcome)
    missing = md_driver_missing(plan, settings, runner)
    if missing:
        raise ApplyError(missing)
    raid0 = plan["layout"] == "raid0"
    for device in plan["wipe"]:
        steps.change(f"erase every signature on {device}", ["wipefs", "--all", device])
    if raid0 and plan["action"] == "create":
        steps.change(f"create the RAID0 array {plan['target']} over {', '.join(plan['devices'])}", mdadm_create_argv(plan, settings))
    elif raid0 and plan["assemble"]:
        steps.change(f"assemble the RAID0 array {plan['target']}", ["mdadm", "--assemble", plan["target"]] + list(plan["devices"]))
    # In check mode a disk to erase and an array to build or assemble have not been touched: what they will carry
    # is what the plan says, not what can be read now.
    pending = check_mode and bool(plan["wipe"] or (raid0 and not plan["target_devno"]))
    filesystem = _filesystem(plan, settings, runner, steps, pending)
    if raid0:
        _record_array(plan, settings, runner, steps, pending)
    uuid = filesystem["uuid"] or PENDING_UUID
    fstab_before = runner.read(FSTAB)
    fstab_after = with_fstab_line(fstab_before, fstab_line(uuid, settings), settings.mount_point)
    steps.write(FSTAB, fstab_before, fstab_after, "0644", f"mount {settings.mount_point} by UUID in {FSTAB}")
    if not plan["mounted"]:
        steps.makedirs(settings.mount_point)
        steps.change(f"mount {plan['target']} at {settings.mount_point}", mount_argv(plan, settings))
    outcome.cache = {
        "device": plan["target"],
        "exists": not pending or bool(plan["target_devno"]),
        "fstype": "xfs",
        "label": settings.label,
        "uuid": filesystem["uuid"],
        "mounted": plan["mounted"] or not check_mode,
        "fstab": [fstab_line(uuid, settings)],
    }
    return outcome


class _Steps:
    """Runs the changing steps, or in check mode only records them."""

    def __init__(self, runner, check_mode, outcome):
        self.runner, self.check_mode, self.outcome = runner, check_mode, outcome

    def change(self, action, argv):
        self.outcome.actions.append(action)
        self.outcome.commands.append(argv)
        if not self.check_mode:
            self.runner.run(argv)

    def write(self, path, before, after, mode, action):
        if before == after:
            return False
        self.outcome.actions.append(action)
        self.outcome.diff.append({"before_header": path, "after_header": path, "before": before, "after": after})
        if not self.check_mode:
            self.runner.write(path, after, mode)
        return True

    def makedirs(self, path):
        if not self.runner.exists(path) and not self.check_mode:
            self.runner.makedirs(path)


def _filesystem(plan, settings, runner, steps, pending):
    """Make the XFS filesystem where the device is blank; return {"type", "label", "uuid"} of the cache's filesystem."""
    if pending and plan["action"] == "adopt":
        # An array to assemble: its filesystem is read once it is assembled, on the real run.
        steps.outcome.actions.append(f"read the filesystem of {plan['target']} once it is assembled")
        return {"type": "xfs", "label": settings.label, "uuid": ""}
    found = {"type": "", "label": "", "uuid": ""} if pending else read_filesystem(plan["target"], runner)
    if found["type"] == "xfs" and found["label"] == settings.label:
        return found
    if found["type"]:
        # The selection already refused foreign data on the disks themselves; this catches an adopted array that
        # carries something else than the cache's filesystem.
        raise ApplyError(
            f"{plan['target']} on {settings.host} carries {found['type']} (label '{found['label']}'), not the cache's XFS "
            f"labelled {settings.label}; it is left untouched. Erase it by hand if it is disposable, then run the role again."
        )
    steps.change(f"make the XFS filesystem on {plan['target']}", mkfs_argv(plan, settings))
    if steps.check_mode:
        return {"type": "xfs", "label": settings.label, "uuid": ""}
    made = read_filesystem(plan["target"], runner)
    if made["type"] != "xfs" or not made["uuid"]:
        raise ApplyError(f"mkfs.xfs ran on {plan['target']}, but blkid then finds {made['type'] or 'nothing'} there.")
    return made


def _record_array(plan, settings, runner, steps, pending):
    """Keep the array in mdadm.conf (one managed block), so that it is assembled under its name at boot."""
    action = f"record the array in {settings.mdadm_conf}"
    if pending:
        steps.outcome.actions.append(action)
        steps.outcome.array_recorded = True
        return
    dummy, stdout, dummy = runner.run(["mdadm", "--detail", "--brief", plan["target"]])
    before = runner.read(settings.mdadm_conf)
    if steps.write(settings.mdadm_conf, before, with_block(before, settings.array_name, stdout.strip()), "0644", action):
        steps.outcome.array_recorded = True


def _escape(path):
    return path.replace("\\", "\\134").replace(" ", "\\040").replace("\t", "\\011")


def _unescape(text):
    return re.sub(r"\\([0-7]{3})", lambda match: chr(int(match.group(1), 8)), text)
