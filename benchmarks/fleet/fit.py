#!/usr/bin/env python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Summarise benchmarks/fleet_noop.sh's measurements, fit how they grow with N and project a larger fleet.

Reads .build/fleet/results.tsv (one row per measured no-op run of site.yml). Prints the median of each (N, settings)
series, then, over the series chosen with --pick (default: ansible.cfg as it is, at every N measured), least-squares
lines in N of the wall time, the controller's CPU, the main ansible-playbook process's CPU and the host-tasks, and
what they give at --target nodes (256 by default):

* on this machine, idle: the controller's and the nodes' CPU lines over its cores (they share them in the lab); the
  wall line extended is printed too, with the share of the cores the runs got (a shared machine gives less);
* on a controller with C cores reaching real servers: the largest of three lower bounds, each from a measured line:
  the main process's CPU (one Python process runs the strategy, forks every worker and runs the callbacks: no more
  cores make it faster), the controller's CPU spread over C cores, and the chain of tasks on one GPU worker (its
  host-tasks, each as long as the module's CPU on the node, measured, plus a round trip, --rtt-ms, assumed), repeated
  once per batch of --forks hosts.

Run from the repository root: ``.venv/bin/python benchmarks/fleet/fit.py [--pick N=SETTINGS]... [--forks F]``.
"""

from __future__ import annotations

import argparse
import csv
import math
import statistics
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[2] / ".build" / "fleet" / "results.tsv"
MEASURES = ("wall_s", "controller_cpu_s", "main_cpu_s", "host_tasks", "controller_ms_per_host_task", "node_cpu_s")


def read_series(path):
    """{(nodes, settings): [row, ...]} from results.tsv."""
    series = {}
    with open(path, encoding="utf-8", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t"):
            series.setdefault((int(row["nodes"]), row["config"]), []).append(row)
    return series


def medians(rows):
    return {name: statistics.median(float(row[name]) for row in rows) for name in MEASURES}


def line(points):
    """Least-squares intercept and slope of [(x, y), ...] (a flat line through one point)."""
    xs = [x for x, y in points]
    ys = [y for x, y in points]
    if len(set(xs)) < 2:
        return ys[0], 0.0
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x in xs)
    return mean_y - slope * mean_x, slope


def print_series(series):
    print("| N | settings | runs | wall s | controller CPU s | main process CPU s | host-tasks | controller ms per host-task"
          " | node CPU s | cores busy | load (1 min) before -> after |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for (nodes, settings), rows in sorted(series.items()):
        mid = medians(rows)
        busy = (mid["controller_cpu_s"] + mid["node_cpu_s"]) / mid["wall_s"]
        loads = ", ".join(f"{row['load_before'].split()[0]} -> {row['load_after'].split()[0]}" for row in rows)
        print(f"| {nodes} | `{settings}` | {len(rows)} | {mid['wall_s']:.1f} | {mid['controller_cpu_s']:.1f} | {mid['main_cpu_s']:.1f}"
              f" | {mid['host_tasks']:.0f} | {mid['controller_ms_per_host_task']:.1f} | {mid['node_cpu_s']:.1f} | {busy:.2f} | {loads} |")


def project(chosen, args):
    fits = {name: line([(nodes, mid[name]) for nodes, mid in chosen]) for name in MEASURES}
    target = args.target
    print(f"\nFits over N = {', '.join(str(nodes) for nodes, mid in chosen)} (value = a + b * N):")
    for name in ("wall_s", "controller_cpu_s", "main_cpu_s", "node_cpu_s", "host_tasks"):
        intercept, slope = fits[name]
        print(f"  {name:18} a = {intercept:8.2f}  b = {slope:7.3f}  -> at N = {target}: {intercept + slope * target:9.1f}")

    def at(name):
        intercept, slope = fits[name]
        return intercept + slope * target

    busy = statistics.fmean((mid["controller_cpu_s"] + mid["node_cpu_s"]) / mid["wall_s"] for nodes, mid in chosen)
    host_tasks = at("host_tasks")
    # One GPU worker's chain of tasks: the host-tasks a worker adds (the slope), each as long as its module ran on the node.
    worker_tasks = fits["host_tasks"][1]
    node_ms = statistics.fmean(mid["node_cpu_s"] * 1000 / mid["host_tasks"] for nodes, mid in chosen)
    batches = math.ceil((target + 1) / args.forks)
    chain = worker_tasks * batches * (node_ms + args.rtt_ms) / 1000
    print(f"\nAt N = {target} ({host_tasks:.0f} host-tasks):")
    cores_here = chosen[0][1]["cores"]
    idle_here = (at("controller_cpu_s") + at("node_cpu_s")) / cores_here
    print(f"  this machine ({cores_here:.0f} cores) idle, controller and nodes sharing its cores (CPU-bound): {idle_here:.0f} s"
          f" ({idle_here / 60:.1f} min); the wall line gives {at('wall_s'):.0f} s, but the runs kept only {busy:.2f} of its cores"
          " busy on average (a shared machine): its wall times measure the load, not the fleet")
    print(f"  a controller reaching real servers, forks = {args.forks}: lower bounds, the largest wins:")
    print(f"    main process CPU (serial)                   {at('main_cpu_s'):7.0f} s")
    print(f"    one worker's chain: {worker_tasks:.0f} tasks x {batches} batch(es) x ({node_ms:.0f} ms module + {args.rtt_ms:.0f} ms round trip)"
          f" {chain:7.0f} s")
    for cores in args.cores:
        spread = at("controller_cpu_s") / cores
        projected = max(at("main_cpu_s"), spread, chain)
        print(f"    controller CPU / {cores:2d} cores {spread:25.0f} s  -> about {projected:.0f} s ({projected / 60:.1f} min)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--pick", action="append", default=[], metavar="N=SETTINGS",
                        help="the series to fit at N (default: ansible.cfg at every N)")
    parser.add_argument("--target", type=int, default=256, help="GPU workers to project (default 256)")
    parser.add_argument("--forks", type=int, default=50, help="forks of the projected run (default 50)")
    parser.add_argument("--rtt-ms", type=float, default=10.0,
                        help="assumed round trip of one task over SSH with ControlPersist and pipelining (default 10)")
    parser.add_argument("--cores", type=int, nargs="+", default=[2, 8, 16, 32], help="controller cores to project")
    args = parser.parse_args(argv)

    series = read_series(args.results)
    print_series(series)
    picks = dict(pick.split("=", 1) for pick in args.pick)
    chosen = []
    for nodes in sorted({nodes for nodes, settings in series}):
        settings = picks.get(str(nodes), "ansible.cfg") if picks else "ansible.cfg"
        if picks and str(nodes) not in picks:
            continue
        if (nodes, settings) in series:
            mid = medians(series[(nodes, settings)])
            mid["cores"] = float(series[(nodes, settings)][0]["cores"])
            chosen.append((nodes, mid))
    if not chosen:
        print("No series to fit: measure one with benchmarks/fleet_noop.sh first.", file=sys.stderr)
        return 1
    project(chosen, args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
