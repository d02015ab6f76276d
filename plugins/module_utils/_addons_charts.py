# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The charts of direct apply at a site without Argo CD (cluster_addons_chart_installer: helm).

Each chart the render holds is an Argo CD Application with a Helm source. Argo CD installs one by running
``helm template`` with the Application's release name, namespace and values, and applying what comes out; direct apply
does the same on the controller: ``template_run(application, ...)`` is the ``helm template`` command line (and the values
on its standard input), ``chart_objects(run, output, datacenter)`` the objects of its output, labelled as the collection's
for the datacenter and the chart so that prune finds them. The objects then go through the same plan as the rest
(``_addons_apply.plan``): one rendering, one apply. Hooks are left out (``--no-hooks``), as helm leaves them out of
``helm template`` by default: the charts' hooks upgrade CRDs (applied here directly, with ``--include-crds``), run
tests or clean up on uninstall. Nothing here imports Ansible.
"""

from __future__ import annotations

import os

try:
    import yaml
except ImportError:  # the plan runs on the controller (filter plugins), where Ansible brings PyYAML
    yaml = None

from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import MANAGED_BY, ROOT_APPLICATION_FILE

DATACENTER_LABEL = "onprem.gpu/datacenter"
CHART_LABEL = "onprem.gpu/chart"
# Built-in kinds that are not namespaced (kubectl api-resources --namespaced=false of Kubernetes 1.35, the ones a chart can
# hold). A chart's own CustomResourceDefinitions say the scope of their kinds; any other kind is namespaced.
CLUSTER_SCOPED_KINDS = frozenset((
    "APIService", "CSIDriver", "CertificateSigningRequest", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "FlowSchema", "IngressClass", "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration",
    "Namespace", "Node", "PersistentVolume", "PriorityClass", "PriorityLevelConfiguration", "RuntimeClass", "StorageClass",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "ValidatingWebhookConfiguration", "VolumeAttachment",
))
# Kinds read from the cluster to find chart objects to prune when a chart leaves the render (beside those of the charts
# rendered now). CustomResourceDefinitions are never pruned: deleting one deletes every object of its kind, and helm
# itself never deletes the CRDs of a chart.
CHART_KINDS = (
    ("v1", "ServiceAccount"), ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Service"),
    ("apps/v1", "Deployment"), ("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"),
    ("rbac.authorization.k8s.io/v1", "Role"), ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"), ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"),
    ("apiregistration.k8s.io/v1", "APIService"),
)
# Namespaces every cluster has: a chart installed there never makes or prunes them.
SYSTEM_NAMESPACES = frozenset(("default", "kube-system", "kube-public", "kube-node-lease"))


def chart_applications(rendered):
    """The chart Applications of a datacenter's rendered objects (``_addons_apply.rendered_objects``), in render order."""
    return [document for path, document in rendered
            if path != ROOT_APPLICATION_FILE and document["kind"] == "Application" and "helm" in (document["spec"].get("source") or {})]


def template_run(application, helm, archives, kube_version):
    """How to render one chart Application: ``{release, namespace, chart, argv, stdin, problem}``.

    The chart comes from ``archives`` (a controller folder of ``helm package`` archives, ``<chart>-<version>.tgz``; the
    version with or without its leading v) when it holds it, else from the Application's repository: an HTTP(S) repository
    through ``--repo``, an OCI registry (an Argo CD repoURL without a scheme) as ``oci://<repoURL>/<chart>``. A chart that
    Argo CD takes from git (a path in a git repository) needs its archive: ``problem`` says so and argv is None.
    """
    source = application["spec"]["source"]
    helm_source = source.get("helm") or {}
    release = helm_source.get("releaseName") or application["metadata"]["name"]
    namespace = application["spec"]["destination"]["namespace"]
    chart = source.get("chart") or os.path.basename(source.get("path", "").rstrip("/"))
    version = str(source["targetRevision"])
    run = {"release": release, "namespace": namespace, "chart": chart, "version": version, "argv": None, "problem": None,
           "stdin": yaml.safe_dump(helm_source.get("valuesObject") or {}, sort_keys=False)}
    archive = _archive(archives, chart, version)
    if archive:
        where = [archive]
    elif source.get("chart") is None:
        run["problem"] = (f"the {chart} chart comes from git ({source['repoURL']}, {source.get('path')} at {version}), which helm cannot "
                          f"fetch: put its archive ({chart}-{version.lstrip('v')}.tgz, helm package of that folder at that tag) in "
                          f"cluster_addons_chart_archives.")
        return run
    elif "://" in source["repoURL"] and not source["repoURL"].startswith("oci://"):
        where = [chart, "--repo", source["repoURL"], "--version", version]
    else:
        where = [f"oci://{source['repoURL'].split('://', 1)[-1].rstrip('/')}/{chart}", "--version", version]
    run["argv"] = [helm, "template", release, *where, "--namespace", namespace, "--values", "-", "--include-crds", "--no-hooks"]
    if kube_version:
        run["argv"] += ["--kube-version", str(kube_version)]
    return run


