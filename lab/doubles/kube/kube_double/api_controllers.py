"""What kube-controller-manager writes, done by the API server when an object is read or written: the status of
Deployments, DaemonSets and PodDisruptionBudgets, the bootstrap signer and the kubelet CSR signer."""

import re
import secrets

from kube_double.core import b64, now, rfc3339, status_error, unb64
from kube_double.pki import jws, openssl, sign
from kube_double.resources import BUILTIN, Resource
from kube_double.selectors import label_selector
from kube_double.store import new_object, valid_tokens
from kube_double.workloads import (
    controller_reference, daemon_pod_updated, node_should_run_daemon_pod, pod_available, pod_ready, pod_terminal, template_hash)


def scaled(value, total):
    """intstr.GetScaledValueFromIntOrPercent rounding up, as the disruption controller does."""
    if isinstance(value, str) and value.endswith("%"):
        return -(-int(value[:-1]) * total // 100)
    return int(value)


def deployment_status(deployment):
    """A Deployment's status as the deployment controller (pkg/controller/deployment sync.go calculateStatus) reports a rollout that
    is complete: every replica of the current template updated, ready and available, conditions Available (reason
    MinimumReplicasAvailable) and Progressing (NewReplicaSetAvailable), observedGeneration = metadata.generation. The double runs
    no ReplicaSet or pod for a Deployment (no scheduler, no containers): this is what `kubectl rollout status` and
    kubernetes.core's wait see once the real controller's pods run. Zero replicas: no replica counters, as omitempty leaves them out."""
    replicas = (deployment.get("spec") or {}).get("replicas", 1)
    stamp = deployment["metadata"].get("creationTimestamp") or rfc3339(now())
    name = deployment["metadata"]["name"]
    status = {"observedGeneration": deployment["metadata"].get("generation", 1)}
    if replicas:
        status.update(replicas=replicas, updatedReplicas=replicas, readyReplicas=replicas, availableReplicas=replicas)
    status["conditions"] = [
        {"type": "Available", "status": "True", "lastUpdateTime": stamp, "lastTransitionTime": stamp,
         "reason": "MinimumReplicasAvailable", "message": "Deployment has minimum availability."},
        {"type": "Progressing", "status": "True", "lastUpdateTime": stamp, "lastTransitionTime": stamp,
         "reason": "NewReplicaSetAvailable", "message": f'ReplicaSet "{name}" has successfully progressed.'},
    ]
    return status


def pod_healthy(pod):
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions", []))
    return pod.get("status", {}).get("phase") == "Running" and ready and not pod["metadata"].get("deletionTimestamp")


class ControllerViews:
    """ApiHandler's part: the controllers' view of the store, computed when read."""

    def matching_pods(self, pdb):
        selector = pdb.get("spec", {}).get("selector")
        if selector is None:
            return []
        expressions = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
        for expression in selector.get("matchExpressions") or []:
            operator = {"In": "in", "NotIn": "notin"}.get(expression["operator"])
            if operator:
                expressions.append(f"{expression['key']} {operator} ({','.join(expression.get('values', []))})")
            else:
                expressions.append(expression["key"] if expression["operator"] == "Exists" else "!" + expression["key"])
        matches = label_selector(",".join(expressions))
        pods = self.store.data["objects"].get("pods", {})
        return [pod for key, pod in sorted(pods.items()) if key.startswith(pdb["metadata"]["namespace"] + "/")
                and matches(pod["metadata"].get("labels")) and pod.get("status", {}).get("phase") not in ("Succeeded", "Failed")]

    def expected_pods(self, pods):
        """The disruption controller's expected count: the scale (spec.replicas) of each selected pod's controller, a DaemonSet's
        desiredNumberScheduled; a pod whose controller is not in the store (or that has none) counts as one."""
        expected, counted = 0, set()
        stores = {"ReplicaSet": "replicasets.apps", "StatefulSet": "statefulsets.apps", "DaemonSet": "daemonsets.apps"}
        for pod in pods:
            owner = next((o for o in pod["metadata"].get("ownerReferences", []) if o.get("controller")), None)
            controller = None
            if owner and owner.get("kind") in stores:
                controller = self.store.data["objects"].get(stores[owner["kind"]], {}).get(f"{pod['metadata']['namespace']}/{owner['name']}")
            if controller is None or controller["metadata"]["uid"] != owner.get("uid"):
                expected += 1
            elif controller["metadata"]["uid"] not in counted:
                counted.add(controller["metadata"]["uid"])
                expected += self.daemon_set_status(controller)["desiredNumberScheduled"] if owner["kind"] == "DaemonSet" \
                    else controller.get("spec", {}).get("replicas", 1)
        return expected

    def daemon_set_status(self, ds):
        """The DaemonSet controller's status (pkg/controller/daemon daemon_controller.go updateDaemonSetStatus), computed when read from
        the Nodes and the pods the DaemonSet controls: per node that should run it (node_should_run_daemon_pod), whether its oldest
        pod exists, is Ready, available (Ready for minReadySeconds) and of the current template; numberMisscheduled counts
        nodes that run one and should not. Zero-valued omitempty fields are left out, as the Go types marshal them."""
        uid, current_hash = ds["metadata"]["uid"], template_hash(ds)
        by_node = {}
        for pod in self.store.data["objects"].get("pods", {}).values():
            owner = controller_reference(pod)
            if owner and owner.get("uid") == uid and not (pod["metadata"].get("deletionTimestamp") and pod_terminal(pod)):
                by_node.setdefault((pod.get("spec") or {}).get("nodeName"), []).append(pod)
        counts = dict.fromkeys(("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady",
                                "updatedNumberScheduled", "numberAvailable"), 0)
        for name, node in self.store.data["objects"].get("nodes", {}).items():
            should_run, _reasons = node_should_run_daemon_pod(node, ds)
            pods = sorted(by_node.get(name, []), key=lambda p: (p["metadata"].get("creationTimestamp", ""), p["metadata"]["name"]))
            if not should_run:
                counts["numberMisscheduled"] += 1 if pods else 0
                continue
            counts["desiredNumberScheduled"] += 1
            if not pods:
                continue
            counts["currentNumberScheduled"] += 1
            if pod_ready(pods[0]):
                counts["numberReady"] += 1
                counts["numberAvailable"] += 1 if pod_available(pods[0], (ds.get("spec") or {}).get("minReadySeconds", 0)) else 0
            counts["updatedNumberScheduled"] += 1 if daemon_pod_updated(pods[0], ds, current_hash) else 0
        counts["numberUnavailable"] = counts["desiredNumberScheduled"] - counts["numberAvailable"]
        status = {key: value for key, value in counts.items()
                  if value or key in ("currentNumberScheduled", "numberMisscheduled", "desiredNumberScheduled", "numberReady")}
        status["observedGeneration"] = ds["metadata"].get("generation", 1)
        return status

    def disruption_status(self, pdb):
        """The disruption controller's status (pkg/controller/disruption), computed when read."""
        pods = self.matching_pods(pdb)
        expected, healthy = self.expected_pods(pods), sum(1 for pod in pods if pod_healthy(pod))
        spec = pdb.get("spec", {})
        if "maxUnavailable" in spec:
            desired = max(0, expected - scaled(spec["maxUnavailable"], expected))
        else:
            desired = scaled(spec.get("minAvailable", 1), expected)
        allowed = max(0, healthy - desired)
        stamp = rfc3339(now())
        return {"observedGeneration": pdb["metadata"].get("generation", 1), "currentHealthy": healthy, "desiredHealthy": desired,
                "expectedPods": expected, "disruptionsAllowed": allowed,
                "conditions": [{"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": "",
                                "observedGeneration": pdb["metadata"].get("generation", 1), "lastTransitionTime": stamp}]}

    def sign_cluster_info(self):
        """The bootstrap signer: one jws-kubeconfig-<id> per signing token, none for expired ones."""
        info = self.store.data["objects"]["configmaps"]["kube-public/cluster-info"]
        data = {"kubeconfig": info["data"]["kubeconfig"]}
        for token_id, token in valid_tokens(self.store).items():
            if token.get("usage-bootstrap-signing") == "true":
                data[f"jws-kubeconfig-{token_id}"] = jws(data["kubeconfig"], token_id, token["token-secret"])
        info["data"] = data

    def csr(self, request, user):
        """The CSR approver and signer of kube-controller-manager: kubelet client certificates, approved at once."""
        pem = unb64(request["spec"]["request"])
        subject = openssl("req", "-noout", "-subject", "-nameopt", "RFC2253", stdin=pem).strip()
        match = re.fullmatch(r"subject=CN=system:node:([^,]+),O=system:nodes", subject)
        if not match or request["spec"].get("signerName") != "kubernetes.io/kube-apiserver-client-kubelet":
            return status_error(403, "Forbidden", f"the double signs only kubelet client certificates, not {subject}")
        certificate = sign(pem, "/etc/kubernetes/pki/ca")
        created = new_object("CertificateSigningRequest", f"csr-{secrets.token_hex(3)}", spec=request["spec"])
        created.update(apiVersion="certificates.k8s.io/v1", status={
            "conditions": [{"type": "Approved", "status": "True", "reason": "AutoApproved",
                            "message": "Auto approving kubelet client certificate after SubjectAccessReview."}],
            "certificate": b64(certificate)})
        created["spec"]["username"] = user
        created["metadata"]["resourceVersion"] = self.store.next_version()
        self.objects(Resource(*BUILTIN[-1]))[created["metadata"]["name"]] = created
        self.store.save()
        return 201, created
