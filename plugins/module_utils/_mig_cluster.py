# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A MIG node as its Kubernetes cluster sees it, for a reconfiguration of a live node (mig_reconfigure.yml).

The GPU Operator's mig-manager protocol (NVIDIA/mig-parted ``pkg/mig/reconfigure``): the node components are paused by
setting their ``nvidia.com/gpu.deploy.<component>`` labels to ``paused-for-mig-change`` (a label at ``false`` was set
by someone else and stays), and set back to ``true`` afterwards; the pods the change then waits out. The resources the
NVIDIA device plugin advertises under the mixed strategy (k8s-device-plugin ``--mig-strategy=mixed``). The pods a drain
evicts (kubectl drain's filters: DaemonSet pods and mirror pods stay). When a wait of the change runs out, what the
node shows and the likely cause, in words. Plain Python without Ansible imports.
"""

from __future__ import annotations

from ansible_collections.onprem.gpu.plugins.module_utils._mig_profiles import mig_resource

PAUSED = "paused-for-mig-change"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
STATE_LABEL = "nvidia.com/mig.config.state"
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
DEVICE_PLUGIN_LABEL = DEPLOY_LABEL_PREFIX + "device-plugin"
MIG_MANAGER_LABEL = DEPLOY_LABEL_PREFIX + "mig-manager"


def component_labels(node_labels, component_labels_names, if_present=()):
    """Return ``(paused, restored)``: the component labels to write before and after the change, as mig-manager writes them.

    ``maybeSetPaused``/``maybeSetTrue`` of mig-manager: ``false`` stays ``false``; any other value, absent included,
    becomes ``paused-for-mig-change``, then ``true``. A label of ``if_present`` (``nvidia.com/gpu.deploy.client``) is
    written only where the node has it with a value: labelling every node would deploy the host GPU clients' DaemonSets
    where nobody asked for them.
    """
    node_labels = node_labels or {}
    paused, restored = {}, {}
    for name in list(component_labels_names) + [name for name in if_present if node_labels.get(name)]:
        kept = node_labels.get(name) == "false"
        paused[name] = "false" if kept else PAUSED
        restored[name] = "false" if kept else "true"
    return paused, restored


def evicted_pods(pods):
    """Return ``namespace/name`` of each pod a drain evicts: all but DaemonSet pods and static (mirror) pods."""
    names = []
    for pod in pods or ():
        metadata = pod.get("metadata") or {}
        if _daemonset_pod(metadata):
            continue
        if MIRROR_ANNOTATION in (metadata.get("annotations") or {}):
            continue
        names.append(f"{metadata.get('namespace', 'default')}/{metadata.get('name')}")
    return sorted(names)


def mixed_strategy_resources(gpus):
    """Return the extended resources the NVIDIA device plugin advertises for ``gpus`` under the mixed MIG strategy.

    ``gpus``: the ``gpus`` result of ``mig_config`` (``mig_enabled``, ``mig_devices``). A GPU outside MIG mode counts
    as one ``nvidia.com/gpu``; each MIG device counts as one of its profile's resource (``mig_resource``:
    ``nvidia.com/mig-1g.10gb``, ``nvidia.com/mig-1g.10gb.me``; k8s-device-plugin ``--mig-strategy=mixed``). Every key
    is present, ``nvidia.com/gpu`` even at 0, so that a caller can wait for the node to advertise exactly these counts.
    """
    resources = {"nvidia.com/gpu": 0}
    for gpu in gpus:
        if not gpu.get("mig_enabled"):
            resources["nvidia.com/gpu"] += 1
            continue
        for profile, count in (gpu.get("mig_devices") or {}).items():
            key = mig_resource(profile)
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


def component_pods(pods, namespace, apps, client_label=None):
    """Return ``namespace/name`` of each pod a MIG change waits out before it touches the GPUs, as mig-manager waits.

    ``waitForPodsToBeDeleted`` of mig-manager (v0.15.0): the pods of ``namespace`` labelled ``app=<one of apps>``, the
    GPU Operator's components; with ``client_label``, also the DaemonSet pods of any namespace whose ``nodeSelector`` has
    that key, the host GPU clients (``waitForPodsWithNodeSelector``). ``pods``: the node's pods, as k8s_info lists them.
    """
    return sorted(_name(pod) for pod in _component_pods(pods, namespace, apps, client_label))


def components_wait_message(pods, namespace, apps, client_label=None):
    """Say which of the pods ``component_pods`` selects are still on the node, in what state, and what likely holds them."""
    left = sorted(_component_pods(pods, namespace, apps, client_label), key=_name)
    if not left:
        return "none of them is left on the node now."
    causes = []
    if any(_deleted(pod) for pod in left):
        causes.append("a pod being deleted stays until the node's kubelet confirms it (is the node Ready?) or its finalizers go")
    if not all(_deleted(pod) for pod in left):
        causes.append("a pod not being deleted is one that pausing its label does not remove: its DaemonSet's nodeSelector does not"
                      " use the paused nvidia.com/gpu.deploy.<component> label (a GPU Operator deployment that names its"
                      " components differently), or no DaemonSet controls it")
    return f"still on the node: {_pods_phrase(left)}. Likely cause: {'; '.join(causes)}."


def resources_wait_message(expected, node, plugin_pods=None):
    """Say what a Node advertises against the GPU resources ``expected``, and the likely cause of the difference.

    ``expected``: as ``mixed_strategy_resources`` gives it; ``node``: the Node object; ``plugin_pods``: the device
    plugin's pods on the node (``app=nvidia-device-plugin-daemonset``), or None when they were not read. Counts at 0
    are left out of both sides: kubelet keeps a resource whose devices went away, at 0.
    """
    allocatable = ((node or {}).get("status") or {}).get("allocatable") or {}
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    advertised = {name: _count(value) for name, value in allocatable.items() if _gpu_resource(name) and _count(value) > 0}
    wanted = {name: int(count) for name, count in expected.items() if int(count) > 0}
    wanted_phrase = _resources_phrase(wanted) or "no GPU resource"
    if not advertised:
        return (f"no nvidia.com/gpu or nvidia.com/mig-* resource was advertised; expected {wanted_phrase}. "
                f"{_plugin_absence(labels, plugin_pods or [])}")
    seen = f"it advertises {_resources_phrase(advertised)}; expected {wanted_phrase}."
    running = f", {_pods_phrase(plugin_pods)}," if plugin_pods else ""
    if sum(advertised.values()) == sum(wanted.values()):
        return (f"{seen} The device plugin{running} counts as many devices under other names: check its MIG strategy (mixed"
                f" is expected, nvidia.com/mig-<profile> per MIG device) and its version, which decides how a profile with"
                f" attributes such as +me is named.")
    return (f"{seen} The device plugin{running} has not registered the new layout: it reads the GPUs when its pod starts,"
            f" so a plugin not restarted around the change (one that {DEVICE_PLUGIN_LABEL} does not pause) still shows the"
            f" previous devices, and one that cannot read a GPU leaves it out; its log says which.")


def manager_wait_message(node, manager_pods=None):
    """Say what the GPU Operator's mig-manager left on a Node that gave no verdict, and the likely cause.

    ``node``: the Node object; ``manager_pods``: the mig-manager's pods on the node (``app=nvidia-mig-manager``).
    mig-manager v0.15.0 (``Reconfigure.Run``) returns without a verdict when the components' pods do not leave within
    5 minutes: the state stays ``pending`` and the components' labels stay paused (NVIDIA/mig-parted#485).
    """
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    state = labels.get(STATE_LABEL, "")
    seen = f"{STATE_LABEL} is {state!r}" if state else f"{STATE_LABEL} is not set"
    paused = sorted(name for name, value in labels.items() if name.startswith(DEPLOY_LABEL_PREFIX) and value == PAUSED)
    running = [pod for pod in manager_pods or () if _running(pod)]
    if not running:
        present = f" (there is {_pods_phrase(manager_pods)})" if manager_pods else ""
        label = labels.get(MIG_MANAGER_LABEL)
        cause = (f"No mig-manager pod (app=nvidia-mig-manager) runs on the node{present}: the GPU Operator runs it where"
                 f" {MIG_MANAGER_LABEL} is 'true' ({'here ' + repr(label) if label else 'not set here'}) and its ClusterPolicy"
                 f" enables migManager.")
    elif state == "rebooting":
        cause = ("The mig-manager rebooted the node for a MIG mode change and has not reported since: it runs again once the"
                 " node is back.")
    elif paused:
        cause = (f"The mig-manager stopped part-way and left {', '.join(paused)} at {PAUSED}: it gives up without a verdict"
                 f" when those components' pods do not leave within 5 minutes; its log names them (\"did not shutdown\").")
    else:
        cause = (f"The mig-manager, {_pods_phrase(running)}, has not finished: a change of many GPUs, or one through a GPU reset,"
                 f" can take longer than the wait; its log says where it is.")
    return f"{seen}; expected 'success' or 'failed'. {cause}"


def _component_pods(pods, namespace, apps, client_label):
    for pod in pods or ():
        metadata = pod.get("metadata") or {}
        if metadata.get("namespace") == namespace and (metadata.get("labels") or {}).get("app") in apps:
            yield pod
        elif client_label and _daemonset_pod(metadata) and client_label in ((pod.get("spec") or {}).get("nodeSelector") or {}):
            yield pod


def _plugin_absence(labels, plugin_pods):
    label = labels.get(DEVICE_PLUGIN_LABEL)
    if label not in (None, "true"):
        return (f"The device plugin does not run on the node: {DEVICE_PLUGIN_LABEL} is {label!r} there, and the GPU Operator"
                f" runs the plugin only where it is 'true'.")
    if not plugin_pods:
        return ("The device plugin does not run on the node: no pod labelled app=nvidia-device-plugin-daemonset is there (its"
                " DaemonSet is missing, or does not select or tolerate the node).")
    if not any(_running(pod) for pod in plugin_pods):
        return f"The device plugin does not run on the node: {_pods_phrase(plugin_pods)}."
    return (f"The device plugin, {_pods_phrase(plugin_pods)}, registered no device with kubelet: its log says why (NVML not"
            f" found, no GPU visible to its container, a MIG strategy it refuses).")


def _daemonset_pod(metadata):
    return any(owner.get("kind") == "DaemonSet" and owner.get("controller") for owner in metadata.get("ownerReferences") or ())


def _gpu_resource(name):
    return name == "nvidia.com/gpu" or name.startswith(("nvidia.com/gpu.", "nvidia.com/mig-"))


def _resources_phrase(resources):
    phrases = [f"{name}: {count}" for name, count in sorted(resources.items())]
    return " and ".join(phrases) if len(phrases) < 3 else ", ".join(phrases[:-1]) + " and " + phrases[-1]


def _name(pod):
    metadata = pod.get("metadata") or {}
    return f"{metadata.get('namespace', 'default')}/{metadata.get('name')}"


def _deleted(pod):
    return bool((pod.get("metadata") or {}).get("deletionTimestamp"))


def _running(pod):
    return not _deleted(pod) and (pod.get("status") or {}).get("phase") == "Running"


def _pods_phrase(pods):
    return ", ".join(f"{_name(pod)} ({_pod_state(pod)})" for pod in sorted(pods, key=_name))


def _pod_state(pod):
    """The pod's state as kubectl get pods shows it, more or less: a waiting container's reason before the phase."""
    if _deleted(pod):
        return f"being deleted since {pod['metadata']['deletionTimestamp']}"
    status = pod.get("status") or {}
    for container in status.get("containerStatuses") or ():
        reason = ((container.get("state") or {}).get("waiting") or {}).get("reason")
        if reason:
            return reason
    return status.get("phase") or "Unknown"
