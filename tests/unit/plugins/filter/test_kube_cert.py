# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The certificates and node removal filters: module_utils' answers, and its refusals as one-sentence filter errors."""

from __future__ import annotations

import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.kube_cert import FilterModule

FILTERS = FilterModule().filters()
OUTPUT = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "kube_cert" / "check-expiration-1.35.txt").read_text()


def test_the_expiration_feeds_the_renewal_plan():
    report = FILTERS["kube_cert_expiration"](OUTPUT)
    plan = FILTERS["kube_cert_renewal"](report, "dc1-cp1", 60, 365)
    assert plan["renew"] is False and plan["soonest"]["days_left"] == 360
    assert FILTERS["kube_cert_renewal"](report, "dc1-cp1", 60, 365, True)["renew"] is True
    assert FILTERS["kube_cert_renewed_problems"](report, "dc1-cp1", 60) == []


@pytest.mark.parametrize("name, arguments, message", [
    ("kube_cert_expiration", (None,), "kube_cert_expiration: kube_cert_expiration takes the stdout"),
    ("kube_cert_expiration", ("no table",), "has no certificate table"),
    ("kube_cert_renewal", ({"certificates": "x"}, "dc1-cp1", 60, 365), "kube_cert_renewal: "),
    ("kube_cert_renewal", ({}, "dc1-cp1", 60, 365), "kube_cert_renewal: "),
    ("kube_cert_renewed_problems", ({}, "dc1-cp1", 60), "kube_cert_renewed_problems: "),
    ("node_removal_problem", ("nodes", "dc1-gpu1", "dc1-gpu1", "dc1", True, True), "node_removal_problem: node_removal_problem takes"),
])
def test_bad_input_is_a_filter_error(name, arguments, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS[name](*arguments)


def test_the_removal_problem_reads_the_limit_and_the_inventory_as_booleans():
    nodes = [{"metadata": {"name": "dc1-cp1", "labels": {"node-role.kubernetes.io/control-plane": ""}}, "status": {}}]
    assert FILTERS["node_removal_problem"](nodes, "dc1-gpu1", "dc1-gpu1", "dc1", "", True).startswith("remove_node.yml removes")
    assert FILTERS["node_removal_problem"](nodes, "dc1-cp1", "dc1-cp1", "dc1", True, True).startswith("dc1-cp1 is the last control plane")
