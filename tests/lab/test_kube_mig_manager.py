"""Tests of the GPU Operator's mig-manager as the kubelet double plays it (lab/doubles/kube/README.md, "The GPU Operator's
mig-manager"), and of the admission and aggregation kinds the double's API stores.

One control plane without taints, made with `kubeadm init` as in test_kube_kubelet_gpu.py, is the GPU node: its kubelet beats
every 0.3 s and finds the nvidia-smi double (two GPUs, state in a file the tests rewrite) on its PATH. The GPU Operator's
objects are those of its assets (assets/state-mig-manager of NVIDIA/gpu-operator: the mig-manager DaemonSet and the
default-mig-parted-config ConfigMap, trimmed), with the operands it pauses. The tests run in order on that node, as a site's
MIG changes follow each other; what they check is the state the mig-manager leaves: the Node's labels, the pods, the GPUs as
nvidia-smi shows them, the Node's resources, the nvidia-smi double's call log and kubelet's log. The double's mig-parted
functions (config parsing, device filters, assertions, orderings) are tested in process at the end.
"""

import json
import os
import pathlib
import subprocess
import time

import pytest
import yaml
from test_kube_doubles import PYTHON, Node, import_double
from test_kube_kubelet_gpu import NVIDIA_SMI, Api, gpu_control_plane, until
from test_kube_kubelet_gpu import Gpus as NodeGpus

mig_manager = import_double("mig_manager")
mig_parted = import_double("mig_parted")

REPO = pathlib.Path(__file__).resolve().parents[2]
KUBECTL = REPO / ".build" / "bin" / "kubectl"
NODE = "dc1-gpu7"
NAMESPACE = "gpu-operator"
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"
DEPLOY = "nvidia.com/gpu.deploy."
CONFIG, STATE = "nvidia.com/mig.config", "nvidia.com/mig.config.state"
PAUSED = "paused-for-mig-change"
PLUGIN, GFD, EXPORTER, VALIDATOR, MANAGER = ("nvidia-device-plugin-daemonset", "gpu-feature-discovery", "nvidia-dcgm-exporter",
                                             "nvidia-operator-validator", "nvidia-mig-manager")

# Layouts of the operator's default-mig-parted-config (assets/state-mig-manager/0400_configmap.yaml), as the operator ships them.
MIG_PARTED_CONFIG = """\
version: v1
mig-configs:
  all-disabled:
    - devices: all
      mig-enabled: false
  all-1g.5gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "1g.5gb": 7
  all-3g.40gb:
    - devices: all
      mig-enabled: true
      mig-devices:
        "3g.40gb": 2
  all-1g.10gb:
    - device-filter: ["0x233010DE", "0x233110DE", "0x232210DE", "0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE", "0x232410DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 7
    - device-filter: ["0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"]
      devices: all
      mig-enabled: true
      mig-devices:
        "1g.10gb": 4
"""


class Gpus(NodeGpus):
    """The nvidia-smi double's inputs for the node: a board of two GPUs, a state file the tests rewrite, a call log."""

    def __init__(self, base):
        super().__init__(base, count=2, seed=NODE)

    def edit_state(self, change):
        state = json.loads(self.state_path.read_text())
        change(state)
        self.write_state(state)

    def smi(self, *arguments):
        """What nvidia-smi shows now (the test's own calls stay out of the call log)."""
        return subprocess.run([PYTHON, str(NVIDIA_SMI), *arguments], env=dict(os.environ, **self.environment(call_log=False)),
                              capture_output=True, text=True, check=True, timeout=30).stdout

    def mig_devices(self):
        """{GPU index: [MIG device profile, …]} from nvidia-smi -L."""
        devices, index = {}, None
        for line in self.smi("-L").splitlines():
            if line.startswith("GPU "):
                index = int(line.split()[1].rstrip(":"))
                devices[index] = []
            elif line.strip().startswith("MIG "):
                devices[index].append(line.split()[1])
        return devices

    def modes(self):
        rows = self.smi("--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader").splitlines()
        return [tuple(field.strip() for field in row.split(",")[1:]) for row in rows]

    def calls(self):
        return [json.loads(line) for line in self.call_log.read_text().splitlines()] if self.call_log.exists() else []

    def mutating_since(self, mark):
        return [(call["argv"], call["rc"]) for call in self.calls()[mark:] if call["mutating"]]


