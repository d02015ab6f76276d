# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The rack's hand-over (playbooks/acceptance.yml): one verdict per node from every check, and what it writes on the Node.

``node_record(inputs)`` gathers a node's results (node_health's, the per-node NCCL run of the network benchmark, each
RDMA rail's ib_write_bw client run against a peer, the NVMe cache's sequential read) into findings in node_health's
format, failing first, and a verdict. ``node_patch(node, record, when)`` is the merge patch that labels the Node
passed or failed and sets or removes the acceptance taint, leaving taints others own alone.
Plain Python without Ansible imports.
"""

from __future__ import annotations

import re

from ansible_collections.onprem.gpu.plugins.module_utils._node_health import DEFAULT_RAIL_SHARE
from ansible_collections.onprem.gpu.plugins.module_utils._perftest import PerftestError, parse_ib_write_bw

LABEL = "onprem.gpu/acceptance"
DATE_ANNOTATION = "onprem.gpu/acceptance-date"
# The taint every health gate of the collection uses; the annotation says whose it is, and each removes only its own.
UNHEALTHY_TAINT = "onprem.gpu/unhealthy"
OWNER_ANNOTATION = "onprem.gpu/unhealthy-owner"
OWNER = "acceptance"
PENDING = "acceptance-pending"
EFFECT = "NoSchedule"
# How far an action takes the node out of service: the most severe failing finding names the taint.
ACTION_RANK = {"rma": 5, "reboot": 4, "reset_gpu": 3, "drain": 2, "restart_app": 1, "none": 0}
# "<bytes> bytes (1.1 GB, 1.0 GiB) copied, 0.52 s, 2.1 GB/s" (GNU dd's summary; 's' or 'seconds' in older releases).
_DD_SUMMARY = re.compile(r"^(\d+) bytes\b.*copied, ([0-9.]+(?:e[-+]?\d+)?) s", re.MULTILINE)


class AcceptanceError(ValueError):
    """An input is not what the playbook passes; the message is one sentence."""


def finding(code, severity, action, message, device=None, check=None):
    """A finding in node_health's return format, for the checks outside it."""
    return {"code": code, "pci_bus_id": None, "gpu_index": None, "device": device, "xid": None, "severity": severity,
            "action": action, "message": message, "check": check}


def _health_findings(health, check):
    """node_health's findings (tagged with the check that asked for them), or one finding when it could not read the GPUs."""
    if health is None:
        return []
    if not isinstance(health, dict) or "state" not in health:
        raise AcceptanceError(f"the {check} result is not what onprem.gpu.node_health returns: {health!r}.")
    if health["state"] == "unknown":
        return [finding("gpus_unreadable", "fail", "drain",
                        f"The GPUs could not be read ({health.get('reason') or 'no reason given'}); fix the driver and run "
                        "the acceptance again.", check=check)]
    return [dict(entry, check=check) for entry in health.get("findings", [])]


def rail_results(rails):
    """Each rail's measured ib_write_bw average against its line rate, for the report (node_health judges them).

    ``rails``: ``{"expected": [{device, rate_gbps, min_gbps?}], "outputs": {device: text}, "peer": host}``.
    """
    results = []
    outputs = rails.get("outputs") or {}
    for rail in rails.get("expected") or []:
        text = outputs.get(rail["device"]) or ""
        entry = {"device": rail["device"], "rate_gbps": rail["rate_gbps"],
                 "min_gbps": rail.get("min_gbps") or round(rail["rate_gbps"] * DEFAULT_RAIL_SHARE, 1),
                 "average_gbps": None, "peak_gbps": None, "error": None}
        try:
            run = parse_ib_write_bw(text)
            entry.update(average_gbps=run["bw_average_gbps"], peak_gbps=run["bw_peak_gbps"])
        except PerftestError as error:
            entry["error"] = str(error)
        results.append(entry)
    return results


