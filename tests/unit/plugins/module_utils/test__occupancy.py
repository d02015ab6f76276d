# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The occupancy accounting on Prometheus answers written as data; tests/integration runs it on a real Prometheus."""

from __future__ import annotations

import pytest

import sys
from pathlib import Path

from ansible_collections.onprem.gpu.plugins.module_utils._occupancy import (
    OccupancyError,
    Queries,
    Window,
    make_window,
    measure,
    mig_weight,
    parse_duration,
    selector_matchers,
    timeline_bucket_steps,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from occupancy_answers import ANSWERS, GPU0, H100, OCTOBER, WINDOW, RecordedPrometheus, gpu_of, instant  # noqa: E402


@pytest.mark.parametrize(("text", "seconds"), [
    ("1m", 60), ("5m", 300), ("1h30m", 5400), ("90s", 90), ("1d", 86400), ("2w", 1209600), ("60", 60), ("1500ms", None),
])
def test_durations(text, seconds):
    if seconds is None:
        with pytest.raises(OccupancyError, match="whole number of seconds"):
            parse_duration(text)
    else:
        assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "5 minutes", "m", "-1m", "0s"])
def test_bad_durations(text):
    with pytest.raises(OccupancyError, match="step must be"):
        parse_duration(text)


@pytest.mark.parametrize(("start", "end", "step", "window"), [
    ("2026-10-01T00:00:00Z", "2026-10-31T00:00:00Z", "1m", (OCTOBER, OCTOBER + 30 * 86400, 60)),
    ("2026-10-01T02:00:00+02:00", "2026-10-02T00:00:00Z", "1h", (OCTOBER, OCTOBER + 86400, 3600)),
    (str(OCTOBER + 10), OCTOBER + 7200 + 59, "1m", (OCTOBER + 60, OCTOBER + 7200, 60)),
    (None, OCTOBER + 30 * 86400, "5m", (OCTOBER, OCTOBER + 30 * 86400, 300)),
])
def test_windows_align_to_the_step(start, end, step, window):
    assert make_window(start, end, step) == Window(*window)


@pytest.mark.parametrize(("start", "end", "message"), [
    ("2026-10-02T00:00:00Z", "2026-10-01T00:00:00Z", "at least one step"),
    ("yesterday", "2026-10-01T00:00:00Z", "start must be RFC 3339"),
    ("2026-10-01T00:00:00", "2026-10-02T00:00:00Z", "must carry its time zone"),
])
def test_bad_windows(start, end, message):
    with pytest.raises(OccupancyError, match=message):
        make_window(start, end, "1m")


@pytest.mark.parametrize(("profile", "model", "weight"), [
    ("1g.10gb", H100, 1 / 7), ("3g.40gb", H100, 3 / 7), ("7g.80gb", H100, 1.0), ("1g.20gb", H100, 1 / 7),
    ("1g.10gb+me", H100, 1 / 7), ("2g.35gb", "NVIDIA H200", 2 / 7), ("3g.20gb", "NVIDIA A100-SXM4-40GB", 3 / 7),
    ("2g.12gb", "NVIDIA A30", 2 / 4), ("4g.24gb", "NVIDIA A30", 1.0), ("1g.23gb", "NVIDIA GB200", 1 / 7),
])
def test_mig_instances_weigh_their_compute_slices(profile, model, weight):
    assert mig_weight(profile, model) == pytest.approx(weight)


@pytest.mark.parametrize(("profile", "model"), [("MIG-1", H100), ("7g.24gb", "NVIDIA A30")])
def test_unreadable_mig_profiles(profile, model):
    with pytest.raises(OccupancyError, match="MIG profile"):
        mig_weight(profile, model)


@pytest.mark.parametrize(("steps", "bucket"), [(43200, 180), (8640, 36), (240, 1), (241, 241), (4, 1), (1440, 6)])
def test_chart_buckets_divide_the_window(steps, bucket):
    assert timeline_bucket_steps(steps) == bucket


