"""The resources the double serves: built-in kinds and the kinds of registered CustomResourceDefinitions, and how
discovery (legacy and aggregated) and OpenAPI v3 list them."""

import base64
import hashlib

from kube_double.core import version


VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


# group, version, resource, kind, namespaced, short names, categories, has a status subresource, keeps metadata.generation
BUILTIN = [
    ("", "v1", "namespaces", "Namespace", False, ["ns"], [], True, False),
    ("", "v1", "nodes", "Node", False, ["no"], [], True, False),
    ("", "v1", "pods", "Pod", True, ["po"], ["all"], True, True),
    ("", "v1", "configmaps", "ConfigMap", True, ["cm"], [], False, False),
    ("", "v1", "secrets", "Secret", True, [], [], False, False),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ["sa"], [], False, False),
    ("", "v1", "services", "Service", True, ["svc"], ["all"], True, False),
    ("", "v1", "resourcequotas", "ResourceQuota", True, ["quota"], [], True, False),
    ("", "v1", "limitranges", "LimitRange", True, ["limits"], [], False, False),
    ("apps", "v1", "daemonsets", "DaemonSet", True, ["ds"], ["all"], True, True),
    ("apps", "v1", "deployments", "Deployment", True, ["deploy"], ["all"], True, True),
    ("apps", "v1", "replicasets", "ReplicaSet", True, ["rs"], ["all"], True, True),
    ("apps", "v1", "statefulsets", "StatefulSet", True, ["sts"], ["all"], True, True),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ["pdb"], [], True, True),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, [], [], False, False),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, [], [], False, False),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, [], [], False, False),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, [], [], False, False),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ["netpol"], [], False, True),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ["sc"], [], False, False),
    # Stored, never called (no admission webhooks run) nor aggregated (no API is proxied): pkg/registry/admissionregistration
    # {mutating,validating}webhookconfiguration (generation 1 on create, bumped when the webhooks change; category api-extensions)
    # and kube-aggregator pkg/registry/apiservice (a status subresource, no generation; category api-extensions).
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False, [], ["api-extensions"],
     False, True),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False, [], ["api-extensions"],
     False, True),
    ("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, [], ["api-extensions"], True, False),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ["pc"], [], False, False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False, ["crd", "crds"], ["api-extensions"], True, True),
    ("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False, ["csr"], [], True, False),
]


class Resource:
    def __init__(self, group, version, plural, kind, namespaced, short=(), categories=(), status=True, generation=True, crd=None):
        self.group, self.version, self.plural, self.kind, self.namespaced = group, version, plural, kind, namespaced
        self.short, self.categories, self.status, self.generation, self.crd = list(short), list(categories), status, generation, crd
        self.singular = kind.lower()

    @property
    def api_version(self):
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def key(self):
        """Where its objects live in the store (one place for all versions of a group, as etcd keeps one storage version)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def subresources(self):
        subs = {"status": (self.api_version, self.kind, ["get", "patch", "update"])} if self.status else {}
        if self.kind == "Pod":
            subs["eviction"] = ("policy/v1", "Eviction", ["create"])
        if self.kind == "CertificateSigningRequest":
            subs["approval"] = (self.api_version, self.kind, ["get", "patch", "update"])
        return subs


def crd_resources(crd):
    spec, names = crd.get("spec", {}), crd.get("spec", {}).get("names", {})
    found = []
    for served in spec.get("versions", []):
        if served.get("served", True):
            found.append(Resource(spec["group"], served["name"], names["plural"], names["kind"], spec.get("scope") == "Namespaced",
                                  names.get("shortNames", []), names.get("categories", []),
                                  "status" in (served.get("subresources") or {}), True, crd=(crd, served)))
    return found


def all_resources(store):
    found = [Resource(*row) for row in BUILTIN]
    for crd in store.data["objects"].get("customresourcedefinitions.apiextensions.k8s.io", {}).values():
        if not crd["metadata"].get("deletionTimestamp"):
            found.extend(crd_resources(crd))
    return found


def storage_version_hash(resource):
    return base64.b64encode(hashlib.sha256(f"{resource.api_version}/{resource.kind}".encode()).digest()[:8]).decode()


def api_resource_list(resources, group_version):
    listed = []
    for resource in resources:
        if resource.api_version != group_version:
            continue
        listed.append({"name": resource.plural, "singularName": resource.singular, "namespaced": resource.namespaced, "kind": resource.kind,
                       "verbs": VERBS, **({"shortNames": resource.short} if resource.short else {}),
                       **({"categories": resource.categories} if resource.categories else {}),
                       "storageVersionHash": storage_version_hash(resource)})
        for name, (api_version, kind, verbs) in resource.subresources().items():
            group, _slash, version_ = api_version.rpartition("/")
            entry = {"name": f"{resource.plural}/{name}", "singularName": "", "namespaced": resource.namespaced, "kind": kind, "verbs": verbs}
            if api_version != resource.api_version:
                entry.update(group=group, version=version_)
            listed.append(entry)
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": listed}


def groups(resources):
    """{group: [versions]} in the order the resources list them (the first version is the preferred one)."""
    found = {}
    for resource in resources:
        if resource.group:
            versions = found.setdefault(resource.group, [])
            if resource.version not in versions:
                versions.append(resource.version)
    return found


def aggregated_discovery(resources, legacy):
    """apidiscovery.k8s.io/v2 APIGroupDiscoveryList (KEP-3352), what kubectl asks for first."""
    items = []
    selected = {"": ["v1"]} if legacy else groups(resources)
    for group, versions in selected.items():
        entries = []
        for version_ in versions:
            listed = []
            for resource in resources:
                if resource.group != group or resource.version != version_:
                    continue
                entry = {"resource": resource.plural, "responseKind": {"group": group, "version": version_, "kind": resource.kind},
                         "scope": "Namespaced" if resource.namespaced else "Cluster", "singularResource": resource.singular, "verbs": VERBS}
                if resource.short:
                    entry["shortNames"] = resource.short
                if resource.categories:
                    entry["categories"] = resource.categories
                subresources = []
                for name, (api_version, kind, verbs) in resource.subresources().items():
                    sub_group, _slash, sub_version = api_version.rpartition("/")
                    subresources.append({"subresource": name, "responseKind": {"group": sub_group, "version": sub_version, "kind": kind}, "verbs": verbs})
                if subresources:
                    entry["subresources"] = subresources
                listed.append(entry)
            entries.append({"version": version_, "resources": listed, "freshness": "Current"})
        items.append({"metadata": {"name": group, "creationTimestamp": None} if group else {"creationTimestamp": None}, "versions": entries})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items}


def openapi_hash(group_version, resource_version):
    return hashlib.sha256((group_version + resource_version).encode()).hexdigest()[:16].upper()


def openapi_v3(resources, group_version):
    """Enough of /openapi/v3/<gv> for kubectl's query parameter verifier: each kind's PATCH path takes fieldValidation,
    so kubectl leaves field validation to the server (`--validate=strict`). No schemas are published."""
    paths = {}
    parameters = [{"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                  for name in ("dryRun", "fieldManager", "fieldValidation", "force")]
    for resource in resources:
        if resource.api_version != group_version:
            continue
        prefix = "/api/v1" if not resource.group else f"/apis/{resource.api_version}"
        scope = "/namespaces/{namespace}" if resource.namespaced else ""
        gvk = {"group": resource.group, "version": resource.version, "kind": resource.kind}
        paths[f"{prefix}{scope}/{resource.plural}/{{name}}"] = {"patch": {
            "operationId": f"patch{resource.kind}", "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
            "parameters": parameters, "responses": {"200": {"description": "OK"}}}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v" + version()}, "paths": paths, "components": {"schemas": {}}}
