# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read the GPUs out of one ``nvidia-smi -q -x`` report, whatever the driver that printed it.

What varies between drivers and what this module does with it:
- clock reasons are ``clocks_event_reasons`` since R535 and ``clocks_throttle_reasons`` before; both are read and
  the names lose their prefix (``hw_slowdown``);
- ECC counters are ``dram_uncorrectable``/``sram_uncorrectable*`` (Ampere and later) or ``double_bit/total``
  (older drivers and GPUs); the uncorrected count is their sum, None where nvidia-smi prints ``N/A``;
- ``remapped_rows`` is ``N/A`` on GPUs without row remapping and on Ampere in MIG mode; ``retired_pages`` is what
  pre-Ampere GPUs have instead;
- ``attached_gpus`` may count more GPUs than the report has ``<gpu>`` elements (GPUs nvidia-smi cannot read), so
  only the elements count.

Plain Python without Ansible imports, unit-tested on recorded reports.
"""

from __future__ import annotations

import re
from xml.etree import ElementTree

_NUMBER = re.compile(r"^\s*(\d+)")
_UNCORRECTED_FIELDS = ("dram_uncorrectable", "sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded")


class NvsmiXmlError(Exception):
    """The text is not an ``nvidia-smi -q -x`` report; the message is one sentence."""


def parse_nvsmi_xml(text):
    """Return ``{"driver_version", "attached_gpus", "gpus"}`` for one report; raise NvsmiXmlError when it is none.

    Each GPU is a dict: ``index`` (position in the report, which is nvidia-smi's index order), ``pci_bus_id``, ``uuid``,
    ``name``, ``mig_mode``, ``pcie`` (``max_gen``, ``current_gen``, ``current_width``, ``max_width``: ints or None),
    ``gpu_util`` (percent or None), ``clock_reasons`` (the set of active reason names), ``volatile_uncorrected`` and
    ``aggregate_uncorrected`` (ints or None), ``remapped_rows`` (``{"pending", "failure"}`` booleans, or None when
    ``N/A``) and ``retired_pages_pending`` (bool, or None when the GPU has no page retirement).
    """
    start = text.find("<nvidia_smi_log")
    if start < 0:
        first = next((line.strip() for line in text.splitlines() if line.strip()), "nothing")
        raise NvsmiXmlError(f"nvidia-smi -q -x printed no report but: {first.rstrip('.')}.")
    try:
        # The DOCTYPE names a DTD file that is not shipped with nvidia-smi; ElementTree does not fetch it.
        root = ElementTree.fromstring(text[start:])
    except ElementTree.ParseError as error:
        raise NvsmiXmlError(f"The nvidia-smi -q -x report is not well-formed XML ({error}).") from None
    return {
        "driver_version": _text(root, "driver_version"),
        "attached_gpus": _number(_text(root, "attached_gpus")),
        "gpus": [_gpu(index, element) for index, element in enumerate(root.findall("gpu"))],
    }


def _gpu(index, element):
    link = element.find("pci/pci_gpu_link_info")
    return {
        "index": index,
        "pci_bus_id": _text(element, "pci/pci_bus_id") or element.get("id"),
        "uuid": _text(element, "uuid"),
        "name": _text(element, "product_name"),
        "mig_mode": _text(element, "mig_mode/current_mig"),
        "pcie": {
            "max_gen": _number(_text(link, "pcie_gen/max_link_gen")),
            "current_gen": _number(_text(link, "pcie_gen/current_link_gen")),
            "max_width": _number(_text(link, "link_widths/max_link_width")),
            "current_width": _number(_text(link, "link_widths/current_link_width")),
        },
        "gpu_util": _number(_text(element, "utilization/gpu_util")),
        "clock_reasons": _active_clock_reasons(element),
        "volatile_uncorrected": _uncorrected(element.find("ecc_errors/volatile")),
        "aggregate_uncorrected": _uncorrected(element.find("ecc_errors/aggregate")),
        "remapped_rows": _remapped_rows(element.find("remapped_rows")),
        "retired_pages_pending": _retired_pages_pending(element.find("retired_pages")),
    }


def _active_clock_reasons(element):
    active = set()
    for section, prefix in (("clocks_event_reasons", "clocks_event_reason_"), ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        for reason in element.findall(f"{section}/*"):
            if (reason.text or "").strip() == "Active":
                active.add(reason.tag[len(prefix):] if reason.tag.startswith(prefix) else reason.tag)
    return active


def _uncorrected(scope):
    if scope is None:
        return None
    values = [_number(_text(scope, field)) for field in _UNCORRECTED_FIELDS]
    values.append(_number(_text(scope, "double_bit/total")))
    counted = [value for value in values if value is not None]
    return sum(counted) if counted else None


def _remapped_rows(section):
    if section is None or len(section) == 0:
        return None  # N/A: no row remapping on this GPU, or hidden in MIG mode
    return {"pending": _yes(_text(section, "remapped_row_pending")), "failure": _yes(_text(section, "remapped_row_failure"))}


def _retired_pages_pending(section):
    if section is None:
        return None
    flags = [_yes(_text(section, name)) for name in ("pending_retirement", "pending_blacklist")]
    known = [flag for flag in flags if flag is not None]
    return any(known) if known else None


def _text(element, path):
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = " ".join(found.text.split())
    return None if value in ("", "N/A", "[N/A]") else value


def _number(value):
    match = _NUMBER.match(value) if value else None
    return int(match.group(1)) if match else None


def _yes(value):
    return {"Yes": True, "No": False}.get(value)
