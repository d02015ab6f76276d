# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Acceptance: a node's verdict from every check, the Node patch it writes, and kube_node's acceptance-pending taint."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._acceptance import (
    AcceptanceError,
    node_patch,
    node_record,
    parse_dd,
)
from ansible_collections.onprem.gpu.plugins.module_utils._kube_node import acceptance_pending_patch
from ansible_collections.onprem.gpu.plugins.module_utils._node_health import judge, resolve_expected

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "node_health"
HEALTHY_RAIL = (FIXTURES / "ib_write_bw__ndr400_8mib__synthetic.txt").read_text(encoding="utf-8")
# The same run on a link trained at 100G (the average and peak of a quarter of the line rate).
SLOW_RAIL = HEALTHY_RAIL.replace("392.51             392.47", " 97.12              97.01")
EXPECTED = {"gpu_count": 8, "gpu_model": "NVIDIA H100 80GB HBM3"}
RAILS = [{"device": "mlx5_0", "rate_gbps": 400, "min_gbps": 360.0}, {"device": "mlx5_1", "rate_gbps": 400, "min_gbps": 360.0}]
# GNU coreutils 9.1 dd (Debian 12), iflag=direct, as it prints on stderr.
DD_OUTPUT = "4+0 records in\n4+0 records out\n67108864 bytes (67 MB, 64 MiB) copied, 0.134512 s, 499 MB/s\n"
DD_OLD = "64+0 records in\n64+0 records out\n67108864 bytes (67 MB) copied, 0.5 seconds, 134 MB/s\n"
XID79 = {"code": "xid", "pci_bus_id": "00000000:5D:00.0", "gpu_index": 3, "device": None, "xid": 79, "severity": "fail",
         "action": "reboot", "message": "GPU 3 logged Xid 79."}
PCIE = {"code": "pcie_degraded", "pci_bus_id": "00000000:3A:00.0", "gpu_index": 2, "device": None, "xid": None,
        "severity": "fail", "action": "drain", "message": "GPU 2 runs at x8."}
WARN = {"code": "xid", "pci_bus_id": "00000000:18:00.0", "gpu_index": 0, "device": None, "xid": 13, "severity": "warn",
        "action": "restart_app", "message": "GPU 0 logged Xid 13."}


def health(*findings):
    failed = any(entry["severity"] == "fail" for entry in findings)
    return {"healthy": not failed, "state": "unhealthy" if failed else "healthy", "reason": None, "findings": list(findings),
            "skipped_checks": []}


def rails(outputs, peer="dc1-gpu2"):
    """The rails' inputs, judged by node_health itself as the role does."""
    judged = judge(resolve_expected(dict(EXPECTED, rails=RAILS)), ["rdma_bandwidth"], {"ib_write_bw": outputs})
    return {"expected": RAILS, "outputs": outputs, "peer": peer, "datacenter": "dc1", "health": judged}


def nvme(output=DD_OUTPUT, expected=100, device="/dev/md127", declared=True, rc=0):
    return {"declared": declared, "mount": "/raid", "device": device, "output": output, "rc": rc, "expected_mbps": expected,
            "efficiency": 0.8}


NCCL_PASS = {"verdict": "pass", "judged_busbw": 478.5, "peak_busbw": 478.5, "threshold": 384.0, "expected": 480.0,
             "transport": None, "reasons": []}


def record(**inputs):
    return node_record(dict({"host": "dc1-gpu1", "datacenter": "dc1"}, **inputs))


def test_a_healthy_node_passes_with_its_figures():
    result = record(health=health(WARN), rails=rails({"mlx5_0": HEALTHY_RAIL, "mlx5_1": HEALTHY_RAIL}), nccl=NCCL_PASS, nvme=nvme())
    assert result["verdict"] == "passed" and result["code"] is None
    assert [(rail["device"], rail["average_gbps"], rail["min_gbps"]) for rail in result["rails"]] == [
        ("mlx5_0", 392.47, 360.0), ("mlx5_1", 392.47, 360.0)]
    assert result["nvme"]["mbps"] == 498.9 and result["nvme"]["min_mbps"] == 80.0
    assert result["nccl"]["judged_busbw"] == 478.5
    # A warning stays in the report without failing the node.
    assert [entry["code"] for entry in result["findings"]] == ["xid"]


