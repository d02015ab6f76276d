# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU platform of one datacenter, worked out from the inventory: flavors, capacities, rail ranges, checks.

``datacenter(description)`` turns the plain description the ``cluster_addons_plan`` filter gathers from the
inventory (nodes, rails, teams, settings) into a ``Datacenter``: ResourceFlavors derived from the GPU nodes (one per
GPU model and pool for whole GPUs, one per GPU model, pool and MIG profile for MIG instances), their capacities, the
pod address range of every RDMA rail, and ``problems``: one sentence per reason to refuse rendering. Nothing here
renders Kubernetes objects (that is ``_addons_render``) or imports Ansible.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from ansible_collections.onprem.gpu.plugins.module_utils._addons_inputs import QUOTA_RESOURCES, input_problems, pod_security_version
from ansible_collections.onprem.gpu.plugins.module_utils._gpu_models import model_info
from ansible_collections.onprem.gpu.plugins.module_utils._mig_inventory import inventory_layout
from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import is_profile_name, mig_device_name, mig_resource

POOL_LABEL = "onprem.gpu/pool"
TEAM_LABEL = "onprem.gpu/team"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"
GPU_RESOURCE = "nvidia.com/gpu"

# Both are used with fullmatch: a $-anchored match also takes a value with a trailing newline ("dc1\n").
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
DNS_LABEL_WORDS = "lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit"
# An exact chart version: no range (^1.2, ~1.2, >=1, 1.x, *), no tag such as latest or a branch name.
_PINNED_VERSION = re.compile(r"v?[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?")
_GIT_BRANCHES = {"HEAD", "main", "master", "trunk", "develop"}


def model_short_name(model):
    """The short name of a GPU model in flavor names (h100-training reads better than nvidia-h100-80gb-hbm3-training): the
    catalogue's short_name for a catalogued model (h100 for NVIDIA H100 80GB HBM3), else a slug of the name."""
    info = model_info(model)
    if info is not None:
        return info["short_name"]
    return re.sub(r"[^a-z0-9]+", "-", re.sub(r"^nvidia\s+", "", model.lower())).strip("-")


def datacenter_name_problem(name, hosts):
    """One sentence when ``name`` (the inventory's datacenter, set on ``hosts``) cannot name clusters/<name>/ and the
    cluster's objects, else None: a name such as . or .. would put the tree over other datacenters' and prune theirs."""
    if isinstance(name, str) and _DNS_LABEL.fullmatch(name):
        return None
    where = hosts[0] + (f" and {len(hosts) - 1} other hosts" if len(hosts) > 1 else "")
    return (f"The inventory variable datacenter is {name!r} on {where}, which is not a DNS label ({DNS_LABEL_WORDS}), "
            f"so it cannot name the directory clusters/<datacenter>/.")


def gfd_product(model, *parts, shared=False):
    """The value GPU feature discovery gives a resource's ``.product`` label: NVIDIA-H100-80GB-HBM3, with ``parts``
    (MIG, 1g.10gb.me) and, for a resource time-sliced into more than one replica under its own name, SHARED appended.

    k8s-device-plugin ``internal/lm/resource.go`` ``getProductName``: each part sanitised (characters other than letters,
    digits, ``-_.`` and spaces dropped, runs of spaces a dash), then joined with dashes; SHARED when replicas > 1 and the
    resource is not renamed (``renameByDefault: false``, as ``device_plugin_config`` renders it).
    """
    sanitised = ["-".join(re.sub(r"[^A-Za-z0-9_. -]", "", part).split()) for part in (model, *parts) if part]
    return "-".join(sanitised + (["SHARED"] if shared else []))


def metric_resource(resource):
    """A resource name as kube-state-metrics writes it in its resource label: nvidia_com_mig_1g_10gb."""
    return re.sub(r"[^A-Za-z0-9_]", "_", resource)


@dataclass
class Node:
    """One GPU node as the inventory declares it."""

    name: str
    model: str
    gpu_count: int
    pool: str
    labels: dict
    taints: list
    mig_layout: str | None
    local_path_dir: str | None
    whole_gpus: int = 0
    mig_devices: dict = field(default_factory=dict)
    replicas: int = 1


@dataclass
class Flavor:
    """A Kueue ResourceFlavor derived from the nodes: whole GPUs of a model in a pool, or one MIG profile of them."""

    name: str
    model: str
    pool: str
    resource: str
    profile: str | None
    node_labels: dict
    taints: list
    nodes: list = field(default_factory=list)
    capacity: int = 0


@dataclass
class Rail:
    """An RDMA rail of the datacenter's GPU nodes, and the range its pods take addresses from."""

    index: int
    name: str
    netdev: str | None
    link_layer: str
    subnet: object = None
    pod_range: object = None
    host_addresses: list = field(default_factory=list)
    gateway: str | None = None


@dataclass
class Datacenter:
    name: str
    settings: dict
    nodes: list
    flavors: dict
    rails: list
    teams: list
    problems: list
    pod_security_version: str = "latest"


