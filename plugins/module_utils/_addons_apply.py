# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Direct apply of a datacenter's rendered tree: the objects, their order, what to prune, and the reasons to refuse.

``rendered_objects(files)`` reads the files ``_addons_render.tree`` wrote back into objects exactly as
``kubectl kustomize`` builds them (the kustomization's resources in order, its labels added), so Argo CD and direct
apply get the same objects from one rendering. ``plan(name, files, live, charts)`` compares them with what the cluster
holds (``live``: the objects of every kind in ``RENDERED_KINDS``, read with onprem.gpu.kube_objects_info) and returns the
batches to apply, the objects to prune (labelled as the collection's for this datacenter and no longer rendered) and
``problems``: one sentence per reason to refuse before changing anything. Nothing here imports Ansible.
"""

from __future__ import annotations

try:
    import yaml
except ImportError:  # the plan runs on the controller (filter cluster_addons_apply_plan), where Ansible brings PyYAML
    yaml = None

from ansible_collections.onprem.gpu.plugins.module_utils._addons_charts import CHART_LABEL, release_namespaces
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import KUEUE_API, MANAGED_BY, ROOT_APPLICATION_FILE

DATACENTER_LABEL = "onprem.gpu/datacenter"
CRD_KIND = "CustomResourceDefinition"
APPLICATION_API = "argoproj.io/v1alpha1"
ESTABLISHED = {"type": "Established", "status": "True"}
AVAILABLE = {"type": "Available", "status": "True"}
# Every kind the render can hold: direct apply reads these to find what exists and what to prune, and prunes nothing else.
RENDERED_KINDS = (
    ("v1", "Namespace"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
    ("v1", "ConfigMap"),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("networking.k8s.io/v1", "NetworkPolicy"),
    ("storage.k8s.io/v1", "StorageClass"),
    (KUEUE_API, "ResourceFlavor"),
    (KUEUE_API, "ClusterQueue"),
    (KUEUE_API, "LocalQueue"),
    (KUEUE_API, "WorkloadPriorityClass"),
    ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"),
    ("mellanox.com/v1alpha1", "NicClusterPolicy"),
    ("monitoring.coreos.com/v1", "PrometheusRule"),
    (APPLICATION_API, "Application"),
)
# What installs the CRDs of each API group the render uses.
_PROVIDERS = {
    "argoproj.io": "Argo CD (or set cluster_addons_chart_installer=helm to install the charts from the controller)",
    "kueue.x-k8s.io": "the Kueue chart",
    "k8s.cni.cncf.io": "the NVIDIA Network Operator chart",
    "mellanox.com": "the NVIDIA Network Operator chart",
    "monitoring.coreos.com": "the Prometheus Operator (kube-prometheus-stack)",
}


def kind_id(api_version, kind):
    """The key of a kind in ``live``: 'kueue.x-k8s.io/v1beta2 ClusterQueue'."""
    return f"{api_version} {kind}"


def _group(api_version):
    return api_version.rpartition("/")[0]


def object_key(document):
    """(group, kind, namespace, name): what identifies an object whatever version it is read at."""
    metadata = document.get("metadata") or {}
    return (_group(document["apiVersion"]), document["kind"], metadata.get("namespace") or "", metadata["name"])


def describe(document):
    """'ResourceQuota llm/team-quota', 'ClusterQueue llm': an object as the report names it."""
    metadata = document.get("metadata") or {}
    where = f"{metadata['namespace']}/" if metadata.get("namespace") else ""
    return f"{document['kind']} {where}{metadata['name']}"


def rendered_objects(files):
    """The objects ``kubectl kustomize`` builds from ``files`` (``tree(dc)``), in the kustomization's order.

    The kustomization's ``labels`` (``includeSelectors: false``) are set on each object's metadata.labels, as
    kustomize's label transformer does (its value wins over the object's own).
    """
    kustomization = yaml.safe_load(files["kustomization.yaml"])
    labels = {}
    for entry in kustomization.get("labels") or []:
        labels.update(entry.get("pairs") or {})
    objects = []
    for path in kustomization["resources"]:
        for document in yaml.safe_load_all(files[path]):
            if not document:
                continue
            metadata = document.setdefault("metadata", {})
            metadata["labels"] = dict(metadata.get("labels") or {}, **labels)
            objects.append((path, document))
    return objects


def is_ours(document, name):
    """Labelled by the collection for datacenter ``name``: the only objects direct apply may prune."""
    labels = (document.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in MANAGED_BY.items()) and labels.get(DATACENTER_LABEL) == name


def apply_order(documents):
    """CRDs first (their kinds must exist before objects of them), then Namespaces, then the rest, each in render order."""
    rank = {CRD_KIND: 0, "Namespace": 1}
    return sorted(documents, key=lambda document: rank.get(document["kind"], 2))


def plan(name, files, live, charts=True, check_mode=False, chart_runs=None):
    """What direct apply does to datacenter ``name``'s cluster.

    ``live`` maps ``kind_id`` of each kind read (``RENDERED_KINDS``, and with charts those of ``_addons_charts``) to the
    list of that kind's objects in the cluster, or to None when the cluster does not serve the kind. ``charts``: apply
    the charts' Argo CD Applications; ``chart_runs`` (cluster_addons_chart_installer: helm): instead of the Applications,
    the objects of each chart's ``helm template`` (``{release, namespace, objects}`` per chart), and a Namespace per
    release namespace the cluster does not have. Returns ``{name, problems, batches, prune, create, existing}``:
    batches are ``{definitions, wait_condition}`` (CRDs, waited for until Established; Namespaces and the charts'
    objects but their Deployments; the charts' Deployments, waited for until Available, since their webhooks must answer
    before objects of their kinds are written; everything else), prune the objects to delete (namespaced ones before
    Namespaces; never a CRD), create and existing the descriptions of what is new or already there. In check mode the
    batches hold only the objects that exist, and nothing is waited for: the API cannot dry-run an object in a
    namespace that the same run would create, and what is new is known already.
    """
    rendered = rendered_objects(files)
    wanted = {object_key(document) for _path, document in rendered}
    helm = chart_runs is not None
    applied = [document for path, document in rendered
               if path != ROOT_APPLICATION_FILE and ((charts and not helm) or document["apiVersion"] != APPLICATION_API)]
    live_objects = {}
    for objects in live.values():
        for document in objects or []:
            live_objects[object_key(document)] = document
    problems = []
    if helm:
        chart_objects, duplicates = _chart_objects(name, chart_runs, live_objects, {object_key(document) for document in applied})
        applied += chart_objects
        wanted.update(object_key(document) for document in chart_objects)
        if duplicates:
            problems.append(f"{name}: {', '.join(duplicates)} {'is' if len(duplicates) == 1 else 'are'} rendered twice with different "
                            f"contents (by two charts, or by a chart and the render): leave it to one of them (for example "
                            f"nfd.enabled: false in all but one chart's values), then apply again.")
    missing = sorted({kind_id(document["apiVersion"], document["kind"]) for document in applied
                      if document["kind"] != CRD_KIND and live.get(kind_id(document["apiVersion"], document["kind"]), []) is None
                      and not _defined_by(document, applied)})
    if missing:
        providers = sorted({_PROVIDERS.get(_group(item.split()[0]), "its operator") for item in missing})
        problems.append(f"{name}: the cluster does not serve {', '.join(missing)}, which the render holds: install "
                        f"{_words(providers)} first, then apply again.")
    foreign = [describe(document) for document in applied
               if object_key(document) in live_objects and not is_ours(live_objects[object_key(document)], name)]
    if foreign:
        problems.append(f"{name}: {', '.join(foreign)} {'exists' if len(foreign) == 1 else 'exist'} without the labels {_selector(name)}, "
                        f"and direct apply never "
                        f"takes over objects it did not make: delete them or add those labels, then apply again.")
    namespaces = {document["metadata"]["name"] for document in applied if document["kind"] == "Namespace"}
    namespaces.update(document["metadata"]["name"] for document in live.get(kind_id("v1", "Namespace")) or [])
    absent = sorted({document["metadata"]["namespace"] for document in applied
                     if document["metadata"].get("namespace") and document["metadata"]["namespace"] not in namespaces})
    if absent:
        problems.append(f"{name}: namespace {', '.join(absent)} does not exist and the render does not make it "
                        f"(Argo CD and Prometheus bring theirs): create it, then apply again.")
    ordered = apply_order(applied)
    if check_mode:
        ordered = [document for document in ordered if object_key(document) in live_objects]
    stages = {CRD_KIND: [], "charts": [], "workloads": [], "rest": []}
    for document in ordered:
        from_chart = CHART_LABEL in document["metadata"].get("labels", {})
        stage = CRD_KIND if document["kind"] == CRD_KIND else "workloads" if from_chart and document["kind"] == "Deployment" \
            else "charts" if from_chart or document["kind"] == "Namespace" else "rest"
        stages[stage].append(document)
    waits = {CRD_KIND: ESTABLISHED, "workloads": AVAILABLE}
    batches = []
    for stage, definitions in stages.items():
        wait_condition = None if check_mode else waits.get(stage)
        if batches and wait_condition is None and batches[-1]["wait_condition"] is None:
            batches[-1]["definitions"] += definitions  # nothing to wait for in between: one call
        elif definitions:
            batches.append({"definitions": definitions, "wait_condition": wait_condition})
    prune = [_reference(document) for key, document in sorted(live_objects.items(), key=lambda item: (item[0][1] == "Namespace", item[0]))
             if key not in wanted and key[1] != CRD_KIND and is_ours(document, name) and not document["metadata"].get("deletionTimestamp")]
    return {
        "name": name,
        "problems": problems,
        "batches": batches,
        "prune": prune,
        "create": [describe(document) for document in apply_order(applied) if object_key(document) not in live_objects],
        "existing": [describe(document) for document in apply_order(applied) if object_key(document) in live_objects],
    }


def _chart_objects(name, chart_runs, live_objects, rendered_keys):
    """The charts' objects to apply, each once, and the descriptions of those two charts (or a chart and the render) hold with
    different contents. A release namespace is made (and later pruned) only when the cluster lacks it or it is the collection's."""
    objects, seen, duplicates = [], {}, []
    for document in release_namespaces(chart_runs, name):
        key = object_key(document)
        if key not in rendered_keys and (key not in live_objects or is_ours(live_objects[key], name)):
            seen[key] = document
            objects.append(document)
    for run in chart_runs:
        for document in run["objects"]:
            key = object_key(document)
            if key in rendered_keys:
                duplicates.append(describe(document))
            elif key not in seen:
                seen[key] = document
                objects.append(document)
            elif seen[key] != document and describe(document) not in duplicates:
                duplicates.append(describe(document))
    return objects, duplicates


def _defined_by(document, applied):
    """Whether a CRD applied in the same run defines the kind of ``document``."""
    group = _group(document["apiVersion"])
    return any(crd["kind"] == CRD_KIND and crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == document["kind"]
               for crd in applied)


def _words(items):
    """'a', 'a and b', 'a, b and c'."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _reference(document):
    metadata = {"name": document["metadata"]["name"]}
    if document["metadata"].get("namespace"):
        metadata["namespace"] = document["metadata"]["namespace"]
    return {"apiVersion": document["apiVersion"], "kind": document["kind"], "metadata": metadata}


def _selector(name):
    return ",".join(f"{key}={value}" for key, value in dict(MANAGED_BY, **{DATACENTER_LABEL: name}).items())


def report(apply_plan, apply_results):
    """What the run did (or would do, in check mode): ``{created, changed, pruned}`` lists of object descriptions.

    ``apply_results`` are kubernetes.core.k8s results of the plan's batches, in order: for a batch of several objects,
    ``result.results`` holds one result per object; for one object, the result is the module's own.
    """
    outcomes = []
    for batch, result in zip(apply_plan["batches"], apply_results):
        per_object = (result.get("result") or {}).get("results") if len(batch["definitions"]) > 1 else [result]
        outcomes.extend(zip(batch["definitions"], per_object or []))
    existing = set(apply_plan["existing"])
    return {
        "created": list(apply_plan["create"]),
        "changed": [describe(document) for document, outcome in outcomes if outcome.get("changed") and describe(document) in existing],
        "pruned": [describe(document) for document in apply_plan["prune"]],
    }
