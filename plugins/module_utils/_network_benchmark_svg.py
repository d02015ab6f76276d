# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The network benchmark's charts: busbw (GB/s) against message size as a self-contained SVG line chart.

Plain Python without Ansible imports: the filter onprem.gpu.network_benchmark_svg wraps it, and the tests call it directly.
Bad input raises ValueError.
"""

from __future__ import annotations

import math
from html import escape

_CHART = {"width": 820, "height": 380, "left": 64, "right": 240, "top": 40, "bottom": 56}
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#d62728")


def busbw_chart(series, title, threshold=None, min_size=None):
    """An SVG line chart of busbw (GB/s) against message size (bytes, log2 axis).

    ``series`` is a list of dicts with ``label`` and ``points`` ([size, busbw] pairs; a busbw of None is
    left out). ``threshold`` draws the pass line from ``min_size`` on (from the smallest size without it).
    """
    if not isinstance(series, list):
        raise ValueError("series must be a list of {label, points}.")
    lines = []
    for entry in series:
        try:
            points = [(int(size), float(busbw)) for size, busbw in entry["points"] if busbw is not None and int(size) > 0]
        except (KeyError, TypeError, ValueError):
            raise ValueError(f"a series needs a label and [size, busbw] points, not {entry!r}.")
        if points:
            lines.append((str(entry.get("label", "")), sorted(points)))
    chart = _CHART
    plot_width = chart["width"] - chart["left"] - chart["right"]
    plot_height = chart["height"] - chart["top"] - chart["bottom"]
    sizes = [point[0] for _label, points in lines for point in points] or [1 << 10, 1 << 30]
    low, high = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    high = max(high, low + 1)
    peak = max([point[1] for _label, points in lines for point in points] + [float(threshold or 0), 1.0])
    top, step = _axis_top(peak)

    def x_of(size):
        return chart["left"] + (math.log2(size) - low) / (high - low) * plot_width

    def y_of(value):
        return chart["top"] + plot_height - value / top * plot_height

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{chart["width"]}" height="{chart["height"]}" '
        f'viewBox="0 0 {chart["width"]} {chart["height"]}" font-family="sans-serif" font-size="11">',
        f'<rect width="{chart["width"]}" height="{chart["height"]}" fill="#ffffff"/>',
        f'<text x="{chart["width"] / 2:.0f}" y="22" text-anchor="middle" font-size="14" font-weight="bold">{escape(str(title))}</text>',
    ]
    for index in range(int(round(top / step)) + 1):
        value = index * step
        y = y_of(value)
        parts.append(f'<line x1="{chart["left"]}" y1="{y:.1f}" x2="{chart["left"] + plot_width}" y2="{y:.1f}" stroke="#e0e0e0"/>')
        parts.append(f'<text x="{chart["left"] - 6}" y="{y + 4:.1f}" text-anchor="end">{value:g}</text>')
    label_every = max(1, math.ceil((high - low) / 12))
    for exponent in range(low, high + 1):
        x = x_of(2 ** exponent)
        parts.append(f'<line x1="{x:.1f}" y1="{chart["top"]}" x2="{x:.1f}" y2="{chart["top"] + plot_height}" stroke="#f0f0f0"/>')
        if (exponent - low) % label_every == 0:
            parts.append(f'<text x="{x:.1f}" y="{chart["top"] + plot_height + 16}" text-anchor="middle">{_size_label(2 ** exponent)}</text>')
    parts.append(f'<rect x="{chart["left"]}" y="{chart["top"]}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#333333"/>')
    parts.append(f'<text x="{chart["left"] + plot_width / 2:.0f}" y="{chart["height"] - 14}" text-anchor="middle">message size (bytes, log scale)</text>')
    parts.append(f'<text transform="translate(16 {chart["top"] + plot_height / 2:.0f}) rotate(-90)" text-anchor="middle">busbw (GB/s)</text>')
    legend_y = chart["top"] + 8
    if threshold is not None:
        start = x_of(max(2 ** low, int(min_size or 0) or 2 ** low))
        y = y_of(float(threshold))
        parts.append(f'<line x1="{start:.1f}" y1="{y:.1f}" x2="{chart["left"] + plot_width}" y2="{y:.1f}" '
                     'stroke="#d62728" stroke-width="1.5" stroke-dasharray="6 4"/>')
        parts.append(_legend_entry(chart, legend_y, "#d62728", f"threshold {float(threshold):g}", dashed=True))
        legend_y += 18
    for index, (label, points) in enumerate(lines):
        colour = _COLOURS[index % len(_COLOURS)]
        path = " ".join(f"{x_of(size):.1f},{y_of(busbw):.1f}" for size, busbw in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts.extend(f'<circle cx="{x_of(size):.1f}" cy="{y_of(busbw):.1f}" r="2.5" fill="{colour}"/>' for size, busbw in points)
        parts.append(_legend_entry(chart, legend_y, colour, label))
        legend_y += 18
    if not lines:
        parts.append(f'<text x="{chart["left"] + plot_width / 2:.0f}" y="{chart["top"] + plot_height / 2:.0f}" '
                     'text-anchor="middle" fill="#d62728">no results: the run printed no table</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _legend_entry(chart, y, colour, label, dashed=False):
    x = chart["width"] - chart["right"] + 12
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return (f'<line x1="{x}" y1="{y}" x2="{x + 18}" y2="{y}" stroke="{colour}" stroke-width="2"{dash}/>'
            f'<text x="{x + 24}" y="{y + 4}">{escape(label[:34])}</text>')


def _axis_top(peak):
    """A round top for the busbw axis and a step that gives at most 12 grid lines."""
    magnitude = 10 ** math.floor(math.log10(peak))
    for factor in (0.1, 0.2, 0.25, 0.5, 1, 2, 5):
        step = magnitude * factor
        top = math.ceil(peak * 1.05 / step) * step
        if top / step <= 12:
            return top, step
    return math.ceil(peak / magnitude) * magnitude, magnitude


def _size_label(size):
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor:
            return f"{size // factor}{unit}"
    return str(size)
