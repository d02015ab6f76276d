#!/usr/bin/env python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Queries and query time of onprem.gpu.gpu_occupancy on a month of dcgm-exporter metrics in a real Prometheus.

Each case generates a month with lab/prometheus (the lab's three nodes, or N synthetic nodes repeating their
patterns), backfills it with promtool into a temporary directory, starts prometheus on 127.0.0.1, runs the
module's measurement through its HTTP client, checks the totals against the generator's ground truth, and prints
the query count, the time Prometheus took, and the samples behind them.

Needs prometheus and promtool (Debian: apt-get install prometheus). Run from the repository root:

    .venv/bin/python benchmarks/gpu_occupancy.py                       # the lab month at 1 minute
    .venv/bin/python benchmarks/gpu_occupancy.py --nodes 64 --interval 5m
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
COLLECTIONS = REPOSITORY / ".build" / "collections"
HOURS = ("available_gpu_hours", "allocated_gpu_hours", "active_gpu_hours", "idle_allocated_gpu_hours")


def run_case(nodes, interval):
    from ansible_collections.onprem.gpu.plugins.module_utils._occupancy import make_window, measure
    from ansible_collections.onprem.gpu.plugins.modules.gpu_occupancy import PrometheusClient

    import lab_prometheus

    with tempfile.TemporaryDirectory(prefix="gpu-occupancy-bench-") as directory:
        truth, timings = lab_prometheus.build(directory, interval, nodes)
        # A month at 1 minute over hundreds of GPUs holds tens of millions of points in one subquery.
        with lab_prometheus.serve(directory, max_samples=500000000) as url:
            client = PrometheusClient({"prometheus_url": url, "bearer_token": None, "validate_certs": True, "ca_path": None,
                                       "client_cert": None, "client_key": None, "timeout": 3600})
            window = make_window(truth["window"]["start"], truth["window"]["end"], interval)
            started = time.monotonic()
            result = measure(client, window)
            wall = time.monotonic() - started
    exact = {key: result["total"][key] for key in HOURS} == truth["total"]
    return {"nodes": nodes or 3, "gpus": result["total"]["gpus"], "interval": interval, "series": truth["series"],
            "samples": truth["samples"], "steps": window.steps, "queries": result["queries"], "wall": wall, "exact": exact,
            "generate": timings["generate_seconds"], "backfill": timings["backfill_seconds"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=0, help="synthetic nodes (default: the lab's three)")
    parser.add_argument("--interval", default="1m", help="scrape interval and step")
    arguments = parser.parse_args()
    if not (COLLECTIONS / "ansible_collections" / "onprem" / "gpu").exists():
        raise SystemExit("The collection is not linked under .build/collections yet: run `make venv` (or the unit tests) first.")
    sys.path[:0] = [str(COLLECTIONS), str(REPOSITORY / "lab" / "prometheus")]
    import lab_prometheus

    if lab_prometheus.binaries() is None:
        raise SystemExit("prometheus and promtool are needed: apt-get install prometheus")
    case = run_case(arguments.nodes, arguments.interval)
    print(f"{case['nodes']} nodes, {case['gpus']} GPUs, {case['series']} series, {case['samples']:,} samples, "
          f"{case['steps']:,} steps of {case['interval']} (generated in {case['generate']} s, backfilled in {case['backfill']} s)")
    print(f"{case['queries']['count']} queries, {case['queries']['seconds']:.2f} s in Prometheus, {case['wall']:.2f} s in all; "
          f"totals equal the ground truth: {case['exact']}")
    for entry in case["queries"]["log"]:
        print(f"  {entry['name']:20} {entry['seconds']:8.2f} s  {entry['series']:6} series")


if __name__ == "__main__":
    main()
