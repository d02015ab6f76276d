"""A real Prometheus on 127.0.0.1 holding the scenario's month, backfilled with promtool.

Used by the tests (tests/integration/test_gpu_occupancy_prometheus.py) and the benchmark
(benchmarks/gpu_occupancy.py); run alone it prints the URL and waits:

    python3 lab/prometheus/lab_prometheus.py --interval 1m --dir /tmp/gpu-occupancy-lab
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import scenario  # noqa: E402  (this directory, not an installed package)

# No scrape targets: the server only answers queries over the backfilled blocks.
CONFIG = "global:\n  scrape_interval: 1h\nscrape_configs: []\n"


def binaries():
    """The paths of prometheus and promtool, or None when either is missing.

    `make prometheus-tools` unpacks Debian's package into the checkout's .build/bin; else the machine's PATH.
    """
    built = Path(__file__).resolve().parents[2] / ".build" / "bin"
    found = tuple(str(built / name) if (built / name).exists() else shutil.which(name) for name in ("prometheus", "promtool"))
    return found if all(found) else None


def _binary(name):
    found = binaries()
    if found is None:
        raise RuntimeError("prometheus and promtool are missing: run make prometheus-tools")
    return found[("prometheus", "promtool").index(name)]


def build(directory, interval="5m", nodes=0):
    """Generate the month, backfill it into ``directory``/data; return the ground truth and the seconds each part took."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    month = scenario.Month(scenario.synthetic_nodes(nodes) if nodes else scenario.lab_nodes(), scenario.parse_interval(interval)).build()
    openmetrics = directory / "dcgm.om"
    month.write_openmetrics(openmetrics)
    truth = month.ground_truth()
    del month
    generated = time.monotonic()
    data = directory / "data"
    shutil.rmtree(data, ignore_errors=True)
    # Blocks of up to 31 days, so that the month fits in a few blocks instead of 360 two-hour ones.
    subprocess.run([_binary("promtool"), "tsdb", "create-blocks-from", "openmetrics", "--quiet", "--max-block-duration=744h", str(openmetrics), str(data)],
                   check=True, capture_output=True, text=True)
    openmetrics.unlink()
    (directory / "ground_truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth, {"generate_seconds": round(generated - started, 2), "backfill_seconds": round(time.monotonic() - generated, 2)}


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def serve(directory, max_samples=50000000, port=None):
    """Run prometheus over ``directory``/data on a loopback port (a free one by default); yield its URL; stop it on exit."""
    directory = Path(directory)
    (directory / "prometheus.yml").write_text(CONFIG)
    port = port or _free_port()
    log = open(directory / "prometheus.log", "w", encoding="utf-8")
    process = subprocess.Popen([
        _binary("prometheus"),
        f"--config.file={directory / 'prometheus.yml'}",
        f"--storage.tsdb.path={directory / 'data'}",
        # Retention counts from the newest block; a month in the past must not be deleted as too old.
        "--storage.tsdb.retention.time=100y",
        f"--web.listen-address=127.0.0.1:{port}",
        f"--query.max-samples={max_samples}",
        "--query.timeout=10m",
    ], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"prometheus exited with {process.returncode}: {(directory / 'prometheus.log').read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(url + "/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("prometheus did not become ready within 60 s")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", default="1m", help="scrape interval; the report's gpu_occupancy_step must match it")
    parser.add_argument("--nodes", type=int, default=0)
    parser.add_argument("--dir", required=True, type=Path)
    parser.add_argument("--port", type=int, default=9090, help="the loopback port (the lab inventory expects 9090)")
    arguments = parser.parse_args()
    truth, timings = build(arguments.dir, arguments.interval, arguments.nodes)
    print(json.dumps(dict(timings, series=truth["series"], samples=truth["samples"])))
    with serve(arguments.dir, port=arguments.port) as url:
        print(f"Prometheus with the lab month at {url} (Ctrl-C stops it)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
