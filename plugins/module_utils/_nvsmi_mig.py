# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Talk MIG to ``nvidia-smi``: the commands, the parsers of their tables and messages, and a runner.

The tables (``mig -lgi``, ``-lci``, ``-lgip``) are read from their headers, not from character positions,
because their widths change between driver branches (R450, R525, R575/R580 layouts). Errors go to stdout or
stderr depending on the release, so both streams are read together.

Plain Python without Ansible imports: ``NvidiaSmi`` runs commands through any ``run(argv) -> (rc, stdout,
stderr)`` callable, which is ``module.run_command`` in the module and a fake in unit tests.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass

from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import driver_model, mig_model, parse_placements
from ansible_collections.onprem.gpu.plugins.module_utils._nvsmi import (
    NvidiaSmiError,
    parse_csv_table,
    query_gpu_argv,
    read_driver_state,
)

# What nvidia-smi prints instead of a table when there is nothing to list: not an error.
_NOTHING_TO_LIST = ("no gpu instances found", "no compute instances found", "no mig-enabled devices found", "no mig-supported devices found")

# Failure kinds, most specific first: a pending-mode warning and a refused reset also say "In use by another client".
MODE_PENDING = "the MIG mode change is pending"
RESET_NOT_SUPPORTED = "the GPU cannot be reset"
RESET_REFUSED = "the GPU reset was refused"
INSUFFICIENT_RESOURCES = "insufficient resources"
IN_USE = "in use by another client"
NO_PERMISSION = "insufficient permissions"
NOT_SUPPORTED = "not supported"
INVALID_ARGUMENT = "invalid argument"
_FAILURE_KINDS = (
    (MODE_PENDING, ("pending enable state", "pending disable state")),
    (RESET_NOT_SUPPORTED, ("is not supported.",)),
    (RESET_REFUSED, ("could not be reset",)),
    (INSUFFICIENT_RESOURCES, ("insufficient resources",)),
    (IN_USE, ("in use by another client", "currently being used", "currently in use")),
    (NO_PERMISSION, ("insufficient permissions",)),
    (NOT_SUPPORTED, ("not supported",)),
    (INVALID_ARGUMENT, ("invalid argument",)),
)

# nvidia-smi never says which client holds a GPU (its advice only lists examples: "e.g., Fabric Manager, CUDA
# application ..."), so the known ones are looked for among the host's processes, whose /proc/<pid>/comm the
# kernel cuts to 15 characters. They are the services mig-parted and the GPU Operator stop before a MIG change
# (mig-parted deployments/systemd/hooks.sh, gpu-operator's default-gpu-clients), plus Fabric Manager and Xorg.
_CLIENT_PROCESSES = (
    ("nvidia-persiste", "nvidia-persistenced"),
    ("nv-hostengine", "nv-hostengine (DCGM)"),
    ("nv-fabricmanage", "nv-fabricmanager (Fabric Manager)"),
    ("dcgm-exporter", "dcgm-exporter"),
    ("nvidia-device-p", "nvidia-device-plugin (the kubelet's GPU device plugin)"),
    ("gpu-feature-dis", "gpu-feature-discovery"),
    ("nvsm", "NVSM"),
    ("Xorg", "Xorg"),
)
PERSISTENCED = "nvidia-persistenced"
# Other processes hold a GPU when they have one of its device files open (what `fuser -v /dev/nvidia*` shows).
_DEVICE_FILES = "/dev/nvidia"

COMPUTE_APPS_FIELDS = ("pid", "process_name", "gpu_uuid")


class MigOutputError(NvidiaSmiError):
    """An nvidia-smi MIG listing could not be read; the message is one sentence."""


class MigCommandError(NvidiaSmiError):
    """An nvidia-smi call failed; carries the call and its output for the task result."""

    def __init__(self, argv, rc, stdout, stderr, message=None):
        self.argv, self.rc, self.stdout, self.stderr = argv, rc, stdout, stderr
        output = stdout + "\n" + stderr
        self.kind = failure_kind(output)
        super().__init__(message or f"{' '.join(argv[1:])} failed with exit code {rc}: {failure_line(output)}.")


@dataclass(frozen=True)
class ComputeInstance:
    ci_id: int
    profile_id: int
    name: str


@dataclass(frozen=True)
class GpuInstance:
    """A GPU instance as ``-lgi`` lists it, with the compute instances ``-lci`` lists in it."""

    gi_id: int
    profile_id: int
    name: str
    start: int
    size: int
    compute_instances: tuple = ()


