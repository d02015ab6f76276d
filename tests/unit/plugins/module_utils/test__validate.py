# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from fractions import Fraction

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _validate as validate


@pytest.mark.parametrize("value", ["dc1", "a", "dc-1", "x" * 63])
def test_dns_labels_accepted(value):
    assert validate.dns_label_problem("datacenter", value) is None


@pytest.mark.parametrize("value", ["dc1\n", "DC1", "-dc1", "dc1-", "dc_1", "dc1.x", "", "x" * 64, None, 1, "../dc1"])
def test_dns_labels_refused_in_one_sentence(value):
    problem = validate.dns_label_problem("dc1-gpu1: datacenter", value)
    assert problem.startswith("dc1-gpu1: datacenter must be a DNS label") and problem.endswith(f"not {validate.shown(value)}.")


def test_a_trailing_newline_shows_in_the_sentence():
    assert "not 'dc1\\n'." in validate.dns_label_problem("datacenter", "dc1\n")


@pytest.mark.parametrize("value, ok", [("dc1", True), ("dc1.example.internal", True), ("dc1/admin", False), ("../../etc", False),
                                       ("dc1.", False), ("dc1\n", False)])
def test_dns_subdomains(value, ok):
    assert (validate.dns_subdomain_problem("kube_cluster_name", value) is None) == ok


@pytest.mark.parametrize("key, ok", [("pool", True), ("onprem.gpu/pool", True), ("node.kubernetes.io/role", True), ("a/b/c", False),
                                     ("/pool", False), ("Bad_Prefix/pool", False), ("pool=x", False), ("pool,x", False), ("", False),
                                     ("x" * 64, False), (1, False)])
def test_label_keys(key, ok):
    assert (validate.label_key_problem("h: kube_node_labels", key) is None) == ok


@pytest.mark.parametrize("value, ok", [("training", True), ("", True), ("a.b-c_d", True), (3, True), ("training,evil=1", False),
                                       ("a=b", False), ("-a", False), ("x" * 64, False), (True, False), (None, False), ([], False)])
def test_label_values(value, ok):
    assert (validate.label_value_problem("h: kube_node_labels", "pool", value) is None) == ok


def test_labels_given_as_a_list_get_a_sentence():
    assert validate.labels_problems("h: kube_node_labels", ["pool=training"]) == [
        "h: kube_node_labels must be a mapping of label names to values, e.g. {onprem.gpu/pool: training}, not list ['pool=training']."]


@pytest.mark.parametrize("value, ok", [(8, True), (1, True), (16, True), (0, False), (17, False), ("eight", False), ("8", False), (True, False),
                                       (None, False), (8.0, False)])
def test_whole_numbers(value, ok):
    assert (validate.whole_number_problem("h: node_gpu_count", value, 1, 16) is None) == ok


def test_whole_number_sentence():
    assert validate.whole_number_problem("h: node_gpu_count", "eight", 1, 16) == "h: node_gpu_count must be a whole number from 1 to 16, not 'eight'."


@pytest.mark.parametrize("value, canonical", [
    ("EB693B3035CD5710E231E123A4B469963BF863CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ("eb69 3b30 35cd 5710 e231  e123 a4b4 6996 3bf8 63cc", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ("0xEB693B3035CD5710E231E123A4B469963BF863CC", "EB693B3035CD5710E231E123A4B469963BF863CC"),
    ("3BF863CC", None), ("A4B469963BF863CC", None), ("", None), (None, None), ("G" * 40, None),
])
def test_fingerprints(value, canonical):
    assert validate.fingerprint(value) == canonical


def test_a_short_key_id_is_not_a_fingerprint():
    assert validate.fingerprint_problem("kube_node_repo_key_fingerprint", "3BF863CC").startswith(
        "kube_node_repo_key_fingerprint must be the full OpenPGP fingerprint of the key, 40 hexadecimal digits")
    assert validate.fingerprint_problem("kube_node_repo_key_fingerprint", "") is None


@pytest.mark.parametrize("value, exact", [
    (8, 8), (0, 0), (1.5, Fraction(3, 2)), ("500m", Fraction(1, 2)), ("4Ti", 4 * 2**40), ("1e3", 1000),
    ("1E", 10**18), (".5", Fraction(1, 2)), (2.7, Fraction(27, 10)),
    (-1, None), ("-4Ti", None), ("lots", None), ("4Ti\n", None), (True, None), (None, None), ([4], None), (float("inf"), None),
])
def test_quantities(value, exact):
    assert validate.quantity(value) == exact


@pytest.mark.parametrize("value, sentence", [
    ("10.20.0.0/16", None),
    ("fd00::/64", None),
    ("not-a-cidr", "The CIDR must be a network in CIDR notation such as 10.20.0.0/16, not 'not-a-cidr'."),
    ("10.20.0.0/16\n", "The CIDR must be a network in CIDR notation such as 10.20.0.0/16, not '10.20.0.0/16\\n'."),
    ("10.20.0.1", "The CIDR must be a network in CIDR notation such as 10.20.0.0/16, not '10.20.0.1'."),
    ("10.20.0.1/16", "The CIDR 10.20.0.1/16 has host bits set: write the network, 10.20.0.0/16."),
])
def test_cidrs(value, sentence):
    assert validate.cidr_problem("The CIDR", value) == sentence
