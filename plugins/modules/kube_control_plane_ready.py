#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kube_control_plane_ready
short_description: Ask the API server whether it is ready and read a control-plane node, and check both, in one task
version_added: 0.1.0
description:
  - Runs C(kubectl get --raw /readyz) (with a 10 s request timeout) and C(kubectl get node) for O(node_name), with O(kubeconfig).
  - Fails with one sentence unless the API server answers C(ok) and the node exists, has the
    C(node-role.kubernetes.io/control-plane) label and runs kubelet C(v)O(version).
  - It changes nothing; run it where O(kubeconfig) is, such as on the cluster's first control-plane host.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
attributes:
  platform:
    platforms: posix
options:
  kubeconfig:
    description: The kubeconfig kubectl uses, such as the cluster's admin kubeconfig.
    type: path
    required: true
  node_name:
    description: The Node that must be a control-plane node of the cluster.
    type: str
    required: true
  version:
    description: The kubelet version the node must run, with or without its leading C(v).
    type: str
    required: true
  cluster_name:
    description: The cluster's name, which the failure names.
    type: str
    required: true
  host:
    description: The inventory name of the control-plane host, which starts the failure.
    type: str
    required: true
  kubectl:
    description: The kubectl to run, a name looked up in the PATH or a path.
    type: str
    default: kubectl
seealso:
  - module: onprem.gpu.kube_objects_info
"""

EXAMPLES = r"""
- name: Check that the API server answers and the node is a control-plane node of this cluster
  onprem.gpu.kube_control_plane_ready:
    kubeconfig: /etc/kubernetes/admin.conf
    node_name: "{{ inventory_hostname }}"
    version: 1.35.4
    cluster_name: dc1
    host: "{{ inventory_hostname }}"
  delegate_to: "{{ groups['control_plane'][0] }}"
"""

RETURN = r"""
readyz:
  description: What the API server answered on C(/readyz) (C(ok)).
  returned: success
  type: str
  sample: ok
kubelet_version:
  description: The node's C(status.nodeInfo.kubeletVersion).
  returned: success
  type: str
  sample: v1.35.4
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._kube_control_plane import node_kubelet_version, ready_problem


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kubeconfig=dict(type="path", required=True),
            node_name=dict(type="str", required=True),
            version=dict(type="str", required=True),
            cluster_name=dict(type="str", required=True),
            host=dict(type="str", required=True),
            kubectl=dict(type="str", default="kubectl"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    kubectl = module.get_bin_path(params["kubectl"]) if "/" not in params["kubectl"] else params["kubectl"]
    if kubectl is None:
        # Said in the sentence of an API server that does not answer, as a kubectl command that cannot run was.
        missing = (127, "", f"{params['kubectl']} not found")
        readyz, node = missing, missing
    else:
        base = [kubectl, "--kubeconfig", params["kubeconfig"]]
        readyz = module.run_command(base + ["get", "--raw", "/readyz", "--request-timeout", "10s"])
        node = module.run_command(base + ["get", "node", params["node_name"], "--output", "json"])
    problem = ready_problem(params["host"], params["cluster_name"], params["node_name"], params["version"], readyz, node)
    if problem:
        module.fail_json(msg=problem)
    module.exit_json(changed=False, readyz=readyz[1].strip(), kubelet_version=node_kubelet_version(node[1])[0])


if __name__ == "__main__":
    main()
