# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A node taken out of service around a disruptive operation: who holds it, and whether it is back in shape."""

from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.onprem.gpu.plugins.module_utils._maintenance import (
    conflict, gpu_resources, held_by, node_problems, ready_status, wait_message)

EXPECTED = {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}
NOT_READY = {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "cni plugin not initialized"}
UNKNOWN = {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status."}
READY = {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}


def node(labels=None, annotations=None, ready="ready", allocatable=None, name="dc1-gpu2"):
    condition = READY if ready == "ready" else ready
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "status": {"conditions": [condition] if condition else [], "allocatable": {"cpu": "16", **(allocatable or {})}}}


def held(value, operation=None):
    annotations = {"onprem.gpu/maintenance-since": "2026-05-04T10:00:00Z", "onprem.gpu/maintenance-reason": "driver 580.95.05"}
    if operation:
        annotations["onprem.gpu/maintenance-operation"] = operation
    return node({"onprem.gpu/maintenance": value}, annotations)


@pytest.mark.parametrize("condition, status", [(READY, "True"), (NOT_READY, "False"), (UNKNOWN, "Unknown"), (None, "Unknown")],
                         ids=["ready", "not ready", "unknown", "no condition"])
def test_the_ready_status_is_read_from_the_ready_condition(condition, status):
    assert ready_status(node(ready=condition)) == status
    assert ready_status({}) == "Unknown"


@pytest.mark.parametrize(
    "subject",
    [node(), held("mig-reconfigure"), held("mig-reconfigure", "mig-reconfigure"), held("failed", "mig-reconfigure")],
    ids=["free", "held by the same operation, before annotations", "held by the same operation", "left failed by the same operation"],
)
def test_a_free_node_or_one_the_same_operation_holds_or_left_failed_is_taken(subject):
    assert conflict(subject, "mig-reconfigure") is None


def test_a_node_another_operation_holds_is_refused_with_what_its_annotations_say():
    assert conflict(held("driver-upgrade", "driver-upgrade"), "mig-reconfigure") == (
        "dc1-gpu2 is held by driver-upgrade (since 2026-05-04T10:00:00Z; driver 580.95.05): a run of it is under way or was"
        " interrupted; let it finish or run it again, or remove the mark (kubectl label node dc1-gpu2 onprem.gpu/maintenance-)"
        " once the node is in order, before mig-reconfigure takes it; nothing was changed.")


def test_a_node_another_operation_left_failed_is_refused():
    assert conflict(held("failed", "driver-upgrade"), "mig-reconfigure") == (
        "dc1-gpu2 is out of service after a failed driver-upgrade (since 2026-05-04T10:00:00Z; driver 580.95.05): put it in"
        " order, then remove the mark (kubectl label node dc1-gpu2 onprem.gpu/maintenance-) before mig-reconfigure takes it;"
        " nothing was changed.")


def test_the_label_names_the_holder_whatever_an_earlier_failure_left_in_the_annotation():
    assert conflict(held("driver-upgrade", "mig-reconfigure"), "mig-reconfigure").startswith("dc1-gpu2 is held by driver-upgrade: a run")


def test_a_failed_mark_without_its_operation_is_refused_as_an_unknown_operation():
    refused = conflict(node({"onprem.gpu/maintenance": "failed"}), "mig-reconfigure")
    assert refused.startswith("dc1-gpu2 is out of service after a failed operation: put it in order")


def test_a_node_in_shape_has_no_problem():
    assert node_problems(node(allocatable={"nvidia.com/mig-1g.10gb": "56"}), EXPECTED, ready_before=True) == []
    assert node_problems(node(), {}, ready_before=True) == []


