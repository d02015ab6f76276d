"""GET: discovery, objects as the API answers them, lists, watches and the Tables kubectl get asks for."""

import datetime
import json
import re
import ssl
import time

from kube_double.api_controllers import deployment_status
from kube_double.core import now, parse_rfc3339, status_error
from kube_double.fields import get_path
from kube_double.resources import aggregated_discovery, all_resources, api_resource_list, groups, openapi_hash, openapi_v3
from kube_double.selectors import field_selector, label_selector


def shown(value):
    """A printer column's cell: kubectl prints <none> where the JSON path finds nothing."""
    return "<none>" if value is KeyError else value


class Watch:
    """What a watch request selects; ApiHandler.stream serves it."""

    def __init__(self, resource, namespace, labels, fields, query):
        self.resource, self.namespace, self.labels, self.fields, self.query = resource, namespace, labels, fields, dict(query)


def human_duration(seconds):
    """k8s.io/apimachinery pkg/util/duration HumanDuration, as the Age column shows it."""
    seconds = int(seconds)
    if seconds < 0:
        return "0s"
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    return f"{hours // 24}d"


def age(obj):
    return human_duration((now() - parse_rfc3339(obj["metadata"]["creationTimestamp"])).total_seconds())


class Reads:
    """ApiHandler's part: the reads."""

    def discovery(self, url):
        resources = all_resources(self.store)
        accept = self.headers.get("Accept", "")
        aggregated = "g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList" in accept.replace(" ", "")
        if url in ("/api", "/apis") and aggregated:
            return 200, aggregated_discovery(resources, url == "/api"), "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        if url == "/api":
            host = self.server.server_address
            return 200, {"kind": "APIVersions", "versions": ["v1"],
                         "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": f"{host[0]}:{host[1]}"}]}
        if url == "/api/v1":
            return 200, api_resource_list(resources, "v1")
        if url == "/apis":
            listed = []
            for group, versions in groups(resources).items():
                entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
                listed.append({"name": group, "versions": entries, "preferredVersion": entries[0]})
            return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": listed}
        match = re.fullmatch(r"/apis/([^/]+)(?:/([^/]+))?", url)
        if match:
            versions = groups(resources).get(match.group(1))
            if not versions or (match.group(2) and match.group(2) not in versions):
                return status_error(404, "NotFound", "the server could not find the requested resource")
            if match.group(2):
                return 200, api_resource_list(resources, f"{match.group(1)}/{match.group(2)}")
            entries = [{"groupVersion": f"{match.group(1)}/{v}", "version": v} for v in versions]
            return 200, {"kind": "APIGroup", "apiVersion": "v1", "name": match.group(1), "versions": entries, "preferredVersion": entries[0]}
        if url == "/openapi/v3":
            gvs = ["api/v1"] + [f"apis/{g}/{v}" for g, vs in groups(resources).items() for v in vs]
            return 200, {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash={openapi_hash(gv, self.store.version())}"}
                                   for gv in gvs}}
        match = re.fullmatch(r"/openapi/v3/api/v1|/openapi/v3/apis/([^/]+/[^/]+)", url)
        if match:
            return 200, openapi_v3(resources, match.group(1) or "v1")
        return status_error(404, "NotFound", "the server could not find the requested resource")

    def present(self, resource, obj, listed=False):
        """The object as the API answers it: in the requested version, with the controllers' view folded in."""
        obj = json.loads(json.dumps(obj))
        if listed and not resource.crd:
            obj.pop("apiVersion", None)  # typed lists carry no apiVersion/kind on their items
            obj.pop("kind", None)
        else:
            obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        if resource.kind == "Node":
            for condition in obj.get("status", {}).get("conditions", []):
                # The node lifecycle controller: a node whose kubelet stopped posting status for 40 s is Unknown.
                if condition["type"] == "Ready" and parse_rfc3339(condition["lastHeartbeatTime"]) < now() - datetime.timedelta(seconds=40):
                    condition.update(status="Unknown", reason="NodeStatusUnknown", message="Kubelet stopped posting node status.")
        if resource.kind == "PodDisruptionBudget":
            obj["status"] = self.disruption_status(obj)
        if resource.kind == "DaemonSet":
            obj["status"] = self.daemon_set_status(obj)
        if resource.kind == "Deployment":
            obj["status"] = deployment_status(obj)
        return obj

    def wants_table(self):
        return "as=Table" in self.headers.get("Accept", "").replace(" ", "")

    def list(self, resource, namespace):
        labels = label_selector(self.query.get("labelSelector"))
        fields = field_selector(self.query.get("fieldSelector"), resource)
        if self.query.get("watch") in ("true", "1"):
            return 200, Watch(resource, namespace, labels, fields, self.query)
        items = []
        for key in sorted(self.objects(resource)):
            obj = self.present(resource, self.objects(resource)[key], listed=True)
            if namespace and obj["metadata"].get("namespace") != namespace:
                continue
            if labels(obj["metadata"].get("labels")) and fields(obj):
                items.append(obj)
        if self.wants_table():
            return 200, self.table(resource, items), "application/json"
        return 200, {"kind": f"{resource.kind}List", "apiVersion": resource.api_version, "metadata": {"resourceVersion": self.store.version()},
                     "items": items}

    def watched(self, watch):
        """{uid: object} of what the watch selects, now."""
        found = {}
        for obj in self.objects(watch.resource).values():
            if (watch.namespace is None or obj["metadata"].get("namespace") == watch.namespace) and watch.labels(obj["metadata"].get("labels")) \
                    and watch.fields(obj):
                found[obj["metadata"]["uid"]] = self.present(watch.resource, obj)
        return found

    def stream(self, watch):
        """A watch (API concepts, "Efficient detection of changes"): one JSON event per line until timeoutSeconds. Without a
        resourceVersion (or with 0) it starts with an ADDED event per object; with one, objects changed after it come as MODIFIED
        (the double keeps no history, so it cannot tell what happened in between). sendInitialEvents ends the initial events
        with the BOOKMARK that client-go's watch-list waits for. Changes are found by polling the store every 0.2 s."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        since = watch.query.get("resourceVersion") or "0"
        initial = watch.query.get("sendInitialEvents") == "true"
        with self.store.lock:
            current, version_now = self.watched(watch), self.store.version()
        events = []
        for obj in sorted(current.values(), key=lambda o: int(o["metadata"].get("resourceVersion") or 0)):
            if since == "0" or initial:
                events.append(("ADDED", obj))
            elif int(obj["metadata"].get("resourceVersion") or 0) > int(since):
                events.append(("MODIFIED", obj))
        if initial:
            events.append(("BOOKMARK", {"kind": watch.resource.kind, "apiVersion": watch.resource.api_version, "metadata": {
                "resourceVersion": version_now, "annotations": {"k8s.io/initial-events-end": "true"}}}))
        deadline = time.monotonic() + min(int(watch.query.get("timeoutSeconds") or 1800), 1800)
        try:
            while True:
                for kind, obj in events:
                    self.wfile.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                self.wfile.flush()
                if time.monotonic() >= deadline:
                    return None
                time.sleep(0.2)
                with self.store.lock:
                    latest = self.watched(watch)
                events = [("ADDED", obj) for uid, obj in latest.items() if uid not in current]
                # A DaemonSet's status is computed when read (daemon_set_status): a change of it is a change, as the controller's write is.
                events += [("MODIFIED", obj) for uid, obj in latest.items()
                           if uid in current and (obj["metadata"].get("resourceVersion") != current[uid]["metadata"].get("resourceVersion")
                                                  or (watch.resource.kind == "DaemonSet" and obj.get("status") != current[uid].get("status")))]
                events += [("DELETED", obj) for uid, obj in current.items() if uid not in latest]
                current = latest
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            return None  # the client went away

    def table(self, resource, items):
        """meta.k8s.io/v1 Table, what kubectl get asks for: the kind's columns (Nodes, Pods, CRD printer columns) or Name, Age."""
        columns = [("Name", "string", "name", "Name must be unique within a namespace.")]
        cells = [lambda obj: obj["metadata"]["name"]]
        if resource.kind == "Node":
            def node_status(obj):
                ready = next((c["status"] for c in self.present(resource, obj).get("status", {}).get("conditions", []) if c["type"] == "Ready"), "Unknown")
                text = {"True": "Ready", "False": "NotReady"}.get(ready, "Unknown")
                return text + (",SchedulingDisabled" if obj.get("spec", {}).get("unschedulable") else "")
            columns += [("Status", "string", "", "The status of the node"), ("Roles", "string", "", "The roles of the node"),
                        ("Age", "string", "", "CreationTimestamp"), ("Version", "string", "", "Kubelet Version")]
            cells += [node_status,
                      lambda obj: ",".join(sorted(k.split("/", 1)[1] for k in obj["metadata"].get("labels", {})
                                                  if k.startswith("node-role.kubernetes.io/"))) or "<none>",
                      age, lambda obj: obj.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")]
        elif resource.kind == "Pod":
            columns += [("Ready", "string", "", "The aggregate readiness state of this pod for accepting traffic."),
                        ("Status", "string", "", "The aggregate status of the containers in this pod."),
                        ("Restarts", "string", "", "The number of times the containers in this pod have been restarted."), ("Age", "string", "", "")]
            cells += [lambda obj: f"{sum(1 for c in obj.get('status', {}).get('containerStatuses', []) if c.get('ready'))}/"
                                  f"{len(obj.get('spec', {}).get('containers', []))}",
                      lambda obj: "Terminating" if obj["metadata"].get("deletionTimestamp") else obj.get("status", {}).get("phase", "Pending"),
                      lambda obj: str(sum(c.get("restartCount", 0) for c in obj.get("status", {}).get("containerStatuses", []))), age]
        elif resource.kind == "PodDisruptionBudget":
            columns += [("Min Available", "string", "", ""), ("Max Unavailable", "string", "", ""), ("Allowed Disruptions", "integer", "", ""),
                        ("Age", "string", "", "")]
            cells += [lambda obj: str(obj.get("spec", {}).get("minAvailable", "N/A")), lambda obj: str(obj.get("spec", {}).get("maxUnavailable", "N/A")),
                      lambda obj: self.disruption_status(obj)["disruptionsAllowed"], age]
        elif resource.kind == "Namespace":
            columns += [("Status", "string", "", "The status of the namespace"), ("Age", "string", "", "")]
            cells += [lambda obj: obj.get("status", {}).get("phase", "Active"), age]
        elif resource.crd and resource.crd[1].get("additionalPrinterColumns"):
            for column in resource.crd[1]["additionalPrinterColumns"]:
                columns.append((column["name"], column.get("type", "string"), column.get("format", ""), column.get("description", "")))
                parts = [part for part in column["jsonPath"].split(".") if part]
                cells.append(lambda obj, parts=parts, column=column: age(obj) if parts == ["metadata", "creationTimestamp"]
                             else shown(get_path(obj, parts)))
        else:
            columns.append(("Age", "string", "", "CreationTimestamp is a timestamp representing the server time when this object was created."))
            cells.append(age)
        rows = [{"cells": [cell(obj) for cell in cells],
                 "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}} for obj in items]
        return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": self.store.version()},
                "columnDefinitions": [{"name": n, "type": t, "format": f, "description": d, "priority": 0} for n, t, f, d in columns], "rows": rows}
