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

from ansible_collections.onprem.gpu.plugins.module_utils import _package_probe
from ansible_collections.onprem.gpu.plugins.module_utils import _package_source as source
from ansible_collections.onprem.gpu.plugins.modules import package_source

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\nlab\n-----END PGP PUBLIC KEY BLOCK-----\n"
LAB = {"name": "onprem-gpu-lab", "url": "http://mirror:8080", "suites": ["bookworm"], "components": ["main"], "key_url": "https://mirror/lab.asc"}
MADISON = "nvidia-container-toolkit | 1.18.0-1 | http://mirror:8080 bookworm/main amd64 Packages\n"


DEBIAN = {"ID": "debian", "VERSION_CODENAME": "bookworm"}


def run_module(args, capsys, tmp_path, key_answer=(KEY, 200), holds="", check_mode=False, release=None):
    """Run the module on a Debian 12 node (or ``release``) whose /etc lives under tmp_path; return the result and the commands run."""
    calls = []

    def run_command(argv, **kwargs):
        calls.append(argv)
        if argv[:2] == ["apt-mark", "showhold"] or argv[-2:] == ["versionlock", "list"]:
            return 0, holds, ""
        return 0, (MADISON if "madison" in argv else ""), ""

    content, status = key_answer
    response = io.BytesIO(content.encode()) if content is not None else None
    args = dict(args, _ansible_check_mode=check_mode)
    with patch_module_args(args), mock.patch.object(AnsibleModule, "run_command", side_effect=run_command), \
            mock.patch.object(_package_probe, "fetch_url", return_value=(response, {"status": status, "msg": "refused"})), \
            mock.patch.object(package_source, "read_os_release", return_value=release or DEBIAN), \
            mock.patch.object(source, "keyring_path", lambda family, name, key: str(tmp_path / f"keyrings/{name}.asc")), \
            mock.patch.object(source, "source_path", lambda family, name: str(tmp_path / f"sources.list.d/{name}.sources")), \
            mock.patch.object(source, "preferences_path", lambda role: str(tmp_path / f"preferences.d/onprem-gpu-{role}.pref")), \
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
        "The onprem-gpu-lab repository cannot be used: its key https://mirror/lab.asc is unreachable (refused); check the role's "
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


KUBE = ["kubelet=1.35.4", "kubeadm=1.35.4", "kubectl=1.35.4"]
KUBE_PINS = source.pins_text({"kubelet": "1.35.4-*", "kubeadm": "1.35.4-*", "kubectl": "1.35.4-*"})
KUBE_PREFERENCES = "preferences.d/onprem-gpu-kube_node.pref"


def test_a_hold_at_a_version_pins_it_in_the_including_roles_file_and_a_second_run_changes_nothing(capsys, tmp_path):
    args = {"hold": KUBE, "parent_roles": ["onprem.gpu.kube_node", "onprem.gpu.kube_control_plane"]}
    result, calls = run_module(args, capsys, tmp_path)
    assert result["changed"] and result["held"] == ["kubelet", "kubeadm", "kubectl"]
    assert calls == [["apt-mark", "showhold"], ["apt-mark", "hold", "kubelet", "kubeadm", "kubectl"]]
    pref = tmp_path / KUBE_PREFERENCES
    assert pref.read_text() == KUBE_PINS and pref.stat().st_mode & 0o777 == 0o644
    assert result["files"] == [str(pref)] and result["pins"] == {"kubeadm": "1.35.4-*", "kubectl": "1.35.4-*", "kubelet": "1.35.4-*"}
    assert result["diff"] == [{"before_header": str(pref), "after_header": str(pref), "before": "", "after": KUBE_PINS}]
    again, calls = run_module(args, capsys, tmp_path, holds="kubeadm\nkubectl\nkubelet\n")
    assert not again["changed"] and again["files"] == [] and "diff" not in again and calls == [["apt-mark", "showhold"]]


def test_a_new_version_moves_the_pins_of_held_packages(capsys, tmp_path):
    (tmp_path / "preferences.d").mkdir()
    pref = tmp_path / KUBE_PREFERENCES
    pref.write_text(KUBE_PINS)
    pref.chmod(0o600)
    args = {"hold": [request.replace("1.35.4", "1.36.2") for request in KUBE], "parent_roles": ["kube_node"]}
    result, calls = run_module(args, capsys, tmp_path, holds="kubeadm\nkubectl\nkubelet\n")
    assert result["changed"] and result["held"] == [] and calls == [["apt-mark", "showhold"]]
    assert pref.read_text() == KUBE_PINS.replace("1.35.4", "1.36.2") and pref.stat().st_mode & 0o777 == 0o644
    assert result["diff"][0]["before"] == KUBE_PINS and result["diff"][0]["after"] == KUBE_PINS.replace("1.35.4", "1.36.2")


