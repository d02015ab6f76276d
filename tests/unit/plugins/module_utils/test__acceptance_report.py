# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The acceptance report: failing nodes first, every finding with where it is and its action, the rail chart, JUnit."""

from __future__ import annotations

import json
import sys
from xml.etree import ElementTree
from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._acceptance_report import rail_chart, report_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chart_samples import layout_problems  # noqa: E402

RUN = {"started": "2026-12-05T02:30:00Z", "check_mode": False, "dcgm_diag_level": 3}


def rail(device, average, rate=400):
    return {"device": device, "rate_gbps": rate, "min_gbps": rate * 0.9, "average_gbps": average, "peak_gbps": average,
            "error": None if average is not None else "ib_write_bw printed no result table but: Port number 1 state is Down."}


def finding(code, action, check, gpu_index=None, pci_bus_id=None, device=None, xid=None, severity="fail"):
    return {"code": code, "pci_bus_id": pci_bus_id, "gpu_index": gpu_index, "device": device, "xid": xid, "severity": severity,
            "action": action, "message": f"{code} | with a pipe.", "check": check}


def node(host, verdict, findings=(), rails=(), datacenter="dc1", code=None):
    return {"host": host, "node": host, "datacenter": datacenter, "verdict": verdict, "code": code, "findings": list(findings),
            "rails": list(rails), "peer": "dc1-gpu9" if rails else None,
            "nccl": {"verdict": "pass", "judged_busbw": 478.5, "peak_busbw": 478.5, "threshold": 384.0, "expected": 480.0,
                     "transport": None, "reasons": []},
            "nvme": {"mount": "/raid", "device": "/dev/md127", "mbps": 498.9, "expected_mbps": 100.0, "min_mbps": 80.0,
                     "bytes": 67108864, "seconds": 0.1345},
            "skipped": []}


RECORDS = [
    node("dc1-gpu1", "passed", rails=[rail(f"mlx5_{index}", 388.0) for index in range(8)]),
    node("dc1-gpu2", "failed", [finding("xid", "reboot", "health", 3, "00000000:5D:00.0", xid=79),
                                finding("rdma_bandwidth", "drain", "rails", device="mlx5_5")],
         [rail(f"mlx5_{index}", 97.0 if index == 5 else 388.0) for index in range(8)], code="xid"),
    node("dc2-gpu1", "passed", [finding("rdma_no_peer", "none", "rails", severity="warn")], datacenter="dc2"),
]


def test_the_markdown_puts_failing_nodes_first_with_each_finding_and_its_action():
    text = report_files(RECORDS, RUN)["acceptance.md"]
    assert text.startswith("# Acceptance: FAIL\n")
    assert "2 of 3 nodes passed; failed: dc1-gpu2." in text
    sections = [line for line in text.splitlines() if line.startswith("## ")]
    assert sections == ["## dc1-gpu2: failed", "## dc1-gpu1: passed", "## dc2-gpu1: passed"]
    assert "| fail | health | xid | GPU 3 (00000000:5D:00.0), Xid 79 | reboot | xid \\| with a pipe. |" in text
    assert "| fail | rails | rdma_bandwidth | mlx5_5 | drain |" in text
    assert "| dc1-gpu2 | dc1 | failed | onprem.gpu/unhealthy=xid:NoSchedule | 2 |" in text
    assert "| mlx5_5 | 97.0 | 400 | 360 |" in text
    assert "- NVMe cache /dev/md127 at /raid: sequential read 498.9 MB/s (at least 80 of 100 MB/s expected)" in text


def test_the_html_page_has_the_same_sections_and_the_chart_inline():
    files = report_files(RECORDS, RUN)
    page = files["acceptance.html"]
    assert page.index("dc1-gpu2: failed") < page.index("dc1-gpu1: passed")
    assert files["rails.svg"] in page and "xid | with a pipe." in page and "<script" not in page


def test_junit_has_a_suite_per_node_and_a_failure_per_failing_check():
    root = ElementTree.fromstring(report_files(RECORDS, RUN)["junit.xml"])
    suites = {suite.get("name"): suite for suite in root}
    assert list(suites) == ["dc1-gpu2", "dc1-gpu1", "dc2-gpu1"]
    failures = {case.get("name"): case.find("failure").get("type") for case in suites["dc1-gpu2"] if case.find("failure") is not None}
    assert failures == {"node_health": "xid", "RDMA rails (ib_write_bw)": "rdma_bandwidth"}
    assert suites["dc1-gpu1"].get("failures") == "0" and suites["dc1-gpu1"].get("tests") == "4"


def test_the_json_holds_the_run_and_every_node():
    data = json.loads(report_files(RECORDS, RUN)["acceptance.json"])
    assert data["run"] == RUN and [entry["host"] for entry in data["nodes"]] == ["dc1-gpu2", "dc1-gpu1", "dc2-gpu1"]


def test_the_rail_chart_draws_every_rail_against_its_line_rate_without_overlaps():
    chart = rail_chart(RECORDS)
    assert layout_problems(chart) == []
    assert chart.count("<rect x=") - chart.count('width="18" height="11"') == 16 + 1  # 16 bars and the frame
    assert "97 FAIL" in chart and chart.count('stroke-dasharray="4 3"') == 16 + 1  # a line rate per rail and the legend's
    ElementTree.fromstring(chart)


def test_no_chart_without_a_measured_rail_and_a_report_needs_a_node():
    files = report_files([RECORDS[2]], dict(RUN, check_mode=True, dcgm_diag_level=None))
    assert "rails.svg" not in files and "rails.svg" not in files["acceptance.md"]
    assert "in check mode (read-only checks only, no label written); no DCGM diagnostics." in files["acceptance.md"]
    with pytest.raises(ValueError, match="at least one node"):
        report_files([], RUN)
