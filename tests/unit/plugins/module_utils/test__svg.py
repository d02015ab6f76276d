# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""What the SVG charts share: text measured and fitted without cutting words, tick labels, lines and labels."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.module_utils import _svg

ELLIPSIS = _svg.ELLIPSIS


def test_widths_are_dejavu_sans_advances():
    # "node-017" in DejaVu Sans: n o d e - 0 1 7 = 634+612+635+615+361+3*636 thousandths of an em.
    assert _svg.text_width("node-017", 10) == pytest.approx((634 + 612 + 635 + 615 + 361 + 3 * 636) / 100)
    assert _svg.text_width("ab", 10, bold=True) > _svg.text_width("ab", 10)


@pytest.mark.parametrize(("name", "width", "fitted"), [
    pytest.param("dc1-rack03-gpu-node-017", 400, "dc1-rack03-gpu-node-017", id="fits"),
    pytest.param("dc1-rack03-gpu-node-017", 120, "dc1-" + ELLIPSIS + "gpu-node-017", id="between-words"),
    pytest.param("dc1-rack03-gpu-node-017", 80, ELLIPSIS + "node-017", id="narrower"),
    pytest.param("averyveryverylonghostnamewithoutanyseparator017", 120, "averyv" + ELLIPSIS + "eparator017", id="one-word"),
])
def test_fit_puts_the_ellipsis_between_words_and_keeps_the_end(name, width, fitted):
    result = _svg.fit(name, width, 11)
    assert result == fitted
    assert _svg.text_width(result, 11) <= width


def test_fit_never_cuts_inside_a_word_when_a_whole_word_fits():
    name = "dc1-rack03-gpu-node-017.cluster.example.internal"
    words = set(name.replace(".", "-").split("-"))
    for width in range(90, 300, 7):
        head, _ellipsis, tail = _svg.fit(name, width, 11).partition(ELLIPSIS)
        assert all(part in words for part in (head + tail).replace(".", "-").split("-") if part)


def test_wrap_breaks_after_spaces_and_separators_and_loses_nothing():
    text = "dc1-rack07-gpu-node-017.example.internal + dc1-rack07-gpu-node-018.example.internal"
    lines = _svg.wrap(text, 180, 11)
    assert len(lines) == 3 and all(_svg.text_width(line, 11) <= 180 for line in lines)
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")
    squeezed = _svg.wrap(text, 180, 11, max_lines=2)
    assert len(squeezed) == 2 and squeezed[1].endswith("node-018.example.internal") and ELLIPSIS in squeezed[1]


@pytest.mark.parametrize(("values", "unit", "suffix", "labels"), [
    pytest.param([0, 500, 1000, 1500], 1000, "k", ["0", "0.5k", "1.0k", "1.5k"], id="half-thousands"),
    pytest.param([0, 250, 500, 750, 1000], 1000, "k", ["0", "0.25k", "0.50k", "0.75k", "1.00k"], id="quarter-thousands"),
    pytest.param([0, 10000, 20000], 1000, "k", ["0", "10k", "20k"], id="whole-thousands"),
    pytest.param([0, 0.2, 0.4, 0.6000000000000001], 1, "", ["0", "0.2", "0.4", "0.6"], id="float-noise"),
    pytest.param([0, 2500, 5000], 1, "", ["0", "2,500", "5,000"], id="plain"),
])
def test_tick_labels_are_exact_and_distinct(values, unit, suffix, labels):
    assert _svg.tick_labels(values, unit, suffix) == labels


@pytest.mark.parametrize(("peak", "top"), [(480, 550), (0.4, 0.5), (1.0, 1.2), (16032.67, 20000)])
def test_axis_tops_are_round_and_hold_the_peak(peak, top):
    axis_top, ticks = _svg.axis(peak, 12 if peak == 480 else 6)
    assert axis_top == top and ticks[0] == 0 and ticks[-1] == top and len(set(ticks)) == len(ticks)


def test_crosses_and_place_keep_labels_off_lines():
    line = ((0, 100), (100, 0))
    assert _svg.crosses((40, 40, 60, 60), line) and not _svg.crosses((0, 0, 20, 20), line)
    taken = []
    x, y, anchor = _svg.place([(50, 50, "middle"), (10, 15, "start")], "ab", [line], taken, (0, 0, 100, 100), 12)
    assert (x, y, anchor) == (10, 15, "start") and len(taken) == 1
