# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Find the NVIDIA driver's Xid lines (GPUs) and SXid lines (NVSwitches) in a kernel log.

The log may come from ``dmesg``, ``dmesg -T``, ``dmesg --time-format iso`` (with or without ``-x`` levels) or
``journalctl -k`` in any output format: lines are keyed on ``NVRM: Xid (PCI:...)`` and ``SXid (PCI:...)`` wherever
they sit in the line, never on the prefix. The GPU is named as the driver prints it (``0000:cb:00``: domain, bus,
device); ``pci_key`` turns that and nvidia-smi's ``00000000:CB:00.0`` into the same key.
"""

from __future__ import annotations

import re

_XID = re.compile(r"NVRM: Xid \(PCI:([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.[0-7])?\): (\d+),?\s*(.*)$")
_SXID = re.compile(r"(nvidia-nvswitch\d*): SXid \(PCI:([0-9A-Fa-f:.]+)\): (\d+),?\s*(.*)$")


def parse_kernel_log(text):
    """Return the Xid and SXid events of ``text`` in log order.

    Each event: ``kind`` (``xid``/``sxid``), ``code`` (int), ``pci`` (as printed), ``device`` (the NVSwitch, for SXid),
    ``detail`` (the rest of the line) and ``fatal`` (SXid: True/False where the line says ``Fatal``/``Non-fatal``, else
    None).
    """
    events = []
    for line in text.splitlines():
        xid = _XID.search(line)
        if xid:
            events.append({"kind": "xid", "code": int(xid.group(2)), "pci": xid.group(1), "device": None,
                           "detail": xid.group(3).strip(), "fatal": None})
            continue
        sxid = _SXID.search(line)
        if sxid:
            detail = sxid.group(4).strip()
            fatal = True if detail.startswith("Fatal") else False if detail.startswith("Non-fatal") else None
            events.append({"kind": "sxid", "code": int(sxid.group(3)), "pci": sxid.group(2), "device": sxid.group(1),
                           "detail": detail, "fatal": fatal})
    return events


def pci_key(address):
    """Return ``(domain, bus, device)`` as ints for ``0000:cb:00`` or ``00000000:CB:00.0``; None when unreadable."""
    parts = re.split(r"[:.]", address or "")
    try:
        return int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
    except (IndexError, ValueError):
        return None