def datacenter(description):
    """Work out the platform of one datacenter from ``description`` (see the cluster_addons_plan filter); an input of the
    wrong shape or value stops here, with its sentences as the only problems."""
    settings = description["settings"]
    problems = input_problems(description)
    if problems:
        return Datacenter(description["name"], settings, [], {}, [], [], problems)
    nodes = [_node(record, settings, problems) for record in sorted(description["nodes"], key=lambda record: record["name"])]
    flavors = _flavors(nodes)
    rails = _rails(description, settings, problems)
    teams = settings.get("cluster_addons_teams") or []
    if (settings.get("mig_owner") or "collection") not in ("collection", "gpu_operator"):
        problems.append(f"mig_owner must be collection or gpu_operator, not {settings['mig_owner']!r}.")
    problems.extend(_chart_problems(settings))
    problems.extend(_team_problems(description["name"], teams, flavors, nodes, settings))
    return Datacenter(description["name"], settings, nodes, flavors, rails, teams, problems, pod_security_version(description.get("kube_version")))


def _node(record, settings, problems):
    labels = dict(record.get("labels") or {})
    node = Node(
        name=record["name"], model=record["model"], gpu_count=int(record["gpu_count"]), pool=labels.get(POOL_LABEL, "default"),
        labels=labels, taints=list(record.get("taints") or []), mig_layout=record.get("mig_layout") or None,
        local_path_dir=record.get("local_path_dir"),
    )
    wanted = {}
    if node.mig_layout:
        wanted = _mig_wanted(node, record.get("mig_layouts") or settings.get("mig_layouts") or {}, problems)
    for index in range(node.gpu_count):
        gpu = wanted.get(index)
        if gpu is not None and gpu.mig_enabled:
            for profile, count in gpu.mig_devices.items():
                node.mig_devices[profile] = node.mig_devices.get(profile, 0) + count
        else:
            node.whole_gpus += 1
    sharing = labels.get(DEVICE_PLUGIN_CONFIG_LABEL)
    if sharing:
        time_slicing = settings.get("cluster_addons_time_slicing") or {}
        if sharing in time_slicing:
            node.replicas = int(time_slicing[sharing])
        else:
            problems.append(
                f"Node {node.name} selects the device plugin configuration {sharing!r} ({DEVICE_PLUGIN_CONFIG_LABEL}), which "
                f"cluster_addons_time_slicing does not define (it defines {_names(time_slicing)})."
            )
    return node


def _mig_wanted(node, layouts, problems):
    wanted, problem = inventory_layout(node.name, node.model, node.gpu_count, node.mig_layout, layouts)
    if problem:
        problems.append(problem)
    return wanted


def _flavors(nodes):
    flavors = {}
    for node in nodes:
        prefix = f"{model_short_name(node.model)}-{node.pool}"
        pool_labels = {POOL_LABEL: node.pool} if POOL_LABEL in node.labels else {}
        if node.whole_gpus:
            # Time-sliced GPUs carry another product label (-SHARED) than exclusive ones, so they need a flavor of their own.
            shared = node.replicas > 1
            name = f"{prefix}-shared" if shared else prefix
            flavor = flavors.setdefault(name, Flavor(
                name, node.model, node.pool, GPU_RESOURCE, None,
                dict(pool_labels, **{f"{GPU_RESOURCE}.product": gfd_product(node.model, shared=shared)}), node.taints,
            ))
            flavor.nodes.append(node.name)
            flavor.capacity += node.whole_gpus * node.replicas
        for profile, count in sorted(node.mig_devices.items()):
            name = f"{prefix}-{mig_device_name(profile)}"
            resource = mig_resource(profile)
            flavor = flavors.setdefault(name, Flavor(
                name, node.model, node.pool, resource, profile,
                dict(pool_labels, **{f"{resource}.product": gfd_product(node.model, "MIG", mig_device_name(profile))}), node.taints,
            ))
            flavor.nodes.append(node.name)
            flavor.capacity += count
    return dict(sorted(flavors.items()))


def _rails(description, settings, problems):
    records = description.get("rails") or []
    netdevs = settings.get("cluster_addons_rdma_netdevs") or []
    explicit_ranges = settings.get("cluster_addons_rdma_pod_ranges") or {}
    link_layer = description.get("rdma_link_layer") or "ethernet"
    rails = []
    for index, record in enumerate(records):
        name = record.get("name") or f"rail{index}"
        netdev = record.get("interface") or (netdevs[index] if index < len(netdevs) else None)
        rail = Rail(index, name, netdev, link_layer, gateway=record.get("gateway"))
        if netdev is None:
            problems.append(
                f"Rail {name} is given by PCI address ({record.get('pci')}) and cluster_addons_rdma_netdevs names no netdev for "
                f"it (entry {index}): pods attach to a rail through its netdev name."
            )
        if record.get("subnet") and link_layer == "ethernet":
            rail.subnet = ipaddress.ip_network(str(record["subnet"]), strict=False)
            rail.host_addresses = [rail.subnet.network_address + description["rdma_address_first"] + place for place in description["rdma_places"]]
            rail.pod_range = _pod_range(rail, explicit_ranges.get(name), problems)
        rails.append(rail)
    problems.extend(_range_overlaps(rails))
    return rails


