"""The API client of kubeadm, kubelet and kubectl: TLS verified against the kubeconfig's CA, a client certificate or a token,
the user agent client-go sends, and network errors in Go's words."""

import http.client
import json
import socket
import ssl
import tempfile
import urllib.parse

from kube_double.core import Fail, LabError, PROGRAM, version
from kube_double.pki import file_or_data, load_kubeconfig


class Client:
    """Talks to the API like client-go: TLS verified against the kubeconfig's CA, client certificate or token."""

    def __init__(self, server, ca_pem=None, certificate_pem=None, key_pem=None, token=None, timeout=10):
        parsed = urllib.parse.urlsplit(server)
        self.host, self.port, self.server = parsed.hostname, parsed.port or 443, server
        self.token, self.timeout = token, timeout
        if ca_pem is None:
            self.context = ssl._create_unverified_context()  # discovery before the CA is trusted, as kubeadm does
        else:
            self.context = ssl.create_default_context(cadata=ca_pem)
        if certificate_pem:
            with tempfile.NamedTemporaryFile("w", dir=tempfile.gettempdir()) as bundle:
                bundle.write(certificate_pem + key_pem)
                bundle.flush()
                self.context.load_cert_chain(bundle.name)

    @classmethod
    def from_kubeconfig(cls, name, timeout=10):
        cluster, user = load_kubeconfig(name)
        return cls(cluster["server"], file_or_data(cluster, "certificate-authority"), file_or_data(user, "client-certificate"),
                   file_or_data(user, "client-key"), user.get("token"), timeout)

    def request(self, method, url, body=None, content_type="application/json"):
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=self.timeout)
        # The apiserver names the field manager of a write after the user agent (kubelet, kubeadm, kubectl), as client-go sets it.
        headers = {"Accept": "application/json", "User-Agent": f"{PROGRAM}/{user_agent_version()} (linux/amd64) kubernetes/lab-double"}
        if body is not None:
            headers["Content-Type"] = content_type
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        try:
            connection.request(method, url, body=None if body is None else json.dumps(body), headers=headers)
            response = connection.getresponse()
            payload = response.read().decode()
        except ssl.SSLCertVerificationError as error:
            raise Fail(f'Get "{self.server}{url}": tls: failed to verify certificate: {error.verify_message}') from None
        except (OSError, http.client.HTTPException) as error:
            raise Fail(f'Get "{self.server}{url}": dial tcp {self.host}:{self.port}: {describe_network_error(error)}') from None
        finally:
            connection.close()
        try:
            data = json.loads(payload) if payload else {}
        except ValueError:
            data = payload
        return response.status, data

    def call(self, method, url, body=None, content_type="application/json"):
        status, data = self.request(method, url, body, content_type)
        if status >= 400:
            message = data.get("message", str(data)) if isinstance(data, dict) else str(data)
            raise Fail(f"Error from server ({data.get('reason', 'Error') if isinstance(data, dict) else 'Error'}): {message}")
        return data


def user_agent_version():
    try:
        return "v" + version()
    except LabError:
        return "v0.0.0"


def describe_network_error(error):
    if isinstance(error, socket.timeout):
        return "i/o timeout"
    if isinstance(error, ConnectionRefusedError):
        return "connect: connection refused"
    if isinstance(error, OSError) and error.errno in (113, 101):
        return "connect: no route to host"
    return str(error) or type(error).__name__
