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

from ansible_collections.onprem.gpu.plugins.modules import gpu_facts

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia-smi"
NVIDIA_SMI = "/usr/bin/nvidia-smi"
QUERY = "--query-gpu=index,uuid,name,pci.bus_id,pci.device_id,memory.total,mig.mode.current,mig.mode.pending,persistence_mode,driver_version"
ARGV = [NVIDIA_SMI, QUERY, "--format=csv,nounits"]


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def gpus(name, pci_device_id, memory_total_mib, persistence_mode, rows):
    """Expected GPU facts for a node of one model; rows are (uuid, pci_bus_id, mig_mode_current, mig_mode_pending)."""
    return [
        {
            "index": index,
            "uuid": uuid,
            "name": name,
            "pci_bus_id": pci_bus_id,
            "pci_device_id": pci_device_id,
            "memory_total_mib": memory_total_mib,
            "mig_capable": mig_mode_current is not None,
            "mig_mode_current": mig_mode_current,
            "mig_mode_pending": mig_mode_pending,
            "persistence_mode": persistence_mode,
        }
        for index, (uuid, pci_bus_id, mig_mode_current, mig_mode_pending) in enumerate(rows)
    ]


def facts(loaded, version, status, gpu_list=()):
    return {
        "nvidia_driver_loaded": loaded,
        "nvidia_driver_version": version,
        "nvidia_driver_status": status,
        "nvidia_gpus": list(gpu_list),
    }


H100_NODE = gpus(
    "NVIDIA H100 80GB HBM3",
    "0x233010DE",
    81559,
    "Enabled",
    [
        ("GPU-1d3a9c52-7f0e-4b8a-9c61-2e5f8a7b3c01", "00000000:18:00.0", "Disabled", "Disabled"),
        ("GPU-6b2e4f17-0a9d-4c35-8e72-9f1c3d5a6b02", "00000000:2A:00.0", "Disabled", "Disabled"),
        ("GPU-a4c8e1d9-3b7f-4e26-b5a0-7d2f9c8e1a03", "00000000:3A:00.0", "Disabled", "Disabled"),
        ("GPU-f0b3d6a2-9e4c-4871-a3d5-1c6e8b2f4d04", "00000000:5D:00.0", "Disabled", "Disabled"),
        ("GPU-2c7a5e83-d1f6-4b09-8e4a-6f3b9d7c2e05", "00000000:9A:00.0", "Disabled", "Disabled"),
        ("GPU-8e1f9b46-5c2a-4d73-9b8e-0a4d7f1e6c06", "00000000:AB:00.0", "Disabled", "Disabled"),
        ("GPU-c5d2a7f8-6e3b-4a91-8d7c-4b9e2a5f0d07", "00000000:BA:00.0", "Disabled", "Disabled"),
        ("GPU-3f9e6c1b-8a5d-4e07-b2f1-5d8a3c9e7b08", "00000000:DB:00.0", "Disabled", "Disabled"),
    ],
)
A100_NODE = gpus(
    "NVIDIA A100-SXM4-80GB",
    "0x20B210DE",
    81920,
    "Enabled",
    [
        ("GPU-4e8b2d71-c6a9-4f30-9e5b-8a1d7c3f2e11", "00000000:01:00.0", "Disabled", "Enabled"),
        ("GPU-9a3f7c15-2e8d-4b64-a1c7-3f6e9b2d5a12", "00000000:41:00.0", "Enabled", "Enabled"),
        ("GPU-d7c1e5a9-4b2f-4e83-8c6d-9e2a5f7b1c13", "00000000:81:00.0", "Enabled", "Disabled"),
        ("GPU-1b6f3a8e-7d4c-4a95-b3e2-6c9d1f4a8e14", "00000000:C1:00.0", "Disabled", "Disabled"),
    ],
)
L40S_NODE = gpus(
    "NVIDIA L40S",
    "0x26B910DE",
    46068,
    "Disabled",
    [
        ("GPU-5c9d2e7a-1f4b-4c86-9a3e-7b2d8f5c1a21", "00000000:4B:00.0", None, None),
        ("GPU-e2a6f8b3-9c1d-4e57-8b4f-2d7a6c9e3b22", "00000000:CA:00.0", None, None),
    ],
)
H100_PCIE_NODE = gpus(
    "NVIDIA H100 PCIe",
    "0x233110DE",
    81559,
    "Disabled",
    [
        ("GPU-7cd6d4d6-9fa8-13be-3c42-09a1b2280a02", "00000000:01:00.0", "Enabled", "Enabled"),
    ],
)

DRIVER_NOT_LOADED = "The NVIDIA driver is not loaded: nvidia-smi could not communicate with it."
VERSION_MISMATCH = "The NVIDIA kernel driver and its user-space library differ in version, so the driver is unusable until it is reloaded or the host rebooted."

