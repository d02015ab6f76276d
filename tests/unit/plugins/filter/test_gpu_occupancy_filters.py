# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The report playbook's filters (the datacenters and their input problems, the cost) and the report's files."""

from __future__ import annotations

import csv
import io
import json
import sys
from xml.etree import ElementTree
from pathlib import Path

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.onprem.gpu.plugins.filter.gpu_occupancy import gpu_occupancy_cost, gpu_occupancy_plan
from ansible_collections.onprem.gpu.plugins.module_utils._occupancy import measure
from ansible_collections.onprem.gpu.plugins.module_utils._occupancy_report import report_files

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from occupancy_answers import ANSWERS, COSTS, H100, WINDOW, RecordedPrometheus, measured_datacenter, node  # noqa: E402


def test_plan_groups_nodes_by_datacenter():
    plan = gpu_occupancy_plan(["n2", "n1", "m1"], {"n1": node(), "n2": node(gpu_occupancy_selector='cluster="dc1"'), "m1": node("dc2")})
    assert plan["problems"] == []
    assert [entry["datacenter"] for entry in plan["datacenters"]] == ["dc1", "dc2"]
    assert plan["datacenters"][0]["expected_nodes"] == {"n1": 8, "n2": 8}
    assert plan["datacenters"][0]["settings"] == {"prometheus_url": "http://prometheus.dc1:9090", "selector": 'cluster="dc1"'}


def test_plan_keeps_the_bearer_token_out_of_the_loop_items():
    # The playbook loops over plan["datacenters"]; a loop item is printed with its result (-v, and on failure).
    plan = gpu_occupancy_plan(["n1"], {"n1": node(gpu_occupancy_bearer_token="s3cret")})
    assert "s3cret" not in repr(plan["datacenters"])
    assert plan["secrets"] == {"dc1": {"bearer_token": "s3cret"}}


@pytest.mark.parametrize(("variables", "problem"), [
    (node(datacenter=None), "n1 has no datacenter variable, so its occupancy cannot be reported with a datacenter."),
    (node(count=0), "n1 needs node_gpu_model and a positive node_gpu_count to be measured and costed."),
    (node(gpu_occupancy_prometheus_url=None), "Datacenter dc1 has no gpu_occupancy_prometheus_url (the Prometheus that scrapes its dcgm-exporter)."),
    (node(gpu_occupancy_cost_models=None), "Datacenter dc1 has no gpu_occupancy_cost_models (cost inputs per GPU node model)."),
    (node(model="NVIDIA H200"), "gpu_occupancy_cost_models of dc1 has no entry for 'NVIDIA H200', the GPU model of n1."),
    (node(gpu_occupancy_cost_models={H100: dict(COSTS[H100], power_kw=-1)}),
     "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'].power_kw must not be negative, got -1."),
    (node(gpu_occupancy_cost_models={H100: {key: value for key, value in COSTS[H100].items() if key != "pue"}}),
     "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'] lacks pue (the power usage effectiveness (1.0 = no cooling overhead))."),
])
def test_plan_problems_are_one_sentence_each(variables, problem):
    assert gpu_occupancy_plan(["n1"], {"n1": variables})["problems"] == [problem]


def test_an_inventory_without_gpu_nodes():
    assert gpu_occupancy_plan([], {})["problems"] == ["The inventory has no GPU node (group gpu_nodes) to report on."]


def test_cost_of_a_measured_datacenter_counts_every_node_of_the_inventory():
    entry = measured_datacenter()
    assert entry["datacenter"] == "dc1"
    assert "item" not in entry["occupancy"] and "changed" not in entry["occupancy"]
    costs = entry["costs"]
    # n1 (2 GPUs) and n2 (8 GPUs, no series) are both paid for: two servers' months, for a 4-hour window.
    assert costs["eur_per_month"] == pytest.approx(16032.67, abs=0.01)
    assert costs["eur_in_window"] == pytest.approx(2 * 8016.33 * 4 / 730, abs=0.01)
    assert costs["eur_per_active_gpu_hour"] == pytest.approx(2 * 8016.33 * 4 / 730 / 3, abs=1e-3)
    # cloud_eur_per_month prices a whole server: n1's two GPUs cost 25,000 / (2 x 730) EUR an hour each.
    assert costs["cloud_eur_for_active_hours"] == pytest.approx(3 * 25000 / (2 * 730), abs=0.01)


def test_cost_refuses_bad_inputs_with_a_filter_error():
    plan = {"datacenter": "dc1", "nodes": {"n1": {"model": H100, "gpus": 8}}, "cost_models": {H100: dict(COSTS[H100], purchase_eur=-5)}}
    result = measure(RecordedPrometheus(ANSWERS), WINDOW)
    with pytest.raises(AnsibleFilterError, match="purchase_eur must not be negative"):
        gpu_occupancy_cost(result, plan)


def test_report_files():
    files = report_files([measured_datacenter()])
    assert sorted(files) == ["cost-dc1.svg", "gpu-cost.csv", "gpu-occupancy.csv", "gpu-occupancy.html", "gpu-occupancy.json",
                             "gpu-occupancy.md", "idle-heatmap.svg", "occupancy.svg", "teams.svg"]
    for name in files:
        if name.endswith(".svg"):
            assert ElementTree.fromstring(files[name]).tag == "{http://www.w3.org/2000/svg}svg"
    ElementTree.fromstring(files["gpu-occupancy.html"].split("\n", 1)[1])
    rows = list(csv.DictReader(io.StringIO(files["gpu-occupancy.csv"])))
    assert [(row["scope"], row["name"], row["active_gpu_hours"]) for row in rows] == [
        ("datacenter", "dc1", "3.0"), ("node", "n1", "3.0"), ("node", "n2", "0.0"), ("namespace", "team-a", "3.0"), ("namespace", "team-b", "0.0")]
    assert json.loads(files["gpu-occupancy.json"])[0]["costs"]["break_even_occupancy"] == pytest.approx(0.320653, abs=1e-6)
    markdown = files["gpu-occupancy.md"]
    assert "| dc1 | 7.0 | 4.9 | 3.0 | 1.9 | 42.9% | 33.0 | 16,033 EUR |" in markdown
    assert "- dc1: n2 has no DCGM_FI_DEV_FB_USED or DCGM_FI_PROF_SM_ACTIVE series in the window" in markdown
    assert "| dc1 | n1 | 0 | team-a | p1 | 1.0 | 2026-10-01T02:00:00Z | 2026-10-01T03:00:00Z |" in markdown
    assert "![dc1 cost by occupancy](cost-dc1.svg)" in markdown


def test_report_needs_a_datacenter():
    with pytest.raises(ValueError, match="at least one datacenter"):
        report_files([])
