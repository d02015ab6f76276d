# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._kube_cert import (
    KubeCertError,
    parse_check_expiration,
    renewal_plan,
    renewed_problems,
)
from ansible_collections.onprem.gpu.plugins.module_utils._node_removal import NodeRemovalError, removal_problem


def kube_cert_expiration(stdout):
    """The certificates and CAs of `kubeadm certs check-expiration`'s output, with their days left."""
    try:
        return parse_check_expiration(stdout)
    except KubeCertError as error:
        raise AnsibleFilterError(f"kube_cert_expiration: {error}") from None


def kube_cert_renewal(report, host, renew_days, ca_min_days, force=False):
    """Whether to renew a control plane's certificates now, and the sentence refusing it when its CA is about to expire."""
    try:
        return renewal_plan(report, host, renew_days, ca_min_days, force)
    except (KubeCertError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"kube_cert_renewal: {error}") from None


def kube_cert_renewed_problems(report, host, renew_days):
    """Sentences for the certificates still due after a renewal; empty when every one got its new year."""
    try:
        return renewed_problems(report, host, renew_days)
    except (KubeCertError, KeyError, TypeError) as error:
        raise AnsibleFilterError(f"kube_cert_renewed_problems: {error}") from None


def node_removal_problem(nodes, host, node_name, cluster, limited, kube_host):
    """Why a node may not leave its cluster now (the last control plane, etcd's quorum, no --limit), or an empty string."""
    try:
        return removal_problem(host, node_name, cluster, nodes, bool(limited), bool(kube_host))
    except NodeRemovalError as error:
        raise AnsibleFilterError(f"node_removal_problem: {error}") from None


class FilterModule:
    """Filters for a cluster's certificates (certificates.yml) and for a node leaving its cluster (remove_node.yml)."""

    def filters(self):
        return {
            "kube_cert_expiration": kube_cert_expiration,
            "kube_cert_renewal": kube_cert_renewal,
            "kube_cert_renewed_problems": kube_cert_renewed_problems,
            "node_removal_problem": node_removal_problem,
        }