def daemon_set(name, app, component, containers=None, **spec):
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"nodeSelector": {DEPLOY + component: "true"}, "tolerations": [{"operator": "Exists"}], **spec,
                                           "containers": containers or [{"name": name, "image": f"nvcr.io/nvidia/{name}:v1"}]}}}}


def mig_manager_daemon_set():
    """assets/state-mig-manager/0600_daemonset.yaml as the operator fills it for a custom config (CONFIG_FILE)."""
    return daemon_set(MANAGER, MANAGER, "mig-manager", serviceAccountName=MANAGER, hostPID=True, containers=[{
        "name": MANAGER, "image": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0", "command": ["/bin/sh", "-c"],
        "args": ["/bin/entrypoint.sh"],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                {"name": "CONFIG_FILE", "value": "/mig-parted-config/config.yaml"},
                {"name": "WITH_REBOOT", "value": "false"},
                {"name": "GPU_CLIENTS_FILE", "value": "/gpu-clients/clients.yaml"},
                {"name": "DEFAULT_GPU_CLIENTS_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}],
        "volumeMounts": [{"name": "mig-parted-config", "mountPath": "/mig-parted-config"}, {"name": "host-root", "mountPath": "/host"}]}],
        volumes=[{"name": "mig-parted-config", "configMap": {"name": "default-mig-parted-config"}},
                 {"name": "host-root", "hostPath": {"path": "/"}}])


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    base = tmp_path_factory.mktemp("kubemig")
    gpus = Gpus(base)
    node = Node(base, NODE)
    try:
        admin = gpu_control_plane(node, gpus, NAMESPACE)
        admin("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
              {"metadata": {"name": "default-mig-parted-config"}, "data": {"config.yaml": MIG_PARTED_CONFIG}})
        # The operator's labels on a GPU node; dcgm forced off (the mig-manager leaves a "false" alone), nvsm absent.
        admin("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {
            DEPLOY + "device-plugin": "true", DEPLOY + "gpu-feature-discovery": "true", DEPLOY + "dcgm-exporter": "true",
            DEPLOY + "dcgm": "false", DEPLOY + "operator-validator": "true", DEPLOY + "mig-manager": "true"}}})
        for ds in (daemon_set(PLUGIN, PLUGIN, "device-plugin", containers=[{"name": "nvidia-device-plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.17.0",
                                                                            "env": [{"name": "MIG_STRATEGY", "value": "mixed"}]}]),
                   daemon_set(GFD, GFD, "gpu-feature-discovery"), daemon_set(EXPORTER, EXPORTER, "dcgm-exporter"),
                   daemon_set(VALIDATOR, VALIDATOR, "operator-validator"), mig_manager_daemon_set()):
            admin("POST", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", ds)
        made = {"node": node, "gpus": gpus, "admin": admin, "kubelet": Api(node, "etc/kubernetes/kubelet.conf"), "base": base}
        for app in (PLUGIN, GFD, EXPORTER, VALIDATOR, MANAGER):
            one_running_pod(made, app)
        until(lambda: node_resources(made)[0] == {"nvidia.com/gpu": "2"}, "the device plugin to advertise the two GPUs")
        yield made
    finally:
        node.stop()


def pods_of(lab, app):
    items = lab["admin"]("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?labelSelector=app%3D{app}")["items"]
    return [pod for pod in items if pod["spec"].get("nodeName") == NODE]


def one_running_pod(lab, app, other_than=None):
    def one_running():
        pods = pods_of(lab, app)
        return len(pods) == 1 and pods[0]["status"].get("phase") == "Running" and pods[0]["metadata"]["uid"] != other_than and pods[0]

    return until(one_running, f"one running {app} pod", timeout=15)


def labels(lab):
    return lab["admin"]("GET", f"/api/v1/nodes/{NODE}")["metadata"].get("labels") or {}


def deploy_labels(lab):
    return {key[len(DEPLOY):]: value for key, value in labels(lab).items() if key.startswith(DEPLOY) and key[len(DEPLOY):] not in (
        "operator-validator", "mig-manager")}


def set_labels(lab, **values):
    lab["admin"]("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": values}})


def node_resources(lab):
    status = lab["admin"]("GET", f"/api/v1/nodes/{NODE}")["status"]
    return tuple({k: v for k, v in status.get(field, {}).items() if k.startswith("nvidia.com/")} for field in ("capacity", "allocatable"))


def kubelet_log(lab, containing):
    return [line for line in (lab["node"].root / "var/log/kubelet.log").read_text().splitlines() if "kubelet: mig-manager" in line and containing in line]


