"""kubelet: node registration and status heartbeats, the kube-apiserver static pod on a control-plane node, and after each
heartbeat the node's work (DaemonSet pods, pod status, the device plugin, the mig-manager)."""

import os
import re
import socket
import subprocess
import sys
import time
import urllib.parse

import yaml

from kube_double.apiserver import serve_api
from kube_double.client import Client
from kube_double.core import Fail, node_address, now, parse_flags, path, read_file, rfc3339, swap_on, version
from kube_double.daemonsets import sync_daemon_sets
from kube_double.device_plugin import sync_device_plugin
from kube_double.mig_manager import sync_mig_manager
from kube_double.pods import sync_pod_statuses
from kube_double.static_pods import StaticApiServer
from kube_double.store import ETCD_DATA_DIR, etcd_serving
from kube_double.versions import running_version


# The labels a kubelet may set on its own Node (k8s.io/kubelet pkg/apis/well_known_labels.go): these, the [*.]kubelet.kubernetes.io
# and [*.]node.kubernetes.io namespaces, and any label outside the kubernetes.io and k8s.io namespaces.
KUBELET_LABELS = {"kubernetes.io/hostname", "kubernetes.io/arch", "kubernetes.io/os", "beta.kubernetes.io/arch", "beta.kubernetes.io/os",
                  "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "failure-domain.beta.kubernetes.io/region",
                  "failure-domain.beta.kubernetes.io/zone", "topology.kubernetes.io/region", "topology.kubernetes.io/zone"}


KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")


def kubelet_may_set(name):
    """cmd/kubelet/app/options ValidateKubeletFlags: kubelet exits on other kubernetes.io or k8s.io labels in --node-labels."""
    domain = name.split("/", 1)[0] if "/" in name else ""
    if not any(domain == suffix or domain.endswith("." + suffix) for suffix in ("kubernetes.io", "k8s.io")):
        return True
    return name in KUBELET_LABELS or any(domain == space or domain.endswith("." + space) for space in KUBELET_LABEL_NAMESPACES)


