"""A month of dcgm-exporter metrics for the lab's GPU nodes, with its ground truth.

The scenario is written as data below; every sample is computed from it, written as OpenMetrics for
``promtool tsdb create-blocks-from openmetrics``, and counted into the ground truth with the definitions of
docs/gpu-occupancy.md (counted here, step by step, independently of the collection's code: nothing is imported
from plugins/).

Run ``python3 lab/prometheus/scenario.py --interval 5m --out DIR`` to write DIR/dcgm.om and DIR/ground_truth.json;
``--nodes 64`` repeats the three lab nodes' patterns over 64 synthetic nodes (for the benchmark).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from datetime import datetime, timezone
from pathlib import Path

MONTH_START = int(datetime(2026, 10, 1, tzinfo=timezone.utc).timestamp())
MONTH_HOURS = 720
# Prometheus scrapes a little after the interval boundary; a sample belongs to the step that ends after it.
SCRAPE_OFFSET_SECONDS = 17
THRESHOLD = 0.15
DRIVER = "580.65.06"

H100 = {"model": "NVIDIA H100 80GB HBM3", "slices": 7, "fb_total": 81559}
A100 = {"model": "NVIDIA A100-SXM4-80GB", "slices": 7, "fb_total": 81920}

# Scrape styles. Plain: a static target, the workload's namespace/pod/container as dcgm-exporter writes them. Through a
# ServiceMonitor (prometheus-operator) every series also gets the target's namespace, service, pod, container, endpoint;
# with honorLabels: true (what cluster_addons renders) the exporter's pod/namespace/container win on a GPU a pod holds,
# with false they are kept as exported_pod/exported_namespace/exported_container.
PLAIN = "plain"
SERVICE_MONITOR = "servicemonitor"
SERVICE_MONITOR_HONOR = "servicemonitor-honorlabels"
# A MIG GPU instance nobody uses still reports framebuffer used: the nvidia-smi samples of NVIDIA's MIG user guide show
# freshly created instances at about 11 MiB; a whole free GPU without a context 0 MiB.
FREE_MIG_FB_MIB = 11


def allocation(start_h, end_h, namespace, pod, pattern, fb_mib):
    return {"start_h": start_h, "end_h": end_h, "namespace": namespace, "pod": pod, "pattern": pattern, "fb_mib": fb_mib}


def lab_nodes():
    """The three lab GPU nodes: busy training, inference on MIG, a forgotten notebook and an exporter gap."""
    training = [allocation(0, 290, "team-vision", "train-vit-g-0", "training", 71000),
                allocation(296, 700, "team-llm", "pretrain-13b-0", "training", 76500)]
    inference_instances = [
        # (GPU instance id, profile, compute slices, allocations)
        ("1", "3g.40gb", 3, lambda g: [allocation(0, 720, "team-inference", f"serve-chat-{g}", "diurnal", 30100)]),
        ("5", "2g.20gb", 2, lambda g: [allocation(0, 720, "team-inference", f"serve-embed-{g}", "steady", 15200)]),
        ("13", "1g.10gb", 1, lambda g: [allocation(0, 360, "team-inference", f"serve-rerank-{g}", "diurnal", 7100)]),
        ("14", "1g.10gb", 1, lambda g: []),
    ]
    # dcgm-exporter issue #512: DCGM_FI_DEV_FB_* missing for the GPU instances of some H100 (here GPUs 2 and 3).
    instance_fb_missing = (2, 3)
    dc1_gpu2 = []
    for index in range(8):
        if index < 4:
            dc1_gpu2.append({"index": index, "instance_fb": index not in instance_fb_missing, "mig": [
                {"gpu_instance": gi, "profile": profile, "slices": slices, "allocations": make(index)}
                for gi, profile, slices, make in inference_instances]})
        elif index < 6:
            dc1_gpu2.append({"index": index, "allocations": [allocation(100, 500, "team-inference", "batch-translate-0", "steady", 40200)]})
        else:
            dc1_gpu2.append({"index": index, "allocations": []})
    dc2_gpu1 = []
    for index in range(8):
        if index < 4:
            allocations = [allocation(120, 600, "team-nlp", "finetune-bert-0", "training", 52000)]
        elif index == 7:
            # Twelve days (288 h) from 2026-10-03T09:00Z: a notebook that loaded a model and was forgotten.
            allocations = [allocation(57, 345, "research", "jupyter-anna", "notebook", 9800)]
        else:
            allocations = []
        dc2_gpu1.append({"index": index, "allocations": allocations})
    # dc1 runs dcgm-exporter up to 4.5.3-4.8.2 (node label Hostname), dc2 a later one (hostname, dcgm-exporter PR #655).
    return [
        {"name": "dc1-gpu1", "cluster": "dc1", "gpu": H100, "scrape": PLAIN, "node_label": "Hostname", "gaps": [],
         "gpus": [{"index": index, "allocations": training} for index in range(8)]},
        {"name": "dc1-gpu2", "cluster": "dc1", "gpu": H100, "scrape": SERVICE_MONITOR_HONOR, "node_label": "Hostname", "gaps": [],
         "gpus": dc1_gpu2},
        # dcgm-exporter on dc2-gpu1 was down for 6 hours on 2026-10-21.
        {"name": "dc2-gpu1", "cluster": "dc2", "gpu": A100, "scrape": SERVICE_MONITOR, "node_label": "hostname", "gaps": [(480, 486)],
         "gpus": dc2_gpu1},
    ]


def synthetic_nodes(count):
    """``count`` nodes in one cluster, each repeating one of the lab nodes' patterns (for the benchmark)."""
    patterns = lab_nodes()
    nodes = []
    for number in range(count):
        pattern = patterns[number % len(patterns)]
        nodes.append(dict(pattern, name=f"synth-gpu{number + 1:03d}", cluster="synth"))
    return nodes