def reported(lab, containing, before):
    """Wait for a new kubelet log line of the mig-manager that contains the text; the line."""
    return until(lambda: len(kubelet_log(lab, containing)) > before and kubelet_log(lab, containing)[-1], f"the mig-manager to log {containing!r}",
                 timeout=20)


def heartbeats(lab, count=2):
    """Let `count` heartbeats pass that started after this call: each marker pod is started by one."""
    for index in range(count):
        name = f"marker-{time.monotonic_ns()}-{index}"
        lab["admin"]("POST", f"/api/v1/namespaces/{NAMESPACE}/pods",
                     {"metadata": {"name": name}, "spec": {"nodeName": NODE, "containers": [{"name": "main", "image": "busybox:1.36"}]}})
        until(lambda: lab["admin"]("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")["status"].get("phase") == "Running", f"pod {name} running")
        lab["admin"]("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")


def new_mig_manager(lab):
    """Replace the mig-manager's pod (a new process: it has read no label yet); the new pod."""
    old = one_running_pod(lab, MANAGER)
    lab["admin"]("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{old['metadata']['name']}")
    return one_running_pod(lab, MANAGER, other_than=old["metadata"]["uid"])


def manager_entry(lab):
    """The Node's managedFields entry of the mig-manager's writes."""
    node = lab["admin"]("GET", f"/api/v1/nodes/{NODE}")
    return next((entry for entry in node["metadata"]["managedFields"] if entry["manager"] == "nvidia-mig-manager"), None)


# ---------------------------------------------------------------------------------------------------------------
# the mig-manager on the node


def test_the_node_writes_only_the_mig_manager_labels_and_reads_only_the_config_maps_its_pods_use(lab):
    kubelet = lab["kubelet"]
    status, refused = kubelet.request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {"nvidia.com/gpu.product": "H100"}}})
    assert status == 403 and refused["message"] == f'nodes "{NODE}" is forbidden: node "{NODE}" may only update its status'
    status, refused = kubelet.request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {STATE: "pending"}}, "spec": {"unschedulable": True}})
    assert status == 403
    status, dummy = kubelet.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/default-mig-parted-config")
    assert status == 200
    lab["admin"]("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps", {"metadata": {"name": "unreferenced"}, "data": {}})
    status, refused = kubelet.request("GET", f"/api/v1/namespaces/{NAMESPACE}/configmaps/unreferenced")
    assert status == 403 and 'cannot get resource "configmaps"' in refused["message"]
    # Without a mig-manager pod on the node, the node may not write the mig-manager's labels either.
    set_labels(lab, **{DEPLOY + "mig-manager": "false"})
    until(lambda: pods_of(lab, MANAGER) == [], "the mig-manager pod to go")
    status, refused = kubelet.request("PATCH", f"/api/v1/nodes/{NODE}", {"metadata": {"labels": {STATE: "success"}}})
    assert status == 403 and STATE not in labels(lab)
    set_labels(lab, **{DEPLOY + "mig-manager": "true"})
    one_running_pod(lab, MANAGER)


