# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What to do about an Xid: the immediate action of NVIDIA's Xid catalog, as this collection's severity and action.

Source: NVIDIA, "Xid Errors", section "Analyzing Xid Errors with the Xid Catalog" (the catalog spreadsheet,
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html), column "Resolution Bucket (Immediate Action)",
Ampere and later. Its buckets map to findings like this:

- RESTART_APP: the application died, the GPU is fine: ``warn``/``restart_app`` (never a failure);
- IGNORE: informational (63: a row remap was recorded; the remap itself is judged from the remapped-rows counters):
  ``warn``/``none``;
- RESET_GPU: ``fail``/``reset_gpu``; RESTART_BM (79, fallen off the bus) and RESTART_VM: ``fail``/``reboot``;
- CHECK_MECHANICALS (54, auxiliary power not connected): ``fail``/``drain``, as someone must open the chassis;
- a workflow (48 double-bit ECC, 74 NVLink, 144-150 NVLink5): ``fail`` with the workflow's first step, a GPU reset;
  45 is the exception: its workflow is "follow the other Xid" (a preemptive cleanup after another error, routine on
  busy clusters), so it is ``warn``/``none`` and the Xid it follows is judged on its own;
- 154 (GPU recovery action changed) carries the driver's own recovery action in its text (GPU reset, node reboot,
  drain), which is used; CONTACT_SUPPORT, UPDATE_SWFW, CHECK_UVM and codes without an action: ``warn``/``none``.
"""

from __future__ import annotations

import re

ACTIONS = ("none", "restart_app", "reset_gpu", "reboot", "drain", "rma")
# Actions that take the GPU or the node out of service fail the node; the others only warn.
FAILING_ACTIONS = frozenset(("reset_gpu", "reboot", "drain", "rma"))


def _codes(*spans):
    codes = set()
    for span in spans:
        codes.update(range(span[0], span[1] + 1) if isinstance(span, tuple) else (span,))
    return codes


_RESTART_APP = _codes(8, 11, 13, 25, 31, 32, (39, 41), 60, 68, 69, (70, 72), (75, 77), 80, (82, 86), (88, 89), 94,
                      (96, 105), (126, 135), 139)
_IGNORE = _codes(14, 37, 38, 43, 44, 63, 66, 67, 92, 93, 106, 107, 108, 121, 137, 141, 152, 153, 157, 160, 161)
_RESET_GPU = _codes(46, 62, 64, 95, 109, 110, 119, 120, 136, 140, 143, 155, 156, 158)
_WORKFLOW_RESET = _codes(48, 74, (144, 150))
_REBOOT = _codes(79, 151)
_UNUSED = _codes((1, 7), 9, 10, 12, (15, 24), (26, 30), (33, 36), 42, 47, (49, 53), (55, 59), 61, 65, 73, 81, 87, 90,
                 91, (111, 118), (122, 125), 138, 142)
_NO_ACTION = _codes(78, 159, (162, 172))

_RECOVERY_ACTIONS = (("reboot", "reboot"), ("drain", "drain"), ("reset", "reset_gpu"))


def catalog_action(xid, detail=""):
    """Return ``(action, why)`` for ``xid``: the catalog's immediate action as one of ACTIONS and a short reason."""
    if xid in _RESTART_APP:
        return "restart_app", "NVIDIA's Xid catalog says to restart the application"
    if xid in _IGNORE:
        return "none", "NVIDIA's Xid catalog lists it as informational"
    if xid in _RESET_GPU or xid in _WORKFLOW_RESET:
        return "reset_gpu", "NVIDIA's Xid catalog says to reset the GPU"
    if xid in _REBOOT:
        return "reboot", "NVIDIA's Xid catalog says to restart the machine"
    if xid == 54:
        return "drain", "the GPU's auxiliary power is not connected"
    if xid == 45:
        return "none", "it is a cleanup after another error, which is judged on its own"
    if xid == 154:
        changed_to = re.search(r"to 0x[0-9a-fA-F]+ \(([^)]*)\)", detail or "")
        target = changed_to.group(1).lower() if changed_to else ""
        for word, action in _RECOVERY_ACTIONS:
            if word in target:
                return action, f"the driver asks for: {changed_to.group(1)}"
        return "none", "the driver's recovery action needs nothing more"
    if xid in _UNUSED or xid in _NO_ACTION:
        return "none", "NVIDIA's Xid catalog gives no immediate action for it"
    return None, "it is not in NVIDIA's Xid catalog"


def severity_of(action):
    """``fail`` for an action that takes the GPU or node out of service, else ``warn``."""
    return "fail" if action in FAILING_ACTIONS else "warn"
