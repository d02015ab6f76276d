# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster_addons filters' plumbing: where a datacenter's kubeconfig is, and how kube_objects_info results become ``live``."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.filter.cluster_addons import cluster_addons_apply_plan, cluster_addons_with_charts, kubeconfig
from ansible_collections.onprem.gpu.plugins.module_utils._addons_render import dump


@pytest.mark.parametrize("anchor, configured, path", [
    ({"inventory_dir": "/srv/inv"}, "", "/srv/inv/artifacts/dc1/admin.conf"),
    ({"inventory_dir": "/srv/inv", "kube_cluster_name": "gpu-a"}, "", "/srv/inv/artifacts/gpu-a/admin.conf"),
    ({"inventory_dir": "/srv/inv", "kube_control_plane_kubeconfig_dir": "/etc/kube"}, "", "/etc/kube/dc1/admin.conf"),
    ({"inventory_dir": "/srv/inv"}, "/home/ops/dc1.conf", "/home/ops/dc1.conf"),
])
def test_the_kubeconfig_is_where_kube_control_plane_fetches_it_unless_given(anchor, configured, path):
    assert kubeconfig(anchor, "dc1", configured) == path


def test_reads_become_live_objects_and_unserved_kinds():
    ours = {"app.kubernetes.io/managed-by": "onprem.gpu", "onprem.gpu/datacenter": "dc1"}
    files = {"kustomization.yaml": dump([{"labels": [{"pairs": ours}], "resources": ["q.yaml"]}]),
             "q.yaml": dump([{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "llm"}}])}
    plans = [{"name": "dc1", "kubeconfig": "/k", "files": files}]
    queue = {"api_version": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue"}
    gone = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "audio", "labels": ours}}
    (result,) = cluster_addons_apply_plan(plans, [{"__cluster_addons_plan": plans[0], "kinds": [dict(queue, api_found=True, resources=[gone])]}])
    assert result["problems"] == [] and result["prune"] == [{"apiVersion": gone["apiVersion"], "kind": "ClusterQueue", "metadata": {"name": "audio"}}]
    assert result["batches"][0]["name"] == "dc1" and result["batches"][0]["kubeconfig"] == "/k"
    (result,) = cluster_addons_apply_plan(plans, [{"__cluster_addons_plan": plans[0], "kinds": [dict(queue, api_found=False, resources=[])]}])
    assert result["problems"][0].startswith("dc1: the cluster does not serve kueue.x-k8s.io/v1beta2 ClusterQueue, which the render holds")


def test_helm_template_results_become_chart_objects_or_one_sentence_each():
    plans = [{"name": "dc1", "kinds": [{"api_version": "v1", "kind": "Namespace"}]}]
    base = {"datacenter": "dc1", "version": "1.0.0", "problem": None, "argv": ["/opt/helm", "template"], "release": "x", "namespace": "x"}
    results = [
        {"__cluster_addons_chart": dict(base, chart="ok"), "rc": 0,
         "stdout": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: op}\n"},
        {"__cluster_addons_chart": dict(base, chart="gone"), "rc": 2, "failed": True,
         "msg": "[Errno 2] No such file or directory: b'/opt/helm'"},
        {"__cluster_addons_chart": dict(base, chart="bad"), "rc": 1, "stderr": "Error: chart \"bad\" version \"1.0.0\" not found\n"},
        {"__cluster_addons_chart": dict(base, chart="git", argv=None, problem="the git chart comes from git (…)."), "skipped": True},
    ]
    (plan,) = cluster_addons_with_charts(plans, results)
    assert plan["chart_runs"] == [{"release": "x", "namespace": "x", "objects": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "op", "namespace": "x", "labels": {
            "app.kubernetes.io/managed-by": "onprem.gpu", "onprem.gpu/datacenter": "dc1", "onprem.gpu/chart": "x"}}}]}]
    assert plan["chart_problems"] == [
        "dc1: the gone chart 1.0.0 was not rendered: /opt/helm is not on the controller (cluster_addons_helm): install Helm 3.8 or later, "
        "or set cluster_addons_chart_installer=argocd.",
        "dc1: the bad chart 1.0.0 was not rendered by helm template (Error: chart \"bad\" version \"1.0.0\" not found): check its "
        "repository, version and values.",
        "dc1: the git chart comes from git (…).",
    ]
    kinds = [(kind["api_version"], kind["kind"]) for kind in plan["kinds"]]
    assert kinds[0] == ("v1", "Namespace") and ("apps/v1", "Deployment") in kinds and ("v1", "Secret") in kinds
    assert len(kinds) == len(set(kinds))
