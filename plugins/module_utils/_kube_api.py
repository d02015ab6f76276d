# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A minimal Kubernetes API client for the node health programs that run on the nodes themselves.

The node agent and the taint controller run under systemd on hosts that have Python's standard library but not the
kubernetes client: this speaks HTTPS with a client certificate verified against the cluster CA, JSON bodies, and
returns ``(status, body)``; an unreachable API raises KubeApiError with one sentence.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.parse


class KubeApiError(RuntimeError):
    """The API could not be reached, or answered an error the caller does not handle; one sentence."""


class KubeApi:
    """The cluster's API at ``server`` (``https://host:port``), as the identity of ``cert_file``/``key_file``."""

    def __init__(self, server, ca_file, cert_file, key_file, timeout=10, user_agent="onprem-gpu-health"):
        parsed = urllib.parse.urlsplit(server)
        if parsed.scheme != "https" or not parsed.hostname:
            raise KubeApiError(f"The API server must be an https:// URL, not {server!r}.")
        self.host, self.port, self.server, self.timeout = parsed.hostname, parsed.port or 443, server, timeout
        self.user_agent = user_agent
        try:
            self.context = ssl.create_default_context(cafile=ca_file)
            self.context.load_cert_chain(cert_file, key_file)
        except (OSError, ssl.SSLError) as error:
            raise KubeApiError(f"The credentials {cert_file}, {key_file} (CA {ca_file}) cannot be loaded: {error}.") from None

    def request(self, method, path, body=None, content_type="application/json"):
        """Return ``(status, body)``, the body parsed from JSON when it is JSON."""
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if body is not None:
            headers["Content-Type"] = content_type
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=self.timeout)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
            response = connection.getresponse()
            payload = response.read().decode("utf-8", "replace")
        except (OSError, http.client.HTTPException, socket.timeout) as error:
            raise KubeApiError(f"{method} {self.server}{path} failed: {error}.") from None
        finally:
            connection.close()
        try:
            return response.status, json.loads(payload) if payload else {}
        except ValueError:
            return response.status, payload

    def call(self, method, path, body=None, content_type="application/json"):
        """The body of a 2xx answer; KubeApiError naming the API's message otherwise."""
        status, data = self.request(method, path, body, content_type)
        if status >= 300:
            message = data.get("message") if isinstance(data, dict) else str(data)[:200]
            raise KubeApiError(f"{method} {path} answered {status}: {message}")
        return data
