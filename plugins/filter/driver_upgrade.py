# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils import _driver_upgrade as upgrade
from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info


def driver_upgrade_work(plan_result, version):
    """Whether the node needs anything for driver ``version``, and why: {needed, reasons}."""
    _check_result("driver_upgrade_work", plan_result)
    facts = plan_result.get("ansible_facts", {})
    return upgrade.work(plan_result.get("plan") or {}, bool(facts.get("nvidia_driver_loaded")), facts.get("nvidia_driver_version"), str(version))


def driver_upgrade_problems(plan_result, version, nvswitch, flavor, gpu_models):
    """The sentences that refuse the upgrade before any change (Fabric Manager's version, the kernel module flavour)."""
    _check_result("driver_upgrade_problems", plan_result)
    if not isinstance(gpu_models, list):
        raise AnsibleFilterError(f"driver_upgrade_problems expects the GPU model names as a list, not {type(gpu_models).__name__}.")
    return upgrade.problems(plan_result.get("offers") or [], str(version), bool(nvswitch), str(flavor), gpu_models,
                            {name: model_info(name) for name in gpu_models if name})


def driver_upgrade_holders(compute_apps, host):
    """One sentence naming the processes nvidia-smi --query-compute-apps lists; empty when no process holds a GPU."""
    if not isinstance(compute_apps, str):
        raise AnsibleFilterError(f"driver_upgrade_holders expects nvidia-smi's output as a string, not {type(compute_apps).__name__}.")
    return upgrade.holders_message(upgrade.parse_compute_apps(compute_apps), str(host))


def driver_upgrade_unload_refusal(stderr, host):
    """kmod's refusal to unload the NVIDIA modules, as one sentence."""
    return upgrade.unload_refusal(stderr if isinstance(stderr, str) else "", str(host))


def _check_result(name, result):
    if not isinstance(result, dict):
        raise AnsibleFilterError(f"{name} expects the result of onprem.gpu.nvidia_driver_plan, not {type(result).__name__}.")


class FilterModule:
    """Filters of the rolling driver upgrade (the nvidia_driver role's upgrade entry point, playbooks/upgrade_driver.yml)."""

    def filters(self):
        return {
            "driver_upgrade_work": driver_upgrade_work,
            "driver_upgrade_problems": driver_upgrade_problems,
            "driver_upgrade_holders": driver_upgrade_holders,
            "driver_upgrade_unload_refusal": driver_upgrade_unload_refusal,
        }
