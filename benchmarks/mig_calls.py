#!/usr/bin/env python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Count what onprem.gpu.mig_config costs on an 8-GPU node, next to mig-parted's wipe-and-recreate.

The module's real main() runs against the lab's nvidia-smi double, whose call log gives the nvidia-smi
invocations (total and mutating) and the GPU instances destroyed (-dgi) and created (-cgi). mig-parted's figures
are computed from its algorithm (NVIDIA/mig-parted cmd/nvidia-mig-parted/apply/apply.go and
pkg/mig/config/config.go, SetMigConfig): on every GPU whose MIG devices differ it
destroys all compute and GPU instances and creates the whole layout again, one NVML call per instance and
compute instance, and on a mode change it calls SetMigMode on every GPU of the config. It runs no nvidia-smi
for that (it uses NVML), except ``nvidia-smi -r`` when an Ampere mode change is pending.

Run from the repository root: ``.venv/bin/python benchmarks/mig_calls.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
COLLECTIONS = REPOSITORY / ".build" / "collections"
DOUBLE = REPOSITORY / "lab" / "doubles" / "nvidia_smi" / "nvidia-smi"
GPU_MODEL = "NVIDIA H100 80GB HBM3"
GPU_COUNT = 8

LAYOUTS = {
    "all-disabled": None,
    "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "inference-4x1g-3g": {"1g.10gb": 4, "3g.40gb": 1},
    "all-1g.10gb": {"1g.10gb": 7},
    "all-7g.80gb": {"7g.80gb": 1},
}
ROW = "{:52} | {:>5} {:>8} {:>13} {:>11} | {:>13} {:>11} {:>12}"
# (title, layout before, layout after); the first run of each sets the node up and is not counted.
TRANSITIONS = [
    ("enable MIG: all-disabled -> all-balanced", "all-disabled", "all-balanced"),
    ("re-partition: all-balanced -> 4x 1g.10gb + 3g.40gb", "all-balanced", "inference-4x1g-3g"),
    ("re-partition: all-balanced -> all-1g.10gb", "all-balanced", "all-1g.10gb"),
    ("whole GPUs: all-balanced -> all-7g.80gb", "all-balanced", "all-7g.80gb"),
    ("no-op: all-balanced -> all-balanced", "all-balanced", "all-balanced"),
]


def mig_configs():
    configs = {}
    for name, devices in LAYOUTS.items():
        entry = {"devices": "all", "mig-enabled": devices is not None}
        if devices is not None:
            entry["mig-devices"] = devices
        configs[name] = [entry]
    return configs


class Lab:
    """A simulated node in a temporary directory, and the module run against it."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.call_log = self.directory / "calls.jsonl"
        (self.directory / "hardware.json").write_text(json.dumps({"gpu_model": GPU_MODEL, "gpu_count": GPU_COUNT, "seed": "bench"}))
        (self.directory / "driver.json").write_text(json.dumps({"driver_version": "580.65.06", "cuda_version": "13.0"}))
        os.environ.update(
            NVSMI_DOUBLE_HARDWARE=str(self.directory / "hardware.json"),
            NVSMI_DOUBLE_DRIVER=str(self.directory / "driver.json"),
            NVSMI_DOUBLE_STATE=str(self.directory / "state.json"),
            NVSMI_DOUBLE_CALL_LOG=str(self.call_log),
        )

    def apply(self, layout):
        """Run the module; return its result and the calls it made, one dict per nvidia-smi invocation."""
        from ansible.module_utils.testing import patch_module_args
        from ansible_collections.onprem.gpu.plugins.modules import mig_config

        self.call_log.write_text("")
        stdout = io.StringIO()
        with patch_module_args({"selected": layout, "mig_configs": mig_configs(), "nvidia_smi": str(DOUBLE)}), contextlib.redirect_stdout(stdout):
            with contextlib.suppress(SystemExit):
                mig_config.main()
        result = json.loads(stdout.getvalue())
        if result.get("failed"):
            raise SystemExit(f"mig_config failed on {layout}: {result['msg']}")
        return result, [json.loads(line) for line in self.call_log.read_text().splitlines()]


def listed_items(argv, option):
    """The number of comma-separated items after ``option`` in an argv, 0 when absent."""
    return len(argv[argv.index(option) + 1].split(",")) if option in argv else 0


def module_figures(calls):
    mutating = [call["argv"] for call in calls if call["mutating"]]
    destroyed = sum(listed_items(argv, "-gi") for argv in mutating if "-dgi" in argv)
    created = sum(listed_items(argv, "-cgi") for argv in mutating if "-cgi" in argv)
    return len(calls), len(mutating), destroyed, created


def mig_parted_figures(before, after):
    """Instances destroyed and created, and mutating NVML calls, of mig-parted's apply for the same transition."""
    destroyed = created = nvml_calls = 0
    mode_changes = any(old["mig_enabled"] != new["mig_enabled"] for old, new in zip(before, after))
    for old, new in zip(before, after):
        if mode_changes:
            nvml_calls += 1  # ApplyMigMode calls SetMigMode on every GPU of the config once any mode differs
        if old["mig_devices"] != new["mig_devices"] or old["mig_enabled"] != new["mig_enabled"]:
            old_instances, new_instances = sum(old["mig_devices"].values()), sum(new["mig_devices"].values())
            destroyed += old_instances
            created += new_instances
            nvml_calls += 2 * old_instances + 2 * new_instances  # one compute and one GPU instance each
    return destroyed, created, nvml_calls


def main():
    if not (COLLECTIONS / "ansible_collections" / "onprem" / "gpu").exists():
        raise SystemExit("The collection is not linked under .build/collections yet: run `make venv` (or the unit tests) first.")
    sys.path.insert(0, str(COLLECTIONS))
    print(f"{GPU_COUNT} x {GPU_MODEL}, lab nvidia-smi double; mig-parted figures computed from its algorithm (NVIDIA/mig-parted pkg/mig/config)\n")
    header = ROW.format("transition", "calls", "mutating", "GIs destroyed", "GIs created", "GIs destroyed", "GIs created", "NVML changes")
    print(f"{'':52} | {'onprem.gpu.mig_config':^41} | {'mig-parted apply':^39}")
    print(header)
    print("-" * len(header))
    for title, start, target in TRANSITIONS:
        with tempfile.TemporaryDirectory(prefix="mig-bench-") as directory:
            lab = Lab(directory)
            before, dummy = lab.apply(start)
            after, calls = lab.apply(target)
        total, mutating, destroyed, created = module_figures(calls)
        parted_destroyed, parted_created, parted_calls = mig_parted_figures(before["gpus"], after["gpus"])
        print(ROW.format(title, total, mutating, destroyed, created, parted_destroyed, parted_created, parted_calls))
    print("\ncalls: nvidia-smi invocations; mutating: those that change the GPUs. mig-parted runs no nvidia-smi on Hopper.")


if __name__ == "__main__":
    main()
