# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig-parted v1 configuration: validation, resolution of one layout on a node, and export rendering.

The format is NVIDIA mig-parted's (``api/spec/v1``): ``version: v1`` and ``mig-configs`` mapping layout names
to lists of entries with ``devices``, ``device-filter``, ``mig-enabled`` and ``mig-devices``. The rules are
mig-parted's, with deliberate differences: a malformed ``device-filter`` is an error here, where mig-parted
silently matches nothing; and by default (``strict``) an entry naming GPU indices the node lacks, or a layout that
applies to no GPU of the node, is an error too. With ``strict=False`` those are skipped as mig-parted skips them,
for fleet files shared by nodes of different models and sizes.

A device filter is ``0xDDDDVVVV`` (PCI device and vendor id) or, since mig-parted v0.15.0,
``0xDDDDVVVV:0xSSSSVVVV`` with the subsystem id. A GPU matches a subsystem-qualified filter when both ids match;
where nvidia-smi cannot say the GPU's subsystem id (``[N/A]``), the device id alone decides.

Plain Python without Ansible imports; every error is a MigConfigError whose message is one sentence.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import is_profile_name

_TOP_LEVEL_FIELDS = ("version", "mig-configs")
_ENTRY_FIELDS = ("devices", "device-filter", "mig-enabled", "mig-devices")
_DEVICE_FILTER = re.compile(r"^(?P<device>0x[0-9A-Fa-f]{8})(?::(?P<subsystem>0x[0-9A-Fa-f]{8}))?$")


class MigConfigError(ValueError):
    """The configuration, or the layout selected from it, cannot be applied; the message is one sentence."""


@dataclass(frozen=True)
class ConfigEntry:
    """One entry of a layout: which GPUs it applies to and what they should hold."""

    position: int
    devices: object
    device_filter: tuple  # (device id, subsystem id or None) pairs, as integers
    mig_enabled: bool
    mig_devices: dict

    def matches_model(self, gpu):
        """Tell whether a GPU record (``pci_device_id``, optionally ``pci_sub_device_id``) passes the entry's device filter."""
        if not self.device_filter:
            return True
        device_id = _hex(gpu.get("pci_device_id"))
        subsystem_id = _hex(gpu.get("pci_sub_device_id"))
        # Where nvidia-smi printed no subsystem id for the GPU, the device id alone decides.
        return any(
            device_id == device and (subsystem is None or subsystem_id is None or subsystem == subsystem_id) for device, subsystem in self.device_filter
        )

    @property
    def names_subsystems(self):
        return any(subsystem is not None for dummy, subsystem in self.device_filter)


@dataclass(frozen=True)
class WantedGpu:
    """The MIG mode and devices (profile name -> count, zero counts left out) a layout wants on one GPU."""

    mig_enabled: bool
    mig_devices: dict


def parse_configs(document):
    """Return ``{layout name: (ConfigEntry, ...)}`` from a mig-parted v1 document or its bare ``mig-configs`` mapping."""
    if not isinstance(document, dict):
        raise MigConfigError(f"The MIG configuration must be a mapping with the keys version and mig-configs, not {_kind(document)}.")
    if "version" in document or "mig-configs" in document:
        configs = _configs_of_document(document)
    else:
        configs = document
    if not configs:
        raise MigConfigError("The MIG configuration defines no layout under mig-configs.")
    return {str(name): _parse_layout(str(name), entries) for name, entries in configs.items()}


def names_subsystems(configs, selected):
    """Tell whether layout ``selected`` has a device filter with a subsystem id, which needs ``pci.sub_device_id`` read."""
    return any(entry.names_subsystems for entry in configs.get(selected, ()))


