# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The continuous health agent: the GPUHealthy condition, the textfile metrics, one round against a recording API."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._node_health_agent import (
    code_of, condition, metrics, reason_of, rfc3339, run_agent, write_atomically)

FIXTURES = Path(__file__).resolve().parents[3] / "unit" / "fixtures" / "node_health"
NOW = 1761275642.0
XID79 = {"code": "xid", "pci_bus_id": "00000000:01:00.0", "gpu_index": 0, "device": None, "xid": 79, "severity": "fail",
         "action": "reboot", "message": "GPU 0 (00000000:01:00.0) logged Xid 79 once: reboot the node."}
NVLINK = {"code": "nvlink_inactive", "pci_bus_id": "00000000:01:00.0", "gpu_index": 0, "device": None, "xid": None,
          "severity": "fail", "action": "drain", "message": "GPU 0 has 10 of 12 NVLinks active."}
XID13 = dict(XID79, xid=13, severity="warn", action="restart_app", message="GPU 0 logged Xid 13.")


def result(state, findings=(), reason=None, skipped=()):
    return {"healthy": {"healthy": True, "unhealthy": False}.get(state), "state": state, "reason": reason,
            "findings": list(findings), "skipped_checks": list(skipped)}


@pytest.mark.parametrize("code, reason", [("xid", "Xid"), ("nvlink_inactive", "NvlinkInactive"), ("gpu_missing", "GpuMissing"),
                                          ("clocks_hw_slowdown", "ClocksHwSlowdown")])
def test_reason_round_trip(code, reason):
    assert (reason_of(code), code_of(reason)) == (reason, code)


def test_condition_false_names_the_most_severe_code_first():
    found = condition(result("unhealthy", [NVLINK, XID13, XID79]), NOW)
    assert (found["type"], found["status"], found["reason"]) == ("GPUHealthy", "False", "Xid")
    assert found["message"].startswith("xid, nvlink_inactive: GPU 0 (00000000:01:00.0) logged Xid 79 once")
    assert found["lastHeartbeatTime"] == found["lastTransitionTime"] == "2025-10-24T03:14:02Z"


def test_condition_true_keeps_the_transition_time_and_lists_warnings_and_skipped_checks():
    previous = {"type": "GPUHealthy", "status": "True", "lastTransitionTime": "2025-10-01T00:00:00Z"}
    found = condition(result("healthy", [XID13], skipped=[{"check": "xid", "reason": "no file"}]), NOW, previous)
    assert (found["status"], found["reason"], found["lastTransitionTime"]) == ("True", "GPUsHealthy", "2025-10-01T00:00:00Z")
    assert found["message"] == "No failing GPU health finding (warnings: xid). Not checked: xid."


def test_condition_unknown_when_the_check_cannot_run():
    found = condition(result("unknown", reason="nvidia-smi did not answer within 30 seconds."), NOW,
                      {"status": "False", "lastTransitionTime": "2025-10-01T00:00:00Z"})
    assert (found["status"], found["reason"], found["lastTransitionTime"]) == ("Unknown", "GPUHealthCheckFailed", rfc3339(NOW))
    assert found["message"] == "The GPU health check could not run: nvidia-smi did not answer within 30 seconds."


def test_a_long_message_is_cut():
    many = [dict(XID79, message="x" * 400) for dummy in range(5)]
    assert len(condition(result("unhealthy", many), NOW)["message"]) == 1024


def test_metrics():
    text = metrics(result("unhealthy", [XID79, XID79, XID13]), "dc1-gpu1", 8, 0.25, NOW)
    assert 'onprem_gpu_health_status{node="dc1-gpu1",status="false"} 1' in text
    assert 'onprem_gpu_health_status{node="dc1-gpu1",status="true"} 0' in text
    assert text.count('onprem_gpu_health_finding{node="dc1-gpu1",code="xid",severity="fail",action="reboot",gpu="0",xid="79"} 1') == 1
    assert 'onprem_gpu_health_unhealthy_gpus{node="dc1-gpu1"} 8' in text
    assert 'onprem_gpu_health_check_duration_seconds{node="dc1-gpu1"} 0.250' in text
    assert 'onprem_gpu_health_unhealthy_gpus{node="dc1-gpu1"} 0' in metrics(result("unknown", reason="r"), "dc1-gpu1", 8, 1, NOW)


def test_write_atomically(tmp_path):
    target = tmp_path / "textfile" / "onprem_gpu_health.prom"
    write_atomically(str(target), "a 1\n")
    write_atomically(str(target), "a 2\n")
    assert target.read_text(encoding="utf-8") == "a 2\n" and [entry.name for entry in target.parent.iterdir()] == [target.name]
    assert oct(target.stat().st_mode & 0o777) == "0o644"


class RecordingApi:
    def __init__(self, node):
        self.node, self.calls = node, []

    def call(self, method, path, body=None, content_type="application/json"):
        self.calls.append((method, path, body, content_type))
        return self.node


def test_one_round(tmp_path):
    log = tmp_path / "kernel.log"
    log.write_text("[ 2621.850000] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
                   encoding="utf-8")
    answers = {("-q", "-x"): (FIXTURES / "nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml").read_text(encoding="utf-8"),
               ("nvlink", "-s"): (FIXTURES / "nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt").read_text(encoding="utf-8")}
    commands = []

    def run(argv):
        commands.append(argv)
        return 0, answers[tuple(argv[-2:])], ""

    config = {"node_name": "dc1-gpu1", "textfile": str(tmp_path / "health.prom"), "checks": ["gpus", "nvlink", "xid"],
              "expected": {"gpu_count": 1, "gpu_model": "NVIDIA A100-SXM4-80GB"}, "xid_actions": {},
              "kernel_log_file": str(log), "command_timeout": 30, "nvidia_smi": "nvidia-smi"}
    node = {"status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    api = RecordingApi(node)
    clock = iter([NOW, NOW + 0.5])
    found = run_agent(config, run, {"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout"}.get, api, lambda: next(clock), boot=1.0e9)
    # The cheap checks: one -q -x, one nvlink -s, each under timeout; the kernel log is a file read.
    assert commands == [["/usr/bin/timeout", "-k", "5", "30", "/usr/bin/nvidia-smi", "-q", "-x"],
                        ["/usr/bin/timeout", "-k", "5", "30", "/usr/bin/nvidia-smi", "nvlink", "-s"]]
    assert (found["status"], found["reason"]) == ("False", "Xid")
    assert api.calls == [("GET", "/api/v1/nodes/dc1-gpu1", None, "application/json"),
                         ("PATCH", "/api/v1/nodes/dc1-gpu1/status", {"status": {"conditions": [found]}},
                          "application/strategic-merge-patch+json")]
    assert 'onprem_gpu_health_check_duration_seconds{node="dc1-gpu1"} 0.500' in (tmp_path / "health.prom").read_text(encoding="utf-8")
