# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The cluster_addons filters' plumbing: where a datacenter's kubeconfig is, and how kube_objects_info results become ``live``."""

from __future__ import annotations

import pytest

from ansible_collections.onprem.gpu.plugins.filter.cluster_addons import cluster_addons_apply_plan, kubeconfig
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
