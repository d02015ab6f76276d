# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Whether a node may leave its cluster: --limit, the inventory, the last control plane, etcd's quorum; and a control plane's
etcd member: the control plane it is removed through, and the member found in etcdctl's member list."""

from __future__ import annotations

import json
import pathlib

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._node_removal import NodeRemovalError, etcd_member, etcd_peer_host, removal_problem

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


# A control plane's etcd member (etcdctl member list -w json, recorded from etcd 3.5.1 with two members m1 and m2).
MEMBER_LIST = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "node_removal" / "member-list-two.json").read_text()


@pytest.mark.parametrize("host, expected", [
    pytest.param("dc1-cp2", "dc1-cp1", id="a-second-control-plane-goes-through-the-first"),
    pytest.param("dc1-cp1", "dc1-cp2", id="the-first-goes-through-the-next-of-its-datacenter"),
    pytest.param("dc2-cp1", "", id="the-only-control-plane-of-its-datacenter-has-none"),
    pytest.param("dc1-gpu1", "dc1-cp1", id="any-host-of-the-datacenter"),
    pytest.param("lab-mirror", "", id="a-host-without-a-datacenter-has-none"),
])
def test_the_etcd_member_is_removed_through_another_control_plane_of_the_datacenter(host, expected):
    control_planes = ["dc2-cp1", "dc1-cp1", "dc1-cp2", "dc1-cp3"]
    datacenters = {"dc1-cp1": "dc1", "dc1-cp2": "dc1", "dc1-cp3": "dc1", "dc2-cp1": "dc2", "dc1-gpu1": "dc1", "lab-mirror": None}
    assert etcd_peer_host(host, control_planes, datacenters) == expected


def test_etcd_peer_host_takes_a_list_and_a_mapping():
    with pytest.raises(NodeRemovalError, match="control-plane hosts"):
        etcd_peer_host("dc1-cp2", "dc1-cp1", {})


def test_the_node_s_member_is_found_by_name_with_its_id_in_hex():
    assert etcd_member(MEMBER_LIST, "m2") == {"id": "915d7b6890dab72", "name": "m2", "peer_urls": ["http://127.0.0.1:23802"],
                                              "client_urls": ["http://127.0.0.1:23792"]}
    assert etcd_member(json.loads(MEMBER_LIST), "m1")["id"] == "bdae9bbc11dd390d"


def test_no_member_of_that_name_is_nothing_to_do():
    assert etcd_member(MEMBER_LIST, "dc1-cp2") == {}
    # A member added but never started has no name yet: it is no node's.
    unstarted = {"header": {}, "members": [{"ID": 654666499835669362, "peerURLs": ["https://10.0.0.2:2380"]}]}
    assert etcd_member(unstarted, "dc1-cp2") == {}


@pytest.mark.parametrize("output, message", [
    pytest.param("Error: context deadline exceeded", "this is not JSON", id="not-json"),
    pytest.param('{"header": {}}', "a document with members", id="no-members"),
    pytest.param('{"members": [{"name": "m1", "ID": "bdae9bbc11dd390d"}]}', "a document with members", id="id-not-a-number"),
    pytest.param("[]", "a document with members", id="a-list"),
])
def test_what_is_not_a_member_list_is_refused(output, message):
    with pytest.raises(NodeRemovalError, match=message):
        etcd_member(output, "m1")