def test_a_new_layout_pauses_the_components_changes_the_gpus_and_restores_them(lab):
    admin, gpus = lab["admin"], lab["gpus"]
    plugin, validator = one_running_pod(lab, PLUGIN), one_running_pod(lab, VALIDATOR)
    # A dcgm pod that no DaemonSet removes holds the mig-manager in its wait (it waits for app=nvidia-dcgm pods to go).
    admin("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {"metadata": {"name": "dcgm-by-hand", "labels": {"app": "nvidia-dcgm"}},
                                                           "spec": {"nodeName": NODE, "containers": [{"name": "dcgm", "image": "dcgm"}]}})
    mark = len(gpus.calls())
    set_labels(lab, **{CONFIG: "all-1g.10gb"})

    until(lambda: labels(lab).get(STATE) == "pending" and deploy_labels(lab)["device-plugin"] == PAUSED, "pending, and the components paused")
    assert deploy_labels(lab) == {"device-plugin": PAUSED, "gpu-feature-discovery": PAUSED, "dcgm-exporter": PAUSED, "dcgm": "false", "nvsm": PAUSED}
    until(lambda: not pods_of(lab, PLUGIN) and not pods_of(lab, GFD) and not pods_of(lab, EXPORTER), "the paused components' pods to go")
    heartbeats(lab)
    assert labels(lab)[STATE] == "pending" and gpus.mutating_since(mark) == [] and gpus.modes() == [("Disabled", "Disabled")] * 2

    admin("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/dcgm-by-hand")
    until(lambda: labels(lab).get(STATE) == "success", "the state success")
    # Restored, as maybeSetTrue does: a label that was absent (nvsm) comes back true, one that was false stays false.
    assert deploy_labels(lab) == {"device-plugin": "true", "gpu-feature-discovery": "true", "dcgm-exporter": "true", "dcgm": "false", "nvsm": "true"}
    assert labels(lab)[CONFIG] == "all-1g.10gb"
    assert gpus.modes() == [("Enabled", "Enabled")] * 2 and gpus.mig_devices() == {0: ["1g.10gb"] * 7, 1: ["1g.10gb"] * 7}
    assert gpus.mutating_since(mark) == [(["-i", "0", "-mig", "1"], 0), (["-i", "1", "-mig", "1"], 0),
                                         (["mig", "-cgi", ",".join(["1g.10gb"] * 7), "-C", "-i", "0"], 0),
                                         (["mig", "-cgi", ",".join(["1g.10gb"] * 7), "-C", "-i", "1"], 0)]
    entry = manager_entry(lab)
    assert f"f:{STATE}" in entry["fieldsV1"]["f:metadata"]["f:labels"] and entry["operation"] == "Update"
    # The operands come back as new pods; the validator was restarted; the new plugin advertises the MIG devices.
    assert one_running_pod(lab, PLUGIN)["metadata"]["uid"] != plugin["metadata"]["uid"]
    assert one_running_pod(lab, VALIDATOR, other_than=validator["metadata"]["uid"])
    one_running_pod(lab, GFD)
    until(lambda: node_resources(lab) == ({"nvidia.com/gpu": "2", "nvidia.com/mig-1g.10gb": "14"}, {"nvidia.com/gpu": "0", "nvidia.com/mig-1g.10gb": "14"}),
          "the device plugin to advertise 14 MIG devices")
    assert kubelet_log(lab, "successfully updated to MIG config: all-1g.10gb")


def test_a_layout_already_in_place_changes_nothing(lab):
    gpus = lab["gpus"]
    mark, before, entry, plugin = len(gpus.calls()), labels(lab), manager_entry(lab), one_running_pod(lab, PLUGIN)
    set_labels(lab, **{CONFIG: "all-1g.10gb"})  # the same value: no change of the label, nothing to do
    heartbeats(lab)
    # A new mig-manager process (or a restarted kubelet) reads the label once: mig-parted's assert passes, nothing is applied.
    already = len(kubelet_log(lab, "already applied"))
    pod = new_mig_manager(lab)
    assert pod["metadata"]["name"] in reported(lab, "already applied", already)
    heartbeats(lab, 1)
    assert gpus.mutating_since(mark) == [] and labels(lab) == before and manager_entry(lab) == entry
    assert one_running_pod(lab, PLUGIN)["metadata"]["uid"] == plugin["metadata"]["uid"]


def test_a_layout_missing_from_the_config_fails_and_is_not_retried(lab):
    gpus = lab["gpus"]
    mark, before = len(gpus.calls()), deploy_labels(lab)
    set_labels(lab, **{CONFIG: "all-7g.99gb"})
    line = reported(lab, "failed to validate MIG configuration", 0)
    pod = one_running_pod(lab, MANAGER)
    assert line == (f"kubelet: mig-manager {NAMESPACE}/{pod['metadata']['name']} (lab double): failed to validate MIG configuration: "
                    f"error selecting MIG config: selected mig-config not present: all-7g.99gb")
    assert labels(lab)[STATE] == "failed" and deploy_labels(lab) == before and gpus.mutating_since(mark) == []
    heartbeats(lab)
    assert len(kubelet_log(lab, "failed to validate MIG configuration")) == 1  # the label did not change: no new attempt


def knob(count):
    def change(state):
        state["gpus"][1]["failing_gpu_instance_creations"] = count
    return change


