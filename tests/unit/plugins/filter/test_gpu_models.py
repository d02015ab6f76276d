# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleTypeError

from ansible_collections.onprem.gpu.plugins.filter.gpu_models import FilterModule, gpu_model_info

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
                "pci_device_id": "0x233010DE",
                "memory_total_mib": 81559,
                "architecture": "Hopper",
                "compute_capability": "9.0",
                "mig_capable": True,
                "form_factor": "sxm",
                "nvswitch": True,
                "open_kernel_modules": "recommended",
                "known_models": KNOWN_MODELS,
            },
            id="known-h100",
        ),
        pytest.param(
            "NVIDIA L40S",
            {
                "known": True,
                "name": "NVIDIA L40S",
                "pci_device_id": "0x26B910DE",
                "memory_total_mib": 46068,
                "architecture": "Ada Lovelace",
                "compute_capability": "8.9",
                "mig_capable": False,
                "form_factor": "pcie",
                "nvswitch": False,
                "open_kernel_modules": "supported",
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


def test_filter_is_exposed_under_its_documented_name():
    assert FilterModule().filters() == {"gpu_model_info": gpu_model_info}
