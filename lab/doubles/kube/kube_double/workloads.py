"""Pods and DaemonSets as the controllers judge them: readiness, tolerations, node affinity, whether a node should run a
DaemonSet's pod, and the template hash and generation that tell an updated pod."""

import datetime
import json

from kube_double.core import SAFE_ALPHANUMS, now, parse_rfc3339


def controller_reference(obj):
    """The ownerReference with controller: true (metav1.GetControllerOf), or None."""
    return next((reference for reference in obj["metadata"].get("ownerReferences") or [] if reference.get("controller")), None)


def pod_terminal(pod):
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def running_pod(pods, label):
    """The first of the pods that runs (phase Running, not being deleted) with the label (key, value): the operand's pod on a node."""
    key, value = label
    return next((pod for pod in pods if (pod["metadata"].get("labels") or {}).get(key) == value and not pod["metadata"].get("deletionTimestamp")
                 and (pod.get("status") or {}).get("phase") == "Running"), None)


def pod_ready(pod):
    """podutil.IsPodReady: the Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in (pod.get("status") or {}).get("conditions") or [])


def pod_available(pod, min_ready_seconds):
    """podutil.IsPodAvailable: Ready for at least minReadySeconds."""
    if not pod_ready(pod):
        return False
    if not min_ready_seconds:
        return True
    ready = next(c for c in pod["status"]["conditions"] if c.get("type") == "Ready")
    since = ready.get("lastTransitionTime")
    return bool(since) and parse_rfc3339(since) + datetime.timedelta(seconds=min_ready_seconds) <= now()


def tolerates(toleration, taint):
    """core/v1 Toleration.ToleratesTaint: the effect (if set) and key (if set) match; Exists matches any value, Equal the same one."""
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("key") and toleration["key"] != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    return operator == "Exists" or (operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or ""))


def untolerated(taints, tolerations, effects):
    """v1helper.FindMatchingUntoleratedTaint: is one of the taints with these effects tolerated by none of the tolerations."""
    return any(taint.get("effect") in effects and not any(tolerates(t, taint) for t in tolerations) for taint in taints)


# DaemonSet pods tolerate these whatever their template says (pkg/controller/daemon/util daemonset_util.go AddOrUpdateDaemonPodTolerations).
DAEMON_TOLERATIONS = [{"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect} for key, effect in (
    ("not-ready", "NoExecute"), ("unreachable", "NoExecute"), ("disk-pressure", "NoSchedule"), ("memory-pressure", "NoSchedule"),
    ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule"))]


HOST_NETWORK_TOLERATION = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists", "effect": "NoSchedule"}


def daemon_pod_tolerations(spec):
    """The template's tolerations with the DaemonSet defaults added (AddOrUpdateTolerationInPodSpec: a toleration equal in key,
    operator, value and effect is replaced by the default); network-unavailable too for a hostNetwork pod."""
    tolerations = [dict(toleration) for toleration in spec.get("tolerations") or []]
    for default in DAEMON_TOLERATIONS + ([HOST_NETWORK_TOLERATION] if spec.get("hostNetwork") else []):
        same = [index for index, t in enumerate(tolerations)
                if all((t.get(k) or "") == (default.get(k) or "") for k in ("key", "operator", "value", "effect"))]
        for index in same:
            tolerations[index] = dict(default)
        if not same:
            tolerations.append(dict(default))
    return tolerations


def requirement_matches(requirement, labels):
    """A NodeSelectorRequirement against a node's labels, or {"metadata.name": name} for matchFields (k8s.io/component-helpers
    scheduling/corev1/nodeaffinity): In, NotIn, Exists, DoesNotExist, Gt and Lt (integers)."""
    key, operator, values = requirement.get("key"), requirement.get("operator"), requirement.get("values") or []
    present = key in labels
    if operator == "In":
        return present and labels[key] in values
    if operator == "NotIn":
        return not present or labels[key] not in values
    if operator in ("Exists", "DoesNotExist"):
        return present == (operator == "Exists")
    if operator in ("Gt", "Lt") and present and len(values) == 1:
        try:
            left, right = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return left > right if operator == "Gt" else left < right
    return False


def node_affinity_matches(spec, node):
    """nodeaffinity.GetRequiredNodeAffinity(pod).Match(node): every nodeSelector label, and one of the required nodeSelectorTerms
    (all of a term's matchExpressions and matchFields hold; a term with neither matches nothing)."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(key) != value for key, value in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    fields = {"metadata.name": node["metadata"]["name"]}
    return any((term.get("matchExpressions") or term.get("matchFields"))
               and all(requirement_matches(r, labels) for r in term.get("matchExpressions") or [])
               and all(requirement_matches(r, fields) for r in term.get("matchFields") or [])
               for term in required.get("nodeSelectorTerms") or [])


def node_should_run_daemon_pod(node, ds):
    """pkg/controller/daemon NodeShouldRunDaemonPod: (shouldRun, shouldContinueRunning). The template's nodeName, nodeSelector and
    required node affinity must match; a NoSchedule or NoExecute taint that the pod (with the DaemonSet tolerations) does not
    tolerate stops new pods, and only an untolerated NoExecute one removes a running pod. spec.unschedulable is not looked at:
    a cordoned node keeps and gets its DaemonSet pods."""
    spec = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
    if spec.get("nodeName") not in (None, "", node["metadata"]["name"]) or not node_affinity_matches(spec, node):
        return False, False
    taints, tolerations = (node.get("spec") or {}).get("taints") or [], daemon_pod_tolerations(spec)
    if untolerated(taints, tolerations, ("NoSchedule", "NoExecute")):
        return False, not untolerated(taints, tolerations, ("NoExecute",))
    return True, True


TEMPLATE_GENERATION = "deprecated.daemonset.template.generation"


def template_hash(ds):
    """The controller-revision-hash label of the DaemonSet's current template (pkg/controller/history HashControllerRevision:
    FNV-32a, SafeEncodeString of its decimal value). The double hashes the template's sorted JSON, without the collisionCount
    it does not keep, so the values are not those of a real cluster."""
    data = json.dumps(((ds.get("spec") or {}).get("template")) or {}, sort_keys=True)
    value = 0x811C9DC5
    for byte in data.encode():
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(SAFE_ALPHANUMS[ord(char) % len(SAFE_ALPHANUMS)] for char in str(value))


def template_generation(ds):
    """util.GetTemplateGeneration: the deprecated.daemonset.template.generation annotation; the double's apiserver does not keep it,
    so metadata.generation stands in."""
    return str((ds["metadata"].get("annotations") or {}).get(TEMPLATE_GENERATION) or ds["metadata"].get("generation", 1))


def daemon_pod_updated(pod, ds, current_hash):
    """util.IsPodUpdated: the pod's controller-revision-hash or pod-template-generation label is the DaemonSet's current one."""
    labels = pod["metadata"].get("labels") or {}
    return labels.get("controller-revision-hash") == current_hash or labels.get("pod-template-generation") == template_generation(ds)