def test_a_failing_gpu_instance_creation_fails_and_restores_the_components(lab):
    gpus = lab["gpus"]
    new_mig_manager(lab)  # a process that has not restarted the components yet (see the next test)
    gpus.edit_state(knob(99))
    mark, failures = len(gpus.calls()), len(kubelet_log(lab, "failed to apply MIG configuration"))
    set_labels(lab, **{CONFIG: "all-3g.40gb"})
    line = reported(lab, "failed to apply MIG configuration", failures)
    assert "Unable to create a GPU instance on GPU  1 using profile 3g.40gb: Unknown Error" in line and "all orderings failed" in line
    assert labels(lab)[STATE] == "failed"
    assert deploy_labels(lab) == {"device-plugin": "true", "gpu-feature-discovery": "true", "dcgm-exporter": "true", "dcgm": "false", "nvsm": "true"}
    # GPU 0 got its layout; GPU 1 failed and was cleared, as SetMigConfig leaves a GPU whose orderings all failed.
    assert gpus.mig_devices() == {0: ["3g.40gb", "3g.40gb"], 1: []} and gpus.modes() == [("Enabled", "Enabled")] * 2
    calls = gpus.mutating_since(mark)
    assert calls[-3:] == [(["mig", "-cgi", "3g.40gb,3g.40gb", "-C", "-i", "1"], 255), (["mig", "-dci", "-i", "1"], 6), (["mig", "-dgi", "-i", "1"], 6)]
    assert (["mig", "-cgi", "3g.40gb,3g.40gb", "-C", "-i", "0"], 0) in calls
    one_running_pod(lab, PLUGIN)


def test_after_a_success_the_same_mig_manager_leaves_the_components_paused_when_it_fails(lab):
    """pkg/mig/reconfigure NoRestartK8sDaemonsetsOnExit is a package variable that a success sets and nothing resets (v0.15.0)."""
    gpus = lab["gpus"]
    gpus.edit_state(knob(0))
    successes = len(kubelet_log(lab, "successfully updated to MIG config: all-1g.10gb"))
    set_labels(lab, **{CONFIG: "all-1g.10gb"})
    reported(lab, "successfully updated to MIG config: all-1g.10gb", successes)
    assert gpus.mig_devices() == {0: ["1g.10gb"] * 7, 1: ["1g.10gb"] * 7}
    gpus.edit_state(knob(99))
    failures = len(kubelet_log(lab, "failed to apply MIG configuration"))
    set_labels(lab, **{CONFIG: "all-3g.40gb"})
    reported(lab, "failed to apply MIG configuration", failures)
    assert labels(lab)[STATE] == "failed" and deploy_labels(lab)["device-plugin"] == PAUSED and not pods_of(lab, PLUGIN)
    gpus.edit_state(knob(0))
    set_labels(lab, **{DEPLOY + "device-plugin": "true", DEPLOY + "gpu-feature-discovery": "true", DEPLOY + "dcgm-exporter": "true",
                       DEPLOY + "nvsm": "true"})


def test_an_ampere_mode_change_that_needs_a_reset_fails_without_with_reboot(lab):
    gpus = lab["gpus"]
    set_labels(lab, **{CONFIG: None})  # no label: a new mig-manager has nothing to do
    gpus.set_model(A100)
    # Persistence mode keeps the driver attached: the A100s cannot be reset, so MIG mode stays pending.
    gpus.write_state({"gpus": [{"persistence_mode": "Enabled"}, {"persistence_mode": "Enabled"}]})
    new_mig_manager(lab)
    mark, failures = len(gpus.calls()), len(kubelet_log(lab, "failed to apply MIG configuration"))
    set_labels(lab, **{CONFIG: "all-1g.5gb"})
    line = reported(lab, "failed to apply MIG configuration", failures)
    assert "error resetting all GPUs" in line
    assert labels(lab)[STATE] == "failed" and deploy_labels(lab)["device-plugin"] == "true"
    assert gpus.modes() == [("Disabled", "Enabled")] * 2 and gpus.mig_devices() == {0: [], 1: []}
    reset = (["-r", "-i", "00000000:07:00.0,00000000:0F:00.0"], 255)
    # apply --mode-only, then apply: each sets the mode and tries the reset.
    assert gpus.mutating_since(mark) == [(["-i", "0", "-mig", "1"], 0), (["-i", "1", "-mig", "1"], 0), reset] * 2


