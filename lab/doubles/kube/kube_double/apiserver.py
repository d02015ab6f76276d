"""The API server (run by kubelet on a control-plane node, as the kube-apiserver static pod): the request handler, its
routing by URL and verb to the parts in api_access, api_read, api_write, api_delete and api_controllers, and serve_api."""

import http.server
import json
import re
import ssl
import sys
import threading
import traceback
import urllib.parse

import yaml

from kube_double.api_access import Access
from kube_double.api_controllers import ControllerViews
from kube_double.api_delete import Deletes
from kube_double.api_read import Reads, Watch
from kube_double.api_write import Writes
from kube_double.core import ApiError, CLUSTER_ADMINS, LabError, path, status_error
from kube_double.etcd_member import ETCD_MEMBERS, MembershipError, add_member, changing_membership, member_list_json, membership, remove_member
from kube_double.protobuf import decode_protobuf
from kube_double.resources import all_resources
from kube_double.store import Store, valid_tokens
from kube_double.versions import served_version


class ApiHandler(Access, Reads, Writes, Deletes, ControllerViews, http.server.BaseHTTPRequestHandler):
    server_version = "kube-apiserver-double"

    store = None  # set by serve_api
    served_version = None  # set by serve_api: the version of the manifest it was started from

    _raw_body = None  # the request's body, read once (body())

    def log_message(self, format, *args):  # noqa: A002 - the signature of BaseHTTPRequestHandler
        sys.stderr.write("apiserver: " + (format % args) + "\n")

    def body(self):
        if getattr(self, "_raw_body", None) is None:
            length = int(self.headers.get("Content-Length") or 0)
            self._raw_body = self.rfile.read(length) if length else b""  # read once: an authorization check may look at it first
        raw = self._raw_body
        if not raw:
            return {}
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if content_type == "application/vnd.kubernetes.protobuf":
            return decode_protobuf(raw)
        if content_type == "application/cbor":
            raise ApiError(415, "UnsupportedMediaType", 'the body of the request was in an unknown format - accepted media types include: '
                                                        'application/json, application/yaml, application/vnd.kubernetes.protobuf')
        try:
            if content_type == "application/apply-patch+yaml":
                return yaml.safe_load(raw.decode())
            return json.loads(raw)
        except (ValueError, yaml.YAMLError) as error:
            raise ApiError(400, "BadRequest", f"the body of the request could not be decoded: {error}") from None

    def answer(self, code, data, content_type=None):
        if isinstance(data, Watch):
            return self.stream(data)
        payload = (data if isinstance(data, str) else json.dumps(data)).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type or ("text/plain" if isinstance(data, str) else "application/json"))
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def handle_any(self, method):
        self._raw_body = None
        user, groups_ = self.identity()
        if user is None:
            return self.answer(*status_error(401, "Unauthorized", "Unauthorized"))
        url = urllib.parse.urlsplit(self.path)
        self.query = {key: values[-1] for key, values in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        content_type = None
        try:
            result = self.route(method, url.path.rstrip("/") or "/", user, groups_)
            code, data = result[:2]
            content_type = result[2] if len(result) > 2 else None
        except ApiError as error:
            code, data = status_error(error.code, error.reason, error.message, error.details)
        except (ValueError, KeyError, TypeError, AttributeError) as error:
            traceback.print_exc()
            code, data = status_error(400, "BadRequest", f"the request is invalid: {error}")
        except LabError as error:
            code, data = status_error(500, "InternalError", f"lab double: {error}")
        return self.answer(code, data, content_type)

    def do_GET(self):  # noqa: N802 - http.server's naming
        self.handle_any("GET")

    def do_POST(self):  # noqa: N802
        self.handle_any("POST")

    def do_PUT(self):  # noqa: N802
        self.handle_any("PUT")

    def do_PATCH(self):  # noqa: N802
        self.handle_any("PATCH")

    def do_DELETE(self):  # noqa: N802
        self.handle_any("DELETE")

    def route(self, method, url, user, groups_):
        admin = bool(groups_ & CLUSTER_ADMINS)
        if url in ("/readyz", "/livez", "/healthz"):
            return 200, "ok"
        if url == "/version":
            major, minor = self.served_version.split(".")[:2]
            return 200, {"major": major, "minor": minor, "gitVersion": "v" + self.served_version, "platform": "linux/amd64"}
        if url == ETCD_MEMBERS or url.startswith(ETCD_MEMBERS + "/"):
            if not admin:
                return self.forbidden(user, method, None, None, url)
            return self.etcd_members(method, url[len(ETCD_MEMBERS) + 1:])
        authenticated = user != "system:anonymous"
        if method == "GET" and (url in ("/api", "/api/v1", "/apis") or re.fullmatch(r"/apis/[^/]+(?:/[^/]+)?", url) or url.startswith("/openapi/")):
            if not authenticated:
                return self.forbidden(user, "GET", None, None, url)
            with self.store.lock:
                return self.discovery(url)
        with self.store.lock:
            resources = all_resources(self.store)
            target = self.resolve(url, resources)
            if target is None:
                return status_error(404, "NotFound", "the server could not find the requested resource")
            resource, namespace, name, sub = target
            if not self.allowed(method, resource, namespace, name, sub, user, groups_, admin):
                return self.forbidden(user, method, resource, namespace, url, name, sub)
            if resource.kind == "CertificateSigningRequest" and method == "POST":
                return self.csr(self.body(), user)
            return self.serve(method, resource, namespace, name, sub, user, admin)

    def etcd_members(self, method, member):
        """The lab's stand-in for the etcd client API that kubeadm's join and reset reach the other members through (MemberList,
        MemberAdd, MemberRemove), for control planes that run no etcd of their own (README.md, "etcd")."""
        try:
            with self.store.lock:
                if method == "GET" and not member:
                    return 200, member_list_json(membership(self.store.data))
                if method == "POST" and not member:
                    wanted = self.body()
                    with changing_membership(self.store.data) as current:
                        added = add_member(current, wanted["name"], wanted["peerURLs"], wanted.get("clientURLs", []))
                    return 201, dict(member_list_json(current), member=added)
                if method == "DELETE" and member:
                    with changing_membership(self.store.data) as current:
                        remove_member(current, int(member, 16))
                    return 200, member_list_json(current)
        except MembershipError as error:
            return status_error(error.code, "Conflict" if error.code == 409 else "NotFound", str(error))
        return status_error(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def resolve(self, url, resources):
        """(resource, namespace, name, subresource) for a resource path, or None."""
        match = re.fullmatch(r"/api/v1/(.+)|/apis/([^/]+)/([^/]+)/(.+)", url)
        if not match:
            return None
        group, version_, rest = ("", "v1", match.group(1)) if match.group(1) else match.group(2, 3, 4)
        parts = rest.split("/")
        in_version = {r.plural: r for r in resources if r.group == group and r.version == version_}
        namespace = None
        if parts[0] == "namespaces" and len(parts) >= 3 and parts[2] in in_version and in_version[parts[2]].namespaced:
            namespace, parts = parts[1], parts[2:]
        resource = in_version.get(parts[0])
        if resource is None or len(parts) > 3:
            return None
        name = parts[1] if len(parts) > 1 else None
        sub = parts[2] if len(parts) > 2 else None
        if sub and sub not in resource.subresources():
            return None
        if namespace is None and resource.namespaced and name is not None:
            return None  # a namespaced object is only reached through its namespace
        return resource, namespace, name, sub

    def objects(self, resource):
        return self.store.data["objects"].setdefault(resource.key, {})

    @staticmethod
    def object_key(resource, namespace, name):
        return f"{namespace}/{name}" if resource.namespaced else name

    def not_found(self, resource, name):
        group = f".{resource.group}" if resource.group else ""
        return status_error(404, "NotFound", f'{resource.plural}{group} "{name}" not found',
                            {"name": name, "group": resource.group, "kind": resource.plural})

    def serve(self, method, resource, namespace, name, sub, user, admin):
        objects = self.objects(resource)
        if resource.kind == "Secret":
            valid_tokens(self.store)
        if resource.kind == "ConfigMap" and (namespace, name) == ("kube-public", "cluster-info") and "kube-public/cluster-info" in objects:
            self.sign_cluster_info()
        if method == "GET" and name is None:
            return self.list(resource, namespace)
        if method == "DELETE" and name is None:
            return self.delete_collection(resource, namespace)
        if method == "POST" and name is None:
            return self.create(resource, namespace, self.body(), user)
        if method == "POST" and sub == "eviction":
            return self.evict(resource, namespace, name, self.body())
        key = self.object_key(resource, namespace, name)
        live = objects.get(key)
        if resource.kind == "Pod" and method in ("DELETE", "PUT", "PATCH"):
            refused = self.node_restriction(user, method, live, name)
            if refused:
                return refused
        if method == "GET":
            if live is None:
                return self.not_found(resource, name)
            if self.wants_table():
                return 200, self.table(resource, [live]), "application/json"
            return 200, self.present(resource, live)
        if method == "DELETE":
            if live is None:
                return self.not_found(resource, name)
            return self.delete(resource, key, live)
        if method in ("PUT", "PATCH"):
            if resource.kind == "Node" and not admin and user.startswith("system:node:") and sub != "status" \
                    and not self.mig_manager_label_patch(user, method, name):
                return status_error(403, "Forbidden", f'nodes "{name}" is forbidden: node "{user[12:]}" may only update its status')
            return self.update(method, resource, namespace, name, sub, live, user)
        return status_error(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")

    def dry_run(self):
        return self.query.get("dryRun") == "All"


def serve_api(manifest):
    """Run the kube-apiserver "static pod" described by the manifest until the process ends."""
    command = manifest["spec"]["containers"][0]["command"]
    flags = dict(argument[2:].split("=", 1) for argument in command[1:] if argument.startswith("--") and "=" in argument)
    ApiHandler.store = Store()
    ApiHandler.served_version = served_version(manifest)
    server = http.server.ThreadingHTTPServer((flags["advertise-address"], int(flags["secure-port"])), ApiHandler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(path(flags["tls-cert-file"]), path(flags["tls-private-key-file"]))
    context.load_verify_locations(path(flags["client-ca-file"]))
    context.verify_mode = ssl.CERT_OPTIONAL
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server
