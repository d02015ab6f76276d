# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Continuous health, on each GPU node: the cheap checks judged as node_health judges them, reported to Kubernetes.

``run_agent`` reads the node live (``check_node``: one ``nvidia-smi -q -x``, one ``nvidia-smi nvlink -s``, one kernel
log read, each bounded by a timeout), turns the result into the Node condition ``GPUHealthy`` (True, False with the
failing finding codes, Unknown when the check itself could not run), patches it into its own Node's status with the
kubelet's credentials (NodeRestriction lets a node write its own status) and writes node-exporter textfile metrics.
It never taints: the taint controller (``_node_health_taint``) does, with its own identity.
Plain Python without Ansible imports.
"""

from __future__ import annotations

import datetime
import os
import re
import tempfile
import time
import urllib.parse

from ansible_collections.onprem.gpu.plugins.module_utils._acceptance import ACTION_RANK
from ansible_collections.onprem.gpu.plugins.module_utils._node_health import resolve_expected, xid_overrides
from ansible_collections.onprem.gpu.plugins.module_utils._node_health_live import check_node

CONDITION_TYPE = "GPUHealthy"
REASON_HEALTHY = "GPUsHealthy"
REASON_UNKNOWN = "GPUHealthCheckFailed"
# A condition message is free text; kubectl describe prints it whole, so it stays short.
MAX_MESSAGE = 1024
STATUS = {"healthy": "True", "unhealthy": "False", "unknown": "Unknown"}


def rfc3339(seconds):
    """``2025-10-24T03:14:02Z``, as the API writes times."""
    return datetime.datetime.fromtimestamp(int(seconds), datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def reason_of(code):
    """The condition reason for a finding code, UpperCamelCase as the API conventions ask: ``nvlink_inactive`` -> ``NvlinkInactive``."""
    return "".join(part.capitalize() for part in code.split("_"))


def code_of(reason):
    """The finding code of a condition reason made by reason_of: ``NvlinkInactive`` -> ``nvlink_inactive``."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", reason).lower()


def failing(findings):
    """The failing findings, the most severe action first (the first names the condition's reason and the taint)."""
    fails = [entry for entry in findings if entry["severity"] == "fail"]
    return sorted(fails, key=lambda entry: -ACTION_RANK.get(entry["action"], 0))


def condition(result, now, previous=None):
    """The ``GPUHealthy`` node condition for a judge result; ``previous`` the Node's current one (keeps its transition time)."""
    status = STATUS[result["state"]]
    if status == "Unknown":
        reason, message = REASON_UNKNOWN, f"The GPU health check could not run: {result['reason']}"
    elif status == "False":
        fails = failing(result["findings"])
        codes = list(dict.fromkeys(entry["code"] for entry in fails))
        reason = reason_of(codes[0])
        message = f"{', '.join(codes)}: " + " ".join(entry["message"] for entry in fails)
    else:
        warnings = sorted({entry["code"] for entry in result["findings"]})
        reason = REASON_HEALTHY
        message = "No failing GPU health finding" + (f" (warnings: {', '.join(warnings)})." if warnings else ".")
    skipped = [entry["check"] for entry in result.get("skipped_checks", []) if status != "Unknown"]
    if skipped:
        message += f" Not checked: {', '.join(skipped)}."
    stamp = rfc3339(now)
    same = previous is not None and previous.get("status") == status and previous.get("lastTransitionTime")
    return {"type": CONDITION_TYPE, "status": status, "reason": reason,
            "message": message if len(message) <= MAX_MESSAGE else message[:MAX_MESSAGE - 3] + "...",
            "lastHeartbeatTime": stamp, "lastTransitionTime": previous["lastTransitionTime"] if same else stamp}


