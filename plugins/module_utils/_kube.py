# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure logic of the kubeadm clusters: the CA hash joins pin, CIDR checks, and the pool labels and taints of a node.

No Ansible import: the filters in plugins/filter/kube.py expose these, and tests/unit calls them directly.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ipaddress
import re

# Where the collection records which labels and taints of a Node it owns, so that removing one from the
# inventory removes it from the Node while labels and taints set by others (kubelet, GPU Operator) stay.
MANAGED_LABELS_ANNOTATION = "onprem.gpu/managed-labels"
MANAGED_TAINTS_ANNOTATION = "onprem.gpu/managed-taints"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")

_PEM_CERTIFICATE = re.compile(r"-----BEGIN CERTIFICATE-----\s*(.+?)\s*-----END CERTIFICATE-----", re.DOTALL)


class KubeInputError(ValueError):
    """Input that cannot be used, with a sentence saying what is wrong."""


_SHA256_FINGERPRINT = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){31}")


def ca_cert_hash(value: str) -> str:
    """The value kubeadm pins with --discovery-token-ca-cert-hash: sha256:<hex> of the CA's DER SubjectPublicKeyInfo.

    ``value`` is either that SHA-256 as community.crypto.x509_certificate_info returns it in
    ``public_key_fingerprints.sha256`` (colon-separated hex bytes of the SHA-256 of the DER SubjectPublicKeyInfo), or
    a PEM text whose first certificate is read with the cryptography library (a dependency of ansible-core, so
    present where filters run).
    """
    if not isinstance(value, str):
        raise KubeInputError(f"expected a SHA-256 public key fingerprint or a PEM certificate as text, not {type(value).__name__}.")
    fingerprint = value.strip().lower()
    if _SHA256_FINGERPRINT.fullmatch(fingerprint):
        return "sha256:" + fingerprint.replace(":", "")
    match = _PEM_CERTIFICATE.search(value)
    if match is None:
        raise KubeInputError(
            "neither a SHA-256 public key fingerprint (32 colon-separated hex bytes, as community.crypto.x509_certificate_info "
            "returns in public_key_fingerprints.sha256) nor a PEM certificate (-----BEGIN CERTIFICATE-----)."
        )
    try:
        der = base64.b64decode("".join(match.group(1).split()), validate=True)
    except binascii.Error as error:
        raise KubeInputError(f"the PEM certificate is not valid base64 ({error}).") from None
    from cryptography import x509  # pylint: disable=import-outside-toplevel  # only the PEM form needs it
    from cryptography.hazmat.primitives import serialization  # pylint: disable=import-outside-toplevel

    try:
        certificate = x509.load_der_x509_certificate(der)
    except ValueError as error:
        raise KubeInputError(f"the PEM block is not an X.509 certificate ({error}).") from None
    spki = certificate.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return "sha256:" + hashlib.sha256(spki).hexdigest()


