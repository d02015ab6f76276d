# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What GPU servers cost per month, per active GPU-hour at a measured occupancy, and against a cloud price.

One server of a model costs, per month of 730 hours (8760 / 12):

    amortisation = purchase_eur / amortisation_months
    energy       = power_kw x 730 x energy_eur_per_kwh
    cooling      = energy x (pue - 1)
    monthly      = amortisation + energy + cooling + hosting_eur_per_month

The cloud reference is the price of the same capacity by the GPU-hour (``cloud_eur_per_gpu_hour``, or
``cloud_eur_per_month`` for the whole server divided by its GPUs x 730). Paying the cloud only for the hours
used, a month at occupancy o costs o x gpus x 730 x cloud_eur_per_gpu_hour; on-prem costs ``monthly`` whatever
the occupancy. They are equal at the break-even occupancy:

    break_even = monthly / (gpus x 730 x cloud_eur_per_gpu_hour)

Plain Python without Ansible imports, unit-tested directly.
"""

from __future__ import annotations

import math

HOURS_PER_MONTH = 730.0
INPUTS = {
    "purchase_eur": "the purchase price of one server in euros",
    "amortisation_months": "the months over which a server is written off",
    "power_kw": "the server's average electrical draw in kW",
    "energy_eur_per_kwh": "the electricity price in euros per kWh",
    "pue": "the power usage effectiveness (1.0 = no cooling overhead)",
    "hosting_eur_per_month": "rack space, network and support per server and month in euros",
}
CLOUD_INPUTS = ("cloud_eur_per_gpu_hour", "cloud_eur_per_month")


class CostError(Exception):
    """A cost input is missing or wrong; the message is one sentence."""


def model_costs(name, inputs, gpus, variable="gpu_occupancy_cost_models"):
    """The monthly cost breakdown of one server of model ``name`` with ``gpus`` GPUs, from its inputs."""
    where = f"{variable}[{name!r}]"
    if not isinstance(inputs, dict):
        raise CostError(f"{where} must be a mapping of cost inputs, not {inputs!r}.")
    values = {}
    for key, meaning in INPUTS.items():
        if inputs.get(key) in (None, ""):
            raise CostError(f"{where} lacks {key} ({meaning}).")
        values[key] = _number(inputs[key], f"{where}.{key}")
    if values["amortisation_months"] <= 0:
        raise CostError(f"{where}.amortisation_months must be above 0, not {inputs['amortisation_months']!r}.")
    if values["pue"] < 1:
        raise CostError(f"{where}.pue must be at least 1.0 (a PUE below 1 would mean cooling that makes energy), not {inputs['pue']!r}.")
    clouds = [key for key in CLOUD_INPUTS if inputs.get(key) not in (None, "")]
    if len(clouds) != 1:
        raise CostError(f"{where} needs exactly one of cloud_eur_per_gpu_hour or cloud_eur_per_month (the cloud price of the same capacity).")
    gpus = _number(gpus, f"the GPU count of {name}")
    if gpus <= 0:
        raise CostError(f"The GPU count of {name} servers must be above 0, not {gpus!r}.")
    cloud = _number(inputs[clouds[0]], f"{where}.{clouds[0]}")
    cloud_gpu_hour = cloud if clouds[0] == "cloud_eur_per_gpu_hour" else cloud / (gpus * HOURS_PER_MONTH)
    amortisation = values["purchase_eur"] / values["amortisation_months"]
    energy = values["power_kw"] * HOURS_PER_MONTH * values["energy_eur_per_kwh"]
    cooling = energy * (values["pue"] - 1)
    monthly = amortisation + energy + cooling + values["hosting_eur_per_month"]
    cloud_month = gpus * HOURS_PER_MONTH * cloud_gpu_hour
    return {
        "model": name,
        "gpus": gpus,
        "amortisation_eur_per_month": amortisation,
        "energy_eur_per_month": energy,
        "cooling_eur_per_month": cooling,
        "hosting_eur_per_month": values["hosting_eur_per_month"],
        "eur_per_month": monthly,
        "cloud_eur_per_gpu_hour": cloud_gpu_hour,
        "cloud_eur_per_month": cloud_month,
        "break_even_occupancy": monthly / cloud_month if cloud_month > 0 else None,
    }


def _number(value, where):
    if isinstance(value, bool):
        raise CostError(f"{where} must be a number, not {value!r}.")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise CostError(f"{where} must be a number, not {value!r}.")
    if math.isnan(number) or math.isinf(number):
        raise CostError(f"{where} must be a finite number, not {value!r}.")
    if number < 0:
        raise CostError(f"{where} must not be negative, got {value!r}.")
    return number


def datacenter_costs(nodes, cost_models, occupancy, variable="gpu_occupancy_cost_models"):
    """The cost of one datacenter for a measured occupancy.

    ``nodes`` maps each GPU node of the inventory to ``{"model": ..., "gpus": ..., "active_gpu_hours": ...,
    "allocated_gpu_hours": ...}`` (hours measured over the window); ``cost_models`` maps node models to their
    inputs; ``occupancy`` is the measured ``{"window_hours": ..., "active_gpu_hours": ..., "available_gpu_hours": ...}``.
    Costs for the window are the monthly costs times window_hours / 730; every node counts, measured or not.
    """
    if not isinstance(cost_models, dict) or not cost_models:
        raise CostError(f"{variable} must map each node model to its cost inputs; it is empty or missing.")
    if not nodes:
        raise CostError("The datacenter has no GPU node to cost.")
    per_model, monthly, cloud_month = {}, 0.0, 0.0
    cloud_active = cloud_allocated = 0.0
    for node, facts in sorted(nodes.items()):
        model = facts.get("model")
        if model not in cost_models:
            raise CostError(f"{variable} has no entry for {model!r}, the GPU model of {node}.")
        costs = model_costs(model, cost_models[model], facts.get("gpus"), variable)
        summary = per_model.setdefault(model, dict(costs, nodes=0))
        summary["nodes"] += 1
        monthly += costs["eur_per_month"]
        cloud_month += costs["cloud_eur_per_month"]
        cloud_active += float(facts.get("active_gpu_hours") or 0) * costs["cloud_eur_per_gpu_hour"]
        cloud_allocated += float(facts.get("allocated_gpu_hours") or 0) * costs["cloud_eur_per_gpu_hour"]
    window_hours = float(occupancy["window_hours"])
    window_cost = monthly * window_hours / HOURS_PER_MONTH
    active = float(occupancy["active_gpu_hours"])
    available = float(occupancy["available_gpu_hours"])
    measured = active / available if available > 0 else None
    break_even = monthly / cloud_month if cloud_month > 0 else None
    return {
        "models": [_rounded(per_model[model]) for model in sorted(per_model)],
        "eur_per_month": round(monthly, 2),
        "cloud_eur_per_month": round(cloud_month, 2),
        "window_hours": round(window_hours, 6),
        "eur_in_window": round(window_cost, 2),
        "occupancy": round(measured, 6) if measured is not None else None,
        "eur_per_active_gpu_hour": round(window_cost / active, 4) if active > 0 else None,
        "cloud_eur_for_active_hours": round(cloud_active, 2),
        "cloud_eur_for_allocated_hours": round(cloud_allocated, 2),
        "break_even_occupancy": round(break_even, 6) if break_even is not None else None,
        "onprem_cheaper": measured > break_even if measured is not None and break_even is not None else None,
    }


def _rounded(entry):
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in entry.items()}
