# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from pathlib import Path
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import node_health

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "node_health"
EXPECTED = {"gpu_count": 1, "gpu_model": "NVIDIA A100-SXM4-80GB"}


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def run_module(args, capsys, bin_paths=None, command_results=()):
    paths = bin_paths or {}
    with patch_module_args(args), mock.patch.object(AnsibleModule, "get_bin_path", side_effect=lambda name, *a, **k: paths.get(name)), \
            mock.patch.object(AnsibleModule, "run_command", side_effect=list(command_results)) as run_command, pytest.raises(SystemExit):
        node_health.main()
    return json.loads(capsys.readouterr().out), run_command


@pytest.mark.parametrize("check_mode", [False, True])
def test_recorded_outputs_run_nothing(check_mode, capsys):
    result, run_command = run_module({"_ansible_check_mode": check_mode, "expected": EXPECTED, "outputs": {
        "nvidia_smi_q_xml": fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml"),
        "kernel_log": fixture("kernel_log__dmesg_T__xid13_xid109__gpud_pr46.txt")}}, capsys)
    run_command.assert_not_called()
    assert (result["changed"], result["healthy"], result["state"], result["commands"]) == (False, False, "unhealthy", [])
    assert [(item["code"], item["xid"], item["severity"]) for item in result["findings"]] == [("xid", 13, "warn"), ("xid", 109, "fail")]
    assert result["skipped_checks"] == [{"check": "nvlink", "reason": "outputs has no nvlink_status."}]


@pytest.mark.parametrize("args, message", [
    ({"checks": ["gpus", "burn"]}, "value of checks must be one or more of"),
    ({"dcgm_diag_level": 5}, "value of dcgm_diag_level must be one of: 1, 2, 3, 4, got: 5"),
    ({"xid_actions": {"79": "panic"}}, "xid_actions[79] must be one of none, restart_app, reset_gpu, reboot, drain, rma, not 'panic'."),
    ({"expected": {"gpu_count": 1, "gpu_model": "NVIDIA A10G"}},
     "GPU model 'NVIDIA A10G' is not in the collection's GPU catalogue, so expected must give pcie_gen, pcie_width, nvlinks_per_gpu."),
])
def test_bad_input_fails_before_anything_runs(args, message, capsys):
    result, run_command = run_module(dict({"expected": EXPECTED}, **args), capsys)
    run_command.assert_not_called()
    assert result["failed"] is True and message in result["msg"]


