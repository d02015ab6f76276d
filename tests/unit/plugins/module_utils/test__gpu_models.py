# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import GPU_MODELS, expected_busbw, known_model_names, model_info

COLUMNS = (
    "name", "short_name", "pci_device_id", "memory_total_mib", "architecture", "compute_capability", "mig_capable",
    "mig_mode_change_needs_reset", "form_factor", "nvswitch", "nvlinks", "pcie_generation", "pcie_width", "open_kernel_modules",
    "nvlink_busbw", "nvlink_ring_busbw", "interconnect",
)

EXPECTED_MODELS = [
    ("NVIDIA H100 80GB HBM3", "h100", "0x233010DE", 81559, "Hopper", "9.0", True, False, "sxm", True, 18, 5, 16, "recommended", 480, 370, "Hopper/NVSwitch"),
    ("NVIDIA H100 PCIe", "h100-pcie", "0x233110DE", 81559, "Hopper", "9.0", True, False, "pcie", False, 0, 5, 16, "recommended", 40, 40, "Hopper/PCIe"),
    ("NVIDIA H100 NVL", "h100-nvl", "0x232110DE", 95830, "Hopper", "9.0", True, False, "pcie", False, 0, 5, 16, "recommended", 40, 40, "Hopper/PCIe"),
    ("NVIDIA H200", "h200", "0x233510DE", 143771, "Hopper", "9.0", True, False, "sxm", True, 18, 5, 16, "recommended", 480, 370, "Hopper/NVSwitch"),
    ("NVIDIA A100-SXM4-80GB", "a100", "0x20B210DE", 81920, "Ampere", "8.0", True, True, "sxm", True, 12, 4, 16, "supported", 235, 235, "Ampere/NVSwitch"),
    ("NVIDIA A100-SXM4-40GB", "a100-40gb", "0x20B010DE", 40960, "Ampere", "8.0", True, True, "sxm", True, 12, 4, 16, "supported", 235, 235, "Ampere/NVSwitch"),
    ("NVIDIA A100 80GB PCIe", "a100-pcie", "0x20B510DE", 81920, "Ampere", "8.0", True, True, "pcie", False, 0, 4, 16, "supported", 20, 20, "Ampere/PCIe"),
    ("NVIDIA A30", "a30", "0x20B710DE", 24576, "Ampere", "8.0", True, True, "pcie", False, 0, 4, 16, "supported", 20, 20, "Ampere/PCIe"),
    ("NVIDIA L40S", "l40s", "0x26B910DE", 46068, "Ada Lovelace", "8.9", False, False, "pcie", False, 0, 4, 16, "supported", 20, 20, "Ada Lovelace/PCIe"),
]

# The thresholds the network_benchmark role defaulted to before the catalogue held them, by interconnect: every model
# of an interconnect must keep them, so that an inventory without overrides is judged as before.
FORMER_ROLE_DEFAULTS = {
    "nvlink_busbw": {"Hopper/NVSwitch": 480, "Ampere/NVSwitch": 235, "Hopper/PCIe": 40, "Ampere/PCIe": 20, "Ada Lovelace/PCIe": 20},
    "nvlink_ring_busbw": {"Hopper/NVSwitch": 370, "Ampere/NVSwitch": 235, "Hopper/PCIe": 40, "Ampere/PCIe": 20, "Ada Lovelace/PCIe": 20},
}


@pytest.mark.parametrize("expected", EXPECTED_MODELS, ids=[row[0] for row in EXPECTED_MODELS])
def test_model_info(expected):
    info = model_info(expected[0])
    assert {key: info[key] for key in COLUMNS} == dict(zip(COLUMNS, expected))
    assert set(info) == set(COLUMNS) | {"mig_profiles"}


def test_mig_profiles_are_listed_by_name():
    assert model_info("NVIDIA H200")["mig_profiles"] == ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]
    assert model_info("NVIDIA L40S")["mig_profiles"] == []


@pytest.mark.parametrize("name", ["NVIDIA H100", "A100-SXM4-40GB", "nvidia h200", "", "NVIDIA GeForce RTX 4070 Laptop GPU"])
def test_unknown_or_inexact_names_are_not_found(name):
    assert model_info(name) is None


def test_model_info_returns_a_copy():
    model_info("NVIDIA H200")["memory_total_mib"] = 0
    assert GPU_MODELS["NVIDIA H200"]["memory_total_mib"] == 143771


def test_known_model_names_are_sorted_and_complete():
    assert known_model_names() == sorted(row[0] for row in EXPECTED_MODELS)


def test_short_names_are_unique():
    short_names = [model["short_name"] for model in GPU_MODELS.values()]
    assert len(short_names) == len(set(short_names))


@pytest.mark.parametrize("kind", sorted(FORMER_ROLE_DEFAULTS))
@pytest.mark.parametrize("name", known_model_names())
def test_without_overrides_the_thresholds_are_the_former_role_defaults(name, kind):
    assert expected_busbw(name, kind) == FORMER_ROLE_DEFAULTS[kind][model_info(name)["interconnect"]]


@pytest.mark.parametrize(
    "overrides, expected",
    [
        pytest.param({}, 480.0, id="catalogue"),
        pytest.param({"Hopper/NVSwitch": 400}, 400.0, id="interconnect"),
        pytest.param({"Hopper/NVSwitch": 400, "NVIDIA H200": "450"}, 450.0, id="model-wins"),
        pytest.param({"Ampere/NVSwitch": 1, "NVIDIA H100 80GB HBM3": 2}, 480.0, id="other-keys"),
    ],
)
def test_overrides_are_merged_over_the_catalogue(overrides, expected):
    assert expected_busbw("NVIDIA H200", "nvlink_busbw", overrides) == expected


def test_an_unknown_model_has_no_threshold_unless_an_override_names_it():
    assert expected_busbw("NVIDIA B300", "nvlink_busbw", {"Hopper/NVSwitch": 480}) is None
    assert expected_busbw("NVIDIA B300", "nvlink_ring_busbw", {"NVIDIA B300": 700}) == 700.0


@pytest.mark.parametrize("value", ["fast", 0, -5, None, True, [480]])
def test_an_override_that_is_not_a_positive_number_is_refused_by_name(value):
    with pytest.raises(ValueError) as raised:
        expected_busbw("NVIDIA A30", "nvlink_ring_busbw", {"Ampere/PCIe": value})
    assert str(raised.value) == f"network_benchmark_nvlink_ring_busbw['Ampere/PCIe'] must be a number of GB/s above 0, not {value!r}."


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="must be one of nvlink_busbw, nvlink_ring_busbw"):
        expected_busbw("NVIDIA A30", "busbw")
