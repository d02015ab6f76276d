# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Synthetic charts at rack scale (sites of 5, 24 and 64 nodes), and where their text lands.

The charts are what the report code draws from made-up results: the network benchmark's stage chart (curves up to
eight runs, bars above), a pair's chart, and the occupancy report's four charts drawn through
``_occupancy_report.charts``. ``text_boxes`` measures each <text> of an SVG with the charts' own font metrics, so that
the layout can be checked without a browser; ``screenshot`` renders one with headless Chromium.
"""

from __future__ import annotations

import math
import shutil
import struct
import subprocess
import zlib
from datetime import datetime, timedelta, timezone
from xml.etree import ElementTree

from ansible_collections.onprem.gpu.plugins.module_utils import _svg
from ansible_collections.onprem.gpu.plugins.module_utils._network_benchmark_svg import busbw_chart
from ansible_collections.onprem.gpu.plugins.module_utils._occupancy_report import charts as occupancy_charts

SITES = (5, 24, 64)
SVG = "{http://www.w3.org/2000/svg}"
GIB = 1 << 30
WINDOW_START = datetime(2026, 10, 1, tzinfo=timezone.utc)
WINDOW_DAYS = 30


def node_name(index):
    # Long names that differ only at the end, as racks name their nodes.
    return f"dc1-rack{index // 8 + 1:02d}-gpu-node-{index + 1:03d}"


def _sweep(peak, seed):
    """busbw for 1K..8G rising to ``peak``, the shape all_reduce_perf prints."""
    points = []
    for exponent in range(10, 34):
        rise = 1 / (1 + math.exp(-(exponent - 22) / 1.6))
        points.append([1 << exponent, round(peak * rise * (0.98 + 0.02 * math.sin(seed + exponent)), 2)])
    return points


def benchmark_series(nodes):
    """One stage's series: each node alone, every seventh below its 296 GB/s threshold."""
    series = []
    for index in range(nodes):
        failed = index % 7 == 3
        peak = 240.0 + index % 5 if failed else 360.0 + (index * 37) % 29
        series.append({"label": f"{node_name(index)} alone", "points": _sweep(peak, index), "threshold": 296.0,
                       "verdict": "fail" if failed else "pass"})
    return series


def benchmark_charts(nodes):
    return {
        f"network-benchmark-{nodes}-nodes": busbw_chart(benchmark_series(nodes), f"busbw of each node alone ({nodes} nodes)",
                                                        threshold=296.0, min_size=GIB),
        f"network-benchmark-pair-{nodes}-nodes": busbw_chart(
            [{"label": "out-of-place", "points": _sweep(371.0, 1)}, {"label": "in-place", "points": _sweep(368.0, 2)}],
            f"{node_name(0)} + {node_name(nodes - 1)}", threshold=296.0, min_size=GIB),
    }