def kubelet(arguments):
    if arguments in (["--version"], ["version"]):
        print(f"Kubernetes v{version()}")
        return 0
    flags, _arguments = parse_flags(arguments, {"--config", "--kubeconfig", "--bootstrap-kubeconfig", "--node-labels",
                                                "--register-with-taints", "--container-runtime-endpoint", "--pod-infra-container-image",
                                                "--node-ip", "--hostname-override"}, set())
    unknown = sorted(name for name in (item.split("=", 1)[0] for item in flags.get("--node-labels", "").split(",") if item)
                     if not kubelet_may_set(name))
    if unknown:
        print(f'E run.go:72] "command failed" err="failed to validate kubelet flags: unknown \'kubernetes.io\' or \'k8s.io\' labels specified with '
              f'--node-labels: [{" ".join(unknown)}]\n--node-labels in the \'kubernetes.io\' namespace must begin with an allowed prefix '
              f'({", ".join(KUBELET_LABEL_NAMESPACES)}) or be in the specifically allowed set ({", ".join(sorted(KUBELET_LABELS))})"', file=sys.stderr)
        return 1
    config_file = flags.get("--config", "/var/lib/kubelet/config.yaml")
    try:
        config = yaml.safe_load(read_file(config_file))
    except FileNotFoundError:
        print(f'E run.go:72] "command failed" err="failed to load kubelet config file, path: {config_file}, error: '
              f'failed to load Kubelet config file {config_file}, error failed to read kubelet config file "{config_file}", '
              f'error: open {config_file}: no such file or directory"', file=sys.stderr)
        return 1
    if config.get("failSwapOn", True) and swap_on():
        print('E run.go:72] "command failed" err="failed to run Kubelet: running with swap on is not supported, please disable swap"', file=sys.stderr)
        return 1
    manifest_file = os.path.join(config.get("staticPodPath", "/etc/kubernetes/manifests"), "kube-apiserver.yaml")
    api_server = None  # the first control plane's: followed at every heartbeat (static_pods)
    if os.path.exists(path(manifest_file)) and etcd_serving():
        api_server = StaticApiServer(manifest_file, serve_api(yaml.safe_load(read_file(manifest_file))))
        print("kubelet: started the static pod kube-apiserver", file=sys.stderr)
    elif os.path.exists(path(manifest_file)) and os.path.isdir(path(ETCD_DATA_DIR)):
        # The first control plane whose etcd does not serve (its data lost, or its manifest moved out for a restore): the API
        # server starts at the heartbeat after etcd comes back.
        api_server = StaticApiServer(manifest_file)
        print("kubelet: not running the static pod kube-apiserver: etcd does not serve on this node", file=sys.stderr)
    elif os.path.exists(path(manifest_file)):
        # A control plane that joined: the lab's cluster has one API server and one etcd, on the first control plane.
        print("kubelet: not running the static pod kube-apiserver: the cluster's API is served by its first control plane (lab double)", file=sys.stderr)
    kubeconfig_file = flags.get("--kubeconfig", "/etc/kubernetes/kubelet.conf")
    name = flags.get("--hostname-override") or socket.gethostname()
    labels = dict(item.split("=", 1) for item in flags.get("--node-labels", "").split(",") if item)
    taints = [parse_taint(item) for item in flags.get("--register-with-taints", "").split(",") if item]
    registered, max_pods, state = False, int(config.get("maxPods", 110)), {}
    while True:
        if api_server is not None:
            api_server.sync()
        try:
            client = Client.from_kubeconfig(kubeconfig_file, timeout=5)
            if not registered:
                registered = register(client, name, labels, taints, flags, max_pods)
            # A strategic merge patch, as kubelet's PatchNodeStatus sends: conditions merge by type, so the conditions others own
            # (node-problem-detector's, the collection's GPUHealthy) stay.
            node = client.call("PATCH", f"/api/v1/nodes/{name}/status", {"status": node_status(name, max_pods)},
                               "application/strategic-merge-patch+json")
            node_work(client, node, state)
        except Fail as error:
            print(f"kubelet: {error}", file=sys.stderr)
        time.sleep(float(os.environ.get("KUBE_DOUBLE_HEARTBEAT", "10")))


def parse_taint(text):
    match = re.fullmatch(r"([^=:]+)(?:=([^:]*))?:(NoSchedule|PreferNoSchedule|NoExecute)", text)
    if not match:
        raise Fail(f'invalid taint spec: "{text}"')
    taint = {"key": match.group(1), "effect": match.group(3)}
    if match.group(2):
        taint["value"] = match.group(2)
    return taint