def _pod_range(rail, explicit, problems):
    """The pods' block of a rail's subnet: the upper half unless cluster_addons_rdma_pod_ranges names one."""
    subnet = rail.subnet
    if explicit:
        block = ipaddress.ip_network(str(explicit), strict=False)
        if not block.subnet_of(subnet):
            problems.append(f"The pod range {block} of rail {rail.name} lies outside the rail's subnet {subnet}.")
            return block
    elif subnet.prefixlen >= subnet.max_prefixlen - 2:
        problems.append(f"The subnet {subnet} of rail {rail.name} is too small to give pods a range beside the hosts' addresses.")
        return None
    else:
        block = list(subnet.subnets(prefixlen_diff=1))[1]
    taken = sorted(address for address in rail.host_addresses if address in block)
    if taken:
        problems.append(
            f"The pod range {block} of rail {rail.name} holds host rail address {taken[0]} (rdma_address_first + a host's place): "
            f"give the pods another block of {subnet} in cluster_addons_rdma_pod_ranges or lower the hosts' rdma_address_index."
        )
    return block


def _range_overlaps(rails):
    problems = []
    ranged = [rail for rail in rails if rail.pod_range is not None]
    for position, rail in enumerate(ranged):
        for other in ranged[position + 1:]:
            if rail.pod_range.overlaps(other.pod_range):
                problems.append(f"The pod ranges of rails {rail.name} ({rail.pod_range}) and {other.name} ({other.pod_range}) overlap.")
    return problems


def _chart_problems(settings):
    problems = []
    for component, chart in sorted((settings.get("cluster_addons_charts") or {}).items()):
        version = str(chart.get("version") or "")
        if not _PINNED_VERSION.fullmatch(version) or version in _GIT_BRANCHES:
            problems.append(
                f"The {component} chart version {version!r} is not pinned: give an exact version such as 1.2.3 "
                f"(no range, no 'latest', no branch) in cluster_addons_charts."
            )
    return problems


def _team_problems(dc, teams, flavors, nodes, settings):
    problems = []
    owners = {}
    profiles = {profile for node in nodes for profile in node.mig_devices}
    for team in teams:
        name = team["name"]
        if not team.get("namespaces"):
            problems.append(f"Team {name} has no namespaces.")
        for namespace in team.get("namespaces") or []:
            if namespace in owners:
                problems.append(f"Teams {owners[namespace]} and {name} both claim namespace {namespace}.")
            else:
                owners[namespace] = name
        for flavor in sorted(team.get("gpus") or {}):
            if flavor in flavors:
                continue
            profile = flavor.rsplit("-", 1)[-1]
            if is_profile_name(profile) and profile not in profiles:
                problems.append(
                    f"Team {name} has a quota in {flavor}, but no node's MIG layout in {dc} provides profile {profile} "
                    f"(layouts provide {_names(profiles)})."
                )
            else:
                problems.append(f"Team {name} has a quota in flavor {flavor}, which has no nodes in {dc} (flavors with nodes: {_names(flavors)}).")
        for kind in ("borrowing_limits", "lending_limits"):
            for key in sorted(set(team.get(kind) or {}) - set(flavors) - set(QUOTA_RESOURCES)):
                problems.append(f"Team {name} has a {kind[:-1].replace('_', ' ')} in {key}, which is neither cpu, memory nor a flavor with "
                                f"nodes in {dc} (flavors with nodes: {_names(flavors)}).")
    for flavor in flavors.values():
        quotas = [(team["name"], (team.get("gpus") or {}).get(flavor.name, 0)) for team in teams]
        total = sum(quota for _name, quota in quotas)
        if not settings.get("cluster_addons_overcommit"):
            if total > flavor.capacity:
                problems.append(
                    f"The teams' nominal quotas in {flavor.name} add up to {total} {flavor.resource} but {dc} has {flavor.capacity} "
                    f"({_capacity_words(flavor, nodes)}): lower them or set cluster_addons_overcommit."
                )
            continue
        # Overcommit lets quotas add up to more than the flavor holds; one team's quota above all of it is a typo (10**30),
        # and it would reach the namespace's ResourceQuota.
        problems.extend(
            f"The nominal quota of team {name} in {flavor.name} is {quota} {flavor.resource}, more than {dc} has ({flavor.capacity}): "
            f"cluster_addons_overcommit lets the teams' quotas add up to more than the datacenter has, not one team's; give at most "
            f"{flavor.capacity}." for name, quota in quotas if quota > flavor.capacity)
    return problems


def _capacity_words(flavor, nodes):
    by_name = {node.name: node for node in nodes}
    if flavor.profile is None:
        return ", ".join(f"{name}: {by_name[name].whole_gpus} GPUs" + (f" x {by_name[name].replicas} time slices" if by_name[name].replicas > 1 else "")
                         for name in flavor.nodes)
    return ", ".join(f"{name}: {by_name[name].mig_devices[flavor.profile]} instances in layout {by_name[name].mig_layout}" for name in flavor.nodes)


def _names(items):
    return ", ".join(sorted(items)) or "none"
