# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a node may leave its cluster (playbooks/remove_node.yml), judged before anything changes, and its etcd member.

A control plane is an etcd member of its cluster (kubeadm's stacked etcd): the last one is never removed, nor one whose
removal leaves fewer members up than the quorum of those that stay. A member counts as up while its kubelet posts the
Node's status (its Ready condition is True or False, not Unknown: the node lifecycle controller's sign of a silent kubelet).

A control plane's member is removed through a control plane that stays (etcd's "Replacing a failed etcd member"): found by
name in ``etcdctl member list -w json`` (kubeadm names a member after its node) and removed by its ID in hex."""

from __future__ import annotations

import json

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


def etcd_peer_host(host, control_planes, datacenters):
    """The control plane that a removed ``host``'s etcd member is removed through: the first of ``control_planes`` (the
    inventory's control-plane group, in its order) in the host's datacenter, other than the host; an empty string when none.

    ``datacenters``: each host's datacenter (its ``datacenter`` variable), at least for the host and the control planes."""
    if not isinstance(control_planes, list) or not isinstance(datacenters, dict):
        raise NodeRemovalError("node_removal_etcd_host takes the control-plane hosts (a list) and each host's datacenter (a mapping)")
    here = datacenters.get(host)
    return next((peer for peer in control_planes if peer != host and here is not None and datacenters.get(peer) == here), "")


def etcd_member(member_list, node_name):
    """The etcd member named ``node_name`` in ``etcdctl member list -w json``'s output (its text, or the document), as
    ``{id, name, peer_urls, client_urls}`` with the ID in hex as ``etcdctl member remove`` takes it; an empty mapping when
    the cluster has no member of that name (already removed: nothing to do)."""
    if isinstance(member_list, str):
        try:
            member_list = json.loads(member_list)
        except ValueError:
            raise NodeRemovalError("node_removal_etcd_member takes the output of etcdctl member list -w json, and this is not JSON") from None
    members = member_list.get("members") if isinstance(member_list, dict) else None
    if not isinstance(members, list) or not all(isinstance(member, dict) and isinstance(member.get("ID"), int) for member in members):
        raise NodeRemovalError("node_removal_etcd_member takes the output of etcdctl member list -w json: a document with members and their IDs")
    for member in members:
        if member.get("name") == node_name:
            return {"id": f"{member['ID']:x}", "name": node_name, "peer_urls": member.get("peerURLs") or [],
                    "client_urls": member.get("clientURLs") or []}
    return {}
