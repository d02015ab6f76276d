"""The API of the kube double (lab/doubles/kube/README.md) driven by real clients: kubectl 1.35, the kubernetes Python client
(pinned in requirements.txt) and kubernetes.core's modules through ansible-playbook.

One control plane is made with `kubeadm init` as in test_kube_doubles.py; every client uses the admin kubeconfig it wrote.
"""

import base64
import http.client
import json
import os
import pathlib
import ssl
import subprocess
import sys
import tempfile
import time

import pytest
import yaml
from test_kube_doubles import Node, free_port, init_config

REPO = pathlib.Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".build" / "bin" / "kubectl"
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")
NODE = "dc1-cp1"
PART_OF = "app.kubernetes.io/part-of"

kubernetes = pytest.importorskip("kubernetes")
from kubernetes import client as k8s_client  # noqa: E402 - after the skip
from kubernetes.dynamic import DynamicClient  # noqa: E402

CRD = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": {"name": "gpupools.lab.onprem.example"},
       "spec": {"group": "lab.onprem.example", "scope": "Namespaced",
                "names": {"plural": "gpupools", "singular": "gpupool", "kind": "GpuPool", "shortNames": ["gp"]},
                "versions": [{"name": "v1", "served": True, "storage": True,
                              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                              "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}]}]}}


def pool(name, size, namespace="default"):
    return {"apiVersion": "lab.onprem.example/v1", "kind": "GpuPool",
            "metadata": {"name": name, "namespace": namespace, "labels": {PART_OF: "onprem-gpu"}}, "spec": {"size": size}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = tmp_path_factory.mktemp("kubeapi")
    node = Node(base, NODE)
    port = free_port()
    try:
        node.run("kubeadm", "init", "--config", node.config("kubeadm.yaml", init_config(node, port)), "--skip-token-print")
        admin = node.root / "etc" / "kubernetes" / "admin.conf"
        api = kubernetes.config.new_client_from_config(config_file=str(admin))
        home = base / "home"
        home.mkdir()
        yield {"node": node, "admin": admin, "api": api, "core": k8s_client.CoreV1Api(api), "base": base,
               "env": dict(os.environ, KUBECONFIG=str(admin), HOME=str(home))}
    finally:
        node.stop()


def kubectl(cluster, *arguments, check=True, stdin=None):
    if not KUBECTL.exists():
        pytest.skip(f"the real kubectl is not at {KUBECTL}: run bash tests/tools/fetch_k8s_clients.sh")
    result = subprocess.run([str(KUBECTL), *arguments], env=cluster["env"], capture_output=True, text=True, timeout=120, check=False,
                            input=stdin)
    if check:
        assert result.returncode == 0, result.stderr
    return result


def kubectl_apply(cluster, *documents, extra=(), check=True):
    return kubectl(cluster, "apply", "--server-side", *extra, "-f", "-", stdin=yaml.safe_dump_all(documents), check=check)


def raw(cluster, method, url, accept="application/json", body=None, content_type="application/json"):
    """One request with the admin's client certificate, as client-go sends it; (status, JSON body, headers)."""
    config = yaml.safe_load(cluster["admin"].read_text())
    server = config["clusters"][0]["cluster"]["server"]
    user = config["users"][0]["user"]
    context = ssl.create_default_context(cadata=base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"]).decode())
    with tempfile.NamedTemporaryFile("w", dir=cluster["base"]) as bundle:
        bundle.write(base64.b64decode(user["client-certificate-data"]).decode() + base64.b64decode(user["client-key-data"]).decode())
        bundle.flush()
        context.load_cert_chain(bundle.name)
    host, port = server.removeprefix("https://").split(":")
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    headers = {"Accept": accept}
    if body is not None:
        headers["Content-Type"] = content_type
        body = body if isinstance(body, str) else json.dumps(body)
    connection.request(method, url, body=body, headers=headers)
    response = connection.getresponse()
    return response.status, json.loads(response.read() or b"{}"), response.headers


def ready_pod(cluster, name, labels, owner=None, volumes=()):
    """A pod bound to the node and reported Running and Ready, as kubelet would post its status."""
    metadata = {"name": name, "namespace": "gpu", "labels": labels}
    if owner:
        metadata["ownerReferences"] = [dict(owner, controller=True)]
    cluster["core"].create_namespaced_pod("gpu", {"apiVersion": "v1", "kind": "Pod", "metadata": metadata,
                                                  "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "registry.lab/" + name}],
                                                           "volumes": list(volumes)}})
    cluster["core"].patch_namespaced_pod_status(name, "gpu", {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})


def node(cluster):
    return cluster["core"].read_node(NODE)


# ---------------------------------------------------------------------------------------------------------------


def test_discovery_as_the_apiserver_serves_it(cluster):
    status, core = raw(cluster, "GET", "/api/v1")[:2]
    assert status == 200 and core["kind"] == "APIResourceList"
    by_name = {resource["name"]: resource for resource in core["resources"]}
    assert by_name["pods"]["namespaced"] is True and by_name["pods"]["shortNames"] == ["po"] and "list" in by_name["pods"]["verbs"]
    assert by_name["nodes"]["namespaced"] is False
    # kubectl drain finds the Eviction API here (CheckEvictionSupport: group and version on the subresource).
    assert by_name["pods/eviction"] == {"name": "pods/eviction", "singularName": "", "namespaced": True, "group": "policy", "version": "v1",
                                        "kind": "Eviction", "verbs": ["create"]}
    status, listed = raw(cluster, "GET", "/apis")[:2]
    assert status == 200 and listed["kind"] == "APIGroupList"
    assert {"policy", "apps", "rbac.authorization.k8s.io", "apiextensions.k8s.io"} <= {group["name"] for group in listed["groups"]}
    status, aggregated, headers = raw(cluster, "GET", "/apis", accept="application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json")
    assert status == 200 and headers["Content-Type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    policy = next(item for item in aggregated["items"] if item["metadata"]["name"] == "policy")
    (pdb,) = policy["versions"][0]["resources"]
    assert pdb["resource"] == "poddisruptionbudgets" and pdb["scope"] == "Namespaced" and pdb["responseKind"]["kind"] == "PodDisruptionBudget"
    # kubectl reads the same through aggregated discovery.
    resources = kubectl(cluster, "api-resources", "--api-group=policy", "-o", "name").stdout.split()
    assert resources == ["poddisruptionbudgets.policy"]
    status, missing = raw(cluster, "GET", "/apis/nothing.example/v1")[:2]
    assert status == 404 and missing["kind"] == "Status" and missing["reason"] == "NotFound"


def test_kubectl_labels_taints_and_cordons_the_node(cluster):
    kubectl(cluster, "label", "node", NODE, "nvidia.com/mig.config=all-1g.10gb")
    kubectl(cluster, "taint", "node", NODE, "nvidia.com/mig=reconfiguring:NoSchedule")
    got = node(cluster)
    assert got.metadata.labels["nvidia.com/mig.config"] == "all-1g.10gb"
    managers = {(entry.manager, entry.operation, entry.subresource) for entry in got.metadata.managed_fields}
    # kubelet registered the Node and posts its status; kubectl label and taint name themselves as field managers.
    assert {("kubelet", "Update", None), ("kubelet", "Update", "status"), ("kubectl-label", "Update", None), ("kubectl-taint", "Update", None)} <= managers
    assert {(taint.key, taint.value, taint.effect) for taint in got.spec.taints} == {
        ("nvidia.com/mig", "reconfiguring", "NoSchedule"), ("node-role.kubernetes.io/control-plane", None, "NoSchedule")}
    kubectl(cluster, "taint", "node", NODE, "nvidia.com/mig-")
    assert [taint.key for taint in node(cluster).spec.taints] == ["node-role.kubernetes.io/control-plane"]
    kubectl(cluster, "label", "node", NODE, "nvidia.com/mig.config-")
    assert "nvidia.com/mig.config" not in node(cluster).metadata.labels
    assert kubectl(cluster, "cordon", NODE).stdout.strip() == f"node/{NODE} cordoned"
    assert node(cluster).spec.unschedulable is True
    table = kubectl(cluster, "get", "nodes").stdout.splitlines()
    assert table[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert table[1].split()[:3] == [NODE, "NotReady,SchedulingDisabled", "control-plane"]
    kubectl(cluster, "uncordon", NODE)
    assert not node(cluster).spec.unschedulable


def test_kubectl_drain_is_held_by_a_disruption_budget_and_then_evicts(cluster):
    kubectl_apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu"}},
                  {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "exporter", "namespace": "gpu"},
                   "spec": {"selector": {"matchLabels": {"app": "exporter"}},
                            "template": {"metadata": {"labels": {"app": "exporter"}}, "spec": {"containers": [{"name": "e", "image": "exporter"}]}}}},
                  {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "trainer", "namespace": "gpu"},
                   "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "trainer"}}}})
    daemonset = k8s_client.AppsV1Api(cluster["api"]).read_namespaced_daemon_set("exporter", "gpu")
    ready_pod(cluster, "exporter-x1", {"app": "exporter"}, {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "exporter", "uid": daemonset.metadata.uid})
    ready_pod(cluster, "trainer-0", {"app": "trainer"}, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "trainer", "uid": "rs-1"},
              volumes=[{"name": "scratch", "emptyDir": {}}])
    pdb = k8s_client.PolicyV1Api(cluster["api"]).read_namespaced_pod_disruption_budget("trainer", "gpu")
    assert (pdb.status.current_healthy, pdb.status.desired_healthy, pdb.status.disruptions_allowed) == (1, 1, 0)

    # The Eviction API itself answers 429 with the real body.
    status, refused = raw(cluster, "POST", "/api/v1/namespaces/gpu/pods/trainer-0/eviction",
                          body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "trainer-0", "namespace": "gpu"}})[:2]
    assert status == 429 and refused["reason"] == "TooManyRequests"
    assert refused["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert refused["details"]["causes"] == [{"reason": "DisruptionBudget", "message": "The disruption budget trainer needs 1 healthy pods and has 1 currently"}]

    held = kubectl(cluster, "drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=6s", check=False)
    assert held.returncode == 1
    assert "Cannot evict pod as it would violate the pod's disruption budget." in held.stderr
    assert "ignoring DaemonSet-managed Pods: gpu/exporter-x1" in held.stderr
    assert node(cluster).spec.unschedulable is True
    assert sorted(pod.metadata.name for pod in cluster["core"].list_namespaced_pod("gpu").items) == ["exporter-x1", "trainer-0"]

    kubectl(cluster, "patch", "pdb", "trainer", "-n", "gpu", "--type=merge", "-p", '{"spec":{"minAvailable":null,"maxUnavailable":1}}')
    drained = kubectl(cluster, "drain", NODE, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
    assert "evicting pod gpu/trainer-0" in drained.stdout and f"node/{NODE} drained" in drained.stdout
    assert [pod.metadata.name for pod in cluster["core"].list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}").items] == ["exporter-x1"]
    kubectl(cluster, "uncordon", NODE)


def test_kubectl_server_side_applies_a_crd_and_its_objects(cluster):
    assert "serverside-applied" in kubectl_apply(cluster, CRD).stdout
    established = kubectl(cluster, "wait", "--for=condition=Established", f"crd/{CRD['metadata']['name']}", "--timeout=10s").stdout
    assert established.strip() == f"customresourcedefinition.apiextensions.k8s.io/{CRD['metadata']['name']} condition met"
    assert kubectl_apply(cluster, pool("training", 4)).stdout.strip() == "gpupool.lab.onprem.example/training serverside-applied"
    table = kubectl(cluster, "get", "gpupools").stdout.splitlines()
    assert table[0].split() == ["NAME", "SIZE"] and table[1].split() == ["training", "4"]
    applied = json.loads(kubectl(cluster, "get", "gp", "training", "-o", "json", "--show-managed-fields").stdout)
    assert applied["spec"] == {"size": 4} and applied["metadata"]["generation"] == 1
    (entry,) = applied["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("kubectl", "Apply")
    assert entry["fieldsV1"] == {"f:metadata": {"f:labels": {f"f:{PART_OF}": {}}}, "f:spec": {"f:size": {}}}
    # Another manager changing kubectl's field conflicts unless it forces, as server-side apply does.
    conflict = kubectl_apply(cluster, pool("training", 8), extra=("--field-manager=mig-manager",), check=False)
    assert conflict.returncode == 1
    assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.size' in conflict.stderr
    kubectl_apply(cluster, pool("training", 8), extra=("--field-manager=mig-manager", "--force-conflicts"))
    forced = json.loads(kubectl(cluster, "get", "gp", "training", "-o", "json", "--show-managed-fields").stdout)
    assert forced["spec"] == {"size": 8} and forced["metadata"]["generation"] == 2
    owners = {entry["manager"]: entry["fieldsV1"] for entry in forced["metadata"]["managedFields"]}
    assert owners["mig-manager"]["f:spec"] == {"f:size": {}} and "f:spec" not in owners["kubectl"]
    # A field the manager no longer applies is removed.
    trimmed = pool("inference", 2)
    trimmed["spec"]["mig"] = "all-1g.10gb"
    kubectl_apply(cluster, trimmed)
    del trimmed["spec"]["mig"]
    kubectl_apply(cluster, trimmed)
    assert json.loads(kubectl(cluster, "get", "gp", "inference", "-o", "json").stdout)["spec"] == {"size": 2}
    deleted = kubectl(cluster, "delete", "gpupools", "-l", f"{PART_OF}=onprem-gpu").stdout
    assert 'gpupool.lab.onprem.example "training" deleted' in deleted and 'gpupool.lab.onprem.example "inference" deleted' in deleted
    assert kubectl(cluster, "get", "gpupools", "-o", "name").stdout == ""


def test_kubectl_client_side_apply_creates_then_configures(cluster):
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "csa", "namespace": "default"},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "csa"}}}}
    assert kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(budget)).stdout.strip() == "poddisruptionbudget.policy/csa created"
    budget["spec"] = {"maxUnavailable": "50%", "selector": budget["spec"]["selector"]}
    assert kubectl(cluster, "apply", "-f", "-", stdin=yaml.safe_dump(budget)).stdout.strip() == "poddisruptionbudget.policy/csa configured"
    live = json.loads(kubectl(cluster, "get", "pdb", "csa", "-o", "json").stdout)
    assert live["spec"] == {"maxUnavailable": "50%", "selector": {"matchLabels": {"app": "csa"}}} and live["metadata"]["generation"] == 2
    table = kubectl(cluster, "get", "pdb", "csa").stdout.splitlines()
    assert table[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert table[1].split()[:4] == ["csa", "N/A", "50%", "0"]
    kubectl(cluster, "delete", "pdb", "csa")
    assert kubectl(cluster, "get", "pdb", "csa", check=False).stderr.strip() == \
        'Error from server (NotFound): poddisruptionbudgets.policy "csa" not found'


def test_kubectl_create_generators_send_protobuf_the_double_reads(cluster):
    assert kubectl(cluster, "create", "namespace", "addons").stdout.strip() == "namespace/addons created"
    kubectl(cluster, "create", "configmap", "settings", "-n", "addons", "--from-literal=mig=all-1g.10gb")
    kubectl(cluster, "create", "secret", "generic", "token", "-n", "addons", "--from-literal=key=s3cr3t")
    kubectl(cluster, "create", "serviceaccount", "robot", "-n", "addons")
    namespace = cluster["core"].read_namespace("addons")
    assert namespace.metadata.labels == {"kubernetes.io/metadata.name": "addons"} and namespace.status.phase == "Active"
    assert cluster["core"].read_namespaced_config_map("settings", "addons").data == {"mig": "all-1g.10gb"}
    secret = cluster["core"].read_namespaced_secret("token", "addons")
    assert secret.type == "Opaque" and base64.b64decode(secret.data["key"]) == b"s3cr3t"
    assert cluster["core"].read_namespaced_service_account("robot", "addons").metadata.namespace == "addons"
    refused = kubectl(cluster, "create", "deployment", "web", "-n", "addons", "--image=web", check=False)
    assert refused.returncode == 1 and "the lab double decodes protobuf bodies of Namespace, ConfigMap, Secret, ServiceAccount only" in refused.stderr
    kubectl(cluster, "delete", "namespace", "addons")
    assert cluster["core"].list_namespaced_config_map("addons").items == []


def test_kubectl_waits_for_a_deletion_through_a_watch(cluster):
    kubectl(cluster, "create", "configmap", "held", "--from-literal=a=b")
    kubectl(cluster, "patch", "configmap", "held", "--type=merge", "-p", '{"metadata":{"finalizers":["lab.onprem.example/hold"]}}')
    kubectl(cluster, "delete", "configmap", "held", "--wait=false")
    held = cluster["core"].read_namespaced_config_map("held", "default")
    assert held.metadata.deletion_timestamp is not None and held.metadata.finalizers == ["lab.onprem.example/hold"]
    waiting = subprocess.Popen([str(KUBECTL), "wait", "--for=delete", "configmap/held", "--timeout=20s"], env=cluster["env"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3)  # kubectl has listed the held object and watches it (a deletion before that is a silent success)
        assert waiting.poll() is None
        # Removing the last finalizer lets the object go; kubectl learns it from its watch.
        cluster["core"].patch_namespaced_config_map("held", "default", [{"op": "remove", "path": "/metadata/finalizers"}])
        output, errors = waiting.communicate(timeout=30)
    finally:
        waiting.kill()
    assert waiting.returncode == 0, errors
    assert output.strip() == "configmap/held condition met"
    assert cluster["core"].list_namespaced_config_map("default", field_selector="metadata.name=held").items == []


def test_requests_without_what_the_api_requires_get_its_errors(cluster):
    status, answer = raw(cluster, "PATCH", "/api/v1/namespaces/default/configmaps/x", body="{}", content_type="application/apply-patch+yaml")[:2]
    assert (status, answer["reason"], answer["message"]) == (400, "BadRequest", "fieldManager is required for apply requests")
    status, answer = raw(cluster, "POST", "/api/v1/namespaces/default/configmaps", body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}})[:2]
    assert (status, answer["reason"]) == (422, "Invalid")
    assert answer["message"] == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    status, answer = raw(cluster, "GET", "/api/v1/namespaces/default/configmaps/absent")[:2]
    assert (status, answer["reason"], answer["message"]) == (404, "NotFound", 'configmaps "absent" not found')
    status, answer = raw(cluster, "POST", "/api/v1/namespaces/nowhere/configmaps", body={"metadata": {"name": "x"}})[:2]
    assert (status, answer["message"]) == (404, 'namespaces "nowhere" not found')
    status, answer = raw(cluster, "GET", "/api/v1/pods?fieldSelector=spec.hostIP%3Dx")[:2]
    assert (status, answer["message"]) == (400, "field label not supported: spec.hostIP")