@pytest.mark.parametrize(("selector", "matchers"), [
    ("", []), ('cluster="dc1"', ['cluster="dc1"']), ('{cluster="dc1", job=~"dcgm.*"}', ['cluster="dc1"', 'job=~"dcgm.*"']),
    ('team="a,b"', ['team="a,b"']),
])
def test_selectors(selector, matchers):
    assert selector_matchers(selector) == matchers


@pytest.mark.parametrize("selector", ["cluster=dc1", 'cluster="dc1"} or vector(1)', "up"])
def test_bad_selectors(selector):
    with pytest.raises(OccupancyError, match="label matchers"):
        selector_matchers(selector)


def test_the_promql():
    queries = Queries(Window(OCTOBER, OCTOBER + 86400, 60), 0.15, 'cluster="dc1"')
    instant = queries.instant()
    whole = 'last_over_time(DCGM_FI_DEV_FB_USED{GPU_I_ID="",cluster="dc1"}[59999ms])'
    instances = 'last_over_time(DCGM_FI_DEV_FB_USED{GPU_I_ID!="",cluster="dc1"}[59999ms])'
    series = f"(({whole} unless on(Hostname, gpu, UUID) {instances}) or {instances})"
    assert instant["present"] == f"count_over_time(({series})[86399999ms:60s])"
    assert instant["idle"] == (f"count_over_time(((({series} > 0) and (last_over_time(DCGM_FI_PROF_SM_ACTIVE{{cluster=\"dc1\"}}[59999ms]) "
                               "<= 0.15)))[86399999ms:60s])")
    assert instant["sm_active_gpus"] == 'count by (Hostname, gpu, UUID) (count_over_time(DCGM_FI_PROF_SM_ACTIVE{cluster="dc1"}[86399999ms]))'
    assert sorted(instant) == ["active", "allocated", "idle", "idle_first", "idle_last", "present", "sm_active_gpus"]
    timeline = queries.timeline(3600)
    assert timeline["available"] == ('count_over_time((count by (Hostname, gpu, UUID) '
                                     '(last_over_time(DCGM_FI_DEV_FB_USED{cluster="dc1"}[59999ms])))[3599999ms:60s])')
    assert sorted(timeline) == ["active", "allocated", "available", "idle"]


def test_hours_per_node_namespace_and_total():
    prometheus = RecordedPrometheus(ANSWERS)
    result = measure(prometheus, WINDOW, expected_nodes={"n1": 2, "n2": 8}, clock=iter(range(100)).__next__)
    assert result["total"] == {
        "available_gpu_hours": 7.0, "allocated_gpu_hours": round(4 + 2 * 3 / 7, 6), "active_gpu_hours": 3.0,
        "idle_allocated_gpu_hours": round(1 + 2 * 3 / 7, 6), "occupancy": round(3 / 7, 6), "unknown_gpu_hours": 33.0, "gpus": 2,
    }
    assert result["nodes"] == [
        {"node": "n1", "gpus": 2, "expected_gpus": 2, "available_gpu_hours": 7.0, "allocated_gpu_hours": round(4 + 6 / 7, 6),
         "active_gpu_hours": 3.0, "idle_allocated_gpu_hours": round(1 + 6 / 7, 6), "occupancy": round(3 / 7, 6), "unknown_gpu_hours": 1.0},
        {"node": "n2", "gpus": 0, "expected_gpus": 8, "available_gpu_hours": 0.0, "allocated_gpu_hours": 0.0, "active_gpu_hours": 0.0,
         "idle_allocated_gpu_hours": 0.0, "occupancy": None, "unknown_gpu_hours": 32.0},
    ]
    assert result["namespaces"] == [
        {"namespace": "team-a", "available_gpu_hours": 4.0, "allocated_gpu_hours": 4.0, "active_gpu_hours": 3.0,
         "idle_allocated_gpu_hours": 1.0, "occupancy": 0.75},
        {"namespace": "team-b", "available_gpu_hours": round(9 / 7, 6), "allocated_gpu_hours": round(6 / 7, 6), "active_gpu_hours": 0.0,
         "idle_allocated_gpu_hours": round(6 / 7, 6), "occupancy": 0.0},
    ]
    assert result["queries"]["count"] == 11 == len(prometheus.calls)
    assert [call[0] for call in prometheus.calls].count("/api/v1/query_range") == 4
    assert all(call[2] == {"time": str(WINDOW.end)} for call in prometheus.calls if call[0] == "/api/v1/query")
    assert {call[2]["step"] for call in prometheus.calls if call[0] == "/api/v1/query_range"} == {"3600s"}


