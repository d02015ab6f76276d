# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A node taken out of service for a disruptive operation and put back (roles/maintenance), as its cluster sees it.

While an operation holds a node, the node carries the label ``onprem.gpu/maintenance=<operation>`` and the annotations
``onprem.gpu/maintenance-operation``, ``-since`` and ``-reason``; an operation that failed leaves the label at
``failed`` with the operation and the reason in the annotations. Before the node goes back, it must be Ready again if it
was Ready when taken out (its kubelet must post status in any case) and advertise the GPU resources the caller expects.
Plain Python without Ansible imports.
"""

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._mig_cluster import resource_differences, resources_wait_message
from ansible_collections.onprem.gpu.plugins.module_utils._node_health_agent import CONDITION_TYPE as HEALTH_CONDITION

LABEL = "onprem.gpu/maintenance"
OPERATION_ANNOTATION = "onprem.gpu/maintenance-operation"
SINCE_ANNOTATION = "onprem.gpu/maintenance-since"
REASON_ANNOTATION = "onprem.gpu/maintenance-reason"
FAILED = "failed"


def ready_status(node):
    """The status of the Node's Ready condition: ``True``, ``False``, or ``Unknown`` (also when there is none)."""
    return (_ready_condition(node) or {}).get("status") or "Unknown"


def conflict(node, operation):
    """One sentence when another operation holds the node or left it failed; None when ``operation`` may take it.

    A node that ``operation`` itself holds (a run that was interrupted) or left failed is taken again: running the
    operation again is how a failure is retried. A node without the label is free.
    """
    metadata = (node or {}).get("metadata") or {}
    value = (metadata.get("labels") or {}).get(LABEL)
    if not value:
        return None
    annotations = metadata.get("annotations") or {}
    # The label names the operation that holds the node; after a failure, the annotation names the one that failed.
    holder = (annotations.get(OPERATION_ANNOTATION) or "") if value == FAILED else value
    if holder == operation:
        return None
    name = metadata.get("name")
    # Annotations another operation left are not this holder's.
    own = annotations.get(OPERATION_ANNOTATION) in (None, "", holder)
    since = annotations.get(SINCE_ANNOTATION) if own else None
    reason = annotations.get(REASON_ANNOTATION) if own else None
    told = "; ".join(part for part in (f"since {since}" if since else "", reason or "") if part)
    told = f" ({told})" if told else ""
    release = f"kubectl label node {name} {LABEL}-"
    if value == FAILED:
        return (f"{name} is out of service after a failed {holder or 'operation'}{told}: put it in order, then remove the mark"
                f" ({release}) before {operation} takes it; nothing was changed.")
    return (f"{name} is held by {holder}{told}: a run of it is under way or was interrupted; let it finish or run it again,"
            f" or remove the mark ({release}) once the node is in order, before {operation} takes it; nothing was changed.")


def held_by(node, operation):
    """Whether ``operation`` holds the node (a run of it under way or interrupted) or left it failed: a run of it then goes
    through the flow again to check the node and put it back, even where the operation itself has nothing left to do."""
    metadata = (node or {}).get("metadata") or {}
    value = (metadata.get("labels") or {}).get(LABEL)
    if value == FAILED:
        return ((metadata.get("annotations") or {}).get(OPERATION_ANNOTATION) or "") == operation
    return bool(value) and value == operation


