# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Continuous health, on a cluster's first control plane: taint the GPU nodes whose ``GPUHealthy`` condition is False.

``plan(nodes, now, settings)`` decides, from the Nodes as the API lists them, which get the taint
``onprem.gpu/unhealthy=<finding code>:NoSchedule`` and which lose it:

- a node with ``GPUHealthy=False`` and no taint of that key gets it, owned by ``node-health`` (annotation
  ``onprem.gpu/unhealthy-owner``); a node that already carries one (acceptance's, an operator's) keeps it as it is;
- a node tainted by ``node-health`` whose condition is True again keeps the taint for the hold-down
  (``hold_down_seconds``, counted from the annotation ``onprem.gpu/healthy-since`` that the controller sets when it
  first sees it healthy), then loses taint and annotations; a taint of another owner, or of none, is never removed;
- Unknown (the check could not run, or its heartbeat is older than ``stale_seconds``) changes no taint and restarts
  the hold-down: neither a taint storm nor a premature release;
- a node that an operation holds (``onprem.gpu/maintenance=<operation>``, roles/maintenance: cordoned, drained, its
  driver possibly unloaded on purpose) gets no new taint: the operation checks the node's health itself before it puts
  the node back, and a taint set meanwhile would keep the node out for a hold-down after the operation. A taint it
  already had stays; a node the operation left ``failed`` is judged as any other;
- the circuit breaker: at most ``max(1, floor(N * max_unhealthy_percent / 100))`` of the cluster's N GPU nodes (nodes
  with a ``GPUHealthy`` condition) are tainted by node-health at once; the nodes beyond are left untainted, the
  breaker is open and the metric says so (an alert fires). A bad driver roll-out fails every node at once; tainting
  them all would empty the cluster for a problem a human must look at.

Each change is a JSON patch that first tests the Node's ``resourceVersion``, so a Node written meanwhile (kube_node's
pool reconciliation, acceptance, an operator) is left for the next round instead of overwritten.
Plain Python without Ansible imports.
"""

from __future__ import annotations

import datetime
import math

from ansible_collections.onprem.gpu.plugins.module_utils._acceptance import EFFECT, OWNER_ANNOTATION, UNHEALTHY_TAINT, unhealthy_taint
from ansible_collections.onprem.gpu.plugins.module_utils._maintenance import FAILED as MAINTENANCE_FAILED, LABEL as MAINTENANCE_LABEL
from ansible_collections.onprem.gpu.plugins.module_utils._node_health_agent import CONDITION_TYPE, code_of, rfc3339

OWNER = "node-health"
HEALTHY_SINCE_ANNOTATION = "onprem.gpu/healthy-since"
STALE_REASON = "GPUHealthCheckStale"
_VERBS = {"taint": "taint", "update": "update the taint", "hold": "hold-down (re)started or reset for the taint",
          "remove": "hold-down over, remove the taint"}


def parse_time(text):
    """POSIX seconds of an RFC 3339 time as the API writes it; None when absent or unreadable."""
    try:
        return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()
    except (TypeError, ValueError):
        return None


def max_tainted(node_count, percent):
    """How many of ``node_count`` GPU nodes node-health may taint at once: max(1, floor(N * percent / 100))."""
    return max(1, math.floor(node_count * percent / 100))


def _pointer(key):
    return key.replace("~", "~0").replace("/", "~1")


def _node_view(node, now, stale_seconds):
    metadata = node.get("metadata") or {}
    annotations = metadata.get("annotations") or {}
    taints = list((node.get("spec") or {}).get("taints") or [])
    cond = next((entry for entry in (node.get("status") or {}).get("conditions") or []
                 if entry.get("type") == CONDITION_TYPE), None)
    taint = unhealthy_taint(taints)
    operation = (metadata.get("labels") or {}).get(MAINTENANCE_LABEL)
    status = cond.get("status") if cond else None
    heartbeat = parse_time(cond.get("lastHeartbeatTime")) if cond else None
    stale = cond is not None and (heartbeat is None or now - heartbeat > stale_seconds)
    return {"name": metadata.get("name"), "resource_version": metadata.get("resourceVersion"), "annotations": annotations,
            "taints": taints, "taint": taint, "condition": cond, "status": "Unknown" if stale else status, "stale": stale,
            "ours": taint is not None and annotations.get(OWNER_ANNOTATION) == OWNER,
            "in_maintenance": bool(operation) and operation != MAINTENANCE_FAILED,
            "transition": parse_time(cond.get("lastTransitionTime")) if cond else None}


def _json_patch(view, taints=None, annotations=None):
    """The JSON patch of ``view``'s Node: the resourceVersion test, the taint list, the annotations (value None removes)."""
    ops = [{"op": "test", "path": "/metadata/resourceVersion", "value": view["resource_version"]}]
    if taints is not None:
        ops.append({"op": "add", "path": "/spec/taints", "value": taints})
    changes = {key: value for key, value in (annotations or {}).items()
               if (value is None and key in view["annotations"]) or (value is not None and view["annotations"].get(key) != value)}
    if changes and not view["annotations"] and any(value is not None for value in changes.values()):
        ops.append({"op": "add", "path": "/metadata/annotations",
                    "value": {key: value for key, value in changes.items() if value is not None}})
    else:
        for key, value in changes.items():
            path = f"/metadata/annotations/{_pointer(key)}"
            ops.append({"op": "remove", "path": path} if value is None else {"op": "add", "path": path, "value": value})
    return ops if len(ops) > 1 else None


