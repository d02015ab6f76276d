# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The network benchmark's SVG chart of busbw against message size."""

from __future__ import annotations

from xml.etree import ElementTree

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils._network_benchmark_svg import busbw_chart

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
    assert len(root.findall(f"{SVG}circle")) == 24 + 23
    texts = [element.text for element in root.iter(f"{SVG}text")]
    assert "dc1-gpu1 alone <8 x H100>" in texts and "threshold 384" in texts and "4G" in texts and "1K" in texts
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
