# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a node may leave its cluster (playbooks/remove_node.yml), judged before anything changes.

A control plane is an etcd member of its cluster (kubeadm's stacked etcd): the last one is never removed, nor one whose
removal leaves fewer members up than the quorum of those that stay. A member counts as up while its kubelet posts the
Node's status (its Ready condition is True or False, not Unknown: the node lifecycle controller's sign of a silent kubelet)."""

from __future__ import annotations

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


class NodeRemovalError(ValueError):
    """An input the judgement cannot use: one sentence."""


def _ready(node):
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return condition.get("status")
    return "Unknown"


def _name(node):
    return ((node or {}).get("metadata") or {}).get("name")


def removal_problem(host, node_name, cluster, nodes, limited, kube_host):
    """One sentence saying why ``host`` may not be removed now, or an empty string.

    ``nodes``: the cluster's Node objects (kubernetes.core.k8s_info's ``resources``); ``limited``: whether the run was
    given --limit; ``kube_host``: whether the inventory makes the host a Kubernetes node (a control plane or GPU node)."""
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise NodeRemovalError("node_removal_problem takes the cluster's Node objects, a list of mappings")
    if not limited:
        return ("remove_node.yml removes the nodes named with --limit (ansible-playbook -i <datacenter> playbooks/remove_node.yml "
                "--limit <node>); without --limit it would remove every node of the inventory: nothing was changed.")
    if not kube_host:
        return f"{host} is neither a control-plane host nor a GPU node of the inventory, so not a node of a cluster: nothing was changed."
    members = [node for node in nodes if CONTROL_PLANE_LABEL in ((node.get("metadata") or {}).get("labels") or {})]
    if node_name not in [_name(node) for node in members]:
        return ""
    staying = [node for node in members if _name(node) != node_name]
    if not staying:
        return (f"{host} is the last control plane of cluster {cluster}: removing it would destroy the cluster (its API and etcd) "
                f"with every workload on it; nothing was changed. Join another control plane first (site.yml), or take the cluster "
                f"down on purpose with kubeadm reset on the node.")
    up = [_name(node) for node in staying if _ready(node) in ("True", "False")]
    quorum = len(staying) // 2 + 1
    if len(up) < quorum:
        down = sorted(_name(node) for node in staying if _name(node) not in up)
        return (f"removing {host} would leave the etcd of cluster {cluster} with {len(staying)} members of which {len(up)} "
                f"{'is' if len(up) == 1 else 'are'} up, fewer than its quorum of {quorum}: nothing was changed. Bring "
                f"{', '.join(down)} back first (its kubelet posts no status).")
    return ""
