# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import io
import json
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as source
from ansible_collections.onprem.gpu.plugins.modules import package_source

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n-----END PGP PUBLIC KEY BLOCK-----\n"
LAB = {"name": "onprem-gpu-lab", "url": "http://mirror:8080", "suites": ["bookworm"], "components": ["main"], "key_url": "http://mirror:8080/lab.asc"}
MADISON = "nvidia-container-toolkit | 1.18.0-1 | http://mirror:8080 bookworm/main amd64 Packages\n"


def run_module(args, capsys, tmp_path, key_answer=(KEY, 200), holds="", check_mode=False):
    """Run the module on a Debian 12 node whose /etc lives under tmp_path; return the result and the commands run."""
    calls = []

    def run_command(argv, **kwargs):
        calls.append(argv)
        if argv[:2] == ["apt-mark", "showhold"]:
            return 0, holds, ""
        return 0, (MADISON if "madison" in argv else ""), ""

    content, status = key_answer
    response = io.BytesIO(content.encode()) if content is not None else None
    args = dict(args, _ansible_check_mode=check_mode)
    with patch_module_args(args), mock.patch.object(AnsibleModule, "run_command", side_effect=run_command), \
            mock.patch.object(package_source, "fetch_url", return_value=(response, {"status": status, "msg": "refused"})), \
            mock.patch.object(package_source, "read_os_release", return_value={"ID": "debian", "VERSION_CODENAME": "bookworm"}), \
            mock.patch.object(source, "keyring_path", lambda family, name, key: str(tmp_path / f"keyrings/{name}.asc")), \
            mock.patch.object(source, "source_path", lambda family, name: str(tmp_path / f"sources.list.d/{name}.sources")), \
            pytest.raises(SystemExit):
        package_source.main()
    return json.loads(capsys.readouterr().out), calls


def test_it_refuses_to_run_outside_the_collections_roles(capsys, tmp_path):
    result, calls = run_module({"repositories": [LAB], "parent_roles": []}, capsys, tmp_path)
    assert result["failed"] and result["msg"].startswith("onprem.gpu.package_source is internal to the onprem.gpu collection")
    assert calls == [] and not (tmp_path / "sources.list.d").exists()


def test_it_writes_the_key_and_source_then_refreshes_once_and_a_second_run_changes_nothing(capsys, tmp_path):
    args = {"repositories": [LAB, dict(LAB)], "packages": ["nvidia-container-toolkit=1.18.0"], "parent_roles": ["onprem.gpu.container_runtime"]}
    result, calls = run_module(args, capsys, tmp_path)
    assert result["changed"] and result["ready"] and result["missing"] == []
    assert result["offered"] == {"nvidia-container-toolkit": ["1.18.0-1"]}
    assert (tmp_path / "keyrings/onprem-gpu-lab.asc").read_text() == KEY
    assert (tmp_path / "sources.list.d/onprem-gpu-lab.sources").read_text() == source.source_text(
        "Debian", LAB, str(tmp_path / "keyrings/onprem-gpu-lab.asc"), "bookworm")
    assert calls[-1] == ["apt-get", "-q", "update"]
    again, calls = run_module(args, capsys, tmp_path)
    assert not again["changed"] and again["files"] == [] and ["apt-get", "-q", "update"] not in calls


def test_nothing_is_written_when_a_version_is_not_offered_or_the_key_is_missing(capsys, tmp_path):
    args = {"repositories": [LAB], "packages": ["nvidia-container-toolkit=1.17.8"], "parent_roles": ["rdma"], "require": False}
    result, _calls = run_module(args, capsys, tmp_path)
    assert not result["changed"] and not result["ready"] and result["missing"] == ["nvidia-container-toolkit=1.17.8"]
    result, calls = run_module(dict(args, packages=[]), capsys, tmp_path, key_answer=("<html/>", 404))
    assert not result["ready"] and result["keys"][0]["problem"] == "answered HTTP 404 with no signing key" and calls == []
    assert not (tmp_path / "sources.list.d").exists()


def test_by_default_it_fails_in_one_sentence_when_not_ready(capsys, tmp_path):
    args = {"repositories": [LAB], "parent_roles": ["rdma"]}
    result, calls = run_module(args, capsys, tmp_path, key_answer=(None, -1))
    assert result["failed"] and calls == [] and not (tmp_path / "sources.list.d").exists()
    assert result["msg"] == (
        "The onprem-gpu-lab repository cannot be used: its key http://mirror:8080/lab.asc is unreachable (refused); check the role's "
        "*_repo_url and *_repo_key_url (or onprem_gpu_mirror_url and onprem_gpu_mirror_key_url), that the mirror is up, and the network "
        "path (DNS, proxy, firewall) from this host to it.")
    result, _calls = run_module(dict(args, packages=["kubeadm=1.36.2"]), capsys, tmp_path)
    assert result["failed"] and result["msg"] == "http://mirror:8080 (suites bookworm, components main) offers no kubeadm=1.36.2."


def test_check_mode_reports_the_files_and_holds_and_changes_nothing(capsys, tmp_path):
    result, calls = run_module({"repositories": [LAB], "parent_roles": ["kube_node"]}, capsys, tmp_path, check_mode=True)
    assert result["changed"] and len(result["files"]) == 2 and not (tmp_path / "sources.list.d").exists()
    result, calls = run_module({"hold": ["kubelet", "kubeadm"], "parent_roles": ["kube_node"]}, capsys, tmp_path, holds="kubelet\n",
                               check_mode=True)
    assert result["changed"] and result["held"] == ["kubeadm"] and calls == [["apt-mark", "showhold"]]


def test_hold_holds_only_what_is_not_held(capsys, tmp_path):
    result, calls = run_module({"hold": ["kubelet", "kubeadm"], "parent_roles": ["kube_node"]}, capsys, tmp_path, holds="kubelet\n")
    assert result["changed"] and calls == [["apt-mark", "showhold"], ["apt-mark", "hold", "kubeadm"]]
    result, calls = run_module({"hold": ["kubelet"], "parent_roles": ["kube_node"]}, capsys, tmp_path, holds="kubelet\n")
    assert not result["changed"] and calls == [["apt-mark", "showhold"]]
