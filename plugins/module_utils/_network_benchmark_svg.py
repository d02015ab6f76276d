# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The network benchmark's charts as self-contained SVG: busbw (GB/s) against message size for a few runs, and each
run's peak busbw against the threshold when there are more than a legend and eight colours can tell apart.

Plain Python without Ansible imports: the filter onprem.gpu.network_benchmark_svg wraps it, and the tests call it directly.
Bad input raises ValueError.
"""

from __future__ import annotations

import math

from ansible_collections.onprem.gpu.plugins.module_utils import _svg as svg

# More curves than this are one tangle: the chart becomes a bar per run (each run's own chart keeps its curves).
MAX_CURVES = 8
FONT = 11
TITLE = 14
LINE = 15  # px between lines of text
_CURVES = {"width": 840, "min_height": 380, "left": 64, "right": 250, "top": 40, "bottom": 56}
_MARKERS = ("circle", "square", "triangle", "diamond")
PASS, FAIL = svg.BLUE, svg.ORANGE
_THRESHOLD_LINE = svg.stroke(svg.THRESHOLD, 1.5, "6 4")


def busbw_chart(series, title, threshold=None, min_size=None):
    """An SVG chart of busbw (GB/s): against message size (bytes, log2 axis) for at most MAX_CURVES series, else
    each series' peak busbw as a bar, lowest first.

    ``series`` is a list of dicts with ``label`` and ``points`` ([size, busbw] pairs; a busbw of None is left out), and
    optionally the run's own ``threshold`` and ``verdict`` (``pass`` or another word; without it a series fails when its
    peak is below its threshold). ``threshold`` draws the pass line from ``min_size`` on (from the smallest size
    without it); bars show the peak of the sizes from ``min_size`` on, the ones that are judged.
    """
    runs = _runs(series)
    if len(runs) > MAX_CURVES:
        return _peak_bars(runs, title, threshold, min_size)
    return _curves(runs, title, threshold, min_size)


def _runs(series):
    if not isinstance(series, list):
        raise ValueError("series must be a list of {label, points}.")
    runs = []
    for entry in series:
        try:
            points = sorted((int(size), float(busbw)) for size, busbw in entry["points"] if busbw is not None and int(size) > 0)
            own = entry.get("threshold")
            runs.append({"label": str(entry.get("label", "")), "points": points, "threshold": None if own is None else float(own),
                         "verdict": entry.get("verdict")})
        except (AttributeError, KeyError, TypeError, ValueError):
            raise ValueError(f"a series needs a label and [size, busbw] points, not {entry!r}.")
    return runs


def _title(width, title):
    lines = svg.wrap(title, width - 24, TITLE, bold=True, max_lines=2)
    parts = [svg.text(width / 2, 22 + index * (TITLE + 4), line, "middle", TITLE, ' font-weight="bold"') for index, line in enumerate(lines)]
    return parts, 22 + (len(lines) - 1) * (TITLE + 4)


def _curves(runs, title, threshold, min_size):
    chart = _CURVES
    width = chart["width"]
    legend_x = width - chart["right"] + 12
    legend_width = chart["right"] - 12
    title_parts, title_bottom = _title(width, title)
    top = title_bottom + 18
    drawn = [run for run in runs if run["points"]]
    legend = []
    if threshold is not None:
        legend.append((lambda x, y: svg.line(x, y, x + 30, y, _THRESHOLD_LINE), f"threshold {float(threshold):g} GB/s"))
    for run in runs:
        if run["points"]:
            failed = run["verdict"] not in (None, "pass")
            legend.append((_swatch(*_SERIES_STYLE[drawn.index(run) % len(_SERIES_STYLE)]), run["label"] + (": FAIL" if failed else "")))
        else:
            legend.append((None, f"{run['label']}: no result"))
    height = max(chart["min_height"], top + 8 + svg.legend_height(legend, legend_width, FONT, LINE) + chart["bottom"])
    plot_width = width - chart["left"] - chart["right"]
    plot_height = height - top - chart["bottom"]
    sizes = [size for run in drawn for size, _busbw in run["points"]] or [1 << 10, 1 << 30]
    low, high = math.floor(math.log2(min(sizes))), math.ceil(math.log2(max(sizes)))
    high = max(high, low + 1)
    peak = max([busbw for run in drawn for _size, busbw in run["points"]] + [float(threshold or 0), 1.0])
    axis_top, ticks = svg.axis(peak, 12)

    def x_of(size):
        return chart["left"] + (math.log2(size) - low) / (high - low) * plot_width

    def y_of(value):
        return top + plot_height - value / axis_top * plot_height

    parts = list(title_parts)
    for value, label in zip(ticks, svg.tick_labels(ticks)):
        y = y_of(value)
        parts.append(svg.line(chart["left"], y, chart["left"] + plot_width, y, 'stroke="#e0e0e0"'))
        parts.append(svg.text(chart["left"] - 6, y + 4, label, "end"))
    label_every = max(1, math.ceil((high - low) / 12))
    for exponent in range(low, high + 1):
        x = x_of(2 ** exponent)
        parts.append(svg.line(x, top, x, top + plot_height, 'stroke="#f0f0f0"'))
        if (exponent - low) % label_every == 0:
            parts.append(svg.text(x, top + plot_height + 16, _size_label(2 ** exponent), "middle"))
    parts.append(f'<rect x="{chart["left"]}" y="{top}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#333333"/>')
    parts.append(svg.text(chart["left"] + plot_width / 2, height - 14, "message size (bytes, log scale)", "middle"))
    parts.append(svg.text(0, 0, "busbw (GB/s)", "middle", extra=f' transform="translate(16 {top + plot_height / 2:.0f}) rotate(-90)"'))
    if threshold is not None:
        start = x_of(max(2 ** low, int(min_size or 0) or 2 ** low))
        y = y_of(float(threshold))
        parts.append(svg.line(start, y, chart["left"] + plot_width, y, _THRESHOLD_LINE))
    for index, run in enumerate(drawn):
        colour, marker = _SERIES_STYLE[index % len(_SERIES_STYLE)]
        path = " ".join(f"{x_of(size):.1f},{y_of(busbw):.1f}" for size, busbw in run["points"])
        parts.append(f'<polyline points="{path}" fill="none" {svg.stroke(colour)}/>')
        parts.extend(_marker(marker, x_of(size), y_of(busbw), colour) for size, busbw in run["points"])
    parts += svg.legend(legend_x, top + 8, legend, legend_width, FONT, LINE)[0]
    if not drawn:
        parts.append(svg.text(chart["left"] + plot_width / 2, top + plot_height / 2, "no results: the run printed no table", "middle",
                              extra=f' fill="{svg.THRESHOLD}"'))
    return svg.document(width, height, FONT, title, parts)


# Eight colours, and a marker shape that changes with every colour, so that no two curves look alike in print either.
_SERIES_STYLE = tuple((colour, _MARKERS[index % len(_MARKERS)]) for index, colour in enumerate(svg.SERIES))


def _swatch(colour, marker):
    return lambda x, y: svg.line(x, y, x + 30, y, svg.stroke(colour)) + _marker(marker, x + 15, y, colour)


def _marker(shape, x, y, colour):
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.8" fill="{colour}"/>'
    if shape == "square":
        return f'<rect x="{x - 2.6:.1f}" y="{y - 2.6:.1f}" width="5.2" height="5.2" fill="{colour}"/>'
    if shape == "triangle":
        return f'<polygon points="{x:.1f},{y - 3.4:.1f} {x + 3.2:.1f},{y + 2.4:.1f} {x - 3.2:.1f},{y + 2.4:.1f}" fill="{colour}"/>'
    return f'<polygon points="{x:.1f},{y - 3.6:.1f} {x + 3.4:.1f},{y:.1f} {x:.1f},{y + 3.6:.1f} {x - 3.4:.1f},{y:.1f}" fill="{colour}"/>'


def _peak_bars(runs, title, threshold, min_size):
    """One horizontal bar per run: its peak busbw over the judged sizes, lowest first, failures hatched and labelled."""
    judged_from = int(min_size or 0)
    rows = []
    for run in runs:
        judged = [busbw for size, busbw in run["points"] if size >= judged_from]
        peak = max(judged) if judged else None
        limit = run["threshold"] if run["threshold"] is not None else (None if threshold is None else float(threshold))
        if run["verdict"] is not None:
            failed = run["verdict"] != "pass"
        else:
            failed = peak is None or (limit is not None and peak < limit)
        rows.append({"label": run["label"], "peak": peak, "threshold": limit, "failed": failed})
    rows.sort(key=lambda row: (row["peak"] is not None, row["peak"] or 0.0, row["label"]))
    width, row_height, plot_width, value_room = 900, 20, 500, 120
    label_room = min(max(svg.text_width(row["label"], FONT) for row in rows) + 12, width - plot_width - value_room - 24)
    left = 12 + label_room
    title_parts, title_bottom = _title(width, title)
    size_note = f" at {_size_label(judged_from)} and above" if judged_from else ""
    failures = sum(row["failed"] for row in rows)
    notes = svg.wrap(f"Peak busbw{size_note} of each of {len(rows)} runs, lowest first; {failures} failed. "
                     "Each run's busbw against message size is in its own chart.", width - 24, FONT, max_lines=2)
    parts = list(title_parts)
    parts.extend(svg.text(width / 2, title_bottom + 20 + index * LINE, line, "middle") for index, line in enumerate(notes))
    legend_y = title_bottom + 20 + len(notes) * LINE + 6
    limits = [row["threshold"] for row in rows if row["threshold"] is not None]
    legend = [("rect", PASS, PASS, "passed"), ("rect", "url(#failed)", FAIL, "failed")]
    parts += svg.row_legend(left, legend_y, legend + [("line", _THRESHOLD_LINE, None, "threshold")] * bool(limits), FONT)[0]
    top = legend_y + 34
    plot_height = row_height * len(rows)
    axis_top, ticks = svg.axis(max([row["peak"] or 0.0 for row in rows] + limits + [1.0]), 8)

    def x_of(value):
        return left + value / axis_top * plot_width

    tick_labels = svg.tick_labels(ticks)
    for value, label in zip(ticks, tick_labels):
        x = x_of(value)
        parts.append(svg.line(x, top, x, top + plot_height, 'stroke="#e0e0e0"'))
        parts.append(svg.text(x, top - 6, label, "middle"))
        parts.append(svg.text(x, top + plot_height + 16, label, "middle"))
    parts.append(svg.text(left + plot_width / 2, top + plot_height + 34, f"peak busbw{size_note} (GB/s)", "middle"))
    for index, row in enumerate(rows):
        y = top + index * row_height
        parts.append(svg.text(left - 8, y + row_height / 2 + 4, svg.fit(row["label"], label_room - 12, FONT), "end"))
        if row["peak"] is None:
            parts.append(svg.text(left + 6, y + row_height / 2 + 4, "no result: FAIL", extra=' font-weight="bold"'))
            continue
        fill, edge = ("url(#failed)", FAIL) if row["failed"] else (PASS, PASS)
        parts.append(f'<rect x="{left}" y="{y + 3}" width="{x_of(row["peak"]) - left:.1f}" height="{row_height - 6}" fill="{fill}" stroke="{edge}"/>')
        value = f"{row['peak']:.1f}" + (" FAIL" if row["failed"] else "")
        parts.append(svg.text(x_of(row["peak"]) + 6, y + row_height / 2 + 4, value, extra=svg.HALO + (' font-weight="bold"' if row["failed"] else "")))
        if threshold is None and row["threshold"] is not None:
            x = x_of(row["threshold"])
            parts.append(svg.line(x, y, x, y + row_height, _THRESHOLD_LINE))
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_width}" height="{plot_height}" fill="none" stroke="#333333"/>')
    if threshold is not None:
        x = x_of(float(threshold))
        parts.append(svg.line(x, top, x, top + plot_height, _THRESHOLD_LINE))
        parts.append(svg.text(x, top - 20, f"threshold {float(threshold):g}", "middle", extra=f' fill="{svg.THRESHOLD}"'))
    height = top + plot_height + 48
    return svg.document(width, height, FONT, title, parts, defs=[svg.hatch("failed", FAIL)])


def _size_label(size):
    for unit, factor in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if size >= factor:
            return f"{size // factor}{unit}"
    return str(size)
