# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib
from unittest import mock

import pytest

from ansible_collections.onprem.gpu.plugins.action.container_runtime_facts import ActionModule
from ansible_collections.onprem.gpu.plugins.filter.container_runtime import FilterModule

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "container_runtime"
TOOLKIT = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"]
SETTINGS = dict(
    host="gpu1", platform_supported=True, distribution="Debian 12.8", distribution_major="Debian 12", containerd_repo_required=False,
    containerd_repo_url="", containerd_package="containerd", containerd_version="", manager="apt", nvidia=True, toolkit_version="1.18.0",
    toolkit_packages=TOOLKIT, nvidia_repo_url="http://mirror", nvidia_runtime_binary="/usr/bin/nvidia-container-runtime",
    socket="/run/containerd/containerd.sock",
)
GPUS = {"driver_loaded": True, "driver_version": "580.65.06", "gpus": [{"index": 0, "mig_mode_current": "Disabled", "mig_devices": []}]}


def read(devices, holds=tuple(TOOLKIT)):
    """What the module returns for the role's verification: the dump as text, unjudged."""
    dump = (FIXTURES / "config_dump__containerd_1.7_v2.toml").read_text()
    return {"containerd": {"dump": dump, "dump_error": "", "rc": 0, "error": ""},
            "packages": {name: {"installed": "1.18.0-1", "candidate": "1.18.0-1", "offered": ["1.18.0-1"]} for name in TOOLKIT},
            "holds": list(holds), "gpus": GPUS,
            "cdi": {"devices": devices, "spec_file": "/var/run/cdi/nvidia.yaml", "spec_driver_version": "580.65.06"}}


def run_action(args, module_result):
    """The action's result where the module on the node answered ``module_result``; and how the module was called."""
    task = mock.MagicMock(args=args, async_val=0, check_mode=False)
    connection = mock.MagicMock()
    connection._shell.tmpdir = None
    plugin = ActionModule(task, connection, play_context=mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    with mock.patch.object(plugin, "_execute_module", return_value=module_result) as execute, mock.patch.object(plugin, "_remove_tmp_path"):
        return plugin.run(task_vars={}), execute


def test_a_good_runtime_passes_with_what_was_read():
    state = read(["nvidia.com/gpu=0", "nvidia.com/gpu=all"])
    result, execute = run_action({"containerd": True, "check": "verify", "settings": SETTINGS}, {"changed": False, "container_runtime": state})
    assert not result.get("failed") and result["container_runtime"] == state and execute.call_count == 1


def test_verify_fails_with_the_sentences_of_the_filter():
    state = read(["nvidia.com/gpu=all"], holds=TOOLKIT[:2])
    result = run_action({"containerd": True, "check": "verify", "settings": SETTINGS}, {"changed": False, "container_runtime": state})[0]
    problems = FilterModule().filters()["container_runtime_verify"](state, SETTINGS)
    assert len(problems) == 2 and result["failed"] and result["problems"] == problems
    # As the assert it replaces said it: the sentences joined by "; ", one full stop.
    assert result["msg"] == "; ".join(problems) + "."
    assert result["msg"].startswith("gpu1: not held: libnvidia-container-tools, libnvidia-container1; gpu1: the CDI specifications name")


@pytest.mark.parametrize("check", ["", "preflight", "offers"])
def test_other_checks_are_the_module_s_own(check):
    # The module judged them on the node (or nothing was asked): its answer passes through, a bad runtime or not.
    module_result = {"changed": False, "container_runtime": read([])}
    result = run_action({"containerd": True, "check": check, "settings": SETTINGS}, module_result)[0]
    assert not result.get("failed") and result["container_runtime"] == module_result["container_runtime"]


def test_a_module_that_failed_is_not_judged_again():
    module_result = {"failed": True, "msg": "nvidia-ctk cdi list failed with exit code 1: no driver"}
    result = run_action({"containerd": True, "check": "verify", "settings": SETTINGS}, module_result)[0]
    assert result["failed"] and result["msg"] == module_result["msg"] and "problems" not in result
