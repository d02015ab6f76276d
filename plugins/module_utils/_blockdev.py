# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Choose the disks of the NVMe dataset cache, and refuse every disk that is not safe to use.

Parsers for what ``lsblk -J -b -O``, ``nvme list -o json``, ``wipefs --no-act --json``, ``blkid -p -o export``,
``mdadm --examine --export``, ``/proc/self/mountinfo`` and ``/proc/swaps`` print, and the rules that turn them
into a plan: which disks, one XFS on a single disk or on an mdadm RAID0 over several, built new or adopted as it
is. Plain Python without Ansible imports: it runs on managed nodes (Python 3.8+) and is unit-tested on recorded
outputs (tests/unit/fixtures/blockdev).

Note that this module util is **PRIVATE** to the collection. It can have breaking changes at any time.
Do not use this from other collections or standalone plugins/modules!
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

# A disk holding any of these, or active swap, is the OS disk: never a cache candidate, whatever the settings.
PROTECTED_MOUNTPOINTS = ("/", "/boot", "/boot/efi", "/usr", "/var")
SWAP = "[SWAP]"
FSTAB_TAGS = ("UUID", "LABEL", "PARTUUID", "PARTLABEL")
LOCAL_NVME_TRANSPORT = "pcie"
MD_MEMBER_TYPE = "linux_raid_member"
CACHE_FSTYPE = "xfs"
# lsblk types of devices built on top of disks: a disk with such a child is held by it.
_PARTITION_TYPES = ("part",)
_PARTITION_TABLES = ("gpt", "dos", "PMBR", "mac", "sun", "sgi", "bsd", "atari", "aix", "solaris", "minix", "ultrix", "vtoc")
_SIZE_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
_HUMAN_SIZE = re.compile(r"^([0-9]+(?:[.,][0-9]+)?)([KMGTPE]?)(?:i?B)?$", re.IGNORECASE)
_NATURAL_PARTS = re.compile(r"(\d+)")
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")
_BLKID_ESCAPE = re.compile(r"\\(.)")


class BlockdevError(Exception):
    """A tool printed something that cannot be read; the message is one sentence."""


# --------------------------------------------------------------------------------------------------- records


@dataclass(frozen=True)
class Device:
    """One block device as lsblk lists it."""

    kname: str
    name: str
    path: str
    devno: str | None
    type: str
    size: int | None
    read_only: bool
    transport: str | None
    model: str | None
    serial: str | None
    wwn: str | None
    mountpoints: tuple
    pkname: str | None = None
    tags: tuple = ()

    @property
    def is_nvme(self):
        return self.kname.startswith("nvme")


@dataclass(frozen=True)
class NvmeNamespace:
    """One entry of ``nvme list -o json``."""

    device_path: str
    model: str | None
    serial: str | None
    firmware: str | None
    namespace: int | None
    physical_size: int | None
    generic_path: str | None


@dataclass(frozen=True)
class Signature:
    """One signature found on a device: a filesystem, a partition table, a RAID or LVM member..."""

    type: str
    uuid: str | None = None
    label: str | None = None
    offset: str | None = None

    @property
    def kind(self):
        if self.type in _PARTITION_TABLES:
            return "partition table"
        if self.type.endswith("_raid_member"):
            return "RAID member"
        if self.type.startswith("LVM"):
            return "LVM physical volume"
        if self.type.startswith("crypto_") or self.type == "BitLocker":
            return "encrypted volume"
        if self.type in ("swap", "swsuspend"):
            return "swap area"
        return "filesystem"


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    devno: str
    mountpoint: str
    fstype: str
    source: str


@dataclass(frozen=True)
class FstabEntry:
    """One line of /etc/fstab."""

    spec: str
    mountpoint: str
    fstype: str

    @property
    def keeps(self):
        """What the OS keeps there (a protected mount point or swap), or None."""
        if self.fstype == "swap":
            return "swap"
        return self.mountpoint if self.mountpoint in PROTECTED_MOUNTPOINTS else None

    @property
    def tag(self):
        """(tag, value) for UUID=/LABEL=/PARTUUID=/PARTLABEL= lines, None for a device path."""
        key, sep, value = self.spec.partition("=")
        return (key.upper(), value.strip('"')) if sep and key.upper() in FSTAB_TAGS else None


@dataclass(frozen=True)
class Evidence:
    """What was read from one candidate disk besides lsblk."""

    signatures: tuple = ()
    md: dict = field(default_factory=dict)
    busy: bool = False