def test_idle_allocations_worst_first_with_their_first_and_last_idle_step():
    result = measure(RecordedPrometheus(ANSWERS), WINDOW)
    assert result["idle_allocations"] == [
        {"node": "n1", "gpu": "0", "uuid": "GPU-0", "gpu_instance": None, "profile": None, "namespace": "team-a", "pod": "p1",
         "idle_allocated_hours": 1.0, "since": "2026-10-01T02:00:00Z", "until": "2026-10-01T03:00:00Z"},
        {"node": "n1", "gpu": "1", "uuid": "GPU-1", "gpu_instance": "2", "profile": "3g.40gb", "namespace": "team-b", "pod": "p2",
         "idle_allocated_hours": round(6 / 7, 6), "since": "2026-10-01T00:00:00Z", "until": "2026-10-01T04:00:00Z"},
    ]


def test_missing_data_is_unknown_never_idle():
    answers = dict(ANSWERS, sm_active_gpus=[instant(gpu_of(GPU0), 1)])
    result = measure(RecordedPrometheus(answers), WINDOW, expected_nodes={"n1": 3, "n2": 8})
    assert [(entry["node"], entry["gpu"], entry["kind"], entry["unknown_gpu_hours"]) for entry in result["unknown"]] == [
        ("n1", None, "missing_gpus", 4.0),
        ("n2", None, "no_series", 32.0),
        ("n1", "1", "gap", 1.0),
        ("n1", "1", "no_sm_active", 0.0),
    ]
    assert result["unknown"][1]["reason"] == (
        "n2 has no DCGM_FI_DEV_FB_USED series in the window: its exporter is down, the node is absent, "
        "or its Hostname label differs from the inventory name.")
    assert result["total"]["idle_allocated_gpu_hours"] == round(1 + 6 / 7, 6)


def test_timeline_weighs_mig_instances():
    timeline = measure(RecordedPrometheus(ANSWERS), WINDOW)["timeline"]
    assert timeline["bucket_seconds"] == 3600
    assert [point["time"] for point in timeline["total"]] == [
        "2026-10-01T00:00:00Z", "2026-10-01T01:00:00Z", "2026-10-01T02:00:00Z", "2026-10-01T03:00:00Z"]
    assert [point["available_gpu_hours"] for point in timeline["total"]] == [2.0, 2.0, 1.0, 2.0]
    assert [point["idle_allocated_gpu_hours"] for point in timeline["nodes"]["n1"]] == [round(3 / 7, 6), 0.0, 1.0, round(3 / 7, 6)]


def test_a_window_without_samples_is_refused():
    with pytest.raises(OccupancyError, match=r"^Prometheus holds no DCGM_FI_DEV_FB_USED samples between 2026-10-01T00:00:00Z and "
                                             r"2026-10-01T04:00:00Z: check that dcgm-exporter is scraped, the selector and the window\.$"):
        measure(RecordedPrometheus({}), WINDOW)


@pytest.mark.parametrize(("threshold", "message"), [(1.5, "below 1"), ("high", "a number"), (-0.1, "at least 0")])
def test_bad_thresholds(threshold, message):
    with pytest.raises(OccupancyError, match=message):
        measure(RecordedPrometheus(ANSWERS), WINDOW, threshold=threshold)


def test_bad_expected_nodes():
    with pytest.raises(OccupancyError, match="GPU count"):
        measure(RecordedPrometheus(ANSWERS), WINDOW, expected_nodes={"n1": "eight"})


def test_an_answer_without_a_result_list():
    with pytest.raises(OccupancyError, match="without a result list"):
        measure(lambda path, params: {"resultType": "vector"}, WINDOW)
