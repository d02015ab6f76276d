# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Read the bandwidth of one perftest ``ib_write_bw`` client run (linux-rdma/perftest).

The table's header names its units: ``BW average[Gb/sec]`` with ``--report_gbits``, ``BW average[MB/sec]`` without
(perftest's MB is 2^20 bytes). Columns are found from the header, not by position. With ``-a`` there is one row per
message size; the largest size is the one that measures the link.
"""

from __future__ import annotations

import re

_HEADER = re.compile(r"#bytes")
_UNIT = re.compile(r"BW average\[(Gb|MB)/sec\]")
_DEVICE = re.compile(r"Device\s*:\s*(\S+)")
_LINK_TYPE = re.compile(r"Link type\s*:\s*(\S+)")


class PerftestError(Exception):
    """The output has no ib_write_bw result table; the message is one sentence."""


def parse_ib_write_bw(text):
    """Return ``{"device", "link_type", "bytes", "bw_average_gbps", "bw_peak_gbps"}`` for the largest message size."""
    lines = text.splitlines()
    header_at = next((number for number, line in enumerate(lines) if _HEADER.search(line)), None)
    if header_at is None:
        first = next((line.strip() for line in lines if line.strip()), "nothing")
        raise PerftestError(f"ib_write_bw printed no result table but: {first.rstrip('.')}.")
    header = lines[header_at]
    unit = _UNIT.search(header)
    columns = re.split(r"\s{2,}|\t+", header.strip())
    rows = [line.split() for line in lines[header_at + 1:] if re.match(r"^\s*\d", line)]
    if unit is None or not rows:
        raise PerftestError("ib_write_bw printed its table header but no result row.")
    average_at = next(index for index, name in enumerate(columns) if name.startswith("BW average"))
    peak_at = next((index for index, name in enumerate(columns) if name.startswith("BW peak")), None)
    row = max(rows, key=lambda cells: int(cells[0]))
    scale = 1.0 if unit.group(1) == "Gb" else 8 * 1048576 / 1e9
    device = _DEVICE.search(text)
    link_type = _LINK_TYPE.search(text)
    return {
        "device": device.group(1) if device else None,
        "link_type": link_type.group(1) if link_type else None,
        "bytes": int(row[0]),
        "bw_average_gbps": round(float(row[average_at]) * scale, 2),
        "bw_peak_gbps": round(float(row[peak_at]) * scale, 2) if peak_at is not None else None,
    }
