# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import copy

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._site_inventory import host_problems, site_problems

RAILS = [{"interface": "ens1", "subnet": "10.99.0.0/24"}, {"interface": "ens2", "subnet": "10.99.1.0/24"}]
SITE = {
    "dc1-cp1": {"datacenter": "dc1", "control_plane": True, "cluster_name": "dc1", "api_endpoint": "10.10.0.10:6443", "node_name": "dc1-cp1"},
    "dc1-gpu1": {"datacenter": "dc1", "api_endpoint": "10.10.0.10:6443", "node_name": "dc1-gpu1", "rdma_rails": RAILS, "rdma_address_index": 0},
    "dc1-gpu2": {"datacenter": "dc1", "api_endpoint": "10.10.0.10:6443", "node_name": "dc1-gpu2", "rdma_rails": RAILS, "rdma_address_index": 1},
    "dc2-cp1": {"datacenter": "dc2", "control_plane": True, "cluster_name": "dc2", "api_endpoint": "10.20.0.10:6443", "node_name": "dc2-cp1"},
    "dc2-gpu1": {"datacenter": "dc2", "api_endpoint": "10.20.0.10:6443", "node_name": "dc2-gpu1", "rdma_rails": RAILS, "rdma_address_index": 0},
}


def changed(**hosts):
    site = copy.deepcopy(SITE)
    for host, settings in hosts.items():
        site[host].update(settings)
    return site


def test_a_good_site_has_no_problem():
    assert site_problems(SITE) == []


@pytest.mark.parametrize("site, problem", [
    (changed(**{"dc2-cp1": {"cluster_name": "dc1"}}),
     "Datacenters dc1 and dc2 have the same cluster name dc1 (kube_cluster_name, else the datacenter): their admin kubeconfigs would share one "
     "path on the controller; give each cluster its own kube_cluster_name."),
    (changed(**{"dc1-cp1": {"cluster_name": "../../etc"}}),
     "kube_cluster_name of datacenter dc1 must be a DNS name (lower-case letters, digits, '-' and '.', each part starting and ending with a "
     "letter or digit, at most 253 characters, e.g. dc1), not '../../etc'."),
    (changed(**{"dc1-gpu2": {"api_endpoint": "10.30.0.10:6443"}}),
     "The hosts of datacenter dc1 give different kube_api_endpoint values: 10.10.0.10:6443 (dc1-cp1, dc1-gpu1); 10.30.0.10:6443 (dc1-gpu2); one "
     "datacenter is one cluster with one API endpoint, so give two clusters two datacenter names, or one endpoint in the datacenter's group_vars."),
    (changed(**{"dc1-gpu2": {"node_name": "dc1-gpu1"}}),
     "dc1-gpu1 and dc1-gpu2 have the same kube_node_name dc1-gpu1 in datacenter dc1: a cluster has one Node per name, so the second would take "
     "over the first; give each host its own kube_node_name."),
    (changed(**{"dc1-gpu2": {"rdma_address_index": 0}}),
     "dc1-gpu1 and dc1-gpu2 have the same rdma_address_index 0: they would get the same rail addresses; give each host its own rdma_address_index."),
    (changed(**{"dc1-gpu1": {"rdma_rails": [{"interface": "ens1", "subnet": "10.99.0.0/24"}, {"interface": "ens2", "subnet": "10.99.0.0/24"}]}}),
     "dc1-gpu1: rdma_rails ens1 and ens2 (10.99.0.0/24) are in the same subnet: each rail needs its own subnet, or the kernel answers ARP and "
     "routes on the wrong NIC and RDMA connections fail."),
], ids=["one-cluster-name-for-two-datacenters", "cluster-name-a-path", "two-endpoints-one-datacenter", "duplicate-node-name",
        "duplicate-rdma-address-index", "rails-in-one-subnet"])
def test_site_problems(site, problem):
    assert site_problems(site) == [problem]


def test_the_same_node_name_in_two_clusters_is_fine():
    assert site_problems(changed(**{"dc2-gpu1": {"node_name": "dc1-gpu1"}})) == []


GOOD_HOST = {"datacenter": "dc1", "gpu_node": True, "gpu_count": 8, "max_gpus": 16}


@pytest.mark.parametrize("settings, problem", [
    (dict(GOOD_HOST, datacenter="dc1\n"),
     "gpu1: datacenter (set in the group_vars of its datacenter group) must be a DNS label (lower-case letters, digits and '-', starting and "
     "ending with a letter or digit, at most 63 characters, e.g. dc1), not 'dc1\\n'."),
    (dict(GOOD_HOST, gpu_count="eight"), "gpu1: node_gpu_count must be a whole number from 1 to 16, not 'eight'."),
    (dict(GOOD_HOST, keys={"kube_node_repo_key_url": {"key_url": "http://mirror/Release.key", "key_fingerprint": ""}}),
     "gpu1: kube_node_repo_key_url is http://mirror/Release.key, a signing key fetched over plain HTTP, with no kube_node_repo_key_fingerprint: "
     "anything on the network path could hand over another key and get packages installed as root on every node; pin the key's fingerprint "
     "in kube_node_repo_key_fingerprint or serve the key over https://."),
    (dict(GOOD_HOST, keys={"onprem_gpu_mirror_key_url": {"key_url": "http://mirror/k.asc", "key_fingerprint": "3BF863CC"}}),
     "gpu1: onprem_gpu_mirror_key_fingerprint must be the full OpenPGP fingerprint of the key, 40 hexadecimal digits (64 for a version 6 key; "
     "spaces allowed), as `gpg --show-keys --with-colons KEYFILE` prints it on its fpr line, not '3BF863CC'."),
], ids=["datacenter-trailing-newline", "gpu-count-a-word", "http-key-unpinned", "short-key-id"])
def test_host_problems(settings, problem):
    assert host_problems("gpu1", settings) == [problem]


def test_a_good_host_has_no_problem():
    keys = {"onprem_gpu_mirror_key_url": {"key_url": "http://mirror/k.asc", "key_fingerprint": "B0E1ED7F88D09104087FDC904DBD77E25E55600E"},
            "nvidia_driver_repo_key_url": {"key_url": "https://developer.download.nvidia.com/k.pub", "key_fingerprint": ""}}
    assert host_problems("gpu1", dict(GOOD_HOST, keys=keys)) == []
    assert host_problems("cp1", {"datacenter": "dc1", "gpu_node": False, "gpu_count": "eight"}) == []