def test_the_python_client_discovers_applies_patches_and_selects(cluster):
    dynamic = DynamicClient(cluster["api"])
    crds = dynamic.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    crds.server_side_apply(body=CRD, field_manager="onprem-gpu")
    pools = dynamic.resources.get(api_version="lab.onprem.example/v1", kind="GpuPool")
    assert pools.namespaced and pools.name == "gpupools" and pools.short_names == ["gp"]
    created = pools.server_side_apply(body=pool("a100", 8), namespace="default", field_manager="onprem-gpu").to_dict()
    assert created["spec"] == {"size": 8} and created["metadata"]["managedFields"][0]["manager"] == "onprem-gpu"
    configmaps = dynamic.resources.get(api_version="v1", kind="ConfigMap")
    for name, labels in (("cm-a", {"tier": "gpu", "pool": "training"}), ("cm-b", {"tier": "gpu", "pool": "inference"}), ("cm-c", {"tier": "cpu"})):
        configmaps.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}},
                          namespace="default")
    with pytest.raises(kubernetes.dynamic.exceptions.ConflictError) as exists:
        configmaps.create(body={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-a"}}, namespace="default")
    assert json.loads(exists.value.body)["reason"] == "AlreadyExists"

    def names(selector):
        listed = configmaps.get(namespace="default", label_selector=selector)
        assert listed.kind == "ConfigMapList" and listed.metadata.resourceVersion
        return sorted(item.metadata.name for item in listed.items)
    assert names("tier=gpu") == ["cm-a", "cm-b"]
    assert names("tier!=gpu") == ["cm-c"] and names("!pool") == ["cm-c"]
    assert names("pool in (training,serving)") == ["cm-a"]
    assert names("tier=gpu,pool notin (training)") == ["cm-b"]
    assert names("pool") == ["cm-a", "cm-b"]
    assert sorted(item.metadata.name for item in configmaps.get(namespace="default", field_selector="metadata.name=cm-c").items) == ["cm-c"]

    before = configmaps.get(name="cm-a", namespace="default")
    patched = configmaps.patch(name="cm-a", namespace="default", body=[{"op": "replace", "path": "/data/k", "value": "w"},
                                                                       {"op": "add", "path": "/data/n", "value": "1"}],
                               content_type="application/json-patch+json")
    assert patched.data.to_dict() == {"k": "w", "n": "1"} and int(patched.metadata.resourceVersion) > int(before.metadata.resourceVersion)
    merged = configmaps.patch(name="cm-a", namespace="default", body={"data": {"n": None}}, content_type="application/merge-patch+json")
    assert merged.data.to_dict() == {"k": "w"}
    status = configmaps.delete(name="cm-c", namespace="default")
    assert status.kind == "Status" and status.status == "Success" and status.details.name == "cm-c"

    # Strategic merge: containers merge by name, taints (atomic in NodeSpec) are replaced.
    cluster["core"].create_namespaced_pod("default", {"metadata": {"name": "two"}, "spec": {"containers": [{"name": "a", "image": "a:1"},
                                                                                                           {"name": "b", "image": "b:1"}]}})
    pod = cluster["core"].patch_namespaced_pod("two", "default", {"spec": {"containers": [{"name": "b", "image": "b:2"}]}})
    assert [(c.name, c.image) for c in pod.spec.containers] == [("a", "a:1"), ("b", "b:2")]
    assert pod.metadata.generation == 2 and pod.status.phase == "Pending"


def write_play(cluster, tasks):
    playbook = cluster["base"] / "play.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "connection": "local", "gather_facts": False,
                                         "environment": {"K8S_AUTH_KUBECONFIG": str(cluster["admin"])}, "tasks": tasks}]))
    inventory = cluster["base"] / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {"ansible_python_interpreter": sys.executable}}}}))
    environment = dict(cluster["env"], ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(playbook)], cwd=REPO, env=environment,
                          capture_output=True, text=True, timeout=300, check=False)


