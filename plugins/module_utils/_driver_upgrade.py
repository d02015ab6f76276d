# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What a rolling driver upgrade (playbooks/upgrade_driver.yml, the nvidia_driver role's ``upgrade`` entry point) decides
on one node, from what the nvidia_driver_plan module and nvidia-smi read: whether the node needs anything, the problems
that refuse the upgrade before any change, what still holds a GPU once the node is drained, and how kmod's refusal to
unload the modules reads.

Plain Python without Ansible imports, unit-tested directly (tests/unit/plugins/module_utils/test__driver_upgrade.py).

Sources: Fabric Manager must run at exactly the driver's version (NVIDIA Fabric Manager User Guide, "Fabric Manager
installation": the FM package version must match the driver version); NVIDIA's open GPU kernel modules run only from
Turing on and are required from Grace Hopper and Blackwell on ("NVIDIA transitions fully towards open-source GPU kernel
modules", 2024); the order of the module unload is the one of the modules' dependencies (nvidia_uvm, nvidia_drm and
nvidia_modeset use nvidia; nvidia_peermem uses nvidia and the RDMA stack), as NVIDIA's GPU Operator driver container
unloads them (NVIDIA/gpu-driver-container, ``_unload_driver``); kmod's ``modprobe -r`` says ``Module X is in use.``
for a module something holds and nothing for one that is not loaded (kmod, tools/modprobe.c).
"""

from __future__ import annotations

import re

from ansible_collections.onprem.gpu.plugins.module_utils import _nvidia_driver as driver

# modprobe -r takes them in this order: each before the modules it uses.
UNLOAD_ORDER = ("nvidia_peermem", "nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia")
_IN_USE = re.compile(r"Module (\S+) is in use")


def work(plan, driver_loaded, running_version, version):
    """What the node needs for driver ``version``: {needed: bool, reasons: [str]}; a node that needs nothing is untouched.

    ``plan`` is nvidia_driver_plan's RV(plan); ``driver_loaded`` and ``running_version`` its facts (the driver that answers).
    """
    reasons = []
    packages = [name for name in plan.get("install", []) + plan.get("remove", []) if name]
    if packages:
        reasons.append(f"packages to change: {', '.join(packages)}")
    if plan.get("hold") and not packages:
        reasons.append(f"packages to hold at {version}: {', '.join(plan['hold'])}")
    if not driver_loaded:
        reasons.append("the driver does not answer (not loaded, or its library and kernel module differ)")
    elif running_version != version:
        reasons.append(f"the kernel runs driver {running_version}")
    return {"needed": bool(reasons), "reasons": reasons}


def problems(offers, version, nvswitch, flavor, gpu_models, catalogue):
    """The sentences that refuse the upgrade before any change; [] when it may go ahead.

    ``offers``: [name, version] pairs the driver repository offers of the driver's packages (nvidia_driver_plan's
    RV(offers)); ``nvswitch``: whether the board needs Fabric Manager; ``flavor``: the requested kernel module flavour
    (auto, open, proprietary); ``gpu_models``: the GPU names on the node (nvidia-smi's, or the inventory's); ``catalogue``:
    {name: the GPU catalogue's entry or None}.
    """
    found = []
    if nvswitch:
        found += _fabric_manager_problems(offers, version)
    for name in sorted({name for name in gpu_models if name}):
        found += _flavor_problems(flavor, name, catalogue.get(name))
    return found


def _fabric_manager_problems(offers, version):
    names = [name for name, _offered in offers if re.match(driver.FABRICMANAGER_PATTERN, name)]
    at_version = [name for name, offered in offers if name in names and driver.pinned(offered, version)]
    if at_version:
        return []
    branch = version.split(".")[0]
    offered = sorted({offered.split("-")[0] for name, offered in offers if name in names and offered.split(".")[0] == branch}, key=_version_key)
    return [
        f"Fabric Manager is not offered at driver version {version} ({', '.join(offered) if offered else 'none'} of branch {branch} on "
        "the mirror), and on an NVSwitch board it must run at exactly the driver's version, or CUDA finds the fabric down; "
        "publish the Fabric Manager release of that driver on the mirror, or pick a driver version the mirror has both of."
    ]


def _flavor_problems(flavor, name, entry):
    if entry is None:
        return []
    level = entry.get("open_kernel_modules", "supported")
    architecture = entry.get("architecture", "")
    if flavor == "proprietary" and level == "required":
        return [f"{name} ({architecture}) runs only on the open kernel modules, but nvidia_driver_kernel_module_flavor is "
                "proprietary; set it to open or auto."]
    if flavor == "open" and level == "unsupported":
        return [f"{name} ({architecture}) cannot run the open kernel modules (they start with Turing), but "
                "nvidia_driver_kernel_module_flavor is open; set it to proprietary or auto."]
    return []


def _version_key(version):
    return [int(part) if part.isdigit() else 0 for part in version.split(".")]


def parse_compute_apps(text):
    """``nvidia-smi --query-compute-apps=pid,process_name,gpu_uuid --format=csv,noheader``: [{pid, name, gpu_uuid}]."""
    processes = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) >= 3 and cells[0].isdigit():
            processes.append({"pid": int(cells[0]), "name": cells[1], "gpu_uuid": cells[2]})
    return processes


def holders_message(processes, host):
    """One sentence naming the processes that still hold a GPU once the node is drained; empty when none does."""
    if not processes:
        return ""
    listed = ", ".join(f"PID {process['pid']} ({process['name']}) on {process['gpu_uuid']}" for process in processes)
    return (
        f"{host}: {listed} still hold{'s' if len(processes) == 1 else ''} a GPU after the drain, so the driver's modules cannot "
        "be unloaded; stop them (a host service: add it to nvidia_driver_host_gpu_clients, which the upgrade stops and "
        "starts again), or set nvidia_driver_allow_reboot=true to reboot the node into the new driver instead."
    )


def unload_refusal(stderr, host):
    """kmod's refusal to unload the modules, as one sentence (what holds them and what to do)."""
    busy = _IN_USE.findall(stderr or "")
    what = f"module {busy[0]} is in use" if busy else f"modprobe -r failed: {(stderr or '').strip() or 'no message'}"
    return (
        f"{host}: the NVIDIA kernel modules could not be unloaded ({what}): a client still holds a GPU (a service such as "
        "DCGM's nv-hostengine or nvidia-persistenced, or a process); add its service to nvidia_driver_host_gpu_clients, "
        "or set nvidia_driver_allow_reboot=true to reboot the node into the new driver."
    )
