# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _driver_upgrade as upgrade
from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
# What the lab mirror offers of the driver's packages (nvidia_driver_plan's offers), Fabric Manager in two 580 releases.
OFFERS = [["nvidia-driver-cuda", "580.65.06-1"], ["nvidia-driver-cuda", "580.95.05-1"], ["nvidia-fabricmanager", "580.65.06-1"],
          ["nvidia-fabricmanager", "580.95.05-1"], ["nvidia-fabricmanager-570", "570.172.08-1"], ["nvidia-kernel-open-dkms", "580.95.05-1"]]
# nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid --format=csv,noheader, in the shape of the man page's fields.
COMPUTE_APPS = ("4242, /usr/bin/python3, GPU-1b0e8f2a-63d1-4c8e-9a3e-2f4a1c9d7e55\n"
                "5150, /opt/app/serve, GPU-7c6d2e90-1f3a-4b5c-8d7e-0a9b8c7d6e5f\n")


def plan(install=(), remove=(), hold=()):
    return {"install": list(install), "remove": list(remove), "hold": list(hold)}


@pytest.mark.parametrize("case, args, needed, reason", [
    ("all at the version", (plan(), True, "580.95.05"), False, None),
    ("packages to install", (plan(install=["nvidia-driver-cuda"], hold=["nvidia-driver-cuda"]), True, "580.65.06"), True,
     "packages to change: nvidia-driver-cuda"),
    ("only a hold", (plan(hold=["nvidia-modprobe"]), True, "580.95.05"), True, "packages to hold at 580.95.05: nvidia-modprobe"),
    ("installed, not loaded", (plan(), True, "580.65.06"), True, "the kernel runs driver 580.65.06"),
    ("mismatch", (plan(), False, None), True, "the driver does not answer (not loaded, or its library and kernel module differ)"),
])
def test_a_node_needs_the_upgrade_only_when_something_differs(case, args, needed, reason):
    outcome = upgrade.work(args[0], args[1], args[2], "580.95.05")
    assert outcome["needed"] is needed, case
    assert (outcome["reasons"][0] if outcome["reasons"] else None) == reason


def test_fabric_manager_at_the_drivers_version_lets_the_upgrade_go():
    assert not upgrade.problems(OFFERS, "580.95.05", True, "auto", [H100], {H100: model_info(H100)})


def test_fabric_manager_missing_at_the_version_refuses_naming_what_the_mirror_has():
    offers = [offer for offer in OFFERS if offer != ["nvidia-fabricmanager", "580.95.05-1"]]
    found = upgrade.problems(offers, "580.95.05", True, "auto", [H100], {H100: model_info(H100)})
    assert found == [
        "Fabric Manager is not offered at driver version 580.95.05 (580.65.06 of branch 580 on the mirror), and on an NVSwitch "
        "board it must run at exactly the driver's version, or CUDA finds the fabric down; publish the Fabric Manager release "
        "of that driver on the mirror, or pick a driver version the mirror has both of."]


def test_fabric_manager_is_not_asked_for_on_a_board_without_nvswitches():
    assert not upgrade.problems([["nvidia-driver-cuda", "580.95.05-1"]], "580.95.05", False, "auto", [H100], {H100: model_info(H100)})


def test_a_fabric_manager_offered_nowhere_says_so():
    found = upgrade.problems([["nvidia-driver-cuda", "580.95.05-1"]], "580.95.05", True, "auto", [], {})
    assert "(none of branch 580 on the mirror)" in found[0]


@pytest.mark.parametrize("flavor, entry, expected", [
    ("proprietary", {"open_kernel_modules": "required", "architecture": "Blackwell"},
     "NVIDIA X (Blackwell) runs only on the open kernel modules, but nvidia_driver_kernel_module_flavor is proprietary; set it to open or auto."),
    ("open", {"open_kernel_modules": "unsupported", "architecture": "Volta"},
     "NVIDIA X (Volta) cannot run the open kernel modules (they start with Turing), but nvidia_driver_kernel_module_flavor is open; "
     "set it to proprietary or auto."),
    ("proprietary", {"open_kernel_modules": "recommended", "architecture": "Hopper"}, None),
    ("open", {"open_kernel_modules": "supported", "architecture": "Ampere"}, None),
    ("auto", {"open_kernel_modules": "required", "architecture": "Blackwell"}, None),
    ("proprietary", None, None),
])
def test_the_kernel_module_flavour_must_suit_the_gpu_generation(flavor, entry, expected):
    found = upgrade.problems([], "580.95.05", False, flavor, ["NVIDIA X"], {"NVIDIA X": entry})
    assert found == ([expected] if expected else [])


def test_the_catalogue_models_of_the_lab_run_either_flavour():
    for name in (H100, A100):
        assert not upgrade.problems([], "580.95.05", False, "proprietary", [name], {name: model_info(name)})
        assert not upgrade.problems([], "580.95.05", False, "open", [name], {name: model_info(name)})


def test_processes_holding_gpus_are_named_with_their_pids():
    processes = upgrade.parse_compute_apps(COMPUTE_APPS)
    assert [process["pid"] for process in processes] == [4242, 5150]
    message = upgrade.holders_message(processes, "dc1-gpu1")
    assert message.startswith("dc1-gpu1: PID 4242 (/usr/bin/python3) on GPU-1b0e8f2a-63d1-4c8e-9a3e-2f4a1c9d7e55, PID 5150 "
                              "(/opt/app/serve) on GPU-7c6d2e90-1f3a-4b5c-8d7e-0a9b8c7d6e5f still hold a GPU after the drain")
    assert "nvidia_driver_host_gpu_clients" in message and "nvidia_driver_allow_reboot=true" in message


def test_no_process_no_message():
    assert upgrade.parse_compute_apps("") == []
    assert upgrade.holders_message([], "dc1-gpu1") == ""
    assert upgrade.holders_message(upgrade.parse_compute_apps("4242, python3, GPU-1\n"), "h").startswith("h: PID 4242 (python3) on GPU-1 still holds")


def test_kmods_refusal_names_the_module_in_use():
    message = upgrade.unload_refusal("modprobe: FATAL: Module nvidia_uvm is in use.\n", "dc1-gpu1")
    assert message.startswith("dc1-gpu1: the NVIDIA kernel modules could not be unloaded (module nvidia_uvm is in use): ")
    assert "(modprobe -r failed: Operation not permitted)" in upgrade.unload_refusal("Operation not permitted", "h")


def test_the_unload_order_puts_each_module_before_those_it_uses():
    order = upgrade.UNLOAD_ORDER
    assert order[-1] == "nvidia" and order.index("nvidia_uvm") < order.index("nvidia")
    assert order.index("nvidia_drm") < order.index("nvidia_modeset")
