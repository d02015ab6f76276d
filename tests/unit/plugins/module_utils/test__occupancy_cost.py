# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cost model on the reference figures of one 8x H100 server, and its refusals."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._occupancy_cost import CostError, datacenter_costs, model_costs

H100 = "NVIDIA H100 80GB HBM3"
# One HGX H100 server: 280,000 EUR over 48 months, 10 kW at 0.15 EUR/kWh, PUE 1.4, 650 EUR hosting; the cloud's
# reserved price for the same eight GPUs 25,000 (cheap end) to 45,000 EUR a month.
SERVER = {"purchase_eur": 280000, "amortisation_months": 48, "power_kw": 10, "energy_eur_per_kwh": 0.15, "pue": 1.4,
          "hosting_eur_per_month": 650, "cloud_eur_per_month": 25000}


def test_the_reference_server():
    costs = model_costs(H100, SERVER, 8)
    assert round(costs["amortisation_eur_per_month"]) == 5833  # ~5,800 EUR/month
    assert costs["energy_eur_per_month"] == pytest.approx(1095)  # 10 kW x 730 h x 0.15 EUR/kWh, ~1,100 EUR/month
    assert costs["cooling_eur_per_month"] == pytest.approx(438)
    assert round(costs["eur_per_month"]) == 8016  # ~8,000 EUR/month all in
    assert costs["cloud_eur_per_gpu_hour"] == pytest.approx(25000 / 5840)
    assert costs["break_even_occupancy"] == pytest.approx(8016.33 / 25000, abs=1e-5)  # 32.1 %


@pytest.mark.parametrize(("cloud", "break_even"), [
    ({"cloud_eur_per_month": 25000}, 0.3207), ({"cloud_eur_per_month": 45000}, 0.1781),
    # The cloud price at which one such server breaks even at 35 % and at 40 % occupancy.
    ({"cloud_eur_per_gpu_hour": 3.92}, 0.3502), ({"cloud_eur_per_gpu_hour": 3.43}, 0.4002),
])
def test_break_even_is_monthly_cost_over_the_cloud_month_of_the_same_gpus(cloud, break_even):
    inputs = {key: value for key, value in SERVER.items() if key != "cloud_eur_per_month"}
    assert model_costs(H100, dict(inputs, **cloud), 8)["break_even_occupancy"] == pytest.approx(break_even, abs=1e-4)


def test_a_datacenter_at_its_measured_occupancy():
    nodes = {"gpu1": {"model": H100, "gpus": 8, "active_gpu_hours": 5000.0, "allocated_gpu_hours": 5500.0},
             "gpu2": {"model": H100, "gpus": 8, "active_gpu_hours": 2000.0, "allocated_gpu_hours": 3000.0}}
    costs = datacenter_costs(nodes, {H100: SERVER}, {"window_hours": 730, "active_gpu_hours": 7000.0, "available_gpu_hours": 11680.0})
    assert costs["eur_per_month"] == pytest.approx(16032.67)
    assert costs["cloud_eur_per_month"] == 50000
    assert costs["eur_in_window"] == pytest.approx(16032.67)
    assert costs["occupancy"] == pytest.approx(7000 / 11680, abs=1e-6)
    assert costs["eur_per_active_gpu_hour"] == pytest.approx(16032.67 / 7000, abs=1e-4)
    assert costs["cloud_eur_for_active_hours"] == pytest.approx(7000 * 25000 / 5840, abs=0.01)
    assert costs["cloud_eur_for_allocated_hours"] == pytest.approx(8500 * 25000 / 5840, abs=0.01)
    assert costs["break_even_occupancy"] == pytest.approx(0.320653, abs=1e-6)
    assert costs["onprem_cheaper"] is True
    assert costs["models"][0]["nodes"] == 2


def test_no_active_hours_has_no_price_per_active_hour():
    nodes = {"gpu1": {"model": H100, "gpus": 8}}
    costs = datacenter_costs(nodes, {H100: SERVER}, {"window_hours": 73, "active_gpu_hours": 0, "available_gpu_hours": 0})
    assert costs["eur_per_active_gpu_hour"] is None and costs["occupancy"] is None and costs["onprem_cheaper"] is None
    assert costs["eur_in_window"] == pytest.approx(801.63)


@pytest.mark.parametrize(("change", "message"), [
    ({"purchase_eur": None}, "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'] lacks purchase_eur (the purchase price of one server in euros)."),
    ({"power_kw": -10}, "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'].power_kw must not be negative, got -10."),
    ({"energy_eur_per_kwh": "cheap"}, "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'].energy_eur_per_kwh must be a number, not 'cheap'."),
    ({"amortisation_months": 0}, "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'].amortisation_months must be above 0, not 0."),
    ({"pue": 0.9}, "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'].pue must be at least 1.0 (a PUE below 1 would mean cooling that "
                   "makes energy), not 0.9."),
    ({"cloud_eur_per_gpu_hour": 4.0}, "gpu_occupancy_cost_models['NVIDIA H100 80GB HBM3'] needs exactly one of cloud_eur_per_gpu_hour or "
                                      "cloud_eur_per_month (the cloud price of the same capacity)."),
    ({"cloud_eur_per_month": None}, "needs exactly one of cloud_eur_per_gpu_hour or cloud_eur_per_month"),
    ({"hosting_eur_per_month": True}, "hosting_eur_per_month must be a number, not True."),
])
def test_bad_cost_inputs_are_one_sentence(change, message):
    inputs = {key: value for key, value in dict(SERVER, **change).items() if value is not None}
    with pytest.raises(CostError) as error:
        model_costs(H100, inputs, 8)
    assert message in str(error.value)


def test_a_node_model_without_cost_inputs():
    with pytest.raises(CostError, match=r"^gpu_occupancy_cost_models has no entry for 'NVIDIA H200', the GPU model of gpu9\.$"):
        datacenter_costs({"gpu9": {"model": "NVIDIA H200", "gpus": 8}}, {H100: SERVER},
                         {"window_hours": 1, "active_gpu_hours": 0, "available_gpu_hours": 0})
