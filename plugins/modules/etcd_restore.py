#!/usr/bin/python
# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
---
module: etcd_restore
short_description: Restore a kubeadm control plane's etcd member from a snapshot
version_added: 0.1.0
description:
  - Follows the etcd and Kubernetes disaster-recovery procedures on one control plane with kubeadm's local etcd,
    stopping the static pods by moving their manifests out of kubelet's manifest directory, running
    C(etcdutl snapshot restore) into a new data directory, swapping it in for the old one (kept, renamed), moving the
    manifests back and waiting until etcd and the API answer.
  - Refuses when etcd answers and the API serves, unless O(force); refuses without O(confirm). A failure after the
    manifests left moves them back before it is reported.
  - It is the internal step of the C(onprem.gpu.etcd_backup) role's C(restore) entry point (C(playbooks/etcd_restore.yml)).
author:
  - onprem.gpu maintainers (@onprem-gpu)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
    details: Reads the node, verifies the snapshot and judges the cluster's health; returns the steps it would take.
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  confirm:
    description: Must be V(true), since a restore replaces every object of the cluster with the snapshot's.
    type: bool
    default: false
  force:
    description: Restore even when etcd answers and the API serves (a roll-back of a healthy cluster).
    type: bool
    default: false
  snapshot:
    description: The snapshot file on the node; empty takes the newest verified snapshot of O(backup_dir).
    type: path
  backup_dir:
    description: Where the C(onprem.gpu.etcd_backup) role keeps verified snapshots (C(etcd-snapshot-*.db) with a C(.json) status).
    type: path
    default: /var/backups/etcd
  member_name:
    description: This member's name when the etcd manifest has no C(--name) (kubeadm uses the node name).
    type: str
    required: true
  peer_url:
    description: This member's peer URL; empty takes the manifest's C(--initial-advertise-peer-urls), else port 2380 of its client URL's host.
    type: str
  initial_cluster:
    description: The restored cluster's members, C(name=peer_url,...); empty makes this member the only one.
    type: str
  manifest_dir:
    description: kubelet's static pod directory.
    type: path
    default: /etc/kubernetes/manifests
  held_dir:
    description: Where the manifests wait while the data directory is replaced (outside O(manifest_dir), which kubelet reads whole).
    type: path
    default: /etc/kubernetes/manifests.etcd-restore
  api_url:
    description: The API server's readiness URL on this node; empty takes C(https://<--advertise-address>:<--secure-port>/readyz)
      from its manifest.
    type: str
  api_ca:
    description: The cluster CA the API server's certificate is checked with.
    type: path
    default: /etc/kubernetes/pki/ca.crt
  endpoints:
    description: etcd's client URL on this node.
    type: str
    default: https://127.0.0.1:2379
  cacert:
    description: The etcd CA certificate.
    type: path
    default: /etc/kubernetes/pki/etcd/ca.crt
  cert:
    description: A client certificate the etcd CA signed.
    type: path
    default: /etc/kubernetes/pki/etcd/healthcheck-client.crt
  key:
    description: Its key.
    type: path
    default: /etc/kubernetes/pki/etcd/healthcheck-client.key
  etcdctl:
    description: The etcdctl program.
    type: str
    default: etcdctl
  etcdutl:
    description: The etcdutl program.
    type: str
    default: etcdutl
  timeout:
    description: Seconds to wait for the API to stop, and for etcd and the API to answer again.
    type: int
    default: 180
"""

EXAMPLES = r"""
- name: Restore the newest verified snapshot on a control plane whose etcd lost its data
  onprem.gpu.etcd_restore:
    confirm: true
    member_name: "{{ inventory_hostname }}"
"""

RETURN = r"""
snapshot:
  description: The snapshot restored (or that would be).
  returned: success
  type: str
status:
  description: Its C(etcdutl snapshot status) (hash, revision, totalKey, totalSize, and version from etcd 3.6).
  returned: success
  type: dict
member:
  description: This member's data_dir, name, peer_url and initial_cluster.
  returned: success
  type: dict
previous_data_dir:
  description: Where the old data directory was kept; null when there was none.
  returned: success
  type: str
cluster_was_healthy:
  description: Whether etcd answered and the API served before the restore (only with O(force)).
  returned: success
  type: bool
actions:
  description: The steps, in order.
  returned: success
  type: list
  elements: str
state:
  description: On failure, where the node was left (V(unchanged), V(manifests back), V(restored)).
  returned: failure
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.onprem.gpu.plugins.module_utils._etcd_restore import RestoreError, restore


def main():
    module = AnsibleModule(
        argument_spec={
            "confirm": {"type": "bool", "default": False},
            "force": {"type": "bool", "default": False},
            "snapshot": {"type": "path"},
            "backup_dir": {"type": "path", "default": "/var/backups/etcd"},
            "member_name": {"type": "str", "required": True},
            "peer_url": {"type": "str"},
            "initial_cluster": {"type": "str"},
            "manifest_dir": {"type": "path", "default": "/etc/kubernetes/manifests"},
            "held_dir": {"type": "path", "default": "/etc/kubernetes/manifests.etcd-restore"},
            "api_url": {"type": "str"},
            "api_ca": {"type": "path", "default": "/etc/kubernetes/pki/ca.crt"},
            "endpoints": {"type": "str", "default": "https://127.0.0.1:2379"},
            "cacert": {"type": "path", "default": "/etc/kubernetes/pki/etcd/ca.crt"},
            "cert": {"type": "path", "default": "/etc/kubernetes/pki/etcd/healthcheck-client.crt"},
            "key": {"type": "path", "default": "/etc/kubernetes/pki/etcd/healthcheck-client.key", "no_log": False},
            "etcdctl": {"type": "str", "default": "etcdctl"},
            "etcdutl": {"type": "str", "default": "etcdutl"},
            "timeout": {"type": "int", "default": 180},
        },
        supports_check_mode=True,
    )
    if not module.params["confirm"]:
        module.fail_json(msg="A restore replaces every object of the cluster with the snapshot's: set confirm (etcd_restore_confirm=true) to run it.",
                         state="unchanged")
    config = dict(module.params, etcdctl=module.get_bin_path(module.params["etcdctl"], required=True),
                  etcdutl=module.get_bin_path(module.params["etcdutl"], required=True))

    def run(argv):
        return module.run_command(argv, environ_update={"LC_ALL": "C", "ETCDCTL_API": "3"})

    try:
        result = restore(config, run, check_mode=module.check_mode)
    except RestoreError as error:
        module.fail_json(msg=str(error), state=error.state)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
