# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._addons import datacenter
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import tree
from ansible_collections.onprem.gpu.plugins.module_utils._rdma_rails import nccl_traffic_class


def _get(host_vars, name, default=None):
    try:
        value = host_vars[name]
    except KeyError:
        return default
    return _plain(value)


def _plain(value):
    """value with Ansible's tagged strings, numbers and containers turned into the plain Python types YAML dumps."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return {_plain(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _host(hostvars, host):
    """A host's variables, or none for a name that is not in the inventory (as the rdma role reads them)."""
    try:
        return hostvars[host]
    except KeyError:
        return {}


def _merge(default, override):
    """override merged key by key into default (mappings recursively), so an inventory can change one threshold."""
    if isinstance(default, dict) and isinstance(override, dict):
        merged = dict(default)
        for key, value in override.items():
            merged[key] = _merge(default.get(key), value) if key in default else value
        return merged
    return override


def describe(hostvars, groups, settings):
    """The plain description of each datacenter in the inventory, as _addons.datacenter takes it, in name order."""
    by_dc = {}
    for host in sorted(groups.get("all", [])):
        name = _get(hostvars[host], "datacenter")
        if name:
            by_dc.setdefault(str(name), []).append(host)
    control_plane = set(groups.get("control_plane", []))
    gpu_nodes = set(groups.get("gpu_nodes", []))
    descriptions = []
    for name, hosts in sorted(by_dc.items()):
        # Cluster-wide settings live in the datacenter's group_vars: read them through its first control-plane host.
        anchor = next((host for host in hosts if host in control_plane), hosts[0])
        anchor_vars = hostvars[anchor]
        dc_settings = {key: _merge(value, _get(anchor_vars, key, value)) for key, value in settings.items()}
        workers = [host for host in hosts if host in gpu_nodes]
        nodes = []
        for host in workers:
            host_vars = hostvars[host]
            mount = _get(host_vars, "nvme_cache_mount", "/raid")
            nodes.append({
                "name": str(_get(host_vars, "kube_node_name", host)),
                "model": str(_get(host_vars, "node_gpu_model", "")),
                "gpu_count": int(_get(host_vars, "node_gpu_count", 0)),
                "labels": dict(_get(host_vars, "kube_node_labels", {}) or {}),
                "taints": list(_get(host_vars, "kube_node_taints", []) or []),
                "mig_layout": _get(host_vars, "mig_layout"),
                "mig_layouts": _get(host_vars, "mig_layouts", dc_settings.get("mig_layouts")) or {},
                "local_path_dir": str(_get(host_vars, "nvme_cache_local_path_dir", f"{mount}/local-path")),
            })
        first = hostvars[workers[0]] if workers else anchor_vars
        address_hosts = list(_get(first, "rdma_address_hosts", None) or sorted(groups.get("gpu_nodes", [])))
        places = [int(_get(_host(hostvars, host), "rdma_address_index", position)) for position, host in enumerate(address_hosts)]
        nccl = dict(dc_settings.get("cluster_addons_nccl") or {})
        if nccl.get("ib_tc") is None:
            # The traffic class the rdma role writes into /etc/nccl.conf for the same ToS (rdma_nccl_ib_tc).
            nccl["ib_tc"] = nccl_traffic_class(_get(first, "rdma_qos_tos", 106))
        dc_settings["cluster_addons_nccl"] = nccl
        descriptions.append({
            "name": name,
            "settings": dc_settings,
            "nodes": nodes,
            "rails": [dict(rail) for rail in (_get(first, "rdma_rails", []) or [])] if workers else [],
            "rdma_link_layer": str(_get(first, "rdma_link_layer", "ethernet")),
            "rdma_address_first": int(_get(first, "rdma_address_first", 10)),
            "rdma_places": places,
        })
    return descriptions


def cluster_addons_plan(hostvars, groups, settings):
    """Per datacenter: ``{name, problems, files}``; files (path under clusters/<name>/ -> YAML) only without problems."""
    plans = []
    for description in describe(hostvars, groups, _plain(settings)):
        try:
            dc = datacenter(description)
            files = {} if dc.problems else tree(dc)
        except (KeyError, TypeError, ValueError) as error:
            raise AnsibleFilterError(f"cluster_addons_plan: datacenter {description['name']}: {error}") from None
        plans.append({"name": dc.name, "problems": dc.problems, "files": files})
    return plans


class FilterModule:
    """The per-datacenter GPU platform rendered from the inventory (role cluster_addons)."""

    def filters(self):
        return {"cluster_addons_plan": cluster_addons_plan}