@dataclass(frozen=True)
class Candidate:
    """A disk the request points at: ``path`` is the name commands use for it on this node."""

    path: str
    device: Device
    matched_by: str
    entry: str | None = None

    @property
    def label(self):
        """How messages name the disk: the path, plus the kernel name when it differs."""
        if self.path.rsplit("/", 1)[-1] == self.device.kname:
            return self.path
        return f"{self.path} ({self.device.kname})"


@dataclass(frozen=True)
class Refusal:
    """Why a disk (or the whole request) is refused, as one sentence."""

    reason: str
    message: str
    device: str | None = None

    def as_dict(self):
        return {"device": self.device, "reason": self.reason, "message": self.message}


@dataclass(frozen=True)
class MountPointState:
    """The cache's mount point on the node: what is mounted there, or how many entries hide under it."""

    devno: str | None = None
    source: str | None = None
    entries: int = 0


@dataclass(frozen=True)
class Request:
    """What the caller asks for; see the module's options."""

    entries: tuple = ()
    discover: bool = False
    min_size: int = 0
    expected_count: int = 0
    array_name: str = "nvme_cache"
    label: str = "nvme_cache"
    mount_point: str = "/raid"
    wipe: bool = False
    wipe_confirm: tuple = ()
    host: str = ""
    allow_loop: bool = False

    @property
    def wipe_allowed(self):
        return self.wipe and self.host in self.wipe_confirm


# ------------------------------------------------------------------------------------------------------ parsers


def parse_size(value):
    """Return a size in bytes from lsblk: an int (``-b``), a string of digits, or a human size such as ``238.5G``."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.isdigit():
        return int(text)
    match = _HUMAN_SIZE.match(text)
    if not match:
        raise BlockdevError(f"lsblk printed a size that is not a number: {value!r}.")
    number, unit = match.groups()
    return int(float(number.replace(",", ".")) * _SIZE_UNITS[unit.upper()])


def parse_lsblk(text):
    """Return the BlockTree of ``lsblk -J`` output, old or new util-linux, tree or ``--list`` form."""
    entries = _json_list(text, "lsblk", "blockdevices")
    devices = {}
    parents = {}

    def visit(entry, parent):
        if not isinstance(entry, dict) or not entry.get("name"):
            raise BlockdevError(f"lsblk listed a device without a name: {entry!r}.")
        device = _device_from_lsblk(entry)
        devices.setdefault(device.kname, device)
        parents.setdefault(device.kname, set())
        if parent is not None:
            parents[device.kname].add(parent)
        for child in entry.get("children") or ():
            visit(child, device.kname)

    for entry in entries:
        visit(entry, None)
    # In --list output there are no children: the parent is only named by PKNAME.
    for kname, device in devices.items():
        if device.pkname and device.pkname in devices and device.pkname != kname:
            parents[kname].add(device.pkname)
    return BlockTree(devices, parents)


def parse_nvme_list(text):
    """Return the namespaces of ``nvme list -o json`` (nvme-cli 1.x and 2.x flat formats)."""
    entries = _json_list(text, "nvme list", "Devices")
    namespaces = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("DevicePath"):
            raise BlockdevError(f"nvme list printed a device without a DevicePath: {entry!r}.")
        namespaces.append(
            NvmeNamespace(
                device_path=entry["DevicePath"],
                model=_clean(entry.get("ModelNumber")),
                serial=_clean(entry.get("SerialNumber")),
                firmware=_clean(entry.get("Firmware")),
                namespace=entry.get("NameSpace"),
                # Never read the LBA count: old nvme-cli spells its key "MaximiumLBA".
                physical_size=entry.get("PhysicalSize"),
                generic_path=entry.get("GenericPath"),
            )
        )
    return namespaces


def parse_wipefs(text):
    """Return the Signatures of ``wipefs --no-act --json DEVICE`` (empty output means none)."""
    if not text.strip():
        return []
    entries = _json_list(text, "wipefs", "signatures")
    signatures = []
    for entry in entries:
        if not isinstance(entry, dict) or not entry.get("type"):
            raise BlockdevError(f"wipefs printed a signature without a type: {entry!r}.")
        signatures.append(Signature(type=entry["type"], uuid=entry.get("uuid"), label=entry.get("label"), offset=entry.get("offset")))
    return signatures


def parse_blkid_export(text):
    """Return the KEY=VALUE pairs of ``blkid -p -o export DEVICE`` (empty when blkid found nothing)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.isupper():
            values[key] = _BLKID_ESCAPE.sub(r"\1", value)
    return values


