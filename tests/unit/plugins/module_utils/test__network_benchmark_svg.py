# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The network benchmark's SVG chart of busbw against message size."""

from __future__ import annotations

import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _svg
from ansible_collections.onprem.gpu.plugins.module_utils._network_benchmark_svg import MAX_CURVES, busbw_chart

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chart_samples import benchmark_series, layout_problems, node_name  # noqa: E402

GIB = 1 << 30
SVG = "{http://www.w3.org/2000/svg}"


def sweep(first=10, last=34):
    return [[1 << exponent, min(480.0, 2.0 ** (exponent - 20) * 10)] for exponent in range(first, last)]


def test_a_well_formed_chart_with_threshold_and_series():
    points = sweep()
    svg = busbw_chart([{"label": "out-of-place", "points": points}, {"label": "in-place", "points": points[:-1] + [[1 << 33, None]]}],
                      "dc1-gpu1 alone <8 x H100>", threshold=384, min_size=GIB)
    root = ElementTree.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    assert len(root.findall(f"{SVG}polyline")) == 2
    # A marker per point: circles on the first curve, squares on the second.
    assert len(root.findall(f"{SVG}circle")) == 24 + 1  # and one in its legend swatch
    assert len([rect for rect in root.findall(f"{SVG}rect") if rect.get("width") == "5.2"]) == 23 + 1
    texts = [element.text for element in root.iter(f"{SVG}text")]
    assert "dc1-gpu1 alone <8 x H100>" in texts and "threshold 384 GB/s" in texts and "4G" in texts and "1K" in texts
    assert any(line.get("stroke-dasharray") for line in root.findall(f"{SVG}line"))


def test_the_threshold_line_starts_at_min_size_and_sits_at_the_threshold():
    svg = busbw_chart([{"label": "in-place", "points": sweep()}], "run", threshold=240, min_size=GIB)
    root = ElementTree.fromstring(svg)
    threshold = next(line for line in root.findall(f"{SVG}line") if line.get("stroke") == "#d62728" and line.get("stroke-width") == "1.5")
    grid = {text.text: float(text.get("x")) for text in root.iter(f"{SVG}text") if text.get("text-anchor") == "middle" and text.text.endswith("G")}
    assert float(threshold.get("x1")) == pytest.approx(grid["1G"], abs=0.1)
    assert threshold.get("y1") == threshold.get("y2")
    # The axis tops at 550 (480 x 1.05 rounded up to a step of 50); the plot is 284 px high with its bottom at y = 324.
    assert float(threshold.get("y1")) == pytest.approx(324 - 240 / 550 * 284, abs=0.1)
    assert "550" in [text.text for text in root.iter(f"{SVG}text")]


def test_a_chart_without_points_says_so_and_stays_well_formed():
    svg = busbw_chart([{"label": "out-of-place", "points": []}], "empty")
    assert "no results: the run printed no table" in svg
    ElementTree.fromstring(svg)


def test_titles_and_labels_are_escaped():
    svg = busbw_chart([{"label": "a & <b>", "points": [[1024, 1.0]]}], "x < y & z")
    texts = [element.text for element in ElementTree.fromstring(svg).iter(f"{SVG}text")]
    assert "x < y & z" in texts and "a & <b>" in texts


@pytest.mark.parametrize("bad", [
    pytest.param({"label": "x"}, id="not-a-list"),
    pytest.param([{"label": "x"}], id="no-points"),
    pytest.param([{"label": "x", "points": [["1K", 3.0]]}], id="size-not-a-number"),
    pytest.param([{"label": "x", "points": [[1024]]}], id="point-without-busbw"),
])
def test_bad_series_raise_a_value_error(bad):
    with pytest.raises(ValueError, match="series"):
        busbw_chart(bad, "bad")


def texts_of(svg):
    return [element.text for element in ElementTree.fromstring(svg).iter(f"{SVG}text")]


def test_up_to_eight_runs_are_curves_and_more_are_a_bar_each():
    for nodes in (MAX_CURVES, MAX_CURVES + 1):
        root = ElementTree.fromstring(busbw_chart(benchmark_series(nodes), "stage", threshold=296, min_size=GIB))
        bars = [rect for rect in root.findall(f"{SVG}rect") if rect.get("height") == "14"]
        assert (len(root.findall(f"{SVG}polyline")), len(bars)) == ((nodes, 0) if nodes <= MAX_CURVES else (0, nodes))


@pytest.mark.parametrize("nodes", [5, 24, 64])
def test_no_run_is_lost_and_no_text_leaves_the_image_or_overlaps(nodes):
    svg = busbw_chart(benchmark_series(nodes), f"busbw of each node alone ({nodes} nodes)", threshold=296, min_size=GIB)
    texts = texts_of(svg)
    assert all(any(text.startswith(f"{node_name(index)} alone") for text in texts) for index in range(nodes))
    assert layout_problems(svg) == []