def _label(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def metrics(result, node, gpu_count, duration, now):
    """node-exporter textfile metrics for one check: the state, each finding, the GPUs out of service, when and how long."""
    lines = []

    def family(name, kind, text):
        lines.extend([f"# HELP {name} {text}", f"# TYPE {name} {kind}"])

    state = result["state"]
    family("onprem_gpu_health_status", "gauge",
           "The node's GPU health from the last check: 1 for the status it has (true, false, unknown), as the GPUHealthy condition.")
    for name in ("true", "false", "unknown"):
        lines.append(f'onprem_gpu_health_status{{node="{_label(node)}",status="{name}"}} {int(STATUS[state].lower() == name)}')
    family("onprem_gpu_health_finding", "gauge", "1 for each finding of the last check, by code, severity, action and GPU.")
    seen = set()
    for entry in result["findings"]:
        gpu = entry["gpu_index"] if entry["gpu_index"] is not None else (entry["device"] or "")
        labels = (f'node="{_label(node)}",code="{_label(entry["code"])}",severity="{entry["severity"]}",'
                  f'action="{entry["action"]}",gpu="{_label(gpu)}",xid="{entry["xid"] if entry["xid"] is not None else ""}"')
        if labels not in seen:
            seen.add(labels)
            lines.append(f"onprem_gpu_health_finding{{{labels}}} 1")
    family("onprem_gpu_health_gpus", "gauge", "The GPUs the inventory gives the node.")
    lines.append(f'onprem_gpu_health_gpus{{node="{_label(node)}"}} {gpu_count}')
    family("onprem_gpu_health_unhealthy_gpus", "gauge",
           "GPUs out of service for a failing finding: every GPU of the node while it fails (it is tainted as a whole).")
    lines.append(f'onprem_gpu_health_unhealthy_gpus{{node="{_label(node)}"}} {gpu_count if state == "unhealthy" else 0}')
    family("onprem_gpu_health_last_check_timestamp_seconds", "gauge", "When the last check ended, in seconds since the epoch.")
    lines.append(f'onprem_gpu_health_last_check_timestamp_seconds{{node="{_label(node)}"}} {now:.3f}')
    family("onprem_gpu_health_check_duration_seconds", "gauge", "How long the last check took (nvidia-smi, nvlink, kernel log).")
    lines.append(f'onprem_gpu_health_check_duration_seconds{{node="{_label(node)}"}} {duration:.3f}')
    return "\n".join(lines) + "\n"


def write_atomically(path, text, mode=0o644):
    """Write ``text`` to ``path`` through a temporary file in the same directory, as node-exporter's textfile collector asks."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".onprem-gpu-health.", dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def check(config, run, which, boot=None):
    """Read and judge the node as ``config`` says (its ``expected``, ``checks``, ``xid_actions`` and live options)."""
    expected = resolve_expected(config["expected"])
    options = {name: config[name] for name in ("nvidia_smi", "command_timeout", "kernel_log_file", "kernel_log_since")
               if config.get(name) is not None}
    options["boot_time"] = boot
    return check_node(run, which, expected, config["checks"], options, xid_overrides(config.get("xid_actions")))


def run_agent(config, run, which, api, clock=time.time, boot=None):
    """One round: check, patch the Node's GPUHealthy condition, write the metrics. Returns the condition.

    ``api`` a KubeApi as the node (kubelet's credentials); ``config``: ``node_name``, ``textfile``, ``expected``,
    ``checks``, ``xid_actions`` and the live options. The metrics are written even when the API cannot be reached.
    """
    started = clock()
    result = check(config, run, which, boot)
    ended = clock()
    text = metrics(result, config["node_name"], config["expected"]["gpu_count"], ended - started, ended)
    if config.get("textfile"):
        write_atomically(config["textfile"], text)
    path = f"/api/v1/nodes/{urllib.parse.quote(config['node_name'])}"
    node = api.call("GET", path)
    previous = next((entry for entry in (node.get("status") or {}).get("conditions") or []
                     if entry.get("type") == CONDITION_TYPE), None)
    wanted = condition(result, ended, previous)
    # A strategic merge patch merges conditions by type: kubelet's own (Ready, MemoryPressure, ...) stay as they are.
    api.call("PATCH", f"{path}/status", {"status": {"conditions": [wanted]}}, "application/strategic-merge-patch+json")
    return wanted
