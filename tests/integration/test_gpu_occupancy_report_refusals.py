"""playbooks/gpu_occupancy_report.yml against a stand-in Prometheus on 127.0.0.1: what it refuses, and what it never prints.

The lab inventory, its Prometheus address replaced by the stand-in's; no Prometheus binary is needed.
"""
import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
SENTINEL = "sentinel-token-4f9c2a7e"


class FailingPrometheus(BaseHTTPRequestHandler):
    """Answers every query with HTTP 500 and a Prometheus error body; counts the requests."""

    def do_POST(self):  # noqa: N802  (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.requests += 1
        body = json.dumps({"status": "error", "errorType": "internal", "error": "query processing would load too many samples"})
        self.send_response(500)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FailingPrometheus)
    server.requests = 0
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def run_report(prometheus, report_dir, *extra):
    environment = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-v", "-i", str(REPO / "inventories" / "lab"), str(REPO / "playbooks" / "gpu_occupancy_report.yml"),
         "-e", f"gpu_occupancy_report_dir={report_dir}", "-e", f"gpu_occupancy_prometheus_url=http://127.0.0.1:{prometheus.server_port}",
         "-e", f"gpu_occupancy_bearer_token={SENTINEL}", *extra],
        cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False,
    )


def test_a_failing_query_never_prints_the_bearer_token(prometheus, tmp_path):
    result = run_report(prometheus, tmp_path / "report")
    assert result.returncode != 0
    assert prometheus.requests > 0
    # The failure is told (the module's sentence), the token is nowhere, not even in the loop item of the failed result.
    assert "rejected a query (HTTP 500, internal): query processing would load too many samples." in result.stdout
    assert SENTINEL not in result.stdout + result.stderr


def test_an_unwritable_report_directory_stops_before_any_query(prometheus):
    # /proc takes no new directory, whoever runs the test (root included).
    result = run_report(prometheus, "/proc/gpu-occupancy-report")
    assert result.returncode != 0
    assert ("The report directory /proc/gpu-occupancy-report cannot be written (it cannot be created): name a writable "
            "gpu_occupancy_report_dir; Prometheus was not queried.") in " ".join(result.stdout.split())
    assert prometheus.requests == 0