def parse_mdadm_export(text):
    """Return the MD_* pairs of ``mdadm --examine --export DEVICE`` (empty when there is no superblock)."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.startswith("MD_"):
            values[key] = value
    return values


def parse_mountinfo(text):
    """Return the Mounts of /proc/self/mountinfo."""
    mounts = []
    for line in text.splitlines():
        head, sep, tail = line.partition(" - ")
        fields = head.split()
        rest = tail.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        mounts.append(Mount(devno=fields[2], mountpoint=_unescape_octal(fields[4]), fstype=rest[0], source=_unescape_octal(rest[1])))
    return mounts


def parse_proc_swaps(text):
    """Return the file names of active swap areas from /proc/swaps."""
    names = []
    for line in text.splitlines()[1:]:
        fields = line.split()
        if fields:
            names.append(_unescape_octal(fields[0]))
    return names


def parse_fstab(text):
    """Return the FstabEntries of /etc/fstab (comments and incomplete lines left out)."""
    entries = []
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 3:
            entries.append(FstabEntry(spec=_unescape_octal(fields[0]), mountpoint=_unescape_octal(fields[1]), fstype=fields[2]))
    return entries


def fstab_claim(signatures, fstab):
    """Return how /etc/fstab keeps the OS on a disk with these signatures (by UUID= or LABEL=), or None."""
    for entry in fstab:
        if entry.keeps is None or entry.tag is None:
            continue
        tag, value = entry.tag
        for signature in signatures:
            if (tag == "UUID" and signature.uuid == value) or (tag == "LABEL" and signature.label == value):
                return f"{_fstab_phrase(entry.keeps)} by {tag}={value}"
    return None


def merge_signatures(wipefs_signatures, blkid_values):
    """Return the signatures of a disk from wipefs, completed with what blkid's low-level probe found."""
    signatures = list(wipefs_signatures)
    seen = {signature.type for signature in signatures}
    if blkid_values.get("TYPE") and blkid_values["TYPE"] not in seen:
        signatures.append(Signature(type=blkid_values["TYPE"], uuid=blkid_values.get("UUID"), label=blkid_values.get("LABEL")))
    if blkid_values.get("PTTYPE") and blkid_values["PTTYPE"] not in seen:
        signatures.append(Signature(type=blkid_values["PTTYPE"], uuid=blkid_values.get("PTUUID")))
    return tuple(signatures)


def describe_signatures(signatures, md=None):
    """Return what a disk holds in words, e.g. ``an ext4 filesystem (label 'scratch', UUID 788b4c58-...)``."""
    phrases = []
    for signature in signatures:
        kind = signature.kind
        if kind == "partition table":
            table = "gpt" if any(other.type == "gpt" for other in signatures) else signature.type
            phrases.append(f"a {table} partition table")
        elif kind == "RAID member":
            details = [f"array '{signature.label}'"] if signature.label else []
            if md and md.get("MD_LEVEL"):
                details.append(f"{md['MD_LEVEL']} of {md.get('MD_DEVICES', '?')} devices")
            flavour = "an md RAID member" if signature.type == MD_MEMBER_TYPE else f"a RAID member ({signature.type})"
            phrases.append(_with_details(flavour, details))
        elif kind == "filesystem":
            article = "an" if signature.type[:1].lower() in "aeioux" else "a"
            phrases.append(_with_details(f"{article} {signature.type} filesystem", _identity(signature)))
        else:
            article = "an" if kind[:1].lower() in "aeiou" or kind.startswith("LVM") else "a"
            phrases.append(_with_details(f"{article} {kind}", [signature.type] + _identity(signature)))
    return " and ".join(_dedupe(phrases))


# -------------------------------------------------------------------------------------------------- block tree


class BlockTree:
    """The devices lsblk lists, with their parent/child relations (a md or dm device may have several parents)."""

    def __init__(self, devices, parents):
        self.devices = dict(devices)
        self.parents = {kname: set(found) for kname, found in parents.items()}
        self.children = {kname: set() for kname in self.devices}
        for kname, found in self.parents.items():
            for parent in found:
                self.children.setdefault(parent, set()).add(kname)

    def by_devno(self, devno):
        for device in self.devices.values():
            if device.devno == devno:
                return device
        return None

    def descendants(self, kname):
        found = []
        pending = sorted(self.children.get(kname, ()), key=natural_key)
        while pending:
            current = pending.pop(0)
            if current not in found:
                found.append(current)
                pending.extend(sorted(self.children.get(current, ()), key=natural_key))
        return found

    def mounts_under(self, kname):
        """Return (device kname, mountpoint) for the device and everything built on it that is mounted."""
        return [(name, mountpoint) for name in [kname] + self.descendants(kname) for mountpoint in self.devices[name].mountpoints]

    def holders(self, kname):
        """Return the children of a disk that are not its partitions (md arrays, LVM, dm-crypt, multipath)."""
        return sorted((child for child in self.children.get(kname, ()) if self.devices[child].type not in _PARTITION_TYPES), key=natural_key)

    def partitions(self, kname):
        return sorted((child for child in self.children.get(kname, ()) if self.devices[child].type in _PARTITION_TYPES), key=natural_key)

    def enrich(self, namespaces):
        """Fill model and serial from ``nvme list`` where lsblk did not read them (older util-linux, no udev)."""
        by_path = {namespace.device_path: namespace for namespace in namespaces}
        for kname, device in list(self.devices.items()):
            namespace = by_path.get(device.path) or by_path.get("/dev/" + kname)
            if namespace is None:
                continue
            self.devices[kname] = _replace(device, model=device.model or namespace.model, serial=device.serial or namespace.serial)


