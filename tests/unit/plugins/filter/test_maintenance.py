# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.maintenance import (
    FilterModule,
    maintenance_conflict,
    maintenance_gpu_resources,
    maintenance_held_by,
    maintenance_node_problems,
    maintenance_ready,
    maintenance_wait_message,
)

NODE = {"metadata": {"name": "dc1-gpu2", "labels": {"onprem.gpu/maintenance": "driver-upgrade"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "8"}}}


def test_the_filters_are_registered_under_their_names():
    assert sorted(FilterModule().filters()) == ["maintenance_conflict", "maintenance_gpu_resources", "maintenance_held_by",
                                                "maintenance_node_problems", "maintenance_ready", "maintenance_wait_message"]


def test_the_upgrade_checks_answer_as_the_logic_does():
    node = {"metadata": {"name": "dc1-gpu1"}, "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.35.4"},
                                                         "allocatable": {"nvidia.com/gpu": "8"}}}
    assert maintenance_gpu_resources(node) == {"nvidia.com/gpu": 8}
    assert maintenance_node_problems(node, {}, True, "1.36.2") == ["its kubelet reports v1.35.4, not v1.36.2"]
    assert maintenance_node_problems(node, {}, True, "") == []
    assert maintenance_wait_message(node, {}, True, timeout=5, expected_version="1.36.2").startswith("dc1-gpu1 did not come back at v1.36.2 within 5 s")
    with pytest.raises(AnsibleFilterError, match="maintenance_gpu_resources expects a Node object"):
        maintenance_gpu_resources(["dc1-gpu1"])


def test_the_filters_answer_as_the_logic_does():
    assert maintenance_conflict(NODE, "driver-upgrade") == ""
    assert maintenance_conflict(NODE, "mig-reconfigure").startswith("dc1-gpu2 is held by driver-upgrade: a run of it")
    assert maintenance_ready(NODE) == "True"
    assert maintenance_held_by(NODE, "driver-upgrade") is True and maintenance_held_by(NODE, "mig-reconfigure") is False
    assert maintenance_node_problems(NODE, {"nvidia.com/gpu": 8}, True) == []
    assert maintenance_node_problems(NODE, None, True) == []
    assert maintenance_wait_message(NODE, {"nvidia.com/gpu": 8}, True, timeout=5) == "dc1-gpu2 is back: Ready is True and it advertises what was expected."


@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: maintenance_conflict([], "x"), "maintenance_conflict expects a Node object"),
        (lambda: maintenance_conflict(NODE, ""), "maintenance_conflict expects the operation as a non-empty string"),
        (lambda: maintenance_node_problems(NODE, [8]), "maintenance_node_problems expects the resources as a mapping"),
        (lambda: maintenance_wait_message(None), "maintenance_wait_message expects a Node object"),
        (lambda: maintenance_ready("dc1-gpu2"), "maintenance_ready expects a Node object"),
        (lambda: maintenance_held_by(NODE, None), "maintenance_held_by expects the operation as a non-empty string"),
    ],
)
def test_wrong_input_is_one_filter_error(call, words):
    with pytest.raises(AnsibleFilterError, match=words):
        call()
