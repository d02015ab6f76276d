# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Charts in direct apply without Argo CD: the helm template command of each chart Application, its objects, and their plan."""

from __future__ import annotations

import yaml
from test__addons_apply import OURS, files, served

from ansible_collections.onprem.gpu.plugins.module_utils._addons_apply import describe, kind_id, plan, rendered_objects
from ansible_collections.onprem.gpu.plugins.module_utils._addons_charts import chart_applications, chart_objects, release_namespaces, template_run

ESTABLISHED = {"type": "Established", "status": "True"}
AVAILABLE = {"type": "Available", "status": "True"}


def applications():
    return {document["metadata"]["name"]: document for document in chart_applications(rendered_objects(files()))}


def test_every_chart_of_the_render_is_an_application_with_a_helm_source():
    found = applications()
    assert sorted(found) == ["dc1-gpu-operator", "dc1-kueue", "dc1-local-path-provisioner", "dc1-network-operator", "dc1-whereabouts"]
    assert "dc1-cluster-addons" not in found  # the app-of-apps is Argo CD's own


def test_a_chart_from_an_http_repository_is_fetched_with_repo_and_version(tmp_path):
    run = template_run(applications()["dc1-gpu-operator"], "/opt/helm", str(tmp_path), "1.35.4")
    assert run["problem"] is None and run["release"] == "gpu-operator" and run["namespace"] == "gpu-operator"
    assert run["argv"] == ["/opt/helm", "template", "gpu-operator", "gpu-operator", "--repo", "https://helm.ngc.nvidia.com/nvidia",
                           "--version", "v26.7.0", "--namespace", "gpu-operator", "--values", "-", "--include-crds", "--no-hooks",
                           "--kube-version", "1.35.4"]
    values = yaml.safe_load(run["stdin"])
    assert values["driver"]["enabled"] is False and values["mig"]["strategy"] == "mixed"


def test_a_chart_from_an_oci_registry_is_named_with_the_oci_scheme():
    run = template_run(applications()["dc1-kueue"], "helm", "", "")
    assert run["argv"][:6] == ["helm", "template", "kueue", "oci://registry.k8s.io/kueue/charts/kueue", "--version", "0.19.2"]
    assert "--kube-version" not in run["argv"]  # helm's own default when the inventory names no version


def test_an_archive_in_the_folder_wins_over_the_repository_with_or_without_the_v(tmp_path):
    (tmp_path / "gpu-operator-v26.7.0.tgz").write_bytes(b"")
    (tmp_path / "local-path-provisioner-0.0.37.tgz").write_bytes(b"")
    run = template_run(applications()["dc1-gpu-operator"], "helm", str(tmp_path), "1.35.4")
    assert run["argv"][3] == str(tmp_path / "gpu-operator-v26.7.0.tgz") and "--repo" not in run["argv"]
    run = template_run(applications()["dc1-local-path-provisioner"], "helm", str(tmp_path), "1.35.4")
    assert run["argv"][2:4] == ["local-path-provisioner", str(tmp_path / "local-path-provisioner-0.0.37.tgz")]


def test_an_archive_folder_given_relative_to_the_controller_s_directory_is_passed_to_helm_as_an_absolute_path(tmp_path, monkeypatch):
    # helm reads charts/gpu-operator-v26.7.0.tgz (relative, no ./) as chart gpu-operator-v26.7.0.tgz of a repository named charts.
    (tmp_path / "charts").mkdir()
    (tmp_path / "charts" / "gpu-operator-v26.7.0.tgz").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    run = template_run(applications()["dc1-gpu-operator"], "helm", "charts", "1.35.4")
    assert run["argv"][3] == str(tmp_path / "charts" / "gpu-operator-v26.7.0.tgz")


def test_a_chart_from_git_without_its_archive_is_a_problem_not_a_command(tmp_path):
    run = template_run(applications()["dc1-local-path-provisioner"], "helm", str(tmp_path), "1.35.4")
    assert run["argv"] is None
    assert run["problem"] == (
        "the local-path-provisioner chart comes from git (https://github.com/rancher/local-path-provisioner.git, "
        "deploy/chart/local-path-provisioner at v0.0.37), which helm cannot fetch: put its archive (local-path-provisioner-0.0.37.tgz, "
        "helm package of that folder at that tag) in cluster_addons_chart_archives.")


OUTPUT = """---
# Source: x/templates/sa.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  name: operator
  labels: {app: x}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: operator, namespace: x-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: policies.x.example}
spec: {group: x.example, scope: Cluster, names: {kind: Policy, plural: policies}}
---
apiVersion: x.example/v1
kind: Policy
metadata: {name: default}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: elsewhere, namespace: kube-system}
---
apiVersion: v1
kind: List
items:
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: operator}
---
"""
RUN = {"release": "x", "namespace": "x-system"}


def test_chart_objects_get_the_release_namespace_where_namespaced_and_the_collection_labels():
    documents = chart_objects(RUN, OUTPUT, "dc1")
    assert [describe(document) for document in documents] == [
        "ServiceAccount x-system/operator", "ClusterRole operator", "CustomResourceDefinition policies.x.example", "Policy default",
        "ConfigMap kube-system/elsewhere", "Deployment x-system/operator"]
    assert all(document["metadata"]["labels"].items() >= dict(OURS, **{"onprem.gpu/chart": "x"}).items() for document in documents)
    assert documents[0]["metadata"]["labels"]["app"] == "x"  # the chart's own labels stay
    assert "namespace" not in documents[1]["metadata"]  # a template's namespace on a cluster-scoped object: the API drops it


