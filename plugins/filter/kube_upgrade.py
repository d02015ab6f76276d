# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._kube_upgrade import (
    KubeUpgradeInputError, down_nodes, needs_drain, plan_lines, unready_daemonsets, upgrade_plan, version_problems)


def kube_upgrade_problems(nodes, target, cluster_version, first_control_plane_in_play=True):
    """One sentence per reason the cluster (its Node objects) may not go to ``target``; [] when it may."""
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise AnsibleFilterError("kube_upgrade_problems expects the cluster's Node objects as a list, as kubernetes.core.k8s_info returns them.")
    kubelets = {(node.get("metadata") or {}).get("name", ""): ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
                for node in nodes}
    return version_problems(target, cluster_version, kubelets, bool(first_control_plane_in_play))


def kube_upgrade_plan(hosts, target, cluster_version):
    """The nodes in kubeadm's order, each {host, node, role, from, to, steps, drain}; a node with no steps is left alone."""
    if not isinstance(hosts, list) or not all(isinstance(host, dict) for host in hosts):
        raise AnsibleFilterError("kube_upgrade_plan expects a list of hosts, each a mapping of host, node, role, kubelet, packages and apiserver.")
    try:
        plan = upgrade_plan(target, cluster_version, hosts)
    except KubeUpgradeInputError as error:
        raise AnsibleFilterError(f"kube_upgrade_plan: {error}") from None
    return [dict(entry, drain=needs_drain(entry["steps"])) for entry in plan]


def kube_upgrade_plan_lines(plan, cluster_version, target):
    """The plan as lines an operator reads: which nodes, in which order, from which version to which."""
    if not isinstance(plan, list):
        raise AnsibleFilterError("kube_upgrade_plan_lines expects the plan that kube_upgrade_plan returns.")
    return plan_lines(plan, cluster_version, target)


def _objects(value, what, name, required=False):
    if (value is not None or required) and (not isinstance(value, list) or not all(isinstance(item, dict) for item in value)):
        raise AnsibleFilterError(f"{name} expects {what} as a list, as kubernetes.core.k8s_info returns them.")


def _names(value, name):
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise AnsibleFilterError(f"{name} expects the run's node names as a list of strings.")


def kube_upgrade_unready(daemonsets, nodes=None, run_nodes=None, pods=None):
    """namespace/name (ready N of M) of each DaemonSet not ready on every node that should run it, less the nodes outside the
    run that are down; with the cluster's pods, namespace/name on NODE (pod not ready) for a DaemonSet pod on a node of the run."""
    _objects(daemonsets, "DaemonSet objects", "kube_upgrade_unready", required=True)
    _objects(nodes, "the cluster's Node objects", "kube_upgrade_unready")
    _objects(pods, "the cluster's Pod objects", "kube_upgrade_unready")
    _names(run_nodes or [], "kube_upgrade_unready")
    return unready_daemonsets(daemonsets, nodes, run_nodes or [], pods)


def kube_upgrade_down_nodes(nodes, run_nodes=None):
    """The nodes outside the run whose Ready condition is not True, in name order."""
    _objects(nodes, "the cluster's Node objects", "kube_upgrade_down_nodes", required=True)
    _names(run_nodes or [], "kube_upgrade_down_nodes")
    return down_nodes(nodes, run_nodes or [])


class FilterModule:
    """Filters of a kubeadm cluster's upgrade (the kube_upgrade role)."""

    def filters(self):
        return {
            "kube_upgrade_problems": kube_upgrade_problems,
            "kube_upgrade_plan": kube_upgrade_plan,
            "kube_upgrade_plan_lines": kube_upgrade_plan_lines,
            "kube_upgrade_unready": kube_upgrade_unready,
            "kube_upgrade_down_nodes": kube_upgrade_down_nodes,
        }