def protected_disks(tree, sources, fstab=()):
    """Return {kname: reason} for every device that the OS lives on, walking up through partitions, md and LVM.

    ``sources`` lists (what, devno, how) triples the caller resolved on the node (see protected_sources): what is a
    protected mount point or ``swap``, how is ``mounted`` or ``fstab``. lsblk's own mountpoints are used as well,
    and so are the UUID=/LABEL=/PARTUUID=/PARTLABEL= lines of ``fstab`` (FstabEntries) that lsblk can match, so that
    an OS disk counts as one even while unmounted.
    """
    seeds = []
    for kname, device in tree.devices.items():
        for mountpoint in device.mountpoints:
            if mountpoint in PROTECTED_MOUNTPOINTS:
                seeds.append((mountpoint, "mounted", kname))
            elif mountpoint == SWAP:
                seeds.append(("swap", "mounted", kname))
        for entry in fstab:
            if entry.keeps and entry.tag and entry.tag in device.tags:
                seeds.append((entry.keeps, "fstab", kname))
    for what, devno, how in sources:
        device = tree.by_devno(devno) if devno else None
        if device is not None:
            seeds.append((what, how, device.kname))
    order = {what: index for index, what in enumerate(PROTECTED_MOUNTPOINTS + ("swap",))}
    protected = {}
    for what, how, seed in sorted(set(seeds), key=lambda item: (order.get(item[0], len(order)), item[1] != "mounted", item[2])):
        chain = {seed: []}
        pending = [seed]
        while pending:
            current = pending.pop(0)
            protected.setdefault(current, _protection_reason(tree, what, how, chain[current]))
            for parent in sorted(tree.parents.get(current, ()), key=natural_key):
                if parent not in chain:
                    chain[parent] = chain[current] + [current]
                    pending.append(parent)
    return protected


def protected_sources(mounts, swap_names, resolve, fstab=()):
    """Return the (what, devno, how) triples the OS lives on, for protected_disks.

    From the filesystems mounted at PROTECTED_MOUNTPOINTS and active swap (how = ``mounted``), and from the lines of
    ``fstab`` for those that name a device path (how = ``fstab``). ``resolve(path)`` returns ``{"rdev": devno of a
    block device or None, "dev": devno of the filesystem holding the path}``, or None when the path does not exist.
    A filesystem without a device number of its own (btrfs, overlay: major 0) is resolved through its source; a
    swap file through the filesystem that holds it.
    """
    sources = []
    for mount in mounts:
        if mount.mountpoint in PROTECTED_MOUNTPOINTS:
            sources.append((mount.mountpoint, _mount_devno(mount, resolve), "mounted"))
    for name in swap_names:
        found = resolve(name)
        if found is None:
            continue
        devno = found["rdev"]
        if devno is None:
            holder = next((mount for mount in reversed(mounts) if mount.devno == found["dev"]), None)
            devno = _mount_devno(holder, resolve) if holder else found["dev"]
        sources.append(("swap", devno, "mounted"))
    for entry in fstab:
        if entry.keeps and entry.tag is None and entry.spec.startswith("/"):
            sources.append((entry.keeps, (resolve(entry.spec) or {}).get("rdev"), "fstab"))
    return [(what, devno, how) for what, devno, how in sources if devno]


# --------------------------------------------------------------------------------------------------- selection


