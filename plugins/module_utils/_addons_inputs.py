# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster_addons render's inputs checked where they enter, before anything is worked out or written.

``input_problems(description)`` returns one sentence per input of the wrong shape or value (naming the input, the value
and what is allowed), with the validators of ``_validate``: teams, their namespaces, groups, quotas and limits, nodes'
GPU counts and labels, time-slicing replicas, rails, egress CIDRs and the Pod Security level. ``_addons.datacenter``
stops on them, so nothing after it meets a string where it counts or a list where it looks up. Plain Python.
"""

from __future__ import annotations

import re

from ansible_collections.onprem.gpu.plugins.module_utils._validate import (
    cidr_problem,
    dns_label_problem,
    dns_subdomain_problem,
    label_value_problem,
    labels_problems,
    list_problem,
    mapping_problem,
    network,
    quantity,
    quantity_problem,
    shown,
    whole_number_problem,
)

# Pod Security Standards levels (Kubernetes "Pod Security Standards"), the values of pod-security.kubernetes.io/enforce.
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
# Namespaces of Kubernetes and of what the render deploys by default: a team namespace gets the team's RoleBindings, quota
# and default-deny NetworkPolicy, which would hand a tenant the platform or cut the platform off. Namespaces of the
# configured charts, Argo CD and monitoring are added per datacenter; kube-* is Kubernetes' own prefix.
PLATFORM_NAMESPACES = frozenset(("default", "kube-system", "kube-public", "kube-node-lease", "gpu-operator", "kueue-system",
                                 "network-operator", "nvidia-network-operator", "local-path-storage", "argocd"))
QUOTA_RESOURCES = ("cpu", "memory")
_KUBE_VERSION = re.compile(r"v?(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?:\.[0-9]+)?(?:[-+][0-9A-Za-z.+~-]*)?")


def pod_security_version(kube_version):
    """The Pod Security Standards version of a cluster (v1.35 for kube_version 1.35.4), latest when it is not known."""
    match = _KUBE_VERSION.fullmatch(kube_version) if isinstance(kube_version, str) else None
    return f"v{match['major']}.{match['minor']}" if match else "latest"


def input_problems(description):
    """One sentence per input of ``description`` (see the cluster_addons_plan filter) of the wrong shape or value."""
    settings = description["settings"]
    problems = [_kube_version_problem(description.get("kube_version"))]
    for node in description["nodes"]:
        problems.append(whole_number_problem(f"node_gpu_count of {node['name']}", node.get("gpu_count"), 0))
        problems.extend(labels_problems(f"kube_node_labels of {node['name']}", node.get("labels") or {}))
    problems.extend(_time_slicing_problems(settings.get("cluster_addons_time_slicing") or {}))
    problems.extend(_rail_problems(description))
    egress = settings.get("cluster_addons_team_egress_cidrs") or []
    problems.append(list_problem("cluster_addons_team_egress_cidrs", egress, "of CIDRs, e.g. [10.20.0.0/16]"))
    if isinstance(egress, list):
        problems.extend(cidr_problem(f"Entry {position} of cluster_addons_team_egress_cidrs", cidr) for position, cidr in enumerate(egress, 1))
    problems.append(dns_subdomain_problem("cluster_addons_cohort", settings.get("cluster_addons_cohort"), "gpu"))
    problems.append(dns_subdomain_problem("cluster_addons_cpu_flavor", settings.get("cluster_addons_cpu_flavor"), "default-flavor"))
    problems.append(_level_problem("cluster_addons_pod_security", settings.get("cluster_addons_pod_security")))
    problems.extend(_teams_problems(settings.get("cluster_addons_teams") or [], platform_namespaces(settings)))
    return [problem for problem in problems if problem]


def platform_namespaces(settings):
    charts = settings.get("cluster_addons_charts") or {}
    owned = {chart.get("namespace") for chart in charts.values() if isinstance(chart, dict)}
    owned.add((settings.get("cluster_addons_gitops") or {}).get("argocd_namespace"))
    owned.add((settings.get("cluster_addons_monitoring") or {}).get("namespace"))
    return PLATFORM_NAMESPACES | {namespace for namespace in owned if isinstance(namespace, str)}


def _kube_version_problem(kube_version):
    if kube_version in (None, "") or pod_security_version(kube_version) != "latest":
        return None
    return f"kube_version must be a Kubernetes version such as 1.35.4 (its minor pins the Pod Security Standards), not {shown(kube_version)}."


def _level_problem(what, level):
    if level in POD_SECURITY_LEVELS:
        return None
    return f"{what} must be a Pod Security Standards level, {', '.join(POD_SECURITY_LEVELS)}, not {shown(level)}."


def _time_slicing_problems(time_slicing):
    problem = mapping_problem("cluster_addons_time_slicing", time_slicing, "of configuration names to replicas per GPU, e.g. {shared-4: 4}")
    if problem:
        return [problem]
    problems = []
    for name, replicas in time_slicing.items():
        problems.append(label_value_problem("cluster_addons_time_slicing", "nvidia.com/device-plugin.config", name))
        problems.append(whole_number_problem(f"The replicas of time-slicing configuration {name}", replicas, 1))
    return problems


def _rail_problems(description):
    problems, named = [], {}
    for index, rail in enumerate(description.get("rails") or []):
        name = rail.get("name") or f"rail{index}"
        problem = dns_label_problem(f"The name of rail {index}", name, "rail0")
        if problem:
            problems.append(problem + " It names the resource rdma/<rail> and the rail's NetworkAttachmentDefinition.")
        elif name in named:
            problems.append(f"Rails {named[name]} and {index} are both named {name}: each rail needs its own name (it names the resource "
                            f"rdma/<rail> and the rail's NetworkAttachmentDefinition).")
        named.setdefault(name, index)
        if rail.get("subnet"):
            problems.append(cidr_problem(f"The subnet of rail {name}", rail["subnet"], strict=False))
    problems.extend(_cluster_network_problems(description))
    return problems


def _cluster_network_problems(description):
    """The pod and service networks must not hold a rail's subnet: a pod would route its peers' rail addresses wrongly."""
    problems = []
    for variable in ("kube_pod_cidr", "kube_service_cidr"):
        cidr = description.get(variable)
        if cidr in (None, ""):
            continue
        problem = cidr_problem(variable, cidr)
        if problem:
            problems.append(problem)
            continue
        for rail in description.get("rails") or []:
            subnet = network(rail.get("subnet"), strict=False)
            if subnet is not None and subnet.version == network(cidr).version and subnet.overlaps(network(cidr)):
                problems.append(f"{variable} {cidr} overlaps the subnet {subnet} of rail {rail.get('name')}: pods and services would "
                                "take addresses of the rails; give the rails subnets outside the cluster's pod and service networks.")
    return problems


def _teams_problems(teams, reserved):
    problem = list_problem("cluster_addons_teams", teams, "of teams, each a mapping (- name: llm, namespaces: [llm], gpus: {...})")
    if problem:
        return [problem]
    problems, named = [], {}
    for position, team in enumerate(teams, 1):
        problem = mapping_problem(f"Entry {position} of cluster_addons_teams", team, "with name, group, namespaces, cpu, memory and gpus")
        if problem:
            problems.append(problem)
            continue
        name = team.get("name")
        problem = dns_label_problem(f"The name of team {position} in cluster_addons_teams", name, "llm")
        if problem:
            problems.append(problem)
            continue
        if name in named:
            problems.append(f"Teams {named[name]} and {position} of cluster_addons_teams are both named {name}: the second would replace "
                            f"the first's teams/{name}.yaml and its namespaces would be pruned; give each team its own name.")
        named.setdefault(name, position)
        problems.extend(_team_problems(name, team, reserved))
    return problems


def _team_problems(name, team, reserved):
    namespaces = team.get("namespaces") or []
    problems = [list_problem(f"The namespaces of team {name}", namespaces, "of namespace names, e.g. [llm, llm-eval]")]
    for namespace in namespaces if isinstance(namespaces, list) else []:
        problems.append(dns_label_problem(f"A namespace of team {name}", namespace, "llm"))
        if isinstance(namespace, str) and (namespace in reserved or namespace.startswith("kube-")):
            problems.append(f"Namespace {namespace} of team {name} belongs to the platform (Kubernetes, Argo CD, monitoring or a chart the "
                            "render deploys there): a team namespace gets the team's RoleBindings and default-deny NetworkPolicy, so give "
                            "the team a namespace of its own.")
    for key in ("group", "viewer_group"):
        group = team.get(key)
        if group is None:
            continue
        if not isinstance(group, str) or not group.strip():
            problems.append(f"The {key} of team {name} must be the name of a group of the cluster's users, not {shown(group)}.")
        elif group.startswith("system:"):
            problems.append(f"The {key} of team {name} is {group}, a Kubernetes system group, which holds users, nodes or service accounts "
                            "beyond the team: bind the team's own group.")
    if team.get("pod_security") is not None:
        problems.append(_level_problem(f"The pod_security of team {name}", team["pod_security"]))
    if team.get("idle_gpus_alert") is not None:
        problems.append(whole_number_problem(f"The idle_gpus_alert of team {name}", team["idle_gpus_alert"], 1))
    for resource in QUOTA_RESOURCES:
        if team.get(resource) is not None:
            problems.append(quantity_problem(f"The {resource} quota of team {name}", team[resource]))
    problems.extend(_amounts_problems(f"The gpus of team {name}", team.get("gpus") or {}, f"quota of team {name}", "e.g. {h100-training: 16}"))
    for kind in ("borrowing_limits", "lending_limits"):
        what = f"{kind.replace('_', ' ')[:-1]} of team {name}"
        problems.extend(_amounts_problems(f"The {kind} of team {name}", team.get(kind) or {}, what, "e.g. {h100-training: 8, cpu: 64}"))
    if not any(problems):
        problems.extend(_lending_problems(name, team))
    return problems


def _amounts_problems(what, amounts, each, example):
    """A mapping of flavor (or cpu, memory) to an amount: GPUs are whole numbers of 0 or more (2.7 is no count of GPUs);
    cpu and memory Kubernetes quantities."""
    problem = mapping_problem(what, amounts, f"of flavor names to amounts, {example}")
    if problem:
        return [problem]
    return [quantity_problem(f"The {each} in {key}", value) if key in QUOTA_RESOURCES else
            whole_number_problem(f"The {each} in {key}", value, 0) for key, value in amounts.items()]


def _lending_problems(name, team):
    """Kueue refuses a ClusterQueue whose lendingLimit is above its nominalQuota (a team lends only what it has)."""
    problems = []
    gpus = team.get("gpus") or {}
    for key, limit in sorted((team.get("lending_limits") or {}).items()):
        nominal = team.get(key, 0) if key in QUOTA_RESOURCES else gpus.get(key, 0)
        if quantity(limit) > (quantity(nominal) or 0):
            problems.append(f"The lending limit of team {name} in {key} is {limit}, above its nominal quota there ({nominal}): a team can "
                            "lend at most what it has.")
    return problems
