"""The lab mirror's HTTP server: the lab's APT repository, and a caching proxy for Debian's archive.

Run by the lab mirror container (lab/roles/lab_host), standard library only.

- A plain request (`GET /dists/bookworm/InRelease`) is served from the lab repository directory, as
  `python3 -m http.server` would.
- A proxy request (`GET http://deb.debian.org/debian/pool/...`), which APT sends because the lab image
  sets `Acquire::http::Proxy::deb.debian.org` to this server, is answered from the package cache, a
  directory kept on the machine across checkouts and lab rebuilds. A file missing from the cache is
  fetched from the upstream archive once, stored, and logged in `<cache>/upstream.log` (one line per
  file fetched from outside). Package files (`pool/`, `by-hash/`) never change under their name and are
  kept for good; index files (`InRelease`, `Packages.xz`, ...) are fetched again once older than the
  index lifetime, and served stale when the upstream archive cannot be reached.
- Only the Debian hosts named with --upstream-host are proxied: this is no open proxy.

So the scenarios and the lab's nodes, which each start from a fresh image and install containerd,
rdma-core, mdadm, openmpi and the rest, download each Debian package from outside once per machine;
on-prem sites work the same way, every server installing from an internal mirror.
"""

import argparse
import datetime
import functools
import http.server
import os
import pathlib
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

# Files whose content never changes under their name.
IMMUTABLE_PARTS = ("/pool/", "/by-hash/")
UPSTREAM_TIMEOUT_S = 60


class Cache:
    """Files of the upstream archives, stored under <directory>/<host>/<path>."""

    def __init__(self, directory, index_lifetime_s):
        self.directory = pathlib.Path(directory)
        self.index_lifetime_s = index_lifetime_s
        self.log_lock = threading.Lock()

    def path_of(self, url):
        parts = urllib.parse.urlsplit(url)
        relative = pathlib.PurePosixPath(urllib.parse.unquote(parts.path)).relative_to("/")
        if ".." in relative.parts:
            raise ValueError(f"refusing the path {parts.path}")
        return self.directory / parts.hostname / relative

    def is_fresh(self, url, path):
        if not path.is_file():
            return False
        if any(part in url for part in IMMUTABLE_PARTS):
            return True
        return time.time() - path.stat().st_mtime < self.index_lifetime_s

    def fetch(self, url, path):
        """Download url into path (atomically); the number of bytes. Raises urllib.error.HTTPError."""
        path.parent.mkdir(parents=True, exist_ok=True)
        request = urllib.request.Request(url, headers={"User-Agent": "onprem-gpu-lab-mirror"})
        with urllib.request.urlopen(request, timeout=UPSTREAM_TIMEOUT_S) as response:
            with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".partial-", delete=False) as partial:
                shutil.copyfileobj(response, partial, 1 << 20)
                size = partial.tell()
        os.replace(partial.name, path)
        with self.log_lock, open(self.directory / "upstream.log", "a", encoding="utf-8") as log:
            log.write(f"{datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')} {size} {url}\n")
        return size


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    cache = None
    upstream_hosts = ()

    def do_GET(self):
        if self.path.startswith(("http://", "https://")):
            self.proxy()
        else:
            super().do_GET()

    def proxy(self):
        url = self.path
        if urllib.parse.urlsplit(url).hostname not in self.upstream_hosts:
            self.send_error(403, "This mirror proxies only " + ", ".join(self.upstream_hosts))
            return
        try:
            path = self.cache.path_of(url)
        except ValueError as error:
            self.send_error(400, str(error))
            return
        if not self.cache.is_fresh(url, path):
            try:
                self.cache.fetch(url, path)
            except urllib.error.HTTPError as error:
                self.send_error(error.code, error.reason)
                return
            except (OSError, urllib.error.URLError) as error:
                if not path.is_file():
                    self.send_error(502, f"{url} is neither cached nor reachable: {error}")
                    return
                self.log_message("serving a stale copy of %s: %s", url, error)
        self.send_file(path)

    def send_file(self, path):
        with open(path, "rb") as content:
            size = os.fstat(content.fileno()).st_size
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(size))
            self.send_header("Last-Modified", self.date_time_string(os.fstat(content.fileno()).st_mtime))
            self.end_headers()
            shutil.copyfileobj(content, self.wfile, 1 << 20)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--repo", required=True, help="the lab repository, served as /")
    parser.add_argument("--cache", required=True, help="the package cache directory")
    parser.add_argument("--upstream-host", action="append", required=True, help="an archive host to proxy")
    parser.add_argument("--index-lifetime", type=int, default=6 * 3600, help="seconds an index file is fresh")
    arguments = parser.parse_args(argv)

    Handler.cache = Cache(arguments.cache, arguments.index_lifetime)
    Handler.upstream_hosts = tuple(arguments.upstream_host)
    server = http.server.ThreadingHTTPServer(
        ("", arguments.port), functools.partial(Handler, directory=arguments.repo)
    )
    server.daemon_threads = True
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
