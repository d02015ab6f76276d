"""kubelet's pod workers and status manager, without containers: the pods bound to the node reported Running."""

import hashlib
import ipaddress

import yaml

from kube_double.core import Fail, node_address, now, rfc3339


def node_ip(node):
    return next((a["address"] for a in (node.get("status") or {}).get("addresses") or [] if a.get("type") == "InternalIP"), node_address())


def pod_subnet(client, node, state):
    """Where pod addresses come from: the Node's spec.podCIDR, else the cluster's podSubnet (the kubeadm-config ConfigMap, read once),
    else 10.244.0.0/16. No CNI plugin runs: the double only picks an address."""
    if (node.get("spec") or {}).get("podCIDR"):
        return node["spec"]["podCIDR"]
    if "pod_subnet" not in state:
        subnet = "10.244.0.0/16"
        status, config_map = client.request("GET", "/api/v1/namespaces/kube-system/configmaps/kubeadm-config")
        if status == 200:
            try:
                cluster = yaml.safe_load((config_map.get("data") or {}).get("ClusterConfiguration") or "") or {}
                subnet = ((cluster.get("networking") or {}).get("podSubnet") or subnet).split(",")[0]
            except yaml.YAMLError:
                pass
        state["pod_subnet"] = subnet
    return state["pod_subnet"]


def pod_ip(pod, subnet):
    """An address of the subnet chosen by the pod's uid (neither the network's first nor its last)."""
    network = ipaddress.ip_network(subnet, strict=False)
    offset = int(hashlib.sha256(pod["metadata"]["uid"].encode()).hexdigest(), 16) % max(network.num_addresses - 3, 1)
    return str(network.network_address + 2 + offset)


def running_status(pod, host_ip, address, stamp):
    """The status kubelet posts for a pod whose containers all started (pkg/kubelet kubelet_pods.go generateAPIPodStatus, status
    manager): Running, every condition True, one ready running status per container, completed init containers (a sidecar,
    restartPolicy Always, running). Image IDs and container IDs are made up: no container runtime pulls or runs anything."""
    spec = pod.get("spec") or {}

    def container_id(container):
        return "containerd://" + hashlib.sha256(f"{pod['metadata']['uid']}/{container['name']}".encode()).hexdigest()

    def started(container, ready=True):
        return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "containerID": container_id(container),
                "ready": ready, "started": True, "restartCount": 0, "state": {"running": {"startedAt": stamp}}, "lastState": {}}

    def completed(container):
        if container.get("restartPolicy") == "Always":
            return started(container)
        return {"name": container["name"], "image": container.get("image", ""), "imageID": "", "containerID": container_id(container),
                "ready": True, "started": False, "restartCount": 0, "lastState": {},
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": stamp, "finishedAt": stamp,
                                         "containerID": container_id(container)}}}

    status = {"phase": "Running", "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": address, "podIPs": [{"ip": address}],
              "startTime": stamp, "conditions": [{"type": kind, "status": "True", "lastProbeTime": None, "lastTransitionTime": stamp} for kind in (
                  "PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")],
              "containerStatuses": [started(container) for container in spec.get("containers") or []]}
    if spec.get("initContainers"):
        status["initContainerStatuses"] = [completed(container) for container in spec["initContainers"]]
    return status


def sync_pod_statuses(client, node, pods, state):
    """kubelet's pod workers and status manager, without containers: a pod bound to this node that is Pending (or has no phase yet)
    is started at once and its status posted through pods/<name>/status (a strategic merge patch, as the status manager sends).
    Pods already Running, Succeeded or Failed are left alone. Returns the node's pods as they are after it."""
    host_ip, stamp, result = node_ip(node), rfc3339(now()), []
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in (None, "", "Pending") and not pod["metadata"].get("deletionTimestamp"):
            address = host_ip if (pod.get("spec") or {}).get("hostNetwork") else pod_ip(pod, pod_subnet(client, node, state))
            status, answer = client.request("PATCH", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}/status",
                                            {"status": running_status(pod, host_ip, address, stamp)}, "application/strategic-merge-patch+json")
            if status == 404:
                continue  # deleted meanwhile
            if status >= 400:
                raise Fail(f"updating the status of pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: "
                           f"{answer.get('message', answer) if isinstance(answer, dict) else answer}")
            pod = answer
        result.append(pod)
    return result
