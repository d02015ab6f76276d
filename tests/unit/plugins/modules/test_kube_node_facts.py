# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.module_utils._kube_node import repository_files
from ansible_collections.onprem.gpu.plugins.module_utils._os_release import parse_os_release
from ansible_collections.onprem.gpu.plugins.modules import kube_node_facts

FILES = {
    "/etc/os-release": 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n',
    "/proc/sys/net/ipv4/ip_forward": "1\n",
    "/proc/swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n/swap.img file 8388604 0 -2\n",
    "/proc/filesystems": "nodev\tsysfs\nnodev\toverlay\n\text4\n",
    "/etc/fstab": "UUID=1 / ext4 defaults 0 1\n",
}
# What the collection's one offers check (module_utils/_package_probe.probe) answers for the kubernetes repository.
PROBE_ANSWER = {"keys": [{"name": "kubernetes", "url": "http://mirror/Release.key", "status": 200, "msg": "OK",
                          "content": b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n...", "problem": None}],
                "unreadable": None, "offered": {"kubelet": ["1.35.4-1.1"], "kubeadm": ["1.35.4-1.1"]}, "missing": [], "problems": []}


def run_module(args, capsys, files=None):
    calls = []
    files = FILES if files is None else files

    def run_command(argv, **kwargs):
        calls.append(argv)
        answers = {
            "dpkg-query": (1, "kubelet\t1.35.4-1.1\thold installed\n", "dpkg-query: no packages found matching kubeadm\n"),
            "dpkg": (0, "amd64\n", ""),
            "kubelet": (0, "Kubernetes v1.35.4\n", ""),
            "systemctl": (0, "Id=kubelet.service\nRequiresMountsFor=/raid\nUnitFileState=enabled\n\n"
                             "Id=swap.target\nRequiresMountsFor=\nUnitFileState=masked\n", ""),
        }
        return answers[argv[0].rsplit("/", 1)[-1]]

    def probe(module, family, codename, repositories, requests):
        calls.append(["probe", family, codename, repositories, requests])
        return {**PROBE_ANSWER, "keys": list(PROBE_ANSWER["keys"])}

    with patch_module_args(args), \
            mock.patch.object(AnsibleModule, "get_bin_path", side_effect=lambda name, required=False: "/usr/bin/" + name), \
            mock.patch.object(AnsibleModule, "run_command", side_effect=run_command), \
            mock.patch.object(kube_node_facts, "probe", side_effect=probe), \
            mock.patch.object(kube_node_facts, "read_text", side_effect=files.get), \
            mock.patch.object(kube_node_facts, "read_os_release", side_effect=lambda: parse_os_release(files["/etc/os-release"])), \
            mock.patch.object(kube_node_facts.os, "access", return_value=True), \
            mock.patch.object(kube_node_facts.os.path, "exists", return_value=False), \
            pytest.raises(SystemExit):
        kube_node_facts.main()
    return json.loads(capsys.readouterr().out), calls


def test_one_reading_of_the_node_and_the_mirror(capsys):
    result, calls = run_module({
        "packages": ["kubelet", "kubeadm"], "sysctls": ["net.ipv4.ip_forward", "net.bridge.bridge-nf-call-iptables"],
        "kernel_modules": ["overlay", "br_netfilter"], "files": ["/etc/fstab", "/etc/missing"], "units": ["kubelet.service", "swap.target"],
        "repository": {"name": "kubernetes", "url": "http://mirror/", "suites": ["/"], "key_url": "https://mirror/Release.key"},
        "version": "1.35.4",
        "_ansible_check_mode": True}, capsys)
    assert result["changed"] is False
    assert result["os_release"]["ID"] == "debian"
    assert result["packages"] == {"kubelet": {"version": "1.35.4-1.1", "held": True}}
    assert result["kubelet_version"] == "Kubernetes v1.35.4"
    assert result["sysctls"] == {"net.ipv4.ip_forward": "1"}
    assert result["swap_areas"] == 1
    assert result["kernel_modules"] == ["overlay"]
    assert result["files"] == {"/etc/fstab": FILES["/etc/fstab"], "/etc/missing": None}
    assert result["units"]["swap.target"]["UnitFileState"] == "masked"
    assert result["units"]["kubelet.service"]["RequiresMountsFor"] == "/raid"
    assert result["offers"] == {"unreadable": None, "offered": {"kubelet": ["1.35.4-1.1"], "kubeadm": ["1.35.4-1.1"]}, "missing": [], "problems": []}
    assert result["key"] == {"status": 200, "msg": "OK", "content": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n..."}
    # The packages at the cluster's version, asked of the one repository, with the node's codename.
    assert ["probe", "Debian", "", [{"name": "kubernetes", "url": "http://mirror/", "suites": ["/"], "components": [],
                                     "key_url": "https://mirror/Release.key", "key_fingerprint": ""}], ["kubelet=1.35.4", "kubeadm=1.35.4"]] in calls


REPOSITORY = {"name": "kubernetes", "url": "http://mirror/", "suites": ["/"], "components": [], "key_url": "https://mirror/Release.key",
              "key_fingerprint": ""}
SETTINGS = {"version": "1.35.4", "api_endpoint": "10.89.50.201:6443", "pools": [], "labels": {}, "taints": [], "datacenter": "dc1",
            "control_plane_datacenters": ["dc1"], "control_plane_group": "control_plane"}
# As the role's __kube_node_wanted, which has no install_files: the module takes them from the key it reads.
WANTED = {"version": "1.35.4", "repo_url": "http://mirror/", "key_url": "https://mirror/Release.key", "packages": ["kubelet"],
          "configure_files": {}, "pin_file": {}, "sysctls": {"net.ipv4.ip_forward": 1}, "kernel_modules": ["overlay"], "swap_off": True,
          "required_mounts": ["/raid"], "upgrade": False}
# A node that lacks nothing of WANTED: kubelet at the version and held, the key and source of the key the mirror serves,
# no swap, the sysctl set, overlay present, kubelet enabled and swap.target masked (systemctl's answer).
SETTLED = {**FILES, "/proc/swaps": "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n",
           **repository_files(REPOSITORY, PROBE_ANSWER["keys"][0]["content"].decode())}


def judged(check, **changes):
    return {"packages": ["kubelet"], "sysctls": ["net.ipv4.ip_forward"], "kernel_modules": ["overlay"],
            "files": list(repository_files(REPOSITORY, "-----BEGIN PGP PUBLIC KEY BLOCK-----") | {"/etc/fstab": None}),
            "units": ["kubelet.service", "swap.target"], "repository": REPOSITORY, "version": "1.35.4",
            "check": check, "settings": SETTINGS, "host": "gpu1", "wanted": WANTED, **changes}


def test_a_node_that_lacks_nothing_is_checked_and_verified_in_the_read(capsys):
    result, _calls = run_module(judged("preflight_and_verify"), capsys, files=SETTLED)
    assert not result.get("failed"), result.get("msg")
    assert result["work"] == {"install": [], "configure": []}


def test_the_reading_of_a_node_that_lacks_nothing_is_its_verification(capsys):
    result, _calls = run_module(judged("preflight_and_verify", wanted={**WANTED, "required_mounts": ["/raid", "/cache"]}), capsys, files=SETTLED)
    assert result["failed"] is True
    assert result["msg"] == ("gpu1: kubelet does not wait for /cache (RequiresMountsFor is \"/raid\"); run the nvme_cache role, which writes "
                             "the drop-in.")
    assert result["problems"] == [result["msg"]]
    # What was read comes back with the failure.
    assert result["packages"] == {"kubelet": {"version": "1.35.4-1.1", "held": True}}
    # The preflight alone does not verify.
    result, _calls = run_module(judged("preflight", wanted={**WANTED, "required_mounts": ["/raid", "/cache"]}), capsys, files=SETTLED)
    assert not result.get("failed") and result["work"] == {"install": [], "configure": []}


def test_a_node_with_work_is_not_verified_before_the_changes(capsys):
    # Swap on, and the key and source not written yet.
    result, _calls = run_module(judged("preflight_and_verify"), capsys)
    assert not result.get("failed"), result.get("msg")
    assert result["work"] == {"install": ["write /etc/apt/keyrings/kubernetes.asc", "write /etc/apt/sources.list.d/kubernetes.sources"],
                              "configure": ["turn swap off"]}


def test_the_preflights_problems_fail_the_read_in_one_message(capsys):
    settings = {**SETTINGS, "version": "1.35", "datacenter": "dc9"}
    result, _calls = run_module(judged("preflight", settings=settings), capsys)
    assert result["failed"] is True
    assert len(result["problems"]) == 2 and result["msg"] == " ".join(result["problems"])
    assert result["problems"][0].startswith("gpu1: kube_version must be a full Kubernetes version such as 1.35.4 (got 1.35)")
    assert result["problems"][1].startswith("gpu1: datacenter dc9 has no host in the control_plane group")
    assert "work" not in result


def test_a_check_needs_what_it_judges_against(capsys):
    result, _calls = run_module({"packages": ["kubelet"], "check": "preflight"}, capsys)
    assert result["failed"] is True
    assert "settings, host, wanted, repository" in result["msg"]
