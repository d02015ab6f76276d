# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A kubeadm cluster's upgrade: the refusals (kubeadm's one minor at a time, the version skew policy) and the plan, node by
node, read from what the cluster says now so that a stopped run is continued."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._kube_upgrade import (
    KubeUpgradeInputError, down_nodes, image_version, needs_drain, node_steps, parse_version, plan_lines, unready_daemonsets, upgrade_plan,
    version_problems)

OLD = {"kubeadm": "1.35.4-1.1", "kubelet": "1.35.4-1.1", "kubectl": "1.35.4-1.1"}
NEW = {"kubeadm": "1.36.2-1.1", "kubelet": "1.36.2-1.1", "kubectl": "1.36.2-1.1"}
KUBELETS = {"dc1-cp1": "v1.35.4", "dc1-gpu1": "v1.35.4", "dc1-gpu2": "v1.35.4"}


def host(name, role, kubelet="v1.35.4", packages=None, apiserver=None):
    return {"host": name, "node": name, "role": role, "kubelet": kubelet, "packages": packages or OLD, "apiserver": apiserver}


@pytest.mark.parametrize("text, expected", [
    ("1.36.2", (1, 36, 2)), ("v1.36.2", (1, 36, 2)), ("1.36.2-1.1", (1, 36, 2)), (" v1.35.4 ", (1, 35, 4)),
    ("1.36", None), ("latest", None), (None, None), (1.36, None),
])
def test_versions_are_read_from_kube_version_node_status_and_package_versions(text, expected):
    assert parse_version(text) == expected


def test_an_image_tag_gives_the_component_version():
    assert image_version("registry.k8s.io/kube-apiserver:v1.36.2") == (1, 36, 2)
    assert image_version("mirror.example:5000/kube-apiserver") is None
    assert image_version(None) is None


def test_the_next_minor_and_a_patch_release_are_allowed():
    assert version_problems("1.36.2", "v1.35.4", KUBELETS) == []
    assert version_problems("1.35.9", "v1.35.4", KUBELETS) == []
    assert version_problems("1.35.4", "v1.35.4", KUBELETS) == []


@pytest.mark.parametrize("target, message", [
    ("1.37.0", "kube_version 1.37.0 skips a minor: the cluster runs 1.35.4 and kubeadm upgrades one minor at a time, so go to 1.36 first; "
               "nothing was changed."),
    ("1.34.9", "kube_version 1.34.9 is older than the cluster's 1.35.4: kubeadm upgrades, it does not downgrade; nothing was changed."),
    ("1.35.1", "kube_version 1.35.1 is older than the cluster's 1.35.4: kubeadm upgrades, it does not downgrade; nothing was changed."),
    ("2.0.0", "kube_version 2.0.0 is older than the cluster's 1.35.4: kubeadm upgrades, it does not downgrade; nothing was changed."),
    ("1.36", "kube_version must be a Kubernetes version such as 1.36.2 (major.minor.patch), not '1.36': nothing was changed."),
    ("1.36.2-1.1", "kube_version must be a Kubernetes version such as 1.36.2 (major.minor.patch), not '1.36.2-1.1': nothing was changed."),
])
def test_a_skipped_minor_a_downgrade_and_a_bad_version_are_refused_in_one_sentence(target, message):
    assert version_problems(target, "v1.35.4", KUBELETS) == [message]


def test_the_kubelet_skew_policy_is_enforced_on_every_node_of_the_cluster():
    kubelets = dict(KUBELETS, old1="v1.32.0", old2="v1.33.1", ahead="v1.37.0", unknown="")
    problems = version_problems("1.36.2", "1.35.4", kubelets)
    assert problems == [
        "kube_version 1.36.2 is older than the kubelet of ahead (1.37.0): a kubelet may not be newer than the API server (version skew policy); "
        "nothing was changed.",
        "kube_version 1.36.2 would leave the kubelet of old1 (1.32.0) more than 3 minors behind the API server, which the version skew policy "
        "forbids: upgrade those nodes first; nothing was changed.",
    ]


def test_a_run_without_the_first_control_plane_is_refused_until_the_control_plane_is_upgraded():
    assert version_problems("1.36.2", "1.35.4", KUBELETS, first_control_plane_in_play=False)[0].startswith(
        "the cluster's control plane runs 1.35.4, not 1.36.2: its first control plane upgrades first")
    assert version_problems("1.36.2", "v1.36.2", KUBELETS, first_control_plane_in_play=False) == []


def test_a_cluster_without_a_version_in_kubeadm_config_is_refused():
    assert version_problems("1.36.2", None, KUBELETS) == [
        "the cluster's kubeadm-config ConfigMap holds no Kubernetes version (None), so its upgrade cannot be planned: nothing was changed."]