@pytest.mark.parametrize(
    "subject, ready_before, problems",
    [
        (node(ready=NOT_READY, allocatable={"nvidia.com/mig-1g.10gb": "56"}), True, ["Ready is False"]),
        (node(ready=NOT_READY, allocatable={"nvidia.com/mig-1g.10gb": "56"}), False, []),
        (node(ready=UNKNOWN, allocatable={"nvidia.com/mig-1g.10gb": "56"}), False, ["Ready is Unknown"]),
        (node(allocatable={"nvidia.com/gpu": "8"}), True,
         ["nvidia.com/gpu: advertised 8, expected 0", "nvidia.com/mig-1g.10gb: advertised 0, expected 56"]),
    ],
    ids=["not ready where it was", "not ready as before", "kubelet silent", "old resources"],
)
def test_each_way_a_node_is_not_back_is_one_phrase(subject, ready_before, problems):
    assert node_problems(subject, EXPECTED, ready_before) == problems


def test_the_wait_message_keeps_the_resources_message_after_its_head():
    message = wait_message(node(ready=NOT_READY, labels={"nvidia.com/gpu.deploy.device-plugin": "false"}), EXPECTED, ready_before=False,
                           plugin_pods=[], expected_name="its new MIG resources", timeout=20, setting="mig_resources_timeout")
    assert message == (
        "dc1-gpu2 did not advertise its new MIG resources within 20 s (mig_resources_timeout): no nvidia.com/gpu or"
        " nvidia.com/mig-* resource was advertised; expected nvidia.com/mig-1g.10gb: 56. The device plugin does not run on the"
        " node: nvidia.com/gpu.deploy.device-plugin is 'false' there, and the GPU Operator runs the plugin only where it is 'true'.")


def test_the_wait_message_names_a_ready_condition_that_did_not_come_back():
    message = wait_message(node(ready=NOT_READY, allocatable={"nvidia.com/mig-1g.10gb": "56"}), EXPECTED, ready_before=True, timeout=300)
    assert message == (
        "dc1-gpu2 did not come back Ready within 300 s (maintenance_check_timeout): Its Ready condition is False (KubeletNotReady:"
        " cni plugin not initialized), where it was True when the node was taken out of service; kubectl describe node and the"
        " kubelet's journal say why.")


def test_the_wait_message_adds_a_silent_kubelet_to_missing_resources():
    message = wait_message(node(ready=UNKNOWN, allocatable={"nvidia.com/gpu": "8"}), EXPECTED, timeout=30)
    assert message.startswith("dc1-gpu2 did not advertise the GPU resources expected within 30 s (maintenance_check_timeout): it advertises")
    assert message.endswith("Its Ready condition is Unknown (NodeStatusUnknown: Kubelet stopped posting node status.): its kubelet does not"
                            " post the node's status; see journalctl -u kubelet on the node.")


def test_the_wait_message_of_a_node_that_could_not_be_read_names_it():
    assert wait_message({}, EXPECTED, node_name="dc1-gpu2", timeout=300) == (
        "dc1-gpu2 could not be read from its cluster within 300 s (maintenance_check_timeout): the API server or the controller's"
        " kubeconfig is at fault.")


# ---------------------------------------------------------------------------------------------------------------
# a Kubernetes upgrade: the kubelet's version, and the GPU resources the node had


def upgraded_node(version="v1.36.2", ready="True", allocatable=None):
    return {"metadata": {"name": "dc1-gpu1"},
            "status": {"conditions": [{"type": "Ready", "status": ready}], "nodeInfo": {"kubeletVersion": version},
                       "allocatable": allocatable if allocatable is not None else {"cpu": "16", "nvidia.com/gpu": "8"}}}


def test_the_kubelet_must_report_the_version_expected():
    assert node_problems(upgraded_node(), {}, True, "1.36.2") == []
    assert node_problems(upgraded_node(), {}, True, "v1.36.2") == []
    assert node_problems(upgraded_node("v1.35.4"), {}, True, "1.36.2") == ["its kubelet reports v1.35.4, not v1.36.2"]
    assert node_problems(upgraded_node("v1.35.4"), {}, True) == []
    assert node_problems({"metadata": {"name": "x"}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}, {}, True, "1.36.2") == [
        "its kubelet reports no version, not v1.36.2"]