def select_candidates(request, tree, path_devnos, protected, transports):
    """Return (candidates, refusals, excluded) from the request's allow-list, or from discovery.

    ``path_devnos`` maps each path entry of the allow-list to the devno it resolves to on the node, ``None`` when
    the path does not exist, or ``False`` when it is not a block device. ``transports`` maps NVMe kernel names to
    the transport of their controller (``pcie``, ``tcp``, ``rdma``...; ``None`` when unknown).
    """
    if request.entries:
        candidates, refusals = _from_allow_list(request, tree, path_devnos)
        refusals.extend(_refuse_unfit(request, candidates, tree, protected, transports))
        return candidates, refusals, []
    if request.discover:
        candidates, excluded = _discover(request, tree, protected, transports)
        return candidates, [] if candidates else [_nothing_found(request)], excluded
    return [], [Refusal("nothing_selected", f"No cache device is selected on {request.host}: list the drives in devices or enable discover.")], []


def plan_cache(request, tree, candidates, evidence, mount_point, discovered=False, fstab=()):
    """Return (plan, devices, refusals, excluded) for the candidates, given what was read from each of them.

    ``evidence`` maps each candidate's kernel name to its Evidence; ``mount_point`` is a MountPointState; ``fstab``
    the FstabEntries of the node, whose UUID=/LABEL= lines for the OS are matched against the disks' signatures.
    When the candidates come from discovery, disks found in use are excluded instead of refused, and the
    shape of the cache is decided on the disks that remain.
    """
    excluded = []
    assessed = _assess(request, tree, candidates, evidence, fstab)
    while discovered and any(item.unfit for item in assessed):
        excluded.extend(Refusal(item.unfit[0], f"{item.candidate.label} {item.unfit[1]}.", item.candidate.path).as_dict() for item in assessed if item.unfit)
        assessed = _assess(request, tree, [item.candidate for item in assessed if not item.unfit], evidence, fstab)
    refusals = [Refusal(item.unfit[0], f"{item.candidate.label} {item.unfit[1]}{item.unfit[2]}", item.candidate.path) for item in assessed if item.unfit]
    kept = [item for item in assessed if not item.unfit]
    to_wipe = []
    for item in kept:
        if item.ours or not item.holds:
            continue
        if request.wipe_allowed:
            to_wipe.append(item.candidate.path)
        elif request.wipe:
            refusals.append(
                Refusal(
                    "wipe_not_confirmed",
                    f"{item.candidate.label} holds {item.holds}; wipe is true but {request.host} is not listed in wipe_confirm, so it is left untouched.",
                    item.candidate.path,
                )
            )
        else:
            refusals.append(
                Refusal(
                    "has_data",
                    f"{item.candidate.label} holds {item.holds}; it is erased only with wipe=true and {request.host} listed in wipe_confirm.",
                    item.candidate.path,
                )
            )
    if discovered and not kept and not refusals:
        refusals.append(_nothing_found(request))
    if request.expected_count and kept and len(kept) != request.expected_count:
        paths = ", ".join(item.candidate.path for item in kept)
        refusals.append(
            Refusal("count", f"The selection on {request.host} has {len(kept)} disk(s) ({paths}) where expected_count is {request.expected_count}.")
        )
    devices = [_device_report(item, item.candidate.path in to_wipe, tree) for item in kept]
    if refusals or not kept:
        return None, devices, refusals, excluded
    chosen = [item.candidate for item in kept]
    layout = kept[0].layout
    active_md = kept[0].active_md
    if layout == "single":
        target, target_devno = chosen[0].path, chosen[0].device.devno
    else:
        target = "/dev/md/" + request.array_name
        target_devno = tree.devices[active_md].devno if active_md else None
    mount_refusal = _check_mount_point(request, mount_point, target, target_devno)
    if mount_refusal:
        return None, devices, [mount_refusal], excluded
    adopt = all(item.ours for item in kept)
    plan = {
        "layout": layout,
        "action": "adopt" if adopt else "create",
        "devices": [candidate.path for candidate in chosen],
        "wipe": to_wipe,
        "target": target,
        "target_devno": target_devno,
        "mounted": bool(target_devno) and mount_point.devno == target_devno,
        "size": sum(candidate.device.size or 0 for candidate in chosen),
        "array": _array_report(request, kept[0].array_uuid, active_md, tree) if layout == "raid0" else None,
        "assemble": layout == "raid0" and adopt and active_md is None,
    }
    return plan, devices, [], excluded


def refusal_message(request, refusals):
    """Return the task's failure message: one sentence per refusal."""
    return f"Refusing to build the NVMe cache on {request.host}: " + " ".join(refusal.message for refusal in refusals)


def format_size(size):
    if not size:
        return "0 B"
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.1f} {unit}"
    return f"{size} B"


def natural_key(text):
    """Sort nvme2n1 before nvme10n1."""
    return [int(part) if part.isdigit() else part for part in _NATURAL_PARTS.split(text)]


