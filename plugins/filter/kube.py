# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._kube import (
    KubeInputError,
    ca_cert_hash,
    cidr_problems,
    controller_kubeconfig,
    node_metadata_patch,
)
from ansible_collections.onprem.gpu.plugins.module_utils._kube_node import (
    acceptance_pending_patch,
    node_problems,
    node_work,
    pause_image,
    preflight_problems,
)


def kube_ca_cert_hash(pem):
    """sha256:<hex> of a CA certificate's public key, as kubeadm join pins it, from x509_certificate_info's fingerprint or PEM."""
    try:
        return ca_cert_hash(pem)
    except KubeInputError as error:
        raise AnsibleFilterError(f"kube_ca_cert_hash: {error}") from None


def kube_cidr_problems(pod_cidr, service_cidr):
    """Sentences saying what is wrong with a cluster's pod and service networks; empty when none."""
    return cidr_problems(pod_cidr, service_cidr)


def kube_controller_kubeconfigs(first_hosts, hostvars):
    """{datacenter: path} of each cluster's admin kubeconfig on the controller, where kube_control_plane fetches it, from the
    variables of each datacenter's first control-plane host (``first_hosts``: {datacenter: host})."""

    def get(host_vars, name):
        try:
            value = host_vars[name]
        except KeyError:
            return None
        return str(value) if value is not None else None

    paths = {}
    for datacenter, host in (first_hosts or {}).items():
        try:
            host_vars = hostvars[host]
        except KeyError:
            host_vars = {}
        try:
            paths[str(datacenter)] = controller_kubeconfig(str(datacenter or ""), get(host_vars, "kube_control_plane_kubeconfig_dir"),
                                                           get(host_vars, "inventory_dir"), get(host_vars, "kube_cluster_name"))
        except KubeInputError as error:
            raise AnsibleFilterError(f"kube_controller_kubeconfigs: {error}") from None
    return paths


def kube_node_patch(node, labels, taints, acceptance_required=False):
    """The merge patch that gives a Node its pool labels and taints (and, with ``acceptance_required``, the acceptance-pending
    taint while it has never passed acceptance), or None when it has them."""
    try:
        return acceptance_pending_patch(node, node_metadata_patch(node, labels, taints), bool(acceptance_required))
    except KubeInputError as error:
        raise AnsibleFilterError(f"kube_node_patch: {error}") from None


def kube_node_preflight_problems(settings, host, facts=None, wanted=None):
    """Sentences saying what is wrong with a node's inventory, platform or mirror; empty when none."""
    return preflight_problems(host, settings, facts, wanted)


def kube_node_work(facts, wanted):
    """What the node base lacks that kube_node changes; empty on a node that needs nothing."""
    return node_work(facts, wanted)


def kube_node_problems(facts, host, wanted):
    """Sentences saying how the node base differs from what kubelet needs; empty when it is right."""
    return node_problems(host, facts, wanted)


def kube_pause_image(version, repository="registry.k8s.io"):
    """The pod sandbox (pause) image kubeadm expects for a cluster at ``version``."""
    try:
        return pause_image(version, repository)
    except ValueError as error:
        raise AnsibleFilterError(f"kube_pause_image: {error}") from None


class FilterModule:
    """Filters of the kubeadm roles: the CA hash joins pin, CIDR checks, the kubeconfig on the controller, pool labels and taints,
    node checks, the pause image."""

    def filters(self):
        return {
            "kube_ca_cert_hash": kube_ca_cert_hash,
            "kube_cidr_problems": kube_cidr_problems,
            "kube_controller_kubeconfigs": kube_controller_kubeconfigs,
            "kube_node_patch": kube_node_patch,
            "kube_node_preflight_problems": kube_node_preflight_problems,
            "kube_node_problems": kube_node_problems,
            "kube_node_work": kube_node_work,
            "kube_pause_image": kube_pause_image,
        }
