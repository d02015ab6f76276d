"""Tests of what the kubelet double does on its node at each heartbeat (lab/doubles/kube/README.md, "Pods, DaemonSets and the
NVIDIA device plugin"): the DaemonSet controller's part for the node, the pod status kubelet posts, and the NVIDIA device
plugin's resources in the Node's status, read from the lab's nvidia-smi double.

One control plane without taints, made with `kubeadm init` as in test_kube_doubles.py, is the GPU node: its kubelet beats
every 0.3 s and finds the nvidia-smi double (8 H100, state in a file the tests rewrite) on its PATH. The tests run in order
on that one node, as the MIG reconfiguration flow does: pause the GPU Operator's operands with node labels, change the
GPUs, restore the labels. The pure functions of the double (MIG strategies, DaemonSet predicates, the device manager's
grace period) are tested in process.
"""

import base64
import http.client
import ipaddress
import json
import os
import pathlib
import re
import ssl
import tempfile
import time

import pytest
import yaml
from test_kube_doubles import PYTHON, Node, free_port, import_double, init_config

NVIDIA_SMI = pathlib.Path(__file__).resolve().parents[2] / "lab" / "doubles" / "nvidia_smi" / "nvidia-smi"
NODE = "dc1-gpu1"
H100 = "NVIDIA H100 80GB HBM3"
POD_CIDR = "10.32.0.0/12"
NAMESPACE = "gpu-operator"
PAUSED = "paused-for-mig-change"
DEPLOY = "nvidia.com/gpu.deploy."
PLUGIN_APP = "nvidia-device-plugin-daemonset"


device_plugin = import_double("device_plugin")
workloads = import_double("workloads")


class Api:
    """Requests with a kubeconfig's client certificate (admin.conf or kubelet.conf, both with embedded data)."""

    def __init__(self, node, kubeconfig):
        config = yaml.safe_load((node.root / kubeconfig).read_text())
        cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
        self.host, port = cluster["server"].removeprefix("https://").split(":")
        self.port = int(port)
        self.context = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        with tempfile.NamedTemporaryFile("w", dir=node.root) as bundle:
            bundle.write(base64.b64decode(user["client-certificate-data"]).decode() + base64.b64decode(user["client-key-data"]).decode())
            bundle.flush()
            self.context.load_cert_chain(bundle.name)

    def request(self, method, url, body=None, content_type="application/merge-patch+json"):
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=10)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json" if method == "POST" else content_type
        connection.request(method, url, body=None if body is None else json.dumps(body), headers=headers)
        response = connection.getresponse()
        data = json.loads(response.read() or b"{}")
        connection.close()
        return response.status, data

    def __call__(self, method, url, body=None, content_type="application/merge-patch+json"):
        status, data = self.request(method, url, body, content_type)
        assert status < 400, (method, url, status, data)
        return data


