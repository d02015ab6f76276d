"""The lab mirror's server (lab/mirror/serve.py): the lab repository and the caching proxy of Debian's archive.

An "upstream archive" (a plain HTTP server on the loopback) stands for deb.debian.org; APT's proxy requests
are made as APT makes them: a GET of the absolute URL, sent to the proxy.
"""

import contextlib
import functools
import http.client
import http.server
import os
import pathlib
import socket
import subprocess
import sys
import threading
import time

import pytest

SERVER = pathlib.Path(__file__).resolve().parents[2] / "lab" / "mirror" / "serve.py"


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def upstream_archive(directory):
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(directory))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *arguments):  # pylint: disable=arguments-differ
        del arguments


@contextlib.contextmanager
def mirror(repo, cache, index_lifetime=3600):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "--port", str(port), "--repo", str(repo), "--cache", str(cache),
         "--upstream-host", "127.0.0.1", "--index-lifetime", str(index_lifetime)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            assert time.monotonic() < deadline, "the mirror server did not start"
            time.sleep(0.05)
        yield port
    finally:
        process.terminate()
        process.wait(timeout=10)


def get(port, target):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def upstream_fetches(cache):
    log = cache / "upstream.log"
    return [line.split()[-1] for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []


@pytest.fixture(name="lab")
def lab_fixture(tmp_path):
    archive, repo, cache = tmp_path / "archive", tmp_path / "repo", tmp_path / "cache"
    (archive / "debian" / "pool" / "main" / "m" / "mdadm").mkdir(parents=True)
    (archive / "debian" / "pool" / "main" / "m" / "mdadm" / "mdadm_4.2-5_amd64.deb").write_bytes(b"deb" * 1000)
    (archive / "debian" / "dists" / "bookworm").mkdir(parents=True)
    (archive / "debian" / "dists" / "bookworm" / "InRelease").write_text("Suite: bookworm\n", encoding="utf-8")
    (repo / "dists").mkdir(parents=True)
    (repo / "dists" / "Release").write_text("lab\n", encoding="utf-8")
    cache.mkdir()
    return archive, repo, cache


def test_a_package_is_fetched_from_outside_once_then_served_from_the_cache(lab):
    archive, repo, cache = lab
    with upstream_archive(archive) as upstream, mirror(repo, cache) as port:
        url = f"http://127.0.0.1:{upstream.server_port}/debian/pool/main/m/mdadm/mdadm_4.2-5_amd64.deb"
        assert get(port, url) == (200, b"deb" * 1000)
    # Upstream gone: the package still comes, from the cache, and nothing more was fetched.
    with mirror(repo, cache) as port:
        assert get(port, url) == (200, b"deb" * 1000)
    assert upstream_fetches(cache) == [url]


def test_an_index_is_fetched_again_once_stale_and_served_stale_when_upstream_is_unreachable(lab):
    archive, repo, cache = lab
    with upstream_archive(archive) as upstream:
        url = f"http://127.0.0.1:{upstream.server_port}/debian/dists/bookworm/InRelease"
        with mirror(repo, cache, index_lifetime=3600) as port:
            assert get(port, url) == (200, b"Suite: bookworm\n")
            (archive / "debian" / "dists" / "bookworm" / "InRelease").write_text("Suite: bookworm, newer\n", encoding="utf-8")
            assert get(port, url) == (200, b"Suite: bookworm\n")
        with mirror(repo, cache, index_lifetime=0) as port:
            assert get(port, url) == (200, b"Suite: bookworm, newer\n")
    with mirror(repo, cache, index_lifetime=0) as port:
        assert get(port, url) == (200, b"Suite: bookworm, newer\n")
    assert upstream_fetches(cache) == [url, url]


def test_missing_upstream_files_are_404_and_not_cached(lab):
    archive, repo, cache = lab
    with upstream_archive(archive) as upstream, mirror(repo, cache) as port:
        url = f"http://127.0.0.1:{upstream.server_port}/debian/pool/main/n/nothing_1_amd64.deb"
        assert get(port, url)[0] == 404
    assert upstream_fetches(cache) == []
    assert not any(path.is_file() for path in cache.rglob("*"))


def test_the_lab_repository_is_served_as_before_and_other_hosts_are_not_proxied(lab):
    repo, cache = lab[1:]
    with mirror(repo, cache) as port:
        assert get(port, "/dists/Release") == (200, b"lab\n")
        assert get(port, "http://example.org/debian/dists/bookworm/InRelease")[0] == 403
        assert get(port, "http://127.0.0.1/debian/../../etc/passwd")[0] in (400, 502)
    assert upstream_fetches(cache) == []
    assert os.listdir(cache) == []
