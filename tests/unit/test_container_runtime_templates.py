# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The container_runtime role's containerd templates, rendered for containerd 1.6, 1.7 and 2.x and merged as
containerd merges an import (a plugin table of the drop-in replaces the one of config.toml), then read back
with the same code that reads `containerd config dump`."""

from __future__ import annotations

import pathlib
import tomllib

import jinja2
import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._container_runtime import cri_settings

TEMPLATES = pathlib.Path(__file__).resolve().parents[2] / "roles" / "container_runtime" / "templates"


def render(name, config_version, cri_cdi):
    environment = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), trim_blocks=True, undefined=jinja2.StrictUndefined)
    # As Ansible's bool filter, for the booleans given here.
    environment.filters["bool"] = bool
    return environment.get_template(name).render(
        __container_runtime_managed_header="Managed by onprem.gpu.",
        __container_runtime_containerd={"version": "x", "config_version": config_version, "cri_cdi": cri_cdi},
        __container_runtime_drop_in_dir="/etc/containerd/conf.d",
        __container_runtime_socket="/run/containerd/containerd.sock",
        __container_runtime_nvidia_runtime_binary="/usr/bin/nvidia-container-runtime",
        container_runtime_sandbox_image="registry.k8s.io/pause:3.10.1",
        container_runtime_cni_bin_dir="/opt/cni/bin",
        container_runtime_cni_conf_dir="/etc/cni/net.d",
        container_runtime_nvidia_default_runtime=False,
    )


@pytest.mark.parametrize("config_version, cri_cdi", [(2, False), (2, True), (3, True)], ids=["containerd-1.6", "containerd-1.7", "containerd-2.x"])
def test_config_and_drop_in_carry_the_cri_settings_in_the_configuration_version(config_version, cri_cdi):
    config = tomllib.loads(render("config.toml.j2", config_version, cri_cdi))
    drop_in = tomllib.loads(render("nvidia.toml.j2", config_version, cri_cdi))
    assert config["version"] == drop_in["version"] == config_version
    merged = dict(config, plugins=dict(config["plugins"], **drop_in["plugins"]))
    cri = cri_settings(merged)
    assert cri["sandbox_image"] == "registry.k8s.io/pause:3.10.1"
    assert cri["cni_bin_dir"] == "/opt/cni/bin" and cri["default_runtime"] == "runc"
    assert cri["runtimes"]["nvidia"]["options"] == {"BinaryName": "/usr/bin/nvidia-container-runtime", "SystemdCgroup": True}
    assert cri["runtimes"]["runc"]["options"] == {"SystemdCgroup": True}
    assert (cri["enable_cdi"], cri["cdi_spec_dirs"]) == ((True, ["/etc/cdi", "/var/run/cdi"]) if cri_cdi else (None, None))
    expected_plugins = {"io.containerd.cri.v1.images", "io.containerd.cri.v1.runtime"} if config_version == 3 else {"io.containerd.grpc.v1.cri"}
    assert set(config["plugins"]) == set(drop_in["plugins"]) == expected_plugins
