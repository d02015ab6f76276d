# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU occupancy report's files: Markdown, HTML, SVG charts, and CSV and JSON for finance.

``report_files(datacenters)`` takes one entry per datacenter, ``{"datacenter", "occupancy", "costs"}`` (the
gpu_occupancy module's answer and ``_occupancy_cost.datacenter_costs``'s), and returns ``{file name: text}``.
"""

from __future__ import annotations

import csv
import io
import json
from html import escape

from ansible_collections.onprem.gpu.plugins.module_utils import _occupancy_svg as svg

HOURS = ("available_gpu_hours", "allocated_gpu_hours", "active_gpu_hours", "idle_allocated_gpu_hours")
HEADERS = ("available GPU-h", "allocated GPU-h", "active GPU-h", "idle-allocated GPU-h", "occupancy")
TOP_IDLE = 10


def _percent(value):
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _hours(value):
    return f"{value:,.1f}"


def _eur(value):
    return "n/a" if value is None else f"{value:,.0f} EUR"


def _row(entry):
    return [_hours(entry[key]) for key in HOURS] + [_percent(entry["occupancy"])]


def _table(headers, rows):
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return lines


def charts(datacenters):
    """File name -> SVG text of the report's charts."""
    files = {}
    end = datacenters[0]["occupancy"]["window"]["end"]
    files["occupancy.svg"] = svg.occupancy_chart([
        {
            "label": entry["datacenter"],
            "times": [point["time"] for point in entry["occupancy"]["timeline"]["total"]],
            "active": [point["active_gpu_hours"] for point in entry["occupancy"]["timeline"]["total"]],
            "allocated": [point["allocated_gpu_hours"] for point in entry["occupancy"]["timeline"]["total"]],
            "available": [point["available_gpu_hours"] for point in entry["occupancy"]["timeline"]["total"]],
        }
        for entry in datacenters
    ], end, "GPU occupancy over time (solid: active, dashed: allocated)")
    rows, times = [], []
    for entry in datacenters:
        timeline = entry["occupancy"]["timeline"]
        times = times or [point["time"] for point in timeline["total"]]
        for node in entry["occupancy"]["nodes"]:
            points = timeline["nodes"].get(node["node"], [])
            rows.append({
                "label": f"{entry['datacenter']} {node['node']}",
                "idle": [point["idle_allocated_gpu_hours"] for point in points] or [0.0] * len(times),
                "available": [point["available_gpu_hours"] for point in points] or [0.0] * len(times),
            })
    files["idle-heatmap.svg"] = svg.heat_map(rows, times, end)
    teams = {}
    for entry in datacenters:
        for namespace in entry["occupancy"]["namespaces"]:
            team = teams.setdefault(namespace["namespace"], {"label": namespace["namespace"], "active": 0.0, "idle": 0.0})
            team["active"] += namespace["active_gpu_hours"]
            team["idle"] += namespace["idle_allocated_gpu_hours"]
    ordered = sorted((team for team in teams.values() if team["active"] + team["idle"] > 0), key=lambda team: -(team["active"] + team["idle"]))
    files["teams.svg"] = svg.team_bars(ordered)
    for entry in datacenters:
        costs = entry["costs"]
        files[f"cost-{entry['datacenter']}.svg"] = svg.cost_chart(
            costs["eur_per_month"], costs["cloud_eur_per_month"], costs["occupancy"], costs["break_even_occupancy"],
            f"{entry['datacenter']}: monthly cost by occupancy, on-prem against cloud")
    return files


