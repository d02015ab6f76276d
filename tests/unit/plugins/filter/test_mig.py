# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.mig import mig_layout_problems, mig_resources
from ansible_collections.onprem.gpu.plugins.module_utils._mig_cluster import mixed_strategy_resources
from ansible_collections.onprem.gpu.plugins.module_utils._mig_inventory import inventory_layout

H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-80GB"
LAYOUTS = {
    "all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
    "all-disabled": [{"devices": "all", "mig-enabled": False}],
    "gpu7": [{"devices": [0, 1, 2, 3, 4, 5, 6], "mig-enabled": False}, {"devices": [7], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}],
    "a30-only": [{"devices": "all", "mig-enabled": True, "device-filter": "0x20B710DE", "mig-devices": {"1g.6gb": 4}}],
    "h200": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.18gb": 7}}],
}


def test_a_layout_that_fits_the_inventory_has_no_problem_and_resolves_per_gpu():
    wanted, problem = inventory_layout("dc1-gpu2", H100, 8, "gpu7", LAYOUTS)
    assert problem is None
    assert [(index, gpu.mig_enabled, gpu.mig_devices) for index, gpu in sorted(wanted.items())][-2:] == [
        (6, False, {}),
        (7, True, {"1g.10gb": 7}),
    ]
    assert mig_layout_problems("all-1g.10gb", {"version": "v1", "mig-configs": LAYOUTS}, "dc1-gpu2", H100, 8) == []


@pytest.mark.parametrize(
    "layout, model, count, strict, problem",
    [
        ("none-such", H100, 8, True,
         "Node n1 has mig_layout 'none-such', which mig_layouts does not define (it defines a30-only, all-1g.10gb, all-disabled, gpu7, h200)."),
        ("h200", H100, 8, True, "MIG layout 'h200' of node n1 names profile 1g.18gb that an NVIDIA H100 80GB HBM3 does not offer "
         "(it offers 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb)."),
        ("gpu7", H100, 4, True, "Node n1, MIG layout 'gpu7': "),
        ("a30-only", A100, 8, True, "Node n1, MIG layout 'a30-only': Layout 'a30-only' applies to no GPU on this node"),
        ("all-1g.10gb", "NVIDIA L40S", 4, True, "Node n1 has MIG layout 'all-1g.10gb', but its GPU model 'NVIDIA L40S' does not support MIG."),
    ],
)
def test_each_inventory_mistake_is_one_sentence(layout, model, count, strict, problem):
    problems = mig_layout_problems(layout, LAYOUTS, "n1", model, count, strict)
    assert len(problems) == 1 and problems[0].startswith(problem) and problems[0].endswith(".")


def test_without_strict_a_fleet_layout_skips_what_the_node_lacks():
    assert mig_layout_problems("gpu7", LAYOUTS, "n1", H100, 4, strict=False) == []
    assert mig_layout_problems("a30-only", LAYOUTS, "n1", A100, 8, strict=False) == []


def test_a_model_outside_the_catalogue_is_checked_for_the_name_and_format_only():
    assert mig_layout_problems("all-1g.10gb", LAYOUTS, "n1", "NVIDIA B200", 8) == []
    assert mig_layout_problems("nope", LAYOUTS, "n1", "NVIDIA B200", 8)[0].startswith("Node n1 has mig_layout 'nope', which mig_layouts does not define")
    assert mig_layout_problems("x", {"version": "v2", "mig-configs": {}}, "n1", "NVIDIA B200", 8) == [
        "Node n1, MIG layout 'x': The MIG configuration has version 'v2', but only v1 is supported."
    ]


def test_the_layout_name_must_be_given():
    with pytest.raises(AnsibleFilterError, match="expects the layout name"):
        mig_layout_problems("", LAYOUTS, "n1", H100, 8)


def test_mixed_strategy_resources_count_whole_gpus_and_each_profile():
    gpus = [{"index": 0, "mig_enabled": False, "mig_devices": {}}, {"index": 1, "mig_enabled": True, "mig_devices": {"1g.10gb": 2, "3g.40gb": 1}},
            {"index": 2, "mig_enabled": True, "mig_devices": {"1g.10gb": 7}}]
    assert mixed_strategy_resources(gpus) == {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 9, "nvidia.com/mig-3g.40gb": 1}
    assert mig_resources([{"mig_enabled": True, "mig_devices": {"1g.10gb": 7}}] * 8) == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}
    with pytest.raises(AnsibleFilterError):
        mig_resources({"gpus": []})


