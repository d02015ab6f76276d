# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU Operator's mig-manager protocol around a MIG change, and what a wait of the change says when it runs out."""

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.mig import (
    mig_component_labels,
    mig_component_pods,
    mig_components_wait_message,
    mig_manager_wait_message,
)
from ansible_collections.onprem.gpu.plugins.module_utils._mig_cluster import component_labels, component_pods, resources_wait_message

# The components mig-manager pauses and waits for (roles/mig/vars/main.yml).
COMPONENTS = ["nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.gpu-feature-discovery", "nvidia.com/gpu.deploy.dcgm-exporter",
              "nvidia.com/gpu.deploy.dcgm", "nvidia.com/gpu.deploy.nvsm"]
APPS = ["nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter", "nvidia-dcgm", "nvidia-nvsm"]
CLIENT = "nvidia.com/gpu.deploy.client"
PAUSED = "paused-for-mig-change"


def pod(namespace, name, app=None, daemonset=True, node_selector=None, phase="Running", deleting=None, waiting=None):
    metadata = {"namespace": namespace, "name": name, "labels": {"app": app} if app else {}}
    if daemonset:
        metadata["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name.rsplit("-", 1)[0], "controller": True}]
    if deleting:
        metadata["deletionTimestamp"] = deleting
    status = {"phase": phase}
    if waiting:
        status["containerStatuses"] = [{"name": "main", "state": {"waiting": {"reason": waiting}}}]
    return {"metadata": metadata, "spec": {"nodeSelector": node_selector or {}}, "status": status}


def node(labels=None, allocatable=None):
    return {"metadata": {"name": "dc1-gpu2", "labels": labels or {}},
            "status": {"allocatable": dict({"cpu": "16", "memory": "1Gi", "pods": "110"}, **(allocatable or {}))}}


@pytest.mark.parametrize("client_value, written", [
    (None, {}),  # absent: not written, as a node without host GPU clients must not get their DaemonSets
    ("", {}),  # empty counts as absent (len(r.gpuClientDeployed) > 0)
    ("true", {CLIENT: (PAUSED, "true")}),
    ("false", {CLIENT: ("false", "false")}),
    (PAUSED, {CLIENT: (PAUSED, "true")}),  # left paused by an interrupted change
])
def test_the_client_label_is_paused_and_restored_only_where_the_node_has_it(client_value, written):
    """NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go (the mig-manager of the GPU Operator; the older
    deployments/container/reconfigure-mig.sh it replaced never touched the client label): shutdownKubernetesGPUClients and
    restartKubernetesGPUClients write the five component labels always, through maybeSetPaused / maybeSetTrue, and
    nvidia.com/gpu.deploy.client only `if len(r.gpuClientDeployed) > 0`."""
    labels = {"nvidia.com/gpu.deploy.dcgm": "false"}
    if client_value is not None:
        labels[CLIENT] = client_value
    paused, restored = component_labels(labels, COMPONENTS, [CLIENT])
    assert {name: (paused[name], restored[name]) for name in paused if name not in COMPONENTS} == written
    assert [name for name in paused if name in COMPONENTS] == COMPONENTS
    assert (paused["nvidia.com/gpu.deploy.dcgm"], restored["nvidia.com/gpu.deploy.dcgm"]) == ("false", "false")
    assert mig_component_labels(labels, COMPONENTS, [CLIENT]) == {"paused": paused, "restored": restored}
    assert mig_component_labels(labels, COMPONENTS) == {"paused": component_labels(labels, COMPONENTS)[0],
                                                        "restored": component_labels(labels, COMPONENTS)[1]}


def test_the_change_waits_out_the_components_and_the_host_gpu_clients_daemonset_pods():
    """NVIDIA/mig-parted v0.15.0 pkg/mig/reconfigure/reconfigure.go waitForPodsToBeDeleted: the pods labelled
    app=nvidia-device-plugin-daemonset, gpu-feature-discovery, nvidia-dcgm-exporter, nvidia-dcgm in the GPU clients'
    namespace, then waitForPodsWithNodeSelector: every pod of any namespace whose controller is a DaemonSet and whose
    nodeSelector has the key nvidia.com/gpu.deploy.client, whatever its value."""
    pods = [
        pod("gpu-operator", "nvidia-device-plugin-daemonset-x1", "nvidia-device-plugin-daemonset"),
        pod("gpu-operator", "nvidia-dcgm-x2", "nvidia-dcgm"),
        pod("gpu-operator", "nvidia-operator-validator-x3", "nvidia-operator-validator"),  # not paused, not waited for
        pod("other", "nvidia-dcgm-x4", "nvidia-dcgm"),  # the same app elsewhere is not the operator's
        pod("monitoring", "gpu-agent-x5", node_selector={CLIENT: "agent"}),
        pod("monitoring", "node-exporter-x6", node_selector={"kubernetes.io/os": "linux"}),
        pod("monitoring", "lone-client", daemonset=False, node_selector={CLIENT: "true"}),  # no DaemonSet controls it
    ]
    assert component_pods(pods, "gpu-operator", APPS, CLIENT) == [
        "gpu-operator/nvidia-dcgm-x2", "gpu-operator/nvidia-device-plugin-daemonset-x1", "monitoring/gpu-agent-x5"]
    assert mig_component_pods(pods, "gpu-operator", APPS) == ["gpu-operator/nvidia-dcgm-x2", "gpu-operator/nvidia-device-plugin-daemonset-x1"]
    # The validation pods mig-manager deletes (deletePod app=nvidia-cuda-validator, app=nvidia-device-plugin-validator).
    validators = pods + [pod("gpu-operator", "nvidia-cuda-validator-x7", "nvidia-cuda-validator", daemonset=False, phase="Succeeded")]
    assert mig_component_pods(validators, "gpu-operator", ["nvidia-cuda-validator", "nvidia-device-plugin-validator"]) == [
        "gpu-operator/nvidia-cuda-validator-x7"]
    with pytest.raises(AnsibleFilterError):
        mig_component_pods({"items": []}, "gpu-operator", APPS)


def test_components_that_stay_are_named_with_their_state_and_the_likely_cause():
    pods = [pod("gpu-operator", "nvidia-dcgm-x2", "nvidia-dcgm"),
            pod("monitoring", "gpu-agent-x5", node_selector={CLIENT: "true"}, deleting="2026-03-02T10:00:00Z")]
    message = mig_components_wait_message(pods, "gpu-operator", APPS, CLIENT)
    assert message.startswith("still on the node: gpu-operator/nvidia-dcgm-x2 (Running), monitoring/gpu-agent-x5 (being deleted "
                              "since 2026-03-02T10:00:00Z). Likely cause: a pod being deleted stays until the node's kubelet")
    assert "does not use the paused nvidia.com/gpu.deploy.<component> label" in message and message.endswith(".")
    only_deleting = mig_components_wait_message(pods[1:], "gpu-operator", APPS, CLIENT)
    assert "finalizers" in only_deleting and "nodeSelector" not in only_deleting
    assert "kubelet" not in mig_components_wait_message(pods[:1], "gpu-operator", APPS, CLIENT)


EXPECTED = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 48, "nvidia.com/mig-1g.10gb.me": 8}
PLUGIN = [pod("gpu-operator", "nvidia-device-plugin-daemonset-x1", "nvidia-device-plugin-daemonset")]


