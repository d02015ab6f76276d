# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pathlib

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.container_runtime import FilterModule

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "container_runtime"
FILTERS = FilterModule().filters()
TOOLKIT = ["nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"]
SETTINGS = dict(
    host="gpu1", platform_supported=True, distribution="Debian 12.8", distribution_major="Debian 12", containerd_repo_required=False,
    containerd_repo_url="", containerd_package="containerd", containerd_version="", manager="apt", nvidia=True, toolkit_version="1.18.0",
    toolkit_packages=TOOLKIT, nvidia_repo_url="http://mirror", nvidia_runtime_binary="/usr/bin/nvidia-container-runtime",
    socket="/run/containerd/containerd.sock",
)
MIG_NODE = {"driver_loaded": True, "driver_version": "580.65.06",
            "gpus": [{"index": 0, "mig_mode_current": "Enabled", "mig_devices": [0, 1]}, {"index": 1, "mig_mode_current": "Disabled", "mig_devices": []}]}


def read(dump, devices):
    return {"containerd": {"dump": (FIXTURES / dump).read_text(), "dump_error": "", "rc": 0, "error": ""},
            "packages": {name: {"installed": "1.18.0-1", "candidate": "1.18.0-1", "offered": ["1.18.0-1"]} for name in TOOLKIT},
            "holds": TOOLKIT, "gpus": MIG_NODE,
            "cdi": {"devices": devices, "spec_file": "/var/run/cdi/nvidia.yaml", "spec_driver_version": "580.65.06"}}


@pytest.mark.parametrize("dump", ["config_dump__containerd_1.7_v2.toml", "config_dump__containerd_2.1_v3.toml"])
def test_verify_parses_both_dumps_and_counts_mig_devices(dump):
    good = read(dump, ["nvidia.com/gpu=0:0", "nvidia.com/gpu=0:1", "nvidia.com/gpu=1", "nvidia.com/gpu=all"])
    assert FILTERS["container_runtime_verify"](good, SETTINGS) == []
    before_mig = read(dump, ["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=all"])
    problems = FILTERS["container_runtime_verify"](before_mig, SETTINGS)
    assert len(problems) == 1 and "missing nvidia.com/gpu=0:0, nvidia.com/gpu=0:1" in problems[0]
    assert FILTERS["container_runtime_cdi"](before_mig, "gpu1") == [problems[0].split("; refresh")[0]]


def test_verify_reports_a_dump_that_fails_or_is_no_toml():
    state = read("config_dump__containerd_1.7_v2.toml", [])
    state["containerd"] = {"dump": "", "dump_error": "failed to load TOML: near line 3", "rc": 0, "error": ""}
    problems = FILTERS["container_runtime_verify"](dict(state, gpus={"driver_loaded": False}), SETTINGS)
    assert problems[0] == "`containerd config dump` fails on gpu1: failed to load TOML: near line 3"
    state["containerd"] = {"dump": "version = [", "dump_error": "", "rc": 0, "error": ""}
    assert FILTERS["container_runtime_verify"](state, SETTINGS)[0].startswith("containerd on gpu1 prints a configuration that is no TOML")


def test_offers_plan_containerd_2_with_configuration_version_3():
    state = {"packages": {"containerd": {"installed": None, "candidate": "2.1.4-1", "offered": ["2.1.4-1"]},
                          **{name: {"installed": None, "candidate": "1.18.0-1", "offered": ["1.18.0-1"]} for name in TOOLKIT}},
             "holds": []}
    plan = FILTERS["container_runtime_offers"](state, SETTINGS)
    assert plan == {"problems": [], "containerd": {"version": "2.1.4", "config_version": 3, "cri_cdi": True},
                    "install": ["containerd"] + [name + "=1.18.0-*" for name in TOOLKIT], "hold": [name + "=1.18.0" for name in TOOLKIT]}


def test_preflight_and_bad_input():
    assert FILTERS["container_runtime_preflight"]({"keys": []}, SETTINGS) == []
    with pytest.raises(AnsibleFilterError, match="expects container_runtime_facts' container_runtime as a mapping"):
        FILTERS["container_runtime_verify"]("text", SETTINGS)