def test_with_reboot_the_state_is_rebooting_and_a_restarted_node_finishes_the_change(lab):
    admin, gpus = lab["admin"], lab["gpus"]
    old = one_running_pod(lab, MANAGER)
    # The DaemonSet's new template replaces the pod: the new process reads the label (all-1g.5gb, failed) and tries again.
    admin("PATCH", f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{MANAGER}",
          [{"op": "replace", "path": "/spec/template/spec/containers/0/env/2/value", "value": "true"}], "application/json-patch+json")
    one_running_pod(lab, MANAGER, other_than=old["metadata"]["uid"])
    until(lambda: labels(lab).get(STATE) == "rebooting", "the state rebooting", timeout=20)
    assert deploy_labels(lab)["device-plugin"] == PAUSED and gpus.modes() == [("Disabled", "Enabled")] * 2
    # The node reboots (the lab's part): the pending mode becomes current, and a new mig-manager pod finishes the change.
    gpus.edit_state(lambda state: state.update(boots=state.get("boots", 0) + 1))
    new_mig_manager(lab)
    until(lambda: labels(lab).get(STATE) == "success", "the state success", timeout=20)
    assert gpus.modes() == [("Enabled", "Enabled")] * 2 and gpus.mig_devices() == {0: ["1g.5gb"] * 7, 1: ["1g.5gb"] * 7}
    assert deploy_labels(lab) == {"device-plugin": "true", "gpu-feature-discovery": "true", "dcgm-exporter": "true", "dcgm": "false", "nvsm": "true"}


# ---------------------------------------------------------------------------------------------------------------
# webhook configurations and APIServices: stored, never called


WEBHOOK = {"name": "mpod.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
           "clientConfig": {"service": {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/mutate--v1-pod"}},
           "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}
ADMISSION_AND_AGGREGATION = [
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "kueue-mutating-webhook-configuration"},
     "webhooks": [WEBHOOK]},
    {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "kueue-validating-webhook-configuration"},
     "webhooks": [dict(WEBHOOK, name="vpod.kb.io",
                       clientConfig={"service": {"name": "kueue-webhook-service", "namespace": "kueue-system", "path": "/validate--v1-pod"}})]},
    {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1beta1.visibility.kueue.x-k8s.io"},
     "spec": {"group": "visibility.kueue.x-k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
              "insecureSkipTLSVerify": True, "service": {"name": "kueue-visibility-server", "namespace": "kueue-system"}}},
]


