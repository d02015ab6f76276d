# Copyright (c) 2026, onprem.gpu contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""A kubeadm cluster's upgrade to a new Kubernetes version: what refuses it, and the plan, node by node.

Written from the Kubernetes documentation: "Upgrading kubeadm clusters" (one minor at a time; the first control plane with
``kubeadm upgrade apply``, the other control planes then the workers with ``kubeadm upgrade node``; kubelet and kubectl
after kubeadm) and the "Version Skew Policy" (kube-apiserver instances within one minor of each other; kubelet never newer
than kube-apiserver and at most three minors older). The plan is read from what the cluster and the nodes say now, so a
run that stopped midway is continued by the next: a control plane already at the version is not applied again, a node
whose kubelet runs it and whose packages are at it is left alone. Plain Python without Ansible imports.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-[0-9A-Za-z.+~]+)?")
# kubelet may be up to three minors older than kube-apiserver (the version skew policy since Kubernetes 1.28).
KUBELET_SKEW = 3
PACKAGES = ("kubeadm", "kubelet", "kubectl")


class KubeUpgradeInputError(ValueError):
    """Input the plan cannot be made from, in one sentence."""


def parse_version(text):
    """(major, minor, patch) of ``1.36.2``, ``v1.36.2`` or a package version ``1.36.2-1.1``; None for anything else."""
    match = _VERSION.fullmatch(str(text).strip()) if isinstance(text, str) else None
    return tuple(int(part) for part in match.groups()) if match else None


def shown(version):
    return ".".join(str(part) for part in version) if version else "(unknown)"


def image_version(image):
    """The version of a control-plane image (``registry.k8s.io/kube-apiserver:v1.36.2``), None without a version tag."""
    tag = str(image or "").rsplit("/", 1)[-1]
    return parse_version(tag.split(":", 1)[1]) if ":" in tag else None


def version_problems(target, cluster_version, kubelets, first_control_plane_in_play=True):
    """One sentence per reason the cluster may not go to ``target``; [] when it may.

    ``cluster_version``: the kubernetesVersion of the kubeadm-config ConfigMap (what ``kubeadm upgrade apply`` last set);
    ``kubelets``: {node name: the kubelet version its Node reports} of every node of the cluster, in the inventory or not.
    """
    wanted = parse_version(target)
    if wanted is None or not re.fullmatch(r"v?\d+\.\d+\.\d+", str(target).strip()):
        return [f"kube_version must be a Kubernetes version such as 1.36.2 (major.minor.patch), not {str(target)!r}: nothing was changed."]
    current = parse_version(cluster_version)
    if current is None:
        return [f"the cluster's kubeadm-config ConfigMap holds no Kubernetes version ({cluster_version!r}), so its upgrade cannot be planned: "
                "nothing was changed."]
    if wanted[0] != current[0] or wanted[1] < current[1] or (wanted[1] == current[1] and wanted[2] < current[2]):
        return [f"kube_version {shown(wanted)} is older than the cluster's {shown(current)}: kubeadm upgrades, it does not downgrade; nothing was changed."]
    if wanted[1] > current[1] + 1:
        return [f"kube_version {shown(wanted)} skips a minor: the cluster runs {shown(current)} and kubeadm upgrades one minor at a time, so go to "
                f"{current[0]}.{current[1] + 1} first; nothing was changed."]
    problems = []
    newer = sorted(f"{name} ({shown(version)})" for name, version in _versions(kubelets) if version > wanted)
    if newer:
        problems.append(f"kube_version {shown(wanted)} is older than the kubelet of {', '.join(newer)}: a kubelet may not be newer than the API "
                        "server (version skew policy); nothing was changed.")
    too_old = sorted(f"{name} ({shown(version)})" for name, version in _versions(kubelets) if version[1] + KUBELET_SKEW < wanted[1])
    if too_old:
        problems.append(f"kube_version {shown(wanted)} would leave the kubelet of {', '.join(too_old)} more than {KUBELET_SKEW} minors behind the API "
                        "server, which the version skew policy forbids: upgrade those nodes first; nothing was changed.")
    if wanted != current and not first_control_plane_in_play:
        problems.append(f"the cluster's control plane runs {shown(current)}, not {shown(wanted)}: its first control plane upgrades first, so run "
                        "without a --limit that leaves it out; nothing was changed.")
    return problems


def _versions(kubelets):
    for name, text in sorted((kubelets or {}).items()):
        version = parse_version(text)
        if version is not None:
            yield name, version


def node_steps(target, cluster_version, host):
    """The steps one node needs, in order (an empty list: the node is left alone, not drained, not written to).

    ``host``: {role: first_control_plane | control_plane | worker, kubelet: the version its Node reports (None when it is
    not in the cluster), packages: {kubeadm, kubelet, kubectl: installed package version or None}, apiserver: the image
    version of its kube-apiserver manifest (control planes)}.
    """
    wanted = parse_version(target)
    role = host.get("role")
    packages = host.get("packages") or {}
    if role not in ("first_control_plane", "control_plane", "worker"):
        raise KubeUpgradeInputError(f"a node's role is first_control_plane, control_plane or worker, not {role!r}.")
    if host.get("kubelet") is None:
        raise KubeUpgradeInputError(f"{host.get('host') or 'a host'} is not a node of its cluster: join it with site.yml first; nothing was changed.")
    apply = role == "first_control_plane" and parse_version(cluster_version) != wanted
    # The snapshot comes first, before the node is drained: the state the upgrade starts from.
    steps = ["etcd snapshot"] if apply else []
    if parse_version(packages.get("kubeadm")) != wanted:
        steps.append("kubeadm package")
    if apply:
        steps.append("kubeadm upgrade apply")
    elif role == "control_plane" and image_version(host.get("apiserver")) != wanted:
        steps.append("kubeadm upgrade node")
    kubelet_behind = parse_version(packages.get("kubelet")) != wanted or parse_version(host.get("kubelet")) != wanted
    if role == "worker" and kubelet_behind:
        steps.append("kubeadm upgrade node")
    if kubelet_behind or parse_version(packages.get("kubectl")) != wanted:
        steps += ["kubelet and kubectl packages", "kubelet restart"]
    return steps


