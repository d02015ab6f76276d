"""kubectl, and the entry point: the double acts as the program it is called as (kubeadm, kubelet or kubectl)."""

import json
import os
import sys

from kube_double.client import Client
from kube_double.core import EXIT_LAB_ERROR, Fail, LabError, PROGRAM, now, parse_duration, parse_flags, parse_rfc3339, version
from kube_double.etcdctl import etcdctl
from kube_double.etcdutl import etcdutl
from kube_double.kubeadm import kubeadm
from kube_double.kubelet import kubelet


def kubectl(arguments):
    flags, positional = parse_flags(arguments, {"--kubeconfig", "-n", "--namespace", "-o", "--output", "--type", "-p", "--patch",
                                                "--request-timeout", "--raw"}, {"--client"})
    if positional[:1] == ["version"]:
        print(json.dumps({"clientVersion": {"major": version().split(".")[0], "minor": version().split(".")[1], "gitVersion": "v" + version()}}, indent=2)
              if flags.get("-o", flags.get("--output")) == "json" else f"Client Version: v{version()}")
        return 0
    config_name = flags.get("--kubeconfig") or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    timeout = parse_duration(flags["--request-timeout"]) if "--request-timeout" in flags else 10
    client = Client.from_kubeconfig(config_name, timeout=timeout or 10)
    namespace = flags.get("-n", flags.get("--namespace", "default"))
    output = flags.get("-o", flags.get("--output", ""))
    verb, rest = (positional[0], positional[1:]) if positional else ("", [])
    if verb == "get" and "--raw" in flags:
        data = client.call("GET", flags["--raw"])
        print(data if isinstance(data, str) else json.dumps(data))
        return 0
    if verb in ("get", "patch", "delete") and rest:
        resource = {"node": "nodes", "nodes": "nodes", "no": "nodes", "secret": "secrets", "secrets": "secrets",
                    "configmap": "configmaps", "configmaps": "configmaps", "cm": "configmaps"}.get(rest[0])
        if resource is None:
            raise Fail(f'error: the server doesn\'t have a resource type "{rest[0]}"')
        base = "/api/v1/nodes" if resource == "nodes" else f"/api/v1/namespaces/{namespace}/{resource}"
        name = rest[1] if len(rest) > 1 else None
        if verb == "get":
            data = client.call("GET", base + (f"/{name}" if name else ""))
            if name is None:
                kind = {"nodes": "Node", "secrets": "Secret", "configmaps": "ConfigMap"}[resource]
                data = {"apiVersion": "v1", "items": [dict(item, apiVersion="v1", kind=kind) for item in data["items"]], "kind": "List",
                        "metadata": {"resourceVersion": ""}}
            if output == "json":
                print(json.dumps(data, indent=4))
            elif output == "name":
                print("\n".join(f"{resource[:-1]}/{item['metadata']['name']}" for item in data.get("items", [data])))
            elif resource == "nodes":
                print_nodes(data.get("items", [data]))
            else:
                print("NAME" + "".join(f"\n{item['metadata']['name']}" for item in data.get("items", [data])))
            return 0
        if verb == "patch":
            if flags.get("--type", "strategic") != "merge":
                raise Fail("kubectl (lab double): only `kubectl patch --type merge` is modelled", EXIT_LAB_ERROR)
            before = client.call("GET", f"{base}/{name}")
            after = client.call("PATCH", f"{base}/{name}", json.loads(flags.get("-p", flags.get("--patch", "{}"))), "application/merge-patch+json")
            unchanged = before.get("metadata", {}).get("resourceVersion") == after.get("metadata", {}).get("resourceVersion")
            print(f"{resource[:-1]}/{name} {'patched (no change)' if unchanged else 'patched'}")
            return 0
        if verb == "delete":
            client.call("DELETE", f"{base}/{name}")
            print(f'{resource[:-1]} "{name}" deleted')
            return 0
    raise Fail(f"kubectl (lab double): `kubectl {' '.join(positional[:2])}` is not modelled (lab/doubles/kube/README.md)", EXIT_LAB_ERROR)


def print_nodes(nodes):
    rows = [("NAME", "STATUS", "ROLES", "AGE", "VERSION")]
    for node in nodes:
        ready = next((c["status"] for c in node.get("status", {}).get("conditions", []) if c["type"] == "Ready"), "Unknown")
        roles = ",".join(sorted(label.split("/", 1)[1] for label in node["metadata"].get("labels", {})
                                if label.startswith("node-role.kubernetes.io/"))) or "<none>"
        age = now() - parse_rfc3339(node["metadata"]["creationTimestamp"])
        rows.append((node["metadata"]["name"], {"True": "Ready", "False": "NotReady"}.get(ready, "NotReady"), roles,
                     f"{int(age.total_seconds() // 60)}m" if age.total_seconds() >= 60 else f"{int(age.total_seconds())}s",
                     node.get("status", {}).get("nodeInfo", {}).get("kubeletVersion", "")))
    widths = [max(len(row[column]) for row in rows) + 3 for column in range(5)]
    for row in rows:
        print("".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())


def main():
    program = PROGRAM
    commands = {"kubeadm": kubeadm, "kubelet": kubelet, "kubectl": kubectl, "etcdctl": etcdctl, "etcdutl": etcdutl}
    if program not in commands:
        print(f"kube double: called as {program}; install it as kubeadm, kubelet, kubectl, etcdctl or etcdutl", file=sys.stderr)
        return EXIT_LAB_ERROR
    try:
        return commands[program](sys.argv[1:])
    except Fail as error:
        print(("error: " if program == "kubectl" and not str(error).startswith(("Error", "error")) else "") + str(error), file=sys.stderr)
        return error.code
    except LabError as error:
        print(f"{program} (lab double): {error}", file=sys.stderr)
        return EXIT_LAB_ERROR