@dataclass(frozen=True)
class GpuInstanceProfileRow:
    """One profile as ``-lgip`` lists it."""

    gpu: int
    name: str
    profile_id: int
    free: int
    total: int
    memory_gib: str


def parse_table(text):
    """Return ``[{column: value}]`` for the rows of a boxed nvidia-smi table, or [] when it lists nothing.

    Column names join the words stacked in the header (``Profile ID``, ``GPU Instance ID``); values are the
    whitespace-separated cells of each row's first line, with ``MIG <name>`` kept as one cell without ``MIG``.
    Continuation lines of a row (the CE/JPEG/OFA line of ``-lgip``) are not read.
    """
    if any(marker in text.lower() for marker in _NOTHING_TO_LIST):
        return []
    boxed = [line.strip() for line in text.splitlines() if line.strip().startswith(("|", "+"))]
    ruler = next((position for position, line in enumerate(boxed) if line.startswith("|=")), None)
    # Above the ruler: the top border, the title line, then at least one header line.
    if ruler is None or ruler < 3:
        raise MigOutputError(f"nvidia-smi printed no MIG table: {failure_line(text)}.")
    columns = _header_columns(boxed[2:ruler])
    rows = []
    in_row = False
    for line in boxed[ruler + 1 :]:
        if line.startswith("+"):
            in_row = False
            continue
        cells = _row_cells(line)
        if len(cells) == len(columns):
            rows.append(dict(zip(columns, cells)))
            in_row = True
        elif not in_row:
            raise MigOutputError(f"nvidia-smi printed a MIG table row with {len(cells)} cells under {len(columns)} columns: {line!r}.")
    return rows


def parse_gpu_instances(lgi_text, lci_text=""):
    """Return ``{gpu index: [GpuInstance]}`` from ``mig -lgi`` output and, when given, ``mig -lci`` output."""
    compute_instances = {}
    for row in parse_table(lci_text) if lci_text else []:
        key = (_int(row, "GPU"), _int(row, "GPU Instance ID"))
        compute_instances.setdefault(key, []).append(ComputeInstance(_int(row, "Instance ID"), _int(row, "Profile ID"), row["Name"]))
    instances = {}
    for row in parse_table(lgi_text):
        gpu, gi_id = _int(row, "GPU"), _int(row, "Instance ID")
        start, size = _placement(row)
        cis = tuple(sorted(compute_instances.get((gpu, gi_id), ()), key=lambda ci: ci.ci_id))
        instances.setdefault(gpu, []).append(GpuInstance(gi_id, _int(row, "Profile ID"), row["Name"], start, size, cis))
    return instances


def parse_gpu_instance_profiles(text):
    """Return the GpuInstanceProfileRows of ``mig -lgip`` output."""
    rows = []
    for row in parse_table(text):
        free, total = _cell(row, "Instances Free/Total").split("/")
        rows.append(GpuInstanceProfileRow(_int(row, "GPU"), row["Name"], _int(row, "ID"), int(free), int(total), _cell(row, "Memory GiB")))
    return rows


def parse_compute_apps(text):
    """Return ``[{pid, process_name, gpu_uuid}]`` from ``--query-compute-apps`` CSV output with a header."""
    if "no running processes found" in text.lower():
        return []
    rows = parse_csv_table(text, required_columns=COMPUTE_APPS_FIELDS)
    return [{"pid": int(row["pid"]), "process_name": row["process_name"], "gpu_uuid": row["gpu_uuid"]} for row in rows]


def failure_kind(output):
    """Return the kind of failure an nvidia-smi output reports (one of the constants above), or None."""
    lowered = output.lower()
    for kind, markers in _FAILURE_KINDS:
        if any(marker in lowered for marker in markers):
            return kind
    return None