def _archive(archives, chart, version):
    if not archives:
        return None
    for name in dict.fromkeys((f"{chart}-{version}.tgz", f"{chart}-{version.lstrip('v')}.tgz")):
        candidate = os.path.join(archives, name)
        if os.path.isfile(candidate):
            # Absolute: helm reads a relative path without ./ (charts/x.tgz) as <repository>/<chart>.
            return os.path.abspath(candidate)
    return None


def parse_documents(output):
    """The objects of a ``helm template`` output: empty documents dropped and ``List`` wrappers unfolded, as kubectl does."""
    documents = []
    # libyaml's loader where PyYAML has it: a chart's output runs to megabytes (Kueue's CRDs alone are 1.7 MB).
    for document in yaml.load_all(output, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
        if not document:
            continue
        if document.get("kind", "").endswith("List") and "items" in document:
            documents.extend(item for item in document["items"] if item)
        else:
            documents.append(document)
    return documents


def crd_scopes(documents):
    """(group, kind) -> scope of the CustomResourceDefinitions among ``documents``."""
    return {(crd["spec"]["group"], crd["spec"]["names"]["kind"]): crd["spec"].get("scope", "Namespaced")
            for crd in documents if crd.get("kind") == "CustomResourceDefinition"}


def chart_objects(run, documents, datacenter, scopes=None):
    """One chart's objects (``parse_documents`` of its ``helm template`` output, or that output), as direct apply applies them.

    Each gets the collection's labels for ``datacenter`` and ``onprem.gpu/chart: <release>``; a namespaced object without
    a namespace gets the release's (as Argo CD gives it the Application's destination namespace), and a cluster-scoped one
    loses the namespace a template may give it (the API ignores it, so the object is known by its name alone).
    ``scopes`` ((group, kind) -> scope, ``crd_scopes``) adds the CRDs of the datacenter's other charts to this chart's own:
    a chart may hold objects of a kind another chart defines.
    """
    if isinstance(documents, str):
        documents = parse_documents(documents)
    scopes = {**(scopes or {}), **crd_scopes(documents)}
    labels = dict(MANAGED_BY, **{DATACENTER_LABEL: datacenter, CHART_LABEL: run["release"]})
    for document in documents:
        metadata = document.setdefault("metadata", {})
        metadata["labels"] = dict(metadata.get("labels") or {}, **labels)
        if not namespaced(document, scopes):
            metadata.pop("namespace", None)
        elif not metadata.get("namespace"):
            metadata["namespace"] = run["namespace"]
    return documents


def namespaced(document, scopes):
    """Whether ``document``'s kind lives in a namespace (``scopes``: (group, kind) -> scope of the CRDs known)."""
    group = document["apiVersion"].rpartition("/")[0]
    scope = scopes.get((group, document["kind"]))
    if scope:
        return scope == "Namespaced"
    return document["kind"] not in CLUSTER_SCOPED_KINDS


def release_namespaces(runs, datacenter):
    """A Namespace for each chart's release namespace (Argo CD's CreateNamespace=true), but the system ones, in run order."""
    names = dict.fromkeys(run["namespace"] for run in runs if run["namespace"] not in SYSTEM_NAMESPACES)
    return [{"apiVersion": "v1", "kind": "Namespace",
             "metadata": {"name": name, "labels": dict(MANAGED_BY, **{DATACENTER_LABEL: datacenter})}} for name in names]
