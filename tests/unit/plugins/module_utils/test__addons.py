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
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.onprem.gpu.plugins.module_utils._addons import (
    datacenter,
    datacenter_name_problem,
    gfd_product,
    metric_resource,
    model_short_name,
)
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import (
    LOCAL_PATH_PROVISIONER,
    gpu_operator_values,
    local_path_values,
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


def test_time_sliced_gpus_get_a_flavor_that_selects_the_shared_product_label():
    """With time-slicing (renameByDefault false) GPU feature discovery labels nvidia.com/gpu.product=<product>-SHARED, only
    where a resource has more than one replica (k8s-device-plugin internal/lm/resource.go getProductName, README "Shared
    Access to GPUs"): time-sliced GPUs are their own flavor, selecting that label, beside the pool's exclusive GPUs."""
    described = description(settings={"cluster_addons_time_slicing": {"shared-4": 4, "one": 1}})
    described["settings"]["cluster_addons_teams"][0]["gpus"] = {"h100-training": 8, "h100-training-shared": 32}
    described["settings"]["cluster_addons_teams"][1]["gpus"] = {"h100-inference-shared": 16, "h100-inference-1g.10gb": 20}
    described["nodes"][1]["labels"] = dict(described["nodes"][1]["labels"], **{"nvidia.com/device-plugin.config": "shared-4"})
    described["nodes"][2]["labels"] = dict(described["nodes"][2]["labels"], **{"nvidia.com/device-plugin.config": "shared-4"})
    described["nodes"][0]["labels"] = dict(described["nodes"][0]["labels"], **{"nvidia.com/device-plugin.config": "one"})
    dc = datacenter(described)
    assert dc.problems == []
    assert {name: (flavor.resource, flavor.capacity, flavor.nodes, flavor.node_labels) for name, flavor in dc.flavors.items()} == {
        "h100-training": ("nvidia.com/gpu", 8, ["gpu-01"], {"onprem.gpu/pool": "training", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
        "h100-training-shared": ("nvidia.com/gpu", 32, ["gpu-02"],
                                 {"onprem.gpu/pool": "training", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}),
        "h100-inference-shared": ("nvidia.com/gpu", 16, ["gpu-03"],
                                  {"onprem.gpu/pool": "inference", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}),
        # Only nvidia.com/gpu is time-sliced (device_plugin_config): the MIG instances keep their plain product label.
        "h100-inference-1g.10gb": ("nvidia.com/mig-1g.10gb", 28, ["gpu-03"],
                                   {"onprem.gpu/pool": "inference", "nvidia.com/mig-1g.10gb.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}),
    }
    flavors = yaml.safe_load_all(tree(dc)["kueue/resource-flavors.yaml"])
    assert {flavor["metadata"]["name"]: flavor["spec"].get("nodeLabels") for flavor in flavors}["h100-inference-shared"] == {
        "onprem.gpu/pool": "inference", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}


def test_a_media_extension_profile_renders_the_names_the_device_plugin_uses():
    """k8s-device-plugin v0.20.0: the resource of 1g.10gb+me is nvidia.com/mig-1g.10gb.me (internal/rm/rm.go), and GPU feature
    discovery labels nvidia.com/mig-1g.10gb.me.product=<product>-MIG-1g.10gb.me (internal/lm/mig-strategy.go, resource.go). A
    '+' is valid in none of a resource, a label or a Kueue flavor name (a DNS subdomain)."""
    layouts = {"media": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb+me": 1, "1g.10gb": 6}}]}
    described = description(nodes=[dict(INFERENCE, name="gpu-03", model=H100, gpu_count=8, mig_layout="media", mig_layouts=layouts)],
                            settings=teams({"name": "vision", "namespaces": ["vision"], "gpus": {"h100-inference-1g.10gb.me": 8}}))
    dc = datacenter(described)
    assert dc.problems == []
    flavor = dc.flavors["h100-inference-1g.10gb.me"]
    assert (flavor.resource, flavor.capacity, flavor.profile) == ("nvidia.com/mig-1g.10gb.me", 8, "1g.10gb+me")
    assert flavor.node_labels == {"onprem.gpu/pool": "inference", "nvidia.com/mig-1g.10gb.me.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"}
    assert dc.flavors["h100-inference-1g.10gb"].capacity == 48
    files = tree(dc)
    assert not any("+me" in text for text in files.values())
    subdomain = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    assert all(subdomain.match(document["metadata"]["name"]) for document in yaml.safe_load_all(files["kueue/resource-flavors.yaml"]))
    queue = yaml.safe_load(files["kueue/cluster-queues.yaml"])
    groups = {tuple(group["coveredResources"]): group["flavors"] for group in queue["spec"]["resourceGroups"]}
    assert groups[("nvidia.com/mig-1g.10gb.me",)] == [
        {"name": "h100-inference-1g.10gb.me", "resources": [{"name": "nvidia.com/mig-1g.10gb.me", "nominalQuota": 8}]}]
    assert team_quota(dc, dc.teams[0]) == {
        "requests.nvidia.com/gpu": "0", "requests.nvidia.com/mig-1g.10gb": "48", "requests.nvidia.com/mig-1g.10gb.me": "8"}
    assert 'resource: nvidia_com_mig_1g_10gb_me' in files["monitoring/gpu-alerts.yaml"]


def test_gfd_product_sanitises_as_gpu_feature_discovery_does():
    """internal/lm/resource.go sanitise: characters other than letters, digits, '-', '_', '.' and spaces go, spaces become '-'."""
    assert gfd_product("NVIDIA H100 80GB HBM3") == "NVIDIA-H100-80GB-HBM3"
    assert gfd_product("NVIDIA RTX PRO 6000 Blackwell (Server)", "MIG", "1g.24gb.me") == "NVIDIA-RTX-PRO-6000-Blackwell-Server-MIG-1g.24gb.me"
    assert gfd_product("NVIDIA A100-SXM4-80GB", shared=True) == "NVIDIA-A100-SXM4-80GB-SHARED"


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
        "A namespace of team a must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, "
        "at most 63 characters, e.g. llm), not 'Team_A'.",
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


@pytest.mark.parametrize("name", [".", "..", "dc1\n", "DC1", "dc_1", "-dc1", "", 1])
def test_a_datacenter_name_that_cannot_name_its_directory_is_refused(name):
    assert datacenter_name_problem(name, ["gpu-01", "gpu-02"]) == (
        f"The inventory variable datacenter is {name!r} on gpu-01 and 1 other hosts, which is not a DNS label (lower-case letters, digits "
        "and '-', at most 63, starting and ending with a letter or digit), so it cannot name the directory clusters/<datacenter>/.")


def test_a_dns_label_is_a_datacenter_name():
    assert datacenter_name_problem("dc-1", ["gpu-01"]) is None


def test_a_chart_version_with_a_trailing_newline_is_not_pinned():
    settings = dict(description()["settings"])
    settings["cluster_addons_charts"] = {"kueue": dict(settings["cluster_addons_charts"]["kueue"], version="0.19.2\n")}
    assert datacenter(description(settings=settings)).problems == [
        "The kueue chart version '0.19.2\\n' is not pinned: give an exact version such as 1.2.3 (no range, no 'latest', no branch) in cluster_addons_charts."]


def test_local_path_provisioner_runs_under_the_storage_class_provisioner_name():
    dc = datacenter(description())
    assert local_path_values(dc)["storageClass"]["provisionerName"] == LOCAL_PATH_PROVISIONER
    assert yaml.safe_load(tree(dc)["storage/storageclass.yaml"])["provisioner"] == LOCAL_PATH_PROVISIONER


def team(**fields):
    """One team of the datacenter, llm with 8 training GPUs, with ``fields`` changed."""
    return teams(dict({"name": "llm", "group": "llm-people", "namespaces": ["llm"], "cpu": 64, "memory": "512Gi", "gpus": {"h100-training": 8}},
                      **fields))


NINE_1G = {"nine": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 9}}]}
WHOLE_NUMBER = "must be a whole number of 0 or more, not {}."
QUANTITY = "must be a Kubernetes quantity of 0 or more, a number with an optional unit (e.g. 64, 1.5, 500m, 512Gi), not {}."
DNS = "must be a DNS label (lower-case letters, digits and '-', starting and ending with a letter or digit, at most 63 characters, e.g. {}), not {}."
PLATFORM = ("belongs to the platform (Kubernetes, Argo CD, monitoring or a chart the render deploys there): a team namespace gets the "
            "team's RoleBindings and default-deny NetworkPolicy, so give the team a namespace of its own.")

# #30: inputs the render took and turned into something else (2.7 GPUs counted as 2, a second team llm replacing the first's
# file, nine 1g.10gb counted on a GPU that holds seven), or that it met with a raw exception ('str' object has no attribute
# 'get', invalid literal for int()). Each is one sentence now, before anything is worked out.
INPUT_REFUSALS = [
    pytest.param({"settings": team(gpus={"h100-training": -1})}, "The quota of team llm in h100-training " + WHOLE_NUMBER.format("-1"),
                 id="negative-gpu-quota"),
    pytest.param({"settings": team(gpus={"h100-training": 2.7})}, "The quota of team llm in h100-training " + WHOLE_NUMBER.format("2.7"),
                 id="fractional-gpu-quota"),
    pytest.param({"settings": team(gpus={"h100-training": "eight"})},
                 "The quota of team llm in h100-training " + WHOLE_NUMBER.format("'eight'"), id="non-numeric-gpu-quota"),
    pytest.param({"settings": team(cpu="lots")}, "The cpu quota of team llm " + QUANTITY.format("'lots'"), id="non-numeric-cpu"),
    pytest.param({"settings": team(memory="-4Ti")}, "The memory quota of team llm " + QUANTITY.format("'-4Ti'"), id="negative-memory"),
    pytest.param({"settings": team(borrowing_limits={"h100-training": -2})},
                 "The borrowing limit of team llm in h100-training " + WHOLE_NUMBER.format("-2"), id="negative-borrowing-limit"),
    pytest.param({"settings": team(lending_limits={"h100-training": 12})},
                 "The lending limit of team llm in h100-training is 12, above its nominal quota there (8): a team can lend at most what it has.",
                 id="lending-above-nominal"),
    pytest.param({"settings": team(lending_limits={"memory": "1Ti"})},
                 "The lending limit of team llm in memory is 1Ti, above its nominal quota there (512Gi): a team can lend at most what it has.",
                 id="lending-memory-above-nominal"),
    pytest.param({"settings": dict(teams({"name": "llm", "namespaces": ["llm"]}, {"name": "llm", "namespaces": ["llm-two"]}))},
                 "Teams 1 and 2 of cluster_addons_teams are both named llm: the second would replace the first's teams/llm.yaml and its "
                 "namespaces would be pruned; give each team its own name.", id="two-teams-one-name"),
    pytest.param({"settings": team(name="llm\n")}, "The name of team 1 in cluster_addons_teams " + DNS.format("llm", "'llm\\n'"),
                 id="team-name-with-a-trailing-newline"),
    pytest.param({"settings": team(namespaces=["llm\n"])}, "A namespace of team llm " + DNS.format("llm", "'llm\\n'"),
                 id="namespace-with-a-trailing-newline"),
    pytest.param({"settings": team(namespaces=[7])}, "A namespace of team llm " + DNS.format("llm", "7"), id="namespace-a-number"),
    pytest.param({"rails": [{"name": "rail0\n", "interface": "ens1np0", "subnet": "10.99.0.0/24"}]},
                 "The name of rail 0 " + DNS.format("rail0", "'rail0\\n'") + " It names the resource rdma/<rail> and the rail's "
                 "NetworkAttachmentDefinition.", id="rail-name-with-a-trailing-newline"),
    pytest.param({"settings": {"cluster_addons_cohort": "gpu\n"}},
                 "cluster_addons_cohort must be a DNS name (lower-case letters, digits, '-' and '.', each part starting and ending with a "
                 "letter or digit, at most 253 characters, e.g. gpu), not 'gpu\\n'.", id="cohort-with-a-trailing-newline"),
    pytest.param({"rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"},
                            {"name": "rail0", "interface": "ens2np0", "subnet": "10.99.1.0/24"}]},
                 "Rails 0 and 1 are both named rail0: each rail needs its own name (it names the resource rdma/<rail> and the rail's "
                 "NetworkAttachmentDefinition).", id="two-rails-one-name"),
    pytest.param({"rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "not-a-cidr"}]},
                 "The subnet of rail rail0 must be a network in CIDR notation such as 10.20.0.0/16, not 'not-a-cidr'.", id="rail-subnet-not-a-cidr"),
    pytest.param({"kube_pod_cidr": "10.96.0.0/12", "rails": [{"name": "rail0", "interface": "ens1np0", "subnet": "10.99.0.0/24"}]},
                 "kube_pod_cidr 10.96.0.0/12 overlaps the subnet 10.99.0.0/24 of rail rail0: pods and services would take addresses of the "
                 "rails; give the rails subnets outside the cluster's pod and service networks.", id="pod-cidr-over-a-rail"),
    pytest.param({"settings": {"cluster_addons_team_egress_cidrs": ["10.20.0.0/16", "not-a-cidr"]}},
                 "Entry 2 of cluster_addons_team_egress_cidrs must be a network in CIDR notation such as 10.20.0.0/16, not 'not-a-cidr'.",
                 id="egress-not-a-cidr"),
    pytest.param({"settings": {"cluster_addons_team_egress_cidrs": ["10.20.0.1/16"]}},
                 "Entry 1 of cluster_addons_team_egress_cidrs 10.20.0.1/16 has host bits set: write the network, 10.20.0.0/16.",
                 id="egress-host-bits"),
    # Raw exceptions before.
    pytest.param({"settings": {"cluster_addons_teams": {"llm": {"namespaces": ["llm"]}}}},
                 "cluster_addons_teams must be a list of teams, each a mapping (- name: llm, namespaces: [llm], gpus: {...}), "
                 "not dict {'llm': {'namespaces': ['llm']}}.", id="teams-a-mapping"),
    pytest.param({"settings": {"cluster_addons_teams": ["llm"]}},
                 "Entry 1 of cluster_addons_teams must be a mapping with name, group, namespaces, cpu, memory and gpus, not str 'llm'.",
                 id="team-a-string"),
    pytest.param({"settings": team(gpus=["h100-training"])},
                 "The gpus of team llm must be a mapping of flavor names to amounts, e.g. {h100-training: 16}, not list ['h100-training'].",
                 id="gpus-a-list"),
    pytest.param({"nodes": [dict(TRAINING, name="gpu-01", model=H100, gpu_count="eight")], "settings": teams()},
                 "node_gpu_count of gpu-01 " + WHOLE_NUMBER.format("'eight'"), id="gpu-count-eight"),
    pytest.param({"settings": {"cluster_addons_time_slicing": {"shared-4": "many"}}},
                 "The replicas of time-slicing configuration shared-4 must be a whole number of 1 or more, not 'many'.", id="replicas-many"),
    pytest.param({"nodes": [dict(TRAINING, name="gpu-01", model=H100, gpu_count=8, labels=["onprem.gpu/pool=training"])], "settings": teams()},
                 "kube_node_labels of gpu-01 must be a mapping of label names to values, e.g. {onprem.gpu/pool: training}, not list "
                 "['onprem.gpu/pool=training'].", id="labels-a-list"),
    # Pod Security and RBAC (#30 item 6).
    pytest.param({"settings": team(group="system:authenticated")},
                 "The group of team llm is system:authenticated, a Kubernetes system group, which holds users, nodes or service accounts "
                 "beyond the team: bind the team's own group.", id="system-group"),
    pytest.param({"settings": team(viewer_group="system:serviceaccounts")},
                 "The viewer_group of team llm is system:serviceaccounts, a Kubernetes system group, which holds users, nodes or service "
                 "accounts beyond the team: bind the team's own group.", id="system-viewer-group"),
    pytest.param({"settings": team(pod_security="root")},
                 "The pod_security of team llm must be a Pod Security Standards level, privileged, baseline, restricted, not 'root'.",
                 id="unknown-pod-security-level"),
    pytest.param({"settings": {"cluster_addons_pod_security": "Baseline"}},
                 "cluster_addons_pod_security must be a Pod Security Standards level, privileged, baseline, restricted, not 'Baseline'.",
                 id="unknown-default-pod-security-level"),
] + [
    pytest.param({"settings": team(namespaces=[namespace])}, f"Namespace {namespace} of team llm {PLATFORM}", id=f"platform-namespace-{namespace}")
    # Kubernetes', the charts' (nvidia-network-operator is the Network Operator's), Argo CD's and Prometheus's.
    for namespace in ("kube-system", "kube-anything", "default", "gpu-operator", "kueue-system", "nvidia-network-operator",
                      "local-path-storage", "argocd", "monitoring")
]


@pytest.mark.parametrize("changes, sentence", INPUT_REFUSALS)
def test_input_refusals(changes, sentence):
    assert datacenter(description(**changes)).problems == [sentence]


SEMANTIC_REFUSALS = [
    pytest.param({"nodes": [dict(INFERENCE, name="gpu-03", model=H100, gpu_count=2, mig_layout="nine", mig_layouts=NINE_1G)], "settings": teams()},
                 "MIG layout 'nine' of node gpu-03 cannot be applied to GPU 0, an NVIDIA H100 80GB HBM3: it asks for 9 of 1g.10gb, but an "
                 "NVIDIA H100 80GB HBM3 holds at most 7.", id="nine-1g-on-one-gpu"),
    pytest.param({"settings": dict(team(gpus={"h100-training": 10**30}), cluster_addons_overcommit=True)},
                 "The nominal quota of team llm in h100-training is 1000000000000000000000000000000 nvidia.com/gpu, more than dc1 has (16): "
                 "cluster_addons_overcommit lets the teams' quotas add up to more than the datacenter has, not one team's; give at most 16.",
                 id="absurd-quota-with-overcommit"),
    pytest.param({"settings": team(borrowing_limits={"h200-training": 4})},
                 "Team llm has a borrowing limit in h200-training, which is neither cpu, memory nor a flavor with nodes in dc1 (flavors with "
                 "nodes: h100-inference, h100-inference-1g.10gb, h100-training).", id="limit-in-an-unknown-flavor"),
]


@pytest.mark.parametrize("changes, sentence", SEMANTIC_REFUSALS)
def test_semantic_refusals(changes, sentence):
    assert datacenter(description(**changes)).problems == [sentence]


def test_quotas_in_quantities_and_limits_up_to_the_nominal_quota_pass():
    fine = team(cpu="1.5", memory="4Ti", lending_limits={"h100-training": 8, "cpu": 1, "memory": "2Ti"}, borrowing_limits={"cpu": 0})
    assert datacenter(description(settings=fine)).problems == []


def objects(dc, path):
    return list(yaml.safe_load_all(tree(dc)[path]))


def test_team_namespaces_enforce_pod_security_pinned_to_the_cluster_minor():
    """Without Pod Security Admission labels a tenant with edit could start a privileged or hostPath pod: root on the GPU node."""
    described = description(kube_version="1.35.4")
    described["settings"]["cluster_addons_teams"][1]["pod_security"] = "restricted"
    dc = datacenter(described)
    assert dc.problems == []
    llm = next(document for document in objects(dc, "teams/llm.yaml") if document["kind"] == "Namespace")
    assert llm["metadata"]["labels"] == {
        "onprem.gpu/team": "llm",
        "pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/enforce-version": "v1.35",
        "pod-security.kubernetes.io/audit": "baseline", "pod-security.kubernetes.io/audit-version": "v1.35",
        "pod-security.kubernetes.io/warn": "baseline", "pod-security.kubernetes.io/warn-version": "v1.35",
    }
    vision = [document for document in objects(dc, "teams/vision.yaml") if document["kind"] == "Namespace"]
    assert [namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] for namespace in vision] == ["restricted", "restricted"]
    unknown = datacenter(description(settings={"cluster_addons_pod_security": "privileged"}))
    namespace = next(document for document in objects(unknown, "teams/llm.yaml") if document["kind"] == "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "privileged"
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce-version"] == "latest"


def test_a_team_cannot_write_network_policies():
    """The team's group gets edit's rights but NetworkPolicies: it could otherwise delete default-deny or add an allow-all."""
    dc = datacenter(description())
    (role,) = objects(dc, "rbac/team-edit.yaml")
    assert (role["kind"], role["metadata"]["name"]) == ("ClusterRole", "onprem-gpu-team-edit")
    written = {(group, resource) for rule in role["rules"] if "create" in rule["verbs"] for group in rule["apiGroups"] for resource in rule["resources"]}
    assert {("", "pods"), ("batch", "jobs"), ("apps", "deployments"), ("", "secrets"), ("", "configmaps")} <= written
    assert not any(resource == "networkpolicies" for rule in role["rules"] for resource in rule["resources"])
    bindings = {document["metadata"]["name"]: document for document in objects(dc, "teams/vision.yaml")
                if document["kind"] == "RoleBinding" and document["metadata"]["namespace"] == "vision"}
    assert {name: (binding["roleRef"]["name"], [subject["name"] for subject in binding["subjects"]]) for name, binding in bindings.items()} == {
        "team-member": ("onprem-gpu-team-edit", ["vision-people"]), "team-view": ("view", ["vision-people"])}
    assert "NetworkPolicy" in {document["kind"] for document in objects(dc, "teams/vision.yaml")}
