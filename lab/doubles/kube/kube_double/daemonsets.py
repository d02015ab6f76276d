"""The DaemonSet controller's work for one node, done by that node's kubelet after each heartbeat."""

import json
import sys

from kube_double.core import Fail
from kube_double.workloads import (
    controller_reference, daemon_pod_tolerations, daemon_pod_updated, node_should_run_daemon_pod, pod_terminal, template_generation, template_hash)


def daemon_pod(ds, node_name):
    """The pod the DaemonSet controller creates for a node (syncNodes: controller.GetPodFromTemplate with the DaemonSet as controller
    owner, util.CreatePodTemplate's labels and tolerations, ReplaceDaemonSetPodNodeNameNodeAffinity); the default scheduler would
    then bind it, the double sets spec.nodeName at once. The apiserver completes generateName with five characters."""
    template = json.loads(json.dumps((ds.get("spec") or {}).get("template") or {}))
    template_metadata, spec = template.get("metadata") or {}, template.get("spec") or {}
    metadata = {"generateName": ds["metadata"]["name"] + "-", "namespace": ds["metadata"]["namespace"],
                "labels": dict(template_metadata.get("labels") or {}, **{"controller-revision-hash": template_hash(ds),
                                                                         "pod-template-generation": template_generation(ds)}),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": ds["metadata"]["name"],
                                     "uid": ds["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]}
    if template_metadata.get("annotations"):
        metadata["annotations"] = template_metadata["annotations"]
    spec["tolerations"] = daemon_pod_tolerations(spec)
    affinity = spec.get("affinity") or {}
    node_affinity = dict(affinity.get("nodeAffinity") or {}, requiredDuringSchedulingIgnoredDuringExecution={"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}]})
    spec["affinity"] = dict(affinity, nodeAffinity=node_affinity)
    spec["nodeName"] = node_name
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def sync_daemon_sets(client, node, daemon_sets, pods):
    """The DaemonSet controller's work for this node (pkg/controller/daemon daemon_controller.go podsShouldBeOnNode, syncNodes,
    and the RollingUpdate strategy's replacement of old pods); returns the node's pods as they are after it.

    For each DaemonSet: where it should not continue running, its pods go; where it should run, failed and succeeded pods go,
    a pod is created when none exists, extra pods but the oldest go, and under RollingUpdate an old-template pod goes (its
    replacement comes at the next heartbeat; maxUnavailable and maxSurge are not coordinated across nodes). Pods whose
    controlling DaemonSet is gone are deleted, as the garbage collector would. Orphans are not adopted."""
    name = node["metadata"]["name"]
    owned = {}
    for pod in pods:
        owner = controller_reference(pod)
        if owner and owner.get("kind") == "DaemonSet":
            owned.setdefault(owner.get("uid"), []).append(pod)
    by_uid = {ds["metadata"]["uid"]: ds for ds in daemon_sets}
    doomed = [pod for uid, its in owned.items() if uid not in by_uid for pod in its if not pod["metadata"].get("deletionTimestamp")]
    wanted = []
    for ds in daemon_sets:
        if ds["metadata"].get("deletionTimestamp"):
            continue
        should_run, should_continue = node_should_run_daemon_pod(node, ds)
        its = owned.get(ds["metadata"]["uid"], [])
        live = [pod for pod in its if not pod["metadata"].get("deletionTimestamp")]
        if not should_continue:
            doomed += live
        elif should_run:
            doomed += [pod for pod in live if pod_terminal(pod)]
            running = sorted((pod for pod in live if not pod_terminal(pod)), key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
            if not [pod for pod in its if not (pod["metadata"].get("deletionTimestamp") and pod_terminal(pod))]:
                wanted.append(ds)
            elif len(running) > 1:
                doomed += running[1:]
            elif running and ((ds.get("spec") or {}).get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate" \
                    and not daemon_pod_updated(running[0], ds, template_hash(ds)):
                doomed.append(running[0])
    gone = set()
    for pod in doomed:
        status, answer = client.request("DELETE", f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}")
        if status >= 400 and status != 404:
            raise Fail(f"deleting pod {pod['metadata']['namespace']}/{pod['metadata']['name']}: "
                       f"{answer.get('message', answer) if isinstance(answer, dict) else answer}")
        gone.add(pod["metadata"]["uid"])
        print(f'kubelet: daemonset controller: deleted pod {pod["metadata"]["namespace"]}/{pod["metadata"]["name"]} on node "{name}"', file=sys.stderr)
    pods = [pod for pod in pods if pod["metadata"]["uid"] not in gone]
    for ds in wanted:
        created = client.call("POST", f"/api/v1/namespaces/{ds['metadata']['namespace']}/pods?fieldManager=kube-controller-manager", daemon_pod(ds, name))
        pods.append(created)
        print(f'kubelet: daemonset controller: created pod {created["metadata"]["namespace"]}/{created["metadata"]["name"]} on node "{name}"', file=sys.stderr)
    return pods
