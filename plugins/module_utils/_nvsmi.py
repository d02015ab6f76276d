# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Turn one ``nvidia-smi --query-gpu`` run into the driver state and typed GPU records.

Plain Python without Ansible imports: it runs on managed nodes (Python 3.8+) and is unit-tested directly.
"""

from __future__ import annotations

import re
from collections import namedtuple
from dataclasses import dataclass

QUERY_FIELDS = (
    "index",
    "uuid",
    "name",
    "pci.bus_id",
    "pci.device_id",
    "memory.total",
    "mig.mode.current",
    "mig.mode.pending",
    "persistence_mode",
    "driver_version",
)

# nvidia-smi keeps the unit in the header even with "nounits": "memory.total [MiB]".
_UNIT_SUFFIX = re.compile(r"\s*\[[^\]]*\]$")

_KnownCondition = namedtuple("_KnownCondition", "exit_code message driver_loaded status")

# Where nvidia-smi prints these (stdout or stderr) differs between releases, so both streams are searched.
# A message identifies the condition better than an exit code, so messages are tried first.
_KNOWN_CONDITIONS = (
    _KnownCondition(
        exit_code=9,
        message="couldn't communicate with the nvidia driver",
        driver_loaded=False,
        status="The NVIDIA driver is not loaded: nvidia-smi could not communicate with it.",
    ),
    _KnownCondition(
        exit_code=18,
        message="driver/library version mismatch",
        driver_loaded=False,
        status="The NVIDIA kernel driver and its user-space library differ in version, so the driver is unusable until it is reloaded or the host rebooted.",
    ),
    _KnownCondition(
        exit_code=12,
        message="couldn't find libnvidia-ml.so",
        driver_loaded=False,
        status="The NVIDIA management library libnvidia-ml.so cannot be found, so the driver is unusable.",
    ),
    _KnownCondition(
        exit_code=6,
        message="no devices were found",
        driver_loaded=True,
        status="The NVIDIA driver is loaded but nvidia-smi found no GPUs.",
    ),
)


class NvidiaSmiError(Exception):
    """nvidia-smi answered in a way that cannot be turned into a driver state; the message is one sentence."""


class MalformedOutputError(NvidiaSmiError):
    """nvidia-smi succeeded but did not print the CSV table that was asked for."""


class UnexpectedExitError(NvidiaSmiError):
    """nvidia-smi failed for a reason that is not a known driver condition."""


@dataclass(frozen=True)
class DriverState:
    """What one ``--query-gpu`` run says about the driver and its GPUs."""

    loaded: bool
    version: str | None
    gpus: list
    status: str


# Fields read only by callers that need them, in the same call: key in the GPU record -> query field.
OPTIONAL_FIELDS = {"pci_sub_device_id": "pci.sub_device_id"}


def query_gpu_argv(nvidia_smi, extra_fields=()):
    """Return the argv that reads every field of QUERY_FIELDS, then ``extra_fields``, for all GPUs in one call."""
    return [nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS + tuple(extra_fields)), "--format=csv,nounits"]


def missing_binary_state(nvidia_smi):
    """Return the state reported when the nvidia-smi binary itself is absent."""
    return DriverState(loaded=False, version=None, gpus=[], status=f"{nvidia_smi} was not found, so the NVIDIA driver is treated as not loaded.")


def read_driver_state(rc, stdout, stderr, extra_fields=()):
    """Return the DriverState for one run of query_gpu_argv(), or raise NvidiaSmiError."""
    condition = _known_condition(rc, stdout + "\n" + stderr)
    if condition is not None:
        return DriverState(loaded=condition.driver_loaded, version=None, gpus=[], status=condition.status)
    if rc != 0:
        raise UnexpectedExitError(f"nvidia-smi exited with code {rc}: {_first_line(stderr, stdout)}.")
    rows = parse_csv_table(stdout, required_columns=QUERY_FIELDS + tuple(extra_fields))
    return DriverState(
        loaded=True,
        version=rows[0]["driver_version"] if rows else None,
        gpus=[gpu_from_row(row) for row in rows],
        status=f"The NVIDIA driver is loaded and nvidia-smi lists {_count_of_gpus(len(rows))}.",
    )


def parse_csv_table(text, required_columns=()):
    """Return the rows of ``--format=csv`` output as dicts keyed by header name (units stripped).

    Warning lines and blank lines are skipped; bracketed values such as ``[N/A]`` become None.
    """
    lines = [line.strip() for line in text.splitlines()]
    lines = [line for line in lines if line and not line.startswith("Warning:")]
    if not lines:
        raise MalformedOutputError("nvidia-smi printed no CSV header.")
    header = [_UNIT_SUFFIX.sub("", cell) for cell in _split_csv_line(lines[0])]
    missing = [column for column in required_columns if column not in header]
    if missing:
        raise MalformedOutputError(f"nvidia-smi output lacks the column(s) {', '.join(missing)}.")
    return [_row_as_dict(header, line) for line in lines[1:]]


def gpu_from_row(row):
    """Return the typed GPU record for one row of parse_csv_table(..., QUERY_FIELDS)."""
    mig_mode_current = row["mig.mode.current"]
    optional = {key: row[field] for key, field in OPTIONAL_FIELDS.items() if field in row}
    return {
        "index": _as_int(row, "index"),
        "uuid": row["uuid"],
        "name": row["name"],
        "pci_bus_id": row["pci.bus_id"],
        "pci_device_id": row["pci.device_id"],
        "memory_total_mib": _as_int(row, "memory.total"),
        "mig_capable": mig_mode_current is not None,
        "mig_mode_current": mig_mode_current,
        "mig_mode_pending": row["mig.mode.pending"],
        "persistence_mode": row["persistence_mode"],
        **optional,
    }


def _known_condition(rc, output):
    lowered = output.lower()
    for condition in _KNOWN_CONDITIONS:
        if condition.message in lowered:
            return condition
    for condition in _KNOWN_CONDITIONS:
        if condition.exit_code == rc:
            return condition
    return None


def _split_csv_line(line):
    # nvidia-smi never quotes: values are joined with ", " and none of the queried fields contains a comma.
    return [cell.strip() for cell in line.split(",")]


def _row_as_dict(header, line):
    cells = _split_csv_line(line)
    if len(cells) != len(header):
        raise MalformedOutputError(f"nvidia-smi printed {len(cells)} values under a header of {len(header)} columns: {line!r}.")
    return {column: _value(cell) for column, cell in zip(header, cells)}


def _value(cell):
    # [N/A], [Not Supported], [Unknown Error] ...: nvidia-smi brackets every "no value" marker.
    if cell.startswith("[") and cell.endswith("]"):
        return None
    return cell


def _as_int(row, column):
    value = row[column]
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise MalformedOutputError(f"nvidia-smi printed {value!r} for {column}, which is not a whole number.") from None


def _first_line(*texts):
    for text in texts:
        for line in text.splitlines():
            if line.strip():
                return line.strip().rstrip(".")
    return "no output"


def _count_of_gpus(count):
    return f"{count} GPU" if count == 1 else f"{count} GPUs"