def test_a_node_advertising_other_names_for_as_many_devices_points_at_the_plugins_naming():
    message = resources_wait_message(EXPECTED, node({"nvidia.com/gpu.deploy.device-plugin": "true"},
                                                    {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"}), PLUGIN)
    assert message.startswith("it advertises nvidia.com/mig-1g.10gb: 56; expected nvidia.com/mig-1g.10gb: 48 and "
                              "nvidia.com/mig-1g.10gb.me: 8. The device plugin, gpu-operator/nvidia-device-plugin-daemonset-x1 "
                              "(Running), counts as many devices under other names: check its MIG strategy")


def test_a_node_advertising_fewer_devices_points_at_a_plugin_that_did_not_read_the_new_layout():
    message = resources_wait_message(EXPECTED, node(allocatable={"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "0"}), PLUGIN)
    assert message.startswith("it advertises nvidia.com/gpu: 8; expected nvidia.com/mig-1g.10gb: 48 and nvidia.com/mig-1g.10gb.me: 8. "
                              "The device plugin, gpu-operator/nvidia-device-plugin-daemonset-x1 (Running), has not registered the "
                              "new layout: it reads the GPUs when its pod starts")


@pytest.mark.parametrize("labels, pods, cause", [
    ({"nvidia.com/gpu.deploy.device-plugin": "false"}, [],
     "The device plugin does not run on the node: nvidia.com/gpu.deploy.device-plugin is 'false' there, and the GPU Operator runs "
     "the plugin only where it is 'true'."),
    ({"nvidia.com/gpu.deploy.device-plugin": PAUSED}, PLUGIN,
     f"The device plugin does not run on the node: nvidia.com/gpu.deploy.device-plugin is '{PAUSED}' there"),
    ({"nvidia.com/gpu.deploy.device-plugin": "true"}, [],
     "The device plugin does not run on the node: no pod labelled app=nvidia-device-plugin-daemonset is there"),
    ({}, [pod("gpu-operator", "nvidia-device-plugin-daemonset-x1", "nvidia-device-plugin-daemonset", phase="Pending",
              waiting="CrashLoopBackOff")],
     "The device plugin does not run on the node: gpu-operator/nvidia-device-plugin-daemonset-x1 (CrashLoopBackOff)."),
    ({}, PLUGIN, "The device plugin, gpu-operator/nvidia-device-plugin-daemonset-x1 (Running), registered no device with kubelet"),
])
def test_a_node_advertising_no_gpu_resource_says_why_the_plugin_is_not_there(labels, pods, cause):
    # kubelet keeps a resource whose plugin went away at 0: that is advertising nothing.
    seen = node(labels, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0", "nvidia.com/hostdev": "0"})
    message = resources_wait_message(EXPECTED, seen, pods)
    assert message.startswith("no nvidia.com/gpu or nvidia.com/mig-* resource was advertised; expected nvidia.com/mig-1g.10gb: 48 "
                              f"and nvidia.com/mig-1g.10gb.me: 8. {cause}")


@pytest.mark.parametrize("labels, pods, seen, cause", [
    ({}, [], "nvidia.com/mig.config.state is not set",
     "No mig-manager pod (app=nvidia-mig-manager) runs on the node: the GPU Operator runs it where nvidia.com/gpu.deploy.mig-manager is "
     "'true' (not set here)"),
    ({"nvidia.com/mig.config.state": "pending", "nvidia.com/gpu.deploy.mig-manager": "false"},
     [pod("gpu-operator", "nvidia-mig-manager-x1", "nvidia-mig-manager", deleting="2026-03-02T10:00:00Z")],
     "nvidia.com/mig.config.state is 'pending'",
     "No mig-manager pod (app=nvidia-mig-manager) runs on the node (there is gpu-operator/nvidia-mig-manager-x1 (being deleted "
     "since 2026-03-02T10:00:00Z)): the GPU Operator runs it where nvidia.com/gpu.deploy.mig-manager is 'true' (here 'false')"),
    ({"nvidia.com/mig.config.state": "rebooting"}, [pod("gpu-operator", "nvidia-mig-manager-x1", "nvidia-mig-manager")],
     "nvidia.com/mig.config.state is 'rebooting'", "The mig-manager rebooted the node for a MIG mode change"),
    # mig-manager v0.15.0 Reconfigure.Run: `return fmt.Errorf("failed to wait for pods to be deleted: ...")` without setState.
    ({"nvidia.com/mig.config.state": "pending", "nvidia.com/gpu.deploy.dcgm": PAUSED, "nvidia.com/gpu.deploy.device-plugin": PAUSED,
      "nvidia.com/gpu.deploy.nvsm": "false"}, [pod("gpu-operator", "nvidia-mig-manager-x1", "nvidia-mig-manager")],
     "nvidia.com/mig.config.state is 'pending'",
     f"The mig-manager stopped part-way and left nvidia.com/gpu.deploy.dcgm, nvidia.com/gpu.deploy.device-plugin at {PAUSED}"),
    ({"nvidia.com/mig.config.state": "pending"}, [pod("gpu-operator", "nvidia-mig-manager-x1", "nvidia-mig-manager")],
     "nvidia.com/mig.config.state is 'pending'",
     "The mig-manager, gpu-operator/nvidia-mig-manager-x1 (Running), has not finished"),
])
def test_a_mig_manager_without_a_verdict_is_explained_by_what_it_left_on_the_node(labels, pods, seen, cause):
    message = mig_manager_wait_message(node(labels), pods)
    assert message.startswith(f"{seen}; expected 'success' or 'failed'. {cause}") and message.endswith(".")
    with pytest.raises(AnsibleFilterError):
        mig_manager_wait_message([])