def test_the_plan_takes_the_first_control_plane_then_the_others_then_the_workers():
    hosts = [host("w1", "worker"), host("cp2", "control_plane", apiserver="registry.k8s.io/kube-apiserver:v1.35.4"),
             host("cp1", "first_control_plane", apiserver="registry.k8s.io/kube-apiserver:v1.35.4"), host("w2", "worker")]
    plan = upgrade_plan("1.36.2", "v1.35.4", hosts)
    assert [entry["host"] for entry in plan] == ["cp1", "cp2", "w1", "w2"]
    assert plan[0]["steps"] == ["etcd snapshot", "kubeadm package", "kubeadm upgrade apply", "kubelet and kubectl packages", "kubelet restart"]
    assert plan[1]["steps"] == ["kubeadm package", "kubeadm upgrade node", "kubelet and kubectl packages", "kubelet restart"]
    assert plan[2]["steps"] == ["kubeadm package", "kubeadm upgrade node", "kubelet and kubectl packages", "kubelet restart"]
    assert (plan[2]["from"], plan[2]["to"]) == ("1.35.4", "1.36.2")
    assert plan_lines(plan, "v1.35.4", "1.36.2") == [
        "Upgrade from 1.35.4 to 1.36.2, in this order:",
        "1. cp1 (first control plane): kubelet 1.35.4 -> 1.36.2: etcd snapshot, drain, kubeadm package, kubeadm upgrade apply, "
        "kubelet and kubectl packages, kubelet restart, uncordon",
        "2. cp2 (control plane): kubelet 1.35.4 -> 1.36.2: drain, kubeadm package, kubeadm upgrade node, kubelet and kubectl packages, "
        "kubelet restart, uncordon",
        "3. w1 (worker): kubelet 1.35.4 -> 1.36.2: drain, kubeadm package, kubeadm upgrade node, kubelet and kubectl packages, kubelet restart, uncordon",
        "4. w2 (worker): kubelet 1.35.4 -> 1.36.2: drain, kubeadm package, kubeadm upgrade node, kubelet and kubectl packages, kubelet restart, uncordon",
    ]


def test_the_plan_orders_each_group_by_name_whatever_the_play_order():
    # Ansible's host order through nested groups changes between processes: the plan (and the plays after it) do not.
    workers = [host(name, "worker") for name in ("dc1-gpu10", "dc1-gpu2", "dc1-gpu1")]
    control_planes = [host("dc1-cp3", "control_plane", apiserver="registry.k8s.io/kube-apiserver:v1.35.4"),
                      host("dc1-cp2", "first_control_plane", apiserver="registry.k8s.io/kube-apiserver:v1.35.4"),
                      host("dc1-cp1", "control_plane", apiserver="registry.k8s.io/kube-apiserver:v1.35.4")]
    expected = ["dc1-cp2", "dc1-cp1", "dc1-cp3", "dc1-gpu1", "dc1-gpu2", "dc1-gpu10"]
    assert [entry["host"] for entry in upgrade_plan("1.36.2", "v1.35.4", workers + control_planes)] == expected
    assert [entry["host"] for entry in upgrade_plan("1.36.2", "v1.35.4", list(reversed(control_planes + workers)))] == expected


def test_a_rerun_after_a_worker_failed_continues_where_it_stopped():
    # The control plane and w1 were upgraded; w2's kubeadm upgrade node failed after its kubeadm package was upgraded.
    hosts = [host("cp1", "first_control_plane", "v1.36.2", NEW, "registry.k8s.io/kube-apiserver:v1.36.2"),
             host("w1", "worker", "v1.36.2", NEW), host("w2", "worker", "v1.35.4", dict(OLD, kubeadm="1.36.2-1.1"))]
    plan = upgrade_plan("1.36.2", "v1.36.2", hosts)
    assert [entry["steps"] for entry in plan] == [[], [], ["kubeadm upgrade node", "kubelet and kubectl packages", "kubelet restart"]]
    lines = plan_lines(plan, "v1.36.2", "1.36.2")
    assert lines[1:3] == ["1. cp1 (first control plane): at 1.36.2 already, left alone", "2. w1 (worker): at 1.36.2 already, left alone"]


def test_a_second_run_plans_nothing():
    hosts = [host("cp1", "first_control_plane", "v1.36.2", NEW, "registry.k8s.io/kube-apiserver:v1.36.2"), host("w1", "worker", "v1.36.2", NEW)]
    plan = upgrade_plan("1.36.2", "v1.36.2", hosts)
    assert all(entry["steps"] == [] for entry in plan)
    assert plan_lines(plan, "v1.36.2", "1.36.2")[-1] == "Nothing to do: every node is at the version."


def test_a_kubelet_upgraded_but_not_restarted_is_restarted():
    steps = node_steps("1.36.2", "v1.36.2", host("w1", "worker", "v1.35.4", NEW))
    assert steps == ["kubeadm upgrade node", "kubelet and kubectl packages", "kubelet restart"]