def test_live_run(capsys):
    paths = {"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout", "journalctl": "/usr/bin/journalctl"}
    result, run_command = run_module({"expected": EXPECTED, "kernel_log_since": "-2h"}, capsys, paths, [
        (0, fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml"), ""),
        (0, fixture("nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt"), ""),
        (0, "2025-10-24T03:14:02+0000 n1 kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus\n", ""),
    ])
    timeout = ["/usr/bin/timeout", "-k", "5", "60"]
    assert result["commands"] == [timeout + ["/usr/bin/nvidia-smi", "-q", "-x"], timeout + ["/usr/bin/nvidia-smi", "nvlink", "-s"],
                                  timeout + ["/usr/bin/journalctl", "-k", "-o", "short-iso", "--no-pager", "--since", "-2h"]]
    assert run_command.call_args.kwargs == {"environ_update": {"LC_ALL": "C"}}
    assert [(item["code"], item["pci_bus_id"], item["action"]) for item in result["findings"]] == [("xid", "00000000:01:00.0", "reboot")]
    assert result["healthy"] is False


@pytest.mark.parametrize("paths, results, reason", [
    ({}, [], "nvidia-smi was not found, so the GPUs cannot be read."),
    ({"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout"}, [(124, "", "")], "nvidia-smi did not answer within 60 seconds."),
    ({"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout"},
     [(9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
          "Make sure that the latest NVIDIA driver is installed and running.\n", "")],
     "nvidia-smi -q -x failed with exit code 9: couldn't communicate with the nvidia driver."),
])
def test_unreadable_gpus_are_unknown(paths, results, reason, capsys):
    result, dummy = run_module({"expected": EXPECTED}, capsys, paths, results)
    assert (result["healthy"], result["state"], result["reason"], result["findings"]) == (None, "unknown", reason, [])
    assert "failed" not in result


def test_live_run_reads_the_kernel_log_file_since_the_boot(tmp_path, capsys):
    log = tmp_path / "kernel.log"
    # Seconds since boot, as dmesg and the lab kernel log print them: the module places them with /proc/stat's btime.
    log.write_text("[   12.000000] NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.65.06\n"
                   "[ 2621.850000] NVRM: Xid (PCI:0000:01:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
                   encoding="utf-8")
    paths = {"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout", "journalctl": "/usr/bin/journalctl"}
    with mock.patch.object(node_health, "boot_time", return_value=1.0e9):
        result, dummy = run_module({"expected": EXPECTED, "kernel_log_file": str(log)}, capsys, paths, [
            (0, fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml"), ""),
            (0, fixture("nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt"), ""),
        ])
    assert [command[4:] for command in result["commands"]] == [["/usr/bin/nvidia-smi", "-q", "-x"], ["/usr/bin/nvidia-smi", "nvlink", "-s"]]
    assert [(item["code"], item["xid"], item["action"]) for item in result["findings"]] == [("xid", 79, "reboot")]


def test_kernel_log_since_applies_to_the_file(tmp_path, capsys):
    log = tmp_path / "kern.log"
    log.write_text("2025-10-24T01:00:00.000000+00:00 n1 kernel: NVRM: Xid (PCI:0000:01:00): 79, GPU has fallen off the bus.\n"
                   "2025-10-24T03:14:02.123456+00:00 n1 kernel: NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception\n",
                   encoding="utf-8")
    paths = {"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout"}
    result, dummy = run_module({"expected": EXPECTED, "kernel_log_file": str(log), "kernel_log_since": "@1761270000"}, capsys, paths, [
        (0, fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml"), ""),
        (0, fixture("nvlink_s__a100_sxm4_80gb__nccl_tests_228.txt"), ""),
    ])
    assert [(item["xid"], item["severity"]) for item in result["findings"]] == [(13, "warn")]
    assert result["healthy"] is True


def test_a_missing_kernel_log_file_skips_the_xid_check(tmp_path, capsys):
    paths = {"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout"}
    result, dummy = run_module({"expected": EXPECTED, "kernel_log_file": str(tmp_path / "absent.log"), "checks": ["gpus", "xid"]},
                               capsys, paths, [(0, fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml"), "")])
    assert result["skipped_checks"] == [{"check": "xid", "reason": f"The kernel log file {tmp_path / 'absent.log'} cannot be read: No such file or directory."}]
    assert result["healthy"] is True


def test_an_unreadable_since_for_a_file_fails_before_anything_runs(capsys):
    result, run_command = run_module({"expected": EXPECTED, "kernel_log_file": "/var/log/kern.log", "kernel_log_since": "last tuesday"}, capsys)
    run_command.assert_not_called()
    assert result["failed"] is True and result["msg"].startswith("kernel_log_since 'last tuesday' is not a time this collection reads")


def test_an_empty_journal_is_judged_not_skipped(capsys):
    paths = {"nvidia-smi": "/usr/bin/nvidia-smi", "timeout": "/usr/bin/timeout", "journalctl": "/usr/bin/journalctl"}
    result, dummy = run_module({"expected": EXPECTED, "checks": ["gpus", "xid"]}, capsys, paths, [
        (0, fixture("nvsmi_q_x__a100_sxm4_80gb_mig__telegraf.xml"), ""), (0, "", "")])
    assert (result["skipped_checks"], result["healthy"]) == ([], True)