def test_a_node_back_at_the_old_version_says_where_to_look():
    message = wait_message(upgraded_node("v1.35.4"), {}, True, timeout=300, expected_version="1.36.2")
    assert message == ("dc1-gpu1 did not come back at v1.36.2 within 300 s (maintenance_check_timeout): its kubelet reports v1.35.4, not v1.36.2;"
                       " the kubelet package was upgraded but the kubelet that runs is another: see systemctl status kubelet and journalctl -u"
                       " kubelet on the node.")
    assert wait_message(upgraded_node(ready="False"), {}, True, timeout=300, expected_version="1.36.2").startswith(
        "dc1-gpu1 did not come back Ready within 300 s")


def test_the_gpu_resources_of_a_node_are_its_nvidia_gpu_and_mig_counts():
    node = upgraded_node(allocatable={"cpu": "16", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56", "nvidia.com/other": "1",
                                      "nvidia.com/mig-bad": "x"})
    assert gpu_resources(node) == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}
    assert gpu_resources({}) == {}
    assert node_problems(upgraded_node(allocatable={"nvidia.com/gpu": "7"}), {"nvidia.com/gpu": 8}, True, "1.36.2") == [
        "nvidia.com/gpu: advertised 7, expected 8"]


def healthy_or_not(status, reason="Xid", message="GPU 3: Xid 79 (GPU has fallen off the bus)"):
    back = upgraded_node()
    back["status"]["conditions"].append({"type": "GPUHealthy", "status": status, "reason": reason, "message": message})
    return back


def test_a_node_its_health_agent_reports_unhealthy_is_not_back_when_health_is_checked():
    failing = healthy_or_not("False")
    phrase = "its GPU health agent reports GPUHealthy False (Xid: GPU 3: Xid 79 (GPU has fallen off the bus))"
    assert node_problems(failing, {"nvidia.com/gpu": 8}, True, "1.36.2", check_health=True) == [phrase]
    assert node_problems(failing, {"nvidia.com/gpu": 8}, True, "1.36.2") == []
    # Unknown is a check that could not run, and a node without the condition runs no agent: neither holds the node.
    assert node_problems(healthy_or_not("Unknown", "GPUHealthCheckStale"), {}, True, check_health=True) == []
    assert node_problems(healthy_or_not("True", "GPUsHealthy", ""), {}, True, check_health=True) == []
    assert node_problems(upgraded_node(), {}, True, check_health=True) == []
    message = wait_message(failing, {"nvidia.com/gpu": 8}, True, timeout=300, check_health=True)
    assert message == (f"dc1-gpu1 is not healthy after the operation: {phrase}; the node stays out of service until it is fixed"
                       " (see journalctl -u onprem-gpu-health-agent on the node and kubectl describe node dc1-gpu1).")


def test_the_health_agent_unit_maintenance_starts_is_the_one_node_health_installs():
    roles = pathlib.Path(__file__).resolve().parents[4] / "roles"
    maintenance = yaml.safe_load((roles / "maintenance/vars/main.yml").read_text())
    node_health = yaml.safe_load((roles / "node_health/vars/main.yml").read_text())
    assert maintenance["__maintenance_health_agent_unit"] == node_health["__node_health_units"]["agent"] + ".service"


def test_the_operation_that_holds_a_node_or_left_it_failed_takes_it_back_through_the_flow():
    assert held_by(held("mig-reconfigure"), "mig-reconfigure")
    assert held_by(held("failed", "mig-reconfigure"), "mig-reconfigure")
    assert not held_by(held("failed", "upgrade-driver"), "mig-reconfigure")
    assert not held_by(held("failed"), "mig-reconfigure")
    assert not held_by(held("upgrade-driver"), "mig-reconfigure")
    assert not held_by(node(), "mig-reconfigure") and not held_by({}, "mig-reconfigure")