def resolve_layout(configs, selected, gpus, strict=True):
    """Return ``{gpu index: WantedGpu}`` for the GPUs that layout ``selected`` applies to.

    ``gpus`` are the records of ``_nvsmi.gpu_from_row``. As in mig-parted, entries apply in file order and a GPU
    matched by several entries gets the last one; GPUs without MIG are skipped under ``devices: all``. With
    ``strict``, an index the node lacks and a layout matching none of its GPUs are errors; without, they are skipped.
    """
    if selected not in configs:
        raise MigConfigError(f"Layout {selected!r} is not defined; the configuration defines {_names(configs)}.")
    wanted = {}
    for entry in configs[selected]:
        for gpu in _gpus_of_entry(selected, entry, gpus, strict):
            if not gpu["mig_capable"]:
                if entry.devices == "all" or not entry.mig_enabled:
                    continue
                raise MigConfigError(
                    f"Entry {entry.position} of layout {selected!r} enables MIG on GPU {gpu['index']}, an {gpu['name']}, which does not support MIG."
                )
            wanted[gpu["index"]] = WantedGpu(entry.mig_enabled, dict(entry.mig_devices))
    if strict and not any(entry.matches_model(gpu) for entry in configs[selected] for gpu in gpus):
        raise MigConfigError(f"Layout {selected!r} applies to no GPU on this node: {_why_nothing_matches(configs[selected], gpus)}.")
    return wanted


def render_export(gpu_layouts, label="current"):
    """Render ``[(index, mig_enabled, mig_devices), ...]`` the way ``nvidia-mig-parted export`` prints a node.

    GPUs with the same layout share one entry, which says ``devices: all`` when it covers every GPU listed.
    """
    groups = []
    for index, mig_enabled, mig_devices in gpu_layouts:
        layout = (mig_enabled, sorted(mig_devices.items()))
        for group in groups:
            if group[0] == layout:
                group[1].append(index)
                break
        else:
            groups.append((layout, [index]))
    lines = ["version: v1", "mig-configs:", f"  {label}:"]
    for (mig_enabled, devices), indices in groups:
        covers_all = len(groups) == 1
        lines.append("  - devices: " + ("all" if covers_all else "[" + ", ".join(str(index) for index in indices) + "]"))
        lines.append(f"    mig-enabled: {'true' if mig_enabled else 'false'}")
        if mig_enabled:
            lines.append("    mig-devices:" + ("" if devices else " {}"))
            lines.extend(f"      {name}: {count}" for name, count in devices)
    return "\n".join(lines) + "\n"


def _configs_of_document(document):
    unexpected = [key for key in document if key not in _TOP_LEVEL_FIELDS]
    if unexpected:
        raise MigConfigError(f"The MIG configuration has the unexpected field {unexpected[0]!r}; only version and mig-configs are allowed.")
    if "version" not in document:
        raise MigConfigError("The MIG configuration lacks the version field; mig-parted configurations start with 'version: v1'.")
    if document["version"] != "v1":
        raise MigConfigError(f"The MIG configuration has version {document['version']!r}, but only v1 is supported.")
    configs = document.get("mig-configs")
    if configs is not None and not isinstance(configs, dict):
        raise MigConfigError(f"The mig-configs field must map layout names to lists of entries, not {_kind(configs)}.")
    return configs


def _parse_layout(name, entries):
    if not isinstance(entries, list) or not entries:
        raise MigConfigError(f"Layout {name!r} must be a non-empty list of entries, not {_kind(entries)}.")
    return tuple(_parse_entry(f"Entry {position} of layout {name!r}", position, entry) for position, entry in enumerate(entries, start=1))


def _parse_entry(where, position, entry):
    if not isinstance(entry, dict):
        raise MigConfigError(f"{where} must be a mapping, not {_kind(entry)}.")
    unexpected = [key for key in entry if key not in _ENTRY_FIELDS]
    if unexpected:
        raise MigConfigError(f"{where} has the unexpected field {unexpected[0]!r}; the fields are devices, device-filter, mig-enabled and mig-devices.")
    for field in ("devices", "mig-enabled"):
        if field not in entry:
            raise MigConfigError(f"{where} lacks the required field {field}.")
    mig_enabled = entry["mig-enabled"]
    if not isinstance(mig_enabled, bool):
        raise MigConfigError(f"{where} has mig-enabled {mig_enabled!r}; it must be true or false.")
    return ConfigEntry(
        position=position,
        devices=_parse_devices(where, entry["devices"]),
        device_filter=_parse_device_filter(where, entry.get("device-filter")),
        mig_enabled=mig_enabled,
        mig_devices=_parse_mig_devices(where, mig_enabled, entry),
    )


