# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read ``nvidia-smi nvlink -s``: per GPU, which NVLinks are up.

A link prints its speed (``Link 0: 26.562 GB/s``) or ``<inactive>``; a GPU whose links are all down may print NVML's
``Unable to retrieve NVLink information as all links are inActive`` instead of link lines.
"""

from __future__ import annotations

import re

_GPU = re.compile(r"^GPU (\d+): (.*?)\s*\(UUID: ([^)]*)\)\s*$")
_LINK = re.compile(r"^\s*Link (\d+): (.*?)\s*$")


def parse_nvlink_status(text):
    """Return a list of ``{"index", "name", "uuid", "active", "inactive"}`` (link numbers), one per GPU printed."""
    gpus = []
    for line in text.splitlines():
        header = _GPU.match(line.strip())
        if header:
            gpus.append({"index": int(header.group(1)), "name": header.group(2), "uuid": header.group(3),
                         "active": [], "inactive": []})
            continue
        link = _LINK.match(line)
        if link and gpus:
            speed_known = "GB/s" in link.group(2)
            gpus[-1]["active" if speed_known else "inactive"].append(int(link.group(1)))
    return gpus
