"""The serving workload of tests/e2e/upgrade_kubernetes_e2e.sh, and what watches it during the upgrade.

The lab's API runs no controller-manager and no scheduler (lab/doubles/kube/README.md): this script plays the ReplicaSet
controller and the scheduler for the workload's ReplicaSet (a pod evicted by a drain is replaced on a schedulable Ready worker,
the one with the fewest of its pods), and samples every second how many of its pods are Ready (the PodDisruptionBudget's
minAvailable must hold at every sample) and when each node is cordoned and uncordoned. Real kubectl, through argv.

    serving.py start KUBECTL... -- NAMESPACE REPLICASET          create the pods, one per worker
    serving.py watch OUT KUBECTL... -- NAMESPACE REPLICASET      run until killed, writing OUT (JSON) every sample
"""

import json
import subprocess
import sys
import time


def kubectl(command, *arguments, stdin=None):
    result = subprocess.run([*command, *arguments], capture_output=True, text=True, check=False, input=stdin, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(result.stderr.strip())
    return result.stdout


def read(command, *arguments):
    return json.loads(kubectl(command, *arguments, "-o", "json"))


def workers(nodes):
    return [node for node in nodes if "node-role.kubernetes.io/control-plane" not in node["metadata"].get("labels", {})]


def node_ready(node):
    # As the scheduler's stand-in: a node whose kubelet does not post Ready True gets no pod (the lab's e2e leaves Nodes of
    # removed containers behind, Unknown, as a site has nodes down).
    conditions = node.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def ready(pod):
    conditions = pod.get("status", {}).get("conditions", [])
    return not pod["metadata"].get("deletionTimestamp") and any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def create_pod(command, replicaset, node_name, index):
    template = replicaset["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": f"{replicaset['metadata']['name']}-{index}-{int(time.time())}", "namespace": replicaset["metadata"]["namespace"],
                        "labels": template["metadata"]["labels"],
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replicaset["metadata"]["name"],
                                             "uid": replicaset["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]},
           "spec": dict(template["spec"], nodeName=node_name)}
    kubectl(command, "create", "-f", "-", stdin=json.dumps(pod))


def reconcile(command, namespace, name, state):
    """One pass of the ReplicaSet controller and the scheduler for the workload."""
    replicaset = read(command, "get", "replicaset", "-n", namespace, name)
    selector = ",".join(f"{key}={value}" for key, value in replicaset["spec"]["selector"]["matchLabels"].items())
    pods = [pod for pod in read(command, "get", "pods", "-n", namespace, "-l", selector)["items"] if not pod["metadata"].get("deletionTimestamp")]
    nodes = read(command, "get", "nodes")["items"]
    for missing in range(replicaset["spec"]["replicas"] - len(pods)):
        schedulable = [node["metadata"]["name"] for node in workers(nodes)
                       if not node.get("spec", {}).get("unschedulable") and node_ready(node)]
        if not schedulable:
            break
        counts = {node: sum(1 for pod in pods if pod["spec"].get("nodeName") == node) for node in schedulable}
        target = min(schedulable, key=lambda node: (counts[node], node))
        create_pod(command, replicaset, target, state["created"] + missing)
        pods.append({"spec": {"nodeName": target}, "metadata": {}})
        state["created"] += 1
    return pods, nodes


def main():
    mode, rest = sys.argv[1], sys.argv[2:]
    out = rest.pop(0) if mode == "watch" else None
    split = rest.index("--")
    command, (namespace, name) = rest[:split], rest[split + 1:]
    state = {"created": 0}
    if mode == "start":
        # The workers turn Ready once their kubelets see the CNI configuration just written: the replicas are placed when
        # there are as many Ready workers as replicas, one on each (two replicas on two nodes).
        wanted = read(command, "get", "replicaset", "-n", namespace, name)["spec"]["replicas"]
        deadline = time.time() + 120
        while sum(1 for node in workers(read(command, "get", "nodes")["items"]) if node_ready(node)) < wanted:
            if time.time() > deadline:
                print(f"fewer than {wanted} Ready workers after 120 s", file=sys.stderr)
                return 1
            time.sleep(1)
        reconcile(command, namespace, name, state)
        return 0
    record = {"samples": 0, "min_ready": None, "errors": 0, "cordoned": {}, "uncordoned": {}, "cordon_seconds": {}}
    while True:
        try:
            pods, nodes = reconcile(command, namespace, name, state)  # a pod it just created is not Ready yet
        except (RuntimeError, ValueError, subprocess.TimeoutExpired):
            record["errors"] += 1  # the API restarts with the first control plane's kubelet
            time.sleep(1)
            continue
        now = time.time()
        count = sum(1 for pod in pods if ready(pod))
        record["samples"] += 1
        record["min_ready"] = count if record["min_ready"] is None else min(record["min_ready"], count)
        for node in nodes:
            node_name, cordoned = node["metadata"]["name"], bool(node.get("spec", {}).get("unschedulable"))
            if cordoned and node_name not in record["cordoned"]:
                record["cordoned"][node_name] = now
            if not cordoned and node_name in record["cordoned"] and node_name not in record["uncordoned"]:
                record["uncordoned"][node_name] = now
                record["cordon_seconds"][node_name] = round(now - record["cordoned"][node_name])
        with open(out + ".new", "w", encoding="utf-8") as handle:
            json.dump(record, handle)
        subprocess.run(["mv", out + ".new", out], check=True)
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
