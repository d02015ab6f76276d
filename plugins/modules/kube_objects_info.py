#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kube_objects_info
short_description: List every object of several kinds from a Kubernetes cluster in one task
version_added: 0.1.0
description:
  - Lists, across all namespaces, the objects of each kind of O(kinds) with one API client and one discovery of the
    cluster's API groups, where C(kubernetes.core.k8s_info) in a loop would start a client and discover the API once per kind.
  - A kind the cluster does not serve (its CRD is not installed) is reported with RV(kinds[].api_found=false), not as a failure.
  - Changes nothing. The cluster_addons role uses it to read what a datacenter's cluster holds before a direct apply.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
attributes:
  platform:
    platforms: posix
requirements:
  - kubernetes (the Python client) on the host that runs the module
options:
  kubeconfig:
    description: The kubeconfig file to reach the cluster with.
    type: path
    required: true
  context:
    description: The kubeconfig context to use; its current context when unset.
    type: str
  kinds:
    description: The kinds to list.
    type: list
    elements: dict
    required: true
    suboptions:
      api_version:
        description: The kind's C(apiVersion), for example V(v1) or V(kueue.x-k8s.io/v1beta2).
        type: str
        required: true
      kind:
        description: The kind, for example V(Namespace).
        type: str
        required: true
  metadata_only:
    description:
      - Return each object's C(apiVersion), C(kind) and only the C(metadata) fields C(name), C(namespace), C(labels),
        C(uid) and C(deletionTimestamp), never its C(spec), C(data) or C(status).
      - Set it when listing kinds such as Secrets, whose contents must not reach the play's results or logs.
    type: bool
    default: false
notes:
  - When the API does not answer the module fails with RV(api_unreachable=true), so a caller can say so in its own words.
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Read the namespaces and Kueue ClusterQueues of a cluster
  onprem.gpu.kube_objects_info:
    kubeconfig: inventories/onprem-dc1/artifacts/dc1/admin.conf
    kinds:
      - {api_version: v1, kind: Namespace}
      - {api_version: kueue.x-k8s.io/v1beta2, kind: ClusterQueue}
  register: cluster
"""

RETURN = r"""
kinds:
  description: One entry per kind of O(kinds), in order.
  returned: success
  type: list
  elements: dict
  contains:
    api_version:
      description: The kind's C(apiVersion), as asked.
      type: str
    kind:
      description: The kind, as asked.
      type: str
    api_found:
      description: Whether the cluster serves the kind.
      type: bool
    resources:
      description: Its objects, each with C(apiVersion) and C(kind) set (only their identity and labels with O(metadata_only));
        empty when the kind is not served.
      type: list
      elements: dict
api_unreachable:
  description: True when the failure is that the API did not answer (or refused the kubeconfig's credentials).
  returned: failure
  type: bool
"""

import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

try:
    from kubernetes import config as kube_config
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import NotFoundError, ResourceNotFoundError
except ImportError:
    KUBERNETES_IMPORT_ERROR = traceback.format_exc()
else:
    KUBERNETES_IMPORT_ERROR = None


METADATA_FIELDS = ("name", "namespace", "labels", "uid", "deletionTimestamp")


def metadata_of(document):
    """An object's apiVersion, kind and the identifying part of its metadata."""
    metadata = document.get("metadata") or {}
    return {"apiVersion": document.get("apiVersion"), "kind": document.get("kind"),
            "metadata": {field: metadata[field] for field in METADATA_FIELDS if metadata.get(field) is not None}}


def list_kind(client, api_version, kind):
    """The items of a kind across namespaces, or None when the cluster does not serve it.

    The dynamic client keeps its discovery in a file between runs (per API server): a kind whose CRD was removed since
    is still in it, and listing it answers 404. Discovery is then read again, once, before the kind is said to be absent.
    """
    for attempt in (1, 2):
        try:
            resource = client.resources.get(api_version=api_version, kind=kind)
            # The dynamic client sets apiVersion and kind on each item of a list.
            return resource.get().to_dict().get("items") or []
        except ResourceNotFoundError:
            return None
        except NotFoundError:
            if attempt == 2:
                return None
            client.resources.invalidate_cache()
    return None


def read_kinds(client, kinds, metadata_only=False):
    """The objects of each kind, listed across namespaces; api_found=False for a kind the cluster does not serve."""
    read = []
    for wanted in kinds:
        items = list_kind(client, wanted["api_version"], wanted["kind"])
        entry = {"api_version": wanted["api_version"], "kind": wanted["kind"], "api_found": items is not None, "resources": []}
        if items:
            entry["resources"] = [metadata_of(item) for item in items] if metadata_only else items
        read.append(entry)
    return read


def main():
    module = AnsibleModule(
        argument_spec={
            "kubeconfig": {"type": "path", "required": True},
            "context": {"type": "str"},
            "kinds": {"type": "list", "elements": "dict", "required": True,
                      "options": {"api_version": {"type": "str", "required": True}, "kind": {"type": "str", "required": True}}},
            "metadata_only": {"type": "bool", "default": False},
        },
        supports_check_mode=True,
    )
    if KUBERNETES_IMPORT_ERROR:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=KUBERNETES_IMPORT_ERROR)
    kubeconfig = module.params["kubeconfig"]
    # Discovery fails many ways (TLS, connection refused, 401): each is said in one sentence.
    try:
        client = DynamicClient(kube_config.new_client_from_config(config_file=kubeconfig, context=module.params["context"]))
    except Exception as error:  # pylint: disable=broad-exception-caught
        module.fail_json(msg=f"The Kubernetes API of {kubeconfig} does not answer: {error}", api_unreachable=True)
    try:
        kinds = read_kinds(client, module.params["kinds"], module.params["metadata_only"])
    except Exception as error:  # pylint: disable=broad-exception-caught
        module.fail_json(msg=f"Listing the objects of {kubeconfig}'s cluster failed: {error}", api_unreachable=False)
    module.exit_json(changed=False, kinds=kinds)


if __name__ == "__main__":
    main()
