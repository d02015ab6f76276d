# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a node may leave its cluster: --limit, the inventory, the last control plane, etcd's quorum."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._node_removal import NodeRemovalError, removal_problem

POSTING = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "cni plugin not initialized"}
SILENT = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}


def node(name, control_plane=False, ready=None):
    labels = {"kubernetes.io/hostname": name}
    if control_plane:
        labels["node-role.kubernetes.io/control-plane"] = ""
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": [ready or POSTING]}}


def cluster(*control_planes, workers=("dc1-gpu1",)):
    return [node(name, True, ready) for name, ready in control_planes] + [node(name) for name in workers]


def test_a_worker_may_go():
    assert removal_problem("dc1-gpu1", "dc1-gpu1", "dc1", cluster(("dc1-cp1", POSTING)), True, True) == ""


def test_a_node_already_gone_may_go_again():
    assert removal_problem("dc1-gpu2", "dc1-gpu2", "dc1", cluster(("dc1-cp1", POSTING)), True, True) == ""


def test_a_run_without_limit_is_refused():
    assert removal_problem("dc1-gpu1", "dc1-gpu1", "dc1", cluster(("dc1-cp1", POSTING)), False, True).startswith(
        "remove_node.yml removes the nodes named with --limit")


def test_a_host_that_is_no_kubernetes_node_is_refused():
    assert removal_problem("lab-mirror", "lab-mirror", "dc1", cluster(("dc1-cp1", POSTING)), True, False) == (
        "lab-mirror is neither a control-plane host nor a GPU node of the inventory, so not a node of a cluster: nothing was changed.")


def test_the_last_control_plane_is_refused():
    assert removal_problem("dc1-cp1", "dc1-cp1", "dc1", cluster(("dc1-cp1", POSTING)), True, True).startswith(
        "dc1-cp1 is the last control plane of cluster dc1: removing it would destroy the cluster")


def test_one_of_two_control_planes_may_go_while_the_other_is_up():
    assert removal_problem("dc1-cp2", "dc1-cp2", "dc1", cluster(("dc1-cp1", POSTING), ("dc1-cp2", POSTING)), True, True) == ""


def test_a_removal_that_breaks_quorum_is_refused():
    nodes = cluster(("dc1-cp1", POSTING), ("dc1-cp2", SILENT), ("dc1-cp3", POSTING))
    assert removal_problem("dc1-cp1", "dc1-cp1", "dc1", nodes, True, True) == (
        "removing dc1-cp1 would leave the etcd of cluster dc1 with 2 members of which 1 is up, fewer than its quorum of 2: nothing was "
        "changed. Bring dc1-cp2 back first (its kubelet posts no status).")
    # Removing the member that is down leaves two members up: the quorum holds.
    assert removal_problem("dc1-cp2", "dc1-cp2", "dc1", nodes, True, True) == ""


def test_a_node_without_a_ready_condition_counts_as_down():
    nodes = cluster(("dc1-cp1", POSTING), ("dc1-cp2", None))
    nodes[1]["status"] = {}
    assert "of which 0 are up" in removal_problem("dc1-cp1", "dc1-cp1", "dc1", nodes, True, True)


def test_nodes_must_be_a_list_of_objects():
    with pytest.raises(NodeRemovalError, match="a list of mappings"):
        removal_problem("dc1-gpu1", "dc1-gpu1", "dc1", {"items": []}, True, True)
