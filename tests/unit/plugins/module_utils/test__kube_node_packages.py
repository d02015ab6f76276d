# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""kube_node's `packages` entry point (roles/kube_node/tasks/packages.yml) decides what to do with node_work on the packages
alone, the node's own key standing for the one the mirror serves (it does not ask the mirror). What that decides on the nodes
kube_upgrade hands it, and that it agrees with what the main path would find afterwards."""

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._kube_node import node_work, parse_dpkg_query
from ansible_collections.onprem.gpu.plugins.module_utils._package_source import desired_files, role_pins_file

KEY = "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQINBGM...\n-----END PGP PUBLIC KEY BLOCK-----\n"
PACKAGES = ["kubelet", "kubeadm", "kubectl"]
MIRROR = {"name": "onprem-gpu-lab", "url": "http://lab-mirror.onprem-gpu.internal:8080", "suites": ["bookworm"], "components": ["main"]}


def upstream(minor):
    return {"name": "kubernetes", "url": f"https://pkgs.k8s.io/core:/stable:/v{minor}/deb/", "suites": ["/"], "components": []}


def wanted(version, repository, node_files):
    """What packages.yml passes to kube_node_work: the install part of the main path's wanted, nothing to configure."""
    keyring = next((path for path in node_files if path.startswith("/etc/apt/keyrings/")), None)
    return {"version": version, "packages": PACKAGES, "pin_file": role_pins_file([f"{name}={version}" for name in PACKAGES], "kube_node"),
            "install_files": desired_files("Debian", [repository], {repository["name"]: node_files.get(keyring) or ""}, ""),
            "configure_files": {}, "kernel_modules": [], "sysctls": {}, "swap_off": False}


def node(dpkg, version, repository):
    """A node as site.yml left it at ``version`` (key, source and pins written), its packages as dpkg-query reports them."""
    files = desired_files("Debian", [repository], {repository["name"]: KEY}, "")
    pins = role_pins_file([f"{name}={version}" for name in PACKAGES], "kube_node")
    return {"packages": parse_dpkg_query(dpkg), "files": {**files, pins["path"]: pins["text"]}}


# `dpkg-query --show --showformat '${Package}\t${Version}\t${db:Status-Want} ${db:Status-Status}\n' kubelet kubeadm kubectl`
# once kube_upgrade installed kubeadm at 1.36.2 (apt-get install keeps the hold).
AFTER_KUBEADM = "kubelet\t1.35.4-1.1\thold installed\nkubeadm\t1.36.2-1.1\thold installed\nkubectl\t1.35.4-1.1\thold installed\n"
UPGRADED = "kubelet\t1.36.2-1.1\thold installed\nkubeadm\t1.36.2-1.1\thold installed\nkubectl\t1.36.2-1.1\thold installed\n"


def test_after_kubeadm_kubelet_and_kubectl_are_installed_and_all_three_pinned_again():
    found = node(AFTER_KUBEADM, "1.35.4", MIRROR)
    work = node_work(found, wanted("1.36.2", MIRROR, found["files"]))
    # The site's mirror serves every minor from one source: nothing to write, so package_source does not ask it.
    assert work["install"] == ["install kubelet", "install kubectl", "hold kubelet", "hold kubeadm", "hold kubectl"]


def test_an_upgraded_node_needs_nothing_more():
    found = node(UPGRADED, "1.36.2", MIRROR)
    assert node_work(found, wanted("1.36.2", MIRROR, found["files"]))["install"] == []


def test_pkgs_k8s_io_has_a_source_per_minor_which_is_written_again():
    found = node(AFTER_KUBEADM, "1.35.4", upstream("1.35"))
    work = node_work(found, wanted("1.36.2", upstream("1.36"), found["files"]))["install"]
    assert work[0] == "write /etc/apt/sources.list.d/kubernetes.sources"
    assert "write /etc/apt/keyrings/kubernetes.asc" not in work


def test_a_node_without_its_key_has_it_written():
    found = node(AFTER_KUBEADM, "1.35.4", MIRROR)
    del found["files"]["/etc/apt/keyrings/onprem-gpu-lab.asc"]
    work = node_work(found, wanted("1.36.2", MIRROR, found["files"]))["install"]
    assert "write /etc/apt/sources.list.d/onprem-gpu-lab.sources" in work


def test_what_packages_leaves_the_main_path_finds_settled():
    """The main path's wanted (the mirror's key, its configure part aside) on the node packages left: nothing to install."""
    found = node(UPGRADED, "1.36.2", MIRROR)
    main_wanted = {**wanted("1.36.2", MIRROR, found["files"]), "install_files": desired_files("Debian", [MIRROR], {"onprem-gpu-lab": KEY}, "")}
    assert node_work(found, main_wanted)["install"] == []