def _iso(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def occupancy_datacenter(nodes, bucket_hours=3):
    """A 30-day report entry for one site of ``nodes`` 8-GPU nodes: nights idle, a few nodes forgotten, some unseen."""
    buckets = WINDOW_DAYS * 24 // bucket_hours
    times = [_iso(WINDOW_START + timedelta(hours=bucket_hours * index)) for index in range(buckets)]
    per_node, listed = {}, []
    for number in range(nodes):
        points = []
        for index, time in enumerate(times):
            hour = index * bucket_hours % 24
            available = 0.0 if number % 11 == 5 and index < buckets // 4 else 8.0 * bucket_hours
            allocated = available * (0.9 if 8 <= hour < 20 else 0.5)
            active = allocated * (0.1 if number % 9 == 2 else (0.85 if 8 <= hour < 20 else 0.3))
            points.append({"time": time, "available_gpu_hours": available, "allocated_gpu_hours": allocated,
                           "active_gpu_hours": active, "idle_allocated_gpu_hours": allocated - active})
        per_node[node_name(number)] = points
        listed.append({"node": node_name(number)})
    total = [{key: (point[key] if key == "time" else sum(rows[index][key] for rows in per_node.values())) for key in point}
             for index, point in enumerate(next(iter(per_node.values())))]
    names = ["llm-pretraining", "vision", "speech-recognition-research", "inference-batch", "recsys", "ml-platform-evaluation", "robotics", "genomics"]
    namespaces = [{"namespace": f"team-{name}", "active_gpu_hours": 900.0 * nodes / (rank + 1), "idle_allocated_gpu_hours": 300.0 * nodes / (rank + 2)}
                  for rank, name in enumerate(names[: max(3, nodes // 8)])]
    namespaces.append({"namespace": "", "active_gpu_hours": 0.4, "idle_allocated_gpu_hours": 1.2})
    eur_per_month = 8016.33 * nodes
    return {
        "datacenter": "dc1",
        "occupancy": {"window": {"start": _iso(WINDOW_START), "end": _iso(WINDOW_START + timedelta(days=WINDOW_DAYS))},
                      "timeline": {"total": total, "nodes": per_node}, "nodes": listed, "namespaces": namespaces},
        "costs": {"eur_per_month": eur_per_month, "cloud_eur_per_month": 25000.0 * nodes, "occupancy": 0.43,
                  "break_even_occupancy": eur_per_month / (25000.0 * nodes)},
    }


def occupancy_sample_charts(nodes):
    return {f"occupancy-{nodes}-nodes-{name[:-4]}": text for name, text in occupancy_charts([occupancy_datacenter(nodes)]).items()}


def all_charts():
    """Chart name -> SVG text, every chart at every site size."""
    charts = {}
    for nodes in SITES:
        charts.update(benchmark_charts(nodes))
        charts.update(occupancy_sample_charts(nodes))
    return charts


def size(svg_text):
    root = ElementTree.fromstring(svg_text)
    return float(root.get("width")), float(root.get("height"))


def text_boxes(svg_text):
    """[(text, (left, top, right, bottom))] of every unrotated <text>, measured as the charts measure them."""
    root = ElementTree.fromstring(svg_text)
    default = float(root.get("font-size", "16"))
    boxes = []
    for element in root.iter(f"{SVG}text"):
        if "rotate" in element.get("transform", ""):
            continue
        content = element.text or ""
        boxes.append((content, _svg.box(float(element.get("x")), float(element.get("y")), content, element.get("text-anchor", "start"),
                                        float(element.get("font-size", default)), element.get("font-weight") == "bold")))
    return boxes


def layout_problems(svg_text):
    """Sentences for text that leaves the image or overlaps other text."""
    width, height = size(svg_text)
    boxes = text_boxes(svg_text)
    problems = [f"{content!r} leaves the {width:g} x {height:g} image at {tuple(round(value) for value in rect)}"
                for content, rect in boxes if rect[0] < 0 or rect[1] < 0 or rect[2] > width or rect[3] > height]
    for index, (content, rect) in enumerate(boxes):
        problems += [f"{content!r} overlaps {other!r}" for other, other_rect in boxes[index + 1:] if _svg.overlaps(rect, other_rect)]
    return problems


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


def screenshot(svg_path, png_path):
    """Render ``svg_path`` in headless Chromium at the chart's own size."""
    width, height = size(svg_path.read_text())
    subprocess.run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--screenshot={png_path}",
                    f"--window-size={math.ceil(width)},{math.ceil(height)}", svg_path.resolve().as_uri()],
                   check=True, capture_output=True, timeout=120)


def png_summary(png_path):
    """(width, height, distinct colours) of a PNG (8-bit RGB or RGBA, as Chromium writes them); 1 colour is a blank page."""
    data = png_path.read_bytes()
    offset, compressed = 8, b""
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            width, height, _depth, colour_type = struct.unpack(">IIBB", body[:10])
            channels = {2: 3, 6: 4}[colour_type]
        elif kind == b"IDAT":
            compressed += body
        offset += 12 + length
    raw = zlib.decompress(compressed)
    stride = width * channels + 1
    previous, colours = bytearray(width * channels), set()
    for start in range(0, len(raw) - stride + 1, stride):
        kind, line = raw[start], bytearray(raw[start + 1:start + stride])
        for index in range(len(line)):
            left = line[index - channels] if index >= channels else 0
            up, corner = previous[index], previous[index - channels] if index >= channels else 0
            if kind == 1:
                line[index] = (line[index] + left) & 255
            elif kind == 2:
                line[index] = (line[index] + up) & 255
            elif kind == 3:
                line[index] = (line[index] + (left + up) // 2) & 255
            elif kind == 4:
                estimate = left + up - corner
                nearest = min((abs(estimate - left), 0, left), (abs(estimate - up), 1, up), (abs(estimate - corner), 2, corner))[2]
                line[index] = (line[index] + nearest) & 255
        colours.update(bytes(line[index:index + 3]) for index in range(0, len(line), channels))
        previous = line
    return width, height, len(colours)