def failure_line(output):
    """Return the line of an nvidia-smi output that says what went wrong, without its final period."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in lines:
        if line.startswith(("Unable to", "Failed to", "Warning:", "GPU ", "The following")) and "successfully" not in line:
            return line.rstrip(".")
    return lines[-1].rstrip(".") if lines else "no output"


def running_driver_clients(proc="/proc"):
    """Return what may hold the GPUs on this host, since nvidia-smi never names who blocks a GPU reset.

    Known services by process name, any other process with an NVIDIA device file open as ``PID <pid> (<name>)``
    (reading other processes' file descriptors needs root, as the module's changes do), and the nvidia_drm module.
    """
    found = []
    for directory in sorted(glob.glob(os.path.join(proc, "[0-9]*")), key=_pid_order):
        try:
            with open(os.path.join(directory, "comm"), encoding="utf-8") as stream:
                name = stream.read().strip()
        except OSError:
            continue  # the process ended while we looked
        labels = [label for prefix, label in _CLIENT_PROCESSES if name.startswith(prefix)]
        if not labels and _holds_device_file(directory):
            labels = [f"PID {os.path.basename(directory)} ({name})"]
        found.extend(label for label in labels if label not in found)
    try:
        with open(os.path.join(proc, "modules"), encoding="utf-8") as stream:
            if any(line.startswith("nvidia_drm ") for line in stream):
                found.append("the nvidia_drm kernel module")
    except OSError:
        pass  # no /proc/modules: nothing to add
    return found


def reset_refusals(output):
    """Return ``{bus id (upper case): reason}`` for the GPUs a refused ``nvidia-smi -r`` lists as not reset."""
    refused = {}
    for line in output.splitlines():
        match = re.match(r"^\s+GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]):\s*(.+?)\s*$", line)
        if match:
            refused[match.group(1).upper()] = match.group(2).rstrip(".")
    return refused


def _pid_order(directory):
    name = os.path.basename(directory)
    return int(name) if name.isdigit() else -1


def _holds_device_file(directory):
    try:
        descriptors = os.listdir(os.path.join(directory, "fd"))
    except OSError:
        return False  # not ours to read, or gone
    for descriptor in descriptors:
        try:
            if os.readlink(os.path.join(directory, "fd", descriptor)).startswith(_DEVICE_FILES):
                return True
        except OSError:
            continue
    return False


class NvidiaSmi:
    """Run nvidia-smi for MIG: every read and change the module makes goes through here."""

    def __init__(self, binary, run, proc="/proc"):
        self.binary = binary
        self._run = run
        self._proc = proc

    def driver_clients(self):
        return running_driver_clients(self._proc)

    def read_gpus(self, extra_fields=()):
        """Return the GPU records of ``_nvsmi.read_driver_state``; raise NvidiaSmiError when the driver is unusable."""
        argv = query_gpu_argv(self.binary, extra_fields)
        rc, stdout, stderr = self._run(argv)
        try:
            state = read_driver_state(rc, stdout, stderr, extra_fields)
        except NvidiaSmiError as error:
            raise MigCommandError(argv, rc, stdout, stderr, message=str(error)) from None
        if not state.loaded:
            raise MigCommandError(argv, rc, stdout, stderr, message=state.status)
        return state.gpus

    def read_node(self, gpus=None, extra_fields=()):
        """Return (GPU records, ``{index: [GpuInstance]}``): ``--query-gpu`` unless ``gpus`` is given, then ``-lgi``/``-lci``
        for all GPUs at once, skipped when no GPU has MIG mode in effect."""
        gpus = self.read_gpus(extra_fields) if gpus is None else gpus
        return gpus, self.read_instances() if any(gpu["mig_mode_current"] == "Enabled" for gpu in gpus) else {}

    def read_instances(self, index=None):
        """Return ``{gpu index: [GpuInstance]}`` from one ``-lgi`` and, when there are GIs, one ``-lci`` call."""
        lgi, listed = self._read(["mig", "-lgi"], index, parse_gpu_instances)
        if not listed:
            return {}
        dummy, instances = self._read(["mig", "-lci"], index, lambda lci: parse_gpu_instances(lgi, lci))
        return instances

    def read_profiles(self, gpus):
        """Return ``{gpu index: MigModel}`` as the driver describes each GPU: one ``-lgip`` and one ``-lgipp`` for all GPUs.

        GPUs the driver lists no profile for are left out: drivers before R550 list them only while MIG mode is on.
        """
        dummy, rows = self._read(["mig", "-lgip"], None, parse_gpu_instance_profiles)
        if not rows:
            return {}
        dummy, placements = self._read(["mig", "-lgipp"], None, parse_placements)
        names = {gpu["index"]: gpu["name"] for gpu in gpus}
        models = {}
        for index in sorted({row.gpu for row in rows}):
            own = {profile_id: placement for (gpu, profile_id), placement in placements.items() if gpu == index}
            model = driver_model(names.get(index), [row for row in rows if row.gpu == index], own, mig_model(names.get(index)))
            if model is not None:
                models[index] = model
        return models

    def compute_apps(self):
        dummy, apps = self._read(["--query-compute-apps=" + ",".join(COMPUTE_APPS_FIELDS), "--format=csv"], None, parse_compute_apps)
        return apps

    def set_mig_mode(self, index, enabled):
        """Request MIG mode on one GPU; return the output, which warns (exit 0) when the change waits for a reset."""
        return self._check([self.binary, "-i", str(index), "-mig", "1" if enabled else "0"])

    def set_persistence_mode(self, indices, enabled):
        """Turn persistence mode on or off on GPUs in one call."""
        return self._check([self.binary, "-i", ",".join(str(index) for index in indices), "-pm", "1" if enabled else "0"])

    def reset(self, indices):
        """Reset GPUs in one call, as mig-parted does; return (succeeded, output): a refused reset is a state to report."""
        rc, stdout, stderr = self._run([self.binary, "-r", "-i", ",".join(str(index) for index in indices)])
        return rc == 0, stdout + "\n" + stderr

    def destroy(self, index, instances):
        """Destroy GPU instances: first the compute instances in them (one call), then the GIs (one call)."""
        gi_list = ",".join(str(instance.gi_id) for instance in instances)
        if any(instance.compute_instances for instance in instances):
            self._check([self.binary, "mig", "-dci", "-gi", gi_list, "-i", str(index)])
        self._check([self.binary, "mig", "-dgi", "-gi", gi_list, "-i", str(index)])

    def create(self, index, placements):
        """Create GPU instances at explicit ``(profile_id, start)`` placements, each with its default compute instance."""
        items = ",".join(f"{profile_id}:{start}" for profile_id, start in placements)
        self._check([self.binary, "mig", "-cgi", items, "-C", "-i", str(index)])

    def create_compute_instances(self, index, gi_ids):
        """Create the default compute instance in GPU instances that have none."""
        self._check([self.binary, "mig", "-cci", "-gi", ",".join(str(gi_id) for gi_id in gi_ids), "-i", str(index)])

    def _read(self, arguments, index, parse):
        """Run a listing; return its output and what ``parse`` makes of it, or raise MigCommandError."""
        argv = [self.binary] + arguments + ([] if index is None else ["-i", str(index)])
        rc, stdout, stderr = self._run(argv)
        output = stdout + "\n" + stderr
        if rc != 0 and not any(marker in output.lower() for marker in _NOTHING_TO_LIST):
            raise MigCommandError(argv, rc, stdout, stderr)
        try:
            return output, parse(output)
        except NvidiaSmiError as error:
            raise MigCommandError(argv, rc, stdout, stderr, message=str(error)) from None

    def _check(self, argv):
        rc, stdout, stderr = self._run(argv)
        # A partly failed batch may still exit 0 on some releases; its "Unable to"/"Failed to" lines tell.
        if rc != 0 or re.search(r"^(Unable to|Failed to)", stdout + "\n" + stderr, re.MULTILINE):
            raise MigCommandError(argv, rc, stdout, stderr)
        return stdout + "\n" + stderr


def _header_columns(header_lines):
    """Name each column after the words stacked in it; a lower word joins the top word whose centre is nearest."""
    top = [(match.start() + len(match.group()) / 2, [match.group()]) for match in re.finditer(r"\S+", header_lines[0]) if match.group() != "|"]
    for line in header_lines[1:]:
        for match in re.finditer(r"\S+", line):
            if match.group() == "|":
                continue
            centre = match.start() + len(match.group()) / 2
            min(top, key=lambda column: abs(column[0] - centre))[1].append(match.group())
    return [" ".join(words) for dummy, words in top]


def _row_cells(line):
    cells = line.strip("|").split()
    joined = []
    for cell in cells:
        if joined and joined[-1] == "MIG":
            joined[-1] = cell
        else:
            joined.append(cell)
    return joined


def _cell(row, column):
    if column not in row:
        raise MigOutputError(f"nvidia-smi printed a MIG table without the column {column!r}.")
    return row[column]


def _int(row, column):
    value = _cell(row, column).rstrip("*")
    try:
        return int(value)
    except ValueError:
        raise MigOutputError(f"nvidia-smi printed {value!r} for {column}, which is not a whole number.") from None


def _placement(row):
    start, dummy, size = _cell(row, "Placement Start:Size").partition(":")
    try:
        return int(start), int(size)
    except ValueError:
        raise MigOutputError(f"nvidia-smi printed the placement {row['Placement Start:Size']!r}, which is not start:size.") from None
