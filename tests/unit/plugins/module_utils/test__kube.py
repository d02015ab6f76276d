# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._kube import (
    KubeInputError,
    ca_cert_hash,
    cidr_problems,
    controller_kubeconfig,
    node_metadata_patch,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "kube"
PINS = dict(line.split() for line in (FIXTURES / "hashes.txt").read_text().splitlines())


# public_key_fingerprints.sha256 of community.crypto.x509_certificate_info (3.0.5) run on each certificate.
FINGERPRINTS = dict(line.split() for line in (FIXTURES / "public_key_fingerprints.txt").read_text().splitlines())


def test_every_certificate_has_a_recorded_fingerprint():
    assert sorted(FINGERPRINTS) == sorted(PINS)


@pytest.mark.parametrize("certificate", sorted(PINS))
def test_the_community_crypto_fingerprint_becomes_the_pin_of_the_openssl_pipeline(certificate):
    assert ca_cert_hash(FINGERPRINTS[certificate]) == PINS[certificate]


def test_the_fingerprint_may_be_upper_case_and_padded():
    assert ca_cert_hash(" " + FINGERPRINTS["ca_rsa2048.crt"].upper() + "\n") == PINS["ca_rsa2048.crt"]


@pytest.mark.parametrize("certificate", sorted(PINS))
def test_a_pem_certificate_gives_the_pin_of_the_openssl_pipeline(certificate):
    assert ca_cert_hash((FIXTURES / certificate).read_text()) == PINS[certificate]


def test_ca_hash_reads_the_first_certificate_of_a_bundle():
    bundle = (FIXTURES / "ca_ecdsa_p256.crt").read_text() + (FIXTURES / "ca_rsa2048.crt").read_text()
    assert ca_cert_hash("junk before\n" + bundle) == PINS["ca_ecdsa_p256.crt"]


