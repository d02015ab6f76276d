# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""Pure logic of a control plane: what its files say of its state, and what its API server answers.

No Ansible import: the kube_control_plane_state and kube_control_plane_ready modules read, these judge, and tests/unit
calls them directly. Each problem is one sentence; the modules join them with ' '.
"""

from __future__ import annotations

import json

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"


def state_problems(host, address, initialised, apiserver_manifest, admin_kubeconfig, apiserver_manifest_path, input_problems=()):
    """The inventory's problems, then a missing advertise address, then a control plane left half initialised.

    initialised: the admin kubeconfig exists; apiserver_manifest: the API server's static pod manifest exists. kubeadm
    writes both, so one without the other is an init or join that stopped half way.
    """
    problems = list(input_problems)
    if not address:
        problems.append(f"{host} has no address for its API server (kube_control_plane_advertise_address is empty and the host has no"
                        " default IPv4 route); set kube_control_plane_advertise_address.")
    if initialised != apiserver_manifest:
        found = f"{apiserver_manifest_path} but no {admin_kubeconfig}" if apiserver_manifest else f"{admin_kubeconfig} but no API server manifest"
        problems.append(f"{host} has {found}: a kubeadm init or join stopped half way; run `kubeadm reset -f` on it and run the play again.")
    return problems


def node_kubelet_version(stdout):
    """The kubeletVersion and labels of `kubectl get node NAME --output json`, (None, {}) when it is not a Node's JSON."""
    try:
        node = json.loads(stdout)
    except ValueError:
        return None, {}
    if not isinstance(node, dict):
        return None, {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    version = ((node.get("status") or {}).get("nodeInfo") or {}).get("kubeletVersion")
    return version, labels


def ready_problem(host, cluster_name, node_name, version, readyz, node):
    """The one sentence saying why the control plane is not verified, or None.

    readyz and node are (rc, stdout, stderr) of `kubectl get --raw /readyz` and `kubectl get node NAME --output json`.
    The API server must answer `ok`, and the node must exist, carry the control-plane label and run kubelet v<version>.
    """
    version = version[1:] if version.startswith("v") else version
    readyz_rc, readyz_out, readyz_err = readyz
    if readyz_rc != 0 or readyz_out.strip() != "ok":
        why = (readyz_err or "").strip() or readyz_out.strip()
        return f"{host}: the API server of the {cluster_name} cluster is not ready ({why}); see `journalctl -u kubelet`."
    node_rc, node_out, node_err = node
    kubelet_version, labels = node_kubelet_version(node_out) if node_rc == 0 else (None, {})
    if node_rc == 0 and CONTROL_PLANE_LABEL in labels and kubelet_version == f"v{version}":
        return None
    why = (node_err or "").strip() or "wrong labels or kubelet version"
    return f"{host}: the cluster has no control-plane node {node_name} at v{version} ({why})."