def test_a_kind_another_chart_defines_takes_that_charts_scope():
    rule = "apiVersion: nfd.k8s-sigs.io/v1alpha1\nkind: NodeFeatureRule\nmetadata: {name: nics, namespace: nvidia-network-operator}\n"
    (alone,) = chart_objects(RUN, rule, "dc1")
    assert alone["metadata"]["namespace"] == "nvidia-network-operator"  # unknown kinds are namespaced
    (known,) = chart_objects(RUN, rule, "dc1", {("nfd.k8s-sigs.io", "NodeFeatureRule"): "Cluster"})
    assert "namespace" not in known["metadata"]


def chart_run(name="x", namespace="x-system", output=OUTPUT):
    return {"release": name, "namespace": namespace, "objects": chart_objects({"release": name, "namespace": namespace}, output, "dc1")}


def test_with_helm_the_charts_objects_replace_the_applications_in_four_batches():
    live = served(namespaces=("monitoring", "kube-system"))
    result = plan("dc1", files(), live, charts=True, chart_runs=[chart_run()])
    assert result["problems"] == []
    crds, charts, workloads, rest = result["batches"]
    assert crds["wait_condition"] == ESTABLISHED and [describe(document) for document in crds["definitions"]] == [
        "CustomResourceDefinition policies.x.example"]
    assert charts["wait_condition"] is None
    assert "Namespace x-system" in [describe(document) for document in charts["definitions"]]
    assert {"ServiceAccount x-system/operator", "Policy default", "ClusterRole operator"} <= {describe(d) for d in charts["definitions"]}
    # Every Namespace comes before the charts' objects, the platform's too (its team namespaces).
    kinds = [document["kind"] for document in charts["definitions"]]
    assert kinds.index("ServiceAccount") > max(index for index, kind in enumerate(kinds) if kind == "Namespace")
    assert workloads == {"definitions": [next(d for d in chart_run()["objects"] if d["kind"] == "Deployment")], "wait_condition": AVAILABLE}
    assert "Application" not in {document["kind"] for batch in result["batches"] for document in batch["definitions"]}
    assert {"ClusterQueue llm", "ResourceQuota llm/team-quota"} <= {describe(document) for document in rest["definitions"]}


def test_check_mode_waits_for_nothing():
    live = served(namespaces=("monitoring", "kube-system"))
    existing = chart_run()["objects"]
    for document in existing:
        live.setdefault(kind_id(document["apiVersion"], document["kind"]), []).append(document)
    result = plan("dc1", files(), live, charts=True, check_mode=True, chart_runs=[chart_run()])
    assert result["batches"] and all(batch["wait_condition"] is None for batch in result["batches"])


def test_a_release_namespace_that_exists_and_is_not_the_collections_is_used_as_it_is():
    result = plan("dc1", files(), served(namespaces=("monitoring", "kube-system", "x-system")), charts=True, chart_runs=[chart_run()])
    assert result["problems"] == [] and "Namespace x-system" not in result["create"]
    result = plan("dc1", files(), served(namespaces=("monitoring", "kube-system")), charts=True, chart_runs=[chart_run(namespace="kube-system")])
    assert "Namespace kube-system" not in result["create"]


def test_the_same_object_from_two_charts_is_applied_once_when_equal_and_refused_when_not():
    first, same = chart_run("x"), chart_run("x")
    result = plan("dc1", files(), served(namespaces=("monitoring", "kube-system")), charts=True, chart_runs=[first, same])
    assert result["problems"] == [] and result["create"].count("ClusterRole operator") == 1
    other = chart_run("y")
    result = plan("dc1", files(), served(namespaces=("monitoring", "kube-system")), charts=True, chart_runs=[first, other])
    (problem,) = result["problems"]
    assert problem.startswith("dc1: ServiceAccount x-system/operator, ClusterRole operator, CustomResourceDefinition policies.x.example, "
                              "Policy default, ConfigMap kube-system/elsewhere, Deployment x-system/operator are rendered twice with "
                              "different contents (by two charts, or by a chart and the render)")


def test_a_chart_object_made_by_someone_else_is_never_taken_over():
    live = served(namespaces=("monitoring", "kube-system"))
    live[kind_id("rbac.authorization.k8s.io/v1", "ClusterRole")] = [
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "operator"}}]
    (problem,) = plan("dc1", files(), live, charts=True, chart_runs=[chart_run()])["problems"]
    assert problem.startswith("dc1: ClusterRole operator exists without the labels app.kubernetes.io/managed-by=onprem.gpu,")


def test_a_chart_that_left_the_render_is_pruned_but_never_its_crds():
    live = served(namespaces=("monitoring", "kube-system"))
    for document in [*chart_run()["objects"], *release_namespaces([chart_run()], "dc1")]:
        live.setdefault(kind_id(document["apiVersion"], document["kind"]), []).append(document)
    result = plan("dc1", files(), live, charts=True, chart_runs=[])
    pruned = [describe(document) for document in result["prune"]]
    assert "CustomResourceDefinition policies.x.example" not in pruned
    assert {"ServiceAccount x-system/operator", "ClusterRole operator", "Policy default", "Deployment x-system/operator"} <= set(pruned)
    assert pruned[-1] == "Namespace x-system"  # its namespace last
