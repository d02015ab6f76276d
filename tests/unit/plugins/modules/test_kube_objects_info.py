# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""kube_objects_info's reads: a kind the cluster does not serve, and a kind still in a stale discovery cache."""

from __future__ import annotations

from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import ResourceNotFoundError, api_exception

from ansible_collections.onprem.gpu.plugins.modules.kube_objects_info import read_kinds

QUEUE = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "alpha", "uid": "u1", "labels": {"a": "b"},
                                                                                      "resourceVersion": "7"}, "spec": {}}


class Listed:
    def __init__(self, items):
        self.items = items

    def to_dict(self):
        return {"items": self.items}


class Resource:
    def __init__(self, served):
        self.served = served

    def get(self):
        if not self.served["now"]:
            raise api_exception(ApiException(status=404, reason="Not Found"))
        return Listed(self.served["items"])


class Resources:
    """Discovery: `cached` kinds answer lookups until invalidate_cache(), then only the kinds the server serves now."""

    def __init__(self, cached, served):
        self.known, self.served, self.invalidations = set(cached), served, 0

    def get(self, api_version, kind):
        if (api_version, kind) not in self.known:
            raise ResourceNotFoundError(f"No matches found for {kind}")
        return Resource(self.served[(api_version, kind)])

    def invalidate_cache(self):
        self.invalidations += 1
        self.known = {key for key, served in self.served.items() if served["now"]}


class Client:
    def __init__(self, cached, served):
        self.resources = Resources(cached, served)


KIND = ("kueue.x-k8s.io/v1beta2", "ClusterQueue")
WANTED = [{"api_version": KIND[0], "kind": KIND[1]}]


def test_a_served_kind_is_listed_with_only_its_identity_when_asked():
    client = Client([KIND], {KIND: {"now": True, "items": [QUEUE]}})
    [entry] = read_kinds(client, WANTED, metadata_only=True)
    assert entry["api_found"] is True
    assert entry["resources"] == [{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
                                   "metadata": {"name": "alpha", "uid": "u1", "labels": {"a": "b"}}}]
    assert client.resources.invalidations == 0


def test_a_kind_the_cluster_does_not_serve_is_reported_absent():
    client = Client([], {KIND: {"now": False, "items": []}})
    assert read_kinds(client, WANTED) == [{"api_version": KIND[0], "kind": KIND[1], "api_found": False, "resources": []}]


def test_a_kind_whose_crd_was_removed_since_discovery_was_cached_is_absent_after_discovery_is_read_again():
    # Kueue uninstalled: the cached discovery still lists ClusterQueue, the server answers 404 to the list.
    client = Client([KIND], {KIND: {"now": False, "items": []}})
    assert read_kinds(client, WANTED) == [{"api_version": KIND[0], "kind": KIND[1], "api_found": False, "resources": []}]
    assert client.resources.invalidations == 1