def until(check, what, timeout=10.0):
    """Poll check() until it returns something true; its value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


class Gpus:
    """The nvidia-smi double's inputs for the node: `count` H100 (or `set_model`), a state file the tests rewrite, a call log."""

    def __init__(self, base, count=8, seed=NODE):
        self.directory = base / "nvsmi"
        (self.directory / "bin").mkdir(parents=True)
        self.hardware = self.directory / "hardware.json"
        self.count, self.seed = count, seed
        self.set_model(H100)
        (self.directory / "driver.json").write_text(json.dumps({"driver_version": "580.65.06", "cuda_version": "13.0"}))
        self.state_path = self.directory / "state" / "nvidia-smi-state.json"
        self.call_log = self.directory / "calls.log"
        wrapper = self.directory / "bin" / "nvidia-smi"
        wrapper.write_text(f'#!/bin/sh\nexec {PYTHON} {NVIDIA_SMI} "$@"\n')
        wrapper.chmod(0o755)
        self.write_state({"gpus": [{} for dummy in range(count)]})

    def set_model(self, model):
        scratch = self.hardware.with_suffix(".new")
        scratch.write_text(json.dumps({"gpu_model": model, "gpu_count": self.count, "seed": self.seed}))
        os.replace(scratch, self.hardware)

    def environment(self, call_log=True):
        env = {"PATH": f"{self.directory / 'bin'}:{os.environ['PATH']}", "NVSMI_DOUBLE_HARDWARE": str(self.hardware),
               "NVSMI_DOUBLE_DRIVER": str(self.directory / "driver.json"), "NVSMI_DOUBLE_STATE": str(self.state_path)}
        if call_log:
            env["NVSMI_DOUBLE_CALL_LOG"] = str(self.call_log)
        return env

    def write_state(self, state):
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        scratch = self.state_path.with_suffix(".new")
        scratch.write_text(json.dumps(state))
        os.replace(scratch, self.state_path)

    def all_1g_10gb(self):
        """mig-parted's all-1g.10gb on every H100: MIG on, seven 1g.10gb GPU instances (profile 19) with one compute instance each."""
        def instance(gi_id, start):
            return {"id": gi_id, "profile_id": 19, "placement": {"start": start},
                    "compute_instances": [{"id": 0, "profile_id": 0, "placement": {"start": 0, "size": 1}}]}

        self.write_state({"gpus": [{"mig_mode": {"current": "Enabled", "pending": "Enabled"}, "persistence_mode": "Enabled",
                                    "gpu_instances": [instance(7 + slot, slot) for slot in range(7)]} for dummy in range(8)]})

    def calls(self):
        return [json.loads(line)["argv"] for line in self.call_log.read_text().splitlines()] if self.call_log.exists() else []


def gpu_control_plane(node, gpus, namespace, **init_options):
    """`kubeadm init` on a GPU node that is its own control plane (untainted: nothing keeps pods off it), its kubelet on the
    nvidia-smi double `gpus` with a fast heartbeat, and `namespace` made; the admin's Api."""
    node.env.update(gpus.environment(), KUBE_DOUBLE_HEARTBEAT="0.3")
    documents = init_config(node, free_port(), **init_options)
    documents[0]["nodeRegistration"]["taints"] = []
    node.run("kubeadm", "init", "--config", node.config("kubeadm.yaml", documents), "--skip-token-print")
    admin = Api(node, "etc/kubernetes/admin.conf")
    admin("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
    return admin


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("kubegpu")
    gpus = Gpus(base)
    node = Node(base, NODE)
    try:
        admin = gpu_control_plane(node, gpus, NAMESPACE, pod_cidr=POD_CIDR)
        yield {"node": node, "gpus": gpus, "admin": admin, "kubelet": Api(node, "etc/kubernetes/kubelet.conf")}
    finally:
        node.stop()


def label(lab, **labels):
    lab["admin"]("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {DEPLOY + k.replace("_", "-"): v for k, v in labels.items()}}})


def daemon_set(name, app, component, containers=None, **spec):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}, "annotations": {"lab/component": component}},
                                  "spec": {"nodeSelector": {DEPLOY + component: "true"}, **spec,
                                           "containers": containers or [{"name": name, "image": f"nvcr.io/nvidia/{name}:v1"}]}}}}


def pods_of(lab, app):
    items = lab["admin"]("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3D{app}")["items"]
    return [pod for pod in items if pod["spec"].get("nodeName") == NODE]


def running(pod):
    return pod["status"].get("phase") == "Running" and pod


def one_running_pod(lab, app):
    def one_running():
        pods = pods_of(lab, app)
        return len(pods) == 1 and running(pods[0])

    return until(one_running, f"one running {app} pod")


def status_of(lab, name):
    return lab["admin"]("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{name}")["status"]


def node_resources(lab):
    status = lab["admin"]("GET", f"/api/v1/nodes/{NODE}")["status"]

    def nvidia(field):
        return {key: value for key, value in status.get(field, {}).items() if key.startswith("nvidia.com/")}

    return nvidia("capacity"), nvidia("allocatable")


def resources_become(lab, capacity, allocatable):
    until(lambda: node_resources(lab) == (capacity, allocatable), f"capacity {capacity} and allocatable {allocatable}")


