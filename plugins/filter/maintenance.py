# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._maintenance import (
    conflict, gpu_resources, held_by, node_problems, ready_status, wait_message)


def maintenance_conflict(node, operation):
    """One sentence when another operation holds the Node (or left it failed); an empty string when ``operation`` may take it."""
    _check_node("maintenance_conflict", node)
    if not isinstance(operation, str) or not operation:
        raise AnsibleFilterError(f"maintenance_conflict expects the operation as a non-empty string, not {operation!r}.")
    return conflict(node, operation) or ""


def maintenance_held_by(node, operation):
    """Whether ``operation`` holds the Node or left it failed: its next run goes through the flow to put the node back."""
    _check_node("maintenance_held_by", node)
    if not isinstance(operation, str) or not operation:
        raise AnsibleFilterError(f"maintenance_held_by expects the operation as a non-empty string, not {operation!r}.")
    return held_by(node, operation)


def maintenance_ready(node):
    """The status of the Node's Ready condition: True, False or Unknown."""
    _check_node("maintenance_ready", node)
    return ready_status(node)


def maintenance_node_problems(node, expected=None, ready_before=False, expected_version=None, check_health=False):
    """One phrase per way the Node is not yet back in shape (Ready, its kubelet's version, the GPU resources expected); [] when it is."""
    _check_node("maintenance_node_problems", node)
    _check_expected("maintenance_node_problems", expected)
    return node_problems(node, expected or {}, bool(ready_before), expected_version or None, bool(check_health))


def maintenance_wait_message(node, expected=None, ready_before=False, plugin_pods=None, node_name=None,
                             expected_name="the GPU resources expected", timeout=None, setting="maintenance_check_timeout",
                             expected_version=None, check_health=False):
    """What the Node shows once the wait for it ran out, against what was expected, and the likely cause."""
    _check_node("maintenance_wait_message", node)
    _check_expected("maintenance_wait_message", expected)
    return wait_message(node, expected or {}, bool(ready_before), plugin_pods if isinstance(plugin_pods, list) else None,
                        node_name=node_name, expected_name=expected_name, timeout=timeout, setting=setting,
                        expected_version=expected_version or None, check_health=bool(check_health))


def maintenance_gpu_resources(node):
    """The GPU resources (nvidia.com/gpu, nvidia.com/mig-*) the Node advertises now, by name, as counts."""
    _check_node("maintenance_gpu_resources", node)
    return gpu_resources(node)


def _check_node(name, node):
    if not isinstance(node, dict):
        raise AnsibleFilterError(f"{name} expects a Node object (an empty one when it could not be read), not {type(node).__name__}.")


def _check_expected(name, expected):
    if expected is not None and not isinstance(expected, dict):
        raise AnsibleFilterError(f"{name} expects the resources as a mapping of resource name to count, not {type(expected).__name__}.")


class FilterModule:
    """Filters for a node taken out of service around a disruptive operation and put back (the maintenance role)."""

    def filters(self):
        return {
            "maintenance_conflict": maintenance_conflict,
            "maintenance_held_by": maintenance_held_by,
            "maintenance_ready": maintenance_ready,
            "maintenance_node_problems": maintenance_node_problems,
            "maintenance_wait_message": maintenance_wait_message,
            "maintenance_gpu_resources": maintenance_gpu_resources,
        }