def test_resource_differences_name_each_count_and_ignore_other_resources():
    from ansible_collections.onprem.gpu.plugins.filter.mig import mig_resource_differences

    expected = {"nvidia.com/gpu": 7, "nvidia.com/mig-1g.10gb": 7}
    advertised = {"cpu": "16", "memory": "1Gi", "nvidia.com/gpu": "7", "nvidia.com/mig-1g.10gb": "7", "nvidia.com/mig-3g.40gb": "0"}
    assert mig_resource_differences(expected, advertised) == []
    advertised.update({"nvidia.com/mig-3g.40gb": "2", "nvidia.com/gpu": "8"})
    assert mig_resource_differences(expected, advertised) == [
        "nvidia.com/gpu: advertised 8, expected 7",
        "nvidia.com/mig-3g.40gb: advertised 2, expected 0",
    ]
    assert mig_resource_differences({"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 56}, None) == ["nvidia.com/mig-1g.10gb: advertised 0, expected 56"]


def test_a_media_extension_profile_is_awaited_under_the_resource_the_device_plugin_names():
    """k8s-device-plugin v0.20.0 (internal/rm/rm.go, api/config/v1/resources.go anchored patterns): a 1g.10gb+me instance
    counts as nvidia.com/mig-1g.10gb.me, apart from the plain 1g.10gb ones; a node advertising that has the layout."""
    from ansible_collections.onprem.gpu.plugins.filter.mig import mig_resource_differences

    expected = mig_resources([{"mig_enabled": True, "mig_devices": {"1g.10gb+me": 1, "1g.10gb": 6}}] * 2)
    assert expected == {"nvidia.com/gpu": 0, "nvidia.com/mig-1g.10gb": 12, "nvidia.com/mig-1g.10gb.me": 2}
    advertised = {"cpu": "16", "nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "12", "nvidia.com/mig-1g.10gb.me": "2"}
    assert mig_resource_differences(expected, advertised) == []
    assert mig_resource_differences(expected, dict(advertised, **{"nvidia.com/mig-1g.10gb.me": "0"})) == [
        "nvidia.com/mig-1g.10gb.me: advertised 0, expected 2"]


def test_component_labels_pause_all_but_false_and_restore_to_true():
    from ansible_collections.onprem.gpu.plugins.filter.mig import mig_component_labels

    names = ["nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.dcgm", "nvidia.com/gpu.deploy.nvsm"]
    labels = {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dcgm": "false"}
    assert mig_component_labels(labels, names) == {
        "paused": {"nvidia.com/gpu.deploy.device-plugin": "paused-for-mig-change", "nvidia.com/gpu.deploy.dcgm": "false",
                   "nvidia.com/gpu.deploy.nvsm": "paused-for-mig-change"},
        "restored": {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dcgm": "false", "nvidia.com/gpu.deploy.nvsm": "true"},
    }
    # A label left paused by an interrupted run comes back to true.
    assert mig_component_labels({"nvidia.com/gpu.deploy.nvsm": "paused-for-mig-change"}, names[2:])["restored"] == {"nvidia.com/gpu.deploy.nvsm": "true"}


def test_evicted_pods_leave_daemonset_and_mirror_pods():
    from ansible_collections.onprem.gpu.plugins.filter.mig import mig_evicted_pods

    pods = [
        {"metadata": {"namespace": "team-a", "name": "train-0", "ownerReferences": [{"kind": "StatefulSet", "controller": True}]}},
        {"metadata": {"namespace": "gpu-operator", "name": "nvidia-device-plugin-daemonset-x1",
                      "ownerReferences": [{"kind": "DaemonSet", "controller": True}]}},
        {"metadata": {"namespace": "kube-system", "name": "etcd-n1", "annotations": {"kubernetes.io/config.mirror": "abc"}}},
        {"metadata": {"namespace": "default", "name": "solo"}},
    ]
    assert mig_evicted_pods(pods) == ["default/solo", "team-a/train-0"]
