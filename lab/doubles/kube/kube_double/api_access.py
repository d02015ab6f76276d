"""Who may do what: the API server's authorizers (RBAC as kubeadm sets it up, the Node authorizer) and NodeRestriction."""

from kube_double.core import CLUSTER_ADMINS, TOKEN_RE, status_error
from kube_double.rbac import rbac_allows, request_verb
from kube_double.pki import certificate_expired
from kube_double.store import valid_tokens


# The GPU Operator's mig-manager DaemonSet labels its pods app=nvidia-mig-manager (assets/state-mig-manager/0600_daemonset.yaml).
MIG_MANAGER_POD_LABEL = ("app", "nvidia-mig-manager")


MIG_CONFIG_STATE_LABEL = "nvidia.com/mig.config.state"  # reconfigure.go migConfigStateLabel


GPU_CLIENT_DEPLOY_LABEL = "nvidia.com/gpu.deploy.client"


# reconfigure.go getCurrentNodeLabels, shutdownKubernetesGPUClients, restartKubernetesGPUClients: the component deploy labels paused
# across a change (nvidia.com/gpu.deploy.client only when the node has it).
MIG_PAUSED_DEPLOY_LABELS = ("nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.gpu-feature-discovery",
                            "nvidia.com/gpu.deploy.dcgm-exporter", "nvidia.com/gpu.deploy.dcgm", "nvidia.com/gpu.deploy.nvsm")


MIG_MANAGER_NODE_LABELS = frozenset((MIG_CONFIG_STATE_LABEL, GPU_CLIENT_DEPLOY_LABEL) + MIG_PAUSED_DEPLOY_LABELS)


