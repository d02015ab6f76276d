"""What continuous health (roles/node_health) needs of the kube double, proved against a double's API: RBAC for an identity that
is neither a node nor an admin (the taint controller's client certificate, bound to a ClusterRole that may get, list and patch
nodes), NodeRestriction for node status, and kubelet heartbeats that keep the conditions kubelet does not own (a strategic merge
patch, as the real kubelet's PatchNodeStatus sends)."""

import http.client
import json
import pathlib
import ssl
import subprocess
import sys
import time

import pytest
import yaml
from test_kube_api_double import NODE, cluster, raw  # noqa: F401  # pylint: disable=unused-import  # the cluster fixture

pytest.importorskip("kubernetes")

IDENTITY = "onprem-gpu:node-health-controller"
ROLE = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": IDENTITY},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]},
                  {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]}]}
BINDING = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": IDENTITY},
           "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": IDENTITY},
           "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": IDENTITY}]}


def identity(cluster, common_name, organization=None):  # noqa: F811 - the fixture's name
    """A client certificate of the cluster CA, as the node_health role issues the controller's."""
    pki = cluster["node"].root / "etc" / "kubernetes" / "pki"
    key, csr, crt = (cluster["base"] / f"{common_name.replace(':', '_')}.{suffix}" for suffix in ("key", "csr", "crt"))
    subject = f"/CN={common_name}" + (f"/O={organization}" if organization else "")
    subprocess.run(["openssl", "req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-subj", subject, "-out", str(csr)],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(pki / "ca.crt"), "-CAkey", str(pki / "ca.key"),
                    "-CAcreateserial", "-days", "1", "-out", str(crt)], check=True, capture_output=True)
    return pki / "ca.crt", crt, key


def as_identity(cluster, credentials, method, url, body=None, content_type="application/json"):  # noqa: F811
    ca, crt, key = credentials
    context = ssl.create_default_context(cafile=str(ca))
    context.load_cert_chain(str(crt), str(key))
    server = json.loads(json.dumps(cluster["api"].configuration.host))
    host, port = server.removeprefix("https://").split(":")
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = content_type
    connection.request(method, url, body=None if body is None else json.dumps(body), headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read() or b"{}")


def test_a_cluster_role_binding_lets_the_controller_patch_nodes_and_nothing_else(cluster):  # noqa: F811
    controller = identity(cluster, IDENTITY)
    status, answer = as_identity(cluster, controller, "GET", "/api/v1/nodes")
    assert status == 403 and answer["message"] == f'nodes is forbidden: User "{IDENTITY}" cannot list resource "nodes" in API group "" at the cluster scope'
    for document, plural in ((ROLE, "clusterroles"), (BINDING, "clusterrolebindings")):
        assert raw(cluster, "POST", f"/apis/rbac.authorization.k8s.io/v1/{plural}", body=document)[0] == 201
    status, listing = as_identity(cluster, controller, "GET", "/api/v1/nodes")
    assert status == 200 and NODE in [item["metadata"]["name"] for item in listing["items"]]
    version = listing["items"][0]["metadata"]["resourceVersion"]
    taint = {"key": "onprem.gpu/unhealthy", "value": "xid", "effect": "NoSchedule"}
    stale = [{"op": "test", "path": "/metadata/resourceVersion", "value": "0"}, {"op": "add", "path": "/spec/taints", "value": [taint]}]
    assert as_identity(cluster, controller, "PATCH", f"/api/v1/nodes/{NODE}", stale, "application/json-patch+json")[0] == 422
    current = [dict(stale[0], value=version), stale[1]]
    status, patched = as_identity(cluster, controller, "PATCH", f"/api/v1/nodes/{NODE}", current, "application/json-patch+json")
    assert status == 200 and taint in patched["spec"]["taints"]
    assert as_identity(cluster, controller, "DELETE", f"/api/v1/nodes/{NODE}")[0] == 403
    assert as_identity(cluster, controller, "GET", "/api/v1/namespaces/kube-system/pods")[0] == 403
    assert as_identity(cluster, controller, "GET", "/api/v1/namespaces/kube-system/secrets")[0] == 403
    removed = [{"op": "add", "path": "/spec/taints", "value": [entry for entry in patched["spec"]["taints"] if entry != taint]}]
    assert as_identity(cluster, controller, "PATCH", f"/api/v1/nodes/{NODE}", removed, "application/json-patch+json")[0] == 200