def test_failing_findings_come_first_and_the_most_severe_names_the_taint():
    result = record(health=health(WARN, PCIE, XID79), rails=rails({"mlx5_0": HEALTHY_RAIL, "mlx5_1": SLOW_RAIL}))
    assert result["verdict"] == "failed"
    assert [(entry["code"], entry["action"], entry["check"]) for entry in result["findings"]] == [
        ("xid", "reboot", "health"), ("pcie_degraded", "drain", "health"), ("rdma_bandwidth", "drain", "rails"), ("xid", "restart_app", "health")]
    assert result["code"] == "xid"
    rail = result["findings"][2]
    assert rail["device"] == "mlx5_1" and "97.01 Gb/s" in rail["message"] and "server on dc1-gpu2" in rail["message"]
    assert [rail["average_gbps"] for rail in result["rails"]] == [392.47, 97.01]


def test_a_rail_that_printed_no_table_fails_the_node():
    result = record(health=health(), rails=rails({"mlx5_0": HEALTHY_RAIL, "mlx5_1": " Port number 1 state is Down\n"}))
    assert result["code"] == "rdma_bandwidth"
    assert result["rails"][1]["average_gbps"] is None and "Port number 1 state is Down" in result["rails"][1]["error"]


def test_a_node_alone_in_its_datacenter_warns_that_its_rails_were_not_measured():
    result = record(health=health(), rails={"expected": RAILS, "outputs": {}, "peer": None, "datacenter": "dc2", "health": None})
    assert result["verdict"] == "passed"
    assert [(entry["code"], entry["severity"]) for entry in result["findings"]] == [("rdma_no_peer", "warn")]
    assert "datacenter dc2" in result["findings"][0]["message"] and result["rails"] == []


def test_gpus_that_cannot_be_read_fail_the_node():
    unknown = {"healthy": None, "state": "unknown", "reason": "nvidia-smi did not answer within 60 seconds.", "findings": [],
               "skipped_checks": [{"check": "pcie", "reason": "nvidia-smi did not answer within 60 seconds."}]}
    result = record(health=unknown)
    assert result["code"] == "gpus_unreadable" and "did not answer" in result["findings"][0]["message"]
    assert result["skipped"] == [{"check": "health/pcie", "reason": "nvidia-smi did not answer within 60 seconds."}]


def test_the_nccl_run_below_its_threshold_fails_the_node():
    run = dict(NCCL_PASS, verdict="fail", judged_busbw=200.1, reasons=["busbw 200.1 GB/s is below 384.0 GB/s."])
    result = record(health=health(), nccl=run)
    assert result["code"] == "nccl_allreduce"
    assert "busbw 200.1 GB/s is below 384.0 GB/s (threshold 384.0 GB/s busbw)" in result["findings"][0]["message"]


@pytest.mark.parametrize("cache, code", [
    (nvme(expected=1000), "nvme_read"),
    (nvme(output="dd: failed to open '/dev/md127': No such file or directory\n", rc=1), "nvme_read"),
    (nvme(device="", output=""), "nvme_cache_missing"),
])
def test_the_nvme_cache_fails_below_its_expectation_on_error_or_when_missing(cache, code):
    result = record(health=health(), nvme=cache)
    assert [(entry["code"], entry["action"]) for entry in result["findings"]] == [(code, "drain")]


def test_the_nvme_read_is_reported_but_not_judged_without_an_expectation_or_a_cache():
    assert record(health=health(), nvme=nvme(expected=0))["verdict"] == "passed"
    result = record(health=health(), nvme=nvme(device="", output="", declared=False))
    assert result["verdict"] == "passed" and result["nvme"]["mbps"] is None


def test_dd_summaries_old_and_new():
    assert parse_dd(DD_OUTPUT) == (67108864, 0.134512)
    assert parse_dd(DD_OLD) == (67108864, 0.5)
    with pytest.raises(AcceptanceError, match="dd printed no summary but: dd: invalid number"):
        parse_dd("dd: invalid number: '0x'\n")


def test_a_record_needs_its_host_and_node_health_results():
    with pytest.raises(AcceptanceError, match="need at least its host"):
        node_record({"datacenter": "dc1"})
    with pytest.raises(AcceptanceError, match="not what onprem.gpu.node_health returns"):
        record(health={"findings": []})


