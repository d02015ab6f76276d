# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Direct apply of a rendered tree: the objects kustomize would build, their order, what to prune, and the refusals."""

from __future__ import annotations

import copy

import pytest
from test__addons import description

from ansible_collections.onprem.gpu.plugins.module_utils._addons import datacenter
from ansible_collections.onprem.gpu.plugins.module_utils._addons_apply import (
    RENDERED_KINDS,
    apply_order,
    describe,
    kind_id,
    plan,
    rendered_objects,
    report,
)
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import tree

OURS = {"app.kubernetes.io/managed-by": "onprem.gpu", "onprem.gpu/datacenter": "dc1"}


def files(**changes):
    return tree(datacenter(description(**changes)))


def served(objects=(), namespaces=("argocd", "monitoring")):
    """Every rendered kind served, holding ``objects`` and the namespaces of Argo CD and Prometheus."""
    live = {kind_id(api_version, kind): [] for api_version, kind in RENDERED_KINDS}
    live[kind_id("v1", "Namespace")] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}} for name in namespaces]
    for document in objects:
        live[kind_id(document["apiVersion"], document["kind"])].append(document)
    return live


def live_copy(documents):
    return [copy.deepcopy(document) for _path, document in documents]


def test_objects_are_the_kustomization_resources_with_its_labels():
    rendered = files()
    objects = rendered_objects(rendered)
    assert sorted({path for path, _document in objects}) == sorted(path for path in rendered if path != "kustomization.yaml")
    assert all(OURS.items() <= document["metadata"]["labels"].items() for _path, document in objects)
    # The object's own labels stay beside the kustomization's.
    namespace = next(document for _path, document in objects if document["kind"] == "Namespace" and document["metadata"]["name"] == "llm")
    assert OURS.items() | {("onprem.gpu/team", "llm"), ("pod-security.kubernetes.io/enforce", "baseline")} <= namespace["metadata"]["labels"].items()


def test_every_rendered_kind_is_read_and_prunable():
    kinds = {(document["apiVersion"], document["kind"]) for _path, document in rendered_objects(files())}
    assert kinds <= set(RENDERED_KINDS)


def test_crds_first_then_namespaces_then_the_rest_in_render_order():
    kinds = ["ConfigMap", "Namespace", "CustomResourceDefinition", "ClusterQueue", "Namespace"]
    documents = [{"kind": kind, "n": index} for index, kind in enumerate(kinds)]
    assert [(document["kind"], document["n"]) for document in apply_order(documents)] == [
        ("CustomResourceDefinition", 2), ("Namespace", 1), ("Namespace", 4), ("ConfigMap", 0), ("ClusterQueue", 3)]


def test_a_fresh_cluster_gets_everything_but_the_app_of_apps():
    rendered = files()
    result = plan("dc1", rendered, served())
    assert result["problems"] == [] and result["prune"] == []
    (batch,) = result["batches"]
    applied = batch["definitions"]
    assert batch["wait_condition"] is None
    assert len(applied) == len(rendered_objects(rendered)) - 1
    assert "Application argocd/dc1-cluster-addons" not in [describe(document) for document in applied]
    assert applied[0]["kind"] == "Namespace" and {document["kind"] for document in applied[:3]} == {"Namespace"}
    assert result["create"] == [describe(document) for document in applied] and result["existing"] == []


def test_without_charts_the_applications_are_left_out_and_their_crd_is_not_needed():
    live = served()
    live[kind_id("argoproj.io/v1alpha1", "Application")] = None
    result = plan("dc1", files(), live, charts=False)
    assert result["problems"] == []
    assert not [document for document in result["batches"][0]["definitions"] if document["kind"] == "Application"]


def test_a_crd_in_the_render_goes_first_is_waited_for_and_serves_its_kind():
    rendered = files()
    crd = ("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: clusterqueues.kueue.x-k8s.io}\n"
           "spec: {group: kueue.x-k8s.io, names: {kind: ClusterQueue, plural: clusterqueues}}\n")
    rendered["crds/kueue.yaml"] = crd
    rendered["kustomization.yaml"] = rendered["kustomization.yaml"].replace("resources:\n", "resources:\n- crds/kueue.yaml\n")
    live = served()
    live[kind_id("kueue.x-k8s.io/v1beta2", "ClusterQueue")] = None
    result = plan("dc1", rendered, live)
    assert result["problems"] == []
    crds, rest = result["batches"]
    assert crds["wait_condition"] == {"type": "Established", "status": "True"}
    assert [document["kind"] for document in crds["definitions"]] == ["CustomResourceDefinition"]
    assert "CustomResourceDefinition" not in {document["kind"] for document in rest["definitions"]}


