# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU occupancy report's charts as standalone SVG documents (pure Python, no plotting library).

Each function takes plain data and returns the SVG text: occupancy over time, a heat map of idle-allocated
GPU-hours per node, GPU-hours per team, and on-prem against cloud cost by occupancy with the break-even point.
Active is blue and idle orange (Okabe-Ito: told apart with every kind of colour vision), and idle is hatched as well;
time axes run in UTC from the window's start to its end.
"""

from __future__ import annotations

from datetime import datetime, timezone

from ansible_collections.onprem.gpu.plugins.module_utils import _svg as svg

FONT = 12
LINE = 16
ACTIVE, IDLE = svg.BLUE, svg.ORANGE
IDLE_FILL, NO_DATA_FILL = "url(#idle)", "url(#no-data)"
# Each chart defines only the pattern it uses: the HTML report inlines them all in one page, where ids must be unique.
_IDLE_PATTERN, _NO_DATA_PATTERN = svg.hatch("idle", IDLE), svg.hatch("no-data", svg.GREY)
# The heat map's darkest cell: Okabe-Ito's vermillion darkened, a ramp of one hue from white that any eye reads by lightness.
_HEAT = (166, 54, 3)
_TIME_LABEL = 96  # px a time tick label needs, with room on both sides


def _title(width, title):
    lines = svg.wrap(title, width - 24, 15, bold=True, max_lines=2)
    parts = [svg.text(width / 2, 22 + index * 19, line, "middle", 15, ' font-weight="bold"') for index, line in enumerate(lines)]
    return parts, 22 + (len(lines) - 1) * 19


def _value_axis(left, top, width, height, ticks, labels, y_label):
    body = [f'<rect x="{left}" y="{top:.1f}" width="{width}" height="{height}" fill="none" stroke="#444"/>']
    for tick, label in zip(ticks, labels):
        y = top + height - height * tick / ticks[-1]
        body.append(svg.line(left, y, left + width, y, 'stroke="#e0e0e0"'))
        body.append(svg.text(left - 6, y + 4, label, "end"))
    body.append(svg.text(16, top + height / 2, y_label, "middle", extra=f' transform="rotate(-90 16 {top + height / 2:.1f})"'))
    return body


def _seconds(stamp):
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _time_axis(start, end, left, width, y):
    """Ticks and UTC labels under a time axis from ``start`` to ``end`` (RFC 3339): the window's two ends and round times
    between them (hours, days or weeks, as many as fit), then "time (UTC)"."""
    first, last = _seconds(start), _seconds(end)
    span = max(last - first, 1.0)
    room = max(1, int(width // _TIME_LABEL))
    interval = next((step for step in (3600 * hours for hours in (1, 2, 3, 6, 12, 24, 48, 168, 336, 672)) if span / step <= room), span)
    stamps = [first] + list(range(int(first // interval + 1) * int(interval), int(last), int(interval))) + [last]

    def x_of(stamp):
        return left + width * (stamp - first) / span

    kept = [first]
    for stamp in stamps[1:-1]:
        if x_of(stamp) - x_of(kept[-1]) >= _TIME_LABEL and x_of(last) - x_of(stamp) >= _TIME_LABEL:
            kept.append(stamp)
    kept.append(last)
    body = []
    for stamp in kept:
        moment = datetime.fromtimestamp(stamp, tz=timezone.utc)
        label = moment.strftime("%Y-%m-%d") if moment.hour == moment.minute == moment.second == 0 else moment.strftime("%m-%d %H:%M")
        anchor = "start" if stamp == first else ("end" if stamp == last else "middle")
        body.append(svg.line(x_of(stamp), y, x_of(stamp), y + 4, 'stroke="#444"'))
        body.append(svg.text(x_of(stamp), y + 17, label, anchor))
    body.append(svg.text(left + width / 2, y + 35, "time (UTC)", "middle"))
    return body


def occupancy_chart(series, end, title="GPU occupancy over time"):
    """Lines of occupancy (solid) and allocated share (dashed) over time, up to the window's ``end`` (RFC 3339).

    ``series``: list of ``{"label", "times", "active", "allocated", "available"}`` (GPU-hours per bucket, ``times`` the
    buckets' starts).
    """
    width, left, plot_w = 900, 64, 600
    legend_x, legend_w = left + plot_w + 16, width - left - plot_w - 24
    title_parts, title_bottom = _title(width, title)
    top = title_bottom + 20
    legend = []
    for number, entry in enumerate(series):
        colour = svg.SERIES[number % len(svg.SERIES)]
        for dash, what in (("", "active"), ("6 4", "allocated")):
            legend.append((_line_swatch(svg.stroke(colour, 2, dash)), f"{entry['label']} {what}"))
    plot_h = max(260, svg.legend_height(legend, legend_w, FONT, LINE) + 8)
    ticks = [0, 25, 50, 75, 100]
    body = title_parts + _value_axis(left, top, plot_w, plot_h, ticks, [f"{tick}%" for tick in ticks], "% of available GPU-hours")
    times = series[0]["times"] if series else []
    if times:
        body += _time_axis(times[0], end, left, plot_w, top + plot_h)
    for number, entry in enumerate(series):
        colour = svg.SERIES[number % len(svg.SERIES)]
        count = len(entry["times"])
        for key, dash in (("active", ""), ("allocated", "6 4")):
            points = []
            for index, (value, available) in enumerate(zip(entry[key], entry["available"])):
                if available > 0:
                    x = left + plot_w * (index + 0.5) / count
                    y = top + plot_h - plot_h * min(value / available, 1.0)
                    points.append(f"{x:.1f},{y:.1f}")
            if points:
                body.append(f'<polyline fill="none" {svg.stroke(colour, 2, dash)} points="{" ".join(points)}"/>')
    body += svg.legend(legend_x, top + 8, legend, legend_w, FONT, LINE)[0]
    return svg.document(width, top + plot_h + 52, FONT, title, body)


def _line_swatch(attributes):
    return lambda x, y: svg.line(x, y, x + 30, y, attributes)


def _rect_swatch(fill, edge):
    return lambda x, y: f'<rect x="{x + 6}" y="{y - 6:.1f}" width="18" height="12" fill="{fill}" stroke="{edge}"/>'


def _heat(share):
    return "rgb({},{},{})".format(*(round(255 - (255 - dark) * share) for dark in _HEAT))


def _label_column(labels, most=280):
    return min(max([svg.text_width(label, FONT) for label in labels] + [40.0]) + 16, most)


def heat_map(rows, times, end, title="Allocated but idle GPU-hours per node"):
    """One row per node, one cell per bucket, darker by the share of the node's available GPU-hours that were idle-allocated.

    ``rows``: list of ``{"label", "idle", "available"}``; a cell without available hours (no data) is hatched grey.
    The darkest cell is the largest share in the chart, so that one forgotten GPU of eight still shows. ``times`` are
    the buckets' starts and ``end`` the window's end (RFC 3339).
    """
    row_h, plot_w = 22, 640
    left = 12 + _label_column([row["label"] for row in rows])
    width = left + plot_w + 60
    title_parts, title_bottom = _title(width, title)
    top = title_bottom + 20
    body = list(title_parts)
    count = max(len(times), 1)
    cell_w = plot_w / count
    shares = [idle / available for row in rows for idle, available in zip(row["idle"], row["available"]) if available > 0]
    darkest = max(shares + [0.0]) or 1.0
    for row_index, row in enumerate(rows):
        y = top + row_index * row_h
        body.append(svg.text(left - 8, y + row_h / 2 + 4, svg.fit(row["label"], left - 20, FONT), "end"))
        for index, (idle, available) in enumerate(zip(row["idle"], row["available"])):
            fill = _heat(min(idle / available / darkest, 1.0)) if available > 0 else NO_DATA_FILL
            body.append(f'<rect x="{left + index * cell_w:.2f}" y="{y}" width="{cell_w + 0.05:.2f}" height="{row_h - 2}" fill="{fill}"/>')
    plot_h = row_h * len(rows) - 2
    if times:
        body += _time_axis(times[0], end, left, plot_w, top + plot_h)
    legend_y = top + plot_h + 52
    for step in range(6):
        body.append(f'<rect x="{left + step * 40}" y="{legend_y}" width="40" height="12" fill="{_heat(step / 5)}" stroke="#ccc"/>')
    body.append(svg.text(left, legend_y + 28, f"0% to {darkest * 100:.0f}% of the node's GPU-hours idle but allocated"))
    body.append(f'<rect x="{left + 280}" y="{legend_y}" width="18" height="12" fill="{NO_DATA_FILL}" stroke="#999"/>')
    body.append(svg.text(left + 304, legend_y + 10, "no data"))
    return svg.document(width, legend_y + 44, FONT, title, body, [_NO_DATA_PATTERN])


def team_bars(teams, title="GPU-hours per team"):
    """Horizontal bars per namespace: active (solid blue) and idle-allocated (hatched orange) GPU-hours stacked, on a
    GPU-hours axis.

    ``teams``: list of ``{"label", "active", "idle"}``, drawn in the given order.
    """
    row_h, plot_w, value_room = 24, 560, 110
    labels = [team["label"] or "(no namespace)" for team in teams]
    left = 12 + _label_column(labels)
    width = left + plot_w + value_room
    title_parts, title_bottom = _title(width, title)
    legend_y = title_bottom + 24
    top = legend_y + 40
    axis_top, ticks = svg.axis(max([team["active"] + team["idle"] for team in teams] + [1.0]), 6)
    plot_h = row_h * max(len(teams), 1)
    body = list(title_parts)
    legend = ((_rect_swatch(ACTIVE, ACTIVE), "active GPU-hours"), (_rect_swatch(IDLE_FILL, IDLE), "allocated but idle GPU-hours"))
    x = left
    for swatch, label in legend:
        body += svg.legend(x, legend_y, [(swatch, label)], svg.text_width(label, FONT) + 40, FONT, LINE)[0]
        x += svg.text_width(label, FONT) + 64

    def x_of(value):
        return left + plot_w * value / axis_top

    for tick, label in zip(ticks, svg.tick_labels(ticks)):
        body.append(svg.line(x_of(tick), top, x_of(tick), top + plot_h, 'stroke="#e0e0e0"'))
        body.append(svg.text(x_of(tick), top - 6, label, "middle"))
        body.append(svg.text(x_of(tick), top + plot_h + 16, label, "middle"))
    body.append(svg.text(left + plot_w / 2, top + plot_h + 34, "GPU-hours in the window", "middle"))
    for index, (team, label) in enumerate(zip(teams, labels)):
        y = top + index * row_h
        body.append(svg.text(left - 8, y + row_h / 2 + 4, svg.fit(label, left - 20, FONT), "end"))
        body.append(f'<rect x="{left}" y="{y + 3}" width="{x_of(team["active"]) - left:.1f}" height="{row_h - 6}" fill="{ACTIVE}"/>')
        body.append(f'<rect x="{x_of(team["active"]):.1f}" y="{y + 3}" width="{x_of(team["idle"]) - left:.1f}" height="{row_h - 6}" '
                    f'fill="{IDLE_FILL}" stroke="{IDLE}"/>' if team["idle"] > 0 else "")
        body.append(svg.text(x_of(team["active"] + team["idle"]) + 6, y + row_h / 2 + 4, f"{_hours(team['active'] + team['idle'])} h"))
    body.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>')
    return svg.document(width, top + plot_h + 48, FONT, title, body, [_IDLE_PATTERN])


def _hours(value):
    return f"{value:,.1f}" if value < 10 else f"{value:,.0f}"


def cost_chart(onprem_eur, cloud_eur_full, measured, break_even, title="Monthly cost by occupancy"):
    """On-prem cost (flat) and cloud cost paid by the hour used (a line from 0) against occupancy, with both markers."""
    width, left, plot_w, plot_h = 940, 80, 580, 260
    legend_x, legend_w = left + plot_w + 16, width - left - plot_w - 24
    title_parts, title_bottom = _title(width, title)
    top = title_bottom + 20
    axis_top, ticks = svg.axis(max(onprem_eur, cloud_eur_full, 1.0), 5)
    unit, suffix = (1e6, "M") if axis_top >= 1e6 else ((1e3, "k") if axis_top >= 1e4 else (1.0, ""))
    body = title_parts + _value_axis(left, top, plot_w, plot_h, ticks, svg.tick_labels(ticks, unit, suffix), "EUR per month")
    for tick in range(0, 101, 20):
        body.append(svg.text(left + plot_w * tick / 100, top + plot_h + 17, f"{tick}%", "middle"))
    body.append(svg.text(left + plot_w / 2, top + plot_h + 36, "occupancy (active / available GPU-hours)", "middle"))

    def y_of(value):
        return top + plot_h - plot_h * value / axis_top

    onprem_line, cloud_line, measured_line = svg.stroke(svg.BLUE, 2), svg.stroke(svg.ORANGE, 2.5), svg.stroke(svg.BLACK, 1.5, "6 4")
    segments = [((left, y_of(onprem_eur)), (left + plot_w, y_of(onprem_eur))), ((left, y_of(0)), (left + plot_w, y_of(cloud_eur_full)))]
    body.append(svg.line(*segments[0][0], *segments[0][1], onprem_line))
    body.append(svg.line(*segments[1][0], *segments[1][1], cloud_line))
    legend = [(_line_swatch(onprem_line), f"on-prem, {onprem_eur:,.0f} EUR/month whatever the occupancy"),
              (_line_swatch(cloud_line), f"cloud, paid by the hour used ({cloud_eur_full:,.0f} EUR/month at 100%)")]
    labels, taken = [], []
    if measured is not None:
        x = left + plot_w * min(measured, 1.0)
        segments.append(((x, top), (x, top + plot_h)))
        body.append(svg.line(x, top, x, top + plot_h, measured_line))
        legend.append((_line_swatch(measured_line), "measured occupancy"))
        spots = [(x + 6, top + 16, "start"), (x - 6, top + 16, "end"), (x + 6, top + plot_h - 8, "start"), (x - 6, top + plot_h - 8, "end")]
        labels.append((f"measured {measured * 100:.1f}%", spots))
    if break_even is not None and break_even <= 1:
        x, y = left + plot_w * break_even, y_of(onprem_eur)
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="#000"/>')
        taken.append((x - 6, y - 6, x + 6, y + 6))
        legend.append((lambda lx, ly: f'<circle cx="{lx + 15}" cy="{ly:.1f}" r="5" fill="#000"/>', "break-even (the same cost)"))
        # Left of the crossing the cloud line runs below the on-prem one and right of it above: above-left and below-right are clear.
        # Where the crossing is near an edge, further right along the on-prem line, where the two lines part.
        labels.insert(0, (f"break-even {break_even * 100:.1f}%", [(x - 8, y - 8, "end"), (x + 8, y + 18, "start"), (x - 8, y + 18, "end")]
                          + [(x + 8 + 16 * step, y - 6, "start") for step in range(12)]))
    bounds = (left + 2, top + 2, left + plot_w - 2, top + plot_h - 2)
    for label, candidates in labels:
        lx, ly, anchor = svg.place(candidates, label, segments, taken, bounds, FONT)
        body.append(svg.text(lx, ly, label, anchor))
    legend_parts, legend_bottom = svg.legend(legend_x, top + 8, legend, legend_w, FONT, LINE)
    body += legend_parts
    return svg.document(width, max(top + plot_h + 52, legend_bottom + 12), FONT, title, body)