# ------------------------------------------------------------------------------------------------------ helpers


def _device_from_lsblk(entry):
    name = entry["name"]
    kname = entry.get("kname") or name
    mountpoints = entry.get("mountpoints")
    if mountpoints is None:
        mountpoints = [entry.get("mountpoint")]
    return Device(
        kname=kname,
        name=name,
        path=entry.get("path") or "/dev/" + name,
        devno=entry.get("maj:min"),
        type=entry.get("type") or "",
        size=parse_size(entry.get("size")),
        read_only=_flag(entry.get("ro")),
        transport=_clean(entry.get("tran")),
        model=_clean(entry.get("model")),
        serial=_clean(entry.get("serial")),
        wwn=_clean(entry.get("wwn")),
        mountpoints=tuple(mountpoint for mountpoint in mountpoints if mountpoint),
        pkname=entry.get("pkname"),
        # What an fstab line may name the device by (where udev told lsblk).
        tags=tuple((tag, entry[tag.lower()]) for tag in FSTAB_TAGS if entry.get(tag.lower())),
    )


def _replace(device, **changes):
    values = {name: getattr(device, name) for name in device.__dataclass_fields__}
    values.update(changes)
    return Device(**values)


def _flag(value):
    if isinstance(value, bool):
        return value
    return str(value).strip() in ("1", "true", "True") if value is not None else False


def _clean(value):
    if value is None:
        return None
    text = " ".join(str(value).split())
    return text or None


def _json_list(text, tool, key):
    """The list under ``key`` of the JSON object ``tool`` printed, or a BlockdevError naming the tool."""
    try:
        document = json.loads(text)
    except ValueError:
        raise BlockdevError(f"{tool} did not print JSON: {_first_line(text)}.") from None
    entries = document.get(key) if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise BlockdevError(f"{tool} printed JSON without a {key} list.")
    return entries


def _first_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


def _unescape_octal(text):
    return _OCTAL_ESCAPE.sub(lambda match: chr(int(match.group(1), 8)), text)


def _identity(signature):
    details = []
    if signature.label:
        details.append(f"label '{signature.label}'")
    if signature.uuid:
        details.append(f"UUID {signature.uuid}")
    return details


def _with_details(phrase, details):
    return f"{phrase} ({', '.join(details)})" if details else phrase


def _dedupe(items):
    seen = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _protection_reason(tree, what, how, below):
    """Say what the OS keeps on a device; ``below`` lists the devices between it and the one that holds it, top first."""
    phrase = _fstab_phrase(what) if how == "fstab" else ("it holds active swap" if what == "swap" else f"it holds {what}")
    if not below:
        return phrase
    return f"{phrase} through {' on '.join(tree.devices[kname].name for kname in below)}"


def _fstab_phrase(what):
    return "/etc/fstab uses it as swap" if what == "swap" else f"/etc/fstab mounts {what} from it"


def _normalized(text):
    return " ".join(text.split()).lower() if text else ""


def _from_allow_list(request, tree, path_devnos):
    candidates, refusals, seen = [], [], set()
    for entry in request.entries:
        if entry.startswith("/"):
            found, refusal = _match_path(request, tree, entry, path_devnos.get(entry))
        else:
            found, refusal = _match_identity(request, tree, entry)
        if refusal:
            refusals.append(refusal)
        for candidate in found:
            if candidate.device.kname not in seen:
                seen.add(candidate.device.kname)
                candidates.append(candidate)
    return candidates, refusals


def _match_path(request, tree, entry, devno):
    if devno is None:
        return [], Refusal("missing", f"{entry} does not exist on {request.host}.", entry)
    if devno is False:
        return [], Refusal("not_block_device", f"{entry} is not a block device.", entry)
    device = tree.by_devno(devno)
    if device is None:
        return [], Refusal("not_listed", f"{entry} is block device {devno}, which lsblk does not list on {request.host}.", entry)
    return [Candidate(path=entry, device=device, matched_by="path", entry=entry)], None


def _match_identity(request, tree, entry):
    wanted = _normalized(entry)
    found = []
    for kname in sorted(tree.devices, key=natural_key):
        device = tree.devices[kname]
        if device.type != "disk":
            continue
        for matched_by, value in (("serial", device.serial), ("wwn", device.wwn), ("model", device.model)):
            if value and _normalized(value) == wanted:
                found.append(Candidate(path=device.path, device=device, matched_by=matched_by, entry=entry))
                break
    if not found:
        return [], Refusal("no_match", f"{entry} matches no disk on {request.host} by serial, WWN or model.", entry)
    return found, None