class Access:
    """ApiHandler's part: the requester's identity, and what it may do."""

    def identity(self):
        certificate = self.connection.getpeercert()
        if certificate and certificate_expired(certificate):
            return None, None  # x509: certificate has expired, on the double's certificate clock (pki.clock_offset)
        if certificate:
            subject = dict(item[0] for item in certificate["subject"])
            groups_ = {value for rdn in certificate["subject"] for key, value in rdn if key == "organizationName"}
            return subject.get("commonName", ""), groups_
        header = self.headers.get("Authorization", "")
        if header.startswith("Bearer "):
            match = TOKEN_RE.match(header[7:])
            with self.store.lock:
                tokens = valid_tokens(self.store)
            if match and match.group(1) in tokens and tokens[match.group(1)]["token-secret"] == match.group(2) \
                    and tokens[match.group(1)].get("usage-bootstrap-authentication") == "true":
                return f"system:bootstrap:{match.group(1)}", {"system:bootstrappers"} | set(
                    tokens[match.group(1)].get("auth-extra-groups", "").split(",")) - {""}
            return None, None
        return "system:anonymous", {"system:unauthenticated"}

    def is_admin(self):
        certificate = self.connection.getpeercert()
        return bool(certificate and {value for rdn in certificate["subject"] for key, value in rdn if key == "organizationName"} & CLUSTER_ADMINS)

    def allowed(self, method, resource, namespace, name, sub, user, groups_, admin):
        if admin:
            return True
        if resource.kind == "ConfigMap" and method == "GET":
            if (namespace, name) == ("kube-public", "cluster-info"):
                return True
            # kubeadm's RBAC lets joining nodes (bootstrap tokens) and nodes read the cluster's kubeadm and kubelet configuration.
            if groups_ & {"system:bootstrappers", "system:nodes"} and f"{namespace}/{name}" in ("kube-system/kubelet-config", "kube-system/kubeadm-config"):
                return True
        # kubeadm's kubeadm:kubeadm-certs Role: joining control planes read the shared certificates with their bootstrap token.
        if resource.kind == "Secret" and method == "GET" and (namespace, name) == ("kube-system", "kubeadm-certs"):
            return "system:bootstrappers:kubeadm:default-node-token" in groups_
        if not user.startswith("system:node:") and self.rbac_allows(method, resource, namespace, name, sub, user, groups_):
            return True
        if resource.kind == "Node":
            own = user == f"system:node:{name}" or (method == "POST" and "system:nodes" in groups_)
            return own or (method == "GET" and "system:nodes" in groups_)
        if resource.kind == "CertificateSigningRequest" and method == "POST":
            return bool(groups_ & {"system:bootstrappers", "system:nodes"})
        if "system:nodes" in groups_ and user.startswith("system:node:"):
            # The Node authorizer and the system:node role: kubelet reads pods, writes the status of the pods bound to it and deletes
            # them; NodeRestriction (node_restriction) keeps every pod write to its own pods. The double's kubelet also plays the
            # DaemonSet controller for its node (lab double): it reads DaemonSets and creates the pods they need there.
            if resource.kind == "Pod":
                return method in ("GET", "POST", "DELETE") if sub is None else (sub == "status" and method in ("GET", "PUT", "PATCH"))
            # The Node authorizer's graph (plugin/pkg/auth/authorizer/node): a node may get the ConfigMaps that pods bound to it
            # reference, which is how kubelet mounts them (the mig-manager stand-in reads its mig-parted config this way).
            if resource.kind == "ConfigMap" and method == "GET" and name and sub is None:
                return self.referenced_by_pod_on(user[len("system:node:"):], namespace, name)
            return resource.kind == "DaemonSet" and method == "GET" and sub is None
        return False

    def rbac_allows(self, method, resource, namespace, name, sub, user, groups_):
        """The RBAC authorizer (rbac.py) for identities other than nodes: the stored ClusterRoles, Roles and their bindings."""
        return rbac_allows(self.store.data["objects"], user, groups_, {
            "group": resource.group, "resource": resource.plural + (f"/{sub}" if sub else ""),
            "verb": request_verb(method, name, self.query), "namespace": namespace, "name": name})

    def referenced_by_pod_on(self, node, namespace, name):
        """Is the ConfigMap namespace/name referenced by a pod bound to the node: a configMap volume, a projected volume's configMap
        source, an env configMapKeyRef or an envFrom configMapRef of any container (the Node authorizer's pod -> configmap edges)."""
        for pod in self.store.data["objects"].get("pods", {}).values():
            spec = pod.get("spec") or {}
            if spec.get("nodeName") != node or pod["metadata"].get("namespace") != namespace:
                continue
            names = {(volume.get("configMap") or {}).get("name") for volume in spec.get("volumes") or []}
            names |= {(source.get("configMap") or {}).get("name") for volume in spec.get("volumes") or []
                      for source in (volume.get("projected") or {}).get("sources") or []}
            for container in (spec.get("containers") or []) + (spec.get("initContainers") or []) + (spec.get("ephemeralContainers") or []):
                names |= {((variable.get("valueFrom") or {}).get("configMapKeyRef") or {}).get("name") for variable in container.get("env") or []}
                names |= {(source.get("configMapRef") or {}).get("name") for source in container.get("envFrom") or []}
            if name in names:
                return True
        return False

    def mig_manager_label_patch(self, user, method, name):
        """A node's kubelet writing, for the GPU Operator's mig-manager pod bound to it, the Node labels that pod writes with its
        ServiceAccount (the nvidia-mig-manager ClusterRole may patch nodes): a merge patch of metadata.labels holding only
        nvidia.com/mig.config.state and the nvidia.com/gpu.deploy.<component> labels the reconfiguration pauses and restores
        (pkg/mig/reconfigure of NVIDIA/mig-parted), on its own Node, while a pod labelled app=nvidia-mig-manager that is not being
        deleted is bound to it. A lab double's stand-in for the pod's own credentials; NodeRestriction refuses every other write."""
        if method != "PATCH" or user != f"system:node:{name}":
            return False
        if (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/merge-patch+json":
            return False
        body = self.body()
        if not isinstance(body, dict) or list(body) != ["metadata"] or not isinstance(body["metadata"], dict) or list(body["metadata"]) != ["labels"]:
            return False
        labels = body["metadata"]["labels"]
        if not isinstance(labels, dict) or not labels or any(key not in MIG_MANAGER_NODE_LABELS or not isinstance(value, str) for key, value in labels.items()):
            return False
        key, value = MIG_MANAGER_POD_LABEL
        return any((pod.get("spec") or {}).get("nodeName") == name and (pod["metadata"].get("labels") or {}).get(key) == value
                   and not pod["metadata"].get("deletionTimestamp") for pod in self.store.data["objects"].get("pods", {}).values())

    def node_restriction(self, user, method, pod, name):
        """NodeRestriction (plugin/pkg/admission/noderestriction admitPod): a node writes only pods bound to it; 403 or None. The double
        lets a node create any pod bound to it, where the real plugin allows only mirror pods (its kubelet creates DaemonSet pods)."""
        if pod is None or not user.startswith("system:node:") or self.is_admin():
            return None
        node = user[len("system:node:"):]
        if (pod.get("spec") or {}).get("nodeName") == node:
            return None
        what = {"POST": "create pods", "DELETE": "delete pods"}.get(method, "update pod status for pods")
        return status_error(403, "Forbidden", f'pods "{name}" is forbidden: node "{node}" can only {what} with spec.nodeName set to itself',
                            {"name": name, "kind": "pods"})

    def forbidden(self, user, method, resource, namespace, url, name=None, sub=None):
        verb = {"GET": "list" if resource is not None and name is None else "get", "POST": "create", "PUT": "update", "PATCH": "patch",
                "DELETE": "delete"}[method]
        if resource is None:
            return status_error(403, "Forbidden", f'forbidden: User "{user}" cannot {verb} path "{url}"')
        plural = resource.plural + (f"/{sub}" if sub else "")
        where = f' in the namespace "{namespace}"' if namespace else " at the cluster scope"
        subject = f'{plural} "{name}"' if name else plural
        return status_error(403, "Forbidden", f'{subject} is forbidden: User "{user}" cannot {verb} resource "{plural}" in API group '
                                              f'"{resource.group}"{where}', {"name": name, "group": resource.group, "kind": resource.plural} if name else
                            {"group": resource.group, "kind": resource.plural})
