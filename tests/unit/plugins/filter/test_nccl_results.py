# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

from pathlib import Path

import pytest

from ansible.errors import AnsibleTypeError

from ansible_collections.onprem.gpu.plugins.filter.nccl_results import FilterModule, nccl_results

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nccl"


def fixture_text(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "fixture, peak_busbw, avg_busbw, ranks, hosts, transport",
    [
        pytest.param("multinode_2x8_H100_ib_srun-l-prefix_c0_v2.13.4.txt", 167.87, 142.735, 16, ["node005", "node007"], None, id="srun-l"),
        pytest.param("multinode_2x8_H100_socket_fallback_tag-output_v2.14.1.txt", 4.85, 4.66625, 16, ["gpu-a01", "gpu-a02"], "Socket", id="tag-output"),
        pytest.param("singlenode_8xH100_per-iteration_v2.19.6.json", 479.95, 470.295, 8, ["hgx-h100-02"], None, id="json"),
    ],
)
def test_stdout_and_stdout_lines_read_alike(fixture, peak_busbw, avg_busbw, ranks, hosts, transport):
    text = fixture_text(fixture)
    from_text = nccl_results(text)
    assert nccl_results(text.splitlines()) == from_text
    assert (from_text["peak_busbw"], from_text["avg_busbw"], from_text["ranks"], from_text["hosts"], from_text["transport"]) == (
        peak_busbw,
        avg_busbw,
        ranks,
        hosts,
        transport,
    )


def test_empty_output_is_a_result_with_an_error():
    assert nccl_results([])["errors"] == ["The output is empty: nccl-tests printed nothing."]


@pytest.mark.parametrize("value, type_name", [(None, "NoneType"), (8, "int"), ({"stdout": ""}, "dict"), (["ok", 3], "list")])
def test_values_that_are_not_output_are_refused(value, type_name):
    with pytest.raises(AnsibleTypeError) as raised:
        nccl_results(value)
    assert str(raised.value) == f"nccl_results expects the output of an nccl-tests run as a string or a list of lines, not {type_name}."


def test_filter_is_exposed_under_its_documented_name():
    assert FilterModule().filters() == {"nccl_results": nccl_results}
