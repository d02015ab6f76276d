# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._mig_cluster import (
    component_labels,
    component_pods,
    components_wait_message,
    evicted_pods,
    manager_wait_message,
    mixed_strategy_resources,
    resource_differences,
)
from ansible_collections.onprem.gpu.plugins.module_utils._mig_inventory import inventory_layout


def mig_layout_problems(layout, layouts, host, model, gpu_count, strict=True):
    """One sentence per reason the node's MIG layout cannot be applied, as far as the inventory tells; [] when none."""
    if not isinstance(layout, str) or not layout:
        raise AnsibleFilterError(f"mig_layout_problems expects the layout name as a non-empty string, not {layout!r}.")
    dummy, problem = inventory_layout(host, model, gpu_count, layout, layouts, strict=strict, unknown_model_ok=True)
    return [problem] if problem else []


def mig_resources(gpus):
    """The extended resources the device plugin advertises for mig_config's ``gpus`` under the mixed strategy."""
    if not isinstance(gpus, list):
        raise AnsibleFilterError(f"mig_resources expects the gpus list of mig_config, not {type(gpus).__name__}.")
    return mixed_strategy_resources(gpus)


def mig_resource_differences(expected, allocatable):
    """Where a Node's ``status.allocatable`` differs from the GPU resources ``expected`` (mig_resources): one phrase each."""
    if not isinstance(expected, dict):
        raise AnsibleFilterError(f"mig_resource_differences expects the resources of mig_resources, not {type(expected).__name__}.")
    return resource_differences(expected, allocatable if isinstance(allocatable, dict) else {})


def mig_component_labels(node_labels, names, if_present=None):
    """``{'paused': {...}, 'restored': {...}}``: the GPU Operator component labels to write around a MIG change."""
    if not isinstance(names, list) or not isinstance(if_present or [], list):
        raise AnsibleFilterError(f"mig_component_labels expects lists of component label names, not {type(names).__name__}.")
    paused, restored = component_labels(node_labels if isinstance(node_labels, dict) else {}, names, if_present or [])
    return {"paused": paused, "restored": restored}


def mig_component_pods(pods, namespace, apps, client_label=None):
    """``namespace/name`` of each pod (k8s_info resources) that a MIG change waits out before it touches the GPUs."""
    _check_pods("mig_component_pods", pods, apps)
    return component_pods(pods, namespace, apps, client_label)


def mig_components_wait_message(pods, namespace, apps, client_label=None):
    """What is left of the pods ``mig_component_pods`` selects once the wait ran out, and the likely cause."""
    _check_pods("mig_components_wait_message", pods, apps)
    return components_wait_message(pods, namespace, apps, client_label)


def mig_manager_wait_message(node, manager_pods=None):
    """What the GPU Operator's mig-manager left on a Node that gave no verdict in time, and the likely cause."""
    if not isinstance(node, dict):
        raise AnsibleFilterError(f"mig_manager_wait_message expects a Node object, not {type(node).__name__}.")
    return manager_wait_message(node, manager_pods if isinstance(manager_pods, list) else None)


def mig_evicted_pods(pods):
    """``namespace/name`` of each pod (k8s_info resources) a drain of its node evicts."""
    if not isinstance(pods, list):
        raise AnsibleFilterError(f"mig_evicted_pods expects a list of Pod objects, not {type(pods).__name__}.")
    return evicted_pods(pods)


def _check_pods(name, pods, apps):
    if not isinstance(pods, list) or not isinstance(apps, list):
        raise AnsibleFilterError(f"{name} expects a list of Pod objects and a list of app label values.")


class FilterModule:
    """Filters for MIG layouts: inventory checks before any change, and the node in its cluster around a change."""

    def filters(self):
        return {
            "mig_layout_problems": mig_layout_problems,
            "mig_resources": mig_resources,
            "mig_resource_differences": mig_resource_differences,
            "mig_component_labels": mig_component_labels,
            "mig_component_pods": mig_component_pods,
            "mig_components_wait_message": mig_components_wait_message,
            "mig_manager_wait_message": mig_manager_wait_message,
            "mig_evicted_pods": mig_evicted_pods,
        }