def kubectl(lab, *arguments, stdin=None):
    if not KUBECTL.exists():
        pytest.skip(f"the real kubectl is not at {KUBECTL}: run bash tests/tools/fetch_k8s_clients.sh")
    home = lab["base"] / "home"
    home.mkdir(exist_ok=True)
    env = dict(os.environ, KUBECONFIG=str(lab["node"].root / "etc/kubernetes/admin.conf"), HOME=str(home))
    result = subprocess.run([str(KUBECTL), *arguments], env=env, capture_output=True, text=True, timeout=60, check=False, input=stdin)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_webhook_configurations_and_apiservices_are_served_and_applied_server_side(lab):
    assert set(kubectl(lab, "api-resources", "--categories=api-extensions", "-o", "name").split()) >= {
        "mutatingwebhookconfigurations.admissionregistration.k8s.io", "validatingwebhookconfigurations.admissionregistration.k8s.io",
        "apiservices.apiregistration.k8s.io", "customresourcedefinitions.apiextensions.k8s.io"}
    kubectl(lab, "apply", "--server-side", "--field-manager=helm", "-f", "-", stdin=yaml.safe_dump_all(ADMISSION_AND_AGGREGATION))
    mutating = json.loads(kubectl(lab, "get", "mutatingwebhookconfiguration", "kueue-mutating-webhook-configuration", "-o", "json",
                                  "--show-managed-fields"))
    assert mutating["webhooks"] == [WEBHOOK] and mutating["metadata"]["generation"] == 1
    assert [entry["manager"] for entry in mutating["metadata"]["managedFields"]] == ["helm"]
    validating = lab["admin"]("GET", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/kueue-validating-webhook-configuration")
    assert validating["webhooks"][0]["clientConfig"]["service"]["path"] == "/validate--v1-pod"
    service = json.loads(kubectl(lab, "get", "apiservice", "v1beta1.visibility.kueue.x-k8s.io", "-o", "json"))
    assert service["spec"]["service"] == {"name": "kueue-visibility-server", "namespace": "kueue-system"} and service["status"] == {}
    assert "generation" not in service["metadata"]
    # Re-applied with a changed webhook: the generation moves; the same documents again change nothing.
    changed = json.loads(json.dumps(ADMISSION_AND_AGGREGATION))
    changed[0]["webhooks"][0]["failurePolicy"] = "Ignore"
    kubectl(lab, "apply", "--server-side", "--field-manager=helm", "-f", "-", stdin=yaml.safe_dump_all(changed))
    mutating = json.loads(kubectl(lab, "get", "mutatingwebhookconfiguration", "kueue-mutating-webhook-configuration", "-o", "json"))
    assert mutating["webhooks"][0]["failurePolicy"] == "Ignore" and mutating["metadata"]["generation"] == 2
    version = mutating["metadata"]["resourceVersion"]
    kubectl(lab, "apply", "--server-side", "--field-manager=helm", "-f", "-", stdin=yaml.safe_dump_all(changed))
    assert json.loads(kubectl(lab, "get", "mutatingwebhookconfiguration", "kueue-mutating-webhook-configuration", "-o", "json"))[
        "metadata"]["resourceVersion"] == version
    # A local APIService (no service) is Available at once, as the aggregator's registry makes it.
    local = lab["admin"]("PATCH", "/apis/apiregistration.k8s.io/v1/apiservices/v1.lab.onprem.example?fieldManager=lab",
                         {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": {"name": "v1.lab.onprem.example"},
                          "spec": {"group": "lab.onprem.example", "version": "v1", "groupPriorityMinimum": 1000, "versionPriority": 15}},
                         "application/apply-patch+yaml")
    assert [(c["type"], c["status"], c["reason"]) for c in local["status"]["conditions"]] == [("Available", "True", "Local")]
    # Stored, not called: a pod is created although the webhook's service does not exist.
    lab["admin"]("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {"metadata": {"name": "not-admitted-by-a-webhook"},
                                                                  "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    for document in ADMISSION_AND_AGGREGATION:
        kubectl(lab, "delete", document["kind"].lower(), document["metadata"]["name"])
    assert "kueue" not in kubectl(lab, "get", "mutatingwebhookconfigurations,validatingwebhookconfigurations,apiservices", "-o", "name")


# ---------------------------------------------------------------------------------------------------------------
# the double's mig-parted, in process


H100_GPU = {"index": 0, "device": (0x2330, 0x10DE), "subsystem": (0x16C1, 0x10DE), "capable": True, "current": "Enabled", "pending": "Enabled",
            "devices": {}}


@pytest.mark.parametrize("text, message", [
    pytest.param("mig-configs: {a: [{devices: all, mig-enabled: false}]}", "unable to parse with missing 'version' field", id="no-version"),
    pytest.param("version: v2\nmig-configs: {a: [{devices: all, mig-enabled: false}]}", "unknown version: v2", id="version"),
    pytest.param("version: v1\nmig-configs: {}", "at least one entry in 'mig-configs' is required", id="no-configs"),
    pytest.param("version: v1\nmig-configs: {a: []}", "at least one entry in 'a' is required", id="empty-config"),
    pytest.param("version: v1\nmig-configs: {a: [{mig-enabled: false}]}", "missing required field: devices", id="no-devices"),
    pytest.param("version: v1\nmig-configs: {a: [{devices: some, mig-enabled: false}]}", "invalid string input for 'devices': some", id="devices"),
    pytest.param("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true}]}", "missing required field 'mig-devices' when 'mig-enabled' is true",
                 id="no-mig-devices"),
    pytest.param("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, mig-devices: {1g.10gb: 1}}]}",
                 "MIG devices included when 'mig-enabled' is false", id="devices-when-disabled"),
    pytest.param("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {1g.10gb: 0}}]}",
                 "all counts for all MigProfiles are 0", id="all-zero"),
    pytest.param("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: true, mig-devices: {big: 1}}]}", "invalid format for 'big'", id="profile"),
    pytest.param("version: v1\nmig-configs: {a: [{devices: all, mig-enabled: false, extra: 1}]}", "unexpected field: extra", id="extra"),
])
def test_config_files_are_refused_as_mig_parted_refuses_them(text, message):
    with pytest.raises(mig_parted.MigPartedError, match="^error parsing config file: unmarshal error: .*" + message.replace("(", r"\(").replace(")", r"\)")):
        mig_parted.parse_mig_parted_config(text)


def test_the_operator_default_layouts_parse_and_select_by_device_id():
    configs = mig_parted.parse_mig_parted_config(MIG_PARTED_CONFIG)
    entries = mig_parted.select_mig_config(configs, "all-1g.10gb")
    a100 = dict(H100_GPU, index=1, device=(0x20B0, 0x10DE))
    l40s = dict(H100_GPU, index=2, device=(0x26B9, 0x10DE), capable=False, current="[N/A]")
    walked = [(entry["mig-devices"], gpu["index"]) for entry, gpu in mig_parted.walk_mig_config(entries, [H100_GPU, a100, l40s])]
    assert walked == [({"1g.10gb": 7}, 0), ({"1g.10gb": 4}, 1)]
    with pytest.raises(mig_parted.MigPartedError, match="selected mig-config not present: all-2g.20gb"):
        mig_parted.select_mig_config(configs, "all-2g.20gb")
    # A filter with a subsystem id matches that board only; an index list selects GPUs by index.
    entry = {"device-filter": ["0x233010DE:0x16C110DE"], "devices": [0], "mig-enabled": False, "mig-devices": None}
    assert mig_parted.entry_matches(entry, H100_GPU) and not mig_parted.entry_matches(entry, dict(H100_GPU, subsystem=(0x16C2, 0x10DE)))
    assert not mig_parted.entry_matches(entry, dict(H100_GPU, index=1))


def test_the_assertions_follow_mig_parted():
    entries = mig_parted.select_mig_config(mig_parted.parse_mig_parted_config(MIG_PARTED_CONFIG), "all-3g.40gb")
    done = dict(H100_GPU, devices={"3g.40gb": 2})
    assert mig_parted.assert_mig_mode(entries, [done]) is None and mig_parted.assert_mig_config(entries, [done]) is None
    assert mig_parted.assert_mig_config(entries, [dict(done, devices={"3g.40gb": 1, "1g.10gb": 1})]) == "not all GPUs match the specified config"
    assert mig_parted.assert_mig_mode(entries, [dict(done, current="Disabled")]) == "current mode different than mode being asserted"
    # A GPU that no entry selects fails the config assertion, not the mode one.
    only_first = [dict(entries[0], devices=[0])]
    assert mig_parted.assert_mig_mode(only_first, [done, dict(done, index=1, devices={})]) is None
    assert mig_parted.assert_mig_config(only_first, [done, dict(done, index=1, devices={})]) == "not all GPUs match the specified config"


def test_the_orderings_are_those_mig_parted_tries():
    assert mig_parted.flatten_mig_config({"1g.10gb": 2, "3g.40gb": 1, "2g.20gb": 1}) == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert mig_parted.flatten_mig_config({"1c.2g.20gb": 1, "2g.20gb": 1}) == ["2g.20gb", "1c.2g.20gb"]
    assert list(mig_parted.mig_orderings(["1g.10gb"] * 7)) == [["1g.10gb"] * 7]
    assert list(mig_parted.mig_orderings(["3g", "1g", "1g"])) == [["3g", "1g", "1g"], ["1g", "3g", "1g"], ["1g", "1g", "3g"]]
    assert len(list(mig_parted.mig_orderings(["3g", "2g", "1g", "1g"]))) == 12
    assert mig_parted.mig_profile("1c.2g.20gb") == (1, 2, "2g.20gb", "1c.2g.20gb") and mig_parted.mig_profile("1g.10gb+me") == (1, 1, "1g.10gb+me", None)


def test_the_config_comes_from_the_configmap_volume_that_holds_the_file():
    pod = {"metadata": {"name": "m", "namespace": "gpu-operator"}, "spec": {"nodeName": "n", "volumes": [
        {"name": "mig-parted-config", "configMap": {"name": "default-mig-parted-config", "items": [{"key": "config.yaml", "path": "config-default.yaml"}]}},
        {"name": "custom", "configMap": {"name": "custom"}}]}}
    container = {"name": "nvidia-mig-manager", "volumeMounts": [{"name": "mig-parted-config", "mountPath": "/mig-parted-config"},
                                                                {"name": "custom", "mountPath": "/etc/mig/config.yaml", "subPath": "layouts.yaml"}],
                 "env": [{"name": "DEFAULT_CONFIG_FILE", "value": "/mig-parted-config/config-default.yaml"}, {"name": "WITH_REBOOT", "value": "True"},
                         {"name": "DEFAULT_GPU_CLIENTS_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}
    pod["spec"]["containers"] = [container]
    options = mig_manager.mig_manager_options(pod)
    assert (options["config_file"], options["with_reboot"], options["namespace"]) == ("/mig-parted-config/config-default.yaml", True, "gpu-operator")
    assert mig_manager.mig_config_source(pod, container, options["config_file"]) == ("default-mig-parted-config", "config.yaml")
    assert mig_manager.mig_config_source(pod, container, "/etc/mig/config.yaml") == ("custom", "layouts.yaml")
    assert mig_manager.mig_config_source(pod, container, "/elsewhere/config.yaml") is None
    container["env"][1]["value"] = "yes"
    with pytest.raises(mig_manager.MigManagerNotStarted, match="WITH_REBOOT"):
        mig_manager.mig_manager_options(pod)
