# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._kube_control_plane import node_kubelet_version, ready_problem, state_problems

ADMIN = "/etc/kubernetes/admin.conf"
MANIFEST = "/etc/kubernetes/manifests/kube-apiserver.yaml"


def node_json(labels=None, version="v1.35.4"):
    """The parts of the lab double's `kubectl get node dc1-cp1 --output json` the check reads."""
    labels = {"kubernetes.io/hostname": "dc1-cp1", "node-role.kubernetes.io/control-plane": "",
              "node.kubernetes.io/exclude-from-external-load-balancers": ""} if labels is None else labels
    return json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "dc1-cp1", "labels": labels},
                       "status": {"nodeInfo": {"kubeletVersion": version}}}, indent=4)


READY = (0, "ok", "")
NODE = (0, node_json(), "")


@pytest.mark.parametrize("initialised", [False, True])
def test_a_new_or_initialised_control_plane_has_no_problem(initialised):
    assert state_problems("dc1-cp1", "10.89.50.11", initialised, initialised, ADMIN, MANIFEST) == []


def test_problems_come_in_order_with_the_inventorys_first():
    problems = state_problems("dc1-cp1", "", False, True, ADMIN, MANIFEST, ["dc1: kube_pod_cidr is not a network."])
    assert problems == [
        "dc1: kube_pod_cidr is not a network.",
        "dc1-cp1 has no address for its API server (kube_control_plane_advertise_address is empty and the host has no default IPv4 route);"
        " set kube_control_plane_advertise_address.",
        "dc1-cp1 has /etc/kubernetes/manifests/kube-apiserver.yaml but no /etc/kubernetes/admin.conf: a kubeadm init or join stopped"
        " half way; run `kubeadm reset -f` on it and run the play again.",
    ]


def test_an_admin_kubeconfig_without_a_manifest_is_half_initialised():
    assert state_problems("dc1-cp1", "10.89.50.11", True, False, ADMIN, MANIFEST) == [
        "dc1-cp1 has /etc/kubernetes/admin.conf but no API server manifest: a kubeadm init or join stopped half way;"
        " run `kubeadm reset -f` on it and run the play again."]


def test_a_ready_control_plane_node_passes():
    assert ready_problem("dc1-cp1", "dc1", "dc1-cp1", "1.35.4", READY, NODE) is None
    assert ready_problem("dc1-cp1", "dc1", "dc1-cp1", "v1.35.4", (0, "ok\n", ""), NODE) is None
    assert node_kubelet_version(NODE[1])[0] == "v1.35.4"


@pytest.mark.parametrize("readyz, why", [
    ((1, "", "The connection to the server 10.89.50.201:6443 was refused - did you specify the right host or port?\n"),
     "The connection to the server 10.89.50.201:6443 was refused - did you specify the right host or port?"),
    ((0, "[-]etcd failed: reason withheld\nreadyz check failed\n", ""), "[-]etcd failed: reason withheld\nreadyz check failed"),
])
def test_an_api_server_that_is_not_ready_is_said_first(readyz, why):
    assert ready_problem("dc1-cp2", "dc1", "dc1-cp2", "1.35.4", readyz, (1, "", "Error from server (NotFound): nodes \"dc1-cp2\" not found")) == (
        f"dc1-cp2: the API server of the dc1 cluster is not ready ({why}); see `journalctl -u kubelet`.")


def test_a_missing_node_is_said_with_kubectls_error():
    assert ready_problem("dc1-cp2", "dc1", "cp2", "1.35.4", READY, (1, "", 'Error from server (NotFound): nodes "cp2" not found\n')) == (
        'dc1-cp2: the cluster has no control-plane node cp2 at v1.35.4 (Error from server (NotFound): nodes "cp2" not found).')


@pytest.mark.parametrize("node", [
    (0, node_json(labels={"kubernetes.io/hostname": "dc1-cp1"}), ""),
    (0, node_json(labels={}), ""),
    (0, node_json(version="v1.34.2"), ""),
    (0, "not json", ""),
])
def test_a_node_with_wrong_labels_or_version_is_not_a_control_plane_node(node):
    assert ready_problem("dc1-cp1", "dc1", "dc1-cp1", "1.35.4", READY, node) == (
        "dc1-cp1: the cluster has no control-plane node dc1-cp1 at v1.35.4 (wrong labels or kubelet version).")