def test_prune_takes_only_labelled_objects_of_this_datacenter_that_the_render_dropped():
    rendered = files()
    live = live_copy(rendered_objects(rendered))
    gone_team = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "audio", "labels": dict(OURS)}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-quota", "namespace": "audio", "labels": dict(OURS)}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "audio", "labels": dict(OURS)}},
    ]
    not_ours = [
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "ops"}},
        {"apiVersion": "v1", "kind": "ResourceQuota",
         "metadata": {"name": "team-quota", "namespace": "scratch", "labels": {"app.kubernetes.io/managed-by": "onprem.gpu"}}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "dc2-team",
                                                                                      "labels": dict(OURS, **{"onprem.gpu/datacenter": "dc2"})}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "leaving", "labels": dict(OURS), "deletionTimestamp": "2026-12-01T00:00:00Z"}},
    ]
    result = plan("dc1", rendered, served(live + gone_team + not_ours))
    assert result["problems"] == [] and result["create"] == []
    # Namespaced objects before Namespaces; references only.
    assert result["prune"] == [
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-quota", "namespace": "audio"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "audio"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "audio"}},
    ]


def test_the_app_of_apps_is_not_pruned_though_it_is_not_applied():
    rendered = files()
    result = plan("dc1", rendered, served(live_copy(rendered_objects(rendered))))
    assert result["prune"] == [] and "Application argocd/dc1-cluster-addons" not in result["existing"]


def test_check_mode_dry_runs_only_what_exists():
    rendered = files()
    live = [document for document in live_copy(rendered_objects(rendered)) if document["kind"] in ("ClusterQueue", "ResourceFlavor")]
    result = plan("dc1", rendered, served(live), check_mode=True)
    (batch,) = result["batches"]
    assert {document["kind"] for document in batch["definitions"]} == {"ClusterQueue", "ResourceFlavor"}
    assert "Namespace llm" in result["create"] and "ClusterQueue llm" in result["existing"]


REFUSALS = [
    pytest.param(
        {kind_id("kueue.x-k8s.io/v1beta2", kind): None for kind in ("ClusterQueue", "LocalQueue")}
        | {kind_id("monitoring.coreos.com/v1", "PrometheusRule"): None},
        [],
        "dc1: the cluster does not serve kueue.x-k8s.io/v1beta2 ClusterQueue, kueue.x-k8s.io/v1beta2 LocalQueue, monitoring.coreos.com/v1 "
        "PrometheusRule, which the render holds: install the Kueue chart and the Prometheus Operator (kube-prometheus-stack) first, "
        "then apply again.",
        id="kinds-not-served",
    ),
    pytest.param(
        {kind_id("argoproj.io/v1alpha1", "Application"): None},
        [],
        "dc1: the cluster does not serve argoproj.io/v1alpha1 Application, which the render holds: install Argo CD (or set "
        "cluster_addons_chart_installer=helm to install the charts from the controller) first, then apply again.",
        id="no-argo-cd",
    ),
    pytest.param(
        {},
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "llm"}},
         {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
          "metadata": {"name": "vision", "labels": dict(OURS, **{"onprem.gpu/datacenter": "dc2"})}}],
        "dc1: ClusterQueue vision, Namespace llm exist without the labels app.kubernetes.io/managed-by=onprem.gpu,"
        "onprem.gpu/datacenter=dc1, and direct apply never takes over objects it did not make: delete them or add those labels, then "
        "apply again.",
        id="not-ours",
    ),
]


@pytest.mark.parametrize("unserved, existing, sentence", REFUSALS)
def test_refusals(unserved, existing, sentence):
    live = served(existing)
    live.update(unserved)
    assert plan("dc1", files(), live)["problems"] == [sentence]


def test_a_namespace_neither_rendered_nor_in_the_cluster_is_refused():
    assert plan("dc1", files(), served(namespaces=()))["problems"] == [
        "dc1: namespace argocd, monitoring does not exist and the render does not make it (Argo CD and Prometheus bring theirs): "
        "create it, then apply again."]


def test_report_names_created_changed_and_pruned():
    apply_plan = {
        "batches": [{"definitions": [{"kind": "Namespace", "metadata": {"name": "llm"}}, {"kind": "ClusterQueue", "metadata": {"name": "llm"}}]},
                    {"definitions": [{"kind": "PrometheusRule", "metadata": {"name": "onprem-gpu", "namespace": "monitoring"}}]}],
        "create": ["Namespace llm"], "existing": ["ClusterQueue llm", "PrometheusRule monitoring/onprem-gpu"],
        "prune": [{"kind": "ClusterQueue", "metadata": {"name": "audio"}}],
    }
    results = [{"changed": True, "result": {"results": [{"changed": True}, {"changed": False}]}}, {"changed": True}]
    assert report(apply_plan, results) == {"created": ["Namespace llm"], "changed": ["PrometheusRule monitoring/onprem-gpu"],
                                           "pruned": ["ClusterQueue audio"]}