def _rail_findings(rails):
    if rails is None:
        return [], []
    if not rails.get("peer"):
        return [finding("rdma_no_peer", "warn", "none",
                        f"No other GPU node of datacenter {rails.get('datacenter') or '(none)'} to run ib_write_bw against: the "
                        f"{len(rails.get('expected') or [])} rails were not measured; accept the node again with a second node "
                        "of its fabric in the inventory.", check="rails")], []
    findings = [dict(entry, message=f"{entry['message']} (Client on this node, server on {rails['peer']}: a rail below its rate on "
                                    "both nodes of a pair may be either end's.)")
                for entry in _health_findings(rails.get("health"), "rails")]
    return findings, rail_results(rails)


def _nccl_findings(run):
    if not run:
        return []
    if run.get("verdict") == "pass":
        return []
    reasons = " ".join(run.get("reasons") or ["all_reduce_perf did not pass."])
    return [finding("nccl_allreduce", "fail", "drain",
                    f"all_reduce_perf on the node alone: {reasons.rstrip('.')} (threshold {run.get('threshold')} GB/s busbw); "
                    "drain the node and check its NVLinks, NVSwitches and GPUs (docs/network-benchmark.md).", check="nccl")]


def parse_dd(text):
    """(bytes, seconds) from GNU dd's summary line; AcceptanceError when there is none."""
    match = _DD_SUMMARY.search(text or "")
    if not match:
        first = next((line.strip() for line in (text or "").splitlines() if line.strip()), "nothing")
        raise AcceptanceError(f"dd printed no summary but: {first.rstrip('.')}.")
    return int(match.group(1)), float(match.group(2))


def nvme_result(nvme):
    """The cache's sequential read in MB/s against its expectation, and the findings.

    ``nvme``: ``{"declared": bool, "mount", "device" (empty when not mounted), "output" (dd's stderr), "rc",
    "expected_mbps" (0: not judged), "efficiency"}``.
    """
    result = {"mount": nvme.get("mount"), "device": nvme.get("device") or None, "mbps": None,
              "expected_mbps": float(nvme.get("expected_mbps") or 0), "min_mbps": None, "bytes": None, "seconds": None}
    if result["expected_mbps"]:
        result["min_mbps"] = round(result["expected_mbps"] * float(nvme.get("efficiency", 0.8)), 1)
    if not result["device"]:
        if not nvme.get("declared"):
            return result, []
        return result, [finding("nvme_cache_missing", "fail", "drain",
                                f"The NVMe cache is not mounted at {result['mount']}; run site.yml on the node (roles/nvme_cache) "
                                "and check its drives.", check="nvme")]
    try:
        size, seconds = parse_dd(nvme.get("output"))
    except AcceptanceError as error:
        return result, [finding("nvme_read", "fail", "drain",
                                f"The sequential read of {result['device']} failed (exit code {nvme.get('rc')}): {error} "
                                "Check the drives (nvme smart-log) and the array (mdadm --detail).",
                                device=result["device"], check="nvme")]
    result.update(bytes=size, seconds=seconds, mbps=round(size / max(seconds, 1e-6) / 1e6, 1))
    if result["min_mbps"] is not None and result["mbps"] < result["min_mbps"]:
        return result, [finding("nvme_read", "fail", "drain",
                                f"The NVMe cache ({result['device']}) read {result['mbps']:g} MB/s sequentially, below "
                                f"{result['min_mbps']:g} MB/s of the {result['expected_mbps']:g} MB/s expected; check each "
                                "drive's PCIe link (lspci -vv LnkSta) and health (nvme smart-log), and the array (mdadm --detail).",
                                device=result["device"], check="nvme")]
    return result, []


def _order(findings):
    return sorted(findings, key=lambda entry: (entry["severity"] != "fail", -ACTION_RANK.get(entry["action"], 0)))


