# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The charts in a real browser: headless Chromium renders the 24-node network benchmark chart, skipped without it.

The layout itself is checked without a browser (text boxes from the generated SVG, in test__network_benchmark_svg.py
and test__occupancy_svg.py); this shows that a browser draws what was laid out. With CHART_SCREENSHOTS=DIR every
synthetic chart (network benchmark and occupancy, sites of 5, 24 and 64 nodes) is written there with its PNG, to look
at: bash tests/tools/chart_screenshots.sh [DIR].
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from chart_samples import all_charts, benchmark_charts, chromium, layout_problems, png_summary, screenshot, size  # noqa: E402

pytestmark = pytest.mark.skipif(chromium() is None, reason="no chromium to render the charts: apt-get install chromium")


def test_chromium_draws_the_rack_scale_chart(tmp_path):
    wanted = os.environ.get("CHART_SCREENSHOTS")
    directory = Path(wanted) if wanted else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    charts = all_charts() if wanted else {"network-benchmark-24-nodes": benchmark_charts(24)["network-benchmark-24-nodes"]}
    for name, svg in charts.items():
        assert layout_problems(svg) == [], name
        (directory / f"{name}.svg").write_text(svg)
        screenshot(directory / f"{name}.svg", directory / f"{name}.png")
    width, height, colours = png_summary(directory / "network-benchmark-24-nodes.png")
    assert (width, height) == size(charts["network-benchmark-24-nodes"])
    # White, the two bar colours, the threshold's red, black text and their anti-aliased edges: not a blank page.
    assert colours > 20