def test_kubernetes_core_drains_applies_patches_and_reads(cluster):
    kubectl_apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu"}},
                  {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "serving", "namespace": "gpu"},
                   "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "serving"}}}}, CRD)
    apps = k8s_client.AppsV1Api(cluster["api"])
    replicaset = apps.create_namespaced_replica_set("gpu", {"metadata": {"name": "serving"}, "spec": {
        "replicas": 2, "selector": {"matchLabels": {"app": "serving"}},
        "template": {"metadata": {"labels": {"app": "serving"}}, "spec": {"containers": [{"name": "s", "image": "serving"}]}}}})
    for index in (0, 1):
        ready_pod(cluster, f"serving-{index}", {"app": "serving"},
                  {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "serving", "uid": replicaset.metadata.uid})
    budget = k8s_client.PolicyV1Api(cluster["api"]).read_namespaced_pod_disruption_budget("serving", "gpu").status
    assert (budget.expected_pods, budget.desired_healthy, budget.disruptions_allowed) == (2, 0, 2)
    report = cluster["base"] / "report.json"
    tasks = [
        {"name": "drain", "kubernetes.core.k8s_drain": {
            "name": NODE, "delete_options": {"ignore_daemonsets": True, "delete_emptydir_data": True, "wait_timeout": 20}}, "register": "drained"},
        {"name": "label", "kubernetes.core.k8s": {"kind": "Node", "name": NODE, "state": "patched",
                                                  "definition": {"metadata": {"labels": {"nvidia.com/mig.config": "all-balanced"}}}}, "register": "labelled"},
        {"name": "client-side apply", "kubernetes.core.k8s": {"state": "present", "apply": True, "definition": {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "addon", "namespace": "gpu", "labels": {PART_OF: "onprem-gpu"}},
            "data": {"version": "1"}}}, "register": "applied"},
        {"name": "client-side apply again", "kubernetes.core.k8s": {"state": "present", "apply": True, "definition": {
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "addon", "namespace": "gpu", "labels": {PART_OF: "onprem-gpu"}},
            "data": {"version": "1"}}}, "register": "reapplied"},
        {"name": "server-side apply", "kubernetes.core.k8s": {
            "state": "present", "server_side_apply": {"field_manager": "onprem-gpu", "force_conflicts": True},
            "definition": pool("h100", 16, "gpu")}, "register": "ssa"},
        {"name": "read", "kubernetes.core.k8s_info": {
            "api_version": "lab.onprem.example/v1", "kind": "GpuPool", "namespace": "gpu", "label_selectors": [f"{PART_OF}=onprem-gpu"]},
         "register": "pools"},
        {"name": "pods left", "kubernetes.core.k8s_info": {"kind": "Pod", "field_selectors": [f"spec.nodeName={NODE}"]}, "register": "left"},
        {"name": "report", "ansible.builtin.copy": {"dest": str(report), "content": "{{ {'drained': drained, 'labelled': labelled, 'applied': applied,"
                                                    " 'reapplied': reapplied, 'ssa': ssa, 'pools': pools, 'left': left} | to_json }}"}},
    ]
    finished = write_play(cluster, tasks)
    assert finished.returncode == 0, finished.stdout[-4000:]
    results = json.loads(report.read_text())
    assert results["drained"]["changed"] and "node dc1-cp1 marked unschedulable" in results["drained"]["result"]
    assert node(cluster).spec.unschedulable is True
    # The DaemonSet's pod of the drain test above stays; the serving pods were evicted.
    assert [pod["metadata"]["name"] for pod in results["left"]["resources"]] == ["exporter-x1"]
    assert node(cluster).metadata.labels["nvidia.com/mig.config"] == "all-balanced" and results["labelled"]["changed"]
    assert results["applied"]["changed"] and not results["reapplied"]["changed"]
    addon = cluster["core"].read_namespaced_config_map("addon", "gpu")
    assert addon.data == {"version": "1"} and "kubectl.kubernetes.io/last-applied-configuration" in addon.metadata.annotations
    assert results["ssa"]["result"]["spec"] == {"size": 16}
    assert [item["metadata"]["name"] for item in results["pools"]["resources"]] == ["h100"]
    kubectl(cluster, "uncordon", NODE)