def node_record(inputs):
    """One node's verdict from every check's result.

    ``inputs``: ``{"host", "node", "datacenter", "health" (node_health's result or None), "rails" (see rail_results, with
    "health": node_health's rdma_bandwidth result) or None, "nccl" (the network benchmark's record of the node's run) or
    None, "nvme" (see nvme_result) or None, "skipped": [{"check", "reason"}]}``. Returns ``{"host", "node", "datacenter",
    "verdict" (passed/failed), "code" (the taint value of a failed node), "findings" (failing first, the most severe
    first), "rails", "nccl", "nvme", "skipped"}``.
    """
    if not isinstance(inputs, dict) or not inputs.get("host"):
        raise AcceptanceError(f"a node's inputs need at least its host, not {inputs!r}.")
    findings = _health_findings(inputs.get("health"), "health")
    rail_findings, rails = _rail_findings(inputs.get("rails"))
    findings += rail_findings + _nccl_findings(inputs.get("nccl"))
    nvme, nvme_findings = nvme_result(inputs["nvme"]) if inputs.get("nvme") else (None, [])
    findings = _order(findings + nvme_findings)
    failing = [entry for entry in findings if entry["severity"] == "fail"]
    nccl = inputs.get("nccl") or None
    skipped = list(inputs.get("skipped") or [])
    skipped += [dict(entry, check=f"health/{entry['check']}") for entry in (inputs.get("health") or {}).get("skipped_checks", [])]
    return {
        "host": inputs["host"], "node": inputs.get("node") or inputs["host"], "datacenter": inputs.get("datacenter") or "",
        "verdict": "failed" if failing else "passed", "code": failing[0]["code"] if failing else None,
        "findings": findings, "rails": rails, "peer": (inputs.get("rails") or {}).get("peer"),
        "nccl": None if nccl is None else {key: nccl.get(key) for key in ("verdict", "judged_busbw", "peak_busbw", "threshold",
                                                                          "expected", "transport", "reasons")},
        "nvme": nvme, "skipped": skipped,
    }


def unhealthy_taint(taints):
    """The taint of key onprem.gpu/unhealthy and effect NoSchedule in ``taints``, or None."""
    return next((taint for taint in taints if taint.get("key") == UNHEALTHY_TAINT and taint.get("effect") == EFFECT), None)


def node_patch(node, record, when):
    """The merge patch that writes ``record``'s verdict on the Node (``node`` as the API returns it), or None.

    Both verdicts label the Node (``onprem.gpu/acceptance``) and date it (annotation ``onprem.gpu/acceptance-date``, written
    when the verdict changes, so that a node found the same again is not written to).
    A failed node gets the taint ``onprem.gpu/unhealthy=<code>:NoSchedule`` with ``onprem.gpu/unhealthy-owner=acceptance``,
    unless another owner's taint of that key is already there (the node is out of service; the owner removes it). A
    passed node loses the taint when acceptance owns it (the pending one included) and keeps anyone else's.
    """
    if record.get("verdict") not in ("passed", "failed"):
        raise AcceptanceError(f"the verdict must be passed or failed, not {record.get('verdict')!r}.")
    metadata = node.get("metadata") or {}
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    taints = list((node.get("spec") or {}).get("taints") or [])
    current = unhealthy_taint(taints)
    ours = current is not None and annotations.get(OWNER_ANNOTATION) == OWNER
    label_patch, annotation_patch, new_taints = {}, {}, None
    # The date is when the node got its verdict: a run that finds it the same again writes nothing.
    if labels.get(LABEL) != record["verdict"]:
        label_patch[LABEL] = record["verdict"]
        annotation_patch[DATE_ANNOTATION] = when
    elif not annotations.get(DATE_ANNOTATION):
        annotation_patch[DATE_ANNOTATION] = when
    if record["verdict"] == "passed":
        if ours:
            new_taints = [taint for taint in taints if taint is not current]
            annotation_patch[OWNER_ANNOTATION] = None
    elif current is None or ours:
        wanted = {"key": UNHEALTHY_TAINT, "value": record["code"], "effect": EFFECT}
        if current is None or current.get("value") != record["code"]:
            new_taints = [taint for taint in taints if taint is not current] + [wanted]
        if annotations.get(OWNER_ANNOTATION) != OWNER:
            annotation_patch[OWNER_ANNOTATION] = OWNER
    patch = {}
    if label_patch or annotation_patch:
        patch["metadata"] = {key: value for key, value in (("labels", label_patch), ("annotations", annotation_patch)) if value}
    if new_taints is not None:
        # A merge patch replaces the whole list: it carries every taint the Node keeps, others' included.
        patch["spec"] = {"taints": new_taints}
    return patch or None
