# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""gpu_occupancy's HTTP side against a stand-in Prometheus API on 127.0.0.1: answers, credentials, failures."""

from __future__ import annotations

import json
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import pytest

from ansible.module_utils.testing import patch_module_args

from ansible_collections.onprem.gpu.plugins.modules import gpu_occupancy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import occupancy_answers as recorded  # noqa: E402

WINDOW_ARGS = {"start": "2026-10-01T00:00:00Z", "end": "2026-10-01T04:00:00Z", "step": "1h"}


class StandIn(BaseHTTPRequestHandler):
    """Answers POSTs to the query endpoints with ``server.answer(path, form)`` -> (status, body); keeps the requests."""

    def do_POST(self):  # noqa: N802  (http.server's name)
        length = int(self.headers.get("Content-Length", 0))
        form = {key: values[0] for key, values in parse_qs(self.rfile.read(length).decode()).items()}
        self.server.requests.append((self.path, dict(self.headers), form))
        status, body = self.server.answer(self.path, form)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def prometheus():
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandIn)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def recorded_answer(path, form):
    data = recorded.RecordedPrometheus(recorded.ANSWERS)(path, form)
    return 200, json.dumps({"status": "success", "data": data})


def run_module(args, capsys):
    with patch_module_args(args), pytest.raises(SystemExit):
        gpu_occupancy.main()
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("check_mode", [False, True], ids=["run", "check-mode"])
def test_measures_through_the_api_with_the_bearer_token(prometheus, capsys, check_mode):
    prometheus.answer = recorded_answer
    url = f"http://127.0.0.1:{prometheus.server_port}/"
    result = run_module(dict(WINDOW_ARGS, prometheus_url=url, bearer_token="s3cret", expected_nodes={"n1": 2},
                             _ansible_check_mode=check_mode), capsys)
    assert result["changed"] is False
    assert result["total"]["active_gpu_hours"] == 3.0
    assert result["window"] == {"start": "2026-10-01T00:00:00Z", "end": "2026-10-01T04:00:00Z", "step_seconds": 3600, "steps": 4, "hours": 4.0}
    assert result["queries"]["count"] == len(prometheus.requests) == 11
    assert {request[0] for request in prometheus.requests} == {"/api/v1/query", "/api/v1/query_range"}
    assert {request[1]["Authorization"] for request in prometheus.requests} == {"Bearer s3cret"}
    assert "s3cret" not in json.dumps(result)


@pytest.mark.parametrize(("status", "body", "message"), [
    (401, "Unauthorized", "Prometheus at {url} refused the credentials (HTTP 401): check bearer_token or the client certificate."),
    (403, "Forbidden", "Prometheus at {url} refused the credentials (HTTP 403): check bearer_token or the client certificate."),
    (400, json.dumps({"status": "error", "errorType": "bad_data", "error": "parse error"}),
     "Prometheus at {url} rejected a query (HTTP 400, bad_data): parse error."),
    (404, "404 page not found", "Prometheus at {url} answered HTTP 404 Not Found: is this the Prometheus base URL?"),
    (200, "<html>Grafana</html>", "{url} did not answer with Prometheus API JSON: is this the Prometheus base URL?"),
])
def test_refusals_are_one_sentence(prometheus, capsys, status, body, message):
    prometheus.answer = lambda path, form: (status, body)
    url = f"http://127.0.0.1:{prometheus.server_port}"
    result = run_module(dict(WINDOW_ARGS, prometheus_url=url), capsys)
    assert result["failed"] is True
    assert result["msg"] == message.format(url=url)


def test_an_empty_window_is_refused(prometheus, capsys):
    prometheus.answer = lambda path, form: (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}))
    result = run_module(dict(WINDOW_ARGS, prometheus_url=f"http://127.0.0.1:{prometheus.server_port}"), capsys)
    assert result["msg"].startswith("Prometheus holds no DCGM_FI_DEV_FB_USED or DCGM_FI_PROF_SM_ACTIVE samples between 2026-10-01T00:00:00Z "
                                    "and 2026-10-01T04:00:00Z")


def test_an_answer_over_the_size_limit_is_refused(prometheus, capsys):
    big = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [], "padding": "x" * (1024 * 1024)}})
    prometheus.answer = lambda path, form: (200, big)
    url = f"http://127.0.0.1:{prometheus.server_port}"
    result = run_module(dict(WINDOW_ARGS, prometheus_url=url, max_response_mib=1), capsys)
    assert result["msg"] == (f"Prometheus at {url} answered a query with more than max_response_mib=1 MiB, the most allowed: "
                             "narrow the selector, lengthen the step, or raise max_response_mib.")


def test_an_unreachable_prometheus(capsys):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    result = run_module(dict(WINDOW_ARGS, prometheus_url=f"http://127.0.0.1:{port}", timeout=5), capsys)
    assert result["failed"] is True
    assert result["msg"].startswith(f"Prometheus at http://127.0.0.1:{port} cannot be reached: ")
    assert "refused" in result["msg"].lower()


def test_a_bad_window_fails_before_any_query(capsys):
    result = run_module(dict(WINDOW_ARGS, prometheus_url="http://127.0.0.1:9", step="fortnight"), capsys)
    assert result["msg"] == "step must be a Prometheus duration such as 1m, 5m or 1h, not 'fortnight'."
