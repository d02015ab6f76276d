# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import kube_control_plane_ready

ARGS = {"kubeconfig": "/etc/kubernetes/admin.conf", "node_name": "dc1-cp1", "version": "1.35.4", "cluster_name": "dc1", "host": "dc1-cp1"}
# The lab double's node, cut to what the check reads.
NODE = json.dumps({"metadata": {"name": "dc1-cp1", "labels": {"node-role.kubernetes.io/control-plane": ""}},
                   "status": {"nodeInfo": {"kubeletVersion": "v1.35.4"}}})


def run_module(args, capsys, readyz=(0, "ok", ""), node=(0, NODE, ""), kubectl="/usr/bin/kubectl"):
    calls = []

    def run_command(argv, **kwargs):
        calls.append(argv)
        return readyz if "/readyz" in argv else node

    with patch_module_args(args), \
            mock.patch.object(AnsibleModule, "get_bin_path", side_effect=lambda name, required=False: kubectl), \
            mock.patch.object(AnsibleModule, "run_command", side_effect=run_command), \
            pytest.raises(SystemExit):
        kube_control_plane_ready.main()
    return json.loads(capsys.readouterr().out), calls


def test_a_ready_control_plane_node(capsys):
    result, calls = run_module({**ARGS, "_ansible_check_mode": True}, capsys)
    assert result.get("failed") is not True
    assert result["changed"] is False
    assert result["readyz"] == "ok"
    assert result["kubelet_version"] == "v1.35.4"
    assert calls == [
        ["/usr/bin/kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "--raw", "/readyz", "--request-timeout", "10s"],
        ["/usr/bin/kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "node", "dc1-cp1", "--output", "json"],
    ]


def test_an_api_server_that_does_not_answer(capsys):
    result, _calls = run_module(ARGS, capsys, readyz=(1, "", "The connection to the server 10.89.50.201:6443 was refused\n"),
                                node=(1, "", "The connection to the server 10.89.50.201:6443 was refused\n"))
    assert result["failed"] is True
    assert result["msg"] == ("dc1-cp1: the API server of the dc1 cluster is not ready (The connection to the server 10.89.50.201:6443 was refused);"
                             " see `journalctl -u kubelet`.")


def test_a_node_of_another_version(capsys):
    result, _calls = run_module(ARGS, capsys, node=(0, NODE.replace("v1.35.4", "v1.34.2"), ""))
    assert result["msg"] == "dc1-cp1: the cluster has no control-plane node dc1-cp1 at v1.35.4 (wrong labels or kubelet version)."


def test_a_missing_kubectl_is_said_as_an_api_server_that_does_not_answer(capsys):
    result, calls = run_module(ARGS, capsys, kubectl=None)
    assert calls == []
    assert result["msg"] == "dc1-cp1: the API server of the dc1 cluster is not ready (kubectl not found); see `journalctl -u kubelet`."
