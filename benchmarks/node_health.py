#!/usr/bin/env python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Time onprem.gpu.node_health's main() judging the recorded outputs of an 8-GPU node.

The node is built from real recordings (tests/unit/fixtures/node_health): the A100-SXM4-80GB ``nvidia-smi -q -x``
GPU element repeated on eight bus ids, its ``nvlink -s`` GPU repeated eight times, a kernel log of the real Xid and
SXid lines padded with 5000 unrelated kernel lines, the DCGM diagnostic document and eight ``ib_write_bw`` runs.
Prints the median and worst of 50 runs of the whole module (argument parsing, every check, JSON result).

Run from the repository root: ``.venv/bin/python benchmarks/node_health.py``.
"""

from __future__ import annotations

import contextlib
import io
import re
import statistics
import sys
import time
from pathlib import Path
from unittest import mock

REPOSITORY = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPOSITORY / ".build" / "collections"))

from ansible.module_utils.testing import patch_module_args  # noqa: E402

from ansible_collections.onprem.gpu.plugins.modules import node_health  # noqa: E402

FIXTURES = REPOSITORY / "tests" / "unit" / "fixtures" / "node_health"
BUSES = ("18", "2A", "3A", "5D", "9A", "AB", "BA", "DB")


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def eight_gpu_outputs():
    report = fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml")
    gpu = re.search(r"(\s*<gpu id=.*?</gpu>)", report, re.S).group(1)
    gpus = "".join(gpu.replace("00000000:01:00.0", f"00000000:{bus}:00.0").replace(
        "<pci_bus>01</pci_bus>", f"<pci_bus>{bus}</pci_bus>") for bus in BUSES)
    report = report.replace(gpu, gpus).replace("<attached_gpus>4</attached_gpus>", "<attached_gpus>8</attached_gpus>")
    links = fixture("nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt").split("GPU 1:")[0]
    nvlink = "".join(links.replace("GPU 0:", f"GPU {index}:") for index in range(8))
    noise = "".join(f"[{index}.000000] mlx5_core 0000:ab:00.0 mlx5_5: Port: 1 Link ACTIVE\n" for index in range(5000))
    kernel = noise + "".join(fixture(name) for name in (
        "kernel_log__dmesg_T__xid13_xid109__gpud_pr46.txt", "kernel_log__dmesg__sxid22013_nonfatal__nvtrust_124.txt",
        "kernel_log__journalctl__xid45_after_xid149_145__ogkm_1150.txt"))
    rails = {f"mlx5_{index}": fixture("ib_write_bw__ndr400_8mib__synthetic.txt") for index in range(8)}
    return {"nvidia_smi_q_xml": report, "nvlink_status": nvlink, "kernel_log": kernel,
            "dcgm_diag_json": fixture("dcgm_diag_j__nvvs_1_7_per_gpu__dcgm_testdata.json"), "ib_write_bw": rails}


def run_once(args):
    with patch_module_args(args), contextlib.redirect_stdout(io.StringIO()) as out, mock.patch("sys.exit"):
        node_health.main()
    return out.getvalue()


def main():
    args = {
        "expected": {"gpu_count": 8, "gpu_model": "NVIDIA A100-SXM4-80GB",
                     "rails": [{"device": f"mlx5_{index}", "rate_gbps": 400} for index in range(8)]},
        "checks": ["gpus", "pcie", "ecc", "remapped_rows", "nvlink", "xid", "clocks", "dcgm_diag", "rdma_bandwidth"],
        "outputs": eight_gpu_outputs(),
    }
    durations = []
    for dummy in range(50):
        started = time.perf_counter()
        run_once(args)
        durations.append(time.perf_counter() - started)
    print(f"node_health on the recorded outputs of an 8-GPU node: median {statistics.median(durations) * 1000:.1f} ms, "
          f"worst {max(durations) * 1000:.1f} ms over {len(durations)} runs")


if __name__ == "__main__":
    main()
