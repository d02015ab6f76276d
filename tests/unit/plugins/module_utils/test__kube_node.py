# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._kube_node import (
    input_problems,
    judgement,
    kubelet_label_refused,
    mirror_problems,
    node_problems,
    node_work,
    parse_dpkg_query,
    parse_systemctl_show,
    pause_image,
    preflight_problems,
    repository_files,
    version_change_problems,
)

GOOD = {"version": "1.35.4", "api_endpoint": "10.89.50.201:6443", "pools": ["training_pool"], "labels": {"onprem.gpu/pool": "training"},
        "taints": [{"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}], "datacenter": "dc1",
        "control_plane_datacenters": ["dc1", "dc2"], "control_plane_group": "control_plane"}

WANTED = {"version": "1.35.4", "packages": ["kubelet", "kubeadm", "kubectl"], "repo_url": "http://mirror/",
          "key_url": "http://mirror/Release.key",
          "install_files": {"/etc/apt/keyrings/kubernetes.asc": "KEY\n", "/etc/apt/sources.list.d/kubernetes.sources": "Types: deb\n"},
          "configure_files": {"/etc/modules-load.d/kubernetes.conf": "# h\noverlay\nbr_netfilter\n", "/etc/sysctl.d/90-kubernetes.conf": "# h\n"},
          "sysctls": {"net.ipv4.ip_forward": 1, "net.bridge.bridge-nf-call-iptables": 1}, "kernel_modules": ["overlay", "br_netfilter"],
          "swap_off": True, "required_mounts": []}

# `dpkg-query --show --showformat '${Package}\t${Version}\t${db:Status-Want} ${db:Status-Status}\n' kubelet kubeadm kubectl`
# on a node where kubelet and kubeadm are installed and held and kubectl was removed.
DPKG = "kubelet\t1.35.4-1.1\thold installed\nkubeadm\t1.35.4-1.1\thold installed\nkubectl\t1.35.4-1.1\tdeinstall config-files\n"


def settled_node():
    return {
        "packages": {name: {"version": "1.35.4-1.1", "held": True} for name in ("kubelet", "kubeadm", "kubectl")},
        "kubelet_version": "Kubernetes v1.35.4",
        "sysctls": {"net.ipv4.ip_forward": "1", "net.bridge.bridge-nf-call-iptables": "1"},
        "swap_areas": 0,
        "kernel_modules": ["overlay", "br_netfilter"],
        "files": {**WANTED["install_files"], **WANTED["configure_files"], "/etc/fstab": "UUID=1 / ext4 defaults 0 1\n# /swap.img none swap sw 0 0\n"},
        "units": {"kubelet.service": {"UnitFileState": "enabled", "RequiresMountsFor": "/raid /var/lib/kubelet"},
                  "swap.target": {"UnitFileState": "masked", "RequiresMountsFor": ""}},
        "os_release": {"ID": "debian", "VERSION_ID": "12"},
        "offers": {"offered": {"kubelet": ["1.35.4-1.1"], "kubeadm": ["1.35.3-1.1", "1.35.4-1.1"], "kubectl": ["1.35.4-1.1"]}, "missing": [],
                   "unreadable": None, "problems": []},
        "key": {"status": 200, "msg": "OK", "content": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n..."},
    }


@pytest.mark.parametrize(
    "version, image",
    [("1.31.9", "registry.k8s.io/pause:3.10"), ("1.33.1", "registry.k8s.io/pause:3.10"), ("v1.34.2", "registry.k8s.io/pause:3.10.1"),
     ("1.35.4", "registry.k8s.io/pause:3.10.1")],
)
def test_pause_image_follows_the_minor_version(version, image):
    assert pause_image(version) == image


def test_pause_image_on_the_sites_registry_and_unknown_versions():
    assert pause_image("1.35.0", "registry.example.internal/k8s/") == "registry.example.internal/k8s/pause:3.10.1"
    # Newer than the table: the newest known pause image (dc2 of the lab runs 1.36).
    assert pause_image("1.36.2") == "registry.k8s.io/pause:3.10.1"
    with pytest.raises(ValueError, match="pause image of Kubernetes 1.29 is not known"):
        pause_image("1.29.3")
    with pytest.raises(ValueError, match="full Kubernetes version"):
        pause_image("1.35")


@pytest.mark.parametrize(
    "label, refused",
    [
        ("onprem.gpu/pool", False),
        ("example.com/rack", False),
        ("pool", False),
        ("node.kubernetes.io/instance-type", False),
        ("node.kubernetes.io/gpu-pool", False),
        ("kubelet.kubernetes.io/anything", False),
        ("topology.kubernetes.io/zone", False),
        ("kubernetes.io/hostname", False),
        ("beta.kubernetes.io/instance-type", False),
        ("failure-domain.beta.kubernetes.io/region", False),
        ("node-role.kubernetes.io/worker", True),
        ("node-role.kubernetes.io/gpu", True),
        ("node-restriction.kubernetes.io/pool", True),
        ("kubernetes.io/role", True),
        ("example.k8s.io/team", True),
        ("k8s.io/pool", True),
        ("topology.kubernetes.io/rack", True),
    ],
)
def test_labels_kubelet_may_not_set_on_itself(label, refused):
    assert kubelet_label_refused(label) is refused


def test_good_inventory_has_no_problem():
    assert input_problems("gpu1", GOOD) == []


@pytest.mark.parametrize(
    "change, message",
    [
        ({"version": "1.35"}, "gpu1: kube_version must be a full Kubernetes version such as 1.35.4 (got 1.35)"),
        ({"version": None}, "(got nothing)"),
        ({"api_endpoint": "https://10.0.0.1:6443"}, "gpu1: kube_api_endpoint must be the host:port"),
        ({"pools": ["training_pool", "inference_pool"]}, "gpu1 is in the groups training_pool and inference_pool: a node belongs to one pool"),
        ({"labels": ["onprem.gpu/pool=training"]}, "gpu1: kube_node_labels must be a mapping"),
        ({"taints": [{"key": "a", "effect": "NoRun"}]}, "kube_node_taints a list of {key, value, effect}"),
        ({"taints": [{"effect": "NoSchedule"}]}, "kube_node_taints a list of {key, value, effect}"),
        ({"datacenter": "dc3"}, "gpu1: datacenter dc3 has no host in the control_plane group"),
        ({"labels": {"node-role.kubernetes.io/gpu": "", "onprem.gpu/pool": "x", "example.k8s.io/a": "b"}},
         "gpu1: kubelet may not set example.k8s.io/a, node-role.kubernetes.io/gpu on its own Node"),
    ],
)
def test_each_inventory_problem_is_one_sentence(change, message):
    problems = input_problems("gpu1", {**GOOD, **change})
    assert len(problems) == 1 and message in problems[0]


def test_dpkg_query_versions_and_holds():
    assert parse_dpkg_query(DPKG) == {"kubelet": {"version": "1.35.4-1.1", "held": True}, "kubeadm": {"version": "1.35.4-1.1", "held": True},
                                      "kubectl": {"version": None, "held": False}}


def test_systemctl_show_blocks():
    text = "Id=kubelet.service\nRequiresMountsFor=/raid /var/lib/kubelet\nUnitFileState=enabled\n\nId=swap.target\nRequiresMountsFor=\nUnitFileState=masked\n"
    assert parse_systemctl_show(text) == [{"Id": "kubelet.service", "RequiresMountsFor": "/raid /var/lib/kubelet", "UnitFileState": "enabled"},
                                          {"Id": "swap.target", "RequiresMountsFor": "", "UnitFileState": "masked"}]


def test_mirror_problems():
    node = settled_node()
    assert mirror_problems("gpu1", node, WANTED) == []
    node["offers"]["offered"]["kubelet"] = ["1.35.3-1.1"]
    node["offers"]["missing"] = ["kubelet=1.35.4"]
    (problem,) = mirror_problems("gpu1", node, WANTED)
    assert problem.startswith("The mirror http://mirror/ has no kubelet at Kubernetes 1.35.4 (it offers kubeadm 1.35.3-1.1, 1.35.4-1.1)")


def test_an_unreadable_repository_is_named_with_apts_reason():
    node = settled_node()
    node["offers"] = {"offered": {}, "missing": [], "problems": ["..."],
                      "unreadable": "APT cannot read http://mirror/ (suites /, components none): E: The repository 'http://mirror ./ Release' is not signed."}
    assert mirror_problems("gpu1", node, WANTED) == [
        "gpu1 cannot read the Kubernetes repository http://mirror/ (APT cannot read http://mirror/ (suites /, components none): E: The repository "
        "'http://mirror ./ Release' is not signed); check kube_node_repo_url, that the mirror is up, and the network path from this host to it."]


def test_a_key_that_cannot_be_fetched_is_named_before_the_repository():
    node = settled_node()
    node["key"] = {"status": 404, "msg": "Not Found", "content": ""}
    node["offers"] = {"offered": {}, "missing": [], "unreadable": None, "problems": ["The kubernetes repository cannot be used: ..."]}
    assert mirror_problems("gpu1", node, WANTED) == [
        "gpu1 gets no ASCII-armored signing key from http://mirror/Release.key (HTTP 404); check kube_node_repo_key_url."]


def test_preflight_reports_the_inventory_before_the_node():
    node = settled_node()
    node["os_release"] = {"ID": "rocky", "ID_LIKE": "rhel centos fedora", "PRETTY_NAME": "Rocky Linux 9.4"}
    assert preflight_problems("gpu1", {**GOOD, "version": "1.35"}, node, WANTED)[0].startswith("gpu1: kube_version")
    (problem,) = preflight_problems("gpu1", GOOD, node, WANTED)
    assert problem.startswith("gpu1 runs Rocky Linux 9.4; the kube_node role installs")
    node["os_release"] = {"ID": "ubuntu", "ID_LIKE": "debian"}
    assert preflight_problems("gpu1", GOOD, node, WANTED) == []


def test_a_settled_node_needs_nothing_and_has_no_problem():
    assert node_work(settled_node(), WANTED) == {"install": [], "configure": []}
    assert node_problems("gpu1", settled_node(), WANTED) == []


def test_a_fresh_node_needs_everything():
    fresh = {"packages": {}, "kubelet_version": None, "sysctls": {"net.ipv4.ip_forward": "0", "net.bridge.bridge-nf-call-iptables": "1"},
             "swap_areas": 1, "kernel_modules": ["overlay"], "files": {"/etc/fstab": "/dev/sda2 none swap sw 0 0\n"},
             "units": {"kubelet.service": {"UnitFileState": "", "RequiresMountsFor": ""}, "swap.target": {"UnitFileState": "static"}}}
    work = node_work(fresh, WANTED)
    assert work["install"] == ["write /etc/apt/keyrings/kubernetes.asc", "write /etc/apt/sources.list.d/kubernetes.sources",
                               "install kubelet", "install kubeadm", "install kubectl", "hold kubelet", "hold kubeadm", "hold kubectl"]
    assert work["configure"] == ["write /etc/modules-load.d/kubernetes.conf", "write /etc/sysctl.d/90-kubernetes.conf", "load br_netfilter",
                                 "set net.ipv4.ip_forward=1", "turn swap off", "comment out swap in /etc/fstab", "mask swap.target", "enable kubelet"]
    (problem,) = node_problems("gpu1", fresh, {**WANTED, "required_mounts": ["/raid"]})
    assert problem == (
        "gpu1: not at v1.35.4: kubelet, kubeadm, kubectl, kubelet (the binary); not held: kubelet, kubeadm, kubectl; "
        "swap is on (/proc/swaps lists areas); run swapoff -a; sysctls differ: wanted net.ipv4.ip_forward=1, found net.ipv4.ip_forward=0, "
        "net.bridge.bridge-nf-call-iptables=1; kubelet does not wait for /raid (RequiresMountsFor is \"\"); run the nvme_cache role, "
        "which writes the drop-in.")


def test_swap_is_left_alone_when_not_asked():
    node = settled_node()
    node["swap_areas"] = 1
    node["units"]["swap.target"]["UnitFileState"] = "static"
    assert node_work(node, {**WANTED, "swap_off": False}) == {"install": [], "configure": []}
    assert node_problems("gpu1", node, {**WANTED, "swap_off": False}) == []


def test_an_upgraded_package_with_an_old_kubelet_binary():
    node = settled_node()
    node["kubelet_version"] = "Kubernetes v1.35.3"
    assert node_work(node, WANTED) == {"install": [], "configure": []}
    assert node_problems("gpu1", node, WANTED) == ["gpu1: not at v1.35.4: kubelet (the binary)."]


PINS = ("# Written by the onprem.gpu collection (package_source): the versions this role installed and holds.\n"
        "Package: kubeadm\nPin: version 1.35.4-*\nPin-Priority: 1001\n\nPackage: kubectl\nPin: version 1.35.4-*\nPin-Priority: 1001\n\n"
        "Package: kubelet\nPin: version 1.35.4-*\nPin-Priority: 1001\n")
PIN_FILE = {"path": "/etc/apt/preferences.d/onprem-gpu-kube_node.pref", "text": PINS}


def test_a_node_held_but_not_pinned_is_held_again_so_that_it_is_pinned():
    node = settled_node()
    assert node_work(node, {**WANTED, "pin_file": PIN_FILE}) == {"install": ["hold kubelet", "hold kubeadm", "hold kubectl"], "configure": []}
    node["files"][PIN_FILE["path"]] = PINS
    assert node_work(node, {**WANTED, "pin_file": PIN_FILE}) == {"install": [], "configure": []}


def test_a_package_installed_at_another_version_is_held_again():
    """Installing another version drops APT's hold: the package is held (and pinned) again, even if it was held."""
    node = settled_node()
    node["files"][PIN_FILE["path"]] = PINS
    node["packages"]["kubeadm"]["version"] = "1.35.3-1.1"
    assert node_work(node, {**WANTED, "pin_file": PIN_FILE})["install"] == ["install kubeadm", "hold kubeadm"]


def node_at(version, member=True):
    node = settled_node()
    node["packages"] = {name: {"version": f"{version}-1.1", "held": True} for name in ("kubelet", "kubeadm", "kubectl")}
    if member:
        node["files"] = dict(node.get("files") or {}, **{"/var/lib/kubelet/config.yaml": "kind: KubeletConfiguration\n"})
    return node


def test_site_does_not_downgrade_a_node_whose_cluster_was_upgraded():
    (problem,) = preflight_problems("dc1-gpu1", GOOD, node_at("1.36.2"), WANTED)
    assert problem == ("dc1-gpu1 has kubelet 1.36.2-1.1, kubeadm 1.36.2-1.1, kubectl 1.36.2-1.1 installed, newer than kube_version 1.35.4, and "
                       "kubeadm does not downgrade a node: if the cluster was upgraded (playbooks/upgrade_kubernetes.yml), set "
                       "kube_version: \"1.36.2\" in the datacenter's group_vars; nothing was changed.")
    # Newer is newer whether or not the node is a member, and a patch counts.
    assert version_change_problems("n", node_at("1.35.5", member=False), WANTED)[0].startswith("n has kubelet 1.35.5-1.1")
    # Half an upgrade (kubeadm moved first): the newest is named.
    node = node_at("1.35.4")
    node["packages"]["kubeadm"]["version"] = "1.36.2-1.1"
    assert version_change_problems("n", node, WANTED)[0].startswith("n has kubeadm 1.36.2-1.1 installed, newer than kube_version 1.35.4")


def test_site_does_not_upgrade_a_member_outside_kubeadms_procedure():
    (problem,) = preflight_problems("dc1-gpu1", GOOD, node_at("1.34.3"), WANTED)
    assert problem == ("dc1-gpu1 is a node of its cluster at Kubernetes 1.34.3, older than kube_version 1.35.4: a cluster moves to a new version "
                       "through kubeadm's upgrade procedure, node by node (ansible-playbook playbooks/upgrade_kubernetes.yml -e "
                       "kube_version=1.35.4), which site.yml does not run; nothing was changed.")


def test_a_node_that_is_not_a_member_gets_the_version_and_the_upgrade_may_move_it():
    # New, or reset by remove_node.yml (kubeadm reset deletes the kubelet configuration): installed at the version.
    assert version_change_problems("n", node_at("1.34.3", member=False), WANTED) == []
    assert version_change_problems("n", node_at("1.35.4"), WANTED) == []
    assert version_change_problems("n", {"packages": {}}, WANTED) == []
    # kube_upgrade's own check moves it, either way.
    assert version_change_problems("n", node_at("1.34.3"), {**WANTED, "upgrade": True}) == []
    assert version_change_problems("n", node_at("1.36.2"), {**WANTED, "upgrade": True}) == []
    # Versions that are not major.minor.patch are left to the other checks.
    assert version_change_problems("n", node_at("1.36.2"), {**WANTED, "version": "latest"}) == []


def test_the_repository_files_are_package_sources_with_the_key_read():
    repository = {"name": "kubernetes", "url": "http://mirror/", "suites": ["/"], "components": [], "key_url": "http://mirror/Release.key"}
    files = repository_files(repository, "-----BEGIN PGP PUBLIC KEY BLOCK-----\n...")
    source = ("# Managed by onprem.gpu: local changes are overwritten.\nTypes: deb\nURIs: http://mirror/\nSuites: /\n"
              "Signed-By: /etc/apt/keyrings/kubernetes.asc\n")
    assert files == {"/etc/apt/keyrings/kubernetes.asc": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n...", "/etc/apt/sources.list.d/kubernetes.sources": source}
    # No key read (another platform, whose refusal comes first): a binary keyring that no node has.
    assert "/etc/apt/keyrings/kubernetes.gpg" in repository_files(repository, "")


def test_the_preflight_judgement_stops_at_the_preflights_problems():
    node = settled_node()
    node["os_release"] = {"ID": "rocky", "PRETTY_NAME": "Rocky Linux 9.4"}
    for check in ("preflight", "preflight_and_verify"):
        problems, work = judgement(check, "gpu1", {**GOOD, "pools": ["training_pool", "inference_pool"]}, node, WANTED)
        assert work is None and problems == preflight_problems("gpu1", {**GOOD, "pools": ["training_pool", "inference_pool"]}, node, WANTED)
        assert len(problems) == 1 and problems[0].startswith("gpu1 is in the groups")
    problems, work = judgement("preflight", "gpu1", GOOD, node, WANTED)
    assert work is None and problems[0].startswith("gpu1 runs Rocky Linux 9.4")


def test_a_node_that_lacks_nothing_is_verified_by_the_reading_itself():
    node = settled_node()
    assert judgement("preflight_and_verify", "gpu1", GOOD, node, WANTED) == ([], {"install": [], "configure": []})
    # A package upgraded without kubelet restarted: nothing for the role to change, so the reading is the verification.
    node["kubelet_version"] = "Kubernetes v1.35.3"
    assert judgement("preflight_and_verify", "gpu1", GOOD, node, WANTED) == (
        ["gpu1: not at v1.35.4: kubelet (the binary)."], {"install": [], "configure": []})
    assert judgement("preflight_and_verify", "gpu1", GOOD, node, {**WANTED, "required_mounts": ["/cache"]})[0] == [
        "gpu1: not at v1.35.4: kubelet (the binary); kubelet does not wait for /cache (RequiresMountsFor is \"/raid /var/lib/kubelet\"); "
        "run the nvme_cache role, which writes the drop-in."]
    # The preflight alone does not verify.
    assert judgement("preflight", "gpu1", GOOD, node, WANTED) == ([], {"install": [], "configure": []})


def test_a_node_with_work_is_verified_after_the_changes_not_before():
    node = settled_node()
    node["swap_areas"] = 1
    problems, work = judgement("preflight_and_verify", "gpu1", GOOD, node, WANTED)
    assert problems == [] and work == {"install": [], "configure": ["turn swap off"]}
    # What the verification would say of it now, which the role asks only of the node read again after the changes.
    assert node_problems("gpu1", node, WANTED) == ["gpu1: swap is on (/proc/swaps lists areas); run swapoff -a."]