REPORT_CASES = [
    pytest.param(
        "query_gpu__8x_h100_sxm.txt", 0, facts(True, "550.54.15", "The NVIDIA driver is loaded and nvidia-smi lists 8 GPUs.", H100_NODE), id="8x-h100"
    ),
    pytest.param(
        "query_gpu__4x_a100_sxm4_80gb_mig_pending.txt",
        0,
        facts(True, "535.216.03", "The NVIDIA driver is loaded and nvidia-smi lists 4 GPUs.", A100_NODE),
        id="a100-mig-pending",
    ),
    pytest.param(
        "query_gpu__2x_l40s_no_mig.txt", 0, facts(True, "550.127.05", "The NVIDIA driver is loaded and nvidia-smi lists 2 GPUs.", L40S_NODE), id="l40s-no-mig"
    ),
    pytest.param(
        "query_gpu__h100_pcie_warning_line.txt",
        0,
        facts(True, "525.125.06", "The NVIDIA driver is loaded and nvidia-smi lists 1 GPU.", H100_PCIE_NODE),
        id="warning-before-csv",
    ),
    pytest.param("query_gpu__driver_not_loaded.txt", 9, facts(False, None, DRIVER_NOT_LOADED), id="driver-not-loaded"),
    pytest.param("query_gpu__no_devices.txt", 6, facts(True, None, "The NVIDIA driver is loaded but nvidia-smi found no GPUs."), id="no-devices"),
    pytest.param("query_gpu__version_mismatch.txt", 18, facts(False, None, VERSION_MISMATCH), id="version-mismatch"),
    pytest.param(
        "query_gpu__nvml_library_missing.txt",
        12,
        facts(False, None, "The NVIDIA management library libnvidia-ml.so cannot be found, so the driver is unusable."),
        id="nvml-library-missing",
    ),
]

FAILURE_CASES = [
    pytest.param(
        "query_gpu__old_driver_without_mig_fields.txt",
        2,
        'nvidia-smi exited with code 2: Field "mig.mode.current" is not a valid field to query.',
        id="old-driver",
    ),
    pytest.param(
        "query_gpu__default_table_instead_of_csv.txt",
        0,
        "nvidia-smi output lacks the column(s) index, uuid, name, pci.bus_id, pci.device_id, memory.total, mig.mode.current, mig.mode.pending, "
        "persistence_mode, driver_version.",
        id="garbage-output",
    ),
]


def run_module(args, bin_path, command_result, capsys):
    """Run gpu_facts main() with patched nvidia-smi lookup and command; return its result and the mocks."""
    with patch_module_args(args), mock.patch.object(AnsibleModule, "get_bin_path", return_value=bin_path) as get_bin_path, mock.patch.object(
        AnsibleModule, "run_command", return_value=command_result
    ) as run_command, pytest.raises(SystemExit):
        gpu_facts.main()
    return json.loads(capsys.readouterr().out), get_bin_path, run_command


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
@pytest.mark.parametrize("fixture, rc, expected_facts", REPORT_CASES)
def test_facts(fixture, rc, expected_facts, check_mode, capsys):
    result, get_bin_path, run_command = run_module({"_ansible_check_mode": check_mode}, NVIDIA_SMI, (rc, fixture_text(fixture), ""), capsys)
    get_bin_path.assert_called_once_with("nvidia-smi")
    run_command.assert_called_once_with(ARGV, environ_update={"LC_ALL": "C"})
    assert result["changed"] is False
    assert "failed" not in result
    assert result["ansible_facts"] == expected_facts
    assert result["nvidia_driver_status"] == expected_facts["nvidia_driver_status"]


@pytest.mark.parametrize("fixture, rc, message", FAILURE_CASES)
def test_unexpected_answers_fail_with_the_command_and_its_output(fixture, rc, message, capsys):
    stdout = fixture_text(fixture)
    result, dummy, dummy = run_module({}, NVIDIA_SMI, (rc, stdout, ""), capsys)
    assert {key: result[key] for key in ("failed", "msg", "cmd", "rc", "stdout", "stderr")} == {
        "failed": True,
        "msg": message,
        "cmd": ARGV,
        "rc": rc,
        "stdout": stdout,
        "stderr": "",
    }
    assert "ansible_facts" not in result


def test_missing_binary_is_a_driver_that_is_not_loaded(capsys):
    result, get_bin_path, run_command = run_module({}, None, None, capsys)
    get_bin_path.assert_called_once_with("nvidia-smi")
    run_command.assert_not_called()
    assert result["ansible_facts"] == facts(False, None, "nvidia-smi was not found, so the NVIDIA driver is treated as not loaded.")


def test_missing_binary_at_an_explicit_path(tmp_path, capsys):
    wanted = str(tmp_path / "nvidia-smi")
    result, get_bin_path, run_command = run_module({"nvidia_smi": wanted}, NVIDIA_SMI, None, capsys)
    get_bin_path.assert_not_called()
    run_command.assert_not_called()
    assert result["ansible_facts"] == facts(False, None, f"{wanted} was not found, so the NVIDIA driver is treated as not loaded.")


def test_explicit_path_is_used_as_is(tmp_path, capsys):
    wanted = tmp_path / "nvidia-smi"
    wanted.write_text("#!/bin/sh\n", encoding="utf-8")
    wanted.chmod(0o755)
    result, get_bin_path, run_command = run_module({"nvidia_smi": str(wanted)}, None, (0, fixture_text("query_gpu__8x_h100_sxm.txt"), ""), capsys)
    get_bin_path.assert_not_called()
    run_command.assert_called_once_with([str(wanted), QUERY, "--format=csv,nounits"], environ_update={"LC_ALL": "C"})
    assert result["ansible_facts"]["nvidia_gpus"] == H100_NODE


def test_other_bare_name_is_looked_up(capsys):
    dummy, get_bin_path, dummy = run_module({"nvidia_smi": "nvidia-smi-550"}, None, None, capsys)
    get_bin_path.assert_called_once_with("nvidia-smi-550")
