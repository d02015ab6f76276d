# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU occupancy report's charts as standalone SVG documents (pure Python, no plotting library).

Each function takes plain data and returns the SVG text: occupancy over time, a heat map of idle-allocated
GPU-hours per node, GPU-hours per team, and on-prem against cloud cost by occupancy with the break-even point.
"""

from __future__ import annotations

import math
from html import escape

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")
ACTIVE, IDLE, UNKNOWN = "#2ca02c", "#d62728", "#bdbdbd"
FONT = 'font-family="sans-serif" font-size="12"'


def _document(width, height, title, body):
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img">'
        f'<title>{escape(title)}</title><rect width="{width}" height="{height}" fill="#ffffff"/>'
        f'<text x="{width / 2:.1f}" y="22" text-anchor="middle" font-family="sans-serif" font-size="15" font-weight="bold">{escape(title)}</text>'
        + "".join(body) + "</svg>\n"
    )


def _text(x, y, text, anchor="start", extra=""):
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" {FONT}{extra}>{escape(str(text))}</text>'


def _nice_max(value):
    """The smallest 4 x (1, 2, 2.5 or 5 x 10^k) at or above ``value``, so that the four gridlines fall on round numbers."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** math.floor(math.log10(value / 4))
    for factor in (1, 2, 2.5, 5, 10):
        if 4 * factor * magnitude >= value:
            return 4 * factor * magnitude
    return 40 * magnitude


def _red(share):
    return f"rgb(255,{int(255 - 215 * share)},{int(255 - 215 * share)})"


def _axes(left, top, width, height, y_max, y_label, y_format):
    body = [f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#444"/>']
    for tick in range(5):
        value = y_max * tick / 4
        y = top + height - height * tick / 4
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + width}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        body.append(_text(left - 6, y + 4, y_format(value), "end"))
    body.append(_text(16, top + height / 2, y_label, "middle", f' transform="rotate(-90 16 {top + height / 2:.1f})"'))
    return body


