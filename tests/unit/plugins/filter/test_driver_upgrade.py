# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.driver_upgrade import (
    FilterModule,
    driver_upgrade_holders,
    driver_upgrade_problems,
    driver_upgrade_unload_refusal,
    driver_upgrade_work,
)

PLAN_RESULT = {"plan": {"install": [], "remove": [], "hold": []},
               "offers": [["nvidia-fabricmanager", "580.65.06-1"], ["nvidia-driver-cuda", "580.95.05-1"]],
               "ansible_facts": {"nvidia_driver_loaded": True, "nvidia_driver_version": "580.65.06"}}


def test_the_filters_are_registered_under_their_names():
    assert sorted(FilterModule().filters()) == ["driver_upgrade_holders", "driver_upgrade_problems", "driver_upgrade_unload_refusal",
                                                "driver_upgrade_work"]


def test_the_filters_answer_as_the_logic_does():
    assert driver_upgrade_work(PLAN_RESULT, "580.95.05") == {"needed": True, "reasons": ["the kernel runs driver 580.65.06"]}
    assert driver_upgrade_work(PLAN_RESULT, "580.65.06") == {"needed": False, "reasons": []}
    problems = driver_upgrade_problems(PLAN_RESULT, "580.95.05", True, "auto", ["NVIDIA H100 80GB HBM3"])
    assert problems[0].startswith("Fabric Manager is not offered at driver version 580.95.05 (580.65.06 of branch 580 on the mirror)")
    assert driver_upgrade_problems(PLAN_RESULT, "580.65.06", True, "auto", ["NVIDIA H100 80GB HBM3"]) == []
    assert driver_upgrade_holders("", "h") == ""
    assert driver_upgrade_holders("7, python3, GPU-1\n", "h").startswith("h: PID 7 (python3) on GPU-1 still holds a GPU")
    assert "(module nvidia is in use)" in driver_upgrade_unload_refusal("modprobe: FATAL: Module nvidia is in use.", "h")


@pytest.mark.parametrize("call, message", [
    (lambda: driver_upgrade_work([], "1"), "driver_upgrade_work expects the result of onprem.gpu.nvidia_driver_plan, not list."),
    (lambda: driver_upgrade_problems(PLAN_RESULT, "1", True, "auto", "H100"), "driver_upgrade_problems expects the GPU model names as a list, not str."),
    (lambda: driver_upgrade_holders(None, "h"), "driver_upgrade_holders expects nvidia-smi's output as a string, not NoneType."),
])
def test_bad_input_fails_with_one_sentence(call, message):
    with pytest.raises(AnsibleFilterError) as error:
        call()
    assert str(error.value) == message