@pytest.mark.parametrize(
    "text, message",
    [
        pytest.param("", "neither a SHA-256 public key fingerprint", id="empty"),
        pytest.param(FINGERPRINTS["ca_rsa2048.crt"][:-3], "neither a SHA-256 public key fingerprint", id="fingerprint-one-byte-short"),
        pytest.param("sha1 " + "ab:" * 19 + "ab", "neither a SHA-256 public key fingerprint", id="sha1-fingerprint"),
        pytest.param(FINGERPRINTS["ca_rsa2048.crt"].replace(":", "-"), "neither a SHA-256 public key fingerprint", id="dashes"),
        pytest.param("-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n", "not valid base64", id="not-base64"),
        pytest.param("-----BEGIN CERTIFICATE-----\nAgEB\n-----END CERTIFICATE-----\n", "not an X.509 certificate", id="not-a-sequence"),
        pytest.param("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "not an X.509 certificate", id="truncated"),
    ],
)
def test_ca_hash_refuses_what_is_neither(text, message):
    with pytest.raises(KubeInputError, match=message):
        ca_cert_hash(text)


def test_ca_hash_refuses_what_is_not_text():
    with pytest.raises(KubeInputError, match="not dict"):
        ca_cert_hash({"sha256": FINGERPRINTS["ca_rsa2048.crt"]})


@pytest.mark.parametrize(
    "pods, services, expected",
    [
        pytest.param("10.32.0.0/12", "10.96.0.0/12", [], id="separate"),
        pytest.param("10.96.0.0/16", "10.96.0.0/12", ["kube_pod_cidr 10.96.0.0/16 and kube_service_cidr 10.96.0.0/12 overlap"], id="pods-inside-services"),
        pytest.param("10.0.0.0/8", "10.96.0.0/12", ["kube_pod_cidr 10.0.0.0/8 and kube_service_cidr 10.96.0.0/12 overlap"], id="services-inside-pods"),
        pytest.param("172.16.0.0/16", "10.0.0.0/8", ["kube_service_cidr 10.0.0.0/8 is larger than kube-apiserver accepts"], id="service-range-too-large"),
        pytest.param("10.32.0.1/12", "10.96.0.0/12", ["kube_pod_cidr 10.32.0.1/12 is not a network in CIDR notation"], id="host-bits-set"),
        pytest.param("", "10.96.0.0/12", ["kube_pod_cidr must be a network in CIDR notation"], id="empty"),
        pytest.param("fd00:10::/56", "10.96.0.0/12", [], id="different-families"),
    ],
)
def test_cidr_problems(pods, services, expected):
    problems = cidr_problems(pods, services)
    assert len(problems) == len(expected)
    for problem, start in zip(problems, expected):
        assert problem.startswith(start)


TRAINING_TAINT = {"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}


def node(labels=None, taints=None, annotations=None):
    return {"metadata": {"name": "w1", "labels": labels or {}, "annotations": annotations or {}}, "spec": {"taints": taints or []}}


def test_a_new_node_gets_labels_taints_and_the_ownership_record():
    patch = node_metadata_patch(node({"kubernetes.io/hostname": "w1"}), {"onprem.gpu/pool": "training"}, [TRAINING_TAINT])
    assert patch == {
        "metadata": {
            "labels": {"onprem.gpu/pool": "training"},
            "annotations": {"onprem.gpu/managed-labels": "onprem.gpu/pool", "onprem.gpu/managed-taints": "onprem.gpu/pool:NoSchedule"},
        },
        "spec": {"taints": [TRAINING_TAINT]},
    }


def test_a_node_that_has_everything_needs_no_patch():
    current = node(
        {"kubernetes.io/hostname": "w1", "onprem.gpu/pool": "training"}, [TRAINING_TAINT],
        {"onprem.gpu/managed-labels": "onprem.gpu/pool", "onprem.gpu/managed-taints": "onprem.gpu/pool:NoSchedule"},
    )
    assert node_metadata_patch(current, {"onprem.gpu/pool": "training"}, [TRAINING_TAINT]) is None


def test_a_label_the_inventory_dropped_is_removed_and_foreign_ones_stay():
    current = node(
        {"kubernetes.io/hostname": "w1", "onprem.gpu/pool": "training", "example.com/rack": "r12", "nvidia.com/gpu.present": "true"},
        [TRAINING_TAINT, {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-11-29T22:00:00Z"}],
        {"onprem.gpu/managed-labels": "example.com/rack,onprem.gpu/pool", "onprem.gpu/managed-taints": "onprem.gpu/pool:NoSchedule"},
    )
    patch = node_metadata_patch(current, {"onprem.gpu/pool": "training"}, [TRAINING_TAINT])
    assert patch == {"metadata": {"labels": {"example.com/rack": None}, "annotations": {"onprem.gpu/managed-labels": "onprem.gpu/pool"}}}


def test_a_dropped_taint_is_removed_and_foreign_taints_are_kept():
    foreign = {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "timeAdded": "2026-11-29T22:00:00Z"}
    current = node({"onprem.gpu/pool": "training"}, [TRAINING_TAINT, foreign],
                   {"onprem.gpu/managed-labels": "onprem.gpu/pool", "onprem.gpu/managed-taints": "onprem.gpu/pool:NoSchedule"})
    patch = node_metadata_patch(current, {"onprem.gpu/pool": "training"}, [])
    assert patch == {"metadata": {"annotations": {"onprem.gpu/managed-taints": ""}}, "spec": {"taints": [foreign]}}


def test_a_changed_taint_value_replaces_the_old_one():
    current = node({}, [TRAINING_TAINT], {"onprem.gpu/managed-labels": "", "onprem.gpu/managed-taints": "onprem.gpu/pool:NoSchedule"})
    inference = dict(TRAINING_TAINT, value="inference")
    assert node_metadata_patch(current, {}, [inference]) == {"spec": {"taints": [inference]}}


def test_a_hand_set_label_with_the_wanted_value_is_adopted_without_rewriting_it():
    patch = node_metadata_patch(node({"onprem.gpu/pool": "training"}), {"onprem.gpu/pool": "training"}, [])
    assert patch == {"metadata": {"annotations": {"onprem.gpu/managed-labels": "onprem.gpu/pool"}}}


@pytest.mark.parametrize(
    "labels, taints, message",
    [
        pytest.param([], [], "labels must be a mapping", id="labels-not-a-mapping"),
        pytest.param({}, [{"key": "a", "effect": "NoRun"}], "needs a key and an effect", id="unknown-effect"),
        pytest.param({}, "a=b:NoSchedule", "taints must be a list", id="taints-as-string"),
    ],
)
def test_bad_labels_or_taints_are_refused(labels, taints, message):
    with pytest.raises(KubeInputError, match=message):
        node_metadata_patch(node(), labels, taints)


@pytest.mark.parametrize(("arguments", "expected"), [
    (("dc1", None, "/srv/inventories/onprem", None), "/srv/inventories/onprem/artifacts/dc1/admin.conf"),
    (("dc1", "/etc/onprem-gpu/kubeconfigs", "/srv/inventories/onprem", None), "/etc/onprem-gpu/kubeconfigs/dc1/admin.conf"),
    (("dc1", None, "/srv/inventories/onprem", "gpu-east"), "/srv/inventories/onprem/artifacts/gpu-east/admin.conf"),
    (("dc2", "", None, ""), "./artifacts/dc2/admin.conf"),
])
def test_the_controller_kubeconfig_is_where_kube_control_plane_fetches_it(arguments, expected):
    assert controller_kubeconfig(*arguments) == expected


def test_the_controller_kubeconfig_needs_a_datacenter_or_cluster_name():
    with pytest.raises(KubeInputError, match="a datacenter"):
        controller_kubeconfig("", None, "/srv/inventories/onprem", None)
