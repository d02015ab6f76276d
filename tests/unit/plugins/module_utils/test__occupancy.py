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
from occupancy_answers import ANSWERS, GPU0, H100, OCTOBER, WINDOW, RecordedPrometheus, gpu_of, instant, per_bucket  # noqa: E402


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
    whole, instances, cluster, has_pod, has_exported_pod = 'GPU_I_ID=""', 'GPU_I_ID!=""', 'cluster="dc1"', 'pod!=""', 'exported_pod!=""'

    def last(metric, matchers):
        return f"max without (prometheus_replica, replica) (last_over_time({metric}{{{matchers}}}[59999ms]))"

    def either(*matchers):
        return f"({last('DCGM_FI_DEV_FB_USED', ','.join(matchers))} or {last('DCGM_FI_PROF_SM_ACTIVE', ','.join(matchers))})"

    def present(*matcher):
        return f"(({either(whole, *matcher, cluster)} unless on(Hostname, hostname, gpu, UUID) {either(instances, *matcher, cluster)}) or " \
               f"{either(instances, *matcher, cluster)})"

    # Present by either metric (dcgm-exporter issue #512: FB_* missing for MIG instances on H100); allocated by dcgm-exporter's
    # pod attribution (internal/pkg/transformation/kubernetes.go), not by framebuffer use; each series once whatever its HA
    # replica label.
    allocated = f"(({present(has_pod)} unless on(instance, pod) {last('up', has_pod)}) or {present(has_exported_pod)})"
    assert instant["present"] == f"count_over_time(({present()})[86399999ms:60s])"
    assert instant["allocated"] == f"count_over_time(({allocated})[86399999ms:60s])"
    assert instant["idle"] == f"count_over_time((({allocated} and ({last('DCGM_FI_PROF_SM_ACTIVE', cluster)} <= 0.15)))[86399999ms:60s])"
    assert instant["sm_active_gpus"] == ('count by (Hostname, hostname, gpu, UUID) '
                                         '(count_over_time(DCGM_FI_PROF_SM_ACTIVE{cluster="dc1"}[86399999ms]))')
    assert sorted(instant) == ["active", "allocated", "idle", "idle_first", "idle_last", "present", "sm_active_gpus"]
    timeline = queries.timeline(3600)
    assert timeline["available"] == f"count_over_time((count by (Hostname, hostname, gpu, UUID) ({either(cluster)}))[3599999ms:60s])"
    assert sorted(timeline) == ["active", "allocated", "available", "idle"]


def test_replica_labels_are_configurable():
    queries = Queries(Window(OCTOBER, OCTOBER + 3600, 60), 0.15, replica_labels=["thanos_replica"])
    assert "max without (thanos_replica) (last_over_time(" in queries.instant()["present"]
    assert "without" not in Queries(Window(OCTOBER, OCTOBER + 3600, 60), 0.15, replica_labels=[]).instant()["present"]
    with pytest.raises(OccupancyError, match=r"^replica_labels must list Prometheus label names such as prometheus_replica, not 'a-b'\.$"):
        Queries(Window(OCTOBER, OCTOBER + 3600, 60), 0.15, replica_labels=["a-b"])


def test_the_new_hostname_label_names_the_node():
    # NVIDIA/dcgm-exporter PR #655 renamed Hostname to hostname (internal/pkg/rendermetrics/render_metrics.go).
    renamed = {name: [dict(sample, metric={("hostname" if key == "Hostname" else key): value for key, value in sample["metric"].items()})
                      for sample in samples] for name, samples in ANSWERS.items()}
    assert measure(RecordedPrometheus(renamed), WINDOW)["nodes"] == measure(RecordedPrometheus(ANSWERS), WINDOW)["nodes"]


def test_a_free_gpu_scraped_with_honor_labels_belongs_to_no_namespace():
    # Present, never allocated: its namespace label is the exporter's own (gpu-operator), not a team's.
    free = {"Hostname": "n1", "gpu": "2", "UUID": "GPU-2", "modelName": H100, "namespace": "gpu-operator", "pod": "nvidia-dcgm-exporter-x"}
    answers = dict(ANSWERS, present=ANSWERS["present"] + [instant(free, 4)], sm_active_gpus=ANSWERS["sm_active_gpus"] + [instant(gpu_of(free), 1)],
                   timeline_available=ANSWERS["timeline_available"] + [per_bucket(gpu_of(free), [1, 1, 1, 1])])
    namespaces = {entry["namespace"]: entry for entry in measure(RecordedPrometheus(answers), WINDOW)["namespaces"]}
    assert sorted(namespaces) == ["", "team-a", "team-b"]
    assert namespaces[""]["available_gpu_hours"] == 4.0 and namespaces[""]["allocated_gpu_hours"] == 0.0


BAD_VALUES = [
    ("NaN", "'NaN'"), ("+Inf", "'+Inf'"), ("-2", "'-2'"), ("abc", "'abc'"),
]


@pytest.mark.parametrize(("value", "shown"), BAD_VALUES)
def test_samples_that_are_not_finite_counts_are_refused(value, shown):
    answers = dict(ANSWERS, active=[{"metric": GPU0, "value": [WINDOW.end, value]}])
    with pytest.raises(OccupancyError) as error:
        measure(RecordedPrometheus(answers), WINDOW)
    assert str(error.value) == (f"Prometheus answered the active query with {shown} for {GPU0}: only finite numbers of at least 0 "
                                "(step counts and timestamps) are allowed.")


def test_a_range_answer_without_values_is_refused():
    answers = dict(ANSWERS, timeline_available=[{"metric": gpu_of(GPU0)}])
    with pytest.raises(OccupancyError, match=r"^Prometheus answered the timeline_available query with a sample without metric labels or "
                                             r"values: \{'metric': "):
        measure(RecordedPrometheus(answers), WINDOW)


def test_more_active_than_available_hours_is_refused():
    answers = dict(ANSWERS, active=[instant(GPU0, 9)])
    with pytest.raises(OccupancyError, match=r"^Prometheus answered 9 active GPU-hours for node n1 "
                                             r"but only 7 available: active hours may not exceed available ones"):
        measure(RecordedPrometheus(answers), WINDOW)


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
        "n2 has no DCGM_FI_DEV_FB_USED or DCGM_FI_PROF_SM_ACTIVE series in the window: its exporter is down, the node is absent, "
        "or its hostname label (Hostname up to dcgm-exporter 4.5.3-4.8.2) differs from the inventory name.")
    assert result["total"]["idle_allocated_gpu_hours"] == round(1 + 6 / 7, 6)


def test_timeline_weighs_mig_instances():
    timeline = measure(RecordedPrometheus(ANSWERS), WINDOW)["timeline"]
    assert timeline["bucket_seconds"] == 3600
    assert [point["time"] for point in timeline["total"]] == [
        "2026-10-01T00:00:00Z", "2026-10-01T01:00:00Z", "2026-10-01T02:00:00Z", "2026-10-01T03:00:00Z"]
    assert [point["available_gpu_hours"] for point in timeline["total"]] == [2.0, 2.0, 1.0, 2.0]
    assert [point["idle_allocated_gpu_hours"] for point in timeline["nodes"]["n1"]] == [round(3 / 7, 6), 0.0, 1.0, round(3 / 7, 6)]


def test_a_window_without_samples_is_refused():
    with pytest.raises(OccupancyError, match=r"^Prometheus holds no DCGM_FI_DEV_FB_USED or DCGM_FI_PROF_SM_ACTIVE samples between 2026-10-01T00:00:00Z and "
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
