# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""GPU occupancy from dcgm-exporter metrics in Prometheus: the PromQL, and the accounting of its answers.

Per sample step and per GPU series: available = the series has a ``DCGM_FI_DEV_FB_USED`` or a
``DCGM_FI_PROF_SM_ACTIVE`` sample (dcgm-exporter issue #512: FB_* may be missing for MIG instances on H100);
allocated = available and dcgm-exporter attributes the series to a pod (``pod`` beyond the scrape target's own, or
``exported_pod``); active = allocated and ``SM_ACTIVE > threshold``; idle-allocated = allocated and
``SM_ACTIVE <= threshold``. A step without a sample is neither: it is unknown. Prometheus does the per-step work
with subqueries (``count_over_time((expr)[window:step])``) and answers one number per series or per chart
bucket, so the query count does not grow with the window or the number of GPUs.

Plain Python without Ansible imports: ``fetch(path, params)`` is given by the caller (the module's HTTP client,
or a test's recorded answers) and returns the ``data`` member of a Prometheus API answer.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import mig_model

FB_USED = "DCGM_FI_DEV_FB_USED"
SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
UP = "up"
HAS_POD = 'pod!=""'
HAS_EXPORTED_POD = 'exported_pod!=""'
# dcgm-exporter names the node label Hostname up to 4.5.3-4.8.2 and hostname after its PR #655; a series has one.
NODE_LABELS = ("Hostname", "hostname")
GPU_LABELS = NODE_LABELS + ("gpu", "UUID")
INSTANCE_LABELS = GPU_LABELS + ("GPU_I_PROFILE", "GPU_I_ID")
HOURS_KEYS = ("available_gpu_hours", "allocated_gpu_hours", "active_gpu_hours", "idle_allocated_gpu_hours")
# Compute slices of a MIG-capable GPU whose model the MIG catalogue does not list: every MIG GPU but the A30 has 7.
DEFAULT_COMPUTE_SLICES = 7
# Chart buckets per report: enough for a month at 3 hours a bucket.
MAX_TIMELINE_POINTS = 240
# The labels that tell the members of an HA Prometheus pair apart (Prometheus Operator's and the usual external label).
REPLICA_LABELS = ("prometheus_replica", "replica")

_DURATION = re.compile(r"^(?:(\d+)y)?(?:(\d+)w)?(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+)s)?(?:(\d+)ms)?$")
_DURATION_SECONDS = (365 * 86400, 7 * 86400, 86400, 3600, 60, 1, 0.001)
_PROFILE_SLICES = re.compile(r"^(?:[0-9]+c\.)?([0-9]+)g\.")
_LABEL_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABEL_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*$')


class OccupancyError(Exception):
    """Bad input, or an answer from Prometheus that cannot be used; the message is one sentence."""


@dataclass(frozen=True)
class Window:
    """The measured interval ``(start, end]`` in Unix seconds, cut into ``steps`` steps of ``step`` seconds."""

    start: int
    end: int
    step: int

    @property
    def steps(self):
        return (self.end - self.start) // self.step

    @property
    def step_hours(self):
        return self.step / 3600.0

    @property
    def hours(self):
        return (self.end - self.start) / 3600.0

    def as_dict(self):
        return {
            "start": iso(self.start),
            "end": iso(self.end),
            "step_seconds": self.step,
            "steps": self.steps,
            "hours": round(self.hours, 6),
        }


def iso(seconds):
    """RFC 3339 in UTC, to the second."""
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(value, name="step"):
    """Seconds in a Prometheus duration (``1m``, ``5m``, ``1h30m``, ``90s``); a bare number is seconds."""
    text = str(value).strip()
    if re.match(r"^[0-9]+(\.[0-9]+)?$", text):
        seconds = float(text)
    else:
        match = _DURATION.match(text)
        if not text or not match or not any(match.groups()):
            raise OccupancyError(f"{name} must be a Prometheus duration such as 1m, 5m or 1h, not {value!r}.")
        seconds = sum(int(part) * unit for part, unit in zip(match.groups(), _DURATION_SECONDS) if part)
    if seconds < 1 or seconds != int(seconds):
        raise OccupancyError(f"{name} must be a whole number of seconds, at least 1s, not {value!r}.")
    return int(seconds)


def parse_time(value, name):
    """Unix seconds from RFC 3339 (``2026-10-01T00:00:00Z``) or a Unix timestamp (int, float or their text)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = datetime.fromisoformat(re.sub(r"[Zz]$", "+00:00", text).replace(" ", "T", 1))
    except ValueError:
        raise OccupancyError(f"{name} must be RFC 3339 (2026-10-01T00:00:00Z) or Unix seconds, not {value!r}.")
    if parsed.tzinfo is None:
        raise OccupancyError(f"{name} must carry its time zone (Z or +01:00), not {value!r}.")
    return parsed.timestamp()


def make_window(start, end, step, now=None):
    """The Window for the options: ``end`` defaults to now, ``start`` to 30 days before ``end``.

    Both ends move to whole multiples of the step (``start`` up, ``end`` down), because Prometheus aligns
    subquery steps to multiples of the step since the epoch; the answer says which window was measured.
    """
    step_seconds = parse_duration(step)
    end_seconds = parse_time(end, "end") if end not in (None, "") else (time.time() if now is None else now)
    start_seconds = parse_time(start, "start") if start not in (None, "") else end_seconds - 30 * 86400
    aligned_start = -(-int(start_seconds) // step_seconds) * step_seconds
    aligned_end = int(end_seconds) // step_seconds * step_seconds
    if aligned_end - aligned_start < step_seconds:
        raise OccupancyError(
            f"The window from {iso(start_seconds)} to {iso(end_seconds)} must be at least one step ({step_seconds} s) long."
        )
    return Window(aligned_start, aligned_end, step_seconds)


def selector_matchers(selector):
    """The extra label matchers (``cluster="dc1"``) as a list, each checked; empty for no selector."""
    if not selector:
        return []
    matchers = [part for part in _split_matchers(selector.strip().strip("{}")) if part.strip()]
    for matcher in matchers:
        if not _LABEL_MATCHER.match(matcher):
            raise OccupancyError(f'selector must be PromQL label matchers such as cluster="dc1", not {selector!r}.')
    return [matcher.strip() for matcher in matchers]


def _label_name(value, name):
    if not isinstance(value, str) or not _LABEL_NAME.match(value):
        raise OccupancyError(f"{name} must list Prometheus label names such as prometheus_replica, not {value!r}.")
    return value


def _split_matchers(text):
    parts, current, quoted, escaped = [], "", False, False
    for char in text:
        if char == "," and not quoted:
            parts.append(current)
            current = ""
            continue
        current += char
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
    parts.append(current)
    return parts


def timeline_bucket_steps(steps, max_points=MAX_TIMELINE_POINTS):
    """The fewest steps per chart bucket that divide the window evenly and give at most ``max_points`` buckets."""
    for size in range(-(-steps // max_points), steps + 1):
        if steps % size == 0:
            return size
    return steps


class Queries:
    """The PromQL of one measurement.

    Ranges end one millisecond short of the step (or window), so that a range holds the samples of one step on
    Prometheus 2 (ranges closed on the left) and 3 (open on the left) alike.
    """

    def __init__(self, window, threshold, selector="", replica_labels=REPLICA_LABELS):
        self.window = window
        matchers = selector_matchers(selector)
        self._extra = "".join("," + matcher for matcher in matchers)
        self._step_range = f"{window.step * 1000 - 1}ms"
        self._step = f"{window.step}s"
        self.threshold = threshold
        self._replicas = [_label_name(label, "replica_labels") for label in replica_labels]
        self.series = self._present("")
        self.any_series = f"({self._last(FB_USED, '')} or {self._last(SM_ACTIVE, '')})"
        sm_active = self._last(SM_ACTIVE, "")
        # dcgm-exporter adds pod/namespace/container only to the series of a GPU a pod holds (its kubernetes.go). Scraped
        # through a ServiceMonitor every series also carries the target's own pod: with honorLabels the exporter's pod
        # replaces it, so a series whose pod is the target's (the up series of its instance) is a free GPU; without
        # honorLabels the workload's pod is exported_pod.
        up = self._dedupe(f"last_over_time({UP}{{{HAS_POD}}}[{self._step_range}])")
        allocated = f"(({self._present(HAS_POD)} unless on(instance, pod) {up}) or {self._present(HAS_EXPORTED_POD)})"
        self.per_step = {
            "present": self.series,
            "allocated": allocated,
            "active": f"({allocated} and ({sm_active} > {threshold!r}))",
            "idle": f"({allocated} and ({sm_active} <= {threshold!r}))",
        }

    def _present(self, matcher):
        by_gpu = ", ".join(GPU_LABELS)

        def either(device):
            extra = ",".join(part for part in (device, matcher) if part)
            return f"({self._last(FB_USED, extra)} or {self._last(SM_ACTIVE, extra)})"

        whole, instances = either('GPU_I_ID=""'), either('GPU_I_ID!=""')
        # A MIG GPU may also export a whole-GPU series; where it has instance series in the same step, only they count.
        return f"(({whole} unless on({by_gpu}) {instances}) or {instances})"

    def _dedupe(self, expression):
        # Both members of an HA pair answer through Thanos or a federation: one series per replica label value would count twice.
        return f"max without ({', '.join(self._replicas)}) ({expression})" if self._replicas else expression

    def _last(self, metric, matcher):
        matchers = ",".join(part for part in (matcher, self._extra.lstrip(",")) if part)
        return self._dedupe(f"last_over_time({metric}{{{matchers}}}[{self._step_range}])")

    def _over_window(self, function, expression, length):
        return f"{function}(({expression})[{length * 1000 - 1}ms:{self._step}])"

    def instant(self):
        """Name -> PromQL of the queries evaluated once, at the end of the window: one number per series."""
        length = self.window.end - self.window.start
        queries = {name: self._over_window("count_over_time", expression, length) for name, expression in self.per_step.items()}
        idle_time = f"timestamp({self.per_step['idle']})"
        queries["idle_first"] = self._over_window("min_over_time", idle_time, length)
        queries["idle_last"] = self._over_window("max_over_time", idle_time, length)
        sm_matchers = self._extra.lstrip(",")
        queries["sm_active_gpus"] = f"count by ({', '.join(GPU_LABELS)}) (count_over_time({SM_ACTIVE}{{{sm_matchers}}}[{length * 1000 - 1}ms]))"
        return queries

    def timeline(self, bucket):
        """Name -> PromQL of the range queries of the charts: steps per bucket, per GPU or per MIG instance."""
        by_gpu = ", ".join(GPU_LABELS)
        by_instance = ", ".join(INSTANCE_LABELS)
        queries = {"available": self._over_window("count_over_time", f"count by ({by_gpu}) ({self.any_series})", bucket)}
        for name in ("allocated", "active", "idle"):
            per_instance = f"count by ({by_instance}) ({self.per_step[name]})"
            queries[name] = self._over_window("count_over_time", per_instance, bucket)
        return queries


def measure(fetch, window, threshold=0.15, selector="", expected_nodes=None, clock=time.monotonic, replica_labels=REPLICA_LABELS):
    """Run the queries through ``fetch`` and account for them; the module's whole answer but ``changed``.

    ``expected_nodes`` maps each node the inventory declares to its GPU count, so that a node or GPU without
    series is reported as unknown rather than forgotten.
    """
    threshold = _threshold(threshold)
    expected = _expected_nodes(expected_nodes)
    queries = Queries(window, threshold, selector, replica_labels)
    bucket_steps = timeline_bucket_steps(window.steps)
    bucket = bucket_steps * window.step
    log = []

    def run(name, path, params):
        started = clock()
        data = fetch(path, params)
        result = _vector(data, name, matrix=path.endswith("query_range"))
        log.append({"name": name, "query": params["query"], "seconds": round(clock() - started, 3), "series": len(result)})
        return result

    answers = {}
    for name, query in queries.instant().items():
        answers[name] = run(name, "/api/v1/query", {"query": query, "time": str(window.end)})
    timeline = {}
    for name, query in queries.timeline(bucket).items():
        params = {"query": query, "start": str(window.start + bucket), "end": str(window.end), "step": f"{bucket}s"}
        timeline[name] = run("timeline_" + name, "/api/v1/query_range", params)
    result = account(window, answers, timeline, bucket, expected)
    result["queries"] = {
        "count": len(log),
        "seconds": round(sum(entry["seconds"] for entry in log), 3),
        "log": log,
    }
    result["sm_active_threshold"] = threshold
    return result


def _threshold(value):
    try:
        threshold = float(value)
    except (TypeError, ValueError):
        raise OccupancyError(f"sm_active_threshold must be a number between 0 and 1, not {value!r}.")
    if not 0 <= threshold < 1:
        raise OccupancyError(f"sm_active_threshold must be at least 0 and below 1, not {value!r}.")
    return threshold


def _expected_nodes(value):
    expected = {}
    for node, count in (value or {}).items():
        if isinstance(count, bool) or not isinstance(count, int) and not str(count).isdigit():
            raise OccupancyError(f"expected_nodes must map each node to its GPU count, not {node}: {count!r}.")
        expected[str(node)] = int(count)
    return expected


def _vector(data, name, matrix=False):
    """The samples of an answer, each value checked: a count of steps or a timestamp, a finite number, at least 0."""
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise OccupancyError(f"Prometheus answered the {name} query without a result list.")
    for sample in data["result"]:
        points = sample.get("values") if isinstance(sample, dict) and matrix else [sample.get("value")] if isinstance(sample, dict) else None
        if not isinstance(points, list) or not isinstance(sample.get("metric"), dict):
            member = "values" if matrix else "value"
            raise OccupancyError(f"Prometheus answered the {name} query with a sample without metric labels or {member}: {sample!r:.200}.")
        for point in points:
            value = point[1] if isinstance(point, list) and len(point) == 2 else point
            try:
                number, _stamp = float(value), float(point[0])
            except (TypeError, ValueError, KeyError, IndexError):
                number = float("nan")
            if not math.isfinite(number) or number < 0:
                raise OccupancyError(f"Prometheus answered the {name} query with {value!r} for {sample['metric']}: "
                                     "only finite numbers of at least 0 (step counts and timestamps) are allowed.")
            point[1] = number
    return data["result"]


@dataclass
class _Series:
    """One dcgm-exporter series as the accounting sees it."""

    node: str
    gpu: str
    uuid: str
    profile: str
    instance: str
    namespace: str
    pod: str
    model: str

    @classmethod
    def from_labels(cls, labels):
        # Without honorLabels the scrape target's namespace/pod win and the workload's are renamed exported_*.
        return cls(
            node=labels.get("hostname") or labels.get("Hostname") or "",
            gpu=labels.get("gpu", ""),
            uuid=labels.get("UUID", ""),
            profile=labels.get("GPU_I_PROFILE", ""),
            instance=labels.get("GPU_I_ID", ""),
            namespace=labels.get("exported_namespace") or labels.get("namespace") or "",
            pod=labels.get("exported_pod") or labels.get("pod") or "",
            model=labels.get("modelName", ""),
        )

    @property
    def gpu_key(self):
        return (self.node, self.uuid or self.gpu)

    @property
    def weight(self):
        return mig_weight(self.profile, self.model) if self.profile else 1.0


def mig_weight(profile, model=""):
    """The share of its GPU a MIG instance of ``profile`` holds: compute slices over the model's compute slices.

    ``3g.40gb`` on an H100 is 3/7; ``2g.12gb`` on an A30 (4 compute slices) is 2/4. A model missing from the MIG
    catalogue counts 7 slices, unless its name says A30.
    """
    match = _PROFILE_SLICES.match(profile or "")
    if not match:
        raise OccupancyError(f"The MIG profile {profile!r} does not say its compute slices (expected a name like 3g.40gb).")
    catalogued = mig_model(model)
    if catalogued is not None:
        total = catalogued.compute_slices
    else:
        total = 4 if re.search(r"\bA30\b", model or "") else DEFAULT_COMPUTE_SLICES
    slices = int(match.group(1))
    if slices > total:
        raise OccupancyError(f"The MIG profile {profile!r} holds more compute slices than a {model or 'GPU'} has ({total}).")
    return slices / total


def _value(sample):
    return sample["value"][1]


def _hours(steps, weight, window):
    return steps * weight * window.step_hours


def _empty_hours():
    return {key: 0.0 for key in HOURS_KEYS}


def _finish(hours, scope):
    finished = {key: round(value, 6) for key, value in hours.items()}
    available = hours["available_gpu_hours"]
    if finished["active_gpu_hours"] > finished["available_gpu_hours"]:
        # Answers of one measurement that disagree (samples written between the queries, a replica label not deduplicated).
        raise OccupancyError(
            f"Prometheus answered {finished['active_gpu_hours']:g} active GPU-hours for {scope} but only "
            f"{finished['available_gpu_hours']:g} available: active hours may not exceed available ones; check replica_labels, "
            "or end the window earlier than the samples being written.")
    finished["occupancy"] = round(hours["active_gpu_hours"] / available, 6) if available > 0 else None
    return finished


def account(window, answers, timeline, bucket, expected=None):
    """Totals, nodes, namespaces, idle allocations, unknowns and the chart timeline from the query answers."""
    expected = expected or {}
    step_hours = window.step_hours
    if not answers["present"] and not timeline["available"]:
        raise OccupancyError(
            f"Prometheus holds no {FB_USED} or {SM_ACTIVE} samples between {iso(window.start)} and {iso(window.end)}: "
            "check that dcgm-exporter is scraped, the selector and the window."
        )
    # Available GPU steps per GPU, from the chart buckets (they tile the window exactly).
    gpu_steps, gpu_models, gpu_names = {}, {}, {}
    for sample in timeline["available"]:
        series = _Series.from_labels(sample["metric"])
        gpu_steps[series.gpu_key] = gpu_steps.get(series.gpu_key, 0) + sum(point[1] for point in sample["values"])
        gpu_names[series.gpu_key] = series.gpu or series.uuid
    for sample in answers["present"]:
        series = _Series.from_labels(sample["metric"])
        gpu_models.setdefault(series.gpu_key, series.model)

    nodes, namespaces, total = {}, {}, _empty_hours()
    for (node, _gpu), steps in gpu_steps.items():
        hours = _hours(steps, 1.0, window)
        nodes.setdefault(node, _empty_hours())["available_gpu_hours"] += hours
        total["available_gpu_hours"] += hours

    key_of = {"allocated": "allocated_gpu_hours", "active": "active_gpu_hours", "idle": "idle_allocated_gpu_hours"}
    attributed = {_key(sample) for sample in answers["allocated"]}
    for name in ("present", "allocated", "active", "idle"):
        for sample in answers[name]:
            series = _Series.from_labels(sample["metric"])
            hours = _hours(_value(sample), series.weight, window)
            # A free GPU scraped with honorLabels carries the exporter's own namespace: it belongs to no namespace.
            namespace = series.namespace if _key(sample) in attributed else ""
            bucket_of_namespace = namespaces.setdefault(namespace, _empty_hours())
            if name == "present":
                bucket_of_namespace["available_gpu_hours"] += hours
                continue
            bucket_of_namespace[key_of[name]] += hours
            nodes.setdefault(series.node, _empty_hours())[key_of[name]] += hours
            total[key_of[name]] += hours

    idle_allocations = _idle_allocations(answers, window)
    sm_gpus = {_Series.from_labels(sample["metric"]).gpu_key for sample in answers["sm_active_gpus"]}
    unknown = _unknown(window, gpu_steps, gpu_names, sm_gpus, expected)
    unknown_by_node = {}
    for entry in unknown:
        unknown_by_node[entry["node"]] = unknown_by_node.get(entry["node"], 0.0) + entry["unknown_gpu_hours"]

    node_list = []
    for node in sorted(set(nodes) | set(expected)):
        entry = dict(node=node, **_finish(nodes.get(node, _empty_hours()), f"node {node}"))
        entry["gpus"] = sum(1 for key in gpu_steps if key[0] == node)
        entry["expected_gpus"] = expected.get(node)
        entry["unknown_gpu_hours"] = round(unknown_by_node.get(node, 0.0), 6)
        node_list.append(entry)
    total_entry = _finish(total, "the whole window")
    total_entry["unknown_gpu_hours"] = round(sum(unknown_by_node.values()), 6)
    total_entry["gpus"] = len(gpu_steps)
    return {
        "window": window.as_dict(),
        "total": total_entry,
        "nodes": node_list,
        "namespaces": [dict(namespace=name, **_finish(hours, f"namespace {name!r}")) for name, hours in sorted(namespaces.items())],
        "idle_allocations": idle_allocations,
        "unknown": unknown,
        "timeline": _timeline(window, timeline, bucket, gpu_models),
    }


def _idle_allocations(answers, window):
    first = {_key(sample): _value(sample) for sample in answers["idle_first"]}
    last = {_key(sample): _value(sample) for sample in answers["idle_last"]}
    grouped = {}
    for sample in answers["idle"]:
        series = _Series.from_labels(sample["metric"])
        steps = _value(sample)
        if steps <= 0:
            continue
        key = (series.node, series.gpu, series.instance, series.namespace, series.pod)
        entry = grouped.setdefault(key, {
            "node": series.node,
            "gpu": series.gpu,
            "uuid": series.uuid,
            "gpu_instance": series.instance or None,
            "profile": series.profile or None,
            "namespace": series.namespace,
            "pod": series.pod,
            "idle_allocated_hours": 0.0,
            "_since": None,
            "_until": None,
        })
        entry["idle_allocated_hours"] += _hours(steps, series.weight, window)
        since = first.get(_key(sample))
        until = last.get(_key(sample))
        # The timestamp is that of the step's end: the idle step began one step earlier.
        if since is not None:
            entry["_since"] = min(filter(None, (entry["_since"], since - window.step)))
        if until is not None:
            entry["_until"] = max(filter(None, (entry["_until"], until)))
    result = []
    for entry in grouped.values():
        entry["idle_allocated_hours"] = round(entry["idle_allocated_hours"], 6)
        entry["since"] = iso(entry.pop("_since")) if entry["_since"] is not None else None
        entry["until"] = iso(entry.pop("_until")) if entry["_until"] is not None else None
        entry.pop("_since", None)
        entry.pop("_until", None)
        result.append(entry)
    return sorted(result, key=lambda item: (-item["idle_allocated_hours"], item["node"], _natural(item["gpu"]), item["pod"]))


def _key(sample):
    return tuple(sorted(sample["metric"].items()))


def _natural(text):
    return (0, int(text), "") if str(text).isdigit() else (1, 0, str(text))


def _unknown(window, gpu_steps, gpu_names, sm_gpus, expected):
    unknown = []
    for node in sorted(expected):
        seen = sorted((key for key in gpu_steps if key[0] == node), key=lambda key: _natural(key[1]))
        if not seen:
            unknown.append({
                "node": node,
                "gpu": None,
                "kind": "no_series",
                "unknown_gpu_hours": round(expected[node] * window.hours, 6),
                "reason": f"{node} has no {FB_USED} or {SM_ACTIVE} series in the window: its exporter is down, the node is "
                          "absent, or its hostname label (Hostname up to dcgm-exporter 4.5.3-4.8.2) differs from the inventory name.",
            })
            continue
        if len(seen) < expected[node]:
            missing = expected[node] - len(seen)
            unknown.append({
                "node": node,
                "gpu": None,
                "kind": "missing_gpus",
                "unknown_gpu_hours": round(missing * window.hours, 6),
                "reason": f"{node} exports {len(seen)} of the {expected[node]} GPUs the inventory declares.",
            })
    for key in sorted(gpu_steps, key=lambda key: (key[0], _natural(gpu_names[key]))):
        node, gpu = key[0], gpu_names[key]
        missing_steps = window.steps - gpu_steps[key]
        if missing_steps > 0:
            unknown.append({
                "node": node,
                "gpu": gpu,
                "kind": "gap",
                "unknown_gpu_hours": round(missing_steps * window.step_hours, 6),
                "reason": f"{node} GPU {gpu} has no samples for {missing_steps * window.step_hours:g} h of the window "
                          "(exporter down or node absent): counted as unknown, not idle.",
            })
        if key not in sm_gpus:
            unknown.append({
                "node": node,
                "gpu": gpu,
                "kind": "no_sm_active",
                "unknown_gpu_hours": 0.0,
                "reason": f"{node} GPU {gpu} has no {SM_ACTIVE} series (profiling metrics are not collected): "
                          "its allocated hours are neither active nor idle.",
            })
    return unknown


def _timeline(window, timeline, bucket, gpu_models):
    times = [window.start + bucket * index for index in range(1, (window.end - window.start) // bucket + 1)]
    index_of = {stamp: index for index, stamp in enumerate(times)}
    per_node = {}

    def add(node, key, stamp, value):
        if int(float(stamp)) not in index_of:
            return
        rows = per_node.setdefault(node, {name: [0.0] * len(times) for name in HOURS_KEYS})
        rows[key][index_of[int(float(stamp))]] += value

    for name, key in (("available", "available_gpu_hours"), ("allocated", "allocated_gpu_hours"),
                      ("active", "active_gpu_hours"), ("idle", "idle_allocated_gpu_hours")):
        for sample in timeline[name]:
            series = _Series.from_labels(sample["metric"])
            if not series.model:
                series.model = gpu_models.get(series.gpu_key, "")
            weight = series.weight if name != "available" else 1.0
            for stamp, value in sample["values"]:
                add(series.node, key, stamp, _hours(value, weight, window))
    nodes = {
        node: [dict(time=iso(stamp - bucket), **{key: round(rows[key][index], 6) for key in HOURS_KEYS}) for index, stamp in enumerate(times)]
        for node, rows in sorted(per_node.items())
    }
    total = []
    for index, stamp in enumerate(times):
        point = {key: round(sum(rows[key][index] for rows in per_node.values()), 6) for key in HOURS_KEYS}
        total.append(dict(time=iso(stamp - bucket), **point))
    return {"bucket_seconds": bucket, "total": total, "nodes": nodes}