def markdown(datacenters):
    first = datacenters[0]["occupancy"]["window"]
    lines = [
        "# GPU occupancy and cost",
        "",
        f"Window {first['start']} to {first['end']} ({first['hours']:g} h, {first['step_seconds']} s steps), "
        f"active when SM activity is above {datacenters[0]['occupancy']['sm_active_threshold']:g}. "
        "Occupancy is active over available GPU-hours; hours without samples are unknown, never idle.",
        "",
        "## Datacenters",
        "",
    ]
    rows = []
    for entry in datacenters:
        total, costs = entry["occupancy"]["total"], entry["costs"]
        per_active_hour = "n/a" if costs["eur_per_active_gpu_hour"] is None else f"{costs['eur_per_active_gpu_hour']:.2f} EUR"
        cheaper = {True: "on-prem", False: "cloud", None: "n/a"}[costs["onprem_cheaper"]]
        rows.append([entry["datacenter"]] + _row(total) + [
            _hours(total["unknown_gpu_hours"]), _eur(costs["eur_per_month"]), per_active_hour,
            _eur(costs["cloud_eur_for_active_hours"]), _percent(costs["break_even_occupancy"]), cheaper])
    lines += _table(("datacenter",) + HEADERS + ("unknown GPU-h", "on-prem per month", "per active GPU-h",
                                                 "cloud for the active hours", "break-even occupancy", "cheaper"), rows)
    lines += ["", "![GPU occupancy over time](occupancy.svg)", "", "## Nodes", ""]
    rows = [[entry["datacenter"], node["node"], node["gpus"]] + _row(node) + [_hours(node["unknown_gpu_hours"])]
            for entry in datacenters for node in entry["occupancy"]["nodes"]]
    lines += _table(("datacenter", "node", "GPUs") + HEADERS + ("unknown GPU-h",), rows)
    lines += ["", "![Allocated but idle GPU-hours per node](idle-heatmap.svg)", "", "## Teams", ""]
    rows = [[entry["datacenter"], namespace["namespace"] or "(none)"] + _row(namespace)
            for entry in datacenters for namespace in entry["occupancy"]["namespaces"]]
    lines += _table(("datacenter", "namespace") + HEADERS, rows)
    lines += ["", "![GPU-hours per team](teams.svg)", "", "## Allocated but idle", ""]
    idle = sorted(((entry["datacenter"], item) for entry in datacenters for item in entry["occupancy"]["idle_allocations"]),
                  key=lambda pair: -pair[1]["idle_allocated_hours"])
    rows = [[dc, item["node"], item["gpu"] + (f" ({item['profile']} #{item['gpu_instance']})" if item["gpu_instance"] else ""),
             item["namespace"] or "(none)", item["pod"] or "(none)", _hours(item["idle_allocated_hours"]), item["since"], item["until"]]
            for dc, item in idle[:TOP_IDLE]]
    lines += _table(("datacenter", "node", "GPU", "namespace", "pod", "idle-allocated GPU-h", "since", "until"), rows)
    if len(idle) > TOP_IDLE:
        lines += ["", f"{len(idle) - TOP_IDLE} more in gpu-occupancy.json."]
    lines += ["", "## Unknown", ""]
    unknown = [(entry["datacenter"], item) for entry in datacenters for item in entry["occupancy"]["unknown"]]
    lines += [f"- {dc}: {item['reason']}" for dc, item in unknown] or ["Every GPU the inventory declares has samples for the whole window."]
    lines += ["", "## Cost", ""]
    for entry in datacenters:
        costs = entry["costs"]
        for model in costs["models"]:
            lines.append(
                f"- {entry['datacenter']}, {model['nodes']} x {model['model']} ({model['gpus']:g} GPUs): amortisation "
                f"{_eur(model['amortisation_eur_per_month'])}, energy {_eur(model['energy_eur_per_month'])}, cooling "
                f"{_eur(model['cooling_eur_per_month'])}, hosting {_eur(model['hosting_eur_per_month'])}: {_eur(model['eur_per_month'])} "
                f"per server and month; the cloud, for the same capacity, {model['cloud_eur_per_gpu_hour']:.2f} EUR per GPU-hour "
                f"({_eur(model['cloud_eur_per_month'])} per month at 100%); break-even at {_percent(model['break_even_occupancy'])}.")
        lines += ["", f"![{entry['datacenter']} cost by occupancy](cost-{entry['datacenter']}.svg)", ""]
    lines += ["Break-even occupancy = on-prem cost per month / cloud cost of the same GPUs for a whole month, paid by the hour used.", ""]
    return "\n".join(lines)


def html(markdown_text, chart_files):
    """A standalone HTML page: the Markdown's tables and text, with the SVG charts inline."""
    body, table, items = [], [], []

    def flush_items():
        if items:
            body.append("<ul>" + "".join(f"<li>{escape(item)}</li>" for item in items) + "</ul>")
            items.clear()

    def flush_table():
        if table:
            cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in table if not line.startswith("|---")]
            body.append("<table><thead><tr>" + "".join(f"<th>{escape(cell)}</th>" for cell in cells[0]) + "</tr></thead><tbody>"
                        + "".join("<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>" for row in cells[1:])
                        + "</tbody></table>")
            table.clear()

    for line in markdown_text.splitlines():
        if line.startswith("|"):
            table.append(line)
            continue
        flush_table()
        if line.startswith("- "):
            items.append(line[2:])
            continue
        flush_items()
        if line.startswith("!["):
            name = line[line.index("(") + 1:-1]
            body.append(f"<figure>{chart_files[name]}</figure>")
        elif line.startswith("## "):
            body.append(f"<h2>{escape(line[3:])}</h2>")
        elif line.startswith("# "):
            body.append(f"<h1>{escape(line[2:])}</h1>")
        elif line:
            body.append(f"<p>{escape(line)}</p>")
    flush_table()
    flush_items()
    style = ("body{font-family:sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}td:first-child{text-align:left}")
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"/><title>GPU occupancy and cost</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def occupancy_csv(datacenters):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["window_start", "window_end", "datacenter", "scope", "name"] + list(HOURS) + ["occupancy", "unknown_gpu_hours"])
    for entry in datacenters:
        result = entry["occupancy"]
        window = result["window"]
        scopes = [("datacenter", entry["datacenter"], result["total"])]
        scopes += [("node", node["node"], node) for node in result["nodes"]]
        scopes += [("namespace", namespace["namespace"], namespace) for namespace in result["namespaces"]]
        for scope, name, values in scopes:
            writer.writerow([window["start"], window["end"], entry["datacenter"], scope, name] + [values[key] for key in HOURS]
                            + [values["occupancy"], values.get("unknown_gpu_hours", "")])
    return out.getvalue()


def cost_csv(datacenters):
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    keys = ("eur_per_month", "cloud_eur_per_month", "window_hours", "eur_in_window", "occupancy", "eur_per_active_gpu_hour",
            "cloud_eur_for_active_hours", "cloud_eur_for_allocated_hours", "break_even_occupancy", "onprem_cheaper")
    writer.writerow(["datacenter"] + list(keys))
    for entry in datacenters:
        writer.writerow([entry["datacenter"]] + [entry["costs"][key] for key in keys])
    return out.getvalue()


def report_files(datacenters):
    """File name -> text of every report file."""
    if not datacenters:
        raise ValueError("The report needs at least one datacenter.")
    files = charts(datacenters)
    text = markdown(datacenters)
    files["gpu-occupancy.md"] = text
    files["gpu-occupancy.html"] = html(text, files)
    files["gpu-occupancy.csv"] = occupancy_csv(datacenters)
    files["gpu-cost.csv"] = cost_csv(datacenters)
    files["gpu-occupancy.json"] = json.dumps(datacenters, indent=1, sort_keys=True) + "\n"
    return files