def bound_pod(lab, name, **spec):
    """A pod bound to the node by its creator (no scheduler runs), as a test or a controller would make it."""
    return lab["admin"]("POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
                        {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox:1.36"}], **spec}})


def heartbeats(lab, count=2):
    """Let `count` heartbeats pass that started after this call: each marker pod is started by one."""
    for index in range(count):
        name = f"marker-{time.monotonic_ns()}-{index}"
        bound_pod(lab, name)
        until(lambda: running(lab["admin"]("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")), f"pod {name} running")
        lab["admin"]("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


# ---------------------------------------------------------------------------------------------------------------
# the DaemonSet controller and the pod status, on the node


def test_a_daemon_set_runs_one_ready_pod_on_the_node_it_selects(lab):
    admin = lab["admin"]
    label(lab, dcgm_exporter="true")
    admin("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets",
          daemon_set("nvidia-dcgm-exporter", "nvidia-dcgm-exporter", "dcgm-exporter",
                     initContainers=[{"name": "toolkit-validation", "image": "nvcr.io/nvidia/gpu-operator-validator:v1"}]))
    admin("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", daemon_set("nvidia-mig-manager", "nvidia-mig-manager", "mig-manager"))
    pod = one_running_pod(lab, "nvidia-dcgm-exporter")
    ds = admin("GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/nvidia-dcgm-exporter")

    assert re.fullmatch(r"nvidia-dcgm-exporter-[bcdfghjklmnpqrstvwxz2456789]{5}", pod["metadata"]["name"])
    assert pod["metadata"]["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "nvidia-dcgm-exporter",
                                                   "uid": ds["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    labels = pod["metadata"]["labels"]
    assert labels["app"] == "nvidia-dcgm-exporter" and labels["pod-template-generation"] == "1"
    assert re.fullmatch(r"[bcdfghjklmnpqrstvwxz2456789]+", labels["controller-revision-hash"])
    assert pod["metadata"]["annotations"] == {"lab/component": "dcgm-exporter"}
    spec = pod["spec"]
    assert spec["nodeName"] == NODE and spec["nodeSelector"] == {DEPLOY + "dcgm-exporter": "true"}
    assert spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [NODE]}]}]
    assert {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]

    status = pod["status"]
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True", "PodScheduled": "True", "Initialized": "True", "ContainersReady": "True", "Ready": "True"}
    node = admin("GET", f"/api/v1/nodes/{NODE}")
    host_ip = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    assert status["hostIP"] == host_ip and ipaddress.ip_address(status["podIP"]) in ipaddress.ip_network(POD_CIDR)
    assert status["startTime"]
    (container,) = status["containerStatuses"]
    assert container["name"] == "nvidia-dcgm-exporter" and container["image"] == "nvcr.io/nvidia/nvidia-dcgm-exporter:v1"
    assert (container["ready"], container["started"], container["restartCount"]) == (True, True, 0)
    assert container["state"]["running"]["startedAt"]
    (init,) = status["initContainerStatuses"]
    assert init["state"]["terminated"]["reason"] == "Completed" and init["ready"]

    # The DaemonSet controller's status; the DaemonSet whose label the node lacks has nothing to do.
    assert status_of(lab, "nvidia-dcgm-exporter") == {"currentNumberScheduled": 1, "numberMisscheduled": 0, "desiredNumberScheduled": 1,
                                                      "numberReady": 1, "updatedNumberScheduled": 1, "numberAvailable": 1,
                                                      "observedGeneration": 1}
    assert pods_of(lab, "nvidia-mig-manager") == []
    assert status_of(lab, "nvidia-mig-manager") == {"currentNumberScheduled": 0, "numberMisscheduled": 0, "desiredNumberScheduled": 0,
                                                    "numberReady": 0, "observedGeneration": 1}
    # kubelet reports the machine, and no device plugin ran, so nvidia-smi was never called.
    assert {"cpu", "memory", "pods", "ephemeral-storage"} <= set(node["status"]["allocatable"]) and node["status"]["capacity"]["pods"] == "110"
    assert lab["gpus"].calls() == []


def test_pausing_a_component_by_label_removes_its_pod_and_restoring_brings_a_new_one(lab):
    before = one_running_pod(lab, "nvidia-dcgm-exporter")
    label(lab, dcgm_exporter=PAUSED)
    until(lambda: pods_of(lab, "nvidia-dcgm-exporter") == [], "the dcgm-exporter pod to go")
    assert status_of(lab, "nvidia-dcgm-exporter")["desiredNumberScheduled"] == 0
    label(lab, dcgm_exporter="true")
    after = one_running_pod(lab, "nvidia-dcgm-exporter")
    assert after["metadata"]["uid"] != before["metadata"]["uid"] and after["metadata"]["name"] != before["metadata"]["name"]


def test_a_cordoned_node_keeps_and_gets_its_daemon_set_pods_and_taints_hold_new_ones(lab):
    admin = lab["admin"]
    before = one_running_pod(lab, "nvidia-dcgm-exporter")
    admin("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"unschedulable": True}})
    try:
        label(lab, mig_manager="true")
        one_running_pod(lab, "nvidia-mig-manager")  # DaemonSet pods tolerate node.kubernetes.io/unschedulable
        assert pods_of(lab, "nvidia-dcgm-exporter")[0]["metadata"]["uid"] == before["metadata"]["uid"]
    finally:
        admin("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"unschedulable": None}})
    # An untolerated NoSchedule taint keeps new DaemonSet pods off and leaves running ones; a NoExecute one removes them.
    admin("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"taints": [{"key": "nvidia.com/mig", "value": "reconfiguring", "effect": "NoSchedule"}]}})
    label(lab, mig_manager=PAUSED)
    until(lambda: pods_of(lab, "nvidia-mig-manager") == [], "the mig-manager pod to go")
    label(lab, mig_manager="true")
    heartbeats(lab)
    assert pods_of(lab, "nvidia-mig-manager") == [] and pods_of(lab, "nvidia-dcgm-exporter")[0]["metadata"]["uid"] == before["metadata"]["uid"]
    admin("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"taints": [{"key": "nvidia.com/mig", "value": "reconfiguring", "effect": "NoExecute"}]}})
    until(lambda: pods_of(lab, "nvidia-dcgm-exporter") == [], "the dcgm-exporter pod to be evicted by the NoExecute taint")
    admin("PATCH", f"/api/v1/nodes/{NODE}", {"spec": {"taints": []}})
    one_running_pod(lab, "nvidia-dcgm-exporter")
    one_running_pod(lab, "nvidia-mig-manager")


def test_a_pod_bound_to_the_node_starts_and_the_node_writes_only_its_own_pods(lab):
    admin, kubelet = lab["admin"], lab["kubelet"]
    bound_pod(lab, "trainer-0")
    bound_pod(lab, "exporter-host", hostNetwork=True)
    pod = until(lambda: running(admin("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/trainer-0")), "trainer-0 running")
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(POD_CIDR) and pod_ready_containers(pod) == [("main", True)]
    host = until(lambda: running(admin("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/exporter-host")), "exporter-host running")
    assert host["status"]["podIP"] == host["status"]["hostIP"]
    # A pod bound elsewhere stays Pending; the node may not delete it nor post its status (NodeRestriction).
    admin("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {"metadata": {"name": "elsewhere"},
                                                           "spec": {"nodeName": "dc1-gpu2", "containers": [{"name": "main", "image": "busybox"}]}})
    status, refused = kubelet.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/elsewhere")
    assert status == 403 and refused["message"] == ('pods "elsewhere" is forbidden: node "dc1-gpu1" can only delete pods with spec.nodeName '
                                                    'set to itself')
    status, refused = kubelet.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/elsewhere/status", {"status": {"phase": "Running"}})
    assert status == 403 and "can only update pod status for pods with spec.nodeName set to itself" in refused["message"]
    status, dummy = kubelet.request("GET", "/api/v1/namespaces/kube-system/secrets")
    assert status == 403
    heartbeats(lab, 1)
    assert admin("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/elsewhere")["status"]["phase"] == "Pending"
    for name in ("trainer-0", "exporter-host", "elsewhere"):
        admin("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


def pod_ready_containers(pod):
    return [(c["name"], c["ready"]) for c in pod["status"]["containerStatuses"]]


# ---------------------------------------------------------------------------------------------------------------
# the device plugin stand-in


def plugin_daemon_set(strategy):
    return daemon_set(PLUGIN_APP, PLUGIN_APP, "device-plugin", containers=[
        {"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
         "env": [{"name": "MIG_STRATEGY", "value": strategy}, {"name": "FAIL_ON_INIT_ERROR", "value": "true"}]}])


def test_the_device_plugin_advertises_whole_gpus(lab):
    label(lab, device_plugin="true")
    lab["admin"]("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", plugin_daemon_set("mixed"))
    resources_become(lab, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "8"})
    assert ["-L"] in lab["gpus"].calls()


def test_a_paused_plugin_leaves_capacity_and_no_allocatable_then_advertises_mig_devices(lab):
    label(lab, device_plugin=PAUSED)
    until(lambda: pods_of(lab, PLUGIN_APP) == [], "the device plugin pod to go")
    resources_become(lab, {"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": "0"})
    lab["gpus"].all_1g_10gb()
    label(lab, device_plugin="true")
    # The restarted plugin registers the MIG devices; kubelet keeps the stopped nvidia.com/gpu endpoint, unhealthy.
    resources_become(lab, {"nvidia.com/gpu": "8", "nvidia.com/mig-1g.10gb": "56"}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "56"})


def test_a_template_change_replaces_the_plugin_pod_and_the_single_strategy_counts_mig_devices_as_gpus(lab):
    admin = lab["admin"]
    before = one_running_pod(lab, PLUGIN_APP)
    admin("PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{PLUGIN_APP}",
          [{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": "single"}], "application/json-patch+json")
    resources_become(lab, {"nvidia.com/gpu": "56", "nvidia.com/mig-1g.10gb": "56"}, {"nvidia.com/gpu": "56", "nvidia.com/mig-1g.10gb": "0"})
    after = one_running_pod(lab, PLUGIN_APP)
    assert after["metadata"]["uid"] != before["metadata"]["uid"] and after["metadata"]["labels"]["pod-template-generation"] == "2"
    until(lambda: status_of(lab, PLUGIN_APP).get("updatedNumberScheduled") == 1, "the DaemonSet to count its updated pod")


def test_a_plugin_that_cannot_reach_the_driver_advertises_nothing_and_recovers(lab):
    gpus, log = lab["gpus"], lab["node"].root / "var/log/kubelet.log"
    label(lab, device_plugin=PAUSED)
    until(lambda: pods_of(lab, PLUGIN_APP) == [], "the device plugin pod to go")
    state = json.loads(gpus.state_path.read_text())
    gpus.write_state(dict(state, driver_loaded=False))
    label(lab, device_plugin="true")
    one_running_pod(lab, PLUGIN_APP)
    heartbeats(lab)
    assert node_resources(lab)[1] == {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "0"}
    failures = [line for line in log.read_text().splitlines() if "failed to initialize NVML" in line]
    assert len(failures) == 1 and "exited 9: NVIDIA-SMI has failed" in failures[0]  # once, not at every retry
    gpus.write_state(dict(state, driver_loaded=True))
    resources_become(lab, {"nvidia.com/gpu": "56", "nvidia.com/mig-1g.10gb": "56"}, {"nvidia.com/gpu": "56", "nvidia.com/mig-1g.10gb": "0"})


def test_a_media_extension_instance_is_advertised_under_its_own_resource(lab):
    """The device plugin v0.20.0 (GPU Operator v26.7.0) names the resource of 1g.10gb+me nvidia.com/mig-1g.10gb.me
    (k8s-device-plugin internal/rm/rm.go, api/config/v1/resources.go): GPU 0 gets one +me instance (profile 20) beside six 1g.10gb."""
    admin, gpus = lab["admin"], lab["gpus"]
    label(lab, device_plugin=PAUSED)
    until(lambda: pods_of(lab, PLUGIN_APP) == [], "the device plugin pod to go")
    state = json.loads(gpus.state_path.read_text())
    instances = state["gpus"][0]["gpu_instances"]
    instances[0] = dict(instances[0], profile_id=20)
    gpus.write_state(state)
    admin("PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{PLUGIN_APP}",
          [{"op": "replace", "path": "/spec/template/spec/containers/0/env/0/value", "value": "mixed"}], "application/json-patch+json")
    label(lab, device_plugin="true")
    resources_become(lab, {"nvidia.com/gpu": "56", "nvidia.com/mig-1g.10gb": "55", "nvidia.com/mig-1g.10gb.me": "1"},
                     {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "55", "nvidia.com/mig-1g.10gb.me": "1"})


# ---------------------------------------------------------------------------------------------------------------
# the double's functions, in process


def gpu(mig=False, *devices):
    return {"index": 0, "name": H100, "mig": mig, "devices": list(devices)}


@pytest.mark.parametrize("gpus, strategy, expected", [
    pytest.param([gpu(), gpu()], "none", {"nvidia.com/gpu": 2}, id="none-whole"),
    pytest.param([gpu(True, "1g.10gb", "1g.10gb"), gpu(True)], "none", {"nvidia.com/gpu": 2}, id="none-ignores-mig"),
    pytest.param([gpu(), gpu()], "single", {"nvidia.com/gpu": 2}, id="single-whole"),
    pytest.param([gpu(True, "1g.10gb", "1g.10gb"), gpu(True, "1g.10gb")], "single", {"nvidia.com/gpu": 3}, id="single-mig"),
    pytest.param([gpu(True, "1g.10gb"), gpu()], "single", "all devices on the node must be configured with the same migEnabled value",
                 id="single-mixture"),
    pytest.param([gpu(True, "1g.10gb", "2g.20gb")], "single", "more than one MIG device type present on node", id="single-two-profiles"),
    pytest.param([gpu(True, "3g.40gb", "1g.10gb", "1g.10gb"), gpu()], "mixed",
                 {"nvidia.com/gpu": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 2}, id="mixed"),
    # k8s-device-plugin v0.20.0: internal/rm/rm.go writes '+' as '.'; api/config/v1/resources.go matches whole profiles.
    pytest.param([gpu(True, "4g.20gb", "1g.5gb+me", "1g.5gb", "1g.5gb")], "mixed",
                 {"nvidia.com/mig-4g.20gb": 1, "nvidia.com/mig-1g.5gb.me": 1, "nvidia.com/mig-1g.5gb": 2}, id="mixed-media-profile-of-its-own"),
    pytest.param([gpu(True, "4g.20gb", "1c.2g.10gb")], "mixed", "error building device map from config.resources: error building MIG "
                 "device map: MIG profile '1c.2g.10gb' does not match any resource patterns", id="mixed-compute-instance-profile"),
    pytest.param([gpu(True, "1g.10gb"), gpu(True)], "mixed", "device 0 has an invalid MIG configuration", id="mixed-empty-mig-gpu"),
    pytest.param([gpu(True)], "single", "device 0 has an invalid MIG configuration", id="single-empty-mig-gpu"),
    pytest.param([gpu()], "MIXED", "invalid --mig-strategy option: MIXED", id="unknown-strategy"),
])
def test_the_mig_strategies_register_what_the_plugin_registers(gpus, strategy, expected):
    if isinstance(expected, dict):
        assert device_plugin.plugin_resources(gpus, strategy) == expected
    else:
        with pytest.raises(device_plugin.PluginError, match=re.escape(expected)):
            device_plugin.plugin_resources(gpus, strategy)


def test_the_listing_is_read_as_nvml_shows_it():
    listing = ("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-9e4aeb94-01c0-5173-4811-4ca60f77b3a9)\n"
               "  MIG 4g.20gb     Device  0: (UUID: MIG-c42101f0-a1fa-5b68-8908-7c5c887f28bd)\n"
               "  MIG 1c.2g.10gb  Device  1: (UUID: MIG-8970491e-16e0-5140-9f8f-d561baa3c186)\n"
               "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-00000000-01c0-5173-4811-4ca60f77b3a9)\n"
               "GPU 2: NVIDIA A100-SXM4-40GB (UUID: GPU-11111111-01c0-5173-4811-4ca60f77b3a9)\n")
    gpus = device_plugin.parse_gpus(listing, "0, Enabled\n1, Enabled\n2, Disabled\n")
    assert [(g["index"], g["mig"], g["devices"]) for g in gpus] == [(0, True, ["4g.20gb", "1c.2g.10gb"]), (1, True, []), (2, False, [])]


def test_the_strategy_comes_from_the_flag_then_the_environment():
    container = {"name": "p", "env": [{"name": "MIG_STRATEGY", "value": "single"}]}
    assert device_plugin.mig_strategy({"spec": {"containers": [container]}}) == "single"
    assert device_plugin.mig_strategy({"spec": {"containers": [dict(container, args=["--mig-strategy=mixed"])]}}) == "mixed"
    assert device_plugin.mig_strategy({"spec": {"containers": [{"name": "p"}]}}) == "none"


def test_a_missing_nvidia_smi_is_a_plugin_error(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(device_plugin.PluginError, match="failed to initialize NVML: nvidia-smi -L: "):
        device_plugin.nvidia_smi("-L")


def test_a_stopped_plugin_keeps_its_capacity_for_the_grace_period_then_zero():
    stopped = {}
    status = {"capacity": {"cpu": "8", "nvidia.com/gpu": "8"}, "allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}}
    assert device_plugin.device_manager_patch(status, {"nvidia.com/gpu": 8}, stopped, 0.0) is None  # nothing differs: nothing written
    assert device_plugin.device_manager_patch(status, {}, stopped, 10.0) == {"status": {"allocatable": {"nvidia.com/gpu": "0"}}}
    status["allocatable"]["nvidia.com/gpu"] = "0"
    assert device_plugin.device_manager_patch(status, {}, stopped, 309.0) is None
    assert device_plugin.device_manager_patch(status, {}, stopped, 310.0) == {"status": {"capacity": {"nvidia.com/gpu": "0"}}}
    assert device_plugin.device_manager_patch(status, {"nvidia.com/mig-1g.10gb": 56}, stopped, 311.0) == {"status": {
        "capacity": {"nvidia.com/mig-1g.10gb": "56", "nvidia.com/gpu": "0"}, "allocatable": {"nvidia.com/mig-1g.10gb": "56"}}}


def node(labels=None, taints=None, name="n1"):
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": {"taints": taints or []}}


def ds_with(**spec):
    return {"metadata": {"name": "d", "namespace": "x", "uid": "u"}, "spec": {"template": {"spec": spec}}}


@pytest.mark.parametrize("the_node, ds, expected", [
    pytest.param(node({"a": "1"}), ds_with(nodeSelector={"a": "1"}), (True, True), id="selector"),
    pytest.param(node({"a": "2"}), ds_with(nodeSelector={"a": "1"}), (False, False), id="selector-mismatch"),
    pytest.param(node({"gpu": "yes"}), ds_with(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["yes"]}, {"key": "paused", "operator": "DoesNotExist"}]}]}}}),
        (True, True), id="affinity"),
    pytest.param(node({"gpu": "no"}), ds_with(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["no"]}]}, {"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}}), (False, False), id="affinity-mismatch"),
    pytest.param(node(taints=[{"key": "k", "effect": "NoSchedule"}]), ds_with(), (False, True), id="noschedule-keeps-running-pods"),
    pytest.param(node(taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]), ds_with(), (False, False), id="noexecute"),
    pytest.param(node(taints=[{"key": "k", "value": "v", "effect": "NoExecute"}]),
                 ds_with(tolerations=[{"key": "k", "operator": "Equal", "value": "v"}]), (True, True), id="tolerated"),
    pytest.param(node(taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]), ds_with(), (True, True), id="cordoned"),
    pytest.param(node(taints=[{"key": "k", "effect": "PreferNoSchedule"}]), ds_with(), (True, True), id="prefer-no-schedule"),
])
def test_the_daemon_set_predicates(the_node, ds, expected):
    assert workloads.node_should_run_daemon_pod(the_node, ds) == expected