def test_a_node_writes_its_own_status_only_and_kubelet_keeps_its_condition(cluster):  # noqa: F811
    node_identity = identity(cluster, f"system:node:{NODE}", "system:nodes")
    other = identity(cluster, "system:node:dc1-gpu9", "system:nodes")
    condition = {"type": "GPUHealthy", "status": "False", "reason": "Xid", "message": "xid: GPU 3 logged Xid 79.",
                 "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
    patch = {"status": {"conditions": [condition]}}
    smp = "application/strategic-merge-patch+json"
    assert as_identity(cluster, other, "PATCH", f"/api/v1/nodes/{NODE}/status", patch, smp)[0] == 403
    status, answer = as_identity(cluster, node_identity, "PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"taints": []}},
                                 "application/merge-patch+json")
    assert status == 403 and "may only update its status" in answer["message"]
    status, written = as_identity(cluster, node_identity, "PATCH", f"/api/v1/nodes/{NODE}/status", patch, smp)
    assert status == 200 and condition in written["status"]["conditions"]
    beat = next(entry for entry in written["status"]["conditions"] if entry["type"] == "Ready")["lastHeartbeatTime"]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        conditions = raw(cluster, "GET", f"/api/v1/nodes/{NODE}")[1]["status"]["conditions"]
        ready = next(entry for entry in conditions if entry["type"] == "Ready")
        if ready["lastHeartbeatTime"] != beat:
            break
        time.sleep(0.5)
    assert ready["lastHeartbeatTime"] != beat, "no kubelet heartbeat within 20 s"
    assert condition in conditions


def test_the_taint_controller_program_taints_through_its_own_identity(cluster, tmp_path):  # noqa: F811
    """roles/node_health's program, installed as the role installs it (the program beside its module_utils bundle), run as the
    controller against the double's API with the controller's certificate: a node whose GPUHealthy is False gets the taint."""
    repo = pathlib.Path(__file__).resolve().parents[2]
    names = yaml.safe_load((repo / "roles" / "node_health" / "vars" / "main.yml").read_text())["__node_health_module_utils"]
    (tmp_path / "module_utils.json").write_text(json.dumps(
        {name: (repo / "plugins" / "module_utils" / name).read_text(encoding="utf-8") for name in names}))
    program = tmp_path / "onprem-gpu-health"
    program.write_bytes((repo / "roles" / "node_health" / "files" / "onprem-gpu-health").read_bytes())
    for document, plural in ((ROLE, "clusterroles"), (BINDING, "clusterrolebindings")):
        raw(cluster, "POST", f"/apis/rbac.authorization.k8s.io/v1/{plural}", body=document)
    ca, crt, key = identity(cluster, IDENTITY)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {"type": "GPUHealthy", "status": "False", "reason": "NvlinkInactive", "message": "nvlink_inactive: GPU 0 has 16 of 18.",
                 "lastHeartbeatTime": now, "lastTransitionTime": now}
    assert raw(cluster, "PATCH", f"/api/v1/nodes/{NODE}/status", body={"status": {"conditions": [condition]}},
               content_type="application/strategic-merge-patch+json")[0] == 200
    config = tmp_path / "controller.json"
    config.write_text(json.dumps({"cluster": "dc1", "server": cluster["api"].configuration.host, "ca_file": str(ca), "cert_file": str(crt),
                                  "key_file": str(key), "textfile": str(tmp_path / "textfile" / "controller.prom"),
                                  "hold_down_seconds": 30, "max_unhealthy_percent": 10, "stale_seconds": 240}))
    result = subprocess.run([sys.executable, "-I", str(program), "controller", str(config)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    assert result.stdout == f"{NODE}: taint onprem.gpu/unhealthy=nvlink_inactive:NoSchedule\n"
    node = raw(cluster, "GET", f"/api/v1/nodes/{NODE}")[1]
    assert {"key": "onprem.gpu/unhealthy", "value": "nvlink_inactive", "effect": "NoSchedule"} in node["spec"]["taints"]
    assert node["metadata"]["annotations"]["onprem.gpu/unhealthy-owner"] == "node-health"
    assert 'onprem_gpu_health_tainted_nodes{cluster="dc1"} 1' in (tmp_path / "textfile" / "controller.prom").read_text()