def _refuse_unfit(request, candidates, tree, protected, transports):
    """Refuse what is never a cache disk, whatever the settings; unfit candidates are removed from the list."""
    refusals = []
    for candidate in list(candidates):
        reason = _unfit_reason(request, candidate, tree, protected, transports)
        if reason:
            refusals.append(Refusal(reason[0], reason[1], candidate.path))
            candidates.remove(candidate)
    return refusals


def _unfit_reason(request, candidate, tree, protected, transports):
    device = candidate.device
    label = candidate.label
    if device.kname in protected:
        return "os_disk", f"{label} is the OS disk ({protected[device.kname]}); it is never used for the cache, whatever the settings."
    if device.type in _PARTITION_TYPES:
        parent = ", ".join(sorted(tree.parents.get(device.kname, ()))) or "its disk"
        return "partition", f"{label} is a partition of {parent}; name the whole disk."
    if device.type == "loop":
        if request.allow_loop and candidate.matched_by == "path":
            return None
        return "loop_device", f"{label} is a loop device (a file on another filesystem), not a drive; loop devices are accepted only in the lab (allow_loop)."
    if device.type != "disk":
        return "not_a_disk", f"{label} is a {device.type} device, not a disk."
    if device.read_only:
        return "read_only", f"{label} is read-only."
    transport = transports.get(device.kname)
    if device.is_nvme and transport and transport != LOCAL_NVME_TRANSPORT:
        return "fabric", f"{label} is an NVMe over Fabrics namespace (transport {transport}), not a local drive."
    return None


def _nothing_found(request):
    return Refusal(
        "nothing_found",
        f"Discovery found no local NVMe disk of at least {format_size(request.min_size)} on {request.host} that is not the OS disk, mounted or in use.",
    )


def _mount_devno(mount, resolve):
    if not mount.devno.startswith("0:"):
        return mount.devno
    found = resolve(mount.source) if mount.source.startswith("/") else None
    return found["rdev"] if found else None


def _discover(request, tree, protected, transports):
    candidates, excluded = [], []
    for kname in sorted(tree.devices, key=natural_key):
        device = tree.devices[kname]
        if device.type != "disk" or not device.is_nvme:
            continue
        reason = _discovery_exclusion(request, tree, device, protected, transports)
        if reason:
            excluded.append(Refusal("excluded", f"{device.path} {reason}.", device.path).as_dict())
            continue
        candidates.append(Candidate(path=device.path, device=device, matched_by="discovery"))
    return candidates, excluded


def _discovery_exclusion(request, tree, device, protected, transports):
    if device.kname in protected:
        return f"is the OS disk ({protected[device.kname]})"
    transport = transports.get(device.kname)
    if transport != LOCAL_NVME_TRANSPORT:
        return f"is not a local PCIe drive (transport {transport or 'unknown'})"
    if device.read_only:
        return "is read-only"
    if (device.size or 0) < request.min_size:
        return f"is smaller ({format_size(device.size)}) than the minimum of {format_size(request.min_size)}"
    elsewhere = [mountpoint for _name, mountpoint in tree.mounts_under(device.kname) if mountpoint != request.mount_point]
    if elsewhere:
        return f"is mounted at {', '.join(elsewhere)}"
    return None


@dataclass(frozen=True)
class _Assessment:
    candidate: Candidate
    proof: Evidence
    layout: str
    ours: bool
    claimed: str | None
    in_use: str | None
    holds: str
    array_uuid: str | None
    active_md: str | None

    @property
    def unfit(self):
        """(reason, what, consequence) when the disk can never be used now, whatever the settings; else None."""
        if self.claimed:
            return "os_disk", f"is the OS disk ({self.claimed})", "; it is never used for the cache, whatever the settings."
        if self.in_use:
            return "in_use", f"is in use: {self.in_use}", "."
        return None


def _assess(request, tree, candidates, evidence, fstab):
    layout = "single" if len(candidates) == 1 else "raid0"
    array_uuid = _our_array(request, candidates, evidence) if layout == "raid0" else None
    active_md = _active_array(tree, candidates) if array_uuid else None
    assessed = []
    for candidate in candidates:
        proof = evidence.get(candidate.device.kname, Evidence())
        ours = _is_ours(request, proof, layout, array_uuid)
        assessed.append(
            _Assessment(
                candidate=candidate,
                proof=proof,
                layout=layout,
                ours=ours,
                claimed=fstab_claim(proof.signatures, fstab),
                in_use=_in_use(request, tree, candidate, proof, ours, active_md),
                holds=_holds_data(tree, candidate, proof),
                array_uuid=array_uuid,
                active_md=active_md,
            )
        )
    return assessed


