# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The taint controller: taint on False, hold-down before release, owners, Unknown, the circuit breaker."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._node_health_taint import max_tainted, metrics, plan, run_controller

NOW = 1761275642.0  # 2025-10-24T03:14:02Z
STAMP = "2025-10-24T03:14:00Z"
SETTINGS = {"hold_down_seconds": 60, "max_unhealthy_percent": 10, "stale_seconds": 120}
TAINT = {"key": "onprem.gpu/unhealthy", "value": "xid", "effect": "NoSchedule"}


def node(name, status="True", reason="GPUsHealthy", taints=(), annotations=None, heartbeat=STAMP, transition=STAMP):
    conditions = [{"type": "Ready", "status": "True"}]
    if status is not None:
        conditions.append({"type": "GPUHealthy", "status": status, "reason": reason, "lastHeartbeatTime": heartbeat,
                           "lastTransitionTime": transition})
    return {"metadata": {"name": name, "resourceVersion": "7", "annotations": dict(annotations or {})},
            "spec": {"taints": list(taints)}, "status": {"conditions": conditions}}


def actions(decided):
    return [(entry["node"], entry["action"], entry["code"]) for entry in decided["patches"]]


@pytest.mark.parametrize("count, percent, limit", [(1, 10, 1), (2, 10, 1), (10, 10, 1), (19, 10, 1), (20, 10, 2), (100, 10, 10),
                                                   (100, 0, 1), (8, 50, 4)])
def test_max_tainted(count, percent, limit):
    assert max_tainted(count, percent) == limit


def test_a_failing_node_is_tainted_and_owned():
    decided = plan([node("a", "False", "Xid"), node("b")], NOW, SETTINGS)
    assert actions(decided) == [("a", "taint", "xid")]
    assert decided["patches"][0]["patch"] == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "7"},
        {"op": "add", "path": "/spec/taints", "value": [TAINT]},
        {"op": "add", "path": "/metadata/annotations", "value": {"onprem.gpu/unhealthy-owner": "node-health"}}]
    assert decided["breaker"] == {"open": False, "gpu_nodes": 2, "limit": 1, "tainted": 1, "held_back": [], "unhealthy": 1,
                                  "unknown": 0, "in_maintenance": []}


def test_another_owners_taint_is_kept_and_never_removed():
    operator = node("a", "True", taints=[dict(TAINT, value="operator")])
    acceptance = node("b", "False", "NvlinkInactive", taints=[dict(TAINT, value="acceptance-pending")],
                      annotations={"onprem.gpu/unhealthy-owner": "acceptance"})
    assert plan([operator, acceptance], NOW, SETTINGS)["patches"] == []


def test_hold_down_then_release():
    ours = {"onprem.gpu/unhealthy-owner": "node-health"}
    first = plan([node("a", taints=[TAINT], annotations=ours)], NOW, SETTINGS)
    assert actions(first) == [("a", "hold", "xid")]
    assert first["patches"][0]["patch"][1:] == [{"op": "add", "path": "/metadata/annotations/onprem.gpu~1healthy-since",
                                                 "value": "2025-10-24T03:14:02Z"}]
    waiting = dict(ours, **{"onprem.gpu/healthy-since": "2025-10-24T03:13:30Z"})
    assert plan([node("a", taints=[TAINT], annotations=waiting)], NOW, SETTINGS)["patches"] == []
    done = dict(ours, **{"onprem.gpu/healthy-since": "2025-10-24T03:13:00Z"})
    other = {"key": "pool", "value": "training", "effect": "NoSchedule"}
    released = plan([node("a", taints=[other, TAINT], annotations=done)], NOW, SETTINGS)
    assert actions(released) == [("a", "remove", "xid")]
    assert released["patches"][0]["patch"][1:] == [
        {"op": "add", "path": "/spec/taints", "value": [other]},
        {"op": "remove", "path": "/metadata/annotations/onprem.gpu~1unhealthy-owner"},
        {"op": "remove", "path": "/metadata/annotations/onprem.gpu~1healthy-since"}]


def test_failing_again_during_the_hold_down_restarts_it_and_follows_the_code():
    annotations = {"onprem.gpu/unhealthy-owner": "node-health", "onprem.gpu/healthy-since": STAMP}
    decided = plan([node("a", "False", "GpuMissing", taints=[TAINT], annotations=annotations)], NOW, SETTINGS)
    assert actions(decided) == [("a", "update", "gpu_missing")]
    assert decided["patches"][0]["patch"][1:] == [
        {"op": "add", "path": "/spec/taints", "value": [dict(TAINT, value="gpu_missing")]},
        {"op": "remove", "path": "/metadata/annotations/onprem.gpu~1healthy-since"}]


