# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Prometheus answers for a small window, written as data, shared by the occupancy tests; and that window costed."""

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.filter.gpu_occupancy import gpu_occupancy_cost, gpu_occupancy_plan
from ansible_collections.onprem.gpu.plugins.module_utils._occupancy import Queries, Window, measure

OCTOBER = 1790812800  # 2026-10-01T00:00:00Z
H100 = "NVIDIA H100 80GB HBM3"
COSTS = {H100: {"purchase_eur": 280000, "amortisation_months": 48, "power_kw": 10, "energy_eur_per_kwh": 0.15, "pue": 1.4,
                "hosting_eur_per_month": 650, "cloud_eur_per_month": 25000}}


# A four-hour window in 1-hour steps. n1 GPU 0 is whole (team-a/p1: allocated 4 steps, active 3, idle 1, no data in the
# third step... of GPU 1 only); n1 GPU 1 is a MIG GPU with a 3g.40gb instance (team-b/p2: 3 steps present, allocated 2, idle 2)
# and an exporter gap in its third step; n2 is in the inventory but has no series.
WINDOW = Window(OCTOBER, OCTOBER + 4 * 3600, 3600)
GPU0 = {"Hostname": "n1", "gpu": "0", "UUID": "GPU-0", "modelName": H100, "namespace": "team-a", "pod": "p1"}
GPU1_MIG = {"Hostname": "n1", "gpu": "1", "UUID": "GPU-1", "modelName": H100, "GPU_I_PROFILE": "3g.40gb", "GPU_I_ID": "2",
            "namespace": "gpu-operator", "exported_namespace": "team-b", "pod": "dcgm-exporter-x", "exported_pod": "p2"}


def instant(labels, value):
    return {"metric": labels, "value": [WINDOW.end, str(value)]}


def per_bucket(labels, values):
    return {"metric": labels, "values": [[WINDOW.start + 3600 * (index + 1), str(value)] for index, value in enumerate(values)]}


def gpu_of(labels):
    return {key: labels[key] for key in ("Hostname", "gpu", "UUID")}


def instance_of(labels):
    return {key: labels[key] for key in ("Hostname", "gpu", "UUID", "GPU_I_PROFILE", "GPU_I_ID") if key in labels}


ANSWERS = {
    "present": [instant(GPU0, 4), instant(GPU1_MIG, 3)],
    "allocated": [instant(GPU0, 4), instant(GPU1_MIG, 2)],
    "active": [instant(GPU0, 3)],
    "idle": [instant(GPU0, 1), instant(GPU1_MIG, 2)],
    "idle_first": [instant(GPU0, OCTOBER + 3 * 3600), instant(GPU1_MIG, OCTOBER + 3600)],
    "idle_last": [instant(GPU0, OCTOBER + 3 * 3600), instant(GPU1_MIG, OCTOBER + 4 * 3600)],
    "sm_active_gpus": [instant(gpu_of(GPU0), 1), instant(gpu_of(GPU1_MIG), 1)],
    "timeline_available": [per_bucket(gpu_of(GPU0), [1, 1, 1, 1]), per_bucket(gpu_of(GPU1_MIG), [1, 1, 0, 1])],
    "timeline_allocated": [per_bucket(instance_of(GPU0), [1, 1, 1, 1]), per_bucket(instance_of(GPU1_MIG), [1, 0, 0, 1])],
    "timeline_active": [per_bucket(instance_of(GPU0), [1, 1, 0, 1])],
    "timeline_idle": [per_bucket(instance_of(GPU0), [0, 0, 1, 0]), per_bucket(instance_of(GPU1_MIG), [1, 0, 0, 1])],
}


class RecordedPrometheus:
    """Answers each query with ANSWERS[name], the name found from the PromQL; remembers the calls."""

    def __init__(self, answers, threshold=0.15):
        queries = Queries(WINDOW, threshold)
        self.names = {query: name for name, query in queries.instant().items()}
        self.names.update({query: "timeline_" + name for name, query in queries.timeline(3600).items()})
        self.answers = answers
        self.calls = []

    def __call__(self, path, params):
        name = self.names[params["query"]]
        self.calls.append((path, name, {key: value for key, value in params.items() if key != "query"}))
        return {"resultType": "vector" if path.endswith("/query") else "matrix", "result": self.answers.get(name, [])}


def node(datacenter="dc1", model=H100, count=8, **extra):
    """The inventory variables of one GPU node; a None value leaves the variable out."""
    variables = {"datacenter": datacenter, "node_gpu_model": model, "node_gpu_count": count,
                 "gpu_occupancy_prometheus_url": f"http://prometheus.{datacenter}:9090", "gpu_occupancy_cost_models": COSTS}
    variables.update(extra)
    return {key: value for key, value in variables.items() if value is not None}


def measured_datacenter():
    """dc1 of n1 (the answers above, 2 GPUs) and n2 (8 GPUs, no series), measured and costed as the playbook does."""
    plan = gpu_occupancy_plan(["n1", "n2"], {"n1": node(count=2), "n2": node()})["datacenters"][0]
    result = measure(RecordedPrometheus(ANSWERS), WINDOW, expected_nodes=plan["expected_nodes"])
    registered = dict(result, changed=False, item=plan, ansible_loop_var="item")
    return gpu_occupancy_cost(registered, plan)
