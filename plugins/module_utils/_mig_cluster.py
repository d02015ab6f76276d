# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A MIG node as its Kubernetes cluster sees it, for a reconfiguration of a live node (mig_reconfigure.yml).

The GPU Operator's mig-manager protocol (NVIDIA/mig-parted ``pkg/mig/reconfigure``): the node components are paused by
setting their ``nvidia.com/gpu.deploy.<component>`` labels to ``paused-for-mig-change`` (a label at ``false`` was set
by someone else and stays), and set back to ``true`` afterwards. The resources the NVIDIA device plugin advertises
under the mixed strategy (k8s-device-plugin ``--mig-strategy=mixed``). The pods a drain evicts (kubectl drain's
filters: DaemonSet pods and mirror pods stay). Plain Python without Ansible imports.
"""

from __future__ import annotations

PAUSED = "paused-for-mig-change"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"


def component_labels(node_labels, component_labels_names):
    """Return ``(paused, restored)``: the component labels to write before and after the change, as mig-manager writes them.

    ``maybeSetPaused``/``maybeSetTrue`` of mig-manager: ``false`` stays ``false``; any other value, absent included,
    becomes ``paused-for-mig-change``, then ``true``.
    """
    node_labels = node_labels or {}
    paused, restored = {}, {}
    for name in component_labels_names:
        kept = node_labels.get(name) == "false"
        paused[name] = "false" if kept else PAUSED
        restored[name] = "false" if kept else "true"
    return paused, restored


def evicted_pods(pods):
    """Return ``namespace/name`` of each pod a drain evicts: all but DaemonSet pods and static (mirror) pods."""
    names = []
    for pod in pods or ():
        metadata = pod.get("metadata") or {}
        owners = metadata.get("ownerReferences") or ()
        if any(owner.get("kind") == "DaemonSet" and owner.get("controller") for owner in owners):
            continue
        if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
            continue
        names.append(f"{metadata.get('namespace', 'default')}/{metadata.get('name')}")
    return sorted(names)


def mixed_strategy_resources(gpus):
    """Return the extended resources the NVIDIA device plugin advertises for ``gpus`` under the mixed MIG strategy.

    ``gpus``: the ``gpus`` result of ``mig_config`` (``mig_enabled``, ``mig_devices``). A GPU outside MIG mode counts
    as one ``nvidia.com/gpu``; each MIG device counts as one ``nvidia.com/mig-<profile>`` (k8s-device-plugin,
    ``--mig-strategy=mixed``). Every key is present, ``nvidia.com/gpu`` even at 0, so that a caller can wait for
    the node to advertise exactly these counts.
    """
    resources = {"nvidia.com/gpu": 0}
    for gpu in gpus:
        if not gpu.get("mig_enabled"):
            resources["nvidia.com/gpu"] += 1
            continue
        for profile, count in (gpu.get("mig_devices") or {}).items():
            key = f"nvidia.com/mig-{profile}"
            resources[key] = resources.get(key, 0) + int(count)
    return resources


def resource_differences(expected, allocatable):
    """Return one ``name: advertised N, expected M`` phrase per GPU resource where ``allocatable`` differs from ``expected``.

    ``expected``: as ``mixed_strategy_resources`` gives it; ``allocatable``: a Node's ``status.allocatable``. A
    ``nvidia.com/mig-*`` resource the node still advertises but the layout has none of must be at 0.
    """
    allocatable = allocatable or {}
    names = set(expected) | {name for name in allocatable if name == "nvidia.com/gpu" or name.startswith("nvidia.com/mig-")}
    differences = []
    for name in sorted(names):
        advertised = _count(allocatable.get(name, "0"))
        if advertised != int(expected.get(name, 0)):
            differences.append(f"{name}: advertised {advertised}, expected {int(expected.get(name, 0))}")
    return differences


def _count(quantity):
    try:
        return int(str(quantity))
    except ValueError:
        return -1