def sm_active(pattern, hour_of_month, rng):
    """The SM activity of a step: far from the threshold, so that float noise never flips a step."""
    hour_of_day = hour_of_month % 24
    if pattern == "training":
        # A checkpoint every day at 02:00 for half an hour stalls the SMs.
        if 2 <= hour_of_day < 2.5:
            return round(rng.uniform(0.01, 0.06), 4)
        return round(rng.uniform(0.78, 0.97), 4)
    if pattern == "diurnal":
        return round(rng.uniform(0.45, 0.75), 4) if 8 <= hour_of_day < 20 else round(rng.uniform(0.0, 0.08), 4)
    if pattern == "steady":
        return round(rng.uniform(0.35, 0.7), 4)
    if pattern == "notebook":
        return round(rng.uniform(0.0, 0.03), 4)
    raise ValueError(pattern)


def _uuid(node, index):
    digest = hashlib.sha1(f"{node}/{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def _target(node):
    """The labels Prometheus gives the scrape target (and its up series)."""
    if node["scrape"] == PLAIN:
        return {"cluster": node["cluster"], "job": "dcgm-exporter", "instance": f"{node['name']}:9400"}
    return {"cluster": node["cluster"], "job": "nvidia-dcgm-exporter", "instance": f"{node['name']}:9400", "namespace": "gpu-operator",
            "pod": f"nvidia-dcgm-exporter-{node['name']}", "container": "nvidia-dcgm-exporter", "service": "nvidia-dcgm-exporter",
            "endpoint": "gpu-metrics"}


def _labels(node, gpu_index, extra):
    labels = {
        "DCGM_FI_DRIVER_VERSION": DRIVER,
        node["node_label"]: node["name"],
        "UUID": _uuid(node["name"], gpu_index),
        "device": f"nvidia{gpu_index}",
        "gpu": str(gpu_index),
        "modelName": node["gpu"]["model"],
        "pci_bus_id": f"00000000:{0x18 + 0x10 * gpu_index:02X}:00.0",
    }
    labels.update(_target(node))
    labels.update(extra)
    return labels


def _workload_labels(node, current):
    if current is None:
        return {}
    if node["scrape"] == SERVICE_MONITOR:
        return {"exported_namespace": current["namespace"], "exported_pod": current["pod"], "exported_container": "main"}
    return {"namespace": current["namespace"], "pod": current["pod"], "container": "main"}


class Month:
    """The samples of every series and the ground truth, built step by step."""

    def __init__(self, nodes, interval, hours=MONTH_HOURS, seed=20261001):
        self.interval = interval
        self.steps = hours * 3600 // interval
        self.step_hours = interval / 3600.0
        self.rng = random.Random(seed)
        self.series = {}  # (metric, frozen labels) -> list of (timestamp, value)
        self.nodes = nodes
        self.truth = {"nodes": {}, "namespaces": {}, "idle": {}, "unknown": {}}

    def add(self, metric, labels, timestamp, value):
        self.series.setdefault((metric, tuple(sorted(labels.items()))), []).append((timestamp, value))

    def count(self, table, key, field, hours):
        row = table.setdefault(key, {"available": 0.0, "allocated": 0.0, "active": 0.0, "idle": 0.0})
        row[field] += hours

    def build(self):
        for node in self.nodes:
            for gpu in node["gpus"]:
                self._gpu(node, gpu)
        return self

    def _gpu(self, node, gpu):
        index = gpu["index"]
        for step in range(self.steps):
            hour = step * self.step_hours
            timestamp = MONTH_START + step * self.interval + SCRAPE_OFFSET_SECONDS
            down = any(start <= hour < end for start, end in node["gaps"])
            if index == 0:
                self.add("up", _target(node), timestamp, 0 if down else 1)
            if down:
                self.count(self.truth["unknown"], (node["name"], str(index)), "available", self.step_hours)
                continue
            self.count(self.truth["nodes"], node["name"], "available", self.step_hours)
            if "mig" in gpu:
                used = 0
                for instance in gpu["mig"]:
                    used += self._device(node, index, instance, hour, timestamp, instance["slices"] / node["gpu"]["slices"], {
                        "GPU_I_ID": instance["gpu_instance"], "GPU_I_PROFILE": instance["profile"]}, gpu["instance_fb"])
                # dcgm-exporter also reports the whole MIG GPU's framebuffer, without workload labels and without SM activity.
                self.add("DCGM_FI_DEV_FB_USED", _labels(node, index, {}), timestamp, used)
            else:
                self._device(node, index, gpu, hour, timestamp, 1.0, {})

    def _device(self, node, index, device, hour, timestamp, weight, instance_labels, fb_exported=True):
        current = next((item for item in device["allocations"] if item["start_h"] <= hour < item["end_h"]), None)
        labels = _labels(node, index, dict(instance_labels, **_workload_labels(node, current)))
        fb = current["fb_mib"] + self.rng.randint(-200, 200) if current else FREE_MIG_FB_MIB if instance_labels else 0
        sm = sm_active(current["pattern"], hour, self.rng) if current else 0.0
        if fb_exported:
            self.add("DCGM_FI_DEV_FB_USED", labels, timestamp, fb)
        self.add("DCGM_FI_PROF_SM_ACTIVE", labels, timestamp, sm)
        hours = weight * self.step_hours
        # Allocated means a pod holds the device (docs/gpu-occupancy.md); a free one belongs to no namespace.
        namespace = current["namespace"] if current else ""
        self.count(self.truth["namespaces"], namespace, "available", hours)
        if current:
            active = sm > THRESHOLD
            for table, key in ((self.truth["nodes"], node["name"]), (self.truth["namespaces"], namespace)):
                self.count(table, key, "allocated", hours)
                self.count(table, key, "active" if active else "idle", hours)
            if not active:
                key = (node["name"], str(index), instance_labels.get("GPU_I_ID"), namespace, current["pod"])
                entry = self.truth["idle"].setdefault(key, {"hours": 0.0, "since": timestamp, "until": timestamp})
                entry["hours"] += hours
                entry["until"] = timestamp
        return fb

    def ground_truth(self):
        def rounded(row):
            return {key + ("_gpu_hours" if key != "idle" else "_allocated_gpu_hours"): round(value, 6) for key, value in row.items()}

        total = {"available": 0.0, "allocated": 0.0, "active": 0.0, "idle": 0.0}
        for row in self.truth["nodes"].values():
            for key in total:
                total[key] += row[key]
        step = self.interval

        def step_start(timestamp):
            return (timestamp - SCRAPE_OFFSET_SECONDS - MONTH_START) // step * step + MONTH_START

        return {
            "window": {"start": _iso(MONTH_START), "end": _iso(MONTH_START + self.steps * step), "step_seconds": step},
            "threshold": THRESHOLD,
            "total": rounded(total),
            "nodes": {name: rounded(row) for name, row in sorted(self.truth["nodes"].items())},
            "namespaces": {name: rounded(row) for name, row in sorted(self.truth["namespaces"].items())},
            "idle_allocations": sorted(
                ({"node": node, "gpu": gpu, "gpu_instance": gi, "namespace": ns, "pod": pod, "idle_allocated_hours": round(entry["hours"], 6),
                  "since": _iso(step_start(entry["since"])), "until": _iso(step_start(entry["until"]) + step)}
                 for (node, gpu, gi, ns, pod), entry in self.truth["idle"].items()),
                key=lambda item: (-item["idle_allocated_hours"], item["node"], int(item["gpu"]), item["pod"])),
            "unknown": {f"{node}/{gpu}": round(row["available"], 6) for (node, gpu), row in sorted(self.truth["unknown"].items())},
            "samples": sum(len(points) for points in self.series.values()),
            "series": len(self.series),
        }

    def write_openmetrics(self, path):
        """All samples as OpenMetrics, one metric family after the other, each series' samples in time order."""
        with open(path, "w", encoding="utf-8") as out:
            for metric, help_text in (("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
                                      ("DCGM_FI_PROF_SM_ACTIVE", "The ratio of cycles an SM has at least 1 warp assigned."),
                                      ("up", "Whether the scrape target answered (written by Prometheus itself).")):
                out.write(f"# HELP {metric} {help_text}\n# TYPE {metric} gauge\n")
                for (name, labels), points in sorted(self.series.items()):
                    if name != metric:
                        continue
                    label_text = ",".join(f'{key}="{value}"' for key, value in labels)
                    prefix = f"{metric}{{{label_text}}} "
                    out.write("".join(f"{prefix}{value} {timestamp}\n" for timestamp, value in points))
            out.write("# EOF\n")


def _iso(seconds):
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_interval(text):
    units = {"s": 1, "m": 60, "h": 3600}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", default="5m", help="scrape interval and step, such as 1m or 5m")
    parser.add_argument("--nodes", type=int, default=0, help="synthetic nodes instead of the lab's three")
    parser.add_argument("--out", required=True, type=Path)
    arguments = parser.parse_args(argv)
    arguments.out.mkdir(parents=True, exist_ok=True)
    nodes = synthetic_nodes(arguments.nodes) if arguments.nodes else lab_nodes()
    month = Month(nodes, parse_interval(arguments.interval)).build()
    month.write_openmetrics(arguments.out / "dcgm.om")
    truth = month.ground_truth()
    (arguments.out / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    print(f"{truth['series']} series, {truth['samples']} samples in {arguments.out / 'dcgm.om'}")


if __name__ == "__main__":
    main()
