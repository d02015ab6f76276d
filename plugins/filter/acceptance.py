# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Helpers of playbooks/acceptance.yml: each node's rail peer, its verdict, the patch of its Node, the report's files.

Documentation: the YAML files of the same names beside this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._acceptance import AcceptanceError, node_patch, node_record
from ansible_collections.onprem.gpu.plugins.module_utils._acceptance_report import report_files

# The line before each rail's output in the clients' combined output (roles/acceptance/vars/main.yml).
RAIL_MARKER = "@@ acceptance rail "


def acceptance_peers(hosts, datacenters):
    """{host: the next host of its datacenter, by name, wrapping; None when it is alone there}."""
    if not isinstance(hosts, list) or not isinstance(datacenters, dict):
        raise AnsibleFilterError("acceptance_peers: expects a list of hosts and a mapping of host to datacenter.")
    by_datacenter = {}
    for host in sorted(set(hosts)):
        by_datacenter.setdefault(str(datacenters.get(host) or ""), []).append(host)
    peers = {}
    for members in by_datacenter.values():
        for index, host in enumerate(members):
            peers[host] = members[(index + 1) % len(members)] if len(members) > 1 else None
    return peers


def acceptance_rail_outputs(text, devices):
    """{rail device: what its ib_write_bw client printed} from the clients' combined output, where a line
    ``@@ acceptance rail <device>`` starts each rail's part and ``@@ acceptance rail exit <code>`` ends it. A rail
    without output says so (with its exit code), so that node_health judges it (as failed) instead of skipping it."""
    if not isinstance(devices, list):
        raise AnsibleFilterError("acceptance_rail_outputs: expects the clients' output and the list of rail devices.")
    parts, current = {}, None
    for line in str(text or "").splitlines():
        if line.startswith(RAIL_MARKER + "exit "):
            exit_code = line[len(RAIL_MARKER) + 5:].strip()
            if current is not None and not "".join(parts[current]).strip():
                parts[current] = [f"ib_write_bw printed nothing (exit code {exit_code})."]
            current = None
        elif line.startswith(RAIL_MARKER):
            current = line[len(RAIL_MARKER):].strip()
            parts[current] = []
        elif current is not None:
            parts[current].append(line)
    return {str(device): "\n".join(parts[str(device)]) if str(device) in parts else "ib_write_bw did not run on this rail."
            for device in devices}


def acceptance_node(inputs):
    """One node's verdict and findings from every check's result (see _acceptance.node_record)."""
    try:
        return node_record(inputs)
    except (AcceptanceError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"acceptance_node: {error}") from None


def acceptance_node_patch(node, record, when):
    """The merge patch that writes the verdict on the Node, or None (see _acceptance.node_patch)."""
    if not isinstance(node, dict) or not isinstance(record, dict):
        raise AnsibleFilterError("acceptance_node_patch: expects a Node object and a node record of acceptance_node.")
    try:
        return node_patch(node, record, str(when))
    except AcceptanceError as error:
        raise AnsibleFilterError(f"acceptance_node_patch: {error}") from None


def acceptance_report_files(records, run):
    """File name -> text of the report (Markdown, HTML, JSON, JUnit XML, the rail chart)."""
    try:
        return report_files(list(records), dict(run))
    except (ValueError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"acceptance_report_files: {error}") from None


class FilterModule:
    """Filters of playbooks/acceptance.yml."""

    def filters(self):
        return {
            "acceptance_peers": acceptance_peers,
            "acceptance_node": acceptance_node,
            "acceptance_rail_outputs": acceptance_rail_outputs,
            "acceptance_node_patch": acceptance_node_patch,
            "acceptance_report_files": acceptance_report_files,
        }