def _our_array(request, candidates, evidence):
    """Return the array UUID when every candidate is a member of one RAID0 named after the cache, over exactly them."""
    uuids = set()
    for candidate in candidates:
        proof = evidence.get(candidate.device.kname, Evidence())
        members = [signature for signature in proof.signatures if signature.type == MD_MEMBER_TYPE]
        if len(proof.signatures) != 1 or len(members) != 1:
            return None
        if (members[0].label or "").rsplit(":", 1)[-1] != request.array_name:
            return None
        if proof.md.get("MD_LEVEL") != "raid0" or proof.md.get("MD_DEVICES") != str(len(candidates)):
            return None
        uuids.add(members[0].uuid)
    return uuids.pop() if len(uuids) == 1 else None


def _active_array(tree, candidates):
    """Return the kernel name of the md array assembled over exactly the candidates, if there is one."""
    knames = {candidate.device.kname for candidate in candidates}
    shared = None
    for candidate in candidates:
        arrays = {holder for holder in tree.holders(candidate.device.kname) if tree.devices[holder].type.startswith("raid")}
        shared = arrays if shared is None else shared & arrays
    for array in sorted(shared or (), key=natural_key):
        if tree.parents.get(array, set()) == knames:
            return array
    return None


def _is_ours(request, proof, layout, ours_array):
    if layout == "single":
        return (
            len(proof.signatures) == 1
            and proof.signatures[0].type == CACHE_FSTYPE
            and proof.signatures[0].label == request.label
            and not proof.md
        )
    return ours_array is not None


def _in_use(request, tree, candidate, proof, ours, active_md):
    """Return why a disk is in use (mounted, held, busy), or None; the cache itself in use as the cache is fine."""
    kname = candidate.device.kname
    allowed = {request.mount_point} if ours else set()
    mounted = [f"{mountpoint} ({name})" if name != kname else mountpoint for name, mountpoint in tree.mounts_under(kname) if mountpoint not in allowed]
    if mounted:
        return "mounted at " + ", ".join(mounted)
    holders = [holder for holder in tree.holders(kname) if not (ours and holder == active_md)]
    if holders:
        return "held by " + ", ".join(f"{holder} ({tree.devices[holder].type})" for holder in holders)
    in_use_partitions = [partition for partition in tree.partitions(kname) if tree.children.get(partition)]
    if in_use_partitions:
        return "its partition(s) " + ", ".join(in_use_partitions) + " are held by " + ", ".join(
            sorted({child for partition in in_use_partitions for child in tree.children[partition]}, key=natural_key)
        )
    if proof.busy and not ours:
        return "the kernel refuses exclusive access to it (mounted in another mount namespace, active swap, or held by a driver)"
    return None


def _holds_data(tree, candidate, proof):
    described = describe_signatures(proof.signatures, proof.md)
    partitions = tree.partitions(candidate.device.kname)
    if partitions and "partition table" not in described:
        described = " and ".join(part for part in (described, f"partitions {', '.join(partitions)}") if part)
    return described


def _device_report(item, wiped, tree):
    candidate, proof = item.candidate, item.proof
    device = candidate.device
    if item.ours:
        state = "cache"
    elif wiped:
        state = "wipe"
    else:
        state = "blank"
    return {
        "path": candidate.path,
        "kname": device.kname,
        "devno": device.devno,
        "type": device.type,
        "size": device.size,
        "model": device.model,
        "serial": device.serial,
        "wwn": device.wwn,
        "matched_by": candidate.matched_by,
        "entry": candidate.entry,
        "signatures": [{"type": signature.type, "uuid": signature.uuid, "label": signature.label} for signature in proof.signatures],
        "partitions": tree.partitions(device.kname),
        "state": state,
    }


def _array_report(request, ours_array, active_md, tree):
    return {
        "name": request.array_name,
        "uuid": ours_array,
        "active_device": tree.devices[active_md].path if active_md else None,
    }


def _check_mount_point(request, mount_point, target, target_devno):
    if mount_point.devno:
        if target_devno and mount_point.devno == target_devno:
            return None
        return Refusal(
            "mount_point_taken",
            f"{request.mount_point} is already a mount of {mount_point.source or mount_point.devno}, not of the cache device {target}.",
            request.mount_point,
        )
    if mount_point.entries:
        return Refusal(
            "mount_point_not_empty",
            f"{request.mount_point} is not mounted but holds {mount_point.entries} entr{'y' if mount_point.entries == 1 else 'ies'} on the disk below it; "
            f"move them away so that the cache does not hide them.",
            request.mount_point,
        )
    return None
