# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The kube_node role's kubeadm JoinConfiguration, rendered as the role renders it (Jinja2, Ansible's to_json).

kubeadm v1beta4 NodeRegistrationOptions.taints: absent (nil) gives a control-plane node the control-plane taint,
an empty list gives it none. Workers register with their pool taints, an empty list meaning none.
"""

from __future__ import annotations

import json
from pathlib import Path

import jinja2
import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[3] / "roles" / "kube_node" / "templates" / "kubeadm-join.yaml.j2"
CONTROL_PLANE_TAINT = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
POOL_TAINT = {"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}


def render(control_plane, taints, labels=None):
    environment = jinja2.Environment(trim_blocks=True, undefined=jinja2.StrictUndefined)
    environment.filters["to_json"] = json.dumps
    variables = {
        "__kube_node_managed_header": "Managed", "kube_api_endpoint": "10.0.0.1:6443", "__kube_node_token": "abcdef.0123456789abcdef",
        "__kube_node_ca_hash": "sha256:00", "kube_node_name": "node", "kube_node_cri_socket": "unix:///run/containerd/containerd.sock",
        "kube_node_taints": taints, "kube_node_labels": labels or {}, "__kube_node_control_plane_join": control_plane,
        "kube_node_control_plane_address": "10.0.0.2", "kube_node_control_plane_port": 6443, "__kube_node_certificate_key": "k" * 64,
    }
    return yaml.safe_load(environment.from_string(TEMPLATE.read_text()).render(**variables))


def test_a_control_plane_join_keeps_kubeadms_control_plane_taint():
    registration = render(True, [])["nodeRegistration"]
    assert "taints" not in registration


def test_a_control_plane_join_with_pool_taints_writes_the_control_plane_taint_too():
    assert render(True, [POOL_TAINT])["nodeRegistration"]["taints"] == [CONTROL_PLANE_TAINT, POOL_TAINT]


@pytest.mark.parametrize("taints", [[], [POOL_TAINT]])
def test_a_worker_registers_with_exactly_its_pool_taints(taints):
    configuration = render(False, taints, {"onprem.gpu/pool": "training", "example.com/rack": "r1"})
    assert configuration["nodeRegistration"]["taints"] == taints
    assert configuration["nodeRegistration"]["kubeletExtraArgs"] == [{"name": "node-labels", "value": "example.com/rack=r1,onprem.gpu/pool=training"}]
    assert "controlPlane" not in configuration