def plan(nodes, now, settings):
    """What to write: ``{"patches": [{node, action, patch}], "conditions": [{node, condition}], "breaker": {...}}``.

    ``settings``: ``hold_down_seconds``, ``max_unhealthy_percent``, ``stale_seconds``. ``conditions`` are the stale
    nodes' conditions turned Unknown (the node lifecycle controller's way with Ready).
    """
    views = [_node_view(node, now, settings["stale_seconds"]) for node in nodes]
    views = [view for view in views if view["condition"] is not None and view["name"]]
    limit = max_tainted(len(views), settings["max_unhealthy_percent"])
    patches, conditions = [], []
    kept = 0
    candidates, in_maintenance = [], []
    for view in sorted(views, key=lambda item: item["name"]):
        if view["stale"] and view["condition"].get("status") != "Unknown":
            conditions.append({"node": view["name"], "condition": dict(
                view["condition"], status="Unknown", reason=STALE_REASON, lastTransitionTime=rfc3339(now),
                message=f"The GPU health agent has not reported for more than {settings['stale_seconds']} seconds.")})
        status = view["status"]
        if status == "False":
            code = code_of(view["condition"].get("reason") or "Unknown")
            if view["taint"] is None:
                if view["in_maintenance"]:
                    in_maintenance.append(view["name"])
                else:
                    candidates.append((view, code))
                continue
            if view["ours"]:
                kept += 1
                wanted = dict(view["taint"], value=code)
                taints = [wanted if entry is view["taint"] else entry for entry in view["taints"]] \
                    if view["taint"].get("value") != code else None
                patch = _json_patch(view, taints, {HEALTHY_SINCE_ANNOTATION: None})
                if patch:
                    patches.append({"node": view["name"], "action": "update", "code": code, "patch": patch})
        elif status == "True" and view["ours"]:
            since = parse_time(view["annotations"].get(HEALTHY_SINCE_ANNOTATION))
            if since is None:
                kept += 1
                patches.append({"node": view["name"], "action": "hold", "code": view["taint"].get("value"),
                                "patch": _json_patch(view, None, {HEALTHY_SINCE_ANNOTATION: rfc3339(now)})})
            elif now - since >= settings["hold_down_seconds"]:
                taints = [entry for entry in view["taints"] if entry is not view["taint"]]
                patches.append({"node": view["name"], "action": "remove", "code": view["taint"].get("value"),
                                "patch": _json_patch(view, taints, {OWNER_ANNOTATION: None, HEALTHY_SINCE_ANNOTATION: None})})
            else:
                kept += 1
        elif view["ours"]:
            kept += 1
            patch = _json_patch(view, None, {HEALTHY_SINCE_ANNOTATION: None})
            if patch:
                patches.append({"node": view["name"], "action": "hold", "code": view["taint"].get("value"), "patch": patch})
    # The earliest failures first: a roll-out that breaks every node taints the first ones up to the limit, then stops.
    candidates.sort(key=lambda item: (item[0]["transition"] or now, item[0]["name"]))
    room = max(limit - kept, 0)
    for view, code in candidates[:room]:
        taints = view["taints"] + [{"key": UNHEALTHY_TAINT, "value": code, "effect": EFFECT}]
        patches.append({"node": view["name"], "action": "taint", "code": code,
                        "patch": _json_patch(view, taints, {OWNER_ANNOTATION: OWNER, HEALTHY_SINCE_ANNOTATION: None})})
    held_back = [view["name"] for view, dummy in candidates[room:]]
    breaker = {"open": bool(held_back), "gpu_nodes": len(views), "limit": limit,
               "tainted": kept + min(room, len(candidates)), "held_back": held_back,
               "unhealthy": sum(1 for view in views if view["status"] == "False"),
               "in_maintenance": in_maintenance,
               "unknown": sum(1 for view in views if view["status"] not in ("True", "False"))}
    return {"patches": patches, "conditions": conditions, "breaker": breaker}