def test_k8s_drain_reports_a_disruption_budget_it_cannot_satisfy(cluster):
    kubectl_apply(cluster, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "solo", "namespace": "gpu"},
                            "spec": {"minAvailable": "100%", "selector": {"matchLabels": {"app": "solo"}}}})
    ready_pod(cluster, "solo-0", {"app": "solo"}, {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "solo", "uid": "rs-3"})
    budget = k8s_client.PolicyV1Api(cluster["api"]).read_namespaced_pod_disruption_budget("solo", "gpu").status
    assert (budget.expected_pods, budget.current_healthy, budget.desired_healthy, budget.disruptions_allowed) == (1, 1, 1, 0)
    finished = write_play(cluster, [{"kubernetes.core.k8s_drain": {"name": NODE, "delete_options": {"ignore_daemonsets": True, "wait_timeout": 5,
                                                                                                    "delete_emptydir_data": True}}}])
    assert finished.returncode == 2
    assert "Failed to delete pod gpu/solo-0 due to: Cannot evict pod as it would violate the pod's disruption budget." in finished.stdout, \
        finished.stdout[-3000:]
    assert cluster["core"].read_namespaced_pod("solo-0", "gpu").status.phase == "Running"
    kubectl(cluster, "uncordon", NODE)


def test_an_applier_owns_what_it_applied_not_what_the_registry_defaults(cluster):
    # Upstream's field manager records an Apply from the applied configuration: the Namespace's kubernetes.io/metadata.name
    # label and spec.finalizers, set by the registry, are nobody's, so applying the same configuration again keeps them.
    namespaces = DynamicClient(cluster["api"]).resources.get(api_version="v1", kind="Namespace")
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "applied", "labels": {"team": "llm"}}}
    created = namespaces.server_side_apply(body=body, field_manager="onprem.gpu").to_dict()
    assert created["metadata"]["managedFields"][0]["fieldsV1"] == {"f:metadata": {"f:labels": {"f:team": {}}}}
    again = namespaces.server_side_apply(body=body, field_manager="onprem.gpu").to_dict()
    assert again["metadata"]["labels"] == {"team": "llm", "kubernetes.io/metadata.name": "applied"}
    assert again["spec"] == {"finalizers": ["kubernetes"]} and again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    kubectl(cluster, "delete", "namespace", "applied")


