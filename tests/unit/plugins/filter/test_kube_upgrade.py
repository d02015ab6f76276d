# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.kube_upgrade import (
    FilterModule, kube_upgrade_down_nodes, kube_upgrade_plan, kube_upgrade_plan_lines, kube_upgrade_problems, kube_upgrade_unready)

NODES = [{"metadata": {"name": "dc1-cp1"}, "status": {"nodeInfo": {"kubeletVersion": "v1.35.4"}}},
         {"metadata": {"name": "dc1-gpu9"}, "status": {"nodeInfo": {"kubeletVersion": "v1.32.1"}}}]
PACKAGES = {"kubeadm": "1.35.4-1.1", "kubelet": "1.35.4-1.1", "kubectl": "1.35.4-1.1"}


def test_the_filters_are_registered():
    assert set(FilterModule().filters()) == {
        "kube_upgrade_problems", "kube_upgrade_plan", "kube_upgrade_plan_lines", "kube_upgrade_unready", "kube_upgrade_down_nodes"}


def test_problems_read_each_nodes_kubelet_version():
    problems = kube_upgrade_problems(NODES, "1.36.2", "v1.35.4")
    assert problems == ["kube_version 1.36.2 would leave the kubelet of dc1-gpu9 (1.32.1) more than 3 minors behind the API server, which the "
                        "version skew policy forbids: upgrade those nodes first; nothing was changed."]
    assert kube_upgrade_problems(NODES[:1], "1.36.2", "v1.35.4") == []


def test_the_plan_says_whether_each_node_is_drained():
    hosts = [{"host": "dc1-cp1", "role": "first_control_plane", "kubelet": "v1.35.4", "packages": PACKAGES,
              "apiserver": "registry.k8s.io/kube-apiserver:v1.35.4"}]
    plan = kube_upgrade_plan(hosts, "1.36.2", "v1.35.4")
    assert plan[0]["drain"] is True and plan[0]["node"] == "dc1-cp1"
    assert kube_upgrade_plan_lines(plan, "v1.35.4", "1.36.2")[0] == "Upgrade from 1.35.4 to 1.36.2, in this order:"


@pytest.mark.parametrize("call, message", [
    (lambda: kube_upgrade_problems({"items": []}, "1.36.2", "1.35.4"), "expects the cluster's Node objects as a list"),
    (lambda: kube_upgrade_plan("dc1-cp1", "1.36.2", "1.35.4"), "expects a list of hosts"),
    (lambda: kube_upgrade_plan([{"host": "x", "role": "worker", "kubelet": None}], "1.36.2", "1.35.4"), "kube_upgrade_plan: x is not a node"),
    (lambda: kube_upgrade_plan_lines({}, "1.35.4", "1.36.2"), "expects the plan"),
    (lambda: kube_upgrade_unready({"items": []}), "expects DaemonSet objects as a list"),
    (lambda: kube_upgrade_unready(None), "expects DaemonSet objects as a list"),
    (lambda: kube_upgrade_unready([], {"items": []}), "expects the cluster's Node objects as a list"),
    (lambda: kube_upgrade_unready([], [], "dc1-gpu1"), "expects the run's node names as a list of strings"),
    (lambda: kube_upgrade_unready([], [], [], [None]), "expects the cluster's Pod objects as a list"),
    (lambda: kube_upgrade_down_nodes(None), "expects the cluster's Node objects as a list"),
])
def test_bad_input_is_one_sentence(call, message):
    with pytest.raises(AnsibleFilterError, match=message):
        call()


def test_the_daemonset_check_leaves_out_the_nodes_that_are_down():
    nodes = [{"metadata": {"name": "dc1-gpu1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}},
             {"metadata": {"name": "dc1-gpu3"}, "status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}}]
    daemonsets = [{"metadata": {"namespace": "gpu-operator", "name": "dcgm"}, "status": {"desiredNumberScheduled": 2, "numberReady": 1}}]
    assert kube_upgrade_unready(daemonsets) == ["gpu-operator/dcgm (ready 1 of 2)"]
    assert kube_upgrade_unready(daemonsets, nodes, ["dc1-gpu1"]) == []
    assert kube_upgrade_down_nodes(nodes, ["dc1-gpu1"]) == ["dc1-gpu3"]
    assert kube_upgrade_down_nodes(nodes) == ["dc1-gpu3"]
