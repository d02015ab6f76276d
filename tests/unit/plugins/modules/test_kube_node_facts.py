# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import json
from unittest import mock

import pytest

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

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


def run_module(args, capsys):
    calls = []

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
            mock.patch.object(kube_node_facts, "read_text", side_effect=FILES.get), \
            mock.patch.object(kube_node_facts, "read_os_release", side_effect=lambda: parse_os_release(FILES["/etc/os-release"])), \
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
