# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import GPU_MODELS, known_model_names, model_info

COLUMNS = ("name", "pci_device_id", "memory_total_mib", "architecture", "compute_capability", "mig_capable", "form_factor", "nvswitch", "open_kernel_modules")

EXPECTED_MODELS = [
    ("NVIDIA H100 80GB HBM3", "0x233010DE", 81559, "Hopper", "9.0", True, "sxm", True, "recommended"),
    ("NVIDIA H100 PCIe", "0x233110DE", 81559, "Hopper", "9.0", True, "pcie", False, "recommended"),
    ("NVIDIA H100 NVL", "0x232110DE", 95830, "Hopper", "9.0", True, "pcie", False, "recommended"),
    ("NVIDIA H200", "0x233510DE", 143771, "Hopper", "9.0", True, "sxm", True, "recommended"),
    ("NVIDIA A100-SXM4-80GB", "0x20B210DE", 81920, "Ampere", "8.0", True, "sxm", True, "supported"),
    ("NVIDIA A100-SXM4-40GB", "0x20B010DE", 40960, "Ampere", "8.0", True, "sxm", True, "supported"),
    ("NVIDIA A100 80GB PCIe", "0x20B510DE", 81920, "Ampere", "8.0", True, "pcie", False, "supported"),
    ("NVIDIA A30", "0x20B710DE", 24576, "Ampere", "8.0", True, "pcie", False, "supported"),
    ("NVIDIA L40S", "0x26B910DE", 46068, "Ada Lovelace", "8.9", False, "pcie", False, "supported"),
]


@pytest.mark.parametrize("expected", EXPECTED_MODELS, ids=[row[0] for row in EXPECTED_MODELS])
def test_model_info(expected):
    assert model_info(expected[0]) == dict(zip(COLUMNS, expected))


@pytest.mark.parametrize("name", ["NVIDIA H100", "A100-SXM4-40GB", "nvidia h200", "", "NVIDIA GeForce RTX 4070 Laptop GPU"])
def test_unknown_or_inexact_names_are_not_found(name):
    assert model_info(name) is None


def test_model_info_returns_a_copy():
    model_info("NVIDIA H200")["memory_total_mib"] = 0
    assert GPU_MODELS["NVIDIA H200"]["memory_total_mib"] == 143771


def test_known_model_names_are_sorted_and_complete():
    assert known_model_names() == sorted(row[0] for row in EXPECTED_MODELS)