def test_check_mode_reports_the_pin_file_and_its_diff_and_writes_nothing(capsys, tmp_path):
    result, calls = run_module({"hold": KUBE, "parent_roles": ["kube_node"]}, capsys, tmp_path, check_mode=True)
    assert result["changed"] and result["files"] == [str(tmp_path / KUBE_PREFERENCES)] and result["diff"][0]["after"] == KUBE_PINS
    assert calls == [["apt-mark", "showhold"]] and not (tmp_path / "preferences.d").exists()


def test_a_release_removes_its_stanza_and_the_last_one_removes_the_file(capsys, tmp_path):
    (tmp_path / "preferences.d").mkdir()
    pref = tmp_path / KUBE_PREFERENCES
    pref.write_text(KUBE_PINS)
    result, calls = run_module({"unhold": ["kubectl"], "parent_roles": ["kube_node"]}, capsys, tmp_path, holds="kubeadm\nkubectl\nkubelet\n")
    assert result["changed"] and calls[-1] == ["apt-mark", "unhold", "kubectl"]
    assert pref.read_text() == source.pins_text({"kubelet": "1.35.4-*", "kubeadm": "1.35.4-*"})
    result, _calls = run_module({"unhold": ["kubelet", "kubeadm"], "parent_roles": ["kube_node"]}, capsys, tmp_path, holds="kubeadm\nkubelet\n",
                                check_mode=True)
    assert result["changed"] and result["diff"][0]["after"] == "" and pref.exists()
    result, _calls = run_module({"unhold": ["kubelet", "kubeadm"], "parent_roles": ["kube_node"]}, capsys, tmp_path, holds="kubeadm\nkubelet\n")
    assert result["changed"] and result["pins"] == {} and not pref.exists()


def test_a_hold_by_name_alone_writes_no_pin_and_keeps_the_one_there_is(capsys, tmp_path):
    result, _calls = run_module({"hold": ["kubelet"], "parent_roles": ["kube_node"]}, capsys, tmp_path)
    assert result["changed"] and result["pins"] == {} and not (tmp_path / "preferences.d").exists()
    (tmp_path / "preferences.d").mkdir()
    (tmp_path / KUBE_PREFERENCES).write_text(KUBE_PINS)
    result, _calls = run_module({"hold": ["kubelet", "kubeadm", "kubectl"], "parent_roles": ["kube_node"]}, capsys, tmp_path,
                                holds="kubeadm\nkubectl\nkubelet\n")
    assert not result["changed"] and (tmp_path / KUBE_PREFERENCES).read_text() == KUBE_PINS


def test_bad_hold_requests_fail_before_anything_is_read_or_written(capsys, tmp_path):
    result, calls = run_module({"repositories": [LAB], "hold": ["kubelet=1.35.4\nPin-Priority: -1"], "parent_roles": ["kube_node"]}, capsys,
                               tmp_path)
    assert result["failed"] and calls == [] and not (tmp_path / "sources.list.d").exists() and not (tmp_path / "preferences.d").exists()
    assert result["msg"] == ("The version '1.35.4\\nPin-Priority: -1' of kubelet is not a Debian version (an optional epoch 'N:', then a digit, "
                             "then letters, digits, '.', '+', '~' or '-'; no spaces).")
    result, calls = run_module({"unhold": ["nccl_tests"], "parent_roles": ["nccl_tests"]}, capsys, tmp_path)
    assert result["failed"] and calls == [] and result["msg"].startswith("The package name 'nccl_tests' is not a Debian package name")


def test_dnf_locks_the_version_and_writes_no_preferences(capsys, tmp_path):
    rocky = {"ID": "rocky", "ID_LIKE": "rhel centos fedora"}
    result, calls = run_module({"hold": ["nvidia-driver-cuda=580.65.06"], "parent_roles": ["nvidia_driver"]}, capsys, tmp_path, release=rocky)
    assert result["changed"] and result["pins"] == {} and result["files"] == []
    assert calls[-1] == ["dnf", "--quiet", "versionlock", "add", "nvidia-driver-cuda-580.65.06"]
    assert not (tmp_path / "preferences.d").exists()
