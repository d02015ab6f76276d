# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The site's inventory as a whole, checked by site.yml's preflight before any host is contacted: what no single host's
check can see (two hosts with one Node name or one place in the rails' subnets, two datacenters with one cluster name, one
datacenter with two API endpoints) and each host's own datacenter, GPU count and repository keys.

Plain Python without Ansible imports; plugins/filter/preflight.py exposes it, tests/unit calls it directly. Every problem
is one sentence naming the hosts, the variable, the value and what is allowed.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.onprem.gpu.plugins.module_utils._package_source import key_url_problem
from ansible_collections.onprem.gpu.plugins.module_utils._validate import (
    dns_label_problem,
    dns_subdomain_problem,
    fingerprint_problem,
    shown,
    whole_number_problem,
)

# The variables that name a repository's key, and the fingerprint that pins it, per role (the mirror's are the defaults).
REPOSITORY_KEYS = (
    ("onprem_gpu_mirror_key_url", "onprem_gpu_mirror_key_fingerprint"),
    ("nvidia_driver_repo_key_url", "nvidia_driver_repo_key_fingerprint"),
    ("container_runtime_containerd_repo_key_url", "container_runtime_containerd_repo_key_fingerprint"),
    ("container_runtime_nvidia_repo_key_url", "container_runtime_nvidia_repo_key_fingerprint"),
    ("kube_node_repo_key_url", "kube_node_repo_key_fingerprint"),
    ("nccl_tests_repo_key_url", "nccl_tests_repo_key_fingerprint"),
    ("rdma_doca_repo_key_url", "rdma_doca_repo_key_fingerprint"),
)


def host_problems(host: str, settings: dict) -> list[str]:
    """The host's own variables: ``settings`` has datacenter, gpu_node (bool), gpu_count, max_gpus and keys ({url variable:
    {key_url, key_fingerprint}} as the inventory sets them, the roles' defaults being the mirror's)."""
    problems = [dns_label_problem(f"{host}: datacenter (set in the group_vars of its datacenter group)", settings.get("datacenter"))]
    if settings.get("gpu_node"):
        problems.append(whole_number_problem(f"{host}: node_gpu_count", settings.get("gpu_count"), 1, settings.get("max_gpus", 16)))
    for url_variable, fingerprint_variable in REPOSITORY_KEYS:
        key = (settings.get("keys") or {}).get(url_variable) or {}
        url, pin = str(key.get("key_url") or ""), str(key.get("key_fingerprint") or "")
        if not url:
            continue
        problem = fingerprint_problem(f"{host}: {fingerprint_variable}", pin)
        if not problem and key_url_problem({"name": url_variable, "key_url": url, "key_fingerprint": pin}):
            problem = (f"{host}: {url_variable} is {url}, a signing key fetched over plain HTTP, with no {fingerprint_variable}: anything on the "
                       f"network path could hand over another key and get packages installed as root on every node; pin the key's fingerprint in "
                       f"{fingerprint_variable} or serve the key over https://." if url.lower().startswith("http://") else
                       f"{host}: {url_variable} must be an https:// URL, or an http:// one with {fingerprint_variable} set, not {url!r}.")
        problems.append(problem)
    return [problem for problem in problems if problem]


def _by_value(hosts: dict, name: str, among=None) -> dict:
    """{value: [hosts]} of a variable over ``hosts`` (or the hosts in ``among``), hosts without it left out."""
    found = {}
    for host, settings in hosts.items():
        if (among is None or host in among) and settings.get(name) not in (None, ""):
            found.setdefault(settings[name] if isinstance(settings[name], (str, int)) else shown(settings[name]), []).append(host)
    return found


def _datacenters(hosts: dict) -> dict:
    found = {}
    for host, settings in hosts.items():
        if isinstance(settings.get("datacenter"), str) and settings["datacenter"]:
            found.setdefault(settings["datacenter"], []).append(host)
    return found


def _rails_problems(host: str, rails) -> list[str]:
    """Two rails of one host in overlapping subnets (the rdma role's rule, seen before any host changes)."""
    networks = []
    for rail in rails if isinstance(rails, list) else []:
        try:
            networks.append((rail.get("name") or rail.get("interface") or rail.get("pci"), ipaddress.IPv4Network(str(rail.get("subnet")), strict=False)))
        except (AttributeError, ValueError):
            continue
    clashes = [f"{first} and {second} ({network})" for position, (first, network) in enumerate(networks)
               for second, other in networks[position + 1:] if network.overlaps(other)]
    if not clashes:
        return []
    return [f"{host}: rdma_rails {'; '.join(clashes)} are in the same subnet: each rail needs its own subnet, or the kernel answers ARP and "
            "routes on the wrong NIC and RDMA connections fail."]


def site_problems(hosts: dict) -> list[str]:
    """What the hosts together get wrong. ``hosts``: {host: {datacenter, control_plane (bool), cluster_name, api_endpoint,
    node_name, rdma_rails, rdma_address_index}} over every host of the play."""
    problems = []
    datacenters = _datacenters(hosts)
    clusters = {}
    for datacenter, members in sorted(datacenters.items()):
        planes = [host for host in members if hosts[host].get("control_plane")]
        names = sorted({str(hosts[host].get("cluster_name")) for host in planes if hosts[host].get("cluster_name") not in (None, "")})
        for name in names:
            problem = dns_subdomain_problem(f"kube_cluster_name of datacenter {datacenter}", name, "dc1")
            if problem:
                problems.append(problem)
        if len(names) > 1:
            problems.append(f"The control-plane hosts of datacenter {datacenter} give kube_cluster_name {', '.join(names)}: one datacenter is one "
                            "cluster, so set one kube_cluster_name in its group_vars.")
        clusters.setdefault(names[0] if names else datacenter, []).append(datacenter)
        endpoints = _by_value({host: hosts[host] for host in members}, "api_endpoint")
        if len(endpoints) > 1:
            listed = "; ".join(f"{endpoint} ({', '.join(sorted(owners))})" for endpoint, owners in sorted(endpoints.items(), key=lambda item: str(item[0])))
            problems.append(f"The hosts of datacenter {datacenter} give different kube_api_endpoint values: {listed}; one datacenter is one "
                            "cluster with one API endpoint, so give two clusters two datacenter names, or one endpoint in the datacenter's group_vars.")
        for name, owners in sorted(_by_value({host: hosts[host] for host in members}, "node_name").items(), key=lambda item: str(item[0])):
            if len(owners) > 1:
                problems.append(f"{' and '.join(sorted(owners))} have the same kube_node_name {name} in datacenter {datacenter}: a cluster has one "
                                "Node per name, so the second would take over the first; give each host its own kube_node_name.")
        railed = [host for host in members if hosts[host].get("rdma_rails")]
        for index, owners in sorted(_by_value({host: hosts[host] for host in railed}, "rdma_address_index").items(), key=lambda item: str(item[0])):
            if len(owners) > 1:
                problems.append(f"{' and '.join(sorted(owners))} have the same rdma_address_index {index}: they would get the same rail addresses; "
                                "give each host its own rdma_address_index.")
        for host in railed:
            problems += _rails_problems(host, hosts[host]["rdma_rails"])
    for name, owners in sorted(clusters.items()):
        if len(owners) > 1:
            problems.append(f"Datacenters {' and '.join(sorted(owners))} have the same cluster name {name} (kube_cluster_name, else the datacenter): "
                            "their admin kubeconfigs would share one path on the controller; give each cluster its own kube_cluster_name.")
    return problems