def machine_resources(max_pods):
    """capacity and allocatable as kubelet reports them from cadvisor's machine info (pkg/kubelet/nodestatus setters.go MachineInfo,
    pkg/kubelet/cm node_container_manager GetNodeAllocatableReservation): cpu, memory (MemTotal), pods (maxPods), ephemeral-storage
    (the filesystem of /var/lib/kubelet), huge pages 0; allocatable less the default hard eviction thresholds
    (memory.available<100Mi, nodefs.available<10%), with no kube-reserved or system-reserved."""
    memory_kib = 0
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            memory_kib = int(re.search(r"^MemTotal:\s+(\d+) kB", handle.read(), re.MULTILINE).group(1))
    except (OSError, AttributeError):
        pass
    filesystem = os.statvfs(path("/var/lib/kubelet") if os.path.isdir(path("/var/lib/kubelet")) else "/")
    storage = filesystem.f_blocks * filesystem.f_frsize
    capacity = {"cpu": str(os.cpu_count() or 1), "memory": f"{memory_kib}Ki", "pods": str(max_pods), "ephemeral-storage": f"{storage // 1024}Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0"}
    allocatable = dict(capacity, memory=f"{max(memory_kib - 100 * 1024, 0)}Ki", **{"ephemeral-storage": str(storage - (storage + 9) // 10)})
    return capacity, allocatable


def node_status(name, max_pods=110):
    stamp = rfc3339(now())
    network_ready = any(entry.endswith((".conf", ".conflist")) for entry in os.listdir(path("/etc/cni/net.d"))) \
        if os.path.isdir(path("/etc/cni/net.d")) else False
    ready = {"type": "Ready", "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}
    if network_ready:
        ready.update(status="True", reason="KubeletReady", message="kubelet is posting ready status")
    else:
        ready.update(status="False", reason="KubeletNotReady", message="container runtime network not ready: NetworkReady=false "
                     "reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized")
    capacity, allocatable = machine_resources(max_pods)
    return {"conditions": [ready], "addresses": [{"type": "InternalIP", "address": node_address()}, {"type": "Hostname", "address": name}],
            "capacity": capacity, "allocatable": allocatable,
            "nodeInfo": {"kubeletVersion": "v" + running_version(), "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
                         "containerRuntimeVersion": containerd_version(), "osImage": os_image(), "kernelVersion": os.uname().release,
                         "machineID": first_line("/etc/machine-id"), "systemUUID": first_line("/sys/class/dmi/id/product_uuid", "/etc/machine-id"),
                         "bootID": first_line("/proc/sys/kernel/random/boot_id")}}


def first_line(*names):
    """The first line of the first readable file (the machine's IDs, as cadvisor reads them for the Node's nodeInfo)."""
    for name in names:
        try:
            with open(name, encoding="utf-8") as handle:
                return handle.readline().strip()
        except OSError:
            continue
    return ""


def containerd_version():
    try:
        output = subprocess.run(["containerd", "--version"], capture_output=True, text=True, check=False).stdout.split()
        return f"containerd://{output[2].lstrip('v')}" if len(output) > 2 else "containerd://unknown"
    except OSError:
        return "containerd://unknown"


def os_image():
    try:
        with open("/etc/os-release", encoding="utf-8") as handle:
            return re.search(r'^PRETTY_NAME="?([^"\n]*)', handle.read(), re.MULTILINE).group(1)
    except (OSError, AttributeError):
        return "Linux"


def register(client, name, labels, taints, flags, max_pods=110):
    status, _body = client.request("GET", f"/api/v1/nodes/{name}")
    if status == 200:
        return True  # kubelet leaves an existing Node's labels and taints alone, as the real one does
    node = {"metadata": {"name": name, "labels": {"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
                                                  "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name,
                                                  "kubernetes.io/os": "linux", **labels},
                         "annotations": {"kubeadm.alpha.kubernetes.io/cri-socket": flags.get("--container-runtime-endpoint",
                                                                                             "unix:///var/run/containerd/containerd.sock"),
                                         "node.alpha.kubernetes.io/ttl": "0",
                                         "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
            "spec": {"taints": taints} if taints else {}, "status": node_status(name, max_pods)}
    client.call("POST", "/api/v1/nodes", node)
    print(f'kubelet: "Successfully registered node" node="{name}"', file=sys.stderr)
    return True


def node_work(client, node, state):
    """After the status heartbeat: list this node's pods (fieldSelector spec.nodeName) and the DaemonSets once, then the DaemonSet
    controller's part, the pod statuses, the device plugin; each writes only what differs. A failing part is logged and tried
    again at the next heartbeat, without stopping the others."""
    name = node["metadata"]["name"]
    pods = client.call("GET", "/api/v1/pods?" + urllib.parse.urlencode({"fieldSelector": f"spec.nodeName={name}"}))["items"]
    for part, run in (("daemonset controller", lambda pods: sync_daemon_sets(client, node, client.call("GET", "/apis/apps/v1/daemonsets")["items"], pods)),
                      ("pod status", lambda pods: sync_pod_statuses(client, node, pods, state)),
                      ("device plugin", lambda pods: sync_device_plugin(client, node, pods, state) or pods),
                      ("mig-manager", lambda pods: sync_mig_manager(client, node, pods, state) or pods)):
        try:
            pods = run(pods)
        except Fail as error:
            print(f"kubelet: {part}: {error}", file=sys.stderr)
