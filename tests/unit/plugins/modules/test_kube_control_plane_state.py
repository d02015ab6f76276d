# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import kube_control_plane_state


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        kube_control_plane_state.main()
    return json.loads(capsys.readouterr().out)


def paths(tmp_path, admin=False, manifest=False):
    (tmp_path / "manifests").mkdir()
    if admin:
        (tmp_path / "admin.conf").write_text("apiVersion: v1\n")
    if manifest:
        (tmp_path / "manifests" / "kube-apiserver.yaml").write_text("kind: Pod\n")
    return {"admin_kubeconfig": str(tmp_path / "admin.conf"), "apiserver_manifest": str(tmp_path / "manifests" / "kube-apiserver.yaml")}


@pytest.mark.parametrize("initialised", [False, True])
def test_reads_whether_the_control_plane_is_initialised(tmp_path, capsys, initialised):
    result = run_module({**paths(tmp_path, initialised, initialised), "host": "dc1-cp1", "address": "10.89.50.11",
                         "_ansible_check_mode": True}, capsys)
    assert result.get("failed") is not True
    assert result["changed"] is False
    assert result["initialised"] is initialised
    assert result["apiserver_manifest"] is initialised


def test_fails_with_every_problem_in_one_message(tmp_path, capsys):
    files = paths(tmp_path, admin=True)
    result = run_module({**files, "host": "dc1-cp1", "address": "", "problems": ["dc1: kube_service_cidr is not a network."]}, capsys)
    assert result["failed"] is True
    assert result["initialised"] is True and result["apiserver_manifest"] is False
    assert len(result["problems"]) == 3
    assert result["msg"] == " ".join(result["problems"])
    assert result["msg"].startswith("dc1: kube_service_cidr is not a network. dc1-cp1 has no address for its API server")
    assert result["problems"][2] == (f"dc1-cp1 has {files['admin_kubeconfig']} but no API server manifest: a kubeadm init or join stopped"
                                     " half way; run `kubeadm reset -f` on it and run the play again.")