def test_unknown_changes_no_taint_and_a_stale_heartbeat_is_unknown():
    ours = {"onprem.gpu/unhealthy-owner": "node-health"}
    decided = plan([node("a", "Unknown", "GPUHealthCheckFailed"), node("b", "False", "Xid", heartbeat="2025-10-24T03:00:00Z"),
                    node("c", "True", taints=[TAINT], annotations=dict(ours, **{"onprem.gpu/healthy-since": "2025-10-24T03:00:00Z"}),
                         heartbeat="2025-10-24T03:00:00Z")], NOW, SETTINGS)
    assert actions(decided) == [("c", "hold", "xid")]  # the hold-down restarts: no release on a stale True
    assert [(entry["node"], entry["condition"]["status"], entry["condition"]["reason"]) for entry in decided["conditions"]] == [
        ("b", "Unknown", "GPUHealthCheckStale"), ("c", "Unknown", "GPUHealthCheckStale")]
    assert (decided["breaker"]["unknown"], decided["breaker"]["open"]) == (3, False)


def test_the_circuit_breaker_stops_after_the_limit():
    nodes = [node(f"n{index:02d}", "False", "Xid", transition=f"2025-10-24T03:{index:02d}:00Z") for index in range(20, 0, -1)]
    nodes += [node(f"ok{index}") for index in range(10)]
    decided = plan(nodes, NOW, SETTINGS)
    # 30 GPU nodes at 10 %: 3 may be tainted; the three earliest failures are.
    assert actions(decided) == [("n01", "taint", "xid"), ("n02", "taint", "xid"), ("n03", "taint", "xid")]
    assert decided["breaker"]["open"] is True and decided["breaker"]["held_back"][:2] == ["n04", "n05"]
    assert len(decided["breaker"]["held_back"]) == 17
    text = metrics("dc1", decided["breaker"], NOW)
    assert 'onprem_gpu_health_circuit_breaker_open{cluster="dc1"} 1' in text
    assert 'onprem_gpu_health_held_back_nodes{cluster="dc1"} 17' in text


def test_taints_already_held_count_against_the_limit():
    ours = {"onprem.gpu/unhealthy-owner": "node-health"}
    decided = plan([node("a", "False", "Xid", taints=[TAINT], annotations=ours), node("b", "False", "Xid")], NOW, SETTINGS)
    assert decided["patches"] == [] and decided["breaker"]["held_back"] == ["b"]


def test_a_node_an_operation_holds_gets_no_new_taint_and_one_it_left_failed_does():
    # roles/maintenance marks the node it takes out of service; a driver upgrade unloads the modules on purpose.
    upgrading = node("a", "False", "NvidiaSmiFailed")
    upgrading["metadata"]["labels"] = {"onprem.gpu/maintenance": "upgrade-driver"}
    failed = node("b", "False", "Xid")
    failed["metadata"]["labels"] = {"onprem.gpu/maintenance": "failed"}
    ours = {"onprem.gpu/unhealthy-owner": "node-health"}
    tainted_before = node("c", "False", "Xid", taints=[TAINT], annotations=ours)
    tainted_before["metadata"]["labels"] = {"onprem.gpu/maintenance": "upgrade-kubernetes"}
    decided = plan([upgrading, failed, tainted_before] + [node(f"ok{index}") for index in range(17)], NOW,
                   dict(SETTINGS, max_unhealthy_percent=50))
    assert actions(decided) == [("b", "taint", "xid")]
    assert decided["breaker"]["in_maintenance"] == ["a"] and decided["breaker"]["tainted"] == 2
    assert 'onprem_gpu_health_maintenance_nodes{cluster="dc1"} 1' in metrics("dc1", decided["breaker"], NOW)


def test_nodes_without_the_condition_are_not_gpu_nodes():
    decided = plan([node("cp", status=None), node("a", "False", "Xid")], NOW, SETTINGS)
    assert decided["breaker"]["gpu_nodes"] == 1 and actions(decided) == [("a", "taint", "xid")]


class FakeApi:
    def __init__(self, nodes, refuse=()):
        self.nodes, self.refuse, self.writes = nodes, refuse, []

    def call(self, method, path):
        assert (method, path) == ("GET", "/api/v1/nodes")
        return {"items": self.nodes}

    def request(self, method, path, body, content_type):
        self.writes.append((method, path, content_type))
        return (409, {"message": "the object has been modified"}) if path in self.refuse else (200, {})


def test_run_controller_counts_refused_writes():
    api = FakeApi([node("a", "False", "Xid"), node("b", "False", "Xid", heartbeat="2025-10-24T03:00:00Z")], refuse=("/api/v1/nodes/a",))
    lines = []
    decided, errors = run_controller(api, SETTINGS, lambda: NOW, lines.append)
    assert api.writes == [("PATCH", "/api/v1/nodes/b/status", "application/strategic-merge-patch+json"),
                          ("PATCH", "/api/v1/nodes/a", "application/json-patch+json")]
    assert errors == 1 and decided["breaker"]["open"] is False
    assert lines == ["b: GPUHealthy Unknown (GPUHealthCheckStale)",
                     "a: taint onprem.gpu/unhealthy=xid:NoSchedule: refused 409: the object has been modified"]
