# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError, AnsibleTypeError

from ansible_collections.onprem.gpu.plugins.filter.gpu_models import FilterModule, gpu_model_busbw, gpu_model_info

KNOWN_MODELS = [
    "NVIDIA A100 80GB PCIe",
    "NVIDIA A100-SXM4-40GB",
    "NVIDIA A100-SXM4-80GB",
    "NVIDIA A30",
    "NVIDIA H100 80GB HBM3",
    "NVIDIA H100 NVL",
    "NVIDIA H100 PCIe",
    "NVIDIA H200",
    "NVIDIA L40S",
]


@pytest.mark.parametrize(
    "name, expected",
    [
        pytest.param(
            "NVIDIA H100 80GB HBM3",
            {
                "known": True,
                "name": "NVIDIA H100 80GB HBM3",
                "short_name": "h100",
                "pci_device_id": "0x233010DE",
                "memory_total_mib": 81559,
                "architecture": "Hopper",
                "compute_capability": "9.0",
                "mig_capable": True,
                "mig_profiles": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
                "mig_mode_change_needs_reset": False,
                "form_factor": "sxm",
                "nvswitch": True,
                "nvlinks": 18,
                "pcie_generation": 5,
                "pcie_width": 16,
                "open_kernel_modules": "recommended",
                "nvlink_busbw": 480,
                "nvlink_ring_busbw": 370,
                "interconnect": "Hopper/NVSwitch",
                "known_models": KNOWN_MODELS,
            },
            id="known-h100",
        ),
        pytest.param(
            "NVIDIA L40S",
            {
                "known": True,
                "name": "NVIDIA L40S",
                "short_name": "l40s",
                "pci_device_id": "0x26B910DE",
                "memory_total_mib": 46068,
                "architecture": "Ada Lovelace",
                "compute_capability": "8.9",
                "mig_capable": False,
                "mig_profiles": [],
                "mig_mode_change_needs_reset": False,
                "form_factor": "pcie",
                "nvswitch": False,
                "nvlinks": 0,
                "pcie_generation": 4,
                "pcie_width": 16,
                "open_kernel_modules": "supported",
                "nvlink_busbw": 20,
                "nvlink_ring_busbw": 20,
                "interconnect": "Ada Lovelace/PCIe",
                "known_models": KNOWN_MODELS,
            },
            id="known-l40s",
        ),
        pytest.param("Tesla V100-SXM2-32GB", {"known": False, "name": "Tesla V100-SXM2-32GB", "known_models": KNOWN_MODELS}, id="unknown"),
        pytest.param("", {"known": False, "name": "", "known_models": KNOWN_MODELS}, id="empty"),
    ],
)
def test_gpu_model_info(name, expected):
    assert gpu_model_info(name) == expected


@pytest.mark.parametrize("value, type_name", [(None, "NoneType"), (["NVIDIA H200"], "list"), (8, "int")])
def test_gpu_model_info_refuses_values_that_are_not_names(value, type_name):
    with pytest.raises(AnsibleTypeError) as raised:
        gpu_model_info(value)
    assert str(raised.value) == f"gpu_model_info expects a GPU model name as a string, not {type_name}."


def test_gpu_model_busbw_merges_the_inventory_over_the_catalogue():
    assert gpu_model_busbw("NVIDIA A100-SXM4-80GB", "nvlink_busbw") == 235.0
    assert gpu_model_busbw("NVIDIA A100-SXM4-80GB", "nvlink_ring_busbw", {"Ampere/NVSwitch": 220}) == 220.0
    assert gpu_model_busbw("NVIDIA B300", "nvlink_busbw", {}) is None


@pytest.mark.parametrize(
    "arguments, error, message",
    [
        pytest.param(("NVIDIA H200", "nvlink_busbw", {"NVIDIA H200": "fast"}), AnsibleFilterError,
                     "network_benchmark_nvlink_busbw['NVIDIA H200'] must be a number of GB/s above 0, not 'fast'.", id="bad-override"),
        pytest.param(("NVIDIA H200", "busbw"), AnsibleFilterError, "gpu_model_busbw: the kind must be one of nvlink_busbw, nvlink_ring_busbw, not 'busbw'.",
                     id="bad-kind"),
        pytest.param(("NVIDIA H200", "nvlink_busbw", [480]), AnsibleTypeError, "gpu_model_busbw: network_benchmark_nvlink_busbw must be a mapping, not list.",
                     id="not-a-mapping"),
        pytest.param((None, "nvlink_busbw"), AnsibleTypeError, "gpu_model_busbw expects a GPU model name as a string, not NoneType.", id="not-a-name"),
    ],
)
def test_gpu_model_busbw_refuses_bad_input_in_one_sentence(arguments, error, message):
    with pytest.raises(error) as raised:
        gpu_model_busbw(*arguments)
    assert str(raised.value) == message


def test_filters_are_exposed_under_their_documented_names():
    assert FilterModule().filters() == {"gpu_model_info": gpu_model_info, "gpu_model_busbw": gpu_model_busbw}