def kubelet_version(node):
    """The version the Node's kubelet reports (``v1.36.2``), an empty string when it reports none."""
    return (((node or {}).get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion") or ""


def gpu_resources(node):
    """The GPU resources the Node advertises now, by name (``nvidia.com/gpu`` and ``nvidia.com/mig-*``), as counts: what it
    must advertise again when an operation that should not change its GPUs puts it back."""
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    resources = {}
    for name, count in allocatable.items():
        if name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-"):
            try:
                resources[name] = int(str(count))
            except ValueError:
                continue
    return resources


def _version_problem(node, expected_version):
    if not expected_version:
        return []
    wanted = "v" + str(expected_version).lstrip("v")
    reported = kubelet_version(node)
    return [] if reported == wanted else [f"its kubelet reports {reported or 'no version'}, not {wanted}"]


def health_problem(node):
    """The phrase of a Node whose continuous-health agent (roles/node_health) reports its GPUs unhealthy, else None.

    Only ``False`` counts: a node without the condition runs no agent, and ``Unknown`` is a check that could not run,
    which the taint controller does not hold against a node either."""
    conditions = ((node or {}).get("status") or {}).get("conditions") or ()
    condition = next((entry for entry in conditions if entry.get("type") == HEALTH_CONDITION), None)
    if not condition or condition.get("status") != "False":
        return None
    said = ": ".join(part for part in (condition.get("reason"), condition.get("message")) if part)
    return f"its GPU health agent reports {HEALTH_CONDITION} False ({said or 'no reason given'})"


def node_problems(node, expected=None, ready_before=False, expected_version=None, check_health=False):
    """One phrase per way the Node is not yet back: its Ready condition, its kubelet's version, and GPU resources that
    differ from ``expected``.

    ``ready_before``: whether the node was Ready when it was taken out, which it must then be again; a node whose
    kubelet does not post status (Ready ``Unknown``) is never back. ``expected``: resource name -> count, as
    ``mig_resources`` gives it; empty or None checks no resource. ``expected_version``: the version its kubelet must
    report (``1.36.2``, after an upgrade); empty or None checks none. ``check_health``: the node's ``GPUHealthy``
    condition must not be False (``health_problem``).
    """
    status = ready_status(node)
    problems = [f"Ready is {status}"] if status == "Unknown" or (ready_before and status != "True") else []
    problems += _version_problem(node, expected_version)
    health = health_problem(node) if check_health else None
    problems += [health] if health else []
    if expected:
        problems += resource_differences(expected, ((node or {}).get("status") or {}).get("allocatable") or {})
    return problems


def wait_message(node, expected=None, ready_before=False, plugin_pods=None, node_name=None, expected_name="the GPU resources expected",
                 timeout=None, setting="maintenance_check_timeout", expected_version=None, check_health=False):
    """Say, once the wait for the node to come back ran out, what it shows against what it should, and the likely cause.

    ``expected_name`` names the resources in the message (``its new MIG resources``); ``timeout`` and ``setting``: the
    seconds waited and the variable that set them, the caller's own where it has one; ``expected_version``: the version
    its kubelet must report; ``check_health``: whether the node's GPU health agent must not report it unhealthy.
    """
    name = ((node or {}).get("metadata") or {}).get("name") or node_name or "the node"
    waited = f"within {timeout} s ({setting})" if timeout is not None else f"in time ({setting})"
    if not node:
        return f"{name} could not be read from its cluster {waited}: the API server or the controller's kubeconfig is at fault."
    version = _version_problem(node, expected_version)
    if version:
        return (f"{name} did not come back at {'v' + str(expected_version).lstrip('v')} {waited}: {version[0]}; the kubelet package was"
                f" upgraded but the kubelet that runs is another: see systemctl status kubelet and journalctl -u kubelet on the node.")
    health = health_problem(node) if check_health else None
    if health:
        return (f"{name} is not healthy after the operation: {health}; the node stays out of service until it is fixed"
                f" (see journalctl -u onprem-gpu-health-agent on the node and kubectl describe node {name}).")
    status = ready_status(node)
    not_ready = status == "Unknown" or (ready_before and status != "True")
    missing = bool(expected) and bool(resource_differences(expected, (node.get("status") or {}).get("allocatable") or {}))
    if missing:
        text = f"{name} did not advertise {expected_name} {waited}: {resources_wait_message(expected, node, plugin_pods)}"
        return f"{text} {_ready_sentence(node, status)}" if not_ready else text
    if not_ready:
        return f"{name} did not come back Ready {waited}: {_ready_sentence(node, status)}"
    return f"{name} is back: Ready is {status} and it advertises what was expected."


def _ready_condition(node):
    conditions = ((node or {}).get("status") or {}).get("conditions") or ()
    return next((condition for condition in conditions if condition.get("type") == "Ready"), None)


def _ready_sentence(node, status):
    condition = _ready_condition(node) or {}
    said = ": ".join(part for part in (condition.get("reason"), condition.get("message")) if part)
    said = f" ({said})" if said else ""
    if status == "Unknown":
        return (f"Its Ready condition is Unknown{said}: its kubelet does not post the node's status; see journalctl -u kubelet"
                f" on the node.")
    return (f"Its Ready condition is {status}{said}, where it was True when the node was taken out of service; kubectl describe"
            f" node and the kubelet's journal say why.")