def parse_cidr(value, name: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    if not isinstance(value, str) or not value:
        raise KubeInputError(f"{name} must be a network in CIDR notation such as 10.32.0.0/12, not {value!r}.")
    try:
        return ipaddress.ip_network(value, strict=True)
    except ValueError as error:
        raise KubeInputError(f"{name} {value} is not a network in CIDR notation ({error}).") from None


def cidr_problems(pod_cidr, service_cidr) -> list[str]:
    """Sentences saying what is wrong with a cluster's pod and service networks; empty when they can be used."""
    try:
        pods = parse_cidr(pod_cidr, "kube_pod_cidr")
        services = parse_cidr(service_cidr, "kube_service_cidr")
    except KubeInputError as error:
        return [str(error)]
    problems = []
    if pods.version == services.version and pods.overlaps(services):
        problems.append(
            f"kube_pod_cidr {pods} and kube_service_cidr {services} overlap: pod and service addresses would collide; "
            "give them separate ranges (for example 10.32.0.0/12 for pods and 10.96.0.0/12 for services)."
        )
    # kube-apiserver refuses a service range larger than a /12 of IPv4 (a /108 of IPv6): 20 bits of addresses.
    if services.max_prefixlen - services.prefixlen > 20:
        problems.append(f"kube_service_cidr {services} is larger than kube-apiserver accepts; use a /12 or smaller.")
    return problems


def normalise_taints(taints) -> list[dict]:
    """Taints as the Node API holds them ({key, value?, effect}), from the inventory's list of mappings."""
    if not isinstance(taints, list):
        raise KubeInputError(f"taints must be a list of {{key, value, effect}} mappings, not {type(taints).__name__}.")
    result = []
    for taint in taints:
        if not isinstance(taint, dict) or not taint.get("key") or taint.get("effect") not in TAINT_EFFECTS:
            raise KubeInputError(
                f"taint {taint!r} needs a key and an effect out of {', '.join(TAINT_EFFECTS)} (value is optional)."
            )
        entry = {"key": str(taint["key"]), "effect": taint["effect"]}
        if taint.get("value") not in (None, ""):
            entry["value"] = str(taint["value"])
        result.append(entry)
    return result


def _taint_id(taint: dict) -> str:
    return f"{taint['key']}:{taint['effect']}"


def _annotation_list(annotations: dict, name: str) -> list[str]:
    return [item for item in annotations.get(name, "").split(",") if item]


def controller_kubeconfig(datacenter: str, kubeconfig_dir=None, inventory_dir=None, cluster_name=None) -> str:
    """Where a datacenter's admin kubeconfig lives on the controller, as kube_control_plane fetches it:
    <kubeconfig_dir, default <inventory_dir>/artifacts>/<cluster_name or datacenter>/admin.conf."""
    if not datacenter and not cluster_name:
        raise KubeInputError("a datacenter (or kube_cluster_name) is needed to find the cluster's admin kubeconfig on the controller.")
    directory = str(kubeconfig_dir) if kubeconfig_dir else f"{inventory_dir or '.'}/artifacts"
    return f"{directory}/{cluster_name or datacenter}/admin.conf"


def node_metadata_patch(node: dict, labels: dict, taints: list) -> dict | None:
    """The merge patch that gives a Node the pool labels and taints the inventory wants, or None if it has them.

    Labels and taints this collection set before (recorded in the Node's annotations) but no longer wanted are
    removed; labels and taints that others set are left alone, whatever their keys.
    """
    if not isinstance(labels, dict):
        raise KubeInputError(f"labels must be a mapping of label names to values, not {type(labels).__name__}.")
    wanted_labels = {str(key): str(value) for key, value in labels.items()}
    wanted_taints = normalise_taints(taints)
    metadata = node.get("metadata", {})
    current_labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    current_taints = (node.get("spec") or {}).get("taints") or []

    previously_managed = set(_annotation_list(annotations, MANAGED_LABELS_ANNOTATION))
    label_patch = {key: value for key, value in wanted_labels.items() if current_labels.get(key) != value}
    label_patch.update({key: None for key in sorted(previously_managed - set(wanted_labels)) if key in current_labels})

    previously_managed_taints = set(_annotation_list(annotations, MANAGED_TAINTS_ANNOTATION))
    wanted_ids = {_taint_id(taint) for taint in wanted_taints}
    kept = [taint for taint in current_taints
            if _taint_id(taint) not in wanted_ids and _taint_id(taint) not in previously_managed_taints]
    new_taints = kept + wanted_taints
    taints_differ = _taint_set(new_taints) != _taint_set(current_taints)

    annotation_patch = {}
    managed_labels = ",".join(sorted(wanted_labels))
    managed_taints = ",".join(sorted(wanted_ids))
    if annotations.get(MANAGED_LABELS_ANNOTATION, "") != managed_labels:
        annotation_patch[MANAGED_LABELS_ANNOTATION] = managed_labels
    if annotations.get(MANAGED_TAINTS_ANNOTATION, "") != managed_taints:
        annotation_patch[MANAGED_TAINTS_ANNOTATION] = managed_taints

    patch = {}
    if label_patch or annotation_patch:
        patch["metadata"] = {}
        if label_patch:
            patch["metadata"]["labels"] = label_patch
        if annotation_patch:
            patch["metadata"]["annotations"] = annotation_patch
    if taints_differ:
        # A merge patch replaces the whole list: it carries every taint the Node keeps, ours and others'.
        patch["spec"] = {"taints": new_taints}
    return patch or None


def _taint_set(taints: list) -> set[tuple]:
    return {(taint.get("key"), taint.get("value") or "", taint.get("effect")) for taint in taints}