def test_kubectl_follows_the_rollout_of_a_daemon_set_the_kubelet_runs(cluster):
    # The node's kubelet creates and starts the DaemonSet's pod (it tolerates the control-plane taint); the DaemonSet's status is
    # computed when read, and kubectl rollout status sees it change through its watch: the pod is available only after
    # minReadySeconds, a change no write makes.
    daemon_set = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "node-agent", "namespace": "default"},
                  "spec": {"selector": {"matchLabels": {"app": "node-agent"}}, "updateStrategy": {"type": "RollingUpdate"}, "minReadySeconds": 3,
                           "template": {"metadata": {"labels": {"app": "node-agent"}}, "spec": {
                               "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
                               "containers": [{"name": "agent", "image": "registry.lab/agent:1"}]}}}}
    kubectl_apply(cluster, daemon_set)
    rolled = kubectl(cluster, "rollout", "status", "daemonset/node-agent", "-n", "default", "--timeout=30s")
    assert "Waiting for daemon set \"node-agent\" rollout to finish" in rolled.stdout
    assert 'daemon set "node-agent" successfully rolled out' in rolled.stdout
    (pod,) = cluster["core"].list_namespaced_pod("default", label_selector="app=node-agent").items
    assert pod.status.phase == "Running" and pod.spec.node_name == NODE and pod.metadata.owner_references[0].kind == "DaemonSet"
    status = k8s_client.AppsV1Api(cluster["api"]).read_namespaced_daemon_set("node-agent", "default").status
    assert (status.desired_number_scheduled, status.number_ready, status.updated_number_scheduled) == (1, 1, 1)
    kubectl(cluster, "delete", "daemonset", "node-agent", "-n", "default")
    assert cluster["core"].list_namespaced_pod("default", label_selector="app=node-agent").items == []


def test_a_deployment_reports_a_finished_rollout_without_making_pods(cluster):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "webhook", "namespace": "default"},
                  "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "webhook"}},
                           "template": {"metadata": {"labels": {"app": "webhook"}},
                                        "spec": {"containers": [{"name": "server", "image": "registry.lab/webhook:1"}]}}}}
    kubectl_apply(cluster, deployment)
    rolled = kubectl(cluster, "rollout", "status", "deployment/webhook", "-n", "default", "--timeout=10s")
    assert 'deployment "webhook" successfully rolled out' in rolled.stdout
    status = k8s_client.AppsV1Api(cluster["api"]).read_namespaced_deployment("webhook", "default").status
    assert (status.replicas, status.ready_replicas, status.available_replicas, status.observed_generation) == (2, 2, 2, 1)
    assert {(condition.type, condition.status, condition.reason) for condition in status.conditions} == {
        ("Available", "True", "MinimumReplicasAvailable"), ("Progressing", "True", "NewReplicaSetAvailable")}
    assert cluster["core"].list_namespaced_pod("default", label_selector="app=webhook").items == []
    kubectl(cluster, "delete", "deployment", "webhook", "-n", "default")