NODE = {"metadata": {"name": "dc1-gpu1", "labels": {"onprem.gpu/pool": "training"}, "annotations": {}},
        "spec": {"taints": [{"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}]}}
WHEN = "2026-12-05T02:30:00Z"


def node(labels=None, annotations=None, taints=()):
    return {"metadata": {"name": "dc1-gpu1", "labels": dict(NODE["metadata"]["labels"], **(labels or {})),
                         "annotations": dict(annotations or {})},
            "spec": {"taints": NODE["spec"]["taints"] + list(taints)}}


def unhealthy(value):
    return {"key": "onprem.gpu/unhealthy", "value": value, "effect": "NoSchedule"}


PASSED = {"verdict": "passed", "code": None}
FAILED = {"verdict": "failed", "code": "xid"}


def test_a_failed_node_is_labelled_dated_and_tainted_with_its_code_others_taints_kept():
    patch = node_patch(node(), FAILED, WHEN)
    assert patch == {
        "metadata": {"labels": {"onprem.gpu/acceptance": "failed"},
                     "annotations": {"onprem.gpu/acceptance-date": WHEN, "onprem.gpu/unhealthy-owner": "acceptance"}},
        "spec": {"taints": NODE["spec"]["taints"] + [unhealthy("xid")]},
    }


def test_acceptance_replaces_its_own_taint_and_its_pending_one():
    owned = {"onprem.gpu/unhealthy-owner": "acceptance", "onprem.gpu/acceptance-date": "2026-12-01T00:00:00Z"}
    patch = node_patch(node({"onprem.gpu/acceptance": "failed"}, owned, [unhealthy("acceptance-pending")]), FAILED, WHEN)
    # Failed before: the date of that verdict stays; the taint takes the new code.
    assert patch == {"spec": {"taints": NODE["spec"]["taints"] + [unhealthy("xid")]}}


def test_another_owners_taint_is_never_touched():
    theirs = node(annotations={"onprem.gpu/unhealthy-owner": "node-health"}, taints=[unhealthy("ecc_uncorrected")])
    assert "spec" not in node_patch(theirs, FAILED, WHEN)
    assert "spec" not in node_patch(theirs, PASSED, WHEN)
    # A taint of that key set by hand (no owner) is not acceptance's either.
    assert "spec" not in node_patch(node(taints=[unhealthy("manual")]), PASSED, WHEN)


def test_a_passing_node_loses_the_taint_acceptance_owns():
    owned = node({"onprem.gpu/acceptance": "failed"}, {"onprem.gpu/unhealthy-owner": "acceptance"}, [unhealthy("pcie_degraded")])
    assert node_patch(owned, PASSED, WHEN) == {
        "metadata": {"labels": {"onprem.gpu/acceptance": "passed"},
                     "annotations": {"onprem.gpu/acceptance-date": WHEN, "onprem.gpu/unhealthy-owner": None}},
        "spec": {"taints": NODE["spec"]["taints"]},
    }


def test_nothing_to_write_on_a_node_that_has_the_verdict_already():
    done = node({"onprem.gpu/acceptance": "passed"}, {"onprem.gpu/acceptance-date": "2026-12-01T00:00:00Z"})
    assert node_patch(done, PASSED, WHEN) is None
    undated = node({"onprem.gpu/acceptance": "passed"})
    assert node_patch(undated, PASSED, WHEN) == {"metadata": {"annotations": {"onprem.gpu/acceptance-date": WHEN}}}
    with pytest.raises(AcceptanceError, match="passed or failed"):
        node_patch(done, {"verdict": "unknown"}, WHEN)


POOL_PATCH = {"metadata": {"labels": {"onprem.gpu/pool": "training"}}}


def test_kube_node_adds_the_pending_taint_to_a_node_never_accepted():
    bare = {"metadata": {"name": "dc1-gpu3"}, "spec": {}}
    assert acceptance_pending_patch(bare, POOL_PATCH, True) == {
        "metadata": {"labels": {"onprem.gpu/pool": "training"}, "annotations": {"onprem.gpu/unhealthy-owner": "acceptance"}},
        "spec": {"taints": [unhealthy("acceptance-pending")]},
    }
    # With the pool's own taint change in the patch, the pending taint joins that list.
    pool_taints = {"spec": {"taints": NODE["spec"]["taints"]}}
    assert acceptance_pending_patch(bare, pool_taints, True)["spec"]["taints"] == NODE["spec"]["taints"] + [unhealthy("acceptance-pending")]


def test_kube_node_leaves_accepted_tainted_and_unrequired_nodes_alone():
    assert acceptance_pending_patch(node({"onprem.gpu/acceptance": "passed"}), None, True) is None
    assert acceptance_pending_patch(node(), POOL_PATCH, False) == POOL_PATCH
    already = node(annotations={"onprem.gpu/unhealthy-owner": "acceptance"}, taints=[unhealthy("acceptance-pending")])
    assert acceptance_pending_patch(already, None, True) is None
    # A failed node keeps its failure's taint: a pending one would hide why it is out of service.
    assert acceptance_pending_patch(node({"onprem.gpu/acceptance": "failed"}, taints=[unhealthy("xid")]), None, True) is None
