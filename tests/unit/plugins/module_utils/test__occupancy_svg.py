# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The GPU occupancy report's charts: axes that read right, legends like their lines, labels clear of lines, colours
that every reader tells apart, time axes that reach the window's end in UTC."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _occupancy_svg as charts
from ansible_collections.onprem.gpu.plugins.module_utils import _svg

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chart_samples import layout_problems, occupancy_datacenter, occupancy_sample_charts  # noqa: E402

SVG = "{http://www.w3.org/2000/svg}"


def texts(svg, anchor=None):
    return [text.text for text in ElementTree.fromstring(svg).iter(f"{SVG}text") if anchor is None or text.get("text-anchor") == anchor]


@pytest.mark.parametrize(("onprem", "cloud", "ticks"), [
    pytest.param(400, 1200, ["0", "500", "1,000", "1,500"], id="hundreds"),
    pytest.param(1800, 2500, ["0", "1,000", "2,000", "3,000"], id="thousands"),
    pytest.param(16032.67, 25000, ["0", "10k", "20k", "30k"], id="tens-of-thousands"),
    pytest.param(40000, 62000, ["0", "20k", "40k", "60k", "80k"], id="site"),
    pytest.param(2.5e6, 7.1e6, ["0", "2M", "4M", "6M", "8M"], id="millions"),
])
def test_cost_axis_labels_are_exact_and_distinct(onprem, cloud, ticks):
    labels = [text for text in texts(charts.cost_chart(onprem, cloud, 0.4, onprem / cloud), "end") if not text.startswith(("break", "measured"))]
    assert labels == ticks


def _line_styles(root):
    return [{key: line.get(key) for key in ("stroke", "stroke-width", "stroke-dasharray")} for line in root.findall(f"{SVG}line")]


def test_every_legend_swatch_is_drawn_like_its_line():
    root = ElementTree.fromstring(charts.cost_chart(16032.67, 25000, 0.43, 0.64))
    styles = _line_styles(root)
    for style in ({"stroke": _svg.BLUE, "stroke-width": "2", "stroke-dasharray": None},
                  {"stroke": _svg.ORANGE, "stroke-width": "2.5", "stroke-dasharray": None},
                  {"stroke": _svg.BLACK, "stroke-width": "1.5", "stroke-dasharray": "6 4"}):
        assert styles.count(style) == 2, style  # the line and its swatch
    occupancy = ElementTree.fromstring(charts.occupancy_chart(
        [{"label": "dc1", "times": ["2026-10-01T00:00:00Z"], "active": [1.0], "allocated": [2.0], "available": [4.0]}], "2026-10-02T00:00:00Z"))
    swatches = _line_styles(occupancy)
    for line in occupancy.findall(f"{SVG}polyline"):
        assert {key: line.get(key) for key in ("stroke", "stroke-width", "stroke-dasharray")} in swatches


@pytest.mark.parametrize("break_even", [0.05, 0.32, 0.64, 0.97])
def test_the_break_even_and_measured_labels_cross_no_line(break_even):
    svg = charts.cost_chart(10000 * break_even, 10000, 0.43, break_even)
    root = ElementTree.fromstring(svg)
    lines = [((float(line.get("x1")), float(line.get("y1"))), (float(line.get("x2")), float(line.get("y2"))))
             for line in root.findall(f"{SVG}line") if line.get("stroke") in (_svg.BLUE, _svg.ORANGE, _svg.BLACK) and float(line.get("x2")) > 100]
    lines = [line for line in lines if line[1][0] - line[0][0] > 40 or line[0][0] == line[1][0]]
    assert len(lines) == 3
    for text in root.iter(f"{SVG}text"):
        if text.text.startswith(("break-even ", "measured ")):
            rect = _svg.box(float(text.get("x")), float(text.get("y")), text.text, text.get("text-anchor"), 12)
            assert not any(_svg.crosses(rect, line) for line in lines), text.text
    assert layout_problems(svg) == []