def natural_key(name):
    """``dc1-gpu2`` before ``dc1-gpu10``: the name's digit runs compared as numbers."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(name or ""))]


def upgrade_plan(target, cluster_version, hosts):
    """The nodes in the order kubeadm's procedure takes them (the first control plane, the other control planes, the
    workers, each group in natural name order), each ``{host, node, role, from, to, steps}``.

    By name, not by the play's host order: Ansible's order of a pattern through nested groups (``all`` of an inventory
    whose datacenter groups have child groups) changes from one ansible-playbook process to the next, and the plan that
    ``--check`` prints must be the order the run takes (playbooks/upgrade_kubernetes.yml runs its plays in this order)."""
    order = {"first_control_plane": 0, "control_plane": 1, "worker": 2}
    plan = []
    for host in sorted(hosts or [], key=lambda item: (order.get(item.get("role"), 3), natural_key(item.get("host")))):
        plan.append({"host": host.get("host"), "node": host.get("node") or host.get("host"), "role": host.get("role"),
                     "from": shown(parse_version(host.get("kubelet"))), "to": shown(parse_version(target)),
                     "steps": node_steps(target, cluster_version, host)})
    return plan


def _name(obj):
    return ((obj or {}).get("metadata") or {}).get("name")


def _condition_true(obj, kind):
    return any(condition.get("type") == kind and condition.get("status") == "True"
               for condition in (obj.get("status") or {}).get("conditions") or [])


def down_nodes(nodes, run_nodes=()):
    """The nodes outside the run whose Ready condition is not True (a machine that is off or waiting for repair, a kubelet
    that stopped): they run no ready DaemonSet pod, before the upgrade as after it, in name order."""
    run = set(run_nodes or ())
    return sorted(_name(node) for node in nodes or [] if _name(node) not in run and not _condition_true(node, "Ready"))


def _daemonset_key(obj):
    metadata = obj.get("metadata") or {}
    return f"{metadata.get('namespace')}/{metadata.get('name')}"


def _daemon_pods(pods):
    """{(namespace/name of the controlling DaemonSet, node name): [pods]}."""
    found = {}
    for pod in pods or []:
        metadata = pod.get("metadata") or {}
        owner = next((ref for ref in metadata.get("ownerReferences") or [] if ref.get("controller")), None)
        if owner and owner.get("kind") == "DaemonSet":
            key = (f"{metadata.get('namespace')}/{owner.get('name')}", (pod.get("spec") or {}).get("nodeName"))
            found.setdefault(key, []).append(pod)
    return found


def unready_daemonsets(daemonsets, nodes=None, run_nodes=(), pods=None):
    """``namespace/name (ready N of M)`` of each DaemonSet whose pods are not all ready on the nodes that should run them.

    A node outside the run that is not Ready (``nodes``, the cluster's Node objects) runs no ready pod and is not the
    upgrade's doing: each DaemonSet's shortfall is counted less those nodes that have no ready pod of it (so one dead node
    does not hold an upgrade back forever). ``pods`` (the cluster's pods), when given, name each DaemonSet pod on a node of
    the run that is not Ready, ``namespace/name on NODE (pod not ready)``, whatever the shortfall says."""
    daemon_pods = _daemon_pods(pods)
    down = down_nodes(nodes, run_nodes) if nodes is not None else []
    run = set(run_nodes or ())
    unready = set()
    for daemonset in daemonsets or []:
        key = _daemonset_key(daemonset)
        status = daemonset.get("status") or {}
        wanted, ready = int(status.get("desiredNumberScheduled") or 0), int(status.get("numberReady") or 0)
        excused = sum(1 for node in down if not any(_condition_true(pod, "Ready") for pod in daemon_pods.get((key, node), [])))
        if ready + excused < wanted:
            unready.add(f"{key} (ready {ready} of {wanted})")
    for (key, node), node_pods in daemon_pods.items():
        if node in run and not any(_condition_true(pod, "Ready") for pod in node_pods):
            unready.add(f"{key} on {node} (pod not ready)")
    return sorted(unready)


def needs_drain(steps):
    """Whether a node's steps take it out of service: all but kubeadm's package alone, which changes nothing that runs."""
    return any(step not in ("kubeadm package", "etcd snapshot") for step in steps or [])


def plan_lines(plan, cluster_version, target):
    """The plan as an operator reads it: one line per node, in order."""
    lines = [f"Upgrade from {shown(parse_version(cluster_version))} to {shown(parse_version(target))}, in this order:"]
    changing = [entry for entry in plan if entry["steps"]]
    for number, entry in enumerate(plan, 1):
        role = entry["role"].replace("_", " ")
        if entry["steps"]:
            before = [step for step in entry["steps"] if step == "etcd snapshot"]
            rest = [step for step in entry["steps"] if step != "etcd snapshot"]
            steps = ", ".join(before + (["drain"] + rest + ["uncordon"] if needs_drain(entry["steps"]) else rest))
            lines.append(f"{number}. {entry['host']} ({role}): kubelet {entry['from']} -> {entry['to']}: {steps}")
        else:
            lines.append(f"{number}. {entry['host']} ({role}): at {entry['to']} already, left alone")
    if not changing:
        lines.append("Nothing to do: every node is at the version.")
    return lines