def test_bars_are_sorted_and_failures_are_hatched_labelled_and_first():
    svg = busbw_chart(benchmark_series(24), "stage", threshold=296, min_size=GIB)
    root = ElementTree.fromstring(svg)
    bars = [rect for rect in root.findall(f"{SVG}rect") if rect.get("height") == "14"]
    widths = [float(rect.get("width")) for rect in bars]
    assert widths == sorted(widths)
    failed = [rect.get("fill") for rect in bars if rect.get("fill") == "url(#failed)"]
    values = [text for text in texts_of(svg) if text[0].isdigit() and "." in text]
    assert len(failed) == 3 == len([value for value in values if value.endswith(" FAIL")])
    assert [rect.get("fill") for rect in bars[:3]] == ["url(#failed)"] * 3
    assert root.find(f"{SVG}defs/{SVG}pattern[@id='failed']") is not None
    assert values[:4] == ["236.2 FAIL", "237.2 FAIL", "241.4 FAIL", "353.5"]


def test_bars_judge_a_run_by_its_own_threshold_without_a_verdict_or_a_common_threshold():
    series = [{"label": f"n{index}", "points": [[GIB, 100.0 + index], [1 << 20, 900.0]], "threshold": 104.5} for index in range(10)]
    series.append({"label": "silent", "points": [[1 << 20, 5.0]], "threshold": 104.5})
    svg = busbw_chart(series, "stage", min_size=GIB)
    texts = texts_of(svg)
    # The sizes below min_size are not judged, so the 900 GB/s at 1M does not count; a run without a judged size fails.
    assert texts.count("no result: FAIL") == 1
    assert [text for text in texts if text.endswith("FAIL") and text[0].isdigit()] == [f"{100 + index:.1f} FAIL" for index in range(5)]
    ticks = [line for line in ElementTree.fromstring(svg).findall(f"{SVG}line") if line.get("stroke") == _svg.THRESHOLD]
    assert len(ticks) == 10 + 1  # one per run with a result, and the legend's


@pytest.mark.parametrize("nodes", [5, 64])
def test_the_threshold_colour_is_never_a_series_colour(nodes):
    root = ElementTree.fromstring(busbw_chart(benchmark_series(nodes), "stage", threshold=296, min_size=GIB))
    assert _svg.THRESHOLD not in _svg.SERIES and len(set(_svg.SERIES)) == len(_svg.SERIES) == MAX_CURVES
    painted = {element.get(attribute) for element in root.iter() for attribute in ("fill", "stroke")
               if element.tag in (f"{SVG}polyline", f"{SVG}circle", f"{SVG}polygon", f"{SVG}rect", f"{SVG}pattern")}
    painted |= {element.get("fill") for element in root.find(f"{SVG}defs").iter()} if root.find(f"{SVG}defs") is not None else set()
    assert _svg.THRESHOLD not in painted
    threshold_lines = [line for line in root.findall(f"{SVG}line") if line.get("stroke") == _svg.THRESHOLD]
    assert threshold_lines and all(line.get("stroke-dasharray") == "6 4" and line.get("stroke-width") == "1.5" for line in threshold_lines)


def test_eight_curves_have_eight_colours_and_a_marker_shape_that_changes_with_each():
    root = ElementTree.fromstring(busbw_chart(benchmark_series(8), "stage", threshold=296, min_size=GIB))
    colours = [line.get("stroke") for line in root.findall(f"{SVG}polyline")]
    assert len(set(colours)) == 8
    shapes = [(element.tag, element.get("fill")) for element in root if element.tag in (f"{SVG}circle", f"{SVG}rect", f"{SVG}polygon")
              and element.get("fill") in colours]
    assert [tag for tag, _fill in dict.fromkeys(shapes)][:4] == [f"{SVG}circle", f"{SVG}rect", f"{SVG}polygon", f"{SVG}polygon"]


@pytest.mark.parametrize("nodes", [5, 24, 64])
def test_tick_labels_are_distinct(nodes):
    svg = busbw_chart(benchmark_series(nodes), "stage", threshold=296, min_size=GIB)
    root = ElementTree.fromstring(svg)
    if nodes <= MAX_CURVES:
        busbw = [text.text for text in root.iter(f"{SVG}text") if text.get("text-anchor") == "end"]
    else:
        # The same axis above and below the bars.
        busbw = [text.text for text in root.iter(f"{SVG}text") if text.get("text-anchor") == "middle" and text.text.replace(",", "").isdigit()]
        busbw = busbw[::2]
    assert len(busbw) >= 4 and len(set(busbw)) == len(busbw)


def test_long_names_wrap_between_words_in_the_legend_and_keep_their_ends_on_bars():
    long = "dc1-rack07-gpu-node-017.example.internal + dc1-rack07-gpu-node-018.example.internal"
    curves = busbw_chart([{"label": long, "points": sweep()}], "pair", threshold=296, min_size=GIB)
    texts = texts_of(curves)
    legend = texts[texts.index("threshold 296 GB/s") + 1:]
    assert len(legend) > 1 and "".join(legend).replace(" ", "") == long.replace(" ", "")
    # Each line ends where a word ends: after a separator, or before the " + ".
    assert all(line[-1] in "-.+" or line.endswith("internal") for line in legend)
    assert layout_problems(curves) == []
    bars = busbw_chart([{"label": f"{long}-{index}", "points": sweep()} for index in range(9)], "pairs", threshold=296, min_size=GIB)
    labels = [text for text in texts_of(bars) if "rack07" in text]
    assert len(labels) == 9 and all(_svg.ELLIPSIS in label for label in labels)
    assert sorted(label.rsplit("-", 1)[1] for label in labels) == [str(index) for index in range(9)]
    assert layout_problems(bars) == []
