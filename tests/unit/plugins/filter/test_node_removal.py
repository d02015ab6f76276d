# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The filters of a control plane's etcd member leaving with it: module_utils' answers through hostvars and etcdctl's output,
and bad input as one-sentence filter errors."""

from __future__ import annotations

import pathlib

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.node_removal import FilterModule

FILTERS = FilterModule().filters()
MEMBER_LIST = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "node_removal" / "member-list-two.json").read_text()
HOSTVARS = {"dc1-cp1": {"datacenter": "dc1"}, "dc1-cp2": {"datacenter": "dc1"}, "dc2-cp1": {"datacenter": "dc2"}, "lab-mirror": {}}


def test_the_etcd_host_is_read_from_each_host_s_datacenter():
    control_planes = ["dc2-cp1", "dc1-cp1", "dc1-cp2"]
    assert FILTERS["node_removal_etcd_host"](control_planes, HOSTVARS, "dc1-cp2") == "dc1-cp1"
    assert FILTERS["node_removal_etcd_host"](control_planes, HOSTVARS, "dc2-cp1") == ""
    assert FILTERS["node_removal_etcd_host"](control_planes, HOSTVARS, "lab-mirror") == ""
    assert FILTERS["node_removal_etcd_host"](["dc1-cp1", "gone"], HOSTVARS, "dc1-cp2") == "dc1-cp1"


def test_the_member_is_read_from_etcdctl_s_output():
    assert FILTERS["node_removal_etcd_member"](MEMBER_LIST, "m2")["id"] == "915d7b6890dab72"
    assert FILTERS["node_removal_etcd_member"](MEMBER_LIST, "dc1-cp2") == {}


@pytest.mark.parametrize("name, arguments, message", [
    ("node_removal_etcd_member", ("Error: context deadline exceeded", "m1"), "node_removal_etcd_member: node_removal_etcd_member takes"),
    ("node_removal_etcd_host", (["dc1-cp1"], None, "dc1-cp2"), "node_removal_etcd_host: "),
])
def test_bad_input_is_a_filter_error(name, arguments, message):
    with pytest.raises(AnsibleFilterError, match=message):
        FILTERS[name](*arguments)