def _date_ticks(times, left, width, top, height, every=None):
    """Day labels under a time axis of ``times`` (RFC 3339 strings, one per bucket)."""
    body = []
    if not times:
        return body
    every = every or max(1, len(times) // 6)
    for index in range(0, len(times), every):
        x = left + width * index / len(times)
        body.append(f'<line x1="{x:.1f}" y1="{top + height}" x2="{x:.1f}" y2="{top + height + 4}" stroke="#444"/>')
        body.append(_text(x, top + height + 17, times[index][:10], "middle"))
    return body


def occupancy_chart(series, title="GPU occupancy over time"):
    """Lines of occupancy (solid) and allocated share (dashed) over time.

    ``series``: list of ``{"label", "times", "active", "allocated", "available"}`` (GPU-hours per bucket).
    """
    width, height, left, top, plot_w, plot_h = 860, 360, 64, 40, 600, 260
    body = _axes(left, top, plot_w, plot_h, 100, "% of available GPU-hours", lambda value: f"{value:.0f}%")
    times = series[0]["times"] if series else []
    body += _date_ticks(times, left, plot_w, top, plot_h)
    legend_y = top + 8
    for number, entry in enumerate(series):
        colour = COLOURS[number % len(COLOURS)]
        count = len(entry["times"])
        for key, dash, label in (("active", "", "active"), ("allocated", ' stroke-dasharray="6 4"', "allocated")):
            points = []
            for index, (value, available) in enumerate(zip(entry[key], entry["available"])):
                if available > 0:
                    x = left + plot_w * (index + 0.5) / count
                    y = top + plot_h - plot_h * min(value / available, 1.0)
                    points.append(f"{x:.1f},{y:.1f}")
            if points:
                body.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.6"{dash} points="{" ".join(points)}"/>')
            body.append(f'<line x1="{left + plot_w + 16}" y1="{legend_y:.1f}" x2="{left + plot_w + 40}" y2="{legend_y:.1f}" '
                        f'stroke="{colour}" stroke-width="2"{dash}/>')
            body.append(_text(left + plot_w + 46, legend_y + 4, f"{entry['label']} {label}"))
            legend_y += 18
    return _document(width, height, title, body)


def heat_map(rows, times, title="Allocated but idle GPU-hours per node"):
    """One row per node, one cell per bucket, red by the share of the node's available GPU-hours that were idle-allocated.

    ``rows``: list of ``{"label", "idle", "available"}``; a cell without available hours (no data) is grey. The darkest
    red is the largest share in the chart, so that one forgotten GPU of eight still shows.
    """
    left, top, plot_w, row_h = 150, 40, 640, 22
    height = top + row_h * len(rows) + 70
    width = left + plot_w + 40
    body = []
    count = max(len(times), 1)
    cell_w = plot_w / count
    shares = [idle / available for row in rows for idle, available in zip(row["idle"], row["available"]) if available > 0]
    darkest = max(shares + [0.0]) or 1.0
    for row_index, row in enumerate(rows):
        y = top + row_index * row_h
        body.append(_text(left - 8, y + row_h / 2 + 4, row["label"], "end"))
        for index, (idle, available) in enumerate(zip(row["idle"], row["available"])):
            if available > 0:
                colour = _red(min(idle / available / darkest, 1.0))
            else:
                colour = UNKNOWN
            body.append(f'<rect x="{left + index * cell_w:.2f}" y="{y}" width="{cell_w + 0.05:.2f}" height="{row_h - 2}" fill="{colour}"/>')
    body += _date_ticks(times, left, plot_w, top, row_h * len(rows) - 2)
    legend_y = top + row_h * len(rows) + 32
    for step in range(6):
        body.append(f'<rect x="{left + step * 40}" y="{legend_y}" width="40" height="10" fill="{_red(step / 5)}" stroke="#ccc"/>')
    body.append(_text(left + 246, legend_y + 10, f"0% to {darkest * 100:.0f}% of the node's GPU-hours idle but allocated"))
    body.append(f'<rect x="{left - 100}" y="{legend_y}" width="14" height="10" fill="{UNKNOWN}"/>')
    body.append(_text(left - 82, legend_y + 10, "no data"))
    return _document(width, height, title, body)


def team_bars(teams, title="GPU-hours per team"):
    """Horizontal bars per namespace: active and idle-allocated GPU-hours stacked.

    ``teams``: list of ``{"label", "active", "idle"}``, drawn in the given order.
    """
    left, top, plot_w, row_h = 170, 40, 560, 24
    height = top + row_h * max(len(teams), 1) + 60
    width = left + plot_w + 120
    peak = max([team["active"] + team["idle"] for team in teams] + [1.0])
    body = []
    for index, team in enumerate(teams):
        y = top + index * row_h
        active_w = plot_w * team["active"] / peak
        idle_w = plot_w * team["idle"] / peak
        body.append(_text(left - 8, y + row_h / 2 + 4, team["label"] or "(no namespace)", "end"))
        body.append(f'<rect x="{left}" y="{y + 3}" width="{active_w:.1f}" height="{row_h - 6}" fill="{ACTIVE}"/>')
        body.append(f'<rect x="{left + active_w:.1f}" y="{y + 3}" width="{idle_w:.1f}" height="{row_h - 6}" fill="{IDLE}"/>')
        body.append(_text(left + active_w + idle_w + 6, y + row_h / 2 + 4, f"{team['active'] + team['idle']:,.0f} h"))
    legend_y = top + row_h * max(len(teams), 1) + 24
    body.append(f'<rect x="{left}" y="{legend_y}" width="14" height="10" fill="{ACTIVE}"/>')
    body.append(_text(left + 20, legend_y + 10, "active GPU-hours"))
    body.append(f'<rect x="{left + 160}" y="{legend_y}" width="14" height="10" fill="{IDLE}"/>')
    body.append(_text(left + 180, legend_y + 10, "allocated but idle GPU-hours"))
    return _document(width, height, title, body)


def cost_chart(onprem_eur, cloud_eur_full, measured, break_even, title="Monthly cost by occupancy"):
    """On-prem cost (flat) and cloud cost paid by the hour used (a line from 0) against occupancy, with both markers."""
    width, height, left, top, plot_w, plot_h = 860, 360, 80, 40, 580, 260
    peak = _nice_max(max(onprem_eur, cloud_eur_full, 1.0) * 1.05)
    body = _axes(left, top, plot_w, plot_h, peak, "EUR per month", lambda value: f"{value / 1000:,.0f}k")
    for tick in range(0, 101, 20):
        x = left + plot_w * tick / 100
        body.append(_text(x, top + plot_h + 17, f"{tick}%", "middle"))
    body.append(_text(left + plot_w / 2, top + plot_h + 36, "occupancy (active / available GPU-hours)", "middle"))

    def y_of(value):
        return top + plot_h - plot_h * value / peak

    body.append(f'<line x1="{left}" y1="{y_of(onprem_eur):.1f}" x2="{left + plot_w}" y2="{y_of(onprem_eur):.1f}" stroke="{COLOURS[0]}" stroke-width="2"/>')
    body.append(f'<line x1="{left}" y1="{y_of(0):.1f}" x2="{left + plot_w}" y2="{y_of(cloud_eur_full):.1f}" stroke="{COLOURS[1]}" stroke-width="2"/>')
    if break_even is not None and break_even <= 1:
        x = left + plot_w * break_even
        body.append(f'<circle cx="{x:.1f}" cy="{y_of(onprem_eur):.1f}" r="5" fill="#000"/>')
        body.append(_text(x + 8, y_of(onprem_eur) - 8, f"break-even {break_even * 100:.1f}%"))
    if measured is not None:
        x = left + plot_w * min(measured, 1.0)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="{ACTIVE}" stroke-dasharray="5 4" stroke-width="2"/>')
        body.append(_text(x + 6, top + 16, f"measured {measured * 100:.1f}%"))
    legend = ((COLOURS[0], f"on-prem {onprem_eur:,.0f} EUR/month"), (COLOURS[1], f"cloud, hours used ({cloud_eur_full:,.0f} at 100%)"),
              (ACTIVE, "measured occupancy"))
    for index, (colour, label) in enumerate(legend):
        y = top + 8 + index * 18
        body.append(f'<line x1="{left + plot_w + 12}" y1="{y}" x2="{left + plot_w + 34}" y2="{y}" stroke="{colour}" stroke-width="2"/>')
        body.append(_text(left + plot_w + 40, y + 4, label))
    return _document(width + 60, height, title, body)
