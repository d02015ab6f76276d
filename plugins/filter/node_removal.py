# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._node_removal import NodeRemovalError, etcd_member, etcd_peer_host


def node_removal_etcd_host(control_planes, hostvars, host):
    """The control plane of ``host``'s datacenter, other than the host, that its etcd member is removed through; '' when none."""

    def datacenter(name):
        try:
            value = hostvars[name]["datacenter"]
        except KeyError:
            return None
        return str(value) if value is not None else None

    try:
        hosts = [str(peer) for peer in control_planes or []]
        return etcd_peer_host(str(host), hosts, {name: datacenter(name) for name in hosts + [str(host)]})
    except (NodeRemovalError, TypeError) as error:
        raise AnsibleFilterError(f"node_removal_etcd_host: {error}") from None


def node_removal_etcd_member(member_list, node_name):
    """The etcd member named after the node in ``etcdctl member list -w json``'s output ({id (hex), name, peer_urls,
    client_urls}), or an empty mapping when there is none."""
    try:
        return etcd_member(member_list, str(node_name))
    except NodeRemovalError as error:
        raise AnsibleFilterError(f"node_removal_etcd_member: {error}") from None


class FilterModule:
    """Filters for a control plane's etcd member when it leaves its cluster (remove_node.yml)."""

    def filters(self):
        return {
            "node_removal_etcd_host": node_removal_etcd_host,
            "node_removal_etcd_member": node_removal_etcd_member,
        }
