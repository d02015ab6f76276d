# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._site_inventory import REPOSITORY_KEYS, host_problems, site_problems

# The variables site_problems reads of each host, by the name it reads them under.
_SITE_VARIABLES = {"datacenter": "datacenter", "cluster_name": "kube_cluster_name", "api_endpoint": "kube_api_endpoint",
                   "node_name": "kube_node_name", "rdma_rails": "rdma_rails", "rdma_address_index": "rdma_address_index"}


def _get(host_vars, name, default=None):
    try:
        return host_vars[name]
    except KeyError:
        return default


def repository_keys(host_vars):
    """{key URL variable: {key_url, key_fingerprint}} as the roles will read them: the inventory's value, else the site mirror's
    (the roles' defaults; the containerd repository has none)."""
    keys = {}
    for url_variable, fingerprint_variable in REPOSITORY_KEYS:
        mirror = not url_variable.startswith("container_runtime_containerd")
        keys[url_variable] = {
            "key_url": _get(host_vars, url_variable, _get(host_vars, "onprem_gpu_mirror_key_url", "") if mirror else ""),
            "key_fingerprint": _get(host_vars, fingerprint_variable, _get(host_vars, "onprem_gpu_mirror_key_fingerprint", "") if mirror else ""),
        }
    return keys


def preflight_host_problems(settings, host, host_vars=None):
    """Sentences saying what is wrong with a host's own inventory (datacenter, GPU count, and with ``host_vars`` the repository
    keys it names); empty when none."""
    if host_vars is not None:
        settings = dict(settings, keys=repository_keys(host_vars))
    return host_problems(host, settings)


def preflight_site_problems(hostvars, hosts, control_plane_hosts=()):
    """Sentences saying what the hosts together get wrong (cluster names, API endpoints, Node names, rail addresses); empty when none."""
    settings = {}
    for host in hosts or []:
        host_vars = _get(hostvars, host, {})
        settings[host] = {key: _get(host_vars, name) for key, name in _SITE_VARIABLES.items()}
        settings[host]["node_name"] = settings[host]["node_name"] or host
        settings[host]["control_plane"] = host in (control_plane_hosts or [])
    return site_problems(settings)


class FilterModule:
    """Checks of the site's inventory as a whole, for site.yml's preflight."""

    def filters(self):
        return {"preflight_host_problems": preflight_host_problems, "preflight_site_problems": preflight_site_problems}