def test_only_kubeadm_behind_is_not_drained():
    steps = node_steps("1.36.2", "v1.36.2", host("w1", "worker", "v1.36.2", dict(NEW, kubeadm="1.35.4-1.1")))
    assert steps == ["kubeadm package"]
    assert not needs_drain(steps)
    assert not needs_drain(["etcd snapshot"])
    assert needs_drain(["kubeadm package", "kubelet restart"])


def test_a_host_that_is_not_a_node_or_has_no_role_is_refused():
    with pytest.raises(KubeUpgradeInputError, match="w9 is not a node of its cluster"):
        node_steps("1.36.2", "v1.35.4", host("w9", "worker", None))
    with pytest.raises(KubeUpgradeInputError, match="not 'etcd'"):
        node_steps("1.36.2", "v1.35.4", host("e1", "etcd"))


def test_daemonsets_not_ready_on_every_node_are_named():
    daemonsets = [{"metadata": {"namespace": "kube-system", "name": "calico-node"}, "status": {"desiredNumberScheduled": 3, "numberReady": 2}},
                  {"metadata": {"namespace": "gpu-operator", "name": "nvidia-device-plugin-daemonset"},
                   "status": {"desiredNumberScheduled": 2, "numberReady": 2}},
                  {"metadata": {"namespace": "x", "name": "idle"}, "status": {"desiredNumberScheduled": 0}}]
    assert unready_daemonsets(daemonsets) == ["kube-system/calico-node (ready 2 of 3)"]


def node(name, ready):
    return {"metadata": {"name": name}, "status": {"conditions": [{"type": "MemoryPressure", "status": "False"},
                                                                  {"type": "Ready", "status": ready}]}}


def daemon_pod(daemonset, node_name, ready):
    return {"metadata": {"namespace": "gpu-operator", "name": f"{daemonset}-{node_name}",
                         "ownerReferences": [{"kind": "DaemonSet", "name": daemonset, "controller": True}]},
            "spec": {"nodeName": node_name}, "status": {"conditions": [{"type": "Ready", "status": ready}]}}


DCGM = {"metadata": {"namespace": "gpu-operator", "name": "nvidia-dcgm"}, "status": {"desiredNumberScheduled": 4, "numberReady": 2}}
NODES = [node("dc1-cp1", "True"), node("dc1-gpu1", "True"), node("dc1-gpu3", "Unknown"), node("dc1-gpu4", "False")]


def test_nodes_outside_the_run_that_are_not_ready_are_down():
    assert down_nodes(NODES, ["dc1-cp1", "dc1-gpu1"]) == ["dc1-gpu3", "dc1-gpu4"]
    # A node of the run is never left out: the upgrade must bring it back.
    assert down_nodes(NODES, ["dc1-gpu3"]) == ["dc1-gpu4"]
    assert down_nodes([{"metadata": {"name": "no-status"}}]) == ["no-status"]


def test_a_shortfall_the_down_nodes_explain_does_not_hold_the_upgrade_back():
    run = ["dc1-cp1", "dc1-gpu1"]
    assert unready_daemonsets([DCGM], NODES, run) == []
    # Without the nodes the shortfall stands, as before.
    assert unready_daemonsets([DCGM]) == ["gpu-operator/nvidia-dcgm (ready 2 of 4)"]
    # A down node that still has a ready pod of the DaemonSet explains nothing.
    pods = [daemon_pod("nvidia-dcgm", "dc1-gpu3", "True")]
    assert unready_daemonsets([DCGM], NODES, run, pods) == ["gpu-operator/nvidia-dcgm (ready 2 of 4)"]
    # One more missing pod than there are down nodes is named.
    short = {"metadata": DCGM["metadata"], "status": {"desiredNumberScheduled": 4, "numberReady": 1}}
    assert unready_daemonsets([short], NODES, run) == ["gpu-operator/nvidia-dcgm (ready 1 of 4)"]


def test_a_daemonset_pod_not_ready_on_a_node_of_the_run_is_named_with_its_node():
    run = ["dc1-cp1", "dc1-gpu1"]
    pods = [daemon_pod("nvidia-dcgm", "dc1-gpu1", "False"), daemon_pod("nvidia-dcgm", "dc1-cp1", "True"),
            daemon_pod("nvidia-dcgm", "dc1-gpu3", "False"),
            {"metadata": {"namespace": "team-a", "name": "job-1", "ownerReferences": [{"kind": "Job", "name": "job", "controller": True}]},
             "spec": {"nodeName": "dc1-gpu1"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}]
    assert unready_daemonsets([DCGM], NODES, run, pods) == ["gpu-operator/nvidia-dcgm on dc1-gpu1 (pod not ready)"]
    # A second pod of the DaemonSet that is ready on that node (a rolling update's replacement) is enough.
    pods.append(daemon_pod("nvidia-dcgm", "dc1-gpu1", "True"))
    assert unready_daemonsets([DCGM], NODES, run, pods) == []
