#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: kube_control_plane_state
short_description: Read whether a control plane is initialised, and check it with the inventory's problems, in one task
version_added: 0.1.0
description:
  - Looks for the admin kubeconfig and the API server's static pod manifest that C(kubeadm init) and C(kubeadm join --control-plane) write.
  - Fails with one sentence per problem, joined by a space, before any change. The problems are the inventory's O(problems), a missing
    advertise address (O(address) empty), and a control plane left half initialised (one of the two files without the other),
    with the C(kubeadm reset -f) to run.
  - It changes nothing on the host.
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - onprem.gpu.read_only
attributes:
  platform:
    platforms: posix
options:
  admin_kubeconfig:
    description: The admin kubeconfig kubeadm writes; the control plane is initialised when it exists.
    type: path
    required: true
  apiserver_manifest:
    description: The API server's static pod manifest kubeadm writes.
    type: path
    default: /etc/kubernetes/manifests/kube-apiserver.yaml
  host:
    description: The host's inventory name, which the sentences name.
    type: str
    required: true
  address:
    description: The address the API server advertises; empty is a problem.
    type: str
    default: ""
  problems:
    description: The inventory's problems, judged on the controller; they come first in the failure.
    type: list
    elements: str
    default: []
seealso:
  - module: ansible.builtin.stat
"""

EXAMPLES = r"""
- name: Look for an initialised control plane, and check the inventory and the advertise address
  onprem.gpu.kube_control_plane_state:
    admin_kubeconfig: /etc/kubernetes/admin.conf
    host: "{{ inventory_hostname }}"
    address: "{{ kube_control_plane_advertise_address }}"
    problems: "{{ inventory_problems }}"
  register: control_plane

- name: Initialise the cluster
  ansible.builtin.command: kubeadm init --config /etc/kubernetes/kubeadm-config.yaml
  when: not control_plane.initialised
"""

RETURN = r"""
initialised:
  description: The admin kubeconfig exists.
  returned: always
  type: bool
apiserver_manifest:
  description: The API server's static pod manifest exists.
  returned: always
  type: bool
problems:
  description: The problems found; the task failed on them.
  returned: failed, when there are problems
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._kube_control_plane import state_problems


def main():
    module = AnsibleModule(
        argument_spec=dict(
            admin_kubeconfig=dict(type="path", required=True),
            apiserver_manifest=dict(type="path", default="/etc/kubernetes/manifests/kube-apiserver.yaml"),
            host=dict(type="str", required=True),
            address=dict(type="str", default=""),
            problems=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    # lexists, as ansible.builtin.stat's exists (which does not follow links).
    initialised = os.path.lexists(params["admin_kubeconfig"])
    apiserver_manifest = os.path.lexists(params["apiserver_manifest"])
    problems = state_problems(params["host"], params["address"], initialised, apiserver_manifest, params["admin_kubeconfig"],
                              params["apiserver_manifest"], params["problems"])
    if problems:
        module.fail_json(msg=" ".join(problems), problems=problems, initialised=initialised, apiserver_manifest=apiserver_manifest)
    module.exit_json(changed=False, initialised=initialised, apiserver_manifest=apiserver_manifest)


if __name__ == "__main__":
    main()