# The metric the rendered platform's GPUHealthCircuitBreakerOpen alert reads.
BREAKER_METRIC = "onprem_gpu_health_circuit_breaker_open"


def metrics(cluster, breaker, now, errors=0):
    """node-exporter textfile metrics of one controller round (``cluster`` the datacenter name)."""
    label = f'cluster="{cluster}"'
    rows = [
        (BREAKER_METRIC, "1 while node-health holds back taints because more GPU nodes fail at once than "
                         "node_health_max_unhealthy_percent allows.", int(breaker["open"])),
        ("onprem_gpu_health_gpu_nodes", "GPU nodes reporting the GPUHealthy condition.", breaker["gpu_nodes"]),
        ("onprem_gpu_health_taint_limit", "How many GPU nodes node-health may taint at once.", breaker["limit"]),
        ("onprem_gpu_health_tainted_nodes", "GPU nodes tainted by node-health.", breaker["tainted"]),
        ("onprem_gpu_health_held_back_nodes", "Failing GPU nodes left untainted by the circuit breaker.", len(breaker["held_back"])),
        ("onprem_gpu_health_maintenance_nodes", "Failing GPU nodes left untainted because an operation holds them (onprem.gpu/maintenance).",
         len(breaker.get("in_maintenance", ()))),
        ("onprem_gpu_health_unhealthy_nodes", "GPU nodes whose GPUHealthy condition is False.", breaker["unhealthy"]),
        ("onprem_gpu_health_unknown_nodes", "GPU nodes whose GPUHealthy condition is Unknown or stale.", breaker["unknown"]),
        ("onprem_gpu_health_controller_errors", "Node writes of the last round that failed (retried next round).", errors),
        ("onprem_gpu_health_controller_last_run_timestamp_seconds", "When the taint controller last ran.", round(now, 3)),
    ]
    lines = []
    for name, text, value in rows:
        lines += [f"# HELP {name} {text}", f"# TYPE {name} gauge", f"{name}{{{label}}} {value}"]
    return "\n".join(lines) + "\n"


def run_controller(api, settings, clock, log):
    """One round on a cluster: list the Nodes, write the plan, return ``(plan, errors)``.

    ``api`` a KubeApi as the controller's identity (nodes get, list, patch; nodes/status patch); ``log(text)`` reports each
    write. A write the API refuses (the Node changed since it was listed: the resourceVersion test fails) is counted and
    left for the next round.
    """
    listing = api.call("GET", "/api/v1/nodes")
    now = clock()
    decided = plan(listing.get("items") or [], now, settings)
    errors = 0
    for entry in decided["conditions"]:
        status, body = api.request("PATCH", f"/api/v1/nodes/{entry['node']}/status",
                                   {"status": {"conditions": [entry["condition"]]}}, "application/strategic-merge-patch+json")
        errors += status >= 300
        log(f"{entry['node']}: GPUHealthy Unknown ({STALE_REASON})" + (f": refused {status}: {_message(body)}" if status >= 300 else ""))
    for entry in decided["patches"]:
        status, body = api.request("PATCH", f"/api/v1/nodes/{entry['node']}", entry["patch"], "application/json-patch+json")
        errors += status >= 300
        log(f"{entry['node']}: {_VERBS[entry['action']]} {UNHEALTHY_TAINT}={entry['code']}:{EFFECT}"
            + (f": refused {status}: {_message(body)}" if status >= 300 else ""))
    if decided["breaker"]["open"]:
        log(f"circuit breaker open: {len(decided['breaker']['held_back'])} failing GPU node(s) left untainted "
            f"({', '.join(decided['breaker']['held_back'])}); at most {decided['breaker']['limit']} of "
            f"{decided['breaker']['gpu_nodes']} may be tainted at once")
    return decided, errors


def _message(body):
    return body.get("message") if isinstance(body, dict) else str(body)[:200]