def _parse_devices(where, devices):
    if devices == "all":
        return devices
    if isinstance(devices, list) and devices and all(_is_count(index) for index in devices):
        return tuple(devices)
    raise MigConfigError(f"{where} has devices {devices!r}; it must be 'all' or a non-empty list of GPU indices.")


def _parse_device_filter(where, device_filter):
    if device_filter is None:
        return ()
    filters = device_filter if isinstance(device_filter, list) else [device_filter]
    parsed = []
    for value in filters:
        match = _DEVICE_FILTER.fullmatch(value) if isinstance(value, str) else None
        if match is None:
            raise MigConfigError(
                f"{where} has device-filter {value!r}; each filter must be a PCI device and vendor id written 0xDDDDVVVV, "
                "such as 0x20B010DE, optionally followed by a subsystem id, such as 0x20B010DE:0x134F10DE."
            )
        parsed.append((int(match.group("device"), 16), int(match.group("subsystem"), 16) if match.group("subsystem") else None))
    return tuple(parsed)


def _parse_mig_devices(where, mig_enabled, entry):
    mig_devices = entry.get("mig-devices")
    if mig_devices is None:
        if mig_enabled:
            raise MigConfigError(f"{where} enables MIG without mig-devices; write 'mig-devices: {{}}' for MIG mode without instances.")
        return {}
    if not isinstance(mig_devices, dict):
        raise MigConfigError(f"{where} has mig-devices {mig_devices!r}; it must map profile names to counts.")
    for profile, count in mig_devices.items():
        if not is_profile_name(profile):
            raise MigConfigError(f"{where} names the MIG profile {profile!r}, which is not written like one (for example 1g.10gb or 3g.40gb).")
        if not _is_count(count):
            raise MigConfigError(f"{where} asks for {count!r} of {profile}; a count must be a whole number of 0 or more.")
    wanted = {profile: count for profile, count in mig_devices.items() if count}
    if not mig_enabled and wanted:
        raise MigConfigError(f"{where} disables MIG but lists mig-devices.")
    if mig_devices and not wanted:
        raise MigConfigError(f"{where} lists mig-devices whose counts are all 0; write 'mig-devices: {{}}' for MIG mode without instances.")
    return wanted


def _gpus_of_entry(layout, entry, gpus, strict):
    """Return the GPUs an entry applies to: those its device filter and its devices both match."""
    candidates = [gpu for gpu in gpus if entry.matches_model(gpu)]
    if entry.devices == "all":
        return candidates
    if strict and (candidates or not entry.device_filter):
        # An entry filtered to another model does not concern this node, so only the others must name existing GPUs.
        present = {gpu["index"] for gpu in gpus}
        missing = [index for index in entry.devices if index not in present]
        if missing:
            raise MigConfigError(f"Entry {entry.position} of layout {layout!r} names GPU {missing[0]}, but this node has {_gpu_range(gpus)}.")
    return [gpu for gpu in candidates if gpu["index"] in entry.devices]


def _why_nothing_matches(entries, gpus):
    if not gpus:
        return "the node has no GPU"
    filters = sorted({_filter_text(device, subsystem) for entry in entries for device, subsystem in entry.device_filter})
    device_ids = sorted({gpu["pci_device_id"] for gpu in gpus if gpu["pci_device_id"]})
    return f"its device filters {', '.join(filters)} match none of its GPUs, which are {', '.join(device_ids)}"


def _filter_text(device, subsystem):
    return f"0x{device:08X}" + (f":0x{subsystem:08X}" if subsystem is not None else "")


def _hex(value):
    try:
        return int(value, 16) if value else None
    except ValueError:
        return None


def _is_count(value):
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _kind(value):
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "a string"}.get(type(value), f"the value {value!r}")


def _names(configs):
    return ", ".join(sorted(configs))


def _gpu_range(gpus):
    if not gpus:
        return "no GPU"
    if len(gpus) == 1:
        return f"only GPU {gpus[0]['index']}"
    return f"GPUs {gpus[0]['index']} to {gpus[-1]['index']}"
