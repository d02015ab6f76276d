# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The acceptance playbook's filters: peers, the rails' outputs from the clients' combined output, the guards."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.acceptance import (
    FilterModule,
    acceptance_node,
    acceptance_node_patch,
    acceptance_peers,
    acceptance_rail_outputs,
    acceptance_report_files,
)
from ansible_collections.onprem.gpu.plugins.filter.kube import kube_node_patch


def test_each_node_meets_the_next_of_its_datacenter_and_a_lone_node_none():
    hosts = ["dc1-gpu3", "dc1-gpu1", "dc2-gpu1", "dc1-gpu2"]
    datacenters = {"dc1-gpu1": "dc1", "dc1-gpu2": "dc1", "dc1-gpu3": "dc1", "dc2-gpu1": "dc2"}
    assert acceptance_peers(hosts, datacenters) == {"dc1-gpu1": "dc1-gpu2", "dc1-gpu2": "dc1-gpu3", "dc1-gpu3": "dc1-gpu1",
                                                    "dc2-gpu1": None}
    assert acceptance_peers(["a", "b"], {"a": "x", "b": "x"}) == {"a": "b", "b": "a"}
    with pytest.raises(AnsibleFilterError, match="a list of hosts"):
        acceptance_peers("dc1-gpu1", {})


CLIENTS = """@@ acceptance rail mlx5_0
 #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]
 8388608    5000             388.78             388.00 		   0.005782
@@ acceptance rail exit 0
@@ acceptance rail mlx5_1
@@ acceptance rail exit 124
@@ acceptance rail mlx5_2
 Port number 1 state is Down
@@ acceptance rail exit 1
"""


def test_the_clients_output_is_split_by_rail_and_a_silent_or_missing_rail_says_so():
    outputs = acceptance_rail_outputs(CLIENTS, ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"])
    assert outputs["mlx5_0"].splitlines()[1].split()[3] == "388.00"
    assert outputs["mlx5_1"] == "ib_write_bw printed nothing (exit code 124)."
    assert outputs["mlx5_2"] == " Port number 1 state is Down"
    assert outputs["mlx5_3"] == "ib_write_bw did not run on this rail."
    with pytest.raises(AnsibleFilterError, match="list of rail devices"):
        acceptance_rail_outputs(CLIENTS, "mlx5_0")


def test_bad_input_is_one_sentence_naming_the_filter():
    with pytest.raises(AnsibleFilterError, match="^acceptance_node: a node's inputs need at least its host"):
        acceptance_node({})
    with pytest.raises(AnsibleFilterError, match="^acceptance_node_patch: expects a Node object"):
        acceptance_node_patch([], {}, "now")
    with pytest.raises(AnsibleFilterError, match="^acceptance_node_patch: the verdict must be passed or failed"):
        acceptance_node_patch({}, {"verdict": "maybe"}, "now")
    with pytest.raises(AnsibleFilterError, match="^acceptance_report_files: The acceptance report needs at least one node"):
        acceptance_report_files([], {})


def test_the_filters_are_registered_and_kube_node_patch_takes_acceptance_required():
    assert set(FilterModule().filters()) == {
        "acceptance_peers", "acceptance_node", "acceptance_node_patch", "acceptance_rail_outputs", "acceptance_report_files"}
    bare = {"metadata": {"name": "dc1-gpu3", "labels": {}, "annotations": {}}, "spec": {}}
    assert kube_node_patch(bare, {}, []) is None
    assert kube_node_patch(bare, {}, [], True)["spec"]["taints"] == [
        {"key": "onprem.gpu/unhealthy", "value": "acceptance-pending", "effect": "NoSchedule"}]
