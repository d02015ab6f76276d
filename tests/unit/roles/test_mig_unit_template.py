# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The mig role's boot unit, rendered as the role renders it (Jinja2 with Ansible's trim_blocks and regex_replace).

Its order follows NVIDIA mig-parted's nvidia-mig-manager.service (deployments/systemd): after nvidia-persistenced and
Fabric Manager, before nvidia-gpu-reset.target, and here before the host's GPU clients by name as well.
"""

from __future__ import annotations

import configparser
from pathlib import Path

import jinja2
import pytest
from ansible.plugins.filter.core import regex_replace

TEMPLATE = Path(__file__).resolve().parents[3] / "roles" / "mig" / "templates" / "onprem-mig.service.j2"


def render(host_gpu_clients):
    environment = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    environment.filters["regex_replace"] = regex_replace
    text = environment.from_string(TEMPLATE.read_text(encoding="utf-8")).render(
        __mig_instances_file="/etc/onprem-gpu/mig/instances.json",
        __mig_unit="onprem-mig.service",
        __mig_python="/usr/bin/python3",
        __mig_restore_script="/usr/local/sbin/onprem-mig-restore",
        mig_nvidia_smi="nvidia-smi",
        mig_host_gpu_clients=host_gpu_clients,
    )
    unit = configparser.ConfigParser(strict=True, interpolation=None)
    unit.optionxform = str
    unit.read_string(text)
    return {key: value.split() if key in ("After", "Before") else value for key, value in unit["Unit"].items()}, text


def test_the_unit_starts_after_the_driver_services_and_before_every_gpu_client():
    unit, text = render([])
    assert unit["After"] == ["systemd-modules-load.service", "nvidia-persistenced.service", "nvidia-fabricmanager.service"]
    assert unit["Before"] == [
        "nvidia-gpu-reset.target", "nvidia-dcgm.service", "dcgm.service", "nvsm.service", "dcgm-exporter.service",
        "kubelet.service", "nvidia-cdi-refresh.service",
    ]
    assert "NVIDIA mig-parted" in text


@pytest.mark.parametrize(
    "clients",
    [
        pytest.param(["gpu-monitor", "nvidia-dcgm"], id="bare-names"),
        pytest.param(["gpu-monitor.service", "nvidia-dcgm.service"], id="unit-names"),
    ],
)
def test_host_gpu_clients_are_ordered_after_the_unit_once_each(clients):
    unit, dummy = render(clients)
    assert unit["Before"].count("nvidia-dcgm.service") == 1
    assert "gpu-monitor.service" in unit["Before"]


def test_persistenced_and_fabric_manager_listed_as_clients_stay_before_the_unit_without_a_cycle():
    unit, dummy = render(["nvidia-persistenced", "nvidia-fabricmanager.service", "nvsm"])
    assert not set(unit["After"]) & set(unit["Before"])
    assert "nvidia-persistenced.service" in unit["After"] and "nvidia-fabricmanager.service" in unit["After"]
