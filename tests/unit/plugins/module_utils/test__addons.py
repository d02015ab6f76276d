# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The platform of a datacenter worked out from its description: flavors, capacities, rail ranges, and refusals.

Each refusal the cluster_addons role makes before rendering is one case here, written as data: a change to a small
H100 datacenter and the one sentence it must produce.
"""

from __future__ import annotations

import copy
import ipaddress
from pathlib import Path

import pytest
import yaml

from ansible_collections.onprem.gpu.plugins.module_utils._addons import datacenter, metric_resource, model_short_name
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import (
    gpu_operator_values,
    network_attachment_config,
    team_quota,
    tree,
)

DEFAULTS = yaml.safe_load((Path(__file__).resolve().parents[4] / "roles/cluster_addons/defaults/main.yml").read_text())
H100 = "NVIDIA H100 80GB HBM3"
TRAINING = {"labels": {"onprem.gpu/pool": "training"}, "taints": [{"key": "onprem.gpu/pool", "value": "training", "effect": "NoSchedule"}]}
INFERENCE = {"labels": {"onprem.gpu/pool": "inference"}, "taints": [{"key": "onprem.gpu/pool", "value": "inference", "effect": "NoSchedule"}]}
LAYOUTS = {"half": [
    {"devices": [0, 1, 2, 3], "mig-enabled": False},
    {"devices": [4, 5, 6, 7], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
]}


def description(**changes):
    """Two H100 training nodes, one inference node half in MIG, eight RoCE rails, two teams."""
    settings = {key: copy.deepcopy(value) for key, value in DEFAULTS.items() if key.startswith("cluster_addons_") or key.startswith("mig_")}
    settings["cluster_addons_teams"] = [
        {"name": "llm", "group": "llm-people", "namespaces": ["llm"], "cpu": 512, "memory": "4Ti", "gpus": {"h100-training": 16}},
        {"name": "vision", "group": "vision-people", "namespaces": ["vision", "vision-dev"], "cpu": 64, "memory": "512Gi",
         "gpus": {"h100-inference": 4, "h100-inference-1g.10gb": 20}},
    ]
    settings.update(changes.pop("settings", {}))
    nodes = [
        dict(TRAINING, name="gpu-01", model=H100, gpu_count=8, local_path_dir="/raid/local-path"),
        dict(TRAINING, name="gpu-02", model=H100, gpu_count=8, local_path_dir="/raid/local-path"),
        dict(INFERENCE, name="gpu-03", model=H100, gpu_count=8, local_path_dir="/raid/local-path", mig_layout="half", mig_layouts=LAYOUTS),
    ]
    result = {
        "name": "dc1", "settings": settings, "nodes": nodes,
        "rails": [{"name": f"rail{index}", "interface": f"ens{index + 1}np0", "subnet": f"10.99.{index}.0/24"} for index in range(8)],
        "rdma_link_layer": "ethernet", "rdma_address_first": 10, "rdma_places": [1, 2, 3],
    }
    result.update(changes)
    return result


def teams(*entries):
    return {"cluster_addons_teams": list(entries)}


def test_flavors_come_from_models_pools_and_mig_layouts():
    dc = datacenter(description())
    assert dc.problems == []
    assert {name: (flavor.resource, flavor.capacity, flavor.nodes) for name, flavor in dc.flavors.items()} == {
        "h100-training": ("nvidia.com/gpu", 16, ["gpu-01", "gpu-02"]),
        "h100-inference": ("nvidia.com/gpu", 4, ["gpu-03"]),
        "h100-inference-1g.10gb": ("nvidia.com/mig-1g.10gb", 28, ["gpu-03"]),
    }
    assert dc.flavors["h100-inference-1g.10gb"].node_labels == {
        "onprem.gpu/pool": "inference", "nvidia.com/mig-1g.10gb.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}
    assert dc.flavors["h100-training"].node_labels == {"onprem.gpu/pool": "training", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}


def test_time_slicing_multiplies_a_nodes_gpus():
    described = description(settings={"cluster_addons_time_slicing": {"shared-4": 4}})
    described["nodes"][2]["labels"] = dict(described["nodes"][2]["labels"], **{"nvidia.com/device-plugin.config": "shared-4"})
    assert datacenter(described).flavors["h100-inference"].capacity == 16


def test_pods_get_the_upper_half_of_each_rail_and_never_a_host_address():
    dc = datacenter(description())
    rail = dc.rails[0]
    assert str(rail.pod_range) == "10.99.0.128/25"
    assert [str(address) for address in rail.host_addresses] == ["10.99.0.11", "10.99.0.12", "10.99.0.13"]
    ipam = network_attachment_config(dc, rail)["ipam"]
    assert (ipam["range"], ipam["range_start"], ipam["range_end"]) == ("10.99.0.0/24", "10.99.0.128", "10.99.0.254")
    first, last = ipaddress.ip_address(ipam["range_start"]), ipaddress.ip_address(ipam["range_end"])
    assert not any(first <= address <= last for address in rail.host_addresses)


def test_infiniband_rails_get_a_resource_but_no_address_range():
    described = description(rdma_link_layer="infiniband", rails=[{"name": "rail0", "interface": "ibp12s0"}])
    dc = datacenter(described)
    assert dc.problems == [] and dc.rails[0].pod_range is None
    files = tree(dc)
    assert "apps/whereabouts.yaml" not in files and "NetworkAttachmentDefinition" not in files["teams/llm.yaml"]
    assert "rdma/nic-cluster-policy.yaml" in files


def test_a_team_quota_reaches_what_it_may_borrow():
    described = description()
    described["settings"]["cluster_addons_teams"][1]["borrowing_limits"] = {"h100-training": 4}
    dc = datacenter(described)
    # vision: 4 own whole GPUs, 4 borrowed training GPUs; 20 MIG instances and no limit on borrowing the other 8.
    assert team_quota(dc, dc.teams[1]) == {"requests.nvidia.com/gpu": "8", "requests.nvidia.com/mig-1g.10gb": "28"}


def test_gpu_operator_values_leave_driver_toolkit_and_mig_to_the_collection():
    values = gpu_operator_values(datacenter(description()))
    assert values["driver"] == {"enabled": False} and values["toolkit"] == {"enabled": False}
    assert values["mig"] == {"strategy": "mixed"} and values["migManager"] == {"enabled": False}
    csv = values["dcgmExporter"]["config"]["data"].splitlines()
    assert "DCGM_FI_PROF_SM_ACTIVE, gauge, The ratio of cycles an SM has at least 1 warp assigned." in csv
    assert all(line.count(",") == 2 for line in csv)  # dcgm-exporter's format: field, type, help
    operator_owned = gpu_operator_values(datacenter(description(settings={"mig_owner": "gpu_operator"})))
    assert operator_owned["migManager"] == {"enabled": True, "config": {"default": ""}}
    # The site's layouts, as the mig-manager's ConfigMap: its layout names exist for nvidia.com/mig.config.
    layouts = {"all-1g.10gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]}
    operator_owned = gpu_operator_values(datacenter(description(settings={"mig_owner": "gpu_operator", "mig_layouts": layouts})))
    config = operator_owned["migManager"]["config"]
    assert (config["default"], config["create"], config["name"]) == ("", True, "onprem-gpu-mig-layouts")
    assert yaml.safe_load(config["data"]["config.yaml"]) == {"version": "v1", "mig-configs": layouts}


def test_names_as_other_tools_write_them():
    assert model_short_name("NVIDIA H100 80GB HBM3") == "h100"
    assert model_short_name("NVIDIA RTX PRO 6000 Blackwell") == "rtx-pro-6000-blackwell"
    assert metric_resource("nvidia.com/mig-1g.10gb") == "nvidia_com_mig_1g_10gb"


def test_overcommit_allows_quotas_above_capacity():
    over = teams({"name": "a", "namespaces": ["a"], "gpus": {"h100-training": 12}}, {"name": "b", "namespaces": ["b"], "gpus": {"h100-training": 12}})
    assert datacenter(description(settings=dict(over, cluster_addons_overcommit=True))).problems == []


REFUSALS = [
    pytest.param(
        {"settings": teams({"name": "a", "namespaces": ["a"], "gpus": {"h100-training": 12}},
                           {"name": "b", "namespaces": ["b"], "gpus": {"h100-training": 8}})},
        "The teams' nominal quotas in h100-training add up to 20 nvidia.com/gpu but dc1 has 16 (gpu-01: 8 GPUs, gpu-02: 8 GPUs): "
        "lower them or set cluster_addons_overcommit.",
        id="gpu-quotas-above-capacity",
    ),
    pytest.param(
        {"settings": teams({"name": "a", "namespaces": ["a"], "gpus": {"h100-inference-1g.10gb": 20}},
                           {"name": "b", "namespaces": ["b"], "gpus": {"h100-inference-1g.10gb": 10}})},
        "The teams' nominal quotas in h100-inference-1g.10gb add up to 30 nvidia.com/mig-1g.10gb but dc1 has 28 "
        "(gpu-03: 28 instances in layout half): lower them or set cluster_addons_overcommit.",
        id="mig-quotas-above-capacity",
    ),
    pytest.param(
        {"settings": teams({"name": "a", "namespaces": ["a"], "gpus": {"h100-inference-3g.40gb": 2}})},
        "Team a has a quota in h100-inference-3g.40gb, but no node's MIG layout in dc1 provides profile 3g.40gb (layouts provide 1g.10gb).",
        id="mig-profile-no-layout-provides",
    ),
    pytest.param(
        {"settings": teams({"name": "a", "namespaces": ["a"], "gpus": {"h200-training": 2}})},
        "Team a has a quota in flavor h200-training, which has no nodes in dc1 (flavors with nodes: h100-inference, "
        "h100-inference-1g.10gb, h100-training).",
        id="flavor-without-nodes",
    ),
    pytest.param(
        {"settings": {"cluster_addons_rdma_pod_ranges": {"rail0": "10.99.0.0/26"}}},
        "The pod range 10.99.0.0/26 of rail rail0 holds host rail address 10.99.0.11 (rdma_address_first + a host's place): "
        "give the pods another block of 10.99.0.0/24 in cluster_addons_rdma_pod_ranges or lower the hosts' rdma_address_index.",
        id="nad-range-holds-host-addresses",
    ),
    pytest.param(
        {"rdma_places": [1, 2, 200], "rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"}]},
        "The pod range 10.99.0.128/25 of rail rail0 holds host rail address 10.99.0.210 (rdma_address_first + a host's place): "
        "give the pods another block of 10.99.0.0/24 in cluster_addons_rdma_pod_ranges or lower the hosts' rdma_address_index.",
        id="host-place-in-the-pods-half",
    ),
    pytest.param(
        {"rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"}, {"name": "rail1", "interface": "ens2np0", "subnet": "10.99.1.0/24"}],
         "settings": {"cluster_addons_rdma_pod_ranges": {"rail1": "10.99.0.64/27"}}},
        "The pod range 10.99.0.64/27 of rail rail1 lies outside the rail's subnet 10.99.1.0/24.",
        id="nad-range-outside-its-rail",
    ),
    pytest.param(
        {"rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/16"}, {"name": "rail1", "interface": "ens2np0", "subnet": "10.99.128.0/24"}]},
        "The pod ranges of rails rail0 (10.99.128.0/17) and rail1 (10.99.128.128/25) overlap.",
        id="nad-ranges-overlap-each-other",
    ),
    pytest.param(
        {"settings": teams({"name": "a", "namespaces": ["Team_A"], "gpus": {}})},
        "Namespace 'Team_A' of team a is not a DNS label (lower-case letters, digits and '-', at most 63).",
        id="namespace-not-a-dns-label",
    ),
    pytest.param(
        {"settings": teams({"name": "a", "namespaces": ["shared"]}, {"name": "b", "namespaces": ["b", "shared"]})},
        "Teams a and b both claim namespace shared.",
        id="two-teams-one-namespace",
    ),
    pytest.param(
        {"settings": {"cluster_addons_charts": dict(DEFAULTS["cluster_addons_charts"],
                                                    kueue=dict(DEFAULTS["cluster_addons_charts"]["kueue"], version="^0.19"))}},
        "The kueue chart version '^0.19' is not pinned: give an exact version such as 1.2.3 (no range, no 'latest', no branch) in cluster_addons_charts.",
        id="chart-version-not-pinned",
    ),
    pytest.param(
        {"settings": {"mig_owner": "operator"}},
        "mig_owner must be collection or gpu_operator, not 'operator'.",
        id="unknown-mig-owner",
    ),
    pytest.param(
        {"rails": [{"name": "rail0", "pci": "0000:1a:00.0", "subnet": "10.99.0.0/24"}]},
        "Rail rail0 is given by PCI address (0000:1a:00.0) and cluster_addons_rdma_netdevs names no netdev for it (entry 0): "
        "pods attach to a rail through its netdev name.",
        id="rail-without-netdev",
    ),
    pytest.param(
        {"nodes": [dict(INFERENCE, name="gpu-03", model=H100, gpu_count=8, mig_layout="none-such", mig_layouts=LAYOUTS)],
         "settings": teams()},
        "Node gpu-03 has mig_layout 'none-such', which mig_layouts does not define (it defines half).",
        id="unknown-mig-layout",
    ),
    pytest.param(
        {"nodes": [dict(INFERENCE, name="gpu-03", model=H100, gpu_count=8, mig_layout="bad",
                        mig_layouts={"bad": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]})],
         "settings": teams()},
        "MIG layout 'bad' of node gpu-03 names profile 1g.5gb that an NVIDIA H100 80GB HBM3 does not offer "
        "(it offers 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb).",
        id="mig-profile-the-model-lacks",
    ),
]


@pytest.mark.parametrize("changes, sentence", REFUSALS)
def test_refusals(changes, sentence):
    assert datacenter(description(**changes)).problems == [sentence]