def test_active_and_idle_are_blue_and_hatched_orange():
    root = ElementTree.fromstring(charts.team_bars([{"label": "team-a", "active": 30.0, "idle": 10.0}]))
    fills = [rect.get("fill") for rect in root.findall(f"{SVG}rect")]
    assert _svg.BLUE in fills and "url(#idle)" in fills
    assert "#2ca02c" not in fills and "#d62728" not in fills
    pattern = root.find(f"{SVG}defs/{SVG}pattern[@id='idle']")
    assert _svg.ORANGE in [rect.get("fill") for rect in pattern.iter(f"{SVG}rect")]


def test_team_bars_have_a_value_axis():
    svg = charts.team_bars([{"label": "team-a", "active": 1234.0, "idle": 300.0}, {"label": "", "active": 0.4, "idle": 1.2}])
    ticks = [text for text in texts(svg, "middle") if text.replace(",", "").isdigit() or text == "0"]
    assert ticks[::2] == ["0", "500", "1,000", "1,500", "2,000"] and ticks == [tick for tick in ticks[::2] for _copy in (0, 1)]
    assert "GPU-hours in the window" in texts(svg) and "1,534 h" in texts(svg) and "1.6 h" in texts(svg) and "(no namespace)" in texts(svg)


@pytest.mark.parametrize(("hours", "bucket_hours", "first", "last"), [
    pytest.param(30 * 24, 3, "2026-10-01", "2026-10-31", id="30-days"),
    pytest.param(7 * 24 + 6, 1, "2026-10-01", "10-08 06:00", id="7-days-6-hours"),
    pytest.param(4, 1, "2026-10-01", "10-01 04:00", id="4-hours"),
])
def test_time_axes_reach_the_window_end_in_utc(hours, bucket_hours, first, last):
    count = hours // bucket_hours
    times = [f"2026-10-{1 + index * bucket_hours // 24:02d}T{index * bucket_hours % 24:02d}:00:00Z" for index in range(count)]
    end = f"2026-10-{1 + hours // 24:02d}T{hours % 24:02d}:00:00Z"
    occupancy = charts.occupancy_chart([{"label": "dc1", "times": times, "active": [1.0] * count, "allocated": [2.0] * count,
                                         "available": [4.0] * count}], end)
    heat = charts.heat_map([{"label": "n1", "idle": [1.0] * count, "available": [4.0] * count}], times, end)
    for svg, plot_right in ((occupancy, 64 + 600), (heat, None)):
        root = ElementTree.fromstring(svg)
        ticks = [text for text in root.iter(f"{SVG}text") if re.match(r"\d{2,4}-\d{2}", text.text)]
        labels = [tick.text for tick in ticks]
        assert labels[0] == first and labels[-1] == last and len(set(labels)) == len(labels) >= 2
        if plot_right:
            assert float(ticks[-1].get("x")) == plot_right and ticks[-1].get("text-anchor") == "end"
        assert "time (UTC)" in texts(svg)
        assert layout_problems(svg) == []


def test_heat_map_cells_without_data_are_hatched_and_names_keep_their_ends():
    rows = [{"label": f"dc1 dc1-rack01-a-very-long-node-name-of-some-site-{index:03d}", "idle": [1.0, 0.0], "available": [8.0, 0.0]}
            for index in range(3)]
    svg = charts.heat_map(rows, ["2026-10-01T00:00:00Z", "2026-10-01T01:00:00Z"], "2026-10-01T02:00:00Z")
    fills = [rect.get("fill") for rect in ElementTree.fromstring(svg).findall(f"{SVG}rect")]
    assert fills.count("url(#no-data)") == 3 + 1
    names = [text for text in texts(svg, "end") if "site-" in text]
    assert [name[-3:] for name in names] == ["000", "001", "002"] and all(_svg.ELLIPSIS in name for name in names)
    assert layout_problems(svg) == []


@pytest.mark.parametrize("nodes", [5, 24, 64])
def test_report_charts_at_site_scale_keep_every_node_and_their_text_apart(nodes):
    files = occupancy_sample_charts(nodes)
    heat = files[f"occupancy-{nodes}-nodes-idle-heatmap"]
    assert len([text for text in texts(heat, "end") if "gpu-node" in text]) == nodes
    for name, svg in files.items():
        assert layout_problems(svg) == [], name
    assert occupancy_datacenter(nodes)["occupancy"]["window"]["end"] == "2026-10-31T00:00:00Z"
