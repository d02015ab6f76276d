# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Helpers of playbooks/gpu_occupancy_report.yml: the datacenters to measure, and their cost.

Documentation: the YAML files of the same names beside this one.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.module_utils._occupancy_cost import CostError, datacenter_costs, model_costs

# Settings read per datacenter from the variables of its GPU nodes (group_vars of the datacenter, or all).
SETTINGS = ("prometheus_url", "selector", "start", "end", "step", "sm_active_threshold", "ca_path", "client_cert", "client_key",
            "validate_certs", "replica_labels")
# Kept out of the datacenters the playbook loops over: a loop item is printed with its result (-v, and on any failure).
SECRETS = ("bearer_token",)
RESULT_KEYS = ("window", "total", "nodes", "namespaces", "idle_allocations", "unknown", "timeline", "sm_active_threshold", "queries")


def gpu_occupancy_plan(hosts, hostvars):
    """The datacenters of ``hosts`` (GPU nodes) with their nodes, settings and cost models, and the input problems.

    Returns ``{"datacenters": [{"datacenter", "nodes": {host: {"model", "gpus"}}, "expected_nodes": {host: gpus}, "settings": {...},
    "cost_models": {...}}], "secrets": {datacenter: {"bearer_token": ...}}, "problems": [sentence, ...]}``; the playbook stops
    on any problem.
    """
    if not isinstance(hosts, list) or not hosts:
        return {"datacenters": [], "secrets": {}, "problems": ["The inventory has no GPU node (group gpu_nodes) to report on."]}
    problems, datacenters, secrets = [], {}, {}
    for host in sorted(hosts):
        variables = hostvars[host]
        name = variables.get("datacenter")
        if not name:
            problems.append(f"{host} has no datacenter variable, so its occupancy cannot be reported with a datacenter.")
            continue
        entry = datacenters.setdefault(name, {"datacenter": name, "nodes": {}, "expected_nodes": {}, "settings": {},
                                              "cost_models": variables.get("gpu_occupancy_cost_models")})
        for setting in SETTINGS + SECRETS:
            value = variables.get("gpu_occupancy_" + setting)
            kept = secrets.setdefault(name, {}) if setting in SECRETS else entry["settings"]
            if value not in (None, "") and setting not in kept:
                kept[setting] = value
        model, count = variables.get("node_gpu_model"), variables.get("node_gpu_count")
        if not model or not isinstance(count, int) or isinstance(count, bool) or count <= 0:
            problems.append(f"{host} needs node_gpu_model and a positive node_gpu_count to be measured and costed.")
            continue
        entry["nodes"][host] = {"model": model, "gpus": count}
        entry["expected_nodes"][host] = count
    for entry in datacenters.values():
        if not entry["settings"].get("prometheus_url"):
            problems.append(f"Datacenter {entry['datacenter']} has no gpu_occupancy_prometheus_url (the Prometheus that scrapes its dcgm-exporter).")
        problems += _cost_problems(entry)
    return {"datacenters": [datacenters[name] for name in sorted(datacenters)], "secrets": secrets, "problems": problems}


def _cost_problems(entry):
    models = entry["cost_models"]
    if not isinstance(models, dict) or not models:
        return [f"Datacenter {entry['datacenter']} has no gpu_occupancy_cost_models (cost inputs per GPU node model)."]
    problems = []
    for node, facts in sorted(entry["nodes"].items()):
        if facts["model"] not in models:
            problems.append(f"gpu_occupancy_cost_models of {entry['datacenter']} has no entry for {facts['model']!r}, the GPU model of {node}.")
            continue
        try:
            model_costs(facts["model"], models[facts["model"]], facts["gpus"])
        except CostError as error:
            if str(error) not in problems:
                problems.append(str(error))
    return problems


def gpu_occupancy_cost(occupancy, datacenter):
    """``{"datacenter", "occupancy", "costs"}``: one datacenter (an entry of gpu_occupancy_plan) costed at the
    occupancy the gpu_occupancy module measured (its registered result, a loop item's or not)."""
    occupancy = {key: value for key, value in occupancy.items() if key in RESULT_KEYS}
    measured = {node["node"]: node for node in occupancy["nodes"]}
    nodes = {
        host: dict(facts, active_gpu_hours=measured.get(host, {}).get("active_gpu_hours", 0.0),
                   allocated_gpu_hours=measured.get(host, {}).get("allocated_gpu_hours", 0.0))
        for host, facts in datacenter["nodes"].items()
    }
    totals = {"window_hours": occupancy["window"]["hours"], "active_gpu_hours": occupancy["total"]["active_gpu_hours"],
              "available_gpu_hours": occupancy["total"]["available_gpu_hours"]}
    try:
        costs = datacenter_costs(nodes, datacenter["cost_models"], totals)
    except CostError as error:
        raise AnsibleFilterError(str(error))
    return {"datacenter": datacenter["datacenter"], "occupancy": occupancy, "costs": costs}


class FilterModule:
    def filters(self):
        return {
            "gpu_occupancy_plan": gpu_occupancy_plan,
            "gpu_occupancy_cost": gpu_occupancy_cost,
        }
